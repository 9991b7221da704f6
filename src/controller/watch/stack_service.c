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

#include "clocks.h"
#include "http_types.h"
#include "stack_collect.h"
#include "stack_doc.h"

/* One GET /api/runs/{id}/stacks waiting on an HTTP worker thread. */
typedef struct http_req {
    struct http_req *next;
    ss_stack_service *s;
    int native;
    int brief;     /* the document without its ranks' objects */
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

/* One capture: the local collection and the remote fetch run at once;
 * the document is built when both have answered. */
typedef struct {
    ss_stack_service *s;
    int native;
    char trigger[16];
    int64_t finding_id;
    ss_stack_capture_cb cb;
    void *ctx;
    int brief;        /* CB gets the document without "ranks" */
    int pending;      /* parts not yet answered: local, remote */
    int oom;
    struct timespec started;
    uint32_t world;
    char **ranks;     /* WORLD objects, owned; NULL where none came */
} capture;

static double ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 +
           (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

static void capture_free(capture *call)
{
    for (uint32_t i = 0; i < call->world; i++)
        free(call->ranks[i]);
    free(call->ranks);
    free(call);
}

/* Keeps copies of N objects from rank FIRST on. */
static void keep(capture *call, uint32_t first, const char *const *ranks,
                 size_t n)
{
    for (size_t i = 0; i < n && first + i < call->world; i++) {
        call->ranks[first + i] = ranks && ranks[i] ? strdup(ranks[i]) : NULL;
        if (ranks && ranks[i] && !call->ranks[first + i])
            call->oom = 1;
    }
}

/* Both parts answered: the document, stored, then the caller's CB. */
static void capture_done(capture *call)
{
    if (--call->pending > 0)
        return;
    ss_stack_service *s = call->s;
    ss_stack_doc_info info = {s->cfg.run_id, s->cfg.attempt, ss_wall_now(),
                              call->trigger, call->native,
                              ms_since(&call->started)};
    ss_buf doc = {0};
    size_t ranks_at = 0;
    if (!call->oom &&
        ss_stack_doc(&info, (const char *const *)call->ranks, call->world,
                     &doc, &ranks_at) == 0) {
        /* A finding's stacks (a hang, a non-finite value) are always
         * kept; requests up to a number. */
        int finding = call->finding_id >= 0;
        if (s->cfg.store &&
            (finding || s->stored < SS_STACK_SERVICE_MAX_STORED)) {
            s->stored += !finding;
            ss_store_put_stacks(s->cfg.store, s->cfg.run_id, s->cfg.attempt,
                                info.taken_at, call->trigger,
                                call->finding_id, doc.data);
        }
        if (call->brief) { /* stored whole; handed back without "ranks" */
            doc.data[ranks_at] = '}';
            doc.data[ranks_at + 1] = 0;
            doc.len = ranks_at + 1;
        }
        call->cb(call->ctx, doc.data, doc.len, NULL);
    } else {
        call->cb(call->ctx, NULL, 0, "out of memory");
    }
    ss_buf_free(&doc);
    capture_free(call);
}

static void on_collected(void *arg, const char *const *ranks, size_t n,
                         double elapsed_ms)
{
    (void)elapsed_ms; /* the document counts from the capture's start */
    capture *call = arg;
    keep(call, 0, ranks, ranks ? n : 0);
    call->oom |= !ranks;
    capture_done(call);
}

static void on_remote(void *arg, const char *const *ranks, size_t n)
{
    capture *call = arg;
    uint32_t first = call->s->cfg.nprocs;
    if (!ranks || n != call->world - first)
        call->oom = 1;
    else
        keep(call, first, ranks, n);
    capture_done(call);
}

/* ss_stack_service_capture; with BRIEF, CB gets the document without
 * its "ranks". */
static int start_capture(ss_stack_service *s, int native,
                         const char *trigger, int64_t finding_id,
                         ss_stack_capture_cb cb, void *ctx, int brief)
{
    if (!s || !s->collector || !s->cfg.nprocs || !cb)
        return -1;
    uint32_t n = s->cfg.nprocs;
    int remote = s->cfg.world > n;
    ss_stack_target *t = calloc(n, sizeof *t);
    char (*files)[PATH_MAX] = calloc(n, sizeof *files);
    capture *call = calloc(1, sizeof *call);
    char **ranks = calloc(remote ? s->cfg.world : n, sizeof *ranks);
    int rc = -1;
    if (t && files && call && ranks) {
        for (uint32_t i = 0; i < n; i++) {
            snprintf(files[i], sizeof files[i], "%s/stack.%u",
                     s->cfg.stack_dir, i);
            t[i] = (ss_stack_target){i, s->cfg.pid_of(s->cfg.pid_ctx, i),
                                     files[i]};
        }
        *call = (capture){s, native, "", finding_id, cb, ctx, brief,
                          1 + remote, 0, {0, 0}, remote ? s->cfg.world : n,
                          ranks};
        ranks = NULL;
        clock_gettime(CLOCK_MONOTONIC, &call->started);
        snprintf(call->trigger, sizeof call->trigger, "%s",
                 trigger ? trigger : "request");
        uint32_t deadline = native ? SS_STACK_SERVICE_NATIVE_DEADLINE_MS
                                   : SS_STACK_DEADLINE_MS_DEFAULT;
        ss_stack_options opt = {native, deadline};
        rc = ss_stack_collect(s->collector, t, n, &opt, on_collected,
                              call) == 0 ? 0 : -1;
        /* The local part is under way (or answered already): the remote
         * part may not fail the capture any more. */
        if (rc == 0 && remote &&
            s->cfg.remote(s->cfg.remote_ctx, native, deadline, on_remote,
                          call) != 0) {
            static const char busy[] = "the controller could not ask the "
                                       "other nodes (too many requests)";
            char **none = calloc(s->cfg.world - n, sizeof *none);
            /* Each remote rank says why, through the document's own
             * "did not parse" path when memory is short. */
            for (uint32_t i = 0; none && i < s->cfg.world - n; i++) {
                ss_buf b = {0};
                ss_buf_printf(&b, "{\"rank\":%u,\"host\":\"\",\"pid\":0,"
                              "\"state\":\"no_answer\",\"why\":\"%s\","
                              "\"threads\":[]}", n + i, busy);
                none[i] = b.data;
            }
            on_remote(call, (const char *const *)none,
                      none ? s->cfg.world - n : 0);
            for (uint32_t i = 0; none && i < s->cfg.world - n; i++)
                free(none[i]);
            free(none);
        }
    }
    if (rc != 0) {
        if (call && call->ranks)
            capture_free(call);
        else
            free(call);
    }
    free(ranks);
    free(t);
    free(files);
    return rc;
}

int ss_stack_service_capture(ss_stack_service *s, int native,
                             const char *trigger, int64_t finding_id,
                             ss_stack_capture_cb cb, void *ctx)
{
    return start_capture(s, native, trigger, finding_id, cb, ctx, 0);
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
        if (start_capture(s, q->native, "request", -1, on_http_captured, q,
                          q->brief) != 0) {
            static const char busy[] = "the controller cannot take a stacks "
                                       "request now (the ranks are not "
                                       "launched, or too many requests wait)";
            pthread_mutex_lock(&s->mu);
            answer(s, q, 503, busy, sizeof busy - 1);
            pthread_mutex_unlock(&s->mu);
        }
    }
}

unsigned ss_stack_service_http(void *ctx, int flags, ss_buf *out)
{
    int native = (flags & SS_HTTP_STACKS_NATIVE) != 0;
    ss_stack_service *s = ctx;
    http_req *q = calloc(1, sizeof *q);
    if (!q) {
        ss_buf_puts(out, "out of memory");
        return 500;
    }
    q->s = s;
    q->native = native;
    q->brief = (flags & SS_HTTP_STACKS_BRIEF) != 0;
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
    if (cfg->world > cfg->nprocs && !cfg->remote) {
        snprintf(err, errlen, "stacks: %u ranks on other nodes and no way to "
                 "ask them", cfg->world - cfg->nprocs);
        return -1;
    }
    s->cfg = *cfg;
    if (s->cfg.world < s->cfg.nprocs)
        s->cfg.world = s->cfg.nprocs;
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
