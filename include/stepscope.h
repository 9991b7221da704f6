/*
 * stepscope.h - the whole public C API of libstepscope, the per-rank recorder.
 *
 * A training process calls these functions to record, per step, how long the
 * step and its named phases took, when the rank arrived at each collective
 * (sync point), scalar metrics and memory.  The recorder folds the events into
 * one record per step on a background sender thread and ships it to the
 * stepscope controller named in the environment (see docs/protocol.md).
 *
 * Guarantees:
 *  - Hot-path calls (step/phase/sync/metric/values) never allocate, lock, block or
 *    make a system call other than reading the vDSO clock.  When a per-thread
 *    ring is full, or the controller is slow or gone, events are dropped and
 *    counted; the counts reach the controller and its report.
 *  - Without STEPSCOPE_ADDR in the environment, ss_init() leaves the recorder
 *    disabled and every call is a no-op costing one relaxed atomic load.
 *  - After fork() the child is disabled: it never touches the parent's
 *    connection or rings.
 *  - No function aborts or exits the host process.
 *
 * Threading: all functions are thread-safe.  Step begin/end normally come from
 * one training thread; phases, syncs and metrics may come from any thread and
 * are attributed to the step that was current when they began.
 */
#ifndef STEPSCOPE_H
#define STEPSCOPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SS_VERSION_STRING "0.1.0"

/* An interned name (phase, sync point or metric).  0 is never a valid id. */
typedef uint32_t ss_name_id;

/* Error codes: functions return 0 or one of these negative values. */
enum {
    SS_OK = 0,
    SS_EINVAL = -1,     /* bad argument (NULL, empty or too long name...) */
    SS_ENAMES = -2,     /* the name table is full (SS_MAX_NAMES) */
    SS_EENV = -3,       /* the STEPSCOPE_* environment is malformed */
    SS_ENOMEM = -4,     /* out of memory while setting up */
    SS_ESTATE = -5      /* call not valid in the current state */
};

#define SS_MAX_NAMES 255   /* distinct names per process */
#define SS_MAX_NAME_LEN 63 /* bytes, without the terminating NUL */

/* Kinds of device memory reported through ss_memory_record(). */
typedef enum {
    SS_MEM_DEVICE_ALLOCATED = 1, /* bytes currently allocated on the device */
    SS_MEM_DEVICE_PEAK = 2       /* peak bytes allocated during this step */
} ss_mem_kind;

/*
 * Reads STEPSCOPE_ADDR, STEPSCOPE_TOKEN, STEPSCOPE_RUN_ID and the rank
 * variables (RANK, WORLD_SIZE, TORCHELASTIC_RESTART_COUNT) and, when a
 * controller is named, starts the sender thread which connects to it.
 * Returns 0 when enabled or when no controller is configured (then disabled),
 * SS_EENV when the environment is present but malformed (then disabled).
 * Calling it again is a harmless no-op.  Any other call made before ss_init()
 * initialises implicitly.
 */
int ss_init(void);

/* Returns 1 when events are being recorded and sent, 0 otherwise. */
int ss_enabled(void);

/*
 * Interns NAME (1..SS_MAX_NAME_LEN bytes, copied) and returns its id, the
 * same id for the same name every time.  Returns 0 on a bad name or a full
 * table; phases, syncs and metrics recorded under id 0 are dropped and
 * counted (ss_counters.dropped_events).  Not for the hot path: call once
 * per call site (see SS_NAME).  Works while disabled, so ids are stable
 * whatever the environment.
 */
ss_name_id ss_name(const char *name);

/* Caches the id of a literal name in a static at the call site.  A name
 * ss_name() refuses (a bad name, a full table: neither ever changes) is
 * cached too, as SS_NAME_REFUSED_, so that the call site never asks again:
 * it yields 0 without a lock. */
#define SS_NAME_REFUSED_ UINT32_MAX
#define SS_NAME(literal)                                                      \
    (__extension__({                                                          \
        static ss_name_id ss_cached_id_;                                      \
        ss_name_id ss_id_ = __atomic_load_n(&ss_cached_id_, __ATOMIC_RELAXED); \
        if (!ss_id_) {                                                        \
            ss_id_ = ss_name(literal);                                        \
            if (!ss_id_)                                                      \
                ss_id_ = SS_NAME_REFUSED_;                                    \
            __atomic_store_n(&ss_cached_id_, ss_id_, __ATOMIC_RELAXED);       \
        }                                                                     \
        ss_id_ == SS_NAME_REFUSED_ ? 0 : ss_id_;                              \
    }))

/* Marks the start of training step STEP (steps must increase).  Ends an
 * open step first if the caller forgot to. */
void ss_step_begin(uint64_t step);

/* Marks the end of the current step; its record is sent shortly after. */
void ss_step_end(void);

/* Opens / closes the phase ID on the calling thread.  Phases may nest; the
 * same name nested in itself counts once (outermost).  A phase's time is
 * added to the step that was current when it began, and so is its self
 * time: its time less that of the phases nested in it on this thread. */
void ss_phase_begin(ss_name_id id);
void ss_phase_end(ss_name_id id);

/* Records a phase ID that ran from BEGIN_NS to END_NS (ss_now_ns() clock),
 * measured elsewhere - on another thread, or from a completion callback -
 * and adds it to the current step.  Ignored when END_NS < BEGIN_NS.  It
 * nests in the innermost phase open on the calling thread that began no
 * later than BEGIN_NS (that phase's self time leaves it out); record it
 * before ending that phase. */
void ss_phase_span(ss_name_id id, int64_t begin_ns, int64_t end_ns);

/* The recorder's clock: CLOCK_MONOTONIC in nanoseconds.  Works while
 * disabled. */
int64_t ss_now_ns(void);

/* Records this rank's arrival now at the collective or barrier ID.  The
 * controller compares arrivals across ranks (arrival skew).  It also
 * counts as the process's next collective (see ss_collective_begin), which
 * lasts until the next step or phase call of any thread. */
void ss_sync(ss_name_id id);

/* The process enters its next collective, of kind KIND (all_reduce,
 * barrier, ...): collectives are numbered 1, 2, ... per process in the
 * order they are entered, and the latest one's kind, number and whether
 * the process is still inside it travel to the controller with the live
 * status, so that a hang can say which rank is at a different collective
 * from the others (docs/debug.md).  Costs one atomic compare-and-swap. */
void ss_collective_begin(ss_name_id kind);

/* The process left its latest collective. */
void ss_collective_end(void);

/* Records this rank's arrival at the collective ID at AT_NS (ss_now_ns()
 * clock), taken earlier on this or another thread - the moment its last
 * gradient was ready, say - into the current step.  Ignored when AT_NS < 0. */
void ss_sync_at(ss_name_id id, int64_t at_ns);

/* Records VALUE for metric ID in the current step (the last value wins). */
void ss_metric(ss_name_id id, double value);

/* ---- vectors (docs/recorder.md#vectors) ---- */

/* Elements kept of one vector; the rest are cut and counted. */
#define SS_MAX_VALUES 1024
/* Bytes of vectors (8 per element) one step of one process may carry;
 * vectors beyond it are dropped and counted. */
#define SS_MAX_STEP_VALUE_BYTES (256u * 1024u)

/* Records the vector V[0..N) under name ID for the current step (the one
 * open when it is called): a histogram, counts per expert, per-layer
 * norms...  The last call of a name in a step wins.  Elements beyond
 * SS_MAX_VALUES are cut (ss_counters.truncated_values); a vector that
 * finds its thread's vector ring full, or that goes over the step's
 * SS_MAX_STEP_VALUE_BYTES, is dropped (ss_counters.dropped_vectors).
 * NaN and infinities are values like any other and reach the controller
 * unchanged.  Copies V into a per-thread ring: no allocation, lock or
 * system call; about 100 ns for 1,024 elements.  Ignored outside a step,
 * with N == 0 or V NULL, and under id 0. */
void ss_values(ss_name_id id, const double *v, size_t n);

/* Names the indices of vector ID: LABELS[i] for index i, N of them (at
 * most SS_MAX_VALUES, each at most 255 bytes without control
 * characters).  Copied; sent to the controller once, and again when they
 * change.  Not for the hot path: it takes a lock.  Returns 0, SS_EINVAL
 * (a bad id, label or count), SS_ESTATE (the recorder is disabled) or
 * SS_ENOMEM. */
int ss_values_labels(ss_name_id id, const char *const *labels, size_t n);

/* Samples this process's resident set size into the current step (the step
 * keeps its maximum).  Costs one pread() of /proc/self/statm: call it once
 * per step, not in an inner loop. */
void ss_memory_sample(void);

/* Records device memory of KIND in the current step (maximum kept). */
void ss_memory_record(ss_mem_kind kind, uint64_t bytes);

/* Reports that a checkpoint for STEP has been written: it holds the state
 * after step STEP, so a run resumed from it continues with STEP + 1. */
void ss_checkpoint_saved(uint64_t step);

/* ---- on-demand profiling (docs/debug.md#profiling) ----
 *
 * `stepscope profile` asks chosen ranks to run a profiler for a while.
 * A process that can honour it calls ss_profile_enable() once; the
 * controller then sends it requests, which the process takes with
 * ss_profile_poll() (cheap: one atomic load when there is none; call it
 * at step boundaries) and answers with ss_profile_done().  Ranks that
 * never enabled it are answered "not supported" by the controller.  The
 * Python auto mode does all of this with torch.profiler. */

typedef struct {
    uint32_t request_id;  /* to echo in ss_profile_done() */
    uint32_t duration_ms; /* how long to profile */
    char dir[256];        /* absolute directory to write the trace into */
} ss_profile_request;

/* Announces that this process honours profile requests.  Returns 0, or
 * SS_ESTATE when the recorder is disabled. */
int ss_profile_enable(void);

/* Takes the pending request into *OUT: returns 1, or 0 when there is none
 * (a newer request replaces one not yet taken).  Never blocks. */
int ss_profile_poll(ss_profile_request *out);

/* Answers request REQUEST_ID.  OK 1: TEXT is the absolute path of the
 * Chrome-trace JSON written, and MARKER_NS the ss_now_ns() time of its
 * event named "stepscope::clock" (how the trace is aligned with the
 * steps).  OK 0: TEXT says why there is no trace.  Returns 0, SS_EINVAL
 * (an empty, too long or relative TEXT), or SS_ESTATE (recorder disabled,
 * or too many answers waiting to be sent).  Thread-safe, never blocks. */
int ss_profile_done(uint32_t request_id, int ok, int64_t marker_ns,
                    const char *text);

/*
 * Reports that this process resumed from a checkpoint saved at STEP (it
 * loaded the state after step STEP), so its steps continue with STEP + 1
 * and step numbers mean the same in every attempt of a run.  The caller
 * numbers its steps itself (ss_step_begin(STEP + 1), ...); the controller
 * records the step with the attempt and counts the steps an earlier
 * attempt made after it as lost work (docs/fault-tolerance.md).  Call it
 * once, before the first step; later calls replace the report.  A STEP
 * above INT64_MAX is ignored.
 */
void ss_resumed_from(uint64_t step);

/*
 * Flushes what is recorded (waiting at most about one second for the
 * controller), says goodbye so the controller knows this rank ended
 * cleanly, stops the sender thread and disables the recorder.  Registered
 * with atexit() by ss_init(), so calling it is optional.
 */
void ss_shutdown(void);

/* Events and step records dropped so far (ring full, controller slow or
 * gone, recorded under id 0), vectors dropped whole (ss_values) and
 * vector elements cut by SS_MAX_VALUES.  All are also reported to the
 * controller. */
typedef struct {
    uint64_t dropped_events;
    uint64_t dropped_records;
    uint64_t dropped_vectors;
    uint64_t truncated_values;
} ss_counters;
void ss_get_counters(ss_counters *out);

/* Returns a static English description of an SS_E* code. */
const char *ss_strerror(int code);


/* ---- pipeline parallelism (docs/workloads.md#pipelines) ----
 *
 * A pipeline-parallel rank says once which stage it runs and under which
 * schedule (ss_pipeline), then brackets each microbatch's work with
 * ss_microbatch_begin / ss_microbatch_end on its compute thread.  The
 * spans are kept in a bounded buffer of the calling thread and go out
 * once per step, when that thread ends the step, as two vectors
 * (pipeline.spans, pipeline.config); the controller measures each stage's
 * bubble against its schedule's formula. */

/* The pipeline schedules (their bubble formulas: docs/workloads.md). */
typedef enum {
    SS_PIPE_GPIPE = 1,       /* all forwards, then all backwards */
    SS_PIPE_1F1B = 2,        /* one forward, one backward (PipeDream-Flush) */
    SS_PIPE_INTERLEAVED = 3, /* 1F1B over CHUNKS model chunks per stage */
    SS_PIPE_ZB1P = 4,        /* zero bubble, backward split into B and W */
    SS_PIPE_DUALPIPE = 5     /* DualPipe, bidirectional */
} ss_pipe_schedule;

/* Spans of one thread kept per step; later ones are dropped and counted
 * (sent in pipeline.config). */
#define SS_PIPE_MAX_SPANS 256

/* Declares this process pipeline stage STAGE (0-based) of STAGES, run under
 * SCHEDULE with MICROBATCHES microbatches per step and, for
 * SS_PIPE_INTERLEAVED, CHUNKS model chunks per stage (1 otherwise).  Call
 * it before the first step; a later call replaces it.  Returns 0 or
 * SS_EINVAL (STAGES 0 or over 4096, STAGE >= STAGES, an unknown schedule,
 * MICROBATCHES 0, CHUNKS 0, CHUNKS != 1 outside SS_PIPE_INTERLEAVED, or
 * SS_PIPE_DUALPIPE with an odd STAGES). */
int ss_pipeline(uint32_t stage, uint32_t stages, ss_pipe_schedule schedule,
                uint32_t microbatches, uint32_t chunks);

/* The calling thread begins microbatch INDEX's work of KIND: 'F'
 * (forward), 'B' (backward; only its input-gradient part where the
 * schedule splits it) or 'W' (the weight-gradient part).  A begin while a
 * span is open ends that one first.  An unknown KIND is dropped and
 * counted.  Stores a timestamp in a per-thread buffer: no lock or system
 * call, and an allocation only at a thread's first microbatch (begin and
 * end together cost two vDSO clock reads, under 200 ns measured on a
 * loaded 2-core machine).  While the recorder is disabled nothing is
 * sent: the buffer fills and later spans are counted as dropped. */
void ss_microbatch_begin(uint32_t index, char kind);

/* Ends the calling thread's open microbatch span; nothing without one. */
void ss_microbatch_end(void);

/* ---- parallel workloads (docs/workloads.md) ----
 *
 * The load of a mixture-of-experts layer (tokens per expert) and of a
 * table of embeddings sharded by rows (lookups per shard), per step and
 * rank, recorded as vectors (ss_values) named moe.load.LAYER,
 * moe.placement.LAYER and emb.load.TABLE.  The controller sums the ranks'
 * vectors and names a layer whose router favours a few experts
 * (expert_imbalance) or a table whose lookups fall on one shard
 * (embedding_imbalance), and explains a straggler by the load it hosts. */

/* The id of mixture-of-experts layer LAYER's load (LAYER: 1..49 bytes,
 * "3" or "blocks.3.moe"); 0 for a bad name or a full name table.  Not for
 * the hot path: call it once per layer and keep the id. */
ss_name_id ss_expert_layer(const char *layer);

/* Records, for the current step, the tokens this rank's router sent to
 * each global expert of LAYER (an id from ss_expert_layer):
 * TOKENS_PER_EXPERT[i] for expert i, N of them (at most SS_MAX_VALUES
 * kept).  Sends the layer's placement with it when ss_expert_placement
 * gave one since its last call.  Hot path: ss_values' cost and one atomic
 * load (a trylock in the one call that sends a placement). */
void ss_expert_load(ss_name_id layer, const double *tokens_per_expert,
                    size_t n);

/* Says which rank hosts each expert of LAYER: EXPERT_TO_RANK[i] for
 * expert i, N of them (1..SS_MAX_VALUES, each >= 0).  Copied and kept
 * until the layer's next ss_expert_load, which sends it (make that call
 * inside a step, as every load is); a newer placement replaces one not
 * yet sent.  Call it once, and again when the placement changes.  Not for
 * the hot path: it takes a lock.  Returns 0, SS_EINVAL (bad arguments),
 * SS_ENAMES (the name table is full) or SS_ENOMEM (out of memory, or 64
 * layers' placements waiting). */
int ss_expert_placement(const char *layer, const int32_t *expert_to_rank,
                        size_t n);

/* The id of embedding table TABLE's load (TABLE: 1..54 bytes); 0 for a
 * bad name or a full name table.  Not for the hot path. */
ss_name_id ss_embedding_table(const char *table);

/* Records, for the current step, the lookups this rank made in each
 * row-wise shard of TABLE (an id from ss_embedding_table):
 * LOOKUPS_PER_SHARD[i] for shard i, hosted by rank i; N of them.  Hot
 * path: what ss_values costs. */
void ss_shard_load(ss_name_id table, const double *lookups_per_shard,
                   size_t n);

#ifdef __cplusplus
}
#endif
#endif
