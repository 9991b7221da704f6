/*
 * clock.h - the one clock the recorder reads on its hot path.
 *
 * Every timestamp in the recorder is CLOCK_MONOTONIC in nanoseconds
 * (ss__mono_ns), the clock that the wire protocol carries and that ranks on
 * one host share.  On Linux clock_gettime(CLOCK_MONOTONIC) is served by the
 * vDSO, so reading it makes no system call.
 */
#ifndef STEPSCOPE_LIB_CLOCK_H
#define STEPSCOPE_LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef int64_t ss__mono_ns; /* CLOCK_MONOTONIC, nanoseconds */
typedef int64_t ss__dur_ns;  /* a duration, nanoseconds */

#define SS__MS ((ss__dur_ns)1000000)
#define SS__SEC ((ss__dur_ns)1000000000)

/* Returns the current CLOCK_MONOTONIC time.  Never fails on Linux. */
static inline ss__mono_ns ss__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ss__mono_ns)ts.tv_sec * SS__SEC + ts.tv_nsec;
}

#endif
