/*
 * stack_service.c - every rank's stacks for the running controller
 * (stack_service.h).
 *
 * A request of an HTTP builder reaches the loop through the bridge
 * (http_bridge.h), which collects and answers it there.
 */
#include "stack_service.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "http_bridge.h"
#include "http_types.h"
#include "stack_collect.h"
#include "stack_doc.h"

/* What a POST /api/runs/{id}/stacks asks (the bridge's call arguments). */
typedef struct {
    int native;
    int brief; /* the document without its ranks' objects */
} stacks_args;

/* A request on the loop: its call, to answer. */
typedef struct {
    ss_stack_service *s;
    ss_bridge_call *call;
} http_req;

struct ss_stack_service {
    uv_loop_t *loop;
    ss_stack_collector *collector; /* NULL until started */
    ss_stack_service_config cfg;   /* strings owned below */
    char *exe, *host, *stack_dir;
    uint32_t stored;               /* request snapshots stored */
    ss_http_bridge *bridge;        /* requests of the HTTP builders */
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

/* ---- requests of the HTTP builders (http_bridge.h) ---- */

static void on_http_captured(void *ctx, const char *doc, size_t len,
                             const char *why)
{
    http_req *q = ctx;
    if (doc)
        ss_http_bridge_answer(q->s->bridge, q->call, 200, doc, len);
    else
        ss_http_bridge_answer_text(q->s->bridge, q->call, 500, why);
    free(q);
}

/* The loop's side of a request (ss_bridge_start_fn). */
static void start_request(void *ctx, ss_bridge_call *call)
{
    ss_stack_service *s = ctx;
    const stacks_args *a = ss_bridge_call_args(call);
    http_req *q = malloc(sizeof *q);
    if (q)
        *q = (http_req){s, call};
    if (!q || start_capture(s, a->native, "request", -1, on_http_captured, q,
                            a->brief) != 0) {
        free(q);
        ss_http_bridge_answer_text(s->bridge, call, 503,
                                   "the controller cannot take a stacks "
                                   "request now (the ranks are not launched, "
                                   "or too many requests wait)");
    }
}

unsigned ss_stack_service_http(void *ctx, int flags, ss_buf *out)
{
    ss_stack_service *s = ctx;
    stacks_args a = {(flags & SS_HTTP_STACKS_NATIVE) != 0,
                     (flags & SS_HTTP_STACKS_BRIEF) != 0};
    /* the collector's deadline, and more */
    return ss_http_bridge_call(s->bridge, &a, sizeof a,
                               a.native ? 30000 : 10000, out);
}

/* ---- life cycle ---- */

ss_stack_service *ss_stack_service_new(uv_loop_t *loop)
{
    ss_stack_service *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    s->bridge = ss_http_bridge_new(loop, start_request, s);
    if (!s->bridge) {
        free(s);
        return NULL;
    }
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
    ss_http_bridge_close(s->bridge);
    ss_stack_collector_close(s->collector); /* answers what it collects */
    s->collector = NULL;
}

void ss_stack_service_free(ss_stack_service *s)
{
    if (!s)
        return;
    ss_http_bridge_free(s->bridge);
    free(s->exe);
    free(s->host);
    free(s->stack_dir);
    free(s);
}
