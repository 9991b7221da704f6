/*
 * recent_service.c - one rank's latest steps for the running controller
 * (recent_service.h).
 *
 * A request comes from an HTTP builder through the bridge (http_bridge.h);
 * on the loop, node 0's ranks are answered from its own rows at once and
 * another node's rank is asked of its agent.  An agent's answer is
 * collected chunk by chunk against a deadline (one timer checks every
 * waiting request).
 */
#include "recent_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_bridge.h"
#include "recent_rows.h"
#include "stack_json.h"

#define CHECK_MS 100 /* how often the deadlines of waiting requests are seen */

/* What a request asks (the bridge's call arguments). */
typedef struct {
    uint32_t rank, steps;
} recent_args;

/* A request sent to an agent, on the loop. */
typedef struct fetch {
    struct fetch *next;
    ss_bridge_call *call;
    uint32_t id, node, rank;
    uint64_t deadline_ms;
    ss_buf body;
} fetch;

struct ss_recent_service {
    uv_loop_t *loop;
    ss_recent_service_config cfg;
    ss_recent_rows *local;  /* node 0's ranks; NULL until a record */
    ss_http_bridge *bridge;
    uv_timer_t check;
    fetch *fetches;
    uint32_t next_id;
};

static void start(void *ctx, ss_bridge_call *call);

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
    s->bridge = ss_http_bridge_new(loop, start, s);
    if (!s->bridge) {
        free(s);
        return NULL;
    }
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

/* OBJ (recent_rows.h's object, "{" first) with NODE and FROM put first. */
static void answer_rows(ss_recent_service *s, ss_bridge_call *call,
                        uint32_t node, const char *from, const char *obj,
                        size_t len)
{
    ss_buf b = {0};
    ss_buf_printf(&b, "{\"node\":%u,\"from\":\"%s\",", node, from);
    ss_buf_add(&b, obj + 1, len - 1);
    if (b.oom)
        ss_http_bridge_answer_text(s->bridge, call, 500, "out of memory");
    else
        ss_http_bridge_answer(s->bridge, call, 200, b.data, b.len);
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
        !ss_sj_is_rank_object(p, f->body.len, f->rank))
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
                 f->rank != p->rank))
        f = f->next;
    if (!f)
        return; /* answered already, or never asked */
    if (f->body.len + p->len > SS_RECENT_MAX_ANSWER) {
        char why[120];
        snprintf(why, sizeof why, "node %u's answer is over %u bytes", node,
                 SS_RECENT_MAX_ANSWER);
        ss_http_bridge_answer_text(s->bridge, f->call, 502, why);
        fetch_end(s, f);
        return;
    }
    ss_buf_add(&f->body, (const char *)p->bytes, p->len);
    if (!p->last)
        return;
    int kind = f->body.oom ? -2 : answer_kind(f);
    if (kind == -2) {
        ss_http_bridge_answer_text(s->bridge, f->call, 500, "out of memory");
    } else if (kind != 0) {
        char why[300];
        if (kind == 1)
            snprintf(why, sizeof why, "node %u's agent answered %.*s", node,
                     (int)(f->body.len < 200 ? f->body.len : 200),
                     f->body.data);
        else
            snprintf(why, sizeof why, "node %u's agent answered something "
                     "else than rank %u's rows (%zu bytes that are not its "
                     "JSON object)", node, f->rank, f->body.len);
        ss_http_bridge_answer_text(s->bridge, f->call, 502, why);
    } else {
        answer_rows(s, f->call, node, "agent", f->body.data, f->body.len);
    }
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
            ss_http_bridge_answer_text(s->bridge, f->call, 504, why);
            fetch_end(s, f);
        }
        f = next;
    }
}

/* ---- the loop's side of a request (ss_bridge_start_fn) ---- */

static void start(void *ctx, ss_bridge_call *call)
{
    ss_recent_service *s = ctx;
    const recent_args *a = ss_bridge_call_args(call);
    char why[200];
    if (a->rank >= s->cfg.world) {
        snprintf(why, sizeof why, "rank %u is not in the run (%u ranks)",
                 a->rank, s->cfg.world);
        ss_http_bridge_answer_text(s->bridge, call, 404, why);
        return;
    }
    if (a->rank < s->cfg.nproc) {
        ss_buf b = {0};
        if (!s->local)
            s->local = ss_recent_rows_new(0, s->cfg.nproc);
        if (ss_recent_rows_json(s->local, a->rank, a->steps, &b) != 0 ||
            b.oom)
            ss_http_bridge_answer_text(s->bridge, call, 500, "out of memory");
        else
            answer_rows(s, call, 0, "controller", b.data, b.len);
        ss_buf_free(&b);
        return;
    }
    uint32_t node = a->rank / s->cfg.nproc;
    fetch *f = calloc(1, sizeof *f);
    if (!f) {
        ss_http_bridge_answer_text(s->bridge, call, 500, "out of memory");
        return;
    }
    *f = (fetch){.call = call, .id = ++s->next_id, .node = node,
                 .rank = a->rank,
                 .deadline_ms = uv_now(s->loop) + s->cfg.wait_ms};
    link_recent_req req = {f->id, a->rank, a->steps};
    if (!s->cfg.ask) {
        snprintf(why, sizeof why, "rank %u is on node %u and this run has "
                 "no way to ask it", a->rank, node);
    } else if (s->cfg.ask(s->cfg.ask_ctx, node, &req, why, sizeof why) == 0) {
        f->next = s->fetches;
        s->fetches = f;
        if (!uv_is_active((uv_handle_t *)&s->check))
            uv_timer_start(&s->check, on_check, CHECK_MS, CHECK_MS);
        return;
    }
    ss_http_bridge_answer_text(s->bridge, call, 503, why);
    free(f);
}

unsigned ss_recent_service_http(void *ctx, uint32_t rank, uint32_t steps,
                                ss_buf *out)
{
    ss_recent_service *s = ctx;
    recent_args a = {rank, steps < 1 ? 1
                           : steps > LINK_MAX_RECENT_STEPS
                               ? LINK_MAX_RECENT_STEPS : steps};
    return ss_http_bridge_call(s->bridge, &a, sizeof a, s->cfg.wait_ms + 1000,
                               out);
}

/* ---- life cycle ---- */

void ss_recent_service_close(ss_recent_service *s)
{
    if (!s)
        return;
    ss_http_bridge_close(s->bridge);
    while (s->fetches) {
        ss_http_bridge_answer_text(s->bridge, s->fetches->call, 503,
                                   "the run is ending");
        fetch_end(s, s->fetches);
    }
    if (!uv_is_closing((uv_handle_t *)&s->check))
        uv_close((uv_handle_t *)&s->check, NULL);
}

void ss_recent_service_free(ss_recent_service *s)
{
    if (!s)
        return;
    ss_http_bridge_free(s->bridge);
    ss_recent_rows_free(s->local);
    free(s);
}
