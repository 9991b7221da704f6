/*
 * fold.h - folds the event streams of all recording threads into one
 * record per step.
 *
 * The sender feeds every drained event to ss__fold_event() together with
 * the ss__track of the thread that made it, then calls ss__fold_round()
 * once all rings are drained.  Rules:
 *  - Phases pair begin with end per thread and per name; a name nested in
 *    itself counts once (the outermost pair).  The duration goes to the step
 *    that was current at the begin.
 *  - Self time (docs/recorder.md): a phase run's self time is its duration
 *    less the time covered by the phase runs nested in it, counted once
 *    where they overlap.  A run nests in the phases open on the same thread
 *    when it begins: a begin/end pair in the innermost one; a span
 *    (ss_phase_span, folded when recorded) in the innermost open phase that
 *    began no later than the span, and it covers that phase from its begin
 *    to its end.  A run still open when its parent ends covers the parent
 *    up to that end.  Overlaps are found against the latest end covered so
 *    far: a nested run folded after one that ended later counts only past
 *    that end.  At most SS__NEST_MAX runs are tracked open per thread; one
 *    begun deeper is not subtracted from the phases around it.
 *  - A sync keeps its first arrival in the step; a metric its last value;
 *    RSS and device bytes their maximum.
 *  - A metric whose later values in the step may have been lost is left out
 *    of the record (missing, never an earlier value): when a thread's
 *    stream shows a hole in which a metric value was dropped
 *    (SS__EV_LOST_METRIC), every metric value that thread gave to a step it
 *    may still have been recording into (see ss__track.open_from) is in
 *    doubt until a later value for the same metric and step arrives.
 *  - A step is complete when its end event has been seen; ss__fold_round()
 *    hands complete steps to the sink in increasing order.  A step lower
 *    than a completed one that is still open can never complete and is
 *    dropped (a record lost); so is a step whose begin event was lost.
 *    When more than SS__FOLD_OPEN steps are open at once the lowest is
 *    handed on early if complete, else dropped.  A step still open when a
 *    later step begins has lost its end (ss_step_begin ends the open step
 *    first): it is dropped at the end of the following round, which leaves
 *    time for an end made on another thread to arrive.
 *  - Events for a step already handed on (or dropped) are counted as
 *    dropped events, as are items beyond WIRE_MAX_ITEMS in one step.
 *  - Events made while no step was open (step SS__NO_STEP) are ignored.
 *  - Phase, sync and metric events under no valid name id (0: ss_name
 *    refused the name) are counted as dropped events.
 *  - A phase item also keeps its earliest begin (first_begin_ns).
 *  - Vectors (ss__fold_values): the last one of a name in a step wins.
 *    A step's vectors share a budget of SS_MAX_STEP_VALUE_BYTES (every
 *    vector folded counts, a replaced one too); a vector beyond it, one
 *    for a step already handed on, one under no valid name, or one that
 *    finds no memory is dropped and counted (dropped_vectors).  They go
 *    to the sink with their step's record.
 *  - Live state (ss__fold_status): the thread whose STEP_BEGIN was folded
 *    last is the stepping thread; its open step and innermost open phase
 *    are what a STATUS frame reports.
 * Only the sender thread touches an ss__fold and the ss__track members.
 */
#ifndef STEPSCOPE_LIB_FOLD_H
#define STEPSCOPE_LIB_FOLD_H

#include <stdint.h>

#include "ring.h"
#include "stepscope.h"
#include "wire.h"

#define SS__FOLD_OPEN 16 /* steps being assembled at once */
#define SS__NAME_SLOTS (WIRE_MAX_NAME_ID + 1)
#define SS__NEST_MAX 16 /* open phase runs tracked for self time, per thread */

/* One open phase run of a thread, for self time: what its nested runs
 * covered so far (child_ns), and up to when (covered_to), so that
 * overlapping children count once. */
typedef struct {
    uint8_t id;
    ss__mono_ns begin;
    ss__mono_ns covered_to;
    uint64_t child_ns;
} ss__open_run;

/* Phase pairing state of one thread, and how far its stream has moved. */
typedef struct {
    uint32_t depth[SS__NAME_SLOTS];
    ss__mono_ns begin[SS__NAME_SLOTS];
    uint64_t step[SS__NAME_SLOTS];
    /* The outermost open run of each tracked name, innermost last. */
    ss__open_run open[SS__NEST_MAX];
    unsigned n_open;
    /* The lowest step this thread may still record into: events of a
     * thread carry non-decreasing steps, and once it has ended step S (or
     * begun a later one) it records nothing more into S.  0 at first. */
    uint64_t open_from;
} ss__track;

/* Elements of vectors one step may hold. */
#define SS__STEP_VALUES (SS_MAX_STEP_VALUE_BYTES / sizeof(double))

/* One vector of a step, as handed to the sink. */
typedef struct {
    uint32_t name_id;
    uint32_t n;         /* elements in v */
    uint32_t truncated; /* elements the recorder's cap cut */
    const double *v;
} ss__vec;

/* Where a vector of an open step lies in its step's arena. */
typedef struct {
    uint32_t name_id, n, truncated;
    uint32_t off;  /* first element in the arena */
    uint32_t room; /* elements reserved there (a replacement that fits
                      reuses them) */
} ss__acc_vec;

/* A step being assembled.  *_slot map a name id to its index + 1.
 * metric_by[i] is the thread that gave rec.metrics[i] its value;
 * metric_doubt[i] is set when later values of it may have been lost. */
typedef struct {
    int used, has_begin, ended;
    uint64_t superseded; /* round in which a later step began; 0: none */
    wire_step rec;
    uint8_t phase_slot[SS__NAME_SLOTS];
    uint8_t sync_slot[SS__NAME_SLOTS];
    uint8_t metric_slot[SS__NAME_SLOTS];
    const ss__track *metric_by[WIRE_MAX_ITEMS];
    uint8_t metric_doubt[WIRE_MAX_ITEMS];
    /* Vectors: vec_slot maps a name id to its index + 1 in vec; their
     * elements live in arena (SS__STEP_VALUES doubles, allocated on the
     * first vector, kept for the fold's life), arena_used of it taken. */
    uint8_t vec_slot[SS__NAME_SLOTS];
    ss__acc_vec vec[WIRE_MAX_NAME_ID];
    uint32_t n_vec;
    uint32_t arena_used;
    double *arena;
} ss__acc;

typedef struct {
    void *ctx;
    /* A complete step, in increasing step order, and its N_VECS vectors;
     * valid during the call. */
    void (*on_step)(void *ctx, const wire_step *rec, const ss__vec *vecs,
                    unsigned n_vecs);
    /* A checkpoint report, handed on as soon as it is seen. */
    void (*on_checkpoint)(void *ctx, uint64_t step, ss__mono_ns t);
    /* A resume report (ss_resumed_from), likewise; NULL: dropped. */
    void (*on_resumed)(void *ctx, uint64_t step, ss__mono_ns t);
} ss__fold_sink;

typedef struct {
    ss__fold_sink sink;
    ss__acc acc[SS__FOLD_OPEN];
    int have_final;
    uint64_t last_final;      /* highest step handed on or dropped */
    uint64_t round;           /* rounds so far, from 1 */
    uint64_t dropped_events;  /* late or excess events */
    uint64_t dropped_records; /* steps that could not be completed */
    uint64_t dropped_vectors; /* vectors dropped (see the rules) */
    ss__vec vecs[WIRE_MAX_NAME_ID]; /* what on_step gets */
    /* Live state: the stepping thread's pairing state (NULL: none yet, or
     * that thread is gone), the step open on it (SS__NO_STEP between
     * steps), and that step's begin, else the last step's end. */
    const ss__track *step_track;
    uint64_t cur_step;
    ss__mono_ns step_since;
} ss__fold;

/* Forgets any open phases of a thread (new thread, or a hole in its
 * stream); open_from is kept. */
void ss__track_reset(ss__track *t);

/* Prepares F, which reports to SINK. */
void ss__fold_init(ss__fold *f, const ss__fold_sink *sink);

/* Folds one event made by the thread whose pairing state is TRACK. */
void ss__fold_event(ss__fold *f, ss__track *track, const ss__event *ev);

/* Folds one SS__EV_VALUES event of TRACK's thread whose elements are
 * V[0..n) (n: the event's low 32 bits), copying them. */
void ss__fold_values(ss__fold *f, ss__track *track, const ss__event *ev,
                     const double *v);

/* Frees the vector arenas of F (the fold is not used again). */
void ss__fold_release(ss__fold *f);

/* Hands every complete step to the sink (see the rules above). */
void ss__fold_round(ss__fold *f);

/* The last step handed on or dropped; SS__NO_STEP when none. */
uint64_t ss__fold_last_step(const ss__fold *f);

/*
 * Fills *OUT with the live state as of the events folded so far: the step
 * open on the stepping thread (WIRE_NO_STEP when none), the innermost phase
 * open there that began since that step began (or, between steps, since
 * the last one ended; 0 when none), and when that state began.  The name
 * id is the recorder's own (to be declared before sending).  Cost: one
 * scan of the thread's SS__NAME_SLOTS pairing slots.
 */
void ss__fold_status(const ss__fold *f, wire_status *out);

/* Forgets TRACK before its thread's record is freed. */
void ss__fold_forget_track(ss__fold *f, const ss__track *track);

#endif
