/*
 * stats_test.c - unit tests for stats.c: selections against a sorted copy,
 * the median / percentile / MAD definitions on small exact inputs, the
 * aggregate ss_stat, Theil-Sen accuracy and robustness, the regular
 * period finder and the binomial upper tail against exact sums.
 */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

#include "testing.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void select_matches_sort(void)
{
    enum { N = 301 };
    int64_t a[N], sorted[N], work[N];
    for (int round = 0; round < 40; round++) {
        /* Mix distinct, clustered and constant inputs. */
        uint64_t mod = round % 3 == 0 ? 5 : round % 3 == 1 ? 1000000 : 1;
        size_t n = 1 + rng_next() % N;
        for (size_t i = 0; i < n; i++)
            a[i] = sorted[i] = (int64_t)(rng_next() % mod) - 2;
        qsort(sorted, n, sizeof sorted[0], cmp_i64);
        for (size_t k = 0; k < n; k += 1 + n / 17) {
            memcpy(work, a, n * sizeof a[0]);
            int64_t v = ss_select_i64(work, n, k);
            CHECK_EQ_INT(v, sorted[k]);
            for (size_t i = 0; i < k; i++)
                CHECK(work[i] <= v);
            for (size_t i = k + 1; i < n; i++)
                CHECK(work[i] >= v);
        }
    }
}

static void select_sorted_and_reversed(void)
{
    enum { N = 4096 };
    static int64_t a[N];
    for (size_t i = 0; i < N; i++)
        a[i] = (int64_t)i;
    CHECK_EQ_INT(ss_select_i64(a, N, 1000), 1000);
    for (size_t i = 0; i < N; i++)
        a[i] = (int64_t)(N - i);
    CHECK_EQ_INT(ss_select_i64(a, N, 0), 1);
    /* organ pipe */
    for (size_t i = 0; i < N; i++)
        a[i] = (int64_t)(i < N / 2 ? i : N - i);
    CHECK_EQ_INT(ss_select_i64(a, N, N - 1), N / 2);
}

static void median_definitions(void)
{
    int64_t odd[] = {5, 1, 3};
    CHECK_EQ_INT(ss_median_i64(odd, 3), 3);
    int64_t even[] = {4, 1, 3, 2};
    CHECK_EQ_INT(ss_median_i64(even, 4), 2); /* (2+3)/2 rounded down */
    int64_t even2[] = {10, 20};
    CHECK_EQ_INT(ss_median_i64(even2, 2), 15);
    int64_t big[] = {INT64_MAX, INT64_MAX - 2};
    CHECK_EQ_INT(ss_median_i64(big, 2), INT64_MAX - 1);
    CHECK(ss_median_i64(NULL, 0) == SS_MISSING);
    double d[] = {1.0, 4.0, 2.0, 3.0};
    CHECK(ss_median_f64(d, 4) == 2.5);
    CHECK(isnan(ss_median_f64(NULL, 0)));
}

static void percentile_nearest_rank(void)
{
    CHECK_EQ_INT(ss_nearest_rank(10, 900), 8);
    CHECK_EQ_INT(ss_nearest_rank(3, 900), 2);
    CHECK_EQ_INT(ss_nearest_rank(1, 900), 0);
    CHECK_EQ_INT(ss_nearest_rank(100, 900), 89);
    CHECK_EQ_INT(ss_nearest_rank(4, 500), 1);
    CHECK_EQ_INT(ss_nearest_rank(4, 0), 0);
    CHECK_EQ_INT(ss_nearest_rank(4, 1000), 3);
    int64_t a[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    CHECK_EQ_INT(ss_percentile_i64(a, 10, 900), 9);
    double b[5] = {5, 4, 3, 2, 1};
    CHECK(ss_percentile_f64(b, 5, 200) == 1.0);
}

static void mad_exact(void)
{
    double a[] = {1, 1, 2, 2, 4, 6, 9};
    double med = 0;
    double mad = ss_mad_f64(a, 7, &med);
    CHECK(med == 2.0);
    CHECK(mad == 1.0); /* |dev| = 1 1 0 0 2 4 7 -> median 1 */
    CHECK(isnan(ss_mad_f64(NULL, 0, NULL)));
}

static void stat_compute_exact(void)
{
    int64_t v[] = {30, 10, 50, 20, 40};
    int32_t r[] = {7, 3, 9, 1, 2};
    ss_stat s;
    ss_stat_compute(&s, v, r, 5);
    CHECK_EQ_INT(s.min, 10);
    CHECK_EQ_INT(s.median, 30);
    CHECK_EQ_INT(s.p90, 50);
    CHECK_EQ_INT(s.max, 50);
    CHECK_EQ_INT(s.worst_rank, 9);
    CHECK_EQ_INT(s.n, 5);

    int64_t w[10];
    for (int i = 0; i < 10; i++)
        w[i] = (i * 7) % 10 + 1; /* a permutation of 1..10 */
    ss_stat_compute(&s, w, NULL, 10);
    CHECK_EQ_INT(s.min, 1);
    CHECK_EQ_INT(s.median, 5); /* (5+6)/2 rounded down */
    CHECK_EQ_INT(s.p90, 9);
    CHECK_EQ_INT(s.max, 10);
    CHECK_EQ_INT(s.worst_rank, 7); /* index of value 10 */

    /* ties: the first maximum wins */
    int64_t t[] = {4, 9, 9, 1};
    int32_t tr[] = {0, 5, 6, 7};
    ss_stat_compute(&s, t, tr, 4);
    CHECK_EQ_INT(s.worst_rank, 5);
    CHECK_EQ_INT(s.median, 6);

    ss_stat_compute(&s, NULL, NULL, 0);
    CHECK(s.min == SS_MISSING && s.median == SS_MISSING &&
          s.p90 == SS_MISSING && s.max == SS_MISSING);
    CHECK_EQ_INT(s.worst_rank, SS_NO_RANK);
    CHECK_EQ_INT(s.n, 0);
}

static void theil_sen_accuracy(void)
{
    enum { N = 64 };
    double x[N], y[N], scratch[N * (N - 1) / 2];
    CHECK_EQ_INT(ss_theil_sen_scratch(N), N * (N - 1) / 2);
    for (int i = 0; i < N; i++) {
        x[i] = i * 10;
        double noise = (double)(rng_next() % 2001) - 1000.0;
        y[i] = 5e8 + 3000.0 * x[i] + noise * 50;
    }
    /* a few wild outliers must not move the slope much */
    y[5] += 4e8;
    y[40] -= 3e8;
    y[41] += 1e9;
    double slope = ss_theil_sen(x, y, N, scratch, sizeof scratch / 8);
    CHECK(fabs(slope - 3000.0) < 3000.0 * 0.03);
    CHECK(isnan(ss_theil_sen(x, y, 1, scratch, 0)));
    CHECK(isnan(ss_theil_sen(x, y, N, scratch, 10)));
    double same_x[3] = {1, 1, 1}, ys[3] = {1, 2, 3};
    CHECK(isnan(ss_theil_sen(same_x, ys, 3, scratch, 3)));
}

static void regular_period(void)
{
    uint64_t every7[] = {3, 10, 17, 24, 31, 38};
    CHECK_EQ_INT(ss_regular_period(every7, 6, 0.75), 7);
    uint64_t jittered[] = {0, 10, 21, 30, 40, 49, 60};
    CHECK_EQ_INT(ss_regular_period(jittered, 7, 0.75), 10);
    uint64_t irregular[] = {1, 2, 9, 30, 31, 70};
    CHECK_EQ_INT(ss_regular_period(irregular, 6, 0.75), 0);
    uint64_t few[] = {1, 8, 15};
    CHECK_EQ_INT(ss_regular_period(few, 3, 0.75), 0);
    uint64_t consecutive[] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(ss_regular_period(consecutive, 5, 0.75), 0);
}

static void binomial_upper_tail(void)
{
    /* exact: P(X >= 3), X ~ Binomial(4, 1/2) = (4 + 1) / 16 */
    CHECK(fabs(ss_binomial_upper_tail(4, 3, 0.5) - 5.0 / 16) < 1e-12);
    /* P(X >= 10), X ~ Binomial(10, 0.3) = 0.3^10 */
    CHECK(fabs(ss_binomial_upper_tail(10, 10, 0.3) / pow(0.3, 10) - 1) < 1e-9);
    /* against a direct sum over a larger n */
    double want = 0;
    for (uint32_t i = 40; i <= 100; i++)
        want += exp(lgamma(101.0) - lgamma(i + 1.0) - lgamma(101.0 - i) +
                    i * log(0.2) + (100 - i) * log(0.8));
    CHECK(fabs(ss_binomial_upper_tail(100, 40, 0.2) / want - 1) < 1e-9);
    /* at or below the mean, and the edges */
    CHECK_EQ_INT(ss_binomial_upper_tail(10, 5, 0.5) == 1, 1);
    CHECK_EQ_INT(ss_binomial_upper_tail(10, 0, 0.1) == 1, 1);
    CHECK_EQ_INT(ss_binomial_upper_tail(10, 3, 1.0) == 1, 1);
    CHECK_EQ_INT(ss_binomial_upper_tail(10, 11, 0.5) == 0, 1);
    CHECK_EQ_INT(ss_binomial_upper_tail(10, 3, 0.0) == 0, 1);
}

TEST_LIST(TEST(select_matches_sort), TEST(select_sorted_and_reversed),
          TEST(median_definitions), TEST(percentile_nearest_rank),
          TEST(mad_exact), TEST(stat_compute_exact),
          TEST(theil_sen_accuracy), TEST(regular_period),
          TEST(binomial_upper_tail))
