/*
 * guard_load.c - a run's metric samples for `stepscope guard`, read from
 * the store through store/reader.h (docs/guard.md, "Metrics").
 *
 * From the steps table (every finalized step, after the warm-up):
 *   step_time            the median rank's step time, per step (ms)
 *   step_time_p90        the p90 of step_time over each block of steps
 *   throughput           1 / step_time, per step (steps/s)
 *   phase.NAME           the median rank's time in phase NAME (ms)
 *   skew.NAME            arrival skew at sync point NAME (ms)
 *   rss_peak, device_peak  the largest rank's memory, per step (MiB)
 * From the kept rank-step rows (retention, docs/store.md):
 *   step_time_worst_rank the step times of the rank whose median is highest
 *   metric.NAME          the median over ranks of a user metric, per step
 * From the findings: finding.KIND, how many (shown, never tested).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "guard_model.h"
#include "stats.h"

#define NS_PER_MS 1e6
#define BYTES_PER_MIB (1024.0 * 1024.0)

void guard_run_free(guard_run *run)
{
    if (!run)
        return;
    ss_run_row_clear(&run->row);
    free(run->fingerprint);
    for (size_t i = 0; i < run->n_m; i++) {
        free(run->m[i].name);
        free(run->m[i].v);
    }
    free(run->m);
    memset(run, 0, sizeof *run);
}

const guard_series *guard_find_series(const guard_run *run, const char *name)
{
    for (size_t i = 0; i < run->n_m; i++)
        if (strcmp(run->m[i].name, name) == 0)
            return &run->m[i];
    return NULL;
}

/* The series NAME of RUN, created empty when new; NULL when out of
 * memory. */
static guard_series *series(guard_run *run, const char *name,
                            const char *unit, guard_direction dir, int tested)
{
    for (size_t i = 0; i < run->n_m; i++)
        if (strcmp(run->m[i].name, name) == 0)
            return &run->m[i];
    guard_series *m = realloc(run->m, (run->n_m + 1) * sizeof *m);
    if (!m)
        return NULL;
    run->m = m;
    guard_series *s = &m[run->n_m];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    if (!s->name)
        return NULL;
    s->unit = unit;
    s->direction = dir;
    s->tested = tested;
    run->n_m++;
    return s;
}

/* Appends V to S; -1 when out of memory. */
static int push(guard_series *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        double *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

/* Higher or lower is worse for a user metric, by its name. */
static guard_direction metric_direction(const char *name)
{
    static const char *const rates[] = {"per_s", "/s", "throughput", "tokens",
                                        "samples", "acc", "tflops", "mfu",
                                        "goodput"};
    static const char *const costs[] = {"loss", "time", "latency", "_ms",
                                        "_ns", "err", "perplexity"};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (strstr(name, rates[i]))
            return GUARD_LOWER_IS_WORSE;
    for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++)
        if (strstr(name, costs[i]))
            return GUARD_HIGHER_IS_WORSE;
    return GUARD_EITHER_IS_WORSE;
}

static int from_steps(ss_reader *r, int64_t attempt, const guard_settings *st,
                      guard_run *run)
{
    ss_steps steps = {0};
    int rc = ss_reader_steps(r, run->row.id, attempt, NULL,
                             SS_STEPS_PHASES | SS_STEPS_SYNCS, &steps);
    if (rc != 0)
        return rc;
    guard_series *step = series(run, "step_time", "ms", GUARD_HIGHER_IS_WORSE, 1);
    guard_series *rate = series(run, "throughput", "steps/s",
                                GUARD_LOWER_IS_WORSE, 1);
    guard_series *rss = series(run, "rss_peak", "MiB", GUARD_HIGHER_IS_WORSE, 1);
    guard_series *dev = series(run, "device_peak", "MiB",
                               GUARD_HIGHER_IS_WORSE, 1);
    rc = step && rate && rss && dev ? 0 : SS_READ_ERROR;
    int64_t first = steps.n_steps ? steps.steps[0].step : 0;
    char name[300];
    for (size_t i = 0; rc == 0 && i < steps.n_steps; i++) {
        const ss_step_row *row = &steps.steps[i];
        if (row->step < first + (int64_t)st->warmup)
            continue;
        /* Pointers into run->m move when it grows: look them up again. */
        step = &run->m[0];
        rate = &run->m[1];
        rss = &run->m[2];
        dev = &run->m[3];
        if (row->step_median != SS_MISSING && row->step_median > 0) {
            rc |= push(step, row->step_median / NS_PER_MS);
            rc |= push(rate, 1e9 / (double)row->step_median);
        }
        if (row->rss_max != SS_MISSING)
            rc |= push(rss, row->rss_max / BYTES_PER_MIB);
        if (row->device_max != SS_MISSING)
            rc |= push(dev, row->device_max / BYTES_PER_MIB);
        for (size_t k = 0; k < row->n_phases; k++) {
            const ss_step_phase *ph = &steps.phases[row->phase0 + k];
            if (ph->median == SS_MISSING)
                continue;
            snprintf(name, sizeof name, "phase.%s", steps.names[ph->name]);
            guard_series *s = series(run, name, "ms", GUARD_HIGHER_IS_WORSE, 1);
            rc |= s ? push(s, ph->median / NS_PER_MS) : -1;
        }
        for (size_t k = 0; k < row->n_syncs; k++) {
            const ss_step_sync *sy = &steps.syncs[row->sync0 + k];
            if (sy->skew_ns == SS_MISSING)
                continue;
            snprintf(name, sizeof name, "skew.%s", steps.names[sy->name]);
            guard_series *s = series(run, name, "ms", GUARD_HIGHER_IS_WORSE, 1);
            rc |= s ? push(s, sy->skew_ns / NS_PER_MS) : -1;
        }
    }
    /* The p90 of each block of steps: a tail that grows shows here even
     * when the typical step does not move. */
    guard_series *p90 = rc == 0 ? series(run, "step_time_p90", "ms",
                                         GUARD_HIGHER_IS_WORSE, 1)
                                : NULL;
    if (p90) {
        const guard_series *src = &run->m[0];
        size_t block = st->block ? st->block : 10;
        double *tmp = malloc(block * sizeof *tmp);
        rc = tmp ? 0 : SS_READ_ERROR;
        for (size_t b = 0; tmp && rc == 0 && b + block <= src->n; b += block) {
            memcpy(tmp, src->v + b, block * sizeof *tmp);
            rc |= push(p90, ss_percentile_f64(tmp, block, 900));
        }
        free(tmp);
    } else if (rc == 0) {
        rc = SS_READ_ERROR;
    }
    ss_steps_free(&steps);
    return rc ? SS_READ_ERROR : 0;
}

/* Per rank: its step times in the kept rows; per metric name and step: the
 * values across ranks, reduced to their median when the step changes. */
typedef struct {
    double *v;
    size_t n, cap;
} dvec;

static int dvec_push(dvec *d, double v)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        double *nv = realloc(d->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        d->v = nv;
        d->cap = cap;
    }
    d->v[d->n++] = v;
    return 0;
}

/* Pushes the median of every metric's values gathered for one step into
 * the run's metric.NAME series and empties them. */
static int flush_metric_step(guard_run *run, const ss_rank_steps *cur,
                             dvec *per_name, size_t n_names)
{
    int rc = 0;
    char name[300];
    for (size_t k = 0; k < n_names; k++) {
        if (per_name[k].n == 0)
            continue;
        const char *mname = ss_rank_steps_name(cur, (uint32_t)k);
        snprintf(name, sizeof name, "metric.%s", mname ? mname : "?");
        guard_series *s = series(run, name, "", metric_direction(name + 7), 1);
        rc |= s ? push(s, ss_median_f64(per_name[k].v, per_name[k].n)) : -1;
        per_name[k].n = 0;
    }
    return rc;
}

static int from_rank_steps(ss_reader *r, int64_t attempt, int64_t first_step,
                           guard_run *run)
{
    ss_rank_step_query q = {run->row.id, attempt, first_step, -1,
                            SS_RANK_STEPS_METRICS, 0};
    ss_rank_steps *cur = NULL;
    int rc = ss_reader_rank_steps(r, &q, &cur);
    if (rc != 0)
        return rc;
    dvec *per_rank = NULL, *per_name = NULL;
    size_t n_ranks = 0, n_names = 0;
    int64_t step = INT64_MIN;
    const ss_rank_step_row *row;
    int got;
    while (rc == 0 && (got = ss_rank_steps_next(cur, &row)) == 1) {
        if (row->step != step && step != INT64_MIN)
            rc |= flush_metric_step(run, cur, per_name, n_names);
        step = row->step;
        if (row->rank >= 0 && row->rank < SS_READ_MAX_RANKS &&
            row->step_ns != SS_MISSING) {
            if ((size_t)row->rank >= n_ranks) {
                size_t want = (size_t)row->rank + 1;
                dvec *nr = realloc(per_rank, want * sizeof *nr);
                if (!nr) {
                    rc = -1;
                    break;
                }
                memset(nr + n_ranks, 0, (want - n_ranks) * sizeof *nr);
                per_rank = nr;
                n_ranks = want;
            }
            rc |= dvec_push(&per_rank[row->rank], row->step_ns / NS_PER_MS);
        }
        for (size_t k = 0; rc == 0 && k < row->n_metrics; k++) {
            const ss_rank_metric *m = &row->metrics[k];
            if (isnan(m->value))
                continue;
            if (m->name >= n_names) {
                size_t want = (size_t)m->name + 1;
                dvec *nn = realloc(per_name, want * sizeof *nn);
                if (!nn) {
                    rc = -1;
                    break;
                }
                memset(nn + n_names, 0, (want - n_names) * sizeof *nn);
                per_name = nn;
                n_names = want;
            }
            rc |= dvec_push(&per_name[m->name], m->value);
        }
    }
    if (rc == 0 && got < 0)
        rc = SS_READ_ERROR;
    if (rc == 0)
        rc = flush_metric_step(run, cur, per_name, n_names);
    /* The worst rank: the highest median step time. */
    double worst = -1.0;
    size_t worst_rank = 0;
    for (size_t k = 0; rc == 0 && k < n_ranks; k++) {
        if (per_rank[k].n == 0)
            continue;
        double *tmp = malloc(per_rank[k].n * sizeof *tmp);
        if (!tmp) {
            rc = -1;
            break;
        }
        memcpy(tmp, per_rank[k].v, per_rank[k].n * sizeof *tmp);
        double med = ss_median_f64(tmp, per_rank[k].n);
        free(tmp);
        if (med > worst) {
            worst = med;
            worst_rank = k;
        }
    }
    if (rc == 0 && worst >= 0.0) {
        guard_series *s = series(run, "step_time_worst_rank", "ms",
                                 GUARD_HIGHER_IS_WORSE, 1);
        for (size_t i = 0; s && rc == 0 && i < per_rank[worst_rank].n; i++)
            rc |= push(s, per_rank[worst_rank].v[i]);
        rc |= s ? 0 : -1;
    }
    for (size_t k = 0; k < n_ranks; k++)
        free(per_rank[k].v);
    for (size_t k = 0; k < n_names; k++)
        free(per_name[k].v);
    free(per_rank);
    free(per_name);
    ss_rank_steps_close(cur);
    return rc ? SS_READ_ERROR : 0;
}

static int from_findings(ss_reader *r, int64_t attempt, guard_run *run)
{
    ss_finding_row *rows = NULL;
    size_t n = 0;
    int rc = ss_reader_findings(r, run->row.id, attempt, -1, -1, &rows, &n);
    if (rc != 0)
        return rc;
    char name[300];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        snprintf(name, sizeof name, "finding.%s", rows[i].kind);
        guard_series *s = series(run, name, "", GUARD_HIGHER_IS_WORSE, 0);
        if (!s)
            rc = SS_READ_ERROR;
        else
            s->value += 1.0;
    }
    ss_finding_rows_free(rows, n);
    return rc;
}

int guard_load_identity(ss_reader *r, int64_t run_id, guard_run *out)
{
    memset(out, 0, sizeof *out);
    int rc = ss_reader_run(r, run_id, &out->row);
    if (rc == 0)
        rc = ss_reader_run_fingerprint(r, run_id, &out->fingerprint);
    if (rc != 0)
        guard_run_free(out);
    return rc;
}

int guard_load_samples(ss_reader *r, const guard_settings *settings,
                       unsigned what, guard_run *run)
{
    int64_t run_id = run->row.id, attempt = 0;
    int rc = ss_reader_attempt(r, run_id, -1, &attempt, NULL);
    if (rc == 0)
        rc = from_steps(r, attempt, settings, run);
    ss_step_counts counts;
    if (rc == 0 && (what & GUARD_LOAD_RANK_STEPS))
        rc = ss_reader_step_counts(r, run_id, attempt, &counts);
    if (rc == 0 && (what & GUARD_LOAD_RANK_STEPS)) {
        int64_t first = counts.first == SS_MISSING ? 0 : counts.first;
        rc = from_rank_steps(r, attempt, first + (int64_t)settings->warmup, run);
    }
    if (rc == 0)
        rc = from_findings(r, attempt, run);
    for (size_t i = 0; rc == 0 && i < run->n_m; i++) {
        guard_series *s = &run->m[i];
        if (!s->tested)
            continue;
        s->value = NAN;
        if (s->n == 0)
            continue;
        double *tmp = malloc(s->n * sizeof *tmp);
        if (!tmp) {
            rc = SS_READ_ERROR;
            break;
        }
        memcpy(tmp, s->v, s->n * sizeof *tmp);
        s->value = ss_median_f64(tmp, s->n);
        free(tmp);
    }
    return rc;
}

int guard_load_run(ss_reader *r, int64_t run_id, const guard_settings *settings,
                   guard_run *out)
{
    int rc = guard_load_identity(r, run_id, out);
    if (rc == 0)
        rc = guard_load_samples(r, settings, GUARD_LOAD_RANK_STEPS, out);
    if (rc != 0)
        guard_run_free(out);
    return rc;
}
