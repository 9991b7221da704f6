/*
 * clock_sync.h - an agent's estimate of its clock's offset to the
 * controller's, NTP-style.
 *
 * The agent sends TIME_REQ at t1 (its CLOCK_MONOTONIC); the controller
 * notes t2 on arrival and t3 when it answers; the agent notes t4 on the
 * answer's arrival.  For one exchange the offset (controller = agent +
 * offset) is ((t2 - t1) + (t3 - t4)) / 2 and its error is at most half the
 * round trip less the controller's own delay, (t4 - t1 - (t3 - t2)) / 2.
 * A round is several exchanges; the estimate is the exchange with the
 * smallest round trip, whose bound is the tightest.  Between rounds the
 * bound grows with the time since the estimate at an assumed drift rate.
 * Pure: no I/O, no clock.
 */
#ifndef STEPSCOPE_CLOCK_SYNC_H
#define STEPSCOPE_CLOCK_SYNC_H

#include <stdint.h>

#define SS_CLOCK_ROUND 8            /* exchanges per round */
#define SS_CLOCK_DRIFT_PPM 100      /* assumed worst drift between rounds */

typedef struct {
    int64_t offset_ns;
    int64_t bound_ns;
    int64_t rtt_ns;
    uint32_t samples;
    int64_t at_ns; /* agent clock (t4) of the exchange it comes from */
} ss_clock_estimate;

typedef struct {
    uint32_t n;                 /* exchanges in the current round */
    ss_clock_estimate best;     /* min-RTT of the current round */
    int have;                   /* an estimate exists (last round's) */
    ss_clock_estimate current;
} ss_clock_sync;

void ss_clock_sync_init(ss_clock_sync *s);

/* Adds one exchange; ignores it (returns -1) when the timestamps are
 * inconsistent (t4 < t1, t3 < t2, or a negative round trip).  When it
 * completes a round (SS_CLOCK_ROUND exchanges) the round's best becomes the
 * current estimate and 1 is returned; else 0. */
int ss_clock_sync_add(ss_clock_sync *s, int64_t t1, int64_t t2, int64_t t3,
                      int64_t t4);

/* The current estimate with its bound grown for drift up to NOW_NS (agent
 * clock); returns 0, or -1 when no round has completed yet. */
int ss_clock_sync_estimate(const ss_clock_sync *s, int64_t now_ns,
                           ss_clock_estimate *out);

#endif
