/*
 * testing_worker.h - a call made on a worker thread while the test runs a
 * libuv loop, as the HTTP server's workers call into the controller's
 * loop (the bridges of watch/: http_bridge.h and its users).
 *
 * The test starts the worker, then runs the loop until the worker's
 * function has returned (or, in between, until a condition of its own
 * holds, to act on the loop's side while the worker waits), and joins
 * it.  The loop must have a handle that keeps it running: the bridges'
 * handles do not (the run's other handles do), so
 * testing_loop_keep_alive gives it a timer.  Header-only, like
 * testing.h.
 */
#ifndef STEPSCOPE_TESTING_WORKER_H
#define STEPSCOPE_TESTING_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <uv.h>

#include "testing.h"

typedef struct {
    void (*fn)(void *arg);
    void *arg;
    atomic_int done;
    pthread_t th;
} testing_worker;

static inline void *testing_worker_main_(void *p)
{
    testing_worker *w = p;
    w->fn(w->arg);
    atomic_store(&w->done, 1);
    return NULL;
}

/* Starts FN(ARG) on a thread of its own. */
static inline int testing_worker_start(testing_worker *w,
                                       void (*fn)(void *), void *arg)
{
    w->fn = fn;
    w->arg = arg;
    atomic_store(&w->done, 0);
    return pthread_create(&w->th, NULL, testing_worker_main_, w);
}

/* Runs LOOP until W's function has returned or STOP(CTX) holds (NULL:
 * never), for 5 s at most. */
static inline void testing_worker_run_loop(testing_worker *w, uv_loop_t *loop,
                                           int (*stop)(void *), void *ctx)
{
    for (int i = 0; i < 5000 && !atomic_load(&w->done) &&
                    !(stop && stop(ctx)); i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

/* Runs LOOP until W's function has returned, and joins its thread. */
static inline void testing_worker_join(testing_worker *w, uv_loop_t *loop)
{
    testing_worker_run_loop(w, loop, NULL, NULL);
    pthread_join(w->th, NULL);
}

static inline void testing_loop_tick_(uv_timer_t *t)
{
    (void)t;
}

/* Keeps LOOP running with T, a timer every millisecond, until T is
 * closed. */
static inline void testing_loop_keep_alive(uv_loop_t *loop, uv_timer_t *t)
{
    uv_timer_init(loop, t);
    uv_timer_start(t, testing_loop_tick_, 1, 1);
}

#endif
