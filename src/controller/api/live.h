/*
 * live.h - what the controller knows right now about the run it drives.
 *
 * The store (store.h) is the record; it lags by up to one flush interval
 * and does not hold what is only true "now": which phase a rank is in, when
 * it was last heard from, the latest finalized step.  ss_live holds exactly
 * that, for one run, behind one mutex:
 *
 *   - writers: run.c on the controller's loop thread, from its ingest,
 *     launcher and aggregator callbacks (every setter is O(1) or O(phases)
 *     and never blocks on I/O);
 *   - readers: the HTTP server's threads (http.c, query.c), through the
 *     snapshot functions below, which copy under the lock.
 *
 * It also keeps a bounded feed of recent notifications (finalized steps and
 * new or updated findings, already formatted as API JSON by objects.c) for
 * the server-sent event stream, and renders the Prometheus exposition
 * (/metrics).  Nothing here touches SQLite.
 *
 * Ranks are 0 .. world_size - 1; a setter given a rank out of range does
 * nothing.  Times are CLOCK_MONOTONIC nanoseconds of the controller's host.
 */
#ifndef STEPSCOPE_LIVE_H
#define STEPSCOPE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct ss_live ss_live;
struct ss_buf;

#define SS_LIVE_NAME_MAX 64    /* bytes of a phase name, with the NUL */
#define SS_LIVE_FEED_SIZE 1024 /* notifications kept for slow readers */

/* Creates the live state of run RUN_ID (the store's id) with WORLD_SIZE
 * ranks, all in state "starting".  Returns NULL when out of memory. */
ss_live *ss_live_create(int64_t run_id, uint32_t world_size);

/* Frees L.  No reader may hold it any more (stop the HTTP server first).
 * NULL is a no-op. */
void ss_live_destroy(ss_live *l);

/* ---- writers (the controller's loop thread) ---- */

/* The rank connected: its host and pid; state becomes "running". */
void ss_live_rank_hello(ss_live *l, uint32_t rank, const char *host,
                        int64_t pid);

/* A frame arrived from RANK now (any frame: step, counters, status...). */
void ss_live_rank_heard(ss_live *l, uint32_t rank);

/* RANK finished STEP (its step record arrived; it may not be finalized
 * yet).  Also marks the rank heard from. */
void ss_live_rank_step(ss_live *l, uint32_t rank, uint64_t step);

/* The rank's cumulative drop counters. */
void ss_live_rank_counters(ss_live *l, uint32_t rank, uint64_t dropped_events,
                           uint64_t dropped_records);

/* What RANK is doing now, from its STATUS frame: STEP is the step it is in
 * (-1 between steps), PHASE_OR_NULL the innermost open phase (NULL or ""
 * when none; copied, truncated to SS_LIVE_NAME_MAX - 1 bytes), SINCE the
 * CLOCK_MONOTONIC time that state began (0 when unknown).  Marks the rank
 * heard from. */
void ss_live_rank_status(ss_live *l, uint32_t rank, int64_t step,
                         const char *phase_or_null, ss_mono_ns since);

/* Shorthand for ss_live_rank_status(l, rank, <unchanged step>, phase, 0). */
void ss_live_rank_phase(ss_live *l, uint32_t rank, const char *phase_or_null);

/* What the host saw of RANK's process tree since the controller began
 * reading it (cumulative: CPU, run-queue delay, stopped and throttled time,
 * major faults...; fields SS_MISSING where unknown), for the per-rank host
 * metrics. */
void ss_live_rank_host(ss_live *l, uint32_t rank, const ss_host_step *totals);

/* The rank's state word, as in the store's ranks.state: "running",
 * "exited", "failed", "never_connected".  A rank leaving clears its phase. */
void ss_live_rank_state(ss_live *l, uint32_t rank, const char *state);

/* The rank's process ended: EXIT_CODE (-1 when killed), TERM_SIGNAL (0
 * none).  Sets the state to "exited" (status 0) or "failed". */
void ss_live_rank_exit(ss_live *l, uint32_t rank, int64_t exit_code,
                       int term_signal);

/* A step was finalized (the aggregator's sink): keeps its statistics for
 * /metrics and the per-rank step time and RSS of that step, counts it, and
 * appends it to the feed when a stream reader is listening.  NAMES is the
 * run's name table (ss_step_view's indexes). */
void ss_live_step(ss_live *l, const ss_step_view *v, const char *const *names);

/* A finding was created or updated: counted by (kind, severity) for
 * /metrics and appended to the feed. */
void ss_live_finding(ss_live *l, const ss_finding *f);

/* The run ended (every rank left): /api/runs says "live": false from now
 * on, and stream readers are told to finish. */
void ss_live_finish(ss_live *l);

/* The run's next attempt began (a restart): ATTEMPT is shown, and every
 * rank is "starting" again with no pid, step or exit. */
void ss_live_attempt(ss_live *l, uint32_t attempt);

/* ---- readers (any thread) ---- */

int64_t ss_live_run_id(const ss_live *l);
uint32_t ss_live_world_size(const ss_live *l);
/* 1 while the run is going (before ss_live_finish), else 0. */
int ss_live_running(ss_live *l);
/* The current attempt (0 until a restart). */
uint32_t ss_live_get_attempt(ss_live *l);

/* A copy of one rank's live facts. */
typedef struct {
    char state[24];           /* "starting", "running", "exited", ... */
    char host[256];           /* "" until it connected */
    int64_t pid;              /* -1 unknown */
    int64_t last_step;        /* last step record received; -1 none */
    int64_t current_step;     /* from STATUS; -1 between steps or unknown */
    char phase[SS_LIVE_NAME_MAX]; /* current phase; "" none or unknown */
    double phase_s;           /* seconds in that state; < 0 unknown */
    double last_heard_s;      /* seconds since its last frame; < 0 never */
    int64_t exit_code;        /* -1 unknown or killed */
    int64_t term_signal;      /* 0 none, -1 unknown (still running) */
    int64_t dropped_events;   /* -1 never reported */
    int64_t dropped_records;  /* -1 never reported */
    int64_t step_ns;          /* in the latest finalized step; SS_MISSING */
    int64_t rss_bytes;        /* in the latest finalized step; SS_MISSING */
} ss_live_rank_info;

/* Copies RANK's facts into *OUT.  Returns 0, or -1 when RANK is out of
 * range. */
int ss_live_rank_get(ss_live *l, uint32_t rank, ss_live_rank_info *out);

/* ---- the notification feed (server-sent events) ---- */

/* A reader's position in the feed.  Zero-initialise, then call
 * ss_live_feed_join. */
typedef struct {
    uint64_t next; /* sequence number of the next notification to read */
} ss_live_cursor;

/* Registers a stream reader (notifications are only formatted while at
 * least one is registered) and positions C at the end of the feed.  Every
 * join must be paired with one ss_live_feed_leave. */
void ss_live_feed_join(ss_live *l, ss_live_cursor *c);
void ss_live_feed_leave(ss_live *l);

/*
 * Waits up to TIMEOUT_MS for notifications after C and appends them to OUT
 * as server-sent events ("event: step\ndata: {...}\n\n" or "event:
 * finding\n..."), advancing C.  A reader that fell more than
 * SS_LIVE_FEED_SIZE notifications behind gets one "event: lagged" with the
 * number skipped.  Returns the number of notifications appended (0 on
 * timeout), or -1 once the run has finished and C has read everything
 * (the stream should end), or -2 when out of memory.
 */
int ss_live_feed_wait(ss_live *l, ss_live_cursor *c, int timeout_ms,
                      struct ss_buf *out);

/* ---- Prometheus ---- */

/*
 * Appends the Prometheus text exposition (version 0.0.4) of the live run to
 * OUT: stepscope_step_seconds{run,stat}, stepscope_phase_seconds{run,phase,
 * stat}, stepscope_rank_* {run,rank}, stepscope_findings{run,kind,severity}
 * and the counters documented in docs/api.md.  Returns 0 or -1 when out of
 * memory.
 */
int ss_live_metrics(ss_live *l, struct ss_buf *out);

#endif
