/*
 * http_state.h - what the HTTP server's files share: the server handle
 * and the internal functions one file offers the others.
 *
 * The files of the server (http.h is its public face), in the order a
 * request goes through them:
 *   http.c            starting and stopping; the gate's wiring to the
 *                     libmicrohttpd workers; a request's front door
 *                     (method, Host, Origin, token, static files)
 *   http_addr.c       addresses, authorization, the Host and Origin checks
 *   http_args.c       query arguments (and the path's percent-decoding)
 *   http_build.c      the builders: documents built off the workers,
 *                     their answers captured and queued by the worker
 *   http_routes.c     the /api/... documents: which one a path names, its
 *                     arguments, built from the store
 *   http_steps.c      the /steps document, streamed in pages
 *   http_stream.c     the event stream of a live run
 *   http_metrics.c    the Prometheus /metrics text
 *   http_pool.c       the pool of read-only store connections
 *   http_reply.c      answering: documents, errors, the large-document
 *                     limit, static files
 *   http_live_file.c  the live-run file other commands find the server by
 * Only these files include this header; everything else sees http.h.
 *
 * Threads: the fields above `mu` are set before the workers start and read
 * only afterwards (except where a field says otherwise); `mu` guards the
 * ones below it.
 */
#ifndef STEPSCOPE_HTTP_STATE_H
#define STEPSCOPE_HTTP_STATE_H

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "clocks.h"
#include "http_gate.h"
#include "http_types.h"
#include "json.h"
#include "live.h"
#include "query.h"

#define POOL_MAX 8 /* idle store connections kept */
#define JSON_TYPE "application/json; charset=utf-8"

typedef struct stream stream; /* an open event stream (http_stream.c) */
typedef struct build_job build_job; /* a request a builder answers */

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
    ss_http_recent_fn recent;
    void *recent_ctx;
    unsigned max_conns;
    unsigned next_worker;     /* gate thread only */
    int stopping;             /* atomic */
    pthread_t builders[SS_HTTP_BUILDERS];
    int n_builders;           /* started; read by workers under mu */
    pthread_cond_t build_cv;  /* a job queued, or stopping (with mu) */
    pthread_mutex_t mu;       /* guards everything below */
    build_job *build_queue, *build_tail; /* waiting for a builder */
    int slow_building;        /* SS_ROUTE_SLOW requests being built */
    ss_query *pool[POOL_MAX];
    int n_pool;
    stream *streams;          /* open event streams */
    unsigned large_docs;      /* large documents being sent */
    const ss_static_file *files;
    size_t n_files;
    ss_buf goodput_metrics;   /* the live run's, from the store */
    ss_mono_ns goodput_at;    /* when computed; 0: never */
};

/* ---- the pool of store connections (http_pool.c) ---- */

/* A read-only store connection for H's store: an idle one from the pool,
 * else a new one.  Returns NULL with a reason in ERR when the store cannot
 * be opened.  Give it back with ss__http_pool_put. */
ss_query *ss__http_pool_get(ss_http *h, char *err, size_t errlen);

/* Returns Q (from ss__http_pool_get) to the pool, or closes it when the
 * pool holds POOL_MAX already. */
void ss__http_pool_put(ss_http *h, ss_query *q);

/* ---- the builders (http_build.c) ---- */

/* Starts the builder threads.  Returns 0, or -1 when one could not start
 * (those started run until ss__http_builders_stop). */
int ss__http_builders_start(ss_http *h);

/* Sets h->stopping, answers the queued requests 503, waits for the
 * builders to finish what they build, and ends them.  Call before the
 * workers stop (also when the builders never started). */
void ss__http_builders_stop(ss_http *h);

/* From the worker's request handler: suspends C and queues its request
 * (PATH, the method as HEAD and POST, METRICS for /metrics rather than
 * /api/..., SLOW for an SS_ROUTE_SLOW path) for a builder; *CON_CLS
 * becomes the job.  Returns 0, or -1 (the server stops, no memory, a path
 * over 511 bytes): answer it on the worker instead. */
int ss__http_build_submit(ss_http *h, struct MHD_Connection *c,
                          const char *path, int head, int post, int metrics,
                          int slow, void **con_cls);

/* From the worker's request handler, called again once J's connection is
 * resumed: queues the answer the builder captured.  J stays the caller's
 * (ss__http_build_free). */
enum MHD_Result ss__http_build_answer(ss_http *h, build_job *j);

/* Frees J and an answer it still holds (NULL is a no-op). */
void ss__http_build_free(build_job *j);

/* Queues response R (taken over) with STATUS on C; on a builder that
 * builds C's request, captures it for the worker instead.  Every answer
 * goes through here. */
enum MHD_Result ss__http_queue(struct MHD_Connection *c, unsigned status,
                               struct MHD_Response *r);

/* ---- answering (http_reply.c) ---- */

/* Queues BODY (taken over, freed by libmicrohttpd) with STATUS and content
 * type TYPE, never cached; a 405 carries Allow, a 401 WWW-Authenticate.
 * Returns libmicrohttpd's answer (MHD_NO: close the connection). */
enum MHD_Result ss__http_reply(struct MHD_Connection *c, unsigned status,
                               const char *type, ss_buf *body);

/* Answers STATUS with the JSON document {"error": MESSAGE}, MESSAGE made
 * from FMT (at most 599 bytes). */
enum MHD_Result ss__http_reply_error(struct MHD_Connection *c,
                                     unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answers 200 with the JSON document BODY (taken over).  Large ones are
 * sent a few at a time, over that 503 (http_reply.c). */
enum MHD_Result ss__http_reply_document(ss_http *h, struct MHD_Connection *c,
                                        ss_buf *body);

/* Answers 200 with the static file F (not copied; cached with
 * revalidation). */
enum MHD_Result ss__http_reply_static(struct MHD_Connection *c,
                                      const ss_static_file *f);

/* ---- query arguments (http_args.c) ---- */

/* libmicrohttpd's unescape callback: percent-decodes S in place, keeping
 * "%00" as it is.  Returns the new length. */
size_t ss__http_unescape_keeping_nul(void *cls, struct MHD_Connection *c,
                                     char *s);

/* Reads argument NAME as an integer in [MIN, MAX] into *OUT (left as is
 * when absent).  Returns 0, or -1 after answering 400 (into *RET). */
int ss__http_arg_i64(struct MHD_Connection *c, const char *name,
                     int64_t min, int64_t max, int64_t *out,
                     enum MHD_Result *ret);

/* Reads text argument NAME into *OUT (left as is when absent).  Returns 0,
 * or -1 after answering 400 (into *RET) when it is empty, too long or
 * holds %00. */
int ss__http_arg_text(struct MHD_Connection *c, const char *name,
                      const char **out, enum MHD_Result *ret);

/* ---- streamed answers (http_stream.c, http_steps.c) ---- */

/* Answers 200 with the live run's event stream (text/event-stream) until
 * the run ends or the server stops.  H->live must be set. */
enum MHD_Result ss__http_serve_stream(ss_http *h, struct MHD_Connection *c);

/* Resumes every parked event stream; they look for notifications again.
 * Called with h->mu held. */
void ss__http_streams_wake_locked(ss_http *h);

/* Answers 200 with the steps of window CUR (already started), generated
 * page by page while it is sent. */
enum MHD_Result ss__http_serve_steps(ss_http *h, struct MHD_Connection *c,
                                     const ss_query_steps_cursor *cur);

/* ---- documents (http_routes.c, http_metrics.c) ---- */

/* What answering an /api/... path costs, for who answers it. */
typedef enum {
    SS_ROUTE_AT_ONCE, /* from memory: the worker answers it */
    SS_ROUTE_BUILT,   /* from the store, milliseconds: a builder */
    SS_ROUTE_SLOW,    /* a window of steps, or asked of the ranks: seconds
                         at worst; a builder, but not the last ones */
} ss_http_route_cost;

/* The cost of answering PATH (no trailing '/'; any path, valid or not). */
ss_http_route_cost ss__http_route_cost(const char *path);

/* Answers the /api/... path PATH (no trailing '/'), already authorized;
 * HEAD and POST say the method. */
enum MHD_Result ss__http_serve_api(ss_http *h, struct MHD_Connection *c,
                                   const char *path, int head, int post);

/* Answers /metrics: the server's own counters, and the live run's. */
enum MHD_Result ss__http_serve_metrics(ss_http *h, struct MHD_Connection *c);

#endif
