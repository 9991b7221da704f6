/*
 * run_nodes.c - the other nodes of a multi-node `stepscope run`, as the
 * controller on node 0 sees them (run_nodes.h): the agent links
 * (node_links.h) and what arrives on them, told to the run through its
 * callbacks.
 */
#include "run_nodes.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node_links.h"

/* Host evidence a remote node sent for one of its rank's steps. */
typedef struct {
    uint64_t step;
    int valid;
    ss_host_step host;
} remote_host_slot;

/* Steps of evidence kept per remote rank: a step's evidence is read when
 * the step is finalized, a few steps after it arrives (p99 4 to 8 steps
 * at 131,072 ranks, docs/performance.md); ~3 KiB a rank. */
#define SS_REMOTE_HOST_SLOTS 16

/* Whether another node's rank is stopped, as its agent last said
 * (RANK_STOP): since when on the controller's clock, 0 while it runs. */
typedef struct {
    ss_mono_ns since;
    ss_stop_kind kind; /* what holds it */
} remote_stop;

/* What the controller knows of one node of a multi-node run. */
typedef struct {
    int joined;       /* its agent joined (node 0: always) */
    int gone;         /* its link ended (clean or lost) or it never joined */
    int lost;         /* ... without goodbye, or never joined */
    int all_exited;   /* its ranks have all exited (ALL_EXITED) */
    int status;       /* its job status (ALL_EXITED) */
    int64_t clock_offset_ns;
    int64_t clock_bound_ns;
    int have_clock;
    char host[256];
    char addr[128];
} node_slot;

struct run_nodes {
    run_nodes_config cfg;
    const ss_run_opts *o;
    run_nodes_events ev;
    uint32_t attempt;
    node_slot *nodes;              /* nnodes entries */
    remote_host_slot *remote_host; /* (nprocs - nproc_local) x slots */
    remote_stop *remote_stop;      /* nprocs - nproc_local */
    ss_node_links *links;          /* NULL on a single-node run */
    ss_remote_stacks *remote_stacks; /* NULL on a single-node run */
};

static void event(run_nodes *r, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void event(run_nodes *r, const char *kind, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->ev.event(r->ev.ctx, kind, msg);
}

/* The node of RANK. */
static uint32_t node_of(const run_nodes *r, uint32_t rank)
{
    return r->o->nproc_local ? rank / r->o->nproc_local : 0;
}

/* "ranks 2–3" or "rank 2" for NODE. */
static void node_ranks(const run_nodes *r, uint32_t node, char *out, size_t n)
{
    uint32_t first = node * r->o->nproc_local;
    if (r->o->nproc_local == 1)
        snprintf(out, n, "rank %u", first);
    else
        snprintf(out, n, "ranks %u–%u", first, first + r->o->nproc_local - 1);
}

static void put_node(run_nodes *r, uint32_t node, const char *state,
                     const char *lost_reason, int64_t lost_at_step)
{
    const node_slot *s = &r->nodes[node];
    ss_node_info info;
    ss_node_info_init(&info);
    info.node_rank = node;
    info.attempt = r->attempt;
    snprintf(info.host, sizeof info.host, "%s", s->host);
    snprintf(info.addr, sizeof info.addr, "%s", s->addr);
    info.first_rank = node * r->o->nproc_local;
    info.nranks = r->o->nproc_local;
    snprintf(info.state, sizeof info.state, "%s", state);
    if (!strcmp(state, SS_NODE_RUNNING) && s->joined)
        info.joined_at = ss_wall_now();
    if (!strcmp(state, SS_NODE_DONE) || !strcmp(state, SS_NODE_LOST) ||
        !strcmp(state, SS_NODE_NEVER_JOINED))
        info.ended_at = ss_wall_now();
    if (node == 0) {
        info.clock_offset_ns = 0;
        info.clock_bound_ns = 0;
    } else if (s->have_clock) {
        info.clock_offset_ns = s->clock_offset_ns;
        info.clock_bound_ns = s->clock_bound_ns;
    }
    if (lost_reason)
        snprintf(info.lost_reason, sizeof info.lost_reason, "%s", lost_reason);
    info.lost_at_step = lost_at_step;
    ss_store_put_node(r->cfg.store, r->cfg.run_id, &info);
}

int run_nodes_all_exited(const run_nodes *r)
{
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        if (!r->nodes[k].all_exited && !r->nodes[k].gone)
            return 0;
    return 1;
}

/* The last step any of NODE's ranks completed, -1 when none. */
static int64_t node_last_step(const run_nodes *r, uint32_t node)
{
    int64_t last = -1;
    for (uint32_t i = 0; i < r->o->nproc_local; i++) {
        int64_t step = r->ev.last_step(r->ev.ctx, node * r->o->nproc_local + i);
        if (step > last)
            last = step;
    }
    return last;
}

/* NODE is lost for WHY: its ranks leave, missing; the job stops (and no
 * attempt follows for NO_RESTART, when not NULL). */
static void node_lost(run_nodes *r, uint32_t node, const char *why,
                      const char *state, const char *no_restart)
{
    node_slot *s = &r->nodes[node];
    if (s->lost)
        return;
    s->lost = 1;
    s->gone = 1;
    char ranks[64], where[200], msg[600];
    node_ranks(r, node, ranks, sizeof ranks);
    if (s->addr[0])
        snprintf(where, sizeof where, "%s%s%s, %s", s->host,
                 s->host[0] ? " " : "", s->addr, ranks);
    else
        snprintf(where, sizeof where, "%s", ranks);
    int64_t step = node_last_step(r, node);
    if (step >= 0)
        snprintf(msg, sizeof msg, "node %u (%s) %s at step %" PRId64, node,
                 where, why, step);
    else
        snprintf(msg, sizeof msg, "node %u (%s) %s before its first step",
                 node, where, why);
    fprintf(stderr, "stepscope: %s; its ranks are recorded as missing\n",
            msg);
    event(r, "node_lost", "%s", msg);
    put_node(r, node, state, why, step);
    r->ev.ranks_lost(r->ev.ctx, node, "its node was lost");
    char gone[160];
    snprintf(gone, sizeof gone, "node %u %s", node,
             strcmp(state, SS_NODE_NEVER_JOINED) ? "was lost" : "never joined");
    ss_remote_stacks_node_gone(r->remote_stacks, node, gone);
    r->ev.node_failed(r->ev.ctx, msg, no_restart);
    r->ev.exited(r->ev.ctx);
}

/* ---- agent link callbacks ---- */

/* The lowest node rank of 1..nnodes-1 that no node holds in this attempt
 * (joined, or left it), for an agent without one; 0 when none is free. */
static uint32_t free_node_rank(const run_nodes *r)
{
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        if (!r->nodes[k].joined && !r->nodes[k].gone)
            return k;
    return 0;
}

static int cb_join(void *ctx, link_agent_hello *h, const char *addr,
                   char *reason, size_t reasonlen)
{
    run_nodes *r = ctx;
    uint32_t k = h->node_rank;
    if (h->nnodes != r->o->nnodes || h->nproc_per_node != r->o->nproc_local) {
        snprintf(reason, reasonlen, "this run has %u nodes of %u ranks; the "
                 "agent says %u of %u: use the same --nnodes and -n on every "
                 "node", r->o->nnodes, r->o->nproc_local, h->nnodes,
                 h->nproc_per_node);
        return -1;
    }
    if (k == 0 || (k >= r->o->nnodes && k != LINK_NODE_RANK_ANY)) {
        snprintf(reason, reasonlen, "node rank %u is not one of this run's "
                 "agents (1 to %u; node 0 runs the controller)", k,
                 r->o->nnodes - 1);
        return -1;
    }
    if (strcmp(h->job_id, r->o->job_id) != 0) {
        snprintf(reason, reasonlen, "the agent belongs to job '%s', this run "
                 "is job '%s'", h->job_id, r->o->job_id);
        return -1;
    }
    if (r->ev.stopping(r->ev.ctx)) {
        snprintf(reason, reasonlen, "the job is stopping");
        return -1;
    }
    if (k == LINK_NODE_RANK_ANY && !(k = free_node_rank(r))) {
        /* torchrun's c10d rendezvous: numbered as it joins */
        snprintf(reason, reasonlen, "every node rank of this run's %u nodes "
                 "is taken in this attempt", r->o->nnodes);
        return -1;
    }
    node_slot *s = &r->nodes[k];
    if (s->joined || s->gone) {
        snprintf(reason, reasonlen, "node %u has %s", k,
                 s->gone ? "already left this attempt (it may join again "
                           "for the next one)"
                         : "already joined");
        return -1;
    }
    h->node_rank = k;
    s->joined = 1;
    snprintf(s->host, sizeof s->host, "%s", h->host);
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    put_node(r, k, SS_NODE_RUNNING, NULL, SS_MISSING);
    char ranks[64];
    node_ranks(r, k, ranks, sizeof ranks);
    event(r, "node_joined", "node %u (%s %s, %s) joined", k, h->host,
              addr, ranks);
    if (!r->o->quiet)
        fprintf(stderr, "stepscope: node %u (%s %s, %s) joined\n", k, h->host,
                addr, ranks);
    return 0;
}

static void cb_clock(void *ctx, uint32_t node, const link_clock *c)
{
    run_nodes *r = ctx;
    node_slot *s = &r->nodes[node];
    int first = !s->have_clock;
    s->have_clock = 1;
    s->clock_offset_ns = c->offset_ns;
    s->clock_bound_ns = c->bound_ns;
    for (uint32_t i = 0; i < r->o->nproc_local; i++)
        r->ev.clock_bound(r->ev.ctx, node * r->o->nproc_local + i,
                          c->bound_ns);
    if (first)
        event(r, "node_clock", "node %u's clock is %+.3f ms from the "
                  "controller's (± %.3f ms, round trip %.3f ms)", node,
                  c->offset_ns / 1e6, c->bound_ns / 1e6, c->rtt_ns / 1e6);
    put_node(r, node, SS_NODE_RUNNING, NULL, SS_MISSING);
}

/* RANK is one of NODE's ranks. */
static int owns(const run_nodes *r, uint32_t node, uint32_t rank)
{
    return rank < r->o->nprocs && node_of(r, rank) == node;
}

static void cb_rank_started(void *ctx, uint32_t node,
                            const link_rank_started *st)
{
    run_nodes *r = ctx;
    if (!owns(r, node, st->rank))
        return;
    if (st->rank >= r->o->nproc_local)
        r->remote_stop[st->rank - r->o->nproc_local] =
            (remote_stop){0, SS_STOP_SIGNAL};
    r->ev.rank_started(r->ev.ctx, st->rank, st->pid);
}

/* One of NODE's ranks stopped, or runs again: when it stopped is moved
 * onto this clock as the time its agent measured before now (the frame's
 * transit, well under a second, is not counted). */
static void cb_rank_stop(void *ctx, uint32_t node, const link_rank_stop *s)
{
    run_nodes *r = ctx;
    if (!owns(r, node, s->rank) || s->rank < r->o->nproc_local)
        return;
    remote_stop *slot = &r->remote_stop[s->rank - r->o->nproc_local];
    if (s->state == LINK_STOP_RUNNING) {
        *slot = (remote_stop){0, SS_STOP_SIGNAL};
        return;
    }
    ss_mono_ns now = ss_mono_now();
    ss_dur_ns ago = (ss_dur_ns)s->stopped_ms * 1000000;
    slot->since = now > ago ? now - ago : 1;
    slot->kind = s->state == LINK_STOP_TRACED    ? SS_STOP_TRACER
               : s->state == LINK_STOP_FROZEN ? SS_STOP_FREEZER
                                              : SS_STOP_SIGNAL;
}

static void cb_rank_exit(void *ctx, uint32_t node, const link_rank_exit *e)
{
    run_nodes *r = ctx;
    if (!owns(r, node, e->rank))
        return;
    r->ev.rank_exited(r->ev.ctx, e->rank, e->exit_code, e->term_signal,
                      e->tail[0] ? e->tail : NULL);
}

static void cb_all_exited(void *ctx, uint32_t node, const link_all_exited *a)
{
    run_nodes *r = ctx;
    node_slot *s = &r->nodes[node];
    s->all_exited = 1;
    s->status = a->status;
    if (a->left_behind)
        event(r, "left_behind", "%" PRIu32 " process%s the ranks of "
                  "node %u left behind were ended", a->left_behind,
                  a->left_behind == 1 ? "" : "es", node);
    r->ev.exited(r->ev.ctx);
}

/* A node's step partial (--aggregate node): to the run's merge. */
static void cb_partial(void *ctx, uint32_t node, const ss_node_partial *p)
{
    run_nodes *r = ctx;
    (void)node;
    if (r->ev.partial)
        r->ev.partial(r->ev.ctx, p);
}

static void cb_host(void *ctx, uint32_t node, const link_host *h)
{
    run_nodes *r = ctx;
    if (!owns(r, node, h->rank) || h->rank < r->o->nproc_local)
        return;
    remote_host_slot *slot =
        &r->remote_host[(size_t)(h->rank - r->o->nproc_local) *
                            SS_REMOTE_HOST_SLOTS +
                        h->step % SS_REMOTE_HOST_SLOTS];
    slot->step = h->step;
    slot->valid = 1;
    slot->host = h->host;
}

static void cb_node_gone(void *ctx, uint32_t node, int clean, const char *why)
{
    run_nodes *r = ctx;
    node_slot *s = &r->nodes[node];
    if (r->ev.ending(r->ev.ctx)) {
        /* The job is over: the agents were told so and leave. */
        s->gone = 1;
        if (run_nodes_all_gone(r))
            r->ev.all_gone(r->ev.ctx);
        return;
    }
    if (clean && s->all_exited) {
        s->gone = 1;
        char gone[96];
        snprintf(gone, sizeof gone, "node %u has ended: its ranks exited",
                 node);
        ss_remote_stacks_node_gone(r->remote_stacks, node, gone);
        put_node(r, node, SS_NODE_DONE, NULL, SS_MISSING);
        r->ev.exited(r->ev.ctx);
        return;
    }
    char lost[160];
    snprintf(lost, sizeof lost, "lost its connection (%s)", why);
    node_lost(r, node, lost, SS_NODE_LOST, NULL);
}

static void cb_refused(void *ctx, const char *addr, const char *why)
{
    run_nodes *r = ctx;
    fprintf(stderr, "stepscope: refused an agent from %s: %s\n", addr, why);
    event(r, "agent_refused", "an agent from %s: %s", addr, why);
}

/* The refusals of a period after its first, summed (node_links.h). */
static void cb_refusals(void *ctx, uint64_t count, double seconds,
                        const char *reasons)
{
    run_nodes *r = ctx;
    fprintf(stderr, "stepscope: refused %" PRIu64 " more connection%s to the "
            "agent port in the last %.0f s: %s\n", count,
            count == 1 ? "" : "s", seconds, reasons);
    event(r, "agents_refused", "%" PRIu64 " connection%s refused in "
              "the last %.0f s: %s", count, count == 1 ? "" : "s", seconds,
              reasons);
}

/* NODE's health check before its ranks start. */
static void cb_health(void *ctx, uint32_t node, const link_health *h)
{
    run_nodes *r = ctx;
    if (h->ok)
        event(r, "health_check", "node %u passed: %s", node, h->output);
    else
        r->ev.health_failed(r->ev.ctx, node, h->check, h->output);
}

/* ---- the other nodes' stacks (remote_stacks.h) ---- */

static void cb_stacks_part(void *ctx, uint32_t node, const link_stacks_part *p)
{
    run_nodes *r = ctx;
    ss_remote_stacks_part(r->remote_stacks, node, p);
}

/* Whether NODE's agent can be asked now; if not, says why. */
static int askable(const run_nodes *r, uint32_t node, char *why,
                   size_t whylen)
{
    const node_slot *s = &r->nodes[node];
    if (s->lost && !s->joined)
        snprintf(why, whylen, "node %u never joined", node);
    else if (s->lost)
        snprintf(why, whylen, "node %u was lost", node);
    else if (s->gone)
        snprintf(why, whylen, "node %u has ended: its ranks exited", node);
    else if (!s->joined)
        snprintf(why, whylen, "node %u has not joined yet", node);
    else
        return 1;
    return 0;
}

/* Sends a STACKS_REQ to NODE, or says why it cannot be asked. */
static int ask_stacks(void *ctx, uint32_t node, const link_stacks_req *req,
                      char *why, size_t whylen)
{
    run_nodes *r = ctx;
    if (!askable(r, node, why, whylen))
        return -1;
    if (ss_node_links_stacks(r->links, node, req) != 0) {
        snprintf(why, whylen, "node %u's link is closed", node);
        return -1;
    }
    return 0;
}

/* ---- a rank's recent steps (recent_service.h) ---- */

static void cb_recent_part(void *ctx, uint32_t node, const link_recent_part *p)
{
    run_nodes *r = ctx;
    if (r->ev.recent_part)
        r->ev.recent_part(r->ev.ctx, node, p);
}

int run_nodes_recent(run_nodes *r, uint32_t node, const link_recent_req *req,
                     char *why, size_t whylen)
{
    if (!r || node == 0 || node >= r->o->nnodes) {
        snprintf(why, whylen, "node %u is not another node of the run", node);
        return -1;
    }
    if (!askable(r, node, why, whylen))
        return -1;
    if (ss_node_links_recent(r->links, node, req) != 0) {
        snprintf(why, whylen, "node %u's link is closed", node);
        return -1;
    }
    return 0;
}

static const char *node_host(void *ctx, uint32_t node)
{
    run_nodes *r = ctx;
    return r->nodes[node].host;
}

/* ---- the rest of the wiring ---- */

static run_nodes *start(run_nodes *r, char *err, size_t errlen);

run_nodes *run_nodes_start(const run_nodes_config *cfg,
                           const run_nodes_events *ev, char *err,
                           size_t errlen)
{
    run_nodes *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->cfg = *cfg;
    r->o = cfg->o;
    r->ev = *ev;
    if (start(r, err, errlen))
        return r;
    run_nodes_close(r);
    run_nodes_free(r);
    return NULL;
}

/* Returns R, or NULL with ERR. */
static run_nodes *start(run_nodes *r, char *err, size_t errlen)
{
    r->nodes = calloc(r->o->nnodes, sizeof *r->nodes);
    if (!r->nodes) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->nodes[0].joined = 1;
    gethostname(r->nodes[0].host, sizeof r->nodes[0].host - 1);
    if (r->o->nnodes == 1)
        return r;
    r->remote_host = calloc((size_t)(r->o->nprocs - r->o->nproc_local) *
                                SS_REMOTE_HOST_SLOTS,
                            sizeof *r->remote_host);
    r->remote_stop = calloc(r->o->nprocs - r->o->nproc_local,
                            sizeof *r->remote_stop);
    if (!r->remote_host || !r->remote_stop) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ss_node_links_config cfg = {
        .port = r->o->controller_port,
        .secret = r->cfg.secret,
        .run_uuid = r->cfg.uuid,
        .attempt = r->attempt,
        .world_size = r->o->nprocs,
        .rank_token = r->cfg.token,
        .heartbeat_timeout_ms = r->o->heartbeat_timeout_ms,
        .aggregate = r->o->aggregate == SS_AGGREGATE_NODE
                         ? LINK_AGGREGATE_NODE
                         : LINK_AGGREGATE_RANK,
    };
    ss_node_links_callbacks cb = {r,
                                  cb_join,
                                  cb_clock,
                                  cb_rank_started,
                                  cb_rank_exit,
                                  cb_all_exited,
                                  cb_host,
                                  cb_node_gone,
                                  cb_refused,
                                  cb_health,
                                  cb_stacks_part,
                                  cb_refusals,
                                  cb_partial,
                                  cb_rank_stop,
                                  cb_recent_part};
    ss_remote_stacks_config scfg = {r->o->nnodes, r->o->nproc_local, r,
                                    ask_stacks, node_host, 0};
    r->remote_stacks = ss_remote_stacks_new(r->cfg.loop, &scfg);
    if (!r->remote_stacks) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->links = ss_node_links_start(r->cfg.loop, r->cfg.ingest, &cfg, &cb,
                                   err, errlen);
    if (!r->links)
        return NULL;
    put_node(r, 0, SS_NODE_RUNNING, NULL, SS_MISSING);
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        put_node(r, k, SS_NODE_JOINING, NULL, SS_MISSING);
    fprintf(stderr, "stepscope: waiting for %u agent%s on port %u (join "
            "timeout %.0f s)\n", r->o->nnodes - 1, r->o->nnodes == 2 ? "" : "s",
            (unsigned)ss_node_links_port(r->links),
            r->o->join_timeout_ms / 1000.0);
    return r;
}

void run_nodes_tick(run_nodes *r, ss_mono_ns now, ss_mono_ns attempt_started)
{
    if (r->o->nnodes == 1 ||
        now - attempt_started <= (ss_mono_ns)r->o->join_timeout_ms * 1000000)
        return;
    for (uint32_t k = 1; k < r->o->nnodes; k++) {
        if (r->nodes[k].joined || r->nodes[k].gone)
            continue;
        char why[96];
        snprintf(why, sizeof why, "did not %s within %.0f s",
                 r->attempt ? "join again" : "join",
                 r->o->join_timeout_ms / 1000.0);
        /* A restart would wait for it in vain. */
        char no_restart[160];
        snprintf(no_restart, sizeof no_restart, "node %u %s", k, why);
        node_lost(r, k, why, SS_NODE_NEVER_JOINED, no_restart);
    }
}

int run_nodes_host(const run_nodes *r, uint32_t rank, uint64_t step,
                   ss_host_step *out)
{
    if (rank < r->o->nproc_local)
        return -1;
    if (!r->remote_host || rank >= r->o->nprocs)
        return -1;
    const remote_host_slot *slot =
        &r->remote_host[(size_t)(rank - r->o->nproc_local) *
                            SS_REMOTE_HOST_SLOTS +
                        step % SS_REMOTE_HOST_SLOTS];
    if (!slot->valid || slot->step != step)
        return -1;
    *out = slot->host;
    return 0;
}

ss_dur_ns run_nodes_stopped_for(const run_nodes *r, uint32_t rank,
                                ss_mono_ns now, ss_stop_kind *kind)
{
    *kind = SS_STOP_SIGNAL;
    if (!r->remote_stop || rank < r->o->nproc_local || rank >= r->o->nprocs)
        return 0;
    const remote_stop *s = &r->remote_stop[rank - r->o->nproc_local];
    if (!s->since)
        return 0;
    *kind = s->kind;
    return now > s->since ? now - s->since : 1;
}

void run_nodes_finish(run_nodes *r)
{
    if (r->o->nnodes == 1)
        return;
    put_node(r, 0, SS_NODE_DONE, NULL, SS_MISSING);
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        if (!r->nodes[k].lost && r->nodes[k].all_exited)
            put_node(r, k, SS_NODE_DONE, NULL, SS_MISSING);
}

void run_nodes_restart(run_nodes *r)
{
    if (r->o->nnodes == 1)
        return;
    memset(r->remote_host, 0, (size_t)(r->o->nprocs - r->o->nproc_local) *
                                  SS_REMOTE_HOST_SLOTS *
                                  sizeof *r->remote_host);
    memset(r->remote_stop, 0, (size_t)(r->o->nprocs - r->o->nproc_local) *
                                  sizeof *r->remote_stop);
    put_node(r, 0, SS_NODE_RUNNING, NULL, SS_MISSING);
    for (uint32_t k = 1; k < r->o->nnodes; k++) {
        node_slot *s = &r->nodes[k];
        s->all_exited = 0;
        s->status = 0;
        if (s->gone) {
            /* Lost (or gone) in the attempt before: it must join again. */
            s->joined = s->gone = s->lost = s->have_clock = 0;
            put_node(r, k, SS_NODE_JOINING, NULL, SS_MISSING);
            continue;
        }
        for (uint32_t i = 0; s->have_clock && i < r->o->nproc_local; i++)
            r->ev.clock_bound(r->ev.ctx, k * r->o->nproc_local + i,
                              s->clock_bound_ns);
        put_node(r, k, SS_NODE_RUNNING, NULL, SS_MISSING);
    }
    ss_node_links_restart_all(r->links, r->attempt);
}

void run_nodes_stop_waiting(run_nodes *r, const char *why)
{
    for (uint32_t k = 1; k < r->o->nnodes; k++) {
        node_slot *s = &r->nodes[k];
        if (s->joined || s->gone)
            continue;
        s->gone = 1;
        char reason[160], ranks[64];
        snprintf(reason, sizeof reason, "the job was %s before it joined",
                 why);
        node_ranks(r, k, ranks, sizeof ranks);
        fprintf(stderr, "stepscope: node %u (%s) is not waited for: %s\n", k,
                ranks, reason);
        put_node(r, k, SS_NODE_NEVER_JOINED, reason, SS_MISSING);
        r->ev.ranks_lost(r->ev.ctx, k, "its node never joined");
        char gone[96];
        snprintf(gone, sizeof gone, "node %u never joined", k);
        ss_remote_stacks_node_gone(r->remote_stacks, k, gone);
    }
    if (r->o->nnodes > 1)
        r->ev.exited(r->ev.ctx);
}

int run_nodes_all_gone(const run_nodes *r)
{
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        if (r->nodes[k].joined && !r->nodes[k].gone)
            return 0;
    return 1;
}

void run_nodes_close(run_nodes *r)
{
    if (!r)
        return;
    ss_remote_stacks_close(r->remote_stacks); /* its fetches answer now */
    r->remote_stacks = NULL;
    ss_node_links_close(r->links);
    r->links = NULL;
}

void run_nodes_free(run_nodes *r)
{
    if (!r)
        return;
    free(r->nodes);
    free(r->remote_host);
    free(r->remote_stop);
    free(r);
}

void run_nodes_set_attempt(run_nodes *r, uint32_t attempt)
{
    r->attempt = attempt;
}

int run_nodes_status(const run_nodes *r)
{
    for (uint32_t k = 1; k < r->o->nnodes; k++)
        if (r->nodes[k].status != 0)
            return r->nodes[k].status;
    return 0;
}

ss_remote_stacks *run_nodes_stacks(run_nodes *r)
{
    return r->remote_stacks;
}

void run_nodes_stop_all(run_nodes *r, int kill_now, const char *reason)
{
    if (r)
        ss_node_links_stop_all(r->links, kill_now, reason);
}

int run_nodes_inject(run_nodes *r, uint32_t node, const link_inject *x)
{
    return ss_node_links_inject(r->links, node, x);
}

void run_nodes_end_all(run_nodes *r)
{
    if (r)
        ss_node_links_end_all(r->links);
}
