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

typedef struct ss__thread {
    ss__ring ring;           /* producer: the owner thread; consumer: sender */
    ss__track track;         /* sender only */
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

/* The most recently registered record; follow ->next for the rest.  Only
 * the sender walks the list (it is also the only one that unlinks). */
ss__thread *ss__threads_first(void);

/* Unlinks and frees T, which must be dead and fully drained, keeping its
 * drop count in the registry's total.  Sender thread only. */
void ss__threads_retire(ss__thread *t);

/* Events dropped on full rings, by all threads that ever recorded. */
uint64_t ss__threads_dropped(void);

/* Hold and release the registry's mutex around fork(). */
void ss__threads_lock(void);
void ss__threads_unlock(void);

#endif
