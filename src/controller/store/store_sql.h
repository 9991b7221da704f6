/*
 * store_sql.h - the SQL text of the store's writer, one statement per id.
 *
 * The writer prepares every statement once (persistent) when the store
 * opens and binds records to them by parameter number (store_apply.c,
 * store_retention.c): the parameter numbers below and in store_sql.c are
 * the contract between the text and the binding.  Internal to the store
 * folder.
 */
#ifndef STEPSCOPE_STORE_SQL_H
#define STEPSCOPE_STORE_SQL_H

#include <sqlite3.h>
#include <stddef.h>

/* The host evidence of a rank step (ss_host_step, in this order) binds to
 * 11 parameters of SS__ST_RANK_STEP from SS__HOST_FIRST_PARAM on; its GPU
 * evidence (ss_gpu_evidence, the index first) to 11 more from
 * SS__GPU_FIRST_PARAM on. */
#define SS__HOST_FIRST_PARAM 15
#define SS__GPU_FIRST_PARAM 26

/* The writer's statements. */
enum {
    SS__ST_ATTEMPT,
    SS__ST_ATTEMPT_FACTS,
    SS__ST_RANK,
    SS__ST_NODE,
    SS__ST_PROFILE,
    SS__ST_STEP,
    SS__ST_PHASE,
    SS__ST_SYNC,
    SS__ST_RANK_STEP,
    SS__ST_TOTALS,
    SS__ST_FINDING,
    SS__ST_EVENT,
    SS__ST_STACKS,
    SS__ST_END_RUN,
    SS__ST_DROPPED,
    SS__ST_PRUNE,
    SS__ST_VALUES,
    SS__ST_LABELS,
    SS__ST_PRUNE_VALUES,
    SS__ST_DROPPED_VECTORS,
    SS__ST_BEGIN,
    SS__ST_COMMIT,
    SS__ST_ROLLBACK,
    SS__ST_COUNT
};

/* Prepares every statement of the writer on DB into ST (persistent).
 * Returns 0, or -1 with "PATH: cannot prepare a statement: ..." in ERR
 * (the statements prepared so far stay in ST for ss__store_sql_finalize). */
int ss__store_sql_prepare(sqlite3 *db, const char *path,
                          sqlite3_stmt *st[SS__ST_COUNT], char *err,
                          size_t errlen);

/* Finalizes the statements in ST (NULL entries are skipped). */
void ss__store_sql_finalize(sqlite3_stmt *st[SS__ST_COUNT]);

/* Steps ST once and resets it.  On an error it prints "stepscope: store
 * PATH: WHAT: <SQLite's message>" on stderr (unless QUIET) and, when ERR
 * is still empty,
 * keeps "<what it means>: <SQLite's message>" there ("disk full: ...",
 * "store locked by another process: ...": the first error of a batch, for
 * ss_store_outcome.error).  Returns 0 or -1. */
int ss__store_sql_step(sqlite3 *db, sqlite3_stmt *st, const char *path,
                       const char *what, int quiet, char *err, size_t errlen);

#endif
