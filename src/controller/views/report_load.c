/*
 * report_load.c - the report's model (report_model.h) from the store's
 * reader: the attempt's findings, its steps folded into sorted series per
 * phase and sync point, its metrics, ranks and latest events.
 *
 * The loaders give rows; what is computed here is what the report says
 * about them: percentiles over steps, the rank most often worst, each
 * rank's median per phase in the order the report lists phases, and which
 * ranks the findings name.
 */
#include "report_model.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goodput_view.h"
#include "progress.h"
#include "stats.h"

/* ---- vectors ---- */

static int vec_push(ss_report_vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void vec_sort(ss_report_vec *a)
{
    if (a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, cmp_i64);
}

int64_t ss_report_pct(const ss_report_vec *a, unsigned permille)
{
    return a->n ? a->v[ss_nearest_rank(a->n, permille)] : SS_MISSING;
}

/* The most frequent value of V (sorted) into *VALUE and its count into
 * *COUNT, the smallest on ties; both SS_MISSING when V is empty. */
static void mode(const ss_report_vec *v, int64_t *value, int64_t *count)
{
    *value = *count = SS_MISSING;
    for (size_t i = 0, j; i < v->n; i = j) {
        for (j = i; j < v->n && v->v[j] == v->v[i]; j++)
            ;
        if (*count == SS_MISSING || (int64_t)(j - i) > *count) {
            *value = v->v[i];
            *count = (int64_t)(j - i);
        }
    }
}

/* ---- steps, phases and syncs ---- */

typedef struct {
    ss_report_series s;
    ss_report_vec worst; /* the worst (last) rank of each step */
} series_acc;

/* The series of NAME in ACC (*N of them), added when new. */
static series_acc *series_of(series_acc **acc, size_t *n, int64_t *index,
                             uint32_t name, const char *text)
{
    if (index[name] >= 0)
        return &(*acc)[index[name]];
    series_acc *g = realloc(*acc, (*n + 1) * sizeof *g);
    if (!g)
        return NULL;
    *acc = g;
    memset(&g[*n], 0, sizeof g[*n]);
    g[*n].s.name = strdup(text);
    if (!g[*n].s.name)
        return NULL;
    index[name] = (int64_t)*n;
    return &g[(*n)++];
}

/* Sorts each accumulated series, finds its most frequent worst rank and
 * moves the series into *OUT (*N_OUT of them).  Returns 0 or -1 on
 * out-of-memory (then *OUT is NULL and the series are freed). */
static int series_finish(series_acc *acc, size_t n, ss_report_series **out,
                         size_t *n_out)
{
    ss_report_series *s = malloc((n ? n : 1) * sizeof *s);
    for (size_t i = 0; i < n; i++) {
        ss_report_series *x = &acc[i].s;
        vec_sort(&x->a);
        vec_sort(&x->b);
        vec_sort(&acc[i].worst);
        mode(&acc[i].worst, &x->top_rank, &x->top_count);
        free(acc[i].worst.v);
        vec_sort(&x->self);
        if (s) {
            s[i] = *x;
        } else {
            free(x->name);
            free(x->a.v);
            free(x->b.v);
            free(x->self.v);
        }
    }
    *out = s;
    *n_out = s ? n : 0;
    return s ? 0 : -1;
}

/* Phases in order of their median-rank p50, longest first (unmeasured
 * last), then by name. */
static int cmp_phase(const void *x, const void *y)
{
    const ss_report_series *p = x, *q = y;
    int64_t mp = ss_report_pct(&p->a, 500), mq = ss_report_pct(&q->a, 500);
    if (mp != mq) {
        if (mp == SS_MISSING || mq == SS_MISSING)
            return mp == SS_MISSING ? 1 : -1;
        return mp > mq ? -1 : 1;
    }
    return strcmp(p->name, q->name);
}

static int cmp_name(const void *x, const void *y)
{
    return strcmp(((const ss_report_series *)x)->name,
                  ((const ss_report_series *)y)->name);
}

/* Folds the attempt's steps into RP's step, phase and sync series. */
static int fold_steps(const ss_steps *s, ss_report *rp)
{
    ss_report_vec worst = {0};
    series_acc *ph = NULL, *sy = NULL;
    size_t n_ph = 0, n_sy = 0;
    int64_t *index = malloc(2 * (s->n_names ? s->n_names : 1) *
                            sizeof *index);
    int nomem = !index;
    for (size_t i = 0; index && i < 2 * s->n_names; i++)
        index[i] = -1;
    rp->first_step = s->n_steps ? s->steps[0].step : SS_MISSING;
    rp->last_step = s->n_steps ? s->steps[s->n_steps - 1].step : SS_MISSING;
    for (size_t i = 0; !nomem && i < s->n_steps; i++) {
        const ss_step_row *x = &s->steps[i];
        rp->incomplete_steps += x->n_missing > 0;
        nomem = (x->step_median != SS_MISSING &&
                 vec_push(&rp->step_med, x->step_median)) ||
                (x->step_max != SS_MISSING &&
                 vec_push(&rp->step_max, x->step_max)) ||
                (x->step_worst_rank != SS_MISSING &&
                 vec_push(&worst, x->step_worst_rank));
        for (size_t k = 0; !nomem && k < x->n_phases; k++) {
            const ss_step_phase *p = &s->phases[x->phase0 + k];
            series_acc *a = series_of(&ph, &n_ph, index, p->name,
                                      s->names[p->name]);
            nomem = !a ||
                    (p->median != SS_MISSING &&
                     vec_push(&a->s.a, p->median)) ||
                    (p->max != SS_MISSING && vec_push(&a->s.b, p->max)) ||
                    (p->self_median != SS_MISSING &&
                     vec_push(&a->s.self, p->self_median)) ||
                    (p->worst_rank != SS_MISSING &&
                     vec_push(&a->worst, p->worst_rank));
            if (a && p->self_n > 0 &&
                (p->self_median != p->median || p->self_max != p->max))
                a->s.nests = 1;
        }
        for (size_t k = 0; !nomem && k < x->n_syncs; k++) {
            const ss_step_sync *y = &s->syncs[x->sync0 + k];
            series_acc *a = series_of(&sy, &n_sy, index + s->n_names, y->name,
                                      s->names[y->name]);
            nomem = !a ||
                    (y->skew_ns != SS_MISSING &&
                     vec_push(&a->s.a, y->skew_ns)) ||
                    (y->late_ns != SS_MISSING &&
                     vec_push(&a->s.b, y->late_ns)) ||
                    (y->worst_rank != SS_MISSING &&
                     vec_push(&a->worst, y->worst_rank));
        }
    }
    free(index);
    vec_sort(&rp->step_med);
    vec_sort(&rp->step_max);
    vec_sort(&worst);
    mode(&worst, &rp->step_worst_rank, &rp->step_worst_count);
    free(worst.v);
    nomem |= series_finish(ph, n_ph, &rp->phases, &rp->n_phases) != 0;
    nomem |= series_finish(sy, n_sy, &rp->syncs, &rp->n_syncs) != 0;
    free(ph);
    free(sy);
    if (rp->n_phases > 1)
        qsort(rp->phases, rp->n_phases, sizeof *rp->phases, cmp_phase);
    for (size_t i = 0; i < rp->n_phases; i++)
        rp->any_nests |= rp->phases[i].nests;
    if (rp->n_syncs > 1)
        qsort(rp->syncs, rp->n_syncs, sizeof *rp->syncs, cmp_name);
    return nomem ? -1 : 0;
}

/* ---- metrics and ranks ---- */

/* What the loaders below return when memory runs out here (the reader's
 * own codes are SS_READ_*, with the reason on the reader). */
#define REPORT_NOMEM (-100)

static int load_metrics(ss_reader *r, ss_report *rp)
{
    ss_metric_row *m;
    size_t n;
    int rc = ss_reader_metrics(r, rp->run.id, rp->attempt, &m, &n);
    if (rc != 0)
        return rc;
    rp->metrics = calloc(n ? n : 1, sizeof *rp->metrics);
    if (!rp->metrics) {
        ss_metric_rows_free(m, n);
        return REPORT_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ss_report_metric *x = &rp->metrics[rp->n_metrics];
        const double *v = m[i].values;
        size_t k = m[i].n;
        if (k == 0)
            continue;
        x->name = m[i].name;
        m[i].name = NULL;
        x->steps = m[i].steps;
        x->last_step = m[i].last_step;
        x->n = (int64_t)k;
        x->median = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
        x->min = v[0];
        x->max = v[k - 1];
        x->min_rank = m[i].ranks[0];
        x->max_rank = m[i].ranks[k - 1];
        rp->n_metrics++;
    }
    ss_metric_rows_free(m, n);
    return 0;
}

/* The value under NAME among the N entries of V; SS_MISSING if none. */
static int64_t named_value(const ss_named_i64 *v, size_t n, const char *name)
{
    for (size_t j = 0; j < n; j++)
        if (strcmp(v[j].name, name) == 0)
            return v[j].value;
    return SS_MISSING;
}

static int load_ranks(ss_reader *r, ss_report *rp)
{
    int rc = ss_reader_ranks(r, rp->run.id, rp->attempt, 0,
                             rp->n_phases ? SS_RANKS_PHASE_MEDIANS : 0,
                             &rp->ranks, &rp->n_ranks);
    if (rc != 0)
        return rc;
    size_t n = rp->n_ranks, np = rp->n_phases;
    size_t cells = n * np;
    rp->phase_med = malloc((cells ? cells : 1) * sizeof *rp->phase_med);
    rp->phase_self_med = malloc((cells ? cells : 1) *
                                sizeof *rp->phase_self_med);
    rp->named = calloc(n ? n : 1, 1);
    if (!rp->phase_med || !rp->phase_self_med || !rp->named)
        return REPORT_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const ss_rank_row *k = &rp->ranks[i];
        for (size_t p = 0; p < np; p++) {
            rp->phase_med[i * np + p] =
                named_value(k->phase_median_ns, k->n_phase_medians,
                            rp->phases[p].name);
            rp->phase_self_med[i * np + p] =
                named_value(k->phase_self_median_ns, k->n_phase_self_medians,
                            rp->phases[p].name);
        }
    }
    for (size_t i = 0; i < rp->n_findings; i++)
        for (size_t k = 0; k < rp->findings[i].n_ranks; k++) {
            int64_t v = rp->findings[i].ranks[k];
            if (v >= 0 && (size_t)v < n)
                rp->named[v] = 1;
        }
    return 0;
}

/* ---- the whole report ---- */

static void progress_tick(void *pg)
{
    ss_progress_tick(pg);
}

/* The newest stacks snapshot of the attempt, and its merged text. */
static int load_stacks(ss_reader *r, ss_report *rp)
{
    int rc = ss_reader_stack_snapshot(r, rp->run.id, rp->attempt,
                                      &rp->stacks);
    if (rc != 1)
        return rc;
    rp->stacks_answered = rp->stacks_total = SS_MISSING;
    cJSON *doc = cJSON_Parse(rp->stacks.json);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(doc, "merged_text");
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(doc, "answered");
    const cJSON *tot = cJSON_GetObjectItemCaseSensitive(doc, "ranks_total");
    if (cJSON_IsNumber(ans) && cJSON_IsNumber(tot)) {
        rp->stacks_answered = (int64_t)ans->valuedouble;
        rp->stacks_total = (int64_t)tot->valuedouble;
    }
    int nomem = 0;
    if (cJSON_IsString(text))
        nomem = !(rp->stacks_text = strdup(text->valuestring));
    if (!doc) { /* not JSON: the JSON report says null, the text says so */
        free(rp->stacks.json);
        nomem |= !(rp->stacks.json = strdup("null"));
    }
    cJSON_Delete(doc);
    return nomem ? REPORT_NOMEM : 0;
}

/* The vector names of the attempt and, per name, the latest kept step's
 * vectors of its first SS_REPORT_VALUES_RANKS ranks. */
static int load_values(ss_reader *r, ss_report *rp)
{
    ss_values_name_row *names;
    size_t n;
    int rc = ss_reader_value_names(r, rp->run.id, rp->attempt, &names, &n);
    if (rc != 0 || n == 0)
        return rc;
    rp->values = calloc(n, sizeof *rp->values);
    if (!rp->values) {
        ss_values_name_rows_free(names, n);
        return REPORT_NOMEM;
    }
    rp->n_values = n;
    for (size_t i = 0; i < n; i++) {
        rp->values[i].name = names[i];
        memset(&names[i], 0, sizeof names[i]); /* moved */
    }
    ss_values_name_rows_free(names, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        ss_report_values *x = &rp->values[i];
        size_t shown = x->name.n_ranks < SS_REPORT_VALUES_RANKS
                           ? x->name.n_ranks
                           : SS_REPORT_VALUES_RANKS;
        if (shown == 0)
            continue;
        x->latest = calloc(shown, sizeof *x->latest);
        if (!x->latest)
            return REPORT_NOMEM;
        x->n_latest = shown;
        for (size_t k = 0; k < shown && rc == 0; k++) {
            ss_values_query q = {.run_id = rp->run.id,
                                 .attempt = rp->attempt,
                                 .name = x->name.name,
                                 .rank = x->name.ranks[k], .index = -1,
                                 .from = x->name.last_step,
                                 .to = x->name.last_step};
            rc = ss_reader_values(r, &q, &x->latest[k]);
        }
    }
    return rc;
}

/* Loads everything after the run and attempt.  Returns 0, an SS_READ_*
 * code, or REPORT_NOMEM. */
static int load_parts(ss_reader *r, ss_report *rp, ss_progress *pg)
{
    int rc = ss_reader_findings(r, rp->run.id, rp->attempt, -1, -1,
                                &rp->findings, &rp->n_findings);
    if (rc == 0) {
        ss_steps s;
        rc = ss_reader_steps(r, rp->run.id, rp->attempt, NULL,
                             SS_STEPS_PHASES | SS_STEPS_SYNCS, &s);
        if (rc == 0 && fold_steps(&s, rp) != 0)
            rc = REPORT_NOMEM;
        ss_steps_free(&s);
    }
    ss_progress_stage(pg, "stepscope report: reading metrics", 1, 4);
    if (rc == 0)
        rc = load_metrics(r, rp);
    ss_progress_stage(pg, "stepscope report: reading per-rank steps", 2, 4);
    if (rc == 0)
        rc = load_ranks(r, rp);
    if (rc == 0)
        rc = ss_reader_rank_host(r, rp->run.id, rp->attempt, &rp->hosts,
                                 &rp->n_hosts);
    if (rc == 0)
        rc = ss_reader_nodes(r, rp->run.id, rp->attempt, &rp->nodes,
                             &rp->n_nodes);
    ss_progress_stage(pg, "stepscope report: reading events", 3, 4);
    if (rc == 0) {
        ss_event_query q = {rp->attempt, -1, SS_REPORT_MAX_EVENTS, 1};
        rc = ss_reader_events(r, rp->run.id, &q, &rp->events, &rp->n_events,
                              &rp->events_total);
    }
    if (rc == 0)
        rc = load_stacks(r, rp);
    if (rc == 0)
        rc = load_values(r, rp);
    return rc;
}

/* The run's goodput, and the reliability of its name once at least
 * SS_REPORT_RELIABILITY_RUNS runs of that name failed: ended "failed", or
 * had an attempt that ended in a failure MTBF counts (goodput.h). */
static int load_goodput(ss_reader *r, ss_report *rp)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ss_wall_ns now = (ss_wall_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int rc = ss_goodput_load(r, rp->run.id, now, &rp->goodput);
    if (rc || !rp->run.name)
        return rc;
    ss_run_row *runs;
    size_t n, failed = 0;
    if ((rc = ss_reader_runs(r, &runs, &n)))
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!runs[i].name || strcmp(runs[i].name, rp->run.name) != 0)
            continue;
        int bad = runs[i].status && strcmp(runs[i].status, "failed") == 0;
        ss_attempt_row *att;
        size_t n_att;
        if ((rc = ss_reader_attempts(r, runs[i].id, &att, &n_att)))
            break;
        for (size_t k = 0; k < n_att; k++)
            bad |= ss_gp_failure_cause(att[k].cause) >= 0;
        ss_attempt_rows_free(att);
        failed += bad;
    }
    ss_run_rows_free(runs, n);
    if (rc)
        return rc;
    if (failed < SS_REPORT_RELIABILITY_RUNS)
        return 0;
    rc = ss_reliability_load(r, rp->run.name, now, &rp->reliability);
    rp->has_reliability = rc == 0;
    return rc;
}

int ss_report_load(ss_reader *r, int64_t run_id, int64_t attempt,
                   ss_report *rp, FILE *err)
{
    memset(rp, 0, sizeof *rp);
    rp->first_step = rp->last_step = SS_MISSING;
    rp->step_worst_rank = rp->step_worst_count = SS_MISSING;
    int rc = ss_reader_run(r, run_id, &rp->run);
    if (rc == 0)
        rc = ss_reader_attempt(r, run_id, attempt, &rp->attempt,
                               &rp->n_attempts);
    if (rc == 0) {
        /* Large runs take seconds here: say which part on a terminal. */
        ss_progress pg;
        ss_progress_begin(&pg, err, "stepscope report: reading steps", 4);
        ss_reader_set_progress(r, progress_tick, &pg);
        rc = load_parts(r, rp, &pg);
        if (rc == 0)
            rc = load_goodput(r, rp);
        ss_reader_set_progress(r, NULL, NULL);
        ss_progress_end(&pg);
    }
    if (rc == REPORT_NOMEM)
        fprintf(err, "stepscope report: out of memory\n");
    else if (rc != 0)
        fprintf(err, "stepscope report: %s\n", ss_reader_errmsg(r));
    return rc == 0 ? 0 : -1;
}

void ss_report_free(ss_report *rp)
{
    ss_run_row_clear(&rp->run);
    ss_stack_snapshot_row_clear(&rp->stacks);
    free(rp->stacks_text);
    ss_finding_rows_free(rp->findings, rp->n_findings);
    free(rp->step_med.v);
    free(rp->step_max.v);
    for (size_t i = 0; i < rp->n_phases; i++) {
        free(rp->phases[i].name);
        free(rp->phases[i].a.v);
        free(rp->phases[i].b.v);
        free(rp->phases[i].self.v);
    }
    free(rp->phases);
    for (size_t i = 0; i < rp->n_syncs; i++) {
        free(rp->syncs[i].name);
        free(rp->syncs[i].a.v);
        free(rp->syncs[i].b.v);
    }
    free(rp->syncs);
    for (size_t i = 0; i < rp->n_metrics; i++)
        free(rp->metrics[i].name);
    free(rp->metrics);
    ss_rank_rows_free(rp->ranks, rp->n_ranks);
    free(rp->hosts);
    free(rp->phase_med);
    free(rp->phase_self_med);
    free(rp->named);
    ss_event_rows_free(rp->events, rp->n_events);
    ss_node_rows_free(rp->nodes, rp->n_nodes);
    ss_goodput_free(&rp->goodput);
    for (size_t i = 0; i < rp->n_values; i++) {
        ss_report_values *x = &rp->values[i];
        free(x->name.name);
        free(x->name.ranks);
        free(x->name.labels_json);
        for (size_t k = 0; k < x->n_latest; k++)
            ss_values_rows_free(&x->latest[k]);
        free(x->latest);
    }
    free(rp->values);
    memset(rp, 0, sizeof *rp);
}

void ss_report_names_over_limit(const ss_report *rp, int64_t *names,
                                int64_t *values, int64_t *ranks)
{
    *names = *values = *ranks = SS_MISSING;
    for (size_t i = 0; i < rp->n_ranks; i++) {
        const ss_rank_row *k = &rp->ranks[i];
        if (k->names_over_limit == SS_MISSING)
            continue;
        *names = (*names == SS_MISSING ? 0 : *names) + k->names_over_limit;
        *values = (*values == SS_MISSING ? 0 : *values) +
                  (k->values_over_limit == SS_MISSING ? 0
                                                      : k->values_over_limit);
        *ranks = (*ranks == SS_MISSING ? 0 : *ranks) +
                 (k->names_over_limit > 0);
    }
}

void ss_report_dropped(const ss_report *rp, int64_t *events,
                       int64_t *records)
{
    *events = rp->run.dropped_events;
    *records = rp->run.dropped_records;
    int64_t se = SS_MISSING, sr = SS_MISSING;
    for (size_t i = 0; i < rp->n_ranks; i++) {
        const ss_rank_row *k = &rp->ranks[i];
        if (k->dropped_events != SS_MISSING)
            se = (se == SS_MISSING ? 0 : se) + k->dropped_events;
        if (k->dropped_records != SS_MISSING)
            sr = (sr == SS_MISSING ? 0 : sr) + k->dropped_records;
    }
    if (*events == SS_MISSING)
        *events = se;
    if (*records == SS_MISSING)
        *records = sr;
}
