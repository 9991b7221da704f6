/*
 * agent_channels.c - a node agent's ranks' connections as channels of
 * the link (agent_channels.h).
 */
#include "agent_channels.h"

#include <stdlib.h>
#include <string.h>

#define DECODE_BUF (2 * (WIRE_HEADER_SIZE + WIRE_MAX_PAYLOAD))

typedef struct rank_conn {
    uv_pipe_t pipe; /* first */
    struct ss_agent_channels *ch;
    struct rank_conn *next;
    uint32_t id;
    int closing;
    int controller_closed; /* the controller closed it: no CLOSE back */
    int64_t rank;          /* global rank once its HELLO was seen, else -1 */
    int decoding;          /* 0 once the passive decoder failed */
    wire_decoder dec;
    char *names[WIRE_MAX_NAME_ID + 1]; /* declared names, by id */
    /* node mode: the latest STATUS frame, held for the next batch */
    uint8_t status_len;
    uint8_t status[LINK_MAX_STATUS_ENTRY];
    size_t len;
    uint8_t buf[DECODE_BUF];
    uint8_t readbuf[16384];
} rank_conn;

struct ss_agent_channels {
    ss_agent_channels_config cfg;
    rank_conn *conns;
    uint32_t next_channel;
    int node_mode;
    wire_frame wframe;
};

ss_agent_channels *ss_agent_channels_new(const ss_agent_channels_config *cfg)
{
    ss_agent_channels *ch = calloc(1, sizeof *ch);
    if (ch)
        ch->cfg = *cfg;
    return ch;
}

static int send_frame(ss_agent_channels *ch, const link_frame *f)
{
    return ch->cfg.send(ch->cfg.ctx, f);
}

static void on_conn_closed(uv_handle_t *h)
{
    rank_conn *c = h->data;
    for (size_t i = 0; i < WIRE_MAX_NAME_ID + 1; i++)
        free(c->names[i]);
    free(c);
}

static void conn_close(rank_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    ss_agent_channels *ch = c->ch;
    if (c->rank >= 0 && ch->cfg.on_gone)
        ch->cfg.on_gone(ch->cfg.ctx, c->rank);
    for (rank_conn **p = &ch->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (!c->controller_closed) {
        link_frame f = {.type = LINK_CLOSE};
        f.u.channel.channel = c->id;
        send_frame(ch, &f);
    }
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static rank_conn *conn_find(ss_agent_channels *ch, uint32_t id)
{
    for (rank_conn *c = ch->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* Sends N bytes of C's stream up as DATA frames.  Returns 0, or -1 when
 * the link refused them (the connection is then closed). */
static int forward(ss_agent_channels *ch, rank_conn *c, const uint8_t *p,
                   size_t n)
{
    while (n > 0) {
        size_t k = n > LINK_MAX_DATA ? LINK_MAX_DATA : n;
        link_frame f = {.type = LINK_DATA};
        f.u.data = (link_data){c->id, (uint32_t)k, p};
        if (send_frame(ch, &f) != 0) {
            conn_close(c);
            return -1;
        }
        p += k;
        n -= k;
    }
    return 0;
}

/* Reads C's frames as the controller will, to learn its rank, names and
 * steps.  In node mode the bytes of whole frames go up as they are read,
 * STATUS frames held back; otherwise the caller forwards the bytes as
 * they came.  Returns -1 when C was closed. */
static int observe(ss_agent_channels *ch, rank_conn *c, const uint8_t *p,
                   size_t n)
{
    if (!c->decoding)
        return ch->node_mode ? forward(ch, c, p, n) : 0;
    if (n > sizeof c->buf - c->len) {
        /* the decoder cannot keep up: raw from now on */
        c->decoding = 0;
        c->status_len = 0;
        if (ch->node_mode && (forward(ch, c, c->buf, c->len) != 0 ||
                              forward(ch, c, p, n) != 0))
            return -1;
        c->len = 0;
        return 0;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    size_t off = 0, sent = 0; /* node mode: bytes of c->buf gone up */
    for (;;) {
        size_t used = 0;
        char err[128];
        wire_result rc = wire_decoder_next(&c->dec, c->buf + off,
                                           c->len - off, &ch->wframe, &used,
                                           err, sizeof err);
        if (rc == WIRE_NEED_MORE)
            break;
        if (rc == WIRE_ERROR) {
            c->decoding = 0;
            c->status_len = 0;
            off = c->len; /* the rest goes up raw */
            break;
        }
        wire_frame *wf = &ch->wframe;
        if (wf->type == WIRE_HELLO) {
            c->rank = wf->u.hello.rank;
            ch->cfg.on_hello(ch->cfg.ctx, c->rank, wf->u.hello.pid);
        } else if (wf->type == WIRE_NAME) {
            uint32_t id = wf->u.name.name_id;
            if (id <= WIRE_MAX_NAME_ID && !c->names[id])
                c->names[id] = strdup(wf->u.name.name);
        } else if (wf->type == WIRE_STEP && c->rank >= 0) {
            ch->cfg.on_step(ch->cfg.ctx, c->rank, &wf->u.step,
                            (const char *const *)c->names);
        } else if (wf->type == WIRE_STATUS && ch->node_mode &&
                   used <= LINK_MAX_STATUS_ENTRY) {
            /* held: the frames before it go up now, it goes later */
            if (off > sent && forward(ch, c, c->buf + sent, off - sent) != 0)
                return -1;
            memcpy(c->status, c->buf + off, used);
            c->status_len = (uint8_t)used;
            sent = off + used;
        }
        off += used;
    }
    if (ch->node_mode) {
        if (off > sent && forward(ch, c, c->buf + sent, off - sent) != 0)
            return -1;
        if (!c->decoding) { /* what the decoder refused goes up raw */
            c->len = 0;
            return 0;
        }
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return 0;
}

static void on_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    rank_conn *c = h->data;
    b->base = (char *)c->readbuf;
    b->len = sizeof c->readbuf;
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    rank_conn *c = s->data;
    ss_agent_channels *ch = c->ch;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    /* Evidence first: the controller may finalize a step the moment its
     * record arrives, and must have the host's view of it by then. */
    if (observe(ch, c, c->readbuf, (size_t)nread) != 0 || ch->node_mode)
        return; /* closed, or sent frame by frame */
    link_frame f = {.type = LINK_DATA};
    f.u.data = (link_data){c->id, (uint32_t)nread, c->readbuf};
    if (send_frame(ch, &f) != 0)
        conn_close(c);
}

void ss_agent_channels_accept(ss_agent_channels *ch, uv_stream_t *server)
{
    rank_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->ch = ch;
    c->rank = -1;
    c->decoding = 1;
    c->id = ++ch->next_channel;
    wire_decoder_init(&c->dec, WIRE_FROM_RANK, ch->cfg.token, ch->cfg.uuid);
    uv_pipe_init(ch->cfg.loop, &c->pipe, 0);
    c->pipe.data = c;
    c->next = ch->conns;
    ch->conns = c;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        c->controller_closed = 1; /* never opened there */
        conn_close(c);
        return;
    }
    link_frame f = {.type = LINK_OPEN};
    f.u.channel.channel = c->id;
    send_frame(ch, &f);
    uv_read_start((uv_stream_t *)&c->pipe, on_conn_alloc, on_conn_read);
}

typedef struct {
    uv_write_t req;
    uint8_t bytes[];
} conn_write;

static void on_conn_written(uv_write_t *req, int status)
{
    free(req);
}

void ss_agent_channels_to_rank(ss_agent_channels *ch, const link_data *d)
{
    rank_conn *c = conn_find(ch, d->channel);
    if (!c)
        return;
    conn_write *w = malloc(sizeof *w + d->len);
    if (!w)
        return;
    memcpy(w->bytes, d->bytes, d->len);
    uv_buf_t b = uv_buf_init((char *)w->bytes, d->len);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_conn_written) < 0)
        free(w);
}

void ss_agent_channels_closed(ss_agent_channels *ch, uint32_t channel)
{
    rank_conn *c = conn_find(ch, channel);
    if (c) {
        c->controller_closed = 1;
        conn_close(c);
    }
}

void ss_agent_channels_node_mode(ss_agent_channels *ch)
{
    ch->node_mode = 1;
}

uint32_t ss_agent_channels_status_batch(ss_agent_channels *ch, uint8_t *buf,
                                        size_t cap, size_t *len)
{
    uint32_t n = 0;
    for (rank_conn *c = ch->conns; c; c = c->next) {
        if (c->status_len == 0 || c->closing)
            continue;
        if (link_node_status_put(buf, cap, len, c->id, c->status,
                                 c->status_len) != 0)
            break;
        c->status_len = 0;
        n++;
    }
    return n;
}

void ss_agent_channels_free(ss_agent_channels *ch)
{
    free(ch);
}
