/*
 * detectors_test.c - unit tests for detectors.c on synthetic step views:
 * each kind of finding fires with the right rank and phase (persistent and
 * transient stragglers by arrival, by the sync-phase rule and by step
 * time; periodic data stalls; jitter; memory spike, creep and imbalance),
 * every finding's evidence is a valid JSON object, and noisy clean runs
 * with random 2-3x slow steps on random ranks produce nothing.
 *
 * The runs are the rows of one table (scenarios[]): how each step is made
 * (world, seed, noise, how ranks synchronize, the fault added to the
 * workload or to the built view) and what must be found (the kind, its
 * ranks, phase, steps, severity, message and evidence), run by one loop
 * that names the failing row.
 */
#include "detectors.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>

#include "finding_want.h"
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

enum { SYNC_ARRIVAL, SYNC_PHASE_ONLY, UNSYNCHRONIZED, NESTED_ALLREDUCE,
       EXPLICIT_NO_SYNC };

/*
 * Builds a step of data-parallel training: SYNC_ARRIVAL and
 * SYNC_PHASE_ONLY synchronize every rank in an "allreduce" phase (2 ms of
 * communication after the last arrival), SYNC_ARRIVAL also records the
 * arrival at "grad_sync"; UNSYNCHRONIZED ranks just run their phases.
 * NESTED_ALLREDUCE is SYNC_ARRIVAL as auto mode records it: the
 * "allreduce" wait nests in "backward", which ends with it, and every
 * phase carries its self time.  EXPLICIT_NO_SYNC is the explicit API
 * without sync(): the wait lies inside "backward" (no phase of its own,
 * no arrival), and each rank's step boundaries are its own calls, so step
 * times differ by up to 80 ms more than the phases.
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
        if (mode == EXPLICIT_NO_SYNC) {
            double wait = last - c + 2;
            b->phase[r][BWD] = (int64_t)((w->bwd[r] + wait) * MS);
            total = c + wait + 80 * uniform();
            for (int p = DATA; p <= BWD; p++)
                b->self[r][p] = b->phase[r][p];
        } else if (mode != UNSYNCHRONIZED) {
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

/* ---- the scenarios: faults added to each step ---- */

/* Each changes the work of step S (after base_work) in the way its name
 * says; the random draws are part of the scenario. */
static void slow_fwd_rank3(work *w, uint64_t s) { (void)s; w->fwd[3] += 45; }
static void slow_bwd_rank5(work *w, uint64_t s) { (void)s; w->bwd[5] += 30; }
static void slow_bwd_rank2(work *w, uint64_t s) { (void)s; w->bwd[2] += 40; }
static void slow_bwd_rank5_40(work *w, uint64_t s) { (void)s; w->bwd[5] += 40; }

static void burst_fwd_rank4(work *w, uint64_t s)
{
    if (s >= 60 && s < 70)
        w->fwd[4] += 40;
}

static void burst_fwd_rank1_to_end(work *w, uint64_t s)
{
    if (s >= 48)
        w->fwd[1] += 40;
}

static void slow_fwd_rank6_but_three(work *w, uint64_t s)
{
    if (s != 13 && s != 30 && s != 31)
        w->fwd[6] += 40;
}

/* rank 2's forward 3x the others' (30 ms) in 4 steps of 5 */
static void fwd_rank2_3x_most_steps(work *w, uint64_t s)
{
    if (s % 5 != 0)
        w->fwd[2] += 60;
}

static void stall_rank2_every_7(work *w, uint64_t s)
{
    if (s % 7 == 3)
        w->data[2] += 400;
}

/* a job of one rank that waits 150 ms for data in every second step */
static void stall_alone_every_2(work *w, uint64_t s)
{
    if (s % 2 == 1)
        w->data[0] += 150;
}

/* of two ranks, rank 1 waits 150 ms for data in every second step */
static void stall_rank1_of_2_every_2(work *w, uint64_t s)
{
    if (s % 2 == 1)
        w->data[1] += 150;
}

/* a job of one rank whose every second step is 14 times as long (an
 * evaluation, say): the window's median and spread flip between the two
 * levels as the steps come */
static void alone_every_2_fourteen_times(work *w, uint64_t s)
{
    if (s % 2 == 1)
        w->fwd[0] += 1000;
}

static void pause_every_rank_every_5(work *w, uint64_t s)
{
    if (s % 5 == 0 && s > 40)
        for (uint32_t r = 0; r < W; r++)
            w->fwd[r] += 100; /* every rank, e.g. a collective pause */
}

/* The same pause, one rank in turn 2 ms longer in it: the slowest rank
 * of the slow steps changes from one to the next (unsynchronized ranks,
 * whose step times are their own). */
static void pause_every_rank_every_5_slowest_in_turn(work *w, uint64_t s)
{
    pause_every_rank_every_5(w, s);
    if (s % 5 == 0 && s > 40)
        w->fwd[(s / 5) % W] += 2;
}

static void rss_spike_rank1(work *w, uint64_t s)
{
    for (uint32_t r = 0; r < 4; r++)
        w->rss[r] = 2 * GIB + MIB * (uniform() - 0.5);
    if (s >= 60 && s < 70)
        w->rss[1] += GIB;
}

static void rss_creep_rank1(work *w, uint64_t s)
{
    for (uint32_t r = 0; r < 4; r++)
        w->rss[r] = GIB + 8 * MIB * (uniform() - 0.5);
    w->rss[1] += MIB * (double)s;
    if (s == 200)
        w->rss[1] += 200 * MIB; /* one wild sample */
}

static void rss_step_up_rank2(work *w, uint64_t s)
{
    for (uint32_t r = 0; r < 4; r++)
        w->rss[r] = GIB + 8 * MIB * (uniform() - 0.5);
    if (s >= 150)
        w->rss[2] += 300 * MIB;
}

static void rss_heavy_rank0(work *w, uint64_t s)
{
    (void)s;
    for (uint32_t r = 0; r < 4; r++)
        w->rss[r] = 4 * GIB + 4 * MIB * (uniform() - 0.5);
    w->rss[0] += 2 * GIB;
}

/* of two ranks, rank 1 holds 768 MiB more than rank 0's 2 GiB */
static void rss_heavy_rank1_of_2(work *w, uint64_t s)
{
    (void)s;
    for (uint32_t r = 0; r < 2; r++)
        w->rss[r] = 2 * GIB + 4 * MIB * (uniform() - 0.5);
    w->rss[1] += 768 * MIB;
}

/* Scheduling noise: in 2 % of rank-steps a random rank runs 2-3x slower
 * for one step; memory flat with noise. */
static void random_slow_steps(work *w, uint64_t s)
{
    (void)s;
    for (uint32_t r = 0; r < W; r++) {
        w->rss[r] = GIB + 4 * MIB * (uniform() - 0.5);
        if (uniform() < 0.02) {
            double k = 2 + uniform();
            w->data[r] *= k;
            w->fwd[r] *= k;
            w->bwd[r] *= k;
        }
    }
}

/* 8 ranks on 2 cores run in pairs: arrivals in 4 slots 3 ms apart, the
 * pairs in a random order, or always in the same one. */
static void pairs_in_random_order(work *w, uint64_t s)
{
    (void)s;
    int slot[W / 2] = {0, 1, 2, 3};
    for (int i = W / 2 - 1; i > 0; i--) { /* shuffle */
        int j = (int)(uniform() * (i + 1)), t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
    for (uint32_t r = 0; r < W; r++)
        w->fwd[r] = 3 + 3.0 * slot[r / 2];
}

static void pairs_in_fixed_order(work *w, uint64_t s)
{
    (void)s;
    for (uint32_t r = 0; r < W; r++)
        w->fwd[r] = 3 + 3.0 * (r / 2);
}

/* Edits of the built view of step S; each recomputes the statistics. */
static void no_arrival_on_ranks_0_to_2(builder *b, uint64_t s)
{
    (void)s;
    for (uint32_t r = 0; r < 3; r++)
        b->sync[r][SYNC] = SS_MISSING;
    vb_end_again(b);
}

static void rank2_arrives_late(builder *b, uint64_t s)
{
    (void)s;
    b->sync[2][SYNC] += (int64_t)(30 * MS); /* late, phases normal */
    vb_end_again(b);
}

/* Host evidence for every rank: nothing lost, but rank 2 stopped for its
 * data phase's 400 ms in the steps stall_rank2_every_7 slows (SIGSTOP
 * from outside while it read its batch). */
static void rank2_stopped_in_its_data_phase(builder *b, uint64_t s)
{
    static ss_host_step host[W];
    for (uint32_t r = 0; r < b->world; r++) {
        ss_host_step *h = &host[r];
        memset(h, 0, sizeof *h);
        h->cpu_ns = b->ranks[r].step_ns;
        h->throttled_ns = h->psi_cpu_ns = h->psi_memory_ns = h->psi_io_ns =
            SS_MISSING;
        h->nr_throttled = SS_MISSING;
        if (r == 2 && s % 7 == 3) {
            h->stopped_ns = (ss_dur_ns)(400 * MS);
            h->cpu_ns -= h->stopped_ns;
        }
        b->ranks[r].host = h;
    }
}

/* Every rank's all-reduce, nested in backward, 100 ms slower in some
 * steps, and backward's own compute 5 ms. */
static void nested_allreduce_pauses(builder *b, uint64_t s)
{
    if (!(s % 5 == 0 && s > 40))
        return;
    for (uint32_t r = 0; r < W; r++) {
        int64_t pause = (int64_t)(100 * MS);
        int64_t compute = (int64_t)(5 * MS);
        b->phase[r][ALLREDUCE] += pause;
        b->self[r][ALLREDUCE] += pause;
        b->self[r][BWD] += compute;
        b->phase[r][BWD] += pause + compute;
        b->ranks[r].step_ns += pause + compute;
    }
    vb_end_again(b);
}

/* Ranks missing from the view, and steps with one rank. */
static void ranks_go_missing(builder *b, uint64_t s)
{
    for (uint32_t r = 0; r < W; r++)
        if ((s + r) % 3 == 0 || (s > 70 && r > 0)) {
            b->ranks[r].present = 0;
            b->ranks[r].step_ns = SS_MISSING;
            for (int i = 0; i < NN; i++)
                b->phase[r][i] = b->sync[r][i] = SS_MISSING;
        }
    vb_end_again(b);
}

/* ---- the table ---- */

typedef struct {
    const char *name;
    /* the run */
    uint64_t seed;
    uint32_t world;
    uint64_t steps;
    double noise_ms;
    int mode;                           /* SYNC_ARRIVAL, ...; ALTERNATE */
    void (*fault)(work *w, uint64_t s); /* NULL: none */
    void (*edit)(builder *b, uint64_t s);
    /* what is found */
    want ids_before_finish, ids; /* findings (fd.n_ids) */
    int finish_reports_again;    /* finish emits every finding once more */
    finding_want finding, other;
    want min_rank; /* every finding's first rank at least */
} scenario;

#define ALTERNATE (-1) /* SYNC_ARRIVAL on odd steps, else UNSYNCHRONIZED */

static const scenario scenarios[] = {
    {.name = "persistent straggler by arrival",
     .seed = 11,
     .world = W,
     .steps = 120,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = slow_fwd_rank3,
     .ids_before_finish = WANT(1),
     .ids = WANT(1),
     .finish_reports_again = 1,
     .finding = {.kind = "straggler",
                 .n_ranks = WANT(1),
                 .rank = WANT(3),
                 .first_step = WANT(3),
                 .last_step = WANT(119),
                 .severity = WANT(SS_CRITICAL),
                 .phase = "forward",
                 .message = {"rank 3 is a persistent straggler", "forward"},
                 .has = {{"mode", "persistent"},
                         {"method", "arrival"},
                         {"sync", "grad_sync"}},
                 .num = {{"late_ms_median", EV_OPEN, 40, 50},
                         {"explained_ms", EV_OPEN, 42, 48},
                         {"steps_late", EV_AT_LEAST, 95, 0}}}},
    {.name = "sync-phase rule blames who waits least",
     .seed = 12,
     .world = W,
     .steps = 100,
     .noise_ms = 2,
     .mode = SYNC_PHASE_ONLY,
     .fault = slow_bwd_rank5,
     .ids = WANT(1),
     .finding = {.kind = "straggler",
                 .rank = WANT(5),
                 .phase = "backward",
                 .message = {"waits"},
                 .has = {{"method", "sync_phase"}, {"sync_phase", "allreduce"}},
                 .num = {{"late_ms_median", EV_OPEN, 27, 33}}}},
    /* the others wait for rank 2 inside backward; main found nothing */
    {.name = "explicit API without sync: named from per-phase self time",
     .seed = 32,
     .world = 4,
     .steps = 150,
     .noise_ms = 2,
     .mode = EXPLICIT_NO_SYNC,
     .fault = fwd_rank2_3x_most_steps,
     .ids = WANT(1),
     .finding = {.kind = "straggler",
                 .n_ranks = WANT(1),
                 .rank = WANT(2),
                 .phase = "forward",
                 .has = {{"phase_time", "self"}, {"sync_phase", "backward"}}}},
    {.name = "step-time rule, unsynchronized",
     .seed = 13,
     .world = W,
     .steps = 100,
     .noise_ms = 2,
     .mode = UNSYNCHRONIZED,
     .fault = slow_bwd_rank2,
     .ids = WANT(1),
     .finding = {.kind = "straggler",
                 .rank = WANT(2),
                 .phase = "backward",
                 .has = {{"method", "step_time"}}}},
    /* reported when the burst ended */
    {.name = "transient straggler",
     .seed = 14,
     .world = W,
     .steps = 150,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = burst_fwd_rank4,
     .ids_before_finish = WANT(1),
     .ids = WANT(1),
     .finding = {.kind = "straggler",
                 .rank = WANT(4),
                 .first_step = WANT(60),
                 .last_step = WANT(69),
                 .severity = WANT(SS_WARNING),
                 .phase = "forward",
                 .message = {"transient"},
                 .has = {{"mode", "transient"}},
                 .num = {{"steps_late", EV_EQUALS, 10, 0}}}},
    /* 12 steps: on 4 ranks a burst must fill the 10-step sub-window to be
     * told from chance at the default straggler.alpha */
    {.name = "transient open at finish",
     .seed = 15,
     .world = 4,
     .steps = 60,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = burst_fwd_rank1_to_end,
     .ids_before_finish = WANT(0),
     .finding = {.kind = "straggler",
                 .rank = WANT(1),
                 .first_step = WANT(48),
                 .last_step = WANT(59)}},
    {.name = "early burst then persistent is one persistent finding",
     .seed = 24,
     .world = W,
     .steps = 120,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = slow_fwd_rank6_but_three,
     .ids = WANT(1),
     .finding = {.kind = "straggler",
                 .rank = WANT(6),
                 .has = {{"mode", "persistent"}}}},
    {.name = "missing arrivals are not judged",
     .seed = 26,
     .world = W,
     .steps = 100,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .edit = no_arrival_on_ranks_0_to_2,
     .ids = WANT(0)},
    /* 40 ms more backward compute, as much less waiting: the inclusive
     * backward is like everyone's, the self time gives it away */
    {.name = "nested phases blamed by self time",
     .seed = 31,
     .world = W,
     .steps = 80,
     .noise_ms = 2,
     .mode = NESTED_ALLREDUCE,
     .fault = slow_bwd_rank5_40,
     .finding = {.kind = "straggler",
                 .count = WANT(1),
                 .rank = WANT(5),
                 .phase = "backward",
                 .message = {"backward"},
                 .has = {{"phase", "backward"}, {"phase_time", "self"}},
                 .num = {{"explained_ms", EV_OPEN, 37, 43}}}},
    {.name = "late outside every phase blames none",
     .seed = 25,
     .world = W,
     .steps = 60,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .edit = rank2_arrives_late,
     .finding = {.kind = "straggler",
                 .rank = WANT(2),
                 .phase = "",
                 .message = {"no phase it records accounts for it: the "
                             "time is spent outside them"},
                 .not_in_message = "longer than the median rank's",
                 .num = {{"explained_ms", EV_IS_NAN, 0, 0},
                         {"outside_phases", EV_OPEN, 0.5, 1.5}}}},
    /* the stalled steps are neither jitter nor a straggler */
    {.name = "periodic data stall",
     .seed = 16,
     .world = W,
     .steps = 150,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = stall_rank2_every_7,
     .ids = WANT(1),
     .finding = {.kind = "data_stall",
                 .n_ranks = WANT(1),
                 .rank = WANT(2),
                 .first_step = WANT(3),
                 .last_step = WANT(143),
                 .phase = "data_wait",
                 .severity = WANT(SS_CRITICAL), /* 400 ms: 5 steps' time */
                 .message = {"every 7 steps"},
                 .num = {{"period_steps", EV_EQUALS, 7, 0},
                         {"stalls", EV_EQUALS, 21, 0},
                         {"stall_ms_median", EV_OPEN, 395, 405}}}},
    /* of two ranks the median is halfway to the stalled rank's time (a
     * stall could never be 4 times it): the other rank's is compared */
    {.name = "a data stall of one rank of two, every second step",
     .seed = 26,
     .world = 2,
     .steps = 120,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = stall_rank1_of_2_every_2,
     .ids = WANT(1),
     .finding = {.kind = "data_stall",
                 .n_ranks = WANT(1),
                 .rank = WANT(1),
                 .phase = "data_wait",
                 .severity = WANT(SS_CRITICAL),
                 .message = {"longer than the other rank's",
                             "every 2 steps"},
                 .num = {{"period_steps", EV_EQUALS, 2, 0},
                         {"stall_ms_median", EV_OPEN, 145, 155}}}},
    /* one rank: its own typical data phase is the reference; the stalled
     * steps are not jitter */
    {.name = "a data stall of a job of one rank, every second step",
     .seed = 28,
     .world = 1,
     .steps = 120,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = stall_alone_every_2,
     .ids = WANT(1),
     .finding = {.kind = "data_stall",
                 .n_ranks = WANT(1),
                 .rank = WANT(0),
                 .phase = "data_wait",
                 .severity = WANT(SS_CRITICAL),
                 .message = {"longer than usual", "every 2 steps"},
                 .num = {{"period_steps", EV_EQUALS, 2, 0},
                         {"stall_ms_median", EV_OPEN, 145, 155}}},
     .other = {.kind = "jitter", .count = WANT(0)}},
    /* the host saw the stalls as stops: one stopped finding, no stall */
    {.name = "a data phase spent stopped is no data stall",
     .seed = 16,
     .world = W,
     .steps = 150,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = stall_rank2_every_7,
     .edit = rank2_stopped_in_its_data_phase,
     .ids = WANT(1),
     .finding = {.kind = "stopped",
                 .n_ranks = WANT(1),
                 .rank = WANT(2)}},
    {.name = "jitter: one episode while the window flips between levels",
     .seed = 29,
     .world = 1,
     .steps = 100,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = alone_every_2_fourteen_times,
     .ids = WANT(1),
     .finding = {.kind = "jitter",
                 .count = WANT(1),
                 .message = {"varies widely"}}},
    {.name = "jitter: slow steps on every rank",
     .seed = 17,
     .world = W,
     .steps = 200,
     .noise_ms = 2,
     .mode = SYNC_ARRIVAL,
     .fault = pause_every_rank_every_5,
     .ids = WANT(1),
     .finding = {.kind = "jitter",
                 .phase = "forward",
                 .message = {"jitters"},
                 .num = {{"outliers", EV_AT_LEAST, 25, 0},
                         {"explained_ms", EV_OPEN, 95, 105}},
                 .min_first_step = WANT(45)}},
    /* every rank is the slowest in as many of them: none is named */
    {.name = "jitter: slow steps on every rank, each the slowest in turn",
     .seed = 17,
     .world = W,
     .steps = 200,
     .noise_ms = 2,
     .mode = UNSYNCHRONIZED,
     .fault = pause_every_rank_every_5_slowest_in_turn,
     .ids = WANT(1),
     .finding = {.kind = "jitter",
                 .n_ranks = WANT(0),
                 .message = {"jitters", "no rank stands out as the slowest"}}},
    /* the jitter is the all-reduce's, not the backward's around it (whose
     * inclusive time rose most) */
    {.name = "jitter blames the nested phase",
     .seed = 18,
     .world = W,
     .steps = 200,
     .noise_ms = 2,
     .mode = NESTED_ALLREDUCE,
     .edit = nested_allreduce_pauses,
     .finding = {.kind = "jitter",
                 .phase = "allreduce",
                 .num = {{"explained_ms", EV_OPEN, 95, 105}}},
     .other = {.kind = "straggler", .count = WANT(0)}},
    {.name = "memory spike on one rank",
     .seed = 18,
     .world = 4,
     .steps = 100,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = rss_spike_rank1,
     .ids = WANT(1),
     .finding = {.kind = "memory_spike",
                 .n_ranks = WANT(1),
                 .rank = WANT(1),
                 .first_step = WANT(60),
                 .message = {"rank 1"},
                 .has = {{"memory", "rss"}},
                 .num = {{"spikes", EV_EQUALS, 1, 0},
                         {"jump_mib", EV_OPEN, 1022, 1026}}}},
    {.name = "memory creep",
     .seed = 19,
     .world = 4,
     .steps = 400,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = rss_creep_rank1,
     .finding = {.kind = "memory_creep",
                 .count = WANT(1),
                 .n_ranks = WANT(1),
                 .rank = WANT(1),
                 .message = {"rank 1"},
                 .num = {{"bytes_per_step", EV_OPEN, 0.97 * MIB, 1.03 * MIB},
                         {"mib_per_1000_steps", EV_OPEN, 970, 1030}}}},
    /* a single lasting jump is a step up, not creep */
    {.name = "memory step up is not creep",
     .seed = 20,
     .world = 4,
     .steps = 300,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = rss_step_up_rank2,
     .finding = {.kind = "memory_creep", .count = WANT(0)},
     .other = {.kind = "memory_spike", .count = WANT(1)}},
    {.name = "memory imbalance on one rank",
     .seed = 21,
     .world = 4,
     .steps = 60,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = rss_heavy_rank0,
     .ids = WANT(1),
     .finding = {.kind = "memory_imbalance",
                 .n_ranks = WANT(1),
                 .rank = WANT(0),
                 .first_step = WANT(3),
                 .message = {"rank 0"},
                 .num = {{"excess_mib", EV_OPEN, 2040, 2056}}}},
    {.name = "memory imbalance on one rank of two",
     .seed = 27,
     .world = 2,
     .steps = 60,
     .noise_ms = 1,
     .mode = SYNC_ARRIVAL,
     .fault = rss_heavy_rank1_of_2,
     .ids = WANT(1),
     .finding = {.kind = "memory_imbalance",
                 .n_ranks = WANT(1),
                 .rank = WANT(1),
                 .message = {"against the other rank's 2.00 GiB"},
                 .num = {{"excess_mib", EV_OPEN, 760, 776}}}},
    /* clean runs: nothing, whichever way lateness is measured */
    {.name = "clean noisy run, arrival (seed 101)",
     .seed = 101,
     .world = W,
     .steps = 1000,
     .noise_ms = 6,
     .mode = SYNC_ARRIVAL,
     .fault = random_slow_steps,
     .ids = WANT(0)},
    {.name = "clean noisy run, arrival (seed 102)",
     .seed = 102,
     .world = W,
     .steps = 1000,
     .noise_ms = 6,
     .mode = SYNC_ARRIVAL,
     .fault = random_slow_steps,
     .ids = WANT(0)},
    {.name = "clean noisy run, sync phase",
     .seed = 103,
     .world = W,
     .steps = 1000,
     .noise_ms = 6,
     .mode = SYNC_PHASE_ONLY,
     .fault = random_slow_steps,
     .ids = WANT(0)},
    {.name = "clean noisy run, unsynchronized",
     .seed = 104,
     .world = W,
     .steps = 1000,
     .noise_ms = 6,
     .mode = UNSYNCHRONIZED,
     .fault = random_slow_steps,
     .ids = WANT(0)},
    /* in a random order every rank is last by chance: none is a straggler;
     * in a fixed order the last pair is 4.5 ms (8 % of the step) behind
     * the median rank in every step, and both its ranks are named */
    {.name = "shared cores, random order",
     .seed = 22,
     .world = W,
     .steps = 200,
     .noise_ms = 0.5,
     .mode = SYNC_ARRIVAL,
     .fault = pairs_in_random_order,
     .ids = WANT(0)},
    {.name = "shared cores, fixed order",
     .seed = 22,
     .world = W,
     .steps = 200,
     .noise_ms = 0.5,
     .mode = SYNC_ARRIVAL,
     .fault = pairs_in_fixed_order,
     .min_rank = WANT(6),
     .finding = {.kind = "straggler", .count = WANT(2)}},
    {.name = "sparse views do no harm",
     .seed = 23,
     .world = W,
     .steps = 80,
     .noise_ms = 2,
     .mode = ALTERNATE,
     .edit = ranks_go_missing},
};

static void run_scenario(const scenario *sc)
{
    rng_state = sc->seed;
    found fd;
    ss_detectors *d = make(sc->world, &fd);
    REQUIRE(d);
    builder b;
    for (uint64_t s = 0; s < sc->steps; s++) {
        work w;
        base_work(&w, sc->world, sc->noise_ms);
        if (sc->fault)
            sc->fault(&w, s);
        int mode = sc->mode == ALTERNATE
                       ? (s % 2 ? SYNC_ARRIVAL : UNSYNCHRONIZED)
                       : sc->mode;
        build_step(&b, sc->world, s, &w, mode);
        if (sc->edit)
            sc->edit(&b, s);
        ss_detectors_step(d, &b.v, names);
    }
    int failures = testing_failures_;
    ROW_WANT(sc->name, sc->ids_before_finish, fd.n_ids);
    uint32_t before = fd.emissions;
    ss_detectors_finish(d, names);
    if (sc->finish_reports_again)
        ROW_CHECK(sc->name, fd.emissions == before + fd.n_ids);
    ROW_WANT(sc->name, sc->ids, fd.n_ids);
    check_finding_want(sc->name, &fd, &sc->finding);
    check_finding_want(sc->name, &fd, &sc->other);
    if (sc->min_rank.on)
        for (uint32_t i = 0; i < fd.n_ids; i++)
            ROW_CHECK(sc->name, fd.last[i].ranks[0] >= sc->min_rank.v);
    check_all_valid(&fd);
    if (testing_failures_ != failures)
        dump(&fd);
    ss_detectors_destroy(d);
}

static void every_scenario(void)
{
    size_t n = sizeof scenarios / sizeof scenarios[0];
    for (size_t i = 0; i < n; i++)
        run_scenario(&scenarios[i]);
    ss_detectors_destroy(NULL);
    printf("  %zu scenarios, %u expectations checked\n", n,
           finding_want_checked);
}

TEST_LIST(TEST(params_table), TEST(every_scenario))
