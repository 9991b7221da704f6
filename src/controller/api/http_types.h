/*
 * http_types.h - the HTTP server's types and limits (http.h): the handle,
 * the default port and connection limits, a static file, and the stacks
 * and profile callbacks a live controller gives the server.
 *
 * http.h includes this header, so callers see these with the server's
 * functions; the server's own files (http_state.h) include it without
 * http.h, so that the server's shared state does not depend on the module
 * that uses it.
 */
#ifndef STEPSCOPE_HTTP_TYPES_H
#define STEPSCOPE_HTTP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "live.h"

typedef struct ss_http ss_http;

#define SS_HTTP_DEFAULT_PORT 8470
#define SS_HTTP_MAX_CONNECTIONS 1024   /* open at once, all clients */
#define SS_HTTP_MAX_PER_ADDRESS 64     /* from one non-loopback address */
#define SS_HTTP_REQUEST_TIMEOUT_MS 10000
#define SS_HTTP_IDLE_TIMEOUT_S 30
#define SS_HTTP_WORKERS 4              /* threads serving requests */
#define SS_HTTP_BUILDERS 8             /* threads building documents */
#define SS_HTTP_SLOW_BUILDERS 6        /* of them, for the slow documents */

/* One file served as is, e.g. {"/", "text/html; charset=utf-8", page,
 * sizeof page - 1}.  PATH starts with '/'. */
typedef struct {
    const char *path;
    const char *content_type;
    const unsigned char *data;
    size_t len;
} ss_static_file;

/*
 * Answers POST /api/runs/{id}/stacks[?native=1][&ranks=0] (docs/debug.md):
 * the live controller collects every rank's stacks and appends the JSON
 * document to OUT.  FLAGS: SS_HTTP_STACKS_NATIVE (native frames too),
 * SS_HTTP_STACKS_BRIEF (the document without its "ranks" array).  Called
 * on an HTTP builder thread, which it blocks until the answer (a bounded
 * wait: the collector's deadline).  Returns the HTTP status: 200 with the
 * document, else with a one-line reason in OUT (not JSON; the server
 * wraps it).
 */
#define SS_HTTP_STACKS_NATIVE 1
#define SS_HTTP_STACKS_BRIEF 2
typedef unsigned (*ss_http_stacks_fn)(void *ctx, int flags, ss_buf *out);

/*
 * Answers /api/runs/{id}/profile (docs/debug.md#profiling): START 1 for
 * POST ?ranks=LIST&seconds=S, 0 for GET ?request=N; the query values are
 * NULL when absent.  Called on an HTTP builder thread, which it may block
 * for about a second.  Appends the JSON document to OUT and returns the
 * HTTP status (200, 202), or another status with a one-line reason in OUT
 * (not JSON; the server wraps it).
 */
typedef unsigned (*ss_http_profile_fn)(void *ctx, int start,
                                       const char *ranks,
                                       const char *seconds,
                                       const char *request, ss_buf *out);

/*
 * Answers GET /api/runs/{id}/recent?rank=R&steps=N (docs/api.md): the
 * live run's rank RANK's latest STEPS steps, from node 0's rows or its
 * node's agent.  Called on an HTTP builder thread, which it blocks for a
 * few seconds at most.  Appends the JSON object to OUT and returns 200,
 * or another status with a one-line reason in OUT (not JSON; the server
 * wraps it).
 */
#define SS_HTTP_RECENT_DEFAULT_STEPS 64
#define SS_HTTP_RECENT_MAX_STEPS 1024 /* the link's LINK_MAX_RECENT_STEPS */
typedef unsigned (*ss_http_recent_fn)(void *ctx, uint32_t rank,
                                      uint32_t steps, ss_buf *out);

#endif
