/*
 * stats.c - order statistics and robust estimators (see stats.h).
 *
 * Selection is introselect-like: quickselect with a median-of-three pivot
 * and a three-way (Dutch flag) partition, which makes runs of equal values
 * cheap; if the partitioning takes more rounds than 2 * log2(n) + 8 (a
 * pathological input), the remaining range is heapsorted, bounding the
 * worst case at O(n log n).  The same code serves int64_t and double
 * through a small macro so the two variants cannot drift apart.
 */
#include "stats.h"

#include <math.h>

/* Defines: static void NAME_heapsort(T *a, size_t n) and
 *          T NAME(T *a, size_t n, size_t k). */
#define SS_DEFINE_SELECT(NAME, T)                                             \
    static void NAME##_sift(T *a, size_t root, size_t n)                      \
    {                                                                         \
        for (;;) {                                                            \
            size_t child = 2 * root + 1;                                      \
            if (child >= n)                                                   \
                return;                                                       \
            if (child + 1 < n && a[child] < a[child + 1])                     \
                child++;                                                      \
            if (!(a[root] < a[child]))                                        \
                return;                                                       \
            T tmp = a[root];                                                  \
            a[root] = a[child];                                               \
            a[child] = tmp;                                                   \
            root = child;                                                     \
        }                                                                     \
    }                                                                         \
    static void NAME##_heapsort(T *a, size_t n)                               \
    {                                                                         \
        for (size_t i = n / 2; i-- > 0;)                                      \
            NAME##_sift(a, i, n);                                             \
        for (size_t end = n; end-- > 1;) {                                    \
            T tmp = a[0];                                                     \
            a[0] = a[end];                                                    \
            a[end] = tmp;                                                     \
            NAME##_sift(a, 0, end);                                           \
        }                                                                     \
    }                                                                         \
    T NAME(T *a, size_t n, size_t k)                                          \
    {                                                                         \
        size_t lo = 0, hi = n - 1; /* inclusive range holding rank k */       \
        unsigned budget = 8;                                                  \
        for (size_t m = n; m > 1; m >>= 1)                                    \
            budget += 2;                                                      \
        while (lo < hi) {                                                     \
            if (budget-- == 0) {                                              \
                NAME##_heapsort(a + lo, hi - lo + 1);                         \
                return a[k];                                                  \
            }                                                                 \
            size_t mid = lo + (hi - lo) / 2;                                  \
            T x = a[lo], y = a[mid], z = a[hi];                               \
            T pivot = x < y ? (y < z ? y : (x < z ? z : x))                   \
                            : (x < z ? x : (y < z ? z : y));                  \
            /* [lo,lt) < pivot, [lt,i) == pivot, (gt,hi] > pivot */           \
            size_t lt = lo, i = lo, gt = hi;                                  \
            while (i <= gt) {                                                 \
                T v = a[i];                                                   \
                if (v < pivot) {                                              \
                    a[i++] = a[lt];                                           \
                    a[lt++] = v;                                              \
                } else if (pivot < v) {                                       \
                    a[i] = a[gt];                                             \
                    a[gt] = v;                                                \
                    if (gt == 0)                                              \
                        break;                                                \
                    gt--;                                                     \
                } else {                                                      \
                    i++;                                                      \
                }                                                             \
            }                                                                 \
            if (k < lt)                                                       \
                hi = lt - 1;                                                  \
            else if (k > gt)                                                  \
                lo = gt + 1;                                                  \
            else                                                              \
                return a[k];                                                  \
        }                                                                     \
        return a[k];                                                          \
    }

SS_DEFINE_SELECT(ss_select_i64, int64_t)
SS_DEFINE_SELECT(ss_select_f64, double)

size_t ss_nearest_rank(size_t n, unsigned permille)
{
    if (permille > 1000)
        permille = 1000;
    size_t rank = (size_t)(((uint64_t)n * permille + 999) / 1000);
    return rank == 0 ? 0 : rank - 1;
}

/* The largest of A[0..N), N > 0. */
static int64_t max_i64(const int64_t *a, size_t n)
{
    int64_t m = a[0];
    for (size_t i = 1; i < n; i++)
        if (a[i] > m)
            m = a[i];
    return m;
}

static double max_f64(const double *a, size_t n)
{
    double m = a[0];
    for (size_t i = 1; i < n; i++)
        if (a[i] > m)
            m = a[i];
    return m;
}

int64_t ss_median_i64(int64_t *a, size_t n)
{
    if (n == 0)
        return SS_MISSING;
    size_t k = n / 2;
    int64_t upper = ss_select_i64(a, n, k);
    if (n % 2)
        return upper;
    int64_t lower = max_i64(a, k);
    /* upper >= lower, so the unsigned difference is exact and halves fit */
    return lower + (int64_t)(((uint64_t)upper - (uint64_t)lower) / 2);
}

double ss_median_f64(double *a, size_t n)
{
    if (n == 0)
        return NAN;
    size_t k = n / 2;
    double upper = ss_select_f64(a, n, k);
    if (n % 2)
        return upper;
    double lower = max_f64(a, k);
    return lower + (upper - lower) / 2;
}

int64_t ss_percentile_i64(int64_t *a, size_t n, unsigned permille)
{
    if (n == 0)
        return SS_MISSING;
    return ss_select_i64(a, n, ss_nearest_rank(n, permille));
}

double ss_percentile_f64(double *a, size_t n, unsigned permille)
{
    if (n == 0)
        return NAN;
    return ss_select_f64(a, n, ss_nearest_rank(n, permille));
}

double ss_mad_f64(double *a, size_t n, double *median)
{
    if (n == 0) {
        if (median)
            *median = NAN;
        return NAN;
    }
    double med = ss_median_f64(a, n);
    if (median)
        *median = med;
    for (size_t i = 0; i < n; i++)
        a[i] = fabs(a[i] - med);
    return ss_median_f64(a, n);
}

void ss_stat_compute(ss_stat *out, int64_t *vals, const int32_t *ranks,
                     size_t n)
{
    if (n == 0) {
        out->min = out->median = out->p90 = out->max = SS_MISSING;
        out->worst_rank = SS_NO_RANK;
        out->n = 0;
        return;
    }
    size_t imax = 0;
    int64_t vmin = vals[0], vmax = vals[0];
    for (size_t i = 1; i < n; i++) {
        int64_t v = vals[i];
        if (v < vmin)
            vmin = v;
        if (v > vmax) {
            vmax = v;
            imax = i;
        }
    }
    out->min = vmin;
    out->max = vmax;
    out->worst_rank = ranks ? ranks[imax] : (int32_t)imax;
    out->n = (uint32_t)n;
    /* Median first; the p90 rank is never below the upper middle, so it
     * is selected from the part already known to be >= the median. */
    size_t k = n / 2;
    int64_t upper = ss_select_i64(vals, n, k);
    if (n % 2) {
        out->median = upper;
    } else {
        int64_t lower = max_i64(vals, k);
        out->median =
            lower + (int64_t)(((uint64_t)upper - (uint64_t)lower) / 2);
    }
    size_t kp = ss_nearest_rank(n, 900);
    out->p90 = kp <= k ? upper : ss_select_i64(vals + k, n - k, kp - k);
}

size_t ss_theil_sen_scratch(size_t n)
{
    return n < 2 ? 0 : n * (n - 1) / 2;
}

double ss_theil_sen(const double *x, const double *y, size_t n,
                    double *scratch, size_t scratch_len)
{
    if (n < 2 || scratch_len < ss_theil_sen_scratch(n))
        return NAN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            double dx = x[j] - x[i];
            if (dx != 0.0)
                scratch[m++] = (y[j] - y[i]) / dx;
        }
    return m ? ss_median_f64(scratch, m) : NAN;
}

uint64_t ss_regular_period(const uint64_t *steps, size_t n, double min_frac)
{
    enum { MAX_EVENTS = 256 };
    if (n > MAX_EVENTS) {
        steps += n - MAX_EVENTS;
        n = MAX_EVENTS;
    }
    if (n < 4)
        return 0;
    double gaps[MAX_EVENTS - 1], work[MAX_EVENTS - 1];
    size_t ng = n - 1;
    for (size_t i = 0; i < ng; i++) {
        if (steps[i + 1] <= steps[i])
            return 0;
        gaps[i] = work[i] = (double)(steps[i + 1] - steps[i]);
    }
    double g = ss_median_f64(work, ng);
    if (g < 2)
        return 0;
    double tol = g / 10 > 1 ? g / 10 : 1;
    size_t close = 0;
    for (size_t i = 0; i < ng; i++)
        if (fabs(gaps[i] - g) <= tol)
            close++;
    if ((double)close < min_frac * (double)ng)
        return 0;
    return (uint64_t)llround(g);
}

double ss_binomial_upper_tail(uint32_t n, uint32_t k, double p)
{
    if (k == 0 || p >= 1 || (double)k <= (double)n * p)
        return 1;
    if (k > n || p <= 0)
        return 0;
    double log_first = lgamma(n + 1.0) - lgamma(k + 1.0) -
                       lgamma(n - k + 1.0) + k * log(p) +
                       (n - k) * log1p(-p);
    double sum = 0, term = 1, ratio = p / (1 - p);
    for (uint32_t i = k; i <= n && term > 1e-17 * sum; i++) {
        sum += term;
        term *= (double)(n - i) / (i + 1.0) * ratio;
    }
    double tail = exp(log_first) * sum;
    return tail < 1 ? tail : 1;
}
