/*
 * bench_agents.c - the multi-node controller under many agents.
 *
 * Starts a real controller (`stepscope run --nnodes N+1 --node-rank 0`,
 * the store on, no HTTP) and plays the other N nodes itself: N agent links
 * over real TCP to MASTER_PORT+1, each authenticated (link_auth.h), clock
 * synchronised (clock_sync.h) and multiplexing M simulated ranks.  Each
 * simulated rank sends the rank protocol's HELLO and NAMEs, then one STEP
 * record per step (4 phases with self time, 1 sync point, 1 metric, RSS)
 * at R steps per second, a STATUS about once a second, and BYE; then the
 * agent reports RANK_EXIT(0) for each, ALL_EXITED and BYE.  With HOST on
 * (the default; --no-host) each rank step's record is preceded by its
 * HOST frame, as a real agent's host watch sends.  --aggregate node runs
 * the controller with node aggregation: each simulated agent then also
 * sends one NODE_PARTIAL per step (built once from its ranks' records and
 * moved on each step: the agents are what fold, the generator must stay
 * cheap) and its ranks' STATUS frames batched in one NODE_STATUS a second
 * instead of one DATA frame each.  --aggregate rank,node runs both, one
 * after the other, --repeat times, and compares them.  Node 0's M
 * ranks are real processes of this same program (--rank mode), recording
 * the same steps through libstepscope; every process times step s at
 * T0 + (s + 1) / R on the wall clock, so step numbers line up.
 *
 * While it runs it samples the controller's CPU (/proc/PID/stat) and RSS
 * every second; at the end it reads the store (steps finalized, ranks
 * missing, rank-steps in the ranks' totals against those sent, rows kept)
 * and the controller's last lines (the time from a step's latest record to
 * its finalization, p50 and p99, and in node mode the merge's figures),
 * and prints a table with the generator's own CPU next to the
 * controller's.
 *
 *   bench_agents --agents 64 --ranks 64 --rate 10 --seconds 60
 *   bench_agents --agents 128 --ranks 128 --rate 1 --seconds 60
 *   bench_agents --agents 2047 --ranks 64 --rate 1 --seconds 120 \
 *                --aggregate rank,node
 *
 * One thread per agent, blocking writes, poll() for what the controller
 * sends (heartbeats, clock answers, WELCOMEs).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_agent_support.h"
#include "clock_sync.h"
#include "link_auth.h"
#include "link_wire.h"
#include "stepscope.h"
#include "wire.h"

#define JOB_ID "bench-agents"
#define T0_ENV "BENCH_AGENTS_T0"
#define RX_BUF (2 * LINK_FRAME_MAX)
#define MAX_SAMPLES 4096

typedef struct {
    uint32_t agents, ranks;
    double rate, seconds, warmup;
    unsigned port;
    const char *stepscope, *dir, *samples;
    int keep;
    int no_host;          /* --no-host: no HOST frames */
    const char *aggregate; /* --aggregate rank|node|rank,node */
    int repeat;
} options;

static options o = {8, 8, 10, 20, 0, 29640, NULL, NULL, NULL, 0, 0, "rank", 1};
static int g_node_mode; /* this run's controller aggregates by node */
static link_secret g_secret;
static int64_t g_t0_mono;  /* step s ends at g_t0_mono + (s + 1) * period */
static uint64_t g_steps;
static atomic_int g_failed;
static atomic_int g_ctl_gone; /* the controller exited: agents give up */
static atomic_uint_fast64_t g_frames, g_bytes;

static const char *k_names[] = {"data", "forward", "backward", "optimizer",
                                "allreduce", "loss"};

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static void sleep_until(int64_t mono)
{
    struct timespec ts = {(time_t)(mono / 1000000000), (long)(mono % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* T0 from the environment (CLOCK_REALTIME ns) on this host's monotonic
 * clock. */
static int64_t t0_from_env(void)
{
    const char *v = getenv(T0_ENV);
    if (!v)
        return -1;
    int64_t real = strtoll(v, NULL, 10);
    return mono_ns() + (real - clock_ns(CLOCK_REALTIME));
}

/* ---- node 0's ranks: real processes recording through libstepscope ---- */

static int rank_main(double rate, uint64_t steps)
{
    ss_init();
    int64_t t0 = t0_from_env();
    if (t0 < 0) {
        fprintf(stderr, "bench_agents --rank: %s is not set\n", T0_ENV);
        return 1;
    }
    ss_name_id id[6];
    for (int i = 0; i < 6; i++)
        id[i] = ss_name(k_names[i]);
    int64_t period = (int64_t)(1e9 / rate);
    for (uint64_t s = 0; s < steps; s++) {
        int64_t begin = t0 + (int64_t)s * period;
        int64_t end = begin + period;
        sleep_until(end);
        int64_t d = (end - begin) * 9 / 10;
        ss_step_begin(s);
        ss_phase_span(id[0], begin, begin + d / 10);
        ss_phase_span(id[1], begin + d / 10, begin + d * 4 / 10);
        ss_phase_span(id[2], begin + d * 4 / 10, begin + d * 8 / 10);
        ss_sync_at(id[4], begin + d * 7 / 10);
        ss_phase_span(id[3], begin + d * 8 / 10, begin + d);
        ss_metric(id[5], 1.0 / (double)(s + 1));
        ss_memory_sample();
        ss_step_end();
    }
    ss_shutdown();
    return 0;
}

/* ---- one agent ---- */

typedef struct {
    uint32_t node;
    int fd;
    link_encoder enc;
    link_decoder dec;
    link_agent_hello hello;
    link_frame frame;
    uint8_t key[LINK_KEY_SIZE];
    uint8_t token[LINK_TOKEN_SIZE];
    char uuid[LINK_MAX_STR + 1];
    uint32_t attempt;
    size_t rx_len;
    uint8_t rx[RX_BUF];
    uint8_t *out; /* a batch of encoded frames */
    size_t out_len, out_cap;
    char err[256];
    pthread_t thread;
    ss_node_partial *partial; /* node mode: its ranks' step, built once */
    int64_t partial_at;       /* the step begin its times are at */
} agent;

static int fail(agent *a, const char *fmt, const char *detail)
{
    if (!a->err[0])
        snprintf(a->err, sizeof a->err, fmt, detail);
    atomic_store(&g_failed, 1);
    return -1;
}

static int flush_out(agent *a)
{
    size_t off = 0;
    while (off < a->out_len) {
        ssize_t k = write(a->fd, a->out + off, a->out_len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return fail(a, "write: %s", strerror(errno));
        off += (size_t)k;
    }
    atomic_fetch_add(&g_bytes, a->out_len);
    a->out_len = 0;
    return 0;
}

/* Appends F, encoded, to the batch. */
static int put(agent *a, const link_frame *f)
{
    if (a->out_cap - a->out_len < LINK_FRAME_MAX && flush_out(a) != 0)
        return -1;
    size_t n = link_encode(&a->enc, a->out + a->out_len,
                           a->out_cap - a->out_len, f);
    if (!n)
        return fail(a, "cannot encode a %s frame", link_type_name(f->type));
    a->out_len += n;
    atomic_fetch_add(&g_frames, 1);
    return 0;
}

static int put_data(agent *a, uint32_t channel, const uint8_t *b, size_t n)
{
    link_frame f = {.type = LINK_DATA};
    f.u.data = (link_data){channel, (uint32_t)n, b};
    return put(a, &f);
}

/* Reads what has arrived (waiting up to TIMEOUT_MS) and decodes it; the
 * frames that matter are kept one at a time: returns 1 with a->frame set,
 * 0 when nothing (more) came, -1 on error. */
static int next_frame(agent *a, int timeout_ms)
{
    for (;;) {
        size_t used = 0;
        char err[200];
        link_result rc = link_decoder_next(&a->dec, a->rx, a->rx_len, &a->frame,
                                           &used, err, sizeof err);
        if (rc == LINK_ERROR)
            return fail(a, "link: %s", err);
        if (rc == LINK_OK) {
            /* DATA's bytes point into rx: used before the next call. */
            memmove(a->rx, a->rx + used, a->rx_len - used);
            a->rx_len -= used;
            return 1;
        }
        struct pollfd p = {a->fd, POLLIN, 0};
        int k = poll(&p, 1, timeout_ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return 0;
        ssize_t n = read(a->fd, a->rx + a->rx_len, sizeof a->rx - a->rx_len);
        if (n == 0)
            return fail(a, "%s", "the controller closed the link");
        if (n < 0)
            return errno == EINTR ? 0 : fail(a, "read: %s", strerror(errno));
        a->rx_len += (size_t)n;
        timeout_ms = 0;
    }
}

/* Waits for a frame of TYPE, answering nothing else; -1 on error/timeout. */
static int expect(agent *a, link_type type, int timeout_ms)
{
    int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
    while (mono_ns() < deadline) {
        int k = next_frame(a, 100);
        if (k < 0)
            return -1;
        if (k == 1 && a->frame.type == LINK_JOIN_REJECT)
            return fail(a, "refused: %s", a->frame.u.join_reject.reason);
        if (k == 1 && a->frame.type == type)
            return 0;
    }
    return fail(a, "no %s in time", link_type_name(type));
}

/* Drains what the controller sent without blocking. */
static int drain(agent *a)
{
    int k;
    while ((k = next_frame(a, 0)) == 1)
        ;
    return k;
}

static int connect_link(agent *a)
{
    int64_t deadline = mono_ns() + 30 * 1000000000LL;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)(o.port + 1)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* Each simulated node from its own loopback address, as real nodes
     * are: the controller lets only a few handshakes wait per address. */
    struct sockaddr_in me = {.sin_family = AF_INET};
    me.sin_addr.s_addr = htonl(0x7f000000u | (1u + a->node / 250) << 8 |
                               (1u + a->node % 250));
    while (mono_ns() < deadline && !atomic_load(&g_ctl_gone)) {
        a->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(a->fd, (struct sockaddr *)&me, sizeof me) == 0 &&
            connect(a->fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            int one = 1;
            setsockopt(a->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return 0;
        }
        close(a->fd);
        a->fd = -1;
        usleep(100000);
    }
    return fail(a, "cannot connect: %s", strerror(errno));
}

static int handshake(agent *a)
{
    link_encoder_init(&a->enc, LINK_FROM_AGENT);
    link_decoder_init(&a->dec, LINK_FROM_CONTROLLER);
    bench_agent_hello(&a->hello, a->node, o.agents + 1, o.ranks, JOB_ID);
    link_frame f = {.type = LINK_AGENT_HELLO};
    f.u.hello = a->hello;
    if (put(a, &f) || flush_out(a) || expect(a, LINK_CHALLENGE, 30000))
        return -1;
    uint8_t want[LINK_PROOF_SIZE];
    link_auth_controller_proof(&g_secret, &a->hello,
                               a->frame.u.challenge.nonce, want);
    if (!link_auth_proof_equal(want, a->frame.u.challenge.proof))
        return fail(a, "%s", "the controller's proof is wrong");
    link_frame p = {.type = LINK_PROOF};
    link_auth_agent_proof(&g_secret, &a->hello, a->frame.u.challenge.nonce,
                          p.u.proof.proof);
    link_auth_session_key(&g_secret, &a->hello, a->frame.u.challenge.nonce,
                          a->key);
    if (put(a, &p) || flush_out(a))
        return -1;
    link_encoder_keyed(&a->enc, a->key);
    link_decoder_keyed(&a->dec, a->key);
    if (expect(a, LINK_JOIN_OK, 30000))
        return -1;
    if (a->frame.u.join_ok.world_size != (o.agents + 1) * o.ranks)
        return fail(a, "%s", "the controller's world size differs");
    if (a->frame.u.join_ok.aggregate !=
        (g_node_mode ? LINK_AGGREGATE_NODE : LINK_AGGREGATE_RANK))
        return fail(a, "%s", "the controller aggregates otherwise");
    link_auth_seal_token(a->key, a->frame.u.join_ok.sealed_token, a->token);
    snprintf(a->uuid, sizeof a->uuid, "%s", a->frame.u.join_ok.run_uuid);
    a->attempt = a->frame.u.join_ok.attempt;
    /* one clock round */
    ss_clock_sync s;
    ss_clock_sync_init(&s);
    for (int i = 0; i < SS_CLOCK_ROUND; i++) {
        link_frame t = {.type = LINK_TIME_REQ};
        t.u.time_req.t1 = mono_ns();
        if (put(a, &t) || flush_out(a) || expect(a, LINK_TIME_RESP, 10000))
            return -1;
        link_time_resp r = a->frame.u.time_resp;
        ss_clock_sync_add(&s, r.t1, r.t2, r.t3, mono_ns());
    }
    ss_clock_estimate e;
    if (ss_clock_sync_estimate(&s, mono_ns(), &e) != 0)
        return fail(a, "%s", "no clock estimate");
    link_frame c = {.type = LINK_CLOCK};
    c.u.clock = (link_clock){e.offset_ns, e.bound_ns, e.rtt_ns, e.samples};
    return put(a, &c);
}

static uint32_t rank_of(const agent *a, uint32_t i)
{
    return a->node * o.ranks + i;
}

/* RANK_STARTED, OPEN and the rank protocol's HELLO and NAMEs per rank. */
static int open_ranks(agent *a)
{
    uint8_t b[2048];
    for (uint32_t i = 0; i < o.ranks; i++) {
        link_frame f = {.type = LINK_RANK_STARTED};
        f.u.rank_started = (link_rank_started){rank_of(a, i),
                                               (uint32_t)getpid()};
        link_frame op = {.type = LINK_OPEN};
        op.u.channel.channel = i + 1;
        wire_hello h;
        memset(&h, 0, sizeof h);
        h.version = WIRE_VERSION;
        h.rank = rank_of(a, i);
        h.world_size = (o.agents + 1) * o.ranks;
        h.local_rank = i;
        h.pid = (uint32_t)getpid();
        h.attempt = a->attempt;
        memcpy(h.token, a->token, sizeof h.token);
        snprintf(h.run_id, sizeof h.run_id, "%s", a->uuid);
        snprintf(h.host, sizeof h.host, "sim%u", a->node);
        size_t n = wire_encode_hello(b, sizeof b, &h);
        for (uint32_t k = 0; k < 6; k++) {
            wire_name nm = {k + 1, ""};
            snprintf(nm.name, sizeof nm.name, "%s", k_names[k]);
            n += wire_encode_name(b + n, sizeof b - n, &nm);
        }
        if (put(a, &f) || put(a, &op) || put_data(a, i + 1, b, n))
            return -1;
    }
    return flush_out(a);
}

static size_t encode_step(uint8_t *buf, const agent *a, uint32_t i,
                          uint64_t step, int64_t begin, int64_t end)
{
    wire_step s;
    uint32_t rank = rank_of(a, i);
    int64_t d = (end - begin) * 9 / 10;
    s.step = step;
    s.begin_ns = begin;
    s.end_ns = begin + d;
    s.flags = WIRE_STEP_HAS_RSS | WIRE_STEP_HAS_SELF;
    s.rss_bytes = (uint64_t)(1u << 30) + rank * 4096u;
    s.device_bytes = 0;
    s.n_phases = 4;
    int64_t at[5] = {0, d / 10, d * 4 / 10, d * 8 / 10, d};
    for (uint32_t k = 0; k < 4; k++) {
        uint64_t len = (uint64_t)(at[k + 1] - at[k]) - (rank % 7) * 1000;
        s.phases[k] = (wire_phase){k + 1, 1, len, begin + at[k], len};
    }
    s.n_syncs = 1;
    s.syncs[0] = (wire_sync){5, begin + d * 7 / 10 + (int64_t)(rank % 13) * 20000};
    s.n_metrics = 1;
    s.metrics[0] = (wire_metric){6, 1.0 / (double)(step + 1)};
    return wire_encode_step(buf, WIRE_STEP_FRAME_MAX, &s);
}

/* Node mode: the agent's ranks' step, folded once (node_partial.h) with
 * the times encode_step gives them for a step that begins at 0. */
static int build_partial(agent *a)
{
    a->partial = malloc(sizeof *a->partial);
    if (!a->partial)
        return fail(a, "%s", "out of memory");
    int64_t period = (int64_t)(1e9 / o.rate), d = period * 9 / 10;
    int64_t at[5] = {0, d / 10, d * 4 / 10, d * 8 / 10, d};
    ss_np_init(a->partial, 0, o.ranks);
    for (uint32_t i = 0; i < o.ranks; i++) {
        const char *names[4];
        int64_t durs[4];
        for (uint32_t k = 0; k < 4; k++) {
            names[k] = k_names[k];
            durs[k] = at[k + 1] - at[k] - (int64_t)(rank_of(a, i) % 7) * 1000;
        }
        ss_np_add_rank(a->partial, rank_of(a, i), 0, d, 4, names, durs);
    }
    a->partial_at = 0;
    return 0;
}

static int send_partial(agent *a, uint64_t step, int64_t begin)
{
    a->partial->step = step;
    ss_np_shift(a->partial, begin - a->partial_at);
    a->partial_at = begin;
    link_frame f = {.type = LINK_NODE_PARTIAL};
    f.u.partial.p = a->partial;
    return put(a, &f);
}

static int send_status(agent *a, uint64_t step, int64_t since)
{
    uint8_t b[64];
    static _Thread_local uint8_t entries[LINK_MAX_PAYLOAD - 4];
    size_t len = 0;
    uint32_t count = 0;
    for (uint32_t i = 0; i < o.ranks; i++) {
        wire_status st = {step, 2, since, 0, 0, 0};
        size_t n = wire_encode_status(b, sizeof b, &st);
        if (!g_node_mode) {
            if (put_data(a, i + 1, b, n))
                return -1;
            continue;
        }
        if (link_node_status_put(entries, sizeof entries, &len, i + 1, b,
                                 n) != 0) {
            link_frame f = {.type = LINK_NODE_STATUS};
            f.u.node_status = (link_node_status){count, (uint32_t)len, entries};
            if (put(a, &f))
                return -1;
            len = count = 0;
            link_node_status_put(entries, sizeof entries, &len, i + 1, b, n);
        }
        count++;
    }
    if (count) {
        link_frame f = {.type = LINK_NODE_STATUS};
        f.u.node_status = (link_node_status){count, (uint32_t)len, entries};
        if (put(a, &f))
            return -1;
    }
    link_frame hb = {.type = LINK_HEARTBEAT};
    return put(a, &hb);
}

/* The host's evidence of one rank step, as a real agent sends it first. */
static int send_host(agent *a, uint32_t i, uint64_t step)
{
    link_frame f = {.type = LINK_HOST};
    f.u.host.rank = rank_of(a, i);
    f.u.host.step = step;
    ss_host_step *h = &f.u.host.host;
    h->cpu_ns = 80000000;
    h->runq_ns = 200000;
    h->stopped_ns = 0;
    h->throttled_ns = 0;
    h->nr_throttled = 0;
    h->vol_switches = 40;
    h->invol_switches = 3;
    h->major_faults = 0;
    h->psi_cpu_ns = h->psi_memory_ns = h->psi_io_ns = SS_MISSING;
    h->gpu.present = 0;
    h->gpu.index = -1;
    int64_t *g[] = {&h->gpu.covered_ns, &h->gpu.slowed_ns,
                    &h->gpu.power_cap_ns, &h->gpu.thermal_ns,
                    &h->gpu.hw_slowdown_ns, &h->gpu.sm_clock_mhz,
                    &h->gpu.temperature_c, &h->gpu.ecc_new, &h->gpu.xid_new,
                    &h->gpu.last_xid};
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++)
        *g[k] = SS_MISSING;
    return put(a, &f);
}

static int run_steps(agent *a)
{
    int64_t period = (int64_t)(1e9 / o.rate);
    int64_t next_status = mono_ns() + 1000000000;
    uint8_t b[WIRE_STEP_FRAME_MAX];
    for (uint64_t s = 0; s < g_steps; s++) {
        int64_t begin = g_t0_mono + (int64_t)s * period;
        int64_t due = begin + period;
        for (;;) {
            int64_t now = mono_ns();
            if (now >= next_status) {
                if (send_status(a, s, begin) || flush_out(a))
                    return -1;
                next_status += 1000000000;
            }
            if (now >= due)
                break;
            int64_t wake = due < next_status ? due : next_status;
            int ms = (int)((wake - now + 999999) / 1000000);
            if (next_frame(a, ms) < 0)
                return -1;
        }
        for (uint32_t i = 0; i < o.ranks; i++) {
            size_t n = encode_step(b, a, i, s, begin, due);
            if ((!o.no_host && send_host(a, i, s)) || put_data(a, i + 1, b, n))
                return -1;
        }
        if (g_node_mode && send_partial(a, s, begin))
            return -1;
        if (flush_out(a) || drain(a) < 0)
            return -1;
    }
    return 0;
}

static int close_ranks(agent *a)
{
    uint8_t b[64];
    for (uint32_t i = 0; i < o.ranks; i++) {
        wire_bye bye = {g_steps - 1};
        size_t n = wire_encode_bye(b, sizeof b, &bye);
        link_frame cl = {.type = LINK_CLOSE};
        cl.u.channel.channel = i + 1;
        link_frame ex = {.type = LINK_RANK_EXIT};
        ex.u.rank_exit.rank = rank_of(a, i);
        if (put_data(a, i + 1, b, n) || put(a, &cl) || put(a, &ex))
            return -1;
    }
    link_frame all = {.type = LINK_ALL_EXITED};
    link_frame bye = {.type = LINK_BYE};
    if (put(a, &all) || put(a, &bye) || flush_out(a))
        return -1;
    /* Keep reading until the controller closes the link (it does once
     * the run is over) so nothing it sends is refused. */
    int64_t deadline = mono_ns() + 60 * 1000000000LL;
    while (mono_ns() < deadline) {
        struct pollfd p = {a->fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t n = read(a->fd, a->rx, sizeof a->rx);
        if (n <= 0)
            break;
    }
    return 0;
}

static void *agent_main(void *arg)
{
    agent *a = arg;
    a->out_cap = 1u << 20;
    a->out = malloc(a->out_cap);
    /* Thousands of agents joining at once meet the controller's caps on
     * waiting handshakes: spread over the first seconds, and retried as a
     * real agent retries. */
    usleep((useconds_t)(a->node % 2000) * 1000);
    int joined = 0;
    for (int attempt = 0; a->out && !joined && attempt < 30 &&
                          !atomic_load(&g_ctl_gone);
         attempt++) {
        joined = connect_link(a) == 0 && handshake(a) == 0;
        if (!joined && a->fd >= 0) {
            close(a->fd);
            a->fd = -1;
            a->out_len = a->rx_len = 0;
            usleep(500000 + (useconds_t)(a->node % 100) * 10000);
        }
        if (!joined && attempt < 29)
            a->err[0] = 0;
    }
    if (joined && (!g_node_mode || build_partial(a) == 0) &&
        open_ranks(a) == 0 && run_steps(a) == 0)
        close_ranks(a);
    if (a->fd >= 0)
        close(a->fd);
    free(a->out);
    free(a->partial);
    return NULL;
}

/* ---- the controller and its samples ---- */

typedef struct {
    double t, cpu_pct, rss_mib, gen_cpu_pct;
    double anon_mib, file_mib, shmem_mib; /* the parts of RSS */
} sample;

/* Fills S's RSS and its anonymous, file and shared-memory parts (MiB). */
static void proc_rss(pid_t pid, sample *s)
{
    bench_mem m = bench_proc_mem(pid);
    s->rss_mib = m.rss;
    s->anon_mib = m.anon;
    s->file_mib = m.file;
    s->shmem_mib = m.shmem;
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static pid_t start_controller(const char *self, const char *token,
                              const char *db, const char *log)
{
    char nn[16], np[16], port[16], rate[32], steps[32], join[32];
    snprintf(join, sizeof join, "%.0f", o.warmup + 60);
    snprintf(nn, sizeof nn, "%u", o.agents + 1);
    snprintf(np, sizeof np, "%u", o.ranks);
    snprintf(port, sizeof port, "%u", o.port);
    snprintf(rate, sizeof rate, "%g", o.rate);
    snprintf(steps, sizeof steps, "%" PRIu64, g_steps);
    const char *argv[] = {
        o.stepscope, "run", "--nnodes", nn, "--node-rank", "0",
        "--master-addr", "127.0.0.1", "--master-port", port, "-n", np,
        "--token-file", token, "--job-id", JOB_ID, "--db", db, "--no-http",
        "--join-timeout", join, "--aggregate", g_node_mode ? "node" : "rank",
        "--", self, "--rank", rate, steps, NULL};
    return bench_spawn_logged(log, (char *const *)argv);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_agents [--agents N] [--ranks M] [--rate R] "
            "[--seconds S]\n"
            "                    [--port P] [--stepscope PATH] [--dir DIR] "
            "[--warmup S] [--keep]\n"
            "                    [--samples CSV]   (t is seconds from the "
            "first step)\n"
            "                    [--aggregate rank|node|rank,node] "
            "[--repeat N] [--no-host]\n");
    exit(2);
}

typedef struct {
    int node_mode;
    double load0, ctl_cpu, rss10, rss_max, gen_cpu;
    int64_t steps, forced, lost;
    double lat50, lat99, merge50, merge99;
    int exit_status, agent_errors;
} result;

/* One run of the controller under the simulated agents (g_node_mode
 * says how it aggregates); its figures into *OUT.  Returns 0 when every
 * step was finalized and every rank-step stored. */
static int run_once(const char *self, const char *token, const char *db,
                    const char *log, result *out)
{
    int64_t t0_real = clock_ns(CLOCK_REALTIME) + (int64_t)(o.warmup * 1e9);
    char t0s[32];
    snprintf(t0s, sizeof t0s, "%" PRId64, t0_real);
    setenv(T0_ENV, t0s, 1);
    atomic_store(&g_ctl_gone, 0);
    atomic_store(&g_frames, 0);
    atomic_store(&g_bytes, 0);
    unlink(db);
    double load0 = -1;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &load0) != 1)
            load0 = -1;
        fclose(la);
    }
    g_t0_mono = t0_from_env();
    uint32_t world = (o.agents + 1) * o.ranks;
    printf("\nbench_agents: %u agents x %u ranks + node 0's %u = %u ranks, "
           "%g steps/s for %g s (%" PRIu64 " steps), --aggregate %s, HOST "
           "frames %s, load average %.2f, store %s\n",
           o.agents, o.ranks, o.ranks, world, o.rate, o.seconds, g_steps,
           g_node_mode ? "node" : "rank", o.no_host ? "off" : "on", load0, db);
    fflush(stdout);

    pid_t ctl = start_controller(self, token, db, log);
    if (ctl < 0) {
        perror("bench_agents: fork");
        return 1;
    }
    double gen0 = bench_self_cpu_s();
    agent *ag = calloc(o.agents, sizeof *ag);
    for (uint32_t i = 0; i < o.agents; i++) {
        ag[i].node = i + 1;
        ag[i].fd = -1;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256 * 1024);
        pthread_create(&ag[i].thread, &at, agent_main, &ag[i]);
        pthread_attr_destroy(&at);
    }

    /* sample once a second until the controller exits */
    static sample samples[MAX_SAMPLES];
    size_t ns = 0; /* from the start again on each run */
    double prev = 0, cpu = 0;
    bench_proc_cpu_s(ctl, &prev);
    double prev_gen = bench_self_cpu_s();
    int64_t start = mono_ns(), next = start + 1000000000;
    int status = 0;
    pid_t done = 0;
    double cpu_run0 = -1, cpu_run1 = -1;
    double gen_run0 = 0, gen_run1 = 0;
    int64_t run_end = g_t0_mono + (int64_t)(o.seconds * 1e9);
    while ((done = waitpid(ctl, &status, WNOHANG)) == 0) {
        sleep_until(next);
        next += 1000000000;
        if (bench_proc_cpu_s(ctl, &cpu) != 0)
            continue;
        double gen = bench_self_cpu_s();
        double t = (mono_ns() - g_t0_mono) / 1e9;
        if (cpu_run0 < 0 && mono_ns() >= g_t0_mono) {
            cpu_run0 = cpu;
            gen_run0 = gen;
        }
        if (cpu_run1 < 0 && mono_ns() >= run_end) {
            cpu_run1 = cpu;
            gen_run1 = gen;
        }
        if (ns < MAX_SAMPLES) {
            /* samples[] is static: one run's after the other's */
            samples[ns] = (sample){t, 100.0 * (cpu - prev), 0,
                                   100.0 * (gen - prev_gen), 0, 0, 0};
            proc_rss(ctl, &samples[ns++]);
        }
        prev = cpu;
        prev_gen = gen;
    }
    int64_t ctl_end = mono_ns();
    atomic_store(&g_ctl_gone, 1);
    for (uint32_t i = 0; i < o.agents; i++)
        pthread_join(ag[i].thread, NULL);
    double gen_total = bench_self_cpu_s() - gen0;

    /* the controller's last sample may be of a process already ending */
    while (ns > 0 && samples[ns - 1].rss_mib <= 0)
        ns--;
    FILE *cf = o.samples ? fopen(o.samples, "w") : NULL;
    if (cf) {
        fprintf(cf, "t_s,controller_cpu_pct,controller_rss_mib,anon_mib,"
                    "file_mib,shmem_mib,generator_cpu_pct\n");
        for (size_t i = 0; i < ns; i++)
            fprintf(cf, "%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f\n", samples[i].t,
                    samples[i].cpu_pct, samples[i].rss_mib,
                    samples[i].anon_mib, samples[i].file_mib,
                    samples[i].shmem_mib, samples[i].gen_cpu_pct);
        fclose(cf);
    }
    printf("\n   t(s)  controller CPU%%    RSS MiB  (anon  shmem)   "
           "generator CPU%%\n");
    for (size_t i = 0; i < ns; i++)
        if (i % 5 == 4 || i + 1 == ns || samples[i].t < 1)
            printf("  %5.0f  %14.1f  %9.1f  %6.1f %6.1f  %15.1f\n",
                   samples[i].t, samples[i].cpu_pct, samples[i].rss_mib,
                   samples[i].anon_mib, samples[i].shmem_mib,
                   samples[i].gen_cpu_pct);
    double rss_min = 1e18, rss_max = 0, rss_at10 = -1;
    for (size_t i = 0; i < ns; i++)
        if (samples[i].t >= 0 && samples[i].t <= o.seconds) {
            if (samples[i].rss_mib < rss_min) rss_min = samples[i].rss_mib;
            if (samples[i].rss_mib > rss_max) rss_max = samples[i].rss_mib;
            if (rss_at10 < 0 && samples[i].t >= 10) rss_at10 = samples[i].rss_mib;
        }
    int agent_errors = 0;
    for (uint32_t i = 0; i < o.agents; i++)
        if (ag[i].err[0]) {
            if (agent_errors++ < 5)
                fprintf(stderr, "bench_agents: node %u: %s\n", ag[i].node,
                        ag[i].err);
        }

    int64_t steps = -1, missing = -1, rank_steps = -1, forced_missing = -1;
    int64_t rows = -1;
    sqlite3 *sdb = NULL;
    if (sqlite3_open_v2(db, &sdb, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        steps = query_int(sdb, "SELECT count(*) FROM steps");
        missing = query_int(sdb, "SELECT coalesce(sum(n_missing),0) FROM steps");
        forced_missing = query_int(sdb, "SELECT count(*) FROM steps WHERE n_missing > 0");
        rank_steps = query_int(sdb, "SELECT coalesce(sum(steps),0) FROM rank_totals");
        rows = query_int(sdb, "SELECT count(*) FROM rank_steps");
    }
    sqlite3_close(sdb);
    double run_s = o.seconds;
    if (ns == 0)
        printf("  (no sample: the controller ended at once)\n");
    double ctl_cpu_run = cpu_run1 >= 0 && cpu_run0 >= 0
                             ? 100.0 * (cpu_run1 - cpu_run0) / run_s
                             : -1;
    double gen_cpu_run = cpu_run1 >= 0 ? 100.0 * (gen_run1 - gen_run0) / run_s : -1;
    uint64_t sent = (uint64_t)world * g_steps;
    printf("\nworld %u ranks (%u agents x %u + node 0), %g steps/s, %" PRIu64
           " steps: %.0f rank-steps/s\n", world, o.agents, o.ranks, o.rate,
           g_steps, world * o.rate);
    printf("controller: CPU %.1f%% of a core over the %g s run, RSS %.1f MiB at "
           "10 s -> %.1f MiB max (min %.1f)\n", ctl_cpu_run, run_s, rss_at10,
           rss_max, rss_min);
    printf("generator:  CPU %.1f%% of a core over the run (%.1f s in all), "
           "%" PRIu64 " link frames, %.1f MiB\n", gen_cpu_run, gen_total,
           (uint64_t)atomic_load(&g_frames),
           atomic_load(&g_bytes) / 1048576.0);
    printf("store:      %" PRId64 " steps finalized of %" PRIu64 ", %" PRId64
           " with ranks missing (%" PRId64 " rank-steps missing), %" PRId64
           " rank-steps in the ranks' totals of %" PRIu64 " sent (%" PRId64
           " dropped), %" PRId64 " rank-step rows kept\n",
           steps, g_steps, forced_missing, missing, rank_steps, sent,
           (int64_t)sent - rank_steps, rows);
    printf("controller exited %d after %.1f s past the last step; agent errors: %d\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
           (ctl_end - run_end) / 1e9, agent_errors);
    /* the controller's summary lines, and its figures of finalization */
    FILE *lf = fopen(log, "r");
    char line[1024], merge_line[1024] = "";
    double lat50 = -1, lat99 = -1;
    printf("controller log (last lines):\n");
    long lines = 0;
    while (lf && fgets(line, sizeof line, lf)) {
        lines++;
        const char *p = strstr(line, "to finalization p50 ");
        if (p)
            sscanf(p, "to finalization p50 %lf ms, p99 %lf", &lat50, &lat99);
        if (strstr(line, "node partials: "))
            snprintf(merge_line, sizeof merge_line, "%s", line);
    }
    if (lf) {
        rewind(lf);
        long i = 0;
        while (fgets(line, sizeof line, lf))
            if (++i > lines - 6)
                printf("  %s", line);
        fclose(lf);
    }
    free(ag);
    *out = (result){g_node_mode, load0, ctl_cpu_run, rss_at10, rss_max,
                    gen_cpu_run, steps, forced_missing,
                    (int64_t)sent - rank_steps, lat50, lat99, 0, 0,
                    WIFEXITED(status) ? WEXITSTATUS(status)
                                      : 128 + WTERMSIG(status),
                    agent_errors};
    if (merge_line[0]) {
        const char *p50 = strstr(merge_line, "to merged p50 ");
        if (p50)
            sscanf(p50, "to merged p50 %lf ms, p99 %lf", &out->merge50,
                   &out->merge99);
    }
    return agent_errors || steps != (int64_t)g_steps ||
                   rank_steps != (int64_t)sent
               ? 1
               : 0;
}

/* The runs side by side. */
static void compare(const result *r, int n)
{
    printf("\n%-9s %6s %13s %16s %14s %10s %9s %12s %12s\n", "aggregate",
           "load", "ctl CPU %", "RSS 10s/max MiB", "steps final", "lost",
           "gen CPU%", "final p50/p99", "merged p50/99");
    for (int i = 0; i < n; i++) {
        char merged[32] = "-";
        if (r[i].node_mode)
            snprintf(merged, sizeof merged, "%.1f/%.1f ms", r[i].merge50,
                     r[i].merge99);
        printf("%-9s %6.2f %13.1f %7.0f/%-8.0f %8" PRId64 "/%-5" PRIu64
               " %10" PRId64 " %9.1f %5.1f/%-6.1f %12s%s\n",
               r[i].node_mode ? "node" : "rank", r[i].load0, r[i].ctl_cpu,
               r[i].rss10, r[i].rss_max, r[i].steps, g_steps, r[i].lost,
               r[i].gen_cpu, r[i].lat50, r[i].lat99, merged,
               r[i].exit_status || r[i].agent_errors ? "  (failed)" : "");
    }
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--rank") == 0)
        return rank_main(atof(argv[2]), strtoull(argv[3], NULL, 10));
    static const struct option opts[] = {
        {"agents", required_argument, NULL, 'a'},
        {"ranks", required_argument, NULL, 'r'},
        {"rate", required_argument, NULL, 'R'},
        {"seconds", required_argument, NULL, 'S'},
        {"port", required_argument, NULL, 'p'},
        {"stepscope", required_argument, NULL, 'x'},
        {"dir", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'w'},
        {"keep", no_argument, NULL, 'k'},
        {"samples", required_argument, NULL, 'c'},
        {"aggregate", required_argument, NULL, 'A'},
        {"repeat", required_argument, NULL, 'n'},
        {"no-host", no_argument, NULL, 'H'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a': o.agents = (uint32_t)atoi(optarg); break;
        case 'r': o.ranks = (uint32_t)atoi(optarg); break;
        case 'R': o.rate = atof(optarg); break;
        case 'S': o.seconds = atof(optarg); break;
        case 'p': o.port = (unsigned)atoi(optarg); break;
        case 'x': o.stepscope = optarg; break;
        case 'd': o.dir = optarg; break;
        case 'w': o.warmup = atof(optarg); break;
        case 'k': o.keep = 1; break;
        case 'c': o.samples = optarg; break;
        case 'A': o.aggregate = optarg; break;
        case 'n': o.repeat = atoi(optarg); break;
        case 'H': o.no_host = 1; break;
        default: usage();
        }
    }
    int modes[2], n_modes = 0;
    if (strcmp(o.aggregate, "rank") == 0 || strcmp(o.aggregate, "node") == 0)
        modes[n_modes++] = o.aggregate[0] == 'n';
    else if (strcmp(o.aggregate, "rank,node") == 0 ||
             strcmp(o.aggregate, "node,rank") == 0) {
        modes[n_modes++] = o.aggregate[0] == 'n';
        modes[n_modes++] = o.aggregate[0] != 'n';
    } else {
        usage();
    }
    if (!o.agents || !o.ranks || o.rate <= 0 || o.seconds <= 0 ||
        o.port == 0 || o.port > 65534 || o.repeat < 1)
        usage();
    char self[PATH_MAX], ss[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    if (!o.stepscope) {
        snprintf(ss, sizeof ss, "%s", self);
        char *slash = strrchr(ss, '/');
        *slash = 0;
        slash = strrchr(ss, '/');
        snprintf(slash ? slash + 1 : ss, sizeof ss - (size_t)(slash ? slash + 1 - ss : 0),
                 "stepscope");
        o.stepscope = ss;
    }
    if (!o.warmup)
        o.warmup = 3.0 + o.agents * 0.05;
    g_steps = (uint64_t)(o.rate * o.seconds);

    char dir[PATH_MAX], token[PATH_MAX + 16], db[PATH_MAX + 16], log[PATH_MAX + 16];
    if (bench_work_dir(dir, sizeof dir, o.dir, "bench_agents") != 0)
        return 1;
    snprintf(token, sizeof token, "%s/token", dir);
    snprintf(db, sizeof db, "%s/store.db", dir);
    snprintf(log, sizeof log, "%s/controller.log", dir);
    unlink(db);
    if (bench_token_file(token, &g_secret, "bench_agents") != 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    result res[64];
    int n_res = 0, rc = 0;
    for (int r = 0; r < o.repeat; r++)
        for (int m = 0; m < n_modes && n_res < 64; m++) {
            g_node_mode = modes[m];
            rc |= run_once(self, token, db, log, &res[n_res++]);
        }
    if (n_res > 1)
        compare(res, n_res);
    if (!o.keep && !o.dir) {
        /* the token, the store and the ranks' logs beside it */
        bench_remove_tree(dir);
    } else {
        printf("kept %s\n", dir);
    }
    return rc;
}

