/*
 * threads.h - the registry of recording threads and their rings.
 *
 * A thread's first recording call allocates its ss__thread (ring plus the
 * sender's phase-pairing state for that thread) and pushes it onto a
 * lock-free list that the sender walks; this is the only allocation and the
 * only lock a recording thread ever takes, once.  When the thread exits, a
 * pthread key destructor marks the record dead; the sender drains it one
 * last time and frees it (ss__threads_retire).  Records are never freed
 * otherwise, so a thread racing with ss_shutdown() still writes into valid
 * memory.
 */
#ifndef STEPSCOPE_LIB_THREADS_H
#define STEPSCOPE_LIB_THREADS_H

#include <stdint.h>

#include "fold.h"
#include "ring.h"
#include "vring.h"

typedef struct ss__thread {
    ss__ring ring;           /* producer: the owner thread; consumer: sender */
    ss__track track;         /* sender only */
    /* The thread's vector ring, NULL until its first ss_values call
     * (ss__thread_vring); written by the owner once, read by the sender
     * after an SS__EV_VALUES event of the thread (which orders it). */
    ss__vring *vring;
    struct ss__thread *next; /* set before publication; changed by retire */
    int dead;                /* set (release) when the owner thread exits */
} ss__thread;

/* The calling thread's record, NULL until its first recording call. */
extern __thread ss__thread *ss__tls_thread
    __attribute__((tls_model("initial-exec")));

/*
 * Allocates and registers the calling thread's record and stores it in
 * ss__tls_thread.  Returns it, or NULL when memory is short (the thread then
 * records nothing and is not retried, so that no call allocates again).
 */
ss__thread *ss__thread_attach(void);

/* Allocates T's vector ring (the owner thread, once).  Returns it, or
 * NULL when memory is short (the thread then records no vectors: they
 * are counted as dropped; it is not retried). */
ss__vring *ss__thread_vring(ss__thread *t);

/* The most recently registered record; follow ->next for the rest.  Only
 * the sender walks the list (it is also the only one that unlinks). */
ss__thread *ss__threads_first(void);

/* Unlinks and frees T, which must be dead and fully drained, keeping its
 * drop count in the registry's total.  Sender thread only. */
void ss__threads_retire(ss__thread *t);

/* Events dropped on full rings, by all threads that ever recorded. */
uint64_t ss__threads_dropped(void);

/* Vectors dropped on full vector rings, and elements cut by the
 * per-vector cap, by all threads that ever recorded. */
void ss__threads_vector_drops(uint64_t *dropped, uint64_t *truncated);

/* Hold and release the registry's mutex around fork(). */
void ss__threads_lock(void);
void ss__threads_unlock(void);

#endif
