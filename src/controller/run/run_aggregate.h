/*
 * run_aggregate.h - node 0's side of node-level aggregation (--aggregate,
 * docs/multinode.md "Node aggregation") in a multi-node run.
 *
 * With --aggregate node the agents' step partials and node 0's own
 * ranks' records are merged into each step's aggregate (node_merge.h).
 * Every rank's record still reaches the aggregator, the detectors and
 * the store as with --aggregate rank, so findings and the store's rows
 * are the same either way; each merged step is checked against the
 * aggregator's statistics of the same step (ranks present, step time and
 * each phase's minimum and maximum and slowest rank, p90 within the
 * sketch's bound) and the steps where they agree are counted.  In both
 * modes the time from a step's latest rank's end to its finalization is
 * kept, and the run's last line on stderr says it (with the merge's
 * figures in node mode).  Not used on a single node.
 */
#ifndef STEPSCOPE_RUN_AGGREGATE_H
#define STEPSCOPE_RUN_AGGREGATE_H

#include <stdint.h>

#include "model.h"
#include "node_partial.h"

typedef struct run_agg run_agg;

/* For a world of WORLD_SIZE ranks, NPROC_LOCAL of them node 0's; NODE_MODE
 * 1 with --aggregate node.  NULL when memory runs out. */
run_agg *run_agg_new(uint32_t world_size, uint32_t nproc_local,
                     int node_mode);

/* A node's partial (its times on the controller's clock) at NOW_NS. */
void run_agg_partial(run_agg *ra, const ss_node_partial *p, int64_t now_ns);

/* RANK's record (run-wide NAMES), before the aggregator has it: node 0's
 * ranks are merged in node mode. */
void run_agg_record(run_agg *ra, uint32_t rank, const ss_step_record *rec,
                    const char *const *names, int64_t now_ns);

/* The aggregator finalized V (run-wide NAMES) at NOW_NS. */
void run_agg_step(run_agg *ra, const ss_step_view *v,
                  const char *const *names, int64_t now_ns);

/* A new attempt: the merge starts over. */
void run_agg_attempt(run_agg *ra);

/* The attempt's ranks are done: the merge's open steps are finalized and
 * one line says the figures on stderr (none when QUIET). */
void run_agg_finish(run_agg *ra, int64_t now_ns, int quiet);

/* NULL is a no-op. */
void run_agg_free(run_agg *ra);

#endif
