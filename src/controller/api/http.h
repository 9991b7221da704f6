/*
 * http.h - the controller's HTTP server: JSON API, dashboard files,
 * server-sent events and Prometheus /metrics (docs/api.md).
 *
 * Built on libmicrohttpd, which parses HTTP; this module admits
 * connections, routes, authorizes and answers.  Requests are served by
 * SS_HTTP_WORKERS event-driven threads (epoll), so an idle connection costs
 * a socket and a little memory, not a thread, and the controller's libuv
 * loop never waits for HTTP; documents are built by SS_HTTP_BUILDERS
 * threads of their own, so one that takes seconds holds no other
 * connection; data comes from the store through query.c
 * (read-only SQLite connections) and from the live state (live.h), the
 * only state shared with the loop.
 *
 * Limits (docs/api.md): at most SS_HTTP_MAX_CONNECTIONS connections at once
 * (lowered to half the open-file limit) and SS_HTTP_MAX_PER_ADDRESS from
 * one address other than loopback; a connection over either limit is
 * answered 503 with a JSON body and closed.  Every request must arrive in
 * full (request line, headers, body) within SS_HTTP_REQUEST_TIMEOUT_MS of
 * the connection's start or of the previous response's end, however slowly
 * its bytes trickle in, else the connection is closed; a connection that
 * makes no progress at all for SS_HTTP_IDLE_TIMEOUT_S is closed too.  Large
 * /steps windows are streamed in pages, so a request's memory does not grow
 * with its window.
 *
 * Security: by default the server listens on loopback only.  When it
 * listens on any other address every /api/ and /metrics request must carry
 * the token (`Authorization: Bearer TOKEN` or `?token=TOKEN`), else it gets
 * 401 {"error":...}.  On loopback, a request whose Host is not this
 * server's name (ss_http_host_allowed) is refused with 403, and so is,
 * on any address, one that a page of another origin sent
 * (ss_http_origin_allowed) and any POST from a page.  Nothing a GET or
 * HEAD does changes anything: stacks are taken by POST only.  Static files (the dashboard's page and scripts) carry
 * no data and are served without it; the page passes the token it was
 * opened with (`/?token=TOKEN`) on to its API calls.
 */
#ifndef STEPSCOPE_HTTP_H
#define STEPSCOPE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "http_types.h"

/*
 * Registers the dashboard's files for every server started afterwards (not
 * thread-safe: call before ss_http_start).  FILES (and everything it points
 * to) must stay valid while any server runs; static arrays are the intent.
 * Until files are registered, "/" serves a minimal page linking to the API.
 * A later call replaces the set; N == 0 clears it.
 */
void ss_http_set_static(const ss_static_file *files, size_t n);

typedef struct {
    const char *host;       /* numeric IPv4/IPv6 address; NULL: 127.0.0.1 */
    uint16_t port;          /* 0: any free port */
    int fallback;           /* port busy: take any free port instead */
    const char *db_path;    /* the store to read */
    ss_live *live;          /* the live run, or NULL (`stepscope serve`) */
    const char *token;      /* required on a non-loopback address; may be
                               NULL on loopback */
    ss_http_stacks_fn stacks; /* the live run's stacks; NULL: none here */
    void *stacks_ctx;
    ss_http_profile_fn profile; /* the live run's profiler; NULL: none */
    void *profile_ctx;
    ss_http_recent_fn recent; /* a live rank's latest steps; NULL: none */
    void *recent_ctx;
} ss_http_config;

/* The connection limits (http.h's header comment); 0 in a field: the
 * default. */
typedef struct {
    unsigned max_connections;    /* SS_HTTP_MAX_CONNECTIONS */
    unsigned max_per_address;    /* SS_HTTP_MAX_PER_ADDRESS */
    unsigned request_timeout_ms; /* SS_HTTP_REQUEST_TIMEOUT_MS */
} ss_http_limits;

/*
 * Starts serving.  Returns NULL with a one-line reason in ERR when the
 * address is invalid, the port is in use (without FALLBACK), or a
 * non-loopback address is asked for without a token.  CFG's strings are
 * copied; CFG->live must outlive the server.
 */
ss_http *ss_http_start(const ss_http_config *cfg, char *err, size_t errlen);

/* ss_http_start with other LIMITS than the defaults (NULL: the defaults). */
ss_http *ss_http_start_limited(const ss_http_config *cfg,
                               const ss_http_limits *limits, char *err,
                               size_t errlen);

/* The port actually bound. */
uint16_t ss_http_port(const ss_http *h);

/* 1 when the port asked for was busy and another was taken. */
int ss_http_fell_back(const ss_http *h);

/* The base URL, e.g. "http://127.0.0.1:8470/" (IPv6 hosts in brackets; a
 * wildcard address is shown as this host's name).  Valid while H lives. */
const char *ss_http_url(const ss_http *h);

/* The connection limit in force: the one asked for, lowered to half the
 * process's open-file limit. */
unsigned ss_http_max_connections(const ss_http *h);

/* Stops accepting, ends open event streams, closes every connection, waits
 * for the server's threads and frees H.  NULL is a no-op. */
void ss_http_stop(ss_http *h);

/*
 * Parses "--http" values: "ADDR:PORT", "[V6ADDR]:PORT", ":PORT", "PORT" or
 * "ADDR" (port: the default).  Writes the numeric address (default
 * 127.0.0.1) to HOST and the port to *PORT.  Returns 0, or -1 with a reason
 * in ERR.
 */
int ss_http_parse_addr(const char *spec, char *host, size_t hostlen,
                       uint16_t *port, char *err, size_t errlen);

/* 1 when HOST (numeric) is a loopback address (127.0.0.0/8, ::1). */
int ss_http_is_loopback(const char *host);

/*
 * The authorization decision.  REQUIRED: the token, or NULL when none is
 * needed (loopback).  AUTH_HEADER: the Authorization header or NULL;
 * QUERY_TOKEN: the ?token= argument or NULL.  Returns 1 when allowed.
 * Compares in constant time.
 */
int ss_http_authorized(const char *required, const char *auth_header,
                       const char *query_token);

/*
 * Whether a request's Host header HOST_HEADER (NULL: none) names the
 * loopback server listening on LISTEN_HOST (numeric): "localhost",
 * "127.0.0.1", "[::1]" or LISTEN_HOST ("[…]" for IPv6), any case, with
 * any port or none (a forwarded port, as `ssh -L` makes, keeps its own
 * number).  A request without Host is allowed (HTTP/1.0; browsers always
 * send one).  Returns 1 when allowed.  DNS rebinding makes a browser send
 * a page's own name to 127.0.0.1: that is what this refuses.
 */
int ss_http_host_allowed(const char *listen_host, const char *host_header);

/*
 * Whether a request that carries ORIGIN (NULL: none) may be answered: it
 * comes from no page (NULL), or from a page of this very server (ORIGIN is
 * "http://" or "https://" (a TLS proxy in front) followed by HOST_HEADER,
 * any case).  Returns 1 when allowed.
 */
int ss_http_origin_allowed(const char *origin, const char *host_header);

/*
 * The live-run file that lets other commands (`stepscope top`) find a
 * running controller: ss_store_live_file(DB_PATH, RUN_ID)
 * (PATH.d/live/run-ID.json beside the store DB_PATH, store_files.h)
 * holding {"url", "pid", "run_id", "token" (only when the address is not
 * loopback)}, mode 0600 in a 0700 directory.  ss_http_live_file_write
 * returns 0 or -1 with ERR; the path written goes to PATH (PATHLEN bytes,
 * "" on failure) for ss_http_live_file_remove.
 */
int ss_http_live_file_write(const char *db_path, int64_t run_id,
                            const ss_http *h, const char *token, char *path,
                            size_t pathlen, char *err, size_t errlen);
void ss_http_live_file_remove(const char *path);

#endif
