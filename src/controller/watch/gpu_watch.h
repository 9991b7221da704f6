/*
 * gpu_watch.h - the ranks' GPUs, sampled through the GPU library of the
 * machine (NVML or AMD SMI) on a thread of their own.
 *
 * Library calls can block (a GPU falling off the bus answers after
 * seconds), and the controller's loop must never wait on them.  So a GPU
 * watch opens the GPU backend (gpu_backend.h: NVML, else AMD SMI) on its
 * own thread, samples every GPU there every INTERVAL_MS into one timeline per
 * GPU (nvml_timeline.h), and the loop only reads the timelines, behind a
 * mutex held for a copy or a window's sums, never across an NVML call.
 * Without a GPU library (no driver) the thread ends at once and every
 * answer is "no GPU": never an error for the job; a library that is there
 * but unusable is said once on stderr.
 *
 * Which GPU a rank uses is read from its process's environment
 * (ss_gpu_backend_gpu_for_pid: the visible-devices variables and
 * LOCAL_RANK, docs/gpu.md),
 * on the sampling thread, once the rank said hello (so the process has
 * exec'd its program and its environment is the rank's own).
 *
 * Threading: every function but those named "thread" runs on one thread
 * (the loop's); the sampler is internal.
 */
#ifndef STEPSCOPE_GPU_WATCH_H
#define STEPSCOPE_GPU_WATCH_H

#include <stdint.h>
#include <sys/types.h>

#include "model.h"

typedef struct ss_gpu_watch ss_gpu_watch;

/* Starts watching the GPUs of NPROCS ranks, sampling every INTERVAL_MS
 * (> 0), reading environments under PROC_ROOT ("/proc").  LIB_PATH is
 * NVML's library (NULL: $STEPSCOPE_NVML_LIB, else libnvidia-ml.so.1);
 * AMD SMI's is $STEPSCOPE_AMDSMI_LIB, else its default names (amdsmi.h).
 * Returns NULL when memory runs out or the thread cannot start.  Stop and
 * free with ss_gpu_watch_stop. */
ss_gpu_watch *ss_gpu_watch_start(uint32_t nprocs, uint32_t interval_ms,
                                 const char *proc_root, const char *lib_path);

/* RANK runs as process PID: its GPU is looked up on the next sampling
 * round.  Out-of-range RANK or PID <= 0 is ignored. */
void ss_gpu_watch_rank(ss_gpu_watch *gw, uint32_t rank, pid_t pid);

/* The backend's index of RANK's GPU, or -1 when none is known (yet). */
int ss_gpu_watch_gpu_of(ss_gpu_watch *gw, uint32_t rank);

/* What RANK's GPU did in [BEGIN, END) into OUT.  Returns 0 with
 * OUT->present 1, or -1 with OUT->present 0 when RANK has no known GPU or
 * no sample covers the interval. */
int ss_gpu_watch_window(ss_gpu_watch *gw, uint32_t rank, ss_mono_ns begin,
                        ss_mono_ns end, ss_gpu_evidence *out);

/* What RANK's GPU did since it was first sampled: durations held down
 * (by any slowing reason and per main reason), Xid and ECC errors seen,
 * the latest Xid code and temperature, into OUT.  Returns 0, or -1 with
 * OUT->present 0 when RANK has no known GPU. */
int ss_gpu_watch_totals(ss_gpu_watch *gw, uint32_t rank,
                        ss_gpu_evidence *out);

/* GPU samples taken so far (one per GPU per round), for tests. */
uint64_t ss_gpu_watch_samples(ss_gpu_watch *gw);

/* Stops the thread (waiting for a library call in progress to return),
 * closes the backend and frees GW.  NULL is a no-op. */
void ss_gpu_watch_stop(ss_gpu_watch *gw);

#endif
