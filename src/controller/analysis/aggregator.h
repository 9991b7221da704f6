/*
 * aggregator.h - step-aligned aggregation with a watermark.
 *
 * Ranks report finished steps in increasing order.  The aggregator keeps a
 * bounded window of recent steps x ranks.  The watermark is the highest step
 * that every live rank has completed; steps at or below it are finalized:
 * per-step statistics over ranks (ss_step_view) are computed, handed to the
 * detectors and then to the sink.  A rank that leaves (clean exit) stops
 * holding the watermark; a rank that crashes is reported and the steps it
 * never completed are finalized with it marked missing.  When the window is
 * full, the oldest step is finalized with the laggards marked missing, so
 * memory stays bounded whatever the ranks do.
 *
 * Single-threaded: all calls come from the controller's event loop.
 */
#ifndef STEPSCOPE_AGGREGATOR_H
#define STEPSCOPE_AGGREGATOR_H

#include "model.h"
#include "detectors.h"

typedef struct ss_aggregator ss_aggregator;

/* Where the host's evidence about a rank's step comes from (the host
 * stage, kept out of the aggregator's sight).  WINDOW fills OUT with what
 * the host saw of RANK's process tree in [BEGIN_NS, END_NS) (the rank's
 * step STEP, on the controller's CLOCK_MONOTONIC: for a rank on another
 * host, its clock aligned; a provider of such ranks answers by STEP) and returns 0, any field SS_MISSING
 * where unknown; or returns -1 when it knows nothing of that interval.  It
 * is called at finalization for each present rank whose step has a begin
 * time, on the aggregator's thread. */
typedef struct {
    int (*window)(void *ctx, uint32_t rank, uint64_t step,
                  ss_mono_ns begin_ns, ss_mono_ns end_ns, ss_host_step *out);
    void *ctx;
} ss_host_provider;

typedef struct {
    /* Steps kept in memory; 0 (the default): up to 1024, the first 64
     * whatever they cost, the rest while the open steps' rows fit 64 MiB
     * (a rank that far ahead of the slowest forces steps out with the
     * laggards missing). */
    uint32_t window_steps;
    ss_detector_config detect;
    ss_host_provider host;   /* no WINDOW (the default): ss_rank_step.host
                                stays NULL */
    /* Bytes of vectors (ss_values_item, 8 per element plus 64 per
     * vector) the window may hold; default 256 MiB.  A record whose
     * vectors would go over it keeps its timings; its vectors are refused
     * and counted (ss_aggregator_stats.vectors_refused). */
    uint64_t values_budget_bytes;
} ss_aggregator_config;

/* Fills CFG with the documented defaults. */
void ss_aggregator_config_defaults(ss_aggregator_config *cfg);

/* The steps a rank may run ahead of the oldest open step before any is
 * forced out, whatever the rows cost: window_steps when set (within
 * [2, 65536]), else 64.  CFG may be NULL (the defaults). */
uint32_t ss_aggregator_sure_window(const ss_aggregator_config *cfg);

/* Creates an aggregator for WORLD_SIZE ranks of ATTEMPT; every rank starts
 * live.  SINK is copied.  Returns NULL on out-of-memory. */
ss_aggregator *ss_aggregator_create(const ss_aggregator_config *cfg,
                                    uint32_t world_size, uint32_t attempt,
                                    const ss_sink *sink);

/* Frees A and everything it owns; NULL is a no-op.  Does not finalize. */
void ss_aggregator_destroy(ss_aggregator *a);

/* Returns the run-wide index of NAME (interning it), or -1 when the table
 * (SS_MAX_RUN_NAMES) is full or NAME is empty or too long. */
int ss_aggregator_intern(ss_aggregator *a, const char *name);

/* The run's name table: names[i] for index i, count via *n. */
const char *const *ss_aggregator_names(const ss_aggregator *a, uint32_t *n);

/*
 * Adds RANK's record for one finished step (model.h).  The names inside
 * REC must already be run-wide indexes (from ss_aggregator_intern).
 * Returns 0, or -1 when the record is refused (rank out of range, rank not
 * live, a bad name, count or duration, end before begin, step not after
 * the rank's previous step, or step already finalized: late); a refused
 * record is counted in ss_aggregator_stats.  May finalize steps and call
 * the sink.
 */
int ss_aggregator_add(ss_aggregator *a, uint32_t rank,
                      const ss_step_record *rec);

/*
 * ss_aggregator_add with RANK's N_VALUES vectors of the same step, each
 * name (a run-wide index) at most once.  The vectors are copied and
 * reach the detectors and the sink in ss_rank_step.values, with the
 * labels RANK declared for each name.  Vectors the aggregator cannot keep
 * (over values_budget_bytes, a bad name, no memory) are refused and
 * counted; the record is still added.  Returns what ss_aggregator_add
 * returns.
 */
int ss_aggregator_add_values(ss_aggregator *a, uint32_t rank,
                             const ss_step_record *rec,
                             const ss_values_item *values,
                             uint32_t n_values);

/* Sets the labels of RANK's vector NAME (run-wide index): N strings,
 * copied, replacing any earlier ones; they are attached to the vectors
 * of that name of the steps finalized from now on.  Returns 0, or -1
 * (bad rank or name, over the 64 MiB held for labels, no memory; then
 * counted in labels_refused and the earlier labels are kept). */
int ss_aggregator_set_labels(ss_aggregator *a, uint32_t rank, int name,
                             const char *const *labels, uint32_t n);

/* RANK leaves the live set.  CRASHED != 0 when it died or vanished: steps it
 * never completed are finalized with it missing.  May finalize steps. */
void ss_aggregator_rank_left(ss_aggregator *a, uint32_t rank, int crashed);

/* Finalizes every step still open (ranks without data marked missing) and
 * runs the detectors' end-of-run pass, which emits the final findings. */
void ss_aggregator_finish(ss_aggregator *a);

/* Sets how far RANK's clock, aligned to the controller's, may be off it:
 * BOUND_NS, the error bound of the alignment estimate of RANK's host (0 on
 * the controller's host, and the default).  May be called at any time;
 * the latest value is used by every finding worded after it.  Findings
 * that compare arrival times across ranks then state the largest bound
 * among the ranks compared (ss_detectors_set_clock_bound).  A rank out of
 * range or a negative bound is ignored. */
void ss_aggregator_set_clock_bound(ss_aggregator *agg, uint32_t rank,
                                   int64_t bound_ns);

/* Publishes a finding made outside the detectors (a hang) through the
 * detectors' table and sink: ss_detectors_publish.  Returns its id, 0 when
 * the table is full. */
uint32_t ss_aggregator_publish_finding(ss_aggregator *a,
                                       const ss_finding *content);

typedef struct {
    uint64_t records;          /* accepted records */
    uint64_t refused;          /* refused records */
    uint64_t finalized_steps;
    uint64_t forced_steps;     /* finalized early because the window was full */
    int64_t watermark;         /* -1 before the first finalized step */
    uint64_t bytes_in_use;     /* memory held by the window */
    uint64_t vectors;          /* vectors accepted */
    uint64_t vectors_refused;  /* vectors refused (budget, memory, name) */
    uint64_t values_bytes;     /* bytes of vectors held now */
    uint64_t labels_refused;   /* label sets refused */
} ss_aggregator_stats;

void ss_aggregator_get_stats(const ss_aggregator *a, ss_aggregator_stats *out);

/* Per-rank state for reports and live views. */
typedef struct {
    int live;
    int crashed;
    int64_t last_step; /* -1 before the first record */
} ss_rank_state;

void ss_aggregator_rank_state(const ss_aggregator *a, uint32_t rank,
                              ss_rank_state *out);

#endif
