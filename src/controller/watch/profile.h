/*
 * profile.h - on-demand profiling of chosen ranks (docs/debug.md#profiling).
 *
 * `stepscope profile --ranks 2,5 --seconds 5` (through the HTTP API) asks
 * those ranks to run their profiler (torch.profiler in auto mode) for that
 * long.  The profiler sends each rank a COMMAND frame down its connection
 * (ingest.h; an agent carries it to a rank on another node unchanged),
 * records every rank's part of the request in the store (`profiles`), and
 * takes the ranks' PROFILE_DONE answers: the trace file's path, or why
 * there is none.  A rank that never announced the feature (not in auto
 * mode, or an older recorder) is answered "unsupported" at once, one not
 * connected "not_connected", and one that does not answer within the
 * duration plus SS_PROFILE_GRACE_MS "timeout".  One request runs at a
 * time.
 *
 * Threads: everything but ss_profiler_http runs on the controller's loop;
 * ss_profiler_http is called by an HTTP builder and hands the request to
 * the loop (uv_async), waiting at most about a second for it to be sent.
 */
#ifndef STEPSCOPE_PROFILE_H
#define STEPSCOPE_PROFILE_H

#include <stdint.h>
#include <uv.h>

#include "ingest.h"
#include "json.h"
#include "live.h"
#include "store.h"

#define SS_PROFILE_GRACE_MS 30000 /* answer wait beyond the duration */
#define SS_PROFILE_KEPT 16        /* requests remembered for status */

typedef struct ss_profiler ss_profiler;

typedef struct {
    uv_loop_t *loop;
    ss_ingest *ingest;  /* may be set later: ss_profiler_set_ingest */
    ss_store *store;  /* may be NULL: nothing stored */
    ss_live *live;    /* the ranks' hosts; may be NULL */
    int64_t run_id;
    uint32_t attempt;
    uint32_t world_size;
    const char *dir;  /* absolute: where the ranks write their traces */
} ss_profiler_config;

/* Starts the profiler on CFG->loop (CFG's strings copied).  Returns NULL
 * with a reason in ERR (out of memory, the directory cannot be made). */
ss_profiler *ss_profiler_start(const ss_profiler_config *cfg, char *err,
                               size_t errlen);

/* The ingest to send commands through (started after the profiler, which
 * the HTTP server needs first).  Loop thread. */
void ss_profiler_set_ingest(ss_profiler *p, ss_ingest *in);

/* The attempt the traces stored from now on belong to (a restart began
 * it).  Loop thread.  NULL is a no-op. */
void ss_profiler_set_attempt(ss_profiler *p, uint32_t attempt);

/* Stops answering (HTTP callers get 503 from now on) and closes the
 * profiler's handles on the loop.  Loop thread.  NULL is a no-op. */
void ss_profiler_close(ss_profiler *p);

/* Frees P, once the loop ran its close callbacks and no HTTP builder can
 * call in any more (the server stopped).  NULL is a no-op. */
void ss_profiler_free(ss_profiler *p);

/* RANK's answer (the ingest's on_profile_done).  Loop thread. */
void ss_profiler_on_done(ss_profiler *p, uint32_t rank,
                         const wire_profile_done *pd);

/*
 * The HTTP API's handler (http.h ss_http_profile_fn; CTX is the
 * profiler).  START 1: POST /api/runs/{id}/profile?ranks=LIST&seconds=S
 * starts a request (LIST like "2,5" or "0-3,7"; S in (0, 600]); 0: GET
 * ...?request=N tells how request N stands (0 or absent: the latest).
 * Appends the request's JSON document (docs/api.md) to OUT and returns
 * the HTTP status (202 started, 200 status), or another status with a
 * one-line reason in OUT: 400 bad arguments, 404 no such request, 409 a
 * request is still running, 503 the controller is ending.
 */
unsigned ss_profiler_http(void *ctx, int start, const char *ranks,
                          const char *seconds, const char *request,
                          ss_buf *out);

/* Parses a rank list ("2,5", "0-3,7") of ranks below WORLD into SEL
 * (WORLD bytes, 1 = chosen).  Returns the number chosen, or -1 with a
 * reason in ERR.  Exposed for tests. */
int ss_profile_parse_ranks(const char *text, uint32_t world, uint8_t *sel,
                           char *err, size_t errlen);

#endif
