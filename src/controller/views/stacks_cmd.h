/*
 * stacks_cmd.h - the work of `stepscope stacks` (its command line:
 * src/cli/cmd_stacks.c): every rank's stacks of a running job, merged
 * (docs/debug.md).
 *
 * It asks the job's controller (found like `stepscope top` finds it,
 * live_find.h) for GET /api/runs/{id}/stacks and prints the ranks grouped
 * by identical stacks, the outlier group first, then what each rank that
 * gave no Python stack said and, with --native, each rank's native frames.
 */
#ifndef STEPSCOPE_STACKS_CMD_H
#define STEPSCOPE_STACKS_CMD_H

#include <stdio.h>

#include "live_find.h"

/* `stepscope stacks`'s options, checked by its front-end. */
typedef struct {
    ss_live_args live; /* --db, --url, --token, RUN */
    int native, json;
} ss_stacks_opts;

/*
 * Asks for and prints the stacks O names.  Writes to OUT, errors to ERR
 * as one line starting "stepscope stacks: ".  Returns the exit status: 0
 * when every rank gave its Python stack, 3 when some did not (the output
 * says which and why), 1 when no job is running or the controller cannot
 * be reached or refuses.
 */
int ss_stacks_cmd(const ss_stacks_opts *o, FILE *out, FILE *err);

#endif
