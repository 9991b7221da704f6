/*
 * detect_host.h - what the host detector (detect_host.c) tells the others:
 * whether the host explains a straggler's lateness, and the words and
 * evidence of a host cause.  The straggler and jitter detectors ask it;
 * it asks the GPU detector (detect_gpu.h) in turn.  Internal to the
 * analysis stage.
 */
#ifndef STEPSCOPE_DETECT_HOST_H
#define STEPSCOPE_DETECT_HOST_H

#include <stddef.h>

#include "detectors.h"
#include "host_cause.h"
#include "json.h"

/*
 * What the host saw of rank R over the steps FIRST..LAST that the host
 * detector still keeps: the cause (run-queue delay, stops, throttling) by
 * which R lost the most time per step beyond the median rank.  It explains
 * a lateness of LATE_MS when that excess is at least straggler.blame_frac
 * of it and R lost at least host.peer_factor times the median rank;
 * otherwise OUT->cause is -1 (also when no host evidence is kept).
 */
void ss__host_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                      uint64_t last, double late_ms, ss__host_cause *out);
/* Whether rank R's lateness of LATE_MS over steps FIRST..LAST was a
 * moment on a busy core: over those steps it waited for a CPU, per step,
 * at least straggler.blame_frac of LATE_MS more than the other ranks'
 * median (the median of the other ranks, not of all: of two ranks that
 * is the other one) and host.peer_factor times it, and more per CPU time
 * it ran than the others over those same steps (where the host measured
 * half host.min_steps of them; else over its window).  ss__host_explain
 * compares with the median of all ranks and the whole window, which suits
 * a lasting episode; this is for a transient burst only. */
int ss__host_busy_core_moment(const ss_detectors *d, uint32_t r,
                              uint64_t first, uint64_t last, double late_ms);
/* The clause for a finding's message: "; the host explains it: it waited
 * for a CPU 3.1 ms per step (median rank 0.2 ms)", or "" when HC explains
 * nothing.  Returns BUF. */
const char *ss__host_cause_words(const ss__host_cause *hc, char *buf,
                                 size_t len);
/* The name of host cause CAUSE: its evidence key ("run_queue",
 * "stopped", "throttled"), or with WORDS its words in a message
 * ("run-queue delay", "stops", "CPU quota throttling"); "?" when CAUSE is
 * not one. */
const char *ss__host_cause_name(int cause, int words);
/* Adds host_cause, host_ms_per_step and host_median_rank_ms to evidence
 * EV; nothing when HC explains nothing. */
void ss__host_cause_evidence(ss_buf *ev, const ss__host_cause *hc);

#endif
