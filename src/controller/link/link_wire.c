/*
 * link_wire.c - encoder and decoder of the agent link (link_wire.h; the
 * layouts are in docs/protocol.md, "Agent link").
 *
 * Encoders write little-endian fields into caller buffers and, once keyed,
 * append the frame's MAC: keyed BLAKE2b (libsodium's generichash) of
 * LINK_MAC_SIZE bytes under the session key over the writer's direction
 * byte, the frame's sequence number (u64, 0 for the first MACed frame of
 * each direction), the header and the payload.  The decoder is the only code
 * that interprets bytes received on a link: it checks the header, the
 * frame type's direction and its place in the handshake before it waits
 * for the payload, then the MAC, then every field, and reports the first
 * violation as a sentence.  It never allocates and never reads past LEN.
 */
#include "link_wire.h"

#include <sodium.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Decoder stages (link_decoder.stage). */
enum {
    STAGE_START = 0,    /* nothing yet */
    STAGE_HELLO = 1,    /* from the agent: HELLO seen, PROOF next;
                           from the controller: CHALLENGE seen */
    STAGE_JOINED = 2,   /* the handshake is over: any frame of the side */
    STAGE_REJECTED = 3  /* from the controller: JOIN_REJECT, nothing more */
};

/* Fixed payload sizes; -1 for the types whose size depends on strings. */
#define HELLO_FIXED (4 + 2 + 2 + 4 + 4 + 4 + LINK_NONCE_SIZE)
#define HOST_SIZE (4 + 8 + 11 * 8 + 1 + 4 + 10 * 8)
#define RANK_EXIT_FIXED (4 + 8 + 4 + 2)
#define JOIN_OK_FIXED (4 + 4 + 8 + LINK_TOKEN_SIZE + 1 + 4)

/* ---- which side sends what ---- */

static int sent_by_agent(unsigned type)
{
    switch (type) {
    case LINK_AGENT_HELLO: case LINK_PROOF: case LINK_OPEN: case LINK_DATA:
    case LINK_CLOSE: case LINK_TIME_REQ: case LINK_CLOCK: case LINK_HEARTBEAT:
    case LINK_RANK_STARTED: case LINK_RANK_EXIT: case LINK_ALL_EXITED:
    case LINK_HOST: case LINK_RANK_STOP: case LINK_BYE: case LINK_HEALTH:
    case LINK_STACKS_PART: case LINK_RECENT_PART:
    case LINK_NODE_PARTIAL: case LINK_NODE_STATUS:
        return 1;
    default:
        return 0;
    }
}

static int sent_by_controller(unsigned type)
{
    switch (type) {
    case LINK_CHALLENGE: case LINK_JOIN_OK: case LINK_JOIN_REJECT:
    case LINK_DATA: case LINK_CLOSE: case LINK_TIME_RESP: case LINK_HEARTBEAT:
    case LINK_STOP: case LINK_RESTART: case LINK_END: case LINK_INJECT:
    case LINK_STACKS_REQ: case LINK_RECENT_REQ:
        return 1;
    default:
        return 0;
    }
}

static int sent_by(link_direction dir, unsigned type)
{
    return dir == LINK_FROM_AGENT ? sent_by_agent(type)
                                  : sent_by_controller(type);
}

/* The exact payload size of TYPE, or -1 when it varies. */
static long fixed_size(unsigned type)
{
    switch (type) {
    case LINK_CHALLENGE: return LINK_NONCE_SIZE + LINK_PROOF_SIZE;
    case LINK_PROOF: return LINK_PROOF_SIZE;
    case LINK_OPEN: case LINK_CLOSE: return 4;
    case LINK_TIME_REQ: return 8;
    case LINK_TIME_RESP: return 24;
    case LINK_CLOCK: return 28;
    case LINK_HEARTBEAT: case LINK_BYE: case LINK_END: return 0;
    case LINK_RANK_STARTED: return 8;
    case LINK_ALL_EXITED: return 8;
    case LINK_HOST: return HOST_SIZE;
    case LINK_RANK_STOP: return 9;
    case LINK_RESTART: return 4;
    case LINK_INJECT: return 9;
    case LINK_STACKS_REQ: return 9;
    case LINK_RECENT_REQ: return 12;
    default: return -1;
    }
}

/* A string the link carries: at most MAX bytes, no control byte (below
 * 0x20 or 0x7f) unless LINES, where only NUL is refused. */
static int str_ok(const char *s, size_t len, int lines)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 || (!lines && (c < 0x20 || c == 0x7f)))
            return 0;
    }
    return 1;
}

/* INJECT carries SIGKILL, or SIGSTOP with an optional duration. */
static int inject_ok(const link_inject *x)
{
    return x->signal == SIGSTOP ||
           (x->signal == SIGKILL && x->duration_ms == 0);
}

static int rank_stop_ok(const link_rank_stop *x)
{
    return x->state <= LINK_STOP_FROZEN &&
           (x->state != LINK_STOP_RUNNING || x->stopped_ms == 0);
}

static int stacks_req_ok(const link_stacks_req *x)
{
    return x->native <= 1 && x->deadline_ms >= 1 &&
           x->deadline_ms <= LINK_MAX_STACKS_DEADLINE_MS;
}

static int recent_req_ok(const link_recent_req *x)
{
    return x->steps >= 1 && x->steps <= LINK_MAX_RECENT_STEPS;
}

int link_send_parts(link_type type, uint32_t request_id, uint32_t rank,
                    const char *text, size_t n,
                    int (*send)(void *ctx, const link_frame *f), void *ctx)
{
    size_t off = 0;
    do {
        size_t k = n - off < LINK_MAX_STACKS_CHUNK ? n - off
                                                   : LINK_MAX_STACKS_CHUNK;
        link_frame f = {.type = type};
        f.u.stacks_part = (link_stacks_part){request_id, rank, off + k == n,
                                             (uint32_t)k,
                                             (const uint8_t *)text + off};
        int rc = send(ctx, &f);
        if (rc != 0)
            return rc;
        off += k;
    } while (off < n);
    return 0;
}

/* ---- the MAC ---- */

static void frame_mac(const uint8_t key[LINK_KEY_SIZE], link_direction dir,
                      uint64_t seq, const uint8_t *frame, size_t len,
                      uint8_t out[LINK_MAC_SIZE])
{
    uint8_t prefix[9];
    prefix[0] = (uint8_t)dir;
    for (int i = 0; i < 8; i++)
        prefix[1 + i] = (uint8_t)(seq >> (8 * i));
    /* BLAKE2b keyed is a MAC in itself (RFC 7693) and, on x86-64, about
     * four times cheaper per frame than HMAC-SHA256 (docs/performance.md,
     * "The link's MAC"); the tag is the hash's own 16-byte output. */
    crypto_generichash_blake2b_state st;
    crypto_generichash_blake2b_init(&st, key, LINK_KEY_SIZE, LINK_MAC_SIZE);
    crypto_generichash_blake2b_update(&st, prefix, sizeof prefix);
    crypto_generichash_blake2b_update(&st, frame, len);
    crypto_generichash_blake2b_final(&st, out, LINK_MAC_SIZE);
    sodium_memzero(&st, sizeof st);
}

/* ---- little-endian writer ---- */

typedef struct {
    uint8_t *p;
    size_t cap, len;
    int bad; /* overflow or a field out of range */
} wbuf;

static void put_bytes(wbuf *b, const void *src, size_t n)
{
    if (b->bad || b->cap - b->len < n) {
        b->bad = 1;
        return;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(wbuf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put_bytes(b, t, (size_t)n);
}

static void put_u8(wbuf *b, uint8_t v) { put_le(b, v, 1); }
static void put_u16(wbuf *b, uint16_t v) { put_le(b, v, 2); }
static void put_u32(wbuf *b, uint32_t v) { put_le(b, v, 4); }
static void put_i32(wbuf *b, int32_t v) { put_le(b, (uint32_t)v, 4); }
static void put_i64(wbuf *b, int64_t v) { put_le(b, (uint64_t)v, 8); }

/* A u8-length-prefixed string of at most LINK_MAX_STR bytes. */
static void put_str(wbuf *b, const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n > LINK_MAX_STR || n == cap || !str_ok(s, n, 0)) {
        b->bad = 1;
        return;
    }
    put_u8(b, (uint8_t)n);
    put_bytes(b, s, n);
}

static void put_host(wbuf *b, const link_host *h)
{
    const ss_host_step *s = &h->host;
    put_u32(b, h->rank);
    put_le(b, h->step, 8);
    const int64_t fields[] = {
        s->cpu_ns, s->runq_ns, s->stopped_ns, s->throttled_ns,
        s->nr_throttled, s->vol_switches, s->invol_switches, s->major_faults,
        s->psi_cpu_ns, s->psi_memory_ns, s->psi_io_ns};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        put_i64(b, fields[i]);
    const ss_gpu_evidence *g = &s->gpu;
    if (g->present != 0 && g->present != 1)
        b->bad = 1;
    put_u8(b, (uint8_t)g->present);
    put_i32(b, g->index);
    const int64_t gpu[] = {g->covered_ns, g->slowed_ns, g->power_cap_ns,
                           g->thermal_ns, g->hw_slowdown_ns, g->sm_clock_mhz,
                           g->temperature_c, g->ecc_new, g->xid_new,
                           g->last_xid};
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++)
        put_i64(b, gpu[i]);
}

static void put_payload(wbuf *b, const link_frame *f)
{
    switch (f->type) {
    case LINK_AGENT_HELLO: {
        const link_agent_hello *h = &f->u.hello;
        if (h->version != LINK_VERSION || h->nnodes == 0 ||
            (h->node_rank >= h->nnodes &&
             h->node_rank != LINK_NODE_RANK_ANY) || h->nproc_per_node == 0 ||
            h->job_id[0] == '\0')
            b->bad = 1;
        put_bytes(b, LINK_MAGIC, 4);
        put_u16(b, h->version);
        put_u16(b, 0);
        put_u32(b, h->node_rank);
        put_u32(b, h->nnodes);
        put_u32(b, h->nproc_per_node);
        put_bytes(b, h->nonce, LINK_NONCE_SIZE);
        put_str(b, h->job_id, sizeof h->job_id);
        put_str(b, h->host, sizeof h->host);
        break;
    }
    case LINK_CHALLENGE:
        put_bytes(b, f->u.challenge.nonce, LINK_NONCE_SIZE);
        put_bytes(b, f->u.challenge.proof, LINK_PROOF_SIZE);
        break;
    case LINK_PROOF:
        put_bytes(b, f->u.proof.proof, LINK_PROOF_SIZE);
        break;
    case LINK_JOIN_OK: {
        const link_join_ok *j = &f->u.join_ok;
        if (j->world_size == 0)
            b->bad = 1;
        put_u32(b, j->attempt);
        put_u32(b, j->world_size);
        put_i64(b, j->controller_mono_ns);
        put_bytes(b, j->sealed_token, LINK_TOKEN_SIZE);
        if (j->aggregate > LINK_AGGREGATE_NODE)
            b->bad = 1;
        put_u8(b, j->aggregate);
        put_u32(b, j->node_rank);
        put_str(b, j->run_uuid, sizeof j->run_uuid);
        break;
    }
    case LINK_JOIN_REJECT:
        put_str(b, f->u.join_reject.reason, sizeof f->u.join_reject.reason);
        break;
    case LINK_OPEN:
    case LINK_CLOSE:
        put_u32(b, f->u.channel.channel);
        break;
    case LINK_DATA:
        if (f->u.data.len == 0 || f->u.data.len > LINK_MAX_DATA ||
            !f->u.data.bytes)
            b->bad = 1;
        put_u32(b, f->u.data.channel);
        if (!b->bad)
            put_bytes(b, f->u.data.bytes, f->u.data.len);
        break;
    case LINK_TIME_REQ:
        put_i64(b, f->u.time_req.t1);
        break;
    case LINK_TIME_RESP:
        if (f->u.time_resp.t3 < f->u.time_resp.t2)
            b->bad = 1;
        put_i64(b, f->u.time_resp.t1);
        put_i64(b, f->u.time_resp.t2);
        put_i64(b, f->u.time_resp.t3);
        break;
    case LINK_CLOCK:
        if (f->u.clock.bound_ns < 0 || f->u.clock.rtt_ns < 0)
            b->bad = 1;
        put_i64(b, f->u.clock.offset_ns);
        put_i64(b, f->u.clock.bound_ns);
        put_i64(b, f->u.clock.rtt_ns);
        put_u32(b, f->u.clock.samples);
        break;
    case LINK_HEARTBEAT:
    case LINK_BYE:
    case LINK_END:
        break;
    case LINK_RANK_STARTED:
        put_u32(b, f->u.rank_started.rank);
        put_u32(b, f->u.rank_started.pid);
        break;
    case LINK_RANK_EXIT: {
        const link_rank_exit *x = &f->u.rank_exit;
        size_t n = strnlen(x->tail, sizeof x->tail);
        if (n > LINK_MAX_TAIL || x->term_signal < 0 || x->term_signal > 127)
            b->bad = 1;
        put_u32(b, x->rank);
        put_i64(b, x->exit_code);
        put_i32(b, x->term_signal);
        put_u16(b, (uint16_t)n);
        if (!b->bad)
            put_bytes(b, x->tail, n);
        break;
    }
    case LINK_ALL_EXITED:
        put_u32(b, f->u.all_exited.left_behind);
        put_i32(b, f->u.all_exited.status);
        break;
    case LINK_HOST:
        put_host(b, &f->u.host);
        break;
    case LINK_STOP:
        if (f->u.stop.kill_now > 1)
            b->bad = 1;
        put_u8(b, f->u.stop.kill_now);
        put_str(b, f->u.stop.reason, sizeof f->u.stop.reason);
        break;
    case LINK_RESTART:
        if (f->u.restart.attempt == 0)
            b->bad = 1;
        put_u32(b, f->u.restart.attempt);
        break;
    case LINK_HEALTH: {
        const link_health *h = &f->u.health;
        size_t n = strnlen(h->output, sizeof h->output);
        if (h->ok > 1 || n > LINK_MAX_TAIL)
            b->bad = 1;
        put_u8(b, h->ok);
        put_str(b, h->check, sizeof h->check);
        put_u16(b, (uint16_t)n);
        if (!b->bad)
            put_bytes(b, h->output, n);
        break;
    }
    case LINK_RANK_STOP:
        if (!rank_stop_ok(&f->u.rank_stop))
            b->bad = 1;
        put_u32(b, f->u.rank_stop.rank);
        put_u8(b, f->u.rank_stop.state);
        put_u32(b, f->u.rank_stop.stopped_ms);
        break;
    case LINK_INJECT:
        if (!inject_ok(&f->u.inject))
            b->bad = 1;
        put_u32(b, f->u.inject.rank);
        put_u8(b, f->u.inject.signal);
        put_u32(b, f->u.inject.duration_ms);
        break;
    case LINK_STACKS_REQ:
        if (!stacks_req_ok(&f->u.stacks_req))
            b->bad = 1;
        put_u32(b, f->u.stacks_req.request_id);
        put_u8(b, f->u.stacks_req.native);
        put_u32(b, f->u.stacks_req.deadline_ms);
        break;
    case LINK_RECENT_REQ:
        if (!recent_req_ok(&f->u.recent_req))
            b->bad = 1;
        put_u32(b, f->u.recent_req.request_id);
        put_u32(b, f->u.recent_req.rank);
        put_u32(b, f->u.recent_req.steps);
        break;
    case LINK_STACKS_PART:
    case LINK_RECENT_PART: {
        const link_stacks_part *x = f->type == LINK_STACKS_PART
                                        ? &f->u.stacks_part
                                        : &f->u.recent_part;
        if (x->last > 1 || x->len == 0 || x->len > LINK_MAX_STACKS_CHUNK ||
            !x->bytes)
            b->bad = 1;
        put_u32(b, x->request_id);
        put_u32(b, x->rank);
        put_u8(b, x->last);
        if (!b->bad)
            put_bytes(b, x->bytes, x->len);
        break;
    }
    case LINK_NODE_PARTIAL: {
        size_t n = 0;
        if (!f->u.partial.p || b->bad)
            b->bad = 1;
        else
            n = ss_np_encode(f->u.partial.p, b->p + b->len, b->cap - b->len);
        if (n == 0)
            b->bad = 1;
        b->len += n;
        break;
    }
    case LINK_NODE_STATUS: {
        const link_node_status *x = &f->u.node_status;
        if (x->count == 0 || x->len == 0 || !x->entries)
            b->bad = 1;
        put_u32(b, x->count);
        if (!b->bad)
            put_bytes(b, x->entries, x->len);
        break;
    }
    default:
        b->bad = 1;
    }
}

int link_node_status_put(uint8_t *buf, size_t cap, size_t *len,
                         uint32_t channel, const uint8_t *frame, size_t n)
{
    if (n == 0 || n > LINK_MAX_STATUS_ENTRY || cap - *len < 5 + n)
        return -1;
    uint8_t *p = buf + *len;
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(channel >> (8 * i));
    p[4] = (uint8_t)n;
    memcpy(p + 5, frame, n);
    *len += 5 + n;
    return 0;
}

int link_node_status_next(const link_node_status *s, size_t *off,
                          uint32_t *channel, const uint8_t **frame,
                          size_t *n)
{
    if (*off + 5 > s->len)
        return 0;
    const uint8_t *p = s->entries + *off;
    *channel = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
               (uint32_t)p[3] << 24;
    *n = p[4];
    *frame = p + 5;
    *off += 5 + *n;
    return 1;
}

void link_encoder_init(link_encoder *e, link_direction writes)
{
    memset(e, 0, sizeof *e);
    e->direction = writes;
}

void link_encoder_keyed(link_encoder *e, const uint8_t key[LINK_KEY_SIZE])
{
    memcpy(e->key, key, LINK_KEY_SIZE);
    e->keyed = 1;
    e->seq = 0;
}

size_t link_encode(link_encoder *e, uint8_t *buf, size_t cap,
                   const link_frame *f)
{
    if (!sent_by(e->direction, (unsigned)f->type))
        return 0;
    wbuf b = {buf, cap, 0, 0};
    put_u32(&b, 0);
    put_u8(&b, (uint8_t)f->type);
    put_u8(&b, 0);
    put_u16(&b, 0);
    put_payload(&b, f);
    if (b.bad || b.len - LINK_HEADER_SIZE > LINK_MAX_PAYLOAD)
        return 0;
    uint32_t n = (uint32_t)(b.len - LINK_HEADER_SIZE);
    for (int i = 0; i < 4; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    /* Every frame of a keyed link carries a MAC, JOIN_REJECT too: one sent
     * after PROOF is the controller's own word, which the agent can tell
     * from a refusal anyone could send (one that comes first, unkeyed). */
    if (e->keyed) {
        if (cap - b.len < LINK_MAC_SIZE)
            return 0;
        frame_mac(e->key, e->direction, e->seq, buf, b.len, buf + b.len);
        b.len += LINK_MAC_SIZE;
        e->seq++;
    }
    return b.len;
}

/* ---- little-endian reader ---- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    int short_read;
} rbuf;

static void take(rbuf *r, void *dst, size_t n)
{
    if (r->short_read || r->len - r->pos < n) {
        r->short_read = 1;
        memset(dst, 0, n);
        return;
    }
    if (n)
        memcpy(dst, r->p + r->pos, n);
    r->pos += n;
}

static uint64_t get_le(rbuf *r, int n)
{
    uint8_t t[8];
    take(r, t, (size_t)n);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | t[i];
    return v;
}

static uint8_t get_u8(rbuf *r) { return (uint8_t)get_le(r, 1); }
static uint16_t get_u16(rbuf *r) { return (uint16_t)get_le(r, 2); }
static uint32_t get_u32(rbuf *r) { return (uint32_t)get_le(r, 4); }
static int32_t get_i32(rbuf *r) { return (int32_t)get_u32(r); }
static int64_t get_i64(rbuf *r) { return (int64_t)get_le(r, 8); }

/* Reads a u8-length-prefixed string into DST (LINK_MAX_STR + 1 bytes).
 * Returns 0, -1 on a short read, -2 on a NUL or control byte. */
static int get_str(rbuf *r, char *dst)
{
    size_t n = get_u8(r);
    take(r, dst, n);
    if (r->short_read)
        return -1;
    dst[n] = '\0';
    return str_ok(dst, n, 0) ? 0 : -2;
}

static link_result fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static link_result fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return LINK_ERROR;
}

void link_decoder_init(link_decoder *d, link_direction reads)
{
    memset(d, 0, sizeof *d);
    d->direction = reads;
}

void link_decoder_keyed(link_decoder *d, const uint8_t key[LINK_KEY_SIZE])
{
    memcpy(d->key, key, LINK_KEY_SIZE);
    d->keyed = 1;
    d->seq = 0;
}

/* Is TYPE allowed now?  NULL, or why not. */
static const char *order_error(const link_decoder *d, unsigned type)
{
    int from_agent = d->direction == LINK_FROM_AGENT;
    switch (d->stage) {
    case STAGE_START:
        if (from_agent)
            return type == LINK_AGENT_HELLO
                       ? NULL
                       : "expected AGENT_HELLO as the first frame: not a "
                         "stepscope agent?";
        return type == LINK_CHALLENGE || type == LINK_JOIN_REJECT
                   ? NULL
                   : "expected CHALLENGE as the first frame: not a "
                     "stepscope controller?";
    case STAGE_HELLO:
        if (from_agent)
            return type == LINK_PROOF ? NULL : "expected PROOF after AGENT_HELLO";
        if (type == LINK_JOIN_REJECT)
            return NULL;
        if (type != LINK_JOIN_OK)
            return "expected JOIN_OK or JOIN_REJECT after CHALLENGE";
        return d->keyed ? NULL : "JOIN_OK arrived before the link was keyed";
    case STAGE_JOINED:
        if (!d->keyed)
            return "a frame arrived after PROOF before the link was keyed";
        if (type <= LINK_JOIN_REJECT)
            return "a handshake frame arrived after the handshake";
        return NULL;
    default:
        return "a frame arrived after JOIN_REJECT";
    }
}

static link_result decode_hello(rbuf *r, link_agent_hello *h, char *err,
                                size_t errlen)
{
    char magic[4];
    take(r, magic, 4);
    h->version = get_u16(r);
    uint16_t reserved = get_u16(r);
    if (r->short_read)
        return fail(err, errlen, "AGENT_HELLO is truncated");
    if (memcmp(magic, LINK_MAGIC, 4) != 0)
        return fail(err, errlen, "AGENT_HELLO has a bad magic: not a "
                    "stepscope agent");
    if (h->version != LINK_VERSION)
        return fail(err, errlen, "agent speaks link version %u, this "
                    "controller version %u",
                    (unsigned)h->version, (unsigned)LINK_VERSION);
    if (reserved != 0)
        return fail(err, errlen, "AGENT_HELLO reserved field is not zero");
    h->node_rank = get_u32(r);
    h->nnodes = get_u32(r);
    h->nproc_per_node = get_u32(r);
    take(r, h->nonce, LINK_NONCE_SIZE);
    int rc = get_str(r, h->job_id);
    if (rc == 0)
        rc = get_str(r, h->host);
    if (rc == -1)
        return fail(err, errlen, "AGENT_HELLO is truncated");
    if (rc < 0)
        return fail(err, errlen, "AGENT_HELLO carries a malformed string");
    if (h->nnodes == 0 ||
        (h->node_rank >= h->nnodes && h->node_rank != LINK_NODE_RANK_ANY))
        return fail(err, errlen, "AGENT_HELLO node rank %u is outside %u "
                    "nodes", (unsigned)h->node_rank, (unsigned)h->nnodes);
    if (h->nproc_per_node == 0)
        return fail(err, errlen, "AGENT_HELLO has no processes per node");
    if (h->job_id[0] == '\0')
        return fail(err, errlen, "AGENT_HELLO has an empty job id");
    return LINK_OK;
}

static void get_host(rbuf *r, link_host *h)
{
    ss_host_step *s = &h->host;
    h->rank = get_u32(r);
    h->step = get_le(r, 8);
    int64_t *fields[] = {
        &s->cpu_ns, &s->runq_ns, &s->stopped_ns, &s->throttled_ns,
        &s->nr_throttled, &s->vol_switches, &s->invol_switches,
        &s->major_faults, &s->psi_cpu_ns, &s->psi_memory_ns, &s->psi_io_ns};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *fields[i] = get_i64(r);
    ss_gpu_evidence *g = &s->gpu;
    g->present = get_u8(r);
    g->index = get_i32(r);
    int64_t *gpu[] = {&g->covered_ns, &g->slowed_ns, &g->power_cap_ns,
                      &g->thermal_ns, &g->hw_slowdown_ns, &g->sm_clock_mhz,
                      &g->temperature_c, &g->ecc_new, &g->xid_new,
                      &g->last_xid};
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++)
        *gpu[i] = get_i64(r);
}

/* Decodes the payload of a frame whose type, direction and order are
 * already checked. */
static link_result decode_payload(rbuf *r, unsigned type, link_frame *out,
                                  char *err, size_t errlen)
{
    const char *name = link_type_name(type);
    switch (type) {
    case LINK_AGENT_HELLO:
        if (decode_hello(r, &out->u.hello, err, errlen) != LINK_OK)
            return LINK_ERROR;
        break;
    case LINK_CHALLENGE:
        take(r, out->u.challenge.nonce, LINK_NONCE_SIZE);
        take(r, out->u.challenge.proof, LINK_PROOF_SIZE);
        break;
    case LINK_PROOF:
        take(r, out->u.proof.proof, LINK_PROOF_SIZE);
        break;
    case LINK_JOIN_OK: {
        link_join_ok *j = &out->u.join_ok;
        j->attempt = get_u32(r);
        j->world_size = get_u32(r);
        j->controller_mono_ns = get_i64(r);
        take(r, j->sealed_token, LINK_TOKEN_SIZE);
        j->aggregate = get_u8(r);
        if (!r->short_read && j->aggregate > LINK_AGGREGATE_NODE)
            return fail(err, errlen, "JOIN_OK has an aggregation of %u",
                        (unsigned)j->aggregate);
        j->node_rank = get_u32(r);
        int rc = get_str(r, j->run_uuid);
        if (rc == -2)
            return fail(err, errlen, "JOIN_OK carries a malformed string");
        if (rc == 0 && j->world_size == 0)
            return fail(err, errlen, "JOIN_OK has a world size of 0");
        break;
    }
    case LINK_JOIN_REJECT:
        if (get_str(r, out->u.join_reject.reason) == -2)
            return fail(err, errlen, "JOIN_REJECT carries a malformed string");
        break;
    case LINK_OPEN:
    case LINK_CLOSE:
        out->u.channel.channel = get_u32(r);
        break;
    case LINK_DATA:
        out->u.data.channel = get_u32(r);
        out->u.data.len = (uint32_t)(r->len - r->pos);
        out->u.data.bytes = r->p + r->pos;
        if (r->short_read || out->u.data.len == 0)
            return fail(err, errlen, "DATA carries no bytes");
        r->pos = r->len;
        break;
    case LINK_TIME_REQ:
        out->u.time_req.t1 = get_i64(r);
        break;
    case LINK_TIME_RESP: {
        link_time_resp *t = &out->u.time_resp;
        t->t1 = get_i64(r);
        t->t2 = get_i64(r);
        t->t3 = get_i64(r);
        if (t->t3 < t->t2)
            return fail(err, errlen, "TIME_RESP answers before the request "
                        "arrived");
        break;
    }
    case LINK_CLOCK: {
        link_clock *c = &out->u.clock;
        c->offset_ns = get_i64(r);
        c->bound_ns = get_i64(r);
        c->rtt_ns = get_i64(r);
        c->samples = get_u32(r);
        if (c->bound_ns < 0 || c->rtt_ns < 0)
            return fail(err, errlen, "CLOCK has a negative bound or round "
                        "trip");
        break;
    }
    case LINK_HEARTBEAT:
    case LINK_BYE:
    case LINK_END:
        break;
    case LINK_RANK_STARTED:
        out->u.rank_started.rank = get_u32(r);
        out->u.rank_started.pid = get_u32(r);
        break;
    case LINK_RANK_EXIT: {
        link_rank_exit *x = &out->u.rank_exit;
        x->rank = get_u32(r);
        x->exit_code = get_i64(r);
        x->term_signal = get_i32(r);
        size_t n = get_u16(r);
        if (r->short_read)
            break;
        if (n > LINK_MAX_TAIL)
            return fail(err, errlen, "RANK_EXIT output tail of %zu bytes "
                        "exceeds %d", n, LINK_MAX_TAIL);
        take(r, x->tail, n);
        if (r->short_read)
            break;
        x->tail[n] = '\0';
        if (!str_ok(x->tail, n, 1))
            return fail(err, errlen, "RANK_EXIT output tail holds a NUL byte");
        if (x->term_signal < 0 || x->term_signal > 127)
            return fail(err, errlen, "RANK_EXIT signal %d is out of range",
                        (int)x->term_signal);
        break;
    }
    case LINK_ALL_EXITED:
        out->u.all_exited.left_behind = get_u32(r);
        out->u.all_exited.status = get_i32(r);
        break;
    case LINK_HOST:
        get_host(r, &out->u.host);
        if (out->u.host.host.gpu.present > 1)
            return fail(err, errlen, "HOST has a GPU presence flag of %d",
                        out->u.host.host.gpu.present);
        break;
    case LINK_RANK_STOP:
        out->u.rank_stop.rank = get_u32(r);
        out->u.rank_stop.state = get_u8(r);
        out->u.rank_stop.stopped_ms = get_u32(r);
        if (!rank_stop_ok(&out->u.rank_stop))
            return fail(err, errlen, "RANK_STOP has state %u stopped for %u "
                        "ms (0 running with 0 ms, 1 stopped, 2 traced, 3 "
                        "frozen)",
                        (unsigned)out->u.rank_stop.state,
                        (unsigned)out->u.rank_stop.stopped_ms);
        break;
    case LINK_STOP:
        out->u.stop.kill_now = get_u8(r);
        if (get_str(r, out->u.stop.reason) == -2)
            return fail(err, errlen, "STOP carries a malformed string");
        if (!r->short_read && out->u.stop.kill_now > 1)
            return fail(err, errlen, "STOP has a kill flag of %u",
                        (unsigned)out->u.stop.kill_now);
        break;
    case LINK_RESTART:
        out->u.restart.attempt = get_u32(r);
        if (!r->short_read && out->u.restart.attempt == 0)
            return fail(err, errlen, "RESTART to attempt 0 (the first "
                        "attempt is never a restart)");
        break;
    case LINK_HEALTH: {
        link_health *h = &out->u.health;
        h->ok = get_u8(r);
        if (get_str(r, h->check) == -2)
            return fail(err, errlen, "HEALTH carries a malformed check name");
        size_t n = get_u16(r);
        if (r->short_read)
            break;
        if (h->ok > 1)
            return fail(err, errlen, "HEALTH has an ok flag of %u",
                        (unsigned)h->ok);
        if (n > LINK_MAX_TAIL)
            return fail(err, errlen, "HEALTH output of %zu bytes exceeds %d",
                        n, LINK_MAX_TAIL);
        take(r, h->output, n);
        if (r->short_read)
            break;
        h->output[n] = '\0';
        if (!str_ok(h->output, n, 1))
            return fail(err, errlen, "HEALTH output holds a NUL byte");
        break;
    }
    case LINK_INJECT:
        out->u.inject.rank = get_u32(r);
        out->u.inject.signal = get_u8(r);
        out->u.inject.duration_ms = get_u32(r);
        if (!inject_ok(&out->u.inject))
            return fail(err, errlen, "INJECT has signal %u with a duration of "
                        "%u ms (SIGKILL, or SIGSTOP with a duration)",
                        (unsigned)out->u.inject.signal,
                        (unsigned)out->u.inject.duration_ms);
        break;
    case LINK_STACKS_REQ: {
        link_stacks_req *x = &out->u.stacks_req;
        x->request_id = get_u32(r);
        x->native = get_u8(r);
        x->deadline_ms = get_u32(r);
        if (x->native > 1)
            return fail(err, errlen, "STACKS_REQ has a native flag of %u",
                        (unsigned)x->native);
        if (!stacks_req_ok(x))
            return fail(err, errlen, "STACKS_REQ has a deadline of %u ms "
                        "(1 to %u)", (unsigned)x->deadline_ms,
                        (unsigned)LINK_MAX_STACKS_DEADLINE_MS);
        break;
    }
    case LINK_RECENT_REQ: {
        link_recent_req *x = &out->u.recent_req;
        x->request_id = get_u32(r);
        x->rank = get_u32(r);
        x->steps = get_u32(r);
        if (!recent_req_ok(x))
            return fail(err, errlen, "RECENT_REQ asks for %u steps (1 to %u)",
                        (unsigned)x->steps, (unsigned)LINK_MAX_RECENT_STEPS);
        break;
    }
    case LINK_STACKS_PART:
    case LINK_RECENT_PART: {
        const char *what = link_type_name(type);
        link_stacks_part *x = type == LINK_STACKS_PART ? &out->u.stacks_part
                                                       : &out->u.recent_part;
        x->request_id = get_u32(r);
        x->rank = get_u32(r);
        x->last = get_u8(r);
        if (r->short_read)
            return fail(err, errlen, "%s is truncated", what);
        if (x->last > 1)
            return fail(err, errlen, "%s has a last flag of %u", what,
                        (unsigned)x->last);
        x->len = (uint32_t)(r->len - r->pos);
        x->bytes = r->p + r->pos;
        if (x->len == 0)
            return fail(err, errlen, "%s carries no bytes", what);
        r->pos = r->len;
        break;
    }
    case LINK_NODE_PARTIAL: {
        static _Thread_local ss_node_partial partial;
        if (ss_np_decode(r->p, r->len, &partial, err, errlen) != 0)
            return LINK_ERROR;
        out->u.partial.p = &partial;
        r->pos = r->len;
        break;
    }
    case LINK_NODE_STATUS: {
        link_node_status *x = &out->u.node_status;
        x->count = get_u32(r);
        if (r->short_read || x->count == 0)
            return fail(err, errlen, "NODE_STATUS carries no entries");
        x->entries = r->p + r->pos;
        x->len = (uint32_t)(r->len - r->pos);
        uint32_t seen = 0;
        size_t off = r->pos;
        while (off < r->len) {
            if (r->len - off < 5 || r->p[off + 4] == 0 ||
                r->len - off - 5 < r->p[off + 4])
                return fail(err, errlen, "NODE_STATUS has a malformed entry");
            off += 5 + (size_t)r->p[off + 4];
            seen++;
        }
        if (seen != x->count)
            return fail(err, errlen, "NODE_STATUS says %u entries and "
                        "carries %u", (unsigned)x->count, (unsigned)seen);
        r->pos = r->len;
        break;
    }
    default:
        return fail(err, errlen, "unknown frame type %u", type);
    }
    if (r->short_read)
        return fail(err, errlen, "%s is truncated", name);
    if (r->pos != r->len)
        return fail(err, errlen, "%s frame has %zu trailing bytes", name,
                    r->len - r->pos);
    return LINK_OK;
}

link_result link_decoder_next(link_decoder *d, const uint8_t *buf, size_t len,
                              link_frame *out, size_t *consumed, char *err,
                              size_t errlen)
{
    *consumed = 0;
    if (errlen > 0)
        err[0] = '\0';
    if (len < LINK_HEADER_SIZE)
        return LINK_NEED_MORE;
    rbuf h = {buf, LINK_HEADER_SIZE, 0, 0};
    uint32_t payload = get_u32(&h);
    unsigned type = get_u8(&h);
    uint8_t flags = get_u8(&h);
    uint16_t reserved = get_u16(&h);
    const char *name = link_type_name(type);
    /* Everything the header tells is checked before waiting for the
     * payload, so a stranger or a confused peer is turned away at once. */
    if (flags != 0 || reserved != 0)
        return fail(err, errlen, "frame header has non-zero reserved bits");
    if (!sent_by_agent(type) && !sent_by_controller(type))
        return fail(err, errlen, "unknown frame type %u", type);
    if (!sent_by(d->direction, type))
        return fail(err, errlen, "%s may not come from the %s", name,
                    d->direction == LINK_FROM_AGENT ? "agent" : "controller");
    const char *why = order_error(d, type);
    if (why)
        return fail(err, errlen, "%s (got %s)", why, name);
    if (payload > LINK_MAX_PAYLOAD)
        return fail(err, errlen, "%s of %u bytes exceeds the %u-byte limit",
                    name, (unsigned)payload, (unsigned)LINK_MAX_PAYLOAD);
    /* A peer not yet authenticated gets no large buffer filled. */
    if (!d->keyed && payload > LINK_MAX_HANDSHAKE_PAYLOAD)
        return fail(err, errlen, "%s of %u bytes exceeds the %u-byte limit "
                    "before authentication", name, (unsigned)payload,
                    (unsigned)LINK_MAX_HANDSHAKE_PAYLOAD);
    long want = fixed_size(type);
    if (want >= 0 && payload != (uint32_t)want)
        return fail(err, errlen, "%s has %u payload bytes, not %ld", name,
                    (unsigned)payload, want);
    int mac = d->keyed;
    size_t total = LINK_HEADER_SIZE + (size_t)payload +
                   (mac ? LINK_MAC_SIZE : 0);
    if (len < total)
        return LINK_NEED_MORE;

    if (mac) {
        uint8_t expect[LINK_MAC_SIZE];
        size_t body = LINK_HEADER_SIZE + payload;
        frame_mac(d->key, d->direction, d->seq, buf, body, expect);
        int same = crypto_verify_16(expect, buf + body) == 0;
        sodium_memzero(expect, sizeof expect);
        if (!same)
            return fail(err, errlen, "%s (keyed frame %llu) has a bad MAC: "
                        "forged, replayed, reordered or corrupted on the way",
                        name, (unsigned long long)d->seq);
    }

    if (type == LINK_DATA)
        memset(out, 0, offsetof(link_frame, u) + sizeof(link_data));
    else if (type == LINK_STACKS_PART || type == LINK_RECENT_PART)
        memset(out, 0, offsetof(link_frame, u) + sizeof(link_stacks_part));
    else if (type == LINK_NODE_PARTIAL || type == LINK_NODE_STATUS)
        memset(out, 0, offsetof(link_frame, u) + sizeof(link_node_status));
    else
        memset(out, 0, sizeof *out);
    out->type = (link_type)type;
    rbuf r = {buf + LINK_HEADER_SIZE, payload, 0, 0};
    link_result rc = decode_payload(&r, type, out, err, errlen);
    if (rc != LINK_OK)
        return rc;

    switch (type) {
    case LINK_AGENT_HELLO:
    case LINK_CHALLENGE:
        d->stage = STAGE_HELLO;
        break;
    case LINK_PROOF:
    case LINK_JOIN_OK:
        d->stage = STAGE_JOINED;
        break;
    case LINK_JOIN_REJECT:
        d->stage = STAGE_REJECTED;
        break;
    default:
        break;
    }
    if (mac)
        d->seq++;
    d->frames++;
    *consumed = total;
    return LINK_OK;
}

const char *link_type_name(unsigned type)
{
    switch (type) {
    case LINK_AGENT_HELLO: return "AGENT_HELLO";
    case LINK_CHALLENGE: return "CHALLENGE";
    case LINK_PROOF: return "PROOF";
    case LINK_JOIN_OK: return "JOIN_OK";
    case LINK_JOIN_REJECT: return "JOIN_REJECT";
    case LINK_OPEN: return "OPEN";
    case LINK_DATA: return "DATA";
    case LINK_CLOSE: return "CLOSE";
    case LINK_TIME_REQ: return "TIME_REQ";
    case LINK_TIME_RESP: return "TIME_RESP";
    case LINK_CLOCK: return "CLOCK";
    case LINK_HEARTBEAT: return "HEARTBEAT";
    case LINK_RANK_STARTED: return "RANK_STARTED";
    case LINK_RANK_EXIT: return "RANK_EXIT";
    case LINK_ALL_EXITED: return "ALL_EXITED";
    case LINK_HOST: return "HOST";
    case LINK_RANK_STOP: return "RANK_STOP";
    case LINK_STOP: return "STOP";
    case LINK_BYE: return "BYE";
    case LINK_RESTART: return "RESTART";
    case LINK_END: return "END";
    case LINK_HEALTH: return "HEALTH";
    case LINK_INJECT: return "INJECT";
    case LINK_STACKS_REQ: return "STACKS_REQ";
    case LINK_STACKS_PART: return "STACKS_PART";
    case LINK_NODE_PARTIAL: return "NODE_PARTIAL";
    case LINK_NODE_STATUS: return "NODE_STATUS";
    case LINK_RECENT_REQ: return "RECENT_REQ";
    case LINK_RECENT_PART: return "RECENT_PART";
    default: return "UNKNOWN";
    }
}
