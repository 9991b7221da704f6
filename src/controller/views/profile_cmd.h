/*
 * profile_cmd.h - `stepscope profile`: ask a running job's ranks for a
 * torch.profiler trace (docs/debug.md#profiling).
 *
 *   stepscope profile [--db PATH | --url URL] [--token TOKEN] [RUN]
 *                     --ranks LIST --seconds S
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

/* `stepscope profile`; ARGV[0] is the subcommand's name.  Results go to
 * OUT, progress and errors to ERR ("stepscope profile: ...").  Returns 0
 * when every rank asked wrote a trace, 1 when some did not (or no job
 * could be reached), 2 for a usage error. */
int ss_profile_cmd(int argc, char **argv, FILE *out, FILE *err);

/* ss_profile_cmd on stdout and stderr. */
int ss_profile_main(int argc, char **argv);

#endif
