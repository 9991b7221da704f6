/*
 * remote_stacks.c - the other nodes' ranks' stacks, gathered through the
 * agents (remote_stacks.h).
 *
 * Each fetch has an id (the STACKS_REQ's request id), a timer for the
 * end of its wait, and one slot per remote rank: the bytes received so
 * far, or the final object.  A fetch ends when every slot is final or
 * its timer fires; its caller's callback is then called and the fetch
 * freed once its timer handle is closed.
 */
#include "remote_stacks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "stack_json.h"

typedef struct {
    ss_buf buf;   /* chunks so far; the final object once DONE */
    int done;
    int over;     /* went over a limit: its chunks are dropped */
} rank_slot;

typedef struct fetch {
    struct fetch *next;
    ss_remote_stacks *g;
    uint32_t id;
    uint32_t wait_ms;
    int ended;
    uv_timer_t timer;
    ss_stack_remote_done_cb done;
    void *done_ctx;
    size_t total;     /* bytes kept */
    uint32_t pending; /* slots not done */
    rank_slot *slots; /* one per remote rank */
} fetch;

struct ss_remote_stacks {
    uv_loop_t *loop;
    ss_remote_stacks_config cfg;
    fetch *fetches;
    uint32_t nfetches;  /* in the list or closing */
    uint32_t next_id;
    int closed;
};

static uint32_t nremote(const ss_remote_stacks *g)
{
    return (g->cfg.nnodes - 1) * g->cfg.nproc;
}

static void maybe_free(ss_remote_stacks *g)
{
    if (g->closed && g->nfetches == 0)
        free(g);
}

/* Makes slot I (rank nproc + I) of F final with a placeholder. */
static void placeholder(fetch *f, uint32_t i, const char *why)
{
    ss_remote_stacks *g = f->g;
    rank_slot *s = &f->slots[i];
    if (s->done)
        return;
    uint32_t rank = g->cfg.nproc + i;
    uint32_t node = rank / g->cfg.nproc;
    const char *host = g->cfg.host_of ? g->cfg.host_of(g->cfg.ctx, node) : "";
    f->total -= s->buf.len;
    ss_buf_free(&s->buf);
    ss_buf_printf(&s->buf, "{\"rank\":%u,\"host\":", rank);
    ss_buf_json_str(&s->buf, host ? host : "");
    ss_buf_puts(&s->buf, ",\"pid\":0,\"state\":\"no_answer\",\"why\":");
    ss_buf_json_str(&s->buf, why);
    ss_buf_puts(&s->buf, ",\"threads\":[]}");
    s->done = 1;
    f->pending--;
}

static void on_fetch_closed(uv_handle_t *h)
{
    fetch *f = h->data;
    ss_remote_stacks *g = f->g;
    for (uint32_t i = 0; i < nremote(g); i++)
        ss_buf_free(&f->slots[i].buf);
    free(f->slots);
    free(f);
    g->nfetches--;
    maybe_free(g);
}

/* F's wait is over: every slot is final.  Calls back, then frees F. */
static void end_fetch(fetch *f)
{
    if (f->ended)
        return;
    f->ended = 1;
    ss_remote_stacks *g = f->g;
    for (fetch **p = &g->fetches; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    uint32_t n = nremote(g);
    const char **ranks = calloc(n, sizeof *ranks);
    static const char oom[] = "{\"state\":\"no_answer\",\"why\":\"out of "
                              "memory\",\"threads\":[]}";
    for (uint32_t i = 0; ranks && i < n; i++)
        ranks[i] = f->slots[i].buf.oom || !f->slots[i].buf.data
                       ? oom
                       : f->slots[i].buf.data;
    f->done(f->done_ctx, ranks, ranks ? n : 0);
    free(ranks);
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, on_fetch_closed);
}

static void maybe_end(fetch *f)
{
    if (f->pending == 0)
        end_fetch(f);
}

/* Every slot of NODE not final in F gets WHY. */
static void fail_node(fetch *f, uint32_t node, const char *why)
{
    uint32_t first = (node - 1) * f->g->cfg.nproc;
    for (uint32_t i = 0; i < f->g->cfg.nproc; i++)
        placeholder(f, first + i, why);
}

static void on_wait_over(uv_timer_t *t)
{
    fetch *f = t->data;
    ss_remote_stacks *g = f->g;
    for (uint32_t node = 1; node < g->cfg.nnodes; node++) {
        char why[128];
        snprintf(why, sizeof why, "node %u did not answer within %.1f s",
                 node, f->wait_ms / 1000.0);
        fail_node(f, node, why);
    }
    end_fetch(f);
}

int ss_remote_stacks_fetch(void *ctx, int native, uint32_t deadline_ms,
                           ss_stack_remote_done_cb done, void *done_ctx)
{
    ss_remote_stacks *g = ctx;
    if (!g || g->closed || !done || deadline_ms == 0 ||
        deadline_ms > LINK_MAX_STACKS_DEADLINE_MS ||
        g->nfetches >= SS_REMOTE_STACKS_MAX_FETCHES)
        return -1;
    fetch *f = calloc(1, sizeof *f);
    rank_slot *slots = calloc(nremote(g), sizeof *slots);
    if (!f || !slots) {
        free(f);
        free(slots);
        return -1;
    }
    f->g = g;
    f->id = ++g->next_id;
    f->slots = slots;
    f->pending = nremote(g);
    f->done = done;
    f->done_ctx = done_ctx;
    f->wait_ms = deadline_ms + (g->cfg.slack_ms ? g->cfg.slack_ms
                                                : SS_REMOTE_STACKS_SLACK_MS);
    uv_timer_init(g->loop, &f->timer);
    f->timer.data = f;
    f->next = g->fetches;
    g->fetches = f;
    g->nfetches++;
    link_stacks_req req = {f->id, (uint8_t)(native != 0), deadline_ms};
    for (uint32_t node = 1; node < g->cfg.nnodes; node++) {
        char why[160] = "";
        if (g->cfg.ask(g->cfg.ctx, node, &req, why, sizeof why) != 0)
            fail_node(f, node, why[0] ? why : "its node could not be asked");
    }
    if (f->pending == 0)
        end_fetch(f);
    else
        uv_timer_start(&f->timer, on_wait_over, f->wait_ms, 0);
    return 0;
}

/* Checks the object assembled in slot I of F: a JSON object of its rank,
 * else a placeholder saying what came. */
static void finish_slot(fetch *f, uint32_t i, uint32_t node)
{
    rank_slot *s = &f->slots[i];
    uint32_t rank = f->g->cfg.nproc + i;
    /* The document embeds the text as it came: it must be one JSON value
     * and nothing else (checked in place: thousands of ranks a request). */
    int ok = !s->buf.oom && s->buf.data &&
             !memchr(s->buf.data, 0, s->buf.len) &&
             ss_sj_is_rank_object(s->buf.data, s->buf.len, rank);
    if (ok) {
        s->done = 1;
        f->pending--;
        return;
    }
    char why[160];
    snprintf(why, sizeof why, "node %u sent stacks that are not a JSON "
             "object of rank %u", node, rank);
    placeholder(f, i, why);
}

int ss_remote_stacks_part(ss_remote_stacks *g, uint32_t node,
                          const link_stacks_part *p)
{
    fetch *f = g ? g->fetches : NULL;
    while (f && f->id != p->request_id)
        f = f->next;
    uint32_t nproc = g ? g->cfg.nproc : 0;
    if (!f || node == 0 || node >= g->cfg.nnodes ||
        p->rank / nproc != node)
        return -1;
    uint32_t i = p->rank - nproc;
    rank_slot *s = &f->slots[i];
    if (s->done)
        return -1;
    if (!s->over) {
        if (s->buf.len + p->len > SS_REMOTE_STACKS_MAX_RANK ||
            f->total + p->len > SS_REMOTE_STACKS_MAX_TOTAL) {
            s->over = 1;
            f->total -= s->buf.len;
            ss_buf_free(&s->buf);
        } else {
            ss_buf_add(&s->buf, (const char *)p->bytes, p->len);
            f->total += p->len;
        }
    }
    if (!p->last)
        return 0;
    if (s->over) {
        char why[160];
        snprintf(why, sizeof why, "its stacks exceed what the controller "
                 "takes (%u MiB a rank, %u MiB a request)",
                 SS_REMOTE_STACKS_MAX_RANK >> 20,
                 SS_REMOTE_STACKS_MAX_TOTAL >> 20);
        placeholder(f, i, why);
    } else {
        finish_slot(f, i, node);
    }
    maybe_end(f);
    return 0;
}

void ss_remote_stacks_node_gone(ss_remote_stacks *g, uint32_t node,
                                const char *why)
{
    if (!g || node == 0 || node >= g->cfg.nnodes)
        return;
    fetch *f = g->fetches;
    while (f) {
        fetch *next = f->next; /* F may end here */
        fail_node(f, node, why);
        maybe_end(f);
        f = next;
    }
}

ss_remote_stacks *ss_remote_stacks_new(uv_loop_t *loop,
                                       const ss_remote_stacks_config *cfg)
{
    if (cfg->nnodes < 2 || cfg->nproc == 0 || !cfg->ask)
        return NULL;
    ss_remote_stacks *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->loop = loop;
    g->cfg = *cfg;
    return g;
}

void ss_remote_stacks_close(ss_remote_stacks *g)
{
    if (!g || g->closed)
        return;
    g->closed = 1;
    while (g->fetches) {
        fetch *f = g->fetches;
        for (uint32_t node = 1; node < g->cfg.nnodes; node++)
            fail_node(f, node, "the controller is closing");
        end_fetch(f);
    }
    maybe_free(g);
}
