/*
 * nvml_timeline.h - one GPU's samples (NVML or AMD SMI), aligned to steps.
 *
 * GPUs are read at instants (ss_gpu_backend_sample, a few times a
 * second); steps are intervals.  A GPU timeline keeps a bounded ring of the GPU's samples
 * and answers, for any interval [begin, end) on the samples' clock, what
 * the GPU was doing over it.  A sample's state holds from its time until
 * the next sample (at most SS_GPU_SAMPLE_HOLD_NS: a GPU not read for longer
 * is not known), so a step shorter than the sampling period still gets the
 * state in force during it, and the share of a step the GPU was held down
 * by each clock event reason is a time-weighted fraction: "GPU 2 held by
 * the power cap for 38 ms of this 95 ms step".  Cumulative counters (ECC
 * errors, Xid errors) are differenced over the window.
 *
 * Bounded memory: SS_GPU_TIMELINE_SAMPLES samples; the oldest are
 * overwritten.
 */
#ifndef STEPSCOPE_NVML_TIMELINE_H
#define STEPSCOPE_NVML_TIMELINE_H

#include "model.h"
#include "gpu_sample.h"

#define SS_GPU_TIMELINE_SAMPLES 512
#define SS_GPU_SAMPLE_HOLD_NS 2000000000LL /* how long a sample stays valid */

/* What one GPU did over one interval.  The durations are the parts of the
 * interval covered by samples; the other readings are SS_MISSING when no
 * covering sample had them. */
typedef struct {
    ss_dur_ns covered_ns;   /* covered by a sample whose reasons are known */
    ss_dur_ns slowed_ns;    /* held down by a reason that slows the work
                               (ss_gpu_reason_slows) */
    ss_dur_ns reason_ns[SS_GPU_N_REASONS]; /* held down by each reason */
    int64_t sm_clock_mhz;   /* time-weighted mean */
    int64_t power_mw;       /* time-weighted mean */
    int64_t power_limit_mw; /* the lowest enforced limit */
    int64_t temperature_c;  /* the highest */
    int64_t util_gpu_pct;   /* time-weighted mean */
    int64_t ecc_uncorrected_new; /* errors first seen by a sample taken in
                                    the interval */
    int64_t xid_new;        /* Xid errors first seen in the interval */
    int64_t last_xid;       /* the latest Xid code known at its end (0:
                               none) */
} ss_gpu_step;

typedef struct ss_gpu_timeline ss_gpu_timeline;

/* A new, empty timeline; NULL when memory runs out.  Free with
 * ss_gpu_timeline_free (NULL is a no-op). */
ss_gpu_timeline *ss_gpu_timeline_new(void);
void ss_gpu_timeline_free(ss_gpu_timeline *tl);

/* Appends S (copied).  A sample older than the newest one kept is
 * ignored. */
void ss_gpu_timeline_add(ss_gpu_timeline *tl, const ss_gpu_sample *s);

/* What the GPU did in [BEGIN, END): fills OUT and returns 0 when some
 * sample covers part of it; returns -1 when none does (OUT then has zero
 * durations and SS_MISSING readings). */
int ss_gpu_timeline_window(const ss_gpu_timeline *tl, ss_mono_ns begin,
                           ss_mono_ns end, ss_gpu_step *out);

#endif
