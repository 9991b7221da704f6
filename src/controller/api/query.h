/*
 * query.h - the store as the JSON documents of the HTTP API.
 *
 * The single place that turns stored data into API JSON (docs/api.md is the
 * contract).  The HTTP server (http.c) calls it from its threads, and
 * `stepscope report --html` calls it in-process to embed the same documents
 * in a page.  Each ss_query reads through one store reader (reader.h), a
 * read-only SQLite connection: use one per thread (a connection is not
 * shared between threads at once).  In WAL mode it reads while the
 * controller's writer thread writes; it sees what the writer has committed
 * (every 250 ms), never a half-written step.
 *
 * Conventions (those of docs/report-json.md): durations in fields ending
 * _ms are milliseconds with 3 decimals, sizes in _bytes are bytes, times
 * are ISO 8601 UTC strings; a value that was not measured is null, never 0.
 * Strings are escaped per RFC 8259, invalid UTF-8 becomes U+FFFD.
 *
 * Every document function appends one JSON object to OUT and returns 0; or
 * SS_QUERY_NOT_FOUND when the run (or attempt) does not exist; or
 * SS_QUERY_ERROR with a one-line reason in ERR when the store cannot be read
 * or memory runs out.  On error OUT may hold a partial document: the caller
 * discards it.  LIVE may be NULL (a stored run only); when LIVE is the live
 * state of RUN_ID, live-only fields (current phase, last heard, live flag)
 * come from it.
 */
#ifndef STEPSCOPE_QUERY_H
#define STEPSCOPE_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "live.h"
#include "model.h"
#include "reader.h"

/* ---- the connection ---- */

#define SS_QUERY_NOT_FOUND (-2)
#define SS_QUERY_ERROR (-1)

typedef struct ss_query ss_query;

/* Opens the store at PATH read-only (never creates or migrates it).
 * Returns NULL with a one-line reason in ERR (no file, not a store, newer
 * schema...).  Close with ss_query_close (NULL is a no-op). */
ss_query *ss_query_open(const char *path, char *err, size_t errlen);
void ss_query_close(ss_query *q);

/* ---- documents (docs/api.md) ---- */

/* {"runs":[{id, uuid, name, status, world_size, started_at, ended_at,
 * steps, findings, live}, ...]}, oldest first. */
int ss_query_runs(ss_query *q, ss_live *live, ss_buf *out, char *err,
                  size_t errlen);

/* {"run":{... as in runs, + command, exit_code, host, attempt, attempts},
 *  "summary":{"steps":N,"step_ms":{"median_rank":{p50,p90,p99},
 *  "worst_rank":{p50,p90,p99}}}} for the run's latest attempt (or ATTEMPT
 * when >= 0). */
int ss_query_run(ss_query *q, int64_t run_id, int64_t attempt, ss_live *live,
                 ss_buf *out, char *err, size_t errlen);

/* A window of steps.  FROM, TO: -1 when not given.  With FROM: the first
 * LIMIT steps at or after FROM (and at or below TO); without: the last
 * LIMIT steps at or below TO (the latest when TO is -1).  Always returned
 * in ascending step order. */
typedef struct {
    int64_t attempt; /* -1: the latest */
    int64_t from, to;
    int64_t limit;   /* 1 .. SS_QUERY_MAX_STEPS */
} ss_query_range;

#define SS_QUERY_DEFAULT_STEPS 500
#define SS_QUERY_MAX_STEPS 10000
#define SS_QUERY_MAX_CELLS 1000000 /* heatmap: ranks x steps */
#define SS_QUERY_HEAT_PHASES 6     /* heatmap: phases with self time */

/* {"steps":[{step, n_present, missing_ranks, step_ms:{min,median,p90,max,
 * worst_rank}, phases:{NAME:{min,median,p90,max,worst_rank}}, syncs:{NAME:
 * {skew_ms,late_ms,worst_rank}}, rss_bytes:{median,max,worst_rank},
 * device_bytes:{...}}, ...]} */
int ss_query_steps(ss_query *q, int64_t run_id, const ss_query_range *r,
                   ss_buf *out, char *err, size_t errlen);

/*
 * The same document in pages, so that a server can send a large window
 * while holding one page of it in memory (http.c streams /steps so).
 * ss_query_steps_start resolves the window of R for RUN_ID into *CUR
 * (0, SS_QUERY_NOT_FOUND or SS_QUERY_ERROR, as ss_query_steps).  Each
 * ss_query_steps_page then appends the next at most MAX_STEPS elements of
 * "steps" (comma-separated, a leading comma after the first page; the
 * caller writes {"steps":[ before and ]} after) and returns how many, 0
 * once the window is done, or SS_QUERY_ERROR.  Pages may use different
 * connections (Q) and read transactions: a window given by FROM may end
 * with steps committed while it is sent; one without FROM is fixed when
 * started.  Concatenated, the pages are what ss_query_steps returns for
 * the same window of a store that does not change.
 */
typedef struct {
    int64_t run_id, attempt;
    int64_t next;  /* the first step of the next page */
    int64_t last;  /* the window's last step (INT64_MAX: open) */
    int64_t left;  /* at most this many steps still to send */
    int64_t sent;  /* steps appended so far */
} ss_query_steps_cursor;

int ss_query_steps_start(ss_query *q, int64_t run_id,
                         const ss_query_range *r, ss_query_steps_cursor *cur,
                         char *err, size_t errlen);
int ss_query_steps_page(ss_query *q, ss_query_steps_cursor *cur,
                        int64_t max_steps, ss_buf *out, char *err,
                        size_t errlen);

/* [{"steps":[...]}, ...]: every step of the attempt (-1: the latest), as
 * steps documents of SS_QUERY_MAX_STEPS steps each but the last; what
 * GET .../steps?from=F&limit=SS_QUERY_MAX_STEPS returns page after page
 * (one empty document when there is no step). */
int ss_query_step_pages(ss_query *q, int64_t run_id, int64_t attempt,
                        ss_buf *out, char *err, size_t errlen);

/* {"ranks":[0..],"steps":[...],"step_ms":[[...per step...] per rank],
 * "late_ms":[[...]],"phase_self_ms":{NAME:[[...]]}} from the kept
 * rank-step rows (retention: docs/store.md); null where a rank has no row
 * for a step (or did not report that value).  late_ms: the rank's arrival
 * at the step's first sync point (time after its step began) less the
 * median rank's; phase_self_ms: each phase's self time (its time where no
 * self time was recorded), the first SS_QUERY_HEAT_PHASES phase names met.
 * LIMIT is lowered so ranks x steps x (2 + SS_QUERY_HEAT_PHASES) stays
 * within SS_QUERY_MAX_CELLS. */
int ss_query_heatmap(ss_query *q, int64_t run_id, const ss_query_range *r,
                     ss_buf *out, char *err, size_t errlen);

/* {"ranks":[0..],"steps":[...],"runq_ms":[[...]],"stopped_ms":[[...]],
 * "cpu_ms":[[...]],"throttled_ms":[[...]]}: per rank (outer) and step
 * (inner), what the host saw of the rank's process tree in that step, as
 * the store kept it; null where a rank has no host evidence for a step.
 * The steps and their limit are those of ss_query_heatmap. */
int ss_query_host(ss_query *q, int64_t run_id, const ss_query_range *r,
                  ss_buf *out, char *err, size_t errlen);

/* {"ranks":[{rank, state, host, pid, last_step, phase, last_heard_s,
 * exit_code, signal, median_step_ms, max_rss_bytes, dropped_events,
 * dropped_records, current_step, phase_s}]}, one per rank 0..world-1. */
int ss_query_ranks(ss_query *q, int64_t run_id, int64_t attempt,
                   ss_live *live, ss_buf *out, char *err, size_t errlen);

/* {"agents":N,"nodes":[...]}: the nodes of a multi-node run's attempt, by
 * node rank (ss_query_node_object), and how many agents that is; none
 * for a single-node run recorded without its node 0, or a store before
 * schema version 9. */
int ss_query_nodes(ss_query *q, int64_t run_id, int64_t attempt,
                   ss_buf *out, char *err, size_t errlen);

/* Appends node N as the object of docs/api.md and docs/report-json.md:
 * {"node","host","addr","first_rank","nranks","state","joined_at",
 * "ended_at","clock_offset_ms","clock_bound_ms","lost_reason",
 * "lost_at_step"}, unknowns null. */
void ss_query_node_object(ss_buf *out, const ss_node_row *n);

/* {"findings":[...as in report --json...]}: critical first, then by
 * first_step. */
int ss_query_findings(ss_query *q, int64_t run_id, int64_t attempt,
                      ss_buf *out, char *err, size_t errlen);

/* {"goodput": {...}}: the run's goodput (every attempt; a running run
 * up to NOW), the object of docs/report-json.md.  With METRICS, its
 * Prometheus lines instead (goodput_out.h). */
int ss_query_goodput(ss_query *q, int64_t run_id, ss_wall_ns now,
                     int metrics, ss_buf *out, char *err, size_t errlen);

/* {"events":[{id, at, kind, rank, message}]}: the run's events with id >
 * AFTER, ascending, at most LIMIT (1 .. SS_QUERY_MAX_EVENTS). */
#define SS_QUERY_DEFAULT_EVENTS 1000
#define SS_QUERY_MAX_EVENTS 10000
int ss_query_events(ss_query *q, int64_t run_id, int64_t after, int64_t limit,
                    ss_buf *out, char *err, size_t errlen);

/*
 * {"name", "run_id", "verdict":"ok"|"regression"|"cannot_judge", "reason",
 *  "baseline":[ids], "left_out", "runs":[{id, started_at, status, steps}],
 *  "metrics":[{name, unit, worse, values:[one per run], change_points:[run
 *  ids], verdict, baseline, relative, relative_low, relative_high, p,
 *  since_run}]}: what `stepscope guard` judges of run RUN_ID (or, when
 * RUN_ID is 0, of the latest run named NAME) against the comparable runs
 * before it, with the history of at most LAST comparable runs (oldest
 * first, the judged run last).  METRIC (NULL: all) is a metric name or a
 * prefix ending in '.'.  SS_QUERY_NOT_FOUND: no such run or name.
 */
#define SS_QUERY_DEFAULT_HISTORY 50
#define SS_QUERY_MAX_HISTORY 1000
typedef struct {
    int64_t run_id;     /* > 0, or 0: the latest run named NAME */
    const char *name;
    const char *metric; /* NULL: every metric */
    int64_t last;       /* 1 .. SS_QUERY_MAX_HISTORY */
} ss_query_history_args;
int ss_query_history(ss_query *q, const ss_query_history_args *a,
                     ss_buf *out, char *err, size_t errlen);

/* ---- two runs compared (run_diff.h) ---- */

/* The comparison of runs RUN_A and RUN_B of this store with their mean
 * loss series: the document of `stepscope diff --json` plus "series"
 * (docs/api.md, GET /api/diff).  SS_QUERY_NOT_FOUND: no such run. */
int ss_query_diff(ss_query *q, int64_t run_a, int64_t run_b, ss_buf *out,
                  char *err, size_t errlen);

/* ---- vectors (ss_values) ---- */

/* Appends vector name row V as the object of docs/api.md and
 * docs/report-json.md: {"name","ranks":[...],"first_step","last_step",
 * "steps","rows","max_n","truncated","labels":[...] or null}. */
void ss_query_values_name_object(ss_buf *out, const ss_values_name_row *v);
/* The same fields without the braces (to add more to the object). */
void ss_query_values_name_fields(ss_buf *out, const ss_values_name_row *v);

/* {"attempt":A,"dropped_vectors":N,"values":[name objects]}: the vector
 * names of the attempt (-1: the latest), by name; none (also in a store
 * from before vectors) is an empty list, dropped_vectors null there. */
int ss_query_values(ss_query *q, int64_t run_id, int64_t attempt,
                    ss_buf *out, char *err, size_t errlen);

/* The cell cap of one vector document (elements), and its default. */
#define SS_QUERY_DEFAULT_VALUE_CELLS 65536
#define SS_QUERY_MAX_VALUE_CELLS 1048576

/* Which values of one vector name (docs/api.md): RANK >= 0 for that
 * rank's vectors (index x step), or INDEX >= 0 for element INDEX over the
 * ranks (rank x step), not both; steps FROM..TO (-1: open); at most
 * LIMIT cells (1..SS_QUERY_MAX_VALUE_CELLS), whole steps, at least one. */
typedef struct {
    int64_t attempt; /* -1: the latest */
    const char *name;
    int64_t rank, index;
    int64_t from, to;
    int64_t limit;
} ss_query_values_args;

/*
 * {"name","attempt","rank" or "index","cells","more","next_from",
 *  "steps":[{"step","truncated","values":[...]}]} by rank, or
 *  "steps":[{"step","ranks":[...],"values":[...]}] by index (values[i] of
 *  ranks[i]; null where the rank's vector is shorter).  Values as
 *  ss_buf_json_value: NaN and infinities as "nan", "inf", "-inf".  A name
 *  with nothing recorded is an empty list.  SS_QUERY_ERROR when A sets
 *  neither or both of rank and index (ERR says so).
 */
int ss_query_value_series(ss_query *q, int64_t run_id,
                          const ss_query_values_args *a, ss_buf *out,
                          char *err, size_t errlen);

/*
 * The vectors of a page that cannot ask for more (`report --html`):
 * {"list": the /values document, "series": [for each of the first
 * MAX_NAMES names: its first rank's vectors (as /values/{name}?rank=R)
 * and index 0 over the ranks (?index=0), over its latest STEPS kept
 * steps, each under the default cell cap]}.
 */
int ss_query_values_embed(ss_query *q, int64_t run_id, int64_t attempt,
                          size_t max_names, int64_t steps, ss_buf *out,
                          char *err, size_t errlen);

#endif
