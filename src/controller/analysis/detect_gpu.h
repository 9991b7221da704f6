/*
 * detect_gpu.h - what the GPU detector (detect_gpu.c) tells the others: the
 * host detector asks it whether a rank's GPU was held below its clocks.
 * Internal to the analysis stage.
 */
#ifndef STEPSCOPE_DETECT_GPU_H
#define STEPSCOPE_DETECT_GPU_H

#include "detectors.h"
#include "host_cause.h"

/*
 * Whether rank R's GPU was slowed in at least gpu.min_frac of the steps
 * FIRST..LAST that the GPU detector keeps: fills OUT (cause
 * SS_HOST_CAUSE_GPU, ms_per_step the time held down per slowed step, gpu,
 * gpu_reason, gpu_frac, steps) and returns 1; else returns 0 and leaves
 * OUT alone.
 */
int ss__gpu_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                    uint64_t last, ss__host_cause *out);

#endif
