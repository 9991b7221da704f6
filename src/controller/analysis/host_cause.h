/*
 * host_cause.h - whether the host explains a rank's lateness, and by what:
 * the answer the host and GPU detectors give (detect_host.h,
 * detect_gpu.h) and the straggler and jitter detectors word.  Types only;
 * internal to the analysis stage.
 */
#ifndef STEPSCOPE_HOST_CAUSE_H
#define STEPSCOPE_HOST_CAUSE_H

#include <stdint.h>

/* The host causes: 0 run-queue delay, 1 stops, 2 CPU quota throttling
 * (kept per step by the host detector); SS_HOST_CAUSE_GPU, the rank's GPU
 * held below its clocks, is told by the GPU detector (detect_gpu.c). */
#define SS_HOST_CAUSES 3
#define SS_HOST_CAUSE_RUN_QUEUE 0
#define SS_HOST_CAUSE_STOPPED 1
#define SS_HOST_CAUSE_GPU SS_HOST_CAUSES

/* Whether the host explains a rank's lateness, and by what. */
typedef struct {
    int cause;             /* -1: the host does not explain it; otherwise
                              0 .. SS_HOST_CAUSES - 1 or SS_HOST_CAUSE_GPU */
    double ms_per_step;    /* what the rank lost to that cause per step */
    double median_rank_ms; /* what the median rank lost to it per step */
    uint32_t steps;        /* steps both were measured over */
    int gpu;               /* SS_HOST_CAUSE_GPU: the GPU's NVML index... */
    const char *gpu_reason;/* ...the reason that held it most often
                              ("power cap", "thermal", "hardware slowdown")
                              ... */
    double gpu_frac;       /* ...and the fraction of the steps it was held
                              down in */
} ss__host_cause;

#endif
