/*
 * trace_pipeline.h - pipeline microbatches in `stepscope trace`
 * (docs/trace.md, docs/workloads.md#pipelines).
 *
 * For a run whose ranks recorded pipeline spans (the pipeline.spans and
 * pipeline.config vectors, src/lib/pipeline.c), each drawn rank gets a
 * second thread, "rank N microbatches", beside its step track: per step
 * one slice "stage S, step N" from the step's first span (of any rank) to
 * its last, whose args carry the stage's busy time, its measured bubble,
 * the schedule's formula from the step's mean F, B and W spans and their
 * ratio (base/pipeline_bubble.h, the numbers the pipeline detector
 * judges), and inside it one slice per microbatch span, named "F 3",
 * "B 3" or "W 3" (kind and microbatch index) and coloured by kind.
 */
#ifndef STEPSCOPE_TRACE_PIPELINE_H
#define STEPSCOPE_TRACE_PIPELINE_H

#include <stdint.h>
#include <stdio.h>

#include "reader.h"

/* The thread id of rank R's microbatch track: past every rank's own. */
#define SS_TRACE_PIPE_TID(r) (1000000 + (r))

/*
 * Writes the microbatch tracks of steps FIRST..LAST of ATTEMPT of RUN_ID,
 * for the ranks with WANT_RANK[rank] set (WORLD entries), to F as events
 * of process PID, each preceded by ",\n" (F already holds events).  T0_NS
 * is the trace's origin (its ts 0).  Adds the events written to *EVENTS.
 * A run without pipeline spans writes nothing.  Returns 0, or -1 when the
 * store cannot be read or memory runs out (the reason on ERR).
 */
int ss_trace_pipeline_write(ss_reader *rd, FILE *f, int64_t run_id,
                            int64_t attempt, int64_t first, int64_t last,
                            const uint8_t *want_rank, int64_t world,
                            int64_t t0_ns, int64_t pid, uint64_t *events,
                            FILE *err);

#endif
