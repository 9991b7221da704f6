/*
 * detect_jitter.c - the jitter detector: step time that varies from step
 * to step although no rank is to blame for it.
 *
 * It follows the median rank's step time, less the part of it the
 * straggler detector blames on the latest rank or the host detector on
 * what one rank alone lost to the host (ss__step_notes), over a ring of
 * the last jitter.window steps; a step with a data stall is left out
 * (data_stall explains it).  A step is an outlier above median +
 * max(jitter.mad_k robust sigmas, a relative floor, an absolute floor).
 * Enough outliers in the window, or a wide robust spread, open a finding,
 * which closes with hysteresis.  The finding names the phase whose median
 * rose most in the outlier steps (its self time where the ranks report
 * it: a slower all-reduce must not be blamed on the backward it nests in)
 * and the ranks slowest in most of them.
 * docs/detectors.md, "jitter", states every rule and default.
 * When the host's evidence shows every rank losing the time alike, the
 * finding says so, blames no rank and is never critical (the machine is
 * loaded, the job is not at fault).
 *
 * A stall is one step that every rank spent idle far beyond the median
 * step (jitter.stall_ms and jitter.stall_medians over it, the median rank
 * on the CPU less than half of it): the whole job stopped from outside (a
 * freezer, SIGSTOP to every rank, a paused machine) or blocked together (a
 * file system, the network).  One is too few for the outlier rule; the
 * finding of kind "stall", one per run, counts them and names the longest
 * and what the host saw of it.  Work of the job's own between steps (an
 * evaluation on every rank) uses the CPU and is no stall; a checkpoint's
 * save is accounted as such.
 */
#include "detectors_internal.h"
#include "detect_host.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sorted_window.h"
#include "stats.h"

/* A jitter episode that opens within this many steps of the last one's
 * close is that one going on (one finding, not several). */
#define JITTER_MERGE_STEPS 20

/* The median rank's time in phase I of V, in ms: its self time where the
 * ranks report it, else its inclusive time. */
static double phase_median_ms(const ss_step_view *v, uint32_t i)
{
    if (v->phase_self && v->phase_self[i].n > 0)
        return (double)v->phase_self[i].median / 1e6;
    return (double)v->phases[i].stat.median / 1e6;
}

typedef struct {
    uint32_t jw, head, fill, outliers; /* ring of jw steps */
    /* per ring slot */
    double *ms;   /* the median step time less the sync lateness */
    ss_sorted_window ms_sorted; /* ms's values, ascending */
    double *raw;  /* the median step time itself, for reporting */
    uint64_t *step;
    uint8_t *out;
    ss__name_idx *blame;
    float *expl_ms;
    int32_t *worst;
    float *host_ms;      /* what every rank lost to the host alike */
    int8_t *host_cause;  /* the cause it lost most to */
    float *phase[SS_MAX_RUN_NAMES]; /* per phase median ms ring, lazy */
    /* scratch */
    int32_t *sort; /* jw */
    double *f64;   /* jw */
    uint64_t stall_excluded;
    double med, sigma, thr; /* of the window, at the last judged step */
    int32_t finding;        /* of the open episode, -1 */
    int32_t prev_finding;   /* of the episode closed last, -1 */
    uint64_t closed_step;   /* the step it closed at */
    /* stalls: the run's finding (-1 until the first), how many, their
     * steps and time over the median step, and the longest one's */
    int32_t stall_finding;
    uint32_t stalls;
    uint64_t stall_first, stall_last;
    double stall_total_ms;
    double longest_ms, longest_excess_ms, longest_med_ms, longest_host_ms;
    uint64_t longest_step;
    int longest_cause;          /* the host's cause alike on every rank,
                                   -1 when it does not explain it */
    ss__name_idx longest_phase; /* the phase that rose most, NO_NAME */
    double longest_phase_ms;
} jitter;

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Fills RANKS with up to MAX ranks that were the slowest in the most of
 * the N outlier steps of a job of WORLD ranks, each in at least twice
 * its even share of them (three quarters of them with two ranks) and
 * twice at least: where every rank is the slowest about as often, none
 * is named.  Returns how many. */
static uint32_t frequent_ranks(int32_t *wr, uint32_t n, uint32_t world,
                               int32_t *ranks, uint32_t max)
{
    qsort(wr, n, sizeof wr[0], cmp_i32);
    double share = world > 0 ? fmin(2.0 * n / world, 0.75 * n) : n;
    uint32_t need = share > 2 ? (uint32_t)ceil(share) : 2;
    uint32_t counts[4] = {0}, got = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j < n && wr[j] == wr[i])
            j++;
        uint32_t c = j - i;
        if (wr[i] >= 0 && c >= need) {
            /* insert into the top list, most frequent first */
            uint32_t pos = got < max ? got++ : max;
            while (pos > 0 && counts[pos - 1] < c) {
                if (pos < max) {
                    counts[pos] = counts[pos - 1];
                    ranks[pos] = ranks[pos - 1];
                }
                pos--;
            }
            if (pos < max) {
                counts[pos] = c;
                ranks[pos] = wr[i];
            }
        }
        i = j;
    }
    return got;
}

static void refresh_jitter(ss_detectors *d, jitter *jt, int opening,
                           int by_outliers)
{
    ss_finding *f = ss__finding(d, jt->finding);
    uint32_t n = jt->fill, out = 0;
    uint32_t votes[SS_MAX_RUN_NAMES];
    double expl_sum[SS_MAX_RUN_NAMES];
    memset(votes, 0, sizeof votes);
    memset(expl_sum, 0, sizeof expl_sum);
    double worst = 0, least = INFINITY, host_sum = 0;
    uint32_t cause_votes[SS_HOST_CAUSES] = {0};
    uint64_t worst_step = 0, first = 0, last = 0;
    uint64_t oldest = jt->step[ss__ring_back(jt->head, jt->jw, n - 1)];
    uint64_t newest = jt->step[ss__ring_back(jt->head, jt->jw, 0)];
    for (uint32_t i = 0; i < n; i++) {
        /* oldest first */
        uint32_t k = ss__ring_back(jt->head, jt->jw, n - 1 - i);
        if (!jt->out[k])
            continue;
        if (out == 0)
            first = jt->step[k];
        last = jt->step[k];
        if (jt->raw[k] > worst) {
            worst = jt->raw[k];
            worst_step = jt->step[k];
        }
        least = fmin(least, jt->raw[k]);
        if (jt->blame[k] != NO_NAME) {
            votes[jt->blame[k]]++;
            expl_sum[jt->blame[k]] += jt->expl_ms[k];
        }
        jt->f64[out] = jt->raw[k] - jt->med;
        host_sum += jt->host_ms[k];
        if (jt->host_ms[k] > 0 && jt->host_cause[k] >= 0 &&
            jt->host_cause[k] < SS_HOST_CAUSES)
            cause_votes[jt->host_cause[k]]++;
        jt->sort[out++] = jt->worst[k];
    }
    /* the host explains the slow steps when every rank lost, alike, at
     * least host.explain_frac of a typical one's excess; a wide spread
     * without outliers, when every rank lost that share of its sigma in
     * the window's steps */
    double host_ms = out ? host_sum / out : 0;
    double excess = out ? ss_median_f64(jt->f64, out) : 0;
    if (out == 0 && n > 0) {
        for (uint32_t i = 0; i < n; i++) {
            uint32_t k = ss__ring_back(jt->head, jt->jw, i);
            host_ms += jt->host_ms[k] / n;
            if (jt->host_ms[k] > 0 && jt->host_cause[k] >= 0 &&
                jt->host_cause[k] < SS_HOST_CAUSES)
                cause_votes[jt->host_cause[k]]++;
        }
        excess = jt->sigma;
    }
    int host_cause = -1;
    for (int c = 0; c < SS_HOST_CAUSES; c++)
        if (cause_votes[c] &&
            (host_cause < 0 || cause_votes[c] > cause_votes[host_cause]))
            host_cause = c;
    int by_host = host_cause >= 0 && excess > 0 &&
                  host_ms >= d->p[P_H_EXPLAIN_FRAC] * excess;
    int32_t ranks[4];
    uint32_t n_ranks =
        by_host ? 0 : frequent_ranks(jt->sort, out, d->world, ranks, 4);
    ss__set_ranks(f, ranks, n_ranks);
    int blame = NO_NAME;
    uint32_t best = 0;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            blame = p;
        }
    double expl = blame != NO_NAME ? expl_sum[blame] / votes[blame] : 0;
    if (blame != NO_NAME && votes[blame] * 2 >= out)
        snprintf(f->phase, sizeof f->phase, "%s", ss__name_of(d, blame));
    else
        f->phase[0] = '\0';
    double frac = n ? (double)out / n : 0;
    double cv = jt->med > 0 ? jt->sigma / jt->med : 0;
    if (opening)
        f->first_step = out ? first : oldest;
    f->last_step = out ? last : newest;
    /* the host's load alike on every rank is the machine's, not the
     * job's: worth knowing, never critical */
    f->severity = !by_host && (frac >= d->p[P_J_CRIT_FRAC] ||
                               cv >= 2 * d->p[P_J_MAX_CV])
                      ? SS_CRITICAL
                      : SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "trigger", by_outliers ? "outliers" : "spread");
    ss__evidence_int(ev, "steps_seen", n);
    ss__evidence_int(ev, "outliers", out);
    ss__evidence_num(ev, "outlier_frac", round(frac * 1000) / 1000);
    ss__evidence_num(ev, "median_step_ms", round(jt->med * 10) / 10);
    ss__evidence_num(ev, "robust_sigma_ms", round(jt->sigma * 10) / 10);
    ss__evidence_num(ev, "robust_cv", round(cv * 1000) / 1000);
    ss__evidence_num(ev, "threshold_ms", round(jt->thr * 10) / 10);
    if (out) {
        ss__evidence_num(ev, "worst_step_ms", round(worst * 10) / 10);
        ss__evidence_int(ev, "worst_step", (int64_t)worst_step);
    }
    ss__evidence_int(ev, "stall_steps_excluded",
                     (int64_t)jt->stall_excluded);
    if (f->phase[0]) {
        ss__evidence_str(ev, "phase", f->phase);
        ss__evidence_num(ev, "explained_ms", round(expl * 10) / 10);
    }
    if (by_host) {
        ss__evidence_str(ev, "host_cause", ss__host_cause_name(host_cause, 0));
        ss__evidence_num(ev, "host_all_ms", round(host_ms * 10) / 10);
    }
    ss__evidence_end(ev, f);
    char a[32], b[32], c[32], e[32], phase[160] = "", who[160] = "";
    if (f->phase[0])
        snprintf(phase, sizeof phase, "; the %s phase accounts for %s ms of "
                 "a typical slow step", f->phase,
                 ss__fmt_ms(e, sizeof e, expl));
    if (n_ranks) {
        char list[96];
        snprintf(who, sizeof who, "; the slowest rank in those steps is "
                 "most often %s",
                 ss__fmt_ranks(list, sizeof list, ranks, n_ranks, n_ranks));
    } else if (out >= 4 && d->world > 1) {
        snprintf(who, sizeof who, "; no rank stands out as the slowest in "
                 "those steps");
    }
    if (by_host)
        snprintf(who, sizeof who, "; the host explains it on every rank "
                 "alike (%s ms of a slow step lost to %s), so no rank is to "
                 "blame", ss__fmt_ms(e, sizeof e, host_ms),
                 ss__host_cause_name(host_cause, 1));
    /* each outlier was judged against the threshold of its step: where
     * the window's spread has since raised it above some of them, the
     * message says how long they took instead */
    if (by_outliers && least <= jt->thr)
        snprintf(f->message, sizeof f->message,
                 "step time jitters: %u of the last %u steps took %s ms or "
                 "longer (median step %s ms, worst %s ms at step "
                 "%" PRIu64 ")%s%s.",
                 out, n, ss__fmt_ms(a, sizeof a, least),
                 ss__fmt_ms(b, sizeof b, jt->med),
                 ss__fmt_ms(c, sizeof c, worst),
                 worst_step, phase, who);
    else if (by_outliers)
        snprintf(f->message, sizeof f->message,
                 "step time jitters: %u of the last %u steps took longer "
                 "than %s ms (median step %s ms, worst %s ms at step "
                 "%" PRIu64 ")%s%s.",
                 out, n, ss__fmt_ms(a, sizeof a, jt->thr),
                 ss__fmt_ms(b, sizeof b, jt->med),
                 ss__fmt_ms(c, sizeof c, worst),
                 worst_step, phase, who);
    else
        snprintf(f->message, sizeof f->message,
                 "step time varies widely: a robust spread of %s ms around "
                 "a median step of %s ms (CV %.2f) over the last %u steps.",
                 ss__fmt_ms(a, sizeof a, jt->sigma),
                 ss__fmt_ms(b, sizeof b, jt->med), cv, n);
    ss__finding_touch(d, jt->finding);
}

/* Whether most of V's ranks whose CPU time the host measured (at least
 * half of the ranks present) used the CPU less than half their step. */
static int idle_step(const ss_step_view *v, uint32_t world)
{
    uint32_t n = 0, idle = 0;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present || !rs->host || rs->host->cpu_ns == SS_MISSING ||
            rs->host->cpu_ns < 0 || rs->step_ns == SS_MISSING ||
            rs->step_ns <= 0)
            continue;
        n++;
        idle += 2 * rs->host->cpu_ns < rs->step_ns;
    }
    return n > 0 && 2 * n >= v->n_present && 2 * idle > n;
}

/* Whether V holds a checkpoint phase: a save is accounted as such
 * (goodput's checkpoint), not as a stall. */
static int saves_checkpoint(const ss_detectors *d, const ss_step_view *v)
{
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p >= 0 && (uint32_t)p < v->n_names &&
            strcmp(ss__name_of(d, p), SS__CHECKPOINT_PHASE) == 0)
            return 1;
    }
    return 0;
}

/* "3.0 s" at a second and more, else "250 ms". */
static const char *fmt_long(char *buf, size_t len, double ms)
{
    char a[32];
    if (ms >= 1000)
        snprintf(buf, len, "%.1f s", ms / 1000);
    else
        snprintf(buf, len, "%s ms", ss__fmt_ms(a, sizeof a, ms));
    return buf;
}

/* The stall finding's words and evidence, after a new stall. */
static void refresh_stall(ss_detectors *d, jitter *jt)
{
    ss_finding *f = ss__finding(d, jt->stall_finding);
    f->first_step = jt->stall_first;
    f->last_step = jt->stall_last;
    ss__set_ranks(f, NULL, 0);
    if (jt->longest_phase != NO_NAME)
        snprintf(f->phase, sizeof f->phase, "%s",
                 ss__name_of(d, jt->longest_phase));
    else
        f->phase[0] = '\0';
    f->severity = SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "stalls", jt->stalls);
    ss__evidence_num(ev, "stall_ms_total", round(jt->stall_total_ms));
    ss__evidence_int(ev, "longest_step", (int64_t)jt->longest_step);
    ss__evidence_num(ev, "longest_ms", round(jt->longest_ms));
    ss__evidence_num(ev, "median_step_ms",
                     round(jt->longest_med_ms * 100) / 100);
    if (jt->longest_cause >= 0) {
        ss__evidence_str(ev, "host_cause",
                         ss__host_cause_name(jt->longest_cause, 0));
        ss__evidence_num(ev, "host_all_ms", round(jt->longest_host_ms));
    }
    if (f->phase[0]) {
        ss__evidence_str(ev, "phase", f->phase);
        ss__evidence_num(ev, "explained_ms", round(jt->longest_phase_ms));
    }
    ss__evidence_end(ev, f);
    char a[32], b[32], c[32], what[256], why[200], phase[120] = "";
    if (jt->stalls == 1)
        snprintf(what, sizeof what, "the job stalled in step %" PRIu64
                 ": every rank's step took %s, %.0f median steps (%s ms)",
                 jt->longest_step, fmt_long(a, sizeof a, jt->longest_ms),
                 jt->longest_excess_ms / jt->longest_med_ms,
                 ss__fmt_ms(b, sizeof b, jt->longest_med_ms));
    else
        snprintf(what, sizeof what, "the job stalled %u times, in steps %"
                 PRIu64 " to %" PRIu64 ", %s over the median step in all; "
                 "the longest, step %" PRIu64 ", took %s, %.0f median steps "
                 "(%s ms)", jt->stalls, jt->stall_first, jt->stall_last,
                 fmt_long(c, sizeof c, jt->stall_total_ms), jt->longest_step,
                 fmt_long(a, sizeof a, jt->longest_ms),
                 jt->longest_excess_ms / jt->longest_med_ms,
                 ss__fmt_ms(b, sizeof b, jt->longest_med_ms));
    if (jt->longest_cause == SS_HOST_CAUSE_STOPPED)
        snprintf(why, sizeof why, "; the host explains it: every rank was "
                 "stopped %s of it (SIGSTOP, a debugger or a freezer), so "
                 "no rank is to blame",
                 fmt_long(c, sizeof c, jt->longest_host_ms));
    else if (jt->longest_cause >= 0)
        snprintf(why, sizeof why, "; the host explains it: every rank lost "
                 "%s of it to %s alike, so no rank is to blame",
                 fmt_long(c, sizeof c, jt->longest_host_ms),
                 ss__host_cause_name(jt->longest_cause, 1));
    else
        snprintf(why, sizeof why, "; no rank used the CPU through it, "
                 "alike (blocked on I/O, the network or a lock, asleep, or "
                 "the machine paused), so no rank is to blame");
    if (f->phase[0])
        snprintf(phase, sizeof phase, "; it was spent in the %s phase (%s)",
                 f->phase, fmt_long(c, sizeof c, jt->longest_phase_ms));
    else
        snprintf(phase, sizeof phase, "; no phase the ranks record holds "
                 "it");
    snprintf(f->message, sizeof f->message, "%s%s%s.", what, phase, why);
    ss__finding_touch(d, jt->stall_finding);
}

/* Step V (the median step RAW ms) stalled by EXCESS ms over the window's
 * median; the phase BLAME rose most, by BLAME_MS. */
static void note_stall(ss_detectors *d, jitter *jt, const ss_step_view *v,
                       double raw, double excess, int blame, double blame_ms)
{
    if (jt->stall_finding < 0) {
        jt->stall_finding = ss__finding_open(d, "stall");
        if (jt->stall_finding < 0)
            return;
        jt->stall_first = v->step;
    }
    jt->stalls++;
    jt->stall_last = v->step;
    jt->stall_total_ms += excess;
    if (raw > jt->longest_ms) {
        jt->longest_ms = raw;
        jt->longest_excess_ms = excess;
        jt->longest_med_ms = jt->med;
        jt->longest_step = v->step;
        jt->longest_host_ms = d->note.host_all_ms;
        jt->longest_cause =
            d->note.host_all_ms > 0 &&
                    d->note.host_all_ms >= d->p[P_H_EXPLAIN_FRAC] * excess
                ? d->note.host_all_cause
                : -1;
        /* a phase is named when it holds half the stall at least */
        jt->longest_phase = blame_ms >= 0.5 * excess ? (ss__name_idx)blame
                                                     : NO_NAME;
        jt->longest_phase_ms = blame_ms;
    }
    refresh_stall(d, jt);
}

static void jitter_step(void *state, ss_detectors *d,
                        const ss_step_view *v, uint32_t world)
{
    jitter *jt = state;
    if (v->step_time.median == SS_MISSING)
        return;
    if (d->note.data_stall) {
        jt->stall_excluded++;
        return;
    }
    /* In synchronized steps every rank waits for the latest one; that
     * part of the step belongs to the straggler detector, so jitter looks
     * at the step time without it.  Likewise the part one rank alone lost
     * to the host (a rank stopped inside the collective: every rank
     * waited, but for it); the same delay may show as both, so the larger
     * of the two is taken out. */
    double raw = (double)v->step_time.median / 1e6;
    double late = fmax(d->note.sync_late_ms, d->note.host_late_ms);
    uint32_t jw = jt->jw, n = jt->fill;
    int judged = n >= ss__param_u32(d, P_J_MIN_STEPS);
    if (judged) {
        double med, mad;
        if (jt->ms_sorted.nonfinite == 0) {
            mad = ss_sorted_window_mad(&jt->ms_sorted, &med);
        } else {
            for (uint32_t i = 0; i < n; i++)
                jt->f64[i] = jt->ms[i];
            mad = ss_mad_f64(jt->f64, n, &med);
        }
        double sigma = mad * SS_MAD_TO_SIGMA;
        double margin = d->p[P_J_MAD_K] * sigma;
        if (margin < d->p[P_J_REL_FLOOR] * med)
            margin = d->p[P_J_REL_FLOOR] * med;
        if (margin < d->p[P_J_ABS_FLOOR_MS])
            margin = d->p[P_J_ABS_FLOOR_MS];
        jt->med = med;
        jt->sigma = sigma;
        jt->thr = med + margin;
    }
    /* A rank the host names for its own starvation or throttling can
     * hold the others in every step, and more in some: the host's window
     * median step rises with it, so host_late_ms credits it little.  What
     * it lost beyond every other rank explains this step up to its excess
     * over the window's median here. */
    if (d->note.host_named_ms > 0 && jt->med > 0 && raw > jt->med)
        late = fmax(late, fmin(d->note.host_named_ms, raw - jt->med));
    double x = raw - late;
    int outlier = judged && x > jt->thr;
    uint32_t k = jt->head;
    if (n == jw && jt->out[k])
        jt->outliers--;
    /* A stall's excess: over the series' median, or, where every rank
     * lost the time alike to the host (all of them stopped, each at its
     * own point of the step, so one arrives "late" at the collective),
     * the median step's own. */
    double stall_ms = 0;
    if (n >= ss__param_u32(d, P_J_MIN_STEPS) && jt->med > 0) {
        stall_ms = x - jt->med;
        if (d->note.host_all_ms > 0 &&
            d->note.host_all_ms >= d->p[P_H_EXPLAIN_FRAC] * (raw - jt->med))
            stall_ms = raw - jt->med;
    }
    int stall = stall_ms >= d->p[P_J_STALL_MS] &&
                stall_ms >= d->p[P_J_STALL_MEDIANS] * jt->med &&
                idle_step(v, world) && !saves_checkpoint(d, v);
    int blame = NO_NAME;
    double blame_ex = 0;
    if (outlier || stall) {
        /* the phase whose median rose most above its own recent median */
        for (uint32_t i = 0; i < v->n_phases; i++) {
            int p = v->phases[i].name;
            if (p < 0 || (uint32_t)p >= v->n_names || !jt->phase[p])
                continue;
            uint32_t m = 0;
            for (uint32_t t = 0; t < n; t++)
                if (!isnan(jt->phase[p][t]))
                    jt->f64[m++] = jt->phase[p][t];
            if (m == 0)
                continue;
            double ex = phase_median_ms(v, i) - ss_median_f64(jt->f64, m);
            if (ex > blame_ex) {
                blame_ex = ex;
                blame = p;
            }
        }
    }
    if (stall)
        note_stall(d, jt, v, raw, stall_ms, blame, blame_ex);
    if (n == jw) /* slot K's value leaves the window */
        ss_sorted_window_remove(&jt->ms_sorted, jt->ms[k]);
    ss_sorted_window_add(&jt->ms_sorted, x);
    jt->ms[k] = x;
    jt->raw[k] = raw;
    jt->step[k] = v->step;
    jt->out[k] = (uint8_t)outlier;
    jt->blame[k] = (ss__name_idx)blame;
    jt->expl_ms[k] = (float)blame_ex;
    jt->worst[k] = v->step_time.worst_rank;
    jt->host_ms[k] = (float)d->note.host_all_ms;
    jt->host_cause[k] = (int8_t)(d->note.host_all_ms > 0
                                     ? d->note.host_all_cause
                                     : -1);
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (jt->phase[p])
            jt->phase[p][k] = NAN;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p < 0 || (uint32_t)p >= v->n_names)
            continue;
        if (!jt->phase[p]) {
            jt->phase[p] = malloc(jw * sizeof(float));
            if (!jt->phase[p])
                continue;
            for (uint32_t t = 0; t < jw; t++)
                jt->phase[p][t] = NAN;
        }
        jt->phase[p][k] = (float)phase_median_ms(v, i);
    }
    jt->head = (k + 1) % jw;
    if (jt->fill < jw)
        jt->fill++;
    if (outlier)
        jt->outliers++;
    if (n < ss__param_u32(d, P_J_MIN_STEPS))
        return;

    double cv = jt->med > 0 ? jt->sigma / jt->med : 0;
    double fill = jt->fill;
    int by_outliers = jt->outliers >= d->p[P_J_MIN_OUTLIERS] &&
                      jt->outliers >= d->p[P_J_MIN_FRAC] * fill;
    int by_spread = cv >= d->p[P_J_MAX_CV] &&
                    jt->sigma >= d->p[P_J_MIN_SPREAD_MS];
    if (jt->finding < 0) {
        if (!by_outliers && !by_spread)
            return;
        /* an episode that closed a few steps ago goes on: a step time
         * that flips between two levels moves the window's median and
         * spread from one trigger to the other */
        if (jt->prev_finding >= 0 &&
            v->step - jt->closed_step <= JITTER_MERGE_STEPS) {
            jt->finding = jt->prev_finding;
            refresh_jitter(d, jt, 0, by_outliers);
            return;
        }
        jt->finding = ss__finding_open(d, "jitter");
        if (jt->finding >= 0)
            refresh_jitter(d, jt, 1, by_outliers);
        return;
    }
    /* an open episode ends with hysteresis: well below both triggers */
    int keep_outliers = jt->outliers * 2 >= d->p[P_J_MIN_OUTLIERS] &&
                        jt->outliers * 2 >= d->p[P_J_MIN_FRAC] * fill;
    int keep_spread = cv >= 0.8 * d->p[P_J_MAX_CV] &&
                      jt->sigma >= 0.8 * d->p[P_J_MIN_SPREAD_MS];
    if (!keep_outliers && !keep_spread) {
        jt->prev_finding = jt->finding; /* keeps the last snapshot */
        jt->closed_step = v->step;
        jt->finding = -1;
    } else if (outlier || by_spread) {
        refresh_jitter(d, jt, 0, by_outliers || (!by_spread && keep_outliers));
    }
}

/* ---- the ss__detector hooks ---- */

static void jitter_destroy(void *state)
{
    jitter *jt = state;
    free(jt->ms);
    ss_sorted_window_free(&jt->ms_sorted);
    free(jt->raw);
    free(jt->step);
    free(jt->out);
    free(jt->blame);
    free(jt->expl_ms);
    free(jt->worst);
    free(jt->host_ms);
    free(jt->host_cause);
    free(jt->sort);
    free(jt->f64);
    for (int i = 0; i < SS_MAX_RUN_NAMES; i++)
        free(jt->phase[i]);
    free(jt);
}

static void *jitter_create(ss_detectors *d)
{
    jitter *jt = ss__zalloc(1, sizeof *jt);
    if (!jt)
        return NULL;
    jt->finding = jt->prev_finding = jt->stall_finding = -1;
    jt->longest_cause = -1;
    jt->longest_phase = NO_NAME;
    jt->jw = ss__param_u32(d, P_J_WINDOW);
    jt->ms = ss__zalloc(jt->jw, sizeof *jt->ms);
    jt->raw = ss__zalloc(jt->jw, sizeof *jt->raw);
    jt->step = ss__zalloc(jt->jw, sizeof *jt->step);
    jt->out = ss__zalloc(jt->jw, 1);
    jt->blame = ss__zalloc(jt->jw, sizeof *jt->blame);
    jt->expl_ms = ss__zalloc(jt->jw, sizeof(float));
    jt->worst = ss__zalloc(jt->jw, sizeof(int32_t));
    jt->host_ms = ss__zalloc(jt->jw, sizeof *jt->host_ms);
    jt->host_cause = ss__zalloc(jt->jw, sizeof *jt->host_cause);
    jt->sort = ss__zalloc(jt->jw, sizeof(int32_t));
    jt->f64 = ss__zalloc(jt->jw, sizeof *jt->f64);
    if (ss_sorted_window_init(&jt->ms_sorted, jt->jw) != 0 || !jt->ms ||
        !jt->raw || !jt->step || !jt->out || !jt->blame ||
        !jt->expl_ms || !jt->worst || !jt->host_ms || !jt->host_cause ||
        !jt->sort || !jt->f64) {
        jitter_destroy(jt);
        return NULL;
    }
    return jt;
}

const ss__detector ss__jitter_detector = {
    .name = "jitter",
    .create = jitter_create,
    .on_names = NULL,
    .on_step = jitter_step,
    .on_end = NULL,
    .destroy = jitter_destroy,
};
