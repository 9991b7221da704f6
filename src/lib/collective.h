/*
 * collective.h - the process's latest collective, as the recorder counts
 * them for hang diagnosis (docs/recorder.md, "Collectives").
 *
 * One 64-bit word, written by the API calls (ss_collective_begin / _end,
 * ss_sync) on any thread and read by the sender thread for its STATUS
 * frames: bits 9..63 the sequence number of the latest collective entered
 * (1, 2, ...; 0 before the first), bits 1..8 its kind (a name id), bit 0
 * set while the process is inside it.  Keeping it in one word means the
 * sender never sees a kind from one collective with the number of
 * another.  Nothing here allocates, locks or makes a system call.
 */
#ifndef STEPSCOPE_COLLECTIVE_H
#define STEPSCOPE_COLLECTIVE_H

#include <stdint.h>

extern uint64_t ss__coll_word; /* atomic; defined in recorder.c */

#define SS__COLL_ACTIVE 0x1u
#define SS__COLL_SEQ_SHIFT 9

/* Enters collective number <latest + 1> of kind NAME_ID (1..255). */
static inline void ss__coll_begin(uint32_t name_id)
{
    uint64_t old = __atomic_load_n(&ss__coll_word, __ATOMIC_RELAXED), next;
    do {
        uint64_t seq = (old >> SS__COLL_SEQ_SHIFT) + 1;
        next = seq << SS__COLL_SEQ_SHIFT | (uint64_t)(name_id & 0xff) << 1 |
               SS__COLL_ACTIVE;
    } while (!__atomic_compare_exchange_n(&ss__coll_word, &old, next, 1,
                                          __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* Leaves the latest collective (no-op when not inside one). */
static inline void ss__coll_end(void)
{
    if (__atomic_load_n(&ss__coll_word, __ATOMIC_RELAXED) & SS__COLL_ACTIVE)
        __atomic_fetch_and(&ss__coll_word, ~(uint64_t)SS__COLL_ACTIVE,
                           __ATOMIC_RELEASE);
}

/* The latest collective: *NAME_ID 0 (and *SEQ 0) before the first. */
static inline void ss__coll_get(uint32_t *name_id, uint64_t *seq,
                                int *active)
{
    uint64_t w = __atomic_load_n(&ss__coll_word, __ATOMIC_ACQUIRE);
    *seq = w >> SS__COLL_SEQ_SHIFT;
    *name_id = *seq ? (uint32_t)(w >> 1 & 0xff) : 0;
    *active = *seq && (w & SS__COLL_ACTIVE);
}

#endif
