/*
 * detect_data_stall.c - the data_stall detector: a rank whose data-loading
 * phase is far above the median rank's in the same step.
 *
 * A phase is a data-loading phase when its name is one of
 * data_phase_names[] (ignoring case).  A stall is a step where the rank's
 * time in it exceeds the median rank's (of two ranks, the other's:
 * ss__reference; alone in it, its own typical time: own_reference) by
 * data_stall.min_ms and is data_stall.factor times it;
 * after data_stall.min_count stalls the rank gets a finding, with the
 * period of the stalls when they recur regularly; critical when its
 * stalls are as long as a step without one (typical_step_ms).  Per rank
 * it keeps a ring of its last STALL_RING stalls.  It tells jitter which
 * steps had a stall (ss__step_notes.data_stall).  A step in which the
 * host saw the rank stopped or throttled for half the excess or more is
 * not a stall: it did not run, and the host detector says so (stopped,
 * cpu_throttled).
 * docs/detectors.md, "data_stall", states the rule and its defaults.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <strings.h>

#include "stats.h"

#define STALL_RING 32
/* The median step time of this many of the latest steps without a stall
 * is the typical step a stall is measured against (critical_frac). */
#define TYPICAL_RING 64
/* A rank alone in a step's data phase (a job of one rank, or the one rank
 * that loads data) is measured against its own recent data phases: the
 * lower quartile of the latest OWN_RING of them without a stall, once
 * OWN_MIN are known (a quartile, so that stalls in up to three steps of
 * four before the first is seen do not hide the typical time). */
#define OWN_RING 32
#define OWN_MIN 8

/* Phase names treated as data loading (compared ignoring case). */
static const char *const data_phase_names[] = {
    "data",      "data_wait",    "dataloader", "data_loader", "data_load",
    "data_loading", "data_fetch", "input_wait", "batch_wait", NULL};

typedef struct {
    uint32_t count;
    double total_ms, max_ms, med_step_ms;
    uint64_t first, last;
    uint64_t steps[STALL_RING]; /* ring, count % STALL_RING is next */
    float excess_ms[STALL_RING];
    ss__name_idx phase;
    int32_t finding;
    int alone; /* its latest stall was measured against its own data time */
} stall_rank;

/* A rank's own recent data phases, ns (OWN_RING). */
typedef struct {
    float ns[OWN_RING];
    uint32_t next, n;
} own_history;

typedef struct {
    uint32_t world;
    own_history **own; /* world entries, allocated at a rank's first step
                          alone in a data phase */
    float typical_ms[TYPICAL_RING]; /* ring: the median rank's step time
                                       of steps without a stall */
    uint32_t typical_next, n_typical;
    int8_t is_data[SS_MAX_RUN_NAMES]; /* by name index */
    uint32_t n_classified;
    stall_rank **rank; /* world entries, allocated at a rank's first stall */
} data_stall;

int ss__data_phase_name(const char *name)
{
    for (int i = 0; data_phase_names[i]; i++)
        if (strcasecmp(name, data_phase_names[i]) == 0)
            return 1;
    return 0;
}

static void refresh_stall(ss_detectors *d, stall_rank *st, uint32_t r)
{
    ss_finding *f = ss__finding(d, st->finding);
    uint32_t n = st->count < STALL_RING ? st->count : STALL_RING;
    uint64_t steps[STALL_RING];
    double ex[STALL_RING];
    for (uint32_t i = 0; i < n; i++) {
        /* oldest first */
        uint32_t k = (st->count - n + i) % STALL_RING;
        steps[i] = st->steps[k];
        ex[i] = st->excess_ms[k];
    }
    uint64_t period = ss_regular_period(steps, n, d->p[P_D_PERIOD_FRAC]);
    double med = ss_median_f64(ex, n);
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    snprintf(f->phase, sizeof f->phase, "%s", ss__name_of(d, st->phase));
    f->first_step = st->first;
    f->last_step = st->last;
    f->severity = st->med_step_ms > 0 &&
                          med >= d->p[P_D_CRIT_FRAC] * st->med_step_ms
                      ? SS_CRITICAL
                      : SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "stalls", st->count);
    ss__evidence_num(ev, "total_stall_ms", round(st->total_ms * 10) / 10);
    ss__evidence_num(ev, "stall_ms_median", round(med * 10) / 10);
    ss__evidence_num(ev, "stall_ms_max", round(st->max_ms * 10) / 10);
    ss__evidence_num(ev, "median_step_ms", round(st->med_step_ms * 10) / 10);
    ss__evidence_int(ev, "steps_seen", (int64_t)d->n_eval);
    if (period)
        ss__evidence_int(ev, "period_steps", (int64_t)period);
    ss__evidence_end(ev, f);
    char a[32], b[32], per[64] = "";
    if (period)
        snprintf(per, sizeof per, "; the stalls recur every %" PRIu64
                 " steps",
                 period);
    snprintf(f->message, sizeof f->message,
             "rank %u stalls waiting for data: %u times since step "
             "%" PRIu64 " its %s phase took %s ms (median) longer than %s, "
             "%s s in all%s.",
             r, st->count, st->first, f->phase, ss__fmt_ms(a, sizeof a, med),
             st->alone       ? "usual"
             : d->world == 2 ? "the other rank's"
                             : "the median rank's",
             ss__fmt_ms(b, sizeof b, st->total_ms / 1000), per);
    ss__finding_touch(d, st->finding);
}

/* Rank R stalled in STEP, EXCESS_MS in PHASE (ALONE: over its own data
 * time), where the typical step is MED_STEP_MS (typical_step_ms). */
static void stall_seen(ss_detectors *d, data_stall *ds, uint32_t r,
                       uint64_t step, int phase, double excess_ms,
                       int alone, double med_step_ms)
{
    stall_rank *st = ds->rank[r];
    if (!st) {
        st = ds->rank[r] = ss__zalloc(1, sizeof *st);
        if (!st)
            return;
        st->finding = -1;
        st->first = step;
    }
    if (st->count && st->last == step) {
        /* two data phases stalled in one step: one stall */
        uint32_t k = (st->count - 1) % STALL_RING;
        if (excess_ms > st->excess_ms[k]) {
            st->total_ms += excess_ms - st->excess_ms[k];
            st->excess_ms[k] = (float)excess_ms;
            st->phase = (ss__name_idx)phase;
        }
    } else {
        uint32_t k = st->count % STALL_RING;
        st->steps[k] = step;
        st->excess_ms[k] = (float)excess_ms;
        st->count++;
        st->total_ms += excess_ms;
        st->phase = (ss__name_idx)phase;
    }
    st->last = step;
    st->alone = alone;
    if (excess_ms > st->max_ms)
        st->max_ms = excess_ms;
    st->med_step_ms = med_step_ms;
    if (st->count < ss__param_u32(d, P_D_MIN_COUNT))
        return;
    if (st->finding < 0)
        st->finding = ss__finding_open(d, "data_stall");
    if (st->finding >= 0)
        refresh_stall(d, st, r);
}

/* ---- the ss__detector hooks ---- */

static void *data_stall_create(ss_detectors *d)
{
    data_stall *ds = ss__zalloc(1, sizeof *ds);
    if (!ds)
        return NULL;
    ds->world = d->world;
    ds->rank = ss__zalloc(d->world, sizeof *ds->rank);
    ds->own = ss__zalloc(d->world, sizeof *ds->own);
    if (!ds->rank || !ds->own) {
        free(ds->rank);
        free(ds->own);
        free(ds);
        return NULL;
    }
    return ds;
}

/* Classifies the names added to the run's table since the last step. */
static void data_stall_names(void *state, ss_detectors *d, uint32_t n_names,
                             const char *const *names)
{
    data_stall *ds = state;
    (void)d;
    if (n_names > SS_MAX_RUN_NAMES)
        n_names = SS_MAX_RUN_NAMES;
    for (uint32_t i = ds->n_classified; i < n_names; i++)
        ds->is_data[i] =
            (int8_t)(names && names[i] && ss__data_phase_name(names[i]));
    if (n_names > ds->n_classified)
        ds->n_classified = n_names;
}

/* What the host saw RS lose to being stopped or throttled in its step
 * (0 without host evidence): time the rank did not run at all, whatever
 * phase it was in. */
static double not_running_ms(const ss_rank_step *rs)
{
    if (!rs->host)
        return 0;
    double ns = 0;
    if (rs->host->stopped_ns != SS_MISSING && rs->host->stopped_ns > 0)
        ns += (double)rs->host->stopped_ns;
    if (rs->host->throttled_ns != SS_MISSING && rs->host->throttled_ns > 0)
        ns += (double)rs->host->throttled_ns;
    return ns / 1e6;
}

/* The typical step a stall is measured against: the median of the
 * median rank's step time over the latest steps without a stall (a stall
 * lengthens its own step on every rank that waits for it at a
 * collective), or THIS_STEP_MS, that of the step itself, before any. */
static double typical_step_ms(const data_stall *ds, double this_step_ms)
{
    uint32_t n = ds->n_typical;
    if (n == 0)
        return this_step_ms;
    double v[TYPICAL_RING];
    for (uint32_t i = 0; i < n; i++)
        v[i] = ds->typical_ms[i];
    return ss_median_f64(v, n);
}

/* What rank R's data phase VAL (ns) is compared with when it is alone in
 * the step's data phase: its own typical data time (OWN_RING), or NAN
 * while fewer than OWN_MIN are known or out of memory. */
static double own_reference(data_stall *ds, uint32_t r)
{
    if (!ds->own[r] && !(ds->own[r] = ss__zalloc(1, sizeof *ds->own[r])))
        return NAN;
    const own_history *h = ds->own[r];
    if (h->n < OWN_MIN)
        return NAN;
    double v[OWN_RING];
    for (uint32_t i = 0; i < h->n; i++)
        v[i] = h->ns[i];
    return ss_percentile_f64(v, h->n, 250);
}

static void own_push(data_stall *ds, uint32_t r, double val)
{
    own_history *h = ds->own[r];
    if (!h)
        return;
    h->ns[h->next] = (float)val;
    h->next = (h->next + 1) % OWN_RING;
    if (h->n < OWN_RING)
        h->n++;
}

static void data_stall_step(void *state, ss_detectors *d,
                            const ss_step_view *v, uint32_t world)
{
    data_stall *ds = state;
    double med_step_ms = v->step_time.median == SS_MISSING
                             ? 0
                             : (double)v->step_time.median / 1e6;
    int stalled = 0;
    double typical = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_phase_stat *ps = &v->phases[i];
        int p = ps->name;
        if (p < 0 || (uint32_t)p >= v->n_names || !ds->is_data[p] ||
            ps->stat.n == 0)
            continue;
        double floor_ns = d->p[P_D_MIN_MS] * 1e6;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (!rs->present || rs->phase_ns[p] == SS_MISSING)
                continue;
            double val = (double)rs->phase_ns[p];
            int alone = ps->stat.n == 1;
            double med = alone ? own_reference(ds, r)
                               : ss__reference(&ps->stat, val);
            /* a rank stopped or throttled for half the excess or more in
             * that step did not wait for data: the host detector names it */
            if (val - med >= floor_ns && val >= d->p[P_D_FACTOR] * med &&
                not_running_ms(rs) < 0.5 * (val - med) / 1e6) {
                d->note.data_stall = 1;
                if (!stalled++)
                    typical = typical_step_ms(ds, med_step_ms);
                stall_seen(d, ds, r, v->step, p, (val - med) / 1e6, alone,
                           typical);
            } else if (alone) {
                own_push(ds, r, val);
            }
        }
    }
    if (!stalled && med_step_ms > 0) {
        ds->typical_ms[ds->typical_next] = (float)med_step_ms;
        ds->typical_next = (ds->typical_next + 1) % TYPICAL_RING;
        if (ds->n_typical < TYPICAL_RING)
            ds->n_typical++;
    }
}

static void data_stall_destroy(void *state)
{
    data_stall *ds = state;
    for (uint32_t r = 0; r < ds->world; r++) {
        free(ds->rank[r]);
        free(ds->own[r]);
    }
    free(ds->rank);
    free(ds->own);
    free(ds);
}

const ss__detector ss__data_stall_detector = {
    .name = "data_stall",
    .create = data_stall_create,
    .on_names = data_stall_names,
    .on_step = data_stall_step,
    .on_end = NULL,
    .destroy = data_stall_destroy,
};
