/*
 * vring.h - the per-thread byte ring that carries vector payloads
 * (ss_values) beside the event ring.
 *
 * An event is 32 bytes; a vector is up to SS_MAX_VALUES doubles.  So
 * ss_values copies the elements into the calling thread's vector ring and
 * pushes one fixed-size SS__EV_VALUES event into its event ring that says
 * where they lie (t: the byte position; value: count and cut elements).
 * Single producer (the owner thread), single consumer (the sender), like
 * the event ring, and the event's release store publishes the bytes too:
 * the producer writes the bytes, then pushes the event; the consumer
 * reads the bytes of an event it has seen, then frees them.
 *
 * A region never wraps: when a vector does not fit before the end of the
 * buffer, the space up to the end is skipped and the vector starts at 0.
 * The consumer frees everything up to the end of the region of each
 * VALUES event it has read (regions are reserved in the order their
 * events are pushed), so a region whose event could not be pushed is
 * simply reused.
 *
 * Field ownership: head, tail_cache, dropped and truncated are written by
 * the producer only; tail by the consumer only.  The ring is allocated on
 * a thread's first ss_values call (the thread's one allocation for
 * vectors) and its pages are touched then, so the hot path never faults.
 */
#ifndef STEPSCOPE_LIB_VRING_H
#define STEPSCOPE_LIB_VRING_H

#include <stdint.h>
#include <string.h>

#define SS__VRING_CAP (1u << 20) /* bytes per thread; a power of two */

typedef struct {
    _Alignas(64) uint64_t head; /* next byte to reserve (producer) */
    uint64_t tail_cache;        /* the consumer's tail as last seen */
    uint64_t dropped;           /* vectors dropped: no room (atomic) */
    uint64_t truncated;         /* elements cut by SS_MAX_VALUES (atomic) */
    _Alignas(64) uint64_t tail; /* first byte still in use; release-stored */
    _Alignas(64) uint8_t buf[SS__VRING_CAP];
} ss__vring;

/*
 * Reserves BYTES (<= SS__VRING_CAP / 2) contiguous bytes and returns where
 * they start (their position; the buffer offset is pos % SS__VRING_CAP),
 * or UINT64_MAX when the ring has no room.  Nothing is published: the
 * caller writes the bytes, pushes the event, then calls
 * ss__vring_commit() with the region's end if the push succeeded.
 */
static inline uint64_t ss__vring_reserve(ss__vring *r, uint64_t bytes)
{
    uint64_t pos = r->head;
    uint64_t at = pos & (SS__VRING_CAP - 1);
    if (at + bytes > SS__VRING_CAP)
        pos += SS__VRING_CAP - at; /* skip to the start */
    if (pos + bytes - r->tail_cache > SS__VRING_CAP) {
        r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
        if (pos + bytes - r->tail_cache > SS__VRING_CAP)
            return UINT64_MAX;
    }
    return pos;
}

static inline void ss__vring_commit(ss__vring *r, uint64_t end)
{
    r->head = end;
}

/* The bytes at position POS.  Either side. */
static inline void *ss__vring_at(ss__vring *r, uint64_t pos)
{
    return r->buf + (pos & (SS__VRING_CAP - 1));
}

/* Frees every byte before position END.  Consumer thread only. */
static inline void ss__vring_release(ss__vring *r, uint64_t end)
{
    __atomic_store_n(&r->tail, end, __ATOMIC_RELEASE);
}

#endif
