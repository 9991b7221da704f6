/*
 * node_partial_test.c - unit tests for node_partial.c: two nodes' partials
 * merged equal one fold of every rank (counts, sums, extremes, top-k
 * lists, sketch bins, phases by name), the phase cap counted, the clock
 * shift, and the codec: a round trip, and truncated, trailing or
 * inconsistent payloads refused with a reason.
 */
#include "node_partial.h"

#include <stdio.h>
#include <string.h>

#include "testing.h"

static const char *const NAMES[] = {"forward", "backward", "optimizer"};

/* Rank R's record: step time 100 ms + R ms, backward 50 ms + 3 R ms. */
static void add(ss_node_partial *p, uint32_t r)
{
    int64_t durs[3] = {30000000, 50000000 + 3000000 * (int64_t)r, 1000000};
    int64_t begin = 1000000000 + 100000 * (int64_t)r;
    ss_np_add_rank(p, r, begin, begin + 100000000 + 1000000 * (int64_t)r, 3,
                   NAMES, durs);
}

static int same_stat(const ss_np_stat *a, const ss_np_stat *b)
{
    if (a->count != b->count || a->sum_ns != b->sum_ns ||
        a->min_ns != b->min_ns || a->max_ns != b->max_ns ||
        a->n_slow != b->n_slow || a->sketch.n_bins != b->sketch.n_bins ||
        a->sketch.zero != b->sketch.zero)
        return 0;
    for (uint32_t i = 0; i < a->n_slow; i++)
        if (a->slow[i].rank != b->slow[i].rank ||
            a->slow[i].value != b->slow[i].value)
            return 0;
    for (uint32_t i = 0; i < a->sketch.n_bins; i++)
        if (a->sketch.bins[i].index != b->sketch.bins[i].index ||
            a->sketch.bins[i].count != b->sketch.bins[i].count)
            return 0;
    return 1;
}

static int same(const ss_node_partial *a, const ss_node_partial *b)
{
    if (a->step != b->step || a->ranks_expected != b->ranks_expected ||
        a->ranks_present != b->ranks_present || a->dropped != b->dropped ||
        a->n_latest != b->n_latest || a->n_phases != b->n_phases ||
        !same_stat(&a->step_time, &b->step_time))
        return 0;
    for (uint32_t i = 0; i < a->n_latest; i++)
        if (a->latest[i].rank != b->latest[i].rank ||
            a->latest[i].value != b->latest[i].value)
            return 0;
    for (uint32_t i = 0; i < a->n_phases; i++) {
        const ss_np_phase *ph = ss_np_find(b, a->phases[i].name);
        if (!ph || !same_stat(&a->phases[i].stat, &ph->stat))
            return 0;
    }
    return 1;
}

static ss_node_partial node0, node1, all, copy;

static void merge_equals_one_fold(void)
{
    ss_np_init(&node0, 7, 8);
    ss_np_init(&node1, 7, 8);
    ss_np_init(&all, 7, 16);
    for (uint32_t r = 0; r < 16; r++) {
        if (r == 13)
            continue; /* missing */
        add(r < 8 ? &node0 : &node1, r);
        add(&all, r);
    }
    CHECK_EQ_INT(ss_np_merge(&node0, &node1), 0);
    CHECK(same(&node0, &all));
    CHECK_EQ_INT(node0.ranks_present, 15);
    CHECK_EQ_INT(node0.step_time.slow[0].rank, 15);
    CHECK_EQ_INT(node0.step_time.slow[1].rank, 14);
    CHECK_EQ_INT(node0.step_time.slow[2].rank, 12);
    CHECK_EQ_INT(node0.latest[0].rank, 15);
    const ss_np_phase *bw = ss_np_find(&node0, "backward");
    REQUIRE(bw);
    CHECK_EQ_INT(bw->stat.max_ns, 50000000 + 3000000 * 15);
    CHECK_EQ_INT(bw->stat.min_ns, 50000000);
    CHECK_EQ_INT(bw->stat.count, 15);
    ss_np_init(&copy, 8, 1);
    CHECK_EQ_INT(ss_np_merge(&node0, &copy), -1); /* another step */
}

static void phase_cap_counts_drops(void)
{
    char names[SS_NP_MAX_PHASES + 3][8];
    const char *ptr[SS_NP_MAX_PHASES + 3];
    int64_t durs[SS_NP_MAX_PHASES + 3];
    for (int i = 0; i < SS_NP_MAX_PHASES + 3; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        ptr[i] = names[i];
        durs[i] = 1000 + i;
    }
    ss_np_init(&copy, 1, 1);
    ss_np_add_rank(&copy, 0, 0, 5000, SS_NP_MAX_PHASES + 3, ptr, durs);
    CHECK_EQ_INT(copy.n_phases, SS_NP_MAX_PHASES);
    CHECK_EQ_INT(copy.dropped, 3);
    /* a repeated name adds to its first occurrence */
    const char *rep[] = {"a", "b", "a"};
    int64_t d[] = {10, 20, 5};
    ss_np_init(&copy, 1, 1);
    ss_np_add_rank(&copy, 0, 0, 100, 3, rep, d);
    CHECK_EQ_INT(copy.n_phases, 2);
    CHECK_EQ_INT(ss_np_find(&copy, "a")->stat.sum_ns, 15);
}

static void shift_moves_latest(void)
{
    ss_np_init(&copy, 1, 2);
    add(&copy, 0);
    int64_t was = copy.latest[0].value;
    ss_np_shift(&copy, -500);
    CHECK_EQ_INT(copy.latest[0].value, was - 500);
    ss_np_shift(&copy, INT64_MAX);
    CHECK(copy.latest[0].value > was);
}

static void codec_round_trip_and_refusals(void)
{
    static uint8_t buf[SS_NP_ENCODED_MAX];
    ss_np_init(&all, 42, 64);
    for (uint32_t r = 0; r < 64; r++)
        add(&all, r);
    size_t n = ss_np_encode(&all, buf, sizeof buf);
    REQUIRE(n > 0);
    char err[128];
    CHECK_EQ_INT(ss_np_decode(buf, n, &copy, err, sizeof err), 0);
    CHECK(same(&all, &copy));
    CHECK_EQ_INT(ss_np_encode(&all, buf, n - 1), 0); /* too small */
    n = ss_np_encode(&all, buf, sizeof buf);
    for (size_t cut = 0; cut < n; cut += 7)
        CHECK_EQ_INT(ss_np_decode(buf, cut, &copy, err, sizeof err), -1);
    CHECK_EQ_INT(ss_np_decode(buf, n - 1, &copy, err, sizeof err), -1);
    CHECK(strstr(err, "truncated") != NULL);
    buf[n] = 0;
    CHECK_EQ_INT(ss_np_decode(buf, n + 1, &copy, err, sizeof err), -1);
    CHECK(strstr(err, "trailing") != NULL);
    /* more present than expected */
    buf[8] = 1;
    buf[9] = buf[10] = buf[11] = 0;
    CHECK_EQ_INT(ss_np_decode(buf, n, &copy, err, sizeof err), -1);
    CHECK(strstr(err, "more ranks present") != NULL);
    buf[8] = 64;
    /* a step-time count that disagrees with its sketch */
    buf[24] ^= 1;
    CHECK_EQ_INT(ss_np_decode(buf, n, &copy, err, sizeof err), -1);
    CHECK(strstr(err, "sketch's count") != NULL);
}

TEST_LIST(TEST(merge_equals_one_fold), TEST(phase_cap_counts_drops),
          TEST(shift_moves_latest), TEST(codec_round_trip_and_refusals))
