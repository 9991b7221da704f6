/*
 * trace_profiles.h - the torch.profiler traces of `stepscope profile`,
 * merged into `stepscope trace` (docs/debug.md#profiling, docs/trace.md).
 *
 * Each stored trace (the `profiles` rows of status "done") is read, one
 * at a time, and its events are written into the trace being made: one
 * process per rank and request ("rank 2 torch.profiler (request 1)"),
 * each of the profiler's (pid, tid) pairs a thread of it, every timestamp
 * moved onto the trace's clock.  The alignment: the rank read its
 * CLOCK_MONOTONIC (moved to the controller's clock, like its steps) inside
 * the profiler event named "stepscope::clock"; that event's own timestamp
 * in the trace file is the same instant on the profiler's clock, so
 * their difference moves every event.  The error is the few microseconds
 * between the event's begin and the clock read.
 */
#ifndef STEPSCOPE_TRACE_PROFILES_H
#define STEPSCOPE_TRACE_PROFILES_H

#include <stdint.h>
#include <stdio.h>

#include "reader.h"

#define SS_TRACE_PROFILE_MAX_BYTES (64u << 20) /* larger files: not merged */

/*
 * Writes the events of the stored profiles of ATTEMPT of RUN_ID for the
 * ranks with WANT_RANK[rank] set (WORLD entries) to F, each preceded by
 * ",\n" (F already holds events).  T0_NS is the trace's origin on the
 * controller's clock (its ts 0), PID_BASE the first process id free to
 * use.  Adds the events written to *EVENTS.  A profile that cannot be
 * merged (its file is on another host or unreadable, too large, not a
 * Chrome trace, without the marker) is left out with one line on ERR.
 * Returns the number of profiles merged, or -1 when the store cannot be
 * read (the reason on ERR).
 */
int ss_trace_profiles_write(ss_reader *rd, FILE *f, int64_t run_id,
                            int64_t attempt, const uint8_t *want_rank,
                            int64_t world, int64_t t0_ns, int64_t pid_base,
                            uint64_t *events, FILE *err);

#endif
