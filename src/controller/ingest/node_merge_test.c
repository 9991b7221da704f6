/*
 * node_merge_test.c - unit tests for node_merge.c: a step is final once
 * every rank is accounted for (agents' partials and node 0's records),
 * its aggregate the same as one fold of every rank; a full ring forces
 * its oldest step out incomplete; late partials are counted; the
 * latency sketch reads the time from the latest end to the merge.
 */
#include "node_merge.h"

#include "testing.h"

static ss_node_partial last;
static int finals, completes;

static void on_final(void *ctx, const ss_node_partial *p, int complete)
{
    (void)ctx;
    last = *p;
    finals++;
    completes += complete;
}

static const char *const NAMES[] = {"forward"};

static void partial_of(ss_node_partial *p, uint64_t step, uint32_t base,
                       uint32_t n)
{
    ss_np_init(p, step, n);
    for (uint32_t r = base; r < base + n; r++) {
        int64_t d = 1000 * (int64_t)r;
        ss_np_add_rank(p, r, 0, 1000000 + d, 1, NAMES, &d);
    }
}

static ss_node_partial a, b, all;

static void merged_when_every_rank_is_in(void)
{
    finals = completes = 0;
    ss_node_merge *m = ss_node_merge_new(12, on_final, NULL);
    REQUIRE(m);
    partial_of(&a, 5, 4, 4);
    partial_of(&b, 5, 8, 4);
    ss_node_merge_partial(m, &b, 0);
    ss_node_merge_partial(m, &a, 0);
    CHECK_EQ_INT(finals, 0);
    for (uint32_t r = 0; r < 4; r++) {
        int64_t d = 1000 * (int64_t)r;
        ss_node_merge_rank(m, 5, r, 0, 1000000 + d, 1, NAMES, &d, 3000000);
    }
    REQUIRE(finals == 1);
    CHECK_EQ_INT(completes, 1);
    partial_of(&all, 5, 0, 12);
    CHECK_EQ_INT(last.ranks_present, 12);
    CHECK_EQ_INT(last.ranks_expected, 12);
    CHECK_EQ_INT(last.step_time.max_ns, all.step_time.max_ns);
    CHECK_EQ_INT(last.step_time.min_ns, all.step_time.min_ns);
    CHECK_EQ_INT(last.step_time.sum_ns, all.step_time.sum_ns);
    CHECK_EQ_INT(last.step_time.slow[0].rank, 11);
    CHECK_EQ_INT(ss_np_find(&last, "forward")->stat.count, 12);
    const ss_node_merge_stats *st = ss_node_merge_get_stats(m);
    CHECK_EQ_INT(st->partials, 2);
    CHECK_EQ_INT(st->local_records, 4);
    /* latest end 1,011,000 ns; merged at 3,000,000 */
    double lat = ss_dds_quantile(&st->latency_ns, 0.5);
    CHECK(lat > 0.99 * 1989000 && lat < 1.01 * 1989000);
    /* a partial of a step already final is late */
    ss_node_merge_partial(m, &a, 0);
    CHECK_EQ_INT(st->late, 1);
    ss_node_merge_free(m);
}

static void full_ring_forces_the_oldest(void)
{
    finals = completes = 0;
    ss_node_merge *m = ss_node_merge_new(8, on_final, NULL);
    REQUIRE(m);
    for (uint64_t s = 0; s < SS_NODE_MERGE_SLOTS + 3; s++) {
        partial_of(&a, s, 0, 4); /* node 1 never reports */
        ss_node_merge_partial(m, &a, 0);
    }
    CHECK_EQ_INT(finals, 3);
    CHECK_EQ_INT(completes, 0);
    CHECK_EQ_INT(last.step, 2);
    ss_node_merge_flush(m, 0);
    CHECK_EQ_INT(finals, SS_NODE_MERGE_SLOTS + 3);
    CHECK_EQ_INT(ss_node_merge_get_stats(m)->steps_incomplete,
                 SS_NODE_MERGE_SLOTS + 3);
    ss_node_merge_free(m);
}

TEST_LIST(TEST(merged_when_every_rank_is_in),
          TEST(full_ring_forces_the_oldest))
