/*
 * top.h - the work of `stepscope top` (its command line: src/cli/
 * cmd_top.c): a live terminal view of a running job (docs/top.md).
 *
 * It attaches to the controller's HTTP API (found through the live-run
 * file `stepscope run` writes beside the store, <store dir>/live/
 * run-ID.json, or given with --url) and redraws about once a second: step
 * rate, worst vs median step time over the recent steps, one line per rank
 * (step time against the median rank as a bar, current phase, last step,
 * last heard) and the newest findings.  Plain ANSI escape codes, no
 * terminal library; the view follows the terminal's size and quits on `q`
 * or Ctrl-C, leaving the terminal as it was.  When the output is not a
 * terminal (or with --once) it prints one plain snapshot and exits.
 */
#ifndef STEPSCOPE_TOP_H
#define STEPSCOPE_TOP_H

#include <stdint.h>
#include <stdio.h>

#include "live_find.h"

/* `stepscope top`'s options, checked by its front-end. */
typedef struct {
    ss_live_args live; /* --db, --url, --token, RUN */
    double interval_s; /* between refreshes, 0.1 to 3600 */
    int once;          /* one snapshot, even on a terminal */
} ss_top_opts;

/*
 * Shows the live run O names.  Interactive when OUT is stdout and both
 * stdin and stdout are terminals (and O->once is not set); otherwise
 * writes one snapshot to OUT.  Errors go to ERR as one line starting
 * "stepscope top: ".  Returns the exit status: 0 after `q`, Ctrl-C, the
 * end of the run or a snapshot; 1 when no job is running or the
 * controller cannot be reached.
 */
int ss_top_cmd(const ss_top_opts *o, FILE *out, FILE *err);

#endif
