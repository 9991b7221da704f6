/*
 * clock_sync_test.c - unit tests for clock_sync.c on synthetic exchanges
 * with a known true offset: the estimate is within its bound however the
 * delays split (asymmetric paths included), with a +1000 s offset too;
 * the min-RTT exchange wins a round; inconsistent exchanges are ignored;
 * the bound grows with the time since the estimate at the drift rate.
 */
#include "clock_sync.h"

#include <stdlib.h>
#include <string.h>

#include "testing.h"

/* One exchange at agent time T1 with true offset OFFSET: out delay D1,
 * the controller holds it HOLD, back delay D2. */
static int exchange(ss_clock_sync *s, int64_t t1, int64_t offset, int64_t d1,
                    int64_t hold, int64_t d2)
{
    int64_t t2 = t1 + offset + d1;
    int64_t t3 = t2 + hold;
    int64_t t4 = t3 - offset + d2;
    return ss_clock_sync_add(s, t1, t2, t3, t4);
}

static int64_t absdiff(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

static void no_estimate_before_a_round(void)
{
    ss_clock_sync s;
    ss_clock_sync_init(&s);
    ss_clock_estimate e;
    CHECK(ss_clock_sync_estimate(&s, 0, &e) == -1);
    for (int i = 0; i < SS_CLOCK_ROUND - 1; i++)
        CHECK_EQ_INT(exchange(&s, 1000 * i, 5, 10, 1, 10), 0);
    CHECK(ss_clock_sync_estimate(&s, 0, &e) == -1);
    CHECK_EQ_INT(exchange(&s, 99999, 5, 10, 1, 10), 1);
    CHECK(ss_clock_sync_estimate(&s, 99999 + 30, &e) == 0);
    CHECK_EQ_INT(e.samples, SS_CLOCK_ROUND);
}

/* Random delays, heavily asymmetric in some exchanges: the true offset is
 * always within the bound, at small offsets and at +1000 s. */
static void true_offset_always_within_bound(void)
{
    srand(12345);
    const int64_t offsets[] = {0, 37, -123456789, 1000000000000LL,
                               -1000000000000LL};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        ss_clock_sync s;
        ss_clock_sync_init(&s);
        int64_t t = 5000000000LL;
        int bad = 0;
        for (int round = 0; round < 200; round++) {
            for (int i = 0; i < SS_CLOCK_ROUND; i++) {
                int64_t d1 = rand() % 2000000, d2 = rand() % 2000000;
                if (rand() % 4 == 0)
                    d1 += 50000000; /* one path much slower */
                if (rand() % 4 == 0)
                    d2 += 30000000;
                int64_t hold = rand() % 100000;
                exchange(&s, t, offsets[k], d1, hold, d2);
                t += d1 + hold + d2 + 1000;
            }
            ss_clock_estimate e;
            if (ss_clock_sync_estimate(&s, t, &e) != 0 ||
                absdiff(e.offset_ns, offsets[k]) > e.bound_ns)
                bad++;
        }
        CHECK_EQ_INT(bad, 0);
    }
    /* Odd round trips and odd sums: the halving does not break the bound. */
    for (int d1 = 0; d1 < 4; d1++)
        for (int d2 = 0; d2 < 4; d2++) {
            ss_clock_sync s;
            ss_clock_sync_init(&s);
            for (int i = 0; i < SS_CLOCK_ROUND; i++)
                exchange(&s, 100, -7, d1, 1, d2);
            ss_clock_estimate e;
            REQUIRE(ss_clock_sync_estimate(&s, 100, &e) == 0);
            CHECK(absdiff(e.offset_ns, -7) <= e.bound_ns);
        }
}

/* The exchange with the smallest round trip is the estimate, exactly. */
static void min_rtt_exchange_wins(void)
{
    ss_clock_sync s;
    ss_clock_sync_init(&s);
    const int64_t offset = 1000000000000LL; /* +1000 s */
    int64_t t = 0;
    for (int i = 0; i < SS_CLOCK_ROUND; i++) {
        int64_t d1 = i == 5 ? 1000 : 400000 + 1000 * i;
        int64_t d2 = i == 5 ? 3000 : 100000;
        exchange(&s, t, offset, d1, 500, d2);
        t += 10000000;
    }
    ss_clock_estimate e;
    REQUIRE(ss_clock_sync_estimate(&s, 5 * 10000000 + 4500, &e) == 0);
    CHECK_EQ_INT(e.rtt_ns, 4000);
    CHECK_EQ_INT(e.offset_ns, offset - 1000);  /* (d1 - d2) / 2 */
    CHECK_EQ_INT(e.bound_ns, 2001);
    CHECK_EQ_INT(e.at_ns, 5 * 10000000 + 1000 + 500 + 3000);
}

static void inconsistent_exchanges_are_ignored(void)
{
    ss_clock_sync s;
    ss_clock_sync_init(&s);
    CHECK_EQ_INT(ss_clock_sync_add(&s, 100, 50, 60, 90), -1); /* t4 < t1 */
    CHECK_EQ_INT(ss_clock_sync_add(&s, 100, 60, 50, 200), -1); /* t3 < t2 */
    /* The controller held it longer than the whole round trip. */
    CHECK_EQ_INT(ss_clock_sync_add(&s, 100, 1000, 2000, 200), -1);
    /* Overflowing timestamps. */
    CHECK_EQ_INT(ss_clock_sync_add(&s, INT64_MIN, 0, INT64_MAX, INT64_MAX),
                 -1);
    CHECK_EQ_INT(s.n, 0);
    /* A round of good exchanges with bad ones among them: the bad neither
     * count nor spoil the estimate. */
    int completed = 0;
    for (int i = 0; i < SS_CLOCK_ROUND; i++) {
        completed += exchange(&s, 1000 * i, 42, 100, 10, 100) == 1;
        CHECK_EQ_INT(ss_clock_sync_add(&s, 5, 1, 0, 4), -1);
    }
    CHECK_EQ_INT(completed, 1);
    ss_clock_estimate e;
    REQUIRE(ss_clock_sync_estimate(&s, 8000, &e) == 0);
    CHECK_EQ_INT(e.offset_ns, 42);
    CHECK_EQ_INT(e.samples, SS_CLOCK_ROUND);
}

/* The bound grows by SS_CLOCK_DRIFT_PPM of the time since the exchange,
 * rounded up, and a new round replaces the estimate. */
static void bound_grows_with_drift(void)
{
    ss_clock_sync s;
    ss_clock_sync_init(&s);
    for (int i = 0; i < SS_CLOCK_ROUND; i++)
        exchange(&s, 0, 0, 1000, 0, 1000);
    ss_clock_estimate e;
    REQUIRE(ss_clock_sync_estimate(&s, 2000, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 1001);
    REQUIRE(ss_clock_sync_estimate(&s, 2000 + 1000000000LL, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 1001 + 1000000000LL / 1000000 *
                                        SS_CLOCK_DRIFT_PPM);
    REQUIRE(ss_clock_sync_estimate(&s, 2000 + 3600000000000LL, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 1001 + 3600000000000LL / 1000000 *
                                        SS_CLOCK_DRIFT_PPM);
    REQUIRE(ss_clock_sync_estimate(&s, 2001, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 1002); /* 1 ns: rounded up */
    /* Before the exchange (a caller's clock mix-up): no growth. */
    REQUIRE(ss_clock_sync_estimate(&s, 0, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 1001);
    REQUIRE(ss_clock_sync_estimate(&s, INT64_MAX, &e) == 0);
    CHECK(e.bound_ns > 0);
    /* A new round, later: the bound starts afresh from it. */
    for (int i = 0; i < SS_CLOCK_ROUND; i++)
        exchange(&s, 5000000000LL, 0, 100, 0, 100);
    REQUIRE(ss_clock_sync_estimate(&s, 5000000200LL, &e) == 0);
    CHECK_EQ_INT(e.bound_ns, 101);
}

/* The controller's side of the exchanges bounds what an agent may claim:
 * O <= t2 - t1 (the request took >= 0 to arrive) and O >= -t1. */
static void limits_come_from_the_requests(void)
{
    ss_clock_limits l = {0};
    char why[200];
    CHECK_EQ_INT(ss_clock_limits_check(&l, 0, 10, why, sizeof why), -1);
    CHECK(strstr(why, "before any time exchange"));
    CHECK_EQ_INT(ss_clock_limits_add(&l, -1, 100), -1);
    CHECK_EQ_INT(ss_clock_limits_add(&l, INT64_MAX, -10), -1);
    CHECK_EQ_INT(ss_clock_limits_add(&l, 1000, 6000), 0); /* O <= 5000 */
    CHECK_EQ_INT(ss_clock_limits_add(&l, 2000, 6500), 0); /* O <= 4500 */
    CHECK(l.lo_ns == -1000 && l.hi_ns == 4500);
    CHECK_EQ_INT(ss_clock_limits_check(&l, 4400, 50, why, sizeof why), 0);
    CHECK_EQ_INT(ss_clock_limits_check(&l, 4600, 200, why, sizeof why), 0);
    CHECK_EQ_INT(ss_clock_limits_check(&l, 4600, 50, why, sizeof why), -1);
    CHECK(strstr(why, "do not allow (-1000 .. 4500 ns)"));
    CHECK_EQ_INT(ss_clock_limits_check(&l, -1100, 50, why, sizeof why), -1);
    CHECK_EQ_INT(ss_clock_limits_check(&l, INT64_MAX, 10, why, sizeof why),
                 -1);
    CHECK_EQ_INT(ss_clock_limits_check(&l, INT64_MIN, 10, why, sizeof why),
                 -1);
    CHECK_EQ_INT(ss_clock_limits_check(&l, 0, -1, why, sizeof why), -1);
    CHECK_EQ_INT(ss_clock_limits_check(&l, 0, INT64_MAX, why, sizeof why),
                 -1);
    CHECK(strstr(why, "clock bound"));
    /* Estimates from real exchanges always pass. */
    srand(99);
    for (int k = 0; k < 200; k++) {
        ss_clock_sync s;
        ss_clock_sync_init(&s);
        ss_clock_limits lim = {0};
        int64_t offset = (int64_t)(rand() % 2000001) - 1000000;
        for (int i = 0; i < SS_CLOCK_ROUND; i++) {
            int64_t t1 = 5000000 + 100000 * i, d1 = rand() % 5000,
                    d2 = rand() % 5000;
            int64_t t2 = t1 + offset + d1, t3 = t2 + 10, t4 = t3 - offset + d2;
            CHECK_EQ_INT(ss_clock_limits_add(&lim, t1, t2), 0);
            ss_clock_sync_add(&s, t1, t2, t3, t4);
        }
        ss_clock_estimate e;
        REQUIRE(ss_clock_sync_estimate(&s, 6000000, &e) == 0);
        CHECK_EQ_INT(ss_clock_limits_check(&lim, e.offset_ns, e.bound_ns, why,
                                           sizeof why), 0);
    }
}

static void apply_saturates(void)
{
    CHECK(ss_clock_apply(100, -30) == 70);
    CHECK(ss_clock_apply(INT64_MAX - 5, 10) == INT64_MAX);
    CHECK(ss_clock_apply(INT64_MIN + 5, -10) == INT64_MIN);
    CHECK(ss_clock_apply(-5, INT64_MAX) == INT64_MAX - 5);
}

TEST_LIST({"no_estimate_before_a_round", no_estimate_before_a_round},
          {"true_offset_always_within_bound", true_offset_always_within_bound},
          {"min_rtt_exchange_wins", min_rtt_exchange_wins},
          {"inconsistent_exchanges_are_ignored",
           inconsistent_exchanges_are_ignored},
          {"bound_grows_with_drift", bound_grows_with_drift},
          TEST(limits_come_from_the_requests), TEST(apply_saturates))
