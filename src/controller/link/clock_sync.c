/*
 * clock_sync.c - the min-RTT clock offset estimator (clock_sync.h).
 *
 * For one exchange with true offset O (controller = agent + O) and one-way
 * delays d1 (out) and d2 (back), both >= 0: t2 = t1 + O + d1 and
 * t4 = t3 - O + d2, so the estimate ((t2 - t1) + (t3 - t4)) / 2 is
 * O + (d1 - d2) / 2 and the round trip t4 - t1 - (t3 - t2) is d1 + d2:
 * the error is at most half the round trip, however the delays split.  The
 * bound adds 1 ns for the integer halvings.  Arithmetic that would
 * overflow rejects the exchange like an inconsistent one.
 */
#include "clock_sync.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void ss_clock_sync_init(ss_clock_sync *s)
{
    memset(s, 0, sizeof *s);
}

int ss_clock_sync_add(ss_clock_sync *s, int64_t t1, int64_t t2, int64_t t3,
                      int64_t t4)
{
    int64_t total, held, rtt, out, back, sum;
    if (t4 < t1 || t3 < t2)
        return -1;
    if (__builtin_sub_overflow(t4, t1, &total) ||
        __builtin_sub_overflow(t3, t2, &held) ||
        __builtin_sub_overflow(total, held, &rtt) || rtt < 0)
        return -1;
    if (__builtin_sub_overflow(t2, t1, &out) ||
        __builtin_sub_overflow(t3, t4, &back) ||
        __builtin_add_overflow(out, back, &sum))
        return -1;
    ss_clock_estimate e = {
        .offset_ns = sum / 2,
        .bound_ns = rtt / 2 + 1,
        .rtt_ns = rtt,
        .samples = 0,
        .at_ns = t4,
    };
    if (s->n == 0 || e.rtt_ns < s->best.rtt_ns)
        s->best = e;
    s->n++;
    if (s->n < SS_CLOCK_ROUND)
        return 0;
    s->current = s->best;
    s->current.samples = s->n;
    s->have = 1;
    s->n = 0;
    return 1;
}

int ss_clock_sync_estimate(const ss_clock_sync *s, int64_t now_ns,
                           ss_clock_estimate *out)
{
    if (!s->have)
        return -1;
    *out = s->current;
    int64_t elapsed = 0; /* none before the exchange itself */
    if (now_ns > s->current.at_ns &&
        __builtin_sub_overflow(now_ns, s->current.at_ns, &elapsed))
        elapsed = INT64_MAX;
    /* ceil(elapsed * PPM / 1e6) without overflowing the product. */
    int64_t whole = elapsed / 1000000, part = elapsed % 1000000;
    int64_t growth = whole * SS_CLOCK_DRIFT_PPM +
                     (part * SS_CLOCK_DRIFT_PPM + 999999) / 1000000;
    if (__builtin_add_overflow(out->bound_ns, growth, &out->bound_ns))
        out->bound_ns = INT64_MAX;
    return 0;
}

int ss_clock_limits_add(ss_clock_limits *l, int64_t t1, int64_t t2)
{
    int64_t hi;
    if (t1 < 0 || __builtin_sub_overflow(t2, t1, &hi))
        return -1;
    if (!l->have || -t1 > l->lo_ns)
        l->lo_ns = -t1;
    if (!l->have || hi < l->hi_ns)
        l->hi_ns = hi;
    l->have = 1;
    return 0;
}

int ss_clock_limits_check(const ss_clock_limits *l, int64_t offset_ns,
                          int64_t bound_ns, char *why, size_t whylen)
{
    if (!l->have) {
        snprintf(why, whylen, "a clock estimate before any time exchange");
        return -1;
    }
    if (bound_ns < 0 || bound_ns > SS_CLOCK_MAX_BOUND_NS) {
        snprintf(why, whylen, "a clock bound of %" PRId64 " ns (0..%lld "
                 "allowed)", bound_ns, (long long)SS_CLOCK_MAX_BOUND_NS);
        return -1;
    }
    /* bound_ns <= 60 s and lo/hi within int64_t: no overflow below when
     * compared as offset +- bound in the wider type. */
    __int128 low = (__int128)offset_ns - bound_ns;
    __int128 high = (__int128)offset_ns + bound_ns;
    if (low > l->hi_ns || high < l->lo_ns) {
        snprintf(why, whylen, "a clock offset of %" PRId64 " ns (+- %" PRId64
                 " ns) that its time exchanges do not allow (%" PRId64
                 " .. %" PRId64 " ns)", offset_ns, bound_ns, l->lo_ns,
                 l->hi_ns);
        return -1;
    }
    return 0;
}

int64_t ss_clock_apply(int64_t t, int64_t offset_ns)
{
    int64_t r;
    if (!__builtin_add_overflow(t, offset_ns, &r))
        return r;
    return offset_ns > 0 ? INT64_MAX : INT64_MIN;
}
