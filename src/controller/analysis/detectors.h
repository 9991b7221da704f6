/*
 * detectors.h - findings computed from finalized steps.
 *
 * The detectors see every finalized step (ss_step_view) in order and keep
 * bounded per-rank history.  They emit ss_finding records: straggler
 * (persistent or transient), data_stall, jitter, memory_spike, memory_creep,
 * memory_imbalance, nonfinite, loss_spike and grad_spike.  A finding is emitted again with the same id when
 * its evidence grows, and all are emitted once more by ss_detectors_finish.
 * Every threshold is in ss_detector_config (detector_config.h), documented
 * in docs/detectors.md and settable by name (ss_detector_config_set), so
 * `stepscope run --set straggler.min_late_ms=5` works.
 */
#ifndef STEPSCOPE_DETECTORS_H
#define STEPSCOPE_DETECTORS_H

#include "detector_config.h"
#include "model.h"

typedef struct ss_detectors ss_detectors;

/* Creates detectors for WORLD_SIZE ranks; findings go to SINK->on_finding.
 * Returns NULL on out-of-memory. */
ss_detectors *ss_detectors_create(const ss_detector_config *cfg,
                                  uint32_t world_size, uint32_t attempt,
                                  const ss_sink *sink);
void ss_detectors_destroy(ss_detectors *d);

/* Feeds one finalized step; NAMES is the run's name table. */
void ss_detectors_step(ss_detectors *d, const ss_step_view *step,
                       const char *const *names);

/*
 * Sets how far RANK's clock may be off the reference clock that arrival
 * times of different ranks are compared on: BOUND_NS >= 0, the error bound
 * of the estimate that aligned its host's clock (0: the reference host, or
 * a single host).  May be called at any time; a finding worded after it
 * uses the latest value.  Findings that compare arrival times across ranks
 * state the largest bound among the ranks compared and call a lateness
 * within it uncertain (docs/detectors.md, "Clocks of several hosts").
 * Returns 0, or -1 (nothing changed) when RANK is not below the world size
 * or BOUND_NS is negative.
 */
int ss_detectors_set_clock_bound(ss_detectors *d, uint32_t rank,
                                 int64_t bound_ns);

/* End of run: emits every finding in its final form. */
void ss_detectors_finish(ss_detectors *d, const char *const *names);

/* Records CONTENT, a finding made outside the step-driven detectors (a
 * hang, hang.h), under the next finding id and emits it to the sink at
 * once.  Returns the id, or 0 when the findings table is full. */
uint32_t ss_detectors_publish(ss_detectors *d, const ss_finding *content);

#endif
