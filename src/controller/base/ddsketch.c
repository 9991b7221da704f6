/*
 * ddsketch.c - the mergeable quantile sketch of node partials
 * (ddsketch.h).
 */
#include "ddsketch.h"

#include <math.h>
#include <string.h>

static double gamma_(void)
{
    return (1 + SS_DDS_ALPHA) / (1 - SS_DDS_ALPHA);
}

void ss_dds_init(ss_ddsketch *s)
{
    s->zero = 0;
    s->n_bins = 0;
    s->collapsed = 0;
}

int32_t ss_dds_index(double x)
{
    double i = ceil(log(x) / log(gamma_()));
    if (i < SS_DDS_MIN_INDEX)
        return SS_DDS_MIN_INDEX;
    if (i > SS_DDS_MAX_INDEX)
        return SS_DDS_MAX_INDEX;
    return (int32_t)i;
}

/* Folds the two lowest bins into the second: one bin is freed. */
static void collapse_lowest(ss_ddsketch *s)
{
    s->bins[1].count += s->bins[0].count;
    memmove(&s->bins[0], &s->bins[1], (s->n_bins - 1) * sizeof s->bins[0]);
    s->n_bins--;
    s->collapsed = 1;
}

/* Adds COUNT to bin INDEX, inserting it in order. */
static void add_bin(ss_ddsketch *s, int32_t index, uint32_t count)
{
    uint32_t lo = 0, hi = s->n_bins;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->bins[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n_bins && s->bins[lo].index == index) {
        uint64_t c = (uint64_t)s->bins[lo].count + count;
        s->bins[lo].count = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
        return;
    }
    if (s->n_bins == SS_DDS_MAX_BINS) {
        if (lo == 0) { /* below every bin: it joins the lowest */
            uint64_t c = (uint64_t)s->bins[0].count + count;
            s->bins[0].count = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
            s->collapsed = 1;
            return;
        }
        collapse_lowest(s);
        lo--;
    }
    memmove(&s->bins[lo + 1], &s->bins[lo],
            (s->n_bins - lo) * sizeof s->bins[0]);
    s->bins[lo] = (ss_dds_bin){index, count};
    s->n_bins++;
}

void ss_dds_add(ss_ddsketch *s, double x)
{
    if (!(x > 0)) {
        s->zero++;
        return;
    }
    add_bin(s, ss_dds_index(x), 1);
}

void ss_dds_merge(ss_ddsketch *into, const ss_ddsketch *from)
{
    into->zero += from->zero;
    into->collapsed |= from->collapsed;
    for (uint32_t i = 0; i < from->n_bins; i++)
        add_bin(into, from->bins[i].index, from->bins[i].count);
}

uint64_t ss_dds_count(const ss_ddsketch *s)
{
    uint64_t n = s->zero;
    for (uint32_t i = 0; i < s->n_bins; i++)
        n += s->bins[i].count;
    return n;
}

double ss_dds_quantile(const ss_ddsketch *s, double q)
{
    uint64_t n = ss_dds_count(s);
    if (n == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    uint64_t rank = (uint64_t)ceil(q * (double)n);
    if (rank < 1)
        rank = 1;
    uint64_t seen = s->zero;
    if (rank <= seen)
        return 0;
    double g = gamma_();
    for (uint32_t i = 0; i < s->n_bins; i++) {
        seen += s->bins[i].count;
        if (rank <= seen)
            return 2 * pow(g, s->bins[i].index) / (g + 1);
    }
    return 2 * pow(g, s->bins[s->n_bins - 1].index) / (g + 1);
}
