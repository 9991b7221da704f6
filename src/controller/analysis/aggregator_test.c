/*
 * aggregator_test.c - unit tests for aggregator.c: the watermark with ranks
 * reporting out of order, clean exits and crashes, window overflow, refused
 * records, exact per-step statistics, skipped steps, steps starting at any
 * number, names appearing mid-run, finish, and the memory bound.
 */
#include "aggregator.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testing.h"

#define MS 1000000LL
#define MAX_CAPTURE 64
#define MAX_W 8

/* What the sink saw of one finalized step. */
typedef struct {
    uint64_t step;
    uint32_t n_present, n_missing;
    uint32_t missing[MAX_W];
    ss_stat step_time, rss;
    uint32_t n_phases, n_syncs;
    ss_phase_stat phases[4];
    ss_stat phase_self[4];
    ss_sync_stat syncs[4];
    int present[MAX_W];
    int64_t step_ns[MAX_W], rss_bytes[MAX_W];
    int64_t phase0[MAX_W], phase1[MAX_W], sync0[MAX_W];
    int64_t self0[MAX_W], self1[MAX_W];
    int64_t begin[MAX_W], start1[MAX_W], count1[MAX_W];
    int64_t start0[MAX_W], count0[MAX_W];
    double metric2[MAX_W];
    uint32_t n_metrics;
    int metric_name0; /* the first metric's name index, -1 when none */
    uint32_t n_names;
    /* rank 0's and rank 1's vectors: count, first vector's name, n, its
     * first and last element, its labels' count and last label */
    uint32_t n_values[2];
    int v_name[2];
    uint32_t v_n[2], v_cut[2], v_labels[2];
    double v_first[2], v_last[2];
    char v_label[2][32];
} captured;

typedef struct {
    captured steps[MAX_CAPTURE];
    uint32_t n;
    uint32_t findings;
} capture;

static void on_step(void *ctx, const ss_step_view *v, const char *const *names)
{
    (void)names;
    capture *c = ctx;
    if (c->n >= MAX_CAPTURE)
        return;
    captured *s = &c->steps[c->n++];
    memset(s, 0, sizeof *s);
    s->step = v->step;
    s->n_present = v->n_present;
    s->n_missing = v->n_missing;
    for (uint32_t i = 0; i < v->n_missing && i < MAX_W; i++)
        s->missing[i] = v->missing_ranks[i];
    s->step_time = v->step_time;
    s->rss = v->rss;
    s->n_phases = v->n_phases;
    s->n_syncs = v->n_syncs;
    for (uint32_t i = 0; i < v->n_phases && i < 4; i++) {
        s->phases[i] = v->phases[i];
        s->phase_self[i] = v->phase_self[i];
    }
    for (uint32_t i = 0; i < v->n_syncs && i < 4; i++)
        s->syncs[i] = v->syncs[i];
    s->n_names = v->n_names;
    s->n_metrics = v->n_metrics;
    s->metric_name0 = v->n_metrics ? v->metrics[0] : -1;
    for (uint32_t r = 0; r < v->world_size && r < MAX_W; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        s->present[r] = rs->present;
        s->step_ns[r] = rs->step_ns;
        s->rss_bytes[r] = rs->rss_bytes;
        s->phase0[r] = v->n_names > 0 ? rs->phase_ns[0] : SS_MISSING;
        s->phase1[r] = v->n_names > 1 ? rs->phase_ns[1] : SS_MISSING;
        s->self0[r] = v->n_names > 0 ? rs->phase_self_ns[0] : SS_MISSING;
        s->self1[r] = v->n_names > 1 ? rs->phase_self_ns[1] : SS_MISSING;
        s->sync0[r] = v->n_names > 0 ? rs->sync_arrival_ns[0] : SS_MISSING;
        s->begin[r] = rs->begin_ns;
        s->start1[r] = v->n_names > 1 ? rs->phase_start_ns[1] : SS_MISSING;
        s->count1[r] = v->n_names > 1 ? rs->phase_count[1] : SS_MISSING;
        s->start0[r] = v->n_names > 0 ? rs->phase_start_ns[0] : SS_MISSING;
        s->count0[r] = v->n_names > 0 ? rs->phase_count[0] : SS_MISSING;
        s->metric2[r] = v->n_names > 2 ? rs->metric[2] : NAN;
        if (r < 2) {
            s->n_values[r] = rs->n_values;
            if (rs->n_values) {
                const ss_values_item *it = &rs->values[0];
                s->v_name[r] = it->name;
                s->v_n[r] = it->n;
                s->v_cut[r] = it->truncated;
                s->v_first[r] = it->n ? it->v[0] : NAN;
                s->v_last[r] = it->n ? it->v[it->n - 1] : NAN;
                s->v_labels[r] = it->n_labels;
                snprintf(s->v_label[r], sizeof s->v_label[r], "%s",
                         it->n_labels ? it->labels[it->n_labels - 1] : "");
            }
        }
    }
}

static void on_finding(void *ctx, const ss_finding *f)
{
    (void)f;
    ((capture *)ctx)->findings++;
}

static ss_aggregator *make(uint32_t world, uint32_t window, capture *c)
{
    memset(c, 0, sizeof *c);
    ss_aggregator_config cfg;
    ss_aggregator_config_defaults(&cfg);
    if (window)
        cfg.window_steps = window;
    ss_sink sink = {c, on_step, on_finding};
    return ss_aggregator_create(&cfg, world, 0, &sink);
}

/* A record for STEP lasting DUR_MS with no phases and no sizes. */
static ss_step_record rec(uint64_t step, int64_t dur_ms)
{
    ss_step_record s;
    memset(&s, 0, sizeof s);
    s.step = step;
    s.begin_ns = (int64_t)step * 1000 * MS;
    s.end_ns = s.begin_ns + dur_ms * MS;
    s.rss_bytes = s.device_bytes = SS_MISSING;
    return s;
}

/* A phase NAME that ran COUNT times for TOTAL_NS from FIRST_BEGIN_NS on,
 * SELF_NS of it its own (SS_MISSING: not known). */
static ss_phase_record ph(int name, uint32_t count, int64_t total_ns,
                          int64_t first_begin_ns, int64_t self_ns)
{
    return (ss_phase_record){.name = name, .count = count,
                             .total_ns = total_ns, .self_ns = self_ns,
                             .first_begin_ns = first_begin_ns};
}

static int add(ss_aggregator *a, uint32_t rank, uint64_t step)
{
    ss_step_record s = rec(step, 100);
    return ss_aggregator_add(a, rank, &s);
}

static void watermark_out_of_order(void)
{
    capture c;
    ss_aggregator *a = make(3, 0, &c);
    REQUIRE(a);
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.watermark, -1);
    CHECK_EQ_INT(add(a, 0, 0), 0);
    CHECK_EQ_INT(add(a, 1, 0), 0);
    CHECK_EQ_INT(add(a, 0, 1), 0);
    CHECK_EQ_INT(add(a, 0, 2), 0);
    CHECK_EQ_INT(c.n, 0); /* rank 2 holds the watermark */
    CHECK_EQ_INT(add(a, 2, 0), 0);
    REQUIRE(c.n == 1);
    CHECK_EQ_INT(c.steps[0].step, 0);
    CHECK_EQ_INT(c.steps[0].n_present, 3);
    CHECK_EQ_INT(c.steps[0].n_missing, 0);
    CHECK_EQ_INT(add(a, 2, 1), 0);
    CHECK_EQ_INT(add(a, 2, 2), 0);
    CHECK_EQ_INT(c.n, 1);
    CHECK_EQ_INT(add(a, 1, 2), 0); /* rank 1 skips 1: done with 1 and 2 */
    REQUIRE(c.n == 3);
    CHECK_EQ_INT(c.steps[1].step, 1);
    CHECK_EQ_INT(c.steps[1].n_present, 2);
    CHECK_EQ_INT(c.steps[1].n_missing, 1);
    CHECK_EQ_INT(c.steps[1].missing[0], 1);
    CHECK_EQ_INT(c.steps[2].step, 2);
    CHECK_EQ_INT(c.steps[2].n_present, 3);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.watermark, 2);
    CHECK_EQ_INT(st.records, 8);
    CHECK_EQ_INT(st.finalized_steps, 3);
    CHECK_EQ_INT(st.forced_steps, 0);
    CHECK_EQ_INT(st.refused, 0);
    ss_rank_state rs;
    ss_aggregator_rank_state(a, 1, &rs);
    CHECK(rs.live && !rs.crashed);
    CHECK_EQ_INT(rs.last_step, 2);
    ss_aggregator_destroy(a);
}

static void clean_exit_leaves_live_set(void)
{
    capture c;
    ss_aggregator *a = make(2, 0, &c);
    REQUIRE(a);
    add(a, 0, 0);
    add(a, 1, 0);
    add(a, 0, 1);
    add(a, 0, 2);
    CHECK_EQ_INT(c.n, 1);
    ss_aggregator_rank_left(a, 1, 0);
    REQUIRE(c.n == 3);
    /* rank 1 finished its work: absent, but not missing */
    CHECK_EQ_INT(c.steps[1].n_present, 1);
    CHECK_EQ_INT(c.steps[1].n_missing, 0);
    CHECK(!c.steps[2].present[1]);
    CHECK(c.steps[2].step_ns[1] == SS_MISSING);
    CHECK_EQ_INT(add(a, 1, 3), -1); /* not live any more */
    ss_rank_state rs;
    ss_aggregator_rank_state(a, 1, &rs);
    CHECK(!rs.live && !rs.crashed);
    CHECK_EQ_INT(rs.last_step, 0);
    /* with rank 1 gone, rank 0 alone moves the watermark */
    add(a, 0, 3);
    CHECK_EQ_INT(c.n, 4);
    ss_aggregator_destroy(a);
}

static void crash_marks_missing(void)
{
    capture c;
    ss_aggregator *a = make(3, 0, &c);
    REQUIRE(a);
    for (uint32_t r = 0; r < 3; r++)
        add(a, r, 0);
    add(a, 0, 1);
    add(a, 1, 1);
    add(a, 0, 2);
    add(a, 1, 2);
    CHECK_EQ_INT(c.n, 1);
    ss_aggregator_rank_left(a, 2, 1);
    REQUIRE(c.n == 3);
    for (int i = 1; i <= 2; i++) {
        captured *s = &c.steps[i];
        CHECK_EQ_INT(s->n_present, 2);
        CHECK_EQ_INT(s->n_missing, 1);
        CHECK_EQ_INT(s->missing[0], 2);
        CHECK(!s->present[2]);
        /* missing is never zero */
        CHECK(s->step_ns[2] == SS_MISSING);
        CHECK(s->rss_bytes[2] == SS_MISSING);
        CHECK(s->phase0[2] == SS_MISSING);
        CHECK_EQ_INT(s->step_time.n, 2);
        CHECK_EQ_INT(s->step_time.min, 100 * MS);
    }
    ss_rank_state rs;
    ss_aggregator_rank_state(a, 2, &rs);
    CHECK(!rs.live && rs.crashed);
    /* later steps keep the crashed rank missing */
    add(a, 0, 3);
    add(a, 1, 3);
    REQUIRE(c.n == 4);
    CHECK_EQ_INT(c.steps[3].n_missing, 1);
    CHECK_EQ_INT(c.steps[3].missing[0], 2);
    ss_aggregator_destroy(a);
}

static void window_overflow_forces(void)
{
    capture c;
    ss_aggregator *a = make(2, 4, &c);
    REQUIRE(a);
    add(a, 1, 0);
    for (uint64_t s = 0; s < 10; s++)
        CHECK_EQ_INT(add(a, 0, s), 0);
    /* step 0 completed normally; steps 1..5 were forced out */
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.forced_steps, 5);
    CHECK_EQ_INT(st.finalized_steps, 6);
    CHECK_EQ_INT(st.watermark, 5);
    REQUIRE(c.n == 6);
    CHECK_EQ_INT(c.steps[0].n_missing, 0);
    for (uint32_t i = 1; i < 6; i++) {
        CHECK_EQ_INT(c.steps[i].step, i);
        CHECK_EQ_INT(c.steps[i].n_missing, 1);
        CHECK_EQ_INT(c.steps[i].missing[0], 1);
    }
    /* the laggard's old steps are late now */
    CHECK_EQ_INT(add(a, 1, 3), -1);
    CHECK_EQ_INT(add(a, 1, 5), -1);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.refused, 2);
    /* ...but it can rejoin within the window */
    CHECK_EQ_INT(add(a, 1, 7), 0);
    REQUIRE(c.n == 8);
    CHECK_EQ_INT(c.steps[6].step, 6);
    CHECK_EQ_INT(c.steps[6].n_missing, 1); /* rank 1 skipped 6 */
    CHECK_EQ_INT(c.steps[7].step, 7);
    CHECK_EQ_INT(c.steps[7].n_present, 2);
    /* a jump far beyond the window forces only what is held */
    CHECK_EQ_INT(add(a, 0, 1000), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.finalized_steps, 10);
    CHECK_EQ_INT(st.watermark, 996);
    CHECK(st.bytes_in_use > 0);
    ss_aggregator_destroy(a);
}

/* The default window: a rank of a small world may run 1000 steps ahead
 * (a node whose agent stalled, a controller that read one rank first)
 * and every step still finalizes with every rank; in a large world the
 * open steps' rows keep it at the 64 steps always kept. */
static void default_window_follows_the_rows(void)
{
    capture c;
    ss_aggregator *a = make(4, 0, &c);
    REQUIRE(a);
    for (uint64_t s = 0; s < 1000; s++)
        CHECK_EQ_INT(add(a, 0, s), 0);
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.finalized_steps, 0);
    for (uint32_t r = 1; r < 4; r++)
        for (uint64_t s = 0; s < 1000; s++)
            CHECK_EQ_INT(add(a, r, s), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.finalized_steps, 1000);
    CHECK_EQ_INT(st.forced_steps, 0);
    CHECK_EQ_INT(st.refused, 0);
    CHECK_EQ_INT(c.steps[63].n_missing, 0);
    ss_aggregator_destroy(a);

    /* 65,536 ranks: a step's rows are about 2 MiB, so some 30 of them fill
     * the budget and only the 64 always kept are held */
    enum { W = 65536 };
    a = make(W, 0, &c);
    REQUIRE(a);
    for (uint64_t s = 0; s < 100; s++)
        CHECK_EQ_INT(add(a, 0, s), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.forced_steps, 100 - 64);
    CHECK_EQ_INT(st.watermark, 100 - 64 - 1);
    CHECK(st.bytes_in_use < (uint64_t)W * 50 * 70);
    ss_aggregator_destroy(a);

    /* an explicit window is kept whatever the rows cost */
    a = make(4, 16, &c);
    REQUIRE(a);
    for (uint64_t s = 0; s < 20; s++)
        CHECK_EQ_INT(add(a, 0, s), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.forced_steps, 20 - 16);
    ss_aggregator_destroy(a);
    ss_aggregator_config cfg = {.window_steps = 16};
    CHECK_EQ_INT(ss_aggregator_sure_window(&cfg), 16);
    CHECK_EQ_INT(ss_aggregator_sure_window(NULL), 64);
}

static void late_and_duplicate_refused(void)
{
    capture c;
    ss_aggregator *a = make(2, 0, &c);
    REQUIRE(a);
    CHECK_EQ_INT(add(a, 0, 5), 0);
    CHECK_EQ_INT(add(a, 0, 5), -1); /* duplicate */
    CHECK_EQ_INT(add(a, 0, 4), -1); /* not after the previous step */
    CHECK_EQ_INT(add(a, 1, 5), 0);
    CHECK_EQ_INT(c.n, 1);
    CHECK_EQ_INT(add(a, 1, 5), -1);
    CHECK_EQ_INT(add(a, 2, 6), -1); /* no such rank */
    ss_step_record bad = rec(6, 10);
    bad.n_phases = 1;
    bad.phases[0].name = 7; /* never interned */
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    bad = rec(6, 10);
    bad.end_ns = bad.begin_ns - 1;
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    /* a record the ingest stage would never build is refused too */
    int fwd = ss_aggregator_intern(a, "forward");
    bad = rec(6, 10);
    bad.n_phases = 1;
    bad.phases[0] = ph(-1, 1, 1 * MS, bad.begin_ns, SS_MISSING);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    bad.phases[0] = ph(fwd, 1, -1, bad.begin_ns, SS_MISSING);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    bad.phases[0] = ph(fwd, 1, 1 * MS, bad.begin_ns, -5);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    bad.phases[0] = ph(fwd, 1, 1 * MS, bad.begin_ns, SS_MISSING);
    bad.n_syncs = SS_MAX_STEP_ITEMS + 1;
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &bad), -1);
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.refused, 10);
    CHECK_EQ_INT(st.records, 2);
    ss_aggregator_destroy(a);
}

/* Five ranks with known values: every statistic is checked exactly. */
static void statistics_exact(void)
{
    capture c;
    ss_aggregator *a = make(5, 0, &c);
    REQUIRE(a);
    CHECK_EQ_INT(ss_aggregator_intern(a, "forward"), 0);
    CHECK_EQ_INT(ss_aggregator_intern(a, "allreduce"), 1);
    CHECK_EQ_INT(ss_aggregator_intern(a, "loss"), 2);
    CHECK_EQ_INT(ss_aggregator_intern(a, "forward"), 0);
    CHECK_EQ_INT(ss_aggregator_intern(a, ""), -1);
    uint32_t nn;
    const char *const *names = ss_aggregator_names(a, &nn);
    CHECK_EQ_INT(nn, 3);
    CHECK_STR(names[1], "allreduce");
    const int64_t dur[5] = {30, 10, 50, 20, 40};
    const int64_t fwd[5] = {7, 3, 9, 1, 5};
    const int64_t arrive[5] = {1000, 1040, 1010, 1100, 1020};
    for (uint32_t r = 0; r < 5; r++) {
        ss_step_record s = rec(0, dur[r]);
        s.n_phases = 1;
        s.phases[0].name = 0;
        s.phases[0].count = 1;
        s.phases[0].total_ns = fwd[r] * MS;
        s.phases[0].self_ns = SS_MISSING;
        s.n_syncs = 1;
        s.syncs[0].name = 1;
        s.syncs[0].arrival_ns = arrive[r] * MS;
        if (r != 3) {
            s.n_metrics = 1;
            s.metrics[0].name = 2;
            s.metrics[0].value = 0.5 * r;
        }
        if (r < 4) {
            s.rss_bytes = 1000 * (r + 1);
        }
        CHECK_EQ_INT(ss_aggregator_add(a, r, &s), 0);
    }
    REQUIRE(c.n == 1);
    captured *v = &c.steps[0];
    CHECK_EQ_INT(v->step_time.min, 10 * MS);
    CHECK_EQ_INT(v->step_time.median, 30 * MS);
    CHECK_EQ_INT(v->step_time.p90, 50 * MS);
    CHECK_EQ_INT(v->step_time.max, 50 * MS);
    CHECK_EQ_INT(v->step_time.worst_rank, 2);
    CHECK_EQ_INT(v->step_time.n, 5);
    /* RSS from ranks 0..3: 1000 2000 3000 4000 */
    CHECK_EQ_INT(v->rss.n, 4);
    CHECK_EQ_INT(v->rss.median, 2500);
    CHECK_EQ_INT(v->rss.p90, 4000);
    CHECK_EQ_INT(v->rss.worst_rank, 3);
    CHECK(v->rss_bytes[4] == SS_MISSING);
    REQUIRE(v->n_phases == 1);
    CHECK_EQ_INT(v->phases[0].name, 0);
    CHECK_EQ_INT(v->phases[0].stat.min, 1 * MS);
    CHECK_EQ_INT(v->phases[0].stat.median, 5 * MS);
    CHECK_EQ_INT(v->phases[0].stat.max, 9 * MS);
    CHECK_EQ_INT(v->phases[0].stat.worst_rank, 2);
    REQUIRE(v->n_syncs == 1);
    CHECK_EQ_INT(v->syncs[0].name, 1);
    CHECK_EQ_INT(v->syncs[0].n, 5);
    CHECK_EQ_INT(v->syncs[0].skew_ns, 100 * MS);
    CHECK_EQ_INT(v->syncs[0].late_ns, 80 * MS); /* 1100 - median 1020 */
    CHECK_EQ_INT(v->syncs[0].worst_rank, 3);
    /* name-indexed per-rank arrays */
    CHECK_EQ_INT(v->n_names, 3);
    CHECK_EQ_INT(v->phase0[2], 9 * MS);
    CHECK(v->phase1[2] == SS_MISSING); /* allreduce is a sync, not a phase */
    CHECK_EQ_INT(v->sync0[0], SS_MISSING);
    CHECK(v->metric2[4] == 2.0);
    CHECK(isnan(v->metric2[3]));
    ss_aggregator_destroy(a);
}

static void skipped_step_missing(void)
{
    capture c;
    ss_aggregator *a = make(2, 0, &c);
    REQUIRE(a);
    add(a, 0, 0);
    add(a, 0, 1);
    add(a, 0, 2);
    add(a, 1, 0);
    add(a, 1, 2);
    REQUIRE(c.n == 3);
    CHECK_EQ_INT(c.steps[1].step, 1);
    CHECK_EQ_INT(c.steps[1].n_present, 1);
    CHECK_EQ_INT(c.steps[1].n_missing, 1);
    CHECK_EQ_INT(c.steps[1].missing[0], 1);
    CHECK(c.steps[1].step_ns[1] == SS_MISSING);
    CHECK_EQ_INT(c.steps[2].n_present, 2);
    ss_aggregator_destroy(a);
}

static void steps_start_anywhere(void)
{
    capture c;
    ss_aggregator *a = make(2, 0, &c);
    REQUIRE(a);
    CHECK_EQ_INT(add(a, 0, 1005), 0);
    CHECK_EQ_INT(add(a, 1, 1003), 0); /* older, nothing finalized yet */
    REQUIRE(c.n == 1);
    CHECK_EQ_INT(c.steps[0].step, 1003);
    CHECK_EQ_INT(c.steps[0].n_missing, 1); /* rank 0 started later */
    CHECK_EQ_INT(c.steps[0].missing[0], 0);
    CHECK_EQ_INT(add(a, 1, 1005), 0);
    REQUIRE(c.n == 2); /* 1004: nobody reported it, no view */
    CHECK_EQ_INT(c.steps[1].step, 1005);
    CHECK_EQ_INT(c.steps[1].n_present, 2);
    CHECK_EQ_INT(add(a, 0, 1004), -1);
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.watermark, 1005);
    ss_aggregator_destroy(a);
}

static void names_grow_mid_run(void)
{
    capture c;
    ss_aggregator *a = make(2, 0, &c);
    REQUIRE(a);
    int fwd = ss_aggregator_intern(a, "forward");
    ss_step_record s = rec(0, 10);
    s.n_phases = 1;
    s.phases[0] = ph(fwd, 1, 4 * MS, s.begin_ns, SS_MISSING);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), 0);
    /* step 0 is open while new names arrive */
    int bwd = ss_aggregator_intern(a, "backward");
    int loss = ss_aggregator_intern(a, "loss");
    CHECK_EQ_INT(loss, 2);
    s = rec(1, 10);
    s.n_phases = 2;
    s.phases[0] = ph(fwd, 1, 5 * MS, s.begin_ns, SS_MISSING);
    s.phases[1] = ph(bwd, 2, 6 * MS, s.begin_ns + 5 * MS, SS_MISSING);
    s.n_metrics = 1;
    s.metrics[0] = (ss_metric_record){loss, 1.25};
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), 0);
    s = rec(0, 10);
    s.n_phases = 2;
    s.phases[0] = ph(bwd, 1, 2 * MS, s.begin_ns, SS_MISSING);
    s.phases[1] = ph(bwd, 1, 3 * MS, s.begin_ns + 2 * MS,
                     SS_MISSING); /* repeated: sum */
    CHECK_EQ_INT(ss_aggregator_add(a, 1, &s), 0);
    REQUIRE(c.n == 1);
    captured *v = &c.steps[0];
    CHECK_EQ_INT(v->phase0[0], 4 * MS);
    CHECK(v->phase1[0] == SS_MISSING);
    CHECK(v->phase0[1] == SS_MISSING);
    CHECK_EQ_INT(v->phase1[1], 5 * MS);
    /* Timeline detail: the step's begin, a repeated phase's earliest
     * begin (after the step's) and its runs. */
    CHECK_EQ_INT(v->begin[1], 0);
    CHECK_EQ_INT(v->start1[1], 0);
    CHECK_EQ_INT(v->count1[1], 2);
    CHECK(v->start1[0] == SS_MISSING && v->count1[0] == SS_MISSING);
    CHECK(isnan(v->metric2[0]) && isnan(v->metric2[1]));
    CHECK_EQ_INT(v->n_metrics, 0); /* loss has a column, but no value yet */
    CHECK_EQ_INT(v->n_phases, 2);
    CHECK_EQ_INT(ss_aggregator_add(a, 1, &s), -1);
    s.step = 1;
    CHECK_EQ_INT(ss_aggregator_add(a, 1, &s), 0);
    REQUIRE(c.n == 2);
    CHECK(c.steps[1].metric2[0] == 1.25);
    CHECK(isnan(c.steps[1].metric2[1]));
    CHECK_EQ_INT(c.steps[1].n_metrics, 1);
    CHECK_EQ_INT(c.steps[1].metric_name0, loss);
    CHECK_EQ_INT(c.steps[1].phase1[0], 6 * MS);
    CHECK_EQ_INT(c.steps[1].begin[0], 1000 * MS);
    CHECK_EQ_INT(c.steps[1].start1[0], 5 * MS);
    CHECK_EQ_INT(c.steps[1].count1[0], 2);
    ss_aggregator_destroy(a);
}

/* Rank R's record of a step in which backward (BWD_MS, ALLREDUCE_MS of it
 * waiting in the nested allreduce) ran; WITH_SELF: as today's recorders
 * send it, else as recorders without self time did. */
static ss_step_record nested_rec(int bwd, int ar, int64_t bwd_ms,
                                 int64_t allreduce_ms, int with_self)
{
    ss_step_record s = rec(0, 100);
    s.n_phases = 2;
    s.phases[0] = ph(bwd, 1, bwd_ms * MS, s.begin_ns,
                     with_self ? (bwd_ms - allreduce_ms) * MS : SS_MISSING);
    s.phases[1] = ph(ar, 1, allreduce_ms * MS, s.begin_ns,
                     with_self ? allreduce_ms * MS : SS_MISSING);
    return s;
}

static void self_time_statistics_and_missing(void)
{
    capture c;
    ss_aggregator *a = make(3, 0, &c);
    REQUIRE(a);
    int bwd = ss_aggregator_intern(a, "backward");
    int ar = ss_aggregator_intern(a, "allreduce");
    /* Ranks 0 and 1: 40 ms compute + 40 ms wait; rank 2 computes 72 ms
     * and waits 10; rank 1's recorder sends no self time. */
    ss_step_record s = nested_rec(bwd, ar, 80, 40, 1);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), 0);
    s = nested_rec(bwd, ar, 80, 40, 0);
    CHECK_EQ_INT(ss_aggregator_add(a, 1, &s), 0);
    s = nested_rec(bwd, ar, 82, 10, 1);
    CHECK_EQ_INT(ss_aggregator_add(a, 2, &s), 0);
    REQUIRE(c.n == 1);
    captured *v = &c.steps[0];
    REQUIRE(v->n_phases == 2);
    CHECK_EQ_INT(v->phases[0].name, bwd);
    CHECK_EQ_INT(v->phases[0].stat.n, 3);
    CHECK_EQ_INT(v->phases[0].stat.worst_rank, 2);
    /* Self time: two ranks reported it, never zero for the third. */
    CHECK_EQ_INT(v->phase_self[0].n, 2);
    CHECK_EQ_INT(v->phase_self[0].min, 40 * MS);
    CHECK_EQ_INT(v->phase_self[0].max, 72 * MS);
    CHECK_EQ_INT(v->phase_self[0].worst_rank, 2);
    CHECK_EQ_INT(v->phase_self[1].max, 40 * MS);
    CHECK_EQ_INT(v->phase_self[1].worst_rank, 0);
    CHECK_EQ_INT(v->self0[0], 40 * MS);
    CHECK(v->self0[1] == SS_MISSING);
    CHECK_EQ_INT(v->self0[2], 72 * MS);
    CHECK_EQ_INT(v->self1[2], 10 * MS);
    CHECK_EQ_INT(v->phase0[1], 80 * MS);
    ss_aggregator_destroy(a);
}

static void finish_finalizes_open_steps(void)
{
    capture c;
    ss_aggregator *a = make(3, 0, &c);
    REQUIRE(a);
    add(a, 0, 0);
    add(a, 1, 0);
    add(a, 0, 1);
    CHECK_EQ_INT(c.n, 0);
    ss_aggregator_finish(a);
    REQUIRE(c.n == 2);
    CHECK_EQ_INT(c.steps[0].n_missing, 1);
    CHECK_EQ_INT(c.steps[0].missing[0], 2);
    CHECK_EQ_INT(c.steps[1].n_missing, 2);
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.forced_steps, 0);
    CHECK_EQ_INT(st.watermark, 1);
    CHECK_EQ_INT(add(a, 2, 2), -1);
    ss_aggregator_finish(a); /* harmless */
    CHECK_EQ_INT(c.n, 2);
    ss_aggregator_destroy(a);
    ss_aggregator_destroy(NULL);
}

/* A phase's first begin may precede the step (a span measured elsewhere)
 * and a phase repeated in one record keeps its earliest begin and adds up
 * its runs. */
static void phase_begins_and_counts(void)
{
    capture c;
    ss_aggregator *a = make(1, 0, &c);
    REQUIRE(a);
    int wait = ss_aggregator_intern(a, "wait");
    int fwd = ss_aggregator_intern(a, "forward");
    ss_step_record s = rec(3, 10);
    s.n_phases = 3;
    s.phases[0] = ph(fwd, 1, 1 * MS, s.begin_ns, SS_MISSING);
    s.phases[1] = ph(wait, 3, 4 * MS, s.begin_ns + 1 * MS, SS_MISSING);
    s.phases[2] = ph(wait, 40000, 2 * MS, s.begin_ns - 2 * MS, SS_MISSING);
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), 0);
    ss_aggregator_finish(a);
    REQUIRE(c.n == 1);
    CHECK_EQ_INT(c.steps[0].begin[0], 3000 * MS);
    CHECK_EQ_INT(c.steps[0].phase0[0], 6 * MS);  /* wait: 4 + 2 ms */
    CHECK_EQ_INT(c.steps[0].start1[0], 0);       /* forward at the begin */
    CHECK_EQ_INT(c.steps[0].count1[0], 1);
    CHECK_EQ_INT(c.steps[0].start0[0], -2 * MS); /* before the step */
    CHECK_EQ_INT(c.steps[0].count0[0], 0x7fff);  /* 40003 runs, clamped */
    ss_aggregator_destroy(a);
}

/* 4096 ranks, 4 phases and a sync, with a rank a whole window behind: the
 * memory held stays within the per-rank-step bound. */
static void memory_bounded(void)
{
    enum { W = 4096, STEPS = 70 };
    capture c;
    ss_aggregator *a = make(W, 64, &c);
    REQUIRE(a);
    const char *nm[5] = {"data", "forward", "backward", "optimizer",
                         "allreduce"};
    int id[5];
    for (int i = 0; i < 5; i++)
        id[i] = ss_aggregator_intern(a, nm[i]);
    uint64_t peak = 0;
    for (uint64_t step = 0; step < STEPS; step++) {
        for (uint32_t r = 1; r < W; r++) {
            ss_step_record s = rec(step, 100);
            s.n_phases = 4;
            for (int i = 0; i < 4; i++)
                s.phases[i] = ph(id[i], 1, 20 * MS, s.begin_ns + i * 20 * MS,
                                 SS_MISSING);
            s.n_syncs = 1;
            s.syncs[0] = (ss_sync_record){id[4], s.begin_ns + 80 * MS};
            s.rss_bytes = 1u << 30;
            ss_aggregator_add(a, r, &s);
        }
        ss_aggregator_stats st;
        ss_aggregator_get_stats(a, &st);
        if (st.bytes_in_use > peak)
            peak = st.bytes_in_use;
    }
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.forced_steps, STEPS - 64);
    /* rows: 4 + 14 columns (13 in use: 3 per phase, 1 for the sync;
     * rounded up) of 8 bytes + 1 byte */
    uint64_t per_step = (uint64_t)W * ((4 + 14) * 8 + 1);
    CHECK(peak <= per_step * (64 + 4) + (uint64_t)W * 512);
    CHECK(peak >= per_step * 60);
    ss_aggregator_destroy(a);
}

/* What the full-table test sees of its one step. */
typedef struct {
    int steps;
    int phase_name, sync_name;
    int64_t phase_max;
    uint32_t n_metrics;
    int metric_name;
    double metric;
} last_index_view;

static void on_last_index_step(void *ctx, const ss_step_view *v,
                               const char *const *names)
{
    last_index_view *c = ctx;
    c->steps++;
    c->phase_name = v->n_phases ? v->phases[0].name : -1;
    c->phase_max = v->n_phases ? v->phases[0].stat.max : -1;
    c->sync_name = v->n_syncs ? v->syncs[0].name : -1;
    c->n_metrics = v->n_metrics;
    c->metric_name = v->n_metrics ? v->metrics[0] : -1;
    if (v->n_metrics && strcmp(names[v->metrics[0]], "n254") == 0)
        c->metric = v->ranks[0].metric[v->metrics[0]];
}

/* The run's table holds SS_MAX_RUN_NAMES names (as many as one process may
 * use), refuses the next, and the last index is a name like any other. */
static void full_name_table_uses_every_index(void)
{
    last_index_view c = {0};
    ss_sink sink = {&c, on_last_index_step, NULL};
    ss_aggregator *a = ss_aggregator_create(NULL, 1, 0, &sink);
    REQUIRE(a);
    CHECK_EQ_INT(SS_MAX_RUN_NAMES, 255);
    for (int i = 0; i < SS_MAX_RUN_NAMES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        CHECK_EQ_INT(ss_aggregator_intern(a, name), i);
    }
    CHECK_EQ_INT(ss_aggregator_intern(a, "one-too-many"), -1);
    CHECK_EQ_INT(ss_aggregator_intern(a, "n254"), 254); /* known: found */
    ss_step_record s = rec(0, 100);
    s.n_phases = 1;
    s.phases[0] = ph(254, 1, 40 * MS, s.begin_ns, SS_MISSING);
    s.n_syncs = 1;
    s.syncs[0] = (ss_sync_record){.name = 253, .arrival_ns = s.begin_ns};
    s.n_metrics = 1;
    s.metrics[0] = (ss_metric_record){.name = 254, .value = 2.5};
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), 0);
    s.phases[0].name = 255; /* never interned */
    s.step = 1;
    CHECK_EQ_INT(ss_aggregator_add(a, 0, &s), -1);
    ss_aggregator_finish(a);
    CHECK_EQ_INT(c.steps, 1);
    CHECK_EQ_INT(c.phase_name, 254);
    CHECK_EQ_INT(c.phase_max, 40 * MS);
    CHECK_EQ_INT(c.sync_name, 253);
    REQUIRE(c.n_metrics == 1);
    CHECK_EQ_INT(c.metric_name, 254);
    CHECK(c.metric == 2.5);
    ss_aggregator_destroy(a);
}

/* ---- host evidence through the provider hook ---- */

typedef struct {
    uint32_t calls;
    uint32_t rank[16];
    uint64_t step[16];
    ss_mono_ns begin[16], end[16];
} host_calls;

/* Knows nothing of rank 1; for the others, stopped time = rank ms plus the
 * step's number (from its begin), the rest missing. */
static int fake_host_window(void *ctx, uint32_t rank, uint64_t step,
                            ss_mono_ns begin_ns, ss_mono_ns end_ns,
                            ss_host_step *out)
{
    host_calls *hc = ctx;
    if (hc->calls < 16) {
        hc->rank[hc->calls] = rank;
        hc->step[hc->calls] = step;
        hc->begin[hc->calls] = begin_ns;
        hc->end[hc->calls] = end_ns;
    }
    hc->calls++;
    if (rank == 1)
        return -1;
    memset(out, 0xff, sizeof *out); /* SS_MISSING is -1 */
    out->stopped_ns = (int64_t)rank * MS + begin_ns / (1000 * MS);
    return 0;
}

typedef struct {
    uint32_t n;
    int has_host[4][3];
    int64_t stopped[4][3];
} host_seen;

static void on_host_step(void *ctx, const ss_step_view *v,
                         const char *const *names)
{
    (void)names;
    host_seen *hs = ctx;
    if (hs->n >= 4)
        return;
    for (uint32_t r = 0; r < 3; r++) {
        const ss_host_step *h = v->ranks[r].host;
        hs->has_host[hs->n][r] = h != NULL;
        hs->stopped[hs->n][r] = h ? h->stopped_ns : SS_MISSING;
    }
    hs->n++;
}

/* The provider is asked once per present rank with the rank's own step
 * interval; what it answers is in the view; a rank it knows nothing of,
 * and a missing rank, have no host evidence. */
static void host_provider_fills_rank_steps(void)
{
    host_calls hc = {0};
    host_seen hs = {0};
    ss_aggregator_config cfg;
    ss_aggregator_config_defaults(&cfg);
    cfg.host = (ss_host_provider){fake_host_window, &hc};
    ss_sink sink = {&hs, on_host_step, NULL};
    ss_aggregator *a = ss_aggregator_create(&cfg, 3, 0, &sink);
    REQUIRE(a);
    for (uint32_t r = 0; r < 3; r++) {
        ss_step_record s = rec(5, 10 + r);
        CHECK_EQ_INT(ss_aggregator_add(a, r, &s), 0);
    }
    REQUIRE(hs.n == 1);
    CHECK_EQ_INT(hc.calls, 3);
    CHECK_EQ_INT(hc.rank[2], 2);
    CHECK_EQ_INT(hc.step[2], 5);
    CHECK_EQ_INT(hc.begin[2], 5000 * MS);
    CHECK_EQ_INT(hc.end[2], 5012 * MS);
    CHECK(hs.has_host[0][0] && !hs.has_host[0][1] && hs.has_host[0][2]);
    CHECK_EQ_INT(hs.stopped[0][0], 5);
    CHECK_EQ_INT(hs.stopped[0][2], 2 * MS + 5);
    /* step 6: rank 2 crashes before reporting it */
    for (uint32_t r = 0; r < 2; r++)
        CHECK_EQ_INT(add(a, r, 6), 0);
    ss_aggregator_rank_left(a, 2, 1);
    REQUIRE(hs.n == 2);
    CHECK_EQ_INT(hc.calls, 5);
    CHECK(hs.has_host[1][0] && !hs.has_host[1][2]);
    CHECK_EQ_INT(hs.stopped[1][0], 6);
    ss_aggregator_destroy(a);
}

/* Without a provider (the default) no rank step has host evidence. */
static void no_provider_no_host(void)
{
    host_seen hs = {0};
    ss_sink sink = {&hs, on_host_step, NULL};
    ss_aggregator *a = ss_aggregator_create(NULL, 3, 0, &sink);
    REQUIRE(a);
    for (uint32_t r = 0; r < 3; r++)
        CHECK_EQ_INT(add(a, r, 1), 0);
    REQUIRE(hs.n == 1);
    CHECK(!hs.has_host[0][0] && !hs.has_host[0][1] && !hs.has_host[0][2]);
    ss_aggregator_destroy(a);
}

/* ---- clock error bounds ---- */

static void keep_message(void *ctx, const ss_finding *f)
{
    if (strcmp(f->kind, "straggler") == 0)
        snprintf(ctx, sizeof ((ss_finding *)0)->message, "%s", f->message);
}

/* 4 ranks, 100 steps; rank 2 reaches "allreduce" 3 ms after the others.
 * With SET, rank 2's clock bound is set to 0.3 ms midway (plus refused
 * calls).  Returns the straggler finding's final message in MSG. */
static void clock_bound_run(int set, char *msg)
{
    msg[0] = '\0';
    ss_aggregator_config cfg;
    ss_aggregator_config_defaults(&cfg);
    ss_sink sink = {msg, NULL, keep_message};
    ss_aggregator *a = ss_aggregator_create(&cfg, 4, 0, &sink);
    REQUIRE(a);
    CHECK_EQ_INT(ss_aggregator_intern(a, "allreduce"), 0);
    for (uint64_t step = 0; step < 100; step++) {
        if (set && step == 50) {
            ss_aggregator_set_clock_bound(a, 2, 300000);
            ss_aggregator_set_clock_bound(a, 4, 900000);  /* no such rank */
            ss_aggregator_set_clock_bound(a, 1, -900000); /* negative */
        }
        for (uint32_t r = 0; r < 4; r++) {
            ss_step_record s = rec(step, 25);
            s.n_syncs = 1;
            s.syncs[0].name = 0;
            s.syncs[0].arrival_ns = s.begin_ns + (20 + (r == 2 ? 3 : 0)) * MS +
                                    (int64_t)((step * 7 + r * 13) % 50) * 1000;
            CHECK_EQ_INT(ss_aggregator_add(a, r, &s), 0);
        }
    }
    ss_aggregator_finish(a);
    ss_aggregator_destroy(a);
}

/* The bound set through the aggregator reaches the straggler finding's
 * message; without it the message says nothing of clocks; out-of-range
 * ranks and negative bounds are ignored. */
static void clock_bound_reaches_findings(void)
{
    char plain[512], bounded[512];
    clock_bound_run(0, plain);
    clock_bound_run(1, bounded);
    CHECK(strncmp(plain, "rank 2 is a persistent straggler", 32) == 0);
    CHECK(strstr(plain, "clocks") == NULL);
    CHECK(strncmp(bounded, "rank 2 is a persistent straggler", 32) == 0);
    CHECK(strstr(bounded, "after the median rank (clocks aligned \u00b1 "
                          "0.3 ms); "));
}

/* Vectors reach the view of their step with the rank's labels, NaN and
 * infinities kept; over the budget they are refused and counted, the
 * record kept; their memory is given back when the step is finalized. */
static void vectors_reach_the_view_within_the_budget(void)
{
    capture c;
    memset(&c, 0, sizeof c);
    ss_aggregator_config cfg;
    ss_aggregator_config_defaults(&cfg);
    cfg.values_budget_bytes = 4096;
    ss_sink sink = {&c, on_step, on_finding};
    ss_aggregator *a = ss_aggregator_create(&cfg, 2, 0, &sink);
    REQUIRE(a);
    int norms = ss_aggregator_intern(a, "norms");
    double v[3] = {NAN, 2, INFINITY};
    ss_values_item it = {.name = norms, .n = 3, .truncated = 1, .v = v};
    const char *labels[2] = {"l0", "l1"};
    CHECK_EQ_INT(ss_aggregator_set_labels(a, 1, norms, labels, 2), 0);
    CHECK_EQ_INT(ss_aggregator_set_labels(a, 1, 99, labels, 2), -1);
    ss_step_record s = rec(1, 100);
    CHECK_EQ_INT(ss_aggregator_add_values(a, 0, &s, &it, 1), 0);
    v[0] = 7; /* copied: the caller's buffer may change */
    CHECK_EQ_INT(ss_aggregator_add_values(a, 1, &s, &it, 1), 0);
    REQUIRE(c.n == 1);
    captured *k = &c.steps[0];
    CHECK_EQ_INT(k->n_values[0], 1);
    CHECK_EQ_INT(k->v_name[0], norms);
    CHECK_EQ_INT(k->v_n[0], 3);
    CHECK_EQ_INT(k->v_cut[0], 1);
    CHECK(isnan(k->v_first[0]) && isinf(k->v_last[0]));
    CHECK_EQ_INT(k->v_labels[0], 0);
    CHECK(k->v_first[1] == 7);
    CHECK_EQ_INT(k->v_labels[1], 2);
    CHECK_STR(k->v_label[1], "l1");
    ss_aggregator_stats st;
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.vectors, 2);
    CHECK_EQ_INT(st.values_bytes, 0); /* given back at finalization */
    CHECK_EQ_INT(st.labels_refused, 1);

    /* over the budget: the vectors go, the record stays */
    static double big[1024];
    ss_values_item bigit = {.name = norms, .n = 1024, .v = big};
    s = rec(2, 100);
    CHECK_EQ_INT(ss_aggregator_add_values(a, 0, &s, &bigit, 1), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.vectors_refused, 1);
    /* a name repeated in one record, or unknown, is refused */
    ss_values_item two[2] = {it, it};
    two[1].name = 200;
    CHECK_EQ_INT(ss_aggregator_add_values(a, 1, &s, two, 2), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.vectors_refused, 2);
    REQUIRE(c.n == 2);
    CHECK_EQ_INT(c.steps[1].n_values[0], 0);
    CHECK_EQ_INT(c.steps[1].n_values[1], 1);
    /* a late record's vectors are counted as refused */
    s = rec(1, 100);
    CHECK_EQ_INT(ss_aggregator_add_values(a, 1, &s, &it, 1), -1);
    ss_aggregator_get_stats(a, &st);
    CHECK_EQ_INT(st.vectors_refused, 3);
    /* the window holds vectors of open steps until they are finalized */
    s = rec(3, 100);
    CHECK_EQ_INT(ss_aggregator_add_values(a, 0, &s, &it, 1), 0);
    ss_aggregator_get_stats(a, &st);
    CHECK(st.values_bytes > 0);
    ss_aggregator_destroy(a); /* frees the open step's vectors */
}

TEST_LIST(TEST(clock_bound_reaches_findings),
          TEST(vectors_reach_the_view_within_the_budget),
          TEST(host_provider_fills_rank_steps), TEST(no_provider_no_host),
          TEST(watermark_out_of_order), TEST(clean_exit_leaves_live_set),
          TEST(crash_marks_missing), TEST(window_overflow_forces),
          TEST(default_window_follows_the_rows),
          TEST(late_and_duplicate_refused), TEST(statistics_exact),
          TEST(skipped_step_missing), TEST(steps_start_anywhere),
          TEST(names_grow_mid_run), TEST(self_time_statistics_and_missing),
          TEST(finish_finalizes_open_steps),
          TEST(phase_begins_and_counts), TEST(memory_bounded),
          TEST(full_name_table_uses_every_index))
