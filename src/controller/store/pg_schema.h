/*
 * pg_schema.h - the team database's schema (PostgreSQL): its version,
 * its creation and migrations, and the check every reader makes.
 *
 * The tables and columns are those of the SQLite store (store_schema.c)
 * in PostgreSQL's types (INTEGER as bigint, TEXT as text, BLOB as bytea),
 * so a run copies column by column; the ids the server assigns (runs.id,
 * events.id, stack_snapshots.id) are identity columns, runs.uuid is
 * unique, and runs.seen_at (the wall time of the run's latest copy) is
 * the team database's own.  The version is the one row of
 * stepscope_schema.  docs/store.md shows the schema.
 */
#ifndef STEPSCOPE_PG_SCHEMA_H
#define STEPSCOPE_PG_SCHEMA_H

#include <stddef.h>

#include "pg_conn.h"

/* The team schema version this build writes and reads.  Version 1 holds
 * the tables of SQLite store schema 15. */
#define SS_PG_SCHEMA_VERSION 1

/*
 * Creates the schema in C's database, or brings it up to
 * SS_PG_SCHEMA_VERSION, in one transaction under an advisory lock (two
 * jobs starting at once do it once).  Returns the version it found before
 * (0: none), or -1 with a one-line reason in ERR (a newer schema, a role
 * that may not create tables, a lost server); on failure nothing changed.
 */
int ss_pg_schema_migrate(ss_pg *c, char *err, size_t errlen);

/*
 * Checks, without changing anything, that C's database holds the schema
 * this build reads.  Returns 0, or -1 with a one-line reason in ERR that
 * says what to run: no schema (`stepscope upgrade --db URI` creates it),
 * an older one (the same upgrade), a newer one (upgrade stepscope).
 */
int ss_pg_schema_check(ss_pg *c, char *err, size_t errlen);

#endif
