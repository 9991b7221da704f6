/*
 * guard_stats.h - the statistics behind `stepscope guard`: is a run's
 * per-step distribution shifted from its baseline's, by how much, and since
 * which run of the history did a metric move.
 *
 *  - Student's t quantile, for the run-level prediction bound.
 *  - Mann-Whitney rank-sum test (two-sided, normal approximation with the
 *    tie correction and a continuity correction of 1/2), as scipy's
 *    mannwhitneyu(..., method="asymptotic") computes it.
 *  - Hodges-Lehmann shift: the median of every pairwise difference
 *    candidate - baseline, with the distribution-free (Moses / Lehmann)
 *    confidence interval whose order statistics come from the normal
 *    approximation of the rank-sum's critical value.  Above
 *    SS_HL_MAX_PAIRS pairs the differences are a deterministic random
 *    sample of that many pairs, so memory stays bounded.
 *  - E-divisive change points (Matteson and James, 2014) over one value per
 *    run: the energy-distance split that maximises the scaled divergence,
 *    accepted when a permutation test (a fixed number of permutations, a
 *    fixed seed: the answer is deterministic) finds it significant, applied
 *    again to both halves (binary segmentation).
 *
 * Every function takes caller-owned input it does not change, allocates
 * its own scratch and frees it before returning; -1 means out of memory or
 * unusable input, as each contract says.
 */
#ifndef STEPSCOPE_GUARD_STATS_H
#define STEPSCOPE_GUARD_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Pairwise differences the Hodges-Lehmann estimate uses at most (8 MB). */
#define SS_HL_MAX_PAIRS 1000000u

/*
 * Student's t quantile: the t with P(|T| > t) = P for T with DF degrees of
 * freedom (Hill's algorithm 396, 1970; 4 or more significant digits), for
 * 0 < P < 1 and DF >= 1.  Returns NaN otherwise.
 */
double ss_student_t_quantile(double p, double df);

/* The result of comparing sample X (the baseline) with Y (the candidate). */
typedef struct {
    size_t n_x, n_y;
    double u;        /* U statistic of Y: pairs (x, y) with y > x, ties 1/2 */
    double z;        /* standardized U, > 0 when Y tends to be larger */
    double p;        /* two-sided p value (normal approximation) */
    double shift;    /* Hodges-Lehmann estimate of Y - X */
    double lo, hi;   /* its confidence interval at the level asked for */
    int sampled;     /* 1 when the differences were a sample of pairs */
} ss_shift_test;

/*
 * The standard normal's upper quantile: the z with P(Z > z) = P, for
 * 0 < P < 1 (Acklam's rational approximation refined by one Halley step,
 * relative error below 1e-12).  Returns NaN outside (0, 1).
 */
double ss_normal_upper_quantile(double p);

/*
 * Mann-Whitney U test of X[0..NX) against Y[0..NY): fills U, Z, P, N_X and
 * N_Y of OUT (the shift fields are set to NaN).  With NX or NY == 0, or
 * when every value is tied, P is 1 and Z 0.  Returns 0, or -1 when out of
 * memory.  NaN values are not allowed (the caller filters them).
 */
int ss_rank_sum(const double *x, size_t nx, const double *y, size_t ny,
                ss_shift_test *out);

/*
 * The rank-sum test and the Hodges-Lehmann shift of Y against X with its
 * two-sided confidence interval at level CONFIDENCE (e.g. 0.95).  When the
 * sample sizes are too small for the interval (the critical order is below
 * 1) LO and HI are the smallest and largest difference.  SEED fixes the
 * sample of pairs when NX * NY > SS_HL_MAX_PAIRS.  Returns 0, or -1 when
 * out of memory or when NX or NY is 0 (OUT is then unchanged).
 */
int ss_shift_test_run(const double *x, size_t nx, const double *y, size_t ny,
                      double confidence, uint64_t seed, ss_shift_test *out);

/* Settings of the change-point search; ss_edivisive_defaults fills them. */
typedef struct {
    double alpha;            /* significance of the permutation test, 0.05 */
    unsigned permutations;   /* per test, 199 */
    unsigned min_segment;    /* fewest points on each side of a split, 1 */
    uint64_t seed;           /* the permutations' PRNG seed */
} ss_edivisive_config;

void ss_edivisive_defaults(ss_edivisive_config *cfg);

/*
 * E-divisive change points of the series V[0..N) (exponent 1 on the
 * distances).  Stores at most MAX_POINTS of them in POINTS, ascending: a
 * point c means V[c] is the first value of a new segment.  Returns how many
 * were found (0 when none is significant, or when N < 2 * min_segment + 1
 * leaves no split to test), or -1 when out of memory.  NaN values are not
 * allowed.
 */
int ss_edivisive(const double *v, size_t n, const ss_edivisive_config *cfg,
                 size_t *points, size_t max_points);

#endif
