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
 * block it for long: documents, built from the store in one go or asked
 * of the live controller, are built by the builders (http_build.c) while
 * the worker goes on with its other connections; /api/live and the event
 * stream, read from the live state in memory, are answered by the worker
 * at once.  The /steps document is streamed in pages of PAGE_STEPS steps
 * (http_steps.c; its memory does not grow with the window), and an event
 * stream with nothing to send suspends its connection, which the gate's
 * tick resumes every SS_HTTP_GATE_TICK_MS to look for new notifications.
 *
 * The files of the server are listed in http_state.h; this one starts and
 * stops it, wires the gate to the workers, and is each request's front
 * door: the method, the Host and Origin checks, the token, then the
 * /api/... documents (http_routes.c), /metrics (http_metrics.c) or a
 * static file.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_state.h"

static const ss_static_file *static_files;
static size_t n_static_files;

void ss_http_set_static(const ss_static_file *files, size_t n)
{
    static_files = n ? files : NULL;
    n_static_files = n;
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
    ss__http_streams_wake_locked(h);
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

/* What *con_cls holds once a request has been seen and is not (or no
 * longer) a builder's job. */
static int seen;

/* A response was sent (or the request ended otherwise). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    ss_http *h = cls;
    if (*con_cls && *con_cls != &seen) /* a job whose answer was not sent */
        ss__http_build_free(*con_cls);
    *con_cls = NULL;
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
    if (!*con_cls) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (*con_cls != &seen) { /* a builder's job, resumed: its answer */
        build_job *j = *con_cls;
        enum MHD_Result ret = ss__http_build_answer(h, j);
        ss__http_build_free(j);
        *con_cls = &seen;
        return ret;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    ss_http_gate_request_read(h->gate, gate_conn(c));
    int post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (!post && strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return ss__http_reply_error(
            c, MHD_HTTP_METHOD_NOT_ALLOWED,
            "method %.32s is not allowed (GET or HEAD; POST on "
            "/api/runs/{id}/profile and /stacks)",
            method);
    /* A page of another site must not read or act through a browser: on
     * loopback the name it was asked by must be this server's (DNS
     * rebinding points another name at 127.0.0.1), and on any address a
     * request a page sent across origins is refused. */
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   "Host");
    if (h->loopback && !ss_http_host_allowed(h->host, host))
        return ss__http_reply_error(
            c, MHD_HTTP_FORBIDDEN,
            "Host '%.200s' is not this server's: a loopback server answers "
            "requests for localhost, 127.0.0.1, [::1] or %s only",
            host, h->host);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     "Origin");
    if (!ss_http_origin_allowed(origin, host))
        return ss__http_reply_error(c, MHD_HTTP_FORBIDDEN,
                                    "a request from a page of another origin "
                                    "(Origin '%.200s') is refused",
                                    origin);
    char path[512];
    size_t n = strlen(url);
    if (n >= sizeof path)
        return ss__http_reply_error(c, MHD_HTTP_URI_TOO_LONG, "path too long");
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
            return ss__http_reply_error(
                c, MHD_HTTP_UNAUTHORIZED,
                "this server listens beyond loopback: send the run token "
                "(Authorization: Bearer TOKEN or ?token=TOKEN)");
        if (post && is_metrics)
            return ss__http_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                        "GET only");
        /* A web page may POST to a loopback server without the token:
         * browsers send Origin with it, stepscope's clients never do. */
        if (post && MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                "Origin"))
            return ss__http_reply_error(
                c, MHD_HTTP_FORBIDDEN,
                "POST from a web page (an Origin header) is refused");
        int head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        ss_http_route_cost cost = is_metrics ? SS_ROUTE_BUILT
                                             : ss__http_route_cost(path);
        if (cost != SS_ROUTE_AT_ONCE &&
            ss__http_build_submit(h, c, path, head, post, is_metrics,
                                  cost == SS_ROUTE_SLOW, con_cls) == 0)
            return MHD_YES; /* a builder answers it */
        return is_metrics ? ss__http_serve_metrics(h, c)
                          : ss__http_serve_api(h, c, path, head, post);
    }
    if (post)
        return ss__http_reply_error(
            c, MHD_HTTP_METHOD_NOT_ALLOWED,
            "POST is for /api/runs/{id}/profile and /stacks only");
    for (size_t i = 0; i < h->n_files; i++)
        if (strcmp(url, h->files[i].path) == 0)
            return ss__http_reply_static(c, &h->files[i]);
    if (strcmp(url, "/") == 0 && !h->n_files) {
        static const ss_static_file page = {
            "/", "text/html; charset=utf-8",
            (const unsigned char *)default_page, sizeof default_page - 1};
        return ss__http_reply_static(c, &page);
    }
    return ss__http_reply_error(c, MHD_HTTP_NOT_FOUND, "no such path %s", path);
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
    pthread_cond_destroy(&h->build_cv);
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
            MHD_OPTION_UNESCAPE_CALLBACK, ss__http_unescape_keeping_nul, NULL,
            MHD_OPTION_END);
        if (!h->mhd[i]) {
            snprintf(err, errlen, "cannot start the HTTP server on %s port "
                     "%u", h->host, h->port);
            close(listen_fd);
            return -1;
        }
    }
    if (ss__http_builders_start(h) != 0) {
        snprintf(err, errlen, "cannot start the HTTP server's threads");
        close(listen_fd);
        return -1;
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
    ss__http_streams_wake_locked(h);
    pthread_mutex_unlock(&h->mu);
    ss_http_gate_stop(h->gate); /* no new connections */
    ss__http_builders_stop(h);  /* no connection left suspended */
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
    pthread_cond_init(&h->build_cv, NULL);
    h->live = cfg->live;
    h->stacks = cfg->stacks;
    h->stacks_ctx = cfg->stacks_ctx;
    h->profile = cfg->profile;
    h->profile_ctx = cfg->profile_ctx;
    h->recent = cfg->recent;
    h->recent_ctx = cfg->recent_ctx;
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
