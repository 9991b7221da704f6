/*
 * trace.h - `stepscope trace`: a run's per-rank timelines as a Chrome /
 * Perfetto trace (JSON trace-event format), docs/trace.md.
 *
 *   stepscope trace [--db PATH] [--attempt N] [RUN] -o FILE
 *                   [--steps A:B] [--ranks LIST]
 *
 * One process per run, one thread ("rank N") per rank; each kept step of a
 * rank is a complete slice ("X") with its phases as slices nested inside
 * it, sync arrivals are thread-scoped instant events with the arrival's
 * skew against the median rank, findings are global instant markers at
 * their first step.  Timestamps are microseconds since the run's first
 * step.  The data is the store's rank_steps rows (so retention decides
 * which steps can be drawn: every step of the recent window, then every
 * sample_every-th step; docs/store.md).
 */
#ifndef STEPSCOPE_TRACE_H
#define STEPSCOPE_TRACE_H

#include <stdint.h>
#include <stdio.h>

#define SS_TRACE_DEFAULT_STEPS 200

/*
 * `stepscope trace`.  ARGV[0] is the subcommand's name.  Writes the trace
 * to the file given with -o ("-": OUT), a one-line summary and errors
 * ("stepscope trace: ...") to ERR, and a progress line to ERR when it is a
 * terminal.  Returns the exit status: 0 on success and for --help, 1 when
 * the trace cannot be made (no store, no such run, no timeline data in the
 * range, cannot write), 2 for a usage error.
 */
int ss_trace_cmd(int argc, char **argv, FILE *out, FILE *err);

/* ss_trace_cmd on stdout and stderr. */
int ss_trace_main(int argc, char **argv);

#endif
