/*
 * detect_pipeline_test.c - unit tests for the pipeline detector
 * (detect_pipeline.c): the bubble formulas of every schedule, and steps of
 * 4-stage GPipe and 1F1B schedules played out by a small simulator (each
 * microbatch's F and B on each stage, started when its stage is free and
 * its input has arrived) so that the spans are those a real schedule
 * makes.  A balanced schedule without transfer time has exactly the
 * formula's bubble and no finding; a stage with three times the work, at
 * the first, a middle or the last position, is named (stage and rank); a
 * slow transfer on every link gives a finding that names no stage; too few
 * steps, or a job without pipeline vectors, give nothing.
 */
#include "detectors.h"

#include <math.h>
#include <stdlib.h>

#include "pipeline_bubble.h"
#include "findings_capture.h"
#include "stats.h"
#include "testing.h"

#define P 4  /* stages = ranks */
#define M 8  /* microbatches */
#define NN 3
#define MS 1000000.0

enum { LOSS, SPANS, CONFIG };
static const char *const names[NN] = {"loss", "pipeline.spans",
                                      "pipeline.config"};

/* One simulated step: per stage, its spans as the recorder sends them. */
typedef struct {
    double spans[P][4 * 2 * M];
    double config[P][6];
    int64_t phase[P][NN];
    double metric[P][NN];
    ss_values_item items[P][2];
    ss_rank_step ranks[P];
    ss_step_view v;
} builder;

typedef struct {
    int gpipe;         /* else 1F1B */
    double f_ms[P], b_ms[P];
    double comm_ms;    /* per transfer */
} sim;

/* Plays one step of S out, writing each stage's spans into B (times in ns
 * after a step begin shared by every rank). */
static void simulate(const sim *s, builder *b)
{
    int kind[P][2 * M], mb[P][2 * M], next[P] = {0};
    double end_f[P][M], end_b[P][M], free_at[P] = {0};
    for (int st = 0; st < P; st++) {
        int n = 0;
        int warm = s->gpipe ? M : (P - st - 1 < M ? P - st - 1 : M);
        for (int i = 0; i < warm; i++)
            kind[st][n] = 1, mb[st][n++] = i;
        for (int i = 0; i < M - warm; i++) {
            kind[st][n] = 1, mb[st][n++] = warm + i;
            kind[st][n] = 2, mb[st][n++] = i;
        }
        for (int i = M - warm; i < M; i++)
            kind[st][n] = 2, mb[st][n++] = i;
        for (int i = 0; i < M; i++)
            end_f[st][i] = end_b[st][i] = NAN;
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (int st = 0; st < P; st++) {
            if (next[st] == 2 * M)
                continue;
            int k = kind[st][next[st]], i = mb[st][next[st]];
            double ready = 0;
            if (k == 1 && st > 0)
                ready = end_f[st - 1][i] + s->comm_ms;
            if (k == 2 && st < P - 1)
                ready = end_b[st + 1][i] + s->comm_ms;
            if (isnan(ready))
                continue;
            double t = ready > free_at[st] ? ready : free_at[st];
            double e = t + (k == 1 ? s->f_ms[st] : s->b_ms[st]);
            (k == 1 ? end_f : end_b)[st][i] = e;
            free_at[st] = e;
            double *x = &b->spans[st][4 * next[st]];
            x[0] = i, x[1] = k, x[2] = t * MS, x[3] = e * MS;
            next[st]++;
            progress = 1;
        }
    }
    for (int st = 0; st < P; st++) {
        double c[6] = {st, P, s->gpipe ? 1 : 2, M, 1, 0};
        memcpy(b->config[st], c, sizeof c);
    }
}

static void build(builder *b, uint64_t step, const sim *s)
{
    memset(b, 0, sizeof *b);
    simulate(s, b);
    ss_step_view *v = &b->v;
    v->step = step;
    v->world_size = P;
    v->n_names = NN;
    v->n_present = P;
    v->ranks = b->ranks;
    int64_t times[P];
    int32_t who[P];
    for (uint32_t r = 0; r < P; r++) {
        ss_rank_step *rs = &b->ranks[r];
        for (int i = 0; i < NN; i++) {
            b->phase[r][i] = SS_MISSING;
            b->metric[r][i] = NAN;
        }
        rs->present = 1;
        rs->step_ns = times[r] = 1000000000;
        who[r] = (int32_t)r;
        rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->begin_ns = (int64_t)step * 2000000000;
        rs->phase_ns = rs->sync_arrival_ns = b->phase[r];
        rs->metric = b->metric[r];
        b->items[r][0] = (ss_values_item){SPANS, 4 * 2 * M, 0, b->spans[r],
                                          0, NULL};
        b->items[r][1] = (ss_values_item){CONFIG, 6, 0, b->config[r], 0,
                                          NULL};
        rs->n_values = 2;
        rs->values = b->items[r];
    }
    ss_stat_compute(&v->step_time, times, who, P);
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
}

/* Feeds STEPS steps of S (the first 3 are the detectors' warm-up) and
 * returns the detectors, their findings in FD. */
static ss_detectors *run(const sim *s, int steps, found *fd,
                         const char *const *nm)
{
    ss_detectors *d = make(P, fd);
    if (!d)
        return NULL;
    static builder b;
    for (int i = 0; i < steps; i++) {
        build(&b, (uint64_t)i, s);
        ss_detectors_step(d, &b.v, nm);
    }
    ss_detectors_finish(d, nm);
    return d;
}

static sim balanced(int gpipe)
{
    sim s = {gpipe, {0}, {0}, 0};
    for (int i = 0; i < P; i++)
        s.f_ms[i] = 10, s.b_ms[i] = 20;
    return s;
}

static void formulas(void)
{
    /* (p-1)(F+B) for GPipe, 1F1B and interleaved (per-chunk spans) */
    CHECK(fabs(ss_pipe_formula_ms(1, 4, 10, 20, 0) - 90) < 1e-9);
    CHECK(fabs(ss_pipe_formula_ms(2, 4, 10, 20, 0) - 90) < 1e-9);
    CHECK(fabs(ss_pipe_formula_ms(3, 4, 5, 10, 0) - 45) < 1e-9);
    /* ZB1P: (p-1)(F + B_full - 2W), B_full = B + W: 3 (10 + 20 - 20) */
    CHECK(fabs(ss_pipe_formula_ms(4, 4, 10, 10, 10) - 30) < 1e-9);
    /* DualPipe: (p/2-1)(F&B + B_full - 3W), F&B = F + B_full:
     * 3 (25 + 15 - 15) */
    CHECK(fabs(ss_pipe_formula_ms(5, 8, 10, 10, 5) - 75) < 1e-9);
    CHECK(ss_pipe_formula_ms(4, 4, 1, 1, 10) == 0); /* never < 0 */
    CHECK(isnan(ss_pipe_formula_ms(9, 4, 1, 1, 1)));
}

/* A balanced schedule's measured bubble is its formula's: no finding. */
static void balanced_no_finding(void)
{
    for (int gpipe = 0; gpipe <= 1; gpipe++) {
        sim s = balanced(gpipe);
        found fd;
        ss_detectors *d = run(&s, 12, &fd, names);
        REQUIRE(d);
        if (count_kind(&fd, "pipeline_bubble") != 0)
            dump(&fd);
        CHECK_EQ_INT(count_kind(&fd, "pipeline_bubble"), 0);
        ss_detectors_destroy(d);
    }
}

/* A stage with 3x the work, at each position, is named. */
static void heavy_stage_named(void)
{
    for (int gpipe = 0; gpipe <= 1; gpipe++)
        for (int heavy = 0; heavy < P; heavy++) {
            sim s = balanced(gpipe);
            s.f_ms[heavy] *= 3;
            s.b_ms[heavy] *= 3;
            found fd;
            ss_detectors *d = run(&s, 12, &fd, names);
            REQUIRE(d);
            const ss_finding *f = first_kind(&fd, "pipeline_bubble");
            if (!f || f->n_ranks != 1 || f->ranks[0] != heavy) {
                fprintf(stderr, "    gpipe %d heavy %d\n", gpipe, heavy);
                dump(&fd);
            }
            REQUIRE(f);
            CHECK_EQ_INT(f->n_ranks, 1);
            CHECK_EQ_INT(f->ranks[0], heavy);
            CHECK_EQ_INT(json_get(f->evidence_json, "stage"), heavy);
            CHECK(json_get(f->evidence_json, "ratio") >= 1.5);
            CHECK(fabs(json_get(f->evidence_json, "busy_ratio") - 3) < 0.01);
            CHECK_EQ_INT(f->first_step, 6); /* 3 warm-up + 4 steps */
            CHECK_EQ_INT(f->last_step, 11);
            char want[32];
            snprintf(want, sizeof want, "Stage %d (rank %d)", heavy, heavy);
            CHECK(strstr(f->message, want) != NULL);
            ss_detectors_destroy(d);
        }
}

/* Slow transfers on every link: the bubble is over the formula, but no
 * stage computes more than the others. */
static void slow_links_name_no_stage(void)
{
    sim s = balanced(0);
    s.comm_ms = 15;
    found fd;
    ss_detectors *d = run(&s, 12, &fd, names);
    REQUIRE(d);
    const ss_finding *f = first_kind(&fd, "pipeline_bubble");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 0);
    CHECK(strstr(f->message, "No stage") != NULL);
    CHECK(isnan(json_get(f->evidence_json, "stage")));
    ss_detectors_destroy(d);
}

/* Fewer than 4 judged steps, or no pipeline vectors: nothing. */
static void too_few_or_none(void)
{
    sim s = balanced(0);
    s.f_ms[1] *= 3;
    found fd;
    ss_detectors *d = run(&s, 6, &fd, names); /* 3 judged */
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "pipeline_bubble"), 0);
    ss_detectors_destroy(d);
    static const char *const other[NN] = {"loss", "a", "b"};
    d = run(&s, 12, &fd, other);
    REQUIRE(d);
    CHECK_EQ_INT(fd.n_ids, 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(formulas), TEST(balanced_no_finding), TEST(heavy_stage_named),
          TEST(slow_links_name_no_stage), TEST(too_few_or_none))
