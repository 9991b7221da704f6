/*
 * guard_stats_test.c - unit tests for guard_stats.c against values computed
 * independently (by brute force over every pair, in Python, from the
 * textbook formulas): the normal quantile, the rank-sum statistic with ties,
 * the Hodges-Lehmann shift and its Moses interval, the sampled differences
 * above SS_HL_MAX_PAIRS, and E-divisive on series with and without a change.
 */
#include "guard_stats.h"

#include <math.h>
#include <stdlib.h>

#include "testing.h"

#define CLOSE(a, b, tol) (fabs((a) - (b)) <= (tol))

static void normal_quantile_known_values(void)
{
    CHECK(CLOSE(ss_normal_upper_quantile(0.025), 1.959963984540054, 1e-9));
    CHECK(CLOSE(ss_normal_upper_quantile(0.005), 2.5758293035489004, 1e-9));
    CHECK(CLOSE(ss_normal_upper_quantile(0.5), 0.0, 1e-12));
    CHECK(CLOSE(ss_normal_upper_quantile(0.975), -1.959963984540054, 1e-9));
    CHECK(CLOSE(ss_normal_upper_quantile(1e-6), 4.753424308822899, 1e-8));
    CHECK(isnan(ss_normal_upper_quantile(0.0)));
    CHECK(isnan(ss_normal_upper_quantile(1.0)));
}

/* Against the printed table of two-sided critical values. */
static void student_t_known_values(void)
{
    static const struct { double p, df, t; } table[] = {
        {0.01, 1, 63.657}, {0.01, 2, 9.925}, {0.01, 3, 5.841},
        {0.01, 4, 4.604},  {0.01, 5, 4.032}, {0.01, 10, 3.169},
        {0.01, 30, 2.750}, {0.01, 100, 2.626}, {0.05, 3, 3.182},
        {0.05, 10, 2.228}, {0.05, 1000, 1.962},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        CHECK(CLOSE(ss_student_t_quantile(table[i].p, table[i].df),
                    table[i].t, 0.0015));
    CHECK(isnan(ss_student_t_quantile(0.01, 0.5)));
    CHECK(isnan(ss_student_t_quantile(0, 5)));
}

/* Two samples without ties: U, z and p as a brute-force count of the pairs
 * and the normal approximation with continuity correction give them. */
static void rank_sum_without_ties(void)
{
    const double x[] = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
    const double y[] = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};
    ss_shift_test t;
    REQUIRE(ss_rank_sum(x, 9, y, 9, &t) == 0);
    CHECK(CLOSE(t.u, 23.0, 1e-12));
    CHECK(CLOSE(t.z, -1.502688234205555, 1e-9));
    CHECK(CLOSE(t.p, 0.13291945818531886, 1e-9));
}

/* Ties across and within the samples use average ranks and shrink the
 * variance by sum(t^3 - t) / (N (N - 1)). */
static void rank_sum_with_ties(void)
{
    const double x[] = {1, 2, 2, 3, 3, 3, 4, 5};
    const double y[] = {3, 4, 4, 5, 5, 6, 7, 7, 8};
    ss_shift_test t;
    REQUIRE(ss_rank_sum(x, 8, y, 9, &t) == 0);
    CHECK(CLOSE(t.u, 64.5, 1e-12));
    CHECK(CLOSE(t.z, 2.727939278646863, 1e-9));
    CHECK(CLOSE(t.p, 0.006373133838085877, 1e-9));
}

static void rank_sum_degenerate_inputs(void)
{
    const double same[] = {5, 5, 5, 5};
    ss_shift_test t;
    REQUIRE(ss_rank_sum(same, 4, same, 4, &t) == 0);
    CHECK(t.p == 1.0);
    CHECK(t.z == 0.0);
    REQUIRE(ss_rank_sum(same, 0, same, 4, &t) == 0);
    CHECK(t.p == 1.0);
    CHECK(ss_shift_test_run(same, 0, same, 4, 0.95, 1, &t) == -1);
}

/* The shift is the median of the 72 differences (2.5) and the 95 %
 * interval runs from the 15th to the 58th smallest (1 and 4). */
static void hodges_lehmann_and_moses_interval(void)
{
    const double x[] = {1, 2, 2, 3, 3, 3, 4, 5};
    const double y[] = {3, 4, 4, 5, 5, 6, 7, 7, 8};
    ss_shift_test t;
    REQUIRE(ss_shift_test_run(x, 8, y, 9, 0.95, 1, &t) == 0);
    CHECK(CLOSE(t.shift, 2.5, 1e-12));
    CHECK(CLOSE(t.lo, 1.0, 1e-12));
    CHECK(CLOSE(t.hi, 4.0, 1e-12));
    CHECK(!t.sampled);
    CHECK(CLOSE(t.p, 0.006373133838085877, 1e-9));
}

/* Too few points for a 99.9 % interval: it widens to the extremes. */
static void tiny_samples_give_the_full_range(void)
{
    const double x[] = {10, 11}, y[] = {12, 14};
    ss_shift_test t;
    REQUIRE(ss_shift_test_run(x, 2, y, 2, 0.999, 1, &t) == 0);
    CHECK(CLOSE(t.lo, 1.0, 1e-12));
    CHECK(CLOSE(t.hi, 4.0, 1e-12));
    CHECK(CLOSE(t.shift, 2.5, 1e-12));
}

/* 2000 x 1500 values (3 million pairs) are sampled; the estimate of a
 * known shift of 7 stays within the noise and the interval covers it. */
static void many_pairs_are_sampled(void)
{
    enum { NX = 2000, NY = 1500 };
    double *x = malloc(NX * sizeof *x), *y = malloc(NY * sizeof *y);
    REQUIRE(x && y);
    uint64_t s = 12345;
    for (int i = 0; i < NX; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 100.0 + (double)(s >> 40) / (double)(1ull << 24) * 10.0;
    }
    for (int j = 0; j < NY; j++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        y[j] = 107.0 + (double)(s >> 40) / (double)(1ull << 24) * 10.0;
    }
    ss_shift_test a, b;
    REQUIRE(ss_shift_test_run(x, NX, y, NY, 0.95, 42, &a) == 0);
    REQUIRE(ss_shift_test_run(x, NX, y, NY, 0.95, 42, &b) == 0);
    CHECK(a.sampled);
    CHECK(CLOSE(a.shift, 7.0, 0.3));
    CHECK(a.lo < 7.0 && a.hi > 7.0);
    CHECK(a.hi - a.lo < 1.0);
    CHECK(a.shift == b.shift && a.lo == b.lo); /* same seed, same answer */
    CHECK(a.p < 1e-10);
    free(x);
    free(y);
}

/* A small deterministic wobble around a level. */
static double wobble(int i)
{
    static const double w[] = {0.03, -0.02, 0.01, -0.04, 0.02, 0.0, -0.01};
    return w[i % 7];
}

static void edivisive_finds_a_level_shift(void)
{
    double v[20];
    for (int i = 0; i < 20; i++)
        v[i] = (i < 12 ? 10.0 : 11.0) + wobble(i);
    ss_edivisive_config cfg;
    ss_edivisive_defaults(&cfg);
    size_t points[4];
    int n = ss_edivisive(v, 20, &cfg, points, 4);
    REQUIRE(n == 1);
    CHECK_EQ_INT(points[0], 12);
}

static void edivisive_finds_two_shifts_in_order(void)
{
    double v[30];
    for (int i = 0; i < 30; i++)
        v[i] = (i < 10 ? 10.0 : i < 20 ? 12.0 : 9.0) + wobble(i);
    ss_edivisive_config cfg;
    ss_edivisive_defaults(&cfg);
    size_t points[4];
    int n = ss_edivisive(v, 30, &cfg, points, 4);
    REQUIRE(n == 2);
    CHECK_EQ_INT(points[0], 10);
    CHECK_EQ_INT(points[1], 20);
}

static void edivisive_quiet_on_noise(void)
{
    double v[25];
    uint64_t s = 99;
    for (int i = 0; i < 25; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = 10.0 + (double)(s >> 40) / (double)(1ull << 24);
    }
    ss_edivisive_config cfg;
    ss_edivisive_defaults(&cfg);
    size_t points[4];
    CHECK_EQ_INT(ss_edivisive(v, 25, &cfg, points, 4), 0);
    const double flat[] = {3, 3, 3, 3, 3, 3};
    CHECK_EQ_INT(ss_edivisive(flat, 6, &cfg, points, 4), 0);
    CHECK_EQ_INT(ss_edivisive(flat, 2, &cfg, points, 4), 0);
}

TEST_LIST({"normal_quantile_known_values", normal_quantile_known_values},
          {"student_t_known_values", student_t_known_values},
          {"rank_sum_without_ties", rank_sum_without_ties},
          {"rank_sum_with_ties", rank_sum_with_ties},
          {"rank_sum_degenerate_inputs", rank_sum_degenerate_inputs},
          {"hodges_lehmann_and_moses_interval",
           hodges_lehmann_and_moses_interval},
          {"tiny_samples_give_the_full_range", tiny_samples_give_the_full_range},
          {"many_pairs_are_sampled", many_pairs_are_sampled},
          {"edivisive_finds_a_level_shift", edivisive_finds_a_level_shift},
          {"edivisive_finds_two_shifts_in_order",
           edivisive_finds_two_shifts_in_order},
          {"edivisive_quiet_on_noise", edivisive_quiet_on_noise})
