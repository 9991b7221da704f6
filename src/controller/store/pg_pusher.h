/*
 * pg_pusher.h - the copier of a live run into a team database: `stepscope
 * run --db postgresql://...` records into a local SQLite store (the
 * spool) as any run does, and a thread of its own copies the run from
 * there into the team database as it goes and once more at its end.
 *
 * The job never waits for the server: the copier reads the spool over a
 * read-only connection and talks to the server from its own thread.
 * When the server cannot be reached, a copy fails, is counted, and the
 * next one reconnects; nothing is lost while the spool holds the run.
 */
#ifndef STEPSCOPE_PG_PUSHER_H
#define STEPSCOPE_PG_PUSHER_H

#include <stddef.h>
#include <stdio.h>

typedef struct ss_pg_pusher ss_pg_pusher;

/* Copies between two copies when STEPSCOPE_PUSH_INTERVAL_MS does not say
 * otherwise; a copy that took long stretches the wait to 4 times its
 * duration, so copying costs the controller at most a fifth of a core. */
#define SS_PG_PUSH_INTERVAL_MS 5000

/*
 * Starts copying run UUID of the SQLite store SPOOL into the team database
 * URI: the first copy at once (it creates the team schema when missing,
 * as `stepscope upgrade` does, where the role may), then every interval.
 * Returns NULL with ERR only when the thread cannot start (out of memory);
 * an unreachable server is not an error here.
 */
ss_pg_pusher *ss_pg_pusher_start(const char *uri, const char *spool,
                                 const char *uuid, char *err, size_t errlen);

/*
 * Stops the thread, copies the run a last time (its end is in the spool
 * by now: call after the store is closed), trying for up to 10 s, and
 * says on OUT in one line where the run is: copied (as which run, and how
 * many copies failed on the way), or kept in the spool with the `stepscope
 * push` command that copies it.  Frees P; NULL is a no-op.  Returns 0 when
 * the team database holds the whole run, -1 otherwise.
 */
int ss_pg_pusher_finish(ss_pg_pusher *p, FILE *out);

#endif
