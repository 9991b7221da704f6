/*
 * stacks_cmd.h - `stepscope stacks`: every rank's stacks of a running job,
 * merged (docs/debug.md).
 *
 *   stepscope stacks [--db PATH | --url URL] [--token TOKEN] [--native]
 *                    [--json] [RUN]
 *
 * It asks the job's controller (found like `stepscope top` finds it,
 * live_find.h) for GET /api/runs/{id}/stacks and prints the ranks grouped
 * by identical stacks, the outlier group first, then what each rank that
 * gave no Python stack said and, with --native, each rank's native frames.
 */
#ifndef STEPSCOPE_STACKS_CMD_H
#define STEPSCOPE_STACKS_CMD_H

#include <stdio.h>

/*
 * `stepscope stacks`.  ARGV[0] is the subcommand's name.  Writes to OUT,
 * errors to ERR as one line starting "stepscope stacks: ".  Returns the
 * exit status: 0 when every rank gave its Python stack, 3 when some did
 * not (the output says which and why), 1 when no job is running or the
 * controller cannot be reached or refuses, 2 for a usage error.
 */
int ss_stacks_cmd(int argc, char **argv, FILE *out, FILE *err);

/* ss_stacks_cmd on stdout and stderr. */
int ss_stacks_main(int argc, char **argv);

#endif
