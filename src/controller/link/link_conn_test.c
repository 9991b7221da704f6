/*
 * link_conn_test.c - one agent link connection (link_conn.c) on a real
 * loop and real TCP over loopback: an agent's and a controller's
 * connection authenticate with link_auth and carry DATA both ways, a
 * maximal frame included; a stream written in small pieces on a timer is
 * reassembled; a frame over the handshake's limit before keying ends the
 * connection with a protocol error; a write the kernel fails (the socket
 * shut for writing) ends it with the write's reason; and a peer that never
 * reads cannot grow either end's send queue past its cap: the
 * controller's side with a small cap, the agent's with the configuration
 * job/agent.c uses (the default cap) against a controller that never even
 * accepts, its process's resident memory checked too.
 */
#include "link_auth.h"
#include "link_conn.h"
#include "testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    ss_link_conn *conn;
    int frames, data_frames, closed, ended;
    ss_link_end end;
    char why[256];
    size_t data_bytes;
    int data_ok;           /* every DATA matched what was expected */
    void *owner;           /* the test's state */
} side;

static void side_end(void *ctx, ss_link_end end, const char *why)
{
    side *s = ctx;
    s->ended++;
    s->end = end;
    snprintf(s->why, sizeof s->why, "%s", why);
}

static void side_closed(void *ctx)
{
    side *s = ctx;
    s->closed++;
    s->conn = NULL;
}

/* DATA payload number I: LEN bytes of a pattern that depends on I. */
static void pattern(uint8_t *p, size_t len, int i)
{
    for (size_t k = 0; k < len; k++)
        p[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (k >> 8));
}

static int pattern_ok(const uint8_t *p, size_t len, int i)
{
    for (size_t k = 0; k < len; k++)
        if (p[k] != (uint8_t)(k * 31 + (size_t)i * 7 + (k >> 8)))
            return 0;
    return 1;
}

/* A write to a shut socket must fail with EPIPE, not kill the test. */
__attribute__((constructor)) static void ignore_sigpipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

static const size_t k_sizes[] = {1, 100, 4096, LINK_MAX_DATA, 3};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])
static uint8_t g_payload[LINK_MAX_DATA];

static uint16_t bound_port(uv_tcp_t *t)
{
    struct sockaddr_in got;
    int len = sizeof got;
    uv_tcp_getsockname(t, (struct sockaddr *)&got, &len);
    return ntohs(got.sin_port);
}

static void listen_loopback(uv_loop_t *loop, uv_tcp_t *server, void *data,
                            uv_connection_cb cb)
{
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    uv_tcp_init(loop, server);
    server->data = data;
    uv_tcp_bind(server, (struct sockaddr *)&addr, 0);
    uv_listen((uv_stream_t *)server, 16, cb);
}

static int run_until(uv_loop_t *loop, const int *flag, int want,
                     double seconds)
{
    double waited = 0;
    while (*flag < want && waited < seconds) {
        uv_run(loop, UV_RUN_NOWAIT);
        usleep(1000);
        waited += 0.001;
    }
    return *flag >= want;
}

/* ---- both ends, authenticated, DATA both ways ---- */

typedef struct {
    uv_loop_t *loop;
    uv_tcp_t server;
    side ctl, ag;
    link_secret secret;
    link_agent_hello hello;  /* as the controller got it */
    uint8_t ctl_nonce[LINK_NONCE_SIZE];
    int echoes;              /* DATA the agent got back intact */
    int joined;
} pair;

static void ctl_frame(void *ctx, const link_frame *f)
{
    pair *p = ((side *)ctx)->owner;
    p->ctl.frames++;
    if (f->type == LINK_AGENT_HELLO) {
        p->hello = f->u.hello;
        link_random(p->ctl_nonce, sizeof p->ctl_nonce);
        link_frame c = {.type = LINK_CHALLENGE};
        memcpy(c.u.challenge.nonce, p->ctl_nonce, LINK_NONCE_SIZE);
        link_auth_controller_proof(&p->secret, &p->hello, p->ctl_nonce,
                                   c.u.challenge.proof);
        CHECK_EQ_INT(ss_link_conn_send(p->ctl.conn, &c), 0);
    } else if (f->type == LINK_PROOF) {
        uint8_t want[LINK_PROOF_SIZE], key[LINK_KEY_SIZE];
        link_auth_agent_proof(&p->secret, &p->hello, p->ctl_nonce, want);
        CHECK(link_auth_proof_equal(want, f->u.proof.proof));
        link_auth_session_key(&p->secret, &p->hello, p->ctl_nonce, key);
        ss_link_conn_keyed(p->ctl.conn, key);
        link_frame j = {.type = LINK_JOIN_OK};
        j.u.join_ok.attempt = 0;
        j.u.join_ok.world_size = 2;
        snprintf(j.u.join_ok.run_uuid, sizeof j.u.join_ok.run_uuid, "run-1");
        CHECK_EQ_INT(ss_link_conn_send(p->ctl.conn, &j), 0);
    } else if (f->type == LINK_DATA) {
        int i = p->ctl.data_frames++;
        if (f->u.data.len != k_sizes[i] ||
            !pattern_ok(f->u.data.bytes, f->u.data.len, i))
            p->ctl.data_ok = 0;
        /* Back to the agent on the same channel, as WELCOME would go. */
        CHECK_EQ_INT(ss_link_conn_send(p->ctl.conn, f), 0);
    }
}

static void ag_frame(void *ctx, const link_frame *f)
{
    pair *p = ((side *)ctx)->owner;
    p->ag.frames++;
    if (f->type == LINK_CHALLENGE) {
        uint8_t want[LINK_PROOF_SIZE], key[LINK_KEY_SIZE];
        link_auth_controller_proof(&p->secret, &p->hello, f->u.challenge.nonce,
                                   want);
        CHECK(link_auth_proof_equal(want, f->u.challenge.proof));
        link_frame r = {.type = LINK_PROOF};
        link_auth_agent_proof(&p->secret, &p->hello, f->u.challenge.nonce,
                              r.u.proof.proof);
        CHECK_EQ_INT(ss_link_conn_send(p->ag.conn, &r), 0);
        link_auth_session_key(&p->secret, &p->hello, f->u.challenge.nonce,
                              key);
        ss_link_conn_keyed(p->ag.conn, key);
    } else if (f->type == LINK_JOIN_OK) {
        p->joined = 1;
        for (size_t i = 0; i < N_SIZES; i++) {
            pattern(g_payload, k_sizes[i], (int)i);
            link_frame d = {.type = LINK_DATA};
            d.u.data = (link_data){7, (uint32_t)k_sizes[i], g_payload};
            CHECK_EQ_INT(ss_link_conn_send(p->ag.conn, &d), 0);
        }
    } else if (f->type == LINK_DATA) {
        int i = p->ag.data_frames++;
        if (f->u.data.channel == 7 && f->u.data.len == k_sizes[i] &&
            pattern_ok(f->u.data.bytes, f->u.data.len, i))
            p->echoes++;
    }
}

static void pair_connection(uv_stream_t *server, int status)
{
    pair *p = server->data;
    REQUIRE(status == 0 && !p->ctl.conn);
    ss_link_conn_config cfg = {.sends = LINK_FROM_CONTROLLER};
    ss_link_conn_callbacks cb = {&p->ctl, ctl_frame, side_end, side_closed};
    p->ctl.conn = ss_link_conn_new(p->loop, &cfg, &cb);
    REQUIRE(p->ctl.conn);
    REQUIRE(uv_accept(server, (uv_stream_t *)ss_link_conn_tcp(p->ctl.conn)) ==
            0);
    CHECK_EQ_INT(ss_link_conn_start(p->ctl.conn), 0);
}

static void ag_connected(uv_connect_t *req, int status)
{
    pair *p = req->data;
    REQUIRE(status == 0);
    CHECK_EQ_INT(ss_link_conn_start(p->ag.conn), 0);
    link_frame h = {.type = LINK_AGENT_HELLO};
    h.u.hello.version = LINK_VERSION;
    h.u.hello.node_rank = 1;
    h.u.hello.nnodes = 2;
    h.u.hello.nproc_per_node = 1;
    snprintf(h.u.hello.job_id, sizeof h.u.hello.job_id, "job");
    snprintf(h.u.hello.host, sizeof h.u.hello.host, "node-b");
    link_random(h.u.hello.nonce, sizeof h.u.hello.nonce);
    p->hello = h.u.hello;
    CHECK_EQ_INT(ss_link_conn_send(p->ag.conn, &h), 0);
}

static void frames_round_trip_authenticated(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    pair *p = calloc(1, sizeof *p);
    REQUIRE(p);
    p->loop = &loop;
    p->ctl.owner = p->ag.owner = p;
    p->ctl.data_ok = 1;
    p->secret.len = 24;
    memcpy(p->secret.bytes, "a secret of 24 bytes....", 24);
    listen_loopback(&loop, &p->server, p, pair_connection);
    ss_link_conn_config cfg = {.sends = LINK_FROM_AGENT};
    ss_link_conn_callbacks cb = {&p->ag, ag_frame, side_end, side_closed};
    p->ag.conn = ss_link_conn_new(&loop, &cfg, &cb);
    REQUIRE(p->ag.conn);
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", bound_port(&p->server), &addr);
    uv_connect_t req;
    req.data = p;
    REQUIRE(uv_tcp_connect(&req, ss_link_conn_tcp(p->ag.conn),
                           (struct sockaddr *)&addr, ag_connected) == 0);
    CHECK(run_until(&loop, &p->echoes, (int)N_SIZES, 10));
    CHECK(p->joined);
    CHECK_EQ_INT(p->ctl.data_frames, N_SIZES);
    CHECK(p->ctl.data_ok);
    CHECK_EQ_INT(p->ag.data_frames, N_SIZES);
    /* Keyed: the controller sent CHALLENGE, JOIN_OK and the echoes. */
    CHECK_EQ_INT(p->ag.frames, 2 + N_SIZES);
    ss_link_conn_close(p->ag.conn, 0);
    /* The agent's close reaches the controller as the peer's end. */
    CHECK(run_until(&loop, &p->ctl.closed, 1, 5));
    CHECK_EQ_INT(p->ctl.ended, 1);
    CHECK_EQ_INT(p->ctl.end, SS_LINK_END_PEER);
    CHECK_STR(p->ctl.why, "its connection closed");
    CHECK_EQ_INT(p->ag.ended, 0); /* closed by its owner: not told */
    CHECK_EQ_INT(p->ag.closed, 1);
    uv_close((uv_handle_t *)&p->server, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    free(p);
}

/* ---- one controller-side connection and a raw peer ---- */

typedef struct {
    uv_loop_t *loop;
    uv_tcp_t server;
    side ctl;
    size_t max_queued;
    uint8_t key[LINK_KEY_SIZE];
    /* the stalled-peer check: after PROOF, send until the link ends */
    int flood;
    uv_timer_t flooder;
    size_t sent, max_seen;
    int refused_sends;
} one;

static void one_frame(void *ctx, const link_frame *f);

static void one_connection(uv_stream_t *server, int status)
{
    one *o = server->data;
    REQUIRE(status == 0 && !o->ctl.conn);
    ss_link_conn_config cfg = {.sends = LINK_FROM_CONTROLLER,
                               .max_queued = o->max_queued};
    ss_link_conn_callbacks cb = {&o->ctl, one_frame, side_end, side_closed};
    o->ctl.conn = ss_link_conn_new(o->loop, &cfg, &cb);
    REQUIRE(o->ctl.conn);
    REQUIRE(uv_accept(server, (uv_stream_t *)ss_link_conn_tcp(o->ctl.conn)) ==
            0);
    CHECK_EQ_INT(ss_link_conn_start(o->ctl.conn), 0);
}

/* Eight maximal DATA frames a turn of the loop, until one is refused. */
static void on_flood(uv_timer_t *t)
{
    one *o = t->data;
    for (int i = 0; i < 8 && o->ctl.conn && !o->refused_sends; i++) {
        link_frame d = {.type = LINK_DATA};
        d.u.data = (link_data){1, LINK_MAX_DATA, g_payload};
        if (ss_link_conn_send(o->ctl.conn, &d) != 0) {
            o->refused_sends++;
            break;
        }
        o->sent += LINK_MAX_DATA;
        size_t q = ss_link_conn_queued(o->ctl.conn);
        if (q > o->max_seen)
            o->max_seen = q;
    }
    if (o->refused_sends || !o->ctl.conn)
        uv_timer_stop(t);
}

static void one_frame(void *ctx, const link_frame *f)
{
    one *o = ((side *)ctx)->owner;
    o->ctl.frames++;
    if (f->type == LINK_PROOF) {
        ss_link_conn_keyed(o->ctl.conn, o->key);
        if (o->flood)
            uv_timer_start(&o->flooder, on_flood, 0, 1);
    } else if (f->type == LINK_DATA) {
        int i = o->ctl.data_frames++;
        o->ctl.data_bytes += f->u.data.len;
        if (!pattern_ok(f->u.data.bytes, f->u.data.len, i))
            o->ctl.data_ok = 0;
    }
}

static one *one_start(uv_loop_t *loop, size_t max_queued)
{
    one *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->loop = loop;
    o->ctl.owner = o;
    o->ctl.data_ok = 1;
    o->max_queued = max_queued;
    memset(o->key, 0x5a, sizeof o->key);
    uv_timer_init(loop, &o->flooder);
    o->flooder.data = o;
    listen_loopback(loop, &o->server, o, one_connection);
    return o;
}

static void one_finish(uv_loop_t *loop, one *o)
{
    if (o->ctl.conn)
        ss_link_conn_close(o->ctl.conn, 0);
    uv_close((uv_handle_t *)&o->server, NULL);
    uv_close((uv_handle_t *)&o->flooder, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(o->ctl.closed, 1);
    CHECK_EQ_INT(uv_loop_close(loop), 0);
    free(o);
}

/* A blocking socket connected to O's listener (the kernel completes the
 * connection before the loop accepts it). */
static int raw_connect(one *o)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons(bound_port(&o->server))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* What an agent says first: AGENT_HELLO and PROOF, unkeyed; then DATA
 * frames I = 0..N-1 of SIZES keyed under KEY.  Returns the bytes. */
static size_t agent_stream(uint8_t *buf, size_t cap, const uint8_t *key,
                           const size_t *sizes, int n)
{
    link_encoder e;
    link_encoder_init(&e, LINK_FROM_AGENT);
    link_frame h = {.type = LINK_AGENT_HELLO};
    h.u.hello.version = LINK_VERSION;
    h.u.hello.node_rank = 1;
    h.u.hello.nnodes = 2;
    h.u.hello.nproc_per_node = 1;
    snprintf(h.u.hello.job_id, sizeof h.u.hello.job_id, "job");
    snprintf(h.u.hello.host, sizeof h.u.hello.host, "node-b");
    size_t len = link_encode(&e, buf, cap, &h);
    link_frame pr = {.type = LINK_PROOF};
    len += link_encode(&e, buf + len, cap - len, &pr);
    link_encoder_keyed(&e, key);
    for (int i = 0; i < n; i++) {
        pattern(g_payload, sizes[i], i);
        link_frame d = {.type = LINK_DATA};
        d.u.data = (link_data){3, (uint32_t)sizes[i], g_payload};
        size_t w = link_encode(&e, buf + len, cap - len, &d);
        if (w == 0)
            return 0;
        len += w;
    }
    return len;
}

/* A stream written in pieces of 1, 2, 3, 5, 8... bytes (at most 9000), a
 * few milliseconds apart, arrives as the same frames. */
static void partial_reads_reassemble(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    one *o = one_start(&loop, 0);
    REQUIRE(o);
    static uint8_t stream[3 * LINK_FRAME_MAX];
    const size_t sizes[] = {10, LINK_MAX_DATA, 7};
    size_t len = agent_stream(stream, sizeof stream, o->key, sizes, 3);
    REQUIRE(len > LINK_MAX_DATA);
    int fd = raw_connect(o);
    REQUIRE(fd >= 0);
    int one_ = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
    size_t off = 0, a = 1, b = 1;
    int pieces = 0;
    while (off < len) {
        size_t n = a < len - off ? a : len - off;
        REQUIRE(send(fd, stream + off, n, 0) == (ssize_t)n);
        off += n;
        pieces++;
        size_t next = a + b;
        a = b;
        b = next > 9000 ? 9000 : next;
        /* Let the loop read what came so far. */
        for (int i = 0; i < 3; i++) {
            uv_run(&loop, UV_RUN_NOWAIT);
            usleep(500);
        }
    }
    CHECK(pieces > 20);
    CHECK(run_until(&loop, &o->ctl.data_frames, 3, 5));
    CHECK_EQ_INT(o->ctl.frames, 5);
    CHECK_EQ_INT(o->ctl.data_bytes, 10 + LINK_MAX_DATA + 7);
    CHECK(o->ctl.data_ok);
    CHECK_EQ_INT(o->ctl.ended, 0);
    close(fd);
    CHECK(run_until(&loop, &o->ctl.closed, 1, 5));
    CHECK_EQ_INT(o->ctl.end, SS_LINK_END_PEER);
    one_finish(&loop, o);
}

/* Before the link is keyed a frame is at most 1 KiB: a header that
 * announces more ends the connection at once, from the header. */
static void preauth_frame_limit_ends_the_connection(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    one *o = one_start(&loop, 0);
    REQUIRE(o);
    int fd = raw_connect(o);
    REQUIRE(fd >= 0);
    uint8_t hdr[LINK_HEADER_SIZE] = {0};
    uint32_t n = LINK_MAX_HANDSHAKE_PAYLOAD + 1;
    for (int i = 0; i < 4; i++)
        hdr[i] = (uint8_t)(n >> (8 * i));
    hdr[4] = LINK_AGENT_HELLO;
    REQUIRE(send(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr);
    CHECK(run_until(&loop, &o->ctl.closed, 1, 5));
    CHECK_EQ_INT(o->ctl.ended, 1);
    CHECK_EQ_INT(o->ctl.end, SS_LINK_END_PROTOCOL);
    CHECK(strncmp(o->ctl.why, "protocol error: ", 16) == 0);
    CHECK_EQ_INT(o->ctl.frames, 0);
    close(fd);
    one_finish(&loop, o);
}

/* The socket is shut for writing under the connection: the kernel fails
 * the next write, and the connection ends with that reason, told on the
 * loop, not inside the send. */
static void write_error_ends_with_the_reason(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    one *o = one_start(&loop, 0);
    REQUIRE(o);
    static uint8_t stream[LINK_FRAME_MAX];
    size_t len = agent_stream(stream, sizeof stream, o->key, NULL, 0);
    int fd = raw_connect(o);
    REQUIRE(fd >= 0);
    REQUIRE(send(fd, stream, len, 0) == (ssize_t)len);
    CHECK(run_until(&loop, &o->ctl.frames, 2, 5)); /* HELLO, PROOF */
    REQUIRE(o->ctl.conn);
    uv_os_fd_t sock;
    REQUIRE(uv_fileno((uv_handle_t *)ss_link_conn_tcp(o->ctl.conn), &sock) ==
            0);
    REQUIRE(shutdown(sock, SHUT_WR) == 0);
    link_frame hb = {.type = LINK_HEARTBEAT};
    ss_link_conn_send(o->ctl.conn, &hb); /* fails now or in its callback */
    CHECK_EQ_INT(o->ctl.ended, 0);
    CHECK(run_until(&loop, &o->ctl.closed, 1, 5));
    CHECK_EQ_INT(o->ctl.ended, 1);
    CHECK_EQ_INT(o->ctl.end, SS_LINK_END_SEND);
    CHECK(strstr(o->ctl.why, "its connection failed while sending: ") ==
          o->ctl.why);
    CHECK(strstr(o->ctl.why, uv_strerror(UV_EPIPE)) != NULL);
    close(fd);
    one_finish(&loop, o);
}

/* Resident memory of this process, bytes. */
static size_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (size_t)sysconf(_SC_PAGESIZE);
}

/* The controller's side: an agent that authenticated and never reads
 * again.  The controller sends until the link refuses; its queue never
 * passes the cap (4 MiB here), and at the cap the link ends with the
 * reason. */
static void stalled_agent_cannot_grow_the_controller_past_its_cap(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    const size_t cap = (size_t)4 << 20;
    one *o = one_start(&loop, cap);
    REQUIRE(o);
    o->flood = 1;
    static uint8_t stream[LINK_FRAME_MAX];
    size_t len = agent_stream(stream, sizeof stream, o->key, NULL, 0);
    int fd = raw_connect(o);
    REQUIRE(fd >= 0);
    REQUIRE(send(fd, stream, len, 0) == (ssize_t)len);
    CHECK(run_until(&loop, &o->ctl.closed, 1, 30));
    fprintf(stderr, "  controller: %.1f MiB sent, the queue at most %.2f "
            "MiB (cap %.0f MiB): %s\n", o->sent / 1048576.0,
            o->max_seen / 1048576.0, cap / 1048576.0, o->ctl.why);
    CHECK_EQ_INT(o->refused_sends, 1);
    CHECK(o->max_seen <= cap);
    CHECK(o->max_seen > cap - LINK_FRAME_MAX); /* it did fill up */
    CHECK(o->sent > cap);                       /* the kernel took some */
    CHECK_EQ_INT(o->ctl.ended, 1);
    CHECK_EQ_INT(o->ctl.end, SS_LINK_END_SEND);
    CHECK(strncmp(o->ctl.why, "it stopped reading: ", 20) == 0);
    CHECK(strstr(o->ctl.why, "at most 4.0 MiB") != NULL);
    close(fd);
    one_finish(&loop, o);
}

/* ---- the agent's side against a controller that never reads ---- */

typedef struct {
    side ag;
    size_t sent, max_seen, rss_before, rss_max;
    int refused_sends;
    uv_timer_t flooder;
} stalled;

static void stalled_frame(void *ctx, const link_frame *f)
{
    (void)f;
    ((side *)ctx)->frames++;
}

static void on_agent_flood(uv_timer_t *t)
{
    stalled *s = t->data;
    for (int i = 0; i < 16 && s->ag.conn && !s->refused_sends; i++) {
        link_frame d = {.type = LINK_DATA};
        d.u.data = (link_data){1, LINK_MAX_DATA, g_payload};
        if (ss_link_conn_send(s->ag.conn, &d) != 0) {
            s->refused_sends++;
            break;
        }
        s->sent += LINK_MAX_DATA;
        size_t q = ss_link_conn_queued(s->ag.conn);
        if (q > s->max_seen)
            s->max_seen = q;
    }
    size_t rss = resident_bytes();
    if (rss > s->rss_max)
        s->rss_max = rss;
    if (s->refused_sends || !s->ag.conn)
        uv_timer_stop(t);
}

static void agent_connected(uv_connect_t *req, int status)
{
    stalled *s = req->data;
    REQUIRE(status == 0);
    CHECK_EQ_INT(ss_link_conn_start(s->ag.conn), 0);
    /* The handshake as the agent sends it, then keyed DATA: the ranks'
     * bytes, forwarded to a controller that stopped reading. */
    link_frame h = {.type = LINK_AGENT_HELLO};
    h.u.hello.version = LINK_VERSION;
    h.u.hello.node_rank = 1;
    h.u.hello.nnodes = 2;
    h.u.hello.nproc_per_node = 1;
    snprintf(h.u.hello.job_id, sizeof h.u.hello.job_id, "job");
    snprintf(h.u.hello.host, sizeof h.u.hello.host, "node-b");
    CHECK_EQ_INT(ss_link_conn_send(s->ag.conn, &h), 0);
    link_frame pr = {.type = LINK_PROOF};
    CHECK_EQ_INT(ss_link_conn_send(s->ag.conn, &pr), 0);
    uint8_t key[LINK_KEY_SIZE];
    memset(key, 0x33, sizeof key);
    ss_link_conn_keyed(s->ag.conn, key);
    s->rss_before = resident_bytes();
    uv_timer_start(&s->flooder, on_agent_flood, 0, 1);
}

/* The agent's side, configured as job/agent.c configures it (the default
 * cap, 64 MiB), against a controller whose listener never even accepts
 * the connection (the kernel completes it): the queue and the process's
 * resident memory stay within the cap, then the link ends with the reason,
 * which the agent reports as the controller lost. */
static void stalled_controller_cannot_grow_the_agent_past_its_cap(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    REQUIRE(lfd >= 0 && bind(lfd, (struct sockaddr *)&addr, sizeof addr) == 0);
    REQUIRE(listen(lfd, 4) == 0);
    REQUIRE(getsockname(lfd, (struct sockaddr *)&addr, &alen) == 0);
    stalled *s = calloc(1, sizeof *s);
    REQUIRE(s);
    s->ag.owner = s;
    uv_timer_init(&loop, &s->flooder);
    s->flooder.data = s;
    ss_link_conn_config cfg = {.sends = LINK_FROM_AGENT};
    ss_link_conn_callbacks cb = {&s->ag, stalled_frame, side_end,
                                 side_closed};
    s->ag.conn = ss_link_conn_new(&loop, &cfg, &cb);
    REQUIRE(s->ag.conn);
    uv_connect_t req;
    req.data = s;
    REQUIRE(uv_tcp_connect(&req, ss_link_conn_tcp(s->ag.conn),
                           (struct sockaddr *)&addr, agent_connected) == 0);
    CHECK(run_until(&loop, &s->ag.closed, 1, 60));
    const size_t cap = SS_LINK_CONN_MAX_QUEUED;
    double grew = s->rss_max > s->rss_before
                      ? (double)(s->rss_max - s->rss_before) : 0;
    fprintf(stderr, "  agent: %.1f MiB sent, the queue at most %.2f MiB "
            "(cap %.0f MiB), resident memory grew %.1f MiB: %s\n",
            s->sent / 1048576.0, s->max_seen / 1048576.0, cap / 1048576.0,
            grew / 1048576.0, s->ag.why);
    CHECK_EQ_INT(s->refused_sends, 1);
    CHECK(s->max_seen <= cap);
    CHECK(s->max_seen > cap - LINK_FRAME_MAX);
#ifndef __SANITIZE_ADDRESS__
    /* Under AddressSanitizer freed blocks wait in its quarantine and
     * count as resident: the queue's own count is the check there. */
    CHECK(grew <= cap + ((size_t)16 << 20));
#endif
    CHECK_EQ_INT(s->ag.ended, 1);
    CHECK_EQ_INT(s->ag.end, SS_LINK_END_SEND);
    CHECK(strncmp(s->ag.why, "it stopped reading: ", 20) == 0);
    CHECK(strstr(s->ag.why, "at most 64.0 MiB") != NULL);
    uv_close((uv_handle_t *)&s->flooder, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    close(lfd);
    free(s);
}

/* Sending before the connection has started is refused without ending
 * it; closing with FLUSH writes what was queued first. */
static void send_before_start_is_refused_and_close_flushes(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    one *o = one_start(&loop, 0);
    REQUIRE(o);
    ss_link_conn_config cfg = {.sends = LINK_FROM_AGENT};
    side early = {0};
    ss_link_conn_callbacks cb = {&early, stalled_frame, side_end,
                                 side_closed};
    early.conn = ss_link_conn_new(&loop, &cfg, &cb);
    REQUIRE(early.conn);
    link_frame h = {.type = LINK_AGENT_HELLO};
    h.u.hello.version = LINK_VERSION;
    h.u.hello.nnodes = 2;
    h.u.hello.nproc_per_node = 1;
    CHECK_EQ_INT(ss_link_conn_send(early.conn, &h), -1);
    ss_link_conn_close(early.conn, 0);
    CHECK(run_until(&loop, &early.closed, 1, 5));
    CHECK_EQ_INT(early.ended, 0);
    /* The controller's refusal, flushed: the peer reads all of it. */
    int fd = raw_connect(o);
    REQUIRE(fd >= 0);
    static uint8_t stream[LINK_FRAME_MAX];
    size_t len = agent_stream(stream, sizeof stream, o->key, NULL, 0);
    REQUIRE(send(fd, stream, len, 0) == (ssize_t)len);
    CHECK(run_until(&loop, &o->ctl.frames, 2, 5));
    REQUIRE(o->ctl.conn);
    link_frame r = {.type = LINK_JOIN_REJECT};
    snprintf(r.u.join_reject.reason, sizeof r.u.join_reject.reason,
             "node rank 1 is taken");
    CHECK_EQ_INT(ss_link_conn_send(o->ctl.conn, &r), 0);
    ss_link_conn_close(o->ctl.conn, 1);
    CHECK_EQ_INT(ss_link_conn_send(o->ctl.conn, &r), -1); /* closing */
    CHECK(run_until(&loop, &o->ctl.closed, 1, 5));
    CHECK_EQ_INT(o->ctl.ended, 0);
    uint8_t got[512];
    size_t have = 0;
    ssize_t n;
    while ((n = recv(fd, got + have, sizeof got - have, 0)) > 0)
        have += (size_t)n;
    /* All of it, with the MAC of a refusal sent after PROOF. */
    CHECK(have == LINK_HEADER_SIZE + 1 + strlen("node rank 1 is taken") +
                      LINK_MAC_SIZE);
    CHECK_EQ_INT(got[4], LINK_JOIN_REJECT);
    close(fd);
    one_finish(&loop, o);
}

TEST_LIST(TEST(frames_round_trip_authenticated),
          TEST(partial_reads_reassemble),
          TEST(preauth_frame_limit_ends_the_connection),
          TEST(write_error_ends_with_the_reason),
          TEST(stalled_agent_cannot_grow_the_controller_past_its_cap),
          TEST(stalled_controller_cannot_grow_the_agent_past_its_cap),
          TEST(send_before_start_is_refused_and_close_flushes))
