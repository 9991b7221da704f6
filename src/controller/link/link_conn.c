/*
 * link_conn.c - one agent link connection (link_conn.h): reads and
 * reassembles frames, decodes them with link_wire.c, queues what is sent
 * under a cap and checks every write.
 *
 * The read buffer starts inside the connection, sized for one handshake
 * frame; once the link is keyed it is replaced, at the next read, by one
 * of two maximal frames.  Each queued frame is one heap block (the write
 * request and the bytes), freed in its write callback; `queued` is the
 * sum of their sizes, so it is exactly the memory the send queue holds.
 * An end of the connection's own (the peer, the protocol, a write) is
 * recorded, the handle closed at once, and told from the close callback,
 * so that an owner never sees its connection end inside its own call to
 * send.  The decoded frame and the encoder's output are per-thread
 * scratch: a loop's callbacks never nest.
 */
#include "link_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREAUTH_BUF_SIZE (LINK_HEADER_SIZE + LINK_MAX_HANDSHAKE_PAYLOAD)
#define KEYED_BUF_SIZE (2 * LINK_FRAME_MAX)

struct ss_link_conn {
    uv_tcp_t tcp;
    ss_link_conn_config cfg;
    ss_link_conn_callbacks cb;
    link_decoder dec;
    link_encoder enc;
    int started;
    int closing;      /* no more reads or sends */
    int owner_closed; /* the owner closed it: on_end is not told */
    int flushing;     /* close once the queue is empty */
    int handle_closing;
    int ended;        /* it ended on its own: END and WHY are told */
    ss_link_end end;
    char why[256];
    size_t queued;
    uint8_t *buf; /* small, or KEYED_BUF_SIZE once keyed */
    size_t cap, len;
    uint8_t small[PREAUTH_BUF_SIZE];
};

typedef struct {
    uv_write_t req;
    ss_link_conn *c;
    size_t len;
    uint8_t bytes[];
} conn_write;

static _Thread_local link_frame t_frame;
static _Thread_local uint8_t t_out[LINK_FRAME_MAX];

static void on_handle_closed(uv_handle_t *h)
{
    ss_link_conn *c = h->data;
    if (c->ended && !c->owner_closed && c->cb.on_end)
        c->cb.on_end(c->cb.ctx, c->end, c->why);
    if (c->buf != c->small)
        free(c->buf);
    ss_link_conn_callbacks cb = c->cb;
    free(c);
    cb.on_closed(cb.ctx);
}

static void close_handle(ss_link_conn *c)
{
    if (c->handle_closing)
        return;
    c->handle_closing = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

/* The connection ends on its own for WHY (told from the close callback). */
static void end_self(ss_link_conn *c, ss_link_end end, const char *why)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->ended = 1;
    c->end = end;
    snprintf(c->why, sizeof c->why, "%s", why);
    close_handle(c);
}

ss_link_conn *ss_link_conn_new(uv_loop_t *loop, const ss_link_conn_config *cfg,
                               const ss_link_conn_callbacks *cb)
{
    ss_link_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    if (!c->cfg.max_queued)
        c->cfg.max_queued = SS_LINK_CONN_MAX_QUEUED;
    c->cb = *cb;
    link_encoder_init(&c->enc, cfg->sends);
    link_decoder_init(&c->dec, cfg->sends == LINK_FROM_AGENT
                                   ? LINK_FROM_CONTROLLER
                                   : LINK_FROM_AGENT);
    c->buf = c->small;
    c->cap = sizeof c->small;
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    return c;
}

uv_tcp_t *ss_link_conn_tcp(ss_link_conn *c)
{
    return &c->tcp;
}

void ss_link_conn_keyed(ss_link_conn *c, const uint8_t key[LINK_KEY_SIZE])
{
    link_encoder_keyed(&c->enc, key);
    link_decoder_keyed(&c->dec, key);
}

size_t ss_link_conn_queued(const ss_link_conn *c)
{
    return c->queued;
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    ss_link_conn *c = h->data;
    (void)suggested;
    if (c->dec.keyed && c->buf == c->small) {
        uint8_t *big = malloc(KEYED_BUF_SIZE);
        if (big) {
            memcpy(big, c->small, c->len);
            c->buf = big;
            c->cap = KEYED_BUF_SIZE;
        }
    }
    /* Out of memory for the larger buffer: a zero-sized one, which the
     * read callback is told of as UV_ENOBUFS. */
    b->base = (char *)c->buf + c->len;
    b->len = c->dec.keyed && c->buf == c->small ? 0 : c->cap - c->len;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    ss_link_conn *c = s->data;
    (void)b;
    if (c->closing)
        return;
    if (nread < 0) {
        char why[128];
        if (nread == UV_EOF)
            snprintf(why, sizeof why, "its connection closed");
        else
            snprintf(why, sizeof why, "its connection failed: %s",
                     uv_strerror((int)nread));
        end_self(c, SS_LINK_END_PEER, why);
        return;
    }
    c->len += (size_t)nread;
    size_t off = 0;
    while (!c->closing) {
        size_t used = 0;
        char err[200];
        link_result rc = link_decoder_next(&c->dec, c->buf + off, c->len - off,
                                           &t_frame, &used, err, sizeof err);
        if (rc == LINK_NEED_MORE)
            break;
        if (rc == LINK_ERROR) {
            char why[260];
            snprintf(why, sizeof why, "protocol error: %s", err);
            end_self(c, SS_LINK_END_PROTOCOL, why);
            return;
        }
        off += used;
        c->cb.on_frame(c->cb.ctx, &t_frame);
    }
    if (c->closing)
        return;
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

int ss_link_conn_start(ss_link_conn *c)
{
    if (c->closing || c->started)
        return -1;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        char why[128];
        snprintf(why, sizeof why, "its connection failed: %s",
                 uv_strerror(rc));
        end_self(c, SS_LINK_END_PEER, why);
        return -1;
    }
    c->started = 1;
    return 0;
}

/* ---- sending ---- */

static void on_written(uv_write_t *req, int status)
{
    conn_write *w = (conn_write *)req;
    ss_link_conn *c = w->c;
    c->queued -= w->len;
    free(w);
    if (status == UV_ECANCELED || c->handle_closing)
        return;
    if (status < 0) {
        if (c->flushing) {
            close_handle(c);
            return;
        }
        char why[160];
        snprintf(why, sizeof why, "its connection failed while sending: %s",
                 uv_strerror(status));
        end_self(c, SS_LINK_END_SEND, why);
        return;
    }
    if (c->flushing && c->queued == 0)
        close_handle(c);
}

int ss_link_conn_send(ss_link_conn *c, const link_frame *f)
{
    if (!c->started || c->closing)
        return -1;
    size_t n = link_encode(&c->enc, t_out, sizeof t_out, f);
    if (n == 0) {
        char why[96];
        snprintf(why, sizeof why, "a frame could not be encoded (%s)",
                 link_type_name(f->type));
        end_self(c, SS_LINK_END_SEND, why);
        return -1;
    }
    if (c->queued + n > c->cfg.max_queued) {
        char why[160];
        snprintf(why, sizeof why, "it stopped reading: %.1f MiB waiting to "
                 "be sent to it (at most %.1f MiB)",
                 c->queued / 1048576.0, c->cfg.max_queued / 1048576.0);
        end_self(c, SS_LINK_END_SEND, why);
        return -1;
    }
    conn_write *w = malloc(sizeof *w + n);
    if (!w) {
        end_self(c, SS_LINK_END_SEND, "out of memory for a frame to send");
        return -1;
    }
    memcpy(w->bytes, t_out, n);
    w->c = c;
    w->len = n;
    uv_buf_t b = uv_buf_init((char *)w->bytes, (unsigned)n);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc < 0) {
        free(w);
        char why[160];
        snprintf(why, sizeof why, "its connection failed while sending: %s",
                 uv_strerror(rc));
        end_self(c, SS_LINK_END_SEND, why);
        return -1;
    }
    c->queued += n;
    return 0;
}

void ss_link_conn_close(ss_link_conn *c, int flush)
{
    if (!c)
        return;
    c->owner_closed = 1;
    if (c->closing && !c->flushing) {
        close_handle(c); /* ended on its own: the handle is closing */
        return;
    }
    c->closing = 1;
    if (flush && c->queued > 0 && !c->flushing) {
        c->flushing = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
        return;
    }
    close_handle(c);
}
