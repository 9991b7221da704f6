/*
 * query.c - the store as the JSON documents of the HTTP API.
 *
 * Every document of docs/api.md is built here, from SQL over one read-only
 * connection, and nowhere else: the HTTP server serves them and
 * `stepscope report --html` embeds them.  The stream's step and finding
 * objects are built from the controller's memory by ss_query_step_object
 * and ss_query_finding_object, which write byte for byte what the stored
 * versions read back as (query_test checks it).
 *
 * Costs: /steps reads three index ranges (steps, step_phases, step_syncs)
 * bounded by the window; /heatmap one range of rank_steps bounded by
 * SS_QUERY_MAX_CELLS; /ranks sorts the kept rank-step rows of the latest
 * SS_QUERY_RANK_MEDIAN_STEPS steps; /runs counts steps per run.  Nothing
 * scans a whole run's rank_steps.
 */
#include "query.h"

#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_schema.h"

/* /ranks: per-rank median step time over the kept rows of the latest N
 * finalized steps. */
#define SS_QUERY_RANK_MEDIAN_STEPS 500
#define MAX_WORLD (1 << 20) /* a damaged world_size must not exhaust memory */

struct ss_query {
    sqlite3 *db;
    char path[4096];
};

ss_query *ss_query_open(const char *path, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int version = ss_schema_open_readonly(path, &db, err, errlen);
    if (version < 0)
        return NULL;
    /* Migrations only add: every version from 1 has what is read here, so
     * an older store is read as it is, without writing to it. */
    ss_query *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(err, errlen, "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    q->db = db;
    snprintf(q->path, sizeof q->path, "%s", path);
    return q;
}

void ss_query_close(ss_query *q)
{
    if (!q)
        return;
    sqlite3_close(q->db);
    free(q);
}

/* Prepares SQL, binding the int64 arguments ARGS[0..N) to ?1..?N.  Returns
 * NULL with ERR on failure. */
static sqlite3_stmt *prep(ss_query *q, const char *sql, const int64_t *args,
                          int n, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: cannot query the store: %s", q->path,
                 sqlite3_errmsg(q->db));
        sqlite3_finalize(st);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        sqlite3_bind_int64(st, i + 1, args[i]);
    return st;
}

/* Steps ST: 1 for a row, 0 at the end, -1 with ERR on error. */
static int next_row(ss_query *q, sqlite3_stmt *st, char *err, size_t errlen)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    snprintf(err, errlen, "%s: cannot read the store: %s", q->path,
             sqlite3_errmsg(q->db));
    return -1;
}

static int64_t col_i64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? SS_MISSING
               : sqlite3_column_int64(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

static int oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory");
    return SS_QUERY_ERROR;
}

/* Ends a document: SS_QUERY_ERROR when OUT ran out of memory. */
static int finish(const ss_buf *out, int rc, char *err, size_t errlen)
{
    if (rc == 0 && out->oom)
        return oom(err, errlen);
    return rc;
}

/* The run's world size and the attempt to read (WANT when >= 0 and
 * recorded, else the latest).  Returns 0, SS_QUERY_NOT_FOUND or
 * SS_QUERY_ERROR. */
static int run_attempt(ss_query *q, int64_t run_id, int64_t want,
                       int64_t *attempt, int64_t *world, char *err,
                       size_t errlen)
{
    int64_t args[2] = {run_id, want};
    sqlite3_stmt *st = prep(q,
        "SELECT world_size, (SELECT max(attempt) FROM attempts WHERE "
        "run_id = ?1), (SELECT count(*) FROM attempts WHERE run_id = ?1 AND "
        "attempt = ?2) FROM runs WHERE id = ?1", args, 2, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    int r = next_row(q, st, err, errlen);
    int rc = r < 0 ? SS_QUERY_ERROR : r == 0 ? SS_QUERY_NOT_FOUND : 0;
    if (r == 1) {
        int64_t w = col_i64(st, 0), latest = col_i64(st, 1);
        *world = w == SS_MISSING || w < 0 ? 0 : w > MAX_WORLD ? MAX_WORLD : w;
        if (want < 0)
            *attempt = latest == SS_MISSING ? 0 : latest;
        else if (sqlite3_column_int64(st, 2) > 0 ||
                 (want == 0 && latest == SS_MISSING))
            *attempt = want;
        else
            rc = SS_QUERY_NOT_FOUND;
    }
    sqlite3_finalize(st);
    return rc;
}

static int live_is(ss_live *live, int64_t run_id)
{
    return live && ss_live_run_id(live) == run_id;
}

/* ---- percentiles ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile P of sorted V[0..N); SS_MISSING if empty. */
static int64_t pct(const int64_t *v, size_t n, double p)
{
    if (n == 0)
        return SS_MISSING;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

static void json_pcts(ss_buf *b, int64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_i64);
    ss_buf_puts(b, "{\"p50\":");
    ss_buf_json_ms(b, pct(v, n, 50));
    ss_buf_puts(b, ",\"p90\":");
    ss_buf_json_ms(b, pct(v, n, 90));
    ss_buf_puts(b, ",\"p99\":");
    ss_buf_json_ms(b, pct(v, n, 99));
    ss_buf_puts(b, "}");
}

/* ---- runs ---- */

#define RUN_COLUMNS                                                           \
    "SELECT r.id, r.uuid, r.name, r.status, r.world_size, r.started_at, "     \
    "r.ended_at, (SELECT count(*) FROM steps s WHERE s.run_id = r.id), "      \
    "(SELECT count(*) FROM findings f WHERE f.run_id = r.id), r.command, "    \
    "r.exit_code, r.host FROM runs r "

/* The fields shared by /api/runs and /api/runs/{id}, without braces. */
static void run_fields(ss_buf *b, sqlite3_stmt *st, ss_live *live)
{
    int64_t id = sqlite3_column_int64(st, 0);
    ss_buf_printf(b, "\"id\":%" PRId64 ",\"uuid\":", id);
    ss_buf_json_str(b, col_text(st, 1));
    ss_buf_puts(b, ",\"name\":");
    ss_buf_json_str(b, col_text(st, 2));
    ss_buf_puts(b, ",\"status\":");
    ss_buf_json_str(b, col_text(st, 3));
    ss_buf_puts(b, ",\"world_size\":");
    ss_buf_json_int(b, col_i64(st, 4));
    ss_buf_puts(b, ",\"started_at\":");
    ss_buf_json_time(b, col_i64(st, 5));
    ss_buf_puts(b, ",\"ended_at\":");
    ss_buf_json_time(b, col_i64(st, 6));
    ss_buf_puts(b, ",\"started_at_ns\":");
    ss_buf_json_int(b, col_i64(st, 5));
    ss_buf_puts(b, ",\"ended_at_ns\":");
    ss_buf_json_int(b, col_i64(st, 6));
    ss_buf_printf(b, ",\"steps\":%" PRId64 ",\"findings\":%" PRId64
                  ",\"live\":%s", (int64_t)sqlite3_column_int64(st, 7),
                  (int64_t)sqlite3_column_int64(st, 8),
                  live_is(live, id) && ss_live_running(live) ? "true"
                                                             : "false");
}

int ss_query_runs(ss_query *q, ss_live *live, ss_buf *out, char *err,
                  size_t errlen)
{
    sqlite3_stmt *st = prep(q, RUN_COLUMNS "ORDER BY r.id", NULL, 0, err,
                            errlen);
    if (!st)
        return SS_QUERY_ERROR;
    ss_buf_puts(out, "{\"runs\":[");
    int r, n = 0;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        ss_buf_puts(out, n++ ? ",{" : "{");
        run_fields(out, st, live);
        ss_buf_puts(out, "}");
    }
    sqlite3_finalize(st);
    ss_buf_puts(out, "]}");
    return finish(out, r < 0 ? SS_QUERY_ERROR : 0, err, errlen);
}

/* Loads column 0 of ST's rows (NULLs skipped) into *V.  Returns the count,
 * or -1 with ERR. */
static long load_column(ss_query *q, sqlite3_stmt *st, int64_t **v,
                        char *err, size_t errlen)
{
    size_t n = 0, cap = 0;
    int r;
    *v = NULL;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        if (sqlite3_column_type(st, 0) == SQLITE_NULL)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            int64_t *g = realloc(*v, cap * sizeof *g);
            if (!g) {
                oom(err, errlen);
                r = -1;
                break;
            }
            *v = g;
        }
        (*v)[n++] = sqlite3_column_int64(st, 0);
    }
    if (r < 0) {
        free(*v);
        *v = NULL;
        return -1;
    }
    return (long)n;
}

/* The "summary" object of /api/runs/{id}. */
static int run_summary(ss_query *q, int64_t run_id, int64_t attempt,
                       ss_buf *out, char *err, size_t errlen)
{
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(q,
        "SELECT count(*), min(step), max(step), "
        "coalesce(sum(n_missing > 0), 0) FROM steps "
        "WHERE run_id = ?1 AND attempt = ?2", args, 2, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    int r = next_row(q, st, err, errlen);
    if (r == 1) {
        ss_buf_printf(out, "\"summary\":{\"attempt\":%" PRId64 ",\"steps\":%"
                      PRId64 ",\"first_step\":", attempt,
                      (int64_t)sqlite3_column_int64(st, 0));
        ss_buf_json_int(out, col_i64(st, 1));
        ss_buf_puts(out, ",\"last_step\":");
        ss_buf_json_int(out, col_i64(st, 2));
        ss_buf_printf(out, ",\"with_missing_ranks\":%" PRId64,
                      (int64_t)sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    if (r != 1)
        return SS_QUERY_ERROR;
    static const char *const sql[2] = {
        "SELECT step_median FROM steps WHERE run_id = ?1 AND attempt = ?2",
        "SELECT step_max FROM steps WHERE run_id = ?1 AND attempt = ?2"};
    static const char *const key[2] = {",\"step_ms\":{\"median_rank\":",
                                       ",\"worst_rank\":"};
    for (int i = 0; i < 2; i++) {
        st = prep(q, sql[i], args, 2, err, errlen);
        if (!st)
            return SS_QUERY_ERROR;
        int64_t *v;
        long n = load_column(q, st, &v, err, errlen);
        sqlite3_finalize(st);
        if (n < 0)
            return SS_QUERY_ERROR;
        ss_buf_puts(out, key[i]);
        json_pcts(out, v, (size_t)n);
        free(v);
    }
    ss_buf_puts(out, "}}");
    return 0;
}

int ss_query_run(ss_query *q, int64_t run_id, int64_t attempt, ss_live *live,
                 ss_buf *out, char *err, size_t errlen)
{
    int64_t world;
    int rc = run_attempt(q, run_id, attempt, &attempt, &world, err, errlen);
    if (rc != 0)
        return rc;
    sqlite3_stmt *st = prep(q, RUN_COLUMNS "WHERE r.id = ?1", &run_id, 1,
                            err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    int r = next_row(q, st, err, errlen);
    if (r == 1) {
        ss_buf_puts(out, "{\"run\":{");
        run_fields(out, st, live);
        ss_buf_puts(out, ",\"command\":");
        ss_buf_json_str(out, col_text(st, 9));
        ss_buf_puts(out, ",\"exit_code\":");
        ss_buf_json_int(out, col_i64(st, 10));
        ss_buf_puts(out, ",\"host\":");
        ss_buf_json_str(out, col_text(st, 11));
    }
    sqlite3_finalize(st);
    if (r != 1)
        return r == 0 ? SS_QUERY_NOT_FOUND : SS_QUERY_ERROR;
    int64_t n_attempts = 0;
    st = prep(q, "SELECT count(*) FROM attempts WHERE run_id = ?1", &run_id,
              1, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    r = next_row(q, st, err, errlen);
    if (r == 1)
        n_attempts = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (r != 1)
        return SS_QUERY_ERROR;
    ss_buf_printf(out, ",\"attempt\":%" PRId64 ",\"attempts\":%" PRId64 "},",
                  attempt, n_attempts);
    rc = run_summary(q, run_id, attempt, out, err, errlen);
    ss_buf_puts(out, "}");
    return finish(out, rc, err, errlen);
}

/* ---- steps ---- */

/* The statistics object {"min","median","p90","max","worst_rank"} (ms). */
static void json_stat(ss_buf *b, int64_t min, int64_t median, int64_t p90,
                      int64_t max, int64_t worst)
{
    ss_buf_puts(b, "{\"min\":");
    ss_buf_json_ms(b, min);
    ss_buf_puts(b, ",\"median\":");
    ss_buf_json_ms(b, median);
    ss_buf_puts(b, ",\"p90\":");
    ss_buf_json_ms(b, p90);
    ss_buf_puts(b, ",\"max\":");
    ss_buf_json_ms(b, max);
    ss_buf_puts(b, ",\"worst_rank\":");
    ss_buf_json_int(b, worst);
    ss_buf_puts(b, "}");
}

static void json_sync(ss_buf *b, const char *name, int64_t skew, int64_t late,
                      int64_t worst)
{
    ss_buf_json_str(b, name);
    ss_buf_puts(b, ":{\"skew_ms\":");
    ss_buf_json_ms(b, skew);
    ss_buf_puts(b, ",\"late_ms\":");
    ss_buf_json_ms(b, late);
    ss_buf_puts(b, ",\"worst_rank\":");
    ss_buf_json_int(b, worst);
    ss_buf_puts(b, "}");
}

static void json_mem(ss_buf *b, const char *key, int64_t median, int64_t max,
                     int64_t worst)
{
    ss_buf_printf(b, ",\"%s\":{\"median\":", key);
    ss_buf_json_int(b, median);
    ss_buf_puts(b, ",\"max\":");
    ss_buf_json_int(b, max);
    ss_buf_puts(b, ",\"worst_rank\":");
    ss_buf_json_int(b, worst);
    ss_buf_puts(b, "}");
}

static int cmp_name_idx(const void *a, const void *b, void *arg)
{
    const char *const *names = arg;
    return strcmp(names[*(const uint32_t *)a], names[*(const uint32_t *)b]);
}

static const char *name_at(const char *const *names, int idx)
{
    return names && idx >= 0 && names[idx] ? names[idx] : "?";
}

void ss_query_step_object(ss_buf *out, const ss_step_view *v,
                          const char *const *names)
{
    ss_buf_printf(out, "{\"step\":%" PRIu64 ",\"n_present\":%" PRIu32
                  ",\"missing_ranks\":[", v->step, v->n_present);
    for (uint32_t i = 0; i < v->n_missing; i++)
        ss_buf_printf(out, i ? ",%" PRIu32 : "%" PRIu32, v->missing_ranks[i]);
    ss_buf_puts(out, "],\"step_ms\":");
    const ss_stat *s = &v->step_time;
    json_stat(out, s->min, s->median, s->p90, s->max,
              s->worst_rank < 0 ? SS_MISSING : s->worst_rank);

    /* Phases and syncs by name, as the store's keys order them. */
    uint32_t n = v->n_phases > v->n_syncs ? v->n_phases : v->n_syncs;
    uint32_t idx_small[64];
    uint32_t *idx = n <= 64 ? idx_small : malloc(n * sizeof *idx);
    if (!idx) {
        out->oom = 1;
        return;
    }
    const char *tmp_small[128];
    const char **tmp = n <= 128 ? tmp_small : malloc(n * sizeof *tmp);
    if (!tmp) {
        if (idx != idx_small)
            free(idx);
        out->oom = 1;
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        uint32_t m = pass == 0 ? v->n_phases : v->n_syncs;
        for (uint32_t i = 0; i < m; i++) {
            idx[i] = i;
            tmp[i] = name_at(names, pass == 0 ? v->phases[i].name
                                              : v->syncs[i].name);
        }
        qsort_r(idx, m, sizeof *idx, cmp_name_idx, (void *)tmp);
        ss_buf_puts(out, pass == 0 ? ",\"phases\":{" : ",\"syncs\":{");
        for (uint32_t k = 0; k < m; k++) {
            uint32_t i = idx[k];
            if (k)
                ss_buf_puts(out, ",");
            if (pass == 0) {
                const ss_stat *p = &v->phases[i].stat;
                ss_buf_json_str(out, tmp[i]);
                ss_buf_puts(out, ":");
                json_stat(out, p->min, p->median, p->p90, p->max,
                          p->worst_rank < 0 ? SS_MISSING : p->worst_rank);
            } else {
                const ss_sync_stat *y = &v->syncs[i];
                json_sync(out, tmp[i], y->skew_ns, y->late_ns,
                          y->worst_rank < 0 ? SS_MISSING : y->worst_rank);
            }
        }
        ss_buf_puts(out, "}");
    }
    if (idx != idx_small)
        free(idx);
    if (tmp != tmp_small)
        free(tmp);
    json_mem(out, "rss_bytes", v->rss.median, v->rss.max,
             v->rss.worst_rank < 0 ? SS_MISSING : v->rss.worst_rank);
    json_mem(out, "device_bytes", v->device.median, v->device.max,
             v->device.worst_rank < 0 ? SS_MISSING : v->device.worst_rank);
    ss_buf_puts(out, "}");
}

typedef struct {
    int64_t step, n_present;
    char *missing; /* "1,2" or NULL */
    int64_t v[12]; /* min median p90 max worst, rss med max worst, dev ... */
} step_row;

typedef struct {
    int64_t step;
    char *name;
    int64_t v[5];
} sub_row;

typedef struct {
    sub_row *rows;
    size_t n, cap;
} sub_rows;

static void sub_rows_free(sub_rows *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->rows[i].name);
    free(s->rows);
}

/* Loads (step, name, NV values) rows of ST into S.  Returns 0 or -1. */
static int load_sub_rows(ss_query *q, sqlite3_stmt *st, int nv, sub_rows *s,
                         char *err, size_t errlen)
{
    int r;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 256;
            sub_row *g = realloc(s->rows, cap * sizeof *g);
            if (!g)
                return oom(err, errlen);
            s->rows = g;
            s->cap = cap;
        }
        sub_row *x = &s->rows[s->n];
        x->step = sqlite3_column_int64(st, 0);
        const char *name = col_text(st, 1);
        x->name = strdup(name ? name : "?");
        if (!x->name)
            return oom(err, errlen);
        for (int i = 0; i < nv; i++)
            x->v[i] = col_i64(st, 2 + i);
        s->n++;
    }
    return r < 0 ? -1 : 0;
}

/* Resolves the window of R into [*LO, *HI] over the steps table, loading
 * the rows into *ROWS (ascending).  Returns the count or -1. */
static long load_step_rows(ss_query *q, int64_t run_id, int64_t attempt,
                           const ss_query_range *rg, step_row **rows,
                           char *err, size_t errlen)
{
    int64_t args[5] = {run_id, attempt, rg->from < 0 ? 0 : rg->from,
                       rg->to < 0 ? INT64_MAX : rg->to, rg->limit};
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT step, n_present, CASE WHEN json_valid(missing_ranks) "
             "THEN (SELECT group_concat(value, ',') FROM "
             "json_each(steps.missing_ranks) WHERE type = 'integer') END, "
             "step_min, step_median, step_p90, step_max, step_worst_rank, "
             "rss_median, rss_max, rss_worst_rank, device_median, "
             "device_max, device_worst_rank FROM steps WHERE run_id = ?1 "
             "AND attempt = ?2 AND step >= ?3 AND step <= ?4 "
             "ORDER BY step %s LIMIT ?5", rg->from >= 0 ? "ASC" : "DESC");
    sqlite3_stmt *st = prep(q, sql, args, 5, err, errlen);
    if (!st)
        return -1;
    size_t n = 0, cap = 0;
    step_row *v = NULL;
    int r;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            step_row *g = realloc(v, cap * sizeof *g);
            if (!g) {
                oom(err, errlen);
                r = -1;
                break;
            }
            v = g;
        }
        step_row *x = &v[n];
        x->step = sqlite3_column_int64(st, 0);
        x->n_present = sqlite3_column_int64(st, 1);
        const char *m = col_text(st, 2);
        x->missing = m ? strdup(m) : NULL;
        for (int i = 0; i < 12; i++)
            x->v[i] = col_i64(st, 3 + i);
        n++;
        if (m && !x->missing) {
            oom(err, errlen);
            r = -1;
            break;
        }
    }
    sqlite3_finalize(st);
    if (r < 0) {
        for (size_t i = 0; i < n; i++)
            free(v[i].missing);
        free(v);
        return -1;
    }
    if (rg->from < 0) /* read newest first: put in ascending order */
        for (size_t i = 0; i < n / 2; i++) {
            step_row t = v[i];
            v[i] = v[n - 1 - i];
            v[n - 1 - i] = t;
        }
    *rows = v;
    return (long)n;
}

/* Appends the step objects of window RG of ATTEMPT (the elements of
 * "steps", each preceded by a comma when SEPARATE or not the first), sets
 * *LAST to the last step appended, and returns how many were appended, or
 * -1 with ERR. */
static long append_step_objects(ss_query *q, int64_t run_id, int64_t attempt,
                                const ss_query_range *rg, int separate,
                                ss_buf *out, int64_t *last, char *err,
                                size_t errlen)
{
    step_row *rows = NULL;
    long n = load_step_rows(q, run_id, attempt, rg, &rows, err, errlen);
    if (n < 0)
        return -1;
    sub_rows ph = {0}, sy = {0};
    int rc = 0;
    if (n > 0) {
        int64_t args[4] = {run_id, attempt, rows[0].step, rows[n - 1].step};
        sqlite3_stmt *st = prep(q,
            "SELECT step, phase, min, median, p90, max, worst_rank FROM "
            "step_phases WHERE run_id = ?1 AND attempt = ?2 AND step "
            "BETWEEN ?3 AND ?4 ORDER BY step, phase", args, 4, err, errlen);
        rc = st ? load_sub_rows(q, st, 5, &ph, err, errlen) : -1;
        sqlite3_finalize(st);
        if (rc == 0) {
            st = prep(q,
                "SELECT step, sync, skew_ns, late_ns, worst_rank FROM "
                "step_syncs WHERE run_id = ?1 AND attempt = ?2 AND step "
                "BETWEEN ?3 AND ?4 ORDER BY step, sync", args, 4, err,
                errlen);
            rc = st ? load_sub_rows(q, st, 3, &sy, err, errlen) : -1;
            sqlite3_finalize(st);
        }
    }
    if (rc == 0) {
        size_t pi = 0, si = 0;
        for (long i = 0; i < n; i++) {
            const step_row *x = &rows[i];
            ss_buf_printf(out, "%s{\"step\":%" PRId64 ",\"n_present\":%" PRId64
                          ",\"missing_ranks\":[%s],\"step_ms\":",
                          i || separate ? "," : "", x->step, x->n_present,
                          x->missing ? x->missing : "");
            json_stat(out, x->v[0], x->v[1], x->v[2], x->v[3], x->v[4]);
            ss_buf_puts(out, ",\"phases\":{");
            for (int k = 0; pi < ph.n && ph.rows[pi].step <= x->step; pi++) {
                const sub_row *p = &ph.rows[pi];
                if (p->step < x->step)
                    continue;
                if (k++)
                    ss_buf_puts(out, ",");
                ss_buf_json_str(out, p->name);
                ss_buf_puts(out, ":");
                json_stat(out, p->v[0], p->v[1], p->v[2], p->v[3], p->v[4]);
            }
            ss_buf_puts(out, "},\"syncs\":{");
            for (int k = 0; si < sy.n && sy.rows[si].step <= x->step; si++) {
                const sub_row *y = &sy.rows[si];
                if (y->step < x->step)
                    continue;
                if (k++)
                    ss_buf_puts(out, ",");
                json_sync(out, y->name, y->v[0], y->v[1], y->v[2]);
            }
            ss_buf_puts(out, "}");
            json_mem(out, "rss_bytes", x->v[5], x->v[6], x->v[7]);
            json_mem(out, "device_bytes", x->v[8], x->v[9], x->v[10]);
            ss_buf_puts(out, "}");
        }
        if (n > 0)
            *last = rows[n - 1].step;
    }
    for (long i = 0; i < n; i++)
        free(rows[i].missing);
    free(rows);
    sub_rows_free(&ph);
    sub_rows_free(&sy);
    return rc < 0 ? -1 : n;
}

int ss_query_steps(ss_query *q, int64_t run_id, const ss_query_range *rg,
                   ss_buf *out, char *err, size_t errlen)
{
    int64_t attempt, world, last;
    int rc = run_attempt(q, run_id, rg->attempt, &attempt, &world, err,
                         errlen);
    if (rc != 0)
        return rc;
    ss_buf_puts(out, "{\"steps\":[");
    if (append_step_objects(q, run_id, attempt, rg, 0, out, &last, err,
                            errlen) < 0)
        return SS_QUERY_ERROR;
    ss_buf_puts(out, "]}");
    return finish(out, 0, err, errlen);
}

int ss_query_steps_start(ss_query *q, int64_t run_id,
                         const ss_query_range *rg, ss_query_steps_cursor *cur,
                         char *err, size_t errlen)
{
    int64_t world;
    memset(cur, 0, sizeof *cur);
    cur->run_id = run_id;
    int rc = run_attempt(q, run_id, rg->attempt, &cur->attempt, &world, err,
                         errlen);
    if (rc != 0)
        return rc;
    cur->left = rg->limit;
    if (rg->from >= 0) { /* the first LIMIT steps from FROM: read forward */
        cur->next = rg->from;
        cur->last = rg->to < 0 ? INT64_MAX : rg->to;
        return 0;
    }
    /* The last LIMIT steps at or below TO: fix the window now, so steps
     * committed while it is sent do not shift it. */
    int64_t args[4] = {run_id, cur->attempt, rg->to < 0 ? INT64_MAX : rg->to,
                       rg->limit};
    sqlite3_stmt *st = prep(q,
        "SELECT min(step), max(step) FROM (SELECT step FROM steps WHERE "
        "run_id = ?1 AND attempt = ?2 AND step <= ?3 ORDER BY step DESC "
        "LIMIT ?4)", args, 4, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    int r = next_row(q, st, err, errlen);
    if (r == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        cur->next = sqlite3_column_int64(st, 0);
        cur->last = sqlite3_column_int64(st, 1);
    } else {
        cur->left = 0; /* no steps in the window */
    }
    sqlite3_finalize(st);
    return r < 0 ? SS_QUERY_ERROR : 0;
}

int ss_query_steps_page(ss_query *q, ss_query_steps_cursor *cur,
                        int64_t max_steps, ss_buf *out, char *err,
                        size_t errlen)
{
    if (cur->left <= 0 || cur->next > cur->last)
        return 0;
    ss_query_range page = {cur->attempt, cur->next, cur->last,
                           max_steps < cur->left ? max_steps : cur->left};
    int64_t last = cur->next;
    long n = append_step_objects(q, cur->run_id, cur->attempt, &page,
                                 cur->sent > 0, out, &last, err, errlen);
    if (n < 0 || out->oom)
        return n < 0 ? SS_QUERY_ERROR : oom(err, errlen);
    cur->sent += n;
    cur->left = n == 0 || last == INT64_MAX ? 0 : cur->left - n;
    cur->next = last + 1;
    return (int)n;
}

/* ---- heatmap ---- */

static int cmp_step(const void *key, const void *elem)
{
    return cmp_i64(key, elem);
}

int ss_query_heatmap(ss_query *q, int64_t run_id, const ss_query_range *rg,
                     ss_buf *out, char *err, size_t errlen)
{
    int64_t attempt, world;
    int rc = run_attempt(q, run_id, rg->attempt, &attempt, &world, err,
                         errlen);
    if (rc != 0)
        return rc;
    int64_t limit = rg->limit;
    if (world > 0 && limit * world > SS_QUERY_MAX_CELLS)
        limit = SS_QUERY_MAX_CELLS / world > 0 ? SS_QUERY_MAX_CELLS / world
                                               : 1;
    int64_t args[5] = {run_id, attempt, rg->from < 0 ? 0 : rg->from,
                       rg->to < 0 ? INT64_MAX : rg->to, limit};
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT DISTINCT step FROM rank_steps WHERE run_id = ?1 AND "
             "attempt = ?2 AND step >= ?3 AND step <= ?4 ORDER BY step %s "
             "LIMIT ?5", rg->from >= 0 ? "ASC" : "DESC");
    sqlite3_stmt *st = prep(q, sql, args, 5, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    int64_t *steps;
    long n = load_column(q, st, &steps, err, errlen);
    sqlite3_finalize(st);
    if (n < 0)
        return SS_QUERY_ERROR;
    if (n > 1)
        qsort(steps, (size_t)n, sizeof *steps, cmp_i64);
    size_t cells = (size_t)world * (size_t)n;
    int64_t *m = malloc((cells ? cells : 1) * sizeof *m);
    if (!m) {
        free(steps);
        return oom(err, errlen);
    }
    for (size_t i = 0; i < cells; i++)
        m[i] = SS_MISSING;
    int r = 0;
    if (n > 0) {
        int64_t a2[4] = {run_id, attempt, steps[0], steps[n - 1]};
        st = prep(q, "SELECT step, rank, step_ns FROM rank_steps WHERE "
                     "run_id = ?1 AND attempt = ?2 AND step BETWEEN ?3 AND ?4",
                  a2, 4, err, errlen);
        if (!st)
            r = -1;
        while (st && (r = next_row(q, st, err, errlen)) == 1) {
            int64_t step = sqlite3_column_int64(st, 0);
            int64_t rank = sqlite3_column_int64(st, 1);
            const int64_t *at = bsearch(&step, steps, (size_t)n,
                                        sizeof *steps, cmp_step);
            if (at && rank >= 0 && rank < world)
                m[(size_t)rank * (size_t)n + (size_t)(at - steps)] =
                    col_i64(st, 2);
        }
        sqlite3_finalize(st);
    }
    if (r >= 0) {
        ss_buf_puts(out, "{\"ranks\":[");
        for (int64_t k = 0; k < world; k++)
            ss_buf_printf(out, k ? ",%" PRId64 : "%" PRId64, k);
        ss_buf_puts(out, "],\"steps\":[");
        for (long i = 0; i < n; i++)
            ss_buf_printf(out, i ? ",%" PRId64 : "%" PRId64, steps[i]);
        ss_buf_puts(out, "],\"step_ms\":[");
        for (int64_t k = 0; k < world; k++) {
            ss_buf_puts(out, k ? ",[" : "[");
            for (long i = 0; i < n; i++) {
                if (i)
                    ss_buf_puts(out, ",");
                ss_buf_json_ms(out, m[(size_t)k * (size_t)n + (size_t)i]);
            }
            ss_buf_puts(out, "]");
        }
        ss_buf_puts(out, "]}");
    }
    free(m);
    free(steps);
    return finish(out, r < 0 ? SS_QUERY_ERROR : 0, err, errlen);
}

/* ---- ranks ---- */

typedef struct {
    char *host, *state;
    int64_t pid, exit_code, signal, last_step;
    int64_t dropped_events, dropped_records, max_rss, median;
} rank_row;

static int load_ranks(ss_query *q, int64_t run_id, int64_t attempt,
                      rank_row *k, int64_t world, char *err, size_t errlen)
{
    int64_t args[3] = {run_id, attempt, 0};
    sqlite3_stmt *st = prep(q,
        "SELECT rank, host, state, pid, exit_code, term_signal, last_step, "
        "dropped_events, dropped_records FROM ranks WHERE run_id = ?1 AND "
        "attempt = ?2", args, 2, err, errlen);
    if (!st)
        return -1;
    int r;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        int64_t rank = sqlite3_column_int64(st, 0);
        if (rank < 0 || rank >= world)
            continue;
        rank_row *x = &k[rank];
        const char *host = col_text(st, 1), *state = col_text(st, 2);
        free(x->host);
        free(x->state);
        x->host = host ? strdup(host) : NULL;
        x->state = state ? strdup(state) : NULL;
        if ((host && !x->host) || (state && !x->state)) {
            r = oom(err, errlen);
            break;
        }
        x->pid = col_i64(st, 3);
        x->exit_code = col_i64(st, 4);
        x->signal = col_i64(st, 5);
        x->last_step = col_i64(st, 6);
        x->dropped_events = col_i64(st, 7);
        x->dropped_records = col_i64(st, 8);
    }
    sqlite3_finalize(st);
    if (r < 0)
        return -1;

    st = prep(q, "SELECT rank, max_rss_bytes, last_step FROM rank_totals "
                 "WHERE run_id = ?1 AND attempt = ?2", args, 2, err, errlen);
    if (!st)
        return -1;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        int64_t rank = sqlite3_column_int64(st, 0);
        if (rank < 0 || rank >= world)
            continue;
        k[rank].max_rss = col_i64(st, 1);
        int64_t last = col_i64(st, 2);
        if (last != SS_MISSING &&
            (k[rank].last_step == SS_MISSING || last > k[rank].last_step))
            k[rank].last_step = last;
    }
    sqlite3_finalize(st);
    if (r < 0)
        return -1;

    /* Medians over the kept rows of the latest steps; SQLite sorts each
     * rank's values, we take the middle of each group. */
    st = prep(q, "SELECT max(step) FROM steps WHERE run_id = ?1 AND "
                 "attempt = ?2", args, 2, err, errlen);
    if (!st)
        return -1;
    r = next_row(q, st, err, errlen);
    int64_t last = r == 1 ? col_i64(st, 0) : SS_MISSING;
    sqlite3_finalize(st);
    if (r < 0)
        return -1;
    if (last == SS_MISSING)
        return 0;
    args[2] = last - SS_QUERY_RANK_MEDIAN_STEPS + 1;
    st = prep(q, "SELECT rank, step_ns FROM rank_steps WHERE run_id = ?1 "
                 "AND attempt = ?2 AND step >= ?3 AND step_ns IS NOT NULL "
                 "ORDER BY rank, step_ns", args, 3, err, errlen);
    if (!st)
        return -1;
    int64_t *g = NULL;
    size_t n = 0, cap = 0;
    int64_t cur = -1;
    for (;;) {
        r = next_row(q, st, err, errlen);
        int64_t rank = r == 1 ? sqlite3_column_int64(st, 0) : -1;
        if ((r != 1 || rank != cur) && cur >= 0 && cur < world)
            k[cur].median = pct(g, n, 50);
        if (r != 1)
            break;
        if (rank != cur) {
            cur = rank;
            n = 0;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t *h = realloc(g, cap * sizeof *h);
            if (!h) {
                r = oom(err, errlen);
                break;
            }
            g = h;
        }
        g[n++] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    free(g);
    return r < 0 ? -1 : 0;
}

/* Seconds with 3 decimals; null when negative (unknown). */
static void json_secs(ss_buf *b, double s)
{
    if (s < 0)
        ss_buf_puts(b, "null");
    else
        ss_buf_printf(b, "%.3f", s);
}

int ss_query_ranks(ss_query *q, int64_t run_id, int64_t attempt,
                   ss_live *live, ss_buf *out, char *err, size_t errlen)
{
    int64_t world;
    int rc = run_attempt(q, run_id, attempt, &attempt, &world, err, errlen);
    if (rc != 0)
        return rc;
    rank_row *k = calloc(world ? (size_t)world : 1, sizeof *k);
    if (!k)
        return oom(err, errlen);
    for (int64_t i = 0; i < world; i++) {
        rank_row *x = &k[i];
        x->pid = x->exit_code = x->signal = x->last_step = SS_MISSING;
        x->dropped_events = x->dropped_records = SS_MISSING;
        x->max_rss = x->median = SS_MISSING;
    }
    rc = load_ranks(q, run_id, attempt, k, world, err, errlen);
    int is_live = rc == 0 && live_is(live, run_id);
    if (rc == 0) {
        ss_buf_puts(out, "{\"ranks\":[");
        for (int64_t i = 0; i < world; i++) {
            rank_row *x = &k[i];
            ss_live_rank_info li;
            int have = is_live && ss_live_rank_get(live, (uint32_t)i, &li) == 0;
            const char *state = x->state, *host = x->host;
            int64_t pid = x->pid, code = x->exit_code, sig = x->signal;
            int64_t last = x->last_step, dev = x->dropped_events,
                    drec = x->dropped_records, cur = SS_MISSING;
            if (have) {
                if (strcmp(li.state, "starting") != 0 || !state)
                    state = li.state;
                if (li.host[0])
                    host = li.host;
                if (li.pid >= 0)
                    pid = li.pid;
                if (li.last_step >= 0 && (last == SS_MISSING ||
                                          li.last_step > last))
                    last = li.last_step;
                if (li.current_step >= 0)
                    cur = li.current_step;
                if (li.term_signal >= 0) {
                    code = li.exit_code >= 0 ? li.exit_code : SS_MISSING;
                    sig = li.term_signal;
                }
                if (li.dropped_events >= 0)
                    dev = li.dropped_events;
                if (li.dropped_records >= 0)
                    drec = li.dropped_records;
            }
            ss_buf_printf(out, "%s{\"rank\":%" PRId64 ",\"state\":",
                          i ? "," : "", i);
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
            ss_buf_json_str(out, have && li.phase[0] ? li.phase : NULL);
            ss_buf_puts(out, ",\"phase_s\":");
            json_secs(out, have && li.phase[0] ? li.phase_s : -1);
            ss_buf_puts(out, ",\"last_heard_s\":");
            json_secs(out, have ? li.last_heard_s : -1);
            ss_buf_puts(out, ",\"exit_code\":");
            ss_buf_json_int(out, code);
            ss_buf_puts(out, ",\"signal\":");
            ss_buf_json_int(out, sig == 0 ? SS_MISSING : sig);
            ss_buf_puts(out, ",\"median_step_ms\":");
            ss_buf_json_ms(out, x->median);
            ss_buf_puts(out, ",\"max_rss_bytes\":");
            ss_buf_json_int(out, x->max_rss);
            ss_buf_puts(out, ",\"dropped_events\":");
            ss_buf_json_int(out, dev);
            ss_buf_puts(out, ",\"dropped_records\":");
            ss_buf_json_int(out, drec);
            ss_buf_puts(out, "}");
        }
        ss_buf_puts(out, "]}");
    }
    for (int64_t i = 0; i < world; i++) {
        free(k[i].host);
        free(k[i].state);
    }
    free(k);
    return finish(out, rc, err, errlen);
}

/* ---- findings and events ---- */

/* The finding object from its parts; EVIDENCE is a JSON object. */
static void finding_object(ss_buf *b, int64_t id, const char *kind,
                           const char *severity, const char *ranks_csv,
                           const char *phase, int64_t first, int64_t last,
                           const char *evidence, const char *message)
{
    ss_buf_printf(b, "{\"id\":%" PRId64 ",\"kind\":", id);
    ss_buf_json_str(b, kind);
    ss_buf_puts(b, ",\"severity\":");
    ss_buf_json_str(b, severity);
    ss_buf_printf(b, ",\"ranks\":[%s],\"phase\":", ranks_csv ? ranks_csv : "");
    ss_buf_json_str(b, phase);
    ss_buf_puts(b, ",\"first_step\":");
    ss_buf_json_int(b, first);
    ss_buf_puts(b, ",\"last_step\":");
    ss_buf_json_int(b, last);
    ss_buf_printf(b, ",\"evidence\":%s,\"message\":", evidence);
    ss_buf_json_str(b, message);
    ss_buf_puts(b, "}");
}

void ss_query_finding_object(ss_buf *out, const ss_finding *f)
{
    char ranks[SS_FINDING_MAX_RANKS * 12 + 1] = "";
    size_t len = 0;
    for (uint32_t i = 0; i < f->n_ranks && i < SS_FINDING_MAX_RANKS; i++)
        len += (size_t)snprintf(ranks + len, sizeof ranks - len,
                                i ? ",%" PRId32 : "%" PRId32, f->ranks[i]);
    /* The detectors write a compact object (what the store keeps
     * verbatim); anything else would not be one. */
    char ev[sizeof f->evidence_json];
    snprintf(ev, sizeof ev, "%s", f->evidence_json);
    size_t n = strlen(ev);
    int object = n >= 2 && ev[0] == '{' && ev[n - 1] == '}';
    char phase[sizeof f->phase];
    snprintf(phase, sizeof phase, "%s", f->phase);
    char kind[sizeof f->kind], message[sizeof f->message];
    snprintf(kind, sizeof kind, "%s", f->kind);
    snprintf(message, sizeof message, "%s", f->message);
    finding_object(out, f->id, kind,
                   f->severity == SS_CRITICAL ? "critical" : "warning", ranks,
                   phase[0] ? phase : NULL, (int64_t)f->first_step,
                   (int64_t)f->last_step, object ? ev : "{}", message);
}

int ss_query_findings(ss_query *q, int64_t run_id, int64_t attempt,
                      ss_buf *out, char *err, size_t errlen)
{
    int64_t world;
    int rc = run_attempt(q, run_id, attempt, &attempt, &world, err, errlen);
    if (rc != 0)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(q,
        "SELECT finding_id, kind, severity, "
        "CASE WHEN json_valid(ranks) THEN (SELECT group_concat(value, ',') "
        "FROM json_each(findings.ranks) WHERE type = 'integer') END, "
        "phase, first_step, last_step, "
        "CASE WHEN json_valid(evidence) AND json_type(evidence) = 'object' "
        "THEN json(evidence) ELSE '{}' END, message "
        "FROM findings WHERE run_id = ?1 AND attempt = ?2 "
        "ORDER BY severity = 'critical' DESC, first_step, finding_id",
        args, 2, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    ss_buf_puts(out, "{\"findings\":[");
    int r, n = 0;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        if (n++)
            ss_buf_puts(out, ",");
        finding_object(out, sqlite3_column_int64(st, 0), col_text(st, 1),
                       col_text(st, 2), col_text(st, 3), col_text(st, 4),
                       col_i64(st, 5), col_i64(st, 6), col_text(st, 7),
                       col_text(st, 8));
    }
    sqlite3_finalize(st);
    ss_buf_puts(out, "]}");
    return finish(out, r < 0 ? SS_QUERY_ERROR : 0, err, errlen);
}

int ss_query_events(ss_query *q, int64_t run_id, int64_t after, int64_t limit,
                    ss_buf *out, char *err, size_t errlen)
{
    int64_t attempt, world;
    int rc = run_attempt(q, run_id, -1, &attempt, &world, err, errlen);
    if (rc != 0)
        return rc;
    int64_t args[3] = {run_id, after, limit};
    sqlite3_stmt *st = prep(q,
        "SELECT id, at, kind, rank, message FROM events WHERE run_id = ?1 "
        "AND id > ?2 ORDER BY id LIMIT ?3", args, 3, err, errlen);
    if (!st)
        return SS_QUERY_ERROR;
    ss_buf_puts(out, "{\"events\":[");
    int r, n = 0;
    while ((r = next_row(q, st, err, errlen)) == 1) {
        ss_buf_printf(out, "%s{\"id\":%" PRId64 ",\"at\":", n++ ? "," : "",
                      (int64_t)sqlite3_column_int64(st, 0));
        ss_buf_json_time(out, col_i64(st, 1));
        ss_buf_puts(out, ",\"kind\":");
        ss_buf_json_str(out, col_text(st, 2));
        ss_buf_puts(out, ",\"rank\":");
        ss_buf_json_int(out, col_i64(st, 3));
        ss_buf_puts(out, ",\"message\":");
        ss_buf_json_str(out, col_text(st, 4));
        ss_buf_puts(out, "}");
    }
    sqlite3_finalize(st);
    ss_buf_puts(out, "]}");
    return finish(out, r < 0 ? SS_QUERY_ERROR : 0, err, errlen);
}
