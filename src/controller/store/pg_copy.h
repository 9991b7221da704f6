/*
 * pg_copy.h - copying runs between a SQLite store and a team database:
 * one run from SQLite into PostgreSQL (push, and the pusher of `run
 * --db postgresql://...`), and every run from PostgreSQL into a SQLite
 * store (the readers' local copy, pg_mirror.h).  Internal to the store
 * folder.
 *
 * Tables and columns are the SQLite store's (store_schema.c), which the
 * team schema mirrors (pg_schema.c): a column is copied by name, so the
 * two stay equal by construction.  Run ids are the server's: a pushed
 * run's id is assigned by PostgreSQL, and its rows' run_id is mapped on
 * the way; events and stack snapshots get the server's ids too, in their
 * local order.
 */
#ifndef STEPSCOPE_PG_COPY_H
#define STEPSCOPE_PG_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "pg_conn.h"

struct sqlite3;

/* What ss_pg_push_run did. */
typedef enum {
    SS_PG_COPIED,   /* the run is new to the server */
    SS_PG_REPLACED, /* the server's copy (a running one) was replaced */
    SS_PG_ALREADY   /* the server holds it finished: nothing changed */
} ss_pg_push_outcome;

typedef struct {
    ss_pg_push_outcome outcome;
    int64_t server_id; /* the run's id in the team database */
    int64_t rows;      /* rows copied (0 for SS_PG_ALREADY) */
} ss_pg_push_result;

/*
 * Copies run LOCAL_ID of the SQLite store SRC (a connection at
 * SS_SCHEMA_VERSION, in no transaction) into the team database C, in one
 * transaction on each side, so both see one consistent run: the server
 * holds the whole run or none of it.  The run is known by its uuid: a run
 * the server already holds finished is left alone (SS_PG_ALREADY) unless
 * REPLACE; one it holds as running (an earlier copy of a live run) is
 * replaced.  STATUS, when not NULL, is written instead of the stored
 * status (a dead controller's `running` run is `interrupted`).  Returns 0,
 * or -1 with a one-line reason in ERR (the server's words).
 */
int ss_pg_push_run(ss_pg *c, struct sqlite3 *src, int64_t local_id,
                   int replace, const char *status, ss_pg_push_result *res,
                   char *err, size_t errlen);

/*
 * Makes DST, a SQLite store at SS_SCHEMA_VERSION, hold every run of the
 * team database C, read in one REPEATABLE READ transaction (a consistent
 * snapshot) and written in one SQLite transaction (a reader of DST sees
 * the old copy or the new one).  The first load takes everything; a later
 * one on the same DST takes the runs table and the rows of the runs the
 * server copied since (their seen_at, kept in DST's team_copies table)
 * and drops the runs the server no longer holds.  Ids are the server's.
 * A run the server holds as running whose last copy is older than
 * STALE_NS reads `interrupted` (its job stopped copying).
 * Returns the number of runs, or -1 with a one-line reason in ERR.
 */
long ss_pg_load(ss_pg *c, struct sqlite3 *dst, int64_t stale_ns, char *err,
                size_t errlen);

#endif
