/*
 * reader_findings.c - the loaders of what happened to a run: findings,
 * events and stack snapshots (reader.h).
 */
#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader_internal.h"

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

static void free_findings(void *rows, size_t n)
{
    ss_finding_rows_free(rows, n);
}

static int finding_fill(ss_reader *r, sqlite3_stmt *st, void *elem,
                        void *ctx)
{
    (void)ctx;
    ss_finding_row *f = elem;
    f->id = sqlite3_column_int64(st, 0);
    f->attempt = sqlite3_column_int64(st, 1);
    f->first_step = ss__rd_col_i64(st, 6);
    f->last_step = ss__rd_col_i64(st, 7);
    f->first_seen_at = ss__rd_col_i64(st, 10);
    f->updated_at = ss__rd_col_i64(st, 11);
    if (ss__rd_col_dup(st, 2, &f->kind) | ss__rd_col_dup(st, 3, &f->severity) |
        ss__rd_col_dup(st, 5, &f->phase) |
        ss__rd_col_dup(st, 8, &f->evidence) |
        ss__rd_col_dup(st, 9, &f->message) |
        ss__rd_parse_csv((const char *)sqlite3_column_text(st, 4), &f->ranks,
                         &f->n_ranks))
        return ss__rd_oom(r);
    return 0;
}

int ss_reader_findings(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t first, int64_t last, ss_finding_row **rows,
                       size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_finding_row), finding_fill,
                                    free_findings};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, attempt, first < 0 ? INT64_MIN : first,
                       last < 0 ? INT64_MAX : last};
    return ss__rd_collect(r, &(ss__rd_query){
        "SELECT finding_id, attempt, kind, severity, "
        "CASE WHEN json_valid(ranks) THEN (SELECT group_concat(value, ',') "
        "FROM json_each(findings.ranks) WHERE type = 'integer') END, "
        "phase, first_step, last_step, "
        "CASE WHEN json_valid(evidence) AND json_type(evidence) = 'object' "
        "THEN json(evidence) ELSE '{}' END, message, first_seen_at, "
        "updated_at FROM findings WHERE run_id = ?1 AND attempt = ?2 "
        "AND last_step >= ?3 AND first_step <= ?4 "
        "ORDER BY severity = 'critical' DESC, first_step, finding_id",
        args, 4, NULL, 0}, &how, NULL, rows, n);
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

static void free_events(void *rows, size_t n)
{
    ss_event_rows_free(rows, n);
}

static int event_fill(ss_reader *r, sqlite3_stmt *st, void *elem, void *ctx)
{
    (void)ctx;
    ss_event_row *e = elem;
    e->id = sqlite3_column_int64(st, 0);
    e->attempt = sqlite3_column_int64(st, 1);
    e->at = ss__rd_col_i64(st, 2);
    e->rank = ss__rd_col_i64(st, 4);
    if (ss__rd_col_dup(st, 3, &e->kind) | ss__rd_col_dup(st, 5, &e->message))
        return ss__rd_oom(r);
    return 0;
}

int ss_reader_events(ss_reader *r, int64_t run_id, const ss_event_query *q,
                     ss_event_row **rows, size_t *n, int64_t *total)
{
    static const ss__rd_rows how = {sizeof(ss_event_row), event_fill,
                                    free_events};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    int64_t args[4] = {run_id, q->attempt, q->after_id,
                       q->limit > 0 ? q->limit : -1};
    const char *in_attempt = q->attempt >= 0 ? "AND attempt = ?2 " : "";
    char sql[512];
    if (total) {
        snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE "
                 "run_id = ?1 %s", in_attempt);
        if (ss__rd_i64(r, &(ss__rd_query){sql, args, q->attempt >= 0 ? 2 : 1,
                                          NULL, 0},
                       total))
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
    return ss__rd_collect(r, &(ss__rd_query){sql, args, 4, NULL, 0}, &how,
                          NULL, rows, n);
}

/* ---- stack snapshots ---- */

static int snapshot_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    ss_stack_snapshot_row *row = arg;
    row->id = ss__rd_col_i64(st, 0);
    row->attempt = ss__rd_col_i64(st, 1);
    row->taken_at = ss__rd_col_i64(st, 2);
    row->finding_id = ss__rd_col_i64(st, 4);
    if (ss__rd_col_dup(st, 3, &row->trigger) |
        ss__rd_col_dup(st, 5, &row->json)) {
        ss_stack_snapshot_row_clear(row);
        return ss__rd_oom(r);
    }
    return 0;
}

int ss_reader_stack_snapshot(ss_reader *r, int64_t run_id, int64_t attempt,
                             ss_stack_snapshot_row *row)
{
    memset(row, 0, sizeof *row);
    int rc = ss__rd_run_exists(r, run_id);
    if (rc != 0 || r->version < SS_SCHEMA_STACKS)
        return rc;
    int64_t args[2] = {run_id, attempt};
    return ss__rd_one(r, &(ss__rd_query){
                          "SELECT id, attempt, taken_at, trigger, "
                          "finding_id, json FROM stack_snapshots "
                          "WHERE run_id = ?1 AND (?2 < 0 OR attempt = ?2) "
                          "ORDER BY trigger = 'hang' DESC, "
                          "trigger <> 'request' DESC, taken_at DESC, "
                          "id DESC LIMIT 1",
                          args, 2, NULL, 0},
                      snapshot_row, row);
}

void ss_stack_snapshot_row_clear(ss_stack_snapshot_row *row)
{
    free(row->trigger);
    free(row->json);
    memset(row, 0, sizeof *row);
}
