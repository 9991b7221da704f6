/*
 * ring.h - the per-thread event ring between a recording thread and the
 * sender thread.
 *
 * Each recording thread owns one ss__ring: a fixed array of fixed-size
 * events, written by that thread only (single producer) and read by the
 * sender thread only (single consumer).  The producer publishes an event with
 * one release store of `head`; the consumer frees slots with one release
 * store of `tail`.  Neither side ever waits: when the ring is full the
 * producer drops the event, counts it in `dropped` and marks the next event
 * it does store with SS__EV_AFTER_LOSS so that the consumer knows the stream
 * has a hole (and resets its phase pairing for that thread), and with
 * SS__EV_LOST_METRIC too when a metric value was among the dropped events (a
 * metric's last value before such a hole may not be its last value).
 *
 * Field ownership: head, tail_cache, dropped and lost are written by the
 * producer only; tail by the consumer only.  They live on separate cache
 * lines so that the two sides do not bounce one line between cores.
 */
#ifndef STEPSCOPE_LIB_RING_H
#define STEPSCOPE_LIB_RING_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"

#define SS__RING_CAP 8192u /* events per thread; a power of two */
/* Slots only step begin/end events may use, so that a burst of phases that
 * fills the ring does not also lose the step boundaries. */
#define SS__RING_STEP_RESERVE 64u

/* Event types.  The two high bits of ss__event.type are the hole marks
 * SS__EV_AFTER_LOSS and SS__EV_LOST_METRIC. */
enum {
    SS__EV_STEP_BEGIN = 1, /* step: the new step */
    SS__EV_STEP_END = 2,   /* step: the step that ends */
    SS__EV_PHASE_BEGIN = 3,
    SS__EV_PHASE_END = 4,  /* step is not used: the phase keeps its begin's */
    SS__EV_SYNC = 5,
    SS__EV_METRIC = 6,     /* value: the double's bits */
    SS__EV_RSS = 7,        /* value: bytes */
    SS__EV_DEVICE = 8,     /* value: bytes; name: the ss_mem_kind */
    SS__EV_CHECKPOINT = 9, /* value: the checkpointed step */
    SS__EV_PHASE_SPAN = 10, /* t: begin; value: end (ns); a finished phase */
    SS__EV_RESUMED = 11,   /* value: the step of the checkpoint loaded */
    /* A vector (vring.h): t: the position of its elements in the
     * thread's vector ring; value: the element count in the low 32 bits,
     * the elements cut by SS_MAX_VALUES in the high 32 */
    SS__EV_VALUES = 12
};
#define SS__EV_AFTER_LOSS 0x80u  /* events were dropped just before this one */
#define SS__EV_LOST_METRIC 0x40u /* ... and a metric value was one of them */
#define SS__EV_TYPE_MASK 0x3fu

/* The step value of events made while no step is open. */
#define SS__NO_STEP UINT64_MAX

/* One recorded event: 32 bytes, two per cache line. */
typedef struct {
    ss__mono_ns t;  /* when it happened (0 for events that carry no time) */
    uint64_t step;  /* the step current when it was made, or SS__NO_STEP */
    uint64_t value; /* type-specific payload */
    uint8_t type;   /* SS__EV_*, possibly | the hole marks */
    uint8_t pad_;
    uint16_t name;  /* name id for phase, sync and metric events */
    uint32_t pad2_;
} ss__event;

typedef struct {
    /* producer side */
    _Alignas(64) uint64_t head; /* next slot to fill; release-stored */
    uint64_t tail_cache;        /* the consumer's tail as last seen */
    uint64_t dropped;           /* events dropped on a full ring */
    uint8_t lost;               /* the hole marks while a hole is pending */
    /* consumer side */
    _Alignas(64) uint64_t tail; /* next slot to read; release-stored */
    _Alignas(64) ss__event ev[SS__RING_CAP];
} ss__ring;

/*
 * Appends one event and returns 1, or drops and counts it and returns 0
 * when the ring is full (for all but step events: when fewer than
 * SS__RING_STEP_RESERVE slots are free).
 * Only the ring's owner thread may call it.  Costs a few plain loads and
 * stores and one release store (a plain store on x86); never blocks.  TYPE
 * is a constant at every call site, so the capacity test folds away.
 */
static inline int ss__ring_push(ss__ring *r, unsigned type, unsigned name,
                                uint64_t step, ss__mono_ns t, uint64_t value)
{
    const uint64_t cap =
        type == SS__EV_STEP_BEGIN || type == SS__EV_STEP_END
            ? SS__RING_CAP
            : SS__RING_CAP - SS__RING_STEP_RESERVE;
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    if (__builtin_expect(head - r->tail_cache >= cap, 0)) {
        r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
        if (head - r->tail_cache >= cap) {
            __atomic_store_n(&r->dropped, r->dropped + 1, __ATOMIC_RELAXED);
            r->lost |= type == SS__EV_METRIC
                           ? SS__EV_AFTER_LOSS | SS__EV_LOST_METRIC
                           : SS__EV_AFTER_LOSS;
            return 0;
        }
    }
    ss__event *e = &r->ev[head & (SS__RING_CAP - 1)];
    e->t = t;
    e->step = step;
    e->value = value;
    e->type = (uint8_t)(type | r->lost);
    e->name = (uint16_t)name;
    r->lost = 0;
    __atomic_store_n(&r->head, head + 1, __ATOMIC_RELEASE);
    return 1;
}

/*
 * Returns the events published so far and not yet consumed, as up to two
 * contiguous runs: *FIRST with *N_FIRST events, then *SECOND with *N_SECOND
 * (0 when the run does not wrap).  The events stay valid until
 * ss__ring_consume().  Consumer thread only.
 */
static inline void ss__ring_peek(ss__ring *r, const ss__event **first,
                                 size_t *n_first, const ss__event **second,
                                 size_t *n_second)
{
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    size_t n = (size_t)(head - tail);
    size_t at = (size_t)(tail & (SS__RING_CAP - 1));
    size_t run = SS__RING_CAP - at < n ? SS__RING_CAP - at : n;
    *first = &r->ev[at];
    *n_first = run;
    *second = r->ev;
    *n_second = n - run;
}

/* Frees the N oldest events for the producer.  Consumer thread only. */
static inline void ss__ring_consume(ss__ring *r, size_t n)
{
    uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
    __atomic_store_n(&r->tail, tail + n, __ATOMIC_RELEASE);
}

/* Events this ring has dropped so far; any thread may read it. */
static inline uint64_t ss__ring_dropped(const ss__ring *r)
{
    return __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
}

#endif
