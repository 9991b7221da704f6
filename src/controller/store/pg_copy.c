/*
 * pg_copy.c - runs copied between SQLite and PostgreSQL (pg_copy.h).
 *
 * Both directions use COPY in PostgreSQL's text format: rows are sent
 * and received in 1 MiB chunks, values as text (NULL as \N; a SQLite BLOB
 * as bytea's hex form), which costs one round trip per chunk, not per
 * row.  The column lists come from the SQLite side (PRAGMA table_xinfo,
 * without generated columns): what is copied is exactly what a SQLite
 * store holds.
 */
#include "pg_copy.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clocks.h"
#include "json.h"
#include "pg_internal.h"

/* Every table of a run but `runs`, in the order they are copied. */
static const char *const run_tables[] = {
    "attempts", "ranks", "steps", "step_phases", "step_syncs", "rank_steps",
    "rank_totals", "findings", "events", "nodes", "stack_snapshots",
    "profiles", "rank_values", "value_labels"};
#define N_TABLES (sizeof run_tables / sizeof run_tables[0])

/* Tables whose `id` the server assigns (identity columns). */
static int server_id_table(const char *t)
{
    return strcmp(t, "runs") == 0 || strcmp(t, "events") == 0 ||
           strcmp(t, "stack_snapshots") == 0;
}

#define MAX_COLS 64

/* A table's columns as SQLite declares them. */
typedef struct {
    int n;
    char names[MAX_COLS][40];
    char types[MAX_COLS]; /* 'i' INTEGER, 't' TEXT, 'b' BLOB */
} cols;

/* The stored (not generated) columns of TABLE in DB, without `id` when
 * SKIP_ID.  Returns 0 or -1 with ERR. */
static int table_cols(sqlite3 *db, const char *table, int skip_id, cols *c,
                      char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    c->n = 0;
    if (sqlite3_prepare_v2(db, "SELECT name, upper(type) FROM "
                           "pragma_table_xinfo(?) WHERE hidden = 0", -1, &st,
                           NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot list the columns of %s: %s", table,
                 sqlite3_errmsg(db));
        return -1;
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *type = (const char *)sqlite3_column_text(st, 1);
        if (skip_id && strcmp(name, "id") == 0)
            continue;
        if (c->n == MAX_COLS)
            break;
        snprintf(c->names[c->n], sizeof c->names[0], "%s", name);
        c->types[c->n] = strcmp(type, "INTEGER") == 0 ? 'i'
                         : strcmp(type, "BLOB") == 0  ? 'b'
                                                      : 't';
        c->n++;
    }
    sqlite3_finalize(st);
    if (c->n == 0) {
        snprintf(err, errlen, "the local store has no table %s", table);
        return -1;
    }
    return 0;
}

/* "a, b, c" of C into B. */
static void col_list(ss_buf *b, const cols *c)
{
    for (int i = 0; i < c->n; i++)
        ss_buf_printf(b, "%s%s", i ? ", " : "", c->names[i]);
}

/* Puts the server's last error into ERR after WHAT. */
static int pg_fail(ss_pg *c, const char *what, char *err, size_t errlen)
{
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s: ", what);
    ss_pg_error_line(err, errlen, prefix, PQerrorMessage(c->c));
    return -1;
}

/* ---- SQLite to PostgreSQL ---- */

/* Appends V in decimal to B (printf's cost per value would dominate a
 * bulk copy). */
static void add_int(ss_buf *b, int64_t v)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    ss_buf_add(b, p, (size_t)(tmp + sizeof tmp - p));
}

/* Appends value I of the SQLite row ST to B in COPY text form. */
static void copy_value(ss_buf *b, sqlite3_stmt *st, int i)
{
    static const char hex[] = "0123456789abcdef";
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
        ss_buf_add(b, "\\N", 2);
        break;
    case SQLITE_INTEGER:
        add_int(b, sqlite3_column_int64(st, i));
        break;
    case SQLITE_FLOAT:
        ss_buf_printf(b, "%.17g", sqlite3_column_double(st, i));
        break;
    case SQLITE_BLOB: {
        const unsigned char *p = sqlite3_column_blob(st, i);
        int n = sqlite3_column_bytes(st, i);
        ss_buf_add(b, "\\\\x", 3);
        for (int k = 0; k < n; k++) {
            char two[2] = {hex[p[k] >> 4], hex[p[k] & 15]};
            ss_buf_add(b, two, 2);
        }
        break;
    }
    default: {
        /* A server text holds neither NUL nor invalid UTF-8, which a
         * SQLite text may (a finding quoting a rank's bytes): each such
         * byte goes as U+FFFD, as every JSON document shows it anyway. */
        const unsigned char *p = sqlite3_column_text(st, i);
        int n = sqlite3_column_bytes(st, i);
        int from = 0;
        for (int k = 0; k < n; k++) {
            size_t seq = p[k] >= 0x80 ? ss_utf8_len(p + k) : 1;
            if (seq > 1) {
                k += (int)seq - 1;
                continue;
            }
            const char *esc = p[k] == '\\'   ? "\\\\"
                              : p[k] == '\n' ? "\\n"
                              : p[k] == '\r' ? "\\r"
                              : p[k] == '\t' ? "\\t"
                              : p[k] == 0 || seq == 0 ? "\xef\xbf\xbd"
                                             : NULL;
            if (!esc)
                continue;
            ss_buf_add(b, (const char *)p + from, (size_t)(k - from));
            ss_buf_add(b, esc, strlen(esc));
            from = k + 1;
        }
        ss_buf_add(b, (const char *)p + from, (size_t)(n - from));
        break;
    }
    }
}

/* Sends B's bytes as COPY data and empties B.  Returns 0 or -1. */
static int copy_flush(ss_pg *c, ss_buf *b)
{
    if (b->len && PQputCopyData(c->c, b->data, (int)b->len) != 1)
        return -1;
    ss_buf_reset(b);
    return 0;
}

/* Copies the rows of TABLE whose run_id is LOCAL_ID from SRC into C, with
 * run_id SERVER_ID.  Adds the rows to *ROWS.  Returns 0 or -1 with ERR. */
static int push_table(ss_pg *c, sqlite3 *src, const char *table,
                      int64_t local_id, int64_t server_id, int64_t *rows,
                      char *err, size_t errlen)
{
    cols cl;
    if (table_cols(src, table, server_id_table(table), &cl, err, errlen))
        return -1;
    ss_buf q = {0}, b = {0};
    int run_col = -1;
    for (int i = 0; i < cl.n; i++)
        if (strcmp(cl.names[i], "run_id") == 0)
            run_col = i;
    ss_buf_printf(&q, "SELECT ");
    col_list(&q, &cl);
    ss_buf_printf(&q, " FROM %s WHERE run_id = ?%s", table,
                  server_id_table(table) ? " ORDER BY id" : "");
    sqlite3_stmt *st = NULL;
    int rc = -1;
    char what[128];
    snprintf(what, sizeof what, "cannot copy the run's %s", table);
    if (q.oom || sqlite3_prepare_v2(src, q.data, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(src));
        goto out;
    }
    sqlite3_bind_int64(st, 1, local_id);
    ss_buf_reset(&q);
    ss_buf_printf(&q, "COPY %s (", table);
    col_list(&q, &cl);
    ss_buf_printf(&q, ") FROM STDIN");
    PGresult *res = PQexec(c->c, q.data);
    int copying = PQresultStatus(res) == PGRES_COPY_IN;
    PQclear(res);
    if (!copying) {
        pg_fail(c, what, err, errlen);
        goto out;
    }
    int step, bad = 0;
    while (!bad && (step = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < cl.n; i++) {
            if (i)
                ss_buf_add(&b, "\t", 1);
            if (i == run_col)
                add_int(&b, server_id);
            else
                copy_value(&b, st, i);
        }
        ss_buf_add(&b, "\n", 1);
        (*rows)++;
        if (b.len >= (1u << 20))
            bad = b.oom || copy_flush(c, &b) != 0;
    }
    if (!bad && step != SQLITE_DONE) {
        snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(src));
        PQputCopyEnd(c->c, "reading the local store failed");
        PQclear(PQgetResult(c->c));
        goto out;
    }
    bad = bad || b.oom || copy_flush(c, &b) != 0;
    if (PQputCopyEnd(c->c, bad ? "out of memory" : NULL) != 1) {
        pg_fail(c, what, err, errlen);
        goto out;
    }
    res = PQgetResult(c->c);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    while ((res = PQgetResult(c->c)) != NULL)
        PQclear(res);
    if (!ok) {
        pg_fail(c, what, err, errlen);
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(st);
    ss_buf_free(&q);
    ss_buf_free(&b);
    return rc;
}

/* Runs the parameterised SQL on C; *ID gets the first column of its first
 * row (when ID and a row came back) and *STATUS_OUT its second (a string
 * of up to 32 bytes, when STATUS_OUT).  Returns the number of rows, or -1
 * with ERR. */
static int pg_params(ss_pg *c, const char *sql, int n, const char *const *v,
                     int64_t *id, char *status_out, const char *what,
                     char *err, size_t errlen)
{
    PGresult *res = PQexecParams(c->c, sql, n, NULL, v, NULL, NULL, 0);
    ExecStatusType s = PQresultStatus(res);
    if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
        pg_fail(c, what, err, errlen);
        PQclear(res);
        return -1;
    }
    int rows = s == PGRES_TUPLES_OK ? PQntuples(res) : 0;
    if (rows > 0 && id)
        *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    if (rows > 0 && status_out)
        snprintf(status_out, 32, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return rows;
}

/* The N bytes of P into OUT (room for 3 N + 1), NUL-terminated, as text
 * a server takes: each NUL byte and each byte that begins no valid UTF-8
 * sequence replaced by U+FFFD, as copy_value does for COPY.  Returns OUT. */
static char *valid_utf8(char *out, const unsigned char *p, size_t n)
{
    char *o = out;
    for (size_t k = 0; k < n; k++) {
        size_t seq = p[k] >= 0x80 ? ss_utf8_len(p + k) : p[k] != 0;
        if (seq == 0) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            continue;
        }
        memcpy(o, p + k, seq);
        o += seq;
        k += seq - 1;
    }
    *o = 0;
    return out;
}

/* The runs row LOCAL_ID of SRC as text values (NULL for NULL) into V,
 * in the order of RC's columns, STATUS replacing the status when given;
 * *UUID points into V.  Returns 1, 0 (no such run) or -1 with ERR.  The
 * strings are in *HOLD (free it). */
static int run_values(sqlite3 *src, const cols *rc, int64_t local_id,
                      const char *status, char **v, char **hold,
                      const char **uuid, char *err, size_t errlen)
{
    ss_buf q = {0};
    ss_buf_printf(&q, "SELECT ");
    col_list(&q, rc);
    ss_buf_printf(&q, " FROM runs WHERE id = ?");
    sqlite3_stmt *st = NULL;
    int found = -1;
    *hold = NULL;
    if (q.oom || sqlite3_prepare_v2(src, q.data, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot read the run: %s", sqlite3_errmsg(src));
        goto out;
    }
    sqlite3_bind_int64(st, 1, local_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        found = 0;
        goto out;
    }
    if (step != SQLITE_ROW) {
        snprintf(err, errlen, "cannot read the run: %s", sqlite3_errmsg(src));
        goto out;
    }
    size_t total = 0;
    for (int i = 0; i < rc->n; i++)
        total += 3 * (size_t)sqlite3_column_bytes(st, i) + 32;
    if (status)
        total += strlen(status) + 1;
    char *p = *hold = malloc(total);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < rc->n; i++) {
        int t = sqlite3_column_type(st, i);
        if (strcmp(rc->names[i], "status") == 0 && status) {
            v[i] = strcpy(p, status);
        } else if (t == SQLITE_NULL) {
            v[i] = NULL;
            continue;
        } else {
            const unsigned char *text = sqlite3_column_text(st, i);
            v[i] = valid_utf8(p, text ? text : (const unsigned char *)"",
                              (size_t)sqlite3_column_bytes(st, i));
        }
        p += strlen(p) + 1;
        if (strcmp(rc->names[i], "uuid") == 0)
            *uuid = v[i];
    }
    found = *uuid != NULL;
    if (!found)
        snprintf(err, errlen, "the run has no uuid");
    found = found ? 1 : -1;
out:
    sqlite3_finalize(st);
    ss_buf_free(&q);
    return found;
}

int ss_pg_push_run(ss_pg *c, sqlite3 *src, int64_t local_id, int replace,
                   const char *status, ss_pg_push_result *res, char *err,
                   size_t errlen)
{
    memset(res, 0, sizeof *res);
    cols rc;
    if (table_cols(src, "runs", 1, &rc, err, errlen) != 0)
        return -1;
    /* One read transaction: every table as of one moment of the writer. */
    if (sqlite3_exec(src, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot read the local store: %s",
                 sqlite3_errmsg(src));
        return -1;
    }
    char *v[MAX_COLS + 2], *hold = NULL;
    const char *uuid = NULL;
    int rcode = -1;
    int found = run_values(src, &rc, local_id, status, v, &hold, &uuid, err,
                           errlen);
    if (found <= 0) {
        if (found == 0)
            snprintf(err, errlen, "no run %" PRId64 " in the local store",
                     local_id);
        goto out;
    }
    if (ss_pg_exec(c, "BEGIN", "cannot start a transaction", err, errlen))
        goto out;
    char now[32];
    snprintf(now, sizeof now, "%" PRId64, (int64_t)ss_wall_now());
    const char *const by_uuid[] = {uuid};
    char stored[32] = "";
    int64_t id = 0;
    int rows = pg_params(c, "SELECT id, status FROM runs WHERE uuid = $1 "
                         "FOR UPDATE", 1, by_uuid, &id, stored,
                         "cannot look the run up", err, errlen);
    if (rows < 0)
        goto rollback;
    ss_buf q = {0};
    v[rc.n] = now;
    if (rows == 0) {
        /* ON CONFLICT: another push of the same run committed first;
         * then this one finds it below. */
        ss_buf_printf(&q, "INSERT INTO runs (");
        col_list(&q, &rc);
        ss_buf_printf(&q, ", seen_at) VALUES (");
        for (int i = 0; i <= rc.n; i++)
            ss_buf_printf(&q, "%s$%d", i ? ", " : "", i + 1);
        ss_buf_printf(&q, ") ON CONFLICT (uuid) DO NOTHING RETURNING id");
        rows = q.oom ? -1 : pg_params(c, q.data, rc.n + 1,
                                      (const char *const *)v, &id, NULL,
                                      "cannot add the run", err, errlen);
        if (rows == 0)
            rows = pg_params(c, "SELECT id, status FROM runs WHERE uuid = "
                             "$1 FOR UPDATE", 1, by_uuid, &id, stored,
                             "cannot look the run up", err, errlen);
        else if (rows > 0)
            res->outcome = SS_PG_COPIED;
        if (rows == 0)
            snprintf(err, errlen, "the run vanished while it was copied");
        if (rows <= 0) {
            ss_buf_free(&q);
            goto rollback;
        }
    }
    if (stored[0]) {
        if (!replace && strcmp(stored, "running") != 0) {
            ss_buf_free(&q);
            res->outcome = SS_PG_ALREADY;
            res->server_id = id;
            PQclear(PQexec(c->c, "ROLLBACK"));
            rcode = 0;
            goto out;
        }
        res->outcome = SS_PG_REPLACED;
        ss_buf_reset(&q);
        ss_buf_printf(&q, "UPDATE runs SET (");
        col_list(&q, &rc);
        ss_buf_printf(&q, ", seen_at) = (");
        for (int i = 0; i <= rc.n; i++)
            ss_buf_printf(&q, "%s$%d", i ? ", " : "", i + 1);
        ss_buf_printf(&q, ") WHERE id = %" PRId64, id);
        for (size_t t = 0; t < N_TABLES && !q.oom; t++)
            ss_buf_printf(&q, "; DELETE FROM %s WHERE run_id = %" PRId64,
                          run_tables[t], id);
        /* Several statements cannot take parameters: the update first. */
        char *semi = q.oom ? NULL : strchr(q.data, ';');
        if (semi)
            *semi = '\0';
        if (!semi ||
            pg_params(c, q.data, rc.n + 1, (const char *const *)v, NULL,
                      NULL, "cannot update the run", err, errlen) < 0 ||
            ss_pg_exec(c, semi + 1, "cannot replace the run's rows", err,
                       errlen) != 0) {
            if (!semi)
                snprintf(err, errlen, "out of memory");
            ss_buf_free(&q);
            goto rollback;
        }
    }
    ss_buf_free(&q);
    res->server_id = id;
    for (size_t t = 0; t < N_TABLES; t++)
        if (push_table(c, src, run_tables[t], local_id, id, &res->rows, err,
                       errlen) != 0)
            goto rollback;
    if (ss_pg_exec(c, "COMMIT", "cannot commit the run", err, errlen) != 0)
        goto out;
    res->rows++; /* the runs row */
    rcode = 0;
    goto out;
rollback:
    PQclear(PQexec(c->c, "ROLLBACK"));
out:
    free(hold);
    sqlite3_exec(src, "COMMIT", NULL, NULL, NULL);
    return rcode;
}

/* ---- PostgreSQL to SQLite ---- */

/* Undoes COPY text escaping of the field [P, END) in place; returns its
 * new length. */
static size_t unescape(char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\' || i + 1 == n) {
            p[o++] = p[i];
            continue;
        }
        char e = p[++i];
        switch (e) {
        case 'n': p[o++] = '\n'; break;
        case 'r': p[o++] = '\r'; break;
        case 't': p[o++] = '\t'; break;
        case 'b': p[o++] = '\b'; break;
        case 'f': p[o++] = '\f'; break;
        case 'v': p[o++] = '\v'; break;
        default: p[o++] = e; break;
        }
    }
    return o;
}

static int hexval(char h)
{
    return h >= '0' && h <= '9' ? h - '0'
           : h >= 'a' && h <= 'f' ? h - 'a' + 10
           : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                  : -1;
}

/* Binds field I ([P, P+N), COPY text) of type TYPE to ST. */
static void bind_field(sqlite3_stmt *st, int i, char type, char *p, size_t n)
{
    if (n == 2 && p[0] == '\\' && p[1] == 'N') {
        sqlite3_bind_null(st, i + 1);
        return;
    }
    n = unescape(p, n);
    if (type == 'i') {
        p[n] = '\0';
        sqlite3_bind_int64(st, i + 1, strtoll(p, NULL, 10));
    } else if (type == 'b' && n >= 2 && p[0] == '\\' && p[1] == 'x') {
        /* bytea's hex output, decoded in place */
        size_t k = 0;
        for (size_t j = 2; j + 1 < n; j += 2)
            p[k++] = (char)(hexval(p[j]) << 4 | hexval(p[j + 1]));
        sqlite3_bind_blob(st, i + 1, p, (int)k, SQLITE_TRANSIENT);
    } else {
        sqlite3_bind_text(st, i + 1, p, (int)n, SQLITE_TRANSIENT);
    }
}

/* Copies TABLE of C into DST: every row, or those WHERE says (a clause,
 * "WHERE ..."); SELECT_COLS, when not NULL, is the select list to use for
 * the server (same order as DST's columns).  Returns the rows copied, or
 * -1 with ERR. */
static long load_table(ss_pg *c, sqlite3 *dst, const char *table,
                       const char *select_cols, const char *where, char *err,
                       size_t errlen)
{
    cols cl;
    if (table_cols(dst, table, 0, &cl, err, errlen) != 0)
        return -1;
    ss_buf q = {0};
    ss_buf_printf(&q, "INSERT INTO %s (", table);
    col_list(&q, &cl);
    ss_buf_printf(&q, ") VALUES (");
    for (int i = 0; i < cl.n; i++)
        ss_buf_printf(&q, "%s?", i ? ", " : "");
    ss_buf_printf(&q, ")");
    sqlite3_stmt *st = NULL;
    long rows = -1;
    char what[128];
    snprintf(what, sizeof what, "cannot read %s from the team database",
             table);
    if (q.oom || sqlite3_prepare_v2(dst, q.data, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(dst));
        goto out;
    }
    ss_buf_reset(&q);
    ss_buf_printf(&q, "COPY (SELECT ");
    if (select_cols)
        ss_buf_printf(&q, "%s", select_cols);
    else
        col_list(&q, &cl);
    ss_buf_printf(&q, " FROM %s %s) TO STDOUT", table, where ? where : "");
    PGresult *res = PQexec(c->c, q.data);
    int copying = PQresultStatus(res) == PGRES_COPY_OUT;
    PQclear(res);
    if (!copying) {
        pg_fail(c, what, err, errlen);
        goto out;
    }
    long n = 0;
    int bad = 0;
    char *line;
    int len;
    while ((len = PQgetCopyData(c->c, &line, 0)) > 0) {
        if (!bad) {
            char *p = line, *end = line + len;
            if (end > p && end[-1] == '\n')
                end--;
            for (int i = 0; i < cl.n; i++) {
                char *f = p;
                while (p < end && *p != '\t')
                    p++;
                bind_field(st, i, cl.types[i], f, (size_t)(p - f));
                p++;
            }
            if (sqlite3_step(st) != SQLITE_DONE) {
                snprintf(err, errlen, "%s: %s", what, sqlite3_errmsg(dst));
                bad = 1;
            }
            sqlite3_reset(st);
            n++;
        }
        PQfreemem(line);
    }
    res = PQgetResult(c->c);
    int ok = len == -1 && PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    while ((res = PQgetResult(c->c)) != NULL)
        PQclear(res);
    if (!ok && !bad)
        pg_fail(c, what, err, errlen);
    if (ok && !bad)
        rows = n;
out:
    sqlite3_finalize(st);
    ss_buf_free(&q);
    return rows;
}

/* The runs whose rows the local copy DST must take again from C, as a
 * WHERE clause on run_id into *WHERE ("" when none; NULL: all of them,
 * the copy being new), after deleting DST's rows of those runs and of the
 * runs the server no longer holds.  A run is taken again when the server
 * copied it (seen_at) since DST took it (team_copies, written here too).
 * Returns 0 or -1 with ERR. */
static int stale_runs(ss_pg *c, sqlite3 *dst, ss_buf *where, int *all,
                      char *err, size_t errlen)
{
    *all = 0;
    if (sqlite3_exec(dst, "CREATE TABLE IF NOT EXISTS team_copies ("
                     "run_id INTEGER PRIMARY KEY, seen_at INTEGER NOT NULL);"
                     "CREATE TEMP TABLE IF NOT EXISTS team_server ("
                     "run_id INTEGER PRIMARY KEY, seen_at INTEGER NOT NULL);"
                     "DELETE FROM temp.team_server", NULL, NULL,
                     NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot write the local copy: %s",
                 sqlite3_errmsg(dst));
        return -1;
    }
    PGresult *res = PQexec(c->c, "SELECT id, coalesce(seen_at, 0) FROM runs");
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        PQclear(res);
        return pg_fail(c, "cannot read the team database's runs", err,
                       errlen);
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(dst, "INSERT INTO temp.team_server VALUES "
                                "(?, ?)", -1, &st, NULL);
    for (int i = 0; rc == SQLITE_OK && i < PQntuples(res); i++) {
        sqlite3_bind_int64(st, 1, strtoll(PQgetvalue(res, i, 0), NULL, 10));
        sqlite3_bind_int64(st, 2, strtoll(PQgetvalue(res, i, 1), NULL, 10));
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    PQclear(res);
    int64_t held = 0;
    st = NULL;
    if (rc == SQLITE_OK &&
        sqlite3_prepare_v2(dst, "SELECT count(*) FROM team_copies", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        held = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* The runs to delete here: gone from the server, or copied since. */
    ss_buf del = {0};
    ss_buf_printf(&del, "CREATE TEMP TABLE IF NOT EXISTS team_stale ("
                  "run_id INTEGER PRIMARY KEY); DELETE FROM temp.team_stale; "
                  "INSERT INTO temp.team_stale SELECT run_id FROM team_copies "
                  "l WHERE NOT EXISTS (SELECT 1 FROM temp.team_server s WHERE "
                  "s.run_id = l.run_id AND s.seen_at = l.seen_at)");
    for (size_t t = 0; t < N_TABLES; t++)
        ss_buf_printf(&del, "; DELETE FROM %s WHERE run_id IN (SELECT run_id "
                      "FROM temp.team_stale)", run_tables[t]);
    ss_buf_printf(&del, "; DELETE FROM runs");
    if (rc != SQLITE_OK || del.oom ||
        sqlite3_exec(dst, del.data, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot write the local copy: %s",
                 sqlite3_errmsg(dst));
        ss_buf_free(&del);
        return -1;
    }
    ss_buf_free(&del);
    if (held == 0) {
        *all = 1;
    } else {
        /* the server's runs the copy lacks, or holds older */
        ss_buf_printf(where, "WHERE run_id = ANY('{");
        st = NULL;
        int n = 0;
        if (sqlite3_prepare_v2(dst, "SELECT s.run_id FROM temp.team_server s "
                               "WHERE NOT EXISTS (SELECT 1 FROM team_copies "
                               "l WHERE l.run_id = s.run_id AND l.seen_at = "
                               "s.seen_at)", -1, &st, NULL) == SQLITE_OK)
            while (sqlite3_step(st) == SQLITE_ROW)
                ss_buf_printf(where, "%s%lld", n++ ? "," : "",
                              (long long)sqlite3_column_int64(st, 0));
        sqlite3_finalize(st);
        ss_buf_printf(where, "}'::bigint[])");
        if (n == 0)
            ss_buf_reset(where);
    }
    if (where->oom ||
        sqlite3_exec(dst, "DELETE FROM team_copies; INSERT INTO team_copies "
                     "SELECT run_id, seen_at FROM temp.team_server", NULL,
                     NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot write the local copy: %s",
                 where->oom ? "out of memory" : sqlite3_errmsg(dst));
        return -1;
    }
    return 0;
}

long ss_pg_load(ss_pg *c, sqlite3 *dst, int64_t stale_ns, char *err,
                size_t errlen)
{
    if (ss_pg_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                   "cannot read the team database", err, errlen) != 0)
        return -1;
    if (sqlite3_exec(dst, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot write the local copy: %s",
                 sqlite3_errmsg(dst));
        PQclear(PQexec(c->c, "ROLLBACK"));
        return -1;
    }
    long runs = -1;
    ss_buf sel = {0}, where = {0};
    int all = 0;
    cols rc;
    if (table_cols(dst, "runs", 0, &rc, err, errlen) != 0)
        goto out;
    /* A running run whose job stopped copying it reads interrupted, as a
     * local one whose controller is gone does. */
    for (int i = 0; i < rc.n; i++) {
        if (strcmp(rc.names[i], "status") == 0)
            ss_buf_printf(&sel, "%sCASE WHEN status = 'running' AND "
                          "coalesce(seen_at, 0) < %" PRId64 " THEN "
                          "'interrupted' ELSE status END", i ? ", " : "",
                          (int64_t)ss_wall_now() - stale_ns);
        else
            ss_buf_printf(&sel, "%s%s", i ? ", " : "", rc.names[i]);
    }
    if (sel.oom || stale_runs(c, dst, &where, &all, err, errlen) != 0)
        goto out;
    /* The runs rows every time (a running run's status may have turned
     * interrupted); the other tables only for the runs copied since. */
    runs = load_table(c, dst, "runs", sel.data, NULL, err, errlen);
    for (size_t t = 0; runs >= 0 && (all || where.len) && t < N_TABLES; t++)
        if (load_table(c, dst, run_tables[t], NULL, all ? NULL : where.data,
                       err, errlen) < 0)
            runs = -1;
out:
    ss_buf_free(&sel);
    ss_buf_free(&where);
    PQclear(PQexec(c->c, "COMMIT"));
    if (runs >= 0 &&
        sqlite3_exec(dst, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot write the local copy: %s",
                 sqlite3_errmsg(dst));
        runs = -1;
    }
    if (runs < 0)
        sqlite3_exec(dst, "ROLLBACK", NULL, NULL, NULL);
    return runs;
}
