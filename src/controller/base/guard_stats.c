/*
 * guard_stats.c - rank-sum test, Hodges-Lehmann shift and E-divisive change
 * points for `stepscope guard` (see guard_stats.h).
 *
 * Sizes: the rank-sum test sorts the NX + NY values once (O(N log N));
 * the Hodges-Lehmann interval needs three order statistics of the NX * NY
 * differences, found by selection (linear expected time) over at most
 * SS_HL_MAX_PAIRS of them.  E-divisive keeps the N x N distance matrix of
 * the series (one value per run, so N is the history's length) and scores
 * every split of a segment in O(N^2) by moving one point at a time from the
 * right part to the left.
 */
#include "guard_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

/* ---- normal quantile (Acklam) ---- */

double ss_normal_upper_quantile(double p)
{
    if (!(p > 0.0 && p < 1.0))
        return NAN;
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                               2.445134137142996e+00, 3.754408661907416e+00};
    /* The lower quantile x of q = 1 - p: P(Z < x) = q; we return x. */
    double q = 1.0 - p, x;
    if (q < 0.02425) {
        double t = sqrt(-2.0 * log(q));
        x = (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t +
             c[5]) /
            ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1.0);
    } else if (q > 1.0 - 0.02425) {
        double t = sqrt(-2.0 * log(p));
        x = -(((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t +
              c[5]) /
            ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1.0);
    } else {
        double t = q - 0.5, r = t * t;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r +
             a[5]) * t /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r +
             1.0);
    }
    /* One Halley step on Phi(x) - q. */
    double e = 0.5 * erfc(-x / sqrt(2.0)) - q;
    double u = e * sqrt(2.0 * M_PI) * exp(x * x / 2.0);
    x = x - u / (1.0 + x * u / 2.0);
    return x;
}

double ss_student_t_quantile(double p, double df)
{
    if (!(p > 0.0 && p < 1.0) || !(df >= 1.0))
        return NAN;
    if (df == 1.0) {
        double q = p * M_PI_2;
        return cos(q) / sin(q);
    }
    if (df == 2.0)
        return sqrt(2.0 / (p * (2.0 - p)) - 2.0);
    double a = 1.0 / (df - 0.5), b = 48.0 / (a * a);
    double c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36;
    double d = ((94.5 / (b + c) - 3.0) / b + 1.0) * sqrt(a * M_PI_2) * df;
    double x = d * p, y = pow(x, 2.0 / df);
    if (y > 0.05 + a) {
        /* Asymptotic inverse expansion about the normal. */
        x = ss_normal_upper_quantile(0.5 * p);
        y = x * x;
        if (df < 5.0)
            c += 0.3 * (df - 4.5) * (x + 0.6);
        c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c;
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b +
             1.0) * x;
        y = a * y * y;
        y = y > 0.002 ? exp(y) - 1.0 : 0.5 * y * y + y;
    } else {
        y = ((1.0 / (((df + 6.0) / (df * y) - 0.089 * d - 0.822) *
                     (df + 2.0) * 3.0) +
              0.5 / (df + 4.0)) * y - 1.0) * (df + 1.0) / (df + 2.0) +
            1.0 / y;
    }
    return sqrt(df * y);
}

/* ---- rank-sum ---- */

typedef struct {
    double v;
    int from_y;
} tagged;

static int tagged_cmp(const void *pa, const void *pb)
{
    double a = ((const tagged *)pa)->v, b = ((const tagged *)pb)->v;
    return (a > b) - (a < b);
}

int ss_rank_sum(const double *x, size_t nx, const double *y, size_t ny,
                ss_shift_test *out)
{
    memset(out, 0, sizeof *out);
    out->n_x = nx;
    out->n_y = ny;
    out->p = 1.0;
    out->shift = out->lo = out->hi = NAN;
    size_t n = nx + ny;
    if (nx == 0 || ny == 0)
        return 0;
    tagged *all = malloc(n * sizeof *all);
    if (!all)
        return -1;
    for (size_t i = 0; i < nx; i++)
        all[i] = (tagged){x[i], 0};
    for (size_t j = 0; j < ny; j++)
        all[nx + j] = (tagged){y[j], 1};
    qsort(all, n, sizeof *all, tagged_cmp);
    /* Average ranks over runs of ties; T accumulates t^3 - t. */
    double rank_sum_y = 0.0, ties = 0.0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && all[j].v == all[i].v)
            j++;
        double t = (double)(j - i);
        double avg_rank = ((double)i + 1.0 + (double)j) / 2.0;
        for (size_t k = i; k < j; k++)
            if (all[k].from_y)
                rank_sum_y += avg_rank;
        ties += t * t * t - t;
        i = j;
    }
    free(all);
    double dnx = (double)nx, dny = (double)ny, dn = (double)n;
    out->u = rank_sum_y - dny * (dny + 1.0) / 2.0;
    double mean = dnx * dny / 2.0;
    double var = dnx * dny / 12.0 * ((dn + 1.0) - ties / (dn * (dn - 1.0)));
    if (var <= 0.0)
        return 0; /* every value tied */
    double dev = out->u - mean;
    double corrected = fabs(dev) > 0.5 ? fabs(dev) - 0.5 : 0.0;
    out->z = copysign(corrected / sqrt(var), dev);
    out->p = erfc(corrected / sqrt(var) / sqrt(2.0));
    if (out->p > 1.0)
        out->p = 1.0;
    return 0;
}

/* ---- Hodges-Lehmann ---- */

/* splitmix64: a small, good, seedable generator. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform integer in [0, n), n > 0 (the modulo bias is below 2^-40 for
 * the sizes used here). */
static size_t random_below(uint64_t *state, size_t n)
{
    return (size_t)(next_random(state) % (uint64_t)n);
}

int ss_shift_test_run(const double *x, size_t nx, const double *y, size_t ny,
                      double confidence, uint64_t seed, ss_shift_test *out)
{
    if (nx == 0 || ny == 0)
        return -1;
    ss_shift_test t;
    if (ss_rank_sum(x, nx, y, ny, &t) != 0)
        return -1;
    double pairs = (double)nx * (double)ny;
    size_t count = pairs > SS_HL_MAX_PAIRS ? SS_HL_MAX_PAIRS
                                           : nx * ny;
    double *diff = malloc(count * sizeof *diff);
    if (!diff)
        return -1;
    if (count == nx * ny && pairs <= SS_HL_MAX_PAIRS) {
        size_t k = 0;
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++)
                diff[k++] = y[j] - x[i];
    } else {
        uint64_t state = seed;
        for (size_t k = 0; k < count; k++)
            diff[k] = y[random_below(&state, ny)] - x[random_below(&state, nx)];
        t.sampled = 1;
    }
    t.shift = ss_median_f64(diff, count);
    /* Moses: the interval runs from the C-th to the (NM + 1 - C)-th
     * smallest difference, C = floor(NM/2 - z * sqrt(NM (N + M + 1) / 12)). */
    double z = ss_normal_upper_quantile((1.0 - confidence) / 2.0);
    double crit = floor(pairs / 2.0 -
                        z * sqrt(pairs * ((double)nx + (double)ny + 1.0) / 12.0));
    if (isnan(z) || crit < 1.0) {
        t.lo = ss_select_f64(diff, count, 0);
        t.hi = ss_select_f64(diff, count, count - 1);
    } else {
        /* Order C of NM, 1-based, is the fraction (C - 1) / (NM - 1) of the
         * way through the (possibly sampled) differences. */
        double frac = pairs > 1.0 ? (crit - 1.0) / (pairs - 1.0) : 0.0;
        size_t lo_k = (size_t)floor(frac * (double)(count - 1));
        size_t hi_k = count - 1 - lo_k;
        t.lo = ss_select_f64(diff, count, lo_k);
        t.hi = ss_select_f64(diff, count, hi_k);
    }
    free(diff);
    *out = t;
    return 0;
}

/* ---- E-divisive ---- */

void ss_edivisive_defaults(ss_edivisive_config *cfg)
{
    cfg->alpha = 0.05;
    cfg->permutations = 199;
    cfg->min_segment = 1;
    cfg->seed = 0x5eed5eedull;
}

/*
 * The best split of the points IDX[0..N) (indexes into the N_ALL x N_ALL
 * distance matrix D): stores the split position (the first index of the
 * right part, in 1..N-1) in *AT and returns the scaled energy divergence
 * Q = m k / n * (2 B / (m k) - W_L / C(m,2) - W_R / C(k,2)), terms of a part
 * of one point being 0.  Returns -1 when no split leaves MIN_SEG points on
 * each side.
 */
static double best_split(const double *d, size_t n_all, const size_t *idx,
                         size_t n, size_t min_seg, size_t *at)
{
    if (n < 2 * min_seg || n < 2)
        return -1.0;
    /* Start with every point on the right. */
    double within_left = 0.0, within_right = 0.0, between = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            within_right += d[idx[i] * n_all + idx[j]];
    double best = -1.0;
    for (size_t tau = 1; tau < n; tau++) {
        /* Move point tau - 1 from the right part to the left one. */
        size_t e = idx[tau - 1];
        double to_left = 0.0, to_right = 0.0;
        for (size_t k = 0; k < tau - 1; k++)
            to_left += d[e * n_all + idx[k]];
        for (size_t k = tau; k < n; k++)
            to_right += d[e * n_all + idx[k]];
        within_left += to_left;
        between += to_right - to_left;
        within_right -= to_right;
        size_t m = tau, k = n - tau;
        if (m < min_seg || k < min_seg)
            continue;
        double dm = (double)m, dk = (double)k;
        double e_stat = 2.0 * between / (dm * dk);
        if (m > 1)
            e_stat -= within_left / (dm * (dm - 1.0) / 2.0);
        if (k > 1)
            e_stat -= within_right / (dk * (dk - 1.0) / 2.0);
        double q = dm * dk / (double)n * e_stat;
        if (q > best) {
            best = q;
            *at = tau;
        }
    }
    return best;
}

typedef struct {
    const double *d;
    size_t n;
    const ss_edivisive_config *cfg;
    size_t *found;
    size_t n_found, max_found;
    size_t *scratch; /* n indexes for permutations */
} edivisive_state;

/* Looks for a change point in [BEGIN, END) and, when one is significant,
 * records it and searches both parts. */
static void search_segment(edivisive_state *st, size_t begin, size_t end)
{
    size_t len = end - begin;
    size_t min_seg = st->cfg->min_segment ? st->cfg->min_segment : 1;
    if (len < 2 * min_seg + 1 || st->n_found >= st->max_found)
        return;
    size_t *idx = st->scratch + begin;
    for (size_t i = 0; i < len; i++)
        idx[i] = begin + i;
    size_t at = 0;
    double observed = best_split(st->d, st->n, idx, len, min_seg, &at);
    if (observed <= 0.0)
        return;
    /* The permutation test: how often does a shuffled segment split
     * at least as well?  Seeded by the segment, so the answer does not
     * depend on the order segments are visited in. */
    uint64_t state = st->cfg->seed ^ ((uint64_t)begin << 32) ^ (uint64_t)end;
    unsigned as_good = 0;
    for (unsigned r = 0; r < st->cfg->permutations; r++) {
        for (size_t i = len - 1; i > 0; i--) {
            size_t j = random_below(&state, i + 1);
            size_t tmp = idx[i];
            idx[i] = idx[j];
            idx[j] = tmp;
        }
        size_t ignored;
        if (best_split(st->d, st->n, idx, len, min_seg, &ignored) >= observed)
            as_good++;
    }
    double p = (as_good + 1.0) / (st->cfg->permutations + 1.0);
    if (p > st->cfg->alpha)
        return;
    st->found[st->n_found++] = begin + at;
    search_segment(st, begin, begin + at);
    search_segment(st, begin + at, end);
}

static int size_cmp(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

int ss_edivisive(const double *v, size_t n, const ss_edivisive_config *cfg,
                 size_t *points, size_t max_points)
{
    if (n < 3 || max_points == 0)
        return 0;
    double *d = malloc(n * n * sizeof *d);
    size_t *scratch = malloc(n * sizeof *scratch);
    if (!d || !scratch) {
        free(d);
        free(scratch);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            d[i * n + j] = fabs(v[i] - v[j]);
    edivisive_state st = {d, n, cfg, points, 0, max_points, scratch};
    search_segment(&st, 0, n);
    free(d);
    free(scratch);
    qsort(points, st.n_found, sizeof *points, size_cmp);
    return (int)st.n_found;
}
