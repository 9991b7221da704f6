/*
 * pg_mirror.h - the readers' local copy of a team database.
 *
 * Every reader (report, runs, trace, goodput, guard, diff, serve) reads a
 * team database through the same read API (reader.h) as a SQLite file:
 * the runs are copied from PostgreSQL into a private SQLite store with
 * the same schema (pg_copy.h), which the reader then opens.  So both
 * backends give the same answers by construction.  The copy is kept in
 * the user's cache ($XDG_CACHE_HOME/stepscope/team, or ~/.cache/...),
 * private like a store, one per URI (its role included), and each command
 * takes only the runs copied to the server since the last; with
 * STEPSCOPE_TEAM_CACHE=off, or without a home, it lives in a private
 * temporary directory (mode 0700, under TMPDIR or /tmp) and is removed
 * when the process exits.
 */
#ifndef STEPSCOPE_PG_MIRROR_H
#define STEPSCOPE_PG_MIRROR_H

#include <stddef.h>

/*
 * The path of this process's local copy of the team database URI into
 * OUT, brought up to date from the server on the first call (later calls
 * return the same copy, as refreshed by ss_pg_mirror_follow).  Returns 0,
 * or -1 with a one-line reason in ERR: the server cannot be reached, the role
 * may not read, the schema is missing, older or newer.  Thread-safe.
 */
int ss_pg_mirror_path(const char *uri, char *out, size_t outlen, char *err,
                      size_t errlen);

/*
 * Keeps the copy of URI (made by ss_pg_mirror_path) up to date: a thread
 * copies the database again every INTERVAL_S seconds, in one transaction
 * a reader sees whole or not at all.  While the server cannot be reached
 * the last copy stays, and one line on stderr says so (and one when it is
 * back).  Returns 0, or -1 with ERR when the thread cannot start.
 */
int ss_pg_mirror_follow(const char *uri, unsigned interval_s, char *err,
                        size_t errlen);

/* A running run whose job has not copied it for this long reads
 * interrupted (its job stopped without ending it). */
#define SS_PG_STALE_NS (120LL * 1000000000LL)

#endif
