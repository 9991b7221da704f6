/*
 * ddsketch.h - a mergeable quantile sketch of non-negative durations
 * (DDSketch: Masson, Rim and Lee, VLDB 2019), for the node partials of a
 * multi-node run (node_partial.h).
 *
 * A value x > 0 falls in bin i = ceil(log(x) / log(gamma)) with
 * gamma = (1 + alpha) / (1 - alpha); a bin answers with
 * 2 gamma^i / (gamma + 1), which is within a relative error alpha of
 * every value the bin holds.  So a quantile read from the sketch is
 * within alpha (relative) of the true quantile of the values added, as
 * long as no bin was collapsed.  Values <= 0 count in a zero bin and read
 * back as 0.  Two sketches merge by adding bin counts, so a quantile of
 * a merged sketch is that of all their values, with the same bound:
 * merging is exact, the order of merges does not matter.
 *
 * Memory is bounded: at most SS_DDS_MAX_BINS non-empty bins.  A sketch
 * that would need more folds its lowest bins into one (the low quantiles
 * lose their bound first; the high ones, which straggler blame reads,
 * keep it).  Values spread over a factor of gamma^SS_DDS_MAX_BINS (about
 * 12.8 at alpha 1 %) never collapse.  Fixed size, no allocation.
 */
#ifndef STEPSCOPE_DDSKETCH_H
#define STEPSCOPE_DDSKETCH_H

#include <stdint.h>

/* The relative-error bound of every quantile read (1 %). */
#define SS_DDS_ALPHA 0.01
#define SS_DDS_MAX_BINS 128

typedef struct {
    int32_t index;  /* bin: values in (gamma^(index-1), gamma^index] */
    uint32_t count; /* >= 1 */
} ss_dds_bin;

typedef struct {
    uint64_t zero;     /* values <= 0 */
    uint32_t n_bins;   /* <= SS_DDS_MAX_BINS, sorted by index, no repeat */
    uint32_t collapsed; /* 1 once low bins were folded together */
    ss_dds_bin bins[SS_DDS_MAX_BINS];
} ss_ddsketch;

/* An empty sketch. */
void ss_dds_init(ss_ddsketch *s);

/* Adds one value. */
void ss_dds_add(ss_ddsketch *s, double x);

/* Adds every value of FROM into INTO. */
void ss_dds_merge(ss_ddsketch *into, const ss_ddsketch *from);

/* Values added. */
uint64_t ss_dds_count(const ss_ddsketch *s);

/* The Q-quantile (0 <= Q <= 1) by the nearest-rank method over the
 * values added (rank ceil(Q n), at least 1), within SS_DDS_ALPHA of the
 * true one; 0 for an empty sketch. */
double ss_dds_quantile(const ss_ddsketch *s, double q);

/* The bin index of X > 0; exposed for the codec's range checks. */
int32_t ss_dds_index(double x);

/* Bin indexes a sketch may carry: durations from 1 ns to years. */
#define SS_DDS_MIN_INDEX 0
#define SS_DDS_MAX_INDEX 3000

#endif
