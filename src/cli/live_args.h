/*
 * live_args.h - the command-line arguments every command that talks to a
 * live run takes (`stepscope top`, `stacks`, `profile`): --db PATH, --url
 * URL, --token TOKEN and the RUN (an id or a name), read into an
 * ss_live_args (views/live_find.h).
 */
#ifndef STEPSCOPE_LIVE_ARGS_H
#define STEPSCOPE_LIVE_ARGS_H

#include <stdio.h>

#include "live_find.h"

/*
 * Takes ARGV[*I] when it is one of the shared arguments (its value too,
 * *I then moves past it).  Returns 1 when taken, 0 when it is not one of
 * them (the command's own), or 2 after printing a usage error, prefixed
 * with "stepscope CMD: ", to ERR (a missing value, a second RUN).
 */
int ss_live_args_take(const char *cmd, int argc, char **argv, int *i,
                      ss_live_args *a, FILE *err);

/* Checks the shared arguments together: --url must be http://HOST:PORT/
 * and not come with --db.  Returns -1 when they are fine, or 2 after
 * printing a usage error to ERR. */
int ss_live_args_check(const char *cmd, const ss_live_args *a, FILE *err);

#endif
