/*
 * pg_push.h - `stepscope push`: finished runs of a local SQLite store
 * copied into a team database (docs/store.md, "A team's store").
 */
#ifndef STEPSCOPE_PG_PUSH_H
#define STEPSCOPE_PG_PUSH_H

#include <stddef.h>
#include <stdio.h>

/*
 * Copies the runs SPECS[0..N) of the store DB (NULL: the default store;
 * a spec as ss_reader_select_run takes it; N == 0: every run) into the
 * team database URI, each in one transaction.  A run the server already
 * holds finished is left alone and said so (pushing twice changes
 * nothing); a run still running is skipped and said so.  The database's
 * schema must exist (`stepscope upgrade --db URI`); push never creates
 * it.  One line per run on OUT, errors on ERR_OUT.  Returns the exit
 * status: 0 when every run is in the team database, 1 otherwise.
 */
int ss_pg_push(const char *db, const char *uri, const char *const *specs,
               size_t n, FILE *out, FILE *err_out);

#endif
