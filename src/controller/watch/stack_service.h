/*
 * stack_service.h - every rank's stacks for the running controller
 * (docs/debug.md): the collector (stack_collect.h) over the run's ranks,
 * the stacks document (stack_doc.h), its snapshot in the store, and the
 * HTTP server's requests for it (through http_bridge.h).
 *
 * Life cycle, in run.c's order:
 *   ss_stack_service_new(loop)       before the HTTP server, which gets
 *                                    ss_stack_service_http as its hook;
 *   ss_stack_service_start(s, cfg)   once the ranks' directory, the store
 *                                    and the launcher exist;
 *   ss_stack_service_close(s)        before the loop's handles are closed:
 *                                    no request reaches the loop again
 *                                    (REMOTE's fetches must be ended by
 *                                    then, or end on the loop's last run);
 *   ss_stack_service_free(s)         after the HTTP server has stopped.
 */
#ifndef STEPSCOPE_STACK_SERVICE_H
#define STEPSCOPE_STACK_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "json.h"
#include "store.h"

typedef struct ss_stack_service ss_stack_service;

/* The pid of RANK's process now, 0 once it has exited. */
typedef pid_t (*ss_stack_pid_fn)(void *ctx, uint32_t rank);

/* What a remote fetch hands back, once: the N objects of the ranks after
 * node 0's, in rank order (freed when the callback returns). */
typedef void (*ss_stack_remote_done_cb)(void *done_ctx,
                                        const char *const *ranks, size_t n);

/*
 * Fetches the stacks of the ranks of the other nodes (remote_stacks.h):
 * their agents collect within DEADLINE_MS, and DONE is called exactly once
 * (perhaps before this returns) with world - nprocs objects, a placeholder
 * for each rank that did not answer.  Returns 0, or -1 with DONE never
 * called.
 */
typedef int (*ss_stack_remote_fn)(void *ctx, int native, uint32_t deadline_ms,
                                  ss_stack_remote_done_cb done,
                                  void *done_ctx);

typedef struct {
    const char *exe;       /* the stepscope executable (native helper) */
    const char *host;      /* this host's name, written into each rank */
    const char *stack_dir; /* where ranks write stack.RANK (the sockdir) */
    uint32_t nprocs;       /* this node's ranks: 0..nprocs-1 */
    uint32_t world;        /* every rank; > nprocs needs REMOTE */
    ss_stack_remote_fn remote; /* the ranks nprocs..world-1, or NULL */
    void *remote_ctx;
    ss_stack_pid_fn pid_of;
    void *pid_ctx;
    ss_store *store;       /* NULL: snapshots are not stored */
    int64_t run_id;
    uint32_t attempt;
} ss_stack_service_config;

/* Snapshots taken on request that the store keeps per run (every hang's
 * is kept). */
#define SS_STACK_SERVICE_MAX_STORED 32

/* The collectors' deadline with native frames (without:
 * SS_STACK_DEADLINE_MS_DEFAULT); other nodes get the same, and the
 * controller waits a little longer for their answers. */
#define SS_STACK_SERVICE_NATIVE_DEADLINE_MS 10000

/* A service on LOOP, not yet started (requests are refused until
 * ss_stack_service_start).  NULL when memory runs out. */
ss_stack_service *ss_stack_service_new(uv_loop_t *loop);

/* Starts collecting for CFG (copied).  Returns 0, or -1 with a reason in
 * ERR. */
int ss_stack_service_start(ss_stack_service *s,
                           const ss_stack_service_config *cfg, char *err,
                           size_t errlen);

/* The attempt the snapshots taken from now on belong to (a restart began
 * it).  Loop thread.  NULL: no-op. */
void ss_stack_service_set_attempt(ss_stack_service *s, uint32_t attempt);

/*
 * What ss_stack_service_capture hands its caller, on the loop's thread:
 * DOC, the stacks document (stack_doc.h) of LEN bytes, or NULL with a
 * one-line reason in WHY.
 */
typedef void (*ss_stack_capture_cb)(void *ctx, const char *doc, size_t len,
                                    const char *why);

/*
 * Captures the stacks of every rank of the run (with native frames when
 * NATIVE): this node's through the collector and, at the same time, the
 * other nodes' through REMOTE; then calls CB once on the loop's thread with the stacks document
 * (TRIGGER, "request", "hang", "nonfinite" or "divergence", is written
 * into it).  The
 * document is stored as a snapshot (stack_snapshots) for FINDING_ID (< 0:
 * none), so `report` shows it after the job: every one for a finding, the
 * first SS_STACK_SERVICE_MAX_STORED requests.  Loop thread only.  Returns 0, or
 * -1 with CB never called (not started, closed, too many requests
 * waiting, out of memory).
 */
int ss_stack_service_capture(ss_stack_service *s, int native,
                             const char *trigger, int64_t finding_id,
                             ss_stack_capture_cb cb, void *ctx);

/*
 * ss_http_stacks_fn (http.h) with CTX the service: runs on an HTTP builder
 * thread, hands the request to the loop and waits for the document (at
 * most 10 s, 30 s with SS_HTTP_STACKS_NATIVE in FLAGS; with
 * SS_HTTP_STACKS_BRIEF, the document without its "ranks", though the one
 * stored has them).  Returns the HTTP status.
 */
unsigned ss_stack_service_http(void *ctx, int flags, ss_buf *out);

/* Refuses new requests, answers those waiting (503) and ends the one
 * being collected (its ranks that did not answer: "the controller is
 * closing").  Call before closing the loop's handles.  NULL: no-op. */
void ss_stack_service_close(ss_stack_service *s);

/* Frees S once the HTTP server is stopped and the loop has run its close
 * callbacks.  NULL: no-op. */
void ss_stack_service_free(ss_stack_service *s);

#endif
