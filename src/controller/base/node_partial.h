/*
 * node_partial.h - one node's share of one step of a multi-node run: its
 * ranks' records folded into a summary that merges with the other
 * nodes' (docs/multinode.md, "Node aggregation").
 *
 * For the step time and for each phase (by name): how many ranks had it,
 * the sum, minimum and maximum of their values, a quantile sketch
 * (ddsketch.h, 1 % relative error), and the SS_NP_TOPK slowest ranks
 * with their values; for the step, also the SS_NP_TOPK ranks whose step
 * ended latest (end times on the controller's clock once the receiver
 * has moved them) and the ranks expected and present.  What a partial
 * could not hold (a phase over SS_NP_MAX_PHASES, a name too long) is
 * counted in DROPPED.
 *
 * Merging is exact for the counts, sums, minima, maxima and top-k lists
 * (the k largest of a union are among the k largest of each part), and
 * the sketches merge without losing their bound, so the merge of every
 * node's partial says what one fold of every rank's record would.  The
 * codec (ss_np_encode / ss_np_decode) is the NODE_PARTIAL frame's
 * payload (link_wire.h); the decoder checks every field and reads no
 * byte past the length given.  Pure: no allocation, no clock, no I/O.
 */
#ifndef STEPSCOPE_NODE_PARTIAL_H
#define STEPSCOPE_NODE_PARTIAL_H

#include <stddef.h>
#include <stdint.h>

#include "ddsketch.h"

#define SS_NP_TOPK 4
#define SS_NP_MAX_PHASES 16
#define SS_NP_NAME_MAX 127

typedef struct {
    uint32_t rank;
    int64_t value;
} ss_np_rank_value;

typedef struct {
    uint64_t count;
    int64_t sum_ns, min_ns, max_ns; /* min and max valid when count > 0 */
    ss_ddsketch sketch;
    uint32_t n_slow;                /* <= SS_NP_TOPK, <= count */
    ss_np_rank_value slow[SS_NP_TOPK]; /* largest values first; ties:
                                          lower rank first */
} ss_np_stat;

typedef struct {
    char name[SS_NP_NAME_MAX + 1];
    ss_np_stat stat;
} ss_np_phase;

typedef struct {
    uint64_t step;
    uint32_t ranks_expected;  /* ranks of the nodes merged */
    uint32_t ranks_present;   /* of them, with a record of the step */
    uint64_t dropped;         /* phases (or ranks) the partial could not hold */
    ss_np_stat step_time;     /* end - begin of each present rank */
    uint32_t n_latest;        /* <= SS_NP_TOPK */
    ss_np_rank_value latest[SS_NP_TOPK]; /* latest end times first */
    uint32_t n_phases;
    ss_np_phase phases[SS_NP_MAX_PHASES];
} ss_node_partial;

/* An empty partial of STEP for EXPECTED ranks. */
void ss_np_init(ss_node_partial *p, uint64_t step, uint32_t expected);

/* Folds RANK's record of the step in: its begin and end, and N phases,
 * NAMES[i] with its summed duration DURS[i] (a name that repeats adds to
 * the first).  A phase the partial has no room for is counted in
 * dropped. */
void ss_np_add_rank(ss_node_partial *p, uint32_t rank, int64_t begin_ns,
                    int64_t end_ns, uint32_t n, const char *const *names,
                    const int64_t *durs);

/* Folds FROM (the same step) into INTO: expected and present ranks,
 * drops, every statistic and list.  Returns 0, or -1 when the steps
 * differ (INTO unchanged). */
int ss_np_merge(ss_node_partial *into, const ss_node_partial *from);

/* Moves every time of P's latest-ending list by OFFSET_NS (the node's
 * clock onto the controller's), saturating. */
void ss_np_shift(ss_node_partial *p, int64_t offset_ns);

/* The phase called NAME, or NULL. */
const ss_np_phase *ss_np_find(const ss_node_partial *p, const char *name);

/* Upper bound of an encoded partial. */
#define SS_NP_ENCODED_MAX                                                     \
    (40 + 1 + SS_NP_TOPK * 12 + 1 +                                          \
     (SS_NP_MAX_PHASES + 1) *                                                \
         (1 + SS_NP_NAME_MAX + 33 + 1 + SS_NP_TOPK * 12 + 11 +               \
          SS_DDS_MAX_BINS * 6))

/* Encodes P into BUF; returns the bytes written, or 0 when CAP is too
 * small or P is not well formed. */
size_t ss_np_encode(const ss_node_partial *p, uint8_t *buf, size_t cap);

/* Decodes exactly LEN bytes into OUT.  Returns 0, or -1 with a one-line
 * reason in ERR (truncated, trailing bytes, a field out of range, counts
 * that disagree, a bad or repeated phase name). */
int ss_np_decode(const uint8_t *buf, size_t len, ss_node_partial *out,
                 char *err, size_t errlen);

#endif
