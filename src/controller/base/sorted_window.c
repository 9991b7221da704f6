/*
 * sorted_window.c - a sliding window's values in ascending order, its
 * median and MAD (sorted_window.h).
 */
#include "sorted_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ss_sorted_window_init(ss_sorted_window *w, uint32_t cap)
{
    w->n = w->nonfinite = 0;
    w->cap = cap;
    w->v = cap ? malloc((size_t)cap * sizeof *w->v) : NULL;
    if (cap && !w->v) {
        w->cap = 0;
        return -1;
    }
    return 0;
}

void ss_sorted_window_free(ss_sorted_window *w)
{
    free(w->v);
    w->v = NULL;
    w->n = w->cap = w->nonfinite = 0;
}

/* The first index whose value is not below X (N when none). */
static uint32_t lower_bound(const ss_sorted_window *w, double x)
{
    uint32_t lo = 0, hi = w->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (w->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ss_sorted_window_add(ss_sorted_window *w, double x)
{
    if (w->n + w->nonfinite >= w->cap)
        return -1;
    if (!isfinite(x)) {
        w->nonfinite++;
        return 0;
    }
    uint32_t i = lower_bound(w, x);
    memmove(w->v + i + 1, w->v + i, (size_t)(w->n - i) * sizeof *w->v);
    w->v[i] = x;
    w->n++;
    return 0;
}

int ss_sorted_window_remove(ss_sorted_window *w, double x)
{
    if (!isfinite(x)) {
        if (w->nonfinite == 0)
            return -1;
        w->nonfinite--;
        return 0;
    }
    uint32_t i = lower_bound(w, x);
    if (i >= w->n || w->v[i] != x)
        return -1;
    memmove(w->v + i, w->v + i + 1, (size_t)(w->n - i - 1) * sizeof *w->v);
    w->n--;
    return 0;
}

/* Value I of W, or its logarithm (LOGS): log is increasing, so the
 * logarithms of an ascending window ascend too. */
static double at(const ss_sorted_window *w, uint32_t i, int logs)
{
    return logs ? log(w->v[i]) : w->v[i];
}

/* The median of W's N > 0 values (or of their logarithms), as
 * ss_median_f64 takes it: the middle value, or the lower middle plus
 * half the difference. */
static double median_of(const ss_sorted_window *w, int logs)
{
    uint32_t k = w->n / 2;
    if (w->n % 2)
        return at(w, k, logs);
    double lower = at(w, k - 1, logs);
    return lower + (at(w, k, logs) - lower) / 2;
}

double ss_sorted_window_median(const ss_sorted_window *w)
{
    return w->n ? median_of(w, 0) : NAN;
}

/* ss_sorted_window_mad, of the values or of their logarithms (LOGS). */
static double mad_of(const ss_sorted_window *w, int logs, double *median)
{
    if (w->n == 0) {
        if (median)
            *median = NAN;
        return NAN;
    }
    uint32_t n = w->n;
    double med = median_of(w, logs);
    if (median)
        *median = med;
    /* The deviations of the lower half, walked down from the middle
     * (values <= med), and of the upper half, walked up (values >= med),
     * each ascend: merge them up to ranks n/2 - 1 and n/2 of the whole
     * (0-based). */
    uint32_t split = (n + 1) / 2;
    int64_t down = (int64_t)split - 1; /* next below, walking down */
    uint32_t up = split;               /* next above, walking up */
    uint32_t k = n / 2;
    double prev = 0, cur = 0;
    double d_down = down >= 0 ? fabs(at(w, (uint32_t)down, logs) - med)
                              : INFINITY;
    double d_up = up < n ? fabs(at(w, up, logs) - med) : INFINITY;
    for (uint32_t rank = 0; rank <= k; rank++) {
        prev = cur;
        if (d_down <= d_up) {
            cur = d_down;
            down--;
            d_down = down >= 0 ? fabs(at(w, (uint32_t)down, logs) - med)
                               : INFINITY;
        } else {
            cur = d_up;
            up++;
            d_up = up < n ? fabs(at(w, up, logs) - med) : INFINITY;
        }
    }
    if (n % 2)
        return cur;
    return prev + (cur - prev) / 2;
}

double ss_sorted_window_mad(const ss_sorted_window *w, double *median)
{
    return mad_of(w, 0, median);
}

double ss_sorted_window_mad_log(const ss_sorted_window *w, double *median)
{
    return mad_of(w, 1, median);
}
