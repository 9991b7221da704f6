/*
 * http.c - the controller's HTTP server (http.h, docs/api.md).
 *
 * libmicrohttpd parses HTTP and runs one thread per connection (bounded by
 * SS_HTTP_MAX_CONNECTIONS); this file routes a request to a document of
 * query.c, the live state's /metrics or its event feed, and answers JSON
 * errors for everything else.  We bind the listening socket ourselves (with
 * SOCK_CLOEXEC, so ranks launched later do not inherit it, and so a busy
 * port gets a clear message or the fallback) and hand it to libmicrohttpd.
 *
 * Store connections: a request takes a read-only ss_query from a small pool
 * (opening one when the pool is empty) and returns it afterwards, so a
 * connection is used by one thread at a time and opening costs are paid
 * once per connection, not per request.
 *
 * Event streams: the content reader blocks (allowed in thread-per-
 * connection mode) on the live feed in short slices, so ss_http_stop ends
 * every stream within about SLICE_MS.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "private_fs.h"
#include "query.h"
#include "store_files.h"

#define POOL_MAX 8          /* idle store connections kept */
#define SLICE_MS 200        /* a stream checks for shutdown this often */
#define KEEPALIVE_MS 15000  /* a comment line on a quiet stream */
#define JSON_TYPE "application/json; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ss_http {
    struct MHD_Daemon *mhd;
    ss_live *live;
    char *db_path;
    char *token; /* NULL: none required */
    char host[INET6_ADDRSTRLEN];
    uint16_t port;
    int fell_back;
    char url[INET6_ADDRSTRLEN + 300];
    int stopping; /* atomic */
    pthread_mutex_t mu;
    ss_query *pool[POOL_MAX];
    int n_pool;
    const ss_static_file *files;
    size_t n_files;
};

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
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 65535)
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
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
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

/* Reads argument NAME as an integer in [MIN, MAX] into *OUT (left as is
 * when absent).  Returns 0, or -1 after answering 400. */
static int arg_i64(struct MHD_Connection *c, const char *name, int64_t min,
                   int64_t max, int64_t *out, enum MHD_Result *ret)
{
    const char *s = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
                                                name);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        *ret = reply_error(c, MHD_HTTP_BAD_REQUEST,
                           "query argument %s=%s is not an integer from "
                           "%" PRId64 " to %" PRId64, name, s, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- the event stream ---- */

typedef struct {
    ss_http *h;
    ss_live_cursor cursor;
    ss_buf pending;
    size_t sent;
    int ended;   /* the end event is queued */
    ss_mono_ns last_write;
} stream;

static ss_mono_ns mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ss_mono_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream *s = cls;
    while (s->sent == s->pending.len) {
        if (s->ended ||
            __atomic_load_n(&s->h->stopping, __ATOMIC_ACQUIRE))
            return MHD_CONTENT_READER_END_OF_STREAM;
        ss_buf_reset(&s->pending);
        s->sent = 0;
        int n = ss_live_feed_wait(s->h->live, &s->cursor, SLICE_MS,
                                  &s->pending);
        if (n == -2)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == -1) {
            ss_buf_puts(&s->pending, "event: end\ndata: {}\n\n");
            s->ended = 1;
        } else if (n == 0 &&
                   mono_now() - s->last_write > KEEPALIVE_MS * 1000000LL) {
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
    s->last_write = mono_now();
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream *s = cls;
    ss_live_feed_leave(s->h->live);
    ss_buf_free(&s->pending);
    free(s);
}

static enum MHD_Result serve_stream(ss_http *h, struct MHD_Connection *c)
{
    stream *s = calloc(1, sizeof *s);
    if (!s)
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    s->h = h;
    s->last_write = mono_now();
    ss_live_feed_join(h->live, &s->cursor);
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

/* ---- routing ---- */

typedef enum {
    DOC_RUN, DOC_STEPS, DOC_HEATMAP, DOC_RANKS, DOC_FINDINGS, DOC_EVENTS,
    DOC_STREAM, DOC_HOST
} doc_kind;

static const struct {
    const char *name;
    doc_kind kind;
} run_docs[] = {
    {"", DOC_RUN},           {"steps", DOC_STEPS},
    {"heatmap", DOC_HEATMAP}, {"ranks", DOC_RANKS},
    {"findings", DOC_FINDINGS}, {"events", DOC_EVENTS},
    {"stream", DOC_STREAM},   {"host", DOC_HOST},
};

/* Answers /api/runs/{id}[/{doc}]; REST is what follows "/api/runs/". */
static enum MHD_Result serve_run(ss_http *h, struct MHD_Connection *c,
                                 const char *rest, int head)
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
    if (kind < 0)
        return reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint "
                           "/api/runs/%s/%s (docs/api.md lists them)",
                           idtext, doc);
    char *end;
    errno = 0;
    long long id = strtoll(idtext, &end, 10);
    if (idlen == 0 || idlen > 18 || errno || *end || id <= 0 ||
        idtext[0] == '+' || idtext[0] == ' ')
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "bad run id '%s' (a "
                           "positive integer, as in /api/runs)", idtext);

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
    int rc;
    switch ((doc_kind)kind) {
    case DOC_RUN:
        rc = ss_query_run(q, id, rg.attempt, h->live, &b, err, sizeof err);
        break;
    case DOC_STEPS:
        rc = ss_query_steps(q, id, &rg, &b, err, sizeof err);
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
    ss_buf_puts(&b, "\n");
    if (b.oom) {
        ss_buf_free(&b);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return reply(c, MHD_HTTP_OK, JSON_TYPE, &b);
}

static enum MHD_Result serve_metrics(ss_http *h, struct MHD_Connection *c)
{
    ss_buf b = {0};
    ss_buf_puts(&b, "# HELP stepscope_info The stepscope serving these "
                    "metrics (value 1).\n# TYPE stepscope_info gauge\n");
    ss_buf_printf(&b, "stepscope_info{mode=\"%s\"} 1\n",
                  h->live ? "run" : "serve");
    if (h->live && ss_live_metrics(h->live, &b) != 0)
        b.oom = 1;
    if (b.oom) {
        ss_buf_free(&b);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return reply(c, MHD_HTTP_OK, METRICS_TYPE, &b);
}

static enum MHD_Result serve_api(ss_http *h, struct MHD_Connection *c,
                                 const char *path, int head)
{
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
        return reply(c, MHD_HTTP_OK, JSON_TYPE, &b);
    }
    if (strncmp(path, "/api/runs/", 10) == 0)
        return serve_run(h, c, path + 10, head);
    if (strcmp(path, "/api/live") == 0) {
        if (!h->live)
            return reply_error(c, MHD_HTTP_NOT_FOUND, "no live run: this is "
                               "`stepscope serve`, which serves stored runs");
        ss_buf b = {0};
        ss_buf_printf(&b, "{\"run_id\":%" PRId64 ",\"world_size\":%" PRIu32
                      ",\"running\":%s}\n", ss_live_run_id(h->live),
                      ss_live_world_size(h->live),
                      ss_live_running(h->live) ? "true" : "false");
        return reply(c, MHD_HTTP_OK, JSON_TYPE, &b);
    }
    return reply_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint %s "
                       "(docs/api.md lists them)", path);
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
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method %.32s is "
                           "not allowed (GET or HEAD)", method);
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
        return is_metrics ? serve_metrics(h, c)
                          : serve_api(h, c, path,
                                      strcmp(method, MHD_HTTP_METHOD_HEAD) == 0);
    }
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
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
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

static void free_http(ss_http *h)
{
    for (int i = 0; i < h->n_pool; i++)
        ss_query_close(h->pool[i]);
    pthread_mutex_destroy(&h->mu);
    free(h->db_path);
    free(h->token);
    free(h);
}

ss_http *ss_http_start(const ss_http_config *cfg, char *err, size_t errlen)
{
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
    h->db_path = strdup(cfg->db_path ? cfg->db_path : "");
    h->token = loopback ? NULL : strdup(cfg->token);
    h->files = static_files;
    h->n_files = n_static_files;
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
    h->mhd = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
            MHD_USE_POLL,
        0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)SS_HTTP_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "cannot start the HTTP server on %s port %u",
                 host, h->port);
        close(fd);
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

void ss_http_stop(ss_http *h)
{
    if (!h)
        return;
    __atomic_store_n(&h->stopping, 1, __ATOMIC_RELEASE);
    MHD_stop_daemon(h->mhd); /* joins the connection threads */
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
    if (ss_mkdirs_private(dir) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
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
    int fd = b.oom ? -1 : ss_open_private(tmp, O_WRONLY, NULL);
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
