/*
 * recent_service.c - one rank's latest steps for the running controller
 * (recent_service.h).
 *
 * The HTTP workers never touch the loop: a request is queued under a
 * mutex, an async handle wakes the loop, and the loop answers node 0's
 * ranks from its own rows at once and asks another node's agent for the
 * rest.  An agent's answer is collected chunk by chunk against a deadline
 * (one timer checks every waiting request).  A worker that gave up
 * leaves its request to the loop, which frees it when it is answered.
 */
#include "recent_service.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recent_rows.h"
#include "stack_json.h"

#define CHECK_MS 100 /* how often the deadlines of waiting requests are seen */

/* One GET /api/runs/{id}/recent on an HTTP worker thread. */
typedef struct http_req {
    struct http_req *next;
    uint32_t rank, steps;
    int done;      /* the loop answered: STATUS and OUT are set */
    int abandoned; /* the worker gave up waiting: the loop frees it */
    unsigned status;
    ss_buf out;
} http_req;

/* A request sent to an agent, on the loop. */
typedef struct fetch {
    struct fetch *next;
    http_req *q;
    uint32_t id, node;
    uint64_t deadline_ms;
    ss_buf body;
} fetch;

struct ss_recent_service {
    uv_loop_t *loop;
    ss_recent_service_config cfg;
    ss_recent_rows *local;  /* node 0's ranks; NULL until a record */
    uv_async_t wake;
    uv_timer_t check;
    fetch *fetches;         /* loop thread */
    uint32_t next_id;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    http_req *queue;        /* guarded by mu */
    int closed;             /* guarded by mu */
};

static void on_wake(uv_async_t *a);

ss_recent_service *ss_recent_service_new(uv_loop_t *loop,
                                         const ss_recent_service_config *cfg)
{
    ss_recent_service *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    s->cfg = *cfg;
    if (!s->cfg.wait_ms)
        s->cfg.wait_ms = SS_RECENT_WAIT_MS;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    uv_async_init(loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_unref((uv_handle_t *)&s->wake); /* never keeps the loop running */
    uv_timer_init(loop, &s->check);
    s->check.data = s;
    uv_unref((uv_handle_t *)&s->check);
    return s;
}

void ss_recent_service_record(ss_recent_service *s, uint32_t rank,
                              uint32_t attempt, const ss_step_record *rec,
                              const char *const *names)
{
    if (!s || rank >= s->cfg.nproc)
        return;
    if (!s->local && !(s->local = ss_recent_rows_new(0, s->cfg.nproc)))
        return;
    const char *pn[SS_MAX_STEP_ITEMS];
    int64_t durs[SS_MAX_STEP_ITEMS];
    for (uint32_t i = 0; i < rec->n_phases; i++) {
        pn[i] = rec->phases[i].name >= 0 ? names[rec->phases[i].name] : NULL;
        durs[i] = rec->phases[i].total_ns;
    }
    ss_recent_rows_add(s->local, rank, attempt, rec->step, rec->begin_ns,
                       rec->end_ns, rec->rss_bytes, rec->device_bytes,
                       rec->n_phases, pn, durs);
}

/* ---- answers ---- */

/* Under mu: answers Q, or frees it when its worker left. */
static void answer_locked(ss_recent_service *s, http_req *q, unsigned status,
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

static void answer(ss_recent_service *s, http_req *q, unsigned status,
                   const char *body, size_t len)
{
    pthread_mutex_lock(&s->mu);
    answer_locked(s, q, status, body, len);
    pthread_mutex_unlock(&s->mu);
}

static void answer_text(ss_recent_service *s, http_req *q, unsigned status,
                        const char *text)
{
    answer(s, q, status, text, strlen(text));
}

/* OBJ (recent_rows.h's object, "{" first) with NODE and FROM put first. */
static void answer_rows(ss_recent_service *s, http_req *q, uint32_t node,
                        const char *from, const char *obj, size_t len)
{
    ss_buf b = {0};
    ss_buf_printf(&b, "{\"node\":%u,\"from\":\"%s\",", node, from);
    ss_buf_add(&b, obj + 1, len - 1);
    if (b.oom)
        answer_text(s, q, 500, "out of memory");
    else
        answer(s, q, 200, b.data, b.len);
    ss_buf_free(&b);
}

/* ---- the agents' answers ---- */

static void fetch_end(ss_recent_service *s, fetch *f)
{
    for (fetch **p = &s->fetches; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    ss_buf_free(&f->body);
    free(f);
    if (!s->fetches)
        uv_timer_stop(&s->check);
}

/* What F's agent answered: 0 the rank's rows object; 1 an object with an
 * "error" member (the rank is not its, or it ran out of memory); -1
 * anything else (not one JSON object of the rank, "{" first). */
static int answer_kind(const fetch *f)
{
    const char *p = f->body.data;
    if (f->body.len == 0 || p[0] != '{' ||
        !ss_sj_is_rank_object(p, f->body.len, f->q->rank))
        return -1;
    ss_sj_iter it;
    ss_sj_span key, value;
    if (ss_sj_object((ss_sj_span){p, p + f->body.len}, &it) != 0)
        return -1;
    while (ss_sj_key(&it, &key)) {
        if (ss_sj_key_is(key, "error"))
            return 1;
        if (!ss_sj_take(&it, &value))
            break;
    }
    return 0;
}

void ss_recent_service_part(ss_recent_service *s, uint32_t node,
                            const link_recent_part *p)
{
    fetch *f = s ? s->fetches : NULL;
    while (f && (f->id != p->request_id || f->node != node ||
                 f->q->rank != p->rank))
        f = f->next;
    if (!f)
        return; /* answered already, or never asked */
    if (f->body.len + p->len > SS_RECENT_MAX_ANSWER) {
        char why[120];
        snprintf(why, sizeof why, "node %u's answer is over %u bytes", node,
                 SS_RECENT_MAX_ANSWER);
        answer_text(s, f->q, 502, why);
        fetch_end(s, f);
        return;
    }
    ss_buf_add(&f->body, (const char *)p->bytes, p->len);
    if (!p->last)
        return;
    int kind = f->body.oom ? -2 : answer_kind(f);
    if (kind == -2) {
        answer_text(s, f->q, 500, "out of memory");
    } else if (kind != 0) {
        char why[300];
        if (kind == 1)
            snprintf(why, sizeof why, "node %u's agent answered %.*s", node,
                     (int)(f->body.len < 200 ? f->body.len : 200),
                     f->body.data);
        else
            snprintf(why, sizeof why, "node %u's agent answered something "
                     "else than rank %u's rows (%zu bytes that are not its "
                     "JSON object)", node, f->q->rank, f->body.len);
        answer_text(s, f->q, 502, why);
    } else
        answer_rows(s, f->q, node, "agent", f->body.data, f->body.len);
    fetch_end(s, f);
}

static void on_check(uv_timer_t *t)
{
    ss_recent_service *s = t->data;
    uint64_t now = uv_now(s->loop);
    fetch *f = s->fetches;
    while (f) {
        fetch *next = f->next;
        if (now >= f->deadline_ms) {
            char why[120];
            snprintf(why, sizeof why, "node %u's agent did not answer "
                     "within %u ms", f->node, s->cfg.wait_ms);
            answer_text(s, f->q, 504, why);
            fetch_end(s, f);
        }
        f = next;
    }
}

/* ---- the loop's side of a request ---- */

static void start(ss_recent_service *s, http_req *q)
{
    if (q->rank >= s->cfg.world) {
        char why[120];
        snprintf(why, sizeof why, "rank %u is not in the run (%u ranks)",
                 q->rank, s->cfg.world);
        answer_text(s, q, 404, why);
        return;
    }
    if (q->rank < s->cfg.nproc) {
        ss_buf b = {0};
        if (!s->local)
            s->local = ss_recent_rows_new(0, s->cfg.nproc);
        if (ss_recent_rows_json(s->local, q->rank, q->steps, &b) != 0 ||
            b.oom)
            answer_text(s, q, 500, "out of memory");
        else
            answer_rows(s, q, 0, "controller", b.data, b.len);
        ss_buf_free(&b);
        return;
    }
    uint32_t node = q->rank / s->cfg.nproc;
    fetch *f = calloc(1, sizeof *f);
    if (!f) {
        answer_text(s, q, 500, "out of memory");
        return;
    }
    *f = (fetch){.q = q, .id = ++s->next_id, .node = node,
                 .deadline_ms = uv_now(s->loop) + s->cfg.wait_ms};
    link_recent_req req = {f->id, q->rank, q->steps};
    char why[200];
    if (!s->cfg.ask) {
        snprintf(why, sizeof why, "rank %u is on node %u and this run has "
                 "no way to ask it", q->rank, node);
    } else if (s->cfg.ask(s->cfg.ask_ctx, node, &req, why, sizeof why) == 0) {
        f->next = s->fetches;
        s->fetches = f;
        if (!uv_is_active((uv_handle_t *)&s->check))
            uv_timer_start(&s->check, on_check, CHECK_MS, CHECK_MS);
        return;
    }
    answer_text(s, q, 503, why);
    free(f);
}

static void on_wake(uv_async_t *a)
{
    ss_recent_service *s = a->data;
    pthread_mutex_lock(&s->mu);
    http_req *list = s->queue;
    s->queue = NULL;
    int closed = s->closed;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        http_req *q = list;
        list = q->next;
        if (closed)
            answer_text(s, q, 503, "the run is ending");
        else
            start(s, q);
    }
}

unsigned ss_recent_service_http(void *ctx, uint32_t rank, uint32_t steps,
                                ss_buf *out)
{
    ss_recent_service *s = ctx;
    http_req *q = calloc(1, sizeof *q);
    if (!q) {
        ss_buf_puts(out, "out of memory");
        return 500;
    }
    q->rank = rank;
    q->steps = steps < 1 ? 1 : steps > LINK_MAX_RECENT_STEPS
                                   ? LINK_MAX_RECENT_STEPS : steps;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s->cfg.wait_ms / 1000 + 1;
    until.tv_nsec += (long)(s->cfg.wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
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
    while (!q->done && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
        ;
    if (!q->done) {
        q->abandoned = 1; /* queued or waiting on an agent: the loop frees it */
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

void ss_recent_service_close(ss_recent_service *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    while (s->queue) {
        http_req *q = s->queue;
        s->queue = q->next;
        static const char ending[] = "the run is ending";
        answer_locked(s, q, 503, ending, sizeof ending - 1);
    }
    pthread_mutex_unlock(&s->mu);
    while (s->fetches) {
        answer_text(s, s->fetches->q, 503, "the run is ending");
        fetch_end(s, s->fetches);
    }
    if (!uv_is_closing((uv_handle_t *)&s->wake))
        uv_close((uv_handle_t *)&s->wake, NULL);
    if (!uv_is_closing((uv_handle_t *)&s->check))
        uv_close((uv_handle_t *)&s->check, NULL);
}

void ss_recent_service_free(ss_recent_service *s)
{
    if (!s)
        return;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    ss_recent_rows_free(s->local);
    free(s);
}
