/*
 * sorted_window.h - the values of a sliding window kept in ascending
 * order, so that its median and median absolute deviation (MAD) cost a
 * pass over half the window instead of two selections over a copy of it.
 *
 * A detector that judges every step against the median and MAD of its
 * last W values (jitter: W = 200, every step) pays for two quickselects
 * and a copy of W doubles per step with stats.h; here a step is one
 * removal and one insertion (a binary search and a memmove each) and the
 * MAD a merge of the deviations below and above the median.  The results
 * are those of ss_median_f64 and ss_mad_f64 on the same values, to the
 * bit (sorted_window_test.c checks it): the deviations are the same
 * roundings of |x - median|, taken in the same order.  The same of the
 * values' logarithms (spikes of a loss or a norm are judged on them)
 * takes a logarithm of the values it walks only.  A NaN or an infinity
 * is counted, not kept: the median and MAD are those of the finite
 * values, and a caller that wants every value's checks the count.
 */
#ifndef STEPSCOPE_SORTED_WINDOW_H
#define STEPSCOPE_SORTED_WINDOW_H

#include <stdint.h>

typedef struct {
    double *v;          /* n finite values, ascending */
    uint32_t n, cap;
    uint32_t nonfinite; /* values added and not removed that are not */
} ss_sorted_window;

/* An empty window of up to CAP values; 0, or -1 when memory runs out
 * (W is then empty and may be freed). */
int ss_sorted_window_init(ss_sorted_window *w, uint32_t cap);

/* Frees W's memory; W is then empty (NULL-safe on a zeroed W). */
void ss_sorted_window_free(ss_sorted_window *w);

/* Adds X (a NaN or an infinity is counted); a full window, CAP values
 * with those counted, is left as it is (returns -1). */
int ss_sorted_window_add(ss_sorted_window *w, double x);

/* Removes one value equal to X (one of those counted when X is not
 * finite); -1 when none is there. */
int ss_sorted_window_remove(ss_sorted_window *w, double x);

/* The median of the window (NAN when empty): ss_median_f64's value. */
double ss_sorted_window_median(const ss_sorted_window *w);

/* The MAD of the window, and its median into *MEDIAN when not NULL (NAN
 * when empty): ss_mad_f64's values. */
double ss_sorted_window_mad(const ss_sorted_window *w, double *median);

/* The same of the values' natural logarithms (every value > 0):
 * ss_mad_f64's on log() of each. */
double ss_sorted_window_mad_log(const ss_sorted_window *w, double *median);

#endif
