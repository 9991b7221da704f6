/*
 * detect_straggler_test.c - the straggler statistics on synthetic
 * data-parallel jobs of 2 to 64 ranks that meet at an all-reduce.
 *
 * Arrival noise is realistic rather than kind: 2 % Gaussian jitter of the
 * compute time, a fixed per-rank offset of up to 2 % (ranks on slightly
 * different hardware: not exchangeable), a heavy Pareto tail in 5 % of
 * rank-steps, and, for ranks outnumbering cores, an exponential run-queue
 * delay on every rank in every step.  The tests measure, over many seeded
 * runs, the false-alarm rate on clean jobs (at the default
 * straggler.alpha, and at a large alpha where the rate is measurable
 * against its bound) and the detection power for the two stragglers the
 * per-step rule missed: 35-40 ms late on a 112 ms step in 90 % of steps,
 * and 3 ms late on an 11 ms step in 78 % of steps.  Each prints its
 * numbers; docs/detectors.md quotes them.
 */
#include "detectors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "testing.h"

#define MS 1000000.0
#define MAX_RANKS 64
#define MAX_FOUND 64
/* Run-queue delay of the 112 ms case: at 0.15 the old per-step rule found
 * that straggler in 82 % of runs, as on the real job ("one run in five
 * ended with no finding").  Build with -DCASE1_QUEUE_FRAC=0.3 to see the
 * power under heavier contention. */
/* Seeds per configuration of the clean jobs; build with -DCLEAN_SEEDS=40
 * for the extended measurement docs/detectors.md quotes. */
#ifndef CLEAN_SEEDS
#define CLEAN_SEEDS 3
#endif
#ifndef CASE1_QUEUE_FRAC
#define CASE1_QUEUE_FRAC 0.15
#endif

enum { COMPUTE = 0, ALLREDUCE = 1, N_NAMES = 2 };
static const char *const names[N_NAMES] = {"compute", "allreduce"};

/* ---- random numbers ---- */

static uint64_t rng_state;

static double uniform(void) /* (0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
    return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

/* ---- one step of a job ---- */

typedef struct {
    int64_t phase[MAX_RANKS][N_NAMES], sync[MAX_RANKS][N_NAMES];
    double metric[MAX_RANKS][N_NAMES];
    ss_rank_step ranks[MAX_RANKS];
    ss_phase_stat phases[1];
    ss_sync_stat syncs[1];
    ss_step_view v;
} job_step;

/* SY: the statistics of sync point NAME of WORLD ranks arriving at
 * ARRIVALS (ns; reordered). */
static void fill_sync(ss_sync_stat *sy, int name, int64_t *arrivals,
                      uint32_t world)
{
    int64_t first = 0, latest = 0;
    for (uint32_t r = 0; r < world; r++) {
        if (r == 0 || arrivals[r] < first)
            first = arrivals[r];
        if (r == 0 || arrivals[r] > latest) {
            latest = arrivals[r];
            sy->worst_rank = (int32_t)r;
        }
    }
    sy->name = name;
    sy->n = world;
    sy->skew_ns = latest - first;
    sy->late_ns = latest - ss_median_i64(arrivals, world);
}

/* Step STEP of WORLD ranks: rank r computes COMPUTE_MS[r], arrives at the
 * all-reduce, and every rank leaves it 1 ms after the last arrival. */
static void build_step(job_step *b, uint32_t world, uint64_t step,
                       const double *compute_ms)
{
    memset(b, 0, sizeof *b);
    double last = 0;
    for (uint32_t r = 0; r < world; r++)
        if (compute_ms[r] > last)
            last = compute_ms[r];
    int64_t begin = (int64_t)step * 1000 * (int64_t)MS;
    int64_t vals[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        int64_t c = (int64_t)(compute_ms[r] * MS);
        b->phase[r][COMPUTE] = c;
        b->phase[r][ALLREDUCE] = (int64_t)((last + 1) * MS) - c;
        b->sync[r][COMPUTE] = SS_MISSING;
        b->sync[r][ALLREDUCE] = begin + c;
        b->metric[r][COMPUTE] = b->metric[r][ALLREDUCE] = NAN;
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = (int64_t)((last + 1) * MS);
        rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->begin_ns = begin;
        rs->phase_ns = b->phase[r];
        rs->sync_arrival_ns = b->sync[r];
        rs->metric = b->metric[r];
    }
    ss_step_view *v = &b->v;
    v->step = step;
    v->world_size = world;
    v->n_present = world;
    v->n_names = N_NAMES;
    v->ranks = b->ranks;
    for (uint32_t r = 0; r < world; r++)
        vals[r] = b->ranks[r].step_ns;
    ss_stat_compute(&v->step_time, vals, NULL, world);
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
    for (uint32_t r = 0; r < world; r++)
        vals[r] = b->phase[r][COMPUTE];
    b->phases[0].name = COMPUTE;
    ss_stat_compute(&b->phases[0].stat, vals, NULL, world);
    for (uint32_t r = 0; r < world; r++)
        vals[r] = b->sync[r][ALLREDUCE];
    fill_sync(&b->syncs[0], ALLREDUCE, vals, world);
    v->n_phases = 1;
    v->phases = b->phases;
    v->n_syncs = 1;
    v->syncs = b->syncs;
}

/* ---- jobs ---- */

typedef struct {
    uint32_t world, steps;
    double compute_ms;   /* median compute time per step */
    double queue_frac;   /* ranks outnumber cores: each waits for a core
                            an exponential time of this mean (fraction
                            of the compute time) in every step */
    int straggler;       /* its rank, or -1 */
    double late_lo_ms, late_hi_ms, late_frac; /* it is late by U(lo, hi)
                                                 in this fraction of steps */
    const char *alpha;   /* straggler.alpha, NULL: the default */
    const char *min_late_frac; /* straggler.min_late_frac, NULL: default */
    int exchangeable;    /* no fixed per-rank offsets */
    const char *noise_k; /* straggler.noise_k, NULL: the default */
    const char *min_cost_ms; /* straggler.min_cost_ms, NULL: the default */
} job;

typedef struct {
    uint32_t n;                         /* straggler findings */
    int32_t rank[MAX_FOUND];            /* by id - 1 */
    int persistent[MAX_FOUND];
    uint64_t first[MAX_FOUND];          /* its first step */
    double explained_ms[MAX_FOUND];     /* its phase's share; 0 none */
    char message[512];                  /* the first one's */
    uint32_t n_ids;
} found;

static void on_finding(void *ctx, const ss_finding *f)
{
    found *fd = ctx;
    if (strcmp(f->kind, "straggler") != 0 || f->id < 1 ||
        f->id > MAX_FOUND)
        return;
    fd->rank[f->id - 1] = f->n_ranks ? f->ranks[0] : -1;
    fd->persistent[f->id - 1] =
        strstr(f->evidence_json, "\"mode\":\"persistent\"") != NULL;
    fd->first[f->id - 1] = f->first_step;
    const char *ex = strstr(f->evidence_json, "\"explained_ms\":");
    fd->explained_ms[f->id - 1] = ex ? strtod(ex + 15, NULL) : 0;
    if (f->id == 1)
        snprintf(fd->message, sizeof fd->message, "%s", f->message);
    if (f->id > fd->n_ids)
        fd->n_ids = f->id;
}

/* Empties FD (rank -2 marks the ids of other kinds). */
static void found_reset(found *fd)
{
    memset(fd, 0, sizeof *fd);
    for (int i = 0; i < MAX_FOUND; i++)
        fd->rank[i] = -2;
}

/* Ends the job of detectors D fed from step buffer B (freed) over the
 * names STEP_NAMES; counts FD's straggler findings. */
static void end_job(ss_detectors *d, void *b, const char *const *step_names,
                    found *fd)
{
    ss_detectors_finish(d, step_names);
    ss_detectors_destroy(d);
    free(b);
    for (uint32_t i = 0; i < fd->n_ids; i++)
        fd->n += fd->rank[i] != -2;
}

/* Runs job J with seed SEED; fills FD with its straggler findings (rank
 * -2 marks the ids of other kinds). */
static void run_job(const job *j, uint64_t seed, found *fd)
{
    found_reset(fd);
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    ss_detector_config cfg;
    ss_detector_config_defaults(&cfg);
    char err[128];
    if (j->alpha)
        CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.alpha",
                                            j->alpha, err, sizeof err), 0);
    if (j->noise_k)
        CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.noise_k",
                                            j->noise_k, err, sizeof err), 0);
    if (j->min_cost_ms)
        CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.min_cost_ms",
                                            j->min_cost_ms, err, sizeof err),
                     0);
    if (j->min_late_frac)
        CHECK_EQ_INT(ss_detector_config_set(&cfg, "straggler.min_late_frac",
                                            j->min_late_frac, err,
                                            sizeof err), 0);
    ss_sink sink = {fd, NULL, on_finding};
    ss_detectors *d = ss_detectors_create(&cfg, j->world, 0, &sink);
    REQUIRE(d);
    double offset[MAX_RANKS], c[MAX_RANKS];
    for (uint32_t r = 0; r < j->world; r++)
        offset[r] = j->exchangeable ? 0 : 0.02 * j->compute_ms * uniform();
    job_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < j->steps; s++) {
        for (uint32_t r = 0; r < j->world; r++) {
            double x = j->compute_ms * (1 + 0.02 * gauss()) + offset[r];
            if (uniform() < 0.05) { /* Pareto tail, shape 1.5 */
                double tail = 0.02 * j->compute_ms * pow(uniform(), -1 / 1.5);
                x += tail < j->compute_ms ? tail : j->compute_ms;
            }
            if (j->queue_frac > 0) /* waiting for a core */
                x += -j->queue_frac * j->compute_ms * log(uniform());
            c[r] = x;
        }
        if (j->straggler >= 0 && uniform() < j->late_frac)
            c[j->straggler] += j->late_lo_ms +
                               (j->late_hi_ms - j->late_lo_ms) * uniform();
        build_step(b, j->world, s, c);
        ss_detectors_step(d, &b->v, names);
    }
    end_job(d, b, names, fd);
}

/* Whether FD holds a persistent finding on RANK and none on another. */
static int found_only(const found *fd, int32_t rank)
{
    int hit = 0;
    for (uint32_t i = 0; i < fd->n_ids; i++) {
        if (fd->rank[i] == -2)
            continue;
        if (fd->rank[i] != rank)
            return 0;
        hit |= fd->persistent[i];
    }
    return hit;
}

/* ---- tests ---- */

/*
 * Clean jobs of 2-64 ranks, compute 1-100 ms per step, with and without
 * more ranks than cores: at the defaults nothing may be found.  Then the
 * binomial test alone (straggler.min_late_frac 0 and straggler.noise_k 0,
 * so only the 50 us floor is left of the lateness bound) at alpha 0.05 on exchangeable ranks (no
 * fixed offsets, which that test would rightly see): the findings per
 * window of 100 steps stay within alpha, so the rule is calibrated and
 * not merely quiet.
 */
static void clean_jobs_false_alarm_rate(void)
{
    static const uint32_t worlds[] = {2, 3, 4, 8, 16, 32, 64};
    static const double computes[] = {1, 5, 20, 100};
    static const double queues[] = {0, 0.1, 0.3};
    const uint32_t seeds = CLEAN_SEEDS, steps = 600;
    for (int calibrate = 0; calibrate < 2; calibrate++) {
        uint32_t runs = 0, findings = 0, runs_with = 0;
        for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++)
            for (size_t c = 0; c < sizeof computes / sizeof *computes; c++)
                for (int q = 0; q < 3; q++)
                    for (uint32_t seed = 0; seed < seeds; seed++) {
                        job j = {worlds[w], steps, computes[c], queues[q],
                                 -1, 0, 0, 0, NULL, NULL, calibrate, NULL,
                                 NULL};
                        if (calibrate) {
                            j.alpha = "0.05";
                            j.min_late_frac = "0";
                            j.noise_k = "0";
                        }
                        found fd;
                        run_job(&j, 1000 * w + 100 * c + 10 * q + seed,
                                &fd);
                        runs++;
                        findings += fd.n;
                        runs_with += fd.n > 0;
                    }
        /* windows of 100 steps after the warm-up */
        double windows = runs * (steps - 3) / 100.0;
        fprintf(stderr, "    %s: %u straggler findings in %u clean runs "
                "(%u with any), %.0f windows: %.5f per window\n",
                calibrate ? "binomial test alone, alpha 0.05"
                          : "defaults (alpha 1e-4)",
                findings, runs, runs_with, windows, findings / windows);
        if (!calibrate)
            CHECK_EQ_INT(findings, 0);
        else
            CHECK(findings / windows <= 0.05);
    }
}

/* Rank 2 of 4 arrives 35-40 ms after the median rank in 90 % of steps of
 * a 112 ms step, ranks outnumbering cores; 60 steps. */
static void late_35ms_on_112ms_step_found(void)
{
    const uint32_t runs = 200;
    uint32_t hits = 0;
    for (uint32_t seed = 0; seed < runs; seed++) {
        job j = {4, 60, 72, CASE1_QUEUE_FRAC, 2, 35, 40, 0.90, NULL, NULL, 0, NULL, NULL};
        found fd;
        run_job(&j, 7000 + seed, &fd);
        hits += found_only(&fd, 2);
    }
    fprintf(stderr, "    35-40 ms on a 112 ms step, 90 %% of 60 steps: "
            "found in %u of %u runs\n", hits, runs);
    CHECK(hits >= runs * 99 / 100);
}

/* Rank 1 of 4 at nice 19: 3 ms after the median rank on an 11 ms step in
 * 78 % of 640 steps, ranks outnumbering cores.  The old rule's 5 ms floor
 * never found it. */
static void late_3ms_on_11ms_step_found(void)
{
    const uint32_t runs = 100;
    uint32_t hits = 0;
    for (uint32_t seed = 0; seed < runs; seed++) {
        job j = {4, 640, 8, 0.1, 1, 3, 3, 0.78, NULL, NULL, 0, NULL, NULL};
        found fd;
        run_job(&j, 8000 + seed, &fd);
        hits += found_only(&fd, 1);
    }
    fprintf(stderr, "    3 ms on an 11 ms step, 78 %% of 640 steps: "
            "found in %u of %u runs\n", hits, runs);
    CHECK(hits >= runs * 99 / 100);
}

/* The straggler is found wherever it sits: rank 0, the middle rank and
 * the last rank, in jobs of 2, 8 and 64 ranks (5 ms, about 20 % of the
 * step, in 85 % of steps; ranks outnumbering cores). */
static void every_rank_position_found(void)
{
    static const uint32_t worlds[] = {2, 8, 64};
    for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++) {
        uint32_t n = worlds[w];
        int32_t where[3] = {0, (int32_t)n / 2, (int32_t)n - 1};
        for (int p = 0; p < 3; p++) {
            job j = {n,    200,  20,   0.1,  where[p], 5,
                     5,    0.85, NULL, NULL, 0,        NULL, NULL};
            found fd;
            run_job(&j, 9000 + 10 * w + (uint64_t)p, &fd);
            if (!found_only(&fd, where[p]))
                fprintf(stderr, "    missed: rank %d of %u\n", where[p], n);
            CHECK(found_only(&fd, where[p]));
        }
    }
}

/*
 * Two ranks on a busy machine, each waiting an exponential 1.5 ms per
 * step for a core on a 3 ms compute; rank 1 arrives 0.9 ms later besides,
 * so it is last in ~73 % of steps, 30 % of a step late: main named it a
 * critical persistent straggler.  That lateness lies within the run-to-run
 * noise of arrival (a robust sigma of ~1.5 ms): no finding, on 2 and 4
 * ranks.  With straggler.noise_k 0 the same job is a straggler, so it is
 * this rule that keeps it quiet.  Of four ranks, 0.9 ms later keeps the
 * rank last in 0.6 to 0.65 of every 100 steps, which no clean run of four
 * ranks came near (0.43 of 80 steps at most) and dominant_last names
 * (four_ranks_one_last_in_two_steps_of_three_is_named); 0.6 ms, last in
 * about half of them, is within the noise.
 */
static void lateness_within_arrival_noise_is_no_straggler(void)
{
    for (uint32_t world = 2; world <= 4; world += 2)
        for (uint64_t seed = 0; seed < 5; seed++) {
            double late = world == 2 ? 0.9 : 0.6;
            job j = {world, 600, 3, 0.5, 1, late, late, 1.0, NULL, NULL, 1,
                     NULL, NULL};
            found fd;
            run_job(&j, 12000 + 10 * world + seed, &fd);
            if (fd.n)
                fprintf(stderr, "    %u ranks, seed %u: %u findings\n",
                        world, (unsigned)seed, fd.n);
            CHECK_EQ_INT(fd.n, 0);
        }
    job j = {2, 600, 3, 0.5, 1, 0.9, 0.9, 1.0, NULL, NULL, 1, "0", NULL};
    found fd;
    run_job(&j, 12020, &fd);
    CHECK(found_only(&fd, 1));
}

/* 300 steps of WORLD ranks from seed SEED, each arriving after a uniform
 * 28 to 52 ms; rank SLOW after SLOW_MS more, as scattered, or with
 * STEADY after 40 + SLOW_MS ms with 0.5 ms of noise.  Fills FD with the
 * straggler findings (rank -2 marks the ids of other kinds). */
static void run_scattered(uint32_t world, uint32_t slow, double slow_ms,
                          int steady, uint64_t seed, found *fd)
{
    rng_state = 0x9e3779b97f4a7c15ULL * seed;
    found_reset(fd);
    ss_sink sink = {fd, NULL, on_finding};
    ss_detectors *d = ss_detectors_create(NULL, world, 0, &sink);
    REQUIRE(d);
    job_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < 300; s++) {
        double c[MAX_RANKS];
        for (uint32_t r = 0; r < world; r++)
            c[r] = 40 + 24 * (uniform() - 0.5);
        if (steady)
            c[slow] = 40 + slow_ms + 0.5 * gauss();
        else
            c[slow] += slow_ms;
        build_step(b, world, s, c);
        ss_detectors_step(d, &b->v, names);
    }
    end_job(d, b, names, fd);
    if (!found_only(fd, (int32_t)slow))
        fprintf(stderr, "    %u ranks, seed %u: %u findings\n", world,
                (unsigned)seed, fd->n);
}

/* Four ranks over 150 steps; rank 3 sleeps on 2 cores: in about two
 * steps of three it arrives 4 to 26 ms after the median of its peers
 * (whose arrivals scatter by a sigma of 4 ms), in the others, the
 * scheduler making up for it, up to 10 ms before it.  It is last in
 * about 0.6 of the steps and late in most, but the lower bound of its
 * median lateness lies below a twentieth of the step; the median itself
 * is above it, and it is named (the lateness of a transformer's rank of
 * 4 on 2 cores sleeping 20 ms in its blocks' forward, as one run of the
 * accuracy matrix measured it; fails on the code before for one seed of
 * four). */
static void a_rank_last_in_most_steps_late_in_most_is_named(void)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        rng_state = 0x9e3779b97f4a7c15ULL * seed;
        found fd;
        found_reset(&fd);
        ss_sink sink = {&fd, NULL, on_finding};
        ss_detectors *d = ss_detectors_create(NULL, 4, 0, &sink);
        REQUIRE(d);
        job_step *b = malloc(sizeof *b);
        REQUIRE(b);
        for (uint64_t s = 0; s < 150; s++) {
            double c[MAX_RANKS];
            for (uint32_t r = 0; r < 3; r++)
                c[r] = 60 + 4 * gauss();
            double mid = c[0] + c[1] + c[2] - fmin(c[0], fmin(c[1], c[2])) -
                         fmax(c[0], fmax(c[1], c[2]));
            c[3] = mid + (uniform() < 0.64 ? 4 + 22 * uniform()
                                           : -10 * uniform());
            build_step(b, 4, s, c);
            ss_detectors_step(d, &b->v, names);
        }
        end_job(d, b, names, &fd);
        CHECK(found_only(&fd, 3));
        if (!found_only(&fd, 3))
            fprintf(stderr, "    seed %u: %u findings\n", (unsigned)seed,
                    fd.n);
    }
}

/* ---- steps of three names: two phases and a sync point, or a phase and
 * two sync points ---- */

enum { N_THREE = 3 };

typedef struct {
    int64_t phase[MAX_RANKS][N_THREE], sync[MAX_RANKS][N_THREE];
    double metric[MAX_RANKS][N_THREE];
    ss_rank_step ranks[MAX_RANKS];
    ss_phase_stat phases[2];
    ss_sync_stat syncs[2];
    ss_step_view v;
} three_name_step;

/* Makes rank R of B present in a step of STEP_MS, with B's phases and
 * sync arrivals of it and no metric. */
static void three_name_rank(three_name_step *b, uint32_t r, double step_ms)
{
    for (int i = 0; i < N_THREE; i++)
        b->metric[r][i] = NAN;
    ss_rank_step *rs = &b->ranks[r];
    rs->present = 1;
    rs->step_ns = (int64_t)(step_ms * MS);
    rs->rss_bytes = rs->device_bytes = rs->begin_ns = SS_MISSING;
    rs->phase_ns = b->phase[r];
    rs->sync_arrival_ns = b->sync[r];
    rs->metric = b->metric[r];
}

/* Fills B's view of step STEP of WORLD ranks made present by
 * three_name_rank: its step time, the phases of names 0 and 1, and the
 * first N_SYNCS sync points of B->syncs (filled by the caller). */
static void three_name_view(three_name_step *b, uint64_t step,
                            uint32_t world, uint32_t n_syncs)
{
    int64_t vals[MAX_RANKS];
    ss_step_view *v = &b->v;
    v->step = step;
    v->world_size = v->n_present = world;
    v->n_names = N_THREE;
    v->ranks = b->ranks;
    for (uint32_t r = 0; r < world; r++)
        vals[r] = b->ranks[r].step_ns;
    ss_stat_compute(&v->step_time, vals, NULL, world);
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
    for (int p = 0; p < 2; p++) {
        for (uint32_t r = 0; r < world; r++)
            vals[r] = b->phase[r][p];
        b->phases[p].name = p;
        ss_stat_compute(&b->phases[p].stat, vals, NULL, world);
    }
    v->n_phases = 2;
    v->phases = b->phases;
    v->n_syncs = n_syncs;
    v->syncs = b->syncs;
}

/* ---- two sync points in a step ---- */

enum { TWO_COMPUTE = 0, TWO_FIRST = 1, TWO_SECOND = 2 };
static const char *const two_names[N_THREE] = {"compute", "allreduce",
                                               "allreduce.2"};

/* Step STEP of WORLD ranks that all-reduce twice (a GAN's two networks):
 * rank r computes BEFORE_MS[r], arrives at "allreduce", and every rank
 * leaves it 1 ms after the last arrival; then it computes AFTER_MS[r],
 * arrives at "allreduce.2", and every rank leaves 1 ms after the last
 * arrival there.  Its "allreduce" phase holds both waits.  The step lists
 * the second sync point first when LATER_LISTED_FIRST. */
static void build_two_sync_step(three_name_step *b, uint32_t world,
                                uint64_t step, const double *before_ms,
                                const double *after_ms, int later_listed_first)
{
    memset(b, 0, sizeof *b);
    double leave = 0, end = 0;
    for (uint32_t r = 0; r < world; r++)
        if (before_ms[r] + 1 > leave)
            leave = before_ms[r] + 1;
    for (uint32_t r = 0; r < world; r++)
        if (leave + after_ms[r] + 1 > end)
            end = leave + after_ms[r] + 1;
    int64_t begin = (int64_t)step * 1000 * (int64_t)MS;
    int64_t first[MAX_RANKS], second[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        double work = before_ms[r] + after_ms[r];
        b->phase[r][TWO_COMPUTE] = (int64_t)(work * MS);
        b->phase[r][TWO_FIRST] = (int64_t)((end - work) * MS);
        b->phase[r][TWO_SECOND] = SS_MISSING;
        b->sync[r][TWO_COMPUTE] = SS_MISSING;
        b->sync[r][TWO_FIRST] = first[r] = begin + (int64_t)(before_ms[r] * MS);
        b->sync[r][TWO_SECOND] = second[r] =
            begin + (int64_t)((leave + after_ms[r]) * MS);
        three_name_rank(b, r, end);
    }
    fill_sync(&b->syncs[later_listed_first], TWO_FIRST, first, world);
    fill_sync(&b->syncs[!later_listed_first], TWO_SECOND, second, world);
    three_name_view(b, step, world, 2);
}

/* The builders of a step of two parts: rank r computes BEFORE_MS[r], then
 * AFTER_MS[r]; VARIANT is the builder's own. */
typedef void (*two_part_builder)(three_name_step *b, uint32_t world,
                                 uint64_t step, const double *before_ms,
                                 const double *after_ms, int variant);

/* 200 steps of 4 ranks of two parts built by BUILD over the names
 * STEP_NAMES, each part 10 ms (+-2 %); rank SLOW (-1: none) computes 6 ms
 * more in the first part when SLOW_BEFORE, else in the second.  Fills
 * FD. */
static void run_two_parts(two_part_builder build, const char *const *step_names,
                          int32_t slow, int slow_before, int variant,
                          uint64_t seed, found *fd)
{
    rng_state = 0x9e3779b97f4a7c15ULL * seed;
    found_reset(fd);
    ss_sink sink = {fd, NULL, on_finding};
    ss_detectors *d = ss_detectors_create(NULL, 4, 0, &sink);
    REQUIRE(d);
    three_name_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < 200; s++) {
        double before[MAX_RANKS], after[MAX_RANKS];
        for (uint32_t r = 0; r < 4; r++) {
            before[r] = 10 * (1 + 0.02 * gauss());
            after[r] = 10 * (1 + 0.02 * gauss());
        }
        if (slow >= 0)
            (slow_before ? before : after)[slow] += 6;
        build(b, 4, s, before, after, variant);
        ss_detectors_step(d, &b->v, step_names);
    }
    end_job(d, b, step_names, fd);
}

/* Two sync points a step (build_two_sync_step); rank SLOW computes more
 * before the first when FIRST, else before the second. */
static void run_two_syncs(int32_t slow, int first, uint64_t seed,
                          int later_listed_first, found *fd)
{
    run_two_parts(build_two_sync_step, two_names, slow, first,
                  later_listed_first, seed, fd);
}

/* A step with two sync points: a rank late only after the first (a GAN's
 * generator slower on one rank, between its discriminator's all-reduce
 * and its own) is named as one late before it is; a clean job has no
 * finding.  A rank's lateness is summed over the sync points, and the
 * one the finding names is the one reached first, in whatever order the
 * step lists them (the order names entered the run's table: a sharded
 * optimizer's broadcast may be named before the all-reduce that precedes
 * it in every step). */
static void lateness_after_the_first_sync_point_counts(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        found fd;
        run_two_syncs(2, 0, seed, 0, &fd);
        CHECK(found_only(&fd, 2));
        CHECK(strstr(fd.message, "reaches allreduce and the step's later "
                                 "sync point") != NULL);
        run_two_syncs(1, 1, seed, 0, &fd);
        CHECK(found_only(&fd, 1));
        run_two_syncs(1, 1, seed, 1, &fd);
        CHECK(found_only(&fd, 1));
        CHECK(strstr(fd.message, "reaches allreduce and the step's later "
                                 "sync point") != NULL);
        run_two_syncs(-1, 0, seed, 0, &fd);
        CHECK_EQ_INT(fd.n, 0);
    }
}

/* ---- a collective of the script's own beside the all-reduce ---- */

enum { OWN_COMPUTE = 0, OWN_COLLECTIVE = 1, OWN_SYNC = 2 };
static const char *const own_names[N_THREE] = {"compute", "all_reduce",
                                               "allreduce"};

/* Step STEP of WORLD ranks with an all_reduce of the script's own before
 * the all-reduce "allreduce" (a sync point): rank r computes BEFORE_MS[r]
 * and reaches the all_reduce, where it waits for the last rank of its
 * group (every rank; with PAIRS its pair, ranks 0 and 1, 2 and 3: tensor
 * parallelism inside data parallelism), leaves 0.5 ms after it, computes
 * AFTER_MS[r] and arrives at "allreduce"; every rank leaves it 1 ms after
 * the last arrival. */
static void build_own_collective_step(three_name_step *b, uint32_t world,
                                      uint64_t step, const double *before_ms,
                                      const double *after_ms, int pairs)
{
    memset(b, 0, sizeof *b);
    double leave[MAX_RANKS], end = 0;
    for (uint32_t r = 0; r < world; r++) {
        uint32_t lo = pairs ? r & ~1u : 0, hi = pairs ? lo + 2 : world;
        leave[r] = 0;
        for (uint32_t q = lo; q < hi && q < world; q++)
            if (before_ms[q] + 0.5 > leave[r])
                leave[r] = before_ms[q] + 0.5;
        if (leave[r] + after_ms[r] + 1 > end)
            end = leave[r] + after_ms[r] + 1;
    }
    int64_t begin = (int64_t)step * 1000 * (int64_t)MS;
    int64_t arrival[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        b->phase[r][OWN_COMPUTE] =
            (int64_t)((before_ms[r] + after_ms[r]) * MS);
        b->phase[r][OWN_COLLECTIVE] = (int64_t)((leave[r] - before_ms[r]) * MS);
        b->phase[r][OWN_SYNC] = SS_MISSING;
        b->sync[r][OWN_COMPUTE] = b->sync[r][OWN_COLLECTIVE] = SS_MISSING;
        b->sync[r][OWN_SYNC] = arrival[r] =
            begin + (int64_t)((leave[r] + after_ms[r]) * MS);
        three_name_rank(b, r, end);
    }
    fill_sync(&b->syncs[0], OWN_SYNC, arrival, world);
    three_name_view(b, step, world, 1);
}

/* 4 ranks computing 10 ms (+-2 %) before their all_reduce and 10 ms after
 * it (build_own_collective_step); rank SLOW (-1: none) computes 6 ms more
 * before it. */
static void run_own_collective(int32_t slow, int pairs, uint64_t seed,
                               found *fd)
{
    run_two_parts(build_own_collective_step, own_names, slow, 1, pairs, seed,
                  fd);
}

/* A rank's wait in a collective of the script's own is not its lateness,
 * and the others' wait there for it is: a rank slower before a loss
 * all-reduced for every rank (which evens the ranks out before the
 * all-reduce) is named, and so is a rank slower before its tensor-parallel
 * pair's all_reduce, not its pair, which reaches the data-parallel
 * all-reduce as late as it does; clean jobs have no finding. */
static void waits_in_the_script_s_collectives_are_not_lateness(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        found fd;
        run_own_collective(2, 0, seed, &fd);
        CHECK(found_only(&fd, 2));
        CHECK(strstr(fd.message, "counting the time the others waited for "
                                 "it in the script's own collectives") != NULL);
        run_own_collective(1, 1, seed, &fd);
        CHECK(found_only(&fd, 1));
        run_own_collective(2, 1, seed, &fd);
        CHECK(found_only(&fd, 2));
        run_own_collective(-1, 0, seed, &fd);
        CHECK_EQ_INT(fd.n, 0);
        run_own_collective(-1, 1, seed, &fd);
        CHECK_EQ_INT(fd.n, 0);
    }
}

/* Of three ranks whose arrival scatters by +-12 ms, rank 2 computes 10 ms
 * more in every step: its median lateness (about 6 ms, the median rank
 * being the later of its peers) is within their noise, yet it is the last
 * rank in most steps, which no noise alike for every rank does.  It is
 * named from its first window on (each step's chance to be last, 1/3,
 * summed as the float it is stored in, once came to a hair over a third
 * of the steps and read as fewer than three ranks). */
static void three_ranks_one_last_in_most_steps_is_named(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        found fd;
        run_scattered(3, 2, 10, 1, seed, &fd);
        CHECK(found_only(&fd, 2));
        CHECK(fd.n_ids == 1 && fd.persistent[0] && fd.first[0] < 40);
    }
}

/* Four ranks whose arrivals scatter by +-12 ms, rank 3 computing 9 ms
 * more, as scattered: it is last in about 0.62 of the steps, under the
 * three quarters that name a rank at once, and its median lateness is
 * within its peers' noise (a rank sleeping on an oversubscribed machine,
 * its core given away meanwhile).  Over 80 steps and more no noise alike
 * for every rank keeps one of four last that often: it is named, and no
 * other rank (before, for two seeds of three: no finding). */
static void four_ranks_one_last_in_two_steps_of_three_is_named(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        found fd;
        run_scattered(4, 3, 9, 0, seed, &fd);
        CHECK(found_only(&fd, 3));
        CHECK(fd.n_ids == 1 && fd.persistent[0]);
    }
}

/* How much more rank 1 computes in run_two_ranks' late steps, ms; and
 * the steps in which rank 0 computes 6 ms less (NULL: none). */
static double two_ranks_late_ms = 6;
static int (*two_ranks_fast)(uint64_t s);

/* STEPS steps of 2 ranks computing 20 ms (2 % noise) from seed SEED;
 * rank 1 computes two_ranks_late_ms more in the steps LATE says.  Fills
 * FD with the straggler findings. */
static void run_two_ranks(uint64_t seed, uint64_t steps,
                          int (*late)(uint64_t s), found *fd)
{
    rng_state = seed;
    found_reset(fd);
    ss_sink sink = {fd, NULL, on_finding};
    ss_detectors *d = ss_detectors_create(NULL, 2, 0, &sink);
    REQUIRE(d);
    job_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < steps; s++) {
        double c[2] = {20 * (1 + 0.02 * gauss()), 20 * (1 + 0.02 * gauss())};
        if (two_ranks_fast && two_ranks_fast(s))
            c[0] -= 6;
        if (late(s))
            c[1] += two_ranks_late_ms;
        build_step(b, 2, s, c);
        ss_detectors_step(d, &b->v, names);
    }
    ss_detectors_finish(d, names);
    ss_detectors_destroy(d);
    free(b);
}

static int every_step(uint64_t s)
{
    (void)s;
    return 1;
}

/* Of two ranks, the one that computes 6 ms more in every step is named
 * with all of them explained by its phase: the median of two lies halfway
 * between them, and the phase's excess is over the other rank, as the
 * lateness is; the message says so. */
static void two_ranks_phase_explains_the_whole_difference(void)
{
    found fd;
    run_two_ranks(7, 200, every_step, &fd);
    CHECK_EQ_INT(fd.n_ids, 1);
    CHECK_EQ_INT(fd.rank[0], 1);
    CHECK(fd.explained_ms[0] >= 5 && fd.explained_ms[0] <= 7.5);
    CHECK(strstr(fd.message, "after the other rank") != NULL);
    CHECK(strstr(fd.message, "longer than the other rank's") != NULL);
    CHECK(strstr(fd.message, "median rank") == NULL);
}

static int burst_150(uint64_t s)
{
    return s >= 150 && s < 180;
}

/* A 30-step burst on one of 2 ranks is transient: the sub-window grows to
 * the 17 steps in which 2 ranks can tell a burst from chance. */
static void transient_burst_on_two_ranks(void)
{
    found fd;
    run_two_ranks(31, 300, burst_150, &fd);
    CHECK_EQ_INT(fd.n_ids, 1);
    CHECK_EQ_INT(fd.rank[0], 1);
    CHECK_EQ_INT(fd.persistent[0], 0);
}

static int no_step(uint64_t s)
{
    (void)s;
    return 0;
}

/* Of two ranks, one computing 6 ms less for 30 steps (a phase of two
 * ranks of a clean job on 2 cores runs in 60 % of its time for a while)
 * leaves the other, at its usual pace, 6 ms late in every one of them:
 * no finding, where rank 1 computing 6 ms more in them is one; and rank 1
 * computing 6 ms more in every step while rank 0 is faster for a while
 * is named, and no other rank. */
static void the_other_rank_faster_for_a_while_is_no_straggler(void)
{
    found fd;
    for (uint64_t seed = 31; seed < 36; seed++) {
        two_ranks_fast = burst_150;
        run_two_ranks(seed, 300, no_step, &fd);
        CHECK_EQ_INT(fd.n_ids, 0);
        run_two_ranks(seed, 300, every_step, &fd);
        CHECK(fd.n_ids >= 1);
        for (uint32_t i = 0; i < fd.n_ids; i++)
            CHECK_EQ_INT(fd.rank[i], 1);
        two_ranks_fast = NULL;
        run_two_ranks(seed, 300, burst_150, &fd);
        CHECK_EQ_INT(fd.n_ids, 1);
        CHECK_EQ_INT(fd.rank[0], 1);
    }
}

static int burst_150_20(uint64_t s)
{
    return s >= 150 && s < 170;
}

/* A burst of two ranks that costs the job less than twice
 * straggler.min_cost_ms in all (20 steps 3 ms late: 60 ms, as two ranks'
 * scheduling alone makes in a clean job of 10 ms steps now and then) is
 * not a finding; 6 ms late (120 ms) is. */
static void a_burst_of_a_few_ms_in_all_is_not_reported(void)
{
    found fd;
    two_ranks_late_ms = 3;
    run_two_ranks(31, 300, burst_150_20, &fd);
    CHECK_EQ_INT(fd.n_ids, 0);
    two_ranks_late_ms = 6;
    run_two_ranks(31, 300, burst_150_20, &fd);
    CHECK_EQ_INT(fd.n_ids, 1);
    CHECK_EQ_INT(fd.rank[0], 1);
    CHECK_EQ_INT(fd.persistent[0], 0);
    two_ranks_late_ms = 6;
}

/* A persistent straggler is reported once its lateness has cost the job
 * straggler.min_cost_ms: 3 ranks of 0.4 ms steps, rank 1 late 0.1-0.2 ms
 * in 65 % of them (about 0.1 ms per step) is not worth a finding over 150
 * steps (with the floor at 0 it is), and is one over 800, from where its
 * cost began; 0.5-0.7 ms late in every step is one within 150. */
static void a_persistent_straggler_is_reported_once_it_costs_the_job(void)
{
    job j = {.world = 3, .steps = 150, .compute_ms = 0.4, .straggler = 1,
             .late_lo_ms = 0.1, .late_hi_ms = 0.2, .late_frac = 0.65};
    found fd;
    run_job(&j, 5, &fd);
    CHECK_EQ_INT(fd.n, 0);
    j.min_cost_ms = "0"; /* the floor is what kept it quiet */
    run_job(&j, 5, &fd);
    CHECK(found_only(&fd, 1));
    j.min_cost_ms = NULL;
    j.steps = 800; /* it adds up; the finding begins where its cost did */
    run_job(&j, 5, &fd);
    CHECK(found_only(&fd, 1));
    CHECK(fd.n_ids == 1 && fd.first[0] < 100);
    j.steps = 150;
    j.late_lo_ms = 0.5;
    j.late_hi_ms = 0.7;
    j.late_frac = 1;
    run_job(&j, 5, &fd);
    CHECK(found_only(&fd, 1));
}

static int burst_then_late(uint64_t s)
{
    return burst_150(s) || s >= 200;
}

/* A burst on rank 1 (steps 150-179), then from step 200 it stays late: the
 * persistent episode whose window holds the burst takes the burst's
 * finding over; one finding, from the burst's beginning. */
static void burst_then_persistent_is_one_finding(void)
{
    found fd;
    run_two_ranks(37, 400, burst_then_late, &fd);
    CHECK_EQ_INT(fd.n_ids, 1);
    CHECK_EQ_INT(fd.rank[0], 1);
    CHECK_EQ_INT(fd.persistent[0], 1);
    /* from the burst (its first late step, noise included), not from the
     * persistent episode's window */
    CHECK(fd.first[0] >= 100 && fd.first[0] < 160);
    if (fd.first[0] < 100 || fd.first[0] >= 160)
        fprintf(stderr, "  first step %" PRIu64 "\n", fd.first[0]);
}

/* Rank 1 is late up to step gap_from and again from gap_to on. */
static uint64_t gap_from, gap_to;
static int late_but_a_gap(uint64_t s)
{
    return s < gap_from || s >= gap_to;
}

/* A persistent straggler that lets up for a while: back within the
 * window, its episode goes on as the same finding; back only after a
 * window and more, it is a new one. */
static void a_gap_within_the_window_is_one_finding(void)
{
    found fd;
    gap_from = 200;
    gap_to = 270; /* the episode ends in the gap and opens again */
    run_two_ranks(41, 600, late_but_a_gap, &fd);
    CHECK_EQ_INT(fd.n_ids, 1);
    CHECK_EQ_INT(fd.rank[0], 1);
    CHECK_EQ_INT(fd.persistent[0], 1);
    CHECK(fd.first[0] < 100);
    gap_to = 400; /* its last late step left the window long before */
    run_two_ranks(41, 600, late_but_a_gap, &fd);
    CHECK_EQ_INT(fd.n_ids, 2);
}

/* ---- clocks aligned across hosts ---- */

/* The last straggler finding's final form. */
typedef struct {
    uint32_t n;
    ss_finding f;
} last_finding;

static void keep_straggler(void *ctx, const ss_finding *f)
{
    last_finding *lf = ctx;
    if (strcmp(f->kind, "straggler") == 0) {
        lf->n++;
        lf->f = *f;
    }
}

/* Edits of four_rank_job's steps: BEFORE may change step S's compute
 * times C (and the detectors D), AFTER the step B built from them; either
 * may be NULL. */
typedef struct {
    void (*before)(void *ctx, ss_detectors *d, uint64_t s, double *c);
    void (*after)(void *ctx, uint64_t s, job_step *b);
    void *ctx;
} step_edits;

/* STEPS steps of 4 ranks that meet at an all-reduce after 20 ms of compute
 * (1 % jitter, random numbers seeded with SEED), through detectors with
 * the defaults that report to SINK, each step edited by E. */
static void four_rank_job(uint64_t seed, uint64_t steps, ss_sink *sink,
                          const step_edits *e)
{
    rng_state = seed;
    ss_detectors *d = ss_detectors_create(NULL, 4, 0, sink);
    REQUIRE(d);
    job_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < steps; s++) {
        double c[4];
        for (uint32_t r = 0; r < 4; r++)
            c[r] = 20 * (1 + 0.01 * gauss());
        if (e->before)
            e->before(e->ctx, d, s, c);
        build_step(b, 4, s, c);
        if (e->after)
            e->after(e->ctx, s, b);
        ss_detectors_step(d, &b->v, names);
    }
    ss_detectors_finish(d, names);
    ss_detectors_destroy(d);
    free(b);
}

/* ---- a straggler that fades ---- */

static void slow_rank2_from_50_to_250(void *ctx, ss_detectors *d,
                                      uint64_t s, double *c)
{
    (void)ctx;
    (void)d;
    if (s >= 50 && s < 250)
        c[2] += 8;
}

/* Rank 2 computes 8 ms more in steps 50 to 249 of 400, then as the
 * others: its finding keeps the words of its height (8 ms late, last in
 * (nearly) every step of a window inside the episode), not those of the
 * windows the episode fades out in, while its steps run to its end. */
static void a_fading_straggler_keeps_the_words_of_its_height(void)
{
    last_finding lf = {0};
    ss_sink sink = {&lf, NULL, keep_straggler};
    step_edits e = {slow_rank2_from_50_to_250, NULL, NULL};
    four_rank_job(77, 400, &sink, &e);
    REQUIRE(lf.n > 0);
    fprintf(stderr, "    %s\n", lf.f.message);
    CHECK_EQ_INT(lf.f.ranks[0], 2);
    CHECK(lf.f.last_step >= 249);
    CHECK(strstr(lf.f.message, "over 100 steps to step ") != NULL);
    unsigned long long to = 0;
    const char *at = strstr(lf.f.message, "to step ");
    REQUIRE(at && sscanf(at, "to step %llu", &to) == 1);
    CHECK(to >= 149 && to <= 270);
    unsigned last = 0;
    at = strstr(lf.f.message, "the last rank in ");
    REQUIRE(at && sscanf(at, "the last rank in %u of 100", &last) == 1);
    CHECK(last >= 88);
    const char *ev = strstr(lf.f.evidence_json, "\"late_ms_median\":");
    REQUIRE(ev);
    double late = atof(ev + strlen("\"late_ms_median\":"));
    CHECK(late > 6 && late < 10);
    /* what the test of its own lateness read: its peers' noise, well
     * below its lateness, and whether it was steady; no host evidence
     * was sent, so nothing of the host's */
    ev = strstr(lf.f.evidence_json, "\"peer_noise_ms\":");
    REQUIRE(ev);
    double noise = atof(ev + strlen("\"peer_noise_ms\":"));
    CHECK(noise >= 0 && noise < late / 2);
    CHECK(strstr(lf.f.evidence_json, "\"steady\":") != NULL);
    CHECK(strstr(lf.f.evidence_json, "host_lost_ms") == NULL);
    CHECK(strstr(lf.f.evidence_json, "cpu_over_median_ms") == NULL);
}

/* Every rank's compute scattered by a 4 ms sigma (a crowded machine's
 * phases), and rank 2 8 ms late before its compute, in code no phase
 * wraps. */
static void noisy_phases_late_8ms_before(void *ctx, ss_detectors *d,
                                         uint64_t s, double *c)
{
    (void)ctx;
    (void)d;
    (void)s;
    for (uint32_t r = 0; r < 4; r++)
        c[r] = fmax(5, c[r] + 4 * gauss());
    c[2] += 8;
}

static void late_8ms_outside_after(void *ctx, uint64_t s, job_step *b)
{
    (void)ctx;
    (void)s;
    int64_t vals[4];
    b->phase[2][COMPUTE] -= (int64_t)(8 * MS);
    for (uint32_t r = 0; r < 4; r++)
        vals[r] = b->phase[r][COMPUTE];
    ss_stat_compute(&b->phases[0].stat, vals, NULL, 4);
}

/* Rank 2 of 4 late 8 ms in code no phase wraps, while every rank's compute
 * phase scatters by a 4 ms sigma: its compute exceeds the median rank's
 * in about half of its late steps, by the noise's upper half (~3 ms)
 * there, which the phase's own steps alone would credit it with (a
 * quarter of the lateness and more: "its compute phase explains 3 ms";
 * the real case, a rank of 8 sleeping after its optimizer step on 2
 * cores, had its backward blamed so).  Over every late step the phase
 * explains nothing: no phase named, the lateness said to be outside
 * them, for every seed. */
static void noise_in_a_phase_explains_no_lateness_outside_it(void)
{
    for (uint64_t seed = 1; seed <= 5; seed++) {
        last_finding lf = {0};
        ss_sink sink = {&lf, NULL, keep_straggler};
        step_edits e = {noisy_phases_late_8ms_before, late_8ms_outside_after,
                        NULL};
        four_rank_job(90 + seed, 300, &sink, &e);
        REQUIRE(lf.n > 0);
        CHECK_EQ_INT(lf.f.ranks[0], 2);
        CHECK_STR(lf.f.phase, "");
        CHECK(strstr(lf.f.message, "no phase it records accounts for it"));
        if (lf.f.phase[0])
            fprintf(stderr, "    seed %u: %s\n", (unsigned)seed,
                    lf.f.message);
    }
}

/* ---- a rank slower at everything ---- */

enum { FORWARD = 0, BACKWARD = 1, REDUCE = 2 };
static const char *const phased_names[N_THREE] = {"forward", "backward",
                                                  "allreduce"};

/* Step STEP of WORLD ranks: rank r runs forward for FWD_MS[r], then
 * backward for BWD_MS[r], and arrives at the all-reduce, which every rank
 * leaves 1 ms after the last arrival (the wait is no phase of theirs). */
static void build_phased_step(three_name_step *b, uint32_t world,
                              uint64_t step, const double *fwd_ms,
                              const double *bwd_ms)
{
    memset(b, 0, sizeof *b);
    double last = 0;
    for (uint32_t r = 0; r < world; r++)
        last = fmax(last, fwd_ms[r] + bwd_ms[r]);
    int64_t begin = (int64_t)step * 1000 * (int64_t)MS, arrivals[MAX_RANKS];
    for (uint32_t r = 0; r < world; r++) {
        b->phase[r][FORWARD] = (int64_t)(fwd_ms[r] * MS);
        b->phase[r][BACKWARD] = (int64_t)(bwd_ms[r] * MS);
        b->phase[r][REDUCE] = SS_MISSING;
        b->sync[r][FORWARD] = b->sync[r][BACKWARD] = SS_MISSING;
        b->sync[r][REDUCE] = arrivals[r] = begin + b->phase[r][FORWARD] +
                                           b->phase[r][BACKWARD];
        three_name_rank(b, r, last + 1);
    }
    fill_sync(&b->syncs[0], REDUCE, arrivals, world);
    three_name_view(b, step, world, 1);
}

/* 300 steps of WORLD ranks running forward 3 ms and backward 6 ms (2 %
 * jitter), rank 1 with its forward and backward times multiplied by
 * FWD_X and BWD_X and SLEEP_MS added to its forward; the last straggler
 * finding in LF. */
static void phased_job(uint32_t world, double fwd_x, double bwd_x,
                       double sleep_ms, last_finding *lf)
{
    rng_state = 4242;
    ss_sink sink = {lf, NULL, keep_straggler};
    ss_detectors *d = ss_detectors_create(NULL, world, 0, &sink);
    REQUIRE(d);
    three_name_step *b = malloc(sizeof *b);
    REQUIRE(b);
    for (uint64_t s = 0; s < 300; s++) {
        double f[MAX_RANKS], w[MAX_RANKS];
        for (uint32_t r = 0; r < world; r++) {
            f[r] = 3 * (1 + 0.02 * gauss());
            w[r] = 6 * (1 + 0.02 * gauss());
        }
        f[1] = f[1] * fwd_x + sleep_ms;
        w[1] *= bwd_x;
        build_phased_step(b, world, s, f, w);
        ss_detectors_step(d, &b->v, phased_names);
    }
    ss_detectors_finish(d, phased_names);
    ss_detectors_destroy(d);
    free(b);
}

/* Rank 1 whose forward and backward both take 1.5 times as long (a
 * slower CPU; the real case: two ranks on 2 cores, one of them with every
 * phase 1.4 to 1.6 times as long for 50 steps) is said to be slower at
 * everything, against the median rank of 4 and against the other of 2;
 * a rank that sleeps 4.5 ms in its forward (as late, one phase) is not,
 * nor one whose backward alone is 1.75 times as long. */
static void a_rank_slower_at_everything_is_said(void)
{
    const uint32_t worlds[] = {4, 2};
    for (size_t i = 0; i < 2; i++) {
        last_finding lf = {0};
        phased_job(worlds[i], 1.5, 1.5, 0, &lf);
        REQUIRE(lf.n > 0);
        fprintf(stderr, "    %s\n", lf.f.message);
        CHECK_EQ_INT(lf.f.ranks[0], 1);
        CHECK(strstr(lf.f.message, "each of its phases took 1.4x or more of "
                                   "the") != NULL);
        CHECK(strstr(lf.f.message, "slower at everything") != NULL);
        CHECK(strstr(lf.f.message, worlds[i] == 2 ? "the other rank's time"
                                                  : "the median rank's time"));
        const char *ev = strstr(lf.f.evidence_json, "\"slower_in_all\":");
        REQUIRE(ev);
        double all = atof(ev + strlen("\"slower_in_all\":"));
        CHECK(all > 1.4 && all < 1.6);
        CHECK(strstr(lf.f.evidence_json, "\"slower_every_phase\":1.4") ||
              strstr(lf.f.evidence_json, "\"slower_every_phase\":1.5"));

        memset(&lf, 0, sizeof lf);
        phased_job(worlds[i], 1, 1, 4.5, &lf);
        REQUIRE(lf.n > 0);
        CHECK_EQ_INT(lf.f.ranks[0], 1);
        CHECK_STR(lf.f.phase, "forward");
        CHECK(strstr(lf.f.message, "slower at everything") == NULL);
        CHECK(strstr(lf.f.evidence_json, "slower_") == NULL);

        memset(&lf, 0, sizeof lf);
        phased_job(worlds[i], 1, 1.75, 0, &lf);
        REQUIRE(lf.n > 0);
        CHECK_STR(lf.f.phase, "backward");
        CHECK(strstr(lf.f.message, "slower at everything") == NULL);
    }
}

typedef struct {
    double late_ms;
    const int64_t *bound;
    uint64_t set_at;
} clock_plan;

static void clock_before(void *ctx, ss_detectors *d, uint64_t s, double *c)
{
    const clock_plan *p = ctx;
    if (p->bound && s == p->set_at)
        for (uint32_t r = 0; r < 4; r++)
            CHECK_EQ_INT(ss_detectors_set_clock_bound(d, r, p->bound[r]), 0);
    c[2] += p->late_ms;
}

/* Rank 2 of 4 reaches the all-reduce LATE_MS after the others (20 ms
 * steps, 1 % jitter) in each of 200 steps; BOUND[r] (NULL: none set) is
 * each rank's clock error bound, set after SET_AT steps (0: before the
 * first).  Fills LF with the straggler finding. */
static void clock_job(double late_ms, const int64_t *bound, uint64_t set_at,
                      last_finding *lf)
{
    memset(lf, 0, sizeof *lf);
    clock_plan p = {late_ms, bound, set_at};
    ss_sink sink = {lf, NULL, keep_straggler};
    step_edits e = {clock_before, NULL, &p};
    four_rank_job(77, 200, &sink, &e);
}

static void late_3ms_before(void *ctx, ss_detectors *d, uint64_t s,
                            double *c)
{
    c[2] += 3;
}

/* The 3 ms of rank 2 taken out of its compute phase: spent before it. */
static void late_outside_after(void *ctx, uint64_t s, job_step *b)
{
    int64_t vals[4];
    b->phase[2][COMPUTE] -= (int64_t)(3 * MS);
    for (uint32_t r = 0; r < 4; r++)
        vals[r] = b->phase[r][COMPUTE];
    ss_stat_compute(&b->phases[0].stat, vals, NULL, 4);
}

/* Rank 2 of 4 reaches the all-reduce 3 ms late in every step of 200 (20 ms
 * steps, 1 % jitter), the time in its compute phase (IN_PHASE) or before
 * it, in code no phase wraps.  Fills LF with the straggler finding. */
static void late_where_job(int in_phase, last_finding *lf)
{
    memset(lf, 0, sizeof *lf);
    ss_sink sink = {lf, NULL, keep_straggler};
    step_edits e = {late_3ms_before, in_phase ? NULL : late_outside_after,
                    NULL};
    four_rank_job(78, 200, &sink, &e);
}

/* A straggler whose phases are as long as every other rank's is late
 * outside them, and its finding says so (none of it blamed on a phase);
 * one late in its compute phase has that phase named and no such words. */
static void lateness_outside_every_phase_is_said(void)
{
    last_finding outside, inside;
    late_where_job(0, &outside);
    late_where_job(1, &inside);
    REQUIRE(outside.n > 0 && inside.n > 0);
    CHECK_EQ_INT(outside.f.ranks[0], 2);
    CHECK_STR(outside.f.phase, "");
    CHECK(strstr(outside.f.message, "no phase it records accounts for it"));
    CHECK(strstr(outside.f.evidence_json, "\"outside_phases\":1"));
    CHECK_EQ_INT(inside.f.ranks[0], 2);
    CHECK_STR(inside.f.phase, "compute");
    CHECK(strstr(inside.f.message, "no phase") == NULL);
    CHECK(strstr(inside.f.evidence_json, "outside_phases") == NULL);
}

/* In the steps listed in AT, rank RANK[i] reaches the all-reduce
 * LATE_MS[i] late (a rank < 0: none). */
typedef struct {
    uint64_t step;
    int rank;
    double late_ms;
} wait_at;

typedef struct {
    const wait_at *at;
    size_t n;
} waits;

static void waits_before(void *ctx, ss_detectors *d, uint64_t s, double *c)
{
    const waits *w = ctx;
    for (size_t i = 0; i < w->n; i++)
        if (w->at[i].step == s && w->at[i].rank >= 0)
            c[w->at[i].rank] += w->at[i].late_ms;
}

/* Four ranks of 20 ms steps (1 % jitter) for 300 steps with the waits of
 * AT[0..N_AT).  Every finding kept in FD. */
static void rare_job(const wait_at *at, size_t n_at, found *fd)
{
    found_reset(fd);
    waits w = {at, n_at};
    ss_sink sink = {fd, NULL, on_finding};
    step_edits e = {waits_before, NULL, &w};
    four_rank_job(91, 300, &sink, &e);
    for (uint32_t i = 0; i < fd->n_ids; i++)
        fd->n += fd->rank[i] != -2;
}

/* A rank that makes the others wait 2 s every 50 steps (an evaluation on
 * rank 3 alone) is named, once (main: no finding: too few steps for the
 * tests of chance); so is one every 120 steps, one wait per window.  The
 * same waits spread over every rank, one wait alone, and a rank 3 s late
 * into the first step only (start-up), are not. */
static void rare_long_waits_are_named(void)
{
    wait_at every50[5];
    for (int i = 0; i < 5; i++)
        every50[i] = (wait_at){(uint64_t)(49 + 50 * i), 3, 2000};
    found fd;
    rare_job(every50, 5, &fd);
    CHECK_EQ_INT(fd.n, 1);
    CHECK_EQ_INT(fd.rank[0], 3);
    CHECK(fd.first[0] == 49 || fd.first[0] == 99);

    wait_at spread[5];
    for (int i = 0; i < 5; i++)
        spread[i] = (wait_at){(uint64_t)(49 + 50 * i), i % 4, 2000};
    rare_job(spread, 5, &fd);
    CHECK_EQ_INT(fd.n, 0);

    wait_at every120[2] = {{100, 0, 2000}, {220, 0, 2000}};
    rare_job(every120, 2, &fd);
    CHECK_EQ_INT(fd.n, 1);
    CHECK_EQ_INT(fd.rank[0], 0);

    rare_job(every120, 1, &fd);
    CHECK_EQ_INT(fd.n, 0);

    wait_at startup[1] = {{0, 1, 3000}};
    rare_job(startup, 1, &fd);
    CHECK_EQ_INT(fd.n, 0);
}

/* With every bound 0 (one host) message and evidence are those of a run
 * that never heard of clocks, byte for byte. */
static void zero_clock_bounds_change_nothing(void)
{
    static const int64_t zero[4] = {0, 0, 0, 0};
    last_finding plain, zeroed;
    clock_job(3, NULL, 0, &plain);
    clock_job(3, zero, 0, &zeroed);
    REQUIRE(plain.n > 0);
    CHECK_STR(zeroed.f.message, plain.f.message);
    CHECK_STR(zeroed.f.evidence_json, plain.f.evidence_json);
    CHECK(strstr(plain.f.message, "clocks") == NULL);
    CHECK(strstr(plain.f.evidence_json, "clock") == NULL);
}

/* Ranks on another host (bound 0.3 ms): a 3 ms straggler is named as
 * before, with the bound stated in its message and evidence; the largest
 * bound among the ranks compared counts, whether it is the straggler's or
 * a reference rank's, and the latest value set is the one used. */
static void clock_bound_stated(void)
{
    static const int64_t on_other_host[4] = {0, 0, 300000, 300000};
    static const int64_t reference_off[4] = {0, 300000, 0, 120000};
    last_finding plain, lf;
    clock_job(3, NULL, 0, &plain);
    REQUIRE(plain.n > 0);
    clock_job(3, on_other_host, 0, &lf);
    REQUIRE(lf.n > 0);
    fprintf(stderr, "    %s\n    %s\n", lf.f.message, lf.f.evidence_json);
    CHECK_EQ_INT(lf.f.ranks[0], 2);
    CHECK(strncmp(lf.f.message, "rank 2 is a persistent straggler", 32) ==
          0);
    CHECK(strstr(lf.f.message,
                 "after the median rank (clocks aligned \u00b1 0.3 ms); "));
    CHECK(strstr(lf.f.evidence_json, "\"clock_bound_ns\":300000"));
    CHECK(strstr(lf.f.evidence_json, "clock_uncertain") == NULL);
    CHECK_EQ_INT(lf.f.severity, plain.f.severity);
    /* the rest of the message is the single-host one */
    const char *cut = strstr(plain.f.message, "after the median rank");
    const char *cut2 = strstr(lf.f.message, "after the median rank");
    REQUIRE(cut && cut2);
    CHECK_EQ_INT((int)(cut - plain.f.message), (int)(cut2 - lf.f.message));
    CHECK(strncmp(plain.f.message, lf.f.message,
                  (size_t)(cut - plain.f.message)) == 0);

    clock_job(3, reference_off, 0, &lf);
    REQUIRE(lf.n > 0);
    CHECK(strstr(lf.f.message, "(clocks aligned \u00b1 0.3 ms)"));

    clock_job(3, on_other_host, 150, &lf); /* set late in the run */
    REQUIRE(lf.n > 0);
    CHECK(strstr(lf.f.message, "(clocks aligned \u00b1 0.3 ms)"));
}

/* A lateness within the bound (1.5 ms late, clocks aligned to 2 ms) is
 * still reported, since it may be real, but as uncertain: "may be", the
 * reason in words, clock_uncertain in the evidence, never critical. */
static void lateness_within_bound_uncertain(void)
{
    static const int64_t loose[4] = {0, 0, 2000000, 2000000};
    last_finding plain, lf;
    clock_job(1.5, NULL, 0, &plain);
    REQUIRE(plain.n > 0);
    CHECK(strncmp(plain.f.message, "rank 2 is a persistent", 22) == 0);
    clock_job(1.5, loose, 0, &lf);
    REQUIRE(lf.n > 0);
    fprintf(stderr, "    %s\n    %s\n", lf.f.message, lf.f.evidence_json);
    CHECK_EQ_INT(lf.f.ranks[0], 2);
    CHECK(strncmp(lf.f.message, "rank 2 may be a persistent straggler",
                  36) == 0);
    CHECK(strstr(lf.f.message, "(clocks aligned \u00b1 2.0 ms), within the "
                               "clocks' error, so this is uncertain"));
    CHECK(strstr(lf.f.evidence_json,
                 "\"clock_bound_ns\":2000000,\"clock_uncertain\":1"));
    CHECK_EQ_INT(lf.f.severity, SS_WARNING);
    /* a 3 ms straggler at the same bound is not uncertain */
    clock_job(3, loose, 0, &lf);
    CHECK(strncmp(lf.f.message, "rank 2 is a persistent", 22) == 0);
    CHECK(strstr(lf.f.evidence_json, "clock_uncertain") == NULL);
}

/* A rank out of range or a negative bound is refused, nothing changed. */
static void clock_bound_bad_input(void)
{
    ss_detectors *d = ss_detectors_create(NULL, 4, 0, NULL);
    REQUIRE(d);
    CHECK_EQ_INT(ss_detectors_set_clock_bound(d, 4, 1000), -1);
    CHECK_EQ_INT(ss_detectors_set_clock_bound(d, 0, -1), -1);
    CHECK_EQ_INT(ss_detectors_set_clock_bound(d, 3, 0), 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(zero_clock_bounds_change_nothing), TEST(clock_bound_stated),
          TEST(a_burst_of_a_few_ms_in_all_is_not_reported),
          TEST(a_persistent_straggler_is_reported_once_it_costs_the_job),
          TEST(a_fading_straggler_keeps_the_words_of_its_height),
          TEST(lateness_outside_every_phase_is_said),
          TEST(noise_in_a_phase_explains_no_lateness_outside_it),
          TEST(a_rank_slower_at_everything_is_said),
          TEST(rare_long_waits_are_named),
          TEST(lateness_within_bound_uncertain), TEST(clock_bound_bad_input),
          TEST(clean_jobs_false_alarm_rate),
          TEST(late_35ms_on_112ms_step_found),
          TEST(late_3ms_on_11ms_step_found), TEST(every_rank_position_found),
          TEST(two_ranks_phase_explains_the_whole_difference),
          TEST(transient_burst_on_two_ranks),
          TEST(the_other_rank_faster_for_a_while_is_no_straggler),
          TEST(burst_then_persistent_is_one_finding),
          TEST(a_gap_within_the_window_is_one_finding),
          TEST(lateness_within_arrival_noise_is_no_straggler),
          TEST(three_ranks_one_last_in_most_steps_is_named),
          TEST(four_ranks_one_last_in_two_steps_of_three_is_named),
          TEST(lateness_after_the_first_sync_point_counts),
          TEST(waits_in_the_script_s_collectives_are_not_lateness),
          TEST(a_rank_last_in_most_steps_late_in_most_is_named))
