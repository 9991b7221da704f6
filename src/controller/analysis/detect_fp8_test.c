/*
 * detect_fp8_test.c - unit tests for the float8 detector (detect_fp8.c) on
 * synthetic step views carrying the fp8.* vectors: a saturating cast, an
 * underflowing one and an invalid scale are each named with their layer,
 * tensor, rank and first step; fractions under the thresholds, too few
 * steps over them, or steps over them too far apart make nothing; the
 * fractions of a rank-step whose scale is invalid are not judged; one
 * finding covers an invalid scale and the tensors and ranks it spread to;
 * a tensor is known by its label whatever its index on each rank; a clean
 * job with noisy small fractions makes nothing.  The runs are the rows of
 * one table (scenarios[]), run by one loop that names the failing row.
 */
#include "detectors.h"

#include <math.h>
#include <stdlib.h>

#include "finding_want.h"
#include "findings_capture.h"
#include "stats.h"
#include "testing.h"

#define W 4
#define NT 4 /* tensors per rank */
#define NN 6

/* Name indexes: the vectors behind another name, as in a real run. */
enum { LOSS, AMAX, SCALE, SAT, UNDER, FMT };
static const char *const names[NN] = {"loss", "fp8.amax", "fp8.scale",
                                      "fp8.saturated", "fp8.underflow",
                                      "fp8.format"};

static const char *const labels0[NT] = {"fc1.input", "fc1.weight",
                                        "fc2.input", "fc2.grad"};
static const double formats0[NT] = {1, 1, 1, 2};

/* One rank's float8 vectors in one step. */
typedef struct {
    double amax[NT], scale[NT], sat[NT], under[NT], fmt[NT];
    const char *const *labels;
} rank_fp8;

typedef struct {
    rank_fp8 fp8[W];
    int64_t phase[W][NN];
    double metric[W][NN];
    ss_values_item items[W][5];
    ss_rank_step ranks[W];
    ss_step_view v;
} builder;

/* A step in which every tensor of every rank is healthy: amax 2, the
 * dynamic scale of its format, nothing clipped or flushed. */
static void begin(builder *b, uint64_t step)
{
    memset(b, 0, sizeof *b);
    for (uint32_t r = 0; r < W; r++) {
        rank_fp8 *f = &b->fp8[r];
        f->labels = labels0;
        for (int t = 0; t < NT; t++) {
            f->fmt[t] = formats0[t];
            f->amax[t] = 2;
            f->scale[t] = (formats0[t] == 1 ? 448.0 : 57344.0) / 2;
        }
    }
    b->v.step = step;
}

static void end(builder *b)
{
    ss_step_view *v = &b->v;
    v->world_size = W;
    v->n_names = NN;
    v->n_present = W;
    v->ranks = b->ranks;
    int64_t times[W];
    int32_t who[W];
    for (uint32_t r = 0; r < W; r++) {
        ss_rank_step *rs = &b->ranks[r];
        for (int i = 0; i < NN; i++) {
            b->phase[r][i] = SS_MISSING;
            b->metric[r][i] = NAN;
        }
        rs->present = 1;
        rs->step_ns = times[r] = 10000000;
        who[r] = (int32_t)r;
        rs->rss_bytes = rs->device_bytes = rs->begin_ns = SS_MISSING;
        rs->phase_ns = rs->sync_arrival_ns = b->phase[r];
        rs->metric = b->metric[r];
        rank_fp8 *f = &b->fp8[r];
        const double *vec[5] = {f->amax, f->scale, f->sat, f->under, f->fmt};
        for (int k = 0; k < 5; k++) {
            ss_values_item *it = &b->items[r][k];
            it->name = AMAX + k;
            it->n = NT;
            it->v = vec[k];
            it->n_labels = NT;
            it->labels = f->labels;
        }
        rs->n_values = 5;
        rs->values = b->items[r];
    }
    ss_stat_compute(&v->step_time, times, who, W);
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
}

/* Feeds steps FIRST..LAST, SET changing each step's healthy values. */
static void run(ss_detectors *d, uint64_t first, uint64_t last,
                void (*set)(builder *, uint64_t))
{
    static builder b;
    for (uint64_t s = first; s <= last; s++) {
        begin(&b, s);
        if (set)
            set(&b, s);
        end(&b);
        ss_detectors_step(d, &b.v, names);
    }
}

static void sat_rank2_fc2_input(builder *b, uint64_t s)
{
    if (s >= 10 && s <= 20) {
        b->fp8[2].sat[2] = s == 15 ? 0.03 : 0.016;
        b->fp8[2].amax[2] = 16;
    }
}

static void under_rank0_fc2_grad(builder *b, uint64_t s)
{
    if (s >= 8) {
        b->fp8[0].under[3] = 0.9;
        b->fp8[0].amax[3] = 3e-12;
    }
}

/* Under the thresholds, too few steps, or too far apart: nothing. */
static void below(builder *b, uint64_t s)
{
    b->fp8[1].sat[0] = 0.0009;  /* under 0.1 % every step */
    b->fp8[3].under[3] = 0.009; /* under 1 % every step */
    if (s == 10 || s == 12)     /* over, but twice only */
        b->fp8[2].sat[1] = 0.5;
    if (s == 5 || s == 60 || s == 120) /* three times, 55 steps apart */
        b->fp8[0].under[2] = 0.5;
}

/* Rank 1's fc2 input is all zeros in step 12: an infinite scale, and its
 * NaN reaches fc2's gradient there and rank 3's in step 13. */
static void zero_input(builder *b, uint64_t s)
{
    if (s == 12) {
        b->fp8[1].amax[2] = 0;
        b->fp8[1].scale[2] = INFINITY;
        b->fp8[1].sat[2] = 1; /* meaningless with that scale */
        b->fp8[1].amax[3] = NAN;
        b->fp8[1].scale[3] = NAN;
    }
    if (s == 13) {
        b->fp8[3].amax[3] = NAN;
        b->fp8[3].scale[3] = NAN;
        b->fp8[3].under[3] = 1;
    }
}

/* Two invalid scales fp8.window steps apart are two episodes; a NaN amax
 * is worded as such. */
static void nan_twice(builder *b, uint64_t s)
{
    if (s == 10 || s == 80) {
        b->fp8[2].amax[0] = NAN;
        b->fp8[2].scale[0] = NAN;
    }
}

/* Rank 1 lists the tensors in another order and leaves one out (format
 * 0): the tensor is its label. */
static const char *const labels1[NT] = {"fc2.grad", "fc2.input",
                                        "fc1.weight", "fc1.input"};

static void reordered(builder *b, uint64_t s)
{
    rank_fp8 *f = &b->fp8[1];
    f->labels = labels1;
    for (int t = 0; t < NT; t++)
        f->fmt[t] = formats0[NT - 1 - t];
    f->fmt[1] = 0; /* fc2.input not recorded by rank 1 */
    f->sat[1] = 0.5;
    if (s >= 10)
        f->sat[2] = 0.25; /* fc1.weight */
}

/* Every rank saturating: all ranks named. */
static void all_saturate(builder *b, uint64_t s)
{
    if (s >= 5)
        for (uint32_t r = 0; r < W; r++)
            b->fp8[r].sat[0] = 0.01;
}

static uint64_t rng = 88172645463325252u;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void noisy(builder *b, uint64_t s)
{
    for (uint32_t r = 0; r < W; r++)
        for (int t = 0; t < NT; t++) {
            b->fp8[r].sat[t] = uniform() < 0.2 ? uniform() * 0.001 : 0;
            b->fp8[r].under[t] = uniform() * 0.01;
            b->fp8[r].amax[t] = 1 + uniform();
        }
}

/* ---- the table ---- */

typedef struct {
    const char *name;
    void (*set)(builder *, uint64_t);
    uint64_t last;  /* steps 0..last */
    int finish;     /* the run ends (ss_detectors_finish) */
    want ids;       /* findings */
    finding_want findings[2];
} scenario;

static const scenario scenarios[] = {
    {.name = "a saturating cast named",
     .set = sat_rank2_fc2_input,
     .last = 40,
     .finish = 1,
     .ids = WANT(1),
     .findings = {{.kind = "fp8_saturation",
                   .severity = WANT(SS_WARNING),
                   .n_ranks = WANT(1),
                   .rank = WANT(2),
                   .first_step = WANT(10),
                   .last_step = WANT(20),
                   .has = {{"layer", "fc2"},
                           {"tensor", "input"},
                           {"format", "e4m3"}},
                   .num = {{"steps_over", EV_EQUALS, 11, 0},
                           {"worst_pct", EV_EQUALS, 3, 0},
                           {"worst_step", EV_EQUALS, 15, 0},
                           {"threshold_pct", EV_EQUALS, 0.1, 0},
                           {"amax", EV_EQUALS, 16, 0}},
                   .message = {"layer fc2's input (e4m3) on rank 2",
                               "since step 10"}}}},
    /* a small number keeps its digits in the evidence */
    {.name = "an underflowing cast named",
     .set = under_rank0_fc2_grad,
     .last = 30,
     .ids = WANT(1),
     .findings = {{.kind = "fp8_underflow",
                   .rank = WANT(0),
                   .n_ranks = WANT(1),
                   .first_step = WANT(8),
                   .has = {{"tensor", "grad"}, {"format", "e5m2"}},
                   .num = {{"amax", EV_EQUALS, 3e-12, 0}},
                   .message = {"layer fc2's gradient (e5m2)"}}}},
    {.name = "below the thresholds, nothing",
     .set = below,
     .last = 130,
     .finish = 1,
     .ids = WANT(0)},
    {.name = "an invalid scale named once",
     .set = zero_input,
     .last = 30,
     .finish = 1,
     .ids = WANT(1),
     .findings = {{.kind = "fp8_scale",
                   .severity = WANT(SS_CRITICAL),
                   .n_ranks = WANT(1),
                   .rank = WANT(1),
                   .first_step = WANT(12),
                   .last_step = WANT(13),
                   .has = {{"label", "fc2.input"},
                           {"cause", "amax_zero"},
                           {"scale", "inf"}},
                   .num = {{"invalid_tensors", EV_EQUALS, 2, 0},
                           {"invalid_ranks", EV_EQUALS, 2, 0},
                           {"invalid_steps", EV_EQUALS, 2, 0}},
                   .message = {"layer fc2's input (e4m3) on rank 1 in step "
                               "12: inf (amax is 0"}}}},
    {.name = "invalid scales apart are two episodes",
     .set = nan_twice,
     .last = 90,
     .findings = {{.kind = "fp8_scale",
                   .nth = 1,
                   .has = {{"cause", "amax_nonfinite"}}},
                  {.kind = "fp8_scale",
                   .count = WANT(2),
                   .nth = 2,
                   .first_step = WANT(80)}}},
    {.name = "a tensor is known by its label",
     .set = reordered,
     .last = 20,
     .ids = WANT(1),
     .findings = {{.kind = "fp8_saturation",
                   .has = {{"label", "fc1.weight"}},
                   .rank = WANT(1)}}},
    {.name = "every rank named",
     .set = all_saturate,
     .last = 12,
     .findings = {{.kind = "fp8_saturation",
                   .n_ranks = WANT(W),
                   .num = {{"ranks_over", EV_EQUALS, W, 0}},
                   .message = {"ranks 0, 1, 2 and 3"}}}},
    {.name = "clean noise, nothing",
     .set = noisy,
     .last = 500,
     .finish = 1,
     .ids = WANT(0)},
};

static void every_scenario(void)
{
    size_t n = sizeof scenarios / sizeof scenarios[0];
    for (size_t i = 0; i < n; i++) {
        const scenario *sc = &scenarios[i];
        found fd;
        ss_detectors *d = make(W, &fd);
        REQUIRE(d);
        run(d, 0, sc->last, sc->set);
        if (sc->finish)
            ss_detectors_finish(d, names);
        int failures = testing_failures_;
        ROW_WANT(sc->name, sc->ids, fd.n_ids);
        for (int k = 0; k < 2; k++)
            check_finding_want(sc->name, &fd, &sc->findings[k]);
        if (testing_failures_ != failures)
            dump(&fd);
        ss_detectors_destroy(d);
    }
    printf("  %zu scenarios, %u expectations checked\n", n,
           finding_want_checked);
}

/* A job without float8 vectors: the detector stays idle. */
static void no_vectors_nothing(void)
{
    static const char *const other[NN] = {"loss", "a", "b", "c", "d", "e"};
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    static builder b;
    for (uint64_t s = 0; s < 20; s++) {
        begin(&b, s);
        all_saturate(&b, 10);
        end(&b);
        ss_detectors_step(d, &b.v, other);
    }
    CHECK_EQ_INT(fd.n_ids, 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(every_scenario), TEST(no_vectors_nothing))
