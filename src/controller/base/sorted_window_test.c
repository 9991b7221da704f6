/*
 * sorted_window_test.c - unit tests for sorted_window.c: the window's
 * median and MAD (of the values and of their logarithms) equal
 * ss_median_f64's and ss_mad_f64's on the same values, to the bit, as
 * values slide through it (odd and even sizes,
 * ties, a constant stretch, a jump); removal of a value not there is
 * refused; a full window refuses another value; a NaN or an infinity is
 * counted apart.
 */
#include "sorted_window.h"

#include <math.h>
#include <string.h>

#include "stats.h"
#include "testing.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static double draw(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0; /* [0, 1) */
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Slides STEPS values of a step-time-like series through a window of
 * CAP, checking the median and MAD against stats.c after every step. */
static void slide(uint32_t cap, uint32_t steps, int ties)
{
    ss_sorted_window w;
    CHECK(ss_sorted_window_init(&w, cap) == 0);
    double ring[512], copy[512];
    uint32_t head = 0, fill = 0, mismatches = 0;
    for (uint32_t s = 0; s < steps; s++) {
        double x = 20 + 3 * draw(); /* > 0: logarithms too */
        if (ties)
            x = round(x * 4) / 4; /* few distinct values */
        if (s > steps / 2 && s < steps / 2 + 40)
            x = 20; /* a constant stretch */
        if (s % 97 == 13)
            x *= 9; /* a stall */
        if (fill == cap) {
            CHECK(ss_sorted_window_remove(&w, ring[head]) == 0);
            fill--;
        }
        CHECK(ss_sorted_window_add(&w, x) == 0);
        ring[head] = x;
        head = (head + 1) % cap;
        fill++;
        CHECK(w.n == fill);
        memcpy(copy, ring, fill * sizeof copy[0]);
        double m0 = ss_median_f64(copy, fill);
        memcpy(copy, ring, fill * sizeof copy[0]);
        double med0;
        double mad0 = ss_mad_f64(copy, fill, &med0);
        double med1;
        double mad1 = ss_sorted_window_mad(&w, &med1);
        for (uint32_t i = 0; i < fill; i++)
            copy[i] = log(ring[i]);
        double lmed0;
        double lmad0 = ss_mad_f64(copy, fill, &lmed0);
        double lmed1;
        double lmad1 = ss_sorted_window_mad_log(&w, &lmed1);
        if (!same_bits(m0, ss_sorted_window_median(&w)) ||
            !same_bits(med0, med1) || !same_bits(mad0, mad1) ||
            !same_bits(lmed0, lmed1) || !same_bits(lmad0, lmad1))
            mismatches++;
    }
    CHECK(mismatches == 0);
    ss_sorted_window_free(&w);
}

static void equals_stats_as_it_slides(void)
{
    slide(200, 3000, 0);
    slide(200, 3000, 1);
    slide(7, 500, 1);
    slide(8, 500, 0);
    slide(1, 50, 0);
    slide(2, 50, 1);
}

static void bounds_and_absent_values(void)
{
    ss_sorted_window w;
    CHECK(ss_sorted_window_init(&w, 2) == 0);
    CHECK(isnan(ss_sorted_window_median(&w)));
    double med = 0;
    CHECK(isnan(ss_sorted_window_mad(&w, &med)) && isnan(med));
    CHECK(ss_sorted_window_add(&w, 3) == 0);
    CHECK(ss_sorted_window_add(&w, 1) == 0);
    CHECK(ss_sorted_window_add(&w, 2) == -1); /* full */
    CHECK(w.v[0] == 1 && w.v[1] == 3);
    CHECK(ss_sorted_window_remove(&w, 2) == -1); /* not there */
    CHECK(ss_sorted_window_median(&w) == 2);
    CHECK(ss_sorted_window_mad(&w, NULL) == 1);
    CHECK(ss_sorted_window_remove(&w, 3) == 0 && w.n == 1);
    /* a NaN or an infinity is counted, not kept, and takes a place */
    CHECK(ss_sorted_window_add(&w, NAN) == 0 && w.nonfinite == 1);
    CHECK(ss_sorted_window_add(&w, 5) == -1); /* full */
    CHECK(ss_sorted_window_median(&w) == 1 && w.n == 1);
    CHECK(ss_sorted_window_remove(&w, INFINITY) == 0 && w.nonfinite == 0);
    CHECK(ss_sorted_window_remove(&w, NAN) == -1); /* none counted */
    ss_sorted_window_free(&w);
    ss_sorted_window_free(&w); /* twice is harmless */
}

TEST_LIST(TEST(equals_stats_as_it_slides), TEST(bounds_and_absent_values))
