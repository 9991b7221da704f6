/*
 * threads.c - registration and retirement of recording threads.
 *
 * The list head is published with a release store so that the sender,
 * walking without the lock, sees fully initialised records.  Registration
 * and retirement take the mutex so that they never race with each other or
 * with ss__threads_dropped(), which reads every record's counter.
 */
#include "threads.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

__thread ss__thread *ss__tls_thread __attribute__((tls_model("initial-exec")));
static __thread int attach_failed;

static pthread_mutex_t threads_mu = PTHREAD_MUTEX_INITIALIZER;
static ss__thread *threads_head;
static uint64_t threads_retired_dropped; /* under threads_mu */
static uint64_t threads_retired_vdropped, threads_retired_vtruncated;
static __thread int vring_failed;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int key_ok;

/* Runs when a registered thread exits: hand its record to the sender. */
static void on_thread_exit(void *arg)
{
    ss__thread *t = arg;
    ss__tls_thread = NULL;
    attach_failed = 1; /* a later destructor must not register again */
    __atomic_store_n(&t->dead, 1, __ATOMIC_RELEASE);
}

static void make_key(void)
{
    key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

ss__thread *ss__thread_attach(void)
{
    if (attach_failed)
        return NULL;
    pthread_once(&key_once, make_key);
    void *mem = NULL;
    if (!key_ok || posix_memalign(&mem, 64, sizeof(ss__thread)) != 0) {
        attach_failed = 1;
        return NULL;
    }
    /* Touch every page now, so that the hot path never takes a page fault
     * on a fresh part of the ring. */
    ss__thread *t = memset(mem, 0, sizeof *t);
    ss__track_reset(&t->track);
    if (pthread_setspecific(exit_key, t) != 0) {
        free(t);
        attach_failed = 1;
        return NULL;
    }
    pthread_mutex_lock(&threads_mu);
    t->next = threads_head;
    __atomic_store_n(&threads_head, t, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&threads_mu);
    ss__tls_thread = t;
    return t;
}

ss__vring *ss__thread_vring(ss__thread *t)
{
    if (t->vring || vring_failed)
        return t->vring;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, sizeof(ss__vring)) != 0) {
        vring_failed = 1;
        return NULL;
    }
    /* Touch every page now (see ss__thread_attach). */
    ss__vring *v = memset(mem, 0, sizeof(ss__vring));
    pthread_mutex_lock(&threads_mu); /* ss__threads_vector_drops reads it */
    __atomic_store_n(&t->vring, v, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&threads_mu);
    return v;
}

ss__thread *ss__threads_first(void)
{
    return __atomic_load_n(&threads_head, __ATOMIC_ACQUIRE);
}

void ss__threads_retire(ss__thread *t)
{
    pthread_mutex_lock(&threads_mu);
    ss__thread **pp = &threads_head;
    while (*pp && *pp != t)
        pp = &(*pp)->next;
    if (*pp) {
        __atomic_store_n(pp, t->next, __ATOMIC_RELEASE);
        threads_retired_dropped += ss__ring_dropped(&t->ring);
        if (t->vring) {
            threads_retired_vdropped += t->vring->dropped;
            threads_retired_vtruncated += t->vring->truncated;
            free(t->vring);
        }
        free(t);
    }
    pthread_mutex_unlock(&threads_mu);
}

uint64_t ss__threads_dropped(void)
{
    pthread_mutex_lock(&threads_mu);
    uint64_t n = threads_retired_dropped;
    for (ss__thread *t = threads_head; t; t = t->next)
        n += ss__ring_dropped(&t->ring);
    pthread_mutex_unlock(&threads_mu);
    return n;
}

void ss__threads_vector_drops(uint64_t *dropped, uint64_t *truncated)
{
    pthread_mutex_lock(&threads_mu);
    uint64_t d = threads_retired_vdropped, c = threads_retired_vtruncated;
    for (ss__thread *t = threads_head; t; t = t->next) {
        ss__vring *v = __atomic_load_n(&t->vring, __ATOMIC_ACQUIRE);
        if (v) {
            d += __atomic_load_n(&v->dropped, __ATOMIC_RELAXED);
            c += __atomic_load_n(&v->truncated, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&threads_mu);
    *dropped = d;
    *truncated = c;
}

void ss__threads_lock(void) { pthread_mutex_lock(&threads_mu); }

void ss__threads_unlock(void) { pthread_mutex_unlock(&threads_mu); }
