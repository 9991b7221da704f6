/*
 * stack_service.c - every rank's stacks for the running controller
 * (stack_service.h).
 *
 * The HTTP workers never touch the loop: a request is queued under a
 * mutex, an async handle wakes the loop, the loop collects and answers
 * under the mutex, and the worker, waiting on a condition variable with a
 * deadline, takes the answer.  A worker that gave up leaves its request
 * to the loop, which frees it when the answer comes.
 */
#include "stack_service.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stack_collect.h"
#include "stack_doc.h"

/* One GET /api/runs/{id}/stacks waiting on an HTTP worker thread. */
typedef struct http_req {
    struct http_req *next;
    ss_stack_service *s;
    int native;
    int done;      /* the loop answered: STATUS and OUT are set */
    int abandoned; /* the worker gave up waiting: the loop frees it */
    unsigned status;
    ss_buf out;
} http_req;

struct ss_stack_service {
    uv_loop_t *loop;
    ss_stack_collector *collector; /* NULL until started */
    ss_stack_service_config cfg;   /* strings owned below */
    char *exe, *host, *stack_dir;
    uint32_t stored;               /* request snapshots stored */
    uv_async_t wake;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_req *queue;               /* guarded by mu */
    int closed;                    /* guarded by mu */
};

typedef struct {
    ss_stack_service *s;
    int native;
    char trigger[16];
    int64_t finding_id;
    ss_stack_capture_cb cb;
    void *ctx;
} capture;

static ss_wall_ns wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (ss_wall_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_collected(void *arg, const char *const *ranks, size_t n,
                         double elapsed_ms)
{
    capture *call = arg;
    ss_stack_service *s = call->s;
    ss_stack_doc_info info = {s->cfg.run_id, s->cfg.attempt, wall_now(),
                              call->trigger, call->native, elapsed_ms};
    ss_buf doc = {0};
    if (ranks && ss_stack_doc(&info, ranks, n, &doc) == 0) {
        int hang = strcmp(call->trigger, "hang") == 0;
        if (s->cfg.store && (hang || s->stored < SS_STACK_SERVICE_MAX_STORED)) {
            s->stored += !hang;
            ss_store_put_stacks(s->cfg.store, s->cfg.run_id, s->cfg.attempt,
                                info.taken_at, call->trigger,
                                call->finding_id, doc.data);
        }
        call->cb(call->ctx, doc.data, doc.len, NULL);
    } else {
        call->cb(call->ctx, NULL, 0, "out of memory");
    }
    ss_buf_free(&doc);
    free(call);
}

int ss_stack_service_capture(ss_stack_service *s, int native,
                             const char *trigger, int64_t finding_id,
                             ss_stack_capture_cb cb, void *ctx)
{
    if (!s || !s->collector || !s->cfg.nprocs || !cb)
        return -1;
    uint32_t n = s->cfg.nprocs;
    ss_stack_target *t = calloc(n, sizeof *t);
    char (*files)[PATH_MAX] = calloc(n, sizeof *files);
    capture *call = calloc(1, sizeof *call);
    int rc = -1;
    if (t && files && call) {
        for (uint32_t i = 0; i < n; i++) {
            snprintf(files[i], sizeof files[i], "%s/stack.%u",
                     s->cfg.stack_dir, i);
            t[i] = (ss_stack_target){i, s->cfg.pid_of(s->cfg.pid_ctx, i),
                                     files[i]};
        }
        *call = (capture){s, native, "", finding_id, cb, ctx};
        snprintf(call->trigger, sizeof call->trigger, "%s",
                 trigger ? trigger : "request");
        ss_stack_options opt = {native, native ? 10000 : 0};
        rc = ss_stack_collect(s->collector, t, n, &opt, on_collected,
                              call) == 0 ? 0 : -1;
    }
    if (rc != 0)
        free(call);
    free(t);
    free(files);
    return rc;
}

/* ---- the HTTP bridge ---- */

/* Under mu: answers Q, or frees it when its worker left. */
static void answer(ss_stack_service *s, http_req *q, unsigned status,
                   const char *body, size_t len)
{
    if (q->abandoned) {
        ss_buf_free(&q->out);
        free(q);
        return;
    }
    q->status = status;
    ss_buf_add(&q->out, body, len);
    q->done = 1;
    pthread_cond_broadcast(&s->cv);
}

static void on_http_captured(void *ctx, const char *doc, size_t len,
                             const char *why)
{
    http_req *q = ctx;
    ss_stack_service *s = q->s;
    pthread_mutex_lock(&s->mu);
    if (doc)
        answer(s, q, 200, doc, len);
    else
        answer(s, q, 500, why, strlen(why));
    pthread_mutex_unlock(&s->mu);
}

/* The loop's side: starts the requests the workers queued. */
static void on_wake(uv_async_t *a)
{
    ss_stack_service *s = a->data;
    pthread_mutex_lock(&s->mu);
    http_req *list = s->queue;
    s->queue = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        http_req *q = list;
        list = q->next;
        if (ss_stack_service_capture(s, q->native, "request", -1,
                                     on_http_captured, q) != 0) {
            static const char busy[] = "the controller cannot take a stacks "
                                       "request now (the ranks are not "
                                       "launched, or too many requests wait)";
            pthread_mutex_lock(&s->mu);
            answer(s, q, 503, busy, sizeof busy - 1);
            pthread_mutex_unlock(&s->mu);
        }
    }
}

unsigned ss_stack_service_http(void *ctx, int native, ss_buf *out)
{
    ss_stack_service *s = ctx;
    http_req *q = calloc(1, sizeof *q);
    if (!q) {
        ss_buf_puts(out, "out of memory");
        return 500;
    }
    q->s = s;
    q->native = native;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += native ? 30 : 10; /* the collector's deadline, and more */
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        pthread_mutex_unlock(&s->mu);
        free(q);
        ss_buf_puts(out, "the run is ending");
        return 503;
    }
    q->next = s->queue;
    s->queue = q;
    uv_async_send(&s->wake);
    while (!q->done &&
           pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
        ;
    if (!q->done) {
        q->abandoned = 1; /* queued or being collected: the loop frees it */
        pthread_mutex_unlock(&s->mu);
        ss_buf_puts(out, "the controller did not answer in time");
        return 504;
    }
    pthread_mutex_unlock(&s->mu);
    unsigned status = q->status;
    ss_buf_add(out, q->out.data ? q->out.data : "", q->out.len);
    ss_buf_free(&q->out);
    free(q);
    return status;
}

/* ---- life cycle ---- */

ss_stack_service *ss_stack_service_new(uv_loop_t *loop)
{
    ss_stack_service *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    uv_async_init(loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_unref((uv_handle_t *)&s->wake); /* never keeps the loop running */
    return s;
}

int ss_stack_service_start(ss_stack_service *s,
                           const ss_stack_service_config *cfg, char *err,
                           size_t errlen)
{
    if (!cfg->pid_of || !cfg->stack_dir || !cfg->nprocs) {
        snprintf(err, errlen, "stacks: no ranks to ask");
        return -1;
    }
    s->cfg = *cfg;
    s->exe = strdup(cfg->exe ? cfg->exe : "stepscope");
    s->host = strdup(cfg->host ? cfg->host : "localhost");
    s->stack_dir = strdup(cfg->stack_dir);
    if (s->exe && s->host && s->stack_dir)
        s->collector = ss_stack_collector_new(s->loop, s->exe, s->host);
    if (!s->collector) {
        snprintf(err, errlen, "out of memory for the stack collector");
        return -1;
    }
    s->cfg.exe = s->exe;
    s->cfg.host = s->host;
    s->cfg.stack_dir = s->stack_dir;
    return 0;
}

void ss_stack_service_set_attempt(ss_stack_service *s, uint32_t attempt)
{
    if (s)
        s->cfg.attempt = attempt;
}

void ss_stack_service_close(ss_stack_service *s)
{
    if (!s)
        return;
    static const char ending[] = "the run is ending";
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    while (s->queue) {
        http_req *q = s->queue;
        s->queue = q->next;
        answer(s, q, 503, ending, sizeof ending - 1);
    }
    pthread_mutex_unlock(&s->mu);
    ss_stack_collector_close(s->collector); /* answers what it collects */
    s->collector = NULL;
    if (!uv_is_closing((uv_handle_t *)&s->wake))
        uv_close((uv_handle_t *)&s->wake, NULL);
}

void ss_stack_service_free(ss_stack_service *s)
{
    if (!s)
        return;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->exe);
    free(s->host);
    free(s->stack_dir);
    free(s);
}
