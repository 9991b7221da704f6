/*
 * agent_fold_test.c - unit tests for agent_fold.c: a step's partial goes
 * out once every running rank reported it, a step a rank skipped once a
 * later one is complete, the ring's oldest when it is full, the waiting
 * ones past the age limit; a rank that exits is not waited for; a late
 * record is counted in the next partial's drops.
 */
#include "agent_fold.h"

#include <string.h>

#include "testing.h"

static ss_node_partial got[64];
static int n_got;

static void emit(void *ctx, const ss_node_partial *p)
{
    (void)ctx;
    if (n_got < 64)
        got[n_got++] = *p;
}

static const char *names[WIRE_MAX_NAME_ID + 1];

static void add(ss_agent_fold *f, uint32_t rank, uint64_t step, uint64_t now)
{
    wire_step s;
    memset(&s, 0, sizeof s);
    s.step = step;
    s.begin_ns = (int64_t)step * 1000000000;
    s.end_ns = s.begin_ns + 100000000 + 1000000 * (int64_t)rank;
    s.n_phases = 2;
    s.phases[0] = (wire_phase){.name_id = 1, .count = 1, .total_ns = 7};
    s.phases[1] = (wire_phase){.name_id = 9, .count = 1, .total_ns = 5};
    ss_agent_fold_add(f, rank, &s, names, now);
}

static void complete_steps_go_out(void)
{
    names[1] = "forward"; /* 9 undeclared: dropped */
    n_got = 0;
    ss_agent_fold *f = ss_agent_fold_new(8, 4, emit, NULL);
    REQUIRE(f);
    for (uint32_t r = 8; r < 11; r++)
        add(f, r, 0, 0);
    CHECK_EQ_INT(n_got, 0);
    add(f, 11, 0, 0);
    REQUIRE(n_got == 1);
    CHECK_EQ_INT(got[0].step, 0);
    CHECK_EQ_INT(got[0].ranks_present, 4);
    CHECK_EQ_INT(got[0].ranks_expected, 4);
    CHECK_EQ_INT(got[0].dropped, 4);
    CHECK_EQ_INT(got[0].step_time.slow[0].rank, 11);
    CHECK_EQ_INT(ss_np_find(&got[0], "forward")->stat.count, 4);
    /* rank 9 skips step 1; step 2 complete: 1 goes out first */
    add(f, 8, 1, 0);
    add(f, 10, 1, 0);
    add(f, 11, 1, 0);
    for (uint32_t r = 8; r < 12; r++)
        add(f, r, 2, 0);
    REQUIRE(n_got == 3);
    CHECK_EQ_INT(got[1].step, 1);
    CHECK_EQ_INT(got[1].ranks_present, 3);
    CHECK_EQ_INT(got[2].step, 2);
    /* a record for step 1 now is late */
    add(f, 9, 1, 0);
    for (uint32_t r = 8; r < 12; r++)
        add(f, r, 3, 0);
    REQUIRE(n_got == 4);
    CHECK_EQ_INT(got[3].dropped, 4 + 1);
    ss_agent_fold_stats st;
    ss_agent_fold_get_stats(f, &st);
    CHECK_EQ_INT(st.partials, 4);
    CHECK_EQ_INT(st.incomplete, 1);
    CHECK_EQ_INT(st.late_records, 1);
    ss_agent_fold_free(f);
}

static void exits_ring_and_age(void)
{
    n_got = 0;
    ss_agent_fold *f = ss_agent_fold_new(0, 2, emit, NULL);
    REQUIRE(f);
    add(f, 0, 0, 0);
    ss_agent_fold_rank_gone(f, 1); /* rank 1 exits: step 0 is complete */
    REQUIRE(n_got == 1);
    CHECK_EQ_INT(got[0].ranks_present, 1);
    ss_agent_fold_reset(f);
    /* rank 1 hangs: rank 0 runs ahead; the ring gives up its oldest */
    for (uint64_t s = 0; s < SS_AGENT_FOLD_SLOTS + 2; s++)
        add(f, 0, s, 10 * s);
    CHECK_EQ_INT(n_got, 1 + 2);
    CHECK_EQ_INT(got[1].step, 0);
    CHECK_EQ_INT(got[2].step, 1);
    ss_agent_fold_expire(f, 10 * 5, 30); /* steps first seen at <= 20 ms */
    CHECK_EQ_INT(n_got, 3 + 1);
    CHECK_EQ_INT(got[3].step, 2);
    ss_agent_fold_flush(f);
    CHECK_EQ_INT(n_got, 4 + SS_AGENT_FOLD_SLOTS - 1);
    CHECK_EQ_INT(got[n_got - 1].step, SS_AGENT_FOLD_SLOTS + 1);
    ss_agent_fold_free(f);
}

TEST_LIST(TEST(complete_steps_go_out), TEST(exits_ring_and_age))
