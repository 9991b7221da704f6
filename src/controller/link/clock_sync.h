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

#include <stddef.h>
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

/*
 * What the controller's own half of the exchanges justifies about an
 * agent's offset O (controller = agent + O), whatever the agent says: a
 * TIME_REQ sent at agent time t1 arrives at controller time t2 after a
 * delay >= 0, so O <= t2 - t1; and the controller's monotonic clock was
 * not negative when the agent's read t1, so O >= -t1.  An estimate whose
 * interval [offset - bound, offset + bound] misses [max(-t1), min(t2 -
 * t1)] over every request seen, or whose bound exceeds
 * SS_CLOCK_MAX_BOUND_NS, is not what the exchanges measured.
 */
#define SS_CLOCK_MAX_BOUND_NS 60000000000LL /* 60 s: a useless alignment */

typedef struct { /* all zero: no request seen yet */
    int have;        /* a request has been seen */
    int64_t lo_ns;   /* O >= lo_ns: max over requests of -t1 */
    int64_t hi_ns;   /* O <= hi_ns: min over requests of t2 - t1 */
} ss_clock_limits;

/* Notes a request sent at agent time T1 that arrived at controller time
 * T2.  Returns 0, or -1 (nothing noted) when T1 is negative or T2 - T1
 * overflows: no monotonic clock reads that. */
int ss_clock_limits_add(ss_clock_limits *l, int64_t t1, int64_t t2);

/* 0 when OFFSET_NS +- BOUND_NS is consistent with the requests noted in L;
 * else -1 with the reason in WHY (WHYLEN bytes). */
int ss_clock_limits_check(const ss_clock_limits *l, int64_t offset_ns,
                          int64_t bound_ns, char *why, size_t whylen);

/* T + OFFSET_NS, saturated at the ends of int64_t instead of overflowing:
 * how an agent's times are moved onto the controller's clock. */
int64_t ss_clock_apply(int64_t t, int64_t offset_ns);

#endif
