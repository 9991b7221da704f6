/*
 * detectors_internal.h - how a detector plugs into the driver (detectors.c).
 *
 * A detector is one file detect_<kind>.c exporting one ss__detector: a
 * name and four hooks over a state of its own.  The driver creates every
 * detector's state with the detectors, hands each finalized step past the
 * warm-up (every step to one that sets warmup_too) to every detector in
 * the order of its table (detectors.c), calls
 * on_end when the run ends, and frees the states.  Detectors never emit a
 * finding themselves: they open one in the driver's findings table
 * (ss__finding_open), rewrite it in place and mark it changed
 * (ss__finding_touch); the driver decides when it is emitted.
 *
 * Everything here is internal to the analysis stage; docs/detectors.md
 * ("Adding a detector") walks through a new one.
 */
#ifndef STEPSCOPE_DETECTORS_INTERNAL_H
#define STEPSCOPE_DETECTORS_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

#include "detector_params.h"
#include "detectors.h"
#include "json.h"

#define MIB (1024.0 * 1024.0)
/* A name index (into the run's name table) is stored as a uint16_t;
 * NO_NAME is "no name". */
typedef uint16_t ss__name_idx;
#define NO_NAME 0xFFFF
_Static_assert(SS_MAX_RUN_NAMES < NO_NAME, "name indexes fit ss__name_idx");
#define MAX_LISTED 16 /* ranks named in one finding's message */

/* What a detector earlier in the order tells later ones about the current
 * step; the driver clears it before each step. */
typedef struct {
    int data_stall;      /* data_stall saw a stall in this step */
    double sync_late_ms; /* straggler: the latest rank's lateness, synced
                            steps only; 0 otherwise */
    double host_late_ms; /* host: what one rank, named for it, alone lost
                            to the host (run-queue delay, stops,
                            throttling) in a step that ran over the
                            window's median step, up to that excess; 0
                            otherwise */
    double host_named_ms; /* host: what a rank with an open cpu_starved or
                             cpu_throttled finding lost to that cause in
                             this step beyond every other rank, uncapped
                             (the reader caps it at its own excess); 0
                             otherwise */
    double host_all_ms;  /* host: what the median rank lost to the host in
                            this step (every rank alike), ms; 0 when none */
    int host_all_cause;  /* host: the cause the median rank lost most to
                            (ss__host_cause_name); valid when host_all_ms
                            is above 0 */
} ss__step_notes;

typedef struct ss__detector ss__detector;
struct ss__finding_slot; /* the driver's findings table (detectors.c) */

struct ss_detectors {
    /* read by every detector */
    double p[P_COUNT];         /* resolved tunables, by P_* id */
    uint32_t world, attempt;
    const char *const *names;  /* the run's name table, this step */
    uint64_t n_steps;          /* finalized steps fed */
    uint64_t n_eval;           /* steps past the warm-up */
    ss__step_notes note;
    ss_buf evidence;           /* scratch for ss__evidence_* */
    int64_t *clock_bound_ns;   /* world entries: how far each rank's
                                  aligned clock may be off, ns (0 until
                                  ss_detectors_set_clock_bound) */

    /* the driver's own */
    ss_sink sink;
    void **state; /* one per entry of the detector table */
    struct ss__finding_slot *fd;
    uint32_t n_fd, cap_fd;
};

/*
 * One detector.  CREATE allocates its state, sized from D->world and
 * D->p (already resolved), and returns NULL only on out-of-memory (the
 * whole ss_detectors_create then fails).  ON_NAMES (optional) sees the
 * name table with every finalized step, warm-up included.  ON_STEP sees
 * each finalized step past the warm-up, or every one with WARMUP_TOO (for
 * events that matter from the first step on, such as a non-finite value;
 * D->note is not filled in the warm-up); WORLD is the number of entries
 * of V->ranks to read.  ON_END (optional) runs once at the end of the run,
 * before the driver emits every finding in its final form.  DESTROY frees
 * the state (never called with NULL).
 */
struct ss__detector {
    const char *name;
    void *(*create)(ss_detectors *d);
    void (*on_names)(void *state, ss_detectors *d, uint32_t n_names,
                     const char *const *names);
    void (*on_step)(void *state, ss_detectors *d, const ss_step_view *v,
                    uint32_t world);
    void (*on_end)(void *state, ss_detectors *d);
    void (*destroy)(void *state);
    int warmup_too;
};

/* The detectors, one per file. */
extern const ss__detector ss__host_detector;        /* detect_host.c */
extern const ss__detector ss__straggler_detector;   /* detect_straggler.c */
extern const ss__detector ss__data_stall_detector;  /* detect_data_stall.c */
extern const ss__detector ss__jitter_detector;      /* detect_jitter.c */
extern const ss__detector ss__memory_detector;      /* detect_memory.c */
extern const ss__detector ss__gpu_detector;         /* detect_gpu.c */
extern const ss__detector ss__nonfinite_detector;   /* detect_nonfinite.c */
extern const ss__detector ss__spike_detector;       /* detect_spike.c */
extern const ss__detector ss__fp8_detector;         /* detect_fp8.c */
extern const ss__detector ss__replica_detector;     /* detect_replica.c */
extern const ss__detector ss__pipeline_detector;    /* detect_pipeline.c */
extern const ss__detector ss__moe_detector;         /* detect_moe.c */
extern const ss__detector ss__embedding_detector;   /* detect_embedding.c */
extern const ss__detector ss__rl_detector;          /* detect_rl.c */

/* ---- the findings table (detectors.c) ---- */

/* Opens a new finding of KIND (id = its position + 1, severity warning,
 * everything else empty); returns its index, or -1 when the table is full
 * (at most 4096 per attempt) or memory runs out: the finding is dropped.
 * An index stays valid for the life of D; a pointer from ss__finding does
 * not survive the next ss__finding_open. */
int32_t ss__finding_open(ss_detectors *d, const char *kind);

/* The finding at index IDX (from ss__finding_open). */
ss_finding *ss__finding(ss_detectors *d, int32_t idx);

/* Marks finding IDX changed: the driver emits it when due. */
void ss__finding_touch(ss_detectors *d, int32_t idx);

/* Whether a refreshed episode's finding takes the words, evidence and
 * severity of its newest window, of STRENGTH (how much the window shows
 * of the fault: lateness, cost to the job).  Always when OPENING, which
 * starts *HEIGHT, the largest strength of the episode, from it; else when
 * STRENGTH is at least 0.9 of *HEIGHT, which it raises.  So an episode
 * that fades keeps the words of its height, not those of the windows it
 * fades out in, and a steady one, whose windows differ by noise, its
 * newest. */
int ss__words_at_height(double *height, double strength, int opening);

/* Opens a finding of CONTENT->kind holding a copy of CONTENT (with the new
 * id and D's attempt) and marks it changed.  Returns its index or -1 as
 * ss__finding_open.  For a finding a detector prepared outside the table
 * until it was sure of it. */
int32_t ss__finding_publish(ss_detectors *d, const ss_finding *content);

/* The state DETECTOR's create returned for D, NULL when it is not in the
 * driver's table.  For a detector that asks another one about what it
 * keeps (the straggler asks the host detector, detect_host.h). */
void *ss__detector_state(const ss_detectors *d, const ss__detector *detector);

/* ---- what the host says about a rank ----
 * host_cause.h (the answer), detect_host.h (the host detector's
 * questions), detect_gpu.h (the GPU detector's): a detector that asks
 * another includes its header, so which asks which shows in the includes. */

/* ---- wording and evidence (detector_text.c) ---- */

/* What detect_replica.c found in one replica group at one step. */
typedef struct {
    uint64_t step;            /* the first checksum step that shows it */
    int64_t group_key;        /* the group's smallest rank */
    uint32_t compared;        /* ranks of the group that hashed the step */
    uint32_t majority;        /* ranks in the majority, 0: no majority */
    int32_t majority_rank;    /* one of them, -1 without a majority */
    const int32_t *ranks;     /* the ranks named (outside the majority, or
                                 all without one)... */
    uint32_t n_ranks;         /* ...n_ranks of them... */
    uint32_t n_ranks_total;   /* ...of n_ranks_total */
    const char *param;        /* the first entry that differs, module order */
    uint32_t param_index;     /* its index */
    uint32_t params_differ;   /* entries that differ (the most of a rank) */
    uint32_t params_total;    /* entries hashed per rank */
    uint32_t classes;         /* distinct sets of parameters in the group */
} ss_replica_facts;

/* Writes the message and evidence of a replica_divergence finding F from
 * FACTS (detect_replica.c). */
void ss__replica_message(ss_detectors *d, const ss_replica_facts *facts,
                         ss_finding *f);

/* "48" from 10, "4.1" from 1, below two significant digits ("0.15",
 * "0.04", "0.0012"; "0.5", not "0.50"), "0.0" for zero: what a person
 * reads.  Returns BUF. */
const char *ss__fmt_ms(char *buf, size_t len, double ms);
/* "512 KiB", "1.5 MiB", "2.00 GiB".  Returns BUF. */
const char *ss__fmt_bytes(char *buf, size_t len, double bytes);
/* "rank 3" or "ranks 1, 3 and 5" for the N first of TOTAL ranks, with
 * " (T ranks in all)" when the list is cut.  Returns BUF. */
const char *ss__fmt_ranks(char *buf, size_t len, const int32_t *ranks,
                          uint32_t n, uint32_t total);
/* " (clocks aligned ± 0.3 ms)", " (clocks aligned ± 40 µs)" below
 * 0.1 ms, for a clock error bound BOUND_NS above 0; "" for 0.  Returns
 * BUF. */
const char *ss__fmt_clock_bound(char *buf, size_t len, int64_t bound_ns);
/* The name at index IDX of the run's name table, "?" when unknown. */
const char *ss__name_of(const ss_detectors *d, int idx);

/* Whether NAME is a data-loading phase, whose waits the data_stall
 * detector judges (detect_data_stall.c's list, compared ignoring case). */
int ss__data_phase_name(const char *name);
/* The phase a checkpoint's save is recorded in (auto mode's and the API's
 * name; goodput counts it as checkpoint time): no straggler's rare wait
 * and no stall. */
#define SS__CHECKPOINT_PHASE "checkpoint"
/* Sets F's ranks to the first SS_FINDING_MAX_RANKS of RANKS[N] (RANKS may
 * be NULL when N is 0). */
void ss__set_ranks(ss_finding *f, const int32_t *ranks, uint32_t n);

/*
 * A finding's evidence: a flat JSON object written through base/json.h into
 * EV (D->evidence), then copied into F->evidence_json by
 * ss__evidence_end.  An item that would not fit there (with the closing
 * brace) is left out whole, so the object is always valid.  Numbers: an
 * integral value as an integer, otherwise up to 3 decimals without
 * trailing zeros; a non-finite one is left out.
 */
void ss__evidence_begin(ss_buf *ev);
void ss__evidence_str(ss_buf *ev, const char *key, const char *value);
void ss__evidence_num(ss_buf *ev, const char *key, double value);
void ss__evidence_int(ss_buf *ev, const char *key, int64_t value);
void ss__evidence_end(ss_buf *ev, ss_finding *f);
/* Adds clock_bound_ns (and clock_uncertain: 1 when UNCERTAIN) to EV for a
 * bound above 0; nothing for 0, so single-host evidence is unchanged. */
void ss__evidence_clock_bound(ss_buf *ev, int64_t bound_ns, int uncertain);

/* ---- float8 health (detect_fp8.c words its findings here) ---- */

/* The kinds of float8 finding. */
enum { SS_FP8_SATURATION, SS_FP8_UNDERFLOW, SS_FP8_SCALE };

/* A float8 format by its code in the fp8.format vector
 * (python/stepscope/_fp8.py): 1 "e4m3", 2 "e5m2", 3 "e4m3fnuz",
 * 4 "e5m2fnuz"; "?" for any other code. */
const char *ss__fp8_format_name(int code);

/* What a float8 finding says: one tensor of one layer, LABEL
 * "LAYER.TENSOR" as the rank named it, over an episode of steps. */
typedef struct {
    int kind;              /* SS_FP8_* */
    const char *label;
    int format;            /* its latest format code */
    uint64_t first_step;   /* the episode's first step over the threshold
                              (with an invalid scale) */
    uint32_t steps;        /* steps over it (with an invalid scale) */
    double threshold;      /* saturation, underflow: the fraction */
    double worst;          /* saturation, underflow: the largest fraction;
                              scale: the first invalid scale */
    uint64_t worst_step;   /* saturation, underflow: the step of WORST */
    int32_t worst_rank;
    double amax, scale;    /* at WORST (scale: the first invalid one's) */
    const int32_t *ranks;  /* the ranks named (scale: those of the first
                              step), N_RANKS of TOTAL_RANKS */
    uint32_t n_ranks, total_ranks;
    uint32_t tensors;      /* scale: distinct tensors with an invalid scale
                              in the episode */
    uint32_t spread_ranks; /* scale: distinct ranks with one */
} ss__fp8_words;

/* Writes F's message, evidence (through D->evidence) and ranks from W;
 * docs/report-json.md lists the evidence. */
void ss__fp8_describe(ss_detectors *d, ss_finding *f, const ss__fp8_words *w);

/* ---- small shared helpers ---- */

/* calloc that never asks for 0 bytes: a 0-rank world still gets a
 * pointer, so "NULL" means out-of-memory alone. */
static inline void *ss__zalloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* Tunable ID as a count. */
static inline uint32_t ss__param_u32(const ss_detectors *d, int id)
{
    return (uint32_t)d->p[id];
}

/* What one rank's value OWN of a step is compared with, ST being the
 * step's statistics over the ranks that reported it, OWN among them: the
 * median rank's value, except where two ranks reported it.  Their median
 * lies halfway between them, so a rank twice the other's value is only
 * 1.33 times the median and the excess halves: the other rank's value
 * (2 x median - OWN) is the reference there. */
static inline double ss__reference(const ss_stat *st, double own)
{
    return st->n == 2 ? 2 * (double)st->median - own : (double)st->median;
}

/* Index of the ring slot I positions before the newest one, in a ring of
 * CAP slots whose next write goes to HEAD. */
static inline uint32_t ss__ring_back(uint32_t head, uint32_t cap, uint32_t i)
{
    return (head + cap - 1 - i % cap) % cap;
}

#endif
