/*
 * http_stream.c - a live run's event stream (/api/runs/{id}/stream,
 * text/event-stream; http_state.h).
 *
 * Each stream follows the live state's notification feed with a cursor of
 * its own (live.h).  A worker thread serves many connections, so a stream
 * with nothing to send never waits: it suspends its connection, and the
 * gate's tick (every SS_HTTP_GATE_TICK_MS) resumes every parked stream to
 * look again.  A quiet stream gets a comment line every KEEPALIVE_MS; the
 * run's end is an "end" event.  Open streams are listed in the server
 * handle, under its mutex, so that stopping can wake and end them.
 */
#include "http_state.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define KEEPALIVE_MS 15000 /* a comment line on a quiet stream */

struct stream {
    stream *prev, *next;      /* in h->streams */
    ss_http *h;
    struct MHD_Connection *conn;
    int suspended;            /* under h->mu */
    ss_live_cursor cursor;
    ss_buf pending;
    size_t sent;
    int ended;   /* the end event is queued */
    ss_mono_ns last_write;
};

/* Parks S's connection until the gate thread's next tick (nothing to send
 * now).  Returns 0, or -1 when the server is stopping (end the stream). */
static int stream_suspend(stream *s)
{
    ss_http *h = s->h;
    pthread_mutex_lock(&h->mu);
    int stopping = __atomic_load_n(&h->stopping, __ATOMIC_ACQUIRE);
    if (!stopping) {
        MHD_suspend_connection(s->conn);
        s->suspended = 1;
    }
    pthread_mutex_unlock(&h->mu);
    return stopping ? -1 : 0;
}

/* Resumes every parked stream; they look for notifications again.  Called
 * with h->mu held (http_state.h). */
void ss__http_streams_wake_locked(ss_http *h)
{
    for (stream *s = h->streams; s; s = s->next)
        if (s->suspended) {
            s->suspended = 0;
            MHD_resume_connection(s->conn);
        }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *s = cls;
    while (s->sent == s->pending.len) {
        if (s->ended ||
            __atomic_load_n(&s->h->stopping, __ATOMIC_ACQUIRE))
            return MHD_CONTENT_READER_END_OF_STREAM;
        ss_buf_reset(&s->pending);
        s->sent = 0;
        int n = ss_live_feed_wait(s->h->live, &s->cursor, 0, &s->pending);
        if (n == -2)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == -1) {
            ss_buf_puts(&s->pending, "event: end\ndata: {}\n\n");
            s->ended = 1;
        } else if (n == 0) {
            if (ss_mono_now() - s->last_write <= KEEPALIVE_MS * 1000000LL)
                return stream_suspend(s) == 0
                           ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
            ss_buf_puts(&s->pending, ": keepalive\n\n");
        }
        if (s->pending.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->pending.len - s->sent;
    if (n > max)
        n = max;
    memcpy(buf, s->pending.data + s->sent, n);
    s->sent += n;
    s->last_write = ss_mono_now();
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream *s = cls;
    ss_http *h = s->h;
    pthread_mutex_lock(&h->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&h->mu);
    ss_live_feed_leave(h->live);
    ss_buf_free(&s->pending);
    free(s);
}

enum MHD_Result ss__http_serve_stream(ss_http *h, struct MHD_Connection *c)
{
    stream *s = calloc(1, sizeof *s);
    if (!s)
        return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "out of memory");
    s->h = h;
    s->conn = c;
    s->last_write = ss_mono_now();
    ss_live_feed_join(h->live, &s->cursor);
    pthread_mutex_lock(&h->mu);
    s->next = h->streams;
    if (s->next)
        s->next->prev = s;
    h->streams = s;
    pthread_mutex_unlock(&h->mu);
    /* A first comment so clients see the stream open at once. */
    ss_buf_puts(&s->pending, ": stepscope event stream\nretry: 2000\n\n");
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (!r) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return ss__http_queue(c, MHD_HTTP_OK, r);
}
