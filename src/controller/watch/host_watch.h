/*
 * host_watch.h - the host's evidence about the ranks, gathered on the
 * controller's loop.
 *
 * For each rank process the controller launched, a host watch follows its
 * process tree (proc_tree.h) and its cgroup (cgroup_cpu.h) and keeps their
 * counters on a timeline (host_timeline.h), read:
 *  - every INTERVAL_MS on a timer (the default 100 ms);
 *  - when the rank's STEP record arrives (ss_host_watch_step_done), so the
 *    step's end lies just before a sample rather than between two timer
 *    ticks (at most one such sample every SS_HOST_WATCH_MIN_GAP_NS, so
 *    1 ms steps do not cost a read each);
 *  - on demand, when a window asked for ends after the newest sample.
 * Stops and continues are not sampled: the controller is the ranks'
 * parent, so on SIGCHLD it asks the kernel with waitid(WSTOPPED |
 * WCONTINUED | WNOHANG) for each live rank, and times each event when the
 * loop sees it (within a millisecond normally; a stop and continue both
 * before the loop runs show as a continue alone and are not counted).
 * waitid this way consumes only stop/continue notifications, never an
 * exit: libuv still reaps the ranks and the launcher its strays.  The cgroup is looked up again once a second, so a
 * rank moved to another cgroup is followed.
 *
 * ss_host_watch_window is the aggregator's host provider (aggregator.h):
 * it answers what moved during a rank's step.  Totals since each rank was
 * first read feed the live metrics.
 *
 * The ranks' GPUs are sampled through NVML on a thread of their own
 * (gpu_watch.h) and their evidence is filled into each window and the
 * totals (ss_host_step.gpu; gpu.present 0 without NVML).
 *
 * Threading: everything runs on the loop's thread, but the GPU sampler.
 */
#ifndef STEPSCOPE_HOST_WATCH_H
#define STEPSCOPE_HOST_WATCH_H

#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "model.h"

#define SS_HOST_WATCH_INTERVAL_MS_DEFAULT 100
#define SS_HOST_WATCH_MIN_GAP_NS 2000000LL /* between step-driven samples */

typedef struct ss_host_watch ss_host_watch;

/* A watch of NPROCS ranks on LOOP reading PROC_ROOT ("/proc"), sampling
 * every INTERVAL_MS (> 0).  No rank is followed until ss_host_watch_rank.
 * Returns NULL when memory runs out.  The timer and the SIGCHLD watcher do
 * not keep LOOP alive.  Release with ss_host_watch_close, then run LOOP
 * until its close callbacks ran, then ss_host_watch_free. */
ss_host_watch *ss_host_watch_start(uv_loop_t *loop, uint32_t nprocs,
                                   uint32_t interval_ms,
                                   const char *proc_root);

/* Starts following RANK's process PID (a child of this process for exact
 * stops), with a first sample now.  Returns 0, or -1 when memory runs out
 * or RANK is out of range. */
int ss_host_watch_rank(ss_host_watch *hw, uint32_t rank, pid_t pid);

/* RANK's process has exited: its stop notifications end (its counters,
 * cumulative, stay readable for its last steps). */
void ss_host_watch_rank_exited(ss_host_watch *hw, uint32_t rank);

/* RANK said hello from process PID: its GPU is looked up (gpu_watch.h)
 * from that process's environment. */
void ss_host_watch_rank_hello(ss_host_watch *hw, uint32_t rank, pid_t pid);

/* RANK reported a finished step: samples it unless it was sampled within
 * SS_HOST_WATCH_MIN_GAP_NS. */
void ss_host_watch_step_done(ss_host_watch *hw, uint32_t rank);

/* What the host provider (ss_host_provider.window) answers for a rank on
 * this host (CTX is the watch): what moved in RANK's tree during [BEGIN_NS, END_NS).  Returns 0
 * with OUT filled (fields SS_MISSING where unknown), -1 when nothing is
 * known of that interval. */
int ss_host_watch_window(void *ctx, uint32_t rank, ss_mono_ns begin_ns,
                         ss_mono_ns end_ns, ss_host_step *out);

/* What RANK's tree used since it was first read, up to its newest sample
 * (stopped time up to now), into OUT.  Returns 0, or -1 when RANK was
 * never read. */
int ss_host_watch_totals(const ss_host_watch *hw, uint32_t rank,
                         ss_host_step *out);

/* How long RANK's process has been stopped at NOW (a stop signal, a
 * tracer such as a debugger, or its cgroup's freezer, seen at the samples),
 * 0 while it runs, once it exited or when it is not followed here; *KIND
 * (may be NULL) says what holds it. */
ss_dur_ns ss_host_watch_stopped_for(const ss_host_watch *hw, uint32_t rank,
                                    ss_mono_ns now, ss_stop_kind *kind);

/* Rank samples taken so far (each reads a rank's tree and cgroup), for
 * benchmarks and tests. */
uint64_t ss_host_watch_samples(const ss_host_watch *hw);

/* Stops the timer and the signal watcher (their handles close as the loop
 * runs).  NULL is a no-op. */
void ss_host_watch_close(ss_host_watch *hw);

/* Frees HW and everything it holds, once the loop has run the close
 * callbacks (or was closed).  NULL is a no-op. */
void ss_host_watch_free(ss_host_watch *hw);

#endif
