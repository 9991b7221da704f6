/*
 * reader.c - the store's read API (reader.h): opening, errors, the one
 * row-reading helper, and the loaders of runs and attempts.
 *
 * Every query a view runs against the store is in reader*.c
 * (reader_internal.h lists them), over one read-only connection opened
 * by ss_schema_open_readonly (store_schema.c), which falls back to an
 * immutable open where SQLite cannot create a WAL index (a directory the
 * user cannot write, a read-only mount).  A store of an older schema is
 * read as it is: the columns later versions added are selected as NULL
 * (they read as missing), so nothing is ever migrated here.
 *
 * Every loader reads its rows through ss__rd_each (or ss__rd_collect,
 * ss__rd_one, built on it): prepare with int64 (and one text) parameters,
 * step, hand each row to the loader's row function, finalize, and keep
 * the reason of an error on the reader.  Columns are read as
 * SS_MISSING-aware integers or copied strings.
 */
#include "reader.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"
#include "pg_conn.h"
#include "pg_mirror.h"
#include "reader_internal.h"
#include "runlock.h"
#include "store_access.h"
#include "store_files.h"
#include "store_schema.h"

/* ---- errors ---- */

int ss__rd_fail(ss_reader *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return code;
}

static int db_fail(ss_reader *r)
{
    return ss__rd_fail(r, SS_READ_ERROR, "%s: cannot read the store: %s",
                       r->path, sqlite3_errmsg(r->db));
}

int ss__rd_oom(ss_reader *r)
{
    return ss__rd_fail(r, SS_READ_ERROR, "out of memory");
}

/* ---- the row helper ---- */

sqlite3_stmt *ss__rd_prepare(ss_reader *r, const ss__rd_query *q)
{
    sqlite3_stmt *st = NULL;
    r->err[0] = '\0';
    if (sqlite3_prepare_v2(r->db, q->sql, -1, &st, NULL) != SQLITE_OK) {
        ss__rd_fail(r, SS_READ_ERROR, "%s: cannot query the store: %s",
                    r->path, sqlite3_errmsg(r->db));
        sqlite3_finalize(st);
        return NULL;
    }
    for (int i = 0; i < q->n_args; i++)
        sqlite3_bind_int64(st, i + 1, q->args[i]);
    if (q->text)
        sqlite3_bind_text(st, q->text_at, q->text, -1, SQLITE_STATIC);
    return st;
}

int ss__rd_step(ss_reader *r, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_fail(r);
}

/* ss__rd_each, counting the rows handed to EACH into *ROWS. */
static int each_row(ss_reader *r, const ss__rd_query *q, ss__rd_row_fn each,
                    void *ctx, size_t max_rows, size_t *rows)
{
    *rows = 0;
    sqlite3_stmt *st = ss__rd_prepare(r, q);
    if (!st)
        return SS_READ_ERROR;
    int rc = 0;
    while (*rows < max_rows && (rc = ss__rd_step(r, st)) == 1) {
        (*rows)++;
        rc = each(r, st, ctx);
        if (rc != 0)
            break;
    }
    sqlite3_finalize(st);
    return rc < 0 ? SS_READ_ERROR : 0;
}

int ss__rd_each(ss_reader *r, const ss__rd_query *q, ss__rd_row_fn each,
                void *ctx)
{
    size_t rows;
    return each_row(r, q, each, ctx, SIZE_MAX, &rows);
}

int ss__rd_one(ss_reader *r, const ss__rd_query *q, ss__rd_row_fn each,
               void *ctx)
{
    size_t rows;
    int rc = each_row(r, q, each, ctx, 1, &rows);
    return rc < 0 ? rc : rows == 1;
}

/* The state of one ss__rd_collect. */
typedef struct {
    const ss__rd_rows *how;
    void *ctx;
    char *rows;
    size_t n, cap;
} collect_ctx;

static int collect_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    collect_ctx *c = arg;
    if (ss__rd_grow((void **)&c->rows, c->how->size, c->n, &c->cap) != 0)
        return ss__rd_oom(r);
    char *elem = c->rows + c->n * c->how->size;
    memset(elem, 0, c->how->size);
    c->n++; /* counted before FILL, so a half-filled one is freed too */
    return c->how->fill(r, st, elem, c->ctx);
}

int ss__rd_collect(ss_reader *r, const ss__rd_query *q,
                   const ss__rd_rows *how, void *ctx, void *rows, size_t *n)
{
    collect_ctx c = {how, ctx, NULL, 0, 0};
    int rc = ss__rd_each(r, q, collect_row, &c);
    if (rc < 0) {
        if (how->free_rows)
            how->free_rows(c.rows, c.n);
        else
            free(c.rows);
        c.rows = NULL;
        c.n = 0;
    }
    *(void **)rows = c.rows;
    *n = c.n;
    return rc;
}

static int first_i64(ss_reader *r, sqlite3_stmt *st, void *out)
{
    (void)r;
    *(int64_t *)out = ss__rd_col_i64(st, 0);
    return 0;
}

int ss__rd_i64(ss_reader *r, const ss__rd_query *q, int64_t *out)
{
    *out = SS_MISSING;
    return ss__rd_one(r, q, first_i64, out) < 0 ? SS_READ_ERROR : 0;
}

int ss__rd_run_exists(ss_reader *r, int64_t run_id)
{
    int64_t one;
    if (ss__rd_i64(r, &(ss__rd_query){"SELECT 1 FROM runs WHERE id = ?1",
                                      &run_id, 1, NULL, 0},
                   &one))
        return SS_READ_ERROR;
    if (one == SS_MISSING)
        return ss__rd_fail(r, SS_READ_NOT_FOUND, "no run %" PRId64 " in %s",
                           run_id, r->path);
    return 0;
}

/* ---- columns and arrays ---- */

int64_t ss__rd_col_i64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? SS_MISSING
               : sqlite3_column_int64(st, i);
}

int ss__rd_col_dup(sqlite3_stmt *st, int i, char **out)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    *out = t ? strdup((const char *)t) : NULL;
    return t && !*out ? -1 : 0;
}

int ss__rd_grow(void **arr, size_t size, size_t n, size_t *cap)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, c * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

int ss__rd_parse_csv(const char *csv, int64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (const char *p = csv; p && *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        if (ss__rd_grow((void **)out, sizeof **out, *n, &cap) != 0) {
            free(*out);
            *out = NULL;
            *n = 0;
            return -1;
        }
        (*out)[(*n)++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

int64_t ss__rd_intern(char ***names, size_t *n, size_t *cap,
                      const char *name, size_t hint)
{
    for (size_t k = 0; k < *n; k++) {
        size_t i = (hint + k) % *n;
        if (strcmp((*names)[i], name) == 0)
            return (int64_t)i;
    }
    if (ss__rd_grow((void **)names, sizeof **names, *n, cap) != 0)
        return -1;
    char *copy = strdup(name);
    if (!copy)
        return -1;
    (*names)[*n] = copy;
    return (int64_t)(*n)++;
}

void ss__rd_reverse(void *v, size_t size, size_t n)
{
    unsigned char *a = v;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned char *x = a + i * size, *y = a + (n - 1 - i) * size;
        for (size_t b = 0; b < size; b++) {
            unsigned char t = x[b];
            x[b] = y[b];
            y[b] = t;
        }
    }
}

/* ---- opening ---- */

ss_reader *ss_reader_open(const char *path, char *err, size_t errlen)
{
    ss_reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (path) {
        snprintf(r->path, sizeof r->path, "%s", path);
    } else if (ss_store_default_path(r->path, sizeof r->path) != 0) {
        snprintf(err, errlen, "neither XDG_DATA_HOME nor HOME is set: use "
                              "--db PATH");
        free(r);
        return NULL;
    }
    if (ss_pg_is_uri(r->path)) {
        /* A team database reads through its local copy (pg_mirror.h). */
        char copy[4096];
        if (ss_pg_mirror_path(r->path, copy, sizeof copy, err, errlen) != 0) {
            free(r);
            return NULL;
        }
        r->team = 1;
        r->version = ss_schema_open_readonly(copy, &r->db, err, errlen);
        if (r->version < 0) {
            free(r);
            return NULL;
        }
    } else {
        r->version = ss_schema_open_readonly(r->path, &r->db, err, errlen);
    }
    if (r->version < 0) {
        ss_store_access_problem(r->path, 0, err, errlen); /* the likely cause */
        free(r);
        return NULL;
    }
    if (r->version < SS_READER_OLDEST_SCHEMA) {
        snprintf(err, errlen, "%s is a store of schema version %d, older "
                 "than this stepscope reads: `stepscope upgrade --db %s` "
                 "brings it up to date", r->path, r->version, r->path);
        ss_reader_close(r);
        return NULL;
    }
    return r;
}

void ss_reader_close(ss_reader *r)
{
    if (!r)
        return;
    sqlite3_close(r->db);
    free(r);
}

const char *ss_reader_path(const ss_reader *r)
{
    return r->path;
}

int ss_reader_schema_version(const ss_reader *r)
{
    return r->version;
}

const char *ss_reader_errmsg(const ss_reader *r)
{
    return r->err;
}

static int progress_cb(void *arg)
{
    ss_reader *r = arg;
    r->tick(r->tick_arg);
    return 0;
}

void ss_reader_set_progress(ss_reader *r, void (*tick)(void *arg), void *arg)
{
    r->tick = tick;
    r->tick_arg = arg;
    sqlite3_progress_handler(r->db, tick ? 100000 : 0,
                             tick ? progress_cb : NULL, r);
}

/* ---- runs ---- */

#define RUN_SELECT_COLS(dropped_vectors)                                      \
    "SELECT r.id, r.uuid, r.name, r.command, r.host, r.status, "              \
    "r.world_size, r.exit_code, r.started_at, r.ended_at, "                   \
    "r.dropped_events, r.dropped_records, r.dropped_rank_steps, "             \
    "(SELECT count(*) FROM steps s WHERE s.run_id = r.id), "                  \
    "(SELECT count(*) FROM findings f WHERE f.run_id = r.id), "               \
    dropped_vectors " FROM runs r "
/* RUN_SELECT followed by TAIL, for R's schema version. */
#define RUN_SELECT(tail)                                                      \
    (r->version >= SCHEMA_VALUES                                              \
         ? RUN_SELECT_COLS("r.dropped_vectors") tail                          \
         : RUN_SELECT_COLS("NULL") tail)

/* Fills the ss_run_row RUN (zeroed) from a RUN_SELECT row of R's store; a
 * run stored as running whose controller is gone reads as interrupted
 * (runlock.h).  Returns 0 or SS_READ_ERROR (out of memory; RUN cleared). */
static int run_fill(ss_reader *r, sqlite3_stmt *st, void *elem, void *ctx)
{
    (void)ctx;
    ss_run_row *run = elem;
    run->id = sqlite3_column_int64(st, 0);
    int bad = ss__rd_col_dup(st, 1, &run->uuid) |
              ss__rd_col_dup(st, 2, &run->name) |
              ss__rd_col_dup(st, 3, &run->command) |
              ss__rd_col_dup(st, 4, &run->host) |
              ss__rd_col_dup(st, 5, &run->status);
    run->world_size = ss__rd_col_i64(st, 6);
    run->exit_code = ss__rd_col_i64(st, 7);
    run->started_at = ss__rd_col_i64(st, 8);
    run->ended_at = ss__rd_col_i64(st, 9);
    run->dropped_events = ss__rd_col_i64(st, 10);
    run->dropped_records = ss__rd_col_i64(st, 11);
    run->dropped_rank_steps = ss__rd_col_i64(st, 12);
    run->steps = sqlite3_column_int64(st, 13);
    run->findings = sqlite3_column_int64(st, 14);
    run->dropped_vectors = ss__rd_col_i64(st, 15);
    if (!bad && !r->team && run->status && run->uuid &&
        strcmp(ss_run_status_now(r->path, run->uuid, run->status),
               run->status) != 0) {
        free(run->status);
        run->status = strdup("interrupted");
        bad = !run->status;
    }
    if (bad) {
        ss_run_row_clear(run);
        return ss__rd_oom(r);
    }
    return 0;
}

void ss_run_row_clear(ss_run_row *run)
{
    if (!run)
        return;
    free(run->uuid);
    free(run->name);
    free(run->command);
    free(run->host);
    free(run->status);
    memset(run, 0, sizeof *run);
}

void ss_run_rows_free(ss_run_row *runs, size_t n)
{
    for (size_t i = 0; runs && i < n; i++)
        ss_run_row_clear(&runs[i]);
    free(runs);
}

static void free_runs(void *rows, size_t n)
{
    ss_run_rows_free(rows, n);
}

int ss_reader_runs(ss_reader *r, ss_run_row **runs, size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_run_row), run_fill, free_runs};
    ss__rd_query q = {RUN_SELECT("ORDER BY r.id"), NULL, 0, NULL, 0};
    return ss__rd_collect(r, &q, &how, NULL, runs, n);
}

static int run_one(ss_reader *r, sqlite3_stmt *st, void *run)
{
    return run_fill(r, st, run, NULL);
}

int ss_reader_run(ss_reader *r, int64_t run_id, ss_run_row *run)
{
    memset(run, 0, sizeof *run);
    int rc = ss__rd_one(r, &(ss__rd_query){RUN_SELECT("WHERE r.id = ?1"),
                                           &run_id, 1, NULL, 0},
                        run_one, run);
    if (rc == 0)
        return ss__rd_fail(r, SS_READ_NOT_FOUND, "no run %" PRId64 " in %s",
                           run_id, r->path);
    return rc < 0 ? rc : 0;
}

/* The by-name and by-uuid-prefix matches of a run spec. */
typedef struct {
    int64_t by_name, by_uuid, matches;
} spec_match;

static int spec_match_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    (void)r;
    spec_match *m = arg;
    m->by_name = ss__rd_col_i64(st, 0);
    m->by_uuid = ss__rd_col_i64(st, 1);
    m->matches = sqlite3_column_int64(st, 2);
    return 0;
}

int ss_reader_select_run(ss_reader *r, const char *spec, int64_t *run_id)
{
    int64_t id;
    if (!spec) {
        if (ss__rd_i64(r, &(ss__rd_query){"SELECT max(id) FROM runs", NULL,
                                          0, NULL, 0}, &id))
            return SS_READ_ERROR;
        if (id == SS_MISSING)
            return ss__rd_fail(r, SS_READ_NOT_FOUND, "no runs in %s yet "
                               "(`stepscope run` records one)", r->path);
        *run_id = id;
        return 0;
    }
    int64_t want;
    if (ss_parse_i64(spec, 1, INT64_MAX, &want) == 0) {
        if (ss__rd_i64(r, &(ss__rd_query){"SELECT id FROM runs WHERE id = ?1",
                                          &want, 1, NULL, 0},
                       &id))
            return SS_READ_ERROR;
        if (id != SS_MISSING) {
            *run_id = id;
            return 0;
        }
    }
    spec_match m = {SS_MISSING, SS_MISSING, 0};
    if (ss__rd_one(r, &(ss__rd_query){"SELECT (SELECT max(id) FROM runs "
                                      "WHERE name = ?1), max(id), count(*) "
                                      "FROM runs WHERE substr(uuid, 1, "
                                      "length(?1)) = ?1",
                                      NULL, 0, spec, 1},
                   spec_match_row, &m) < 0)
        return SS_READ_ERROR;
    if (m.by_name != SS_MISSING) {
        *run_id = m.by_name;
        return 0;
    }
    if (m.matches > 1)
        return ss__rd_fail(r, SS_READ_NOT_FOUND, "run '%s' is ambiguous: %"
                           PRId64 " runs in %s have a uuid starting with it; "
                           "give more of it or the run id", spec, m.matches,
                           r->path);
    if (m.matches == 1) {
        *run_id = m.by_uuid;
        return 0;
    }
    return ss__rd_fail(r, SS_READ_NOT_FOUND, "no run '%s' in %s; `stepscope "
                       "runs` lists them", spec, r->path);
}

int ss_reader_world_size(ss_reader *r, int64_t run_id, int64_t *world)
{
    *world = SS_MISSING;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    return ss__rd_i64(r, &(ss__rd_query){"SELECT world_size FROM runs "
                                         "WHERE id = ?1", &run_id, 1, NULL, 0},
                      world);
}

static int dup_first(ss_reader *r, sqlite3_stmt *st, void *out)
{
    return ss__rd_col_dup(st, 0, out) == 0 ? 0 : ss__rd_oom(r);
}

int ss_reader_run_fingerprint(ss_reader *r, int64_t run_id, char **json)
{
    *json = NULL;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_FINGERPRINT)
        return rc;
    rc = ss__rd_one(r, &(ss__rd_query){"SELECT fingerprint FROM runs "
                                       "WHERE id = ?1", &run_id, 1, NULL, 0},
                    dup_first, json);
    return rc < 0 ? rc : 0;
}

/* ---- attempts ---- */

static int attempt_fill(ss_reader *r, sqlite3_stmt *st, void *elem,
                        void *ctx)
{
    (void)r, (void)ctx;
    ss_attempt_row *a = elem;
    a->attempt = sqlite3_column_int64(st, 0);
    a->started_at = ss__rd_col_i64(st, 1);
    a->ended_at = ss__rd_col_i64(st, 2);
    const unsigned char *cause = sqlite3_column_text(st, 3);
    if (cause)
        snprintf(a->cause, sizeof a->cause, "%s", (const char *)cause);
    a->first_step = ss__rd_col_i64(st, 4);
    a->last_step = ss__rd_col_i64(st, 5);
    a->resumed_from = ss__rd_col_i64(st, 6);
    return 0;
}

int ss_reader_attempts(ss_reader *r, int64_t run_id, ss_attempt_row **rows,
                       size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_attempt_row), attempt_fill,
                                    NULL};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    const char *sql = r->version >= SS_SCHEMA_ATTEMPT_FACTS
                          ? "SELECT attempt, started_at, ended_at, cause, "
                            "first_step, last_step, resumed_from FROM "
                            "attempts WHERE run_id = ?1 ORDER BY attempt"
                          : "SELECT attempt, started_at, NULL, NULL, NULL, "
                            "NULL, NULL FROM attempts WHERE run_id = ?1 "
                            "ORDER BY attempt";
    return ss__rd_collect(r, &(ss__rd_query){sql, &run_id, 1, NULL, 0}, &how,
                          NULL, rows, n);
}

void ss_attempt_rows_free(ss_attempt_row *rows)
{
    free(rows);
}

int ss_reader_attempt(ss_reader *r, int64_t run_id, int64_t want,
                      int64_t *attempt, int64_t *n_attempts)
{
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t latest;
    if (ss__rd_i64(r, &(ss__rd_query){"SELECT max(a) FROM ("
                                      "SELECT max(attempt) a FROM attempts "
                                      "WHERE run_id = ?1 "
                                      "UNION ALL SELECT max(attempt) FROM "
                                      "steps WHERE run_id = ?1 "
                                      "UNION ALL SELECT max(attempt) FROM "
                                      "ranks WHERE run_id = ?1 "
                                      "UNION ALL SELECT max(attempt) FROM "
                                      "findings WHERE run_id = ?1)",
                                      &run_id, 1, NULL, 0},
                   &latest))
        return SS_READ_ERROR;
    if (latest == SS_MISSING || latest < 0)
        latest = 0;
    if (want > latest)
        return ss__rd_fail(r, SS_READ_NOT_FOUND, "run %" PRId64 " has no "
                           "attempt %" PRId64 " (attempts 0 to %" PRId64 ")",
                           run_id, want, latest);
    *attempt = want >= 0 ? want : latest;
    if (n_attempts)
        *n_attempts = latest + 1;
    return 0;
}
