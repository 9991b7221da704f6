/*
 * profile_cmd.h - the work of `stepscope profile` (its command line:
 * src/cli/cmd_profile.c): ask a running job's ranks for a torch.profiler
 * trace (docs/debug.md#profiling).
 *
 * It finds the job's controller as `stepscope top` does, POSTs
 * /api/runs/{id}/profile, then polls the request until every rank asked
 * has answered (a progress line on a terminal), and prints where each
 * rank's trace is, or why there is none.  `stepscope trace` merges the
 * stored traces with the steps.
 */
#ifndef STEPSCOPE_PROFILE_CMD_H
#define STEPSCOPE_PROFILE_CMD_H

#include <stdio.h>

#include "live_find.h"

/* `stepscope profile`'s options, checked by its front-end. */
typedef struct {
    ss_live_args live;     /* --db, --url, --token, RUN */
    const char *ranks;     /* "2,5" or "0-3,7" (digits, ',' and '-') */
    const char *seconds;   /* a number in (0, 600] */
} ss_profile_opts;

/* Profiles the ranks O names.  Results go to OUT, progress and errors to
 * ERR ("stepscope profile: ...").  Returns 0 when every rank asked wrote a
 * trace, 1 when some did not (or no job could be reached). */
int ss_profile_cmd(const ss_profile_opts *o, FILE *out, FILE *err);

#endif
