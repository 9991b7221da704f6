/*
 * clocks.h - the controller's two clocks, in nanoseconds: the wall clock
 * (CLOCK_REALTIME, what the store and people read) and the monotonic one
 * (CLOCK_MONOTONIC, what ranks stamp their records with and what
 * durations and timeouts are measured on).
 */
#ifndef STEPSCOPE_CLOCKS_H
#define STEPSCOPE_CLOCKS_H

#include <time.h>

#include "model.h"

static inline ss_wall_ns ss_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (ss_wall_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline ss_mono_ns ss_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ss_mono_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
