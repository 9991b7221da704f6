/*
 * ddsketch_test.c - unit tests for ddsketch.c: every quantile of random
 * data within the stated relative error of the exact nearest-rank one,
 * merging equal to adding every value to one sketch (in any order), zero
 * values, and the bounded bins folding the lowest first.
 */
#include "ddsketch.h"

#include <math.h>
#include <stdlib.h>

#include "testing.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double exact(double *sorted, size_t n, double q)
{
    size_t r = (size_t)ceil(q * (double)n);
    return sorted[r < 1 ? 0 : r - 1];
}

static int within(double got, double want)
{
    return fabs(got - want) <= SS_DDS_ALPHA * want * (1 + 1e-9);
}

/* Step times of 4,096 ranks: 100 ms with a long tail up to x10. */
static void error_bound(void)
{
    enum { N = 4096 };
    static double v[N];
    ss_ddsketch s;
    ss_dds_init(&s);
    for (size_t i = 0; i < N; i++) {
        double u = uniform();
        v[i] = 1e8 * (1 + 9 * u * u * u * u);
        ss_dds_add(&s, v[i]);
    }
    qsort(v, N, sizeof v[0], cmp_d);
    CHECK(!s.collapsed);
    CHECK_EQ_INT(ss_dds_count(&s), N);
    const double qs[] = {0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
        CHECK(within(ss_dds_quantile(&s, qs[i]), exact(v, N, qs[i])));
}

/* Sixteen node sketches merged equal one sketch of every value. */
static void merge_exact(void)
{
    enum { NODES = 16, PER = 64 };
    static double v[NODES * PER];
    ss_ddsketch nodes[NODES], all, merged, reversed;
    ss_dds_init(&all);
    ss_dds_init(&merged);
    ss_dds_init(&reversed);
    for (int n = 0; n < NODES; n++) {
        ss_dds_init(&nodes[n]);
        for (int r = 0; r < PER; r++) {
            double x = 1e7 * (1 + 0.1 * n) * (1 + uniform());
            v[n * PER + r] = x;
            ss_dds_add(&nodes[n], x);
            ss_dds_add(&all, x);
        }
    }
    for (int n = 0; n < NODES; n++) {
        ss_dds_merge(&merged, &nodes[n]);
        ss_dds_merge(&reversed, &nodes[NODES - 1 - n]);
    }
    CHECK_EQ_INT(merged.n_bins, all.n_bins);
    CHECK_EQ_INT(reversed.n_bins, all.n_bins);
    for (uint32_t i = 0; i < all.n_bins; i++) {
        CHECK_EQ_INT(merged.bins[i].index, all.bins[i].index);
        CHECK_EQ_INT(merged.bins[i].count, all.bins[i].count);
        CHECK_EQ_INT(reversed.bins[i].count, all.bins[i].count);
    }
    CHECK(!merged.collapsed);
    qsort(v, NODES * PER, sizeof v[0], cmp_d);
    for (double q = 0; q <= 1.0; q += 0.05)
        CHECK(within(ss_dds_quantile(&merged, q), exact(v, NODES * PER, q)));
}

static void zeros_and_empty(void)
{
    ss_ddsketch s;
    ss_dds_init(&s);
    CHECK(ss_dds_quantile(&s, 0.5) == 0);
    ss_dds_add(&s, 0);
    ss_dds_add(&s, -3);
    ss_dds_add(&s, 1000);
    CHECK_EQ_INT(ss_dds_count(&s), 3);
    CHECK(ss_dds_quantile(&s, 0.5) == 0);
    CHECK(within(ss_dds_quantile(&s, 1), 1000));
}

/* Values over a factor of 1e6 need more bins than the sketch has: the
 * lowest fold, the high quantiles keep their bound. */
static void bounded_bins(void)
{
    enum { N = 2000 };
    static double v[N];
    ss_ddsketch s;
    ss_dds_init(&s);
    for (int i = 0; i < N; i++) {
        v[i] = 1e3 * pow(1e6, (double)i / (N - 1));
        ss_dds_add(&s, v[i]);
    }
    CHECK(s.collapsed);
    CHECK_EQ_INT(s.n_bins, SS_DDS_MAX_BINS);
    CHECK_EQ_INT(ss_dds_count(&s), N);
    CHECK(within(ss_dds_quantile(&s, 0.99), exact(v, N, 0.99)));
    CHECK(within(ss_dds_quantile(&s, 1), v[N - 1]));
}

TEST_LIST(TEST(error_bound), TEST(merge_exact), TEST(zeros_and_empty),
          TEST(bounded_bins))
