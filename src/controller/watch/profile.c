/*
 * profile.c - on-demand profiling of chosen ranks (profile.h).
 *
 * State: the last SS_PROFILE_KEPT requests, each with one entry per rank
 * asked, under `mu` because the HTTP builders read it to answer status
 * requests; only the loop changes a rank's status after the request was
 * created.  A new request is created by an HTTP builder ("pending"), then
 * the loop sends the commands (async), stores the rows and marks it sent,
 * which the worker waits for.  A one-second timer times out the ranks that
 * did not answer by the deadline.
 */
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "private_fs.h"

#define SEND_WAIT_MS 2000 /* how long a worker waits for the loop */

typedef struct {
    uint32_t rank;
    char status[16];
    char path[256];
    char host[256];
    char message[256];
    int64_t marker_ns;
} prof_rank;

typedef struct {
    uint32_t id; /* 0: slot unused */
    uint32_t duration_ms;
    ss_wall_ns requested_at;
    ss_mono_ns deadline; /* set when sent */
    int sent;            /* the loop sent the commands */
    uint32_t n;
    prof_rank *ranks;
} prof_req;

struct ss_profiler {
    ss_profiler_config cfg;
    char dir[4096];
    uv_async_t async;
    uv_timer_t timer;
    int handles_open;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    prof_req reqs[SS_PROFILE_KEPT]; /* reqs[i % KEPT] holds request i */
    uint32_t last_id;
    int closed;
};

static prof_req *find_req(ss_profiler *p, uint32_t id)
{
    prof_req *q = &p->reqs[id % SS_PROFILE_KEPT];
    return id && q->id == id ? q : NULL;
}

static int req_finished(const prof_req *q)
{
    for (uint32_t i = 0; i < q->n; i++)
        if (strcmp(q->ranks[i].status, "requested") == 0 ||
            strcmp(q->ranks[i].status, "pending") == 0)
            return 0;
    return 1;
}

/* Stores rank entry R of Q (loop thread). */
static void store_rank(ss_profiler *p, const prof_req *q, const prof_rank *r)
{
    if (!p->cfg.store)
        return;
    ss_profile_info info;
    memset(&info, 0, sizeof info);
    info.attempt = p->cfg.attempt;
    info.request_id = q->id;
    info.rank = r->rank;
    info.requested_at = q->requested_at;
    info.duration_ms = q->duration_ms;
    snprintf(info.status, sizeof info.status, "%s", r->status);
    snprintf(info.path, sizeof info.path, "%s", r->path);
    snprintf(info.host, sizeof info.host, "%s", r->host);
    snprintf(info.message, sizeof info.message, "%s", r->message);
    info.marker_ns = r->marker_ns;
    ss_store_put_profile(p->cfg.store, p->cfg.run_id, &info);
}

/* Sends the commands of every request not yet sent (loop thread). */
static void on_async(uv_async_t *a)
{
    ss_profiler *p = a->data;
    pthread_mutex_lock(&p->mu);
    for (size_t k = 0; k < SS_PROFILE_KEPT; k++) {
        prof_req *q = &p->reqs[k];
        if (!q->id || q->sent)
            continue;
        wire_command cmd;
        memset(&cmd, 0, sizeof cmd);
        cmd.request_id = q->id;
        cmd.kind = WIRE_COMMAND_PROFILE;
        cmd.duration_ms = q->duration_ms;
        snprintf(cmd.dir, sizeof cmd.dir, "%s", p->dir);
        for (uint32_t i = 0; i < q->n; i++) {
            prof_rank *r = &q->ranks[i];
            int rc = p->cfg.ingest ? ss_ingest_send_command(p->cfg.ingest,
                                                            r->rank, &cmd)
                                   : SS_INGEST_NOT_CONNECTED;
            if (rc == 0) {
                snprintf(r->status, sizeof r->status, "requested");
            } else if (rc == SS_INGEST_UNSUPPORTED) {
                snprintf(r->status, sizeof r->status, "unsupported");
                snprintf(r->message, sizeof r->message,
                         "rank %u cannot profile: it does not run under "
                         "--auto with torch (or its recorder predates "
                         "profiling)", r->rank);
            } else {
                snprintf(r->status, sizeof r->status, "not_connected");
                snprintf(r->message, sizeof r->message,
                         "rank %u is not connected", r->rank);
            }
            store_rank(p, q, r);
        }
        q->deadline = ss_mono_now() +
                      ((int64_t)q->duration_ms + SS_PROFILE_GRACE_MS) *
                          1000000;
        q->sent = 1;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Times out the ranks that did not answer by their request's deadline. */
static void on_timer(uv_timer_t *t)
{
    ss_profiler *p = t->data;
    ss_mono_ns now = ss_mono_now();
    pthread_mutex_lock(&p->mu);
    for (size_t k = 0; k < SS_PROFILE_KEPT; k++) {
        prof_req *q = &p->reqs[k];
        if (!q->id || !q->sent || now < q->deadline)
            continue;
        for (uint32_t i = 0; i < q->n; i++) {
            prof_rank *r = &q->ranks[i];
            if (strcmp(r->status, "requested") != 0)
                continue;
            snprintf(r->status, sizeof r->status, "timeout");
            snprintf(r->message, sizeof r->message,
                     "rank %u did not answer within %u ms (it checks for "
                     "requests at step boundaries: stuck, or between "
                     "steps that long)", r->rank,
                     q->duration_ms + SS_PROFILE_GRACE_MS);
            store_rank(p, q, r);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

ss_profiler *ss_profiler_start(const ss_profiler_config *cfg, char *err,
                               size_t errlen)
{
    ss_profiler *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    if (!cfg->dir || cfg->dir[0] != '/' ||
        strlen(cfg->dir) > WIRE_MAX_STR) {
        snprintf(err, errlen, "profile directory '%s' is not an absolute "
                 "path of at most %d bytes", cfg->dir ? cfg->dir : "",
                 WIRE_MAX_STR);
        free(p);
        return NULL;
    }
    snprintf(p->dir, sizeof p->dir, "%s", cfg->dir);
    p->cfg.dir = p->dir;
    if (ss_mkdirs_private(p->dir, err, errlen) != 0) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    uv_async_init(cfg->loop, &p->async, on_async);
    p->async.data = p;
    uv_timer_init(cfg->loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, on_timer, 1000, 1000);
    uv_unref((uv_handle_t *)&p->async);
    uv_unref((uv_handle_t *)&p->timer);
    p->handles_open = 2;
    return p;
}

static void on_closed(uv_handle_t *h)
{
    ss_profiler *p = h->data;
    p->handles_open--;
}

void ss_profiler_set_ingest(ss_profiler *p, ss_ingest *in)
{
    if (p)
        p->cfg.ingest = in;
}

void ss_profiler_set_attempt(ss_profiler *p, uint32_t attempt)
{
    if (p)
        p->cfg.attempt = attempt;
}

void ss_profiler_free(ss_profiler *p)
{
    if (!p)
        return;
    for (size_t k = 0; k < SS_PROFILE_KEPT; k++)
        free(p->reqs[k].ranks);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

void ss_profiler_close(ss_profiler *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->handles_open == 2) {
        uv_close((uv_handle_t *)&p->async, on_closed);
        uv_close((uv_handle_t *)&p->timer, on_closed);
    }
}

void ss_profiler_on_done(ss_profiler *p, uint32_t rank,
                         const wire_profile_done *pd)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    prof_req *q = find_req(p, pd->request_id);
    prof_rank *r = NULL;
    for (uint32_t i = 0; q && i < q->n; i++)
        if (q->ranks[i].rank == rank)
            r = &q->ranks[i];
    if (r && strcmp(r->status, "requested") == 0) {
        int ok = pd->status == WIRE_PROFILE_OK;
        snprintf(r->status, sizeof r->status, ok ? "done" : "failed");
        snprintf(ok ? r->path : r->message, sizeof r->path, "%s", pd->text);
        r->marker_ns = ok ? pd->marker_ns : SS_MISSING;
        ss_live_rank_info info;
        if (ok && p->cfg.live &&
            ss_live_rank_get(p->cfg.live, rank, &info) == 0)
            snprintf(r->host, sizeof r->host, "%s", info.host);
        store_rank(p, q, r);
    }
    pthread_mutex_unlock(&p->mu);
}

int ss_profile_parse_ranks(const char *text, uint32_t world, uint8_t *sel,
                           char *err, size_t errlen)
{
    memset(sel, 0, world);
    int n = 0;
    const char *s = text;
    if (!s || !*s) {
        snprintf(err, errlen, "no ranks given (e.g. ranks=2,5 or 0-3)");
        return -1;
    }
    while (*s) {
        char *end;
        errno = 0;
        if (*s < '0' || *s > '9')
            goto bad;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (errno || end == s)
            goto bad;
        s = end;
        if (*s == '-') {
            s++;
            if (*s < '0' || *s > '9')
                goto bad;
            b = strtoul(s, &end, 10);
            if (errno || end == s || b < a)
                goto bad;
            s = end;
        }
        if (b >= world) {
            snprintf(err, errlen, "rank %lu is out of range: the run has "
                     "%u ranks", b, world);
            return -1;
        }
        for (unsigned long r = a; r <= b; r++)
            if (!sel[r]) {
                sel[r] = 1;
                n++;
            }
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            goto bad;
    }
    return n;
bad:
    snprintf(err, errlen, "bad rank list '%.64s' (e.g. 2,5 or 0-3,7)", text);
    return -1;
}

/* Appends Q's document to OUT (mu held). */
static void req_json(const prof_req *q, ss_buf *out)
{
    ss_buf_printf(out, "{\"request\":%" PRIu32 ",\"duration_ms\":%" PRIu32
                       ",\"finished\":%s,\"ranks\":[",
                  q->id, q->duration_ms, req_finished(q) ? "true" : "false");
    for (uint32_t i = 0; i < q->n; i++) {
        const prof_rank *r = &q->ranks[i];
        ss_buf_printf(out, "%s{\"rank\":%" PRIu32 ",\"status\":", i ? "," : "",
                      r->rank);
        ss_buf_json_str(out, r->status);
        ss_buf_puts(out, ",\"path\":");
        r->path[0] ? ss_buf_json_str(out, r->path) : ss_buf_puts(out, "null");
        ss_buf_puts(out, ",\"host\":");
        r->host[0] ? ss_buf_json_str(out, r->host) : ss_buf_puts(out, "null");
        ss_buf_puts(out, ",\"message\":");
        r->message[0] ? ss_buf_json_str(out, r->message)
                      : ss_buf_puts(out, "null");
        ss_buf_puts(out, "}");
    }
    ss_buf_puts(out, "]}");
}

/* Creates a request (mu held).  Returns its id, or 0 with a status and a
 * reason in OUT. */
static uint32_t create_req(ss_profiler *p, const char *ranks,
                           const char *seconds, ss_buf *out,
                           unsigned *status)
{
    char err[160];
    char *end = NULL;
    double s = seconds ? strtod(seconds, &end) : 0;
    if (!seconds || end == seconds || *end || !(s > 0) ||
        s * 1000 > WIRE_MAX_PROFILE_MS || s * 1000 < 1) {
        *status = 400;
        ss_buf_printf(out, "seconds must be a number in (0, %u]",
                      WIRE_MAX_PROFILE_MS / 1000);
        return 0;
    }
    uint32_t world = p->cfg.world_size;
    uint8_t *sel = malloc(world ? world : 1);
    if (!sel) {
        *status = 500;
        ss_buf_puts(out, "out of memory");
        return 0;
    }
    int n = ss_profile_parse_ranks(ranks, world, sel, err, sizeof err);
    if (n < 0) {
        free(sel);
        *status = 400;
        ss_buf_puts(out, err);
        return 0;
    }
    prof_req *last = find_req(p, p->last_id);
    if (last && !req_finished(last)) {
        free(sel);
        *status = 409;
        ss_buf_printf(out, "profile request %" PRIu32 " is still running",
                      last->id);
        return 0;
    }
    prof_rank *rs = calloc((size_t)n, sizeof *rs);
    if (!rs) {
        free(sel);
        *status = 500;
        ss_buf_puts(out, "out of memory");
        return 0;
    }
    uint32_t k = 0;
    for (uint32_t r = 0; r < world; r++)
        if (sel[r]) {
            rs[k].rank = r;
            rs[k].marker_ns = SS_MISSING;
            snprintf(rs[k].status, sizeof rs[k].status, "pending");
            k++;
        }
    free(sel);
    uint32_t id = ++p->last_id;
    prof_req *q = &p->reqs[id % SS_PROFILE_KEPT];
    free(q->ranks);
    memset(q, 0, sizeof *q);
    q->id = id;
    q->duration_ms = (uint32_t)(s * 1000 + 0.5);
    q->requested_at = ss_wall_now();
    q->n = (uint32_t)n;
    q->ranks = rs;
    return id;
}

unsigned ss_profiler_http(void *ctx, int start, const char *ranks,
                          const char *seconds, const char *request,
                          ss_buf *out)
{
    ss_profiler *p = ctx;
    unsigned status = 200;
    pthread_mutex_lock(&p->mu);
    if (p->closed) {
        pthread_mutex_unlock(&p->mu);
        ss_buf_puts(out, "the run is ending");
        return 503;
    }
    uint32_t id;
    if (start) {
        id = create_req(p, ranks, seconds, out, &status);
        if (!id) {
            pthread_mutex_unlock(&p->mu);
            return status;
        }
        uv_async_send(&p->async);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += SEND_WAIT_MS / 1000;
        prof_req *q = find_req(p, id);
        while (q && !q->sent && !p->closed &&
               pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0)
            q = find_req(p, id);
        status = 202;
    } else {
        char *end = NULL;
        unsigned long v = request && *request ? strtoul(request, &end, 10)
                                              : p->last_id;
        if (end && (*end || end == request)) {
            pthread_mutex_unlock(&p->mu);
            ss_buf_puts(out, "request must be a number");
            return 400;
        }
        id = (uint32_t)v;
    }
    prof_req *q = find_req(p, id);
    if (!q) {
        pthread_mutex_unlock(&p->mu);
        ss_buf_printf(out, "no profile request %" PRIu32 " here", id);
        return 404;
    }
    req_json(q, out);
    pthread_mutex_unlock(&p->mu);
    return status;
}
