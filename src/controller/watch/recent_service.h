/*
 * recent_service.h - one rank's latest steps for the running controller
 * (docs/multinode.md, "A rank's recent steps"; docs/api.md,
 * /api/runs/{id}/recent): node 0's ranks from the rows it keeps as their
 * records pass, every other node's from its agent (RECENT_REQ, answered by
 * RECENT_PART), asked from the HTTP server's builder threads through
 * http_bridge.h.
 *
 * Life cycle, in run.c's order:
 *   ss_recent_service_new(loop, cfg)  before the HTTP server, which gets
 *                                     ss_recent_service_http as its hook;
 *   ss_recent_service_close(s)        before the loop's handles are
 *                                     closed: what waits is answered 503;
 *   ss_recent_service_free(s)         after the HTTP server has stopped.
 */
#ifndef STEPSCOPE_RECENT_SERVICE_H
#define STEPSCOPE_RECENT_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "json.h"
#include "link_wire.h"
#include "model.h"

typedef struct ss_recent_service ss_recent_service;

/* Sends REQ to NODE's agent (its RECENT_PART frames go to
 * ss_recent_service_part).  Returns 0, or -1 with why it cannot be asked
 * in WHY ("node 2 was lost"). */
typedef int (*ss_recent_ask_fn)(void *ctx, uint32_t node,
                                const link_recent_req *req, char *why,
                                size_t whylen);

typedef struct {
    uint32_t nproc;   /* ranks per node; node 0's are 0..nproc-1 */
    uint32_t world;   /* every rank; > nproc needs ASK */
    ss_recent_ask_fn ask; /* the other nodes' agents, or NULL */
    void *ask_ctx;
    uint32_t wait_ms; /* for an agent's answer; 0: SS_RECENT_WAIT_MS */
} ss_recent_service_config;

#define SS_RECENT_WAIT_MS 3000
#define SS_RECENT_MAX_ANSWER (1u << 20) /* bytes of an agent's answer */

/* A service on LOOP for CFG (copied).  NULL when memory runs out. */
ss_recent_service *ss_recent_service_new(uv_loop_t *loop,
                                         const ss_recent_service_config *cfg);

/* Node 0's rank RANK's record REC of ATTEMPT, phase names indexed by
 * NAMES (the run's table).  Loop thread.  NULL S, or a rank of another
 * node: no-op. */
void ss_recent_service_record(ss_recent_service *s, uint32_t rank,
                              uint32_t attempt, const ss_step_record *rec,
                              const char *const *names);

/* A chunk of NODE's answer (RECENT_PART).  Loop thread.  Chunks of
 * requests no longer waited for are dropped. */
void ss_recent_service_part(ss_recent_service *s, uint32_t node,
                            const link_recent_part *p);

/*
 * The HTTP hook (http_types.h, ss_http_recent_fn) with CTX the service:
 * runs on an HTTP builder thread, hands the request for RANK's latest
 * STEPS (1 to LINK_MAX_RECENT_STEPS) rows to the loop and waits for the answer (at most the agent's
 * wait and a second more).  Appends the JSON object (recent_rows.h's,
 * with "node" and "from" first) to OUT and returns 200; else another
 * status with a one-line reason in OUT.
 */
unsigned ss_recent_service_http(void *ctx, uint32_t rank, uint32_t steps,
                                ss_buf *out);

/* Refuses new requests and answers those waiting (503).  NULL: no-op. */
void ss_recent_service_close(ss_recent_service *s);

/* Frees S once the HTTP server is stopped and the loop has run its close
 * callbacks.  NULL: no-op. */
void ss_recent_service_free(ss_recent_service *s);

#endif
