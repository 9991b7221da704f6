/*
 * host_timeline.h - host evidence of one rank, aligned to its steps.
 *
 * The host's counters are read at instants (proc_tree.h, cgroup_cpu.h);
 * training moves by steps.  A timeline keeps a bounded ring of a rank's
 * cumulative counter samples and of the intervals in which its process was
 * stopped, and answers for any interval [begin, end) on the same clock
 * (CLOCK_MONOTONIC of this host) how much each counter moved: counters are
 * linearly interpolated between the samples around each end, and stopped
 * time is the exact overlap of the stop intervals with the window.
 *
 * Bounded memory: SS_HOST_TIMELINE_SAMPLES samples and
 * SS_HOST_TIMELINE_STOPS stop intervals; the oldest are overwritten, and a
 * window older than what is kept is answered as not covered.
 */
#ifndef STEPSCOPE_HOST_TIMELINE_H
#define STEPSCOPE_HOST_TIMELINE_H

#include "cgroup_cpu.h"
#include "model.h"
#include "proc_tree.h"

#define SS_HOST_TIMELINE_SAMPLES 512
#define SS_HOST_TIMELINE_STOPS 256

typedef struct ss_host_timeline ss_host_timeline;

/* A new, empty timeline; NULL when memory runs out.  Free with
 * ss_host_timeline_free (NULL is a no-op). */
ss_host_timeline *ss_host_timeline_new(void);
void ss_host_timeline_free(ss_host_timeline *tl);

/* Appends the counters read at AT (not before the previous sample's time;
 * an older one is ignored).  CG may be NULL (no cgroup counters). */
void ss_host_timeline_add(ss_host_timeline *tl, ss_mono_ns at,
                          const ss_proc_counters *proc,
                          const ss_cgroup_counters *cg);

/* The process stopped at AT / continued at AT (from the parent's
 * notifications, so exact).  A stop without a continue is open: it counts
 * up to the end of any window. */
void ss_host_timeline_stopped(ss_host_timeline *tl, ss_mono_ns at);
void ss_host_timeline_continued(ss_host_timeline *tl, ss_mono_ns at);

/* What moved in [BEGIN, END): fills OUT and returns 0; returns -1 when the
 * samples kept do not reach back to BEGIN or forward to END (OUT then has
 * every field SS_MISSING but stopped_ns, which is known whenever BEGIN is
 * not before the first sample ever added, the start of the watch, and the
 * stop intervals of the window are still kept). */
int ss_host_timeline_window(const ss_host_timeline *tl, ss_mono_ns begin,
                            ss_mono_ns end, ss_host_step *out);

/* Marks every field of H missing, its GPU evidence absent. */
void ss_host_step_clear(ss_host_step *h);

#endif
