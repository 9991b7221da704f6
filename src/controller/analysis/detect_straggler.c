/*
 * detect_straggler.c - the straggler detector: a rank the other ranks wait
 * for, persistent or transient, and the phase that explains it.
 *
 * Each step every rank gets a lateness, by the first method that applies:
 * its arrival at the sync point most ranks reported against the median
 * arrival (summed over the step's sync points, where it has several);
 * without sync points, how much less it waits than the median
 * rank in the phase that holds the synchronization (found from the data;
 * where step boundaries scatter, its time outside that phase over the
 * median rank's);
 * otherwise how much longer its step takes than the median step.
 *
 * A rank is not judged step by step but on the distribution of its
 * lateness over a ring of the last straggler.window steps, against its
 * peers'.  It is a straggler when all of
 *   (a) it was the last rank more often than chance allows: a one-sided
 *       binomial test of its count of "last" steps against the 1/n a rank
 *       has in a step of n exchangeable ranks, at straggler.alpha split
 *       over the ranks (Bonferroni), and
 *   (b) the lower confidence bound of its median lateness (an order
 *       statistic: distribution-free) exceeds straggler.min_late_frac of
 *       the step time and the straggler.min_late_ms timer-slack floor;
 *   (c) the lateness is its own: its median exceeds straggler.noise_k
 *       robust sigmas of its peers' lateness (the run-to-run noise of
 *       arrival), or, of three ranks or more, its CPU time per step
 *       exceeds the median rank's by one such sigma (works_more), and
 *       the host's evidence does not explain it alike for every rank
 *       (every rank loses that much to the host per step, it does no
 *       more work, and the host names no cause of its own).
 * Over the whole window: persistent (one finding per episode, refreshed
 * while it lasts).  Over the newest straggler.transient_steps steps only,
 * at the same false-alarm rate per window: a transient burst, reported
 * when it ends (or is held back until the rank has been seen long enough
 * to tell it from the opening of a persistent episode), unless its
 * peers were faster for a while rather than it slower (others_faster).
 * An episode ends when the median lateness over its window falls below
 * straggler.end_frac of the step.  The phase a finding blames is the one
 * with the largest excess over the median rank's in most late steps,
 * compared by self time where the ranks report it (phases nest: a slow
 * backward must not hide behind the shorter all-reduce wait inside it).
 * It tells jitter how late the latest rank was in a synchronized step
 * (ss__step_notes.sync_late_ms).  docs/detectors.md, "straggler", states
 * every rule and default, and the false-alarm rate measured on clean runs.
 * A finding also names the host's cause when the host's evidence explains
 * the lateness (ss__host_explain, detect_host.c), and the load its
 * experts or embedding shard received when that explains it
 * (ss__workload_explain, detect_workload.h).  Where arrivals were
 * compared across hosts whose clocks were aligned with an error bound
 * (ss_detectors_set_clock_bound), the finding states the largest bound
 * among the ranks compared, and a median lateness within that bound is
 * called uncertain: a clock off by a steady amount makes its ranks look
 * steadily late, which the tests above cannot tell from a straggler.
 */
#include "detectors_internal.h"
#include "detect_host.h"
#include "detect_workload.h"
#include "detect_rl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

/* flags of a rank's ring entry: lateness measured; past the per-step
 * threshold (used for counts, blame and episode bounds, not to decide);
 * the one rank latest of all in that step; its blame compared self times;
 * late, with phases of its own to compare (besides the sync phase) whose
 * excesses together explain less than straggler.blame_frac of it */
enum {
    F_SEEN = 1, F_LATE = 2, F_LAST = 4, F_BLAME_SELF = 8, F_OUTSIDE = 16
};
enum { M_NONE = 0, M_ARRIVAL = 1, M_SYNC_PHASE = 2, M_STEP_TIME = 3 };

/* The peers whose run-to-run spread of lateness is the noise a straggler
 * must exceed: the first this many other ranks (bounded work per test). */
#define NOISE_PEERS 32

/* An open persistent episode stays its rank's own while the host's loss
 * alike for every rank explains less than this share of what would keep
 * one from opening: hysteresis, so that a rank near the line is one
 * finding, not many. */
#define OWN_HOLD 0.5

/* A lateness at least this share of its median in nine steps of ten is
 * steady: the host's waits alike for every rank do not explain it
 * (host_alike).  A wait of exponential length, as a run-queue delay is,
 * has its tenth percentile at 0.15 of its median. */
#define STEADY_SHARE 0.5

/* A rank last in at least this share of the steps of a window in which
 * it was one of three ranks or more is late of its own doing
 * (dominant_last): the host's waits and the noise of arrival, alike for
 * every rank, leave each rank last in at most about twice its chance
 * (0.42 of 4 ranks at most, over every clean run of the accuracy matrix,
 * loaded and oversubscribed ones too). */
#define DOMINANT_SHARE 0.75

/* Of three ranks, a rank that lost more to the host per step than the
 * median rank by this share of its median lateness or more is last of
 * the machine's doing, not its own (dominant_last). */
#define WAITED_SHARE 0.5

/* Among more ranks, where DOMINANT_SHARE is many times a rank's chance,
 * a rank last in DOMINANT_CHANCES times its chance and DOMINANT_FLOOR of
 * the steps or more, over DOMINANT_MORE_STEPS steps or more, is too: over
 * 50 steps the clean runs of 8 ranks on 2 cores beside busy loops left
 * one rank last in 0.38 of them at most (3.0 times its chance), a rank of
 * 8 sleeping 15-20 ms a step in 0.52 or more (0.49 over 100). */
#define DOMINANT_CHANCES 4.0
#define DOMINANT_FLOOR 0.5
#define DOMINANT_MORE_STEPS 50

/* Steps of fewer than this many ranks on average are steps of three (a
 * four-rank job's steps may miss a rank's arrival now and then). */
#define THREE_RANKS 3.5

/* Of four ranks or more, over DOMINANT_LONG_STEPS steps or more, a rank
 * last in DOMINANT_LONG_SHARE of them is too: over any 80 steps the clean
 * runs of 4 ranks (loaded, oversubscribed, short and transformer steps)
 * left one rank last in 0.43 of them at most; a rank of 4 sleeping 20 ms
 * a step on 2 cores was last in 0.67 to 0.83 of them, and, its lateness
 * scattering as widely as its peers', went unnamed now and then while it
 * stayed under DOMINANT_SHARE. */
#define DOMINANT_LONG_SHARE 0.6
#define DOMINANT_LONG_STEPS 80

/* Of three ranks or more, over CPU_EXCESS_STEPS steps or more, a rank whose
 * median CPU time per step exceeds the median rank's by CPU_EXCESS_SIGMAS
 * of its peers' noise of lateness or more does work of its own that its
 * lateness comes from, though the noise hides it (works_more): over any 50
 * steps of the clean runs of 3, 4 and 8 ranks of the accuracy matrix
 * (loaded and oversubscribed too; CPU time from schedstat) no rank's came
 * to a fifth of that noise (0.18 at most); over its most telling 50 steps,
 * a rank of four computing 3 ms more of an 11 ms step came to 1.8 times
 * it, a rank of eight computing more in its forward to 2.0, a rank of
 * three computing 10 ms more of 28 ms to 2.9, while the scheduler, which
 * let their peers wait for a CPU meanwhile, kept their median lateness
 * within the noise.  One whose excess reaches CPU_EXCESS_CLEAR_SIGMAS
 * needs only its median lateness over the line of test (b), not the lower
 * bound of it: the rank of three computing 10 ms more was late by less
 * than a twentieth of a step in two steps of five, the scheduler making
 * up for its work in those. */
#define CPU_EXCESS_SIGMAS 1.0
#define CPU_EXCESS_CLEAR_SIGMAS 2.0
#define CPU_EXCESS_STEPS 50

/* A rank slower at everything (phase_ratios, slower_clause): in its late
 * steps, every phase on which the reference rank spends SLOWER_PHASE_SHARE
 * of the median step or more (the synchronization's own phase aside) took
 * SLOWER_EVERY times the reference rank's or more, as a moving average of
 * weight SLOWER_WEIGHT over SLOWER_STEPS late steps or more.  Two ranks of
 * a clean job on 2 cores of a virtual machine, one late for 30 to 50
 * steps with every phase 1.4 to 1.6 times as long and more CPU per step,
 * then the other or neither, are a CPU slower for a while; a rank that
 * sleeps or computes more in one phase is 1.0 in the others. */
#define SLOWER_PHASE_SHARE 0.05
#define SLOWER_EVERY 1.2
#define SLOWER_WEIGHT 0.1
#define SLOWER_STEPS 10

/* The other ranks faster for a while (others_faster): over a transient
 * burst, the other ranks reach the sync point FASTER_SHARE of the burst's
 * median lateness or more sooner after their steps' begins than they
 * usually do (their median over the window), while the rank named
 * reaches it less than FASTER_SHARE of it later than it usually does.
 * Two ranks of a clean job on 2 cores of a virtual machine take turns at
 * running a phase in 60 % of its time for 15 to 30 steps (a backward of
 * 30 ms in 18 to 20 ms), and the other one, at its usual pace, looks
 * late by that much. */
#define FASTER_SHARE 0.5
#define FASTER_MIN_STEPS 5

/* Leads are kept (4 bytes per rank and window step) in jobs of up to this
 * many ranks: the ranks but one faster together is a job of few ranks'
 * doing, and at 131,072 ranks the ring would take 50 MiB. */
#define LEAD_MAX_RANKS 4096

/* Rare waits (judge_rare): a step whose last rank made the others wait at
 * least RARE_MEDIANS typical steps and RARE_FLOOR_MS; a rank whose rare
 * waits make up RARE_SHARE of the window's time, and RARE_OWN of every
 * rank's rare waits in it, is named. */
#define RARE_MEDIANS 5.0
#define RARE_FLOOR_MS 20.0
#define RARE_SHARE 0.2
#define RARE_OWN 0.8

typedef struct {
    /* running counts over the whole ring, and over its newest sub slots */
    uint32_t seen, last, seen_sub, last_sub;
    double chance, chance_sub; /* sum of 1/n over the seen steps: how
                                  often it would be last by chance */
    int32_t persistent;        /* finding of the open persistent episode */
    int burst;                 /* a transient burst is open */
    uint64_t burst_first, burst_last;
    ss_finding *pending;       /* a closed burst awaiting judgement */
    int32_t burst_finding;     /* the last burst published, -1 */
    uint64_t burst_finding_last; /* its last step */
    double height_ms;          /* the open (or last) persistent episode's
                                  largest strength (ss__words_at_height) */
    int32_t ended;             /* the last persistent episode's, -1 */
    uint64_t ended_last;       /* its last step */
    double cost_ms;            /* without an open persistent episode, the
                                  lateness of its late steps since the
                                  tests held (the window's, then each
                                  step's) while they held within a
                                  window; -1 when they did not */
    uint64_t cost_held;        /* the step they last held at */
    uint64_t cost_first;       /* the first late step counted */
    int32_t rare;              /* the finding of its rare waits, -1 */
    uint64_t rare_last;        /* its last step */
    uint32_t rare_waits;       /* its rare waits since the start */
    /* over its late steps with two phases or more to compare
     * (phase_ratios): the smallest ratio of a phase's time to the
     * reference rank's, and the ratio of their sums, each a moving
     * average (SLOWER_WEIGHT); how many steps fed them */
    double slower_min, slower_all;
    uint32_t slower_n;
} strag_rank;

typedef struct {
    uint32_t world;
    uint32_t sw, sub, head, fill; /* ring of sw steps; head: next slot */
    /* per ring slot */
    uint64_t *step;
    float *med_ms, *chance;
    float *med_host_ms; /* the median rank's loss to the host; NaN unknown */
    uint8_t *method;
    uint8_t *points;    /* by arrival: the sync points summed (up to 255) */
    uint8_t *waits;     /* by arrival: the ranks' waits in the script's own
                           collectives were taken out
                           (collective_waits_out) */
    ss__name_idx *ref;
    int32_t *last_of;   /* the step's last rank; -1 none */
    uint32_t rare_waits; /* every rank's rare waits since the start */
    /* per rank and ring slot: [rank * sw + slot] */
    float *late_ms, *expl_ms;
    float *cpu_ex_ms; /* its CPU time over the median rank's; NaN unknown */
    float *host_ms;   /* what it lost to the host; NaN unknown */
    float *cpu_ms;    /* its CPU time; NaN unknown */
    float *lead_ms;   /* by arrival: from its step's begin to its arrival
                         at the reference sync point; NaN unknown; read
                         where F_SEEN; NULL over LEAD_MAX_RANKS ranks */
    ss__name_idx *blame;
    uint8_t *flags;
    strag_rank *rank;  /* world */
    int32_t *bound_at; /* per sample count 0..sw: the order statistic that
                          bounds the median, 0 none, -1 not computed */
    /* scratch */
    double *f64;  /* max(world, 4 * sw) + NOISE_PEERS */
    int64_t *i64; /* 2 * world: the step's lateness, then arrivals */
} straggler;

/* A scope of the ring: the steps of the newest NBACK slots whose step
 * number lies in [LO, HI]. */
typedef struct {
    uint32_t nback;
    uint64_t lo, hi;
} scope;

/* Whether ring slot K of a rank whose flags are FLAGS was seen in a step of
 * scope SC (the slot being one of the scope's newest NBACK). */
static int seen_in(const straggler *sg, const uint8_t *flags, uint32_t k,
                   const scope *sc)
{
    return (flags[k] & F_SEEN) && sg->step[k] >= sc->lo &&
           sg->step[k] <= sc->hi;
}

static const char *method_name(int m)
{
    return m == M_ARRIVAL      ? "arrival"
           : m == M_SYNC_PHASE ? "sync_phase"
                               : "step_time";
}

/* The largest J (1-based) such that the J-th smallest of N samples lies
 * below their population median with probability >= 1 - BETA, i.e.
 * P(Binomial(N, 1/2) <= J - 1) <= BETA; 0 when even the smallest does not
 * (N too small for that confidence).  Cached per N. */
static uint32_t median_bound_index(straggler *sg, uint32_t n, double beta)
{
    if (n > sg->sw)
        return 0;
    if (sg->bound_at[n] >= 0)
        return (uint32_t)sg->bound_at[n];
    double log_term = -(double)n * log(2.0), cdf = 0;
    uint32_t j = 0;
    for (uint32_t i = 0; i < n; i++) {
        cdf += exp(log_term);
        if (cdf > beta)
            break;
        j = i + 1;
        log_term += log((double)(n - i) / (i + 1.0));
    }
    sg->bound_at[n] = (int32_t)j;
    return j;
}

/* Rank R's lateness in ring slot K, less FRAC of that step's median step
 * time and at least FLOOR_MS: > 0 when it is later than that. */
static double excess_ms(const straggler *sg, uint32_t r, uint32_t k,
                        double frac, double floor_ms)
{
    double thr = frac * sg->med_ms[k];
    return sg->late_ms[(size_t)r * sg->sw + k] -
           (thr > floor_ms ? thr : floor_ms);
}

/* Fills the scratch with rank R's excess (excess_ms) over the seen steps
 * of scope SC; returns how many. */
static uint32_t gather_excess(straggler *sg, uint32_t r, const scope *sc,
                              double frac, double floor_ms)
{
    uint32_t n = 0;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (seen_in(sg, flags, k, sc))
            sg->f64[n++] = excess_ms(sg, r, k, frac, floor_ms);
    }
    return n;
}

/* Whether rank R's median lateness over scope SC stays at or above
 * straggler.end_frac of the step: an open episode goes on. */
static int still_late(const ss_detectors *d, straggler *sg, uint32_t r,
                      const scope *sc)
{
    uint32_t n = gather_excess(sg, r, sc, d->p[P_S_END_FRAC], 0);
    return n > 0 && ss_median_f64(sg->f64, n) >= 0;
}

/* Rank R's median lateness over scope SC, ms; NaN when never seen. */
static double median_late(straggler *sg, uint32_t r, const scope *sc)
{
    uint32_t n = gather_excess(sg, r, sc, 0, 0);
    return n ? ss_median_f64(sg->f64, n) : NAN;
}

/* The run-to-run noise of arrival that rank R's lateness over scope SC is
 * judged against: the median over its peers (the first NOISE_PEERS other
 * ranks seen at least 5 times) of each one's sigma of lateness (the larger
 * of 1.4826 MAD and 1.2533 times the mean absolute deviation); 0 when no
 * peer was seen that often. */
static double peer_noise_ms(straggler *sg, uint32_t r, const scope *sc)
{
    double *sigma = sg->f64 + 4 * (size_t)sg->sw;
    uint32_t n = 0;
    for (uint32_t q = 0; q < sg->world && n < NOISE_PEERS; q++) {
        if (q == r)
            continue;
        uint32_t m = gather_excess(sg, q, sc, 0, 0);
        double med;
        if (m < 5)
            continue;
        /* the mean absolute deviation too: timings quantized to a few
         * values (a rank last or not by one timer tick) have no MAD */
        double mad = ss_mad_f64(sg->f64, m, &med) * SS_MAD_TO_SIGMA;
        double dev = 0;
        for (uint32_t i = 0; i < m; i++)
            dev += sg->f64[i] / m; /* ss_mad_f64 left |x - median| */
        dev *= 1.2533; /* sqrt(pi / 2): a sigma for normal noise */
        sigma[n++] = mad > dev ? mad : dev;
    }
    return n ? ss_median_f64(sigma, n) : 0;
}

/* Whether rank R's lateness over scope SC is steady: in at least nine
 * steps of ten it is at least STEADY_SHARE of its median, which is above
 * 0 (the tenth percentile, of at least 5 steps). */
static int steady_lateness(straggler *sg, uint32_t r, const scope *sc)
{
    uint32_t m = gather_excess(sg, r, sc, 0, 0);
    if (m < 5)
        return 0;
    double med = ss_median_f64(sg->f64, m);
    return med > 0 &&
           ss_select_f64(sg->f64, m, m / 10) >= STEADY_SHARE * med;
}

/* Whether SEEN steps in which a rank's chances to be last summed to CHANCE
 * had three ranks or more on average (its chance a third or less).  Each
 * step's chance is a float (1/3 rounds up): three ranks in every step sum
 * to a hair over a third. */
static int three_or_more(double chance, uint32_t seen)
{
    return chance <= seen / 3.0 * (1 + 1e-6);
}

/* Whether rank R was the last rank in DOMINANT_SHARE or more of the steps
 * of scope SC it was seen in (at least straggler.min_steps: not over the
 * few steps of a transient window, where the scheduler's placement of a
 * loaded machine can keep one rank last for a while), those steps having
 * three ranks or more on average (its chance to be last at most a
 * third); or, over DOMINANT_MORE_STEPS steps or more, in DOMINANT_CHANCES
 * times its chance and DOMINANT_FLOOR of them; of THREE_RANKS or more on
 * average, over DOMINANT_LONG_STEPS or more, in DOMINANT_LONG_SHARE of
 * them; with fewer than THREE_RANKS on average, not where it lost more to
 * the host per step than the median rank by WAITED_SHARE of LATE_MS, its
 * median lateness. */
static int dominant_last(const ss_detectors *d, const straggler *sg,
                         uint32_t r, const scope *sc, double late_ms)
{
    uint32_t seen = 0, last = 0, waits = 0;
    double chance = 0, waited_more = 0;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!seen_in(sg, flags, k, sc))
            continue;
        seen++;
        last += (flags[k] & F_LAST) != 0;
        chance += sg->chance[k];
        float own = sg->host_ms[(size_t)r * sg->sw + k];
        if (!isnan(own) && !isnan(sg->med_host_ms[k])) {
            waited_more += own - sg->med_host_ms[k];
            waits++;
        }
    }
    if (seen < ss__param_u32(d, P_S_MIN_STEPS) || seen < 10 ||
        !three_or_more(chance, seen))
        return 0;
    /* Of three ranks on two cores, the scheduler may keep one of them
     * waiting for a CPU more than the others for a while (beside the
     * controller, say), and last step after step: where the rank lost
     * more to the host than the median rank by WAITED_SHARE of its
     * lateness, that is the machine's doing (cpu_starved's to name).  A
     * rank that sleeps or waits of its own gives its core away and loses
     * less.  Four ranks and more were measured without this
     * (DOMINANT_SHARE is three times their chance). */
    int three = chance > seen / THREE_RANKS;
    if (three && waits > 0 && waited_more / waits >= WAITED_SHARE * late_ms)
        return 0;
    if (last >= DOMINANT_SHARE * seen)
        return 1;
    if (!three && seen >= DOMINANT_LONG_STEPS &&
        last >= DOMINANT_LONG_SHARE * seen)
        return 1;
    return seen >= DOMINANT_MORE_STEPS && last >= DOMINANT_FLOOR * seen &&
           last >= DOMINANT_CHANCES * chance;
}

/*
 * Whether the host's evidence explains rank R's lateness LATE_MS over
 * scope SC alike for every rank: R or the median rank lost at least that
 * much per step to the host (run-queue delay, stops, throttling; means
 * over the whole window, or R's over the scope), R's own CPU
 * time per step exceeds the median rank's by less than
 * straggler.blame_frac of it, stretched by how long it waited per time it
 * ran (it does no more work than they do), and the
 * host names no cause of R's own (ss__host_explain), and R's lateness
 * is not steady (steady_lateness: the host's waits, alike for every rank,
 * make a rank late as they fall and by as much as they last, so the
 * lateness they cause scatters from little to much; one steady from step
 * to step is work or a wait of R's own, a sleep, a lock, a read).  SCALE
 * multiplies what the host lost (1 to open; less to end an open episode:
 * hysteresis).  Where the host measured too few of these steps, it does
 * not.
 */
static int host_alike(const ss_detectors *d, straggler *sg, uint32_t r,
                      const scope *sc, double late_ms, double scale)
{
    if (steady_lateness(sg, r, sc))
        return 0;
    double *cv = sg->f64;
    uint32_t seen = 0, n = 0, m = 0;
    double med_sum = 0, own_sum = 0, own_scope = 0, cpu_scope = 0;
    uint32_t n_scope = 0;
    uint64_t first = UINT64_MAX, last = 0;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    for (uint32_t i = 0; i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!(flags[k] & F_SEEN))
            continue;
        float own = sg->host_ms[(size_t)r * sg->sw + k];
        if (!isnan(sg->med_host_ms[k]) && !isnan(own)) {
            med_sum += sg->med_host_ms[k];
            own_sum += own;
            n++;
        }
        if (i >= sc->nback || sg->step[k] < sc->lo || sg->step[k] > sc->hi)
            continue;
        seen++;
        if (sg->step[k] < first)
            first = sg->step[k];
        if (sg->step[k] > last)
            last = sg->step[k];
        float cx = sg->cpu_ex_ms[(size_t)r * sg->sw + k];
        if (!isnan(cx))
            cv[m++] = cx;
        float cpu = sg->cpu_ms[(size_t)r * sg->sw + k];
        if (!isnan(own) && !isnan(cpu)) {
            own_scope += own;
            cpu_scope += cpu;
            n_scope++;
        }
    }
    if (seen == 0 || 2 * m < seen || n == 0)
        return 0;
    double alike = (med_sum > own_sum ? med_sum : own_sum) / n;
    if (n_scope && own_scope / n_scope > alike)
        alike = own_scope / n_scope;
    /* the wall time its extra work takes: on a loaded machine a rank runs
     * only part of the time it is runnable, so CPU time stretches by
     * (run + wait) / run */
    double stretch = cpu_scope > 0 ? (cpu_scope + own_scope) / cpu_scope : 1;
    if (!(late_ms <= scale * alike) ||
        ss_median_f64(cv, m) * stretch >= d->p[P_S_BLAME_FRAC] * late_ms)
        return 0;
    ss__host_cause hc;
    ss__host_explain(d, r, first, last, late_ms, &hc);
    return hc.cause < 0;
}

/* Whether rank R, over the steps of scope SC (CPU_EXCESS_STEPS or more,
 * of three ranks or more on average, its CPU time known in half of them
 * or more), used more CPU time per step than the median rank by SIGMAS
 * times NOISE_MS (its peers' noise of lateness) or more on median. */
static int works_more(straggler *sg, uint32_t r, const scope *sc,
                      double noise_ms, double sigmas)
{
    uint32_t seen = 0, m = 0;
    double chance = 0;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!seen_in(sg, flags, k, sc))
            continue;
        seen++;
        chance += sg->chance[k];
        float cx = sg->cpu_ex_ms[(size_t)r * sg->sw + k];
        if (!isnan(cx))
            sg->f64[m++] = cx;
    }
    if (seen < CPU_EXCESS_STEPS || 2 * m < seen ||
        !three_or_more(chance, seen))
        return 0;
    return ss_median_f64(sg->f64, m) >= sigmas * noise_ms;
}

/* Whether rank R's lateness over scope SC is its own, at SCALE of the
 * thresholds (1 to open an episode, OWN_HOLD to keep one open): to open,
 * its median exceeds straggler.noise_k times its peers' run-to-run noise
 * (peer_noise_ms; an open episode is not ended by noise, which on an
 * oversubscribed machine rises and falls with the load while the rank
 * stays last) or it does more work than the median rank (works_more: the
 * scheduler hides the lateness of a rank that computes more by letting
 * its peers wait for a CPU meanwhile), and the host does not explain it
 * alike for every rank (host_alike, with SCALE times what the host
 * lost); or, whatever the noise and the host, it was the last rank of
 * three or more in most steps (dominant_last): a rank that sleeps, reads
 * or waits on a lock of its own for a third of a step on an
 * oversubscribed machine gives its core to its peers meanwhile, so its
 * lateness scatters as widely as theirs and as the host's waits, yet no
 * wait alike for every rank keeps one rank last step after step. */
static int own_lateness(const ss_detectors *d, straggler *sg, uint32_t r,
                        const scope *sc, double scale)
{
    double late = median_late(sg, r, sc);
    if (late > 0 && dominant_last(d, sg, r, sc, late))
        return 1;
    if (!(late > 0))
        return 0;
    if (scale >= 1) {
        double noise = peer_noise_ms(sg, r, sc);
        if (late < d->p[P_S_NOISE_K] * noise &&
            !works_more(sg, r, sc, noise, CPU_EXCESS_SIGMAS))
            return 0;
    }
    return !host_alike(d, sg, r, sc, late, scale);
}

/*
 * The test of a straggler over the newest NBACK slots, where rank R was
 * seen in N steps, last in LAST of them, and would be last in CHANCE of
 * them by chance: (a) the binomial tail of LAST is at most LEVEL, and (b)
 * the order-statistic lower bound (at straggler.bound_alpha) of its median
 * lateness exceeds min_late_frac of the step and min_late_ms, and (c) the
 * lateness is its own (own_lateness).  A rank last in most steps
 * (dominant_last) needs only its median lateness itself to exceed them:
 * a rank that sleeps on a machine with fewer cores than ranks gives its
 * core away meanwhile, and in the steps where the scheduler makes up for
 * it, it is not late at all: late by much in most steps and not in the
 * others, the lower bound of its median falls below the line while the
 * median stays well above it.  So does a rank that clearly computes more
 * than the median rank (works_more at CPU_EXCESS_CLEAR_SIGMAS): the
 * scheduler makes up for its work in some steps by letting its peers
 * wait for a CPU.
 */
static int straggling(const ss_detectors *d, straggler *sg, uint32_t r,
                      uint32_t nback, uint32_t n, uint32_t last,
                      double chance, double level)
{
    if (n < 2 || (double)last <= chance ||
        ss_binomial_upper_tail(n, last, chance / n) > level)
        return 0;
    scope sc = {nback, 0, UINT64_MAX};
    uint32_t m = gather_excess(sg, r, &sc, d->p[P_S_MIN_LATE_FRAC],
                               d->p[P_S_MIN_LATE_MS]);
    uint32_t j = median_bound_index(sg, m, d->p[P_S_BOUND_ALPHA]);
    if (j > 0 && ss_select_f64(sg->f64, m, j - 1) > 0)
        return own_lateness(d, sg, r, &sc, 1);
    if (m == 0 || !(ss_median_f64(sg->f64, m) > 0))
        return 0;
    double late = median_late(sg, r, &sc);
    if (dominant_last(d, sg, r, &sc, late))
        return 1;
    return works_more(sg, r, &sc, peer_noise_ms(sg, r, &sc),
                      CPU_EXCESS_CLEAR_SIGMAS) &&
           own_lateness(d, sg, r, &sc, 1);
}

/* Summary of rank R over the steps of scope SC. */
typedef struct {
    uint32_t n_seen, n_late, n_last;
    double expected;       /* steps it would be last by chance */
    double log10_p_last;   /* of being last n_last times by chance */
    double late_med_ms, late_lower_ms, late_max_ms, pct_med, med_step_ms;
    int blame;
    double explained_ms;
    int blame_by_self;     /* most blamed steps compared self times */
    /* no phase blamed, and in most late steps the rank's phases together
     * explained too little of it (F_OUTSIDE): the lateness is outside
     * its recorded phases */
    int outside_phases;
    int method, ref;
    uint64_t first, last;  /* first and last late step */
    ss__host_cause host;   /* what the host says about those steps */
    uint32_t rank;         /* the rank summarized */
    uint32_t points;       /* by arrival: the most sync points a step's
                              lateness was summed over */
    int waits;             /* by arrival: in some step, the ranks' waits
                              in the script's own collectives were taken
                              out */
    int64_t clock_bound_ns;/* arrivals: the largest clock error bound
                              among the ranks compared; 0 otherwise */
    int clock_uncertain;   /* the median lateness lies within it */
    /* the rank's phases against the reference's in its recent late steps
     * (strag_rank.slower_*); NAN over fewer than SLOWER_STEPS of them */
    double slower_min, slower_all;
    /* what the tests of its own lateness read (own_lateness): its peers'
     * noise of lateness; whether its lateness is steady; what it and the
     * median rank lost to the host per step (means) and the median of its
     * CPU time per step over the median rank's; NAN where not measured
     * (summarize_own_tests, where the evidence is written) */
    double noise_ms;
    int steady;
    double host_lost_ms, med_host_lost_ms, cpu_over_ms;
} late_summary;

/* The largest clock error bound (ns) among the ranks compared by arrival
 * in the steps of scope SC (the blamed rank is one of them): the latest
 * bound of every rank measured by arrival in one of them.  0 when none
 * was, or every clock is the reference's. */
static int64_t arrival_clock_bound(const ss_detectors *d,
                                   const straggler *sg, const scope *sc)
{
    const int64_t *bound = d->clock_bound_ns;
    int64_t max = 0;
    for (uint32_t q = 0; q < sg->world; q++) {
        /* only a larger bound can change the answer: with every bound 0
         * (one host) this reads nothing of the ring */
        if (bound[q] <= max)
            continue;
        const uint8_t *flags = sg->flags + (size_t)q * sg->sw;
        for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
            uint32_t k = ss__ring_back(sg->head, sg->sw, i);
            if (seen_in(sg, flags, k, sc) && sg->method[k] == M_ARRIVAL) {
                max = bound[q];
                break;
            }
        }
    }
    return max;
}

/* Fills what the tests of rank R's own lateness over scope SC read
 * (late_summary.noise_ms .. cpu_over_ms), for the evidence: why a rank
 * on a loaded machine was judged late of its own doing.  Only where the
 * evidence is written (its peers' noise reads their whole window).  Uses
 * the scratch. */
static void summarize_own_tests(straggler *sg, uint32_t r, const scope *sc,
                                late_summary *out)
{
    out->noise_ms = peer_noise_ms(sg, r, sc);
    out->steady = steady_lateness(sg, r, sc);
    size_t base = (size_t)r * sg->sw;
    const uint8_t *flags = sg->flags + base;
    double own = 0, med = 0;
    uint32_t n = 0, m = 0;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!seen_in(sg, flags, k, sc))
            continue;
        if (!isnan(sg->host_ms[base + k]) && !isnan(sg->med_host_ms[k])) {
            own += sg->host_ms[base + k];
            med += sg->med_host_ms[k];
            n++;
        }
        if (!isnan(sg->cpu_ex_ms[base + k]))
            sg->f64[m++] = sg->cpu_ex_ms[base + k];
    }
    out->host_lost_ms = n ? own / n : NAN;
    out->med_host_lost_ms = n ? med / n : NAN;
    out->cpu_over_ms = m ? ss_median_f64(sg->f64, m) : NAN;
}

static void summarize(const ss_detectors *d, straggler *sg, uint32_t r,
                      const scope *sc, late_summary *out)
{
    memset(out, 0, sizeof *out);
    out->rank = r;
    out->blame = NO_NAME;
    out->ref = NO_NAME;
    size_t base = (size_t)r * sg->sw;
    const float *late = sg->late_ms + base;
    const ss__name_idx *blame = sg->blame + base;
    const uint8_t *flags = sg->flags + base;
    /* scratch: four arrays of sw doubles */
    double *lv = sg->f64, *pct = lv + sg->sw, *med = pct + sg->sw;
    double *ex = med + sg->sw;
    uint32_t votes[SS_MAX_RUN_NAMES], method_votes[4] = {0, 0, 0, 0};
    memset(votes, 0, sizeof votes);
    uint32_t n = 0, m = 0, n_outside = 0;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!seen_in(sg, flags, k, sc))
            continue;
        if (sg->method[k] < 4)
            method_votes[sg->method[k]]++;
        lv[n++] = late[k];
        out->expected += sg->chance[k];
        out->n_last += (flags[k] & F_LAST) != 0;
        if (late[k] > out->late_max_ms)
            out->late_max_ms = late[k];
        if (sg->med_ms[k] > 0) {
            pct[m] = late[k] / sg->med_ms[k];
            med[m++] = sg->med_ms[k];
        }
        if (!(flags[k] & F_LATE))
            continue;
        n_outside += (flags[k] & F_OUTSIDE) != 0;
        if (out->n_late++ == 0)
            out->last = sg->step[k];
        out->first = sg->step[k];
        if (blame[k] != NO_NAME && blame[k] < SS_MAX_RUN_NAMES)
            votes[blame[k]]++;
    }
    out->n_seen = n;
    if (n == 0)
        return;
    /* the method of most of these steps, and the sync point or phase it
     * used most often (a few steps may have been measured otherwise) */
    for (int q = 1; q < 4; q++)
        if (method_votes[q] > method_votes[out->method])
            out->method = q;
    uint32_t ref_votes[SS_MAX_RUN_NAMES], best_ref = 0;
    memset(ref_votes, 0, sizeof ref_votes);
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (seen_in(sg, flags, k, sc) && sg->method[k] == out->method &&
            sg->ref[k] < SS_MAX_RUN_NAMES) {
            ref_votes[sg->ref[k]]++;
            if (sg->points[k] > out->points)
                out->points = sg->points[k];
            out->waits |= sg->waits[k];
        }
    }
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (ref_votes[p] > best_ref) {
            best_ref = ref_votes[p];
            out->ref = p;
        }
    double tail = ss_binomial_upper_tail(n, out->n_last, out->expected / n);
    out->log10_p_last = tail > 0 ? log10(tail) : -300;
    uint32_t best = 0;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            out->blame = p;
        }
    /* what the blamed phase explains, over the same late steps: in a
     * step that blamed another phase (or none) it exceeded the median by
     * no more than that one did, counted as nothing; so a phase that the
     * noise of a crowded machine puts first in half of the late steps or
     * fewer explains nothing, where the median over those steps alone
     * would credit it with the noise's upper half */
    uint32_t e = 0, by_self = 0, voted = 0;
    for (uint32_t i = 0; i < sc->nback && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!(flags[k] & F_LATE) || sg->step[k] < sc->lo ||
            sg->step[k] > sc->hi || out->blame == NO_NAME)
            continue;
        if (blame[k] == out->blame) {
            ex[e++] = sg->expl_ms[base + k];
            by_self += (flags[k] & F_BLAME_SELF) != 0;
            voted++;
        } else {
            ex[e++] = 0;
        }
    }
    out->blame_by_self = 2 * by_self > voted;
    if (e)
        out->explained_ms = ss_median_f64(ex, e);
    if (m) {
        out->med_step_ms = ss_median_f64(med, m);
        out->pct_med = ss_median_f64(pct, m);
    }
    uint32_t j = median_bound_index(sg, n, d->p[P_S_BOUND_ALPHA]);
    out->late_lower_ms = j ? ss_select_f64(lv, n, j - 1) : NAN;
    out->late_med_ms = ss_median_f64(lv, n);
    if (out->explained_ms < d->p[P_S_BLAME_FRAC] * out->late_med_ms) {
        out->blame = NO_NAME; /* no phase explains enough of it */
        out->explained_ms = 0;
    }
    out->outside_phases = out->blame == NO_NAME &&
                          2 * n_outside > out->n_late;
    const strag_rank *sr = &sg->rank[r];
    out->slower_min = sr->slower_n >= SLOWER_STEPS ? sr->slower_min : NAN;
    out->slower_all = sr->slower_n >= SLOWER_STEPS ? sr->slower_all : NAN;
    if (out->method == M_ARRIVAL) {
        out->clock_bound_ns = arrival_clock_bound(d, sg, sc);
        out->clock_uncertain = out->clock_bound_ns > 0 &&
                               out->late_med_ms * 1e6 <
                                   (double)out->clock_bound_ns;
    }
}

/* Whom rank S->rank's lateness was measured against: with two ranks in
 * every step, the other one (two_ranks_against_each_other), else the
 * median rank. */
static const char *reference_words(const late_summary *s)
{
    return s->n_seen && 2 * s->expected >= 0.999 * s->n_seen
               ? "the other rank"
               : "the median rank";
}

static void phase_clause(const ss_detectors *d, const late_summary *s,
                         char *buf, size_t len)
{
    char a[32];
    if (s->outside_phases) {
        snprintf(buf, len, "; no phase it records accounts for it: the "
                 "time is spent outside them (code that no phase wraps, or "
                 "between phases)");
        return;
    }
    if (s->blame == NO_NAME || s->explained_ms <= 0) {
        buf[0] = '\0';
        return;
    }
    const char *self = s->blame_by_self ? " (self time)" : "";
    if (s->explained_ms >= s->late_med_ms)
        snprintf(buf, len, "; its %s phase%s explains all of it (%s ms "
                 "longer than %s's)", ss__name_of(d, s->blame), self,
                 ss__fmt_ms(a, sizeof a, s->explained_ms),
                 reference_words(s));
    else
        snprintf(buf, len, "; its %s phase%s explains %s ms of it",
                 ss__name_of(d, s->blame), self,
                 ss__fmt_ms(a, sizeof a, s->explained_ms));
}

/* Whether rank S->rank is slower at everything (SLOWER_EVERY). */
static int slower_everywhere(const late_summary *s)
{
    return s->slower_min >= SLOWER_EVERY; /* false for NAN */
}

/* "; each of its phases took 1.4x or more of ..." when the
 * rank is slower at everything, else "". */
static void slower_clause(const late_summary *s, char *buf, size_t len)
{
    if (!slower_everywhere(s)) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, len, "; each of its phases took %.1fx or more of %s's "
             "time: it is slower at everything (a slower or busier CPU or "
             "device), not late in one phase",
             floor(s->slower_min * 10) / 10, reference_words(s));
}

/* The phase that explains the lateness, whether the rank is slower at
 * everything, then the load the rank's experts or shards received when
 * that explains it (detect_workload.h). */
static void blame_clause(const ss_detectors *d, const late_summary *s,
                         char *buf, size_t len)
{
    phase_clause(d, s, buf, len);
    size_t at = strlen(buf);
    slower_clause(s, buf + at, len - at);
    at = strlen(buf);
    ss__workload_explain(d, s->rank, s->first, s->last, buf + at, len - at);
}

static void straggler_evidence(ss_detectors *d, ss_finding *f,
                               const char *mode, const late_summary *s)
{
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "mode", mode);
    ss__evidence_str(ev, "method", method_name(s->method));
    if (s->method == M_ARRIVAL) {
        ss__evidence_str(ev, "sync", ss__name_of(d, s->ref));
        ss__evidence_num(ev, "sync_points", s->points);
        if (s->waits)
            ss__evidence_int(ev, "collective_waits_out", 1);
    }
    ss__evidence_clock_bound(ev, s->clock_bound_ns, s->clock_uncertain);
    if (s->method == M_SYNC_PHASE)
        ss__evidence_str(ev, "sync_phase", ss__name_of(d, s->ref));
    ss__evidence_num(ev, "late_ms_median", round(s->late_med_ms * 10) / 10);
    ss__evidence_num(ev, "late_ms_lower", round(s->late_lower_ms * 10) / 10);
    ss__evidence_num(ev, "late_ms_max", round(s->late_max_ms * 10) / 10);
    ss__evidence_num(ev, "late_pct_median", round(s->pct_med * 1000) / 10);
    ss__evidence_num(ev, "median_step_ms", round(s->med_step_ms * 10) / 10);
    ss__evidence_int(ev, "steps_late", s->n_late);
    ss__evidence_int(ev, "steps_last", s->n_last);
    ss__evidence_num(ev, "last_expected", round(s->expected * 10) / 10);
    ss__evidence_num(ev, "p_last_log10", round(s->log10_p_last * 10) / 10);
    ss__evidence_int(ev, "steps_seen", s->n_seen);
    if (s->blame != NO_NAME && s->explained_ms > 0) {
        ss__evidence_str(ev, "phase", ss__name_of(d, s->blame));
        ss__evidence_num(ev, "explained_ms", round(s->explained_ms * 10) / 10);
        ss__evidence_str(ev, "phase_time",
                         s->blame_by_self ? "self" : "inclusive");
    }
    if (s->outside_phases)
        ss__evidence_int(ev, "outside_phases", 1);
    if (slower_everywhere(s)) {
        ss__evidence_num(ev, "slower_every_phase",
                         floor(s->slower_min * 100) / 100);
        ss__evidence_num(ev, "slower_in_all", round(s->slower_all * 100) / 100);
    }
    ss__evidence_num(ev, "peer_noise_ms", round(s->noise_ms * 10) / 10);
    ss__evidence_int(ev, "steady", s->steady);
    if (!isnan(s->host_lost_ms)) {
        ss__evidence_num(ev, "host_lost_ms", round(s->host_lost_ms * 10) / 10);
        ss__evidence_num(ev, "median_rank_host_lost_ms",
                         round(s->med_host_lost_ms * 10) / 10);
    }
    if (!isnan(s->cpu_over_ms))
        ss__evidence_num(ev, "cpu_over_median_ms",
                         round(s->cpu_over_ms * 10) / 10);
    ss__host_cause_evidence(ev, &s->host);
    ss__evidence_end(ev, f);
    if (s->blame != NO_NAME && s->explained_ms > 0)
        snprintf(f->phase, sizeof f->phase, "%s", ss__name_of(d, s->blame));
    else
        f->phase[0] = '\0';
}

/* One clause on how late the rank is, by the method that measured it. */
static void lateness_words(const ss_detectors *d, const late_summary *s,
                           char *buf, size_t len)
{
    char a[32];
    int pct = (int)lround(s->pct_med * 100);
    const char *ms = ss__fmt_ms(a, sizeof a, s->late_med_ms);
    char clock[48];
    ss__fmt_clock_bound(clock, sizeof clock, s->clock_bound_ns);
    const char *ref = reference_words(s);
    char later[64] = "";
    if (s->points == 2)
        snprintf(later, sizeof later, " and the step's later sync point");
    else if (s->points > 2)
        snprintf(later, sizeof later, " and the step's %u later sync points",
                 s->points - 1);
    if (s->method == M_ARRIVAL)
        snprintf(buf, len, "it reaches %s%s%s %s ms (+%d %% of a median step) "
                 "%safter %s%s%s", ss__name_of(d, s->ref), later,
                 s->waits ? ", counting the time the others waited for it "
                            "in the script's own collectives,"
                          : "",
                 ms, pct, s->points > 1 ? "in all " : "", ref, clock,
                 s->clock_uncertain ? ", within the clocks' error, so this "
                                      "is uncertain: clock error alone "
                                      "could make it look late"
                                    : "");
    else if (s->method == M_SYNC_PHASE)
        snprintf(buf, len, "it waits %s ms (%d %% of a median step) less "
                 "than %s in %s, the phase that holds the "
                 "synchronization, so every other rank waits for it",
                 ms, pct, ref, ss__name_of(d, s->ref));
    else
        snprintf(buf, len, "its step takes %s ms (+%d %%) longer than %s's",
                 ms, pct, ref);
}

/* "last in 86 of 100 steps (12.5 by chance)" */
static void last_words(const late_summary *s, char *buf, size_t len)
{
    snprintf(buf, len, "it was the last rank in %u of %u steps (%.1f by "
             "chance)", s->n_last, s->n_seen, s->expected);
}

/* What the median rank lost to the host per step (mean over the ring's
 * steps rank R was seen in), ms; 0 when the host measured none. */
static double machine_load_ms(const straggler *sg, uint32_t r)
{
    double sum = 0;
    uint32_t n = 0;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    for (uint32_t i = 0; i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if ((flags[k] & F_SEEN) && !isnan(sg->med_host_ms[k])) {
            sum += sg->med_host_ms[k];
            n++;
        }
    }
    return n ? sum / n : 0;
}

static void refresh_persistent(ss_detectors *d, straggler *sg, uint32_t r,
                               int opening)
{
    strag_rank *sr = &sg->rank[r];
    ss_finding *f = ss__finding(d, sr->persistent);
    late_summary s;
    scope whole = {sg->sw, 0, UINT64_MAX};
    summarize(d, sg, r, &whole, &s);
    if (s.n_late == 0)
        return;
    if (opening)
        f->first_step = s.first;
    f->last_step = s.last;
    /* The words are the episode's near its height; a window's strength is
     * its median lateness times the share of its steps the rank was late
     * in (a window that began before the straggler did shows less). */
    double strength = s.n_seen ? s.late_med_ms * s.n_late / s.n_seen : 0;
    if (!ss__words_at_height(&sr->height_ms, strength, opening)) {
        ss__finding_touch(d, sr->persistent);
        return;
    }
    ss__host_explain(d, r, s.first, s.last, s.late_med_ms, &s.host);
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    /* on a machine whose load costs every rank as much per step as this
     * rank is late, the job's straggler is the lesser problem: a warning */
    f->severity = s.pct_med >= d->p[P_S_CRIT_FRAC] && !s.clock_uncertain &&
                          machine_load_ms(sg, r) < s.late_med_ms
                      ? SS_CRITICAL
                      : SS_WARNING;
    summarize_own_tests(sg, r, &whole, &s);
    straggler_evidence(d, f, "persistent", &s);
    char how[352], why[448], last[72], host[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    last_words(&s, last, sizeof last);
    ss__host_cause_words(&s.host, host, sizeof host);
    ss__rl_straggler_words(d, r, s.first, s.last, host, sizeof host);
    uint64_t newest = sg->step[ss__ring_back(sg->head, sg->sw, 0)];
    snprintf(f->message, sizeof f->message,
             "rank %u %s a persistent straggler: over %u steps to step %"
             PRIu64 " %s; %s%s%s.", r, s.clock_uncertain ? "may be" : "is",
             s.n_seen, newest, how, last, why, host);
    ss__finding_touch(d, sr->persistent);
}

/* Rank RS's time from its step's begin to its arrival at sync point
 * REF, ms; NaN unknown.  Both are its host's clock: compared only with
 * the same rank's in other steps. */
static double lead_ms(const ss_rank_step *rs, int ref)
{
    if (ref < 0 || rs->begin_ns == SS_MISSING || !rs->sync_arrival_ns ||
        rs->sync_arrival_ns[ref] == SS_MISSING)
        return NAN;
    return (double)(rs->sync_arrival_ns[ref] - rs->begin_ns) / 1e6;
}

/* Rank Q's median lead over the ring slots in [LO, HI] it was seen in
 * (*IN) and over every slot it was seen in (*ALL); returns the slots in
 * [LO, HI] with a lead (0 when the ring has no other). */
static uint32_t lead_medians(straggler *sg, uint32_t q, uint64_t lo,
                             uint64_t hi, double *in, double *all)
{
    const float *lead = sg->lead_ms + (size_t)q * sg->sw;
    const uint8_t *flags = sg->flags + (size_t)q * sg->sw;
    double *v = sg->f64;
    uint32_t n_in = 0, n = 0;
    for (int pass = 0; pass < 2; pass++) { /* the burst's steps first */
        for (uint32_t i = 0; i < sg->fill; i++) {
            uint32_t k = ss__ring_back(sg->head, sg->sw, i);
            int inside = sg->step[k] >= lo && sg->step[k] <= hi;
            if ((flags[k] & F_SEEN) && !isnan(lead[k]) && inside == !pass)
                v[n++] = lead[k];
        }
        if (pass == 0)
            n_in = n;
    }
    if (n_in == 0 || n == n_in)
        return 0;
    *in = ss_median_f64(v, n_in); /* reorders the burst's part only */
    *all = ss_median_f64(v, n);
    return n_in;
}

/* Whether rank R's transient burst over scope SC (median lateness
 * LATE_MS) is its peers being faster for a while, not R slower
 * (FASTER_SHARE): compared by arrival, each one's lead against its own
 * over the window, the peers' drop being the median over the first
 * NOISE_PEERS of them. */
static int others_faster(straggler *sg, uint32_t r, const scope *sc,
                         double late_ms)
{
    double in, all;
    if (!sg->lead_ms || !(late_ms > 0) ||
        lead_medians(sg, r, sc->lo, sc->hi, &in, &all) < FASTER_MIN_STEPS)
        return 0;
    double own_rise = in - all;
    double *drop = sg->f64 + 4 * (size_t)sg->sw;
    uint32_t n = 0;
    for (uint32_t q = 0; q < sg->world && n < NOISE_PEERS; q++)
        if (q != r && lead_medians(sg, q, sc->lo, sc->hi, &in, &all) >=
                          FASTER_MIN_STEPS)
            drop[n++] = all - in;
    if (n == 0)
        return 0;
    return ss_median_f64(drop, n) >= FASTER_SHARE * late_ms &&
           own_rise < FASTER_SHARE * late_ms;
}

/* Publishes rank R's pending transient burst as a finding. */
static void commit_pending(ss_detectors *d, straggler *sg, uint32_t r)
{
    strag_rank *sr = &sg->rank[r];
    sr->burst_finding = ss__finding_publish(d, sr->pending);
    sr->burst_finding_last = sr->pending->last_step;
    free(sr->pending);
    sr->pending = NULL;
}

/*
 * Rank R's transient burst ended (or the run ends).  It becomes a
 * finding unless it cost the job less than straggler.min_cost_ms in all
 * (the median lateness times its late steps: on steps of a few ms, two
 * ranks' scheduling alone makes bursts of 10 to 30 ms in a clean job),
 * twice that in a job of two ranks (their clean scheduling makes bursts
 * of ~60 ms on 10 ms steps), or, over all its steps, the lateness is not
 * its own (own_lateness: a burst opened on a few noisy steps), or the
 * host explains it by the rank's waiting for a CPU (another process
 * shared its core for a while: the machine's load, not the job's
 * straggler; a starvation that lasts is the host detector's
 * cpu_starved); it stays pending until the rank has been seen in
 * straggler.min_steps steps, because a burst at the very start may be
 * the opening of a persistent episode.
 */
static void close_burst(ss_detectors *d, straggler *sg, uint32_t r)
{
    strag_rank *sr = &sg->rank[r];
    sr->burst = 0;
    if (sr->pending && sr->pending->last_step - sr->pending->first_step >=
                           sr->burst_last - sr->burst_first)
        return; /* a longer burst is already pending */
    late_summary s;
    scope sc = {sg->sw, sr->burst_first, sr->burst_last};
    summarize(d, sg, r, &sc, &s);
    if (s.n_late == 0 || !own_lateness(d, sg, r, &sc, 1))
        return; /* over the whole burst, noise or the host alike */
    /* a burst of a few ms in all: a person would not care; of two ranks,
     * each is the last one in half the steps by chance and its lateness
     * is the gap between the two, so twice that */
    double min_cost = d->p[P_S_MIN_COST_MS] * (sg->world == 2 ? 2 : 1);
    if (s.late_med_ms * s.n_late < min_cost)
        return;
    if (others_faster(sg, r, &sc, s.late_med_ms))
        return; /* its peers faster for a while: not its doing */
    ss__host_explain(d, r, s.first, s.last, s.late_med_ms, &s.host);
    if (s.host.cause == SS_HOST_CAUSE_RUN_QUEUE ||
        ss__host_busy_core_moment(d, r, s.first, s.last, s.late_med_ms))
        return; /* a moment on a busy core */
    ss_finding *f = sr->pending ? sr->pending : malloc(sizeof *f);
    if (!f)
        return;
    memset(f, 0, sizeof *f);
    sr->pending = f;
    snprintf(f->kind, sizeof f->kind, "straggler");
    f->first_step = sr->burst_first;
    f->last_step = sr->burst_last;
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->severity = SS_WARNING;
    summarize_own_tests(sg, r, &sc, &s);
    straggler_evidence(d, f, "transient", &s);
    char how[352], why[448], last[72], host[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    last_words(&s, last, sizeof last);
    ss__host_cause_words(&s.host, host, sizeof host);
    snprintf(f->message, sizeof f->message,
             "rank %u %s a transient straggler in steps %" PRIu64
             " to %" PRIu64 ": %s; %s%s%s.",
             r, s.clock_uncertain ? "may have been" : "was",
             sr->burst_first, sr->burst_last, how, last, why, host);
    if (sr->seen >= ss__param_u32(d, P_S_MIN_STEPS))
        commit_pending(d, sg, r);
}

/* Opens a transient burst for rank R from the late steps of the newest
 * sub-window. */
static void open_burst(straggler *sg, uint32_t r)
{
    strag_rank *sr = &sg->rank[r];
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    int any = 0;
    for (uint32_t i = 0; i < sg->sub && i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!(flags[k] & F_LATE))
            continue;
        if (!any)
            sr->burst_last = sg->step[k];
        sr->burst_first = sg->step[k];
        any = 1;
    }
    sr->burst = any;
}

/* The phases auto mode records around the script's own torch.distributed
 * calls (docs/python.md), where a rank waits for its peers. */
static const char *const COLLECTIVE_PHASES[] = {
    "all_reduce", "broadcast", "barrier", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "reduce", "gather", "scatter", "all_to_all",
    "all_to_all_single", "broadcast_object_list", "monitored_barrier"};

static int collective_phase(const ss_detectors *d, int name)
{
    const char *s = ss__name_of(d, name);
    for (size_t i = 0; i < sizeof COLLECTIVE_PHASES / sizeof *COLLECTIVE_PHASES;
         i++)
        if (strcmp(s, COLLECTIVE_PHASES[i]) == 0)
            return 1;
    return 0;
}

/*
 * Takes the ranks' waits in the script's own collectives out of their
 * lateness LATE by arrival at step V's sync points: each rank's time in
 * those phases (self time where known, so that one nested in another
 * counts once; none where it has none) over the median rank's is taken
 * from its lateness.  A rank waits there for another (its group's last),
 * so that time is not its own: a loss all-reduced for logging after the
 * optimizer step evens the ranks out before the next step's all-reduce,
 * and the rank whose optimizer step was slower is late only by how much
 * less it waited there; with tensor parallelism inside data parallelism,
 * a rank's tensor-parallel peer waits for it in the forward's all_reduce
 * and reaches the data-parallel all-reduce as late as it does.  Returns
 * 1 if the step had such waits (in two ranks or more).
 */
static int collective_waits_out(const ss_detectors *d, straggler *sg,
                                const ss_step_view *v, uint32_t world,
                                int64_t *late)
{
    int64_t *wait = sg->i64 + world; /* the arrivals are no longer needed */
    uint32_t phases = 0;
    for (uint32_t r = 0; r < world; r++)
        wait[r] = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p < 0 || (uint32_t)p >= v->n_names || v->phases[i].stat.n < 2 ||
            !collective_phase(d, p))
            continue;
        phases++;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (!rs->present || rs->phase_ns[p] == SS_MISSING)
                continue;
            int64_t own = rs->phase_self_ns &&
                                  rs->phase_self_ns[p] != SS_MISSING
                              ? rs->phase_self_ns[p]
                              : rs->phase_ns[p];
            wait[r] += own;
        }
    }
    if (phases == 0)
        return 0;
    uint32_t n = 0;
    for (uint32_t r = 0; r < world; r++)
        if (late[r] != SS_MISSING)
            sg->f64[n++] = (double)wait[r];
    if (n < 2)
        return 0;
    double med = ss_median_f64(sg->f64, n);
    for (uint32_t r = 0; r < world; r++)
        if (late[r] != SS_MISSING)
            late[r] -= (int64_t)((double)wait[r] - med);
    return 1;
}

/* Picks how lateness is measured in this step and fills LATE (ns, per
 * rank; SS_MISSING where not measurable).  Returns the method and sets
 * *REF to the sync point (the one reached first) or sync phase used, and
 * *POINTS to how many sync points were summed (0 not by arrival), *WAITS
 * to whether the ranks' waits in the script's own collectives were taken
 * out (collective_waits_out). */
static int measure_lateness(const ss_detectors *d, straggler *sg,
                            const ss_step_view *v, uint32_t world,
                            double thr_ns, int64_t *late, int *ref,
                            uint32_t *points, int *waits)
{
    *ref = NO_NAME;
    *points = 0;
    *waits = 0;
    for (uint32_t r = 0; r < world; r++)
        late[r] = SS_MISSING;

    /* 1. arrival at the sync points most ranks reported: at each, a
     * rank's arrival against the median arrival, summed over them (the
     * first of them is the reference).  Every rank leaves a collective when
     * the last one arrives, so its lateness at a later sync point of the
     * step is what it lost since the one before: a step that all-reduces
     * after each of several backward passes (a GAN's two networks, say)
     * has a rank's lateness at each, and a rank late only after the first
     * is late all the same.  A rank without an arrival at one of them has
     * none.  The reference named is the one reached first (by its median
     * arrival). */
    int best = -1;
    uint32_t best_n = 1;
    for (uint32_t i = 0; i < v->n_syncs; i++)
        if (v->syncs[i].n > best_n && v->syncs[i].name >= 0 &&
            (uint32_t)v->syncs[i].name < v->n_names) {
            best_n = v->syncs[i].n;
            best = v->syncs[i].name;
        }
    if (best >= 0) {
        int64_t first_med = INT64_MAX;
        int64_t *arrival = sg->i64 + world;
        for (uint32_t r = 0; r < world; r++)
            late[r] = v->ranks[r].present ? 0 : SS_MISSING;
        for (uint32_t i = 0; i < v->n_syncs; i++) {
            int name = v->syncs[i].name;
            if (v->syncs[i].n != best_n || name < 0 ||
                (uint32_t)name >= v->n_names)
                continue;
            size_t n = 0;
            for (uint32_t r = 0; r < world; r++) {
                const ss_rank_step *rs = &v->ranks[r];
                if (rs->present && rs->sync_arrival_ns[name] != SS_MISSING)
                    arrival[n++] = rs->sync_arrival_ns[name];
            }
            int64_t med = ss_median_i64(arrival, n);
            if (med < first_med) {
                first_med = med;
                best = name;
            }
            ++*points;
            for (uint32_t r = 0; r < world; r++) {
                int64_t at = v->ranks[r].present
                                 ? v->ranks[r].sync_arrival_ns[name]
                                 : SS_MISSING;
                if (late[r] != SS_MISSING)
                    late[r] = at != SS_MISSING ? late[r] + (at - med)
                                               : SS_MISSING;
            }
        }
        *ref = best;
        *waits = collective_waits_out(d, sg, v, world, late);
        return M_ARRIVAL;
    }

    /* 2. the phase holding the synchronization: its shortest rank lies far
     * below the median rank (it waits least) and is the rank with the
     * most time outside that phase.  A slow compute phase has its outlier
     * above the median instead, which tells the two apart even though
     * every rank's step takes the same time.  Where the step times differ
     * more than that (the explicit API: each rank's step begins and ends
     * at its own calls), the phase still holds the synchronization when
     * that rank spends at least half the gap more than the median rank
     * outside it (its own work, by the others' wait); each rank's
     * lateness is then that time outside the phase over the median
     * rank's. */
    int sync_phase = -1, rest_agrees = 0;
    double sync_spread = 0, sync_median = 0, rest_median = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_phase_stat *ps = &v->phases[i];
        int p = ps->name;
        if (p < 0 || (uint32_t)p >= v->n_names || ps->stat.n < 2)
            continue;
        double spread = (double)ps->stat.median - (double)ps->stat.min;
        if (spread < thr_ns || spread <= sync_spread)
            continue;
        int32_t rmin = -1, rrest = -1;
        int64_t vmin = 0, rest_max = 0;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (!rs->present || rs->phase_ns[p] == SS_MISSING)
                continue;
            int64_t val = rs->phase_ns[p];
            int64_t rest = rs->step_ns - val;
            if (rmin < 0 || val < vmin) {
                vmin = val;
                rmin = (int32_t)r;
            }
            if (rrest < 0 || rest > rest_max) {
                rest_max = rest;
                rrest = (int32_t)r;
            }
        }
        if (rmin >= 0 && rmin == rrest) {
            sync_phase = p;
            sync_spread = spread;
            sync_median = (double)ps->stat.median;
            /* LATE is scratch until written below */
            size_t n = 0;
            for (uint32_t r = 0; r < world; r++) {
                const ss_rank_step *rs = &v->ranks[r];
                if (rs->present && rs->phase_ns[p] != SS_MISSING &&
                    rs->step_ns != SS_MISSING)
                    late[n++] = rs->step_ns - rs->phase_ns[p];
            }
            rest_median = (double)ss_median_i64(late, n);
            rest_agrees = (double)rest_max - rest_median >= 0.5 * spread;
            for (uint32_t r = 0; r < world; r++)
                late[r] = SS_MISSING;
        }
    }
    double step_spread = (double)v->step_time.max - (double)v->step_time.min;
    if (sync_phase >= 0 && step_spread < d->p[P_S_SYNC_RATIO] * sync_spread) {
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (rs->present && rs->phase_ns[sync_phase] != SS_MISSING)
                late[r] = (int64_t)(sync_median -
                                    (double)rs->phase_ns[sync_phase]);
        }
        *ref = sync_phase;
        return M_SYNC_PHASE;
    }
    if (sync_phase >= 0 && rest_agrees) {
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (rs->present && rs->phase_ns[sync_phase] != SS_MISSING &&
                rs->step_ns != SS_MISSING)
                late[r] = (int64_t)((double)(rs->step_ns -
                                             rs->phase_ns[sync_phase]) -
                                    rest_median);
        }
        *ref = sync_phase;
        return M_SYNC_PHASE;
    }

    /* 3. unsynchronized ranks: the step itself */
    for (uint32_t r = 0; r < world; r++)
        if (v->ranks[r].present && v->ranks[r].step_ns != SS_MISSING)
            late[r] = v->ranks[r].step_ns - v->step_time.median;
    return M_STEP_TIME;
}

/* Rank RS's time in phase P (the step's phase I), by self time where RS
 * and another rank report it (*SELF 1), else inclusive (*SELF 0), in
 * *OWN; in *REF the reference rank's: the median rank's, or the other
 * rank's where two reported it (their median lies halfway between them,
 * and their lateness is measured against each other:
 * two_ranks_against_each_other).  Returns the statistics compared. */
static const ss_stat *phase_against_reference(const ss_step_view *v,
                                              uint32_t i,
                                              const ss_rank_step *rs, int p,
                                              double *own, double *ref,
                                              int *self)
{
    *self = v->phase_self && v->phase_self[i].n >= 2 && rs->phase_self_ns &&
            rs->phase_self_ns[p] != SS_MISSING;
    const ss_stat *st = *self ? &v->phase_self[i] : &v->phases[i].stat;
    *own = (double)(*self ? rs->phase_self_ns[p] : rs->phase_ns[p]);
    *ref = ss__reference(st, *own);
    return st;
}

/* The phase (other than SKIP) in which rank RS exceeds the median rank the
 * most (the other rank where two reported it); NO_NAME when none exceeds
 * it.  Phases nest, so a phase is compared by self time when RS and
 * another rank report it (*BY_SELF set when the blamed one was), else by
 * its inclusive time.  *INSIDE_MS is the sum of
 * the positive excesses of all its phases compared (nested inclusive times
 * count twice: never less than what the phases explain), NAN when none
 * was. */
static int blame_phase(const ss_step_view *v, const ss_rank_step *rs,
                       int skip, double *excess_ms, int *by_self,
                       double *inside_ms)
{
    int best = NO_NAME;
    double best_ex = 0, sum = 0;
    int compared = 0;
    *by_self = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p == skip || p < 0 || (uint32_t)p >= v->n_names ||
            rs->phase_ns[p] == SS_MISSING)
            continue;
        compared++;
        double own, ref;
        int self;
        phase_against_reference(v, i, rs, p, &own, &ref, &self);
        double ex = own - ref;
        if (ex > 0)
            sum += ex;
        if (ex > best_ex) {
            best_ex = ex;
            best = p;
            *by_self = self;
        }
    }
    *excess_ms = best_ex / 1e6;
    *inside_ms = compared ? sum / 1e6 : NAN;
    return best;
}

/* How much longer than the reference rank (the median rank; the other
 * rank where two reported the phase) rank RS spent in each phase on which
 * the reference spends SLOWER_PHASE_SHARE of MED_STEP_NS or more, other
 * than SKIP and WAIT (the phase that holds the synchronization, and the
 * one named as the sync point: the late rank waits less there), by self
 * time where the step has it: *MIN the smallest ratio, *ALL the ratio of
 * the sums.  Returns how many phases it compared. */
static uint32_t phase_ratios(const ss_step_view *v, const ss_rank_step *rs,
                             int skip, int wait, double med_step_ns,
                             double *min, double *all)
{
    uint32_t n = 0;
    double own_sum = 0, ref_sum = 0;
    *min = INFINITY;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p == skip || p == wait || p < 0 || (uint32_t)p >= v->n_names ||
            rs->phase_ns[p] == SS_MISSING)
            continue;
        double own, ref;
        int self;
        const ss_stat *st =
            phase_against_reference(v, i, rs, p, &own, &ref, &self);
        if (st->n < 2 || !(ref >= SLOWER_PHASE_SHARE * med_step_ns) ||
            ref <= 0)
            continue;
        n++;
        own_sum += own;
        ref_sum += ref;
        if (own / ref < *min)
            *min = own / ref;
    }
    *all = n ? own_sum / ref_sum : NAN;
    return n;
}

/* Takes ring slot IDX, about to be overwritten, out of every rank's
 * running counts, and slot IDX - sub out of the sub-window counts. */
static void retire_slots(straggler *sg, uint32_t idx, uint32_t world)
{
    uint32_t sw = sg->sw;
    int sub_full = sg->fill >= sg->sub;
    uint32_t leaving = (idx + sw - sg->sub) % sw;
    for (uint32_t r = 0; r < world; r++) {
        strag_rank *sr = &sg->rank[r];
        size_t base = (size_t)r * sw;
        if (sub_full) {
            uint8_t fl = sg->flags[base + leaving];
            if (fl & F_SEEN) {
                sr->seen_sub--;
                sr->chance_sub -= sg->chance[leaving];
            }
            sr->last_sub -= (fl & F_LAST) != 0;
        }
        uint8_t *fl = &sg->flags[base + idx];
        if (*fl & F_SEEN) {
            sr->seen--;
            sr->chance -= sg->chance[idx];
        }
        sr->last -= (*fl & F_LAST) != 0;
        *fl = 0;
    }
}

/*
 * With two ranks the median of all lies halfway between them, which would
 * halve every lateness: measure each against the other rank instead (with
 * three or more, the median rank is a peer).  Returns how many ranks of
 * LATE were measured.
 */
static uint32_t two_ranks_against_each_other(int64_t *late, uint32_t world)
{
    uint32_t n = 0, who[2] = {0, 0};
    for (uint32_t r = 0; r < world; r++)
        if (late[r] != SS_MISSING) {
            if (n < 2)
                who[n] = r;
            n++;
        }
    if (n == 2) {
        int64_t a = late[who[0]], b = late[who[1]];
        late[who[0]] = a - b;
        late[who[1]] = b - a;
    }
    return n;
}

/* What rank-step RS lost to the host (run-queue delay, stops, CPU quota
 * throttling), ms; NaN without host evidence. */
static double host_loss_ms(const ss_rank_step *rs)
{
    if (!rs->present || !rs->host)
        return NAN;
    const ss_dur_ns v[3] = {rs->host->runq_ns, rs->host->stopped_ns,
                            rs->host->throttled_ns};
    double t = 0;
    int any = 0;
    for (int i = 0; i < 3; i++)
        if (v[i] != SS_MISSING && v[i] >= 0) {
            t += (double)v[i] / 1e6;
            any = 1;
        }
    return any ? t : NAN;
}

/* Rank-step RS's CPU time, ms; NaN where not measured. */
static double cpu_time_ms(const ss_rank_step *rs)
{
    return rs->present && rs->host && rs->host->cpu_ns != SS_MISSING &&
                   rs->host->cpu_ns >= 0
               ? (double)rs->host->cpu_ns / 1e6
               : NAN;
}

/* Keeps in ring slot IDX the median rank's loss to the host and each
 * rank's CPU time over the median rank's (NaN where not measured). */
static void record_host(straggler *sg, const ss_step_view *v,
                        uint32_t world, uint32_t idx)
{
    uint32_t n = 0, m = 0;
    for (uint32_t r = 0; r < world && r < sg->world; r++) {
        double h = host_loss_ms(&v->ranks[r]);
        if (!isnan(h))
            sg->f64[n++] = h;
    }
    sg->med_host_ms[idx] = n ? (float)ss_median_f64(sg->f64, n) : NAN;
    for (uint32_t r = 0; r < world && r < sg->world; r++) {
        double c = cpu_time_ms(&v->ranks[r]);
        if (!isnan(c))
            sg->f64[m++] = c;
    }
    double med_cpu = m ? ss_median_f64(sg->f64, m) : NAN;
    for (uint32_t r = 0; r < sg->world; r++) {
        size_t k = (size_t)r * sg->sw + idx;
        sg->cpu_ex_ms[k] =
            r < world ? (float)(cpu_time_ms(&v->ranks[r]) - med_cpu) : NAN;
        sg->host_ms[k] = r < world ? (float)host_loss_ms(&v->ranks[r]) : NAN;
        sg->cpu_ms[k] = r < world ? (float)cpu_time_ms(&v->ranks[r]) : NAN;
    }
}

/* Measures this step's lateness into ring slot IDX and counts it. */
static void record_step(ss_detectors *d, straggler *sg,
                        const ss_step_view *v, uint32_t world, uint32_t idx)
{
    uint32_t sw = sg->sw;
    double med_step = (double)v->step_time.median;
    sg->step[idx] = v->step;
    sg->med_ms[idx] =
        v->step_time.median == SS_MISSING ? 0 : (float)(med_step / 1e6);
    sg->chance[idx] = 0;
    sg->method[idx] = M_NONE;
    sg->points[idx] = 0;
    sg->waits[idx] = 0;
    sg->ref[idx] = NO_NAME;
    sg->last_of[idx] = -1;
    record_host(sg, v, world, idx);
    if (v->n_present < 2 || v->step_time.median == SS_MISSING ||
        med_step <= 0)
        return;
    double floor_ms = d->p[P_S_MIN_LATE_MS];
    double thr_ms = d->p[P_S_MIN_LATE_FRAC] * med_step / 1e6;
    if (thr_ms < floor_ms)
        thr_ms = floor_ms;
    int ref;
    uint32_t points;
    int waits;
    int64_t *late = sg->i64;
    int method = measure_lateness(d, sg, v, world, thr_ms * 1e6, late, &ref,
                                  &points, &waits);
    if (two_ranks_against_each_other(late, world) < 2)
        return;
    /* the last rank: strictly later than every other (a tie has none) */
    uint32_t n = 0;
    int64_t latest = 0;
    int32_t last_rank = -1;
    int tied = 0;
    for (uint32_t r = 0; r < world; r++) {
        if (late[r] == SS_MISSING)
            continue;
        if (n++ == 0 || late[r] > latest) {
            latest = late[r];
            last_rank = (int32_t)r;
            tied = 0;
        } else if (late[r] == latest) {
            tied = 1;
        }
    }
    if (n < 2)
        return;
    if (tied)
        last_rank = -1;
    sg->chance[idx] = (float)(1.0 / n);
    sg->method[idx] = (uint8_t)method;
    sg->points[idx] = (uint8_t)(points < 255 ? points : 255);
    sg->waits[idx] = (uint8_t)waits;
    sg->last_of[idx] = last_rank;
    sg->ref[idx] = (ss__name_idx)ref;
    for (uint32_t r = 0; r < world; r++) {
        if (late[r] == SS_MISSING)
            continue;
        double late_ms = (double)late[r] / 1e6;
        if (method != M_STEP_TIME && late_ms > d->note.sync_late_ms)
            d->note.sync_late_ms = late_ms;
        size_t k = (size_t)r * sw + idx;
        strag_rank *sr = &sg->rank[r];
        sg->flags[k] = F_SEEN;
        sr->seen++;
        sr->chance += sg->chance[idx];
        sr->seen_sub++;
        sr->chance_sub += sg->chance[idx];
        if ((int32_t)r == last_rank) {
            sg->flags[k] |= F_LAST;
            sr->last++;
            sr->last_sub++;
        }
        sg->late_ms[k] = (float)late_ms;
        if (sg->lead_ms)
            sg->lead_ms[k] = method == M_ARRIVAL
                                 ? (float)lead_ms(&v->ranks[r], ref)
                                 : NAN;
        sg->blame[k] = NO_NAME;
        sg->expl_ms[k] = 0;
        if (late_ms <= thr_ms)
            continue;
        sg->flags[k] |= F_LATE;
        double ex, inside;
        int by_self;
        sg->blame[k] = (ss__name_idx)blame_phase(
            v, &v->ranks[r], method == M_SYNC_PHASE ? ref : -1, &ex,
            &by_self, &inside);
        sg->expl_ms[k] = (float)ex;
        if (by_self)
            sg->flags[k] |= F_BLAME_SELF;
        double lo, all;
        if (phase_ratios(v, &v->ranks[r], method == M_SYNC_PHASE ? ref : -1,
                         method == M_ARRIVAL ? ref : -1, med_step, &lo,
                         &all) >= 2) {
            double w = sr->slower_n ? SLOWER_WEIGHT : 1;
            sr->slower_min += w * (lo - sr->slower_min);
            sr->slower_all += w * (all - sr->slower_all);
            sr->slower_n++;
        }
        if (inside < d->p[P_S_BLAME_FRAC] * late_ms) /* false for NAN */
            sg->flags[k] |= F_OUTSIDE;
    }
}

/* The cost of rank R's straggling without an open persistent episode,
 * after the newest step (ring slot IDX), when the tests HELD there or
 * within the window before: the lateness of its late steps, from the
 * window in which they first held (a test that comes and goes keeps
 * adding up; a window without it starts again).  An episode opens once
 * this reaches straggler.min_cost_ms: three ranks spinning on two cores
 * take turns at being last for a hundred steps of half a millisecond, a
 * few ms in all, real and nothing a person would act on; a straggler of
 * 1 ms per step gets there in 50 steps. */
static double straggling_cost(straggler *sg, uint32_t r, uint32_t idx,
                              int held)
{
    strag_rank *sr = &sg->rank[r];
    const float *late = sg->late_ms + (size_t)r * sg->sw;
    const uint8_t *flags = sg->flags + (size_t)r * sg->sw;
    uint64_t step = sg->step[idx];
    if (sr->cost_ms >= 0 && step - sr->cost_held > sg->sw)
        sr->cost_ms = -1; /* a window without them (or not judged) */
    if (sr->cost_ms < 0) {
        if (!held)
            return -1;
        sr->cost_ms = 0;
        sr->cost_first = step;
        for (uint32_t i = 0; i < sg->fill; i++) {
            uint32_t k = ss__ring_back(sg->head, sg->sw, i);
            if ((flags[k] & F_LATE) && late[k] > 0) {
                sr->cost_ms += late[k];
                sr->cost_first = sg->step[k];
            }
        }
    } else if ((flags[idx] & F_LATE) && late[idx] > 0) {
        sr->cost_ms += late[idx];
    }
    if (held)
        sr->cost_held = step;
    return sr->cost_ms;
}

/* Opens, refreshes or ends rank R's persistent episode and transient
 * burst after the newest step (ring slot IDX). */
static void judge_rank(ss_detectors *d, straggler *sg, uint32_t r,
                       uint32_t idx)
{
    strag_rank *sr = &sg->rank[r];
    uint8_t fl = sg->flags[(size_t)r * sg->sw + idx];
    /* straggler.alpha per window for the whole job: alpha / world per
     * rank, and per sub-window that share times sub / sw */
    double level = d->p[P_S_ALPHA] / (sg->world ? sg->world : 1);
    double level_sub = level * sg->sub / sg->sw;
    scope whole = {sg->sw, 0, UINT64_MAX};
    scope sub = {sg->sub, 0, UINT64_MAX};
    if (sr->persistent < 0) {
        int held = sr->seen >= ss__param_u32(d, P_S_MIN_STEPS) &&
                   straggling(d, sg, r, sg->sw, sr->seen, sr->last,
                              sr->chance, level);
        double cost = straggling_cost(sg, r, idx, held);
        if (held) {
            /* a persistent episode that ended within the window goes on
             * (one finding for a rank near the line, not one per crossing);
             * else a burst published within the window is this episode's
             * beginning: it becomes the persistent finding; else a new
             * episode opens once it has cost the job enough */
            uint64_t oldest = sg->step[ss__ring_back(sg->head, sg->sw,
                                                     sg->fill - 1)];
            uint64_t first = UINT64_MAX;
            if (sr->ended >= 0 && sr->ended_last >= oldest) {
                sr->persistent = sr->ended; /* its height goes on too */
                first = ss__finding(d, sr->persistent)->first_step;
            } else if (sr->burst_finding >= 0 &&
                       sr->burst_finding_last >= oldest) {
                sr->persistent = sr->burst_finding;
                sr->height_ms = 0;
                first = ss__finding(d, sr->persistent)->first_step;
            } else if (cost >= d->p[P_S_MIN_COST_MS]) {
                sr->persistent = ss__finding_open(d, "straggler");
                sr->height_ms = 0;
                first = sr->cost_first; /* where its cost began */
            }
            if (sr->persistent >= 0) {
                sr->burst_finding = sr->ended = -1;
                sr->cost_ms = -1;
                refresh_persistent(d, sg, r, 1);
                ss_finding *f = ss__finding(d, sr->persistent);
                if (first < f->first_step)
                    f->first_step = first;
                sr->burst = 0; /* it opened this persistent episode */
                free(sr->pending);
                sr->pending = NULL;
            }
        }
    } else if (!still_late(d, sg, r, &whole) ||
               !own_lateness(d, sg, r, &whole, OWN_HOLD)) {
        sr->ended = sr->persistent;
        sr->ended_last = ss__finding(d, sr->persistent)->last_step;
        sr->persistent = -1; /* keeps the last snapshot */
    } else if (fl & F_SEEN) {
        refresh_persistent(d, sg, r, 0);
    }
    if (sr->persistent >= 0)
        return;
    if (sr->burst) {
        if (!still_late(d, sg, r, &sub))
            close_burst(d, sg, r);
        else if (fl & F_LATE)
            sr->burst_last = sg->step[idx];
    } else if (straggling(d, sg, r, sg->sub, sr->seen_sub, sr->last_sub,
                          sr->chance_sub, level_sub)) {
        open_burst(sg, r);
    }
    if (sr->pending && sr->seen >= ss__param_u32(d, P_S_MIN_STEPS))
        commit_pending(d, sg, r);
}

/* Whether ring slot K holds a rare wait of its last rank (judge_rare):
 * late by TYPICAL_MS * RARE_MEDIANS and RARE_FLOOR_MS or more, and not in
 * the phases other detectors own (a checkpoint, a data read). */
static int rare_wait(const ss_detectors *d, const straggler *sg, uint32_t k,
                     double typical_ms)
{
    int32_t r = sg->last_of[k];
    if (r < 0)
        return 0;
    size_t at = (size_t)r * sg->sw + k;
    double late = sg->late_ms[at];
    if (!(late >= RARE_MEDIANS * typical_ms) || late < RARE_FLOOR_MS)
        return 0;
    int b = sg->blame[at];
    if (b != NO_NAME && sg->expl_ms[at] >= d->p[P_S_BLAME_FRAC] * late) {
        const char *name = ss__name_of(d, b);
        if (strcmp(name, SS__CHECKPOINT_PHASE) == 0 || ss__data_phase_name(name))
            return 0;
    }
    return 1;
}

/*
 * Rare waits: a rank that makes every other rank wait a long time now and
 * then (a rank 0 that evaluates or logs for seconds every 50 steps while
 * the others wait in the next all-reduce) is last in too few steps for
 * the tests of chance, and its waits are no jitter of the job's steps (the
 * latest rank's lateness is the straggler's).  When the newest step's
 * last rank made the others wait a rare while (rare_wait: against the
 * window's median step), its rare waits in the window are summed: at
 * RARE_SHARE of the window's time and RARE_OWN of every rank's rare
 * waits, and when it made at least two since the start and RARE_OWN of
 * every rank's (one wait may be anyone's: the job's), it is a straggler
 * of mode "rare", one finding per episode
 * (refreshed at each wait while one of its waits is still in the window).
 * Only after straggler.min_steps steps (start-up is no wait), and not for
 * a rank already named persistent.  Scans the window only at such a step.
 */
static void judge_rare(ss_detectors *d, straggler *sg, uint32_t idx)
{
    int32_t rk = sg->last_of[idx];
    if (rk < 0 || sg->fill < ss__param_u32(d, P_S_MIN_STEPS))
        return;
    uint32_t r = (uint32_t)rk;
    strag_rank *sr = &sg->rank[r];
    if (sr->persistent >= 0 ||
        sg->late_ms[(size_t)r * sg->sw + idx] < RARE_FLOOR_MS)
        return; /* most steps: no scan */
    double *m = sg->f64, total = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (sg->med_ms[k] > 0) {
            m[n++] = sg->med_ms[k];
            total += sg->med_ms[k];
        }
    }
    if (n == 0)
        return;
    double typical = ss_median_f64(m, n);
    if (!rare_wait(d, sg, idx, typical))
        return;
    sr->rare_waits++;
    sg->rare_waits++;
    /* at least two waits, most of the job's: one wait may be anyone's */
    if (sr->rare_waits < 2 || sr->rare_waits < RARE_OWN * sg->rare_waits)
        return;
    double own = 0, all = 0, *waits = sg->f64;
    uint32_t n_own = 0, votes[SS_MAX_RUN_NAMES], outside = 0;
    memset(votes, 0, sizeof votes);
    uint64_t first = UINT64_MAX;
    for (uint32_t i = 0; i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!rare_wait(d, sg, k, typical))
            continue;
        size_t at = (size_t)sg->last_of[k] * sg->sw + k;
        all += sg->late_ms[at];
        if (sg->last_of[k] != rk)
            continue;
        own += sg->late_ms[at];
        waits[n_own++] = sg->late_ms[at];
        if (sg->step[k] < first)
            first = sg->step[k];
        if (sg->blame[at] != NO_NAME &&
            sg->expl_ms[at] >= d->p[P_S_BLAME_FRAC] * sg->late_ms[at])
            votes[sg->blame[at]]++;
        outside += (sg->flags[at] & F_OUTSIDE) != 0;
    }
    if (own < RARE_SHARE * total || own < RARE_OWN * all)
        return;
    uint64_t oldest = sg->step[ss__ring_back(sg->head, sg->sw,
                                             sg->fill - 1)];
    if (sr->rare < 0 || sr->rare_last < oldest) {
        sr->rare = ss__finding_open(d, "straggler");
        if (sr->rare < 0)
            return;
        ss__finding(d, sr->rare)->first_step = first;
    }
    ss_finding *f = ss__finding(d, sr->rare);
    sr->rare_last = f->last_step = sg->step[idx];
    ss__set_ranks(f, &rk, 1);
    uint32_t best = 0;
    int blame = NO_NAME;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            blame = p;
        }
    if (2 * best <= n_own)
        blame = NO_NAME;
    double med_wait = ss_median_f64(waits, n_own);
    double share = own / total;
    f->severity = share >= 2 * RARE_SHARE ? SS_CRITICAL : SS_WARNING;
    snprintf(f->phase, sizeof f->phase, "%s",
             blame != NO_NAME ? ss__name_of(d, blame) : "");
    char a[32], where[160] = "";
    if (blame != NO_NAME)
        snprintf(where, sizeof where, "; its %s phase explains it",
                 ss__name_of(d, blame));
    else if (2 * outside > n_own)
        snprintf(where, sizeof where, "; no phase it records accounts for "
                 "it: the time is spent outside them (code that no phase "
                 "wraps, or between phases)");
    snprintf(f->message, sizeof f->message,
             "rank %u made the other ranks wait %u time%s in the last %u "
             "steps, %s%s ms%s, the last at step %" PRIu64 " (%d %% of "
             "those steps' time: rare waits, far longer than a step)%s.", r,
             n_own, n_own == 1 ? "" : "s", sg->fill,
             n_own == 1 ? "for " : "a median ",
             ss__fmt_ms(a, sizeof a, med_wait), n_own == 1 ? "" : " each",
             sg->step[idx], (int)lround(share * 100), where);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "mode", "rare");
    ss__evidence_int(ev, "waits", n_own);
    ss__evidence_num(ev, "wait_ms_median", round(med_wait * 10) / 10);
    ss__evidence_num(ev, "median_step_ms", round(typical * 10) / 10);
    ss__evidence_num(ev, "share_pct", round(share * 1000) / 10);
    ss__evidence_int(ev, "steps_seen", sg->fill);
    if (blame != NO_NAME)
        ss__evidence_str(ev, "phase", ss__name_of(d, blame));
    else if (2 * outside > n_own)
        ss__evidence_int(ev, "outside_phases", 1);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, sr->rare);
}

static void straggler_step(void *state, ss_detectors *d,
                           const ss_step_view *v, uint32_t world)
{
    straggler *sg = state;
    uint32_t idx = sg->head;
    retire_slots(sg, idx, world);
    sg->head = (idx + 1) % sg->sw;
    if (sg->fill < sg->sw)
        sg->fill++;
    record_step(d, sg, v, world, idx);
    for (uint32_t r = 0; r < world; r++)
        judge_rank(d, sg, r, idx);
    judge_rare(d, sg, idx);
}

/* ---- the ss__detector hooks ---- */

static void straggler_destroy(void *state)
{
    straggler *sg = state;
    free(sg->step);
    free(sg->med_ms);
    free(sg->chance);
    free(sg->med_host_ms);
    free(sg->method);
    free(sg->points);
    free(sg->waits);
    free(sg->ref);
    free(sg->last_of);
    free(sg->late_ms);
    free(sg->expl_ms);
    free(sg->cpu_ex_ms);
    free(sg->host_ms);
    free(sg->cpu_ms);
    free(sg->lead_ms);
    free(sg->blame);
    free(sg->flags);
    if (sg->rank)
        for (uint32_t r = 0; r < sg->world; r++)
            free(sg->rank[r].pending);
    free(sg->rank);
    free(sg->bound_at);
    free(sg->f64);
    free(sg->i64);
    free(sg);
}

/* The fewest steps in which a rank of WORLD, last in every one of them,
 * passes the binomial test of a sub-window of that many steps:
 * (1/WORLD)^n <= ALPHA / WORLD * n / SW.  At least SW when none is
 * shorter. */
static uint32_t shortest_burst(double alpha, uint32_t world, uint32_t sw)
{
    for (uint32_t n = 1; world >= 2 && n < sw; n++)
        if (n * log((double)world) >= -log(alpha / world * n / sw))
            return n;
    return sw;
}

static void *straggler_create(ss_detectors *d)
{
    straggler *sg = ss__zalloc(1, sizeof *sg);
    if (!sg)
        return NULL;
    size_t w = d->world;
    sg->world = d->world;
    sg->sw = ss__param_u32(d, P_S_WINDOW);
    /* transient_steps <= sw (resolved); longer with few ranks, where a
     * short run of last places happens by chance */
    sg->sub = ss__param_u32(d, P_S_TRANSIENT);
    uint32_t shortest = shortest_burst(d->p[P_S_ALPHA], sg->world, sg->sw);
    if (sg->sub < shortest)
        sg->sub = shortest;
    size_t sw = sg->sw;
    size_t scratch = (w > 4 * sw ? w : 4 * sw) + NOISE_PEERS;
    sg->step = ss__zalloc(sw, sizeof *sg->step);
    sg->med_ms = ss__zalloc(sw, sizeof *sg->med_ms);
    sg->chance = ss__zalloc(sw, sizeof *sg->chance);
    sg->med_host_ms = ss__zalloc(sw, sizeof *sg->med_host_ms);
    sg->method = ss__zalloc(sw, sizeof *sg->method);
    sg->points = ss__zalloc(sw, sizeof *sg->points);
    sg->waits = ss__zalloc(sw, sizeof *sg->waits);
    sg->ref = ss__zalloc(sw, sizeof *sg->ref);
    sg->last_of = ss__zalloc(sw, sizeof *sg->last_of);
    sg->late_ms = ss__zalloc(w * sw, sizeof *sg->late_ms);
    sg->expl_ms = ss__zalloc(w * sw, sizeof *sg->expl_ms);
    sg->cpu_ex_ms = ss__zalloc(w * sw, sizeof *sg->cpu_ex_ms);
    sg->host_ms = ss__zalloc(w * sw, sizeof *sg->host_ms);
    sg->cpu_ms = ss__zalloc(w * sw, sizeof *sg->cpu_ms);
    if (w <= LEAD_MAX_RANKS)
        sg->lead_ms = ss__zalloc(w * sw, sizeof *sg->lead_ms);
    sg->blame = ss__zalloc(w * sw, sizeof *sg->blame);
    sg->flags = ss__zalloc(w * sw, sizeof *sg->flags);
    sg->rank = ss__zalloc(w, sizeof *sg->rank);
    sg->bound_at = ss__zalloc(sw + 1, sizeof *sg->bound_at);
    sg->f64 = ss__zalloc(scratch, sizeof *sg->f64);
    sg->i64 = ss__zalloc(2 * w, sizeof *sg->i64);
    if (!sg->step || !sg->med_ms || !sg->chance || !sg->med_host_ms ||
        !sg->method || !sg->points || !sg->waits || !sg->ref ||
        !sg->last_of || !sg->late_ms || !sg->expl_ms ||
        !sg->cpu_ex_ms || !sg->host_ms || !sg->cpu_ms ||
        (w <= LEAD_MAX_RANKS && !sg->lead_ms) || !sg->blame ||
        !sg->flags || !sg->rank || !sg->bound_at || !sg->f64 || !sg->i64) {
        straggler_destroy(sg);
        return NULL;
    }
    for (size_t r = 0; r < w; r++) {
        sg->rank[r].persistent = sg->rank[r].burst_finding =
            sg->rank[r].ended = sg->rank[r].rare = -1;
        sg->rank[r].cost_ms = -1;
    }
    for (size_t n = 0; n <= sw; n++)
        sg->bound_at[n] = -1;
    return sg;
}

/* The run ends: a burst still open, or still pending, is judged now. */
static void straggler_end(void *state, ss_detectors *d)
{
    straggler *sg = state;
    for (uint32_t r = 0; r < sg->world; r++) {
        strag_rank *sr = &sg->rank[r];
        if (sr->burst)
            close_burst(d, sg, r);
        if (sr->pending && sr->persistent < 0)
            commit_pending(d, sg, r);
    }
}

const ss__detector ss__straggler_detector = {
    .name = "straggler",
    .create = straggler_create,
    .on_names = NULL,
    .on_step = straggler_step,
    .on_end = straggler_end,
    .destroy = straggler_destroy,
};
