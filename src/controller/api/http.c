/*
 * http.c - the controller's HTTP server (http.h, docs/api.md).
 *
 * Connections.  We bind the listening socket ourselves (SOCK_CLOEXEC, so
 * ranks launched later do not inherit it, and so a busy port gets a clear
 * message or the fallback) and give it to the gate (http_gate.c), whose
 * thread admits each new connection or answers it 503, and closes those
 * whose request does not arrive in full in time.  An admitted connection
 * is handed to one of SS_HTTP_WORKERS libmicrohttpd daemons in turn, each
 * one epoll thread without a listening socket of its own; libmicrohttpd's
 * notifications (connection started, request read, response done,
 * connection closed) keep the gate's record of it current.
 *
 * Requests.  A worker thread serves all its connections, so nothing may
 * block it for long: documents are built from the store in one go (each
 * costs milliseconds), the /steps document is streamed in pages of
 * PAGE_STEPS steps (its memory does not grow with the window), and an
 * event stream with nothing to send suspends its connection, which the
 * gate's tick resumes every SS_HTTP_GATE_TICK_MS to look for new
 * notifications.
 *
 * Store connections: a request (or a page) takes a read-only ss_query from
 * a small pool (opening one when the pool is empty) and returns it
 * afterwards, so a connection is used by one thread at a time and opening
 * costs are paid once per connection, not per request.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"
#include "http_gate.h"
#include "numparse.h"
#include "private_fs.h"
#include "query.h"
#include "store_files.h"

#define POOL_MAX 8          /* idle store connections kept */
#define KEEPALIVE_MS 15000  /* a comment line on a quiet stream */
#define PAGE_STEPS 256      /* steps per page of a streamed /steps */
#define LARGE_DOC_BYTES (1u << 20) /* a built document this big ... */
#define MAX_LARGE_DOCS 8           /* ... is sent at most this many at once */
#define JSON_TYPE "application/json; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct stream stream;

struct ss_http {
    struct MHD_Daemon *mhd[SS_HTTP_WORKERS];
    ss_live *live;
    char *db_path;
    char *token; /* NULL: none required */
    int loopback; /* listens on a loopback address: Host is checked */
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
    int fell_back;
    char url[INET6_ADDRSTRLEN + 300];
    ss_http_gate *gate;
    ss_http_stacks_fn stacks;
    void *stacks_ctx;
    ss_http_profile_fn profile;
    void *profile_ctx;
    unsigned max_conns;
    unsigned next_worker;     /* gate thread only */
    int stopping;             /* atomic */
    pthread_mutex_t mu;       /* guards everything below */
    ss_query *pool[POOL_MAX];
    int n_pool;
    stream *streams;          /* open event streams */
    unsigned large_docs;      /* large documents being sent */
    const ss_static_file *files;
    size_t n_files;
    ss_buf goodput_metrics;   /* the live run's, from the store */
    ss_mono_ns goodput_at;    /* when computed; 0: never */
};

/* The live run's goodput lines in /metrics are recomputed from the store
 * at most this often (it reads every step of the run). */
#define GOODPUT_METRICS_EVERY_NS ((ss_mono_ns)15 * 1000000000)

static const ss_static_file *static_files;
static size_t n_static_files;

void ss_http_set_static(const ss_static_file *files, size_t n)
{
    static_files = n ? files : NULL;
    n_static_files = n;
}

/* ---- addresses and authorization ---- */

int ss_http_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return 1;
        if (IN6_IS_ADDR_V4MAPPED(&a6))
            return a6.s6_addr[12] == 127;
    }
    return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
    int64_t v;
    if (ss_parse_i64(s, 0, 65535, &v) != 0)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int ss_http_parse_addr(const char *spec, char *host, size_t hostlen,
                       uint16_t *port, char *err, size_t errlen)
{
    char h[INET6_ADDRSTRLEN + 2] = "127.0.0.1";
    *port = SS_HTTP_DEFAULT_PORT;
    const char *p = NULL;
    size_t n = strlen(spec);
    if (n == 0) {
        snprintf(err, errlen, "empty address");
        return -1;
    }
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || (size_t)(close - spec - 1) >= sizeof h ||
            (close[1] && close[1] != ':')) {
            snprintf(err, errlen, "bad address '%s' (want [V6ADDR]:PORT)",
                     spec);
            return -1;
        }
        memcpy(h, spec + 1, (size_t)(close - spec - 1));
        h[close - spec - 1] = '\0';
        p = close[1] ? close + 2 : NULL;
    } else if (strspn(spec, "0123456789") == n) {
        p = spec; /* just a port */
    } else {
        const char *colon = strrchr(spec, ':');
        if (colon && strchr(spec, ':') == colon) { /* ADDR:PORT or :PORT */
            if ((size_t)(colon - spec) >= sizeof h) {
                snprintf(err, errlen, "bad address '%s'", spec);
                return -1;
            }
            if (colon > spec) {
                memcpy(h, spec, (size_t)(colon - spec));
                h[colon - spec] = '\0';
            }
            p = colon + 1;
        } else { /* an address alone (IPv6 has several colons) */
            snprintf(h, sizeof h, "%s", spec);
        }
    }
    if (strcmp(h, "localhost") == 0)
        snprintf(h, sizeof h, "127.0.0.1");
    struct in6_addr a;
    if (inet_pton(AF_INET, h, &a) != 1 && inet_pton(AF_INET6, h, &a) != 1) {
        snprintf(err, errlen, "'%s' is not a numeric IPv4 or IPv6 address",
                 h);
        return -1;
    }
    if (p && parse_port(p, port) != 0) {
        snprintf(err, errlen, "bad port '%s' (0 to 65535)", p);
        return -1;
    }
    if (strlen(h) >= hostlen) {
        snprintf(err, errlen, "address too long");
        return -1;
    }
    snprintf(host, hostlen, "%s", h);
    return 0;
}

/* Constant-time comparison of A with B (lengths may differ). */
static int same_secret(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = (unsigned char)(na != nb);
    for (size_t i = 0; i < nb; i++)
        diff |= (unsigned char)(b[i] ^ (i < na ? a[i] : 0));
    return diff == 0;
}

int ss_http_authorized(const char *required, const char *auth_header,
                       const char *query_token)
{
    if (!required)
        return 1;
    if (query_token && same_secret(query_token, required))
        return 1;
    if (auth_header && strncasecmp(auth_header, "Bearer ", 7) == 0) {
        const char *t = auth_header + 7;
        while (*t == ' ')
            t++;
        return same_secret(t, required);
    }
    return 0;
}

int ss_http_host_allowed(const char *listen_host, const char *host_header)
{
    if (!host_header)
        return 1; /* HTTP/1.0 without Host: not a browser */
    const char *h = host_header, *port;
    size_t n;
    if (*h == '[') {
        const char *close = strchr(h, ']');
        if (!close)
            return 0;
        n = (size_t)(close + 1 - h);
        port = close + 1;
    } else {
        n = strcspn(h, ":");
        port = h + n;
        if (strchr(port + (*port == ':'), ':'))
            return 0; /* an unbracketed IPv6 address, or junk */
    }
    if (*port == ':') {
        uint16_t p;
        if (!port[1] || parse_port(port + 1, &p) != 0)
            return 0;
    } else if (*port) {
        return 0;
    }
    char own[INET6_ADDRSTRLEN + 2];
    snprintf(own, sizeof own, strchr(listen_host, ':') ? "[%s]" : "%s",
             listen_host);
    const char *names[] = {"localhost", "127.0.0.1", "[::1]", own};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(h, names[i], n) == 0)
            return 1;
    return 0;
}

int ss_http_origin_allowed(const char *origin, const char *host_header)
{
    if (!origin || !host_header)
        return !origin;
    /* https: the same server behind a TLS proxy (docs/api.md) */
    size_t skip = strncasecmp(origin, "http://", 7) == 0    ? 7
                  : strncasecmp(origin, "https://", 8) == 0 ? 8
                                                            : 0;
    return skip && strcasecmp(origin + skip, host_header) == 0;
}

/* ---- the pool of store connections ---- */

static ss_query *pool_get(ss_http *h, char *err, size_t errlen)
{
    pthread_mutex_lock(&h->mu);
    ss_query *q = h->n_pool ? h->pool[--h->n_pool] : NULL;
    pthread_mutex_unlock(&h->mu);
    return q ? q : ss_query_open(h->db_path, err, errlen);
}

static void pool_put(ss_http *h, ss_query *q)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_pool < POOL_MAX) {
        h->pool[h->n_pool++] = q;
        q = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    ss_query_close(q);
}

/* ---- answering ---- */

/* Queues BODY (taken over, freed by libmicrohttpd) with STATUS. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *type, ss_buf *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        body->len, body->data ? body->data : (void *)"",
        body->data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        ss_buf_free(body);
        return MHD_NO;
    }
    memset(body, 0, sizeof *body); /* owned by the response now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                "GET, HEAD, POST");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"stepscope\"");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status,
                                   const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status,
                                   const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ss_buf b = {0};
    ss_buf_puts(&b, "{\"error\":");
    ss_buf_json_str(&b, msg);
    ss_buf_puts(&b, "}\n");
    if (b.oom) {
        ss_buf_free(&b);
        return MHD_NO;
    }
    return reply(c, status, JSON_TYPE, &b);
}

typedef struct {
    ss_http *h;
    char *data;
} large_doc;

static void large_doc_free(void *cls)
{
    large_doc *d = cls;
    pthread_mutex_lock(&d->h->mu);
    d->h->large_docs--;
    pthread_mutex_unlock(&d->h->mu);
    free(d->data);
    free(d);
}

/* Answers 200 with the JSON document BODY (taken over).  Built documents
 * of LARGE_DOC_BYTES or more are sent at most MAX_LARGE_DOCS at a time, so
 * slow or many clients cannot make the server hold an unbounded number of
 * them; over that, 503 (retry). */
static enum MHD_Result reply_document(ss_http *h, struct MHD_Connection *c,
                                      ss_buf *body)
{
    if (body->len < LARGE_DOC_BYTES)
        return reply(c, MHD_HTTP_OK, JSON_TYPE, body);
    pthread_mutex_lock(&h->mu);
    int admitted = h->large_docs < MAX_LARGE_DOCS;
    h->large_docs += (unsigned)admitted;
    pthread_mutex_unlock(&h->mu);
    if (!admitted) {
        ss_buf_free(body);
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy: %d large "
                           "documents are being sent; retry, or ask for a "
                           "smaller window (limit=)", MAX_LARGE_DOCS);
    }
    large_doc *d = malloc(sizeof *d);
    struct MHD_Response *r = NULL;
    if (d) {
        *d = (large_doc){h, body->data};
        r = MHD_create_response_from_buffer_with_free_callback_cls(
            body->len, body->data, large_doc_free, d);
    }
    if (!r) {
        free(d);
        ss_buf_free(body);
        pthread_mutex_lock(&h->mu);
        h->large_docs--;
        pthread_mutex_unlock(&h->mu);
        return MHD_NO;
    }
    memset(body, 0, sizeof *body); /* owned by the response now */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *c,
                                    const ss_static_file *f)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, f->content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static const char default_page[] =
    "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
    "<title>stepscope</title></head>\n<body><h1>stepscope</h1>\n"
    "<p>The dashboard is not built into this stepscope; the API is:</p>\n"
    "<ul><li><a href=\"api/runs\">api/runs</a> - the stored runs</li>\n"
    "<li><a href=\"api/live\">api/live</a> - the run this controller "
    "drives</li>\n<li><a href=\"metrics\">metrics</a> - Prometheus</li>"
    "</ul>\n<p>docs/api.md describes every endpoint.</p>\n"
    "</body></html>\n";

/* ---- query arguments ---- */

static int hex_digit(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Percent-decodes S in place, as libmicrohttpd does for the path and the
 * query arguments, except that "%00" stays as it is: a NUL would cut the
 * text short, so that "limit=10%00" read as 10 and "/api/runs/1%00" as
 * run 1.  Returns the new length. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *c,
                                   char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_digit(r[1])) >= 0 &&
            (lo = hex_digit(r[2])) >= 0 && (hi | lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Reads argument NAME as an integer in [MIN, MAX] into *OUT (left as is
 * when absent).  Returns 0, or -1 after answering 400. */
static int arg_i64(struct MHD_Connection *c, const char *name, int64_t min,
                   int64_t max, int64_t *out, enum MHD_Result *ret)
{
    const char *s = NULL;
    if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &s, NULL) != MHD_YES)
        return 0; /* absent */
    if (!s)
        s = ""; /* "?limit" without a value */
    if (ss_parse_i64(s, min, max, out) != 0) {
        *ret = reply_error(c, MHD_HTTP_BAD_REQUEST,
                           "query argument %s=%s is not an integer from "
                           "%" PRId64 " to %" PRId64, name, s, min, max);
        return -1;
    }
    return 0;
}

/* ---- the event stream ---- */

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
 * with h->mu held. */
static void streams_wake_locked(ss_http *h)
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

static enum MHD_Result serve_stream(ss_http *h, struct MHD_Connection *c)
{
    stream *s = calloc(1, sizeof *s);
    if (!s)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
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
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- the /steps document, streamed in pages ---- */

typedef struct {
    ss_http *h;
    ss_query_steps_cursor cursor;
    ss_buf pending;  /* at most one page */
    size_t sent;
    int done;        /* the closing "]}" is in PENDING */
} steps_doc;

static ssize_t steps_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    steps_doc *d = cls;
    while (d->sent == d->pending.len) {
        if (d->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        ss_buf_reset(&d->pending);
        d->sent = 0;
        char err[512];
        ss_query *q = pool_get(d->h, err, sizeof err);
        if (!q)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        int n = ss_query_steps_page(q, &d->cursor, PAGE_STEPS, &d->pending,
                                    err, sizeof err);
        pool_put(d->h, q);
        if (n < 0) /* the client sees the body cut short */
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == 0) {
            ss_buf_puts(&d->pending, "]}\n");
            d->done = 1;
        }
        if (d->pending.oom)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = d->pending.len - d->sent;
    if (n > max)
        n = max;
    memcpy(buf, d->pending.data + d->sent, n);
    d->sent += n;
    return (ssize_t)n;
}

static void steps_free(void *cls)
{
    steps_doc *d = cls;
    ss_buf_free(&d->pending);
    free(d);
}

/* Answers 200 with the steps of window CUR (already started), generated
 * page by page while it is sent. */
static enum MHD_Result serve_steps(ss_http *h, struct MHD_Connection *c,
                                   const ss_query_steps_cursor *cur)
{
    steps_doc *d = calloc(1, sizeof *d);
    if (!d)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    d->h = h;
    d->cursor = *cur;
    ss_buf_puts(&d->pending, "{\"steps\":[");
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16384, steps_read, d, steps_free);
    if (!r) {
        steps_free(d);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- routing ---- */

typedef enum {
    DOC_RUN, DOC_STEPS, DOC_HEATMAP, DOC_RANKS, DOC_FINDINGS, DOC_EVENTS,
    DOC_STREAM, DOC_HOST, DOC_HISTORY, DOC_NODES, DOC_GOODPUT, DOC_STACKS,
    DOC_PROFILE, DOC_VALUES
} doc_kind;

static const struct {
    const char *name;
    doc_kind kind;
} run_docs[] = {
    {"", DOC_RUN},           {"steps", DOC_STEPS},
    {"heatmap", DOC_HEATMAP}, {"ranks", DOC_RANKS},
    {"findings", DOC_FINDINGS}, {"events", DOC_EVENTS},
    {"stream", DOC_STREAM},   {"host", DOC_HOST},
    {"history", DOC_HISTORY}, {"nodes", DOC_NODES}, {"goodput", DOC_GOODPUT}, {"stacks", DOC_STACKS},
    {"profile", DOC_PROFILE}, {"values", DOC_VALUES},
};

/* Reads text argument NAME into *OUT (left as is when absent).  Returns 0,
 * or -1 after answering 400 when it is empty or longer than a run name
 * may sensibly be. */
static int arg_text(struct MHD_Connection *c, const char *name,
                    const char **out, enum MHD_Result *ret)
{
    const char *s = NULL;
    if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &s, NULL) != MHD_YES)
        return 0; /* absent */
    if (!s || !*s || strlen(s) > 1024 || strstr(s, "%00")) {
        *ret = reply_error(c, MHD_HTTP_BAD_REQUEST, "query argument %s is "
                           "empty, too long or holds %%00", name);
        return -1;
    }
    *out = s;
    return 0;
}

/* Answers /api/runs/{RUN_ID}/history, or /api/history?name=NAME when
 * RUN_ID is 0: guard's judgement of the run and the history of its
 * comparable runs (query.h). */
static enum MHD_Result serve_history(ss_http *h, struct MHD_Connection *c,
                                     int64_t run_id)
{
    enum MHD_Result ret = MHD_NO;
    ss_query_history_args a = {run_id, NULL, NULL, SS_QUERY_DEFAULT_HISTORY};
    if (arg_text(c, "metric", &a.metric, &ret) ||
        arg_i64(c, "last", 1, SS_QUERY_MAX_HISTORY, &a.last, &ret))
        return ret;
    if (!run_id) {
        if (arg_text(c, "name", &a.name, &ret))
            return ret;
        if (!a.name)
            return reply_error(c, MHD_HTTP_BAD_REQUEST, "/api/history needs "
                               "?name=NAME (a run name, as in /api/runs)");
    }
    char err[512] = "";
    ss_query *q = pool_get(h, err, sizeof err);
    if (!q)
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    int rc = ss_query_history(q, &a, &b, err, sizeof err);
    pool_put(h, q);
    if (rc == 0)
        ss_buf_puts(&b, "\n");
    if (rc == 0 && b.oom)
        rc = SS_QUERY_ERROR;
    if (rc != 0) {
        if (b.oom)
            snprintf(err, sizeof err, "out of memory");
        ss_buf_free(&b);
        return reply_error(c, rc == SS_QUERY_NOT_FOUND
                                  ? MHD_HTTP_NOT_FOUND
                                  : MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "%s", err);
    }
    return reply_document(h, c, &b);
}

/* Answers /api/diff?a=RUN&b=RUN: do the two runs compute the same bits
 * (query.h, docs/consistency.md)? */
static enum MHD_Result serve_diff(ss_http *h, struct MHD_Connection *c)
{
    enum MHD_Result ret = MHD_NO;
    int64_t a = -1, b = -1;
    if (arg_i64(c, "a", 1, INT64_MAX, &a, &ret) ||
        arg_i64(c, "b", 1, INT64_MAX, &b, &ret))
        return ret;
    if (a < 0 || b < 0)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "/api/diff needs ?a=RUN"
                           "&b=RUN (two run ids, as in /api/runs)");
    char err[512] = "";
    ss_query *q = pool_get(h, err, sizeof err);
    if (!q)
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf out = {0};
    int rc = ss_query_diff(q, a, b, &out, err, sizeof err);
    pool_put(h, q);
    if (rc == 0 && out.oom) {
        snprintf(err, sizeof err, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    if (rc != 0) {
        ss_buf_free(&out);
        return reply_error(c, rc == SS_QUERY_NOT_FOUND
                                  ? MHD_HTTP_NOT_FOUND
                                  : MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "%s", err);
    }
    return reply_document(h, c, &out);
}

/* Answers POST /api/runs/{id}/stacks: asks the live controller for every
 * rank's stacks.  It signals the ranks (and with native=1 attaches to
 * them), so it is never done for a GET or a HEAD: a page of another site
 * can make a browser send those to a loopback server. */
static enum MHD_Result serve_stacks(ss_http *h, struct MHD_Connection *c,
                                    int64_t run_id, int post)
{
    if (!post)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "stacks are "
                           "taken by POST /api/runs/%lld/stacks (it signals "
                           "every rank); `stepscope stacks` does that, and "
                           "`stepscope report` shows the stacks stored for "
                           "a run", (long long)run_id);
    if (!h->stacks || !h->live || ss_live_run_id(h->live) != run_id)
        return reply_error(c, MHD_HTTP_NOT_FOUND, "run %lld is not live "
                           "here: stacks come from a running job's "
                           "controller (`stepscope report` shows the stacks "
                           "stored for a run)", (long long)run_id);
    const char *nat = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                  "native");
    int native = nat && (strcmp(nat, "1") == 0 || strcmp(nat, "true") == 0);
    if (nat && !native && strcmp(nat, "0") != 0 && strcmp(nat, "false") != 0)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "native must be 0 or 1");
    ss_buf b = {0};
    unsigned status = h->stacks(h->stacks_ctx, native, &b);
    if (status != MHD_HTTP_OK || b.oom) {
        enum MHD_Result ret = reply_error(
            c, b.oom ? MHD_HTTP_INTERNAL_SERVER_ERROR : status, "%s",
            b.oom ? "out of memory" : b.data ? b.data : "no stacks");
        ss_buf_free(&b);
        return ret;
    }
    ss_buf_puts(&b, "\n");
    return reply_document(h, c, &b);
}

/* Answers /api/runs/{id}/profile: POST (START 1) asks the live run's
 * ranks for a profile, GET tells how a request stands (docs/debug.md). */
static enum MHD_Result serve_profile(ss_http *h, struct MHD_Connection *c,
                                     int64_t run_id, int start)
{
    if (!h->profile || !h->live || ss_live_run_id(h->live) != run_id)
        return reply_error(c, MHD_HTTP_NOT_FOUND, "run %lld is not live "
                           "here: profiles are taken by a running job's "
                           "controller", (long long)run_id);
    const char *ranks = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                    "ranks");
    const char *secs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                   "seconds");
    const char *req = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                  "request");
    ss_buf b = {0};
    unsigned status = h->profile(h->profile_ctx, start, ranks, secs, req, &b);
    if (b.oom || (status != MHD_HTTP_OK && status != MHD_HTTP_ACCEPTED)) {
        enum MHD_Result ret = reply_error(
            c, b.oom ? MHD_HTTP_INTERNAL_SERVER_ERROR : status, "%s",
            b.oom ? "out of memory" : b.data ? b.data : "no profile");
        ss_buf_free(&b);
        return ret;
    }
    ss_buf_puts(&b, "\n");
    return reply(c, status, JSON_TYPE, &b);
}

/* Answers /api/runs/{RUN_ID}/values (NAME NULL: the list of vector
 * names) and /api/runs/{RUN_ID}/values/{NAME}?rank=R or ?index=I, with
 * from, to, limit (cells) and attempt (docs/api.md). */
static enum MHD_Result serve_values(ss_http *h, struct MHD_Connection *c,
                                    int64_t run_id, const char *name)
{
    enum MHD_Result ret = MHD_NO;
    ss_query_values_args a = {-1, name, -1, -1, -1, -1,
                              SS_QUERY_DEFAULT_VALUE_CELLS};
    if (arg_i64(c, "attempt", 0, INT32_MAX, &a.attempt, &ret))
        return ret;
    if (name) {
        if (!*name || strlen(name) > 1024)
            return reply_error(c, MHD_HTTP_BAD_REQUEST, "bad vector name "
                               "(/api/runs/%lld/values lists them)",
                               (long long)run_id);
        if (arg_i64(c, "rank", 0, INT32_MAX, &a.rank, &ret) ||
            arg_i64(c, "index", 0, INT32_MAX, &a.index, &ret) ||
            arg_i64(c, "from", 0, INT64_MAX, &a.from, &ret) ||
            arg_i64(c, "to", 0, INT64_MAX, &a.to, &ret) ||
            arg_i64(c, "limit", 1, SS_QUERY_MAX_VALUE_CELLS, &a.limit,
                    &ret))
            return ret;
        if ((a.rank >= 0) == (a.index >= 0))
            return reply_error(c, MHD_HTTP_BAD_REQUEST, "give ?rank=R (its "
                               "vectors by step) or ?index=I (that element "
                               "over ranks by step), one of them");
        if (a.from >= 0 && a.to >= 0 && a.to < a.from)
            return reply_error(c, MHD_HTTP_BAD_REQUEST, "to (%" PRId64 ") "
                               "is below from (%" PRId64 ")", a.to, a.from);
    }
    char err[512] = "";
    ss_query *q = pool_get(h, err, sizeof err);
    if (!q)
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    int rc = name ? ss_query_value_series(q, run_id, &a, &b, err, sizeof err)
                  : ss_query_values(q, run_id, a.attempt, &b, err,
                                    sizeof err);
    pool_put(h, q);
    if (rc == 0)
        ss_buf_puts(&b, "\n");
    if (rc == 0 && b.oom) {
        snprintf(err, sizeof err, "out of memory");
        rc = SS_QUERY_ERROR;
    }
    if (rc != 0) {
        ss_buf_free(&b);
        return reply_error(c, rc == SS_QUERY_NOT_FOUND
                                  ? MHD_HTTP_NOT_FOUND
                                  : MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "%s", err);
    }
    return reply_document(h, c, &b);
}

/* Answers /api/runs/{id}[/{doc}]; REST is what follows "/api/runs/".
 * POST is allowed on /profile and /stacks only; /stacks wants it. */
static enum MHD_Result serve_run(ss_http *h, struct MHD_Connection *c,
                                 const char *rest, int head, int post)
{
    char idtext[32];
    size_t idlen = strcspn(rest, "/");
    const char *doc = rest[idlen] == '/' ? rest + idlen + 1 : "";
    snprintf(idtext, sizeof idtext, "%.*s", (int)(idlen < 31 ? idlen : 31),
             rest);
    int kind = -1;
    for (size_t i = 0; i < sizeof run_docs / sizeof run_docs[0]; i++)
        if (strcmp(doc, run_docs[i].name) == 0)
            kind = (int)run_docs[i].kind;
    const char *value_name = NULL; /* values/{NAME} */
    if (strncmp(doc, "values/", 7) == 0) {
        kind = DOC_VALUES;
        value_name = doc + 7;
    }
    if (kind < 0)
        return reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint "
                           "/api/runs/%s/%s (docs/api.md lists them)",
                           idtext, doc);
    int64_t run_id;
    if (idlen > 18 || ss_parse_i64(idtext, 1, INT64_MAX, &run_id) != 0)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "bad run id '%s' (a "
                           "positive integer, as in /api/runs)", idtext);
    long long id = run_id;
    if (post && kind != DOC_PROFILE && kind != DOC_STACKS)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST is for "
                           "/api/runs/{id}/profile and /stacks only");
    if (kind == DOC_PROFILE && head)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or POST");
    if (kind == DOC_PROFILE)
        return serve_profile(h, c, run_id, post);
    if (kind == DOC_HISTORY)
        return serve_history(h, c, run_id);
    if (kind == DOC_STACKS)
        return serve_stacks(h, c, run_id, post);
    if (kind == DOC_VALUES)
        return serve_values(h, c, run_id, value_name);

    enum MHD_Result ret = MHD_NO;
    ss_query_range rg = {-1, -1, -1, SS_QUERY_DEFAULT_STEPS};
    int64_t after = 0, limit = SS_QUERY_DEFAULT_EVENTS;
    if (arg_i64(c, "attempt", 0, INT32_MAX, &rg.attempt, &ret) ||
        arg_i64(c, "from", 0, INT64_MAX, &rg.from, &ret) ||
        arg_i64(c, "to", 0, INT64_MAX, &rg.to, &ret))
        return ret;
    if (kind == DOC_EVENTS) {
        if (arg_i64(c, "after", 0, INT64_MAX, &after, &ret) ||
            arg_i64(c, "limit", 1, SS_QUERY_MAX_EVENTS, &limit, &ret))
            return ret;
    } else if (arg_i64(c, "limit", 1, SS_QUERY_MAX_STEPS, &rg.limit, &ret)) {
        return ret;
    }
    if (rg.from >= 0 && rg.to >= 0 && rg.to < rg.from)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "to (%" PRId64 ") is "
                           "below from (%" PRId64 ")", rg.to, rg.from);

    if (kind == DOC_STREAM) {
        if (head) /* a stream has no end to measure */
            return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only");
        if (!h->live || ss_live_run_id(h->live) != id)
            return reply_error(c, MHD_HTTP_NOT_FOUND, "run %lld is not live "
                               "here; poll /api/runs/%lld/steps?from=N "
                               "instead", id, id);
        return serve_stream(h, c);
    }

    char err[512] = "";
    ss_query *q = pool_get(h, err, sizeof err);
    if (!q)
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
    ss_buf b = {0};
    ss_query_steps_cursor steps;
    int rc;
    switch ((doc_kind)kind) {
    case DOC_RUN:
        rc = ss_query_run(q, id, rg.attempt, h->live, &b, err, sizeof err);
        break;
    case DOC_STEPS:
        rc = ss_query_steps_start(q, id, &rg, &steps, err, sizeof err);
        break;
    case DOC_HEATMAP:
        rc = ss_query_heatmap(q, id, &rg, &b, err, sizeof err);
        break;
    case DOC_HOST:
        rc = ss_query_host(q, id, &rg, &b, err, sizeof err);
        break;
    case DOC_RANKS:
        rc = ss_query_ranks(q, id, rg.attempt, h->live, &b, err, sizeof err);
        break;
    case DOC_FINDINGS:
        rc = ss_query_findings(q, id, rg.attempt, &b, err, sizeof err);
        break;
    case DOC_NODES:
        rc = ss_query_nodes(q, id, rg.attempt, &b, err, sizeof err);
        break;
    case DOC_GOODPUT:
        rc = ss_query_goodput(q, id, ss_wall_now(), 0, &b, err, sizeof err);
        break;
    default:
        rc = ss_query_events(q, id, after, limit, &b, err, sizeof err);
        break;
    }
    pool_put(h, q);
    if (rc == SS_QUERY_NOT_FOUND) {
        ss_buf_free(&b);
        if (rg.attempt >= 0)
            return reply_error(c, MHD_HTTP_NOT_FOUND, "no run %lld with "
                               "attempt %" PRId64, id, rg.attempt);
        return reply_error(c, MHD_HTTP_NOT_FOUND, "no run %lld", id);
    }
    if (rc != 0) {
        ss_buf_free(&b);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s", err);
    }
    if (kind == DOC_STEPS)
        return serve_steps(h, c, &steps);
    ss_buf_puts(&b, "\n");
    if (b.oom) {
        ss_buf_free(&b);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return reply_document(h, c, &b);
}

/* Appends the live run's goodput lines, recomputed from the store when
 * older than GOODPUT_METRICS_EVERY_NS; nothing when the store cannot say
 * (the run's first rows are not committed yet). */
static void goodput_metrics(ss_http *h, ss_buf *b)
{
    ss_mono_ns now = ss_mono_now();
    pthread_mutex_lock(&h->mu);
    int fresh = h->goodput_at && now - h->goodput_at < GOODPUT_METRICS_EVERY_NS;
    pthread_mutex_unlock(&h->mu);
    if (!fresh) {
        char err[512];
        ss_buf lines = {0};
        ss_query *q = pool_get(h, err, sizeof err);
        int rc = q ? ss_query_goodput(q, ss_live_run_id(h->live), ss_wall_now(),
                                      1, &lines, err, sizeof err)
                   : SS_QUERY_ERROR;
        if (q)
            pool_put(h, q);
        pthread_mutex_lock(&h->mu);
        if (rc == 0 && !lines.oom) {
            ss_buf_free(&h->goodput_metrics);
            h->goodput_metrics = lines;
            h->goodput_at = now;
        } else {
            ss_buf_free(&lines);
        }
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_lock(&h->mu);
    if (h->goodput_metrics.data)
        ss_buf_add(b, h->goodput_metrics.data, h->goodput_metrics.len);
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result serve_metrics(ss_http *h, struct MHD_Connection *c)
{
    ss_buf b = {0};
    ss_buf_puts(&b, "# HELP stepscope_info The stepscope serving these "
                    "metrics (value 1).\n# TYPE stepscope_info gauge\n");
    ss_buf_printf(&b, "stepscope_info{mode=\"%s\"} 1\n",
                  h->live ? "run" : "serve");
    ss_http_gate_counts n;
    ss_http_gate_get_counts(h->gate, &n);
    ss_buf_printf(&b, "# HELP stepscope_http_connections Open HTTP "
                  "connections (limit %u).\n# TYPE stepscope_http_connections "
                  "gauge\nstepscope_http_connections %u\n", n.max, n.open);
    ss_buf_printf(&b, "# HELP stepscope_http_refused_total Connections "
                  "answered 503 at the connection limits.\n# TYPE "
                  "stepscope_http_refused_total counter\n"
                  "stepscope_http_refused_total %" PRIu64 "\n", n.refused);
    ss_buf_printf(&b, "# HELP stepscope_http_request_timeouts_total "
                  "Connections closed because a request did not arrive in "
                  "full in time.\n# TYPE stepscope_http_request_timeouts_total "
                  "counter\nstepscope_http_request_timeouts_total %" PRIu64
                  "\n", n.timed_out);
    if (h->live && ss_live_metrics(h->live, &b) != 0)
        b.oom = 1;
    if (h->live)
        goodput_metrics(h, &b);
    if (b.oom) {
        ss_buf_free(&b);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return reply(c, MHD_HTTP_OK, METRICS_TYPE, &b);
}

static enum MHD_Result serve_api(ss_http *h, struct MHD_Connection *c,
                                 const char *path, int head, int post)
{
    if (post && strncmp(path, "/api/runs/", 10) != 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST is for "
                           "/api/runs/{id}/profile only");
    if (strcmp(path, "/api/runs") == 0) {
        char err[512] = "";
        ss_query *q = pool_get(h, err, sizeof err);
        if (!q)
            return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", err);
        ss_buf b = {0};
        int rc = ss_query_runs(q, h->live, &b, err, sizeof err);
        pool_put(h, q);
        ss_buf_puts(&b, "\n");
        if (rc != 0 || b.oom) {
            ss_buf_free(&b);
            return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                               rc ? err : "out of memory");
        }
        return reply_document(h, c, &b);
    }
    if (strncmp(path, "/api/runs/", 10) == 0)
        return serve_run(h, c, path + 10, head, post);
    if (strcmp(path, "/api/history") == 0)
        return serve_history(h, c, 0);
    if (strcmp(path, "/api/diff") == 0)
        return serve_diff(h, c);
    if (strcmp(path, "/api/live") == 0) {
        if (!h->live)
            return reply_error(c, MHD_HTTP_NOT_FOUND, "no live run: this is "
                               "`stepscope serve`, which serves stored runs");
        ss_buf b = {0};
        ss_buf_printf(&b, "{\"run_id\":%" PRId64 ",\"world_size\":%" PRIu32
                      ",\"attempt\":%" PRIu32 ",\"running\":%s}\n",
                      ss_live_run_id(h->live), ss_live_world_size(h->live),
                      ss_live_get_attempt(h->live),
                      ss_live_running(h->live) ? "true" : "false");
        return reply(c, MHD_HTTP_OK, JSON_TYPE, &b);
    }
    return reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint %s "
                       "(docs/api.md lists them)", path);
}

/* ---- connections (http_gate.h) ---- */

/* The gate hands over an admitted connection: to the workers in turn. */
static int hand_over(void *cls, int fd, const struct sockaddr *sa,
                     socklen_t len)
{
    ss_http *h = cls;
    struct MHD_Daemon *d = h->mhd[h->next_worker++ % SS_HTTP_WORKERS];
    return MHD_add_connection(d, fd, sa, len) == MHD_YES ? 0 : -1;
}

/* Every gate tick: parked event streams look for notifications again. */
static void on_tick(void *cls)
{
    ss_http *h = cls;
    pthread_mutex_lock(&h->mu);
    streams_wake_locked(h);
    pthread_mutex_unlock(&h->mu);
}

/* libmicrohttpd announces a connection or its end (before it closes the
 * socket): the gate binds or frees its record. */
static void on_connection(void *cls, struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    ss_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(
            c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = fi ? ss_http_gate_started(h->gate, fi->connect_fd)
                             : NULL;
    } else {
        ss_http_gate_closed(h->gate, *socket_context);
        *socket_context = NULL;
    }
}

/* The gate's record of connection C, or NULL. */
static ss_http_gate_conn *gate_conn(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
        c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* A response was sent (or the request ended otherwise). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)con_cls;
    (void)toe;
    ss_http *h = cls;
    ss_http_gate_response_done(h->gate, gate_conn(c));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    ss_http *h = cls;
    /* Answer on the second call, once the request (and any body, which is
     * discarded) has been read: queuing on the first call makes
     * libmicrohttpd close the connection instead of keeping it alive. */
    static int seen;
    if (!*con_cls) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    ss_http_gate_request_read(h->gate, gate_conn(c));
    int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (!post && strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method %.32s is "
                           "not allowed (GET or HEAD; POST on "
                           "/api/runs/{id}/profile and /stacks)", method);
    /* A page of another site must not read or act through a browser: on
     * loopback the name it was asked by must be this server's (DNS
     * rebinding points another name at 127.0.0.1), and on any address a
     * request a page sent across origins is refused. */
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   "Host");
    if (h->loopback && !ss_http_host_allowed(h->host, host))
        return reply_error(c, MHD_HTTP_FORBIDDEN, "Host '%.200s' is not this "
                           "server's: a loopback server answers requests for "
                           "localhost, 127.0.0.1, [::1] or %s only", host,
                           h->host);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     "Origin");
    if (!ss_http_origin_allowed(origin, host))
        return reply_error(c, MHD_HTTP_FORBIDDEN, "a request from a page of "
                           "another origin (Origin '%.200s') is refused",
                           origin);
    char path[512];
    size_t n = strlen(url);
    if (n >= sizeof path)
        return reply_error(c, MHD_HTTP_URI_TOO_LONG, "path too long");
    memcpy(path, url, n + 1);
    if (n > 1 && path[n - 1] == '/')
        path[n - 1] = '\0'; /* /api/runs/ is /api/runs */

    int is_api = strncmp(path, "/api/", 5) == 0 || strcmp(path, "/api") == 0;
    int is_metrics = strcmp(path, "/metrics") == 0;
    if (is_api || is_metrics) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                       "Authorization");
        const char *tok = MHD_lookup_connection_value(
            c, MHD_GET_ARGUMENT_KIND, "token");
        if (!ss_http_authorized(h->token, auth, tok))
            return reply_error(c, MHD_HTTP_UNAUTHORIZED, "this server "
                               "listens beyond loopback: send the run token "
                               "(Authorization: Bearer TOKEN or ?token=TOKEN)");
        if (post && is_metrics)
            return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only");
        /* A web page may POST to a loopback server without the token:
         * browsers send Origin with it, stepscope's clients never do. */
        if (post && MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                "Origin"))
            return reply_error(c, MHD_HTTP_FORBIDDEN, "POST from a web page "
                               "(an Origin header) is refused");
        return is_metrics ? serve_metrics(h, c)
                          : serve_api(h, c, path,
                                      strcmp(method, MHD_HTTP_METHOD_HEAD) == 0,
                                      post);
    }
    if (post)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST is for "
                           "/api/runs/{id}/profile and /stacks only");
    for (size_t i = 0; i < h->n_files; i++)
        if (strcmp(url, h->files[i].path) == 0)
            return reply_static(c, &h->files[i]);
    if (strcmp(url, "/") == 0 && !h->n_files) {
        static const ss_static_file page = {
            "/", "text/html; charset=utf-8",
            (const unsigned char *)default_page, sizeof default_page - 1};
        return reply_static(c, &page);
    }
    return reply_error(c, MHD_HTTP_NOT_FOUND, "no such path %s", path);
}

/* ---- starting and stopping ---- */

/* Binds and listens on HOST:PORT.  Returns the socket or -1 with errno. */
static int listen_on(const char *host, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        len = sizeof *s4;
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        len = sizeof *s6;
    } else {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET
                     ? ((struct sockaddr_in *)&ss)->sin_port
                     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* Frees H and what it holds; the gate and the daemons are stopped (or
 * were never started). */
static void free_http(ss_http *h)
{
    for (int i = 0; i < h->n_pool; i++)
        ss_query_close(h->pool[i]);
    ss_http_gate_free(h->gate);
    pthread_mutex_destroy(&h->mu);
    ss_buf_free(&h->goodput_metrics);
    free(h->db_path);
    free(h->token);
    free(h);
}

/* The connection limit: WANT, lowered to half the open-file limit (the
 * rest is for the store, the ranks and the logs). */
static unsigned connection_limit(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 2 < want)
        want = rl.rlim_cur / 2 > 8 ? (unsigned)(rl.rlim_cur / 2) : 8;
    return want;
}

/* Starts the worker daemons, then the gate on LISTEN_FD (taken over, also
 * on failure).  Returns 0, or -1 with ERR. */
static int start_workers(ss_http *h, int listen_fd,
                         const ss_http_limits *limits, char *err,
                         size_t errlen)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME |
                     (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES
                          ? MHD_USE_EPOLL : MHD_USE_POLL);
    for (int i = 0; i < SS_HTTP_WORKERS; i++) {
        h->mhd[i] = MHD_start_daemon(
            flags, 0, NULL, NULL, on_request, h,
            MHD_OPTION_CONNECTION_LIMIT, h->max_conns,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SS_HTTP_IDLE_TIMEOUT_S,
            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
            MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
            MHD_OPTION_END);
        if (!h->mhd[i]) {
            snprintf(err, errlen, "cannot start the HTTP server on %s port "
                     "%u", h->host, h->port);
            close(listen_fd);
            return -1;
        }
    }
    ss_http_gate_config gc = {
        .max_connections = h->max_conns,
        .max_per_address = limits->max_per_address ? limits->max_per_address
                                                   : SS_HTTP_MAX_PER_ADDRESS,
        .request_timeout = (ss_mono_ns)(limits->request_timeout_ms
                                            ? limits->request_timeout_ms
                                            : SS_HTTP_REQUEST_TIMEOUT_MS) *
                           1000000,
        .admit = hand_over, .tick = on_tick, .cls = h};
    return ss_http_gate_start(listen_fd, &gc, &h->gate, err, errlen);
}

/* Stops what start_workers started (any part of it). */
static void stop_workers(ss_http *h)
{
    /* End the streams first: a parked one is resumed and then sees
     * STOPPING, and none parks again (libmicrohttpd must not be stopped
     * with a suspended connection). */
    pthread_mutex_lock(&h->mu);
    __atomic_store_n(&h->stopping, 1, __ATOMIC_RELEASE);
    streams_wake_locked(h);
    pthread_mutex_unlock(&h->mu);
    ss_http_gate_stop(h->gate); /* no new connections */
    for (int i = 0; i < SS_HTTP_WORKERS; i++)
        if (h->mhd[i]) {
            MHD_stop_daemon(h->mhd[i]); /* closes its connections */
            h->mhd[i] = NULL;
        }
}

ss_http *ss_http_start(const ss_http_config *cfg, char *err, size_t errlen)
{
    return ss_http_start_limited(cfg, NULL, err, errlen);
}

ss_http *ss_http_start_limited(const ss_http_config *cfg,
                               const ss_http_limits *limits, char *err,
                               size_t errlen)
{
    static const ss_http_limits defaults = {0, 0, 0};
    if (!limits)
        limits = &defaults;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    int loopback = ss_http_is_loopback(host);
    if (!loopback && (!cfg->token || !cfg->token[0])) {
        snprintf(err, errlen, "listening on %s needs a token", host);
        return NULL;
    }
    ss_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    h->live = cfg->live;
    h->stacks = cfg->stacks;
    h->stacks_ctx = cfg->stacks_ctx;
    h->profile = cfg->profile;
    h->profile_ctx = cfg->profile_ctx;
    h->db_path = strdup(cfg->db_path ? cfg->db_path : "");
    h->token = loopback ? NULL : strdup(cfg->token);
    h->loopback = loopback;
    h->files = static_files;
    h->n_files = n_static_files;
    h->max_conns = connection_limit(limits->max_connections
                                        ? limits->max_connections
                                        : SS_HTTP_MAX_CONNECTIONS);
    snprintf(h->host, sizeof h->host, "%s", host);
    if (!h->db_path || (!loopback && !h->token)) {
        snprintf(err, errlen, "out of memory");
        free_http(h);
        return NULL;
    }
    int fd = listen_on(host, cfg->port);
    if (fd < 0 && errno == EADDRINUSE && cfg->fallback && cfg->port) {
        fd = listen_on(host, 0);
        h->fell_back = fd >= 0;
    }
    if (fd < 0) {
        if (errno == EADDRINUSE)
            snprintf(err, errlen, "port %u on %s is in use (choose another "
                     "with --http ADDR:PORT, or port 0 for any)", cfg->port,
                     host);
        else
            snprintf(err, errlen, "cannot listen on %s port %u: %s", host,
                     cfg->port, strerror(errno));
        free_http(h);
        return NULL;
    }
    h->port = bound_port(fd);
    if (start_workers(h, fd, limits, err, errlen) != 0) {
        stop_workers(h);
        free_http(h);
        return NULL;
    }
    /* The URL people can paste: a wildcard address shows the host name. */
    char shown[300];
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        if (gethostname(shown, sizeof shown - 1) != 0)
            snprintf(shown, sizeof shown, "%s", host);
        shown[sizeof shown - 1] = '\0';
    } else {
        snprintf(shown, sizeof shown, strchr(host, ':') ? "[%s]" : "%s", host);
    }
    snprintf(h->url, sizeof h->url, "http://%s:%u/", shown, h->port);
    return h;
}

uint16_t ss_http_port(const ss_http *h)
{
    return h->port;
}

int ss_http_fell_back(const ss_http *h)
{
    return h->fell_back;
}

const char *ss_http_url(const ss_http *h)
{
    return h->url;
}

unsigned ss_http_max_connections(const ss_http *h)
{
    return h->max_conns;
}

void ss_http_stop(ss_http *h)
{
    if (!h)
        return;
    stop_workers(h);
    free_http(h);
}

/* ---- the live-run file ---- */

int ss_http_live_file_write(const char *db_path, int64_t run_id,
                            const ss_http *h, const char *token, char *path,
                            size_t pathlen, char *err, size_t errlen)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 16];
    if (ss_store_live_dir(db_path, dir, sizeof dir) != 0 ||
        ss_store_live_file(db_path, run_id, path, pathlen) != 0) {
        snprintf(err, errlen, "no live-run file for %s: %s", db_path,
                 strerror(errno));
        path[0] = '\0';
        return -1;
    }
    if (ss_mkdirs_private(dir, err, errlen) != 0) {
        path[0] = '\0';
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* left by a controller that died while writing it */
    ss_buf b = {0};
    ss_buf_puts(&b, "{\"url\":");
    ss_buf_json_str(&b, h->url);
    ss_buf_printf(&b, ",\"pid\":%ld,\"run_id\":%" PRId64, (long)getpid(),
                  run_id);
    if (h->token && token) {
        ss_buf_puts(&b, ",\"token\":");
        ss_buf_json_str(&b, token);
    }
    ss_buf_puts(&b, "}\n");
    int fd = b.oom ? -1 : ss_open_private(tmp, O_WRONLY, NULL, err, errlen);
    if (fd < 0 && !b.oom) {
        ss_buf_free(&b);
        path[0] = '\0';
        return -1;
    }
    int ok = fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path,
                 b.oom ? "out of memory" : strerror(errno));
        unlink(tmp);
        path[0] = '\0';
    }
    ss_buf_free(&b);
    return ok ? 0 : -1;
}

void ss_http_live_file_remove(const char *path)
{
    if (path && path[0])
        unlink(path);
}
