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
 * RUN (an id or a name; NULL: the one live run) of the store DB (NULL:
 * the default store), whose controller must still be alive.  TOKEN, when
 * given, overrides the file's.  Returns 0, or -1 with a one-line reason in
 * ERR ("run 3 is not running: …", "no job is running: …", or, when RUN is
 * NULL and several jobs run, "2 jobs are running: run 5 (b, pid 77), run
 * 4 (a, pid 66); say which with its id or name (RUN), e.g. 5").
 */
int ss_live_find(const char *db, const char *run, const char *url,
                 const char *token, ss_live_target *out, char *err,
                 size_t errlen);

/* Which live run a command that talks to one means: --db PATH, --url
 * URL, --token TOKEN and the RUN (an id or a name), as ss_live_find takes
 * them (src/cli/live_args.h reads them from a command line). */
typedef struct {
    const char *db, *url, *token, *run;
} ss_live_args;

#endif
