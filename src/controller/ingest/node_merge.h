/*
 * node_merge.h - the controller's merge of node partials (--aggregate
 * node, docs/multinode.md "Node aggregation"): each agent's NODE_PARTIAL
 * of a step and node 0's own ranks' records are merged into the step's
 * aggregate (node_partial.h), which is final once every rank of the world
 * is accounted for: a partial accounts for the ranks its node expected
 * (present or not), a local record for its rank.
 *
 * A bounded ring of open steps (SS_NODE_MERGE_SLOTS): when a newer step
 * needs a slot, the oldest open step is finalized incomplete, so memory
 * stays bounded whatever a node does; ss_node_merge_flush finalizes what
 * is open at the end.  A partial of a step already finalized is counted
 * late and dropped.  For each final step the time from its latest rank's
 * end (controller's clock) to the merge is kept in a sketch, the latency
 * the scale benchmark reports.  No I/O; times are the caller's.
 */
#ifndef STEPSCOPE_NODE_MERGE_H
#define STEPSCOPE_NODE_MERGE_H

#include <stdint.h>

#include "ddsketch.h"
#include "node_partial.h"

#define SS_NODE_MERGE_SLOTS 64

typedef struct ss_node_merge ss_node_merge;

/* A step's aggregate is final: P (valid during the call), COMPLETE 0 when
 * it was forced out before every rank was accounted for. */
typedef void (*ss_node_merge_final)(void *ctx, const ss_node_partial *p,
                                    int complete);

/* A merge for WORLD_SIZE ranks.  NULL when memory runs out. */
ss_node_merge *ss_node_merge_new(uint32_t world_size,
                                 ss_node_merge_final final, void *ctx);

/* Merges a node's partial P (times on the controller's clock) at NOW_NS. */
void ss_node_merge_partial(ss_node_merge *m, const ss_node_partial *p,
                           int64_t now_ns);

/* Merges one local rank's record of STEP: RANK, its begin and end, N
 * phases NAMES[i] of DURS[i] ns, at NOW_NS. */
void ss_node_merge_rank(ss_node_merge *m, uint64_t step, uint32_t rank,
                        int64_t begin_ns, int64_t end_ns, uint32_t n,
                        const char *const *names, const int64_t *durs,
                        int64_t now_ns);

/* Finalizes every open step, oldest first. */
void ss_node_merge_flush(ss_node_merge *m, int64_t now_ns);

typedef struct {
    uint64_t partials;        /* merged */
    uint64_t local_records;   /* node 0's records merged */
    uint64_t steps_complete;  /* final with every rank accounted for */
    uint64_t steps_incomplete;
    uint64_t late;            /* partials or records of a finalized step */
    ss_ddsketch latency_ns;   /* latest rank's end -> final, per step */
} ss_node_merge_stats;

const ss_node_merge_stats *ss_node_merge_get_stats(const ss_node_merge *m);

/* Frees M (what is open is not finalized).  NULL is a no-op. */
void ss_node_merge_free(ss_node_merge *m);

#endif
