/*
 * node_links_test.c - the controller's side of the agent link on a real
 * loop and real TCP, against a scripted agent on a thread (blocking
 * socket, the link codec): a node that joins, opens a rank connection,
 * exchanges clocks, answers a stacks request in chunks, reports exits and
 * says goodbye; an agent with the
 * wrong secret; an agent whose clock offset its time exchange does not
 * allow (INT64_MAX), and one whose step times overflow with its offset;
 * a node the controller refuses; a node that falls silent;
 * bytes that are not the protocol.  And what strangers can cost before
 * they authenticate: a peer that trickles its hello is closed at the
 * handshake's deadline, an oversized hello at its header, floods of
 * waiting links from one address and from many stay under the caps while
 * a real agent still joins (each flood from its own loopback address,
 * 127.0.0.2 and up), and a burst of refusals is told once and summed.
 * With node aggregation, JOIN_OK says so, a NODE_STATUS's STATUS frame
 * reaches its channel's rank and a NODE_PARTIAL the callback, its times
 * moved by the node's clock offset.
 */
#include "node_links.h"
#include "testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const uint8_t k_token[WIRE_TOKEN_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8,
                                                 9, 10, 11, 12, 13, 14, 15,
                                                 16};

typedef struct {
    int joins, refused, clocks, exits, all_exited, gone, gone_clean;
    int hellos, steps, disconnects;
    int health_ok, health_failed;
    char health_check[64], health_output[128];
    int stacks_parts, stacks_last;
    char stacks[128]; /* the chunks of request 9 for rank 3, joined */
    int64_t last_offset;
    char gone_why[128], refused_why[256];
    int refusal_summaries;
    uint64_t refusals_summed;
    char refusal_reasons[512];
    int refuse_join;
    int64_t step_begin; /* of the last step record, as ingest saw it */
    ss_node_links *nl;
    ss_ingest *in;
    uv_timer_t closer;
    int close_when_gone; /* close everything after this many gone+refused */
    int restart_on_all;  /* the first ALL_EXITED restarts, the next ends */
    int node_mode;       /* the controller aggregates by node */
    int statuses, partials;
    int stops;            /* RANK_STOP frames: rank 2 stopped for 1500 ms */
    uint64_t status_step;
    int64_t partial_latest;  /* the first latest-ending time, moved */
    uint32_t partial_present;
} seen;

static void on_closer(uv_timer_t *t)
{
    seen *s = t->data;
    ss_node_links_close(s->nl);
    ss_ingest_close(s->in);
    uv_close((uv_handle_t *)t, NULL);
}

static void maybe_close(seen *s)
{
    if (s->gone + s->refused >= s->close_when_gone)
        uv_timer_start(&s->closer, on_closer, 50, 0);
}

static int t_join(void *ctx, link_agent_hello *h, const char *addr,
                  char *reason, size_t n)
{
    seen *s = ctx;
    s->joins++;
    if (s->refuse_join) {
        snprintf(reason, n, "node rank %u is taken", h->node_rank);
        return -1;
    }
    return 0;
}

static void t_clock(void *ctx, uint32_t node, const link_clock *c)
{
    seen *s = ctx;
    s->clocks++;
    s->last_offset = c->offset_ns;
}

static void t_exit(void *ctx, uint32_t node, const link_rank_exit *e)
{
    ((seen *)ctx)->exits++;
}

static void t_rank_stop(void *ctx, uint32_t node, const link_rank_stop *st)
{
    seen *s = ctx;
    s->stops += st->rank == 2 && st->state == LINK_STOP_SIGNAL &&
                st->stopped_ms == 1500;
}

static void t_all(void *ctx, uint32_t node, const link_all_exited *a)
{
    seen *s = ctx;
    s->all_exited++;
    if (s->restart_on_all && s->all_exited == 1)
        ss_node_links_restart_all(s->nl, 2);
    else if (s->restart_on_all)
        ss_node_links_end_all(s->nl);
}

/* A node's failed check is answered by an injected fault, so that the
 * scripted agent sees INJECT come back. */
static void t_health(void *ctx, uint32_t node, const link_health *h)
{
    seen *s = ctx;
    if (h->ok) {
        s->health_ok++;
        return;
    }
    s->health_failed++;
    snprintf(s->health_check, sizeof s->health_check, "%s", h->check);
    snprintf(s->health_output, sizeof s->health_output, "%s", h->output);
    link_inject x = {2, SIGSTOP, 250};
    CHECK_EQ_INT(ss_node_links_inject(s->nl, node, &x), 0);
    CHECK_EQ_INT(ss_node_links_inject(s->nl, node + 1, &x), -1);
    link_stacks_req q = {9, 0, 1500};
    CHECK_EQ_INT(ss_node_links_stacks(s->nl, node, &q), 0);
    CHECK_EQ_INT(ss_node_links_stacks(s->nl, node + 1, &q), -1);
}

static void t_stacks_part(void *ctx, uint32_t node, const link_stacks_part *p)
{
    seen *s = ctx;
    s->stacks_parts++;
    if (node != 1 || p->request_id != 9 || p->rank != 3)
        return;
    size_t have = strlen(s->stacks);
    if (have + p->len < sizeof s->stacks)
        memcpy(s->stacks + have, p->bytes, p->len);
    s->stacks_last += p->last;
}

static void t_gone(void *ctx, uint32_t node, int clean, const char *why)
{
    seen *s = ctx;
    s->gone++;
    s->gone_clean = clean;
    snprintf(s->gone_why, sizeof s->gone_why, "%s", why);
    maybe_close(s);
}

static void t_refused(void *ctx, const char *addr, const char *why)
{
    seen *s = ctx;
    s->refused++;
    snprintf(s->refused_why, sizeof s->refused_why, "%s", why);
    maybe_close(s);
}

static void t_refusals(void *ctx, uint64_t count, double seconds,
                       const char *reasons)
{
    seen *s = ctx;
    s->refusal_summaries++;
    s->refusals_summed += count;
    snprintf(s->refusal_reasons, sizeof s->refusal_reasons, "%s", reasons);
}

static int t_hello(void *ctx, const wire_hello *h, char *reason, size_t n)
{
    ((seen *)ctx)->hellos++;
    return 0;
}

static void t_step(void *ctx, uint32_t rank, const ss_step_record *rec,
                   const ss_values_item *values, uint32_t n_values)
{
    seen *s = ctx;
    s->steps++;
    s->step_begin = rec->begin_ns;
}

static void t_status(void *ctx, uint32_t rank, const wire_status *st,
                     int phase, int collective)
{
    seen *s = ctx;
    s->statuses++;
    s->status_step = st->step;
}

static void t_partial(void *ctx, uint32_t node, const ss_node_partial *p)
{
    seen *s = ctx;
    s->partials++;
    s->partial_latest = p->latest[0].value;
    s->partial_present = p->ranks_present;
}

static void t_disconnect(void *ctx, uint32_t rank, int said_bye)
{
    ((seen *)ctx)->disconnects++;
}

static int t_intern(void *ctx, const char *name)
{
    return 1;
}

/* ---- the scripted agent ---- */

typedef enum {
    A_GOOD, A_WRONG_SECRET, A_REFUSED, A_SILENT, A_GARBAGE,
    A_RESTARTS /* ALL_EXITED, then RESTART, ALL_EXITED again, END, BYE */
} script;

typedef struct {
    uint16_t port;
    script what;
    link_secret secret;
    /* out */
    int verified_controller; /* the controller's proof checked out */
    int joined, rejected, got_time_resp, token_ok, got_welcome, closed;
    uint32_t restart_attempt; /* A_RESTARTS: the RESTART frame's attempt */
    int got_end;
    int got_inject;
    char reject_reason[256];
    int64_t clock_offset; /* the estimate it sends; 0: -1000 */
    int64_t step_begin;   /* of its one step; 0: 50000 */
    int aggregate;        /* JOIN_OK's */
} agent;

typedef struct {
    int fd;
    link_encoder enc;
    link_decoder dec;
    uint8_t buf[2 * LINK_FRAME_MAX];
    size_t len;
    uint8_t out[LINK_FRAME_MAX];
} conn;

static int send_frame(conn *c, const link_frame *f)
{
    size_t n = link_encode(&c->enc, c->out, sizeof c->out, f);
    return n && send(c->fd, c->out, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* Reads one frame; returns 1, or 0 at the end of the stream or an error. */
static int read_frame(conn *c, link_frame *f)
{
    for (;;) {
        size_t used = 0;
        char err[200];
        link_result rc = link_decoder_next(&c->dec, c->buf, c->len, f, &used,
                                           err, sizeof err);
        if (rc == LINK_OK) {
            /* DATA points into buf: keep a copy of what tests read */
            static uint8_t data[LINK_MAX_DATA];
            if (f->type == LINK_DATA) {
                memcpy(data, f->u.data.bytes, f->u.data.len);
                f->u.data.bytes = data;
            }
            memmove(c->buf, c->buf + used, c->len - used);
            c->len -= used;
            return 1;
        }
        if (rc == LINK_ERROR)
            return 0;
        ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (n <= 0)
            return 0;
        c->len += (size_t)n;
    }
}

static void *run_agent(void *arg)
{
    agent *a = arg;
    static conn c;
    memset(&c, 0, sizeof c);
    c.fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(a->port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(c.fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return NULL;
    if (a->what == A_GARBAGE) {
        static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
        send(c.fd, junk, sizeof junk - 1, MSG_NOSIGNAL);
        link_frame f;
        link_decoder_init(&c.dec, LINK_FROM_CONTROLLER);
        a->closed = !read_frame(&c, &f);
        close(c.fd);
        return NULL;
    }
    link_encoder_init(&c.enc, LINK_FROM_AGENT);
    link_decoder_init(&c.dec, LINK_FROM_CONTROLLER);
    link_frame f = {.type = LINK_AGENT_HELLO};
    link_agent_hello *h = &f.u.hello;
    h->version = LINK_VERSION;
    h->node_rank = 1;
    h->nnodes = 2;
    h->nproc_per_node = 2;
    link_random(h->nonce, sizeof h->nonce);
    snprintf(h->job_id, sizeof h->job_id, "job7");
    snprintf(h->host, sizeof h->host, "node1");
    link_agent_hello hello = *h;
    send_frame(&c, &f);
    link_frame in;
    if (!read_frame(&c, &in) || in.type != LINK_CHALLENGE)
        goto out;
    uint8_t want[LINK_PROOF_SIZE];
    link_auth_controller_proof(&a->secret, &hello, in.u.challenge.nonce, want);
    a->verified_controller = link_auth_proof_equal(want, in.u.challenge.proof);
    link_frame p = {.type = LINK_PROOF};
    link_auth_agent_proof(&a->secret, &hello, in.u.challenge.nonce,
                          p.u.proof.proof);
    send_frame(&c, &p);
    uint8_t key[LINK_KEY_SIZE];
    link_auth_session_key(&a->secret, &hello, in.u.challenge.nonce, key);
    link_encoder_keyed(&c.enc, key);
    link_decoder_keyed(&c.dec, key);
    if (!read_frame(&c, &in))
        goto out;
    if (in.type == LINK_JOIN_REJECT) {
        a->rejected = 1;
        snprintf(a->reject_reason, sizeof a->reject_reason, "%s",
                 in.u.join_reject.reason);
        goto out;
    }
    if (in.type != LINK_JOIN_OK)
        goto out;
    a->joined = 1;
    a->aggregate = in.u.join_ok.aggregate;
    uint8_t token[LINK_TOKEN_SIZE];
    link_auth_seal_token(key, in.u.join_ok.sealed_token, token);
    a->token_ok = memcmp(token, k_token, sizeof token) == 0;
    if (a->what == A_RESTARTS) {
        link_frame all = {.type = LINK_ALL_EXITED};
        send_frame(&c, &all);
        do {
            if (!read_frame(&c, &in))
                goto out;
        } while (in.type == LINK_HEARTBEAT);
        if (in.type == LINK_RESTART)
            a->restart_attempt = in.u.restart.attempt;
        send_frame(&c, &all); /* the ranks of attempt 2 ended */
        do {
            if (!read_frame(&c, &in))
                goto out;
        } while (in.type == LINK_HEARTBEAT);
        a->got_end = in.type == LINK_END;
        link_frame bye = {.type = LINK_BYE};
        send_frame(&c, &bye);
        goto out;
    }
    if (a->what == A_SILENT) {
        /* say nothing more: the heartbeat timeout must end it */
        while (read_frame(&c, &in))
            ;
        a->closed = 1;
        goto out;
    }
    /* a clock exchange and an estimate */
    link_frame t = {.type = LINK_TIME_REQ};
    t.u.time_req.t1 = 5000;
    send_frame(&c, &t);
    do {
        if (!read_frame(&c, &in))
            goto out;
    } while (in.type == LINK_HEARTBEAT);
    a->got_time_resp = in.type == LINK_TIME_RESP && in.u.time_resp.t1 == 5000;
    link_frame ck = {.type = LINK_CLOCK};
    ck.u.clock = (link_clock){a->clock_offset ? a->clock_offset : -1000, 10,
                              20, 8};
    send_frame(&c, &ck);
    /* rank 2 connects: OPEN, its HELLO and one step */
    link_frame o = {.type = LINK_OPEN};
    o.u.channel.channel = 7;
    send_frame(&c, &o);
    uint8_t rb[1024];
    wire_hello wh;
    memset(&wh, 0, sizeof wh);
    wh.version = WIRE_VERSION;
    wh.rank = 2;
    wh.world_size = 4;
    memcpy(wh.token, token, sizeof wh.token);
    snprintf(wh.run_id, sizeof wh.run_id, "run-uuid");
    snprintf(wh.host, sizeof wh.host, "node1");
    size_t n = wire_encode_hello(rb, sizeof rb, &wh);
    wire_name nm = {1, "forward"};
    n += wire_encode_name(rb + n, sizeof rb - n, &nm);
    static wire_step st;
    st.step = 0;
    st.begin_ns = a->step_begin ? a->step_begin : 50000;
    st.end_ns = st.begin_ns <= INT64_MAX - 10000 ? st.begin_ns + 10000
                                                 : INT64_MAX;
    n += wire_encode_step(rb + n, sizeof rb - n, &st);
    link_frame d = {.type = LINK_DATA};
    d.u.data = (link_data){7, (uint32_t)n, rb};
    send_frame(&c, &d);
    do {
        if (!read_frame(&c, &in))
            goto out;
    } while (in.type == LINK_HEARTBEAT);
    if (in.type == LINK_DATA && in.u.data.channel == 7) {
        wire_decoder wd;
        wire_decoder_init(&wd, WIRE_FROM_CONTROLLER, NULL, NULL);
        wire_frame wf;
        size_t used;
        char err[100];
        a->got_welcome = wire_decoder_next(&wd, in.u.data.bytes,
                                           in.u.data.len, &wf, &used, err,
                                           sizeof err) == WIRE_OK &&
                         wf.type == WIRE_WELCOME;
    }
    if (a->aggregate == LINK_AGGREGATE_NODE) {
        /* the rank's STATUS, batched; the node's partial of step 0 */
        uint8_t sb[64], entries[128];
        wire_status ws = {.step = 0, .since_ns = 60000};
        size_t sn = wire_encode_status(sb, sizeof sb, &ws), len = 0;
        link_node_status_put(entries, sizeof entries, &len, 7, sb, sn);
        link_node_status_put(entries, sizeof entries, &len, 99, sb, sn);
        link_frame ns = {.type = LINK_NODE_STATUS};
        ns.u.node_status = (link_node_status){2, (uint32_t)len, entries};
        send_frame(&c, &ns);
        static ss_node_partial np;
        ss_np_init(&np, 0, 2);
        ss_np_add_rank(&np, 2, st.begin_ns, st.end_ns, 0, NULL, NULL);
        link_frame pf = {.type = LINK_NODE_PARTIAL};
        pf.u.partial.p = &np;
        send_frame(&c, &pf);
    }
    link_frame cl = {.type = LINK_CLOSE};
    cl.u.channel.channel = 7;
    send_frame(&c, &cl);
    /* a health check (failed) and the fault it is answered with */
    link_frame hf = {.type = LINK_HEALTH};
    snprintf(hf.u.health.check, sizeof hf.u.health.check, "command");
    snprintf(hf.u.health.output, sizeof hf.u.health.output, "exit 3\nib0 down");
    send_frame(&c, &hf);
    do {
        if (!read_frame(&c, &in))
            goto out;
    } while (in.type == LINK_HEARTBEAT);
    a->got_inject = in.type == LINK_INJECT && in.u.inject.rank == 2 &&
                    in.u.inject.signal == SIGSTOP &&
                    in.u.inject.duration_ms == 250;
    /* the stacks request that follows, answered in two chunks */
    do {
        if (!read_frame(&c, &in))
            goto out;
    } while (in.type == LINK_HEARTBEAT);
    if (in.type == LINK_STACKS_REQ && in.u.stacks_req.deadline_ms == 1500) {
        static const char obj[] = "{\"rank\":3,\"threads\":[]}";
        link_frame sp = {.type = LINK_STACKS_PART};
        sp.u.stacks_part = (link_stacks_part){in.u.stacks_req.request_id, 3,
                                              0, 10, (const uint8_t *)obj};
        send_frame(&c, &sp);
        sp.u.stacks_part.last = 1;
        sp.u.stacks_part.bytes = (const uint8_t *)obj + 10;
        sp.u.stacks_part.len = sizeof obj - 1 - 10;
        send_frame(&c, &sp);
    }
    link_frame rs = {.type = LINK_RANK_STOP};
    rs.u.rank_stop = (link_rank_stop){2, LINK_STOP_SIGNAL, 1500};
    send_frame(&c, &rs);
    link_frame ex = {.type = LINK_RANK_EXIT};
    ex.u.rank_exit.rank = 2;
    send_frame(&c, &ex);
    link_frame all = {.type = LINK_ALL_EXITED};
    send_frame(&c, &all);
    link_frame bye = {.type = LINK_BYE};
    send_frame(&c, &bye);
out:
    close(c.fd);
    return NULL;
}

/* Runs a controller and one scripted agent to the end. */
static void run_case(seen *s, agent *a, const char *controller_secret,
                     uint32_t heartbeat_timeout_ms)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    signal(SIGPIPE, SIG_IGN);
    char path[108];
    snprintf(path, sizeof path, "/tmp/ss-nl-test-%d.sock", (int)getpid());
    unlink(path);
    ss_ingest_config icfg = {.unix_path = path, .run_id = "run-uuid"};
    memcpy(icfg.token, k_token, sizeof k_token);
    ss_ingest_callbacks icb = {.ctx = s, .intern = t_intern,
                               .on_hello = t_hello, .on_step = t_step,
                               .on_disconnect = t_disconnect,
                               .on_status = t_status};
    char err[256];
    s->in = ss_ingest_start(&loop, &icfg, &icb, err, sizeof err);
    REQUIRE(s->in != NULL);
    link_secret secret;
    REQUIRE(link_secret_load(NULL, controller_secret, &secret, err,
                             sizeof err) == 0);
    ss_node_links_config cfg = {.bind_addr = "127.0.0.1",
                                .secret = &secret,
                                .run_uuid = "run-uuid",
                                .world_size = 4,
                                .rank_token = k_token,
                                .heartbeat_ms = 100,
                                .heartbeat_timeout_ms = heartbeat_timeout_ms,
                                .handshake_timeout_ms = 2000,
                                .aggregate = s->node_mode
                                                 ? LINK_AGGREGATE_NODE
                                                 : LINK_AGGREGATE_RANK};
    ss_node_links_callbacks cb = {s,      t_join, t_clock, NULL,     t_exit,
                                  t_all,  NULL,   t_gone,  t_refused,
                                  t_health, t_stacks_part, t_refusals,
                                  t_partial, t_rank_stop, NULL};
    s->nl = ss_node_links_start(&loop, s->in, &cfg, &cb, err, sizeof err);
    REQUIRE(s->nl != NULL);
    uv_timer_init(&loop, &s->closer);
    s->closer.data = s;
    if (!s->close_when_gone)
        s->close_when_gone = 1;
    a->port = ss_node_links_port(s->nl);
    pthread_t th;
    pthread_create(&th, NULL, run_agent, a);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

static const char *k_secret = "a-test-secret-of-enough-length";

static void a_node_joins_works_and_leaves(void)
{
    seen s = {0};
    agent a = {.what = A_GOOD};
    char err[100];
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.verified_controller);
    CHECK(a.joined && a.token_ok && a.got_time_resp && a.got_welcome);
    CHECK_EQ_INT(s.joins, 1);
    CHECK_EQ_INT(s.clocks, 1);
    CHECK_EQ_INT(s.hellos, 1);
    CHECK_EQ_INT(s.steps, 1);
    CHECK_EQ_INT(s.step_begin, 49000); /* moved by the node's offset */
    CHECK_EQ_INT(s.disconnects, 1);
    CHECK_EQ_INT(s.exits, 1);
    CHECK_EQ_INT(s.stops, 1);
    CHECK_EQ_INT(s.all_exited, 1);
    CHECK_EQ_INT(s.gone, 1);
    CHECK_EQ_INT(s.gone_clean, 1);
    CHECK_EQ_INT(s.health_failed, 1);
    CHECK_STR(s.health_check, "command");
    CHECK_STR(s.health_output, "exit 3\nib0 down");
    CHECK(a.got_inject);
    CHECK_EQ_INT(s.stacks_parts, 2);
    CHECK_EQ_INT(s.stacks_last, 1);
    CHECK_STR(s.stacks, "{\"rank\":3,\"threads\":[]}");
    CHECK_EQ_INT(a.aggregate, LINK_AGGREGATE_RANK);
    CHECK_EQ_INT(s.statuses, 0);
    CHECK_EQ_INT(s.partials, 0);
}

/* The same node in a run that aggregates by node: JOIN_OK says so, the
 * batched STATUS reaches rank 2 through its channel (the entry for a
 * channel that does not exist is dropped), the partial is passed on with
 * its time moved by the node's offset (-1000 ns). */
static void a_node_aggregates_by_node(void)
{
    seen s = {.node_mode = 1};
    agent a = {.what = A_GOOD};
    char err[100];
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.joined && a.got_welcome);
    CHECK_EQ_INT(a.aggregate, LINK_AGGREGATE_NODE);
    CHECK_EQ_INT(s.statuses, 1);
    CHECK_EQ_INT(s.status_step, 0);
    CHECK_EQ_INT(s.partials, 1);
    CHECK_EQ_INT(s.partial_present, 1);
    CHECK_EQ_INT(s.partial_latest, 50000 + 10000 - 1000);
    CHECK_EQ_INT(s.gone_clean, 1);
}

static void a_wrong_secret_is_refused_both_ways(void)
{
    seen s = {0};
    agent a = {.what = A_WRONG_SECRET};
    char err[100];
    REQUIRE(link_secret_load(NULL, "another-secret-entirely!", &a.secret, err,
                             sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(!a.verified_controller); /* the agent sees a fake controller */
    CHECK(!a.joined);
    CHECK_EQ_INT(s.joins, 0);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "authentication failed") != NULL);
    CHECK_EQ_INT(s.gone, 0);
}

static void a_refused_node_is_told_why(void)
{
    seen s = {.refuse_join = 1};
    agent a = {.what = A_REFUSED};
    char err[100];
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.rejected);
    CHECK_STR(a.reject_reason, "node rank 1 is taken");
    CHECK_EQ_INT(s.gone, 0);
}

static void a_silent_node_is_lost(void)
{
    seen s = {0};
    agent a = {.what = A_SILENT};
    char err[100];
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 400);
    CHECK(a.joined);
    CHECK_EQ_INT(s.gone, 1);
    CHECK_EQ_INT(s.gone_clean, 0);
    CHECK(strstr(s.gone_why, "no heartbeat") != NULL);
    CHECK(a.closed);
}

/* The controller restarts a node that reported its ranks gone (RESTART
 * with the attempt), then ends the job (END); the node says BYE. */
static void a_node_is_restarted_then_ended(void)
{
    seen s = {.restart_on_all = 1};
    agent a = {.what = A_RESTARTS};
    char err[100];
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.joined);
    CHECK_EQ_INT(a.restart_attempt, 2);
    CHECK(a.got_end);
    CHECK_EQ_INT(s.all_exited, 2);
    CHECK_EQ_INT(s.gone, 1);
    CHECK_EQ_INT(s.gone_clean, 1);
}

static void garbage_is_closed(void)
{
    seen s = {0};
    agent a = {.what = A_GARBAGE};
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.closed);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "protocol error") != NULL);
}

/* ---- strangers before authentication ----
 * A controller on the loop of this thread; a client script on another
 * thread, which ends the case when it returns. */

typedef struct hostile hostile;
struct hostile {
    uint16_t port;
    link_secret secret;
    void (*script)(hostile *h);
    uv_async_t done;
    seen *s;
    /* out */
    double closed_after_s; /* from connecting until the controller closed */
    int open_from_one, open_in_all, joined;
    double burst_s; /* how long the burst of refusals lasted */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A TCP connection to the controller from 127.0.0.HOST, or -1. */
static int connect_from(uint16_t port, int host)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET};
    me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)host);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Has the controller closed FD (waiting up to MS for it)? */
static int closed_by_peer(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char b[64];
    return recv(fd, b, sizeof b, MSG_DONTWAIT) <= 0;
}

/* A real agent's handshake from 127.0.0.1: 1 when JOIN_OK came. */
static int join_once(hostile *h)
{
    static conn c;
    memset(&c, 0, sizeof c);
    c.fd = connect_from(h->port, 1);
    if (c.fd < 0)
        return 0;
    link_encoder_init(&c.enc, LINK_FROM_AGENT);
    link_decoder_init(&c.dec, LINK_FROM_CONTROLLER);
    link_frame f = {.type = LINK_AGENT_HELLO};
    link_agent_hello *hl = &f.u.hello;
    hl->version = LINK_VERSION;
    hl->node_rank = 1;
    hl->nnodes = 2;
    hl->nproc_per_node = 2;
    link_random(hl->nonce, sizeof hl->nonce);
    snprintf(hl->job_id, sizeof hl->job_id, "job7");
    snprintf(hl->host, sizeof hl->host, "node1");
    link_agent_hello hello = *hl;
    link_frame in;
    int ok = 0;
    if (send_frame(&c, &f) == 0 && read_frame(&c, &in) &&
        in.type == LINK_CHALLENGE) {
        link_frame p = {.type = LINK_PROOF};
        link_auth_agent_proof(&h->secret, &hello, in.u.challenge.nonce,
                              p.u.proof.proof);
        uint8_t key[LINK_KEY_SIZE];
        link_auth_session_key(&h->secret, &hello, in.u.challenge.nonce, key);
        link_decoder_keyed(&c.dec, key);
        ok = send_frame(&c, &p) == 0 && read_frame(&c, &in) &&
             in.type == LINK_JOIN_OK;
    }
    close(c.fd);
    return ok;
}

static void on_script_done(uv_async_t *a)
{
    hostile *h = a->data;
    ss_node_links_close(h->s->nl);
    ss_ingest_close(h->s->in);
    uv_close((uv_handle_t *)a, NULL);
}

static void *run_script(void *arg)
{
    hostile *h = arg;
    h->script(h);
    uv_async_send(&h->done);
    return NULL;
}

static void run_hostile(seen *s, hostile *h, const ss_node_links_config *base)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    signal(SIGPIPE, SIG_IGN);
    char path[108];
    snprintf(path, sizeof path, "/tmp/ss-nl-test-%d.sock", (int)getpid());
    unlink(path);
    ss_ingest_config icfg = {.unix_path = path, .run_id = "run-uuid"};
    memcpy(icfg.token, k_token, sizeof k_token);
    ss_ingest_callbacks icb = {.ctx = s, .intern = t_intern,
                               .on_hello = t_hello, .on_step = t_step,
                               .on_disconnect = t_disconnect};
    char err[256];
    s->in = ss_ingest_start(&loop, &icfg, &icb, err, sizeof err);
    REQUIRE(s->in != NULL);
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_secret_load(NULL, k_secret, &h->secret, err, sizeof err) ==
            0);
    ss_node_links_config cfg = *base;
    cfg.bind_addr = "127.0.0.1";
    cfg.secret = &h->secret;
    cfg.run_uuid = "run-uuid";
    cfg.world_size = 4;
    cfg.rank_token = k_token;
    cfg.heartbeat_ms = 100;
    ss_node_links_callbacks cb = {s,      t_join, t_clock, NULL,     t_exit,
                                  t_all,  NULL,   t_gone,  t_refused,
                                  t_health, t_stacks_part, t_refusals,
                                  NULL, NULL, NULL};
    s->close_when_gone = 1 << 30; /* the script ends the case */
    s->nl = ss_node_links_start(&loop, s->in, &cfg, &cb, err, sizeof err);
    REQUIRE(s->nl != NULL);
    uv_async_init(&loop, &h->done, on_script_done);
    h->done.data = h;
    h->s = s;
    h->port = ss_node_links_port(s->nl);
    pthread_t th;
    pthread_create(&th, NULL, run_script, h);
    uv_run(&loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* A valid AGENT_HELLO, one byte every 150 ms: silence never lasts, yet
 * the deadline counts from the connection. */
static void trickle(hostile *h)
{
    static conn c;
    memset(&c, 0, sizeof c);
    link_encoder_init(&c.enc, LINK_FROM_AGENT);
    link_frame f = {.type = LINK_AGENT_HELLO};
    f.u.hello.version = LINK_VERSION;
    f.u.hello.nnodes = 2;
    f.u.hello.node_rank = 1;
    f.u.hello.nproc_per_node = 1;
    snprintf(f.u.hello.job_id, sizeof f.u.hello.job_id, "job7");
    size_t n = link_encode(&c.enc, c.out, sizeof c.out, &f);
    /* timed from before the connection: the deadline counts from the
     * controller's accept, which comes after, however late this thread
     * runs */
    double t0 = now_s();
    int fd = connect_from(h->port, 1);
    if (fd < 0)
        return;
    for (size_t i = 0; i < n && now_s() - t0 < 5; i++) {
        if (send(fd, c.out + i, 1, MSG_NOSIGNAL) != 1 ||
            closed_by_peer(fd, 150)) {
            h->closed_after_s = now_s() - t0;
            break;
        }
    }
    close(fd);
}

static void a_trickling_peer_is_closed_at_the_deadline(void)
{
    seen s = {0};
    hostile h = {.script = trickle};
    ss_node_links_config cfg = {.handshake_timeout_ms = 1000};
    run_hostile(&s, &h, &cfg);
    CHECK(h.closed_after_s >= 0.9 && h.closed_after_s < 1.6);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "no handshake within 1.0 s") != NULL);
}

/* The header of a 60,000-byte AGENT_HELLO, then some of it. */
static void oversized(hostile *h)
{
    uint8_t frame[1 + 2048] = {0};
    uint32_t len = 60000;
    memcpy(frame, &len, 4); /* little-endian here */
    frame[4] = LINK_AGENT_HELLO;
    int fd = connect_from(h->port, 1);
    if (fd < 0)
        return;
    double t0 = now_s();
    send(fd, frame, sizeof frame, MSG_NOSIGNAL);
    if (closed_by_peer(fd, 2500))
        h->closed_after_s = now_s() - t0;
    close(fd);
}

static void an_oversized_hello_is_refused_at_its_header(void)
{
    seen s = {0};
    hostile h = {.script = oversized};
    ss_node_links_config cfg = {.handshake_timeout_ms = 3000};
    run_hostile(&s, &h, &cfg);
    CHECK(h.closed_after_s > 0 && h.closed_after_s < 0.5);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "before authentication") != NULL);
}

/* How many of FDS[0..N) the controller has not closed. */
static int count_open(const int *fds, int n)
{
    int open = 0;
    for (int i = 0; i < n; i++)
        open += fds[i] >= 0 && !closed_by_peer(fds[i], 0);
    return open;
}

/* Waits (20 s at most) until no more than WANT of FDS[0..N) are open: the
 * controller accepts and closes them in turns of its loop, which a loaded
 * machine runs late, so a fixed wait could count links it had not come to
 * yet.  Then waits 100 ms more, so that one closed too many would show. */
static void wait_open_at_most(const int *fds, int n, int want)
{
    for (double t0 = now_s(); now_s() - t0 < 20 && count_open(fds, n) > want;)
        usleep(10000);
    usleep(100000);
}

/* 20 silent links from 127.0.0.2 (cap 4 per address), then 4 from each of
 * 127.0.0.3 to .6 (cap 8 in all): the oldest give way, and a real agent
 * from 127.0.0.1 joins while the newest are held. */
static void flood(hostile *h)
{
    int one[20], many[16], all[36];
    for (int i = 0; i < 20; i++)
        all[i] = one[i] = connect_from(h->port, 2);
    wait_open_at_most(one, 20, 4);
    h->open_from_one = count_open(one, 20);
    int last_held = one[19] >= 0 && !closed_by_peer(one[19], 0);
    for (int i = 0; i < 16; i++)
        all[20 + i] = many[i] = connect_from(h->port, 3 + i / 4);
    wait_open_at_most(all, 36, 8);
    h->open_in_all = count_open(all, 36);
    h->open_from_one = last_held ? h->open_from_one : -1;
    h->joined = join_once(h);
    usleep(100000);
    for (int i = 0; i < 20; i++)
        close(one[i]);
    for (int i = 0; i < 16; i++)
        close(many[i]);
}

static void floods_stay_under_the_caps_and_a_real_agent_joins(void)
{
    seen s = {0};
    hostile h = {.script = flood};
    ss_node_links_config cfg = {.handshake_timeout_ms = 10000,
                                .max_preauth = 8,
                                .max_preauth_per_addr = 4,
                                .refusal_report_ms = 60000};
    run_hostile(&s, &h, &cfg);
    CHECK_EQ_INT(h.open_from_one, 4); /* the newest 4 of 127.0.0.2 */
    CHECK_EQ_INT(h.open_in_all, 8);
    CHECK(h.joined);
    CHECK_EQ_INT(s.joins, 1);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "handshakes waited from its address") !=
          NULL);
    /* the other 27 refusals, summed when the controller closed */
    CHECK_EQ_INT(s.refusal_summaries, 1);
    CHECK(s.refusals_summed >= 27);
    CHECK(strstr(s.refusal_reasons, "too many handshakes from one "
                 "address") != NULL);
    CHECK(strstr(s.refusal_reasons, "too many handshakes at once") != NULL);
}

/* 40 connections that speak HTTP: 40 protocol errors in a burst. */
static void burst(hostile *h)
{
    static const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    double t0 = now_s();
    for (int i = 0; i < 40; i++) {
        int fd = connect_from(h->port, 1);
        if (fd < 0)
            continue;
        send(fd, junk, sizeof junk - 1, MSG_NOSIGNAL);
        closed_by_peer(fd, 1000);
        close(fd);
    }
    h->burst_s = now_s() - t0;
    usleep(700000); /* past the period's end: its summary comes */
}

static void a_burst_of_refusals_is_told_once_and_summed(void)
{
    seen s = {0};
    hostile h = {.script = burst};
    ss_node_links_config cfg = {.refusal_report_ms = 400};
    run_hostile(&s, &h, &cfg);
    CHECK_EQ_INT(s.refused, 1);
    CHECK(strstr(s.refused_why, "protocol error") != NULL);
    /* One summary per period of 0.4 s the burst spanned at most (the
     * first refusal opens the first period; a burst that a loaded machine
     * stretched spans more of them), and one more of slack for the loop's
     * clock, which counts whole milliseconds. */
    int most = 2 + (int)(h.burst_s / 0.4);
    CHECK(s.refusal_summaries >= 1 && s.refusal_summaries <= most);
    if (s.refusal_summaries > most)
        fprintf(stderr, "  %d summaries for a burst of %.2f s\n",
                s.refusal_summaries, h.burst_s);
    CHECK_EQ_INT(s.refusals_summed, 39);
    CHECK(strstr(s.refusal_reasons, "protocol error; the last from "
                 "127.0.0.1:") != NULL);
}

/* An offset of INT64_MAX is beyond what the exchange allows (the request
 * arrived after at most t2 - t1): the link is closed with the reason, and
 * no step of the node is moved by it. */
static void an_unjustified_clock_offset_closes_the_link(void)
{
    seen s = {0};
    agent a = {.what = A_GOOD, .clock_offset = INT64_MAX};
    char err[100];
    REQUIRE(link_auth_init() == 0);
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK(a.joined && a.got_time_resp);
    CHECK_EQ_INT(s.clocks, 0);
    CHECK_EQ_INT(s.steps, 0);
    CHECK_EQ_INT(s.gone, 1);
    CHECK_EQ_INT(s.gone_clean, 0);
    CHECK(strstr(s.gone_why, "clock offset of 9223372036854775807 ns"));
    CHECK(strstr(s.gone_why, "do not allow"));
}

/* A justified offset applied to a step time near the end of int64_t
 * saturates instead of wrapping to a step at -9.2e18 ns. */
static void an_offset_never_wraps_a_step_time(void)
{
    seen s = {0};
    agent a = {.what = A_GOOD, .clock_offset = 1000000,
               .step_begin = INT64_MAX - 10};
    char err[100];
    REQUIRE(link_secret_load(NULL, k_secret, &a.secret, err, sizeof err) == 0);
    run_case(&s, &a, k_secret, 5000);
    CHECK_EQ_INT(s.clocks, 1);
    CHECK_EQ_INT(s.steps, 1);
    CHECK(s.step_begin == INT64_MAX);
}

TEST_LIST(TEST(a_node_aggregates_by_node), TEST(a_node_joins_works_and_leaves),
          TEST(a_wrong_secret_is_refused_both_ways),
          TEST(a_refused_node_is_told_why), TEST(a_silent_node_is_lost),
          TEST(a_node_is_restarted_then_ended), TEST(garbage_is_closed),
          TEST(a_trickling_peer_is_closed_at_the_deadline),
          TEST(an_oversized_hello_is_refused_at_its_header),
          TEST(floods_stay_under_the_caps_and_a_real_agent_joins),
          TEST(a_burst_of_refusals_is_told_once_and_summed),
          TEST(an_unjustified_clock_offset_closes_the_link),
          TEST(an_offset_never_wraps_a_step_time))
