/*
 * pg_push.c - `stepscope push` (pg_push.h).
 *
 * The runs are named through the read API (reader.h: the same specs as
 * every other command, a dead controller's run read as interrupted) and
 * copied by pg_copy.c over one read-only connection to the local store.
 */
#include "pg_push.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "pg_conn.h"
#include "pg_copy.h"
#include "pg_schema.h"
#include "reader.h"
#include "store_schema.h"

int ss_pg_push(const char *db, const char *uri, const char *const *specs,
               size_t n, FILE *out, FILE *err_out)
{
    char err[1024];
    ss_reader *r = ss_reader_open(db, err, sizeof err);
    if (!r) {
        fprintf(err_out, "stepscope push: %s\n", err);
        return 1;
    }
    ss_run_row *runs = NULL;
    size_t n_runs = 0;
    int status = 1;
    sqlite3 *src = NULL;
    ss_pg *c = NULL;
    int64_t *want = calloc(n ? n : 1, sizeof *want);
    if (!want) {
        fprintf(err_out, "stepscope push: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (ss_reader_select_run(r, specs[i], &want[i]) != 0) {
            fprintf(err_out, "stepscope push: %s\n", ss_reader_errmsg(r));
            goto out;
        }
    }
    if (ss_reader_runs(r, &runs, &n_runs) != 0) {
        fprintf(err_out, "stepscope push: %s\n", ss_reader_errmsg(r));
        goto out;
    }
    if (n_runs == 0) {
        fprintf(out, "stepscope push: no runs in %s\n", ss_reader_path(r));
        status = 0;
        goto out;
    }
    int version = ss_schema_open_readonly(ss_reader_path(r), &src, err,
                                          sizeof err);
    if (version < 0) {
        fprintf(err_out, "stepscope push: %s\n", err);
        goto out;
    }
    if (version != SS_SCHEMA_VERSION) {
        fprintf(err_out, "stepscope push: %s is at store schema version %d: "
                "`stepscope upgrade --db %s` first\n", ss_reader_path(r),
                version, ss_reader_path(r));
        goto out;
    }
    c = ss_pg_connect(uri, err, sizeof err);
    if (!c || ss_pg_schema_check(c, err, sizeof err) != 0) {
        fprintf(err_out, "stepscope push: %s\n", err);
        goto out;
    }
    int failed = 0;
    size_t copied = 0, already = 0, running = 0;
    for (size_t i = 0; i < n_runs; i++) {
        const ss_run_row *run = &runs[i];
        int chosen = n == 0;
        for (size_t k = 0; k < n && !chosen; k++)
            chosen = want[k] == run->id;
        if (!chosen)
            continue;
        if (run->status && strcmp(run->status, "running") == 0) {
            fprintf(out, "run %" PRId64 " (%s) is still running: not "
                    "copied (push it when it has ended)\n", run->id,
                    run->name);
            running++;
            continue;
        }
        ss_pg_push_result res;
        if (ss_pg_push_run(c, src, run->id, 0, run->status, &res, err,
                           sizeof err) != 0) {
            fprintf(err_out, "stepscope push: run %" PRId64 " (%s): %s%s\n",
                    run->id, run->name, err,
                    strstr(err, "permission denied")
                        ? " (this role may not write runs: push as one "
                          "with INSERT, UPDATE and DELETE on the stepscope "
                          "tables, docs/store.md)"
                        : "");
            failed = 1;
            continue;
        }
        if (res.outcome == SS_PG_ALREADY) {
            fprintf(out, "run %" PRId64 " (%s): already in the team "
                    "database as run %" PRId64 "; nothing changed\n",
                    run->id, run->name, res.server_id);
            already++;
        } else {
            fprintf(out, "run %" PRId64 " (%s): copied as run %" PRId64
                    " (%" PRId64 " rows)\n", run->id, run->name,
                    res.server_id, res.rows);
            copied++;
        }
    }
    fprintf(out, "stepscope push: %zu run%s copied, %zu already there%s\n",
            copied, copied == 1 ? "" : "s", already,
            running ? ", some still running" : "");
    status = failed || (n && running) ? 1 : 0;
out:
    ss_pg_close(c);
    sqlite3_close(src);
    free(want);
    ss_run_rows_free(runs, n_runs);
    ss_reader_close(r);
    return status;
}
