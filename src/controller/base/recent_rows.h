/*
 * recent_rows.h - every rank's latest steps, kept where its records pass
 * (its node's agent; node 0's controller for node 0's ranks) so that one
 * rank's detail can be fetched on demand (docs/multinode.md, "A rank's
 * recent steps") whatever the store keeps of it.
 *
 * A rank's rows are a ring of SS_RECENT_STEPS, allocated at its first
 * record: each row is one step's attempt, number, duration, memory and up
 * to SS_RECENT_PHASES phases (inclusive time, a name repeated adding to
 * its first).  Phase names are interned for the whole table, at most
 * SS_RECENT_NAMES of them; a phase over either limit is counted in its
 * row's phases_dropped.  No clock, no I/O, no locking: one thread owns a
 * table.
 */
#ifndef STEPSCOPE_RECENT_ROWS_H
#define STEPSCOPE_RECENT_ROWS_H

#include <stdint.h>

#include "json.h"

#define SS_RECENT_STEPS 256
#define SS_RECENT_PHASES 16
#define SS_RECENT_NAMES 512
#define SS_RECENT_NAME_MAX 127 /* bytes of a name kept; longer ones cut */

typedef struct ss_recent_rows ss_recent_rows;

/* A table for the NRANKS ranks FIRST_RANK..; NULL when memory runs out
 * or NRANKS is 0. */
ss_recent_rows *ss_recent_rows_new(uint32_t first_rank, uint32_t nranks);

/* Whether RANK is one of R's. */
int ss_recent_rows_holds(const ss_recent_rows *r, uint32_t rank);

/* RANK's record of STEP in ATTEMPT: BEGIN_NS to END_NS, its largest RSS
 * and device memory (SS_MISSING: not sampled), and N phases, NAMES[i]
 * with inclusive duration DURS[i] (NULL names are skipped).  The oldest
 * row goes once SS_RECENT_STEPS are kept.  A rank R does not hold, or a
 * ring that cannot be allocated, is counted (ss_recent_rows_lost). */
void ss_recent_rows_add(ss_recent_rows *r, uint32_t rank, uint32_t attempt,
                        uint64_t step, int64_t begin_ns, int64_t end_ns,
                        int64_t rss_bytes, int64_t device_bytes, uint32_t n,
                        const char *const *names, const int64_t *durs);

/* Records that could not be kept (a rank not held, out of memory). */
uint64_t ss_recent_rows_lost(const ss_recent_rows *r);

/*
 * Appends RANK's latest STEPS rows (or all it keeps, if fewer) to OUT as
 * one JSON object, oldest first:
 *   {"rank":R,"kept":K,"recorded":N,"capacity":256,
 *    "rows":[{"attempt":A,"step":S,"step_ms":M,"rss_bytes":B|null,
 *             "device_bytes":B|null,"phases":{"NAME":MS,...},
 *             "phases_dropped":D},...]}
 * (K: rows returned; N: the rank's records ever kept).  Returns 0, or -1
 * when R does not hold RANK (OUT unchanged).
 */
int ss_recent_rows_json(const ss_recent_rows *r, uint32_t rank,
                        uint32_t steps, ss_buf *out);

/* Frees R.  NULL is a no-op. */
void ss_recent_rows_free(ss_recent_rows *r);

#endif
