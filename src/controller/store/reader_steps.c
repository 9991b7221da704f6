/*
 * reader_steps.c - the loaders of steps and rank steps (reader.h): the
 * finalized steps with their phases and syncs, the rank-step cursor, a
 * rank's host evidence summed over its steps, the metrics' last values,
 * and the small counts and bounds the views ask for.
 *
 * The JSON objects of rank_steps rows (phases, syncs, metrics) are parsed
 * with cJSON into the cursor's reusable arrays, names interned into a
 * table that lives as long as the cursor.  A window of steps given as
 * "the latest N" is read newest first and returned oldest first.
 */
#include "reader.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader_internal.h"
#include "stats.h"

/* SS_READ_ERROR for an aggregate query that returned no row. */
static int no_row(ss_reader *r)
{
    return ss__rd_fail(r, SS_READ_ERROR, "%s: cannot read the store: %s",
                       r->path, sqlite3_errmsg(r->db));
}

/* The bounds of step window W as parameters ?3 (from), ?4 (to) and ?5
 * (limit) after RUN_ID and ATTEMPT; *DESCENDING when W asks for its
 * latest LIMIT steps (read newest first). */
static void window_args(const ss_step_window *w, int64_t run_id,
                        int64_t attempt, int64_t args[5], int *descending)
{
    int64_t from = w ? w->from : -1, to = w ? w->to : -1;
    int64_t limit = w && w->limit > 0 ? w->limit : -1;
    *descending = from < 0 && limit > 0;
    args[0] = run_id;
    args[1] = attempt;
    args[2] = from < 0 ? INT64_MIN : from;
    args[3] = to < 0 ? INT64_MAX : to;
    args[4] = limit;
}

/* ---- steps ---- */

void ss_steps_free(ss_steps *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_steps; i++)
        free(s->steps[i].missing_ranks);
    free(s->steps);
    free(s->phases);
    free(s->syncs);
    for (size_t i = 0; i < s->n_names; i++)
        free(s->names[i]);
    free(s->names);
    memset(s, 0, sizeof *s);
}

/* The steps being loaded, and the capacities of its arrays. */
typedef struct {
    ss_steps *s;
    size_t cap;      /* of the array being filled: steps, phases or syncs */
    size_t name_cap; /* of s->names */
    size_t at, hint; /* parts: the step they belong to, the name hint */
} steps_load;

static int step_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    steps_load *l = arg;
    ss_steps *s = l->s;
    if (ss__rd_grow((void **)&s->steps, sizeof *s->steps, s->n_steps,
                    &l->cap))
        return ss__rd_oom(r);
    ss_step_row *x = &s->steps[s->n_steps];
    memset(x, 0, sizeof *x);
    x->step = sqlite3_column_int64(st, 0);
    x->finalized_at = ss__rd_col_i64(st, 1);
    x->world_size = ss__rd_col_i64(st, 2);
    x->n_present = ss__rd_col_i64(st, 3);
    x->n_missing = ss__rd_col_i64(st, 4);
    if (ss__rd_parse_csv((const char *)sqlite3_column_text(st, 5),
                         &x->missing_ranks, &x->n_missing_ranks) != 0)
        return ss__rd_oom(r);
    int64_t *v[] = {&x->step_n, &x->step_min, &x->step_median,
                    &x->step_p90, &x->step_max, &x->step_worst_rank,
                    &x->rss_median, &x->rss_max, &x->rss_worst_rank,
                    &x->device_median, &x->device_max,
                    &x->device_worst_rank};
    for (int i = 0; i < 12; i++)
        *v[i] = ss__rd_col_i64(st, 6 + i);
    s->n_steps++;
    return 0;
}

/* The step rows of WINDOW into L's steps, ascending. */
static int load_step_rows(ss_reader *r, const int64_t args2[2],
                          const ss_step_window *w, steps_load *l)
{
    int64_t args[5];
    int descending;
    window_args(w, args2[0], args2[1], args, &descending);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT step, finalized_at, world_size, n_present, n_missing, "
             "CASE WHEN json_valid(missing_ranks) THEN (SELECT "
             "group_concat(value, ',') FROM json_each(steps.missing_ranks) "
             "WHERE type = 'integer') END, step_n, step_min, step_median, "
             "step_p90, step_max, step_worst_rank, rss_median, rss_max, "
             "rss_worst_rank, device_median, device_max, device_worst_rank "
             "FROM steps WHERE run_id = ?1 AND attempt = ?2 AND step >= ?3 "
             "AND step <= ?4 ORDER BY step %s LIMIT ?5",
             descending ? "DESC" : "ASC");
    int rc = ss__rd_each(r, &(ss__rd_query){sql, args, 5, NULL, 0}, step_row,
                         l);
    if (rc == 0 && descending) /* read newest first: put in ascending order */
        ss__rd_reverse(l->s->steps, sizeof *l->s->steps, l->s->n_steps);
    return rc;
}

/* A step_phases (SYNCS 0) or step_syncs row, attached to its step. */
static int step_part_row(ss_reader *r, sqlite3_stmt *st, void *arg, int syncs)
{
    steps_load *l = arg;
    ss_steps *s = l->s;
    int64_t step = sqlite3_column_int64(st, 0);
    while (l->at < s->n_steps && s->steps[l->at].step < step)
        l->at++;
    if (l->at == s->n_steps)
        return 1;
    if (s->steps[l->at].step != step)
        return 0; /* a step outside the window */
    const char *name = (const char *)sqlite3_column_text(st, 1);
    int64_t idx = ss__rd_intern(&s->names, &s->n_names, &l->name_cap,
                                name ? name : "?", l->hint);
    int full = syncs ? ss__rd_grow((void **)&s->syncs, sizeof *s->syncs,
                                   s->n_syncs, &l->cap)
                     : ss__rd_grow((void **)&s->phases, sizeof *s->phases,
                                   s->n_phases, &l->cap);
    if (idx < 0 || full)
        return ss__rd_oom(r);
    l->hint = (size_t)idx + 1;
    ss_step_row *x = &s->steps[l->at];
    if (syncs) {
        if (x->n_syncs == 0)
            x->sync0 = s->n_syncs;
        x->n_syncs++;
        s->syncs[s->n_syncs++] = (ss_step_sync){
            (uint32_t)idx, sqlite3_column_int64(st, 2),
            ss__rd_col_i64(st, 3), ss__rd_col_i64(st, 4),
            ss__rd_col_i64(st, 5)};
    } else {
        if (x->n_phases == 0)
            x->phase0 = s->n_phases;
        x->n_phases++;
        int64_t self_n = ss__rd_col_i64(st, 8);
        s->phases[s->n_phases++] = (ss_step_phase){
            (uint32_t)idx, sqlite3_column_int64(st, 2),
            ss__rd_col_i64(st, 3), ss__rd_col_i64(st, 4),
            ss__rd_col_i64(st, 5), ss__rd_col_i64(st, 6),
            ss__rd_col_i64(st, 7), self_n == SS_MISSING ? 0 : self_n,
            ss__rd_col_i64(st, 9), ss__rd_col_i64(st, 10),
            ss__rd_col_i64(st, 11), ss__rd_col_i64(st, 12),
            ss__rd_col_i64(st, 13)};
    }
    return 0;
}

static int step_phase_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    return step_part_row(r, st, arg, 0);
}

static int step_sync_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    return step_part_row(r, st, arg, 1);
}

/* The phase (SYNCS == 0) or sync rows of L's steps, attached to them. */
static int load_step_parts(ss_reader *r, const int64_t args2[2], int syncs,
                           steps_load *l)
{
    ss_steps *s = l->s;
    int64_t args[4] = {args2[0], args2[1], s->steps[0].step,
                       s->steps[s->n_steps - 1].step};
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT step, phase, n, min, median, p90, max, worst_rank, "
             "%s FROM step_phases WHERE run_id = ?1 AND attempt = ?2 AND "
             "step BETWEEN ?3 AND ?4 ORDER BY step, phase",
             r->version >= SCHEMA_SELF
                 ? "self_n, self_min, self_median, self_p90, self_max, "
                   "self_worst_rank"
                 : "NULL, NULL, NULL, NULL, NULL, NULL");
    l->cap = l->at = l->hint = 0;
    return ss__rd_each(r, &(ss__rd_query){
                           syncs ? "SELECT step, sync, n, skew_ns, late_ns, "
                                   "worst_rank FROM step_syncs WHERE "
                                   "run_id = ?1 AND attempt = ?2 AND step "
                                   "BETWEEN ?3 AND ?4 ORDER BY step, sync"
                                 : sql,
                           args, 4, NULL, 0},
                       syncs ? step_sync_row : step_phase_row, l);
}

int ss_reader_steps(ss_reader *r, int64_t run_id, int64_t attempt,
                    const ss_step_window *window, unsigned flags,
                    ss_steps *out)
{
    memset(out, 0, sizeof *out);
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    steps_load l = {out, 0, 0, 0, 0};
    rc = load_step_rows(r, args, window, &l);
    if (rc == 0 && out->n_steps && (flags & SS_STEPS_PHASES))
        rc = load_step_parts(r, args, 0, &l);
    if (rc == 0 && out->n_steps && (flags & SS_STEPS_SYNCS))
        rc = load_step_parts(r, args, 1, &l);
    if (rc < 0)
        ss_steps_free(out);
    return rc;
}

static int step_counts_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    (void)r;
    ss_step_counts *out = arg;
    out->steps = sqlite3_column_int64(st, 0);
    out->first = ss__rd_col_i64(st, 1);
    out->last = ss__rd_col_i64(st, 2);
    out->with_missing_ranks = sqlite3_column_int64(st, 3);
    return 0;
}

int ss_reader_step_counts(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_step_counts *out)
{
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    rc = ss__rd_one(r, &(ss__rd_query){
                        "SELECT count(*), min(step), max(step), "
                        "coalesce(sum(n_missing > 0), 0) FROM steps "
                        "WHERE run_id = ?1 AND attempt = ?2",
                        args, 2, NULL, 0},
                    step_counts_row, out);
    return rc < 0 ? rc : rc == 0 ? no_row(r) : 0;
}

/* ---- step times (the run summary's percentiles) ---- */

/* The two columns being gathered, each without its NULLs. */
typedef struct {
    int64_t **col[2];
    size_t *n[2], cap[2];
} step_times_load;

static int step_times_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    step_times_load *l = arg;
    for (int i = 0; i < 2; i++) {
        if (sqlite3_column_type(st, i) == SQLITE_NULL)
            continue;
        if (ss__rd_grow((void **)l->col[i], sizeof **l->col[i], *l->n[i],
                        &l->cap[i]))
            return ss__rd_oom(r);
        (*l->col[i])[(*l->n[i])++] = sqlite3_column_int64(st, i);
    }
    return 0;
}

int ss_reader_step_times(ss_reader *r, int64_t run_id, int64_t attempt,
                         int64_t **median, size_t *n_median, int64_t **worst,
                         size_t *n_worst)
{
    *median = *worst = NULL;
    *n_median = *n_worst = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    step_times_load l = {{median, worst}, {n_median, n_worst}, {0, 0}};
    rc = ss__rd_each(r, &(ss__rd_query){"SELECT step_median, step_max FROM "
                                        "steps WHERE run_id = ?1 AND "
                                        "attempt = ?2",
                                        args, 2, NULL, 0},
                     step_times_row, &l);
    if (rc < 0) {
        free(*median);
        free(*worst);
        *median = *worst = NULL;
        *n_median = *n_worst = 0;
    }
    return rc;
}

/* ---- the bounds of a window of steps ---- */

static int bounds_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    (void)r;
    int64_t **out = arg;
    *out[0] = ss__rd_col_i64(st, 0);
    *out[1] = ss__rd_col_i64(st, 1);
    return 0;
}

int ss_reader_step_bounds(ss_reader *r, int64_t run_id, int64_t attempt,
                          const ss_step_window *w, int64_t *first,
                          int64_t *last)
{
    *first = *last = SS_MISSING;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[5];
    int descending;
    window_args(w, run_id, attempt, args, &descending);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT min(step), max(step) FROM (SELECT step FROM steps "
             "WHERE run_id = ?1 AND attempt = ?2 AND step >= ?3 AND "
             "step <= ?4 ORDER BY step %s LIMIT ?5)",
             descending ? "DESC" : "ASC");
    int64_t *out[2] = {first, last};
    rc = ss__rd_one(r, &(ss__rd_query){sql, args, 5, NULL, 0}, bounds_row,
                    out);
    return rc < 0 ? rc : 0;
}

/* ---- rank-steps ---- */

struct ss_rank_steps {
    ss_reader *r;
    sqlite3_stmt *st;
    unsigned fields;
    ss_rank_step_row row;
    ss_rank_phase *phases;
    size_t cap_phases;
    ss_rank_sync *syncs;
    size_t cap_syncs;
    ss_rank_metric *metrics;
    size_t cap_metrics;
    ss_host_step host;
    char **names;
    size_t n_names, cap_names, hint;
};

/* One rank's rows, looked up by their key step by step over the attempt's
 * finalized steps: the key (step, then rank) makes a filter on rank alone
 * read every rank's rows, a cost of the world instead of the rank. */
#define ONE_RANK_WHERE                                                       \
    "rank = ?5 AND step IN (SELECT step FROM steps WHERE run_id = ?1 AND "   \
    "attempt = ?2 AND step BETWEEN ?3 AND ?4)"

int ss_reader_rank_steps(ss_reader *r, const ss_rank_step_query *q,
                         ss_rank_steps **cur)
{
    *cur = NULL;
    int rc = ss__rd_run_exists(r, q->run_id);
    if (rc)
        return rc;
    int timelines = r->version >= SCHEMA_TIMELINES;
    int phases = q->fields & SS_RANK_STEPS_PHASES;
    int syncs = timelines && (q->fields & SS_RANK_STEPS_SYNCS);
    int metrics = r->version >= SCHEMA_METRICS &&
                  (q->fields & SS_RANK_STEPS_METRICS);
    int host = r->version >= SCHEMA_HOST && (q->fields & SS_RANK_STEPS_HOST);
    int one_rank = (q->fields & SS_RANK_STEPS_ONE_RANK) != 0;
    char sql[1536];
    snprintf(sql, sizeof sql,
             "SELECT step, rank, step_ns, rss_bytes, device_bytes, %s, %s, "
             "%s, %s, %s, %s, %s, %s, %s FROM rank_steps WHERE run_id = ?1 "
             "AND attempt = ?2 AND %s ORDER BY step, rank",
             timelines ? "begin_ns" : "NULL", phases ? "phases" : "NULL",
             phases && timelines ? "phase_starts" : "NULL",
             phases && timelines ? "phase_counts" : "NULL",
             syncs ? "syncs" : "NULL", metrics ? "metrics" : "NULL",
             phases && r->version >= SCHEMA_SELF ? "phase_self" : "NULL",
             host ? HOST_SELECT : HOST_SELECT_NONE,
             host && r->version >= SCHEMA_GPU ? GPU_SELECT : GPU_SELECT_NONE,
             one_rank ? ONE_RANK_WHERE : "step BETWEEN ?3 AND ?4");
    int64_t args[5] = {q->run_id, q->attempt, q->first < 0 ? 0 : q->first,
                       q->last < 0 ? INT64_MAX : q->last, q->rank};
    ss_rank_steps *c = calloc(1, sizeof *c);
    if (!c)
        return ss__rd_oom(r);
    c->r = r;
    c->fields = q->fields;
    /* A cursor outlives this call: it steps its statement itself. */
    c->st = ss__rd_prepare(r, &(ss__rd_query){sql, args, one_rank ? 5 : 4,
                                               NULL, 0});
    if (!c->st) {
        free(c);
        return SS_READ_ERROR;
    }
    *cur = c;
    return 0;
}

/* Reads the host columns from FIRST on into H (in ss_host_step's field
 * order), then the GPU columns that follow them (gpu.present 1 when
 * gpu_index is known); returns 1 when any is known, else 0. */
static int col_host(sqlite3_stmt *st, int first, ss_host_step *h)
{
    int64_t v[HOST_FIELDS], g[GPU_FIELDS];
    int known = 0;
    for (int i = 0; i < HOST_FIELDS; i++) {
        v[i] = ss__rd_col_i64(st, first + i);
        known |= v[i] != SS_MISSING;
    }
    for (int i = 0; i < GPU_FIELDS; i++)
        g[i] = ss__rd_col_i64(st, first + HOST_FIELDS + i);
    ss_gpu_evidence gpu = {0};
    if (g[0] != SS_MISSING) {
        known = 1;
        gpu = (ss_gpu_evidence){1, (int32_t)g[0], g[1], g[2], g[3], g[4],
                                g[5], g[6], g[7], g[8], g[9], g[10]};
    }
    *h = (ss_host_step){v[0], v[1], v[2], v[3], v[4], v[5],
                        v[6], v[7], v[8], v[9], v[10], gpu};
    return known;
}
/* The phase entry of NAME in the row being read, added (total and start
 * missing, count 1) when new; NULL on out-of-memory. */
static ss_rank_phase *row_phase(ss_rank_steps *c, uint32_t name)
{
    for (size_t i = 0; i < c->row.n_phases; i++)
        if (c->phases[i].name == name)
            return &c->phases[i];
    if (ss__rd_grow((void **)&c->phases, sizeof *c->phases,
                    c->row.n_phases, &c->cap_phases) != 0)
        return NULL;
    ss_rank_phase *p = &c->phases[c->row.n_phases++];
    *p = (ss_rank_phase){name, SS_MISSING, SS_MISSING, 1, SS_MISSING};
    return p;
}

/* Adds the {name: number} items of the JSON object in column COL to the
 * row: KIND 0..2 the phases' totals, starts and counts, 3 the syncs, 4 the
 * metrics, 5 the phases' self times.  Text that is not a JSON object adds
 * nothing.  Returns 0 or -1 on out-of-memory. */
static int add_items(ss_rank_steps *c, int col, int kind)
{
    const char *text = (const char *)sqlite3_column_text(c->st, col);
    if (!text)
        return 0;
    cJSON *obj = cJSON_Parse(text);
    if (!obj)
        return 0;
    int rc = 0;
    for (cJSON *it = obj->child; it && rc == 0; it = it->next) {
        if (!cJSON_IsNumber(it) || !it->string)
            continue;
        int64_t idx = ss__rd_intern(&c->names, &c->n_names, &c->cap_names,
                             it->string, c->hint);
        if (idx < 0) {
            rc = -1;
            break;
        }
        c->hint = (size_t)idx + 1;
        uint32_t name = (uint32_t)idx;
        int64_t v = (int64_t)it->valuedouble;
        if (kind < 3 || kind == 5) {
            ss_rank_phase *p = row_phase(c, name);
            if (!p)
                rc = -1;
            else if (kind == 0)
                p->total_ns = v;
            else if (kind == 1)
                p->start_ns = v;
            else if (kind == 2)
                p->count = v;
            else
                p->self_ns = v;
        } else if (kind == 3) {
            if (ss__rd_grow((void **)&c->syncs, sizeof *c->syncs,
                            c->row.n_syncs, &c->cap_syncs) != 0)
                rc = -1;
            else
                c->syncs[c->row.n_syncs++] = (ss_rank_sync){name, v};
        } else {
            if (ss__rd_grow((void **)&c->metrics, sizeof *c->metrics,
                            c->row.n_metrics, &c->cap_metrics) != 0)
                rc = -1;
            else
                c->metrics[c->row.n_metrics++] =
                    (ss_rank_metric){name, it->valuedouble};
        }
    }
    cJSON_Delete(obj);
    return rc;
}

int ss_rank_steps_next(ss_rank_steps *c, const ss_rank_step_row **row)
{
    *row = NULL;
    int rc = ss__rd_step(c->r, c->st);
    if (rc != 1)
        return rc;
    sqlite3_stmt *st = c->st;
    ss_rank_step_row *x = &c->row;
    *x = (ss_rank_step_row){sqlite3_column_int64(st, 0),
                            sqlite3_column_int64(st, 1),
                            ss__rd_col_i64(st, 2), ss__rd_col_i64(st, 3),
                            ss__rd_col_i64(st, 4), ss__rd_col_i64(st, 5),
                            NULL, 0, NULL, 0, NULL, 0, NULL};
    if (add_items(c, 6, 0) != 0 || add_items(c, 7, 1) != 0 ||
        add_items(c, 8, 2) != 0 || add_items(c, 9, 3) != 0 ||
        add_items(c, 10, 4) != 0 || add_items(c, 11, 5) != 0)
        return ss__rd_oom(c->r);
    /* phase_self lists only the phases with something nested in them: the
     * others' self time is their time (none at all without phase_self). */
    if (sqlite3_column_type(st, 11) != SQLITE_NULL)
        for (size_t i = 0; i < x->n_phases; i++)
            if (c->phases[i].self_ns == SS_MISSING)
                c->phases[i].self_ns = c->phases[i].total_ns;
    x->phases = c->phases;
    x->syncs = c->syncs;
    x->metrics = c->metrics;
    x->host = col_host(st, 12, &c->host) ? &c->host : NULL;
    *row = x;
    return 1;
}

const char *ss_rank_steps_name(const ss_rank_steps *c, uint32_t idx)
{
    return idx < c->n_names ? c->names[idx] : NULL;
}

void ss_rank_steps_close(ss_rank_steps *c)
{
    if (!c)
        return;
    sqlite3_finalize(c->st);
    free(c->phases);
    free(c->syncs);
    free(c->metrics);
    for (size_t i = 0; i < c->n_names; i++)
        free(c->names[i]);
    free(c->names);
    free(c);
}

/* Median, largest and sum of N values of one field of the host evidence
 * (VALS is reordered) into the field at OFFSET of M, X and S. */
static void host_field_stats(int64_t *vals, size_t n, size_t offset,
                             ss_host_step *m, ss_host_step *x,
                             ss_host_step *s)
{
    int64_t med = SS_MISSING, max = SS_MISSING, sum = SS_MISSING;
    if (n) {
        sum = 0;
        for (size_t i = 0; i < n; i++) {
            sum += vals[i];
            if (max == SS_MISSING || vals[i] > max)
                max = vals[i];
        }
        med = ss_median_i64(vals, n);
    }
    memcpy((char *)m + offset, &med, sizeof med);
    memcpy((char *)x + offset, &max, sizeof max);
    memcpy((char *)s + offset, &sum, sizeof sum);
}

static int64_t plus(int64_t sum, int64_t v)
{
    return v == SS_MISSING ? sum : sum == SS_MISSING ? v : sum + v;
}

/* Counts the GPU evidence G of one of OUT's steps into its GPU summary
 * (the SM clock summed here, divided by finish_rank_host). */
static void add_rank_gpu(ss_rank_host *out, const ss_gpu_evidence *g)
{
    if (!g->present)
        return;
    ss_gpu_evidence *s = &out->gpu_sum;
    if (!out->gpu_steps++) {
        /* sums stay SS_MISSING until a step knows the field */
        *s = (ss_gpu_evidence){1,          0,          SS_MISSING,
                               SS_MISSING, SS_MISSING, SS_MISSING,
                               SS_MISSING, SS_MISSING, SS_MISSING,
                               SS_MISSING, SS_MISSING, 0};
        out->gpu_clock_steps = 0;
    }
    s->index = g->index;
    s->covered_ns = plus(s->covered_ns, g->covered_ns);
    s->slowed_ns = plus(s->slowed_ns, g->slowed_ns);
    s->power_cap_ns = plus(s->power_cap_ns, g->power_cap_ns);
    s->thermal_ns = plus(s->thermal_ns, g->thermal_ns);
    s->hw_slowdown_ns = plus(s->hw_slowdown_ns, g->hw_slowdown_ns);
    out->gpu_slowed_steps += g->slowed_ns != SS_MISSING && g->slowed_ns > 0;
    out->gpu_power_cap_steps += g->power_cap_ns != SS_MISSING &&
                                g->power_cap_ns > 0;
    out->gpu_thermal_steps += g->thermal_ns != SS_MISSING && g->thermal_ns > 0;
    out->gpu_hw_slowdown_steps += g->hw_slowdown_ns != SS_MISSING &&
                                  g->hw_slowdown_ns > 0;
    if (g->sm_clock_mhz != SS_MISSING) {
        s->sm_clock_mhz = plus(s->sm_clock_mhz, g->sm_clock_mhz);
        out->gpu_clock_steps++;
    }
    if (g->temperature_c != SS_MISSING &&
        (s->temperature_c == SS_MISSING || g->temperature_c > s->temperature_c))
        s->temperature_c = g->temperature_c;
    s->ecc_new = plus(s->ecc_new, g->ecc_new);
    s->xid_new = plus(s->xid_new, g->xid_new);
    if (g->last_xid != SS_MISSING && g->last_xid)
        s->last_xid = g->last_xid;
}

/* Completes OUT (its rank and counts set) from its rows' values: VALS
 * holds, per field, N_ROWS values (SS_MISSING where unknown). */
static void finish_rank_host(ss_rank_host *out, int64_t *vals, size_t n_rows)
{
    for (int f = 0; f < HOST_FIELDS; f++) {
        int64_t *col = vals + (size_t)f * n_rows;
        size_t n = 0;
        for (size_t i = 0; i < n_rows; i++)
            if (col[i] != SS_MISSING)
                col[n++] = col[i];
        host_field_stats(col, n, (size_t)f * sizeof(int64_t), &out->median,
                         &out->max, &out->sum);
    }
    if (out->gpu_clock_steps)
        out->gpu_sum.sm_clock_mhz /= out->gpu_clock_steps;
}
/* The ranks' host evidence being summarized, one rank at a time (rows
 * ordered by rank). */
typedef struct {
    ss_rank_host *ranks;
    size_t n_ranks, cap_ranks;
    int64_t *rows; /* the current rank's rows, HOST_FIELDS each */
    size_t n_rows, cap_rows;
    int64_t *by_field; /* the same, field-major */
} host_load;

/* Completes the current rank of L from its rows.  Returns 0 or
 * SS_READ_ERROR. */
static int host_rank_end(ss_reader *r, host_load *l)
{
    if (!l->n_ranks)
        return 0;
    size_t n = l->n_rows;
    int64_t *t = realloc(l->by_field, (n ? n : 1) * HOST_FIELDS * sizeof *t);
    if (!t)
        return ss__rd_oom(r);
    l->by_field = t;
    for (size_t i = 0; i < n; i++)
        for (int f = 0; f < HOST_FIELDS; f++)
            t[(size_t)f * n + i] = l->rows[i * HOST_FIELDS + (size_t)f];
    finish_rank_host(&l->ranks[l->n_ranks - 1], t, n);
    l->n_rows = 0;
    return 0;
}

static int host_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    host_load *l = arg;
    int64_t rank = sqlite3_column_int64(st, 0);
    if (!l->n_ranks || rank != l->ranks[l->n_ranks - 1].rank) {
        if (host_rank_end(r, l) != 0 ||
            ss__rd_grow((void **)&l->ranks, sizeof *l->ranks, l->n_ranks,
                        &l->cap_ranks))
            return ss__rd_oom(r);
        memset(&l->ranks[l->n_ranks], 0, sizeof l->ranks[l->n_ranks]);
        l->ranks[l->n_ranks++].rank = rank;
    }
    if (ss__rd_grow((void **)&l->rows, HOST_FIELDS * sizeof *l->rows,
                    l->n_rows, &l->cap_rows))
        return ss__rd_oom(r);
    ss_host_step h;
    col_host(st, 1, &h);
    memcpy(&l->rows[l->n_rows * HOST_FIELDS], &h,
           HOST_FIELDS * sizeof *l->rows);
    l->n_rows++;
    ss_rank_host *cur = &l->ranks[l->n_ranks - 1];
    add_rank_gpu(cur, &h.gpu);
    cur->steps++;
    cur->stopped_steps += h.stopped_ns != SS_MISSING && h.stopped_ns > 0;
    cur->throttled_steps += h.throttled_ns != SS_MISSING &&
                            h.throttled_ns > 0;
    return 0;
}

int ss_reader_rank_host(ss_reader *r, int64_t run_id, int64_t attempt,
                        ss_rank_host **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc || r->version < SCHEMA_HOST)
        return rc;
    int64_t args[2] = {run_id, attempt};
    int gpu = r->version >= SCHEMA_GPU;
    host_load l = {0};
    rc = ss__rd_each(r, &(ss__rd_query){
                         gpu ? "SELECT rank, " HOST_SELECT ", " GPU_SELECT
                               " FROM rank_steps WHERE run_id = ?1 AND "
                               "attempt = ?2 AND coalesce(host_cpu_ns, "
                               "host_stopped_ns, host_runq_ns, "
                               "host_throttled_ns, gpu_index) IS NOT NULL "
                               "ORDER BY rank"
                             : "SELECT rank, " HOST_SELECT ", "
                               GPU_SELECT_NONE " FROM rank_steps WHERE "
                               "run_id = ?1 AND attempt = ?2 AND "
                               "coalesce(host_cpu_ns, host_stopped_ns, "
                               "host_runq_ns, host_throttled_ns) IS NOT "
                               "NULL ORDER BY rank",
                         args, 2, NULL, 0},
                     host_row, &l);
    if (rc == 0)
        rc = host_rank_end(r, &l);
    free(l.rows);
    free(l.by_field);
    if (rc < 0) {
        free(l.ranks);
        return rc;
    }
    *out = l.ranks;
    *n = l.n_ranks;
    return 0;
}

static int summary_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    (void)r;
    *(ss_rank_step_summary *)arg = (ss_rank_step_summary){
        sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
        ss__rd_col_i64(st, 2), ss__rd_col_i64(st, 3), ss__rd_col_i64(st, 4)};
    return 0;
}

int ss_reader_rank_step_summary(ss_reader *r, int64_t run_id,
                                int64_t attempt, int64_t first, int64_t last,
                                ss_rank_step_summary *out)
{
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, attempt, first < 0 ? 0 : first,
                       last < 0 ? INT64_MAX : last};
    int timelines = r->version >= SCHEMA_TIMELINES;
    rc = ss__rd_one(r, &(ss__rd_query){timelines
        ? "SELECT count(*), count(begin_ns), min(step), max(step), "
          "(SELECT min(begin_ns) FROM rank_steps WHERE run_id = ?1 AND "
          "attempt = ?2 AND step = (SELECT min(step) FROM rank_steps WHERE "
          "run_id = ?1 AND attempt = ?2 AND begin_ns IS NOT NULL)) "
          "FROM rank_steps WHERE run_id = ?1 AND attempt = ?2 AND step "
          "BETWEEN ?3 AND ?4"
        : "SELECT count(*), 0, min(step), max(step), NULL FROM rank_steps "
          "WHERE run_id = ?1 AND attempt = ?2 AND step BETWEEN ?3 AND ?4",
        args, 4, NULL, 0}, summary_row, out);
    return rc < 0 ? rc : rc == 0 ? no_row(r) : 0;
}

static int step_number_fill(ss_reader *r, sqlite3_stmt *st, void *elem,
                            void *ctx)
{
    (void)r, (void)ctx;
    *(int64_t *)elem = sqlite3_column_int64(st, 0);
    return 0;
}

int ss_reader_rank_step_numbers(ss_reader *r, int64_t run_id,
                                int64_t attempt, const ss_step_window *w,
                                int64_t **steps, size_t *n)
{
    static const ss__rd_rows how = {sizeof(int64_t), step_number_fill, NULL};
    *steps = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[5];
    int descending;
    window_args(w, run_id, attempt, args, &descending);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT DISTINCT step FROM rank_steps WHERE run_id = ?1 AND "
             "attempt = ?2 AND step >= ?3 AND step <= ?4 ORDER BY step %s "
             "LIMIT ?5", descending ? "DESC" : "ASC");
    rc = ss__rd_collect(r, &(ss__rd_query){sql, args, 5, NULL, 0}, &how, NULL,
                        steps, n);
    if (rc == 0 && descending)
        ss__rd_reverse(*steps, sizeof **steps, *n);
    return rc;
}

/* ---- metrics ---- */

void ss_metric_rows_free(ss_metric_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].name);
        free(rows[i].values);
        free(rows[i].ranks);
    }
    free(rows);
}

/* The metrics being gathered: one row per name, its values appended. */
typedef struct {
    ss_metric_row *rows;
    size_t n, cap, vcap;
} metrics_load;

static int metric_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    metrics_load *l = arg;
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (!name)
        return 0;
    ss_metric_row *m = l->n ? &l->rows[l->n - 1] : NULL;
    if (!m || strcmp(m->name, name) != 0) {
        if (ss__rd_grow((void **)&l->rows, sizeof *l->rows, l->n, &l->cap))
            return ss__rd_oom(r);
        m = &l->rows[l->n++];
        memset(m, 0, sizeof *m);
        m->steps = sqlite3_column_int64(st, 1);
        m->last_step = sqlite3_column_int64(st, 2);
        l->vcap = 0;
        if (!(m->name = strdup(name)))
            return ss__rd_oom(r);
    }
    if (m->n == l->vcap) {
        size_t c = l->vcap ? l->vcap * 2 : 16;
        double *v = realloc(m->values, c * sizeof *v);
        if (v)
            m->values = v;
        int64_t *k = realloc(m->ranks, c * sizeof *k);
        if (k)
            m->ranks = k;
        if (!v || !k)
            return ss__rd_oom(r);
        l->vcap = c;
    }
    m->values[m->n] = sqlite3_column_double(st, 4);
    m->ranks[m->n++] = sqlite3_column_int64(st, 3);
    return 0;
}

int ss_reader_metrics(ss_reader *r, int64_t run_id, int64_t attempt,
                      ss_metric_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc || r->version < SCHEMA_METRICS)
        return rc;
    int64_t args[2] = {run_id, attempt};
    metrics_load l = {0};
    rc = ss__rd_each(r, &(ss__rd_query){
        "WITH m AS (SELECT j.key AS name, step, rank, j.value AS v "
        "  FROM rank_steps, json_each(rank_steps.metrics) AS j "
        "  WHERE run_id = ?1 AND attempt = ?2 AND metrics IS NOT NULL "
        "  AND json_valid(metrics) AND j.type IN ('integer', 'real')), "
        "last AS (SELECT name, max(step) AS step, count(DISTINCT step) AS n "
        "  FROM m GROUP BY name) "
        "SELECT m.name, last.n, m.step, m.rank, m.v FROM m "
        "JOIN last USING (name, step) ORDER BY m.name, m.v, m.rank",
        args, 2, NULL, 0}, metric_row, &l);
    if (rc < 0) {
        ss_metric_rows_free(l.rows, l.n);
        return rc;
    }
    *rows = l.rows;
    *n = l.n;
    return 0;
}
