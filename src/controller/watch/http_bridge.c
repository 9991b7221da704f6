/*
 * http_bridge.c - an HTTP builder's call to the controller's loop
 * (http_bridge.h).
 */
#include "http_bridge.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ss_bridge_call {
    struct ss_bridge_call *next;
    int done;      /* answered: STATUS and OUT are set */
    int abandoned; /* the worker gave up waiting: the answer frees it */
    unsigned status;
    ss_buf out;
    unsigned char args[]; /* the caller's, copied */
};

struct ss_http_bridge {
    uv_async_t wake;
    ss_bridge_start_fn start;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ss_bridge_call *queue; /* guarded by mu */
    int closed;            /* guarded by mu */
};

static const char ending[] = "the run is ending";

/* Under mu: answers CALL, or frees it when its worker left. */
static void answer_locked(ss_http_bridge *b, ss_bridge_call *call,
                          unsigned status, const char *body, size_t len)
{
    if (call->abandoned) {
        ss_buf_free(&call->out);
        free(call);
        return;
    }
    call->status = status;
    ss_buf_add(&call->out, body, len);
    call->done = 1;
    pthread_cond_broadcast(&b->cv);
}

void ss_http_bridge_answer(ss_http_bridge *b, ss_bridge_call *call,
                           unsigned status, const char *body, size_t len)
{
    pthread_mutex_lock(&b->mu);
    answer_locked(b, call, status, body, len);
    pthread_mutex_unlock(&b->mu);
}

void ss_http_bridge_answer_text(ss_http_bridge *b, ss_bridge_call *call,
                                unsigned status, const char *text)
{
    ss_http_bridge_answer(b, call, status, text, strlen(text));
}

const void *ss_bridge_call_args(const ss_bridge_call *call)
{
    return call->args;
}

/* The loop's side: starts the calls the workers queued, oldest first. */
static void on_wake(uv_async_t *a)
{
    ss_http_bridge *b = a->data;
    pthread_mutex_lock(&b->mu);
    ss_bridge_call *list = NULL;
    while (b->queue) { /* the queue is newest first: reversed */
        ss_bridge_call *c = b->queue;
        b->queue = c->next;
        c->next = list;
        list = c;
    }
    pthread_mutex_unlock(&b->mu);
    while (list) {
        ss_bridge_call *c = list;
        list = c->next;
        b->start(b->ctx, c);
    }
}

ss_http_bridge *ss_http_bridge_new(uv_loop_t *loop, ss_bridge_start_fn start,
                                   void *ctx)
{
    ss_http_bridge *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->start = start;
    b->ctx = ctx;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    uv_async_init(loop, &b->wake, on_wake);
    b->wake.data = b;
    uv_unref((uv_handle_t *)&b->wake); /* never keeps the loop running */
    return b;
}

unsigned ss_http_bridge_call(ss_http_bridge *b, const void *args,
                             size_t args_len, uint32_t wait_ms, ss_buf *out)
{
    ss_bridge_call *call = calloc(1, sizeof *call + args_len);
    if (!call) {
        ss_buf_puts(out, "out of memory");
        return 500;
    }
    memcpy(call->args, args, args_len);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->mu);
    if (b->closed) {
        pthread_mutex_unlock(&b->mu);
        free(call);
        ss_buf_puts(out, ending);
        return 503;
    }
    call->next = b->queue;
    b->queue = call;
    uv_async_send(&b->wake);
    while (!call->done &&
           pthread_cond_timedwait(&b->cv, &b->mu, &until) == 0)
        ;
    if (!call->done) {
        call->abandoned = 1; /* queued or started: its answer frees it */
        pthread_mutex_unlock(&b->mu);
        ss_buf_puts(out, "the controller did not answer in time");
        return 504;
    }
    pthread_mutex_unlock(&b->mu);
    unsigned status = call->status;
    ss_buf_add(out, call->out.data ? call->out.data : "", call->out.len);
    ss_buf_free(&call->out);
    free(call);
    return status;
}

void ss_http_bridge_close(ss_http_bridge *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->closed = 1;
    while (b->queue) {
        ss_bridge_call *c = b->queue;
        b->queue = c->next;
        answer_locked(b, c, 503, ending, sizeof ending - 1);
    }
    pthread_mutex_unlock(&b->mu);
    if (!uv_is_closing((uv_handle_t *)&b->wake))
        uv_close((uv_handle_t *)&b->wake, NULL);
}

void ss_http_bridge_free(ss_http_bridge *b)
{
    if (!b)
        return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
