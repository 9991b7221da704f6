/*
 * detect_host.c - the host-cause detector: a rank that loses its step time
 * to the host rather than to its own work, and which cause it is.
 *
 * The host stage measures, for each rank and step, how long the rank's
 * process tree waited for a CPU (run-queue delay), was stopped (SIGSTOP, a
 * debugger, a frozen container) and had its cgroup throttled by its CPU
 * quota (ss_host_step, model.h).  Over a ring of the last host.window
 * steps this detector keeps, per rank and cause, the time lost and the
 * rank's step time, and, per step, which rank alone lost time in a step
 * the whole job paid for.  A rank is named for a cause (finding kinds
 * cpu_starved, stopped, cpu_throttled) when one of
 *   (share)      it lost a share of its step time to the cause that is
 *                host.min_share above the median rank's and
 *                host.peer_factor times it, and more than its step's
 *                median rank in more steps than chance allows (a sign
 *                test at host.alpha split over ranks and causes):
 *                machine-wide pressure, alike on every rank, is never
 *                blamed on one of them; or
 *   (slow steps) the job's slow steps are its: in at least
 *                host.min_events steps that ran over the window's median
 *                step by host.explain_frac of what it alone lost (beyond
 *                the runner-up rank), it was that rank more often than
 *                chance allows among exchangeable ranks (a binomial test at
 *                the same level), and they cost the job host.min_share of
 *                its time (for run-queue delay, it also waits more per
 *                time it runs than its peers).  This names the
 *                intermittent straggler that arrival times cannot show: a
 *                rank stopped inside the collective, where every rank
 *                waits alike; or
 *   (stops)      for stops only, it alone was stopped in host.min_stops
 *                steps that cost host.min_share of the window: a healthy
 *                machine stops no rank, so a few stops are evidence.
 * An episode stays open, its finding refreshed, while one rule holds at
 * half its thresholds and a test level of HOLD_LEVEL.  For every step it
 * tells jitter what one named rank alone lost (that part of the step is
 * explained) and what every rank lost alike (ss__step_notes), and it
 * answers the straggler detector's question
 * whether the host explains a straggler's lateness (ss__host_explain).
 * Nothing is allocated until the first step that carries host evidence.
 * docs/detectors.md, "cpu_starved, stopped, cpu_throttled", states every
 * rule and default.
 */
#include "detect_host.h"

#include "detectors_internal.h"
#include "detect_gpu.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

/* The causes, in the order of the fields read by lost_ms(). */
enum {
    C_RUNQ = SS_HOST_CAUSE_RUN_QUEUE,
    C_STOPPED = SS_HOST_CAUSE_STOPPED,
    C_THROTTLED = 2,
    N_CAUSES = SS_HOST_CAUSES
};

static const char *const cause_kind[N_CAUSES] = {"cpu_starved", "stopped",
                                                 "cpu_throttled"};
static const char *const cause_key[N_CAUSES] = {"run_queue", "stopped",
                                                "throttled"};
static const char *const cause_words[N_CAUSES] = {
    "run-queue delay", "stops", "CPU quota throttling"};

/* The level of the tests for an open episode to go on (with half the
 * thresholds): looser than the opening level (hysteresis), still far from
 * a coin flip. */
#define HOLD_LEVEL 0.01

/* stop_alone of the newest step, which waits for the next */
#define STOP_UNDECIDED (-2)

/* How much more a starved rank waits per CPU time it runs (wait / run)
 * than its peers: a rank treated alike by the scheduler has the same ratio
 * whatever it computes (1.0 up to noise; up to 1.4 seen on a loaded
 * machine's clean job, where each rank waits a third of its step); a rank
 * at nice 19 beside a busy loop waits 1.9 times its peers' ratio. */
#define WAIT_RATIO_FACTOR 1.6

typedef struct {
    double lost_ms, step_ms; /* sums over the ring's steps where the rank's
                                loss to the cause and its step time are
                                both known */
    uint32_t known;          /* those steps */
    uint32_t above, decided; /* steps it lost more than the median rank
                                in; steps it lost more or less (not tied) */
    uint32_t alone;          /* slow steps of the ring it alone explained */
    int32_t finding;         /* of the open episode, -1 */
    double height;           /* the open (or last) episode's largest cost
                                to the job (ss__words_at_height) */
    int32_t ended;           /* the finding of the last episode, -1 */
    uint64_t ended_step;     /* the step it ended at */
    double cost_ms;          /* without an open episode, what it lost
                                beyond the median rank since the rules
                                held (the window's, then each step's)
                                while they held within a window; -1 when
                                they did not (waiting_cost) */
    uint64_t cost_held;      /* the step they last held at */
} cause_state;

typedef struct {
    uint32_t world, hw, head, fill; /* ring of hw steps; head: next slot */
    int started;                    /* host evidence seen, ring allocated */
    /* per ring slot */
    uint64_t *step;
    float *med_ms;    /* the median rank's step time; NaN unknown */
    float *excess_ms; /* med_ms over the window's median step before it;
                         NaN until host.min_steps steps were seen */
    /* per cause and ring slot: [c * hw + slot] */
    float *median_lost; /* the median rank's loss, ms; NaN none measured */
    int32_t *alone_rank;/* the rank that alone explained the slow step */
    float *alone_ms;    /* what it lost beyond the runner-up rank */
    float *chance;      /* 1 / ranks measured, in such a step; else 0 */
    int32_t *stop_alone;/* per slot: the rank alone stopped in the step
                           (decide_stop_alone), -1 none, STOP_UNDECIDED */
    /* per cause, of the step being recorded: the rank that lost the most
     * and by how much more than the runner-up (-1: fewer than 2 ranks
     * measured, or a tie), whatever the step's excess */
    int32_t top_now[N_CAUSES];
    float top_gap_now[N_CAUSES];
    uint32_t n_alone[N_CAUSES];   /* slow steps explained in the ring */
    double chance_sum[N_CAUSES];  /* sum of their chance */
    /* per ring slot, rank and cause: at() */
    float *lost;
    float *rank_step_ms; /* per ring slot and rank: step_at() */
    cause_state *cs;     /* per rank and cause: [r * N_CAUSES + c] */
    double *f64;         /* scratch: max(world, hw) */
    /* Who arrived last at the step's most skewed sync point, per ring slot
     * (-1: no sync point measured), the chance of it among the ranks that
     * arrived (1/n), and per rank how many of the ring's steps it was
     * last in: a loss that delays nobody is not a cause. */
    int32_t *last_rank;
    float *last_chance;
    uint32_t *n_last;
    uint32_t n_sync_steps;
    double last_chance_sum;
    /* CPU time per ring slot and rank (step_at(); NaN unknown), and per
     * rank the sums over the ring's steps where both its run-queue delay
     * and its CPU time are known: how long it waited per time it ran. */
    float *rank_cpu_ms;
    double *wait_sum, *run_sum;
    uint32_t *n_wait_run;
    /* The fraction of a step that is one sample in the tests of chance of
     * run-queue delay: samples_frac where the median rank waits for a CPU
     * host.min_share of its step or more (the machine is loaded as a
     * whole), else 1; 1 for the other causes. */
    double runq_frac;
} host;

/* Rank-step RS's loss to cause C, in ms; NaN when not measured. */
static double lost_ms(const ss_rank_step *rs, int c)
{
    if (!rs->present || !rs->host)
        return NAN;
    ss_dur_ns ns = c == C_RUNQ      ? rs->host->runq_ns
                   : c == C_STOPPED ? rs->host->stopped_ns
                                    : rs->host->throttled_ns;
    return ns == SS_MISSING || ns < 0 ? NAN : (double)ns / 1e6;
}

/* Indexes of rank R's values in ring slot K: slot-major, so that a step
 * writes (and retires) one contiguous row. */
static size_t at(const host *h, uint32_t r, int c, uint32_t k)
{
    return ((size_t)k * h->world + r) * N_CAUSES + (size_t)c;
}

static size_t step_at(const host *h, uint32_t r, uint32_t k)
{
    return (size_t)k * h->world + r;
}

static cause_state *cause_of(host *h, uint32_t r, int c)
{
    return &h->cs[(size_t)r * N_CAUSES + (size_t)c];
}

/* The share of its step time rank-cause RC lost; 0 when nothing known. */
static double share_of(const cause_state *rc)
{
    return rc->step_ms > 0 && rc->lost_ms > 0 ? rc->lost_ms / rc->step_ms
                                              : 0;
}

/* Frees the ring and forgets everything but the sizes. */
static void free_ring(host *h)
{
    free(h->step);
    free(h->med_ms);
    free(h->excess_ms);
    free(h->median_lost);
    free(h->alone_rank);
    free(h->alone_ms);
    free(h->chance);
    free(h->stop_alone);
    free(h->lost);
    free(h->rank_step_ms);
    free(h->cs);
    free(h->f64);
    free(h->last_rank);
    free(h->last_chance);
    free(h->n_last);
    free(h->rank_cpu_ms);
    free(h->wait_sum);
    free(h->run_sum);
    free(h->n_wait_run);
    uint32_t world = h->world, hw = h->hw;
    memset(h, 0, sizeof *h);
    h->world = world;
    h->hw = hw;
    h->runq_frac = 1;
}

/* Allocates the ring on the first step with host evidence; -1 on
 * out-of-memory (nothing kept; tried again at the next step). */
static int start_ring(host *h)
{
    size_t hw = h->hw, w = h->world, per = N_CAUSES * hw;
    size_t scratch = w > hw ? w : hw;
    h->step = ss__zalloc(hw, sizeof *h->step);
    h->med_ms = ss__zalloc(hw, sizeof *h->med_ms);
    h->excess_ms = ss__zalloc(hw, sizeof *h->excess_ms);
    h->median_lost = ss__zalloc(per, sizeof *h->median_lost);
    h->alone_rank = ss__zalloc(per, sizeof *h->alone_rank);
    h->alone_ms = ss__zalloc(per, sizeof *h->alone_ms);
    h->chance = ss__zalloc(per, sizeof *h->chance);
    h->stop_alone = ss__zalloc(hw, sizeof *h->stop_alone);
    h->lost = ss__zalloc(w * per, sizeof *h->lost);
    h->rank_step_ms = ss__zalloc(w * hw, sizeof *h->rank_step_ms);
    h->cs = ss__zalloc(w * N_CAUSES, sizeof *h->cs);
    h->f64 = ss__zalloc(scratch, sizeof *h->f64);
    h->last_rank = ss__zalloc(hw, sizeof *h->last_rank);
    h->last_chance = ss__zalloc(hw, sizeof *h->last_chance);
    h->n_last = ss__zalloc(w ? w : 1, sizeof *h->n_last);
    h->rank_cpu_ms = ss__zalloc(w * hw, sizeof *h->rank_cpu_ms);
    h->wait_sum = ss__zalloc(w ? w : 1, sizeof *h->wait_sum);
    h->run_sum = ss__zalloc(w ? w : 1, sizeof *h->run_sum);
    h->n_wait_run = ss__zalloc(w ? w : 1, sizeof *h->n_wait_run);
    if (!h->step || !h->med_ms || !h->excess_ms || !h->median_lost ||
        !h->alone_rank || !h->alone_ms || !h->chance || !h->stop_alone ||
        !h->lost ||
        !h->rank_step_ms || !h->cs || !h->f64 || !h->last_rank ||
        !h->last_chance || !h->n_last || !h->rank_cpu_ms || !h->wait_sum ||
        !h->run_sum || !h->n_wait_run) {
        free_ring(h);
        return -1;
    }
    for (size_t i = 0; i < per; i++)
        h->alone_rank[i] = -1;
    for (size_t i = 0; i < hw; i++)
        h->last_rank[i] = h->stop_alone[i] = -1;
    for (size_t i = 0; i < w * N_CAUSES; i++) {
        h->cs[i].finding = h->cs[i].ended = -1;
        h->cs[i].cost_ms = -1;
    }
    h->started = 1;
    return 0;
}

/* Takes ring slot K, about to be overwritten, out of the running sums. */
static void retire_slot(host *h, uint32_t k)
{
    if (h->fill < h->hw)
        return; /* never written */
    if (h->last_rank[k] >= 0) {
        h->n_last[h->last_rank[k]]--;
        h->n_sync_steps--;
        h->last_chance_sum -= h->last_chance[k];
        h->last_rank[k] = -1;
    }
    for (int c = 0; c < N_CAUSES; c++) {
        size_t ck = (size_t)c * h->hw + k;
        if (h->alone_rank[ck] >= 0) {
            cause_of(h, (uint32_t)h->alone_rank[ck], c)->alone--;
            h->n_alone[c]--;
            h->chance_sum[c] -= h->chance[ck];
        }
    }
    for (uint32_t r = 0; r < h->world; r++) {
        float st = h->rank_step_ms[step_at(h, r, k)];
        float cpu = h->rank_cpu_ms[step_at(h, r, k)];
        float wait = h->lost[at(h, r, C_RUNQ, k)];
        if (!isnan(cpu) && !isnan(wait)) {
            h->wait_sum[r] -= wait;
            h->run_sum[r] -= cpu;
            h->n_wait_run[r]--;
        }
        for (int c = 0; c < N_CAUSES; c++) {
            float lost = h->lost[at(h, r, c, k)];
            float med = h->median_lost[(size_t)c * h->hw + k];
            cause_state *rc = cause_of(h, r, c);
            if (!isnan(lost) && lost != med) {
                rc->decided--;
                rc->above -= lost > med;
            }
            if (isnan(lost) || isnan(st))
                continue;
            rc->lost_ms -= lost;
            rc->step_ms -= st;
            rc->known--;
        }
    }
}

/* The median of the median-rank step times of the ring's filled slots
 * other than K; NaN when fewer than MIN are known. */
static double window_median_step(const host *h, uint32_t k, uint32_t min)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t s = ss__ring_back(h->head, h->hw, i);
        if (s != k && !isnan(h->med_ms[s]))
            h->f64[n++] = h->med_ms[s];
    }
    return n >= min && n > 0 ? ss_median_f64(h->f64, n) : NAN;
}

/*
 * Records cause C of step V in ring slot K: each rank's loss, the median
 * rank's, and whether one rank alone explains the step's excess EXCESS
 * over the window's median step BASE.
 */
static void record_cause(ss_detectors *d, host *h, const ss_step_view *v,
                         uint32_t world, uint32_t k, int c, double base,
                         double excess)
{
    size_t ck = (size_t)c * h->hw + k;
    uint32_t n = 0;
    int32_t top = -1;
    double top_ms = 0, second_ms = 0;
    for (uint32_t r = 0; r < h->world; r++) {
        double lost = r < world ? lost_ms(&v->ranks[r], c) : NAN;
        h->lost[at(h, r, c, k)] = (float)lost;
        if (isnan(lost))
            continue;
        h->f64[n++] = lost;
        if (top < 0 || lost > top_ms) {
            second_ms = top < 0 ? 0 : top_ms;
            top_ms = lost;
            top = (int32_t)r;
        } else if (lost > second_ms) {
            second_ms = lost;
        }
        float st = h->rank_step_ms[step_at(h, r, k)];
        if (!isnan(st)) {
            cause_state *rc = cause_of(h, r, c);
            rc->lost_ms += (float)lost;
            rc->step_ms += st;
            rc->known++;
        }
    }
    float med = n ? (float)ss_median_f64(h->f64, n) : NAN;
    h->median_lost[ck] = med;
    for (uint32_t r = 0; r < h->world && n; r++) {
        float lost = h->lost[at(h, r, c, k)];
        cause_state *rc = cause_of(h, r, c);
        if (!isnan(lost) && lost != med) {
            rc->decided++;
            rc->above += lost > med;
        }
    }
    h->alone_rank[ck] = -1;
    h->alone_ms[ck] = 0;
    h->chance[ck] = 0;
    double gap = top_ms - second_ms;
    h->top_now[c] = n >= 2 && gap > 0 ? top : -1;
    h->top_gap_now[c] = n >= 2 && gap > 0 ? (float)gap : 0;
    if (n < 2 || isnan(excess) || gap <= 0 ||
        gap < d->p[P_H_MIN_SHARE] * base ||
        excess < d->p[P_H_EXPLAIN_FRAC] * gap)
        return;
    h->alone_rank[ck] = top;
    h->alone_ms[ck] = (float)gap;
    h->chance[ck] = (float)(1.0 / n);
    h->n_alone[c]++;
    h->chance_sum[c] += h->chance[ck];
    cause_of(h, (uint32_t)top, c)->alone++;
}

/* Records step V in ring slot K and tells jitter what every rank lost to
 * the host alike. */
static void record_step(ss_detectors *d, host *h, const ss_step_view *v,
                        uint32_t world, uint32_t k)
{
    h->step[k] = v->step;
    const ss_sync_stat *skewed = NULL;
    for (uint32_t i = 0; i < v->n_syncs; i++) {
        const ss_sync_stat *y = &v->syncs[i];
        if (y->n >= 2 && y->worst_rank >= 0 &&
            (uint32_t)y->worst_rank < h->world && y->skew_ns != SS_MISSING &&
            (!skewed || y->skew_ns > skewed->skew_ns))
            skewed = y;
    }
    if (skewed) {
        h->last_rank[k] = skewed->worst_rank;
        h->last_chance[k] = (float)(1.0 / skewed->n);
        h->n_last[skewed->worst_rank]++;
        h->n_sync_steps++;
        h->last_chance_sum += h->last_chance[k];
    }
    h->med_ms[k] = v->step_time.median == SS_MISSING
                       ? NAN
                       : (float)((double)v->step_time.median / 1e6);
    double base = window_median_step(h, k, ss__param_u32(d, P_H_MIN_STEPS));
    h->excess_ms[k] = (float)(h->med_ms[k] - base);
    for (uint32_t r = 0; r < h->world; r++) {
        const ss_rank_step *rs = r < world ? &v->ranks[r] : NULL;
        h->rank_step_ms[step_at(h, r, k)] =
            rs && rs->present && rs->step_ns != SS_MISSING && rs->step_ns > 0
                ? (float)((double)rs->step_ns / 1e6)
                : NAN;
        h->rank_cpu_ms[step_at(h, r, k)] =
            rs && rs->present && rs->host && rs->host->cpu_ns != SS_MISSING &&
                    rs->host->cpu_ns >= 0
                ? (float)((double)rs->host->cpu_ns / 1e6)
                : NAN;
    }
    double all_ms = 0, all_most = 0;
    for (int c = 0; c < N_CAUSES; c++)
        record_cause(d, h, v, world, k, c, base, h->excess_ms[k]);
    for (uint32_t r = 0; r < h->world; r++) {
        float cpu = h->rank_cpu_ms[step_at(h, r, k)];
        float wait = h->lost[at(h, r, C_RUNQ, k)];
        if (!isnan(cpu) && !isnan(wait)) {
            h->wait_sum[r] += wait;
            h->run_sum[r] += cpu;
            h->n_wait_run[r]++;
        }
    }
    for (int c = 0; c < N_CAUSES; c++) {
        float med = h->median_lost[(size_t)c * h->hw + k];
        if (!isnan(med) && med > 0) {
            all_ms += med;
            if (med > all_most) {
                all_most = med;
                d->note.host_all_cause = c;
            }
        }
    }
    d->note.host_all_ms = all_ms;
}

/* ---- judging a rank ---- */

/* The median over the ranks judged (seen in host.min_steps steps) of their
 * share of step time lost to cause C, or, with PER_STEP, of their loss
 * per step in ms. */
static double median_rank(const ss_detectors *d, host *h, int c,
                          int per_step)
{
    uint32_t n = 0, min = ss__param_u32(d, P_H_MIN_STEPS);
    for (uint32_t r = 0; r < h->world; r++) {
        const cause_state *rc = cause_of(h, r, c);
        if (rc->known >= min && rc->known > 0)
            h->f64[n++] = per_step ? rc->lost_ms / rc->known : share_of(rc);
    }
    double m = ss_median_f64(h->f64, n);
    return isnan(m) || m < 0 ? 0 : m;
}

/* The share rule at SCALE of its threshold: RC's share is host.min_share
 * (times SCALE) above the median rank's and host.peer_factor times it. */
static int share_rule(const ss_detectors *d, const cause_state *rc,
                      double med_share, double scale)
{
    double share = share_of(rc);
    return share - med_share >= scale * d->p[P_H_MIN_SHARE] &&
           share >= d->p[P_H_PEER_FACTOR] * med_share;
}

/*
 * How much of one sample a step of the ring is in the tests of chance of
 * run-queue delay on a machine loaded as a whole: the ring's median-rank
 * step times over as many host.sample_ms, at most 1.  Which rank waits
 * for a core that every rank shares with other work is the scheduler's
 * placement, which holds for its time slices and longer, so consecutive
 * short steps share their fate: on 2 cores kept busy by other processes
 * a clean 2-rank job of 3 ms steps had one rank wait more than the other
 * in 82 of 100 steps (a sign test's p of 1e-10.5 were they independent).
 */
static double samples_frac(const ss_detectors *d, const host *h)
{
    double sample = d->p[P_H_SAMPLE_MS], span = 0;
    uint32_t n = 0;
    if (sample <= 0)
        return 1;
    for (uint32_t i = 0; i < h->fill; i++) {
        float med = h->med_ms[ss__ring_back(h->head, h->hw, i)];
        if (!isnan(med)) {
            span += med;
            n++;
        }
    }
    return n == 0 || span >= n * sample ? 1 : span / (n * sample);
}

/* P(Binomial(N, P) >= K) with N and K counted in samples of FRAC steps. */
static double tail_in_samples(uint32_t n, uint32_t k, double p, double frac)
{
    if (frac < 1) {
        n = (uint32_t)lround(n * frac);
        k = (uint32_t)lround(k * frac);
    }
    return ss_binomial_upper_tail(n, k, p);
}

/* The fraction of a step that is one sample for cause C (samples_frac). */
static double frac_of(const host *h, int c)
{
    return c == C_RUNQ ? h->runq_frac : 1;
}

/* The sign test: RC lost more than the median rank of its step in more of
 * the untied steps than chance allows among exchangeable ranks (each is
 * above the median with probability 1/2) at LEVEL, the steps counted as
 * FRAC of a sample each. */
static int above_peers(const cause_state *rc, double level, double frac)
{
    return rc->decided > 0 &&
           tail_in_samples(rc->decided, rc->above, 0.5, frac) <= level;
}

/* What the slow steps rank R alone explained of cause C cost the job: the
 * sum of their excess (up to what R lost) over the sum of the ring's
 * median steps. */
static double alone_cost(const host *h, uint32_t r, int c)
{
    double cost = 0, steps = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        size_t ck = (size_t)c * h->hw + k;
        if (!isnan(h->med_ms[k]))
            steps += h->med_ms[k];
        if (h->alone_rank[ck] == (int32_t)r)
            cost += fmin(h->alone_ms[ck], h->excess_ms[k]);
    }
    return steps > 0 ? cost / steps : 0;
}

/* The slow-step rule at SCALE of its thresholds: rank R alone explained
 * at least host.min_events (times SCALE) of the ring's slow steps of
 * cause C, more often than chance among exchangeable ranks allows at
 * LEVEL, and they cost the job at least host.min_share (times SCALE) of
 * its time. */
static int alone_rule(const ss_detectors *d, const host *h, uint32_t r,
                      int c, double level, double scale)
{
    const cause_state *rc = &h->cs[(size_t)r * N_CAUSES + (size_t)c];
    uint32_t n = h->n_alone[c];
    return rc->alone >= scale * d->p[P_H_MIN_EVENTS] && n > 0 &&
           tail_in_samples(n, rc->alone, h->chance_sum[c] / n,
                           frac_of(h, c)) <= level &&
           alone_cost(h, r, c) >= scale * d->p[P_H_MIN_SHARE];
}

/* Whether rank R's steady wait for a CPU delays the others: where the job
 * has sync points, R arrived last at the most skewed one in more of the
 * ring's steps than chance allows among exchangeable ranks at LEVEL.  A
 * rank that waits for a CPU more than its peers but still is not last (on
 * a machine whose cores every rank shares, where one rank happens to share
 * its core with the controller, say) costs the job nothing.  Stops and
 * throttling are not asked this: they are rare on a healthy machine, and
 * land inside the collective as often as before it.  Without sync points
 * there is nothing to tell, and the share rule alone holds. */
static int delays_others(const ss_detectors *d, const host *h, uint32_t r,
                         double level)
{
    if (h->n_sync_steps < ss__param_u32(d, P_H_MIN_STEPS))
        return 1;
    double chance = h->last_chance_sum / h->n_sync_steps;
    return tail_in_samples(h->n_sync_steps, h->n_last[r], chance,
                           h->runq_frac) <= level;
}

/* Whether rank R waited for a CPU more, per CPU time it ran (wait / run),
 * than its peers pooled: WAIT_RATIO_FACTOR times their ratio, and its
 * share of runnable time spent waiting (wait / (wait + run)) half of
 * host.min_share (at SCALE) above theirs.  A rank that
 * computes more than its peers (its own work makes it a straggler) waits
 * more in all on shared cores, but not more per CPU time it asks for (the
 * scheduler treats it alike): that is not starvation.  Where CPU time is
 * not measured there is nothing to tell, and this holds. */
static int wait_per_run_above(const ss_detectors *d, double my_wait,
                               double my_run, double wait, double run,
                               double scale)
{
    if (my_run <= 0 || wait + run <= 0 || run <= 0)
        return 1;
    /* compared as wait per CPU time (wait / run), which keeps its contrast
     * on a machine where every rank waits most of the time: runnable 75 %
     * of the time waiting against peers' 61 % is 3.0 against 1.6 */
    double mine_per_run = my_wait / my_run;
    double peers_per_run = wait / run;
    double peers = wait / (wait + run);
    double mine = my_wait / (my_wait + my_run);
    return mine_per_run >= WAIT_RATIO_FACTOR * peers_per_run &&
           mine - peers >= 0.5 * scale * d->p[P_H_MIN_SHARE];
}

static int waits_more_per_run(const ss_detectors *d, const host *h,
                              uint32_t r, double scale)
{
    uint32_t min = ss__param_u32(d, P_H_MIN_STEPS);
    if (h->n_wait_run[r] < min || h->run_sum[r] <= 0)
        return 1;
    double wait = 0, run = 0;
    for (uint32_t q = 0; q < h->world; q++)
        if (q != r && h->n_wait_run[q] >= min) {
            wait += h->wait_sum[q];
            run += h->run_sum[q];
        }
    return wait_per_run_above(d, h->wait_sum[r], h->run_sum[r], wait, run,
                              scale);
}

/* waits_more_per_run over the ring's steps FIRST..LAST alone, where R's
 * run-queue delay and CPU time are both known in half host.min_steps of
 * them (a burst is short); else over the whole ring.  Two ranks that took
 * turns waiting for a busy core waited alike over the window, and each
 * far more in its own turn. */
static int waits_more_per_run_in(const ss_detectors *d, const host *h,
                                 uint32_t r, uint64_t first, uint64_t last)
{
    double my_wait = 0, my_run = 0, wait = 0, run = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        if (h->step[k] < first || h->step[k] > last)
            continue;
        for (uint32_t q = 0; q < h->world; q++) {
            float cpu = h->rank_cpu_ms[step_at(h, q, k)];
            float w = h->lost[at(h, q, C_RUNQ, k)];
            if (isnan(cpu) || isnan(w))
                continue;
            if (q == r) {
                my_wait += w;
                my_run += cpu;
                n++;
            } else {
                wait += w;
                run += cpu;
            }
        }
    }
    if (2 * n < ss__param_u32(d, P_H_MIN_STEPS))
        return waits_more_per_run(d, h, r, 1);
    return wait_per_run_above(d, my_wait, my_run, wait, run, 1);
}

/* The stops rule at SCALE of its thresholds: rank R alone was stopped
 * (stop_alone) in at least host.min_stops (times SCALE)
 * of the ring's steps, and those stops cost it host.min_share (times
 * SCALE) of the ring's median step time; or once, for host.one_stop_steps
 * (times SCALE) of the ring's median step.  A healthy machine stops no
 * rank: a few stops on one rank are evidence, not noise, and need no test
 * of chance (a machine paused as a whole stops every rank alike, which
 * this never counts). */
static int stops_rule(const ss_detectors *d, const host *h, uint32_t r,
                      double scale)
{
    const cause_state *rc = &h->cs[(size_t)r * N_CAUSES + C_STOPPED];
    if (share_of(rc) < 0.5 * scale * d->p[P_H_MIN_SHARE])
        return 0; /* cheap: the stops cost too little */
    uint32_t n = 0;
    double lost = 0, steps = 0, longest = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        if (!isnan(h->med_ms[k]))
            steps += h->med_ms[k];
        if (h->stop_alone[k] == (int32_t)r) {
            float mine = h->lost[at(h, r, C_STOPPED, k)];
            n++;
            lost += mine;
            if (mine > longest)
                longest = mine;
        }
    }
    if (n == 0 || steps <= 0)
        return 0;
    /* one stop is enough when it lasted many steps: a rank frozen once
     * for seconds (a debugger, a freezer, a signal from outside).  The
     * yardstick is the ring's median step, which the stopped step (the
     * others wait in it) does not move, as it would move a mean early in
     * a run. */
    if (longest >= scale * d->p[P_H_ONE_STOP_STEPS] *
                       window_median_step(h, h->hw, 1))
        return 1;
    return n >= scale * d->p[P_H_MIN_STOPS] &&
           lost / steps >= scale * d->p[P_H_MIN_SHARE];
}

/* Whether rank R is behind cause C at SCALE of the thresholds and LEVEL
 * of the tests: the share rule with the sign test, the slow-step rule, or
 * for stops the stops rule. */
static int behind(const ss_detectors *d, const host *h, uint32_t r, int c,
                  double med_share, double level, double scale)
{
    const cause_state *rc = &h->cs[(size_t)r * N_CAUSES + (size_t)c];
    return (share_rule(d, rc, med_share, scale) &&
            above_peers(rc, level, frac_of(h, c)) &&
            (c != C_RUNQ || (delays_others(d, h, r, level) &&
                             waits_more_per_run(d, h, r, scale)))) ||
           (alone_rule(d, h, r, c, level, scale) &&
            (c != C_RUNQ || waits_more_per_run(d, h, r, scale))) ||
           (c == C_STOPPED && stops_rule(d, h, r, scale));
}

/* Rank R's loss to cause C over the ring, for its finding. */
typedef struct {
    uint32_t seen;             /* steps with loss and step time known */
    double share, per_step_ms; /* of its step time; ms per step */
    double med_share, med_per_step_ms; /* the median rank's */
    uint32_t above, decided;   /* steps above the median rank / untied */
    double log10_p_above;      /* of being above that often by chance */
    uint32_t affected;         /* steps it lost host.min_share of one in */
    double affected_ms;        /* its median loss in those steps */
    uint32_t alone, n_alone;   /* slow steps it explained / all of them */
    double slow_excess_ms;     /* their median excess over the median step */
    double log10_p_alone;
    double cost;               /* what the job loses, fraction of a step */
    double med_step_ms;
    int intermittent;          /* the slow-step rule holds (as for an
                                  open episode) */
    uint64_t first, last;      /* first and last affected step */
} cause_summary;

static void summarize(const ss_detectors *d, host *h, uint32_t r, int c,
                      double med_share, cause_summary *s)
{
    memset(s, 0, sizeof *s);
    const cause_state *rc = cause_of(h, r, c);
    s->seen = rc->known;
    s->share = share_of(rc);
    s->per_step_ms = rc->known ? fmax(rc->lost_ms, 0) / rc->known : 0;
    s->med_share = med_share;
    s->med_per_step_ms = median_rank(d, h, c, 1);
    s->above = rc->above;
    s->decided = rc->decided;
    double above_tail =
        tail_in_samples(rc->decided, rc->above, 0.5, frac_of(h, c));
    s->log10_p_above = above_tail > 0 ? log10(above_tail) : -300;
    s->alone = rc->alone;
    s->n_alone = h->n_alone[c];
    double tail = s->n_alone ? tail_in_samples(
                                   s->n_alone, s->alone,
                                   h->chance_sum[c] / s->n_alone,
                                   frac_of(h, c))
                             : 1;
    s->log10_p_alone = tail > 0 ? log10(tail) : -300;
    s->intermittent = alone_rule(d, h, r, c, HOLD_LEVEL, 0.5);
    /* scratch: the affected losses, then the slow steps' excesses, then
     * the median step times (hw each at most; f64 holds max(world, hw)) */
    double *aff = h->f64;
    uint32_t n_aff = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i); /* newest first */
        float med = h->med_ms[k];
        float lost = h->lost[at(h, r, c, k)];
        if (isnan(lost) || isnan(med) || lost <= 0 ||
            lost < d->p[P_H_MIN_SHARE] * med)
            continue;
        if (n_aff == 0)
            s->last = h->step[k];
        s->first = h->step[k];
        aff[n_aff++] = lost;
    }
    s->affected = n_aff;
    s->affected_ms = n_aff ? ss_median_f64(aff, n_aff) : 0;
    uint32_t n_ex = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        if (h->alone_rank[(size_t)c * h->hw + k] == (int32_t)r)
            h->f64[n_ex++] = h->excess_ms[k];
    }
    s->slow_excess_ms = n_ex ? ss_median_f64(h->f64, n_ex) : 0;
    uint32_t m = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        if (!isnan(h->med_ms[k]))
            h->f64[m++] = h->med_ms[k];
    }
    s->med_step_ms = m ? ss_median_f64(h->f64, m) : 0;
    double steady = s->share - s->med_share;
    double spiky = alone_cost(h, r, c);
    s->cost = steady > spiky ? steady : spiky;
    if (n_aff == 0) { /* spread thinly: the window's bounds */
        s->last = h->step[ss__ring_back(h->head, h->hw, 0)];
        s->first = h->step[ss__ring_back(h->head, h->hw, h->fill - 1)];
    }
}

static void cause_evidence(ss_detectors *d, ss_finding *f, int c,
                           const cause_summary *s)
{
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "mode", s->intermittent ? "intermittent" : "steady");
    ss__evidence_str(ev, "cause", cause_key[c]);
    ss__evidence_int(ev, "steps_seen", s->seen);
    ss__evidence_num(ev, "lost_ms_per_step", round(s->per_step_ms * 100) / 100);
    ss__evidence_num(ev, "share_pct", round(s->share * 1000) / 10);
    ss__evidence_num(ev, "median_rank_ms_per_step",
                     round(s->med_per_step_ms * 100) / 100);
    ss__evidence_num(ev, "median_rank_share_pct",
                     round(s->med_share * 1000) / 10);
    ss__evidence_int(ev, "steps_above_median_rank", s->above);
    ss__evidence_int(ev, "steps_untied", s->decided);
    ss__evidence_num(ev, "p_above_log10", round(s->log10_p_above * 10) / 10);
    ss__evidence_int(ev, "steps_affected", s->affected);
    ss__evidence_num(ev, "lost_ms_affected_median",
                     round(s->affected_ms * 10) / 10);
    ss__evidence_int(ev, "slow_steps_alone", s->alone);
    ss__evidence_int(ev, "slow_steps_all", s->n_alone);
    if (s->alone) {
        ss__evidence_num(ev, "slow_excess_ms_median",
                         round(s->slow_excess_ms * 10) / 10);
        ss__evidence_num(ev, "p_alone_log10",
                         round(s->log10_p_alone * 10) / 10);
    }
    ss__evidence_num(ev, "median_step_ms", round(s->med_step_ms * 10) / 10);
    ss__evidence_num(ev, "cost_pct", round(s->cost * 1000) / 10);
    ss__evidence_end(ev, f);
}

/* The sentence of rank R's finding for cause C, over the window of
 * steps to NEWEST. */
static void cause_message(ss_finding *f, uint32_t r, int c,
                          const cause_summary *s, uint64_t newest)
{
    char a[32], b[32], what[320], slow[200] = "", over[64];
    snprintf(over, sizeof over, "over the %u steps to step %" PRIu64,
             s->seen, newest);
    int share = (int)lround(s->share * 100);
    if (c == C_RUNQ && s->share < 1)
        snprintf(what, sizeof what, "rank %u waited for a CPU %d %% of its "
                 "step time %s (run-queue delay %s ms per step; median "
                 "rank %s ms)", r, share, over,
                 ss__fmt_ms(a, sizeof a, s->per_step_ms),
                 ss__fmt_ms(b, sizeof b, s->med_per_step_ms));
    else if (c == C_RUNQ) /* summed over its threads: beyond wall time */
        snprintf(what, sizeof what, "rank %u's threads waited for a CPU "
                 "%.1f times its step time in all %s (run-queue delay %s "
                 "ms per step; median rank %s ms)", r, s->share, over,
                 ss__fmt_ms(a, sizeof a, s->per_step_ms),
                 ss__fmt_ms(b, sizeof b, s->med_per_step_ms));
    else if (c == C_STOPPED && s->affected == 1)
        snprintf(what, sizeof what, "rank %u was stopped once, for %s ms in "
                 "step %" PRIu64 " (SIGSTOP, a debugger or a freezer; %d %% "
                 "of its step time %s)", r,
                 ss__fmt_ms(a, sizeof a, s->affected_ms), s->first, share,
                 over);
    else if (c == C_STOPPED)
        snprintf(what, sizeof what, "rank %u was stopped for %s ms in %d %% "
                 "of the %u steps to step %" PRIu64 " (%d %% of its step "
                 "time; median rank %s ms per step)", r,
                 ss__fmt_ms(a, sizeof a, s->affected_ms),
                 (int)lround(100.0 * s->affected / (s->seen ? s->seen : 1)),
                 s->seen, newest, share,
                 ss__fmt_ms(b, sizeof b, s->med_per_step_ms));
    else
        snprintf(what, sizeof what, "rank %u's cgroup was throttled %s ms "
                 "per step %s (CPU quota; %d %% of its step time; median "
                 "rank %s ms)", r,
                 ss__fmt_ms(a, sizeof a, s->per_step_ms), over, share,
                 ss__fmt_ms(b, sizeof b, s->med_per_step_ms));
    if (s->intermittent)
        snprintf(slow, sizeof slow, "; it is an intermittent straggler: in "
                 "%u steps every rank's step ran a median %s ms over the "
                 "median step while it alone lost that time (the others "
                 "waited for it)", s->alone,
                 ss__fmt_ms(a, sizeof a, s->slow_excess_ms));
    snprintf(f->message, sizeof f->message, "%s%s.", what, slow);
}

static void refresh(ss_detectors *d, host *h, uint32_t r, int c,
                    double med_share, int opening)
{
    cause_state *rc = cause_of(h, r, c);
    ss_finding *f = ss__finding(d, rc->finding);
    cause_summary s;
    summarize(d, h, r, c, med_share, &s);
    if (opening)
        f->first_step = s.first;
    if (s.last > f->last_step || opening)
        f->last_step = s.last;
    if (f->first_step > f->last_step)
        f->first_step = f->last_step;
    /* The words are the episode's near its height, by its cost to the
     * job (not "waited for a CPU 3 % of its step time" as it fades). */
    if (!ss__words_at_height(&rc->height, s.cost, opening)) {
        ss__finding_touch(d, rc->finding);
        return;
    }
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->phase[0] = '\0';
    /* a rank that waits for a CPU more than its peers on a machine whose
     * median rank also loses host.min_share of its step to waiting: the
     * machine is loaded, uneven scheduling is expected; never critical */
    int loaded = c == C_RUNQ && s.med_share >= d->p[P_H_MIN_SHARE];
    f->severity = s.cost >= d->p[P_H_CRIT_FRAC] && !loaded ? SS_CRITICAL
                                                          : SS_WARNING;
    cause_evidence(d, f, c, &s);
    cause_message(f, r, c, &s, h->step[ss__ring_back(h->head, h->hw, 0)]);
    ss__finding_touch(d, rc->finding);
}

/* What rank R lost to cause C beyond the median rank, without an open
 * episode, after the newest step STEP, when the rules HELD there or within
 * the window before: from the window in which they first held (rules that
 * come and go keep adding up; a window without them starts again).  A
 * rank is named for waiting for a CPU once this reaches host.min_cost_ms:
 * on cores its ranks outnumber, the scheduler lets one rank wait more
 * than the others for a hundred steps of half a millisecond now and then,
 * a few ms in all; a rank at nice 19 beside a busy loop loses that in a
 * few steps. */
static double waiting_cost(host *h, uint32_t r, int c, uint64_t step,
                           int held)
{
    cause_state *rc = cause_of(h, r, c);
    if (rc->cost_ms >= 0 && step - rc->cost_held > h->hw)
        rc->cost_ms = -1; /* a window without them (or not judged) */
    if (rc->cost_ms < 0 && !held)
        return -1;
    uint32_t n = rc->cost_ms < 0 ? h->fill : 1;
    if (rc->cost_ms < 0)
        rc->cost_ms = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        float lost = h->lost[at(h, r, c, k)];
        float med = h->median_lost[(size_t)c * h->hw + k];
        if (lost > med) /* false for NaN */
            rc->cost_ms += lost - med;
    }
    if (held)
        rc->cost_held = step;
    return rc->cost_ms;
}

/* Opens, refreshes or ends every rank's episode of cause C at STEP.  An
 * episode that opens again within a window of the last one's end goes on
 * as the same finding (a rank near the hold threshold would otherwise
 * report one episode as several findings over overlapping windows). */
static void judge_cause(ss_detectors *d, host *h, int c, uint64_t step)
{
    uint32_t min = ss__param_u32(d, P_H_MIN_STEPS);
    double level = d->p[P_H_ALPHA] / ((h->world ? h->world : 1) * N_CAUSES);
    int any = 0; /* a rank that could pass, or an open episode */
    for (uint32_t r = 0; r < h->world && !any; r++) {
        const cause_state *rc = cause_of(h, r, c);
        any = rc->finding >= 0 ||
              (rc->known >= min &&
               (share_of(rc) >= 0.5 * d->p[P_H_MIN_SHARE] ||
                rc->alone >= ss__param_u32(d, P_H_MIN_EVENTS)));
    }
    if (!any)
        return;
    double med_share = median_rank(d, h, c, 0);
    if (c == C_RUNQ)
        h->runq_frac = med_share >= d->p[P_H_MIN_SHARE] ? samples_frac(d, h)
                                                         : 1;
    for (uint32_t r = 0; r < h->world; r++) {
        cause_state *rc = cause_of(h, r, c);
        if (rc->finding < 0) {
            int held = rc->known >= min &&
                       behind(d, h, r, c, med_share, level, 1);
            /* only a wait for a CPU waits for its cost; stops and
             * throttling, rare on a healthy machine, open at once */
            double cost = c == C_RUNQ ? waiting_cost(h, r, c, step, held)
                                      : 0;
            if (!held)
                continue;
            if (rc->ended >= 0 && step - rc->ended_step <= h->hw) {
                rc->finding = rc->ended;
                rc->cost_ms = -1;
                refresh(d, h, r, c, med_share, 0);
                continue;
            }
            if (c == C_RUNQ && cost < d->p[P_H_MIN_COST_MS])
                continue; /* not yet worth a finding */
            if (c == C_RUNQ && cause_of(h, r, C_THROTTLED)->finding >= 0)
                continue; /* a throttled cgroup's threads wait in the run
                             queue while its quota holds them: the
                             throttling, named already, is that wait */
            rc->cost_ms = -1;
            rc->finding = ss__finding_open(d, cause_kind[c]);
            if (rc->finding >= 0)
                refresh(d, h, r, c, med_share, 1);
        } else if (!behind(d, h, r, c, med_share, HOLD_LEVEL, 0.5)) {
            /* an open episode goes on while the rank is still behind the
             * cause at half the thresholds and HOLD_LEVEL */
            rc->ended = rc->finding;
            rc->ended_step = step;
            rc->finding = -1; /* keeps the last snapshot */
        } else {
            refresh(d, h, r, c, med_share, 0);
        }
    }
}

/* Decides stop_alone for the ring's second newest slot, now that the step
 * after it has come: the one rank stopped in that step when no other rank
 * was stopped in it, nor half as long in a step next to it.  A job stopped
 * as a whole from outside stops each rank at its own point of a step: one
 * caught past its step's collective ends that step late while its peers,
 * done with it, are stopped in the next (or the other way round), and no
 * rank is to blame.  The newest slot waits for its next step. */
static void decide_stop_alone(host *h)
{
    h->stop_alone[ss__ring_back(h->head, h->hw, 0)] = STOP_UNDECIDED;
    if (h->fill < 2)
        return;
    uint32_t k = ss__ring_back(h->head, h->hw, 1);
    int32_t alone = -1;
    float mine = 0;
    for (uint32_t r = 0; r < h->world; r++) {
        float x = h->lost[at(h, r, C_STOPPED, k)];
        if (!(x > 0))
            continue;
        if (alone >= 0) {
            h->stop_alone[k] = -1; /* two ranks stopped in the step */
            return;
        }
        alone = (int32_t)r;
        mine = x;
    }
    for (uint32_t i = 0; alone >= 0 && i <= 2 && i < h->fill; i += 2) {
        uint32_t n = ss__ring_back(h->head, h->hw, i);
        if (h->step[n] + 1 != h->step[k] && h->step[k] + 1 != h->step[n])
            continue; /* steps missing between: not next to it */
        for (uint32_t q = 0; q < h->world; q++)
            if ((int32_t)q != alone &&
                h->lost[at(h, q, C_STOPPED, n)] >= 0.5f * mine)
                alone = -1;
    }
    h->stop_alone[k] = alone;
}

static int any_host_evidence(const ss_step_view *v, uint32_t world)
{
    for (uint32_t r = 0; r < world; r++)
        if (v->ranks[r].present && v->ranks[r].host)
            return 1;
    return 0;
}

static void host_step(void *state, ss_detectors *d, const ss_step_view *v,
                      uint32_t world)
{
    host *h = state;
    if (!h->started &&
        (!any_host_evidence(v, world) || start_ring(h) < 0))
        return;
    uint32_t k = h->head;
    retire_slot(h, k);
    h->head = (k + 1) % h->hw;
    if (h->fill < h->hw)
        h->fill++;
    record_step(d, h, v, world, k);
    decide_stop_alone(h);
    /* throttling first: a rank it holds waits in the run queue too, and
     * is not named for that wait as well (judge_cause) */
    for (int c = N_CAUSES - 1; c >= 0; c--) {
        judge_cause(d, h, c, v->step);
        /* a named rank alone explains this slow step, or a rank alone
         * was stopped through it (the stops rule waits a step to tell a
         * job stopped as a whole): that part of it is not jitter */
        size_t ck = (size_t)c * h->hw + k;
        int32_t r = h->alone_rank[ck];
        if (r >= 0 &&
            (c == C_STOPPED || cause_of(h, (uint32_t)r, c)->finding >= 0)) {
            double part = fmin(h->alone_ms[ck], h->excess_ms[k]);
            if (part > d->note.host_late_ms)
                d->note.host_late_ms = part;
        }
        /* a rank named for its own starvation or throttling lost this
         * much more than any other rank, whatever the window's median
         * step (which a rank held in every step raises with it) */
        r = h->top_now[c];
        if (c != C_STOPPED && r >= 0 &&
            cause_of(h, (uint32_t)r, c)->finding >= 0 &&
            h->top_gap_now[c] > d->note.host_named_ms)
            d->note.host_named_ms = h->top_gap_now[c];
    }
}

/* ---- what the host says about another detector's rank ---- */

/* What the ranks but R lost to cause C in ring slot K, their median (NaN
 * when none was measured); up to PEER_EXACT ranks, else the median of
 * every rank's, which one rank moves by at most one place. */
#define PEER_EXACT 64
static double peers_lost(const host *h, uint32_t r, int c, uint32_t k)
{
    if (h->world > PEER_EXACT)
        return h->median_lost[(size_t)c * h->hw + k];
    double v[PEER_EXACT];
    uint32_t n = 0;
    for (uint32_t q = 0; q < h->world; q++) {
        float x = h->lost[at(h, q, c, k)];
        if (q != r && !isnan(x))
            v[n++] = x;
    }
    return n ? ss_median_f64(v, n) : NAN;
}

/* What rank R lost to cause C over the ring's steps FIRST..LAST (*OWN)
 * and what the reference rank lost in the same steps (*REF): the median
 * rank, or with PEERS the median of the other ranks.  Returns the steps
 * where both are known. */
static uint32_t lost_over(const host *h, uint32_t r, int c, uint64_t first,
                          uint64_t last, int peers, double *own, double *ref)
{
    uint32_t n = 0;
    *own = *ref = 0;
    for (uint32_t i = 0; i < h->fill; i++) {
        uint32_t k = ss__ring_back(h->head, h->hw, i);
        if (h->step[k] < first || h->step[k] > last)
            continue;
        float lost = h->lost[at(h, r, c, k)];
        double m = isnan(lost) ? NAN
                   : peers     ? peers_lost(h, r, c, k)
                               : h->median_lost[(size_t)c * h->hw + k];
        if (isnan(m))
            continue;
        *own += lost;
        *ref += m;
        n++;
    }
    return n;
}

int ss__host_busy_core_moment(const ss_detectors *d, uint32_t r,
                              uint64_t first, uint64_t last, double late_ms)
{
    const host *h = ss__detector_state(d, &ss__host_detector);
    if (!(late_ms > 0) || !h || !h->started || r >= h->world)
        return 0;
    double own, peers;
    uint32_t n = lost_over(h, r, C_RUNQ, first, last, 1, &own, &peers);
    return n > 0 && (own - peers) / n >= d->p[P_S_BLAME_FRAC] * late_ms &&
           own >= d->p[P_H_PEER_FACTOR] * peers &&
           waits_more_per_run_in(d, h, r, first, last);
}

void ss__host_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                      uint64_t last, double late_ms, ss__host_cause *out)
{
    memset(out, 0, sizeof *out);
    out->cause = -1;
    const host *h = ss__detector_state(d, &ss__host_detector);
    if (!(late_ms > 0))
        return;
    if (!h || !h->started || r >= h->world) {
        ss__gpu_explain(d, r, first, last, out);
        return;
    }
    double best = 0;
    for (int c = 0; c < N_CAUSES; c++) {
        double own, med;
        uint32_t n = lost_over(h, r, c, first, last, 0, &own, &med);
        if (n == 0 || (c == C_RUNQ && !waits_more_per_run(d, h, r, 1)))
            continue;
        double excess = (own - med) / n;
        /* A throttled cgroup's runnable threads wait in the run queue
         * while the quota holds them, every one of them: its run-queue
         * delay is the throttling's doing, and may sum to more. */
        int over_runq = c == C_THROTTLED && out->cause == C_RUNQ;
        if ((excess > best || over_runq) &&
            excess >= d->p[P_S_BLAME_FRAC] * late_ms &&
            own >= d->p[P_H_PEER_FACTOR] * med) {
            best = excess;
            out->cause = c;
            out->ms_per_step = own / n;
            out->median_rank_ms = med / n;
            out->steps = n;
        }
    }
    if (out->cause < 0)
        ss__gpu_explain(d, r, first, last, out); /* its GPU, throttled */
}

const char *ss__host_cause_words(const ss__host_cause *hc, char *buf,
                                 size_t len)
{
    char a[32], b[32];
    ss__fmt_ms(a, sizeof a, hc->ms_per_step);
    ss__fmt_ms(b, sizeof b, hc->median_rank_ms);
    if (hc->cause == C_RUNQ)
        snprintf(buf, len, "; the host explains it: it waited for a CPU %s "
                 "ms per step (median rank %s ms)", a, b);
    else if (hc->cause == C_STOPPED)
        snprintf(buf, len, "; the host explains it: it was stopped %s ms "
                 "per step (median rank %s ms)", a, b);
    else if (hc->cause == C_THROTTLED)
        snprintf(buf, len, "; the host explains it: its cgroup was "
                 "throttled %s ms per step (CPU quota; median rank %s ms)",
                 a, b);
    else if (hc->cause == SS_HOST_CAUSE_GPU)
        snprintf(buf, len, "; the host explains it: its GPU %d was "
                 "throttled (%s) in %d %% of these steps, %s ms per step",
                 hc->gpu, hc->gpu_reason ? hc->gpu_reason : "?",
                 (int)lround(hc->gpu_frac * 100), a);
    else if (len)
        buf[0] = '\0';
    return buf;
}

const char *ss__host_cause_name(int cause, int words)
{
    if (cause == SS_HOST_CAUSE_GPU)
        return words ? "GPU throttling" : "gpu_throttled";
    if (cause < 0 || cause >= N_CAUSES)
        return "?";
    return words ? cause_words[cause] : cause_key[cause];
}

void ss__host_cause_evidence(ss_buf *ev, const ss__host_cause *hc)
{
    if (hc->cause < 0 || hc->cause > SS_HOST_CAUSE_GPU)
        return;
    ss__evidence_str(ev, "host_cause", ss__host_cause_name(hc->cause, 0));
    if (hc->cause == SS_HOST_CAUSE_GPU) {
        ss__evidence_int(ev, "host_gpu", hc->gpu);
        ss__evidence_str(ev, "host_gpu_reason",
                         hc->gpu_reason ? hc->gpu_reason : "?");
        ss__evidence_num(ev, "host_gpu_slowed_pct",
                         round(hc->gpu_frac * 1000) / 10);
    }
    ss__evidence_num(ev, "host_ms_per_step",
                     round(hc->ms_per_step * 100) / 100);
    ss__evidence_num(ev, "host_median_rank_ms",
                     round(hc->median_rank_ms * 100) / 100);
}

/* ---- the ss__detector hooks ---- */

static void host_destroy(void *state)
{
    host *h = state;
    free_ring(h);
    free(h);
}

static void *host_create(ss_detectors *d)
{
    host *h = ss__zalloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->world = d->world;
    h->hw = ss__param_u32(d, P_H_WINDOW);
    h->runq_frac = 1;
    return h;
}

const ss__detector ss__host_detector = {
    .name = "host",
    .create = host_create,
    .on_names = NULL,
    .on_step = host_step,
    .on_end = NULL,
    .destroy = host_destroy,
};
