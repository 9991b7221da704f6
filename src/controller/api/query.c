/*
 * query.c - the store as the JSON documents of the HTTP API.
 *
 * Every document of docs/api.md is built here, and nowhere else: the HTTP
 * server serves them and `stepscope report --html` embeds them.  The rows
 * come from the store's one read API (reader.h), typed; no SQL here.
 * Steps and findings are written by objects.c, which also writes the event
 * stream's objects from the controller's memory: a stored object reads
 * back byte for byte as its event (query_test checks it).
 *
 * Costs: /steps reads one window of steps with their phases and syncs;
 * /heatmap the kept rank-step rows (their phases and syncs) of at most
 * SS_QUERY_MAX_CELLS / 8 cells; /findings the findings and the stored
 * stacks snapshot;
 * /host the same cells' host evidence (four series);
 * /ranks the per-rank medians over the kept rank-step rows of the latest
 * SS_QUERY_RANK_MEDIAN_STEPS steps; /runs counts steps per run; the run
 * summary reads two numbers per step of the attempt.  Nothing reads a
 * whole run's rank-steps, except /history: it is guard's judgement
 * (guard_judge.c), which reads the kept rank-steps of the judged run and
 * of its baseline runs (10 by default) and the steps of up to LAST runs.
 */
#include "query.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goodput.h"
#include "goodput_out.h"
#include "guard_model.h"
#include "objects.h"
#include "reader.h"
#include "run_diff.h"
#include "stats.h"

/* /ranks: per-rank median step time over the kept rows of the latest N
 * finalized steps. */
#define SS_QUERY_RANK_MEDIAN_STEPS 500

struct ss_query {
    ss_reader *reader;
};

ss_query *ss_query_open(const char *path, char *err, size_t errlen)
{
    ss_reader *r = ss_reader_open(path, err, errlen);
    if (!r)
        return NULL;
    ss_query *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(err, errlen, "out of memory");
        ss_reader_close(r);
        return NULL;
    }
    q->reader = r;
    return q;
}

void ss_query_close(ss_query *q)
{
    if (!q)
        return;
    ss_reader_close(q->reader);
    free(q);
}

/* A loader's failure RC (SS_READ_*) as a document's return value, with
 * the reader's reason in ERR. */
static int failed(ss_query *q, int rc, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", ss_reader_errmsg(q->reader));
    return rc == SS_READ_NOT_FOUND ? SS_QUERY_NOT_FOUND : SS_QUERY_ERROR;
}

static int oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return SS_QUERY_ERROR;
}

/* Ends a document: SS_QUERY_ERROR when OUT ran out of memory. */
static int finish(const ss_buf *out, char *err, size_t errlen)
{
    return out->oom ? oom(err, errlen) : 0;
}

static int live_is(ss_live *live, int64_t run_id)
{
    return live && ss_live_run_id(live) == run_id;
}

/* ---- percentiles ---- */

/* {"p50","p90","p99"} (nearest rank, stats.h) of V[0..N), reordering V. */
static void json_pcts(ss_buf *b, int64_t *v, size_t n)
{
    ss_buf_puts(b, "{\"p50\":");
    ss_buf_json_ms(b, ss_percentile_i64(v, n, 500));
    ss_buf_puts(b, ",\"p90\":");
    ss_buf_json_ms(b, ss_percentile_i64(v, n, 900));
    ss_buf_puts(b, ",\"p99\":");
    ss_buf_json_ms(b, ss_percentile_i64(v, n, 990));
    ss_buf_puts(b, "}");
}

/* ---- runs ---- */

/* The fields shared by /api/runs and /api/runs/{id}, without braces. */
static void run_fields(ss_buf *b, const ss_run_row *run, ss_live *live)
{
    ss_buf_printf(b, "\"id\":%" PRId64 ",\"uuid\":", run->id);
    ss_buf_json_str(b, run->uuid);
    ss_buf_puts(b, ",\"name\":");
    ss_buf_json_str(b, run->name);
    ss_buf_puts(b, ",\"status\":");
    ss_buf_json_str(b, run->status);
    ss_buf_puts(b, ",\"world_size\":");
    ss_buf_json_int(b, run->world_size);
    ss_buf_puts(b, ",\"started_at\":");
    ss_buf_json_time(b, run->started_at);
    ss_buf_puts(b, ",\"ended_at\":");
    ss_buf_json_time(b, run->ended_at);
    ss_buf_puts(b, ",\"started_at_ns\":");
    ss_buf_json_int(b, run->started_at);
    ss_buf_puts(b, ",\"ended_at_ns\":");
    ss_buf_json_int(b, run->ended_at);
    ss_buf_puts(b, ",\"steps\":");
    ss_buf_json_int(b, run->steps);
    ss_buf_puts(b, ",\"findings\":");
    ss_buf_json_int(b, run->findings);
    ss_buf_printf(b, ",\"live\":%s",
                  live_is(live, run->id) && ss_live_running(live) ? "true"
                                                                  : "false");
}

int ss_query_runs(ss_query *q, ss_live *live, ss_buf *out, char *err,
                  size_t errlen)
{
    ss_run_row *runs = NULL;
    size_t n = 0;
    int rc = ss_reader_runs(q->reader, &runs, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, "{\"runs\":[");
    for (size_t i = 0; i < n; i++) {
        ss_buf_puts(out, i ? ",{" : "{");
        run_fields(out, &runs[i], live);
        ss_buf_puts(out, "}");
    }
    ss_buf_puts(out, "]}");
    ss_run_rows_free(runs, n);
    return finish(out, err, errlen);
}

/* The "summary" object of /api/runs/{id}: counts, then the percentiles of
 * the median-rank and worst-rank step times over every step of the
 * attempt. */
static int run_summary(ss_query *q, int64_t run_id, int64_t attempt,
                       ss_buf *out, char *err, size_t errlen)
{
    ss_step_counts counts;
    int rc = ss_reader_step_counts(q->reader, run_id, attempt, &counts);
    int64_t *median = NULL, *worst = NULL;
    size_t n_median = 0, n_worst = 0;
    if (rc == 0)
        rc = ss_reader_step_times(q->reader, run_id, attempt, &median,
                                  &n_median, &worst, &n_worst);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_printf(out, "\"summary\":{\"attempt\":%" PRId64 ",\"steps\":",
                  attempt);
    ss_buf_json_int(out, counts.steps);
    ss_buf_puts(out, ",\"first_step\":");
    ss_buf_json_int(out, counts.first);
    ss_buf_puts(out, ",\"last_step\":");
    ss_buf_json_int(out, counts.last);
    ss_buf_puts(out, ",\"with_missing_ranks\":");
    ss_buf_json_int(out, counts.with_missing_ranks);
    ss_buf_puts(out, ",\"step_ms\":{\"median_rank\":");
    json_pcts(out, median, n_median);
    ss_buf_puts(out, ",\"worst_rank\":");
    json_pcts(out, worst, n_worst);
    ss_buf_puts(out, "}}");
    free(median);
    free(worst);
    return 0;
}

int ss_query_run(ss_query *q, int64_t run_id, int64_t attempt, ss_live *live,
                 ss_buf *out, char *err, size_t errlen)
{
    int64_t n_attempts = 0;
    int rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt,
                               &n_attempts);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_run_row run;
    rc = ss_reader_run(q->reader, run_id, &run);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, "{\"run\":{");
    run_fields(out, &run, live);
    ss_buf_puts(out, ",\"command\":");
    ss_buf_json_str(out, run.command);
    ss_buf_puts(out, ",\"exit_code\":");
    ss_buf_json_int(out, run.exit_code);
    ss_buf_puts(out, ",\"host\":");
    ss_buf_json_str(out, run.host);
    ss_buf_printf(out, ",\"attempt\":%" PRId64 ",\"attempts\":%" PRId64 "},",
                  attempt, n_attempts);
    ss_run_row_clear(&run);
    rc = run_summary(q, run_id, attempt, out, err, errlen);
    ss_buf_puts(out, "}");
    return rc != 0 ? rc : finish(out, err, errlen);
}

/* ---- steps ---- */

/* One element of "steps" from a stored step X of S: what ss_obj_step
 * writes for the same step from memory. */
static void stored_step_object(ss_buf *out, const ss_steps *s,
                               const ss_step_row *x)
{
    ss_buf_printf(out, "{\"step\":%" PRId64 ",\"n_present\":", x->step);
    ss_buf_json_int(out, x->n_present);
    ss_buf_puts(out, ",\"missing_ranks\":[");
    for (size_t i = 0; i < x->n_missing_ranks; i++) {
        if (i)
            ss_buf_puts(out, ",");
        ss_buf_json_int(out, x->missing_ranks[i]);
    }
    ss_buf_puts(out, "],\"step_ms\":");
    ss_obj_stat(out, x->step_min, x->step_median, x->step_p90, x->step_max,
                x->step_worst_rank);
    ss_buf_puts(out, ",\"phases\":{");
    for (size_t i = 0; i < x->n_phases; i++) {
        const ss_step_phase *p = &s->phases[x->phase0 + i];
        if (i)
            ss_buf_puts(out, ",");
        int64_t incl[5] = {p->min, p->median, p->p90, p->max,
                           p->worst_rank};
        int64_t self[5] = {p->self_min, p->self_median, p->self_p90,
                           p->self_max, p->self_worst_rank};
        ss_obj_phase(out, s->names[p->name], incl, p->self_n, self);
    }
    ss_buf_puts(out, "},\"syncs\":{");
    for (size_t i = 0; i < x->n_syncs; i++) {
        const ss_step_sync *y = &s->syncs[x->sync0 + i];
        if (i)
            ss_buf_puts(out, ",");
        ss_obj_sync(out, s->names[y->name], y->skew_ns, y->late_ns,
                    y->worst_rank);
    }
    ss_buf_puts(out, "}");
    ss_obj_mem(out, "rss_bytes", x->rss_median, x->rss_max,
               x->rss_worst_rank);
    ss_obj_mem(out, "device_bytes", x->device_median, x->device_max,
               x->device_worst_rank);
    ss_buf_puts(out, "}");
}

/* Loads the steps of window RG (attempt resolved) with their phases and
 * syncs into *S.  Returns 0 or a document error. */
static int load_steps(ss_query *q, int64_t run_id, const ss_query_range *rg,
                      ss_steps *s, char *err, size_t errlen)
{
    int64_t attempt;
    int rc = ss_reader_attempt(q->reader, run_id, rg->attempt, &attempt,
                               NULL);
    if (rc == 0) {
        ss_step_window w = {rg->from, rg->to, rg->limit};
        rc = ss_reader_steps(q->reader, run_id, attempt, &w,
                             SS_STEPS_PHASES | SS_STEPS_SYNCS, s);
    }
    return rc != 0 ? failed(q, rc, err, errlen) : 0;
}

/* Appends the step objects of S, the elements of "steps", each preceded
 * by a comma when SEPARATE or not the first. */
static void append_step_objects(ss_buf *out, const ss_steps *s, int separate)
{
    for (size_t i = 0; i < s->n_steps; i++) {
        if (i || separate)
            ss_buf_puts(out, ",");
        stored_step_object(out, s, &s->steps[i]);
    }
}

/* The steps document of the loaded steps S. */
static void steps_document(ss_buf *out, const ss_steps *s)
{
    ss_buf_puts(out, "{\"steps\":[");
    append_step_objects(out, s, 0);
    ss_buf_puts(out, "]}");
}

int ss_query_steps(ss_query *q, int64_t run_id, const ss_query_range *rg,
                   ss_buf *out, char *err, size_t errlen)
{
    ss_steps s;
    int rc = load_steps(q, run_id, rg, &s, err, errlen);
    if (rc != 0)
        return rc;
    steps_document(out, &s);
    ss_steps_free(&s);
    return finish(out, err, errlen);
}

int ss_query_steps_start(ss_query *q, int64_t run_id,
                         const ss_query_range *rg, ss_query_steps_cursor *cur,
                         char *err, size_t errlen)
{
    memset(cur, 0, sizeof *cur);
    cur->run_id = run_id;
    int rc = ss_reader_attempt(q->reader, run_id, rg->attempt, &cur->attempt,
                               NULL);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    cur->left = rg->limit;
    if (rg->from >= 0) { /* the first LIMIT steps from FROM: read forward */
        cur->next = rg->from;
        cur->last = rg->to < 0 ? INT64_MAX : rg->to;
        return 0;
    }
    /* The last LIMIT steps at or below TO: fix the window now, so steps
     * committed while it is sent do not shift it. */
    ss_step_window w = {-1, rg->to, rg->limit};
    rc = ss_reader_step_bounds(q->reader, run_id, cur->attempt, &w,
                               &cur->next, &cur->last);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    if (cur->next == SS_MISSING)
        cur->left = 0; /* no steps in the window */
    return 0;
}

int ss_query_steps_page(ss_query *q, ss_query_steps_cursor *cur,
                        int64_t max_steps, ss_buf *out, char *err,
                        size_t errlen)
{
    if (cur->left <= 0 || cur->next > cur->last)
        return 0;
    ss_step_window w = {cur->next, cur->last,
                        max_steps < cur->left ? max_steps : cur->left};
    ss_steps s;
    int rc = ss_reader_steps(q->reader, cur->run_id, cur->attempt, &w,
                             SS_STEPS_PHASES | SS_STEPS_SYNCS, &s);
    if (rc != 0) {
        failed(q, rc, err, errlen);
        return SS_QUERY_ERROR;
    }
    append_step_objects(out, &s, cur->sent > 0);
    size_t n = s.n_steps;
    int64_t last = n ? s.steps[n - 1].step : cur->next;
    ss_steps_free(&s);
    if (out->oom)
        return oom(err, errlen);
    cur->sent += (int64_t)n;
    cur->left = n == 0 || last == INT64_MAX ? 0 : cur->left - (int64_t)n;
    cur->next = last + 1;
    return (int)n;
}

int ss_query_step_pages(ss_query *q, int64_t run_id, int64_t attempt,
                        ss_buf *out, char *err, size_t errlen)
{
    /* One attempt for every page, even if another begins meanwhile. */
    int rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_query_range page = {attempt, 0, -1, SS_QUERY_MAX_STEPS};
    ss_buf_puts(out, "[");
    for (int i = 0;; i++) {
        ss_steps s;
        rc = load_steps(q, run_id, &page, &s, err, errlen);
        if (rc != 0)
            return rc;
        size_t n = s.n_steps;
        int64_t last = n ? s.steps[n - 1].step : INT64_MAX;
        if (n || i == 0) {
            if (i)
                ss_buf_puts(out, ",");
            steps_document(out, &s);
        }
        ss_steps_free(&s);
        if (out->oom || n < (size_t)page.limit || last == INT64_MAX)
            break;
        page.from = last + 1;
    }
    ss_buf_puts(out, "]");
    return finish(out, err, errlen);
}

/* ---- heatmap ---- */

static int cmp_step(const void *key, const void *elem)
{
    int64_t x = *(const int64_t *)key, y = *(const int64_t *)elem;
    return (x > y) - (x < y);
}

#define HEAT_NOMEM (-1000) /* fill_heatmap ran out of memory */
/* /heatmap's matrices (step time, lateness, the phases) share
 * SS_QUERY_MAX_CELLS numbers (8 MB of matrices, a document of a few MB) */
#define HEAT_MATRICES_SHARE (2 + SS_QUERY_HEAT_PHASES)

/* The heat map's matrices: step_ns of rank k at STEPS[i] in
 * H->step[k * N_STEPS + i], its arrival at the step's first sync point
 * (ns after its step began) in H->arrive, and the self time of each of the
 * first SS_QUERY_HEAT_PHASES phase names in H->phase[p]; SS_MISSING where
 * no row is kept or the rank did not report it. */
typedef struct {
    int64_t *step, *arrive;
    char *phase_name[SS_QUERY_HEAT_PHASES];
    int64_t *phase[SS_QUERY_HEAT_PHASES];
    size_t n_phases;
} heat_matrices;

static void heat_free(heat_matrices *h)
{
    free(h->step);
    free(h->arrive);
    for (size_t p = 0; p < h->n_phases; p++) {
        free(h->phase_name[p]);
        free(h->phase[p]);
    }
}

static int64_t *missing_matrix(size_t cells)
{
    int64_t *m = malloc((cells ? cells : 1) * sizeof *m);
    for (size_t i = 0; m && i < cells; i++)
        m[i] = SS_MISSING;
    return m;
}

/* The matrix of phase NAME, added when there is room; NULL when there is
 * none (more than SS_QUERY_HEAT_PHASES names) or no memory (*OOM set). */
static int64_t *heat_phase(heat_matrices *h, const char *name, size_t cells,
                           int *oom)
{
    for (size_t p = 0; p < h->n_phases; p++)
        if (strcmp(h->phase_name[p], name) == 0)
            return h->phase[p];
    if (h->n_phases == SS_QUERY_HEAT_PHASES)
        return NULL;
    char *copy = strdup(name);
    int64_t *m = copy ? missing_matrix(cells) : NULL;
    if (!m) {
        free(copy);
        *oom = 1;
        return NULL;
    }
    h->phase_name[h->n_phases] = copy;
    h->phase[h->n_phases++] = m;
    return m;
}

static int fill_heatmap(ss_query *q, int64_t run_id, int64_t attempt,
                        const int64_t *steps, size_t n_steps, int64_t world,
                        heat_matrices *h)
{
    ss_rank_step_query rq = {run_id, attempt, steps[0], steps[n_steps - 1],
                             SS_RANK_STEPS_PHASES | SS_RANK_STEPS_SYNCS, 0};
    ss_rank_steps *cur = NULL;
    int rc = ss_reader_rank_steps(q->reader, &rq, &cur);
    if (rc != 0)
        return rc;
    size_t cells = (size_t)world * n_steps;
    int oom = 0;
    const ss_rank_step_row *row;
    while (!oom && (rc = ss_rank_steps_next(cur, &row)) == 1) {
        const int64_t *at = bsearch(&row->step, steps, n_steps, sizeof *steps,
                                    cmp_step);
        if (!at || row->rank < 0 || row->rank >= world)
            continue;
        size_t cell = (size_t)row->rank * n_steps + (size_t)(at - steps);
        h->step[cell] = row->step_ns;
        int64_t first = SS_MISSING;
        for (size_t y = 0; y < row->n_syncs; y++)
            if (first == SS_MISSING || row->syncs[y].at_ns < first)
                first = row->syncs[y].at_ns;
        h->arrive[cell] = first;
        for (size_t p = 0; p < row->n_phases; p++) {
            const ss_rank_phase *ph = &row->phases[p];
            const char *name = ss_rank_steps_name(cur, ph->name);
            int64_t *m = name ? heat_phase(h, name, cells, &oom) : NULL;
            if (m)
                m[cell] = ph->self_ns != SS_MISSING ? ph->self_ns
                                                    : ph->total_ns;
        }
    }
    ss_rank_steps_close(cur);
    if (oom)
        return HEAT_NOMEM;
    return rc < 0 ? rc : 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Turns H->arrive into lateness: each rank's arrival less the lower median
 * of the arrivals of that step's ranks (SS_MISSING stays). */
static int heat_lateness(heat_matrices *h, int64_t world, size_t n_steps)
{
    int64_t *col = malloc((world ? (size_t)world : 1) * sizeof *col);
    if (!col)
        return HEAT_NOMEM;
    for (size_t i = 0; i < n_steps; i++) {
        size_t n = 0;
        for (int64_t k = 0; k < world; k++)
            if (h->arrive[(size_t)k * n_steps + i] != SS_MISSING)
                col[n++] = h->arrive[(size_t)k * n_steps + i];
        if (!n)
            continue;
        qsort(col, n, sizeof *col, cmp_i64);
        int64_t med = col[(n - 1) / 2];
        for (int64_t k = 0; k < world; k++)
            if (h->arrive[(size_t)k * n_steps + i] != SS_MISSING)
                h->arrive[(size_t)k * n_steps + i] -= med;
    }
    free(col);
    return 0;
}

/* The kept steps of RG's window for a per-rank matrix (heat map, host
 * series): the attempt, the world size and the steps, with the window's
 * limit lowered so that ranks x steps stays within SS_QUERY_MAX_CELLS.
 * Returns 0 or an SS_READ_* code; free *STEPS with free(). */
static int matrix_steps(ss_query *q, int64_t run_id, const ss_query_range *rg,
                        int64_t *attempt, int64_t *world, int64_t **steps,
                        size_t *n)
{
    int rc = ss_reader_attempt(q->reader, run_id, rg->attempt, attempt, NULL);
    if (rc == 0)
        rc = ss_reader_world_size(q->reader, run_id, world);
    if (rc != 0)
        return rc;
    if (*world == SS_MISSING || *world < 0)
        *world = 0;
    if (*world > SS_READ_MAX_RANKS)
        *world = SS_READ_MAX_RANKS;
    int64_t limit = rg->limit;
    if (*world > 0 && limit * *world > SS_QUERY_MAX_CELLS)
        limit = SS_QUERY_MAX_CELLS / *world > 0 ? SS_QUERY_MAX_CELLS / *world
                                                : 1;
    ss_step_window w = {rg->from, rg->to, limit};
    return ss_reader_rank_step_numbers(q->reader, run_id, *attempt, &w, steps,
                                       n);
}

/* [[...per step...] per rank] of matrix M (WORLD x N, ns) in ms. */
static void matrix_rows(ss_buf *out, const int64_t *m, int64_t world,
                        size_t n)
{
    ss_buf_puts(out, "[");
    for (int64_t k = 0; k < world; k++) {
        ss_buf_puts(out, k ? ",[" : "[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                ss_buf_puts(out, ",");
            ss_buf_json_ms(out, m[(size_t)k * n + i]);
        }
        ss_buf_puts(out, "]");
    }
    ss_buf_puts(out, "]");
}

/* "KEY":[[...per step...] per rank] of matrix M (WORLD x N, ns) in ms. */
static void matrix_ms(ss_buf *out, const char *key, const int64_t *m,
                      int64_t world, size_t n)
{
    ss_buf_printf(out, "\"%s\":", key);
    matrix_rows(out, m, world, n);
}

/* {"ranks":[..],"steps":[..], */
static void matrix_axes(ss_buf *out, int64_t world, const int64_t *steps,
                        size_t n)
{
    ss_buf_puts(out, "{\"ranks\":[");
    for (int64_t k = 0; k < world; k++)
        ss_buf_printf(out, k ? ",%" PRId64 : "%" PRId64, k);
    ss_buf_puts(out, "],\"steps\":[");
    for (size_t i = 0; i < n; i++)
        ss_buf_printf(out, i ? ",%" PRId64 : "%" PRId64, steps[i]);
    ss_buf_puts(out, "],");
}

int ss_query_heatmap(ss_query *q, int64_t run_id, const ss_query_range *rg,
                     ss_buf *out, char *err, size_t errlen)
{
    int64_t attempt, world;
    int64_t *steps = NULL;
    size_t n = 0;
    /* the step times, the lateness and the phases share the cell budget */
    ss_query_range lowered = *rg;
    int rc = ss_reader_world_size(q->reader, run_id, &world);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    if (world > 0 &&
        lowered.limit * world > SS_QUERY_MAX_CELLS / HEAT_MATRICES_SHARE)
        lowered.limit = SS_QUERY_MAX_CELLS / HEAT_MATRICES_SHARE / world > 0
                            ? SS_QUERY_MAX_CELLS / HEAT_MATRICES_SHARE / world
                            : 1;
    rc = matrix_steps(q, run_id, &lowered, &attempt, &world, &steps, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    size_t cells = (size_t)world * n;
    heat_matrices h = {0};
    h.step = missing_matrix(cells);
    h.arrive = missing_matrix(cells);
    if (!h.step || !h.arrive) {
        heat_free(&h);
        free(steps);
        return oom(err, errlen);
    }
    if (n > 0)
        rc = fill_heatmap(q, run_id, attempt, steps, n, world, &h);
    if (rc == 0)
        rc = heat_lateness(&h, world, n);
    if (rc == HEAT_NOMEM) {
        heat_free(&h);
        free(steps);
        return oom(err, errlen);
    }
    if (rc == 0) {
        matrix_axes(out, world, steps, n);
        matrix_ms(out, "step_ms", h.step, world, n);
        ss_buf_puts(out, ",");
        matrix_ms(out, "late_ms", h.arrive, world, n);
        ss_buf_puts(out, ",\"phase_self_ms\":{");
        for (size_t p = 0; p < h.n_phases; p++) {
            if (p)
                ss_buf_puts(out, ",");
            ss_buf_json_str(out, h.phase_name[p]);
            ss_buf_puts(out, ":");
            matrix_rows(out, h.phase[p], world, n);
        }
        ss_buf_puts(out, "}}");
    }
    heat_free(&h);
    free(steps);
    return rc != 0 ? failed(q, rc, err, errlen) : finish(out, err, errlen);
}

/* ---- host evidence ---- */

enum { HOST_SERIES = 5 }; /* runq, stopped, cpu, throttled, GPU slowed */

/* The host series of the kept rank-steps at STEPS: series s of rank k at
 * STEPS[i] in M[(s * WORLD + k) * N_STEPS + i]. */
static int fill_host(ss_query *q, int64_t run_id, int64_t attempt,
                     const int64_t *steps, size_t n_steps, int64_t world,
                     int64_t *m)
{
    ss_rank_step_query rq = {run_id, attempt, steps[0], steps[n_steps - 1],
                             SS_RANK_STEPS_HOST, 0};
    ss_rank_steps *cur = NULL;
    int rc = ss_reader_rank_steps(q->reader, &rq, &cur);
    if (rc != 0)
        return rc;
    const ss_rank_step_row *row;
    while ((rc = ss_rank_steps_next(cur, &row)) == 1) {
        const int64_t *at = bsearch(&row->step, steps, n_steps, sizeof *steps,
                                    cmp_step);
        if (!at || !row->host || row->rank < 0 || row->rank >= world)
            continue;
        const int64_t v[HOST_SERIES] = {row->host->runq_ns,
                                        row->host->stopped_ns,
                                        row->host->cpu_ns,
                                        row->host->throttled_ns,
                                        row->host->gpu.present
                                            ? row->host->gpu.slowed_ns
                                            : SS_MISSING};
        for (int s = 0; s < HOST_SERIES; s++)
            m[((size_t)s * (size_t)world + (size_t)row->rank) * n_steps +
              (size_t)(at - steps)] = v[s];
    }
    ss_rank_steps_close(cur);
    return rc < 0 ? rc : 0;
}

int ss_query_host(ss_query *q, int64_t run_id, const ss_query_range *rg,
                  ss_buf *out, char *err, size_t errlen)
{
    int64_t attempt, world;
    int64_t *steps = NULL;
    size_t n = 0;
    int rc = matrix_steps(q, run_id, rg, &attempt, &world, &steps, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    size_t cells = (size_t)world * n * HOST_SERIES;
    int64_t *m = malloc((cells ? cells : 1) * sizeof *m);
    if (!m) {
        free(steps);
        return oom(err, errlen);
    }
    for (size_t i = 0; i < cells; i++)
        m[i] = SS_MISSING;
    if (n > 0)
        rc = fill_host(q, run_id, attempt, steps, n, world, m);
    if (rc == 0) {
        static const char *const keys[HOST_SERIES] = {
            "runq_ms", "stopped_ms", "cpu_ms", "throttled_ms",
            "gpu_slowed_ms"};
        matrix_axes(out, world, steps, n);
        for (int s = 0; s < HOST_SERIES; s++) {
            if (s)
                ss_buf_puts(out, ",");
            matrix_ms(out, keys[s], m + (size_t)s * (size_t)world * n, world,
                      n);
        }
        ss_buf_puts(out, "}");
    }
    free(m);
    free(steps);
    return rc != 0 ? failed(q, rc, err, errlen) : finish(out, err, errlen);
}

/* ---- ranks ---- */

/* Seconds with 3 decimals; null when negative (unknown). */
static void json_secs(ss_buf *b, double s)
{
    if (s < 0)
        ss_buf_puts(b, "null");
    else
        ss_buf_printf(b, "%.3f", s);
}

/* One element of "ranks": the stored row X, overridden by what LIVE (may
 * be NULL) knows now. */
static void rank_object(ss_buf *out, const ss_rank_row *x,
                        const ss_live_rank_info *li)
{
    const char *state = x->state, *host = x->host;
    int64_t pid = x->pid, code = x->exit_code, sig = x->term_signal;
    int64_t last = x->last_step, dev = x->dropped_events,
            drec = x->dropped_records, cur = SS_MISSING;
    if (li) {
        if (strcmp(li->state, "starting") != 0 || !state)
            state = li->state;
        if (li->host[0])
            host = li->host;
        if (li->pid >= 0)
            pid = li->pid;
        if (li->last_step >= 0 && (last == SS_MISSING || li->last_step > last))
            last = li->last_step;
        if (li->current_step >= 0)
            cur = li->current_step;
        if (li->term_signal >= 0) {
            code = li->exit_code >= 0 ? li->exit_code : SS_MISSING;
            sig = li->term_signal;
        }
        if (li->dropped_events >= 0)
            dev = li->dropped_events;
        if (li->dropped_records >= 0)
            drec = li->dropped_records;
    }
    int in_phase = li && li->phase[0];
    ss_buf_printf(out, "{\"rank\":%" PRId64 ",\"state\":", x->rank);
    ss_buf_json_str(out, state);
    ss_buf_puts(out, ",\"host\":");
    ss_buf_json_str(out, host);
    ss_buf_puts(out, ",\"pid\":");
    ss_buf_json_int(out, pid);
    ss_buf_puts(out, ",\"last_step\":");
    ss_buf_json_int(out, last);
    ss_buf_puts(out, ",\"current_step\":");
    ss_buf_json_int(out, cur);
    ss_buf_puts(out, ",\"phase\":");
    ss_buf_json_str(out, in_phase ? li->phase : NULL);
    ss_buf_puts(out, ",\"phase_s\":");
    json_secs(out, in_phase ? li->phase_s : -1);
    ss_buf_puts(out, ",\"last_heard_s\":");
    json_secs(out, li ? li->last_heard_s : -1);
    ss_buf_puts(out, ",\"exit_code\":");
    ss_buf_json_int(out, code);
    ss_buf_puts(out, ",\"signal\":");
    ss_buf_json_int(out, sig == 0 ? SS_MISSING : sig);
    ss_buf_puts(out, ",\"median_step_ms\":");
    ss_buf_json_ms(out, x->median_step_ns);
    ss_buf_puts(out, ",\"max_rss_bytes\":");
    ss_buf_json_int(out, x->max_rss_bytes);
    ss_buf_puts(out, ",\"dropped_events\":");
    ss_buf_json_int(out, dev);
    ss_buf_puts(out, ",\"dropped_records\":");
    ss_buf_json_int(out, drec);
    ss_buf_puts(out, "}");
}

int ss_query_ranks(ss_query *q, int64_t run_id, int64_t attempt,
                   ss_live *live, ss_buf *out, char *err, size_t errlen)
{
    int rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    /* The medians cover the latest finalized steps; none without any. */
    ss_step_window latest = {-1, -1, 1};
    ss_steps s;
    rc = ss_reader_steps(q->reader, run_id, attempt, &latest, 0, &s);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    int64_t last = s.n_steps ? s.steps[0].step : SS_MISSING;
    ss_steps_free(&s);
    int64_t since = last == SS_MISSING ? 0
                                       : last - SS_QUERY_RANK_MEDIAN_STEPS + 1;
    ss_rank_row *rows = NULL;
    size_t n = 0;
    rc = ss_reader_ranks(q->reader, run_id, attempt, since < 0 ? 0 : since, 0,
                         &rows, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    int is_live = live_is(live, run_id);
    ss_buf_puts(out, "{\"ranks\":[");
    for (size_t i = 0; i < n; i++) {
        ss_live_rank_info li;
        int have = is_live &&
                   ss_live_rank_get(live, (uint32_t)rows[i].rank, &li) == 0;
        if (last == SS_MISSING)
            rows[i].median_step_ns = SS_MISSING;
        if (i)
            ss_buf_puts(out, ",");
        rank_object(out, &rows[i], have ? &li : NULL);
    }
    ss_buf_puts(out, "]}");
    ss_rank_rows_free(rows, n);
    return finish(out, err, errlen);
}

/* ---- nodes ---- */

void ss_query_node_object(ss_buf *out, const ss_node_row *n)
{
    ss_buf_printf(out, "{\"node\":%" PRId64 ",\"host\":", n->node_rank);
    ss_buf_json_str(out, n->host);
    ss_buf_puts(out, ",\"addr\":");
    ss_buf_json_str(out, n->addr);
    ss_buf_printf(out, ",\"first_rank\":%" PRId64 ",\"nranks\":%" PRId64
                  ",\"state\":", n->first_rank, n->nranks);
    ss_buf_json_str(out, n->state);
    ss_buf_puts(out, ",\"joined_at\":");
    ss_buf_json_time(out, n->joined_at);
    ss_buf_puts(out, ",\"ended_at\":");
    ss_buf_json_time(out, n->ended_at);
    ss_buf_puts(out, ",\"clock_offset_ms\":");
    ss_buf_json_ms(out, n->clock_offset_ns);
    ss_buf_puts(out, ",\"clock_bound_ms\":");
    ss_buf_json_ms(out, n->clock_bound_ns);
    ss_buf_puts(out, ",\"lost_reason\":");
    ss_buf_json_str(out, n->lost_reason);
    ss_buf_puts(out, ",\"lost_at_step\":");
    ss_buf_json_int(out, n->lost_at_step);
    ss_buf_puts(out, "}");
}

int ss_query_nodes(ss_query *q, int64_t run_id, int64_t attempt,
                   ss_buf *out, char *err, size_t errlen)
{
    int rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    ss_node_row *rows = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = ss_reader_nodes(q->reader, run_id, attempt, &rows, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_printf(out, "{\"agents\":%zu,\"nodes\":[", n);
    for (size_t i = 0; i < n; i++) {
        if (i)
            ss_buf_puts(out, ",");
        ss_query_node_object(out, &rows[i]);
    }
    ss_buf_puts(out, "]}");
    ss_node_rows_free(rows, n);
    return finish(out, err, errlen);
}

/* ---- findings and events ---- */

/* The attempt's stored stacks snapshot (one taken for a hang first,
 * ss_reader_stack_snapshot) as {"trigger","taken_at","finding_id",
 * "answered","ranks_total","merged_text"}, or null when there is none or
 * its document is unreadable: what a person needs beside the findings,
 * not the whole document (debug.md). */
static int stored_stacks(ss_query *q, int64_t run_id, int64_t attempt,
                         ss_buf *out)
{
    ss_stack_snapshot_row row = {0};
    int rc = ss_reader_stack_snapshot(q->reader, run_id, attempt, &row);
    if (rc < 0)
        return rc;
    cJSON *doc = rc == 1 ? cJSON_Parse(row.json) : NULL;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(doc, "merged_text");
    if (!cJSON_IsString(text)) {
        ss_buf_puts(out, "null");
    } else {
        const cJSON *ans = cJSON_GetObjectItemCaseSensitive(doc, "answered");
        const cJSON *tot = cJSON_GetObjectItemCaseSensitive(doc,
                                                            "ranks_total");
        ss_buf_puts(out, "{\"trigger\":");
        ss_buf_json_str(out, row.trigger ? row.trigger : "");
        ss_buf_puts(out, ",\"taken_at\":");
        ss_buf_json_time(out, row.taken_at);
        ss_buf_puts(out, ",\"finding_id\":");
        ss_buf_json_int(out, row.finding_id);
        ss_buf_puts(out, ",\"answered\":");
        ss_buf_json_int(out, cJSON_IsNumber(ans) ? (int64_t)ans->valuedouble
                                                 : SS_MISSING);
        ss_buf_puts(out, ",\"ranks_total\":");
        ss_buf_json_int(out, cJSON_IsNumber(tot) ? (int64_t)tot->valuedouble
                                                 : SS_MISSING);
        ss_buf_puts(out, ",\"merged_text\":");
        ss_buf_json_str(out, text->valuestring);
        ss_buf_puts(out, "}");
    }
    cJSON_Delete(doc);
    ss_stack_snapshot_row_clear(&row);
    return 0;
}

int ss_query_findings(ss_query *q, int64_t run_id, int64_t attempt,
                      ss_buf *out, char *err, size_t errlen)
{
    int rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    ss_finding_row *rows = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = ss_reader_findings(q->reader, run_id, attempt, -1, -1, &rows,
                                &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, "{\"findings\":[");
    for (size_t i = 0; i < n; i++) {
        const ss_finding_row *x = &rows[i];
        ss_obj_finding_fields f = {
            .id = x->id, .kind = x->kind, .severity = x->severity,
            .ranks = x->ranks, .n_ranks = x->n_ranks, .phase = x->phase,
            .first_step = x->first_step, .last_step = x->last_step,
            .evidence = x->evidence, .message = x->message};
        if (i)
            ss_buf_puts(out, ",");
        ss_obj_finding_stored(out, &f);
    }
    ss_buf_puts(out, "],\"stacks\":");
    ss_finding_rows_free(rows, n);
    rc = stored_stacks(q, run_id, attempt, out);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, "}");
    return finish(out, err, errlen);
}

int ss_query_goodput(ss_query *q, int64_t run_id, ss_wall_ns now,
                     int metrics, ss_buf *out, char *err, size_t errlen)
{
    ss_goodput g;
    int rc = ss_goodput_load(q->reader, run_id, now, &g);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    if (metrics) {
        ss_goodput_metrics(out, &g);
    } else {
        ss_buf_puts(out, "{\"goodput\":");
        ss_goodput_json(out, &g);
        ss_buf_puts(out, "}");
    }
    ss_goodput_free(&g);
    return finish(out, err, errlen);
}

int ss_query_events(ss_query *q, int64_t run_id, int64_t after, int64_t limit,
                    ss_buf *out, char *err, size_t errlen)
{
    ss_event_query eq = {.attempt = -1, .after_id = after, .limit = limit};
    ss_event_row *rows = NULL;
    size_t n = 0;
    int rc = ss_reader_events(q->reader, run_id, &eq, &rows, &n, NULL);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, "{\"events\":[");
    for (size_t i = 0; i < n; i++) {
        const ss_event_row *x = &rows[i];
        ss_buf_printf(out, "%s{\"id\":%" PRId64 ",\"at\":", i ? "," : "",
                      x->id);
        ss_buf_json_time(out, x->at);
        ss_buf_puts(out, ",\"kind\":");
        ss_buf_json_str(out, x->kind);
        ss_buf_puts(out, ",\"rank\":");
        ss_buf_json_int(out, x->rank);
        ss_buf_puts(out, ",\"message\":");
        ss_buf_json_str(out, x->message);
        ss_buf_puts(out, "}");
    }
    ss_buf_puts(out, "]}");
    ss_event_rows_free(rows, n);
    return finish(out, err, errlen);
}

/* ---- history (the judgement of api/guard_judge.c) ---- */

static void json_num(ss_buf *b, double v)
{
    if (isfinite(v))
        ss_buf_printf(b, "%.6g", v);
    else
        ss_buf_puts(b, "null");
}

/* The id of the latest run named NAME into *RUN_ID; SS_QUERY_NOT_FOUND
 * when there is none.  By name alone, so that a name made of digits is
 * not read as a run id. */
static int latest_named(ss_query *q, const char *name, int64_t *run_id,
                        char *err, size_t errlen)
{
    ss_run_row *rows = NULL;
    size_t n = 0;
    int rc = ss_reader_runs(q->reader, &rows, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    *run_id = 0;
    for (size_t i = n; i-- > 0 && !*run_id;)
        if (rows[i].name && strcmp(rows[i].name, name) == 0)
            *run_id = rows[i].id;
    ss_run_rows_free(rows, n);
    if (*run_id)
        return 0;
    snprintf(err, errlen, "no run named '%s'", name);
    return SS_QUERY_NOT_FOUND;
}

/* One metric of the history document: R's history and verdict, its
 * values aligned with RUNS[0..N_RUNS). */
static void history_metric(ss_buf *out, const guard_result *r,
                           const guard_run *const *runs, size_t n_runs)
{
    const guard_series *s = r->run;
    ss_buf_puts(out, "{\"name\":");
    ss_buf_json_str(out, s->name);
    ss_buf_puts(out, ",\"unit\":");
    ss_buf_json_str(out, s->unit);
    ss_buf_printf(out, ",\"worse\":\"%s\",\"values\":[",
                  s->direction == GUARD_HIGHER_IS_WORSE   ? "higher"
                  : s->direction == GUARD_LOWER_IS_WORSE ? "lower"
                                                         : "either");
    for (size_t i = 0; i < n_runs; i++) {
        const guard_series *v = guard_find_series(runs[i], s->name);
        if (i)
            ss_buf_puts(out, ",");
        json_num(out, v ? v->value : NAN);
    }
    ss_buf_puts(out, "],\"change_points\":[");
    for (size_t k = 0; k < r->n_change; k++)
        ss_buf_printf(out, "%s%" PRId64, k ? "," : "", r->change_runs[k]);
    ss_buf_printf(out, "],\"verdict\":\"%s\"", guard_verdict_word(r->verdict));
    int judged = r->verdict != GUARD_NO_DATA && r->verdict != GUARD_SHOWN;
    ss_buf_puts(out, ",\"baseline\":");
    json_num(out, judged ? r->baseline : NAN);
    ss_buf_puts(out, ",\"relative\":");
    json_num(out, judged ? r->rel : NAN);
    ss_buf_puts(out, ",\"relative_low\":");
    json_num(out, judged ? r->rel_lo : NAN);
    ss_buf_puts(out, ",\"relative_high\":");
    json_num(out, judged ? r->rel_hi : NAN);
    ss_buf_puts(out, ",\"p\":");
    json_num(out, judged ? r->t.p : NAN);
    ss_buf_puts(out, ",\"since_run\":");
    ss_buf_json_int(out, r->since_run ? r->since_run : SS_MISSING);
    ss_buf_puts(out, "}");
}

/* The document from judgement J (metrics wanted: WANT, or all). */
static int history_document(ss_buf *out, guard_judgement *j,
                            const guard_settings *st, char **want,
                            size_t n_want, char *err, size_t errlen)
{
    const guard_run *cand = &j->cand;
    const guard_set *g = &j->set;
    const guard_report *rep = &j->rep;
    size_t n_runs = g->n_hist + 1;
    const guard_run **runs = malloc(n_runs * sizeof *runs);
    if (!runs)
        return oom(err, errlen);
    memcpy(runs, g->hist, g->n_hist * sizeof *runs);
    runs[g->n_hist] = cand;

    ss_buf_puts(out, "{\"name\":");
    ss_buf_json_str(out, cand->row.name);
    ss_buf_printf(out, ",\"run_id\":%" PRId64 ",\"verdict\":\"%s\","
                  "\"reason\":", cand->row.id, guard_status_word(rep->status));
    if (rep->status == SS_GUARD_CANNOT_JUDGE)
        ss_buf_json_str(out, rep->reason);
    else
        ss_buf_puts(out, "null");
    ss_buf_puts(out, ",\"baseline\":[");
    for (size_t i = 0; i < rep->n_baseline; i++)
        ss_buf_printf(out, "%s%" PRId64, i ? "," : "", rep->baseline_ids[i]);
    ss_buf_puts(out, "],\"left_out\":");
    ss_buf_json_str(out, rep->excluded);
    ss_buf_puts(out, ",\"runs\":[");
    for (size_t i = 0; i < n_runs; i++) {
        const ss_run_row *row = &runs[i]->row;
        ss_buf_printf(out, "%s{\"id\":%" PRId64 ",\"started_at\":",
                      i ? "," : "", row->id);
        ss_buf_json_time(out, row->started_at);
        ss_buf_puts(out, ",\"status\":");
        ss_buf_json_str(out, row->status);
        ss_buf_puts(out, ",\"steps\":");
        ss_buf_json_int(out, row->steps);
        ss_buf_puts(out, "}");
    }
    ss_buf_puts(out, "],\"metrics\":[");
    int rc = 0, first = 1;
    for (size_t i = 0; rc == 0 && i < cand->n_m; i++) {
        const guard_series *s = &cand->m[i];
        if (!s->tested || !guard_wanted_metric(s->name, want, n_want))
            continue;
        /* The judgement's result, or (when it could not judge) the
         * history and change points alone. */
        const guard_result *r = NULL;
        for (size_t k = 0; k < rep->n_results && !r; k++)
            if (rep->results[k].run == s)
                r = &rep->results[k];
        guard_result own = {.run = s, .verdict = GUARD_NO_DATA};
        if (!r) {
            rc = guard_history_of(&own, s->name, g->hist, g->n_hist, cand, st);
            r = &own;
        }
        if (rc == 0 && r->n_history > 0) {
            if (!first)
                ss_buf_puts(out, ",");
            first = 0;
            history_metric(out, r, runs, n_runs);
        }
        guard_result_free(&own);
    }
    ss_buf_puts(out, "]}");
    free(runs);
    return rc ? oom(err, errlen) : finish(out, err, errlen);
}

int ss_query_history(ss_query *q, const ss_query_history_args *a,
                     ss_buf *out, char *err, size_t errlen)
{
    int64_t run_id = a->run_id;
    if (run_id <= 0) {
        int rc = latest_named(q, a->name, &run_id, err, errlen);
        if (rc != 0)
            return rc;
    }
    char selector[32];
    snprintf(selector, sizeof selector, "%" PRId64, run_id);
    char *want[1] = {(char *)a->metric};
    guard_request rq = {selector, NULL, want, a->metric ? 1 : 0};
    guard_settings st;
    guard_settings_defaults(&st);
    st.history = (size_t)a->last;
    guard_judgement j;
    int rc = guard_judge(q->reader, &rq, &st, &j, err, errlen);
    if (rc == 0)
        rc = history_document(out, &j, &st, rq.metrics, rq.n_metrics, err,
                              errlen);
    else
        rc = rc == SS_READ_NOT_FOUND ? SS_QUERY_NOT_FOUND : SS_QUERY_ERROR;
    guard_judgement_free(&j);
    guard_settings_free(&st);
    return rc;
}

/* ---- two runs compared ---- */

int ss_query_diff(ss_query *q, int64_t run_a, int64_t run_b, ss_buf *out,
                  char *err, size_t errlen)
{
    char a_id[32], b_id[32];
    snprintf(a_id, sizeof a_id, "%" PRId64, run_a);
    snprintf(b_id, sizeof b_id, "%" PRId64, run_b);
    ss_diff_side a = {.r = q->reader, .spec = a_id};
    ss_diff_side b = {.r = q->reader, .spec = b_id};
    ss_diff_result res;
    int rc = ss_run_diff(&a, &b, SS_DIFF_SERIES, &res, err, errlen);
    if (rc == 0)
        ss_run_diff_json(out, &a, &b, &res);
    ss_diff_result_free(&res);
    return rc == 0 ? 0 : rc == SS_READ_NOT_FOUND ? SS_QUERY_NOT_FOUND
                                                 : SS_QUERY_ERROR;
}

/* ---- vectors ---- */

void ss_query_values_name_object(ss_buf *out, const ss_values_name_row *v)
{
    ss_buf_puts(out, "{");
    ss_query_values_name_fields(out, v);
    ss_buf_puts(out, "}");
}

void ss_query_values_name_fields(ss_buf *out, const ss_values_name_row *v)
{
    ss_buf_puts(out, "\"name\":");
    ss_buf_json_str(out, v->name);
    ss_buf_puts(out, ",\"ranks\":[");
    for (size_t i = 0; i < v->n_ranks; i++)
        ss_buf_printf(out, i ? ",%" PRId64 : "%" PRId64, v->ranks[i]);
    ss_buf_puts(out, "],\"first_step\":");
    ss_buf_json_int(out, v->first_step);
    ss_buf_puts(out, ",\"last_step\":");
    ss_buf_json_int(out, v->last_step);
    ss_buf_printf(out, ",\"steps\":%" PRId64 ",\"rows\":%" PRId64
                  ",\"max_n\":", v->steps, v->rows);
    ss_buf_json_int(out, v->max_n);
    ss_buf_puts(out, ",\"truncated\":");
    ss_buf_json_int(out, v->truncated);
    ss_buf_puts(out, ",\"labels\":");
    /* written by the store's own JSON writer (a JSON array of strings) */
    ss_buf_puts(out, v->labels_json ? v->labels_json : "null");
}

int ss_query_values(ss_query *q, int64_t run_id, int64_t attempt,
                    ss_buf *out, char *err, size_t errlen)
{
    ss_run_row run;
    int rc = ss_reader_run(q->reader, run_id, &run);
    if (rc == 0)
        rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    ss_values_name_row *rows = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = ss_reader_value_names(q->reader, run_id, attempt, &rows, &n);
    if (rc != 0) {
        ss_run_row_clear(&run);
        return failed(q, rc, err, errlen);
    }
    ss_buf_printf(out, "{\"attempt\":%" PRId64 ",\"dropped_vectors\":",
                  attempt);
    ss_buf_json_int(out, run.dropped_vectors);
    ss_buf_puts(out, ",\"values\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ss_buf_puts(out, ",");
        ss_query_values_name_object(out, &rows[i]);
    }
    ss_buf_puts(out, "]}");
    ss_values_name_rows_free(rows, n);
    ss_run_row_clear(&run);
    return finish(out, err, errlen);
}

int ss_query_value_series(ss_query *q, int64_t run_id,
                          const ss_query_values_args *a, ss_buf *out,
                          char *err, size_t errlen)
{
    int64_t attempt;
    int rc = ss_reader_attempt(q->reader, run_id, a->attempt, &attempt, NULL);
    ss_values_rows v = {0};
    ss_values_query vq = {.run_id = run_id, .attempt = attempt,
                          .name = a->name, .rank = a->rank,
                          .index = a->index, .from = a->from, .to = a->to,
                          .max_cells = a->limit > 0 ? (size_t)a->limit
                                                    : SS_QUERY_DEFAULT_VALUE_CELLS};
    if (rc == 0)
        rc = ss_reader_values(q->reader, &vq, &v);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    int by_rank = a->rank >= 0;
    ss_buf_puts(out, "{\"name\":");
    ss_buf_json_str(out, a->name);
    ss_buf_printf(out, ",\"attempt\":%" PRId64 ",\"%s\":%" PRId64
                  ",\"cells\":%zu,\"more\":%s,\"next_from\":", attempt,
                  by_rank ? "rank" : "index", by_rank ? a->rank : a->index,
                  v.n_data, v.more ? "true" : "false");
    ss_buf_json_int(out, v.more ? v.next_step : SS_MISSING);
    ss_buf_puts(out, ",\"steps\":[");
    for (size_t i = 0; i < v.n_rows;) {
        const ss_values_row *x = &v.rows[i];
        ss_buf_printf(out, "%s{\"step\":%" PRId64, i ? "," : "", x->step);
        if (by_rank) {
            ss_buf_printf(out, ",\"truncated\":%" PRId64 ",\"values\":[",
                          x->truncated);
            for (int64_t k = 0; k < x->n; k++) {
                if (k)
                    ss_buf_puts(out, ",");
                ss_buf_json_value(out, x->v[k]);
            }
            ss_buf_puts(out, "]}");
            i++;
            continue;
        }
        size_t end = i;
        while (end < v.n_rows && v.rows[end].step == x->step)
            end++;
        ss_buf_puts(out, ",\"ranks\":[");
        for (size_t k = i; k < end; k++)
            ss_buf_printf(out, k > i ? ",%" PRId64 : "%" PRId64,
                          v.rows[k].rank);
        ss_buf_puts(out, "],\"values\":[");
        for (size_t k = i; k < end; k++) {
            if (k > i)
                ss_buf_puts(out, ",");
            if (v.rows[k].n)
                ss_buf_json_value(out, v.rows[k].v[0]);
            else
                ss_buf_puts(out, "null");
        }
        ss_buf_puts(out, "]}");
        i = end;
    }
    ss_buf_puts(out, "]}");
    ss_values_rows_free(&v);
    return finish(out, err, errlen);
}

/* The first step of the latest STEPS kept steps of V whose values fit
 * in the default cell cap when read by rank (BY_RANK) or by index. */
static int64_t embed_from(const ss_values_name_row *v, int64_t steps,
                          int by_rank)
{
    int64_t width = by_rank ? v->max_n : (int64_t)v->n_ranks;
    int64_t fit = SS_QUERY_DEFAULT_VALUE_CELLS / (width > 0 ? width : 1);
    int64_t from = v->last_step - (steps < fit ? steps : fit) + 1;
    return from > v->first_step ? from : v->first_step;
}

int ss_query_values_embed(ss_query *q, int64_t run_id, int64_t attempt,
                          size_t max_names, int64_t steps, ss_buf *out,
                          char *err, size_t errlen)
{
    ss_buf_puts(out, "{\"list\":");
    int rc = ss_query_values(q, run_id, attempt, out, err, errlen);
    if (rc != 0)
        return rc;
    ss_values_name_row *rows = NULL;
    size_t n = 0;
    rc = ss_reader_attempt(q->reader, run_id, attempt, &attempt, NULL);
    if (rc == 0)
        rc = ss_reader_value_names(q->reader, run_id, attempt, &rows, &n);
    if (rc != 0)
        return failed(q, rc, err, errlen);
    ss_buf_puts(out, ",\"series\":[");
    for (size_t i = 0; rc == 0 && i < n && i < max_names; i++) {
        const ss_values_name_row *v = &rows[i];
        ss_query_values_args a = {attempt, v->name,
                                  v->n_ranks ? v->ranks[0] : 0, -1,
                                  embed_from(v, steps, 1), v->last_step,
                                  SS_QUERY_DEFAULT_VALUE_CELLS};
        ss_buf_puts(out, i ? "," : "");
        rc = ss_query_value_series(q, run_id, &a, out, err, errlen);
        a.rank = -1;
        a.index = 0;
        a.from = embed_from(v, steps, 0);
        if (rc == 0) {
            ss_buf_puts(out, ",");
            rc = ss_query_value_series(q, run_id, &a, out, err, errlen);
        }
    }
    ss_buf_puts(out, "]}");
    ss_values_name_rows_free(rows, n);
    return rc != 0 ? rc : finish(out, err, errlen);
}
