/*
 * reader.c - the store's read API (reader.h): SQL in, plain C data out.
 *
 * Every query a view runs against the store is here, over one read-only
 * connection opened by ss_schema_open_readonly (store_schema.c), which
 * falls back to an immutable open where SQLite cannot create a WAL index
 * (a directory the user cannot write, a read-only mount).  A store of an
 * older schema is read as it is: the columns later versions added are
 * selected as NULL (they read as missing), so nothing is ever migrated
 * here.
 *
 * One private set of helpers prepares statements with int64 arguments,
 * steps them (1 row, 0 done, -1 error with the reason kept on the reader)
 * and reads columns as SS_MISSING-aware integers or copied strings.  The
 * JSON objects of rank_steps rows are parsed with cJSON into the cursor's
 * reusable arrays, names interned into a table that lives as long as the
 * cursor.
 */
#include "reader.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"
#include "runlock.h"
#include "stats.h"
#include "store.h"
#include "store_schema.h"

/* The oldest schema version read as it is.  Raise it only when a migration
 * removes or changes what the queries below read; a store older than this
 * is refused with a message naming `stepscope upgrade`. */
#define SS_READER_OLDEST_SCHEMA 1
/* The version that added rank_steps' timeline columns (begin_ns,
 * phase_starts, phase_counts, syncs), and the one that added metrics. */
#define SCHEMA_TIMELINES 2
#define SCHEMA_METRICS 3
#define SCHEMA_NAME_LIMIT 4
#define SCHEMA_FINGERPRINT 5
/* The version that added self time (step_phases.self_*,
 * rank_steps.phase_self). */
#define SCHEMA_SELF 6
#define SCHEMA_HOST SS_SCHEMA_HOST
/* The host columns of rank_steps, in ss_host_step's order (11). */
#define HOST_SELECT                                                           \
    "host_cpu_ns, host_runq_ns, host_stopped_ns, host_throttled_ns, "        \
    "host_nr_throttled, host_vol_switches, host_invol_switches, "             \
    "host_major_faults, host_psi_cpu_ns, host_psi_memory_ns, host_psi_io_ns"
#define HOST_SELECT_NONE                                                      \
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
#define HOST_FIELDS 11
#define SCHEMA_GPU SS_SCHEMA_GPU
#define SCHEMA_NODES SS_SCHEMA_NODES
#define SCHEMA_PROFILES SS_SCHEMA_PROFILES
/* The version that added vectors (rank_values, value_labels,
 * runs.dropped_vectors). */
#define SCHEMA_VALUES 13
/* The GPU columns, in ss_gpu_evidence's order from the index on (11). */
#define GPU_SELECT                                                            \
    "gpu_index, gpu_covered_ns, gpu_slowed_ns, gpu_power_cap_ns, "            \
    "gpu_thermal_ns, gpu_hw_slowdown_ns, gpu_sm_clock_mhz, "                  \
    "gpu_temperature_c, gpu_ecc_new, gpu_xid_new, gpu_last_xid"
#define GPU_SELECT_NONE HOST_SELECT_NONE
#define GPU_FIELDS 11

struct ss_reader {
    sqlite3 *db;
    int version;
    void (*tick)(void *);
    void *tick_arg;
    char path[4096];
    char err[1024];
};

/* ---- errors ---- */

static int fail(ss_reader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Keeps a reason on R and returns CODE. */
static int fail(ss_reader *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return code;
}

static int db_fail(ss_reader *r)
{
    return fail(r, SS_READ_ERROR, "%s: cannot read the store: %s", r->path,
                sqlite3_errmsg(r->db));
}

static int oom(ss_reader *r)
{
    return fail(r, SS_READ_ERROR, "out of memory");
}

/* ---- statements and columns ---- */

/* Prepares SQL, binding ARGS[0..N) to ?1..?N.  NULL with the reason kept
 * on R. */
static sqlite3_stmt *prep(ss_reader *r, const char *sql, const int64_t *args,
                          int n)
{
    sqlite3_stmt *st = NULL;
    r->err[0] = '\0';
    if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
        fail(r, SS_READ_ERROR, "%s: cannot query the store: %s", r->path,
             sqlite3_errmsg(r->db));
        sqlite3_finalize(st);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        sqlite3_bind_int64(st, i + 1, args[i]);
    return st;
}

/* Steps ST: 1 for a row, 0 at the end, SS_READ_ERROR with the reason. */
static int next_row(ss_reader *r, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return db_fail(r);
}

static int64_t col_i64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? SS_MISSING
               : sqlite3_column_int64(st, i);
}

/* A copy of text column I into *OUT (NULL for SQL NULL).  Returns 0, or -1
 * when memory ran out. */
static int col_dup(sqlite3_stmt *st, int i, char **out)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    *out = t ? strdup((const char *)t) : NULL;
    return t && !*out ? -1 : 0;
}

/* One integer (column 0 of the first row) into *OUT; SS_MISSING for NULL
 * or no row.  Returns 0 or SS_READ_ERROR. */
static int query_i64(ss_reader *r, const char *sql, const int64_t *args,
                     int n, int64_t *out)
{
    sqlite3_stmt *st = prep(r, sql, args, n);
    if (!st)
        return SS_READ_ERROR;
    int rc = next_row(r, st);
    *out = rc == 1 ? col_i64(st, 0) : SS_MISSING;
    sqlite3_finalize(st);
    return rc < 0 ? SS_READ_ERROR : 0;
}

/* Makes room for one more element in *ARR (SIZE bytes each, N used of
 * *CAP).  Returns 0 or -1 on out-of-memory. */
static int grow(void **arr, size_t size, size_t n, size_t *cap)
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

/* Parses "1,5,7" (a group_concat of integers) into a new array. */
static int parse_csv(const char *csv, int64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    for (const char *p = csv; p && *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        if (grow((void **)out, sizeof **out, *n, &cap) != 0) {
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

/* 0 when RUN_ID is a run, SS_READ_NOT_FOUND or SS_READ_ERROR. */
static int run_exists(ss_reader *r, int64_t run_id)
{
    int64_t one;
    if (query_i64(r, "SELECT 1 FROM runs WHERE id = ?1", &run_id, 1, &one))
        return SS_READ_ERROR;
    if (one == SS_MISSING)
        return fail(r, SS_READ_NOT_FOUND, "no run %" PRId64 " in %s", run_id,
                    r->path);
    return 0;
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
    r->version = ss_schema_open_readonly(r->path, &r->db, err, errlen);
    if (r->version < 0) {
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

/* Fills RUN from a RUN_SELECT row of R's store; a run stored as running
 * whose controller is gone reads as interrupted (runlock.h).  Returns 0 or
 * -1 (out of memory). */
static int run_from_row(ss_reader *r, sqlite3_stmt *st, ss_run_row *run)
{
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    int bad = col_dup(st, 1, &run->uuid) | col_dup(st, 2, &run->name) |
              col_dup(st, 3, &run->command) | col_dup(st, 4, &run->host) |
              col_dup(st, 5, &run->status);
    run->world_size = col_i64(st, 6);
    run->exit_code = col_i64(st, 7);
    run->started_at = col_i64(st, 8);
    run->ended_at = col_i64(st, 9);
    run->dropped_events = col_i64(st, 10);
    run->dropped_records = col_i64(st, 11);
    run->dropped_rank_steps = col_i64(st, 12);
    run->steps = sqlite3_column_int64(st, 13);
    run->findings = sqlite3_column_int64(st, 14);
    run->dropped_vectors = col_i64(st, 15);
    if (!bad && run->status && run->uuid &&
        strcmp(ss_run_status_now(r->path, run->uuid, run->status),
               run->status) != 0) {
        free(run->status);
        run->status = strdup("interrupted");
        bad = !run->status;
    }
    if (bad)
        ss_run_row_clear(run);
    return bad ? -1 : 0;
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

int ss_reader_runs(ss_reader *r, ss_run_row **runs, size_t *n)
{
    *runs = NULL;
    *n = 0;
    sqlite3_stmt *st = prep(r, RUN_SELECT("ORDER BY r.id"), NULL, 0);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    int rc;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)runs, sizeof **runs, *n, &cap) != 0 ||
            run_from_row(r, st, &(*runs)[*n]) != 0) {
            rc = oom(r);
            break;
        }
        (*n)++;
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_run_rows_free(*runs, *n);
        *runs = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

int ss_reader_run(ss_reader *r, int64_t run_id, ss_run_row *run)
{
    memset(run, 0, sizeof *run);
    sqlite3_stmt *st = prep(r, RUN_SELECT("WHERE r.id = ?1"), &run_id, 1);
    if (!st)
        return SS_READ_ERROR;
    int rc = next_row(r, st);
    if (rc == 1)
        rc = run_from_row(r, st, run) == 0 ? 0 : oom(r);
    else if (rc == 0)
        rc = fail(r, SS_READ_NOT_FOUND, "no run %" PRId64 " in %s", run_id,
                  r->path);
    sqlite3_finalize(st);
    return rc;
}

int ss_reader_select_run(ss_reader *r, const char *spec, int64_t *run_id)
{
    int64_t id;
    if (!spec) {
        if (query_i64(r, "SELECT max(id) FROM runs", NULL, 0, &id))
            return SS_READ_ERROR;
        if (id == SS_MISSING)
            return fail(r, SS_READ_NOT_FOUND, "no runs in %s yet (`stepscope "
                        "run` records one)", r->path);
        *run_id = id;
        return 0;
    }
    int64_t want;
    if (ss_parse_i64(spec, 1, INT64_MAX, &want) == 0) {
        if (query_i64(r, "SELECT id FROM runs WHERE id = ?1", &want, 1, &id))
            return SS_READ_ERROR;
        if (id != SS_MISSING) {
            *run_id = id;
            return 0;
        }
    }
    sqlite3_stmt *st = prep(r, "SELECT (SELECT max(id) FROM runs WHERE "
                               "name = ?1), max(id), count(*) FROM runs "
                               "WHERE substr(uuid, 1, length(?1)) = ?1",
                            NULL, 0);
    if (!st)
        return SS_READ_ERROR;
    sqlite3_bind_text(st, 1, spec, -1, SQLITE_STATIC);
    int64_t by_name = SS_MISSING, by_uuid = SS_MISSING, matches = 0;
    int rc = next_row(r, st);
    if (rc == 1) {
        by_name = col_i64(st, 0);
        by_uuid = col_i64(st, 1);
        matches = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (by_name != SS_MISSING) {
        *run_id = by_name;
        return 0;
    }
    if (matches > 1)
        return fail(r, SS_READ_NOT_FOUND, "run '%s' is ambiguous: %" PRId64
                    " runs in %s have a uuid starting with it; give more of "
                    "it or the run id", spec, matches, r->path);
    if (matches == 1) {
        *run_id = by_uuid;
        return 0;
    }
    return fail(r, SS_READ_NOT_FOUND, "no run '%s' in %s; `stepscope runs` "
                "lists them", spec, r->path);
}

/* ---- attempts ---- */

int ss_reader_attempts(ss_reader *r, int64_t run_id, ss_attempt_row **rows,
                       size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    sqlite3_stmt *st = prep(r, r->version >= SS_SCHEMA_ATTEMPT_FACTS
                                   ? "SELECT attempt, started_at, ended_at, "
                                     "cause, first_step, last_step, "
                                     "resumed_from FROM attempts "
                                     "WHERE run_id = ?1 ORDER BY attempt"
                                   : "SELECT attempt, started_at, NULL, NULL, "
                                     "NULL, NULL, NULL FROM attempts "
                                     "WHERE run_id = ?1 ORDER BY attempt",
                            &run_id, 1);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)rows, sizeof **rows, *n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_attempt_row *a = &(*rows)[(*n)++];
        memset(a, 0, sizeof *a);
        a->attempt = sqlite3_column_int64(st, 0);
        a->started_at = col_i64(st, 1);
        a->ended_at = col_i64(st, 2);
        const unsigned char *cause = sqlite3_column_text(st, 3);
        if (cause)
            snprintf(a->cause, sizeof a->cause, "%s", (const char *)cause);
        a->first_step = col_i64(st, 4);
        a->last_step = col_i64(st, 5);
        a->resumed_from = col_i64(st, 6);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

void ss_attempt_rows_free(ss_attempt_row *rows)
{
    free(rows);
}

int ss_reader_attempt(ss_reader *r, int64_t run_id, int64_t want,
                      int64_t *attempt, int64_t *n_attempts)
{
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t latest;
    if (query_i64(r, "SELECT max(a) FROM ("
                     "SELECT max(attempt) a FROM attempts WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM steps "
                     "WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM ranks "
                     "WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM findings "
                     "WHERE run_id = ?1)",
                  &run_id, 1, &latest))
        return SS_READ_ERROR;
    if (latest == SS_MISSING || latest < 0)
        latest = 0;
    if (want > latest)
        return fail(r, SS_READ_NOT_FOUND, "run %" PRId64 " has no attempt %"
                    PRId64 " (attempts 0 to %" PRId64 ")", run_id, want,
                    latest);
    *attempt = want >= 0 ? want : latest;
    if (n_attempts)
        *n_attempts = latest + 1;
    return 0;
}

/* ---- ranks ---- */

static void rank_row_init(ss_rank_row *k, int64_t rank)
{
    memset(k, 0, sizeof *k);
    k->rank = rank;
    k->pid = k->exit_code = k->term_signal = k->last_step = SS_MISSING;
    k->dropped_events = k->dropped_records = SS_MISSING;
    k->names_over_limit = k->values_over_limit = SS_MISSING;
    k->step_ns_max = k->max_rss_bytes = k->max_device_bytes = SS_MISSING;
    k->median_step_ns = k->p90_step_ns = SS_MISSING;
}

void ss_rank_rows_free(ss_rank_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].host);
        free(rows[i].state);
        for (size_t p = 0; p < rows[i].n_phase_medians; p++)
            free(rows[i].phase_median_ns[p].name);
        free(rows[i].phase_median_ns);
        for (size_t p = 0; p < rows[i].n_phase_self_medians; p++)
            free(rows[i].phase_self_median_ns[p].name);
        free(rows[i].phase_self_median_ns);
    }
    free(rows);
}

/* The value at nearest-rank percentile PERMILLE of sorted V[0..N). */
static int64_t sorted_pct(const int64_t *v, size_t n, unsigned permille)
{
    return n ? v[ss_nearest_rank(n, permille)] : SS_MISSING;
}

/* Per-rank step-time p50 / p90 over the kept rows at or after ARGS[2]. */
static int rank_medians(ss_reader *r, const int64_t args[3], ss_rank_row *k,
                        size_t world)
{
    sqlite3_stmt *st = prep(r, "SELECT rank, step_ns FROM rank_steps WHERE "
                               "run_id = ?1 AND attempt = ?2 AND step >= ?3 "
                               "AND step_ns IS NOT NULL "
                               "ORDER BY rank, step_ns",
                            args, 3);
    if (!st)
        return SS_READ_ERROR;
    int64_t *g = NULL, cur = -1;
    size_t n = 0, cap = 0;
    int rc;
    for (;;) {
        rc = next_row(r, st);
        int64_t rank = rc == 1 ? sqlite3_column_int64(st, 0) : -1;
        if ((rc != 1 || rank != cur) && cur >= 0 && (size_t)cur < world) {
            k[cur].median_step_ns = sorted_pct(g, n, 500);
            k[cur].p90_step_ns = sorted_pct(g, n, 900);
            k[cur].samples = (int64_t)n;
        }
        if (rc != 1)
            break;
        if (rank != cur) {
            cur = rank;
            n = 0;
        }
        if (grow((void **)&g, sizeof *g, n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        g[n++] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    free(g);
    return rc < 0 ? rc : 0;
}

/* Per-rank, per-phase p50 over the same rows, appended to each rank's
 * phase_median_ns (SELF: of self time, phase_self_median_ns) in name
 * order.  A row's self time of a phase is its phase_self entry, else (a
 * phase with nothing nested in it) its time; rows without phase_self have
 * none. */
static int rank_phase_medians(ss_reader *r, const int64_t args[3],
                              ss_rank_row *k, size_t world, int self)
{
    sqlite3_stmt *st = prep(r, self
        ? "SELECT r.rank, j.key, coalesce((SELECT s.value FROM "
          "json_each(r.phase_self) s WHERE s.key = j.key), j.value) v "
          "FROM rank_steps r, json_each(r.phases) j WHERE "
          "r.run_id = ?1 AND r.attempt = ?2 AND r.step >= ?3 AND "
          "r.phases IS NOT NULL AND json_valid(r.phases) AND "
          "r.phase_self IS NOT NULL AND json_valid(r.phase_self) AND "
          "j.type = 'integer' ORDER BY r.rank, j.key, v"
        : "SELECT r.rank, j.key, j.value FROM "
          "rank_steps r, json_each(r.phases) j WHERE "
          "r.run_id = ?1 AND r.attempt = ?2 AND "
          "r.step >= ?3 AND r.phases IS NOT NULL AND "
          "json_valid(r.phases) AND j.type = 'integer' "
          "ORDER BY r.rank, j.key, j.value",
        args, 3);
    if (!st)
        return SS_READ_ERROR;
    int64_t *g = NULL, cur = -1;
    size_t n = 0, cap = 0;
    char *key = NULL;
    int rc;
    for (;;) {
        rc = next_row(r, st);
        int64_t rank = rc == 1 ? sqlite3_column_int64(st, 0) : -1;
        const char *name = rc == 1 ? (const char *)sqlite3_column_text(st, 1)
                                   : NULL;
        int same = rc == 1 && rank == cur && key && name &&
                   strcmp(name, key) == 0;
        if (!same && key && cur >= 0 && (size_t)cur < world) {
            ss_rank_row *x = &k[cur];
            ss_named_i64 **list = self ? &x->phase_self_median_ns
                                       : &x->phase_median_ns;
            size_t *count = self ? &x->n_phase_self_medians
                                 : &x->n_phase_medians;
            ss_named_i64 *m = realloc(*list, (*count + 1) * sizeof *m);
            if (!m) {
                rc = oom(r);
                break;
            }
            *list = m;
            m[(*count)++] = (ss_named_i64){key, sorted_pct(g, n, 500)};
            key = NULL;
        }
        if (rc != 1)
            break;
        if (!same) {
            free(key);
            cur = rank;
            key = strdup(name ? name : "");
            n = 0;
            if (!key) {
                rc = oom(r);
                break;
            }
        }
        if (grow((void **)&g, sizeof *g, n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        g[n++] = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    free(key);
    free(g);
    return rc < 0 ? rc : 0;
}

int ss_reader_ranks(ss_reader *r, int64_t run_id, int64_t attempt,
                    int64_t since_step, unsigned flags, ss_rank_row **rows,
                    size_t *n)
{
    *rows = NULL;
    *n = 0;
    int64_t args[3] = {run_id, attempt, since_step};
    int64_t world, max_rank;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    if (query_i64(r, "SELECT world_size FROM runs WHERE id = ?1", args, 1,
                  &world))
        return SS_READ_ERROR;
    if (query_i64(r, "SELECT max(m) FROM (SELECT max(rank) m FROM ranks "
                     "WHERE run_id = ?1 AND attempt = ?2 UNION ALL "
                     "SELECT max(rank) FROM rank_totals WHERE run_id = ?1 "
                     "AND attempt = ?2)",
                  args, 2, &max_rank))
        return SS_READ_ERROR;
    if (world == SS_MISSING || world < 0)
        world = 0;
    if (max_rank != SS_MISSING && max_rank + 1 > world)
        world = max_rank + 1;
    if (world > SS_READ_MAX_RANKS)
        world = SS_READ_MAX_RANKS;
    ss_rank_row *k = calloc(world ? (size_t)world : 1, sizeof *k);
    if (!k)
        return oom(r);
    for (int64_t i = 0; i < world; i++)
        rank_row_init(&k[i], i);

    sqlite3_stmt *st = prep(r, r->version >= SCHEMA_NAME_LIMIT
                               ? "SELECT rank, host, state, pid, exit_code, "
                                 "term_signal, last_step, dropped_events, "
                                 "dropped_records, names_over_limit, "
                                 "values_over_limit FROM ranks "
                                 "WHERE run_id = ?1 AND attempt = ?2"
                               : "SELECT rank, host, state, pid, exit_code, "
                                 "term_signal, last_step, dropped_events, "
                                 "dropped_records, NULL, NULL FROM ranks "
                                 "WHERE run_id = ?1 AND attempt = ?2",
                            args, 2);
    rc = st ? 0 : SS_READ_ERROR;
    while (st && (rc = next_row(r, st)) == 1) {
        int64_t rank = sqlite3_column_int64(st, 0);
        if (rank < 0 || rank >= world)
            continue;
        ss_rank_row *x = &k[rank];
        free(x->host);
        free(x->state);
        if (col_dup(st, 1, &x->host) | col_dup(st, 2, &x->state)) {
            rc = oom(r);
            break;
        }
        x->pid = col_i64(st, 3);
        x->exit_code = col_i64(st, 4);
        x->term_signal = col_i64(st, 5);
        x->last_step = col_i64(st, 6);
        x->dropped_events = col_i64(st, 7);
        x->dropped_records = col_i64(st, 8);
        x->names_over_limit = col_i64(st, 9);
        x->values_over_limit = col_i64(st, 10);
    }
    sqlite3_finalize(st);

    if (rc == 0) {
        st = prep(r, "SELECT rank, steps, step_ns_n, step_ns_sum, "
                     "step_ns_max, max_rss_bytes, max_device_bytes, "
                     "last_step FROM rank_totals "
                     "WHERE run_id = ?1 AND attempt = ?2",
                  args, 2);
        rc = st ? 0 : SS_READ_ERROR;
        while (st && (rc = next_row(r, st)) == 1) {
            int64_t rank = sqlite3_column_int64(st, 0);
            if (rank < 0 || rank >= world)
                continue;
            ss_rank_row *x = &k[rank];
            x->steps = sqlite3_column_int64(st, 1);
            x->step_ns_n = sqlite3_column_int64(st, 2);
            x->step_ns_sum = sqlite3_column_int64(st, 3);
            x->step_ns_max = col_i64(st, 4);
            x->max_rss_bytes = col_i64(st, 5);
            x->max_device_bytes = col_i64(st, 6);
            int64_t last = col_i64(st, 7);
            if (last != SS_MISSING &&
                (x->last_step == SS_MISSING || last > x->last_step))
                x->last_step = last;
        }
        sqlite3_finalize(st);
    }
    if (rc == 0 && !(flags & SS_RANKS_NO_MEDIANS))
        rc = rank_medians(r, args, k, (size_t)world);
    if (rc == 0 && (flags & SS_RANKS_PHASE_MEDIANS) &&
        !(flags & SS_RANKS_NO_MEDIANS))
        rc = rank_phase_medians(r, args, k, (size_t)world, 0);
    if (rc == 0 && (flags & SS_RANKS_PHASE_MEDIANS) &&
        !(flags & SS_RANKS_NO_MEDIANS) && r->version >= SCHEMA_SELF)
        rc = rank_phase_medians(r, args, k, (size_t)world, 1);
    if (rc < 0) {
        ss_rank_rows_free(k, (size_t)world);
        return rc;
    }
    *rows = k;
    *n = (size_t)world;
    return 0;
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

/* The index of NAME in the table *NAMES (*N used of *CAP), added when new;
 * HINT is where the search starts (names recur in the same order step
 * after step).  Returns the index or -1 on out-of-memory. */
static int64_t intern(char ***names, size_t *n, size_t *cap, const char *name,
                      size_t hint)
{
    for (size_t k = 0; k < *n; k++) {
        size_t i = (hint + k) % *n;
        if (strcmp((*names)[i], name) == 0)
            return (int64_t)i;
    }
    if (grow((void **)names, sizeof **names, *n, cap) != 0)
        return -1;
    char *copy = strdup(name);
    if (!copy)
        return -1;
    (*names)[*n] = copy;
    return (int64_t)(*n)++;
}

/* The step rows of WINDOW into S->steps, ascending. */
static int load_step_rows(ss_reader *r, const int64_t args2[2],
                          const ss_step_window *w, ss_steps *s)
{
    int64_t from = w ? w->from : -1, to = w ? w->to : -1;
    int64_t limit = w && w->limit > 0 ? w->limit : -1;
    int descending = from < 0 && limit > 0;
    int64_t args[5] = {args2[0], args2[1], from < 0 ? INT64_MIN : from,
                       to < 0 ? INT64_MAX : to, limit};
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
    sqlite3_stmt *st = prep(r, sql, args, 5);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    int rc;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)&s->steps, sizeof *s->steps, s->n_steps, &cap)) {
            rc = oom(r);
            break;
        }
        ss_step_row *x = &s->steps[s->n_steps];
        memset(x, 0, sizeof *x);
        x->step = sqlite3_column_int64(st, 0);
        x->finalized_at = col_i64(st, 1);
        x->world_size = col_i64(st, 2);
        x->n_present = col_i64(st, 3);
        x->n_missing = col_i64(st, 4);
        if (parse_csv((const char *)sqlite3_column_text(st, 5),
                      &x->missing_ranks, &x->n_missing_ranks) != 0) {
            rc = oom(r);
            break;
        }
        int64_t *v[] = {&x->step_n, &x->step_min, &x->step_median,
                        &x->step_p90, &x->step_max, &x->step_worst_rank,
                        &x->rss_median, &x->rss_max, &x->rss_worst_rank,
                        &x->device_median, &x->device_max,
                        &x->device_worst_rank};
        for (int i = 0; i < 12; i++)
            *v[i] = col_i64(st, 6 + i);
        s->n_steps++;
    }
    sqlite3_finalize(st);
    if (rc < 0)
        return rc;
    if (descending) /* read newest first: put in ascending order */
        for (size_t i = 0; i < s->n_steps / 2; i++) {
            ss_step_row t = s->steps[i];
            s->steps[i] = s->steps[s->n_steps - 1 - i];
            s->steps[s->n_steps - 1 - i] = t;
        }
    return 0;
}

/* The phase (SYNCS == 0) or sync rows of S's steps, attached to them. */
static int load_step_parts(ss_reader *r, const int64_t args2[2], int syncs,
                           ss_steps *s, size_t *name_cap)
{
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
    sqlite3_stmt *st = prep(r, syncs
        ? "SELECT step, sync, n, skew_ns, late_ns, worst_rank FROM "
          "step_syncs WHERE run_id = ?1 AND attempt = ?2 AND step BETWEEN "
          "?3 AND ?4 ORDER BY step, sync"
        : sql, args, 4);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0, at = 0, hint = 0;
    int rc;
    while ((rc = next_row(r, st)) == 1) {
        int64_t step = sqlite3_column_int64(st, 0);
        while (at < s->n_steps && s->steps[at].step < step)
            at++;
        if (at == s->n_steps)
            break;
        if (s->steps[at].step != step)
            continue; /* a step outside the window */
        const char *name = (const char *)sqlite3_column_text(st, 1);
        int64_t idx = intern(&s->names, &s->n_names, name_cap,
                             name ? name : "?", hint);
        int full = syncs ? grow((void **)&s->syncs, sizeof *s->syncs,
                                s->n_syncs, &cap)
                         : grow((void **)&s->phases, sizeof *s->phases,
                                s->n_phases, &cap);
        if (idx < 0 || full) {
            rc = oom(r);
            break;
        }
        hint = (size_t)idx + 1;
        ss_step_row *x = &s->steps[at];
        if (syncs) {
            if (x->n_syncs == 0)
                x->sync0 = s->n_syncs;
            x->n_syncs++;
            s->syncs[s->n_syncs++] = (ss_step_sync){
                (uint32_t)idx, sqlite3_column_int64(st, 2), col_i64(st, 3),
                col_i64(st, 4), col_i64(st, 5)};
        } else {
            if (x->n_phases == 0)
                x->phase0 = s->n_phases;
            x->n_phases++;
            int64_t self_n = col_i64(st, 8);
            s->phases[s->n_phases++] = (ss_step_phase){
                (uint32_t)idx, sqlite3_column_int64(st, 2), col_i64(st, 3),
                col_i64(st, 4), col_i64(st, 5), col_i64(st, 6),
                col_i64(st, 7), self_n == SS_MISSING ? 0 : self_n,
                col_i64(st, 9), col_i64(st, 10), col_i64(st, 11),
                col_i64(st, 12), col_i64(st, 13)};
        }
    }
    sqlite3_finalize(st);
    return rc < 0 ? rc : 0;
}

int ss_reader_steps(ss_reader *r, int64_t run_id, int64_t attempt,
                    const ss_step_window *window, unsigned flags,
                    ss_steps *out)
{
    memset(out, 0, sizeof *out);
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    size_t name_cap = 0;
    rc = load_step_rows(r, args, window, out);
    if (rc == 0 && out->n_steps && (flags & SS_STEPS_PHASES))
        rc = load_step_parts(r, args, 0, out, &name_cap);
    if (rc == 0 && out->n_steps && (flags & SS_STEPS_SYNCS))
        rc = load_step_parts(r, args, 1, out, &name_cap);
    if (rc < 0)
        ss_steps_free(out);
    return rc;
}

int ss_reader_step_counts(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_step_counts *out)
{
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r, "SELECT count(*), min(step), max(step), "
                               "coalesce(sum(n_missing > 0), 0) FROM steps "
                               "WHERE run_id = ?1 AND attempt = ?2",
                            args, 2);
    if (!st)
        return SS_READ_ERROR;
    rc = next_row(r, st);
    if (rc == 1) {
        out->steps = sqlite3_column_int64(st, 0);
        out->first = col_i64(st, 1);
        out->last = col_i64(st, 2);
        out->with_missing_ranks = sqlite3_column_int64(st, 3);
        rc = 0;
    } else if (rc == 0) {
        rc = db_fail(r);
    }
    sqlite3_finalize(st);
    return rc;
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

int ss_reader_rank_steps(ss_reader *r, const ss_rank_step_query *q,
                         ss_rank_steps **cur)
{
    *cur = NULL;
    int rc = run_exists(r, q->run_id);
    if (rc)
        return rc;
    int timelines = r->version >= SCHEMA_TIMELINES;
    int phases = q->fields & SS_RANK_STEPS_PHASES;
    int syncs = timelines && (q->fields & SS_RANK_STEPS_SYNCS);
    int metrics = r->version >= SCHEMA_METRICS &&
                  (q->fields & SS_RANK_STEPS_METRICS);
    int host = r->version >= SCHEMA_HOST && (q->fields & SS_RANK_STEPS_HOST);
    char sql[1536];
    snprintf(sql, sizeof sql,
             "SELECT step, rank, step_ns, rss_bytes, device_bytes, %s, %s, "
             "%s, %s, %s, %s, %s, %s, %s FROM rank_steps WHERE run_id = ?1 AND "
             "attempt = ?2 AND step BETWEEN ?3 AND ?4 ORDER BY step, rank",
             timelines ? "begin_ns" : "NULL", phases ? "phases" : "NULL",
             phases && timelines ? "phase_starts" : "NULL",
             phases && timelines ? "phase_counts" : "NULL",
             syncs ? "syncs" : "NULL", metrics ? "metrics" : "NULL",
             phases && r->version >= SCHEMA_SELF ? "phase_self" : "NULL",
             host ? HOST_SELECT : HOST_SELECT_NONE,
             host && r->version >= SCHEMA_GPU ? GPU_SELECT : GPU_SELECT_NONE);
    int64_t args[4] = {q->run_id, q->attempt, q->first < 0 ? 0 : q->first,
                       q->last < 0 ? INT64_MAX : q->last};
    ss_rank_steps *c = calloc(1, sizeof *c);
    if (!c)
        return oom(r);
    c->r = r;
    c->fields = q->fields;
    c->st = prep(r, sql, args, 4);
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
        v[i] = col_i64(st, first + i);
        known |= v[i] != SS_MISSING;
    }
    for (int i = 0; i < GPU_FIELDS; i++)
        g[i] = col_i64(st, first + HOST_FIELDS + i);
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
    if (grow((void **)&c->phases, sizeof *c->phases, c->row.n_phases,
             &c->cap_phases) != 0)
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
        int64_t idx = intern(&c->names, &c->n_names, &c->cap_names,
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
            if (grow((void **)&c->syncs, sizeof *c->syncs, c->row.n_syncs,
                     &c->cap_syncs) != 0)
                rc = -1;
            else
                c->syncs[c->row.n_syncs++] = (ss_rank_sync){name, v};
        } else {
            if (grow((void **)&c->metrics, sizeof *c->metrics,
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
    int rc = next_row(c->r, c->st);
    if (rc != 1)
        return rc;
    sqlite3_stmt *st = c->st;
    ss_rank_step_row *x = &c->row;
    *x = (ss_rank_step_row){sqlite3_column_int64(st, 0),
                            sqlite3_column_int64(st, 1),
                            col_i64(st, 2), col_i64(st, 3), col_i64(st, 4),
                            col_i64(st, 5), NULL, 0, NULL, 0, NULL, 0, NULL};
    if (add_items(c, 6, 0) != 0 || add_items(c, 7, 1) != 0 ||
        add_items(c, 8, 2) != 0 || add_items(c, 9, 3) != 0 ||
        add_items(c, 10, 4) != 0 || add_items(c, 11, 5) != 0)
        return oom(c->r);
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

int ss_reader_rank_host(ss_reader *r, int64_t run_id, int64_t attempt,
                        ss_rank_host **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc || r->version < SCHEMA_HOST)
        return rc;
    int64_t args[2] = {run_id, attempt};
    int gpu = r->version >= SCHEMA_GPU;
    sqlite3_stmt *st = prep(r, gpu ? "SELECT rank, " HOST_SELECT ", "
                                     GPU_SELECT " FROM rank_steps "
                                     "WHERE run_id = ?1 AND attempt = ?2 AND "
                                     "coalesce(host_cpu_ns, host_stopped_ns, "
                                     "host_runq_ns, host_throttled_ns, "
                                     "gpu_index) IS NOT NULL ORDER BY rank"
                                   : "SELECT rank, " HOST_SELECT ", "
                                     GPU_SELECT_NONE " FROM rank_steps "
                                     "WHERE run_id = ?1 AND attempt = ?2 AND "
                                     "coalesce(host_cpu_ns, host_stopped_ns, "
                                     "host_runq_ns, host_throttled_ns) IS NOT "
                                     "NULL ORDER BY rank",
                            args, 2);
    if (!st)
        return SS_READ_ERROR;
    ss_rank_host *ranks = NULL;
    size_t n_ranks = 0, cap_ranks = 0;
    int64_t *rows = NULL; /* the current rank's rows, field-major below */
    size_t n_rows = 0, cap_rows = 0;
    int64_t *by_field = NULL;
    for (;;) {
        rc = next_row(r, st);
        int64_t rank = rc == 1 ? sqlite3_column_int64(st, 0) : -1;
        if (n_ranks && (rc != 1 || rank != ranks[n_ranks - 1].rank)) {
            /* the previous rank is complete: transpose, then summarize */
            int64_t *t = realloc(by_field, (n_rows ? n_rows : 1) *
                                               HOST_FIELDS * sizeof *t);
            if (!t) {
                rc = oom(r);
                break;
            }
            by_field = t;
            for (size_t i = 0; i < n_rows; i++)
                for (int f = 0; f < HOST_FIELDS; f++)
                    by_field[(size_t)f * n_rows + i] =
                        rows[i * HOST_FIELDS + (size_t)f];
            finish_rank_host(&ranks[n_ranks - 1], by_field, n_rows);
            n_rows = 0;
        }
        if (rc != 1)
            break;
        if (!n_ranks || rank != ranks[n_ranks - 1].rank) {
            if (grow((void **)&ranks, sizeof *ranks, n_ranks, &cap_ranks)) {
                rc = oom(r);
                break;
            }
            memset(&ranks[n_ranks], 0, sizeof ranks[n_ranks]);
            ranks[n_ranks++].rank = rank;
        }
        if (grow((void **)&rows, HOST_FIELDS * sizeof *rows, n_rows,
                 &cap_rows)) {
            rc = oom(r);
            break;
        }
        ss_host_step h;
        col_host(st, 1, &h);
        memcpy(&rows[n_rows * HOST_FIELDS], &h, HOST_FIELDS * sizeof *rows);
        n_rows++;
        ss_rank_host *cur = &ranks[n_ranks - 1];
        add_rank_gpu(cur, &h.gpu);
        cur->steps++;
        cur->stopped_steps += h.stopped_ns != SS_MISSING && h.stopped_ns > 0;
        cur->throttled_steps += h.throttled_ns != SS_MISSING &&
                                h.throttled_ns > 0;
    }
    sqlite3_finalize(st);
    free(rows);
    free(by_field);
    if (rc < 0) {
        free(ranks);
        return rc;
    }
    *out = ranks;
    *n = n_ranks;
    return 0;
}

int ss_reader_rank_step_summary(ss_reader *r, int64_t run_id,
                                int64_t attempt, int64_t first, int64_t last,
                                ss_rank_step_summary *out)
{
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, attempt, first < 0 ? 0 : first,
                       last < 0 ? INT64_MAX : last};
    int timelines = r->version >= SCHEMA_TIMELINES;
    sqlite3_stmt *st = prep(r, timelines
        ? "SELECT count(*), count(begin_ns), min(step), max(step), "
          "(SELECT min(begin_ns) FROM rank_steps WHERE run_id = ?1 AND "
          "attempt = ?2 AND step = (SELECT min(step) FROM rank_steps WHERE "
          "run_id = ?1 AND attempt = ?2 AND begin_ns IS NOT NULL)) "
          "FROM rank_steps WHERE run_id = ?1 AND attempt = ?2 AND step "
          "BETWEEN ?3 AND ?4"
        : "SELECT count(*), 0, min(step), max(step), NULL FROM rank_steps "
          "WHERE run_id = ?1 AND attempt = ?2 AND step BETWEEN ?3 AND ?4",
        args, 4);
    if (!st)
        return SS_READ_ERROR;
    rc = next_row(r, st);
    if (rc == 1) {
        *out = (ss_rank_step_summary){sqlite3_column_int64(st, 0),
                                      sqlite3_column_int64(st, 1),
                                      col_i64(st, 2), col_i64(st, 3),
                                      col_i64(st, 4)};
        rc = 0;
    } else if (rc == 0) {
        rc = db_fail(r);
    }
    sqlite3_finalize(st);
    return rc;
}

int ss_reader_rank_step_numbers(ss_reader *r, int64_t run_id,
                                int64_t attempt, const ss_step_window *w,
                                int64_t **steps, size_t *n)
{
    *steps = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t from = w ? w->from : -1, to = w ? w->to : -1;
    int64_t limit = w && w->limit > 0 ? w->limit : -1;
    int descending = from < 0 && limit > 0;
    int64_t args[5] = {run_id, attempt, from < 0 ? INT64_MIN : from,
                       to < 0 ? INT64_MAX : to, limit};
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT DISTINCT step FROM rank_steps WHERE run_id = ?1 AND "
             "attempt = ?2 AND step >= ?3 AND step <= ?4 ORDER BY step %s "
             "LIMIT ?5", descending ? "DESC" : "ASC");
    sqlite3_stmt *st = prep(r, sql, args, 5);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)steps, sizeof **steps, *n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        (*steps)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        free(*steps);
        *steps = NULL;
        *n = 0;
        return rc;
    }
    if (descending)
        for (size_t i = 0; i < *n / 2; i++) {
            int64_t t = (*steps)[i];
            (*steps)[i] = (*steps)[*n - 1 - i];
            (*steps)[*n - 1 - i] = t;
        }
    return 0;
}

/* ---- findings ---- */

void ss_finding_rows_free(ss_finding_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        ss_finding_row *f = &rows[i];
        free(f->kind);
        free(f->severity);
        free(f->ranks);
        free(f->phase);
        free(f->evidence);
        free(f->message);
    }
    free(rows);
}

int ss_reader_findings(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t first, int64_t last, ss_finding_row **rows,
                       size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, attempt, first < 0 ? INT64_MIN : first,
                       last < 0 ? INT64_MAX : last};
    sqlite3_stmt *st = prep(r,
        "SELECT finding_id, attempt, kind, severity, "
        "CASE WHEN json_valid(ranks) THEN (SELECT group_concat(value, ',') "
        "FROM json_each(findings.ranks) WHERE type = 'integer') END, "
        "phase, first_step, last_step, "
        "CASE WHEN json_valid(evidence) AND json_type(evidence) = 'object' "
        "THEN json(evidence) ELSE '{}' END, message, first_seen_at, "
        "updated_at FROM findings WHERE run_id = ?1 AND attempt = ?2 "
        "AND last_step >= ?3 AND first_step <= ?4 "
        "ORDER BY severity = 'critical' DESC, first_step, finding_id",
        args, 4);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)rows, sizeof **rows, *n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_finding_row *f = &(*rows)[(*n)++];
        memset(f, 0, sizeof *f);
        f->id = sqlite3_column_int64(st, 0);
        f->attempt = sqlite3_column_int64(st, 1);
        f->first_step = col_i64(st, 6);
        f->last_step = col_i64(st, 7);
        f->first_seen_at = col_i64(st, 10);
        f->updated_at = col_i64(st, 11);
        if (col_dup(st, 2, &f->kind) | col_dup(st, 3, &f->severity) |
            col_dup(st, 5, &f->phase) | col_dup(st, 8, &f->evidence) |
            col_dup(st, 9, &f->message) |
            parse_csv((const char *)sqlite3_column_text(st, 4), &f->ranks,
                      &f->n_ranks)) {
            rc = oom(r);
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_finding_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

/* ---- events ---- */

void ss_event_rows_free(ss_event_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].kind);
        free(rows[i].message);
    }
    free(rows);
}

int ss_reader_events(ss_reader *r, int64_t run_id, const ss_event_query *q,
                     ss_event_row **rows, size_t *n, int64_t *total)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, q->attempt, q->after_id,
                       q->limit > 0 ? q->limit : -1};
    const char *in_attempt = q->attempt >= 0 ? "AND attempt = ?2 " : "";
    char sql[512];
    if (total) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE "
                 "run_id = ?1 %s", in_attempt);
        if (query_i64(r, sql, args, q->attempt >= 0 ? 2 : 1, total))
            return SS_READ_ERROR;
    }
    if (q->tail)
        snprintf(sql, sizeof sql,
                 "SELECT id, attempt, at, kind, rank, message FROM (SELECT * "
                 "FROM events WHERE run_id = ?1 %sORDER BY at DESC, id DESC "
                 "LIMIT ?4) ORDER BY at, id", in_attempt);
    else
        snprintf(sql, sizeof sql,
                 "SELECT id, attempt, at, kind, rank, message FROM events "
                 "WHERE run_id = ?1 %sAND id > ?3 ORDER BY id LIMIT ?4",
                 in_attempt);
    sqlite3_stmt *st = prep(r, sql, args, 4);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)rows, sizeof **rows, *n, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_event_row *e = &(*rows)[(*n)++];
        memset(e, 0, sizeof *e);
        e->id = sqlite3_column_int64(st, 0);
        e->attempt = sqlite3_column_int64(st, 1);
        e->at = col_i64(st, 2);
        e->rank = col_i64(st, 4);
        if (col_dup(st, 3, &e->kind) | col_dup(st, 5, &e->message)) {
            rc = oom(r);
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_event_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
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

int ss_reader_metrics(ss_reader *r, int64_t run_id, int64_t attempt,
                      ss_metric_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc || r->version < SCHEMA_METRICS)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r,
        "WITH m AS (SELECT j.key AS name, step, rank, j.value AS v "
        "  FROM rank_steps, json_each(rank_steps.metrics) AS j "
        "  WHERE run_id = ?1 AND attempt = ?2 AND metrics IS NOT NULL "
        "  AND json_valid(metrics) AND j.type IN ('integer', 'real')), "
        "last AS (SELECT name, max(step) AS step, count(DISTINCT step) AS n "
        "  FROM m GROUP BY name) "
        "SELECT m.name, last.n, m.step, m.rank, m.v FROM m "
        "JOIN last USING (name, step) ORDER BY m.name, m.v, m.rank",
        args, 2);
    if (!st)
        return SS_READ_ERROR;
    size_t cap = 0, vcap = 0;
    while ((rc = next_row(r, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name)
            continue;
        ss_metric_row *m = *n ? &(*rows)[*n - 1] : NULL;
        if (!m || strcmp(m->name, name) != 0) {
            if (grow((void **)rows, sizeof **rows, *n, &cap) != 0) {
                rc = oom(r);
                break;
            }
            m = &(*rows)[(*n)++];
            memset(m, 0, sizeof *m);
            m->steps = sqlite3_column_int64(st, 1);
            m->last_step = sqlite3_column_int64(st, 2);
            vcap = 0;
            if (!(m->name = strdup(name))) {
                rc = oom(r);
                break;
            }
        }
        if (m->n == vcap) {
            size_t c = vcap ? vcap * 2 : 16;
            double *v = realloc(m->values, c * sizeof *v);
            if (v)
                m->values = v;
            int64_t *k = realloc(m->ranks, c * sizeof *k);
            if (k)
                m->ranks = k;
            if (!v || !k) {
                rc = oom(r);
                break;
            }
            vcap = c;
        }
        m->values[m->n] = sqlite3_column_double(st, 4);
        m->ranks[m->n++] = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_metric_rows_free(*rows, *n);
        *rows = NULL;
        *n = 0;
        return rc;
    }
    return 0;
}

/* ---- step times (the run summary's percentiles) ---- */

int ss_reader_step_times(ss_reader *r, int64_t run_id, int64_t attempt,
                         int64_t **median, size_t *n_median, int64_t **worst,
                         size_t *n_worst)
{
    *median = *worst = NULL;
    *n_median = *n_worst = 0;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r, "SELECT step_median, step_max FROM steps "
                               "WHERE run_id = ?1 AND attempt = ?2",
                            args, 2);
    if (!st)
        return SS_READ_ERROR;
    int64_t **col[2] = {median, worst};
    size_t *n[2] = {n_median, n_worst}, cap[2] = {0, 0};
    while (rc >= 0 && (rc = next_row(r, st)) == 1)
        for (int i = 0; i < 2; i++) {
            if (sqlite3_column_type(st, i) == SQLITE_NULL)
                continue;
            if (grow((void **)col[i], sizeof **col[i], *n[i], &cap[i])) {
                rc = oom(r);
                break;
            }
            (*col[i])[(*n[i])++] = sqlite3_column_int64(st, i);
        }
    sqlite3_finalize(st);
    if (rc < 0) {
        free(*median);
        free(*worst);
        *median = *worst = NULL;
        *n_median = *n_worst = 0;
        return rc;
    }
    return 0;
}

/* ---- a run's world size ---- */

int ss_reader_world_size(ss_reader *r, int64_t run_id, int64_t *world)
{
    *world = SS_MISSING;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    return query_i64(r, "SELECT world_size FROM runs WHERE id = ?1", &run_id,
                     1, world);
}

/* ---- the bounds of a window of steps ---- */

int ss_reader_step_bounds(ss_reader *r, int64_t run_id, int64_t attempt,
                          const ss_step_window *w, int64_t *first,
                          int64_t *last)
{
    *first = *last = SS_MISSING;
    int rc = run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t from = w ? w->from : -1, to = w ? w->to : -1;
    int64_t limit = w && w->limit > 0 ? w->limit : -1;
    int descending = from < 0 && limit > 0;
    int64_t args[5] = {run_id, attempt, from < 0 ? INT64_MIN : from,
                       to < 0 ? INT64_MAX : to, limit};
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT min(step), max(step) FROM (SELECT step FROM steps "
             "WHERE run_id = ?1 AND attempt = ?2 AND step >= ?3 AND "
             "step <= ?4 ORDER BY step %s LIMIT ?5)",
             descending ? "DESC" : "ASC");
    sqlite3_stmt *st = prep(r, sql, args, 5);
    if (!st)
        return SS_READ_ERROR;
    rc = next_row(r, st);
    if (rc == 1) {
        *first = col_i64(st, 0);
        *last = col_i64(st, 1);
    }
    sqlite3_finalize(st);
    return rc < 0 ? rc : 0;
}

/* ---- run fingerprints ---- */

/* The version that added runs.fingerprint. */

int ss_reader_run_fingerprint(ss_reader *r, int64_t run_id, char **json)
{
    *json = NULL;
    int rc = run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_FINGERPRINT)
        return rc;
    sqlite3_stmt *st = prep(r, "SELECT fingerprint FROM runs WHERE id = ?1",
                            &run_id, 1);
    if (!st)
        return SS_READ_ERROR;
    rc = next_row(r, st);
    if (rc == 1 && col_dup(st, 0, json) != 0)
        rc = oom(r);
    sqlite3_finalize(st);
    return rc < 0 ? rc : 0;
}

/* ---- nodes ---- */

void ss_node_rows_free(ss_node_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].host);
        free(rows[i].addr);
        free(rows[i].state);
        free(rows[i].lost_reason);
    }
    free(rows);
}

int ss_reader_nodes(ss_reader *r, int64_t run_id, int64_t attempt,
                    ss_node_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_NODES)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r, "SELECT node_rank, host, coalesce(addr, ''), "
                               "state, lost_reason, first_rank, nranks, "
                               "joined_at, ended_at, clock_offset_ns, "
                               "clock_bound_ns, lost_at_step FROM nodes "
                               "WHERE run_id = ?1 AND attempt = ?2 "
                               "ORDER BY node_rank",
                            args, 2);
    if (!st)
        return SS_READ_ERROR;
    ss_node_row *k = NULL;
    size_t count = 0, cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)&k, sizeof *k, count, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_node_row *x = &k[count];
        memset(x, 0, sizeof *x);
        count++;
        x->node_rank = sqlite3_column_int64(st, 0);
        if (col_dup(st, 1, &x->host) | col_dup(st, 2, &x->addr) |
            col_dup(st, 3, &x->state) | col_dup(st, 4, &x->lost_reason)) {
            rc = oom(r);
            break;
        }
        x->first_rank = sqlite3_column_int64(st, 5);
        x->nranks = sqlite3_column_int64(st, 6);
        x->joined_at = col_i64(st, 7);
        x->ended_at = col_i64(st, 8);
        x->clock_offset_ns = col_i64(st, 9);
        x->clock_bound_ns = col_i64(st, 10);
        x->lost_at_step = col_i64(st, 11);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_node_rows_free(k, count);
        return rc;
    }
    *rows = k;
    *n = count;
    return 0;
}

int ss_reader_stack_snapshot(ss_reader *r, int64_t run_id, int64_t attempt,
                             ss_stack_snapshot_row *row)
{
    memset(row, 0, sizeof *row);
    int rc = run_exists(r, run_id);
    if (rc != 0 || r->version < SS_SCHEMA_STACKS)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r, "SELECT id, attempt, taken_at, trigger, "
                               "finding_id, json FROM stack_snapshots "
                               "WHERE run_id = ?1 AND (?2 < 0 OR attempt = ?2) "
                               "ORDER BY trigger = 'hang' DESC, "
                               "trigger <> 'request' DESC, taken_at DESC, "
                               "id DESC LIMIT 1", args, 2);
    if (!st)
        return SS_READ_ERROR;
    rc = next_row(r, st);
    if (rc == 1) {
        row->id = col_i64(st, 0);
        row->attempt = col_i64(st, 1);
        row->taken_at = col_i64(st, 2);
        row->finding_id = col_i64(st, 4);
        if (col_dup(st, 3, &row->trigger) | col_dup(st, 5, &row->json)) {
            ss_stack_snapshot_row_clear(row);
            rc = oom(r);
        }
    }
    sqlite3_finalize(st);
    return rc;
}

void ss_stack_snapshot_row_clear(ss_stack_snapshot_row *row)
{
    free(row->trigger);
    free(row->json);
    memset(row, 0, sizeof *row);
}

void ss_profile_rows_free(ss_profile_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].status);
        free(rows[i].path);
        free(rows[i].host);
        free(rows[i].message);
    }
    free(rows);
}

int ss_reader_profiles(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t request_id, ss_profile_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_PROFILES)
        return rc;
    int64_t args[3] = {run_id, attempt, request_id};
    sqlite3_stmt *st = prep(r, "SELECT request_id, rank, requested_at, "
                               "duration_ms, status, path, host, message, "
                               "marker_ns FROM profiles "
                               "WHERE run_id = ?1 AND attempt = ?2 AND "
                               "(?3 <= 0 OR request_id = ?3) "
                               "ORDER BY request_id, rank",
                            args, 3);
    if (!st)
        return SS_READ_ERROR;
    ss_profile_row *k = NULL;
    size_t count = 0, cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)&k, sizeof *k, count, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_profile_row *x = &k[count];
        memset(x, 0, sizeof *x);
        count++;
        x->request_id = sqlite3_column_int64(st, 0);
        x->rank = sqlite3_column_int64(st, 1);
        x->requested_at = sqlite3_column_int64(st, 2);
        x->duration_ms = sqlite3_column_int64(st, 3);
        if (col_dup(st, 4, &x->status) | col_dup(st, 5, &x->path) |
            col_dup(st, 6, &x->host) | col_dup(st, 7, &x->message)) {
            rc = oom(r);
            break;
        }
        x->marker_ns = col_i64(st, 8);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_profile_rows_free(k, count);
        return rc;
    }
    *rows = k;
    *n = count;
    return 0;
}

/* ---- vectors (schema 13, docs/store.md#vectors) ---- */

int ss_reader_vectors(ss_reader *r, int64_t run_id, int64_t attempt,
                      const char *name, int64_t step,
                      int (*each)(void *ctx, int64_t step, int64_t rank,
                                  const double *v, uint32_t n),
                      void *ctx)
{
    int rc = run_exists(r, run_id);
    if (rc || r->version < 13)
        return rc;
    int64_t args[4] = {run_id, attempt, step < 0 ? INT64_MIN : step,
                       step < 0 ? INT64_MAX : step};
    sqlite3_stmt *st = prep(r,
        "SELECT step, rank, n, data FROM rank_values WHERE run_id = ?1 AND "
        "attempt = ?2 AND name = ?5 AND step BETWEEN ?3 AND ?4 "
        "ORDER BY step, rank", args, 4);
    if (!st)
        return SS_READ_ERROR;
    sqlite3_bind_text(st, 5, name, -1, SQLITE_STATIC);
    double *buf = NULL;
    size_t cap = 0;
    int out = 0;
    while ((rc = next_row(r, st)) == 1) {
        int bytes = sqlite3_column_bytes(st, 3);
        const void *blob = sqlite3_column_blob(st, 3);
        size_t n = (size_t)bytes / sizeof(double);
        if (n > cap) {
            double *p = realloc(buf, n * sizeof *p);
            if (!p) {
                out = oom(r);
                break;
            }
            buf = p, cap = n;
        }
        if (n)
            memcpy(buf, blob, n * sizeof *buf); /* little-endian, store.c */
        if (each(ctx, col_i64(st, 0), col_i64(st, 1), buf, (uint32_t)n))
            break;
    }
    if (rc < 0)
        out = SS_READ_ERROR;
    free(buf);
    sqlite3_finalize(st);
    return out;
}

int ss_reader_vector_labels(ss_reader *r, int64_t run_id, int64_t attempt,
                            const char *name, int64_t rank, char **json)
{
    *json = NULL;
    int rc = run_exists(r, run_id);
    if (rc || r->version < 13)
        return rc;
    int64_t args[3] = {run_id, attempt, rank};
    sqlite3_stmt *st = prep(r,
        "SELECT labels FROM value_labels WHERE run_id = ?1 AND attempt = ?2 "
        "AND rank = ?3 AND name = ?4", args, 3);
    if (!st)
        return SS_READ_ERROR;
    sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
    rc = next_row(r, st);
    if (rc == 1 && col_dup(st, 0, json) != 0)
        rc = oom(r);
    sqlite3_finalize(st);
    return rc < 0 ? SS_READ_ERROR : 0;
}

/* ---- vectors: names and series for the read API ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int ss_reader_value_names(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_values_name_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    int rc = run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_VALUES)
        return rc;
    int64_t args[2] = {run_id, attempt};
    sqlite3_stmt *st = prep(r, "SELECT v.name, group_concat(DISTINCT v.rank), "
                               "min(v.step), max(v.step), "
                               "count(DISTINCT v.step), count(*), max(v.n), "
                               "sum(v.truncated), "
                               "(SELECT l.labels FROM value_labels l WHERE "
                               "l.run_id = ?1 AND l.attempt = ?2 AND "
                               "l.name = v.name ORDER BY l.rank LIMIT 1) "
                               "FROM rank_values v WHERE v.run_id = ?1 AND "
                               "v.attempt = ?2 GROUP BY v.name "
                               "ORDER BY v.name",
                            args, 2);
    if (!st)
        return SS_READ_ERROR;
    ss_values_name_row *k = NULL;
    size_t count = 0, cap = 0;
    while ((rc = next_row(r, st)) == 1) {
        if (grow((void **)&k, sizeof *k, count, &cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_values_name_row *x = &k[count];
        memset(x, 0, sizeof *x);
        count++;
        if (col_dup(st, 0, &x->name) | col_dup(st, 8, &x->labels_json) ||
            parse_csv((const char *)sqlite3_column_text(st, 1), &x->ranks,
                      &x->n_ranks) != 0) {
            rc = oom(r);
            break;
        }
        qsort(x->ranks, x->n_ranks, sizeof *x->ranks, cmp_i64);
        x->first_step = col_i64(st, 2);
        x->last_step = col_i64(st, 3);
        x->steps = sqlite3_column_int64(st, 4);
        x->rows = sqlite3_column_int64(st, 5);
        x->max_n = col_i64(st, 6);
        x->truncated = col_i64(st, 7);
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_values_name_rows_free(k, count);
        return rc;
    }
    *rows = k;
    *n = count;
    return 0;
}

void ss_values_name_rows_free(ss_values_name_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].name);
        free(rows[i].ranks);
        free(rows[i].labels_json);
    }
    free(rows);
}

/* Appends the doubles of blob column I of ST (at most N of them, the
 * store's little-endian doubles) to OUT's data.  Returns how many, or -1
 * when memory ran out. */
static int64_t add_doubles(ss_values_rows *out, size_t *cap, sqlite3_stmt *st,
                           int i, int64_t n)
{
    const void *blob = sqlite3_column_blob(st, i);
    int64_t have = sqlite3_column_bytes(st, i) / (int64_t)sizeof(double);
    if (n > have)
        n = have;
    if (n <= 0 || !blob)
        return 0;
    if (out->n_data + (size_t)n > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < out->n_data + (size_t)n)
            c *= 2;
        double *p = realloc(out->data, c * sizeof *p);
        if (!p)
            return -1;
        out->data = p;
        *cap = c;
    }
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rank_values.data is little-endian: convert here"
#endif
    memcpy(out->data + out->n_data, blob, (size_t)n * sizeof(double));
    out->n_data += (size_t)n;
    return n;
}

int ss_reader_values(ss_reader *r, const ss_values_query *q, ss_values_rows *out)
{
    memset(out, 0, sizeof *out);
    out->next_step = SS_MISSING;
    if ((q->rank >= 0) == (q->index >= 0))
        return fail(r, SS_READ_ERROR, "reading vector '%s': give a rank or "
                    "an index, not %s", q->name ? q->name : "",
                    q->rank >= 0 ? "both" : "neither");
    int rc = run_exists(r, q->run_id);
    if (rc != 0 || r->version < SCHEMA_VALUES || !q->name)
        return rc;
    int by_rank = q->rank >= 0;
    int64_t args[6] = {q->run_id, q->attempt, 0, by_rank ? q->rank : q->index,
                       q->from < 0 ? 0 : q->from, q->to};
    sqlite3_stmt *st = prep(
        r,
        by_rank ? "SELECT step, rank, n, truncated, data FROM rank_values "
                  "WHERE run_id = ?1 AND attempt = ?2 AND name = ?3 AND "
                  "rank = ?4 AND step >= ?5 AND (?6 < 0 OR step <= ?6) "
                  "ORDER BY step, rank"
                : "SELECT step, rank, n, truncated, CASE WHEN n > ?4 THEN "
                  "substr(data, ?4 * 8 + 1, 8) END FROM rank_values "
                  "WHERE run_id = ?1 AND attempt = ?2 AND name = ?3 AND "
                  "step >= ?5 AND (?6 < 0 OR step <= ?6) "
                  "ORDER BY step, rank",
        args, 6);
    if (!st)
        return SS_READ_ERROR;
    sqlite3_bind_text(st, 3, q->name, -1, SQLITE_STATIC);
    size_t rows_cap = 0, data_cap = 0;
    size_t step_row0 = 0, step_data0 = 0; /* where the current step began */
    int64_t cur_step = SS_MISSING;
    while ((rc = next_row(r, st)) == 1) {
        int64_t step = sqlite3_column_int64(st, 0);
        if (step != cur_step) {
            cur_step = step;
            step_row0 = out->n_rows;
            step_data0 = out->n_data;
        }
        if (grow((void **)&out->rows, sizeof *out->rows, out->n_rows,
                 &rows_cap) != 0) {
            rc = oom(r);
            break;
        }
        ss_values_row *x = &out->rows[out->n_rows];
        x->step = step;
        x->rank = sqlite3_column_int64(st, 1);
        x->truncated = sqlite3_column_int64(st, 3);
        int64_t want = by_rank ? sqlite3_column_int64(st, 2) : 1;
        int64_t got = add_doubles(out, &data_cap, st, 4, want);
        if (got < 0) {
            rc = oom(r);
            break;
        }
        x->n = got;
        x->v = NULL;
        out->n_rows++;
        if (q->max_cells && out->n_data > q->max_cells && step_row0 > 0) {
            /* over the cap: this step is left for the next read */
            out->n_rows = step_row0;
            out->n_data = step_data0;
            out->more = 1;
            out->next_step = step;
            break;
        }
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        ss_values_rows_free(out);
        out->next_step = SS_MISSING;
        return rc;
    }
    size_t at = 0;
    for (size_t i = 0; i < out->n_rows; i++) {
        out->rows[i].v = out->n_data ? out->data + at : NULL;
        at += (size_t)out->rows[i].n;
    }
    return 0;
}

void ss_values_rows_free(ss_values_rows *v)
{
    if (!v)
        return;
    free(v->rows);
    free(v->data);
    memset(v, 0, sizeof *v);
}
