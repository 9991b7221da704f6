/*
 * ingest.c - accepts rank connections and turns their bytes into frames.
 *
 * Each connection owns a read buffer large enough for two maximal frames
 * and a wire_decoder.  Data is decoded as it arrives; a frame that fails
 * the decoder, or a HELLO the controller refuses, gets a REJECT frame with
 * the reason and the connection is closed after the write completes.  A
 * handshake timer closes connections that never say HELLO.  A name the run
 * has no room for never closes a connection: its local id maps to
 * NAME_REFUSED and translate() drops (and counts) the items under it, so
 * the rest of each record keeps flowing.  A STEP frame is handed on as
 * the analysis stage's record (model.h, to_record): the protocol stops
 * here.  A step's VALUES frames come
 * before its STEP (the decoder checks it): they are kept in the
 * connection's pending list (at most WIRE_MAX_STEP_VALUES elements, the
 * buffer grown to what the rank uses and kept) and handed on with the
 * STEP.  A LABELS set is assembled chunk by chunk and handed on once
 * complete.  All state is touched only from the loop thread.
 *
 * Reading in step.  A rank's connection is read as fast as it delivers,
 * so after the controller could not run for a while (stopped, starved of
 * CPU) one rank's backlog would be decoded whole before the next rank's,
 * and the aggregator, whose window of open steps it outruns, would
 * finalize those steps with the other ranks missing although their
 * records sit unread in their sockets.  A rank's connection that gets more
 * than max_lead_steps ahead of the slowest connected rank therefore waits
 * (its bytes stay in its buffer and socket) while a slower rank has bytes
 * unread, for at most LEAD_WAIT_MAX_NS; an idle handle tries the waiting
 * connections again on each loop turn.  A slower rank with nothing unread
 * is really behind: nobody waits for it, and the check is not repeated
 * for that connection until it has gone on by another half lead.
 *
 * A rank's first step.  Before a connection's first STEP is handed on,
 * on_first_step may hold it: the decoder goes back to before the frame,
 * its bytes stay kept and the connection stops reading until
 * ss_ingest_release_held (on the next loop turn, never inside a
 * callback).  Its answer also gives the connection a step offset, added
 * to the step numbers of its STEP, STATUS and CHECKPOINT frames from then
 * on (the run's use: run_ingest.c, "first steps").
 */
#include "ingest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock_sync.h"
#include "clocks.h"

#define CONN_BUF_SIZE (2 * (WIRE_HEADER_SIZE + WIRE_MAX_PAYLOAD))
#define NAME_REFUSED (-1) /* name_map: the run's name table had no room */
#define LEAD_WAIT_MAX_NS 1000000000LL /* the longest one wait in step lasts */

/* The vectors of a rank's next STEP: items (v set when handed on) and
 * where each one's first element lies in the connection's pend_data. */
typedef struct {
    ss_values_item item[WIRE_MAX_NAME_ID];
    uint32_t at[WIRE_MAX_NAME_ID];
} pending_values;

typedef struct conn {
    uv_pipe_t pipe; /* first: the handle's data points back to us anyway;
                       unused by a channel */
    uv_timer_t handshake_timer;
    ss_ingest *owner;
    /* A channel (ss_ingest_channel_open): its bytes come from ss_ingest_
     * channel_feed, what is sent goes to TRANSPORT; NULL for a socket. */
    const ss_ingest_transport *transport;
    int far_end_gone;   /* the transport reported the channel gone */
    struct conn *prev, *next;
    wire_decoder decoder;
    int32_t rank;       /* -1 until HELLO accepted */
    int said_bye;
    int64_t last_step;      /* of its latest STEP; -1 before the first */
    int64_t next_lead_check; /* no wait in step is considered before */
    int waiting;            /* reading in step: paused, bytes kept */
    int held;               /* at its first STEP, until released (on_first_
                               step): paused, bytes kept */
    int first_step_passed;  /* on_first_step let its first STEP go */
    int64_t step_offset;    /* on_first_step's, added to its step numbers */
    ss_mono_ns wait_since;
    uint32_t features;  /* WIRE_FEATURE_* the rank announced */
    int closing;
    int handles_open;   /* pipe and timer; freed when both closed */
    int16_t name_map[WIRE_MAX_NAME_ID + 1]; /* local id -> run-wide index,
                                               or NAME_REFUSED */
    size_t len;
    uint8_t *buf; /* CONN_BUF_SIZE; a channel's only while bytes wait */
    /* The VALUES of the next STEP and their elements (pend_data).  PEND
     * (~11 KiB) exists from the rank's first VALUES on: most ranks of a
     * large world send none. */
    pending_values *pend;
    uint32_t n_pend, pend_used, pend_cap;
    uint32_t pend_refused; /* of them, under refused names */
    double *pend_data;
    /* A LABELS set being assembled: its local name id, the strings one
     * after another, and where each begins. */
    uint32_t lab_name, lab_total, lab_n;
    char *lab_text;
    size_t lab_len, lab_cap;
    uint32_t *lab_off;
} conn;

struct ss_ingest {
    uv_loop_t *loop;
    int listen_fd;
    uv_poll_t server;  /* LISTEN_FD readable: connections wait */
    uv_timer_t retry;  /* listening again after running out of fds */
    ss_ingest_callbacks cb;
    uint8_t token[WIRE_TOKEN_SIZE];
    char run_id[WIRE_MAX_STR + 1];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uint32_t handshake_timeout_ms;
    conn *conns;
    uint32_t n_conns;
    int release_held; /* ss_ingest_release_held asked, not done yet */
    int closing;
    int server_open;   /* SERVER, RETRY and RESUME not closed yet: 0..3 */
    uv_idle_t resume;  /* tries the connections waiting in step */
    uint32_t max_lead; /* steps; 0: connections never wait */
    int64_t floor;     /* the slowest rank's latest step, as last computed */
    ss_ingest_stats stats;
    wire_frame frame;      /* scratch: large, so not on the stack */
    ss_step_record record; /* scratch: a step frame as the analysis' input */
};

#define ACCEPT_RETRY_MS 100 /* out of descriptors: listen again after */

static void maybe_free_ingest(ss_ingest *in)
{
    if (in->closing && !in->server_open && in->n_conns == 0)
        free(in);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    ss_ingest *in = c->owner;
    if (c->prev)
        c->prev->next = c->next;
    else
        in->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    in->n_conns--;
    free(c->buf);
    free(c->pend_data);
    free(c->pend);
    free(c->lab_text);
    free(c->lab_off);
    free(c);
    maybe_free_ingest(in);
}

/* Closes C; reports the disconnect of an accepted rank exactly once. */
static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    ss_ingest *in = c->owner;
    if (c->rank >= 0 && in->cb.on_disconnect)
        in->cb.on_disconnect(in->cb.ctx, (uint32_t)c->rank, c->said_bye);
    uv_close((uv_handle_t *)&c->handshake_timer, on_conn_handle_closed);
    if (c->transport) {
        if (!c->far_end_gone && c->transport->closed)
            c->transport->closed(c->transport->ctx);
        return;
    }
    uv_read_stop((uv_stream_t *)&c->pipe);
    uv_close((uv_handle_t *)&c->pipe, on_conn_handle_closed);
}

typedef struct {
    uv_write_t req;
    conn *c;
    int close_after;
    uint8_t bytes[WIRE_HEADER_SIZE + 12 + 1 + WIRE_MAX_STR]; /* COMMAND */
} write_req;

static void on_write_done(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    if (w->close_after || status < 0)
        conn_close(w->c);
    free(w);
}

/* Queues LEN bytes of a controller frame; closes C afterwards if asked. */
static void conn_send(conn *c, const uint8_t *bytes, size_t len,
                      int close_after)
{
    if (c->transport) {
        if (c->far_end_gone ||
            c->transport->write(c->transport->ctx, bytes, len) != 0 ||
            close_after)
            conn_close(c);
        return;
    }
    write_req *w = malloc(sizeof *w);
    if (!w || len > sizeof w->bytes) {
        free(w);
        conn_close(c);
        return;
    }
    memcpy(w->bytes, bytes, len);
    w->c = c;
    w->close_after = close_after;
    uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_write_done) < 0) {
        free(w);
        conn_close(c);
    }
}

/* Sends REJECT with REASON, reports it, and closes C once it is written. */
static void conn_reject(conn *c, uint16_t code, const char *reason)
{
    ss_ingest *in = c->owner;
    in->stats.rejected++;
    if (in->cb.on_rejected)
        in->cb.on_rejected(in->cb.ctx, c->rank, reason);
    uint8_t out[WIRE_HEADER_SIZE + 2 + 1 + WIRE_MAX_STR];
    wire_reject r;
    r.code = code;
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    size_t n = wire_encode_reject(out, sizeof out, &r);
    if (!c->transport)
        uv_read_stop((uv_stream_t *)&c->pipe);
    if (n > 0)
        conn_send(c, out, n, 1);
    else
        conn_close(c);
}

static void on_handshake_timeout(uv_timer_t *t)
{
    conn *c = t->data;
    if (!c->decoder.handshaken && !c->closing)
        conn_reject(c, 2, "no HELLO within the handshake timeout");
}

/* A step frame's items under a refused name are left out; the kept ones
 * fit a record.  The record's names are the run's (name_map), which fit
 * the analysis stage's name table. */
_Static_assert(WIRE_MAX_ITEMS <= SS_MAX_STEP_ITEMS,
               "a step frame fits a record");
_Static_assert(WIRE_MAX_NAME_LEN <= SS_MAX_RUN_NAME_LEN, "a wire name fits");

static int64_t clamp_u64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/*
 * Converts the step frame W of connection C into OUT, the analysis stage's
 * record (model.h): the names become run-wide indexes (the decoder already
 * checked that each id is declared) and the items whose name was refused
 * are left out; sizes the rank did not sample become SS_MISSING, unsigned
 * sizes and durations are clamped to int64_t; and on a channel every time
 * moves onto the controller's clock (the far end's CLOCK_MONOTONIC plus
 * the transport's offset: an agent on another host).  Only the items
 * present are written.  Returns how many items were left out.
 */
static uint32_t to_record(const conn *c, const wire_step *w,
                          ss_step_record *out)
{
    uint32_t n = 0, dropped = 0;
    out->step = w->step;
    out->begin_ns = w->begin_ns;
    out->end_ns = w->end_ns;
    out->rss_bytes =
        w->flags & WIRE_STEP_HAS_RSS ? clamp_u64(w->rss_bytes) : SS_MISSING;
    out->device_bytes = w->flags & WIRE_STEP_HAS_DEVICE
                            ? clamp_u64(w->device_bytes)
                            : SS_MISSING;
    int self = (w->flags & WIRE_STEP_HAS_SELF) != 0;
    for (unsigned i = 0; i < w->n_phases; i++) {
        const wire_phase *p = &w->phases[i];
        int16_t idx = c->name_map[p->name_id];
        if (idx == NAME_REFUSED)
            continue;
        ss_phase_record *o = &out->phases[n++];
        o->name = idx;
        o->count = p->count;
        o->total_ns = clamp_u64(p->total_ns);
        o->self_ns = self ? clamp_u64(p->self_ns) : SS_MISSING;
        o->first_begin_ns = p->first_begin_ns;
    }
    dropped += w->n_phases - n;
    out->n_phases = n;
    n = 0;
    for (unsigned i = 0; i < w->n_syncs; i++) {
        int16_t idx = c->name_map[w->syncs[i].name_id];
        if (idx == NAME_REFUSED)
            continue;
        out->syncs[n].name = idx;
        out->syncs[n++].arrival_ns = w->syncs[i].arrival_ns;
    }
    dropped += w->n_syncs - n;
    out->n_syncs = n;
    n = 0;
    for (unsigned i = 0; i < w->n_metrics; i++) {
        int16_t idx = c->name_map[w->metrics[i].name_id];
        if (idx == NAME_REFUSED)
            continue;
        out->metrics[n].name = idx;
        out->metrics[n++].value = w->metrics[i].value;
    }
    dropped += w->n_metrics - n;
    out->n_metrics = n;
    int64_t off = c->transport && c->transport->clock_offset_ns
                      ? *c->transport->clock_offset_ns
                      : 0;
    if (off) { /* a channel whose far end's clock is not ours */
        out->begin_ns = ss_clock_apply(out->begin_ns, off);
        out->end_ns = ss_clock_apply(out->end_ns, off);
        for (uint32_t i = 0; i < out->n_phases; i++)
            out->phases[i].first_begin_ns =
                ss_clock_apply(out->phases[i].first_begin_ns, off);
        for (uint32_t i = 0; i < out->n_syncs; i++)
            out->syncs[i].arrival_ns =
                ss_clock_apply(out->syncs[i].arrival_ns, off);
    }
    return dropped;
}

/* Keeps a VALUES frame for the STEP that follows.  Returns -1 when out of
 * memory (C is then rejected). */
static int keep_values(conn *c, const wire_values *v)
{
    int16_t idx = c->name_map[v->name_id];
    if (idx == NAME_REFUSED) {
        c->pend_refused++;
        return 0;
    }
    if (!c->pend && !(c->pend = malloc(sizeof *c->pend)))
        return -1;
    if (c->pend_used + v->n > c->pend_cap) {
        uint32_t cap = c->pend_cap ? c->pend_cap : 4096;
        while (cap < c->pend_used + v->n)
            cap *= 2;
        if (cap > WIRE_MAX_STEP_VALUES)
            cap = WIRE_MAX_STEP_VALUES; /* the decoder's bound per step */
        double *d = realloc(c->pend_data, cap * sizeof(double));
        if (!d)
            return -1;
        c->pend_data = d;
        c->pend_cap = cap;
    }
    ss_values_item *it = &c->pend->item[c->n_pend];
    memset(it, 0, sizeof *it);
    it->name = idx;
    it->n = v->n;
    it->truncated = v->truncated;
    c->pend->at[c->n_pend++] = c->pend_used;
    memcpy(c->pend_data + c->pend_used, v->v, v->n * sizeof(double));
    c->pend_used += v->n;
    return 0;
}

/* Adds a LABELS chunk to the set being assembled; hands the set on once
 * complete.  Returns -1 when out of memory. */
static int keep_labels(conn *c, const wire_labels *l)
{
    ss_ingest *in = c->owner;
    if (l->first == 0) {
        c->lab_name = l->name_id;
        c->lab_total = l->total;
        c->lab_n = 0;
        c->lab_len = 0;
        uint32_t *off = realloc(c->lab_off, l->total * sizeof *off);
        if (!off)
            return -1;
        c->lab_off = off;
    }
    for (uint32_t i = 0; i < l->count; i++) {
        const char *s = l->text + l->off[i];
        size_t len = strlen(s) + 1;
        if (c->lab_len + len > c->lab_cap) {
            size_t cap = c->lab_cap ? c->lab_cap * 2 : 4096;
            while (cap < c->lab_len + len)
                cap *= 2;
            char *t = realloc(c->lab_text, cap);
            if (!t)
                return -1;
            c->lab_text = t;
            c->lab_cap = cap;
        }
        memcpy(c->lab_text + c->lab_len, s, len);
        c->lab_off[c->lab_n++] = (uint32_t)c->lab_len;
        c->lab_len += len;
    }
    if (c->lab_n < c->lab_total)
        return 0;
    int16_t idx = c->name_map[c->lab_name];
    if (idx != NAME_REFUSED && in->cb.on_labels) {
        const char **ptrs = malloc(c->lab_n * sizeof *ptrs);
        if (!ptrs)
            return -1;
        for (uint32_t i = 0; i < c->lab_n; i++)
            ptrs[i] = c->lab_text + c->lab_off[i];
        in->cb.on_labels(in->cb.ctx, (uint32_t)c->rank, idx, ptrs, c->lab_n);
        free(ptrs);
    }
    /* the set is handed on: its memory is not kept */
    free(c->lab_text);
    free(c->lab_off);
    c->lab_text = NULL;
    c->lab_off = NULL;
    c->lab_len = c->lab_cap = 0;
    return 0;
}

/* Handles one decoded frame.  Returns -1 when C was rejected. */
static int dispatch(conn *c, wire_frame *f)
{
    ss_ingest *in = c->owner;
    const ss_ingest_callbacks *cb = &in->cb;
    switch (f->type) {
    case WIRE_HELLO: {
        char reason[200] = "refused by the controller";
        const ss_ingest_transport *t = c->transport;
        if (t && t->rank_count &&
            (f->u.hello.rank < t->rank_first ||
             f->u.hello.rank - t->rank_first >= t->rank_count)) {
            snprintf(reason, sizeof reason, "rank %u does not run on this "
                     "node (its ranks are %u to %u)", f->u.hello.rank,
                     t->rank_first, t->rank_first + t->rank_count - 1);
            conn_reject(c, 3, reason);
            return -1;
        }
        if (cb->on_hello &&
            cb->on_hello(cb->ctx, &f->u.hello, reason, sizeof reason) != 0) {
            conn_reject(c, 3, reason);
            return -1;
        }
        c->rank = (int32_t)f->u.hello.rank;
        uv_timer_stop(&c->handshake_timer);
        uint8_t out[16];
        wire_welcome w = {WIRE_VERSION};
        size_t n = wire_encode_welcome(out, sizeof out, &w);
        conn_send(c, out, n, 0);
        return 0;
    }
    case WIRE_NAME: {
        int idx = cb->intern ? cb->intern(cb->ctx, f->u.name.name) : -1;
        if (idx < 0) {
            c->name_map[f->u.name.name_id] = NAME_REFUSED;
            in->stats.names_refused++;
            if (cb->on_name_refused)
                cb->on_name_refused(cb->ctx, (uint32_t)c->rank,
                                    f->u.name.name);
            return 0;
        }
        c->name_map[f->u.name.name_id] = (int16_t)idx;
        return 0;
    }
    case WIRE_STEP: {
        uint32_t dropped = to_record(c, &f->u.step, &in->record) +
                           c->pend_refused;
        if (dropped) {
            in->stats.values_dropped += dropped;
            if (cb->on_values_dropped)
                cb->on_values_dropped(cb->ctx, (uint32_t)c->rank, dropped);
        }
        for (uint32_t i = 0; i < c->n_pend; i++)
            c->pend->item[i].v = c->pend_data + c->pend->at[i];
        in->stats.steps++;
        in->stats.vectors += c->n_pend;
        c->last_step = f->u.step.step > (uint64_t)INT64_MAX
                           ? INT64_MAX
                           : (int64_t)f->u.step.step;
        if (cb->on_step)
            cb->on_step(cb->ctx, (uint32_t)c->rank, &in->record,
                        c->n_pend ? c->pend->item : NULL, c->n_pend);
        c->n_pend = c->pend_used = c->pend_refused = 0;
        return 0;
    }
    case WIRE_VALUES:
        if (keep_values(c, &f->u.values) < 0) {
            conn_reject(c, 1, "out of memory for a step's vectors");
            return -1;
        }
        return 0;
    case WIRE_LABELS:
        if (keep_labels(c, &f->u.labels) < 0) {
            conn_reject(c, 1, "out of memory for a vector's labels");
            return -1;
        }
        return 0;
    case WIRE_COUNTERS:
        if (cb->on_counters)
            cb->on_counters(cb->ctx, (uint32_t)c->rank, &f->u.counters);
        return 0;
    case WIRE_CHECKPOINT:
        if (cb->on_checkpoint)
            cb->on_checkpoint(cb->ctx, (uint32_t)c->rank, &f->u.checkpoint);
        return 0;
    case WIRE_RESUMED:
        if (cb->on_resumed)
            cb->on_resumed(cb->ctx, (uint32_t)c->rank, &f->u.resumed);
        return 0;
    case WIRE_STATUS:
        /* NAME_REFUSED is -1 too: a phase without a name shows as none */
        if (cb->on_status)
            cb->on_status(cb->ctx, (uint32_t)c->rank, &f->u.status,
                          f->u.status.name_id
                              ? c->name_map[f->u.status.name_id]
                              : -1,
                          f->u.status.coll_name_id
                              ? c->name_map[f->u.status.coll_name_id]
                              : -1);
        return 0;
    case WIRE_FEATURES:
        c->features |= f->u.features.bits;
        return 0;
    case WIRE_PROFILE_DONE:
        if (cb->on_profile_done)
            cb->on_profile_done(cb->ctx, (uint32_t)c->rank,
                                &f->u.profile_done);
        return 0;
    case WIRE_BYE:
        c->said_bye = 1;
        if (cb->on_bye)
            cb->on_bye(cb->ctx, (uint32_t)c->rank, &f->u.bye);
        return 0;
    default: /* WELCOME / REJECT never pass a rank-side decoder */
        conn_reject(c, 1, "unexpected frame");
        return -1;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    conn *c = h->data;
    b->base = (char *)c->buf + c->len;
    b->len = CONN_BUF_SIZE - c->len;
}

/* ---- reading in step ---- */

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static void on_resume(uv_idle_t *h);

/* A rank's connection that a connection ahead may wait for. */
static int paces(const conn *o)
{
    return o->rank >= 0 && !o->closing && !o->said_bye && !o->transport &&
           !o->held;
}

/* Whether O has bytes it has not read yet: waiting itself, or bytes in
 * its socket (a partial frame already read is not: it may never end). */
static int has_unread(conn *o)
{
    if (o->waiting)
        return 1;
    uv_os_fd_t fd;
    int n = 0;
    return uv_fileno((uv_handle_t *)&o->pipe, &fd) == 0 &&
           ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* Whether C, which has just handed on a step (or waits after one),
 * should wait for a slower rank whose bytes are unread (the purpose
 * paragraph, "Reading in step"). */
static int should_wait(ss_ingest *in, conn *c)
{
    if (!in->max_lead || c->transport ||
        c->last_step - (int64_t)in->max_lead <= in->floor ||
        c->last_step < c->next_lead_check)
        return 0;
    int64_t floor = INT64_MAX;
    for (const conn *o = in->conns; o; o = o->next)
        if (paces(o) && o->last_step < floor)
            floor = o->last_step;
    in->floor = floor;
    int64_t behind = c->last_step - (int64_t)in->max_lead;
    if (floor >= behind)
        return 0;
    int waited_enough = c->waiting && ss_mono_now() - c->wait_since >=
                                          LEAD_WAIT_MAX_NS;
    for (conn *o = in->conns; !waited_enough && o; o = o->next)
        if (o != c && paces(o) && o->last_step < behind && has_unread(o))
            return 1;
    c->next_lead_check = c->last_step + (int64_t)in->max_lead / 2;
    return 0;
}

/* C stops reading until the slower ranks' bytes are read. */
static void start_waiting(ss_ingest *in, conn *c)
{
    if (!c->waiting) {
        c->waiting = 1;
        c->wait_since = ss_mono_now();
        in->stats.lead_waits++;
        uv_read_stop((uv_stream_t *)&c->pipe);
    }
    if (!uv_is_active((uv_handle_t *)&in->resume))
        uv_idle_start(&in->resume, on_resume);
}

static void decode_kept(conn *c);

/* Whether C's first STEP, just decoded into the frame, is held (on_first_
 * step): the decoder goes back to BEFORE it, its bytes stay kept and the
 * connection stops reading.  Else the connection's step offset is set. */
static int first_step_held(conn *c, const wire_decoder *before)
{
    ss_ingest *in = c->owner;
    int64_t offset = 0;
    int hold = in->cb.on_first_step &&
               in->cb.on_first_step(in->cb.ctx, (uint32_t)c->rank,
                                    in->frame.u.step.step, !c->transport,
                                    &offset) &&
               !c->transport;
    if (hold) {
        c->decoder = *before;
        if (!c->held) {
            c->held = 1;
            uv_read_stop((uv_stream_t *)&c->pipe);
        }
        return 1;
    }
    c->held = 0;
    c->first_step_passed = 1;
    c->step_offset = offset;
    return 0;
}

/* Adds C's step offset to the step numbers F carries. */
static void offset_steps(const conn *c, wire_frame *f)
{
    uint64_t d = (uint64_t)c->step_offset; /* two's complement: may lower */
    if (f->type == WIRE_STEP)
        f->u.step.step += d;
    else if (f->type == WIRE_STATUS && f->u.status.step != WIRE_NO_STEP)
        f->u.status.step += d;
    else if (f->type == WIRE_CHECKPOINT)
        f->u.checkpoint.step += d;
}

void ss_ingest_release_held(ss_ingest *in)
{
    /* On the next loop turn (on_resume): this may be called from inside a
     * callback while a frame is being handed on. */
    in->release_held = 1;
    if (!uv_is_active((uv_handle_t *)&in->resume))
        uv_idle_start(&in->resume, on_resume);
}

/* Decodes and dispatches the complete frames of P[0..LEN).  Returns the
 * bytes consumed, or -1 once C is closing. */
static ssize_t decode_frames(conn *c, const uint8_t *p, size_t len)
{
    ss_ingest *in = c->owner;
    size_t off = 0;
    while (!c->closing) {
        size_t used = 0;
        char err[256];
        /* to decode a held first STEP again; copied (~400 bytes) only
         * until the first STEP has passed, not for every frame */
        wire_decoder before;
        if (!c->first_step_passed)
            before = c->decoder;
        wire_result rc = wire_decoder_next(&c->decoder, p + off, len - off,
                                           &in->frame, &used, err, sizeof err);
        if (rc == WIRE_NEED_MORE)
            return (ssize_t)off;
        if (rc == WIRE_ERROR) {
            conn_reject(c, 1, err);
            return -1;
        }
        if (in->frame.type == WIRE_STEP && !c->first_step_passed &&
            first_step_held(c, &before))
            return (ssize_t)off;
        if (c->step_offset)
            offset_steps(c, &in->frame);
        in->stats.frames++;
        off += used;
        if (in->frame.type == WIRE_STATUS && in->frame.u.status.since_ns &&
                 c->transport && c->transport->clock_offset_ns)
            in->frame.u.status.since_ns = ss_clock_apply(
                in->frame.u.status.since_ns, *c->transport->clock_offset_ns);
        else if (in->frame.type == WIRE_PROFILE_DONE &&
                 in->frame.u.profile_done.marker_ns && c->transport &&
                 c->transport->clock_offset_ns)
            in->frame.u.profile_done.marker_ns = ss_clock_apply(
                in->frame.u.profile_done.marker_ns,
                *c->transport->clock_offset_ns);
        if (dispatch(c, &in->frame) < 0)
            return -1;
        if (in->frame.type == WIRE_STEP && should_wait(in, c)) {
            start_waiting(in, c);
            return (ssize_t)off;
        }
    }
    return -1;
}

/* Decodes what C has kept, moving the rest to the front of its buffer. */
static void decode_kept(conn *c)
{
    ssize_t off = decode_frames(c, c->buf, c->len);
    if (off > 0) {
        memmove(c->buf, c->buf + off, c->len - (size_t)off);
        c->len -= (size_t)off;
    }
}

/* Each loop turn while connections wait: the ones that need not any more
 * decode what they kept and read again. */
static void on_resume(uv_idle_t *h)
{
    ss_ingest *in = h->data;
    int still = 0;
    if (in->release_held) { /* ss_ingest_release_held */
        in->release_held = 0;
        for (conn *c = in->conns; c; c = c->next) {
            if (!c->held || c->closing)
                continue;
            c->held = 0;
            decode_kept(c);
            if (!c->closing && !c->held && !c->waiting)
                uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
        }
    }
    for (conn *c = in->conns; c; c = c->next) {
        if (!c->waiting || c->closing)
            continue;
        if (should_wait(in, c)) {
            still = 1;
            continue;
        }
        c->waiting = 0;
        decode_kept(c);
        if (c->closing)
            continue;
        if (c->waiting)
            still = 1;
        else if (!c->held)
            uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    }
    if (!still)
        uv_idle_stop(h);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    conn *c = s->data;
    ss_ingest *in = c->owner;
    if (nread < 0) {
        if (nread != UV_EOF && in->cb.on_rejected && c->rank < 0)
            in->cb.on_rejected(in->cb.ctx, c->rank, uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    in->stats.bytes += (uint64_t)nread;
    decode_kept(c);
}

/* Adds C to IN's list with its handshake timer running. */
static conn *conn_new(ss_ingest *in)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->owner = in;
    c->rank = -1;
    c->last_step = -1;
    wire_decoder_init(&c->decoder, WIRE_FROM_RANK, in->token, in->run_id);
    uv_timer_init(in->loop, &c->handshake_timer);
    c->handshake_timer.data = c;
    c->next = in->conns;
    if (in->conns)
        in->conns->prev = c;
    in->conns = c;
    in->n_conns++;
    return c;
}

/* Takes the accepted connection FD (closed on failure). */
static void accept_conn(ss_ingest *in, int fd)
{
    uint8_t *buf = malloc(CONN_BUF_SIZE);
    conn *c = buf ? conn_new(in) : NULL;
    if (!c) {
        free(buf);
        close(fd);
        return;
    }
    c->buf = buf;
    uv_pipe_init(in->loop, &c->pipe, 0);
    c->pipe.data = c;
    c->handles_open = 2;
    if (uv_pipe_open(&c->pipe, fd) < 0) {
        close(fd);
        conn_close(c);
        return;
    }
    uv_timer_start(&c->handshake_timer, on_handshake_timeout,
                   in->handshake_timeout_ms, 0);
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

static void on_listen_ready(uv_poll_t *p, int status, int events);

static void on_retry(uv_timer_t *t)
{
    ss_ingest *in = t->data;
    if (!in->closing)
        uv_poll_start(&in->server, UV_READABLE, on_listen_ready);
}

/*
 * Accepts every connection waiting.  When the process (EMFILE) or the
 * system (ENFILE) is out of descriptors, the connections stay in the
 * listen backlog, where each rank's connect() has succeeded and its HELLO
 * waits; listening pauses for ACCEPT_RETRY_MS and the failure is reported
 * (on_accept_failed).  libuv's own accept would close them instead, and
 * say nothing, so the socket is polled and accepted here.
 */
static void on_listen_ready(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    ss_ingest *in = p->data;
    while (!in->closing) {
        int fd = accept4(in->listen_fd, NULL, NULL,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            accept_conn(in, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        int err = -errno; /* libuv's error codes on Unix */
        uv_poll_stop(&in->server);
        uv_timer_start(&in->retry, on_retry, ACCEPT_RETRY_MS, 0);
        if (in->cb.on_accept_failed)
            in->cb.on_accept_failed(in->cb.ctx, err);
        return;
    }
}

ss_ingest_channel *ss_ingest_channel_open(ss_ingest *in,
                                          const ss_ingest_transport *t)
{
    if (in->closing)
        return NULL;
    conn *c = conn_new(in);
    if (!c)
        return NULL;
    c->transport = t;
    c->handles_open = 1;
    uv_timer_start(&c->handshake_timer, on_handshake_timeout,
                   in->handshake_timeout_ms, 0);
    return (ss_ingest_channel *)c;
}

void ss_ingest_channel_feed(ss_ingest_channel *ch, const uint8_t *bytes,
                            size_t len)
{
    conn *c = (conn *)ch;
    ss_ingest *in = c->owner;
    if (c->closing)
        return;
    in->stats.bytes += len;
    /* Whole frames are decoded where they lie; only a frame split across
     * feeds is copied, into a buffer that exists while it waits. */
    while (len > 0 && !c->closing) {
        if (c->len == 0) {
            ssize_t used = decode_frames(c, bytes, len);
            if (used < 0)
                return;
            bytes += used;
            len -= (size_t)used;
            if (len == 0)
                break;
        }
        if (!c->buf && !(c->buf = malloc(CONN_BUF_SIZE))) {
            conn_reject(c, 1, "out of memory");
            return;
        }
        size_t take = CONN_BUF_SIZE - c->len;
        if (take > len)
            take = len;
        memcpy(c->buf + c->len, bytes, take);
        c->len += take;
        bytes += take;
        len -= take;
        ssize_t used = decode_frames(c, c->buf, c->len);
        if (used < 0)
            return;
        memmove(c->buf, c->buf + used, c->len - (size_t)used);
        c->len -= (size_t)used;
        if (c->len == 0) {
            free(c->buf);
            c->buf = NULL;
        }
    }
}

void ss_ingest_channel_gone(ss_ingest_channel *ch)
{
    conn *c = (conn *)ch;
    c->far_end_gone = 1;
    conn_close(c);
}

ss_ingest *ss_ingest_start(uv_loop_t *loop, const ss_ingest_config *cfg,
                           const ss_ingest_callbacks *cb, char *err,
                           size_t errlen)
{
    ss_ingest *in = calloc(1, sizeof *in);
    if (!in) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    in->loop = loop;
    in->cb = *cb;
    memcpy(in->token, cfg->token, WIRE_TOKEN_SIZE);
    snprintf(in->run_id, sizeof in->run_id, "%s", cfg->run_id);
    in->handshake_timeout_ms =
        cfg->handshake_timeout_ms ? cfg->handshake_timeout_ms : 10000;
    if (strlen(cfg->unix_path) >= sizeof in->path) {
        snprintf(err, errlen, "socket path too long: %s", cfg->unix_path);
        free(in);
        return NULL;
    }
    snprintf(in->path, sizeof in->path, "%s", cfg->unix_path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy(addr.sun_path, in->path, strlen(in->path) + 1);
    in->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
                                        SOCK_NONBLOCK, 0);
    int rc = in->listen_fd < 0 ? -errno : 0, bound = 0;
    if (rc == 0 && bind(in->listen_fd, (struct sockaddr *)&addr,
                        sizeof addr) != 0)
        rc = -errno;
    bound = rc == 0;
    if (rc == 0 && listen(in->listen_fd, 1024) != 0)
        rc = -errno;
    if (rc == 0)
        rc = uv_poll_init(loop, &in->server, in->listen_fd);
    if (rc < 0) {
        snprintf(err, errlen, "listen(%s): %s", in->path, uv_strerror(rc));
        if (bound)
            unlink(in->path);
        if (in->listen_fd >= 0)
            close(in->listen_fd);
        free(in);
        return NULL;
    }
    in->server.data = in;
    uv_timer_init(loop, &in->retry);
    in->retry.data = in;
    uv_idle_init(loop, &in->resume);
    in->resume.data = in;
    in->max_lead = cfg->max_lead_steps;
    in->floor = -1;
    in->server_open = 3;
    uv_poll_start(&in->server, UV_READABLE, on_listen_ready);
    return in;
}

static void on_server_closed(uv_handle_t *h)
{
    ss_ingest *in = h->data;
    if (h == (uv_handle_t *)&in->server)
        close(in->listen_fd);
    in->server_open--;
    maybe_free_ingest(in);
}

void ss_ingest_close(ss_ingest *in)
{
    if (!in)
        return;
    in->closing = 1;
    for (conn *c = in->conns; c; c = c->next)
        conn_close(c);
    if (in->server_open && !uv_is_closing((uv_handle_t *)&in->server)) {
        unlink(in->path);
        uv_close((uv_handle_t *)&in->server, on_server_closed);
        uv_close((uv_handle_t *)&in->retry, on_server_closed);
        uv_close((uv_handle_t *)&in->resume, on_server_closed);
    }
}

void ss_ingest_drop_rank(ss_ingest *in, uint32_t rank)
{
    for (conn *c = in->conns; c; c = c->next)
        if (c->rank == (int32_t)rank)
            conn_close(c);
}

int ss_ingest_send_command(ss_ingest *in, uint32_t rank,
                           const wire_command *cmd)
{
    uint32_t need = cmd->kind == WIRE_COMMAND_PROFILE ? WIRE_FEATURE_PROFILE
                                                      : 0;
    for (conn *c = in->conns; c; c = c->next) {
        if (c->rank != (int32_t)rank || c->closing)
            continue;
        if (!need || !(c->features & need))
            return SS_INGEST_UNSUPPORTED;
        uint8_t out[WIRE_HEADER_SIZE + 12 + 1 + WIRE_MAX_STR];
        size_t n = wire_encode_command(out, sizeof out, cmd);
        if (n == 0)
            return SS_INGEST_UNSUPPORTED;
        conn_send(c, out, n, 0);
        return 0;
    }
    return SS_INGEST_NOT_CONNECTED;
}

uint32_t ss_ingest_connections(const ss_ingest *in)
{
    return in->n_conns;
}

void ss_ingest_get_stats(const ss_ingest *in, ss_ingest_stats *out)
{
    *out = in->stats;
}
