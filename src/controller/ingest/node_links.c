/*
 * node_links.c - accepts agent links, authenticates them, and turns what
 * they carry into ingest channels and callbacks.
 *
 * Each link owns its connection (link_conn.h: the socket, the reading
 * and decoding of frames, their MACs, the bounded send queue), its
 * handshake state and the list of its open channels (one per rank
 * connection on the agent's host, by the agent's channel id).  Until the
 * agent has proved it knows the secret, the connection's read buffer holds
 * one handshake frame.  One timer per link: before the join it fires once,
 * at the handshake deadline counted from the connection; after it, it
 * repeats, sending heartbeats and noticing the heartbeat timeout.  The
 * links still in the handshake are also kept in the order they connected,
 * so that a connection over a cap closes the oldest.  A link whose peer
 * stops reading (more than SS_LINK_CONN_MAX_QUEUED bytes waiting) or
 * whose write fails ends, and a joined node is reported lost, rather than
 * growing memory.  All state is touched only from the loop thread.
 */
#include "node_links.h"
#include "clock_sync.h"
#include "clocks.h"
#include "link_conn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ST_HELLO, ST_PROOF, ST_JOINED, ST_CLOSING };

/* Why a connection that never joined was closed, as the summary counts. */
enum {
    R_DEADLINE, R_PROTOCOL, R_AUTH, R_CLOSED, R_CAP_ADDR, R_CAP_TOTAL,
    R_REFUSED, R_OTHER, R_COUNT
};

static const char *const k_refusal_names[R_COUNT] = {
    "no handshake within the deadline",
    "protocol error",
    "authentication failed",
    "closed before joining",
    "too many handshakes from one address",
    "too many handshakes at once",
    "refused by the run",
    "connection failed",
};

struct peer;

/* A link's channels live in a table of CHAN_BUCKETS chains by id (an
 * agent numbers its channels in order, so they spread evenly): every DATA
 * frame looks its channel up, and a node may have hundreds. */
#define CHAN_BUCKETS 256

typedef struct chan {
    uint32_t id;
    ss_ingest_channel *ch;
    ss_ingest_transport tr;
    struct peer *owner;
    struct chan *next; /* its bucket's chain */
} chan;

typedef struct peer {
    ss_link_conn *conn;
    uv_timer_t timer;
    ss_node_links *owner;
    struct peer *prev, *next;
    int stage;
    int said_bye;
    int handles_open;
    link_agent_hello hello;
    uint8_t nonce[LINK_NONCE_SIZE];
    int64_t clock_offset_ns; /* the channels' transports point here */
    ss_clock_limits clock_limits; /* what its time exchanges allow */
    uint64_t last_rx_ms;
    char addr[64];           /* "ip:port" */
    char ip[48];             /* what the per-address cap counts by */
    int waiting;             /* in the owner's handshake list */
    struct peer *wprev, *wnext;
    chan *by_id[CHAN_BUCKETS];
} peer;

struct ss_node_links {
    uv_loop_t *loop;
    uv_tcp_t server;
    ss_ingest *ingest;
    ss_node_links_config cfg;
    link_secret secret;
    char run_uuid[LINK_MAX_STR + 1];
    uint8_t rank_token[LINK_TOKEN_SIZE];
    ss_node_links_callbacks cb;
    peer *links;
    uint32_t n_links;
    peer *wait_head, *wait_tail; /* in the handshake, oldest first */
    uint32_t n_waiting;
    /* refusals: the first of a quiet period is told, the rest counted */
    uv_timer_t refusal_timer;
    int refusal_timer_open;
    int told_in_period;
    uint64_t period_start_ms;
    uint64_t untold;
    uint64_t untold_by[R_COUNT];
    char last_refused[64];
    int server_open;
    int closing;
    uint16_t port;
};

static void maybe_free(ss_node_links *nl)
{
    if (nl->closing && !nl->server_open && !nl->refusal_timer_open &&
        nl->n_links == 0)
        free(nl);
}

/* ---- the links in the handshake ---- */

static void wait_add(peer *l)
{
    ss_node_links *nl = l->owner;
    l->waiting = 1;
    l->wprev = nl->wait_tail;
    l->wnext = NULL;
    if (nl->wait_tail)
        nl->wait_tail->wnext = l;
    else
        nl->wait_head = l;
    nl->wait_tail = l;
    nl->n_waiting++;
}

static void wait_remove(peer *l)
{
    if (!l->waiting)
        return;
    ss_node_links *nl = l->owner;
    if (l->wprev)
        l->wprev->wnext = l->wnext;
    else
        nl->wait_head = l->wnext;
    if (l->wnext)
        l->wnext->wprev = l->wprev;
    else
        nl->wait_tail = l->wprev;
    l->waiting = 0;
    nl->n_waiting--;
}

/* ---- refusals, counted ---- */

/* Tells what the period held beyond its first refusal. */
static void flush_refusals(ss_node_links *nl)
{
    if (nl->untold == 0)
        return;
    char reasons[512];
    size_t n = 0;
    reasons[0] = '\0';
    for (int i = 0; i < R_COUNT; i++) {
        if (!nl->untold_by[i] || n >= sizeof reasons)
            continue;
        int w = snprintf(reasons + n, sizeof reasons - n, "%s%" PRIu64 " %s",
                         n ? ", " : "", nl->untold_by[i], k_refusal_names[i]);
        n += w > 0 ? (size_t)w : 0;
    }
    if (n < sizeof reasons)
        snprintf(reasons + n, sizeof reasons - n, "; the last from %s",
                 nl->last_refused);
    double seconds = (uv_now(nl->loop) - nl->period_start_ms) / 1000.0;
    if (nl->cb.on_refusals)
        nl->cb.on_refusals(nl->cb.ctx, nl->untold, seconds, reasons);
    nl->untold = 0;
    memset(nl->untold_by, 0, sizeof nl->untold_by);
}

/* The end of a period: a summary if it had more refusals, and another
 * period; after a quiet one the next refusal is told at once. */
static void on_refusal_timer(uv_timer_t *t)
{
    ss_node_links *nl = t->data;
    if (nl->untold == 0) {
        nl->told_in_period = 0;
        return;
    }
    flush_refusals(nl);
    nl->period_start_ms = uv_now(nl->loop);
    uv_timer_start(&nl->refusal_timer, on_refusal_timer,
                   nl->cfg.refusal_report_ms, 0);
}

static void note_refusal(ss_node_links *nl, const char *addr, int cat,
                         const char *why)
{
    if (nl->told_in_period) {
        nl->untold++;
        nl->untold_by[cat]++;
        snprintf(nl->last_refused, sizeof nl->last_refused, "%s", addr);
        return;
    }
    nl->told_in_period = 1;
    nl->period_start_ms = uv_now(nl->loop);
    uv_timer_start(&nl->refusal_timer, on_refusal_timer,
                   nl->cfg.refusal_report_ms, 0);
    if (nl->cb.on_refused)
        nl->cb.on_refused(nl->cb.ctx, addr, why);
}

/* One of L's two handles (its timer, its connection) has closed. */
static void link_handle_gone(peer *l)
{
    if (--l->handles_open > 0)
        return;
    ss_node_links *nl = l->owner;
    if (l->prev)
        l->prev->next = l->next;
    else
        nl->links = l->next;
    if (l->next)
        l->next->prev = l->prev;
    nl->n_links--;
    free(l);
    maybe_free(nl);
}

static void on_timer_closed(uv_handle_t *h)
{
    link_handle_gone(h->data);
}

static void on_conn_closed(void *ctx)
{
    link_handle_gone(ctx);
}

/* Closes L.  A joined link's channels are reported gone first; REPORT
 * says whether the node's end is reported (not when the controller closes
 * every link itself); a link that never joined is counted as a refusal
 * of cause CAT.  FLUSH: what was sent is written before the socket
 * closes (a refusal). */
static void link_close_flush(peer *l, int cat, const char *why, int report,
                             int flush)
{
    if (l->stage == ST_CLOSING)
        return;
    int joined = l->stage == ST_JOINED;
    l->stage = ST_CLOSING;
    ss_node_links *nl = l->owner;
    wait_remove(l);
    for (size_t b = 0; b < CHAN_BUCKETS; b++)
        while (l->by_id[b]) {
            chan *c = l->by_id[b];
            l->by_id[b] = c->next;
            ss_ingest_channel_gone(c->ch);
            free(c);
        }
    if (report && joined && nl->cb.on_node_gone)
        nl->cb.on_node_gone(nl->cb.ctx, l->hello.node_rank, l->said_bye,
                            l->said_bye ? "said goodbye" : why);
    else if (report && !joined)
        note_refusal(nl, l->addr, cat, why);
    uv_close((uv_handle_t *)&l->timer, on_timer_closed);
    ss_link_conn_close(l->conn, flush);
}

static void link_close(peer *l, int cat, const char *why, int report)
{
    link_close_flush(l, cat, why, report, 0);
}

/* Encodes F and queues it.  Returns -1 when it was not sent: the link is
 * closing, or its connection ends (told through on_conn_end: a peer that
 * stopped reading, a failed write). */
static int link_send(peer *l, const link_frame *f)
{
    if (l->stage == ST_CLOSING)
        return -1;
    return ss_link_conn_send(l->conn, f);
}

/* ---- channels ---- */

static int chan_write(void *ctx, const uint8_t *bytes, size_t len)
{
    chan *c = ctx;
    link_frame f = {.type = LINK_DATA};
    f.u.data = (link_data){c->id, (uint32_t)len, bytes};
    return link_send(c->owner, &f);
}

static void chan_link(peer *l, chan *c)
{
    chan **b = &l->by_id[c->id % CHAN_BUCKETS];
    c->next = *b;
    *b = c;
}

static void chan_unlink(chan *c)
{
    for (chan **p = &c->owner->by_id[c->id % CHAN_BUCKETS]; *p;
         p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            return;
        }
}

/* The controller closed the channel: tell the agent, forget it. */
static void chan_closed(void *ctx)
{
    chan *c = ctx;
    peer *l = c->owner;
    chan_unlink(c);
    link_frame f = {.type = LINK_CLOSE};
    f.u.channel.channel = c->id;
    free(c);
    link_send(l, &f);
}

static chan *chan_find(peer *l, uint32_t id)
{
    for (chan *c = l->by_id[id % CHAN_BUCKETS]; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

static void on_timer(uv_timer_t *t);

/* ---- the handshake ---- */

static void on_agent_hello(peer *l, const link_agent_hello *h)
{
    ss_node_links *nl = l->owner;
    l->hello = *h;
    link_random(l->nonce, sizeof l->nonce);
    link_frame f = {.type = LINK_CHALLENGE};
    memcpy(f.u.challenge.nonce, l->nonce, sizeof l->nonce);
    link_auth_controller_proof(&nl->secret, &l->hello, l->nonce,
                               f.u.challenge.proof);
    l->stage = ST_PROOF;
    link_send(l, &f);
}

static void on_proof(peer *l, const link_proof *p)
{
    ss_node_links *nl = l->owner;
    uint8_t want[LINK_PROOF_SIZE];
    link_auth_agent_proof(&nl->secret, &l->hello, l->nonce, want);
    if (!link_auth_proof_equal(want, p->proof)) {
        link_close(l, R_AUTH, "authentication failed: the agent does not "
                   "know the run's secret", 1);
        return;
    }
    uint8_t key[LINK_KEY_SIZE];
    link_auth_session_key(&nl->secret, &l->hello, l->nonce, key);
    ss_link_conn_keyed(l->conn, key);
    char reason[LINK_MAX_STR + 1] = "refused by the controller";
    if (nl->cb.on_join &&
        nl->cb.on_join(nl->cb.ctx, &l->hello, l->addr, reason,
                       sizeof reason) != 0) {
        link_frame f = {.type = LINK_JOIN_REJECT};
        snprintf(f.u.join_reject.reason, sizeof f.u.join_reject.reason, "%s",
                 reason);
        note_refusal(nl, l->addr, R_REFUSED, reason);
        link_send(l, &f);
        link_close_flush(l, R_REFUSED, reason, 0, 1);
        return;
    }
    link_frame f = {.type = LINK_JOIN_OK};
    f.u.join_ok.attempt = nl->cfg.attempt;
    f.u.join_ok.world_size = nl->cfg.world_size;
    f.u.join_ok.controller_mono_ns = ss_mono_now();
    link_auth_seal_token(key, nl->rank_token, f.u.join_ok.sealed_token);
    f.u.join_ok.aggregate = nl->cfg.aggregate;
    f.u.join_ok.node_rank = l->hello.node_rank;
    snprintf(f.u.join_ok.run_uuid, sizeof f.u.join_ok.run_uuid, "%s",
             nl->run_uuid);
    l->stage = ST_JOINED;
    wait_remove(l);
    l->last_rx_ms = uv_now(nl->loop);
    uv_timer_start(&l->timer, on_timer, nl->cfg.heartbeat_ms,
                   nl->cfg.heartbeat_ms);
    link_send(l, &f);
}

/* ---- frames of a joined node ---- */

static void on_joined_frame(peer *l, const link_frame *f)
{
    ss_node_links *nl = l->owner;
    const ss_node_links_callbacks *cb = &nl->cb;
    uint32_t node = l->hello.node_rank;
    switch (f->type) {
    case LINK_OPEN: {
        if (chan_find(l, f->u.channel.channel)) {
            link_close(l, R_OTHER, "it opened a channel twice", 1);
            return;
        }
        chan *c = calloc(1, sizeof *c);
        if (!c)
            return;
        c->id = f->u.channel.channel;
        c->owner = l;
        c->tr = (ss_ingest_transport){c, chan_write, chan_closed,
                                      &l->clock_offset_ns,
                                      node * l->hello.nproc_per_node,
                                      l->hello.nproc_per_node};
        c->ch = ss_ingest_channel_open(nl->ingest, &c->tr);
        if (!c->ch) {
            free(c);
            link_frame cl = {.type = LINK_CLOSE};
            cl.u.channel.channel = f->u.channel.channel;
            link_send(l, &cl);
            return;
        }
        chan_link(l, c);
        return;
    }
    case LINK_DATA: {
        /* A channel we closed may still have bytes in flight: dropped. */
        chan *c = chan_find(l, f->u.data.channel);
        if (c)
            ss_ingest_channel_feed(c->ch, f->u.data.bytes, f->u.data.len);
        return;
    }
    case LINK_CLOSE: {
        chan *c = chan_find(l, f->u.channel.channel);
        if (c) {
            chan_unlink(c);
            ss_ingest_channel_gone(c->ch);
            free(c);
        }
        return;
    }
    case LINK_TIME_REQ: {
        int64_t t2 = ss_mono_now();
        ss_clock_limits_add(&l->clock_limits, f->u.time_req.t1, t2);
        link_frame r = {.type = LINK_TIME_RESP};
        r.u.time_resp = (link_time_resp){f->u.time_req.t1, t2, ss_mono_now()};
        link_send(l, &r);
        return;
    }
    case LINK_CLOCK: {
        char why[200];
        if (ss_clock_limits_check(&l->clock_limits, f->u.clock.offset_ns,
                                  f->u.clock.bound_ns, why, sizeof why) != 0) {
            link_close(l, R_OTHER, why, 1);
            return;
        }
        l->clock_offset_ns = f->u.clock.offset_ns;
        if (cb->on_clock)
            cb->on_clock(cb->ctx, node, &f->u.clock);
        return;
    }
    case LINK_HEARTBEAT:
        return;
    case LINK_RANK_STARTED:
        if (cb->on_rank_started)
            cb->on_rank_started(cb->ctx, node, &f->u.rank_started);
        return;
    case LINK_RANK_EXIT:
        if (cb->on_rank_exit)
            cb->on_rank_exit(cb->ctx, node, &f->u.rank_exit);
        return;
    case LINK_ALL_EXITED:
        if (cb->on_all_exited)
            cb->on_all_exited(cb->ctx, node, &f->u.all_exited);
        return;
    case LINK_HOST:
        if (cb->on_host)
            cb->on_host(cb->ctx, node, &f->u.host);
        return;
    case LINK_RANK_STOP:
        if (cb->on_rank_stop)
            cb->on_rank_stop(cb->ctx, node, &f->u.rank_stop);
        return;
    case LINK_HEALTH:
        if (cb->on_health)
            cb->on_health(cb->ctx, node, &f->u.health);
        return;
    case LINK_STACKS_PART:
        if (cb->on_stacks_part)
            cb->on_stacks_part(cb->ctx, node, &f->u.stacks_part);
        return;
    case LINK_RECENT_PART:
        if (cb->on_recent_part)
            cb->on_recent_part(cb->ctx, node, &f->u.recent_part);
        return;
    case LINK_NODE_STATUS: {
        /* each a whole STATUS frame of a channel, between its DATA */
        size_t off = 0, n;
        uint32_t id;
        const uint8_t *bytes;
        while (link_node_status_next(&f->u.node_status, &off, &id, &bytes,
                                     &n)) {
            chan *c = chan_find(l, id);
            if (c)
                ss_ingest_channel_feed(c->ch, bytes, n);
        }
        return;
    }
    case LINK_NODE_PARTIAL: {
        if (nl->cfg.aggregate != LINK_AGGREGATE_NODE) {
            link_close(l, R_OTHER, "it sent a node partial to a run that "
                       "aggregates by rank", 1);
            return;
        }
        if (cb->on_partial) {
            ss_node_partial *p = (ss_node_partial *)f->u.partial.p;
            ss_np_shift(p, l->clock_offset_ns);
            cb->on_partial(cb->ctx, node, p);
        }
        return;
    }
    case LINK_BYE:
        l->said_bye = 1;
        return;
    default:
        link_close(l, R_OTHER, "it sent a frame out of place", 1);
        return;
    }
}

/* ---- reading ---- */

static void on_conn_frame(void *ctx, const link_frame *f)
{
    peer *l = ctx;
    if (l->stage == ST_CLOSING)
        return;
    l->last_rx_ms = uv_now(l->owner->loop);
    if (l->stage == ST_HELLO && f->type == LINK_AGENT_HELLO)
        on_agent_hello(l, &f->u.hello);
    else if (l->stage == ST_PROOF && f->type == LINK_PROOF)
        on_proof(l, &f->u.proof);
    else if (l->stage == ST_JOINED)
        on_joined_frame(l, f);
    else
        link_close(l, R_PROTOCOL, "it broke the handshake", 1);
}

/* The connection ended on its own: the peer closed it, broke the
 * protocol, or stopped reading. */
static void on_conn_end(void *ctx, ss_link_end end, const char *why)
{
    peer *l = ctx;
    link_close(l, end == SS_LINK_END_PEER       ? R_CLOSED
                  : end == SS_LINK_END_PROTOCOL ? R_PROTOCOL
                                                : R_OTHER,
               why, 1);
}

static void on_timer(uv_timer_t *t)
{
    peer *l = t->data;
    ss_node_links *nl = l->owner;
    if (l->stage != ST_JOINED) {
        char why[96];
        snprintf(why, sizeof why, "no handshake within %.1f s of connecting",
                 nl->cfg.handshake_timeout_ms / 1000.0);
        link_close(l, R_DEADLINE, why, 1);
        return;
    }
    uint64_t silent = uv_now(nl->loop) - l->last_rx_ms;
    if (silent >= nl->cfg.heartbeat_timeout_ms) {
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %.1f s (timeout %.1f s)",
                 silent / 1000.0, nl->cfg.heartbeat_timeout_ms / 1000.0);
        link_close(l, R_OTHER, why, 1);
        return;
    }
    link_frame f = {.type = LINK_HEARTBEAT};
    link_send(l, &f);
}

/* "ip:port" into OUT, the ip alone into IP (48 bytes). */
static void peer_name(uv_tcp_t *tcp, char *out, size_t n, char *ip)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    snprintf(out, n, "?");
    snprintf(ip, 48, "?");
    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    int port = 0;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, 48);
        port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, ip, 48);
        port = ntohs(a->sin6_port);
    }
    snprintf(out, n, "%s:%d", ip, port);
}

/* A new link from IP is about to wait in the handshake: over a cap, the
 * oldest waiting link under that cap (from IP, or of all) gives way. */
static void make_room(ss_node_links *nl, const char *ip)
{
    uint32_t same = 0;
    peer *oldest_same = NULL;
    for (peer *w = nl->wait_head; w; w = w->wnext)
        if (!strcmp(w->ip, ip)) {
            if (!oldest_same)
                oldest_same = w;
            same++;
        }
    if (same >= nl->cfg.max_preauth_per_addr && oldest_same) {
        char why[128];
        snprintf(why, sizeof why, "closed: %u handshakes waited from its "
                 "address (at most %u)", same, nl->cfg.max_preauth_per_addr);
        link_close(oldest_same, R_CAP_ADDR, why, 1);
    }
    if (nl->n_waiting >= nl->cfg.max_preauth && nl->wait_head) {
        char why[128];
        snprintf(why, sizeof why, "closed: %u handshakes waited (at most "
                 "%u)", nl->n_waiting, nl->cfg.max_preauth);
        link_close(nl->wait_head, R_CAP_TOTAL, why, 1);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    ss_node_links *nl = server->data;
    if (status < 0 || nl->closing)
        return;
    peer *l = calloc(1, sizeof *l);
    if (!l)
        return;
    l->owner = nl;
    ss_link_conn_config ccfg = {.sends = LINK_FROM_CONTROLLER};
    ss_link_conn_callbacks ccb = {l, on_conn_frame, on_conn_end,
                                  on_conn_closed};
    l->conn = ss_link_conn_new(nl->loop, &ccfg, &ccb);
    if (!l->conn) {
        free(l);
        return;
    }
    uv_timer_init(nl->loop, &l->timer);
    l->timer.data = l;
    l->handles_open = 2;
    l->next = nl->links;
    if (nl->links)
        nl->links->prev = l;
    nl->links = l;
    nl->n_links++;
    l->last_rx_ms = uv_now(nl->loop);
    uv_tcp_t *tcp = ss_link_conn_tcp(l->conn);
    if (uv_accept(server, (uv_stream_t *)tcp) < 0) {
        link_close(l, R_OTHER, "accept failed", 0);
        return;
    }
    uv_tcp_nodelay(tcp, 1);
    peer_name(tcp, l->addr, sizeof l->addr, l->ip);
    make_room(nl, l->ip);
    wait_add(l);
    uv_timer_start(&l->timer, on_timer, nl->cfg.handshake_timeout_ms, 0);
    ss_link_conn_start(l->conn);
}

ss_node_links *ss_node_links_start(uv_loop_t *loop, ss_ingest *ingest,
                                   const ss_node_links_config *cfg,
                                   const ss_node_links_callbacks *cb,
                                   char *err, size_t errlen)
{
    ss_node_links *nl = calloc(1, sizeof *nl);
    if (!nl) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    nl->loop = loop;
    nl->ingest = ingest;
    nl->cfg = *cfg;
    nl->cb = *cb;
    nl->secret = *cfg->secret;
    nl->cfg.secret = &nl->secret;
    snprintf(nl->run_uuid, sizeof nl->run_uuid, "%s", cfg->run_uuid);
    nl->cfg.run_uuid = nl->run_uuid;
    memcpy(nl->rank_token, cfg->rank_token, LINK_TOKEN_SIZE);
    nl->cfg.rank_token = nl->rank_token;
    if (!nl->cfg.heartbeat_ms)
        nl->cfg.heartbeat_ms = 1000;
    if (!nl->cfg.heartbeat_timeout_ms)
        nl->cfg.heartbeat_timeout_ms = 10000;
    if (!nl->cfg.handshake_timeout_ms)
        nl->cfg.handshake_timeout_ms = 10000;
    if (!nl->cfg.max_preauth)
        nl->cfg.max_preauth = SS_NODE_LINKS_MAX_PREAUTH;
    if (!nl->cfg.max_preauth_per_addr)
        nl->cfg.max_preauth_per_addr = SS_NODE_LINKS_MAX_PREAUTH_PER_ADDR;
    if (!nl->cfg.refusal_report_ms)
        nl->cfg.refusal_report_ms = SS_NODE_LINKS_REFUSAL_REPORT_MS;
    const char *host = cfg->bind_addr ? cfg->bind_addr : "0.0.0.0";
    nl->cfg.bind_addr = NULL;
    struct sockaddr_storage addr;
    int rc = strchr(host, ':')
                 ? uv_ip6_addr(host, cfg->port, (struct sockaddr_in6 *)&addr)
                 : uv_ip4_addr(host, cfg->port, (struct sockaddr_in *)&addr);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on '%s': not an IP address",
                 host);
        free(nl);
        return NULL;
    }
    uv_timer_init(loop, &nl->refusal_timer);
    nl->refusal_timer.data = nl;
    nl->refusal_timer_open = 1;
    uv_tcp_init(loop, &nl->server);
    nl->server.data = nl;
    nl->server_open = 1;
    rc = uv_tcp_bind(&nl->server, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&nl->server, 256, on_connection);
    if (rc < 0) {
        snprintf(err, errlen, "listen on %s:%u for the agents: %s", host,
                 (unsigned)cfg->port, uv_strerror(rc));
        ss_node_links_close(nl);
        return NULL;
    }
    struct sockaddr_storage got;
    int len = sizeof got;
    uv_tcp_getsockname(&nl->server, (struct sockaddr *)&got, &len);
    nl->port = ntohs(got.ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)&got)->sin6_port
                         : ((struct sockaddr_in *)&got)->sin_port);
    return nl;
}

void ss_node_links_stop_all(ss_node_links *nl, int kill_now,
                            const char *reason)
{
    if (!nl)
        return;
    link_frame f = {.type = LINK_STOP};
    f.u.stop.kill_now = (uint8_t)(kill_now != 0);
    snprintf(f.u.stop.reason, sizeof f.u.stop.reason, "%s",
             reason ? reason : "");
    for (peer *l = nl->links; l; l = l->next)
        if (l->stage == ST_JOINED)
            link_send(l, &f);
}

void ss_node_links_restart_all(ss_node_links *nl, uint32_t attempt)
{
    if (!nl || attempt == 0)
        return;
    nl->cfg.attempt = attempt;
    link_frame f = {.type = LINK_RESTART};
    f.u.restart.attempt = attempt;
    for (peer *l = nl->links; l; l = l->next)
        if (l->stage == ST_JOINED)
            link_send(l, &f);
}

void ss_node_links_end_all(ss_node_links *nl)
{
    if (!nl)
        return;
    link_frame f = {.type = LINK_END};
    for (peer *l = nl->links; l; l = l->next)
        if (l->stage == ST_JOINED)
            link_send(l, &f);
}

/* Sends F to joined node NODE: 0, or -1 when it is not joined or F is
 * refused. */
static int send_to_node(ss_node_links *nl, uint32_t node, const link_frame *f)
{
    if (!nl)
        return -1;
    for (peer *l = nl->links; l; l = l->next)
        if (l->stage == ST_JOINED && l->hello.node_rank == node)
            return link_send(l, f);
    return -1;
}

int ss_node_links_inject(ss_node_links *nl, uint32_t node,
                         const link_inject *x)
{
    link_frame f = {.type = LINK_INJECT};
    f.u.inject = *x;
    return send_to_node(nl, node, &f);
}

int ss_node_links_stacks(ss_node_links *nl, uint32_t node,
                         const link_stacks_req *req)
{
    link_frame f = {.type = LINK_STACKS_REQ};
    f.u.stacks_req = *req;
    return send_to_node(nl, node, &f);
}

int ss_node_links_recent(ss_node_links *nl, uint32_t node,
                         const link_recent_req *req)
{
    link_frame f = {.type = LINK_RECENT_REQ};
    f.u.recent_req = *req;
    return send_to_node(nl, node, &f);
}

static void on_server_closed(uv_handle_t *h)
{
    ss_node_links *nl = h->data;
    nl->server_open = 0;
    maybe_free(nl);
}

static void on_refusal_timer_closed(uv_handle_t *h)
{
    ss_node_links *nl = h->data;
    nl->refusal_timer_open = 0;
    maybe_free(nl);
}

void ss_node_links_close(ss_node_links *nl)
{
    if (!nl)
        return;
    nl->closing = 1;
    flush_refusals(nl);
    if (nl->refusal_timer_open &&
        !uv_is_closing((uv_handle_t *)&nl->refusal_timer))
        uv_close((uv_handle_t *)&nl->refusal_timer, on_refusal_timer_closed);
    for (peer *l = nl->links; l; l = l->next)
        link_close(l, R_OTHER, "the controller closed", 0);
    if (nl->server_open && !uv_is_closing((uv_handle_t *)&nl->server))
        uv_close((uv_handle_t *)&nl->server, on_server_closed);
    else
        maybe_free(nl);
}

uint16_t ss_node_links_port(const ss_node_links *nl)
{
    return nl->port;
}
