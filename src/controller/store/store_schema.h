/*
 * store_schema.h - the store's schema version, identity check,
 * migrations and read-only opening (internal to the store: store.c, the
 * writer, and reader.c, the read API).
 *
 * A stepscope store is a SQLite database whose `meta` table maps
 * 'application' to 'stepscope' and whose PRAGMA user_version is the schema
 * version.  Migration N (1-based) takes a store from version N-1 to N; they
 * are listed in order in store_schema.c and are the only place where the
 * schema is written down.  docs/store.md describes the tables.
 */
#ifndef STEPSCOPE_STORE_SCHEMA_H
#define STEPSCOPE_STORE_SCHEMA_H

#include <stddef.h>

struct sqlite3;

/* The schema version this build writes and reads. */
#define SS_SCHEMA_VERSION 15

/* The version that added rank_steps' host evidence columns (host_*). */
#define SS_SCHEMA_HOST 7

/* The version that added the stack_snapshots table. */
#define SS_SCHEMA_STACKS 10

/* The version that added rank_steps' GPU evidence columns (gpu_*). */
#define SS_SCHEMA_GPU 8

/* The version that added the nodes table (multi-node runs). */
#define SS_SCHEMA_NODES 9
/* The version that added the attempts' facts (ended_at, cause, first_step,
 * last_step, resumed_from). */
#define SS_SCHEMA_ATTEMPT_FACTS 11
/* The version that added the profiles table. */
#define SS_SCHEMA_PROFILES 12
/* The version that allowed stack snapshots taken on a non-finite value
 * (stack_snapshots.trigger 'nonfinite'). */
#define SS_SCHEMA_NONFINITE_STACKS 14
/* The version that allowed stack snapshots taken on a replica divergence
 * (stack_snapshots.trigger 'divergence'). */
#define SS_SCHEMA_DIVERGENCE_STACKS 15

/* The value of meta.application in every stepscope store. */
#define SS_STORE_MARKER "stepscope"

/*
 * Checks that DB (opened from PATH, which is used only in messages) is a
 * stepscope store this build can use.  Returns the schema version (0 for a
 * database without any table: a new, empty file), or -1 with a one-line
 * reason in ERR when the file is not a SQLite database, is corrupt, is a
 * SQLite database of some other application, or is from a newer version.
 */
int ss_schema_check(struct sqlite3 *db, const char *path, char *err,
                    size_t errlen);

/*
 * Brings DB up to SS_SCHEMA_VERSION in one IMMEDIATE transaction (so two
 * processes opening a new file at once cannot both create it).  Returns 0,
 * or -1 with a reason in ERR; on failure nothing is changed.
 */
int ss_schema_migrate(struct sqlite3 *db, const char *path, char *err,
                      size_t errlen);

/*
 * Opens the existing store at PATH read-only, without creating or changing
 * anything, and checks it as ss_schema_check does.  The connection is a
 * URI with mode=ro; where SQLite cannot create the WAL index (a directory
 * the user may not write, a read-only mount) and no PATH-wal exists, the
 * file is reopened immutable (docs/store.md, "Reading").  Stores the
 * connection in *DB and returns its schema version (>= 1), or returns -1
 * with a reason in ERR (no file, not a store, an empty store file, newer
 * version, corrupt, a write-ahead log it cannot index) and *DB == NULL.
 * The caller closes *DB with sqlite3_close.  A store older than
 * SS_SCHEMA_VERSION is returned as is: only the writer migrates.
 */
int ss_schema_open_readonly(const char *path, struct sqlite3 **db, char *err,
                            size_t errlen);

#endif
