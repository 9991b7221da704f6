/*
 * link_wire_test.c - unit tests for the agent link's codec (link_wire.c):
 * every frame type round-trips in its direction; after JOIN_OK a flipped
 * bit anywhere, a replayed, reordered or reflected frame is an error; the
 * direction of each type and the order of the handshake are enforced;
 * every prefix of a frame asks for more; oversized payloads, bad strings,
 * trailing bytes and out-of-range fields are refused by the decoder and
 * the encoder alike.
 */
#include "link_wire.h"

#include <sodium.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"

static const uint8_t k_key[LINK_KEY_SIZE] = {
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static uint8_t g_buf[LINK_FRAME_MAX];
static uint8_t g_data[LINK_MAX_DATA + 1];

static link_frame hello_frame(void)
{
    link_frame f;
    memset(&f, 0, sizeof f);
    f.type = LINK_AGENT_HELLO;
    f.u.hello.version = LINK_VERSION;
    f.u.hello.node_rank = 2;
    f.u.hello.nnodes = 4;
    f.u.hello.nproc_per_node = 8;
    for (int i = 0; i < LINK_NONCE_SIZE; i++)
        f.u.hello.nonce[i] = (uint8_t)(0xa0 + i);
    strcpy(f.u.hello.job_id, "job-42");
    strcpy(f.u.hello.host, "node-c.example");
    return f;
}

/* A frame of TYPE with every field set to something recognisable. */
static link_frame sample(link_type type)
{
    link_frame f;
    memset(&f, 0, sizeof f);
    f.type = type;
    switch (type) {
    case LINK_AGENT_HELLO:
        return hello_frame();
    case LINK_CHALLENGE:
        for (int i = 0; i < LINK_NONCE_SIZE; i++)
            f.u.challenge.nonce[i] = (uint8_t)(0x10 + i);
        for (int i = 0; i < LINK_PROOF_SIZE; i++)
            f.u.challenge.proof[i] = (uint8_t)(0xf0 - i);
        break;
    case LINK_PROOF:
        for (int i = 0; i < LINK_PROOF_SIZE; i++)
            f.u.proof.proof[i] = (uint8_t)(0x55 ^ i);
        break;
    case LINK_JOIN_OK:
        f.u.join_ok.attempt = 3;
        f.u.join_ok.world_size = 32;
        f.u.join_ok.controller_mono_ns = 123456789012345LL;
        for (int i = 0; i < LINK_TOKEN_SIZE; i++)
            f.u.join_ok.sealed_token[i] = (uint8_t)(0x80 | i);
        f.u.join_ok.aggregate = LINK_AGGREGATE_NODE;
        f.u.join_ok.node_rank = 3;
        strcpy(f.u.join_ok.run_uuid, "0f1e2d3c-aaaa-bbbb-cccc-000011112222");
        break;
    case LINK_JOIN_REJECT:
        strcpy(f.u.join_reject.reason, "node rank 2 has already joined");
        break;
    case LINK_OPEN:
    case LINK_CLOSE:
        f.u.channel.channel = 0xdeadbeef;
        break;
    case LINK_DATA:
        f.u.data.channel = 7;
        f.u.data.len = 300;
        f.u.data.bytes = g_data;
        break;
    case LINK_TIME_REQ:
        f.u.time_req.t1 = -5;
        break;
    case LINK_TIME_RESP:
        f.u.time_resp.t1 = 100;
        f.u.time_resp.t2 = INT64_MAX - 10;
        f.u.time_resp.t3 = INT64_MAX - 3;
        break;
    case LINK_CLOCK:
        f.u.clock.offset_ns = -1000000000000LL;
        f.u.clock.bound_ns = 12345;
        f.u.clock.rtt_ns = 24000;
        f.u.clock.samples = 8;
        break;
    case LINK_RANK_STARTED:
        f.u.rank_started.rank = 17;
        f.u.rank_started.pid = 4000000;
        break;
    case LINK_RANK_STOP:
        f.u.rank_stop.rank = 21;
        f.u.rank_stop.state = LINK_STOP_TRACED;
        f.u.rank_stop.stopped_ms = 4000000000u;
        break;
    case LINK_RANK_EXIT:
        f.u.rank_exit.rank = 17;
        f.u.rank_exit.exit_code = -1;
        f.u.rank_exit.term_signal = 9;
        strcpy(f.u.rank_exit.tail, "Traceback:\n\tline 1\nOOM\n");
        break;
    case LINK_ALL_EXITED:
        f.u.all_exited.left_behind = 2;
        f.u.all_exited.status = -3;
        break;
    case LINK_HOST: {
        f.u.host.rank = 9;
        f.u.host.step = UINT64_MAX - 1;
        ss_host_step *h = &f.u.host.host;
        h->cpu_ns = 1;
        h->runq_ns = SS_MISSING;
        h->stopped_ns = 3;
        h->throttled_ns = 4;
        h->nr_throttled = 5;
        h->vol_switches = 6;
        h->invol_switches = 7;
        h->major_faults = 8;
        h->psi_cpu_ns = 9;
        h->psi_memory_ns = SS_MISSING;
        h->psi_io_ns = INT64_MAX;
        h->gpu.present = 1;
        h->gpu.index = -2;
        h->gpu.covered_ns = 11;
        h->gpu.slowed_ns = 12;
        h->gpu.power_cap_ns = 13;
        h->gpu.thermal_ns = 14;
        h->gpu.hw_slowdown_ns = 15;
        h->gpu.sm_clock_mhz = 1410;
        h->gpu.temperature_c = SS_MISSING;
        h->gpu.ecc_new = 18;
        h->gpu.xid_new = 19;
        h->gpu.last_xid = 79;
        break;
    }
    case LINK_STOP:
        f.u.stop.kill_now = 1;
        strcpy(f.u.stop.reason, "the job was stopped from the dashboard");
        break;
    case LINK_RESTART:
        f.u.restart.attempt = 3;
        break;
    case LINK_HEALTH:
        f.u.health.ok = 0;
        strcpy(f.u.health.check, "disk");
        strcpy(f.u.health.output, "/ckpt: 2.0 GB free\n\tless than 10 GB\n");
        break;
    case LINK_INJECT:
        f.u.inject.rank = 5;
        f.u.inject.signal = SIGSTOP;
        f.u.inject.duration_ms = 500;
        break;
    case LINK_STACKS_REQ:
        f.u.stacks_req = (link_stacks_req){77, 1, 1500};
        break;
    case LINK_STACKS_PART: {
        static const char part[] = "{\"rank\":3,\"host\":\"n1\",\"pid\":41";
        f.u.stacks_part = (link_stacks_part){77, 3, 0, sizeof part - 1,
                                             (const uint8_t *)part};
        break;
    }
    case LINK_RECENT_REQ:
        f.u.recent_req = (link_recent_req){78, 5, 256};
        break;
    case LINK_RECENT_PART: {
        static const char part[] = "{\"rank\":5,\"rows\":[{\"step\":9";
        f.u.recent_part = (link_recent_part){78, 5, 1, sizeof part - 1,
                                             (const uint8_t *)part};
        break;
    }
    case LINK_NODE_PARTIAL: {
        static ss_node_partial p;
        static const char *const names[] = {"forward", "backward"};
        ss_np_init(&p, 12, 4);
        for (uint32_t r = 8; r < 11; r++) {
            int64_t durs[] = {1000000 * (int64_t)r, 2000000};
            ss_np_add_rank(&p, r, 5000, 5000 + 4000000 * (int64_t)r, 2, names,
                           durs);
        }
        f.u.partial.p = &p;
        break;
    }
    case LINK_NODE_STATUS: {
        static uint8_t entries[64];
        size_t len = 0;
        static const uint8_t a[] = {1, 2, 3}, b[] = {9, 8, 7, 6, 5};
        link_node_status_put(entries, sizeof entries, &len, 3, a, sizeof a);
        link_node_status_put(entries, sizeof entries, &len, 70000, b,
                             sizeof b);
        f.u.node_status = (link_node_status){2, (uint32_t)len, entries};
        break;
    }
    default:
        break;
    }
    return f;
}

static void fill_data(void)
{
    for (size_t i = 0; i < sizeof g_data; i++)
        g_data[i] = (uint8_t)(i * 7 + 3);
}

/* The two ends of one link, with the handshake done: the agent writes
 * through AGENT_ENC to the controller's CTRL_DEC and the controller
 * through CTRL_ENC to the agent's AGENT_DEC, all keyed with k_key. */
typedef struct {
    link_encoder agent_enc, ctrl_enc;
    link_decoder ctrl_dec, agent_dec;
} link_pair;

static link_result feed(link_decoder *d, const uint8_t *buf, size_t n,
                        link_frame *out, size_t *used, char *err)
{
    return link_decoder_next(d, buf, n, out, used, err, 256);
}

static int pass(link_encoder *e, link_decoder *d, link_type type,
                link_frame *out)
{
    link_frame f = sample(type);
    size_t n = link_encode(e, g_buf, sizeof g_buf, &f);
    if (n == 0)
        return 0;
    size_t used = 0;
    char err[256];
    link_result rc = feed(d, g_buf, n, out, &used, err);
    if (rc != LINK_OK)
        fprintf(stderr, "  decode %s: %s\n", link_type_name(type), err);
    return rc == LINK_OK && used == n;
}

static int handshake(link_pair *p)
{
    link_frame out;
    link_encoder_init(&p->agent_enc, LINK_FROM_AGENT);
    link_encoder_init(&p->ctrl_enc, LINK_FROM_CONTROLLER);
    link_decoder_init(&p->ctrl_dec, LINK_FROM_AGENT);
    link_decoder_init(&p->agent_dec, LINK_FROM_CONTROLLER);
    if (!pass(&p->agent_enc, &p->ctrl_dec, LINK_AGENT_HELLO, &out) ||
        !pass(&p->ctrl_enc, &p->agent_dec, LINK_CHALLENGE, &out))
        return 0;
    link_decoder_keyed(&p->agent_dec, k_key);
    if (!pass(&p->agent_enc, &p->ctrl_dec, LINK_PROOF, &out))
        return 0;
    link_decoder_keyed(&p->ctrl_dec, k_key);
    link_encoder_keyed(&p->ctrl_enc, k_key);
    link_encoder_keyed(&p->agent_enc, k_key);
    return pass(&p->ctrl_enc, &p->agent_dec, LINK_JOIN_OK, &out);
}

static const link_type k_from_agent[] = {
    LINK_OPEN, LINK_DATA, LINK_CLOSE, LINK_TIME_REQ, LINK_CLOCK,
    LINK_HEARTBEAT, LINK_RANK_STARTED, LINK_RANK_EXIT, LINK_ALL_EXITED,
    LINK_HOST, LINK_RANK_STOP, LINK_BYE, LINK_HEALTH, LINK_STACKS_PART,
    LINK_NODE_PARTIAL, LINK_NODE_STATUS, LINK_RECENT_PART};
static const link_type k_from_controller[] = {
    LINK_DATA, LINK_CLOSE, LINK_TIME_RESP, LINK_HEARTBEAT, LINK_STOP,
    LINK_RESTART, LINK_END, LINK_INJECT, LINK_STACKS_REQ, LINK_RECENT_REQ};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int same_frame(const link_frame *a, const link_frame *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == LINK_DATA)
        return a->u.data.channel == b->u.data.channel &&
               a->u.data.len == b->u.data.len &&
               memcmp(a->u.data.bytes, b->u.data.bytes, a->u.data.len) == 0;
    if (a->type == LINK_STACKS_PART || a->type == LINK_RECENT_PART) {
        const link_stacks_part *x = &a->u.stacks_part, *y = &b->u.stacks_part;
        return x->request_id == y->request_id && x->rank == y->rank &&
               x->last == y->last && x->len == y->len &&
               memcmp(x->bytes, y->bytes, x->len) == 0;
    }
    if (a->type == LINK_NODE_PARTIAL) {
        static uint8_t x[SS_NP_ENCODED_MAX], y[SS_NP_ENCODED_MAX];
        size_t nx = ss_np_encode(a->u.partial.p, x, sizeof x);
        size_t ny = ss_np_encode(b->u.partial.p, y, sizeof y);
        return nx > 0 && nx == ny && memcmp(x, y, nx) == 0;
    }
    if (a->type == LINK_NODE_STATUS) {
        const link_node_status *x = &a->u.node_status, *y = &b->u.node_status;
        return x->count == y->count && x->len == y->len &&
               memcmp(x->entries, y->entries, x->len) == 0;
    }
    return memcmp(&a->u, &b->u, sizeof a->u) == 0;
}

/* NODE_STATUS entries read back in order; malformed lists and partials
 * are refused with a reason. */
static void node_frames(void)
{
    link_frame f = sample(LINK_NODE_STATUS);
    size_t off = 0, n;
    uint32_t channel;
    const uint8_t *bytes;
    CHECK_EQ_INT(link_node_status_next(&f.u.node_status, &off, &channel,
                                       &bytes, &n), 1);
    CHECK_EQ_INT(channel, 3);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(link_node_status_next(&f.u.node_status, &off, &channel,
                                       &bytes, &n), 1);
    CHECK_EQ_INT(channel, 70000);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(bytes[4], 5);
    CHECK_EQ_INT(link_node_status_next(&f.u.node_status, &off, &channel,
                                       &bytes, &n), 0);
    uint8_t big[300] = {1};
    size_t len = 0;
    CHECK_EQ_INT(link_node_status_put(big, sizeof big, &len, 1, big, 0), -1);
    CHECK_EQ_INT(link_node_status_put(big, sizeof big, &len, 1, big, 256), -1);
    CHECK_EQ_INT(link_node_status_put(big, 10, &len, 1, big, 6), -1);

    char err[256];
    link_frame out;
    size_t used;
    const struct { uint32_t count; int cut; const char *want; } bad[] = {
        {3, 0, "says 3 entries"},
        {2, 1, "malformed entry"},
    };
    for (size_t i = 0; i < COUNT(bad); i++) {
        link_pair p;
        REQUIRE(handshake(&p));
        link_frame g = sample(LINK_NODE_STATUS);
        g.u.node_status.count = bad[i].count;
        g.u.node_status.len -= (uint32_t)bad[i].cut;
        size_t m = link_encode(&p.agent_enc, g_buf, sizeof g_buf, &g);
        REQUIRE(m > 0);
        CHECK(feed(&p.ctrl_dec, g_buf, m, &out, &used, err) == LINK_ERROR);
        CHECK(strstr(err, bad[i].want) != NULL);
    }
    /* a partial that counts more ranks present than expected cannot be
     * encoded; one cut short is refused (the keyed decoder's refusals of
     * any flipped bit cover the frame itself) */
    link_frame g = sample(LINK_NODE_PARTIAL);
    ss_node_partial q = *g.u.partial.p;
    q.ranks_expected = 2;
    g.u.partial.p = &q;
    link_pair p;
    REQUIRE(handshake(&p));
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &g), 0);
    g = sample(LINK_NODE_PARTIAL);
    static uint8_t payload[SS_NP_ENCODED_MAX];
    size_t pn = ss_np_encode(g.u.partial.p, payload, sizeof payload);
    REQUIRE(pn > 1);
    CHECK(ss_np_decode(payload, pn - 1, &q, err, sizeof err) == -1);
    CHECK(strstr(err, "truncated") != NULL);
    /* and a controller's decoder refuses a JOIN_OK with an unknown
     * aggregation */
    link_frame j = sample(LINK_JOIN_OK);
    j.u.join_ok.aggregate = 2;
    link_encoder ce;
    link_encoder_init(&ce, LINK_FROM_CONTROLLER);
    CHECK_EQ_INT(link_encode(&ce, g_buf, sizeof g_buf, &j), 0);
}

static void round_trip(link_encoder *e, link_decoder *d, link_type type)
{
    link_frame f = sample(type), out;
    size_t n = link_encode(e, g_buf, sizeof g_buf, &f);
    REQUIRE(n > 0);
    size_t used = 0;
    char err[256];
    link_result rc = feed(d, g_buf, n, &out, &used, err);
    if (rc != LINK_OK)
        fprintf(stderr, "  %s: %s\n", link_type_name(type), err);
    REQUIRE(rc == LINK_OK);
    CHECK_EQ_INT(used, n);
    if (!same_frame(&f, &out))
        fprintf(stderr, "  %s differs after the round trip\n",
                link_type_name(type));
    CHECK(same_frame(&f, &out));
}

static void every_type_round_trips(void)
{
    fill_data();
    /* The handshake frames, unkeyed. */
    link_encoder ae, ce;
    link_decoder cd, ad;
    link_encoder_init(&ae, LINK_FROM_AGENT);
    link_encoder_init(&ce, LINK_FROM_CONTROLLER);
    link_decoder_init(&cd, LINK_FROM_AGENT);
    link_decoder_init(&ad, LINK_FROM_CONTROLLER);
    round_trip(&ae, &cd, LINK_AGENT_HELLO);
    round_trip(&ce, &ad, LINK_CHALLENGE);
    round_trip(&ae, &cd, LINK_PROOF);
    link_decoder_keyed(&ad, k_key);
    link_encoder_keyed(&ce, k_key);
    round_trip(&ce, &ad, LINK_JOIN_OK);
    link_decoder_init(&ad, LINK_FROM_CONTROLLER);
    link_encoder_init(&ce, LINK_FROM_CONTROLLER);
    round_trip(&ce, &ad, LINK_JOIN_REJECT);

    link_pair p;
    REQUIRE(handshake(&p));
    for (size_t i = 0; i < COUNT(k_from_agent); i++)
        round_trip(&p.agent_enc, &p.ctrl_dec, k_from_agent[i]);
    for (size_t i = 0; i < COUNT(k_from_controller); i++)
        round_trip(&p.ctrl_enc, &p.agent_dec, k_from_controller[i]);
    CHECK_EQ_INT(p.ctrl_dec.seq, COUNT(k_from_agent));
    CHECK_EQ_INT(p.agent_dec.seq, 1 + COUNT(k_from_controller));
}

/* The largest DATA fits LINK_FRAME_MAX; one byte more is refused. */
static void data_sizes(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame f = sample(LINK_DATA), out;
    f.u.data.len = LINK_MAX_DATA;
    size_t n = link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f);
    CHECK_EQ_INT(n, LINK_FRAME_MAX);
    size_t used;
    char err[256];
    CHECK(feed(&p.ctrl_dec, g_buf, n, &out, &used, err) == LINK_OK);
    CHECK_EQ_INT(out.u.data.len, LINK_MAX_DATA);
    CHECK(out.u.data.bytes == g_buf + LINK_HEADER_SIZE + 4);
    f.u.data.len = LINK_MAX_DATA + 1;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f.u.data.len = 0;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    /* A too small buffer: nothing written, the sequence unchanged. */
    f.u.data.len = 10;
    uint64_t seq = p.agent_enc.seq;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, LINK_HEADER_SIZE + 14 +
                             LINK_MAC_SIZE - 1, &f), 0);
    CHECK_EQ_INT(p.agent_enc.seq, seq);
}

/* The largest STACKS_PART chunk fits LINK_FRAME_MAX; one byte more, or
 * none, is refused; so are flags out of range, on either side. */
static void stacks_part_sizes(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame f = sample(LINK_STACKS_PART), out;
    f.u.stacks_part.bytes = g_data;
    f.u.stacks_part.len = LINK_MAX_STACKS_CHUNK;
    f.u.stacks_part.last = 1;
    size_t n = link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f);
    CHECK_EQ_INT(n, LINK_FRAME_MAX);
    size_t used;
    char err[256];
    CHECK(feed(&p.ctrl_dec, g_buf, n, &out, &used, err) == LINK_OK);
    CHECK_EQ_INT(out.u.stacks_part.len, LINK_MAX_STACKS_CHUNK);
    CHECK_EQ_INT(out.u.stacks_part.last, 1);
    CHECK(out.u.stacks_part.bytes == g_buf + LINK_HEADER_SIZE + 9);
    f.u.stacks_part.len = LINK_MAX_STACKS_CHUNK + 1;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f.u.stacks_part.len = 0;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_STACKS_PART);
    f.u.stacks_part.last = 2;
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_STACKS_REQ);
    f.u.stacks_req.deadline_ms = 0;
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    f.u.stacks_req.deadline_ms = LINK_MAX_STACKS_DEADLINE_MS + 1;
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_STACKS_REQ);
    f.u.stacks_req.native = 2;
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    /* Each side sends only its own: a STACKS_REQ from an agent is refused. */
    link_encoder wrong;
    link_encoder_init(&wrong, LINK_FROM_CONTROLLER);
    f = sample(LINK_STACKS_REQ);
    n = link_encode(&wrong, g_buf, sizeof g_buf, &f);
    REQUIRE(n > 0);
    CHECK(feed(&p.ctrl_dec, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "STACKS_REQ may not come from the agent") != NULL);
}

/* Flipping any one bit of a MACed frame makes it an error (or, in the
 * length field, at least never a frame). */
static void any_flipped_bit_is_refused(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame f = sample(LINK_RANK_EXIT), out;
    uint8_t frame[256];
    size_t n = link_encode(&p.agent_enc, frame, sizeof frame, &f);
    REQUIRE(n > 0 && n < sizeof frame);
    int errors = 0, refused = 0;
    for (size_t bit = 0; bit < n * 8; bit++) {
        link_decoder d = p.ctrl_dec;
        memcpy(g_buf, frame, n);
        g_buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        size_t used;
        char err[256];
        link_result rc = feed(&d, g_buf, n, &out, &used, err);
        refused += rc != LINK_OK;
        if (bit >= 32)
            errors += rc == LINK_ERROR;
    }
    CHECK_EQ_INT(refused, n * 8);
    CHECK_EQ_INT(errors, n * 8 - 32);
    /* The untouched frame still passes. */
    size_t used;
    char err[256];
    CHECK(feed(&p.ctrl_dec, frame, n, &out, &used, err) == LINK_OK);
}

static void replay_reorder_and_reflection_are_refused(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame hb = sample(LINK_HEARTBEAT), out;
    uint8_t f0[64], f1[64];
    size_t n0 = link_encode(&p.agent_enc, f0, sizeof f0, &hb);
    size_t n1 = link_encode(&p.agent_enc, f1, sizeof f1, &hb);
    REQUIRE(n0 > 0 && n1 == n0);
    CHECK(memcmp(f0, f1, n0) != 0); /* same frame, another sequence number */
    size_t used;
    char err[256];

    /* Reordered (or f0 dropped): f1 first. */
    link_decoder d = p.ctrl_dec;
    CHECK(feed(&d, f1, n1, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "bad MAC") != NULL);

    /* Replayed: f0 twice. */
    d = p.ctrl_dec;
    CHECK(feed(&d, f0, n0, &out, &used, err) == LINK_OK);
    CHECK(feed(&d, f0, n0, &out, &used, err) == LINK_ERROR);
    d = p.ctrl_dec;
    CHECK(feed(&d, f0, n0, &out, &used, err) == LINK_OK);
    CHECK(feed(&d, f1, n1, &out, &used, err) == LINK_OK);

    /* Reflected: the agent's own frame sent back to it. */
    link_decoder back;
    link_decoder_init(&back, LINK_FROM_CONTROLLER);
    back.stage = p.agent_dec.stage;
    link_decoder_keyed(&back, k_key);
    CHECK(feed(&back, f0, n0, &out, &used, err) == LINK_ERROR);

    /* Another key. */
    d = p.ctrl_dec;
    uint8_t other[LINK_KEY_SIZE];
    memcpy(other, k_key, sizeof other);
    other[31] ^= 1;
    link_decoder_keyed(&d, other);
    CHECK(feed(&d, f0, n0, &out, &used, err) == LINK_ERROR);

    /* An unMACed frame once keyed: the MAC is missing, the bytes after it
     * are taken as one. */
    link_encoder plain;
    link_encoder_init(&plain, LINK_FROM_AGENT);
    uint8_t two[64];
    size_t m = link_encode(&plain, two, sizeof two, &hb);
    m += link_encode(&plain, two + m, sizeof two - m, &hb);
    m += link_encode(&plain, two + m, sizeof two - m, &hb);
    d = p.ctrl_dec;
    CHECK(feed(&d, two, m, &out, &used, err) == LINK_ERROR);
}

static void directions_are_enforced(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame f, out;
    size_t used;
    char err[256];
    /* Encoders refuse what their side does not send. */
    f = sample(LINK_STOP);
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_HOST);
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_AGENT_HELLO);
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_RESTART);
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    f.u.restart.attempt = 0; /* the first attempt is never a restart */
    CHECK_EQ_INT(link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_END);
    CHECK_EQ_INT(link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f), 0);
    /* A STOP from the agent (properly MACed as the agent) is refused. */
    link_encoder forged;
    link_encoder_init(&forged, LINK_FROM_CONTROLLER);
    link_encoder_keyed(&forged, k_key);
    f = sample(LINK_STOP);
    size_t n = link_encode(&forged, g_buf, sizeof g_buf, &f);
    REQUIRE(n > 0);
    link_decoder d = p.ctrl_dec;
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "STOP may not come from the agent") != NULL);
    /* A HOST to the agent. */
    link_encoder from_agent;
    link_encoder_init(&from_agent, LINK_FROM_AGENT);
    link_encoder_keyed(&from_agent, k_key);
    f = sample(LINK_HOST);
    n = link_encode(&from_agent, g_buf, sizeof g_buf, &f);
    d = p.agent_dec;
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "HOST may not come from the controller") != NULL);
    /* Unknown type. */
    uint8_t raw[8] = {0, 0, 0, 0, 99, 0, 0, 0};
    d = p.ctrl_dec;
    CHECK(feed(&d, raw, sizeof raw, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "unknown frame type 99") != NULL);
}

/* Encodes a frame of TYPE from the side that sends it, unkeyed. */
static size_t plain(link_type type, uint8_t *buf, size_t cap)
{
    link_encoder e;
    link_frame f = sample(type);
    link_encoder_init(&e, LINK_FROM_AGENT);
    size_t n = link_encode(&e, buf, cap, &f);
    if (n == 0) {
        link_encoder_init(&e, LINK_FROM_CONTROLLER);
        n = link_encode(&e, buf, cap, &f);
    }
    return n;
}

static void handshake_order_is_enforced(void)
{
    fill_data();
    link_frame out;
    size_t used, n;
    char err[256];
    link_decoder d;

    /* From the agent: PROOF first, a DATA first, HELLO twice. */
    link_decoder_init(&d, LINK_FROM_AGENT);
    n = plain(LINK_PROOF, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "expected AGENT_HELLO") != NULL);
    link_decoder_init(&d, LINK_FROM_AGENT);
    n = plain(LINK_DATA, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    link_decoder_init(&d, LINK_FROM_AGENT);
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "expected PROOF") != NULL);
    /* After PROOF, nothing until the decoder is keyed. */
    link_decoder_init(&d, LINK_FROM_AGENT);
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    n = plain(LINK_PROOF, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    n = plain(LINK_HEARTBEAT, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "before the link was keyed") != NULL);

    /* From the controller: JOIN_OK first, JOIN_OK unkeyed, anything
     * after JOIN_REJECT, CHALLENGE again after joining. */
    link_decoder_init(&d, LINK_FROM_CONTROLLER);
    link_decoder_keyed(&d, k_key);
    link_encoder ce;
    link_encoder_init(&ce, LINK_FROM_CONTROLLER);
    link_encoder_keyed(&ce, k_key);
    link_frame f = sample(LINK_JOIN_OK);
    n = link_encode(&ce, g_buf, sizeof g_buf, &f);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "expected CHALLENGE") != NULL);
    link_decoder_init(&d, LINK_FROM_CONTROLLER);
    n = plain(LINK_CHALLENGE, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    n = plain(LINK_JOIN_OK, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "before the link was keyed") != NULL);
    /* JOIN_REJECT after CHALLENGE carries a MAC (the controller's own
     * word), and ends the link; one without is not taken for it. */
    link_decoder_init(&d, LINK_FROM_CONTROLLER);
    n = plain(LINK_CHALLENGE, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    link_decoder_keyed(&d, k_key);
    n = plain(LINK_JOIN_REJECT, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) != LINK_OK);
    f = sample(LINK_JOIN_REJECT);
    link_encoder_init(&ce, LINK_FROM_CONTROLLER);
    link_encoder_keyed(&ce, k_key);
    n = link_encode(&ce, g_buf, sizeof g_buf, &f); /* keyed: seq 0 */
    CHECK(n == plain(LINK_JOIN_REJECT, g_buf + n, sizeof g_buf - n) +
                   LINK_MAC_SIZE);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);
    CHECK_STR(out.u.join_reject.reason, "node rank 2 has already joined");
    n = plain(LINK_HEARTBEAT, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_ERROR);
    /* A JOIN_REJECT may come first (refused before any challenge). */
    link_decoder_init(&d, LINK_FROM_CONTROLLER);
    n = plain(LINK_JOIN_REJECT, g_buf, sizeof g_buf);
    CHECK(feed(&d, g_buf, n, &out, &used, err) == LINK_OK);

    link_pair p;
    REQUIRE(handshake(&p));
    f = sample(LINK_CHALLENGE);
    n = link_encode(&p.ctrl_enc, g_buf, sizeof g_buf, &f);
    CHECK(feed(&p.agent_dec, g_buf, n, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "after the handshake") != NULL);
}

static int from_controller(link_type type)
{
    return type == LINK_STOP || type == LINK_TIME_RESP || type == LINK_INJECT ||
           type == LINK_RESTART || type == LINK_END || type == LINK_STACKS_REQ ||
           type == LINK_RECENT_REQ;
}

/* Every proper prefix of every frame is LINK_NEED_MORE. */
static void every_prefix_needs_more(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    const link_type all[] = {LINK_DATA, LINK_HOST, LINK_RANK_STOP, LINK_RANK_EXIT,
                             LINK_STOP, LINK_TIME_RESP, LINK_HEARTBEAT,
                             LINK_HEALTH, LINK_INJECT, LINK_RESTART, LINK_STACKS_REQ,
                             LINK_STACKS_PART, LINK_RECENT_REQ, LINK_RECENT_PART};
    for (size_t k = 0; k < COUNT(all); k++) {
        int agent = !from_controller(all[k]);
        link_encoder *e = agent ? &p.agent_enc : &p.ctrl_enc;
        link_decoder *dec = agent ? &p.ctrl_dec : &p.agent_dec;
        link_frame f = sample(all[k]), out;
        size_t n = link_encode(e, g_buf, sizeof g_buf, &f);
        REQUIRE(n > 0);
        int ok = 1;
        for (size_t len = 0; len < n; len++) {
            link_decoder d = *dec;
            size_t used = 99;
            char err[256];
            ok &= feed(&d, g_buf, len, &out, &used, err) == LINK_NEED_MORE &&
                  used == 0;
        }
        CHECK(ok);
        size_t used;
        char err[256];
        CHECK(feed(dec, g_buf, n, &out, &used, err) == LINK_OK);
    }
    /* The handshake frames too. */
    size_t n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    int ok = 1;
    for (size_t len = 0; len < n; len++) {
        link_decoder d;
        link_decoder_init(&d, LINK_FROM_AGENT);
        link_frame out;
        size_t used;
        char err[256];
        ok &= feed(&d, g_buf, len, &out, &used, err) == LINK_NEED_MORE;
    }
    CHECK(ok);
}

/* Two frames in one buffer come out one at a time. */
static void frames_back_to_back(void)
{
    fill_data();
    link_pair p;
    REQUIRE(handshake(&p));
    link_frame a = sample(LINK_OPEN), b = sample(LINK_DATA), out;
    size_t n = link_encode(&p.agent_enc, g_buf, sizeof g_buf, &a);
    size_t m = link_encode(&p.agent_enc, g_buf + n, sizeof g_buf - n, &b);
    REQUIRE(n > 0 && m > 0);
    size_t used;
    char err[256];
    CHECK(feed(&p.ctrl_dec, g_buf, n + m, &out, &used, err) == LINK_OK);
    CHECK_EQ_INT(used, n);
    CHECK(out.type == LINK_OPEN);
    CHECK(feed(&p.ctrl_dec, g_buf + n, m, &out, &used, err) == LINK_OK);
    CHECK_EQ_INT(used, m);
    CHECK(out.type == LINK_DATA);
}

/* Rewrites the u32 payload length of the frame in BUF. */
static void set_len(uint8_t *buf, uint32_t n)
{
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
}

static link_result decode_hello_bytes(size_t n, char *err)
{
    link_decoder d;
    link_decoder_init(&d, LINK_FROM_AGENT);
    link_frame out;
    size_t used;
    return feed(&d, g_buf, n, &out, &used, err);
}

static void malformed_frames_are_refused(void)
{
    char err[256];
    size_t n;
    /* Over the payload limit: refused from the header alone. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    set_len(g_buf, LINK_MAX_PAYLOAD + 1);
    CHECK(decode_hello_bytes(LINK_HEADER_SIZE, err) == LINK_ERROR);
    CHECK(strstr(err, "exceeds") != NULL);
    /* Before authentication, over the handshake's limit: refused from the
     * header alone; the largest real hello is under it. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    set_len(g_buf, LINK_MAX_HANDSHAKE_PAYLOAD + 1);
    CHECK(decode_hello_bytes(LINK_HEADER_SIZE, err) == LINK_ERROR);
    CHECK(strstr(err, "before authentication") != NULL);
    {
        link_encoder e;
        link_encoder_init(&e, LINK_FROM_AGENT);
        link_frame f = {.type = LINK_AGENT_HELLO};
        f.u.hello.version = LINK_VERSION;
        f.u.hello.nnodes = f.u.hello.nproc_per_node = 1;
        memset(f.u.hello.job_id, 'j', LINK_MAX_STR);
        memset(f.u.hello.host, 'h', LINK_MAX_STR);
        n = link_encode(&e, g_buf, sizeof g_buf, &f);
        CHECK(n > LINK_HEADER_SIZE + 2 * LINK_MAX_STR);
        CHECK(n <= LINK_HEADER_SIZE + LINK_MAX_HANDSHAKE_PAYLOAD);
        CHECK(decode_hello_bytes(n, err) == LINK_OK);
    }
    /* Reserved header bits. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[5] = 1;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[7] = 0x80;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    /* Bad magic, version, reserved field. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[LINK_HEADER_SIZE] = 'X';
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "magic") != NULL);
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[LINK_HEADER_SIZE + 4] = 7;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "version 7") != NULL);
    /* An agent of an older link version (5: no RECENT_REQ) is told so. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[LINK_HEADER_SIZE + 4] = 5;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "agent speaks link version 5, this controller "
                  "version 6") != NULL);
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[LINK_HEADER_SIZE + 6] = 1;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    /* A control byte in the host name (the last byte of the frame). */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[n - 1] = 0x07;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "malformed string") != NULL);
    /* A string length past the payload. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[n - 1 - strlen("node-c.example")] = 200;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "truncated") != NULL);
    /* Trailing bytes. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    set_len(g_buf, (uint32_t)(n - LINK_HEADER_SIZE + 1));
    g_buf[n] = 'x';
    CHECK(decode_hello_bytes(n + 1, err) == LINK_ERROR);
    CHECK(strstr(err, "trailing") != NULL);
    /* Node rank outside the nodes. */
    n = plain(LINK_AGENT_HELLO, g_buf, sizeof g_buf);
    g_buf[LINK_HEADER_SIZE + 8] = 4;
    CHECK(decode_hello_bytes(n, err) == LINK_ERROR);
    CHECK(strstr(err, "outside") != NULL);

    /* Fixed-size types: any other size is refused before the payload. */
    link_decoder d;
    link_frame out;
    size_t used;
    link_decoder_init(&d, LINK_FROM_CONTROLLER);
    n = plain(LINK_CHALLENGE, g_buf, sizeof g_buf);
    set_len(g_buf, LINK_NONCE_SIZE + LINK_PROOF_SIZE - 1);
    CHECK(feed(&d, g_buf, LINK_HEADER_SIZE, &out, &used, err) == LINK_ERROR);
    CHECK(strstr(err, "payload bytes") != NULL);

    /* The longest output tail passes whole. */
    link_pair p;
    link_encoder raw;
    REQUIRE(handshake(&p));
    link_frame f = sample(LINK_RANK_EXIT);
    memset(f.u.rank_exit.tail, 'a', LINK_MAX_TAIL);
    f.u.rank_exit.tail[LINK_MAX_TAIL] = '\0';
    n = link_encode(&p.agent_enc, g_buf, sizeof g_buf, &f);
    CHECK(n > 0);
    CHECK(feed(&p.ctrl_dec, g_buf, n, &out, &used, err) == LINK_OK);
    CHECK_EQ_INT(strlen(out.u.rank_exit.tail), LINK_MAX_TAIL);

    /* The encoder refuses out-of-range fields. */
    raw = p.agent_enc;
    f = sample(LINK_HOST);
    f.u.host.host.gpu.present = 2;
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_RANK_EXIT);
    f.u.rank_exit.term_signal = 300;
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_CLOCK);
    f.u.clock.bound_ns = -1;
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_AGENT_HELLO);
    strcpy(f.u.hello.host, "bad\nhost");
    link_encoder ae;
    link_encoder_init(&ae, LINK_FROM_AGENT);
    CHECK_EQ_INT(link_encode(&ae, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_AGENT_HELLO);
    f.u.hello.job_id[0] = '\0';
    CHECK_EQ_INT(link_encode(&ae, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_AGENT_HELLO);
    memset(f.u.hello.host, 'h', sizeof f.u.hello.host); /* no NUL */
    CHECK_EQ_INT(link_encode(&ae, g_buf, sizeof g_buf, &f), 0);
    /* a node rank past the nodes is refused; none (ANY) is not */
    f = sample(LINK_AGENT_HELLO);
    f.u.hello.node_rank = f.u.hello.nnodes;
    CHECK_EQ_INT(link_encode(&ae, g_buf, sizeof g_buf, &f), 0);
    f.u.hello.node_rank = LINK_NODE_RANK_ANY;
    CHECK(link_encode(&ae, g_buf, sizeof g_buf, &f) > 0);
    link_encoder ce = p.ctrl_enc;
    f = sample(LINK_STOP);
    f.u.stop.kill_now = 2;
    CHECK_EQ_INT(link_encode(&ce, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_INJECT);
    f.u.inject.signal = SIGKILL; /* a SIGKILL has no duration */
    CHECK_EQ_INT(link_encode(&ce, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_INJECT);
    f.u.inject.signal = SIGCONT;
    CHECK_EQ_INT(link_encode(&ce, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_RANK_STOP);
    f.u.rank_stop.state = 4;
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_RANK_STOP);
    f.u.rank_stop.state = LINK_STOP_RUNNING; /* running, yet stopped for */
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_HEALTH);
    f.u.health.ok = 2;
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_HEALTH);
    strcpy(f.u.health.check, "disk\tspace");
    CHECK_EQ_INT(link_encode(&raw, g_buf, sizeof g_buf, &f), 0);
    f = sample(LINK_TIME_RESP);
    f.u.time_resp.t3 = f.u.time_resp.t2 - 1;
    CHECK_EQ_INT(link_encode(&ce, g_buf, sizeof g_buf, &f), 0);
}

/* The MAC as docs/protocol.md specifies it, computed here independently:
 * the 16-byte keyed BLAKE2b of direction || seq || frame under the key.
 * Appends it to the LEN bytes of BUF; returns the frame's full size. */
static size_t mac_by_hand(uint8_t *buf, size_t len, link_direction dir,
                          uint64_t seq)
{
    uint8_t msg[1 + 8 + 600];
    msg[0] = (uint8_t)dir;
    for (int i = 0; i < 8; i++)
        msg[1 + i] = (uint8_t)(seq >> (8 * i));
    memcpy(msg + 9, buf, len);
    crypto_generichash_blake2b(buf + len, LINK_MAC_SIZE, msg, 9 + len, k_key,
                               sizeof k_key);
    return len + LINK_MAC_SIZE;
}


/* Encodes TYPE unkeyed from its side, lets PATCH change the payload, MACs
 * it by hand for the joined decoder of P and returns what it says. */
static link_result patched(link_pair *p, link_type type,
                           void (*patch)(uint8_t *payload, size_t *len),
                           char *err)
{
    uint8_t buf[600];
    size_t n = plain(type, buf, sizeof buf);
    size_t len = n - LINK_HEADER_SIZE;
    patch(buf + LINK_HEADER_SIZE, &len);
    set_len(buf, (uint32_t)len);
    int to_agent = from_controller(type);
    link_decoder *d = to_agent ? &p->agent_dec : &p->ctrl_dec;
    n = mac_by_hand(buf, LINK_HEADER_SIZE + len,
                    to_agent ? LINK_FROM_CONTROLLER : LINK_FROM_AGENT, d->seq);
    link_frame out;
    size_t used;
    return feed(d, buf, n, &out, &used, err);
}

static void no_change(uint8_t *pl, size_t *len) { (void)pl; (void)len; }
static void gpu_present_2(uint8_t *pl, size_t *len) { pl[4 + 8 + 88] = 2; (void)len; }
static void signal_300(uint8_t *pl, size_t *len) { pl[12] = 0x2c; pl[13] = 1; (void)len; }
static void tail_too_long(uint8_t *pl, size_t *len)
{
    pl[16] = (uint8_t)((LINK_MAX_TAIL + 1) & 0xff);
    pl[17] = (uint8_t)((LINK_MAX_TAIL + 1) >> 8);
    (void)len;
}
static void tail_with_nul(uint8_t *pl, size_t *len) { pl[18] = 0; (void)len; }
static void kill_flag_2(uint8_t *pl, size_t *len) { pl[0] = 2; (void)len; }
static void reason_with_tab(uint8_t *pl, size_t *len) { pl[2] = '\t'; (void)len; }
static void answered_early(uint8_t *pl, size_t *len) { pl[23] = 0x80; (void)len; }
static void negative_bound(uint8_t *pl, size_t *len) { pl[15] = 0xff; (void)len; }
static void data_empty(uint8_t *pl, size_t *len) { (void)pl; *len = 4; }
static void extra_byte(uint8_t *pl, size_t *len) { pl[*len] = 0; (*len)++; }
static void attempt_0(uint8_t *pl, size_t *len) { memset(pl, 0, 4); (void)len; }
static void one_byte_short(uint8_t *pl, size_t *len) { (void)pl; (*len)--; }
/* HEALTH: ok(1) len(1) "disk" output_len(2) output; INJECT: rank(4)
 * signal(1) duration(4). */
static void health_ok_2(uint8_t *pl, size_t *len) { pl[0] = 2; (void)len; }
static void health_output_too_long(uint8_t *pl, size_t *len)
{
    pl[6] = (uint8_t)((LINK_MAX_TAIL + 1) & 0xff);
    pl[7] = (uint8_t)((LINK_MAX_TAIL + 1) >> 8);
    (void)len;
}
static void health_output_nul(uint8_t *pl, size_t *len) { pl[8] = 0; (void)len; }
static void health_check_newline(uint8_t *pl, size_t *len) { pl[3] = '\n'; (void)len; }
/* RANK_STOP: rank(4) state(1) stopped_ms(4). */
static void stop_state_4(uint8_t *pl, size_t *len) { pl[4] = 4; (void)len; }
static void running_for_a_while(uint8_t *pl, size_t *len) { pl[4] = 0; (void)len; }
static void inject_sigterm(uint8_t *pl, size_t *len) { pl[4] = SIGTERM; (void)len; }
static void inject_kill_for_a_while(uint8_t *pl, size_t *len) { pl[4] = SIGKILL; (void)len; }
/* STACKS_REQ: id(4) native(1) deadline(4); STACKS_PART: id(4) rank(4)
 * last(1) bytes. */
static void stacks_native_2(uint8_t *pl, size_t *len) { pl[4] = 2; (void)len; }
static void stacks_deadline_0(uint8_t *pl, size_t *len) { memset(pl + 5, 0, 4); (void)len; }
static void stacks_deadline_huge(uint8_t *pl, size_t *len) { pl[8] = 0x10; (void)len; }
static void part_last_2(uint8_t *pl, size_t *len) { pl[8] = 2; (void)len; }
static void part_no_bytes(uint8_t *pl, size_t *len) { (void)pl; *len = 9; }
static void part_header_cut(uint8_t *pl, size_t *len) { (void)pl; *len = 6; }
/* RECENT_REQ: id(4) rank(4) steps(4). */
static void recent_steps_0(uint8_t *pl, size_t *len) { memset(pl + 8, 0, 4); (void)len; }
static void recent_steps_huge(uint8_t *pl, size_t *len) { pl[10] = 0x10; (void)len; }

/* The decoder's own field checks, on correctly MACed frames that the
 * encoder would refuse to write. */
static void decoder_checks_fields_of_keyed_frames(void)
{
    fill_data();
    char err[256];
    link_pair p;
    struct {
        link_type type;
        void (*patch)(uint8_t *, size_t *);
        const char *says;
    } cases[] = {
        {LINK_HOST, gpu_present_2, "GPU presence"},
        {LINK_RANK_EXIT, signal_300, "signal 300"},
        {LINK_RANK_EXIT, tail_too_long, "exceeds 4096"},
        {LINK_RANK_EXIT, tail_with_nul, "NUL"},
        {LINK_STOP, kill_flag_2, "kill flag"},
        {LINK_STOP, reason_with_tab, "malformed string"},
        {LINK_TIME_RESP, answered_early, "before the request"},
        {LINK_CLOCK, negative_bound, "negative"},
        {LINK_DATA, data_empty, "no bytes"},
        {LINK_OPEN, extra_byte, "payload bytes"},
        {LINK_HOST, extra_byte, "payload bytes"},
        {LINK_RANK_EXIT, extra_byte, "trailing"},
        {LINK_RESTART, attempt_0, "attempt 0"},
        {LINK_RESTART, extra_byte, "payload bytes"},
        {LINK_RESTART, one_byte_short, "payload bytes"},
        {LINK_END, extra_byte, "payload bytes"},
        {LINK_HEALTH, health_ok_2, "ok flag of 2"},
        {LINK_HEALTH, health_output_too_long, "exceeds 4096"},
        {LINK_HEALTH, health_output_nul, "NUL"},
        {LINK_HEALTH, health_check_newline, "malformed check name"},
        {LINK_HEALTH, extra_byte, "trailing"},
        {LINK_RANK_STOP, stop_state_4, "RANK_STOP has state 4"},
        {LINK_RANK_STOP, running_for_a_while, "state 0 stopped for 4000000000"},
        {LINK_RANK_STOP, extra_byte, "payload bytes"},
        {LINK_INJECT, inject_sigterm, "INJECT has signal 15"},
        {LINK_INJECT, inject_kill_for_a_while, "signal 9 with a duration"},
        {LINK_INJECT, extra_byte, "payload bytes"},
        {LINK_STACKS_REQ, stacks_native_2, "native flag of 2"},
        {LINK_STACKS_REQ, stacks_deadline_0, "deadline of 0 ms"},
        {LINK_STACKS_REQ, stacks_deadline_huge, "(1 to 60000)"},
        {LINK_STACKS_REQ, extra_byte, "payload bytes"},
        {LINK_STACKS_PART, part_last_2, "last flag of 2"},
        {LINK_STACKS_PART, part_no_bytes, "carries no bytes"},
        {LINK_STACKS_PART, part_header_cut, "truncated"},
        {LINK_RECENT_REQ, recent_steps_0, "asks for 0 steps"},
        {LINK_RECENT_REQ, recent_steps_huge, "(1 to 1024)"},
        {LINK_RECENT_REQ, extra_byte, "payload bytes"},
        {LINK_RECENT_PART, part_last_2, "RECENT_PART has a last flag of 2"},
        {LINK_RECENT_PART, part_no_bytes, "carries no bytes"},
        {LINK_RECENT_PART, part_header_cut, "truncated"},
    };
    /* The hand-made MAC agrees with the encoder's. */
    REQUIRE(handshake(&p));
    CHECK(patched(&p, LINK_RANK_EXIT, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_STOP, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_HEALTH, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_INJECT, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_RANK_STOP, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_STACKS_REQ, no_change, err) == LINK_OK);
    CHECK(patched(&p, LINK_STACKS_PART, no_change, err) == LINK_OK);
    for (size_t i = 0; i < COUNT(cases); i++) {
        REQUIRE(handshake(&p));
        link_result rc = patched(&p, cases[i].type, cases[i].patch, err);
        if (rc != LINK_ERROR || !strstr(err, cases[i].says))
            fprintf(stderr, "  case %zu (%s): rc %d, \"%s\"\n", i,
                    link_type_name(cases[i].type), (int)rc, err);
        CHECK(rc == LINK_ERROR && strstr(err, cases[i].says) != NULL);
    }
}

static void type_names(void)
{
    CHECK_STR(link_type_name(LINK_DATA), "DATA");
    CHECK_STR(link_type_name(LINK_AGENT_HELLO), "AGENT_HELLO");
    CHECK_STR(link_type_name(LINK_RESTART), "RESTART");
    CHECK_STR(link_type_name(LINK_END), "END");
    CHECK_STR(link_type_name(LINK_HEALTH), "HEALTH");
    CHECK_STR(link_type_name(LINK_INJECT), "INJECT");
    CHECK_STR(link_type_name(LINK_STACKS_REQ), "STACKS_REQ");
    CHECK_STR(link_type_name(LINK_STACKS_PART), "STACKS_PART");
    CHECK_STR(link_type_name(200), "UNKNOWN");
}

TEST_LIST(TEST(node_frames), {"every_type_round_trips", every_type_round_trips},
          {"data_sizes", data_sizes},
          {"stacks_part_sizes", stacks_part_sizes},
          {"any_flipped_bit_is_refused", any_flipped_bit_is_refused},
          {"replay_reorder_and_reflection_are_refused",
           replay_reorder_and_reflection_are_refused},
          {"directions_are_enforced", directions_are_enforced},
          {"handshake_order_is_enforced", handshake_order_is_enforced},
          {"every_prefix_needs_more", every_prefix_needs_more},
          {"frames_back_to_back", frames_back_to_back},
          {"malformed_frames_are_refused", malformed_frames_are_refused},
          {"decoder_checks_fields_of_keyed_frames",
           decoder_checks_fields_of_keyed_frames},
          {"type_names", type_names})
