/*
 * detectors_test.c - unit tests for detectors.c on synthetic step views:
 * each kind of finding fires with the right rank and phase (persistent and
 * transient stragglers by arrival, by the sync-phase rule and by step
 * time; periodic data stalls; jitter; memory spike, creep and imbalance),
 * every finding's evidence is a valid JSON object, and noisy clean runs
 * with random 2-3x slow steps on random ranks produce nothing.
 */
#include "detectors.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>

#include "findings_capture.h"
#include "stats.h"
#include "testing.h"

#define MS 1000000.0
#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)
#define W 8
#define NN 6

enum { DATA = 0, FWD = 1, BWD = 2, ALLREDUCE = 3, SYNC = 4, LOSS = 5 };
static const char *const names[NN] = {"data_wait", "forward", "backward",
                                      "allreduce", "grad_sync", "loss"};

/* ---- random numbers ---- */

static uint64_t rng_state;

static double uniform(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* ---- step view builder ---- */

typedef struct {
    uint32_t world;
    int64_t phase[W][NN], self[W][NN], sync[W][NN];
    double metric[W][NN];
    ss_rank_step ranks[W];
    ss_phase_stat phases[NN];
    ss_stat phase_self[NN];
    ss_sync_stat syncs[NN];
    uint32_t missing[W];
    ss_step_view v;
} builder;

static void vb_begin(builder *b, uint32_t world, uint64_t step)
{
    memset(b, 0, sizeof *b);
    b->world = world;
    b->v.step = step;
    b->v.world_size = world;
    b->v.n_names = NN;
    for (uint32_t r = 0; r < world; r++) {
        for (int i = 0; i < NN; i++) {
            b->phase[r][i] = b->self[r][i] = b->sync[r][i] = SS_MISSING;
            b->metric[r][i] = NAN;
        }
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->phase_ns = b->phase[r];
        rs->phase_self_ns = b->self[r];
        rs->sync_arrival_ns = b->sync[r];
        rs->metric = b->metric[r];
    }
}

/* Computes the view's statistics from the per-rank values, as the
 * aggregator does. */
static void vb_end(builder *b)
{
    int64_t vals[W];
    int32_t rk[W];
    size_t n = 0;
    ss_step_view *v = &b->v;
    for (uint32_t r = 0; r < b->world; r++) {
        if (!b->ranks[r].present) {
            b->missing[v->n_missing++] = r;
            continue;
        }
        v->n_present++;
        vals[n] = b->ranks[r].step_ns;
        rk[n++] = (int32_t)r;
    }
    ss_stat_compute(&v->step_time, vals, rk, n);
    n = 0;
    for (uint32_t r = 0; r < b->world; r++)
        if (b->ranks[r].present && b->ranks[r].rss_bytes != SS_MISSING) {
            vals[n] = b->ranks[r].rss_bytes;
            rk[n++] = (int32_t)r;
        }
    ss_stat_compute(&v->rss, vals, rk, n);
    ss_stat_compute(&v->device, NULL, NULL, 0);
    for (int p = 0; p < NN; p++) {
        n = 0;
        for (uint32_t r = 0; r < b->world; r++)
            if (b->ranks[r].present && b->phase[r][p] != SS_MISSING) {
                vals[n] = b->phase[r][p];
                rk[n++] = (int32_t)r;
            }
        if (n) {
            b->phases[v->n_phases].name = p;
            ss_stat_compute(&b->phases[v->n_phases].stat, vals, rk, n);
            n = 0;
            for (uint32_t r = 0; r < b->world; r++)
                if (b->ranks[r].present && b->self[r][p] != SS_MISSING) {
                    vals[n] = b->self[r][p];
                    rk[n++] = (int32_t)r;
                }
            ss_stat_compute(&b->phase_self[v->n_phases++], vals, rk, n);
        }
        n = 0;
        int64_t first = 0, last = 0;
        int32_t worst = -1;
        for (uint32_t r = 0; r < b->world; r++)
            if (b->ranks[r].present && b->sync[r][p] != SS_MISSING) {
                int64_t a = b->sync[r][p];
                if (n == 0 || a < first)
                    first = a;
                if (n == 0 || a > last) {
                    last = a;
                    worst = (int32_t)r;
                }
                vals[n++] = a;
            }
        if (n) {
            ss_sync_stat *s = &b->syncs[v->n_syncs++];
            s->name = p;
            s->n = (uint32_t)n;
            s->worst_rank = worst;
            s->skew_ns = last - first;
            s->late_ns = last - ss_median_i64(vals, n);
        }
    }
    v->missing_ranks = b->missing;
    v->phases = b->phases;
    v->phase_self = b->phase_self;
    v->syncs = b->syncs;
    v->ranks = b->ranks;
}

/* Recomputes the statistics after a test edited per-rank values. */
static void vb_end_again(builder *b)
{
    uint64_t step = b->v.step;
    memset(&b->v, 0, sizeof b->v);
    b->v.step = step;
    b->v.world_size = b->world;
    b->v.n_names = NN;
    vb_end(b);
}

/* Per-rank compute of one step, in ms. */
typedef struct {
    double data[W], fwd[W], bwd[W];
    double rss[W]; /* bytes; 0: not sampled */
} work;

static void base_work(work *w, uint32_t world, double noise_ms)
{
    for (uint32_t r = 0; r < world; r++) {
        w->data[r] = 2 + noise_ms * uniform() * 0.2;
        w->fwd[r] = 30 + noise_ms * (uniform() - 0.5);
        w->bwd[r] = 40 + noise_ms * (uniform() - 0.5);
        w->rss[r] = 0;
    }
}

enum { SYNC_ARRIVAL, SYNC_PHASE_ONLY, UNSYNCHRONIZED, NESTED_ALLREDUCE };

/*
 * Builds a step of data-parallel training: SYNC_ARRIVAL and
 * SYNC_PHASE_ONLY synchronize every rank in an "allreduce" phase (2 ms of
 * communication after the last arrival), SYNC_ARRIVAL also records the
 * arrival at "grad_sync"; UNSYNCHRONIZED ranks just run their phases.
 * NESTED_ALLREDUCE is SYNC_ARRIVAL as auto mode records it: the
 * "allreduce" wait nests in "backward", which ends with it, and every
 * phase carries its self time.
 */
static void build_step(builder *b, uint32_t world, uint64_t step,
                       const work *w, int mode)
{
    vb_begin(b, world, step);
    int64_t begin = (int64_t)step * 1000 * (int64_t)MS;
    double last = 0;
    for (uint32_t r = 0; r < world; r++) {
        double c = w->data[r] + w->fwd[r] + w->bwd[r];
        if (c > last)
            last = c;
    }
    for (uint32_t r = 0; r < world; r++) {
        double c = w->data[r] + w->fwd[r] + w->bwd[r];
        b->phase[r][DATA] = (int64_t)(w->data[r] * MS);
        b->phase[r][FWD] = (int64_t)(w->fwd[r] * MS);
        b->phase[r][BWD] = (int64_t)(w->bwd[r] * MS);
        double total = c;
        if (mode != UNSYNCHRONIZED) {
            double wait = last - c + 2;
            b->phase[r][ALLREDUCE] = (int64_t)(wait * MS);
            total = c + wait;
        }
        if (mode == SYNC_ARRIVAL || mode == NESTED_ALLREDUCE)
            b->sync[r][SYNC] = begin + (int64_t)(c * MS);
        if (mode == NESTED_ALLREDUCE) {
            for (int p = DATA; p <= ALLREDUCE; p++)
                b->self[r][p] = b->phase[r][p];
            b->phase[r][BWD] += b->phase[r][ALLREDUCE];
        }
        b->ranks[r].step_ns = (int64_t)(total * MS);
        if (w->rss[r] > 0)
            b->ranks[r].rss_bytes = (int64_t)w->rss[r];
        b->metric[r][LOSS] = 1.0 / (double)(step + 1);
    }
    vb_end(b);
}

/* ---- a small JSON checker: an object of strings and numbers ---- */

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i]))
                        return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_number(const char *p)
{
    char *end;
    if (*p != '-' && !isdigit((unsigned char)*p))
        return NULL;
    strtod(p, &end);
    return end > p ? end : NULL;
}

static int json_object_valid(const char *s)
{
    const char *p = json_ws(s);
    if (*p++ != '{')
        return 0;
    p = json_ws(p);
    if (*p == '}')
        return *json_ws(p + 1) == '\0';
    for (;;) {
        p = json_string(json_ws(p));
        if (!p)
            return 0;
        p = json_ws(p);
        if (*p++ != ':')
            return 0;
        p = json_ws(p);
        p = *p == '"' ? json_string(p) : json_number(p);
        if (!p)
            return 0;
        p = json_ws(p);
        if (*p == '}')
            return *json_ws(p + 1) == '\0';
        if (*p++ != ',')
            return 0;
    }
}

static void check_all_valid(const found *fd)
{
    for (uint32_t i = 0; i < fd->n_ids; i++) {
        const ss_finding *f = &fd->last[i];
        CHECK(json_object_valid(f->evidence_json));
        CHECK(f->message[0] != '\0');
        CHECK(f->severity == SS_WARNING || f->severity == SS_CRITICAL);
        CHECK(f->first_step <= f->last_step);
    }
}

/* ---- tests ---- */

static void params_table(void)
{
    ss_detector_config cfg;
    ss_detector_config_defaults(&cfg);
    int n = 0;
    for (const ss_detector_param *p = ss_detector_params; p->name; p++, n++) {
        CHECK(cfg.values[n] == p->default_value);
        CHECK(p->doc && p->doc[0]);
        CHECK(p->unit && p->unit[0]);
        for (const ss_detector_param *q = p + 1; q->name; q++)
            CHECK(strcmp(p->name, q->name) != 0);
    }
    CHECK(n > 20 && n <= (int)(sizeof cfg.values / sizeof cfg.values[0]));
    char err[128];
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.min_late_ms", "7.5",
                                        err, sizeof err), 0);
    int found_it = 0;
    for (int i = 0; ss_detector_params[i].name; i++)
        if (strcmp(ss_detector_params[i].name, "straggler.min_late_ms") == 0) {
            CHECK(cfg.values[i] == 7.5);
            found_it = 1;
        }
    CHECK(found_it);
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "no.such", "1", err,
                                        sizeof err), -1);
    CHECK(strstr(err, "no.such") != NULL);
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "jitter.mad_k", "abc", err,
                                        sizeof err), -1);
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "jitter.mad_k", "3x", err,
                                        sizeof err), -1);
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.window", "5", err,
                                        sizeof err), -1);
    CHECK_EQ_INT(ss_detector_config_set(&cfg, "jitter.mad_k", "nan", err,
                                        sizeof err), -1);
}

static void persistent_straggler_by_arrival(void)
{
    rng_state = 11;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 120; s++) {
        work w;
        base_work(&w, W, 2);
        w.fwd[3] += 45;
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    CHECK_EQ_INT(fd.n_ids, 1);
    uint32_t before = fd.emissions;
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.emissions, before + fd.n_ids);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 3);
    CHECK_STR(f->phase, "forward");
    CHECK(json_has(f->evidence_json, "mode", "persistent"));
    CHECK(json_has(f->evidence_json, "method", "arrival"));
    CHECK(json_has(f->evidence_json, "sync", "grad_sync"));
    double late = json_get(f->evidence_json, "late_ms_median");
    CHECK(late > 40 && late < 50);
    CHECK(fabs(json_get(f->evidence_json, "explained_ms") - 45) < 3);
    CHECK(json_get(f->evidence_json, "steps_late") >= 95);
    CHECK(strstr(f->message, "rank 3 is a persistent straggler") != NULL);
    CHECK(strstr(f->message, "forward") != NULL);
    CHECK(f->severity == SS_CRITICAL); /* 45 ms of a ~120 ms step */
    CHECK_EQ_INT(f->first_step, 3);    /* right after the warm-up */
    CHECK_EQ_INT(f->last_step, 119);
    check_all_valid(&fd);
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

static void sync_phase_rule_blames_waits_least(void)
{
    rng_state = 12;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 100; s++) {
        work w;
        base_work(&w, W, 2);
        w.bwd[5] += 30;
        build_step(&b, W, s, &w, SYNC_PHASE_ONLY);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 5);
    CHECK_STR(f->phase, "backward");
    CHECK(json_has(f->evidence_json, "method", "sync_phase"));
    CHECK(json_has(f->evidence_json, "sync_phase", "allreduce"));
    CHECK(fabs(json_get(f->evidence_json, "late_ms_median") - 30) < 3);
    CHECK(strstr(f->message, "waits") != NULL);
    check_all_valid(&fd);
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

static void step_time_rule_unsynchronized(void)
{
    rng_state = 13;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 100; s++) {
        work w;
        base_work(&w, W, 2);
        w.bwd[2] += 40;
        build_step(&b, W, s, &w, UNSYNCHRONIZED);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 2);
    CHECK_STR(f->phase, "backward");
    CHECK(json_has(f->evidence_json, "method", "step_time"));
    check_all_valid(&fd);
    ss_detectors_destroy(d);
}

static void transient_straggler(void)
{
    rng_state = 14;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 150; s++) {
        work w;
        base_work(&w, W, 2);
        if (s >= 60 && s < 70)
            w.fwd[4] += 40;
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    CHECK_EQ_INT(fd.n_ids, 1); /* reported when the burst ended */
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 4);
    CHECK_STR(f->phase, "forward");
    CHECK(json_has(f->evidence_json, "mode", "transient"));
    CHECK_EQ_INT(f->first_step, 60);
    CHECK_EQ_INT(f->last_step, 69);
    CHECK_EQ_INT(json_get(f->evidence_json, "steps_late"), 10);
    CHECK(strstr(f->message, "transient") != NULL);
    CHECK(f->severity == SS_WARNING);
    check_all_valid(&fd);
    ss_detectors_destroy(d);
}

/* A burst still open at the end of the run is reported by finish (12
 * steps: on 4 ranks a burst must fill the 10-step sub-window to be told
 * from chance at the default straggler.alpha). */
static void transient_open_at_finish(void)
{
    rng_state = 15;
    found fd;
    ss_detectors *d = make(4, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 60; s++) {
        work w;
        base_work(&w, 4, 1);
        if (s >= 48)
            w.fwd[1] += 40;
        build_step(&b, 4, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    CHECK_EQ_INT(fd.n_ids, 0);
    ss_detectors_finish(d, names);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 1);
    CHECK_EQ_INT(f->first_step, 48);
    CHECK_EQ_INT(f->last_step, 59);
    ss_detectors_destroy(d);
}

/* A burst at the start that turns into a persistent straggler is one
 * persistent finding, not a transient one too. */
static void early_burst_then_persistent(void)
{
    rng_state = 24;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 120; s++) {
        work w;
        base_work(&w, W, 2);
        if (s != 13 && s != 30 && s != 31)
            w.fwd[6] += 40;
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 6);
    CHECK(json_has(f->evidence_json, "mode", "persistent"));
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

/* Ranks that did not report the sync point in a step are not judged by
 * arrival there (their value is missing, not zero or stale). */
static void missing_arrivals_not_judged(void)
{
    rng_state = 26;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 100; s++) {
        work w;
        base_work(&w, W, 2);
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        for (uint32_t r = 0; r < 3; r++)
            b.sync[r][SYNC] = SS_MISSING;
        vb_end_again(&b);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 0);
    if (fd.n_ids)
        dump(&fd);
    ss_detectors_destroy(d);
}

/* The straggler of a job whose all-reduce wait nests in backward: 40 ms
 * more backward compute, as much less waiting, so its inclusive backward
 * is like everyone's.  Its self time gives it away: blamed on backward,
 * with the excess. */
static void nested_phases_blamed_by_self_time(void)
{
    rng_state = 31;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 80; s++) {
        work w;
        base_work(&w, W, 2);
        w.bwd[5] += 40;
        build_step(&b, W, s, &w, NESTED_ALLREDUCE);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(count_kind(&fd, "straggler"), 1);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 5);
    CHECK_STR(f->phase, "backward");
    CHECK(json_has(f->evidence_json, "phase", "backward"));
    CHECK(fabs(json_get(f->evidence_json, "explained_ms") - 40) < 3);
    CHECK(json_has(f->evidence_json, "phase_time", "self"));
    CHECK(strstr(f->message, "backward") != NULL);
    check_all_valid(&fd);
    if (count_kind(&fd, "straggler") != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

/* Late with no phase to blame: the lateness is outside every phase. */
static void straggler_without_phase_blame(void)
{
    rng_state = 25;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 60; s++) {
        work w;
        base_work(&w, W, 2);
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        b.sync[2][SYNC] += (int64_t)(30 * MS); /* late, phases normal */
        vb_end_again(&b);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    const ss_finding *f = first_kind(&fd, "straggler");
    REQUIRE(f);
    CHECK_EQ_INT(f->ranks[0], 2);
    CHECK_STR(f->phase, "");
    CHECK(strstr(f->message, "explains") == NULL);
    CHECK(isnan(json_get(f->evidence_json, "explained_ms")));
    ss_detectors_destroy(d);
}

static void data_stall_periodic(void)
{
    rng_state = 16;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 150; s++) {
        work w;
        base_work(&w, W, 2);
        if (s % 7 == 3)
            w.data[2] += 400;
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    const ss_finding *f = first_kind(&fd, "data_stall");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 2);
    CHECK_STR(f->phase, "data_wait");
    CHECK_EQ_INT(json_get(f->evidence_json, "period_steps"), 7);
    CHECK_EQ_INT(json_get(f->evidence_json, "stalls"), 21); /* 3..143 */
    CHECK(fabs(json_get(f->evidence_json, "stall_ms_median") - 400) < 5);
    CHECK(strstr(f->message, "every 7 steps") != NULL);
    CHECK_EQ_INT(f->first_step, 3);
    CHECK_EQ_INT(f->last_step, 143);
    /* the stalled steps are neither jitter nor a straggler */
    CHECK_EQ_INT(fd.n_ids, 1);
    if (fd.n_ids != 1)
        dump(&fd);
    check_all_valid(&fd);
    ss_detectors_destroy(d);
}

static void jitter_global_slow_steps(void)
{
    rng_state = 17;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 200; s++) {
        work w;
        base_work(&w, W, 2);
        if (s % 5 == 0 && s > 40)
            for (uint32_t r = 0; r < W; r++)
                w.fwd[r] += 100; /* every rank, e.g. a collective pause */
        build_step(&b, W, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "jitter");
    REQUIRE(f);
    CHECK_STR(f->phase, "forward");
    CHECK(json_get(f->evidence_json, "outliers") >= 25);
    CHECK(fabs(json_get(f->evidence_json, "explained_ms") - 100) < 5);
    CHECK(strstr(f->message, "jitters") != NULL);
    CHECK(f->first_step >= 45);
    check_all_valid(&fd);
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

/* Every rank's all-reduce, nested in backward, is 100 ms slower in some
 * steps, and backward's own compute 5 ms: the jitter is the all-reduce's,
 * not the backward's around it (whose inclusive time rose most). */
static void jitter_blames_the_nested_phase(void)
{
    rng_state = 18;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 200; s++) {
        work w;
        base_work(&w, W, 2);
        build_step(&b, W, s, &w, NESTED_ALLREDUCE);
        if (s % 5 == 0 && s > 40) {
            for (uint32_t r = 0; r < W; r++) {
                int64_t pause = (int64_t)(100 * MS);
                int64_t compute = (int64_t)(5 * MS);
                b.phase[r][ALLREDUCE] += pause;
                b.self[r][ALLREDUCE] += pause;
                b.self[r][BWD] += compute;
                b.phase[r][BWD] += pause + compute;
                b.ranks[r].step_ns += pause + compute;
            }
            vb_end_again(&b);
        }
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    const ss_finding *f = first_kind(&fd, "jitter");
    REQUIRE(f);
    CHECK_STR(f->phase, "allreduce");
    CHECK(fabs(json_get(f->evidence_json, "explained_ms") - 100) < 5);
    CHECK_EQ_INT(count_kind(&fd, "straggler"), 0);
    ss_detectors_destroy(d);
}

static void memory_spike_one_rank(void)
{
    rng_state = 18;
    found fd;
    ss_detectors *d = make(4, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 100; s++) {
        work w;
        base_work(&w, 4, 1);
        for (uint32_t r = 0; r < 4; r++)
            w.rss[r] = 2 * GIB + MIB * (uniform() - 0.5);
        if (s >= 60 && s < 70)
            w.rss[1] += GIB;
        build_step(&b, 4, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "memory_spike");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 1);
    CHECK_EQ_INT(f->first_step, 60);
    CHECK_EQ_INT(json_get(f->evidence_json, "spikes"), 1);
    CHECK(fabs(json_get(f->evidence_json, "jump_mib") - 1024) < 2);
    CHECK(json_has(f->evidence_json, "memory", "rss"));
    CHECK(strstr(f->message, "rank 1") != NULL);
    check_all_valid(&fd);
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

static void memory_creep_slope(void)
{
    rng_state = 19;
    found fd;
    ss_detectors *d = make(4, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 400; s++) {
        work w;
        base_work(&w, 4, 1);
        for (uint32_t r = 0; r < 4; r++)
            w.rss[r] = GIB + 8 * MIB * (uniform() - 0.5);
        w.rss[1] += MIB * (double)s;
        if (s == 200)
            w.rss[1] += 200 * MIB; /* one wild sample */
        build_step(&b, 4, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    const ss_finding *f = first_kind(&fd, "memory_creep");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 1);
    double bps = json_get(f->evidence_json, "bytes_per_step");
    CHECK(fabs(bps - MIB) / MIB < 0.03);
    CHECK(fabs(json_get(f->evidence_json, "mib_per_1000_steps") - 1000) <
          30);
    CHECK(strstr(f->message, "rank 1") != NULL);
    CHECK(count_kind(&fd, "memory_creep") == 1);
    check_all_valid(&fd);
    ss_detectors_destroy(d);
}

/* A single lasting jump is a step up, not creep. */
static void memory_step_up_is_not_creep(void)
{
    rng_state = 20;
    found fd;
    ss_detectors *d = make(4, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 300; s++) {
        work w;
        base_work(&w, 4, 1);
        for (uint32_t r = 0; r < 4; r++)
            w.rss[r] = GIB + 8 * MIB * (uniform() - 0.5);
        if (s >= 150)
            w.rss[2] += 300 * MIB;
        build_step(&b, 4, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(count_kind(&fd, "memory_creep"), 0);
    CHECK_EQ_INT(count_kind(&fd, "memory_spike"), 1);
    ss_detectors_destroy(d);
}

static void memory_imbalance_one_rank(void)
{
    rng_state = 21;
    found fd;
    ss_detectors *d = make(4, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 60; s++) {
        work w;
        base_work(&w, 4, 1);
        for (uint32_t r = 0; r < 4; r++)
            w.rss[r] = 4 * GIB + 4 * MIB * (uniform() - 0.5);
        w.rss[0] += 2 * GIB;
        build_step(&b, 4, s, &w, SYNC_ARRIVAL);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 1);
    const ss_finding *f = first_kind(&fd, "memory_imbalance");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 0);
    CHECK_EQ_INT(f->first_step, 3);
    CHECK(fabs(json_get(f->evidence_json, "excess_mib") - 2048) < 8);
    CHECK(strstr(f->message, "rank 0") != NULL);
    check_all_valid(&fd);
    if (fd.n_ids != 1)
        dump(&fd);
    ss_detectors_destroy(d);
}

/*
 * Clean runs: scheduling noise of a few ms, and in 2 % of rank-steps a
 * random rank runs 2-3x slower for one step; memory flat with noise.
 * Nothing must be reported, whichever way lateness is measured.
 */
static void clean_noisy_run(int mode, uint64_t seed)
{
    rng_state = seed;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 1000; s++) {
        work w;
        base_work(&w, W, 6);
        for (uint32_t r = 0; r < W; r++) {
            w.rss[r] = GIB + 4 * MIB * (uniform() - 0.5);
            if (uniform() < 0.02) {
                double k = 2 + uniform();
                w.data[r] *= k;
                w.fwd[r] *= k;
                w.bwd[r] *= k;
            }
        }
        build_step(&b, W, s, &w, mode);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(fd.n_ids, 0);
    if (fd.n_ids)
        dump(&fd);
    ss_detectors_destroy(d);
}

static void clean_noisy_run_arrival(void)
{
    clean_noisy_run(SYNC_ARRIVAL, 101);
    clean_noisy_run(SYNC_ARRIVAL, 102);
}

static void clean_noisy_run_sync_phase(void)
{
    clean_noisy_run(SYNC_PHASE_ONLY, 103);
}

static void clean_noisy_run_unsynchronized(void)
{
    clean_noisy_run(UNSYNCHRONIZED, 104);
}

/*
 * Ranks sharing few cores: 8 ranks on 2 cores run in pairs, so arrivals
 * spread evenly over 4 slots 3 ms apart, and the scheduler picks which
 * pair runs last.  In a random order every rank is last by chance and
 * none is a straggler.  In a fixed order the last pair is 4.5 ms (8 % of
 * the step) behind the median rank in every step: that is what the other
 * ranks wait for, and both ranks are named.
 */
static void even_spread_of_shared_cores(void)
{
    for (int fixed = 0; fixed < 2; fixed++) {
        rng_state = 22;
        found fd;
        ss_detectors *d = make(W, &fd);
        REQUIRE(d);
        builder b;
        for (uint64_t s = 0; s < 200; s++) {
            work w;
            base_work(&w, W, 0.5);
            int slot[W / 2] = {0, 1, 2, 3};
            for (int i = W / 2 - 1; i > 0 && !fixed; i--) { /* shuffle */
                int j = (int)(uniform() * (i + 1)), t = slot[i];
                slot[i] = slot[j];
                slot[j] = t;
            }
            for (uint32_t r = 0; r < W; r++)
                w.fwd[r] = 3 + 3.0 * slot[r / 2];
            build_step(&b, W, s, &w, SYNC_ARRIVAL);
            ss_detectors_step(d, &b.v, names);
        }
        ss_detectors_finish(d, names);
        if (!fixed) {
            CHECK_EQ_INT(fd.n_ids, 0);
        } else {
            CHECK_EQ_INT(count_kind(&fd, "straggler"), 2);
            for (uint32_t i = 0; i < fd.n_ids; i++)
                CHECK(fd.last[i].ranks[0] >= 6);
        }
        if (fd.n_ids != 2 * (uint32_t)fixed)
            dump(&fd);
        ss_detectors_destroy(d);
    }
}

/* Missing ranks, missing values and a step with one rank do no harm. */
static void sparse_views(void)
{
    rng_state = 23;
    found fd;
    ss_detectors *d = make(W, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < 80; s++) {
        work w;
        base_work(&w, W, 2);
        build_step(&b, W, s, &w, s % 2 ? SYNC_ARRIVAL : UNSYNCHRONIZED);
        for (uint32_t r = 0; r < W; r++)
            if ((s + r) % 3 == 0 || (s > 70 && r > 0)) {
                b.ranks[r].present = 0;
                b.ranks[r].step_ns = SS_MISSING;
                for (int i = 0; i < NN; i++)
                    b.phase[r][i] = b.sync[r][i] = SS_MISSING;
            }
        vb_end_again(&b);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    check_all_valid(&fd);
    ss_detectors_destroy(d);
    ss_detectors_destroy(NULL);
}

TEST_LIST(TEST(params_table), TEST(persistent_straggler_by_arrival),
          TEST(sync_phase_rule_blames_waits_least),
          TEST(step_time_rule_unsynchronized), TEST(transient_straggler),
          TEST(transient_open_at_finish), TEST(early_burst_then_persistent),
          TEST(straggler_without_phase_blame),
          TEST(nested_phases_blamed_by_self_time),
          TEST(missing_arrivals_not_judged), TEST(data_stall_periodic),
          TEST(jitter_global_slow_steps),
          TEST(jitter_blames_the_nested_phase), TEST(memory_spike_one_rank),
          TEST(memory_creep_slope), TEST(memory_step_up_is_not_creep),
          TEST(memory_imbalance_one_rank), TEST(clean_noisy_run_arrival),
          TEST(clean_noisy_run_sync_phase),
          TEST(clean_noisy_run_unsynchronized),
          TEST(even_spread_of_shared_cores), TEST(sparse_views))
