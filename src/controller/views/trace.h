/*
 * trace.h - the work of `stepscope trace` (its command line: src/cli/
 * cmd_trace.c): a run's per-rank timelines as a Chrome / Perfetto trace
 * (JSON trace-event format), docs/trace.md.
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

/* `stepscope trace`'s options, checked by its front-end (the step range
 * and the ranks are read here, against the run). */
typedef struct {
    const char *db;     /* NULL: the default store */
    const char *run;    /* NULL: the latest run */
    const char *output; /* the file to write; "-": OUT */
    const char *steps;  /* "A:B", "A:", ":B" or "A"; NULL: the latest
                           SS_TRACE_DEFAULT_STEPS kept steps */
    const char *ranks;  /* "0,3,8-15"; NULL: all */
    int64_t attempt;    /* -1: the latest */
} ss_trace_opts;

/*
 * Writes the trace O asks for to O->output ("-": OUT), a one-line summary
 * and errors ("stepscope trace: ...") to ERR, and a progress line to ERR
 * when it is a terminal.  Returns the exit status: 0 on success, 1 when
 * the trace cannot be made (no store, no such run, no timeline data in the
 * range, cannot write), 2 for a --steps or --ranks that does not fit.
 */
int ss_trace_cmd(const ss_trace_opts *o, FILE *out, FILE *err);

#endif
