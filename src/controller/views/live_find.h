/*
 * live_find.h - finds a running controller's HTTP API for the commands
 * that talk to it (`stepscope top`, `stacks`, `profile`): through the
 * live-run file `stepscope run` writes beside the store (store_files.h:
 * PATH.d/live/run-ID.json, holding its url, pid, run id and, when it
 * listens beyond loopback, its token), or as given with --url.
 */
#ifndef STEPSCOPE_LIVE_FIND_H
#define STEPSCOPE_LIVE_FIND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    char url[512];
    char token[256];  /* "" when none is needed or known */
    int64_t run_id;   /* 0 when given by URL (ask the API) */
} ss_live_target;

/*
 * Fills OUT for URL (with TOKEN) when URL is given; else for the live run
 * RUN (an id or a name, NULL: the newest live run) of the store DB (NULL:
 * the default store), whose controller must still be alive.  TOKEN, when
 * given, overrides the file's.  Returns 0, or -1 with a one-line reason in
 * ERR ("run 3 is not running: …", "no job is running: …").
 */
int ss_live_find(const char *db, const char *run, const char *url,
                 const char *token, ss_live_target *out, char *err,
                 size_t errlen);

/* The arguments every command that talks to a live run takes: --db PATH,
 * --url URL, --token TOKEN and the RUN (an id or a name). */
typedef struct {
    const char *db, *url, *token, *run;
} ss_live_args;

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
