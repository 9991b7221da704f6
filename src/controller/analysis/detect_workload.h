/*
 * detect_workload.h - the load of parallel workloads (mixture-of-experts
 * layers, sharded embedding tables) as the moe and embedding detectors
 * keep it, and what they tell the straggler detector.
 *
 * A "key" is one layer or one table; its "items" are its experts or
 * shards.  Every rank sends, per step, one vector per key: what it sent to
 * each item (python/stepscope/_workloads.py).  detect_workload.c sums the
 * ranks' vectors into each item's load per step, keeps a window of them,
 * and maps items to ranks (a layer's placement vector, or shard i on rank
 * i).  detect_moe.c and detect_embedding.c judge them.  Internal to the
 * analysis stage.
 */
#ifndef STEPSCOPE_DETECT_WORKLOAD_H
#define STEPSCOPE_DETECT_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "detectors_internal.h"

#define SS_WL_MAX_KEYS 64     /* layers or tables judged per attempt */
#define SS_WL_MAX_ITEMS 1024  /* experts or shards of one key */
#define SS_WL_RANK_RING 128   /* steps of per-rank load kept */

/* The lateness of one rank, phase by phase, over the steps of an episode:
 * what the rank spent in each phase beyond the median rank (self time
 * where the ranks send it). */
typedef struct {
    double excess_ms[SS_MAX_RUN_NAMES];
    uint32_t steps;
} ss__late_join;

/* One layer or table. */
typedef struct {
    char label[64];         /* the layer or table, as named by the ranks */
    uint32_t n;             /* items in the window */
    float *ring;            /* win x SS_WL_MAX_ITEMS loads, per step */
    double *sum;            /* SS_WL_MAX_ITEMS: the window's load per item */
    double *now;            /* SS_WL_MAX_ITEMS: this step's */
    uint32_t head, fill;    /* the ring's next slot and steps in it */
    int touched;            /* some rank sent it in this step */
    int32_t *host;          /* SS_WL_MAX_ITEMS: item -> rank, -1 unknown */
    uint32_t n_host;        /* items with a known host (0: none known) */
    /* the open episode (the detector's) */
    int32_t finding;        /* -1 when none */
    uint64_t first, last;
    uint32_t steps_over;
    double worst;
    int32_t join_rank;      /* the rank joined with its lateness, -1 */
    ss__late_join join;
} ss__wl_key;

typedef struct {
    uint32_t world, win;
    const char *load_prefix;   /* "moe.load." */
    const char *place_prefix;  /* "moe.placement.", or NULL: item i on
                                  rank i */
    uint32_t n_keys, n_names_seen;
    ss__wl_key *keys;          /* SS_WL_MAX_KEYS, allocated at the first
                                  key */
    int16_t by_name[SS_MAX_RUN_NAMES]; /* name index -> key + 1 (load),
                                          -(key + 1) (placement), 0 */
    /* per rank and step: its load over the mean hosting rank's, the
     * largest over the keys, and that key (for the straggler) */
    uint64_t rstep[SS_WL_RANK_RING];
    float *rratio;             /* SS_WL_RANK_RING x world */
    uint8_t *rkey;             /* SS_WL_RANK_RING x world */
    uint32_t rhead, rfill;
    uint8_t *mark;             /* world: scratch for hosting ranks */
    double *scratch;           /* max(world, SS_WL_MAX_ITEMS) */
    uint64_t dropped;          /* keys beyond SS_WL_MAX_KEYS, items beyond
                                  SS_WL_MAX_ITEMS */
} ss__wl;

/* Sets W up for WORLD ranks and a window of WIN steps; returns 0 or -1 on
 * out-of-memory.  Nothing per key is allocated until a key shows up. */
int ss__wl_init(ss__wl *w, uint32_t world, uint32_t win,
                const char *load_prefix, const char *place_prefix);
/* Frees what W holds (not W). */
void ss__wl_free(ss__wl *w);
/* Learns the keys among the run's names (new names only). */
void ss__wl_names(ss__wl *w, uint32_t n_names, const char *const *names);
/* Sums step V's vectors into each key's load: sets touched, now and the
 * window of each key some rank sent, takes any placement, and records
 * each rank's load ratio.  Non-finite or negative values count as 0. */
void ss__wl_step(ss__wl *w, const ss_step_view *v, uint32_t world);
/* The rank hosting item I of K, -1 when unknown. */
int32_t ss__wl_host(const ss__wl *w, const ss__wl_key *k, uint32_t i);
/* Each rank's share of K's window load into OUT (world entries; what the
 * items it hosts received); returns the number of ranks hosting an item
 * (0 when no item's host is known). */
uint32_t ss__wl_rank_load(ss__wl *w, const ss__wl_key *k, double *out);

/* Adds step V's excess of rank R over the median rank, per phase, to J. */
void ss__late_join_add(ss__late_join *j, const ss_step_view *v,
                       uint32_t world, uint32_t r, double *scratch);
/* "; rank 3 spends 12 ms per step more than the median rank in moe" for
 * the phase with the largest mean excess, when it is at least 1 ms and 5 %
 * of the median step (MED_STEP_MS); "" otherwise.  Adds late_phase and
 * late_ms_per_step to EV (when not NULL). */
const char *ss__late_join_words(const ss_detectors *d, const ss__late_join *j,
                                uint32_t r, double med_step_ms, ss_buf *ev,
                                char *buf, size_t len);

/* The detectors' answers for the straggler detector (detect_moe.c,
 * detect_embedding.c): a clause explaining rank R's lateness over steps
 * FIRST..LAST by the load its experts or shards received, "" when they do
 * not explain it (the rank's load under 1.25 x the mean hosting rank's in
 * most of those steps).  Returns BUF. */
const char *ss__moe_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                            uint64_t last, char *buf, size_t len);
const char *ss__embedding_explain(const ss_detectors *d, uint32_t r,
                                  uint64_t first, uint64_t last, char *buf,
                                  size_t len);
/* Called by detect_straggler.c: the first of the two above that explains
 * rank R's lateness, "" when none does.  Returns BUF. */
const char *ss__workload_explain(const ss_detectors *d, uint32_t r,
                                 uint64_t first, uint64_t last, char *buf,
                                 size_t len);
/* The median load ratio of rank R over the steps FIRST..LAST that W keeps
 * and the key it was largest in most often (*KEY); 0 when none known. */
double ss__wl_rank_ratio(const ss__wl *w, uint32_t r, uint64_t first,
                         uint64_t last, int *key);

/* The upper tail of the chi-square distribution with DF degrees of
 * freedom at X, by Wilson and Hilferty's cube-root normal approximation
 * (0 for X far in the tail; 1 for X <= 0). */
double ss__chi2_upper(double x, double df);

#endif
