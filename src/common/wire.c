/*
 * wire.c - encoder and decoder of the stepscope wire protocol.
 *
 * The layout of every frame is specified in docs/protocol.md.  Encoders
 * write little-endian fields into caller buffers.  The decoder is the only
 * code that interprets bytes received from a rank: it validates every
 * length, count, range and state transition before it fills a wire_frame,
 * and reports the first violation as a sentence.  It never allocates.
 */
#include "wire.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* wire_decoder_next clears sizeof(wire_hello) bytes of any frame that is
 * not a STEP: every other member must fit in it. */
_Static_assert(sizeof(wire_hello) >= sizeof(wire_reject) &&
                   sizeof(wire_hello) >= sizeof(wire_name) &&
                   sizeof(wire_hello) >= sizeof(wire_welcome) &&
                   sizeof(wire_hello) >= sizeof(wire_counters) &&
                   sizeof(wire_hello) >= sizeof(wire_checkpoint) &&
                   sizeof(wire_hello) >= sizeof(wire_bye) &&
                   sizeof(wire_hello) >= sizeof(wire_status) &&
                   sizeof(wire_hello) >= sizeof(wire_resumed) &&
                   sizeof(wire_hello) >= sizeof(wire_features) &&
                   sizeof(wire_hello) >= sizeof(wire_command) &&
                   sizeof(wire_hello) >= sizeof(wire_profile_done),
               "wire_hello must be the largest non-STEP frame");
_Static_assert(WIRE_VALUES_FRAME_SIZE(WIRE_MAX_VALUES) - WIRE_HEADER_SIZE <=
                   WIRE_MAX_PAYLOAD,
               "a full vector must fit in one frame");

/* ---- little-endian cursor ---- */

typedef struct {
    uint8_t *p;
    size_t cap, len;
    int overflow;
} wbuf;

static void put_bytes(wbuf *b, const void *src, size_t n)
{
    if (b->overflow || b->cap - b->len < n) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u8(wbuf *b, uint8_t v) { put_bytes(b, &v, 1); }

static void put_u16(wbuf *b, uint16_t v)
{
    uint8_t t[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put_bytes(b, t, 2);
}

static void put_u32(wbuf *b, uint32_t v)
{
    uint8_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put_bytes(b, t, 4);
}

static void put_u64(wbuf *b, uint64_t v)
{
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put_bytes(b, t, 8);
}

static void put_f64(wbuf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_u64(b, u);
}

static void put_str(wbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (n > WIRE_MAX_STR) {
        b->overflow = 1;
        return;
    }
    put_u8(b, (uint8_t)n);
    put_bytes(b, s, n);
}

/* Starts a frame: reserves the header, to be completed by frame_end. */
static wbuf frame_begin(uint8_t *buf, size_t cap, wire_type type)
{
    wbuf b = {buf, cap, 0, 0};
    put_u32(&b, 0);
    put_u8(&b, (uint8_t)type);
    put_u8(&b, 0);
    put_u16(&b, 0);
    return b;
}

static size_t frame_end(wbuf *b)
{
    if (b->overflow || b->len - WIRE_HEADER_SIZE > WIRE_MAX_PAYLOAD)
        return 0;
    uint32_t n = (uint32_t)(b->len - WIRE_HEADER_SIZE);
    for (int i = 0; i < 4; i++)
        b->p[i] = (uint8_t)(n >> (8 * i));
    return b->len;
}

size_t wire_encode_hello(uint8_t *buf, size_t cap, const wire_hello *h)
{
    wbuf b = frame_begin(buf, cap, WIRE_HELLO);
    put_bytes(&b, WIRE_MAGIC, 4);
    put_u16(&b, h->version);
    put_u16(&b, 0);
    put_u32(&b, h->rank);
    put_u32(&b, h->world_size);
    put_u32(&b, h->local_rank);
    put_u32(&b, h->pid);
    put_u32(&b, h->attempt);
    put_bytes(&b, h->token, WIRE_TOKEN_SIZE);
    put_str(&b, h->run_id);
    put_str(&b, h->host);
    return frame_end(&b);
}

size_t wire_encode_welcome(uint8_t *buf, size_t cap, const wire_welcome *w)
{
    wbuf b = frame_begin(buf, cap, WIRE_WELCOME);
    put_u16(&b, w->version);
    put_u16(&b, 0);
    return frame_end(&b);
}

size_t wire_encode_reject(uint8_t *buf, size_t cap, const wire_reject *r)
{
    wbuf b = frame_begin(buf, cap, WIRE_REJECT);
    put_u16(&b, r->code);
    put_str(&b, r->reason);
    return frame_end(&b);
}

size_t wire_encode_name(uint8_t *buf, size_t cap, const wire_name *n)
{
    size_t len = strlen(n->name);
    if (n->name_id == 0 || n->name_id > WIRE_MAX_NAME_ID || len == 0 ||
        len > WIRE_MAX_NAME_LEN)
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_NAME);
    put_u32(&b, n->name_id);
    put_str(&b, n->name);
    return frame_end(&b);
}

size_t wire_encode_step(uint8_t *buf, size_t cap, const wire_step *s)
{
    if (s->n_phases > WIRE_MAX_ITEMS || s->n_syncs > WIRE_MAX_ITEMS ||
        s->n_metrics > WIRE_MAX_ITEMS || s->end_ns < s->begin_ns)
        return 0;
    int with_self = (s->flags & WIRE_STEP_HAS_SELF) != 0;
    for (unsigned i = 0; with_self && i < s->n_phases; i++)
        if (s->phases[i].self_ns > s->phases[i].total_ns)
            return 0;
    wbuf b = frame_begin(buf, cap, WIRE_STEP);
    put_u64(&b, s->step);
    put_u64(&b, (uint64_t)s->begin_ns);
    put_u64(&b, (uint64_t)s->end_ns);
    put_u64(&b, s->rss_bytes);
    put_u64(&b, s->device_bytes);
    put_u8(&b, s->flags);
    put_u8(&b, s->n_phases);
    put_u8(&b, s->n_syncs);
    put_u8(&b, s->n_metrics);
    for (unsigned i = 0; i < s->n_phases; i++) {
        put_u32(&b, s->phases[i].name_id);
        put_u32(&b, s->phases[i].count);
        put_u64(&b, s->phases[i].total_ns);
        put_u64(&b, (uint64_t)s->phases[i].first_begin_ns);
        if (with_self)
            put_u64(&b, s->phases[i].self_ns);
    }
    for (unsigned i = 0; i < s->n_syncs; i++) {
        put_u32(&b, s->syncs[i].name_id);
        put_u64(&b, (uint64_t)s->syncs[i].arrival_ns);
    }
    for (unsigned i = 0; i < s->n_metrics; i++) {
        put_u32(&b, s->metrics[i].name_id);
        put_f64(&b, s->metrics[i].value);
    }
    return frame_end(&b);
}

size_t wire_encode_counters(uint8_t *buf, size_t cap, const wire_counters *c)
{
    wbuf b = frame_begin(buf, cap, WIRE_COUNTERS);
    put_u64(&b, c->dropped_events);
    put_u64(&b, c->dropped_records);
    if (c->dropped_vectors || c->truncated_values) {
        put_u64(&b, c->dropped_vectors);
        put_u64(&b, c->truncated_values);
    }
    return frame_end(&b);
}

size_t wire_encode_values(uint8_t *buf, size_t cap, uint64_t step,
                          uint32_t name_id, const double *v, uint32_t n,
                          uint32_t truncated)
{
    if (name_id == 0 || name_id > WIRE_MAX_NAME_ID || n > WIRE_MAX_VALUES ||
        step == WIRE_NO_STEP || (n && !v))
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_VALUES);
    put_u64(&b, step);
    put_u32(&b, name_id);
    put_u32(&b, n);
    put_u32(&b, truncated);
    if (b.overflow || b.cap - b.len < 8 * (size_t)n)
        return 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(b.p + b.len, v, 8 * (size_t)n); /* f64 bits, little-endian */
    b.len += 8 * (size_t)n;
#else
    for (uint32_t i = 0; i < n; i++)
        put_f64(&b, v[i]);
#endif
    return frame_end(&b);
}

static int label_ok(const char *s)
{
    size_t n = strlen(s);
    if (n > WIRE_MAX_STR)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

size_t wire_encode_labels(uint8_t *buf, size_t cap, uint32_t name_id,
                          uint32_t total, uint32_t first,
                          const char *const *labels, uint32_t count)
{
    if (name_id == 0 || name_id > WIRE_MAX_NAME_ID || total == 0 ||
        total > WIRE_MAX_VALUES || count == 0 || first >= total ||
        count > total - first)
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_LABELS);
    put_u32(&b, name_id);
    put_u16(&b, (uint16_t)total);
    put_u16(&b, (uint16_t)first);
    put_u16(&b, (uint16_t)count);
    put_u16(&b, 0);
    for (uint32_t i = 0; i < count; i++) {
        if (!labels[i] || !label_ok(labels[i]))
            return 0;
        put_str(&b, labels[i]);
    }
    return frame_end(&b);
}

size_t wire_encode_checkpoint(uint8_t *buf, size_t cap,
                              const wire_checkpoint *c)
{
    wbuf b = frame_begin(buf, cap, WIRE_CHECKPOINT);
    put_u64(&b, c->step);
    put_u64(&b, (uint64_t)c->t_ns);
    return frame_end(&b);
}

size_t wire_encode_resumed(uint8_t *buf, size_t cap, const wire_resumed *rs)
{
    if (rs->step > INT64_MAX || rs->t_ns < 0)
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_RESUMED);
    put_u64(&b, rs->step);
    put_u64(&b, (uint64_t)rs->t_ns);
    return frame_end(&b);
}

size_t wire_encode_bye(uint8_t *buf, size_t cap, const wire_bye *by)
{
    wbuf b = frame_begin(buf, cap, WIRE_BYE);
    put_u64(&b, by->last_step);
    return frame_end(&b);
}

size_t wire_encode_status(uint8_t *buf, size_t cap, const wire_status *st)
{
    if (st->name_id > WIRE_MAX_NAME_ID || st->since_ns < 0 ||
        st->coll_name_id > WIRE_MAX_NAME_ID ||
        (st->coll_flags & ~WIRE_STATUS_COLL_ACTIVE) != 0 ||
        (st->coll_name_id != 0) != (st->coll_seq != 0) ||
        (st->coll_name_id == 0 && st->coll_flags != 0))
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_STATUS);
    put_u64(&b, st->step);
    put_u32(&b, st->name_id);
    put_u64(&b, (uint64_t)st->since_ns);
    if (st->coll_name_id) {
        put_u32(&b, st->coll_name_id);
        put_u64(&b, st->coll_seq);
        put_u8(&b, st->coll_flags);
    }
    return frame_end(&b);
}

size_t wire_encode_features(uint8_t *buf, size_t cap, const wire_features *f)
{
    if (f->bits & ~WIRE_FEATURE_PROFILE)
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_FEATURES);
    put_u32(&b, f->bits);
    return frame_end(&b);
}

size_t wire_encode_command(uint8_t *buf, size_t cap, const wire_command *c)
{
    if (c->request_id == 0 || c->kind != WIRE_COMMAND_PROFILE ||
        c->duration_ms == 0 || c->duration_ms > WIRE_MAX_PROFILE_MS ||
        c->dir[0] != '/')
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_COMMAND);
    put_u32(&b, c->request_id);
    put_u8(&b, c->kind);
    put_u8(&b, 0);
    put_u16(&b, 0);
    put_u32(&b, c->duration_ms);
    put_str(&b, c->dir);
    return frame_end(&b);
}

size_t wire_encode_profile_done(uint8_t *buf, size_t cap,
                                const wire_profile_done *p)
{
    if (p->request_id == 0 || p->status > WIRE_PROFILE_FAILED ||
        p->marker_ns < 0 || p->text[0] == '\0' ||
        (p->status == WIRE_PROFILE_OK && p->text[0] != '/'))
        return 0;
    wbuf b = frame_begin(buf, cap, WIRE_PROFILE_DONE);
    put_u32(&b, p->request_id);
    put_u8(&b, p->status);
    put_u64(&b, (uint64_t)p->marker_ns);
    put_str(&b, p->text);
    return frame_end(&b);
}

/* ---- decoding ---- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    int short_read;
} rbuf;

static int take(rbuf *r, void *dst, size_t n)
{
    if (r->short_read || r->len - r->pos < n) {
        r->short_read = 1;
        return -1;
    }
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

static uint8_t get_u8(rbuf *r)
{
    uint8_t v = 0;
    take(r, &v, 1);
    return v;
}

static uint16_t get_u16(rbuf *r)
{
    uint8_t t[2] = {0, 0};
    take(r, t, 2);
    return (uint16_t)(t[0] | (t[1] << 8));
}

static uint32_t get_u32(rbuf *r)
{
    uint8_t t[4] = {0};
    take(r, t, 4);
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | t[i];
    return v;
}

static uint64_t get_u64(rbuf *r)
{
    uint8_t t[8] = {0};
    take(r, t, 8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | t[i];
    return v;
}

static double get_f64(rbuf *r)
{
    uint64_t u = get_u64(r);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Reads a length-prefixed string of at most MAX bytes into DST (MAX+1
 * bytes).  Returns -1 on a short read, -2 on a too long string, -3 on an
 * embedded NUL or control character. */
static int get_str(rbuf *r, char *dst, size_t max)
{
    size_t n = get_u8(r);
    if (r->short_read)
        return -1;
    if (n > max)
        return -2;
    if (take(r, dst, n) < 0)
        return -1;
    dst[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
            return -3;
    return 0;
}

static wire_result fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static wire_result fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return WIRE_ERROR;
}

void wire_decoder_init(wire_decoder *d, wire_direction dir,
                       const uint8_t token[WIRE_TOKEN_SIZE],
                       const char *run_id)
{
    memset(d, 0, sizeof *d);
    d->direction = dir;
    if (token)
        memcpy(d->token, token, WIRE_TOKEN_SIZE);
    if (run_id)
        snprintf(d->run_id, sizeof d->run_id, "%s", run_id);
}

static int is_declared(const wire_decoder *d, uint32_t id)
{
    return id >= 1 && id <= WIRE_MAX_NAME_ID &&
           (d->declared[id / 8] >> (id % 8) & 1);
}

/* Constant-time comparison, so a wrong token leaks nothing by timing. */
static int token_equal(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (int i = 0; i < WIRE_TOKEN_SIZE; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

static wire_result decode_hello(wire_decoder *d, rbuf *r, wire_hello *h,
                                char *err, size_t errlen)
{
    char magic[4];
    take(r, magic, 4);
    if (!r->short_read && memcmp(magic, WIRE_MAGIC, 4) != 0)
        return fail(err, errlen, "HELLO has a bad magic: not a stepscope peer");
    h->version = get_u16(r);
    uint16_t reserved = get_u16(r);
    if (!r->short_read && h->version != WIRE_VERSION)
        return fail(err, errlen,
                    "unsupported protocol version %u (this controller "
                    "speaks version %u)",
                    (unsigned)h->version, (unsigned)WIRE_VERSION);
    if (!r->short_read && reserved != 0)
        return fail(err, errlen, "HELLO reserved field is not zero");
    h->rank = get_u32(r);
    h->world_size = get_u32(r);
    h->local_rank = get_u32(r);
    h->pid = get_u32(r);
    h->attempt = get_u32(r);
    take(r, h->token, WIRE_TOKEN_SIZE);
    int rc = get_str(r, h->run_id, WIRE_MAX_STR);
    if (rc == 0)
        rc = get_str(r, h->host, WIRE_MAX_STR);
    if (r->short_read || rc == -1)
        return fail(err, errlen, "HELLO is truncated");
    if (rc < 0)
        return fail(err, errlen, "HELLO carries a malformed string");
    if (h->world_size == 0 || h->rank >= h->world_size)
        return fail(err, errlen, "HELLO rank %u is outside world size %u",
                    (unsigned)h->rank, (unsigned)h->world_size);
    if (d->direction == WIRE_FROM_RANK) {
        if (!token_equal(h->token, d->token))
            return fail(err, errlen, "wrong token from rank %u (pid %u)",
                        (unsigned)h->rank, (unsigned)h->pid);
        if (strcmp(h->run_id, d->run_id) != 0)
            return fail(err, errlen,
                        "rank %u belongs to run '%s', not this run",
                        (unsigned)h->rank, h->run_id);
    }
    return WIRE_OK;
}

static wire_result decode_step(wire_decoder *d, rbuf *r, wire_step *s,
                               char *err, size_t errlen)
{
    s->step = get_u64(r);
    s->begin_ns = (int64_t)get_u64(r);
    s->end_ns = (int64_t)get_u64(r);
    s->rss_bytes = get_u64(r);
    s->device_bytes = get_u64(r);
    s->flags = get_u8(r);
    s->n_phases = get_u8(r);
    s->n_syncs = get_u8(r);
    s->n_metrics = get_u8(r);
    if (r->short_read)
        return fail(err, errlen, "STEP is truncated");
    if (s->n_phases > WIRE_MAX_ITEMS || s->n_syncs > WIRE_MAX_ITEMS ||
        s->n_metrics > WIRE_MAX_ITEMS)
        return fail(err, errlen, "STEP has more than %d items of a kind",
                    WIRE_MAX_ITEMS);
    if (s->flags &
        ~(WIRE_STEP_HAS_RSS | WIRE_STEP_HAS_DEVICE | WIRE_STEP_HAS_SELF))
        return fail(err, errlen, "STEP has unknown flags 0x%x",
                    (unsigned)s->flags);
    if (s->begin_ns < 0 || s->end_ns < s->begin_ns)
        return fail(err, errlen, "STEP %llu ends before it begins",
                    (unsigned long long)s->step);
    if (d->have_step && s->step <= d->last_step)
        return fail(err, errlen, "STEP %llu does not follow step %llu",
                    (unsigned long long)s->step,
                    (unsigned long long)d->last_step);
    for (unsigned i = 0; i < s->n_phases; i++) {
        s->phases[i].name_id = get_u32(r);
        s->phases[i].count = get_u32(r);
        s->phases[i].total_ns = get_u64(r);
        s->phases[i].first_begin_ns = (int64_t)get_u64(r);
        s->phases[i].self_ns = 0;
        if (s->flags & WIRE_STEP_HAS_SELF)
            s->phases[i].self_ns = get_u64(r);
        if (r->short_read)
            break;
        if (!is_declared(d, s->phases[i].name_id))
            return fail(err, errlen, "STEP uses undeclared name id %u",
                        (unsigned)s->phases[i].name_id);
        if (s->phases[i].total_ns > (uint64_t)INT64_MAX)
            return fail(err, errlen, "STEP phase duration out of range");
        if (s->phases[i].first_begin_ns < 0)
            return fail(err, errlen, "STEP phase begin out of range");
        if (s->phases[i].self_ns > s->phases[i].total_ns)
            return fail(err, errlen, "STEP phase self time exceeds its "
                        "total");
    }
    for (unsigned i = 0; i < s->n_syncs && !r->short_read; i++) {
        s->syncs[i].name_id = get_u32(r);
        s->syncs[i].arrival_ns = (int64_t)get_u64(r);
        if (!r->short_read && !is_declared(d, s->syncs[i].name_id))
            return fail(err, errlen, "STEP uses undeclared name id %u",
                        (unsigned)s->syncs[i].name_id);
        if (!r->short_read && s->syncs[i].arrival_ns < 0)
            return fail(err, errlen, "STEP sync arrival out of range");
    }
    for (unsigned i = 0; i < s->n_metrics && !r->short_read; i++) {
        s->metrics[i].name_id = get_u32(r);
        s->metrics[i].value = get_f64(r);
        if (!r->short_read && !is_declared(d, s->metrics[i].name_id))
            return fail(err, errlen, "STEP uses undeclared name id %u",
                        (unsigned)s->metrics[i].name_id);
    }
    if (r->short_read)
        return fail(err, errlen, "STEP is truncated");
    d->have_step = 1;
    d->last_step = s->step;
    return WIRE_OK;
}

static wire_result decode_values(wire_decoder *d, rbuf *r, wire_values *v,
                                 char *err, size_t errlen)
{
    v->step = get_u64(r);
    v->name_id = get_u32(r);
    v->n = get_u32(r);
    v->truncated = get_u32(r);
    if (r->short_read)
        return fail(err, errlen, "VALUES is truncated");
    if (!is_declared(d, v->name_id))
        return fail(err, errlen, "VALUES uses undeclared name id %u",
                    (unsigned)v->name_id);
    if (v->n > WIRE_MAX_VALUES)
        return fail(err, errlen, "VALUES has %u elements, more than %d",
                    (unsigned)v->n, WIRE_MAX_VALUES);
    if (r->len - r->pos != 8 * (size_t)v->n)
        return fail(err, errlen, "VALUES payload does not hold its %u "
                    "elements", (unsigned)v->n);
    if (v->step == WIRE_NO_STEP || v->step > (uint64_t)INT64_MAX)
        return fail(err, errlen, "VALUES step out of range");
    if (d->have_step && v->step <= d->last_step)
        return fail(err, errlen, "VALUES for step %llu, which does not "
                    "follow step %llu", (unsigned long long)v->step,
                    (unsigned long long)d->last_step);
    if (d->values_n && v->step != d->values_step)
        return fail(err, errlen, "VALUES for step %llu before the STEP of "
                    "step %llu", (unsigned long long)v->step,
                    (unsigned long long)d->values_step);
    if (d->values_n && (d->values_names[v->name_id / 8] >> (v->name_id % 8)
                        & 1))
        return fail(err, errlen, "VALUES name id %u twice in step %llu",
                    (unsigned)v->name_id, (unsigned long long)v->step);
    if (d->values_elems + v->n > WIRE_MAX_STEP_VALUES)
        return fail(err, errlen, "VALUES of step %llu exceed %d elements",
                    (unsigned long long)v->step, WIRE_MAX_STEP_VALUES);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    take(r, v->v, 8 * (size_t)v->n);
#else
    for (uint32_t i = 0; i < v->n; i++)
        v->v[i] = get_f64(r);
#endif
    if (!d->values_n) {
        memset(d->values_names, 0, sizeof d->values_names);
        d->values_step = v->step;
        d->values_elems = 0;
    }
    d->values_n++;
    d->values_elems += v->n;
    d->values_names[v->name_id / 8] |= (uint8_t)(1u << (v->name_id % 8));
    return WIRE_OK;
}

static wire_result decode_labels(wire_decoder *d, rbuf *r, wire_labels *l,
                                 char *err, size_t errlen)
{
    l->name_id = get_u32(r);
    l->total = get_u16(r);
    l->first = get_u16(r);
    l->count = get_u16(r);
    uint16_t reserved = get_u16(r);
    if (r->short_read)
        return fail(err, errlen, "LABELS is truncated");
    if (reserved != 0)
        return fail(err, errlen, "LABELS reserved field is not zero");
    if (!is_declared(d, l->name_id))
        return fail(err, errlen, "LABELS uses undeclared name id %u",
                    (unsigned)l->name_id);
    if (l->total == 0 || l->total > WIRE_MAX_VALUES || l->count == 0 ||
        l->first >= l->total || l->count > l->total - l->first)
        return fail(err, errlen, "LABELS %u..%u of %u out of range",
                    (unsigned)l->first, (unsigned)(l->first + l->count),
                    (unsigned)l->total);
    if (l->first == 0 ? d->labels_name != 0
                      : (d->labels_name != l->name_id ||
                         d->labels_total != l->total ||
                         d->labels_next != l->first))
        return fail(err, errlen, "LABELS chunk %u of name id %u out of "
                    "order", (unsigned)l->first, (unsigned)l->name_id);
    size_t at = 0;
    for (uint32_t i = 0; i < l->count; i++) {
        /* text holds every string and its NUL: the payload, a byte per
         * length prefix, bounds it */
        l->off[i] = (uint16_t)at;
        int rc = get_str(r, l->text + at, WIRE_MAX_STR);
        if (rc == -1)
            return fail(err, errlen, "LABELS is truncated");
        if (rc < 0)
            return fail(err, errlen, "LABELS carries a malformed label");
        at += strlen(l->text + at) + 1;
    }
    uint32_t next = l->first + l->count;
    if (next == l->total) {
        d->labels_name = 0;
    } else {
        d->labels_name = l->name_id;
        d->labels_total = l->total;
        d->labels_next = next;
    }
    return WIRE_OK;
}

wire_result wire_decoder_next(wire_decoder *d, const uint8_t *buf, size_t len,
                              wire_frame *out, size_t *consumed, char *err,
                              size_t errlen)
{
    *consumed = 0;
    if (errlen > 0)
        err[0] = '\0';
    if (len < WIRE_HEADER_SIZE)
        return WIRE_NEED_MORE;
    rbuf h = {buf, WIRE_HEADER_SIZE, 0, 0};
    uint32_t payload = get_u32(&h);
    uint8_t type = get_u8(&h);
    uint8_t flags = get_u8(&h);
    uint16_t reserved = get_u16(&h);
    /* The first frame must be the handshake; check before waiting for the
     * payload so a stranger is turned away at once. */
    if (!d->handshaken) {
        unsigned want = d->direction == WIRE_FROM_RANK ? WIRE_HELLO : WIRE_WELCOME;
        if (type != want &&
            !(d->direction == WIRE_FROM_CONTROLLER && type == WIRE_REJECT))
            return fail(err, errlen, "expected %s as the first frame, got "
                        "%s (type %u): not a stepscope peer?",
                        wire_type_name(want), wire_type_name(type),
                        (unsigned)type);
    }
    if (payload > WIRE_MAX_PAYLOAD)
        return fail(err, errlen, "frame of %u bytes exceeds the %u-byte limit",
                    (unsigned)payload, (unsigned)WIRE_MAX_PAYLOAD);
    if (flags != 0 || reserved != 0)
        return fail(err, errlen, "frame header has non-zero reserved bits");

    if (len - WIRE_HEADER_SIZE < payload)
        return WIRE_NEED_MORE;

    rbuf r = {buf + WIRE_HEADER_SIZE, payload, 0, 0};
    /* Zero what this frame can fill.  A STEP's item arrays (3.6 KiB) are
     * valid up to their counts only: clearing them for every frame was
     * most of the decoder's time. */
    memset(out, 0, offsetof(wire_frame, u) +
                       (type == WIRE_STEP     ? offsetof(wire_step, phases)
                        : type == WIRE_VALUES ? offsetof(wire_values, v)
                        : type == WIRE_LABELS ? offsetof(wire_labels, off)
                                              : sizeof(wire_hello)));
    out->type = (wire_type)type;
    wire_result rc = WIRE_OK;
    int from_rank = d->direction == WIRE_FROM_RANK;

    switch (type) {
    case WIRE_HELLO:
        if (!from_rank || d->handshaken)
            return fail(err, errlen, "unexpected HELLO");
        rc = decode_hello(d, &r, &out->u.hello, err, errlen);
        if (rc == WIRE_OK)
            d->handshaken = 1;
        break;
    case WIRE_WELCOME:
        if (from_rank || d->handshaken)
            return fail(err, errlen, "unexpected WELCOME");
        out->u.welcome.version = get_u16(&r);
        (void)get_u16(&r);
        if (r.short_read)
            return fail(err, errlen, "WELCOME is truncated");
        if (out->u.welcome.version != WIRE_VERSION)
            return fail(err, errlen, "controller speaks protocol version %u, "
                        "this recorder version %u",
                        (unsigned)out->u.welcome.version,
                        (unsigned)WIRE_VERSION);
        d->handshaken = 1;
        break;
    case WIRE_REJECT:
        if (from_rank)
            return fail(err, errlen, "unexpected REJECT");
        out->u.reject.code = get_u16(&r);
        if (get_str(&r, out->u.reject.reason, WIRE_MAX_STR) < 0)
            return fail(err, errlen, "REJECT is malformed");
        break;
    case WIRE_NAME: {
        if (!from_rank)
            return fail(err, errlen, "unexpected NAME");
        wire_name *n = &out->u.name;
        n->name_id = get_u32(&r);
        int src = get_str(&r, n->name, WIRE_MAX_NAME_LEN);
        if (r.short_read || src == -1)
            return fail(err, errlen, "NAME is truncated");
        if (src < 0 || n->name[0] == '\0')
            return fail(err, errlen, "NAME has an empty, too long or "
                        "malformed name");
        if (n->name_id == 0 || n->name_id > WIRE_MAX_NAME_ID)
            return fail(err, errlen, "NAME id %u is out of range",
                        (unsigned)n->name_id);
        if (is_declared(d, n->name_id))
            return fail(err, errlen, "NAME id %u declared twice",
                        (unsigned)n->name_id);
        d->declared[n->name_id / 8] |= (uint8_t)(1u << (n->name_id % 8));
        break;
    }
    case WIRE_STEP:
        if (!from_rank)
            return fail(err, errlen, "unexpected STEP");
        rc = decode_step(d, &r, &out->u.step, err, errlen);
        if (rc == WIRE_OK && d->values_n) {
            if (out->u.step.step != d->values_step)
                return fail(err, errlen, "STEP %llu follows VALUES of step "
                            "%llu", (unsigned long long)out->u.step.step,
                            (unsigned long long)d->values_step);
            d->values_n = 0;
            d->values_elems = 0;
        }
        break;
    case WIRE_VALUES:
        if (!from_rank)
            return fail(err, errlen, "unexpected VALUES");
        rc = decode_values(d, &r, &out->u.values, err, errlen);
        break;
    case WIRE_LABELS:
        if (!from_rank)
            return fail(err, errlen, "unexpected LABELS");
        rc = decode_labels(d, &r, &out->u.labels, err, errlen);
        break;
    case WIRE_COUNTERS: {
        if (!from_rank)
            return fail(err, errlen, "unexpected COUNTERS");
        wire_counters *c = &out->u.counters;
        c->dropped_events = get_u64(&r);
        c->dropped_records = get_u64(&r);
        if (r.short_read)
            return fail(err, errlen, "COUNTERS is truncated");
        if (r.pos < r.len) { /* the vector counts */
            c->dropped_vectors = get_u64(&r);
            c->truncated_values = get_u64(&r);
            if (r.short_read)
                return fail(err, errlen, "COUNTERS vector counts are "
                            "truncated");
        }
        if (c->dropped_events < d->last_counters.dropped_events ||
            c->dropped_records < d->last_counters.dropped_records ||
            c->dropped_vectors < d->last_counters.dropped_vectors ||
            c->truncated_values < d->last_counters.truncated_values)
            return fail(err, errlen, "COUNTERS went backwards");
        d->last_counters = *c;
        break;
    }
    case WIRE_CHECKPOINT:
        if (!from_rank)
            return fail(err, errlen, "unexpected CHECKPOINT");
        out->u.checkpoint.step = get_u64(&r);
        out->u.checkpoint.t_ns = (int64_t)get_u64(&r);
        if (r.short_read)
            return fail(err, errlen, "CHECKPOINT is truncated");
        break;
    case WIRE_RESUMED:
        if (!from_rank)
            return fail(err, errlen, "unexpected RESUMED");
        out->u.resumed.step = get_u64(&r);
        out->u.resumed.t_ns = (int64_t)get_u64(&r);
        if (r.short_read)
            return fail(err, errlen, "RESUMED is truncated");
        if (out->u.resumed.step == WIRE_NO_STEP ||
            out->u.resumed.step > INT64_MAX)
            return fail(err, errlen, "RESUMED step out of range");
        if (out->u.resumed.t_ns < 0)
            return fail(err, errlen, "RESUMED time out of range");
        break;
    case WIRE_BYE:
        if (!from_rank)
            return fail(err, errlen, "unexpected BYE");
        out->u.bye.last_step = get_u64(&r);
        if (r.short_read)
            return fail(err, errlen, "BYE is truncated");
        if (d->values_n)
            return fail(err, errlen, "BYE before the STEP of the VALUES of "
                        "step %llu", (unsigned long long)d->values_step);
        break;
    case WIRE_STATUS: {
        if (!from_rank)
            return fail(err, errlen, "unexpected STATUS");
        wire_status *st = &out->u.status;
        st->step = get_u64(&r);
        st->name_id = get_u32(&r);
        st->since_ns = (int64_t)get_u64(&r);
        if (r.short_read)
            return fail(err, errlen, "STATUS is truncated");
        if (st->name_id != 0 && !is_declared(d, st->name_id))
            return fail(err, errlen, "STATUS uses undeclared name id %u",
                        (unsigned)st->name_id);
        if (st->since_ns < 0)
            return fail(err, errlen, "STATUS time out of range");
        st->coll_name_id = 0;
        st->coll_seq = 0;
        st->coll_flags = 0;
        if (r.pos == r.len)
            break; /* 20 bytes: no collective */
        st->coll_name_id = get_u32(&r);
        st->coll_seq = get_u64(&r);
        st->coll_flags = get_u8(&r);
        if (r.short_read)
            return fail(err, errlen, "STATUS collective is truncated");
        if (st->coll_name_id == 0 || !is_declared(d, st->coll_name_id))
            return fail(err, errlen, "STATUS collective uses undeclared "
                        "name id %u", (unsigned)st->coll_name_id);
        if (st->coll_seq == 0)
            return fail(err, errlen, "STATUS collective number 0");
        if (st->coll_flags & ~WIRE_STATUS_COLL_ACTIVE)
            return fail(err, errlen, "STATUS has unknown collective flags "
                        "0x%x", (unsigned)st->coll_flags);
        break;
    }
    case WIRE_FEATURES:
        if (!from_rank)
            return fail(err, errlen, "unexpected FEATURES");
        out->u.features.bits = get_u32(&r);
        if (r.short_read)
            return fail(err, errlen, "FEATURES is truncated");
        if (out->u.features.bits & ~WIRE_FEATURE_PROFILE)
            return fail(err, errlen, "FEATURES has unknown bits 0x%x",
                        (unsigned)out->u.features.bits);
        break;
    case WIRE_COMMAND: {
        if (from_rank)
            return fail(err, errlen, "unexpected COMMAND");
        wire_command *cmd = &out->u.command;
        cmd->request_id = get_u32(&r);
        cmd->kind = get_u8(&r);
        uint8_t pad8 = get_u8(&r);
        uint16_t pad16 = get_u16(&r);
        cmd->duration_ms = get_u32(&r);
        int src = get_str(&r, cmd->dir, WIRE_MAX_STR);
        if (r.short_read || src == -1)
            return fail(err, errlen, "COMMAND is truncated");
        if (src < 0)
            return fail(err, errlen, "COMMAND carries a malformed string");
        if (pad8 != 0 || pad16 != 0)
            return fail(err, errlen, "COMMAND reserved field is not zero");
        if (cmd->request_id == 0)
            return fail(err, errlen, "COMMAND request id 0");
        if (cmd->kind != WIRE_COMMAND_PROFILE)
            return fail(err, errlen, "COMMAND of unknown kind %u",
                        (unsigned)cmd->kind);
        if (cmd->duration_ms == 0 || cmd->duration_ms > WIRE_MAX_PROFILE_MS)
            return fail(err, errlen, "COMMAND duration %u ms out of range",
                        (unsigned)cmd->duration_ms);
        if (cmd->dir[0] != '/')
            return fail(err, errlen, "COMMAND directory is not absolute");
        break;
    }
    case WIRE_PROFILE_DONE: {
        if (!from_rank)
            return fail(err, errlen, "unexpected PROFILE_DONE");
        wire_profile_done *pd = &out->u.profile_done;
        pd->request_id = get_u32(&r);
        pd->status = get_u8(&r);
        pd->marker_ns = (int64_t)get_u64(&r);
        int src = get_str(&r, pd->text, WIRE_MAX_STR);
        if (r.short_read || src == -1)
            return fail(err, errlen, "PROFILE_DONE is truncated");
        if (src < 0 || pd->text[0] == '\0')
            return fail(err, errlen, "PROFILE_DONE has an empty or "
                        "malformed text");
        if (pd->request_id == 0)
            return fail(err, errlen, "PROFILE_DONE request id 0");
        if (pd->status > WIRE_PROFILE_FAILED)
            return fail(err, errlen, "PROFILE_DONE has unknown status %u",
                        (unsigned)pd->status);
        if (pd->marker_ns < 0)
            return fail(err, errlen, "PROFILE_DONE marker out of range");
        if (pd->status == WIRE_PROFILE_OK && pd->text[0] != '/')
            return fail(err, errlen, "PROFILE_DONE path is not absolute");
        break;
    }
    default:
        return fail(err, errlen, "unknown frame type %u", (unsigned)type);
    }
    if (rc != WIRE_OK)
        return rc;
    if (r.pos != r.len)
        return fail(err, errlen, "%s frame has %zu trailing bytes",
                    wire_type_name(type), r.len - r.pos);
    *consumed = WIRE_HEADER_SIZE + payload;
    d->frames++;
    return WIRE_OK;
}

int wire_token_parse(const char *hex, uint8_t token[WIRE_TOKEN_SIZE])
{
    if (!hex || strlen(hex) != 2 * WIRE_TOKEN_SIZE)
        return -1;
    for (int i = 0; i < WIRE_TOKEN_SIZE; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = hex[2 * i + k];
            unsigned digit;
            if (c >= '0' && c <= '9')
                digit = (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                digit = (unsigned)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                digit = (unsigned)(c - 'A' + 10);
            else
                return -1;
            v = v * 16 + digit;
        }
        token[i] = (uint8_t)v;
    }
    return 0;
}

void wire_token_format(const uint8_t token[WIRE_TOKEN_SIZE],
                       char hex[2 * WIRE_TOKEN_SIZE + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < WIRE_TOKEN_SIZE; i++) {
        hex[2 * i] = digits[token[i] >> 4];
        hex[2 * i + 1] = digits[token[i] & 15];
    }
    hex[2 * WIRE_TOKEN_SIZE] = '\0';
}

const char *wire_type_name(unsigned type)
{
    static const char *const names[] = {
        NULL, "HELLO", "WELCOME", "REJECT", "NAME",
        "STEP", "COUNTERS", "CHECKPOINT", "BYE", "STATUS", "RESUMED",
        "FEATURES", "COMMAND", "PROFILE_DONE", "VALUES", "LABELS"};
    if (type >= 1 && type < sizeof names / sizeof names[0] && names[type])
        return names[type];
    return "UNKNOWN";
}
