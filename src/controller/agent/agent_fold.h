/*
 * agent_fold.h - a node agent folds its ranks' step records into one node
 * partial per step (node_partial.h) for --aggregate node
 * (docs/multinode.md, "Node aggregation").
 *
 * Records arrive per rank in step order but the ranks interleave, so the
 * fold keeps a bounded ring of open steps (SS_AGENT_FOLD_SLOTS).  A step's
 * partial is emitted when every rank of the node that still runs has
 * reported it; when a slot is needed for a newer step while its step
 * still waits for a rank; when it has waited longer than the age limit
 * (ss_agent_fold_expire); and at the end (ss_agent_fold_flush).  A record
 * for a step already emitted (a rank that lagged past all of that) is
 * counted in the next partial's drops.  No clock, no I/O: the caller
 * sends what emit gives it.
 */
#ifndef STEPSCOPE_AGENT_FOLD_H
#define STEPSCOPE_AGENT_FOLD_H

#include <stdint.h>

#include "node_partial.h"
#include "wire.h"

#define SS_AGENT_FOLD_SLOTS 8

typedef struct ss_agent_fold ss_agent_fold;

/* Emits P (valid during the call). */
typedef void (*ss_agent_fold_emit)(void *ctx, const ss_node_partial *p);

/* A fold for the NPROC ranks RANK_BASE.. of a node.  NULL when memory
 * runs out. */
ss_agent_fold *ss_agent_fold_new(uint32_t rank_base, uint32_t nproc,
                                  ss_agent_fold_emit emit, void *ctx);

/* Folds global rank RANK's record S in, its phases named by NAMES
 * (indexed by name id; NULL entries are counted as dropped).  NOW_MS:
 * the caller's clock, for the age limit. */
void ss_agent_fold_add(ss_agent_fold *f, uint32_t rank, const wire_step *s,
                       const char *const *names, uint64_t now_ms);

/* RANK has exited: no step waits for it from now on (steps it completed
 * all of the others' are emitted). */
void ss_agent_fold_rank_gone(ss_agent_fold *f, uint32_t rank);

/* A new attempt: every rank runs again, the ring is emptied (its steps
 * emitted first). */
void ss_agent_fold_reset(ss_agent_fold *f);

/* Emits the steps that have waited MAX_AGE_MS or more since their first
 * record. */
void ss_agent_fold_expire(ss_agent_fold *f, uint64_t now_ms,
                          uint64_t max_age_ms);

/* Emits every open step, oldest first. */
void ss_agent_fold_flush(ss_agent_fold *f);

typedef struct {
    uint64_t partials;       /* emitted */
    uint64_t incomplete;     /* of them, with a rank still running missing */
    uint64_t late_records;   /* records for a step already emitted */
} ss_agent_fold_stats;

void ss_agent_fold_get_stats(const ss_agent_fold *f, ss_agent_fold_stats *out);

/* Frees F (what is open is not emitted).  NULL is a no-op. */
void ss_agent_fold_free(ss_agent_fold *f);

#endif
