/*
 * detect_straggler.c - the straggler detector: a rank the other ranks wait
 * for, persistent or transient, and the phase that explains it.
 *
 * Each step every rank gets a lateness, by the first method that applies:
 * its arrival at the sync point most ranks reported against the median
 * arrival; without sync points, how much less it waits than the median
 * rank in the phase that holds the synchronization (found from the data);
 * otherwise how much longer its step takes than the median step.  A rank
 * is late when its lateness passes an absolute floor, a fraction of the
 * median step and, with 3 ranks or more, a few robust sigmas of all ranks'
 * lateness; its blamed phase is the one with the largest excess over the
 * median rank's.
 *
 * A ring of the last straggler.window steps per rank holds how late it
 * was and which phase explains it.  Late in most of the window:
 * persistent (one finding per episode, refreshed while it lasts); a run of
 * consecutive late steps that never became persistent: transient (held
 * back until the rank has been seen long enough to tell the two apart).
 * It tells jitter how late the latest rank was in a synchronized step
 * (ss__step_notes.sync_late_ms).  docs/detectors.md, "straggler", states
 * every rule and default.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

enum { F_SEEN = 1, F_LATE = 2 }; /* flags of a rank's ring entry */
enum { M_NONE = 0, M_ARRIVAL = 1, M_SYNC_PHASE = 2, M_STEP_TIME = 3 };

typedef struct {
    uint32_t late, seen;   /* flags in the ring */
    int32_t persistent;    /* finding of the open persistent episode, -1 */
    uint32_t run;          /* consecutive late steps */
    uint64_t run_first, run_last;
    uint8_t run_persistent; /* persistent at some point during the run */
    ss_finding *pending;    /* a transient burst awaiting judgement */
} strag_rank;

typedef struct {
    uint32_t world;
    uint32_t sw, head, fill; /* ring of sw steps; head is the next slot */
    /* per ring slot */
    uint64_t *step;
    float *med_ms;
    uint8_t *method, *ref;
    /* per rank and ring slot: [rank * sw + slot] */
    float *late_ms, *expl_ms;
    uint8_t *blame, *flags;
    strag_rank *rank; /* world */
    /* scratch */
    double *f64;  /* max(world, 4 * sw) */
    int64_t *i64; /* world */
} straggler;

static const char *method_name(int m)
{
    return m == M_ARRIVAL      ? "arrival"
           : m == M_SYNC_PHASE ? "sync_phase"
                               : "step_time";
}

/* Summary of rank R's late entries in the straggler ring, newest first,
 * skipping the newest SKIP slots and stopping after MAX_LATE late entries
 * when MAX_LATE > 0. */
typedef struct {
    uint32_t n_late;
    double late_med_ms, late_max_ms, pct_med, med_step_ms;
    int blame;
    double explained_ms;
    int method, ref;
    uint64_t first, last;
} late_summary;

static void summarize_late(const ss_detectors *d, const straggler *sg,
                           uint32_t r, uint32_t skip, uint32_t max_late,
                           late_summary *out)
{
    memset(out, 0, sizeof *out);
    out->blame = NO_NAME;
    out->ref = NO_NAME;
    size_t base = (size_t)r * sg->sw;
    const float *late = sg->late_ms + base;
    const uint8_t *blame = sg->blame + base;
    const uint8_t *flags = sg->flags + base;
    /* scratch: four arrays of sw doubles */
    double *lv = sg->f64, *pct = lv + sg->sw, *med = pct + sg->sw;
    double *ex = med + sg->sw;
    uint32_t votes[SS_MAX_RUN_NAMES];
    memset(votes, 0, sizeof votes);
    uint32_t n = 0, m = 0;
    for (uint32_t i = skip; i < sg->fill; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!(flags[k] & F_LATE))
            continue;
        if (n == 0) {
            out->last = sg->step[k];
            out->method = sg->method[k];
            out->ref = sg->ref[k];
        }
        out->first = sg->step[k];
        lv[n++] = late[k];
        if (late[k] > out->late_max_ms)
            out->late_max_ms = late[k];
        if (blame[k] != NO_NAME)
            votes[blame[k]]++;
        if (sg->med_ms[k] > 0) {
            pct[m] = late[k] / sg->med_ms[k];
            med[m++] = sg->med_ms[k];
        }
        if (max_late && n >= max_late)
            break;
    }
    out->n_late = n;
    if (n == 0)
        return;
    uint32_t best = 0;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            out->blame = p;
        }
    /* what the blamed phase explains, over the same late entries */
    uint32_t e = 0, seen = 0;
    for (uint32_t i = skip; i < sg->fill && seen < n; i++) {
        uint32_t k = ss__ring_back(sg->head, sg->sw, i);
        if (!(flags[k] & F_LATE))
            continue;
        seen++;
        if (out->blame != NO_NAME && blame[k] == out->blame)
            ex[e++] = sg->expl_ms[base + k];
    }
    out->late_med_ms = ss_median_f64(lv, n);
    if (m) {
        out->med_step_ms = ss_median_f64(med, m);
        out->pct_med = ss_median_f64(pct, m);
    }
    if (e)
        out->explained_ms = ss_median_f64(ex, e);
    if (out->explained_ms < d->p[P_S_BLAME_FRAC] * out->late_med_ms) {
        out->blame = NO_NAME; /* no phase explains enough of it */
        out->explained_ms = 0;
    }
}

static void blame_clause(const ss_detectors *d, const late_summary *s,
                         char *buf, size_t len)
{
    char a[32];
    if (s->blame == NO_NAME || s->explained_ms <= 0) {
        buf[0] = '\0';
        return;
    }
    if (s->explained_ms >= s->late_med_ms)
        snprintf(buf, len, "; its %s phase explains all of it (%s ms "
                 "longer than the median rank's)", ss__name_of(d, s->blame),
                 ss__fmt_ms(a, sizeof a, s->explained_ms));
    else
        snprintf(buf, len, "; its %s phase explains %s ms of it",
                 ss__name_of(d, s->blame),
                 ss__fmt_ms(a, sizeof a, s->explained_ms));
}

static void straggler_evidence(ss_detectors *d, ss_finding *f,
                               const char *mode, const late_summary *s,
                               uint32_t steps_seen)
{
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "mode", mode);
    ss__evidence_str(ev, "method", method_name(s->method));
    if (s->method == M_ARRIVAL)
        ss__evidence_str(ev, "sync", ss__name_of(d, s->ref));
    if (s->method == M_SYNC_PHASE)
        ss__evidence_str(ev, "sync_phase", ss__name_of(d, s->ref));
    ss__evidence_num(ev, "late_ms_median", round(s->late_med_ms * 10) / 10);
    ss__evidence_num(ev, "late_ms_max", round(s->late_max_ms * 10) / 10);
    ss__evidence_num(ev, "late_pct_median", round(s->pct_med * 1000) / 10);
    ss__evidence_num(ev, "median_step_ms", round(s->med_step_ms * 10) / 10);
    ss__evidence_int(ev, "steps_late", s->n_late);
    ss__evidence_int(ev, "steps_seen", steps_seen);
    if (s->blame != NO_NAME && s->explained_ms > 0) {
        ss__evidence_str(ev, "phase", ss__name_of(d, s->blame));
        ss__evidence_num(ev, "explained_ms", round(s->explained_ms * 10) / 10);
    }
    ss__evidence_end(ev, f);
    if (s->blame != NO_NAME && s->explained_ms > 0)
        snprintf(f->phase, sizeof f->phase, "%s", ss__name_of(d, s->blame));
    else
        f->phase[0] = '\0';
}

/* One sentence on how late the rank is, by the method that measured it. */
static void lateness_words(const ss_detectors *d, const late_summary *s,
                           char *buf, size_t len)
{
    char a[32];
    int pct = (int)lround(s->pct_med * 100);
    const char *ms = ss__fmt_ms(a, sizeof a, s->late_med_ms);
    if (s->method == M_ARRIVAL)
        snprintf(buf, len, "it reaches %s %s ms (+%d %% of a median step) "
                 "after the median rank", ss__name_of(d, s->ref), ms, pct);
    else if (s->method == M_SYNC_PHASE)
        snprintf(buf, len, "it waits %s ms (%d %% of a median step) less "
                 "than the median rank in %s, the phase that holds the "
                 "synchronization, so every other rank waits for it",
                 ms, pct, ss__name_of(d, s->ref));
    else
        snprintf(buf, len, "its step takes %s ms (+%d %%) longer than the "
                 "median rank's", ms, pct);
}

static void refresh_persistent(ss_detectors *d, straggler *sg, uint32_t r,
                               int opening)
{
    strag_rank *sr = &sg->rank[r];
    ss_finding *f = ss__finding(d, sr->persistent);
    late_summary s;
    summarize_late(d, sg, r, 0, 0, &s);
    if (s.n_late == 0)
        return;
    if (opening)
        f->first_step = s.first;
    f->last_step = s.last;
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->severity = s.pct_med >= d->p[P_S_CRIT_FRAC] ? SS_CRITICAL
                                                   : SS_WARNING;
    straggler_evidence(d, f, "persistent", &s, sr->seen);
    char how[256], why[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    snprintf(f->message, sizeof f->message,
             "rank %u is a persistent straggler: in %u of the last %u steps "
             "%s%s.", r, s.n_late, sr->seen, how, why);
    ss__finding_touch(d, sr->persistent);
}

/* Publishes rank R's pending transient burst as a finding. */
static void commit_pending(ss_detectors *d, straggler *sg, uint32_t r)
{
    strag_rank *sr = &sg->rank[r];
    ss__finding_publish(d, sr->pending);
    free(sr->pending);
    sr->pending = NULL;
}

/*
 * Rank R's run of late steps ended (or the run of the job ends).  A run
 * long enough and never part of a persistent episode is a transient
 * straggler; it stays pending until the rank has been seen in
 * straggler.min_steps steps, because a run at the very start may be the
 * opening of a persistent episode.
 */
static void end_run(ss_detectors *d, straggler *sg, uint32_t r,
                    int current_included)
{
    strag_rank *sr = &sg->rank[r];
    uint32_t run = sr->run;
    int report = run >= ss__param_u32(d, P_S_TRANSIENT) &&
                 !sr->run_persistent && sr->persistent < 0;
    sr->run = 0;
    sr->run_persistent = 0;
    if (!report || (sr->pending && sr->pending->last_step -
                                           sr->pending->first_step + 1 >=
                                       run))
        return; /* a longer burst is already pending */
    /* the late entries of the run are the newest ones, after the current
     * (not late) entry when the run just ended */
    late_summary s;
    summarize_late(d, sg, r, current_included ? 0 : 1, run, &s);
    if (s.n_late == 0)
        return;
    ss_finding *f = sr->pending ? sr->pending : malloc(sizeof *f);
    if (!f)
        return;
    memset(f, 0, sizeof *f);
    sr->pending = f;
    snprintf(f->kind, sizeof f->kind, "straggler");
    f->first_step = sr->run_first;
    f->last_step = sr->run_last;
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->severity = SS_WARNING;
    straggler_evidence(d, f, "transient", &s, run);
    char how[256], why[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    snprintf(f->message, sizeof f->message,
             "rank %u was a transient straggler for %u consecutive steps "
             "(%" PRIu64 " to %" PRIu64 "): %s%s.",
             r, run, sr->run_first, sr->run_last, how, why);
    if (sr->seen >= ss__param_u32(d, P_S_MIN_STEPS))
        commit_pending(d, sg, r);
}

/* Picks how lateness is measured in this step and fills LATE (ns, per
 * rank; SS_MISSING where not measurable).  Returns the method and sets
 * *REF to the sync point or sync phase used. */
static int measure_lateness(const ss_detectors *d, straggler *sg,
                            const ss_step_view *v, uint32_t world,
                            double thr_ns, int64_t *late, int *ref)
{
    *ref = NO_NAME;
    for (uint32_t r = 0; r < world; r++)
        late[r] = SS_MISSING;

    /* 1. arrival at the sync point most ranks reported */
    int best = -1;
    uint32_t best_n = 1;
    for (uint32_t i = 0; i < v->n_syncs; i++)
        if (v->syncs[i].n > best_n && v->syncs[i].name >= 0 &&
            (uint32_t)v->syncs[i].name < v->n_names) {
            best_n = v->syncs[i].n;
            best = v->syncs[i].name;
        }
    if (best >= 0) {
        size_t n = 0;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (rs->present && rs->sync_arrival_ns[best] != SS_MISSING)
                sg->i64[n++] = rs->sync_arrival_ns[best];
        }
        int64_t med = ss_median_i64(sg->i64, n);
        /* LATE may be the scratch just used: write every entry */
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            late[r] = rs->present && rs->sync_arrival_ns[best] != SS_MISSING
                          ? rs->sync_arrival_ns[best] - med
                          : SS_MISSING;
        }
        *ref = best;
        return M_ARRIVAL;
    }

    /* 2. the phase holding the synchronization: its shortest rank lies far
     * below the median rank (it waits least) and is the rank with the
     * most time outside that phase.  A slow compute phase has its outlier
     * above the median instead, which tells the two apart even though
     * every rank's step takes the same time. */
    int sync_phase = -1;
    double sync_spread = 0, sync_median = 0;
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

    /* 3. unsynchronized ranks: the step itself */
    for (uint32_t r = 0; r < world; r++)
        if (v->ranks[r].present && v->ranks[r].step_ns != SS_MISSING)
            late[r] = v->ranks[r].step_ns - v->step_time.median;
    return M_STEP_TIME;
}

/* The phase (other than SKIP) in which rank RS exceeds the median rank the
 * most; NO_NAME when none exceeds it. */
static int blame_phase(const ss_step_view *v, const ss_rank_step *rs,
                       int skip, double *excess_ms)
{
    int best = NO_NAME;
    double best_ex = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p == skip || p < 0 || (uint32_t)p >= v->n_names ||
            rs->phase_ns[p] == SS_MISSING)
            continue;
        double ex = (double)rs->phase_ns[p] - (double)v->phases[i].stat.median;
        if (ex > best_ex) {
            best_ex = ex;
            best = p;
        }
    }
    *excess_ms = best_ex / 1e6;
    return best;
}

static void straggler_step(void *state, ss_detectors *d,
                           const ss_step_view *v, uint32_t world)
{
    straggler *sg = state;
    uint32_t sw = sg->sw, idx = sg->head;
    sg->head = (idx + 1) % sw;
    if (sg->fill < sw)
        sg->fill++;
    for (uint32_t r = 0; r < world; r++) {
        uint8_t *fl = &sg->flags[(size_t)r * sw + idx];
        if (*fl & F_SEEN)
            sg->rank[r].seen--;
        if (*fl & F_LATE)
            sg->rank[r].late--;
        *fl = 0;
    }
    double med_step = (double)v->step_time.median;
    sg->step[idx] = v->step;
    sg->med_ms[idx] =
        v->step_time.median == SS_MISSING ? 0 : (float)(med_step / 1e6);
    sg->method[idx] = M_NONE;
    sg->ref[idx] = NO_NAME;
    if (v->n_present >= 2 && v->step_time.median != SS_MISSING &&
        med_step > 0) {
        double thr = d->p[P_S_MIN_LATE_MS] * 1e6;
        if (thr < d->p[P_S_MIN_LATE_FRAC] * med_step)
            thr = d->p[P_S_MIN_LATE_FRAC] * med_step;
        int ref;
        int64_t *late = sg->i64;
        int method = measure_lateness(d, sg, v, world, thr, late, &ref);
        /* With three ranks or more, a rank must also stand out from the
         * spread of all ranks: when ranks share few cores, arrivals spread
         * evenly and the last one is not a straggler. */
        size_t n = 0;
        for (uint32_t r = 0; r < world; r++)
            if (late[r] != SS_MISSING)
                sg->f64[n++] = (double)late[r];
        if (n >= 3) {
            double spread = d->p[P_S_MAD_K] * SS_MAD_TO_SIGMA *
                            ss_mad_f64(sg->f64, n, NULL);
            if (thr < spread)
                thr = spread;
        }
        sg->method[idx] = (uint8_t)method;
        sg->ref[idx] = (uint8_t)ref;
        for (uint32_t r = 0; r < world; r++) {
            if (late[r] == SS_MISSING)
                continue;
            if (method != M_STEP_TIME &&
                (double)late[r] / 1e6 > d->note.sync_late_ms)
                d->note.sync_late_ms = (double)late[r] / 1e6;
            size_t k = (size_t)r * sw + idx;
            strag_rank *sr = &sg->rank[r];
            sg->flags[k] = F_SEEN;
            sr->seen++;
            sg->late_ms[k] = (float)((double)late[r] / 1e6);
            sg->blame[k] = NO_NAME;
            sg->expl_ms[k] = 0;
            if ((double)late[r] < thr) {
                if (sr->run)
                    end_run(d, sg, r, 0);
                continue;
            }
            sg->flags[k] |= F_LATE;
            sr->late++;
            double ex;
            sg->blame[k] = (uint8_t)blame_phase(
                v, &v->ranks[r], method == M_SYNC_PHASE ? ref : -1, &ex);
            sg->expl_ms[k] = (float)ex;
            if (sr->run++ == 0)
                sr->run_first = v->step;
            sr->run_last = v->step;
        }
    }
    for (uint32_t r = 0; r < world; r++) {
        strag_rank *sr = &sg->rank[r];
        if (sr->persistent < 0) {
            if (sr->seen >= ss__param_u32(d, P_S_MIN_STEPS) &&
                sr->late >= d->p[P_S_PERSIST_FRAC] * sr->seen &&
                sr->late > 0) {
                sr->persistent = ss__finding_open(d, "straggler");
                if (sr->persistent >= 0)
                    refresh_persistent(d, sg, r, 1);
            }
        } else if (sr->late < d->p[P_S_END_FRAC] * sr->seen) {
            sr->persistent = -1; /* keeps the last snapshot */
        } else if (sg->flags[(size_t)r * sw + idx] & F_SEEN) {
            refresh_persistent(d, sg, r, 0);
        }
        if (sr->persistent >= 0 && sr->run)
            sr->run_persistent = 1;
        if (sr->pending && sr->persistent >= 0) {
            free(sr->pending); /* it opened this persistent episode */
            sr->pending = NULL;
        } else if (sr->pending &&
                   sr->seen >= ss__param_u32(d, P_S_MIN_STEPS)) {
            commit_pending(d, sg, r);
        }
    }
}

/* ---- the ss__detector hooks ---- */

static void straggler_destroy(void *state)
{
    straggler *sg = state;
    free(sg->step);
    free(sg->med_ms);
    free(sg->method);
    free(sg->ref);
    free(sg->late_ms);
    free(sg->expl_ms);
    free(sg->blame);
    free(sg->flags);
    if (sg->rank)
        for (uint32_t r = 0; r < sg->world; r++)
            free(sg->rank[r].pending);
    free(sg->rank);
    free(sg->f64);
    free(sg->i64);
    free(sg);
}

static void *straggler_create(ss_detectors *d)
{
    straggler *sg = ss__zalloc(1, sizeof *sg);
    if (!sg)
        return NULL;
    size_t w = d->world;
    sg->world = d->world;
    sg->sw = ss__param_u32(d, P_S_WINDOW);
    size_t scratch = w > 4 * (size_t)sg->sw ? w : 4 * (size_t)sg->sw;
    sg->step = ss__zalloc(sg->sw, sizeof *sg->step);
    sg->med_ms = ss__zalloc(sg->sw, sizeof *sg->med_ms);
    sg->method = ss__zalloc(sg->sw, 1);
    sg->ref = ss__zalloc(sg->sw, 1);
    sg->late_ms = ss__zalloc(w * sg->sw, sizeof(float));
    sg->expl_ms = ss__zalloc(w * sg->sw, sizeof(float));
    sg->blame = ss__zalloc(w * sg->sw, 1);
    sg->flags = ss__zalloc(w * sg->sw, 1);
    sg->rank = ss__zalloc(w, sizeof *sg->rank);
    sg->f64 = ss__zalloc(scratch, sizeof *sg->f64);
    sg->i64 = ss__zalloc(w, sizeof *sg->i64);
    if (!sg->step || !sg->med_ms || !sg->method || !sg->ref ||
        !sg->late_ms || !sg->expl_ms || !sg->blame || !sg->flags ||
        !sg->rank || !sg->f64 || !sg->i64) {
        straggler_destroy(sg);
        return NULL;
    }
    for (size_t r = 0; r < w; r++)
        sg->rank[r].persistent = -1;
    return sg;
}

/* The run ends: a burst still open, or still pending, is judged now. */
static void straggler_end(void *state, ss_detectors *d)
{
    straggler *sg = state;
    for (uint32_t r = 0; r < sg->world; r++) {
        if (sg->rank[r].run)
            end_run(d, sg, r, 1);
        if (sg->rank[r].pending && sg->rank[r].persistent < 0)
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
