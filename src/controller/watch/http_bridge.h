/*
 * http_bridge.h - hands a request from one of the HTTP server's worker
 * threads to the controller's loop and waits, bounded, for its answer:
 * what the live controller's hooks (stacks: stack_service.h; a rank's
 * latest steps: recent_service.h) share.
 *
 * The workers never touch the loop: a call is queued under a mutex, an
 * async handle wakes the loop, which starts it through the bridge's START
 * hook; whoever answers it (on the loop, now or later) does so under the
 * mutex, and the worker, waiting on a condition variable with a deadline,
 * takes the answer.  A worker that gave up leaves its call to be freed
 * when it is answered, so every started call must be answered once.
 */
#ifndef STEPSCOPE_HTTP_BRIDGE_H
#define STEPSCOPE_HTTP_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "json.h"

typedef struct ss_http_bridge ss_http_bridge;
typedef struct ss_bridge_call ss_bridge_call;

/* Loop thread: begin CALL, whose arguments ss_bridge_call_args gives;
 * answer it now or later with ss_http_bridge_answer, exactly once. */
typedef void (*ss_bridge_start_fn)(void *ctx, ss_bridge_call *call);

/* A bridge to LOOP (its async handle never keeps the loop running).
 * NULL when memory runs out. */
ss_http_bridge *ss_http_bridge_new(uv_loop_t *loop, ss_bridge_start_fn start,
                                   void *ctx);

/*
 * Worker thread: queues a call with the ARGS_LEN bytes of ARGS (copied)
 * and waits up to WAIT_MS for its answer, which it appends to OUT.
 * Returns the answer's status; 503 when the bridge is closed ("the run is
 * ending"), 504 when the loop did not answer in time, 500 when memory ran
 * out, each with its one-line reason in OUT.
 */
unsigned ss_http_bridge_call(ss_http_bridge *b, const void *args,
                             size_t args_len, uint32_t wait_ms, ss_buf *out);

/* The arguments CALL was queued with. */
const void *ss_bridge_call_args(const ss_bridge_call *call);

/* Answers CALL with STATUS and the LEN bytes of BODY (its worker takes
 * them), or frees it when its worker gave up. */
void ss_http_bridge_answer(ss_http_bridge *b, ss_bridge_call *call,
                           unsigned status, const char *body, size_t len);

/* ss_http_bridge_answer with the text TEXT. */
void ss_http_bridge_answer_text(ss_http_bridge *b, ss_bridge_call *call,
                                unsigned status, const char *text);

/* Loop thread: refuses new calls, answers the queued ones (503, "the run
 * is ending") and closes the async handle.  Calls started are answered
 * by whoever holds them.  NULL: no-op. */
void ss_http_bridge_close(ss_http_bridge *b);

/* Frees B once the HTTP server is stopped and the loop has run its close
 * callbacks.  NULL: no-op. */
void ss_http_bridge_free(ss_http_bridge *b);

#endif
