/*
 * stats.h - order statistics and robust estimators for the controller.
 *
 * The aggregator needs min / median / p90 / max over the ranks of every
 * step, and the detectors need medians, median absolute deviations (MAD),
 * Theil-Sen slopes, a test for regularly spaced events and the binomial
 * tail their counting tests rest on.  Everything here
 * works in place on caller-owned scratch arrays: no allocation, no global
 * state, linear expected time for the selections (quickselect with a
 * three-way partition and a heapsort fallback, so adversarial or constant
 * inputs stay O(n log n) at worst).
 *
 * Definitions used throughout (they are what the tests check):
 *  - median of n values: the middle value for odd n, the mean of the two
 *    middle values for even n (rounded toward the lower value for integers);
 *  - percentile p (in per mille) by the nearest-rank method: the value of
 *    rank ceil(p * n / 1000) in ascending order (rank 1 = smallest), so p90
 *    of 10 values is the 9th smallest and p90 of 3 values is the largest;
 *  - MAD: the median of |x - median(x)| (unscaled; multiply by 1.4826 to
 *    estimate a normal standard deviation).
 */
#ifndef STEPSCOPE_STATS_H
#define STEPSCOPE_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Scale factor turning a MAD into a standard-deviation estimate. */
#define SS_MAD_TO_SIGMA 1.4826

/*
 * Reorders A[0..N) so that A[K] holds the value of rank K (0-based) in
 * ascending order, every A[i] with i < K is <= A[K] and every A[i] with
 * i > K is >= A[K]; returns A[K].  Requires K < N.  The f64 variant
 * requires that A holds no NaN.
 */
int64_t ss_select_i64(int64_t *a, size_t n, size_t k);
double ss_select_f64(double *a, size_t n, size_t k);

/* The 0-based index of the nearest-rank percentile PERMILLE (0..1000) of N
 * values; N must be > 0. */
size_t ss_nearest_rank(size_t n, unsigned permille);

/* Median of A[0..N), reordering A.  Returns SS_MISSING (NaN for f64) when
 * N == 0. */
int64_t ss_median_i64(int64_t *a, size_t n);
double ss_median_f64(double *a, size_t n);

/* Nearest-rank percentile of A[0..N), reordering A.  Returns SS_MISSING
 * (NaN for f64) when N == 0. */
int64_t ss_percentile_i64(int64_t *a, size_t n, unsigned permille);
double ss_percentile_f64(double *a, size_t n, unsigned permille);

/* Median absolute deviation of A[0..N).  A is scratch: it is overwritten
 * with the absolute deviations.  Stores the median of the original values
 * in *MEDIAN when MEDIAN is not NULL.  Returns NaN when N == 0. */
double ss_mad_f64(double *a, size_t n, double *median);

/*
 * Fills OUT with min, median, p90, max and n of VALS[0..N); VALS is
 * reordered.  worst_rank is RANKS[i] for the first i holding the maximum
 * (in the order given), or i itself when RANKS is NULL.  With N == 0 every
 * value is SS_MISSING, worst_rank SS_NO_RANK and n 0.
 */
void ss_stat_compute(ss_stat *out, int64_t *vals, const int32_t *ranks,
                     size_t n);

/* Number of doubles of scratch ss_theil_sen needs for N points. */
size_t ss_theil_sen_scratch(size_t n);

/*
 * The Theil-Sen slope of the points (X[i], Y[i]): the median of the slopes
 * of every pair with distinct x.  Robust to up to ~29 % outliers.  SCRATCH
 * must hold ss_theil_sen_scratch(N) doubles (SCRATCH_LEN).  Returns NaN when
 * fewer than two distinct x exist or SCRATCH is too small.
 */
double ss_theil_sen(const double *x, const double *y, size_t n,
                    double *scratch, size_t scratch_len);

/*
 * Looks for a regular spacing in the strictly increasing event steps
 * STEPS[0..N): when N >= 4, the median gap G is >= 2 and at least MIN_FRAC
 * of the gaps lie within max(1, G / 10) of G, returns G; otherwise 0.  Only
 * the last 256 events are considered.
 */
uint64_t ss_regular_period(const uint64_t *steps, size_t n, double min_frac);

/*
 * P(X >= K) for X ~ Binomial(N, P): the chance that K or more of N
 * independent trials succeed, each with probability P.  Only the upper
 * tail is computed: when K is not above the mean N * P the answer is 1 (no
 * evidence, and the terms would not decrease).  0 when K > N or P <= 0 (and
 * K > 0); 1 when K == 0 or P >= 1.
 */
double ss_binomial_upper_tail(uint32_t n, uint32_t k, double p);

#endif
