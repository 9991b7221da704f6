/*
 * reader.h - the one way to read the store: an opaque, read-only reader
 * with typed loaders.
 *
 * Every view reads the store through this header (report, trace, top, the
 * HTTP documents, the HTML report, the regression guardrail); none of them
 * sees SQL.  The writer (store.h) is the only code that changes a store.
 *
 * Guarantees:
 *  - A reader never writes.  It opens the file with SQLITE_OPEN_READONLY
 *    (URI mode=ro), never creates it and never migrates it, so it works
 *    for a user who may read but not write the store, and on a read-only
 *    file system (docs/store.md, "Reading").
 *  - A store written by an older stepscope is read as it is: a column a
 *    later schema version added reads as missing.  A store too old to read
 *    (or too new) is refused with a message that says what to run
 *    (`stepscope upgrade --db PATH`) or to upgrade stepscope.
 *  - In WAL mode a reader sees what the writer has committed (every flush
 *    interval), never a half-written step.
 *
 * Conventions: one reader is one SQLite connection; use it from one thread
 * at a time (open one per thread).  Every loader returns 0 on success,
 * SS_READ_NOT_FOUND when the run does not exist (ss_reader_attempt: or the
 * attempt; loaders given an attempt do not check it: one with nothing
 * recorded reads as empty), or SS_READ_ERROR when the store cannot be read
 * or memory runs out; on both
 * errors ss_reader_errmsg() says why in one line (for NOT_FOUND, a line
 * fit for the user: "no run 'x' in PATH; `stepscope runs` lists them").
 * What a loader returns is plain C data owned by the caller, freed with
 * the matching *_free function (NULL / zeroed is a no-op); on error the
 * outputs are left empty.  Integers that were not measured are SS_MISSING
 * (model.h), never 0; strings that are NULL in the store are NULL.
 * Durations are nanoseconds, wall times ss_wall_ns.
 */
#ifndef STEPSCOPE_READER_H
#define STEPSCOPE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define SS_READ_ERROR (-1)
#define SS_READ_NOT_FOUND (-2)

/* A damaged world_size must not exhaust memory: per-rank arrays stop
 * here. */
#define SS_READ_MAX_RANKS (1 << 20)

typedef struct ss_reader ss_reader;

/* ---- opening ---- */

/*
 * Opens the store at PATH (NULL: ss_store_default_path()) for reading.
 * Returns NULL with a one-line reason in ERR when there is no store (the
 * line says that `stepscope run` creates one), PATH is not a stepscope
 * store, is corrupt, is from a newer stepscope, or is too old to read
 * without `stepscope upgrade`.  Close with ss_reader_close.
 */
ss_reader *ss_reader_open(const char *path, char *err, size_t errlen);

/* Closes R and frees it; NULL is a no-op. */
void ss_reader_close(ss_reader *r);

/* The path R was opened from (for messages and the JSON "db" field). */
const char *ss_reader_path(const ss_reader *r);

/* The schema version of the store as it is on disk (store_schema.h). */
int ss_reader_schema_version(const ss_reader *r);

/* Why the last loader on R failed; "" when none did.  Valid until the
 * next call on R. */
const char *ss_reader_errmsg(const ss_reader *r);

/* Calls TICK(ARG) now and then while a long query runs (a progress line);
 * TICK NULL removes it. */
void ss_reader_set_progress(ss_reader *r, void (*tick)(void *arg),
                            void *arg);

/* ---- runs ---- */

typedef struct {
    int64_t id;
    char *uuid, *name, *command, *host, *status;
    int64_t world_size, exit_code;
    ss_wall_ns started_at, ended_at;
    int64_t dropped_events, dropped_records; /* the ranks' totals at the end */
    int64_t dropped_rank_steps;              /* dropped by the store */
    /* vectors (ss_values) lost: refused at the store's full queue, and
     * at the run's end those the ranks, the ingest and the aggregator
     * dropped (docs/store.md#vectors); SS_MISSING before schema 13 */
    int64_t dropped_vectors;
    int64_t steps, findings; /* finalized steps and findings, all attempts */
} ss_run_row;

/* Every run, oldest first, into *RUNS (*N of them; none is not an error). */
int ss_reader_runs(ss_reader *r, ss_run_row **runs, size_t *n);

/* Run RUN_ID into *RUN.  SS_READ_NOT_FOUND when there is none. */
int ss_reader_run(ss_reader *r, int64_t run_id, ss_run_row *run);

/* Frees the strings of RUN and zeroes it. */
void ss_run_row_clear(ss_run_row *run);
/* Frees RUNS[0..N) and the array. */
void ss_run_rows_free(ss_run_row *runs, size_t n);

/*
 * The run SPEC names, into *RUN_ID.  SPEC is a numeric run id, a run name
 * (the latest run of that name) or a prefix of a run's uuid, tried in that
 * order; NULL names the latest run.  Returns SS_READ_NOT_FOUND when the
 * store has no runs, no such run, or an ambiguous uuid prefix (the message
 * says which, naming the store), SS_READ_ERROR when it cannot be read.
 */
int ss_reader_select_run(ss_reader *r, const char *spec, int64_t *run_id);

/* ---- attempts ---- */

/* One attempt (docs/fault-tolerance.md): launched at started_at; the
 * rest is SS_MISSING ("" for cause) where not recorded, and in stores
 * older than schema version 11. */
typedef struct {
    int64_t attempt;
    ss_wall_ns started_at, ended_at;
    char cause[48]; /* why it ended: "completed", "rank_crash", ... */
    int64_t first_step, last_step; /* its first and last finalized step */
    int64_t resumed_from; /* the step of the checkpoint it resumed from */
} ss_attempt_row;

/* The attempts recorded for RUN_ID, in order.  NOT_FOUND: no such run. */
int ss_reader_attempts(ss_reader *r, int64_t run_id, ss_attempt_row **rows,
                       size_t *n);
void ss_attempt_rows_free(ss_attempt_row *rows);

/*
 * Resolves WANT (-1: the latest) to an attempt of RUN_ID.  The latest
 * attempt is the highest one anything was recorded for (attempts, steps,
 * ranks, findings), 0 when nothing was.  Stores it in *ATTEMPT and the
 * number of attempts (latest + 1) in *N_ATTEMPTS (may be NULL).  Returns
 * SS_READ_NOT_FOUND for no such run or "run N has no attempt M (attempts
 * 0 to L)".
 */
int ss_reader_attempt(ss_reader *r, int64_t run_id, int64_t want,
                      int64_t *attempt, int64_t *n_attempts);

/* ---- ranks ---- */

typedef struct {
    char *name;
    int64_t value;
} ss_named_i64;

typedef struct {
    int64_t rank;
    /* what the launcher knows (ranks table) */
    char *host, *state;
    int64_t pid, exit_code, term_signal;
    int64_t last_step; /* the later of the launcher's and the store's */
    int64_t dropped_events, dropped_records;
    /* names the run's full name table refused, and the values under them
     * that were dropped (SS_MISSING in stores older than schema 4) */
    int64_t names_over_limit, values_over_limit;
    /* over every step written (rank_totals), kept or not */
    int64_t steps, step_ns_n, step_ns_sum, step_ns_max;
    int64_t max_rss_bytes, max_device_bytes;
    /* over the kept rank-step rows at or after since_step (retention,
     * docs/store.md): nearest-rank p50 and p90 of the step time */
    int64_t median_step_ns, p90_step_ns, samples;
    /* with SS_RANKS_PHASE_MEDIANS: the nearest-rank p50 of each phase the
     * rank reported over the same rows, sorted by name; and of its self
     * time (the phase less the phases nested in it) over the rows that
     * carry self time (none in stores or from recorders without it) */
    ss_named_i64 *phase_median_ns;
    size_t n_phase_medians;
    ss_named_i64 *phase_self_median_ns;
    size_t n_phase_self_medians;
} ss_rank_row;

#define SS_RANKS_PHASE_MEDIANS 1u /* fill phase_median_ns */
#define SS_RANKS_NO_MEDIANS 2u    /* skip the medians (and their sort) */

/*
 * One row per rank 0 .. n-1 of the attempt, where n is the run's world size
 * or one more than the highest rank anything was recorded for, if higher
 * (at most SS_READ_MAX_RANKS).  Ranks nothing is known of have every value
 * missing.  Per-rank medians are over the kept rank-step rows with step >=
 * SINCE_STEP (0: all of them).  FLAGS: SS_RANKS_PHASE_MEDIANS, or
 * SS_RANKS_NO_MEDIANS for the rank facts alone (then every median is
 * missing).
 */
int ss_reader_ranks(ss_reader *r, int64_t run_id, int64_t attempt,
                    int64_t since_step, unsigned flags, ss_rank_row **rows,
                    size_t *n);
void ss_rank_rows_free(ss_rank_row *rows, size_t n);

/* ---- steps: the per-step statistics over ranks ---- */

/* The statistics of one phase in one step over the ranks that ran it: of
 * its time, and of its self time (the phase less the phases nested in it)
 * over the self_n ranks that reported one (0, every self_* SS_MISSING,
 * where none did or the store predates self time). */
typedef struct {
    uint32_t name; /* index into ss_steps.names */
    int64_t n, min, median, p90, max, worst_rank;
    int64_t self_n, self_min, self_median, self_p90, self_max;
    int64_t self_worst_rank;
} ss_step_phase;

/* Arrival at one sync point in one step: skew = last - first, late =
 * last - median; worst_rank arrived last. */
typedef struct {
    uint32_t name; /* index into ss_steps.names */
    int64_t n, skew_ns, late_ns, worst_rank;
} ss_step_sync;

typedef struct {
    int64_t step;
    ss_wall_ns finalized_at;
    int64_t world_size, n_present, n_missing;
    int64_t *missing_ranks; /* n_missing_ranks entries, ascending */
    size_t n_missing_ranks;
    int64_t step_n, step_min, step_median, step_p90, step_max;
    int64_t step_worst_rank;
    int64_t rss_median, rss_max, rss_worst_rank;
    int64_t device_median, device_max, device_worst_rank;
    /* with SS_STEPS_PHASES / SS_STEPS_SYNCS: this step's entries of
     * ss_steps.phases / syncs, [phase0, phase0 + n_phases), by name */
    size_t phase0, n_phases, sync0, n_syncs;
} ss_step_row;

typedef struct {
    ss_step_row *steps; /* ascending by step */
    size_t n_steps;
    ss_step_phase *phases;
    size_t n_phases;
    ss_step_sync *syncs;
    size_t n_syncs;
    char **names; /* the phase and sync names the rows refer to */
    size_t n_names;
} ss_steps;

#define SS_STEPS_PHASES 1u
#define SS_STEPS_SYNCS 2u

/*
 * A window of steps of one attempt.  FROM, TO: -1 when not given.  With
 * FROM: the first LIMIT steps at or after FROM (and at or below TO);
 * without: the last LIMIT steps at or below TO (the latest when TO is -1).
 * LIMIT 0: no limit.
 */
typedef struct {
    int64_t from, to, limit;
} ss_step_window;

/* The steps of WINDOW (NULL: every step) of the attempt into *OUT, with
 * their phases and syncs as FLAGS asks (SS_STEPS_PHASES, SS_STEPS_SYNCS).
 * Free with ss_steps_free. */
int ss_reader_steps(ss_reader *r, int64_t run_id, int64_t attempt,
                    const ss_step_window *window, unsigned flags,
                    ss_steps *out);
void ss_steps_free(ss_steps *s);

/* Counts over every finalized step of the attempt, without loading them. */
typedef struct {
    int64_t steps;              /* finalized steps */
    int64_t first, last;        /* SS_MISSING when none */
    int64_t with_missing_ranks; /* steps some rank did not report */
} ss_step_counts;

int ss_reader_step_counts(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_step_counts *out);

/* ---- rank-steps: per rank per step, the kept rows (retention) ---- */

/* One phase of one rank in one step. */
typedef struct {
    uint32_t name;      /* index: ss_rank_steps_name() */
    int64_t total_ns;   /* summed over the step */
    int64_t start_ns;   /* earliest begin, after the step's begin_ns;
                           SS_MISSING when not stored */
    int64_t count;      /* times it ran (1 unless stored otherwise) */
    int64_t self_ns;    /* self time: total_ns less the phases nested in
                           it; SS_MISSING when not recorded */
} ss_rank_phase;

typedef struct {
    uint32_t name;
    int64_t at_ns; /* arrival, ns after the step's begin_ns */
} ss_rank_sync;

typedef struct {
    uint32_t name;
    double value;
} ss_rank_metric;

/* One rank-step row.  The arrays are valid until the next call on the
 * cursor that returned it. */
typedef struct {
    int64_t step, rank;
    int64_t step_ns, rss_bytes, device_bytes;
    int64_t begin_ns; /* CLOCK_MONOTONIC of the rank's host; SS_MISSING
                         for rows written without timelines */
    const ss_rank_phase *phases; /* with SS_RANK_STEPS_PHASES */
    size_t n_phases;
    const ss_rank_sync *syncs;   /* with SS_RANK_STEPS_SYNCS */
    size_t n_syncs;
    const ss_rank_metric *metrics; /* with SS_RANK_STEPS_METRICS */
    size_t n_metrics;
    /* With SS_RANK_STEPS_HOST: what the host saw of the rank's process
     * tree during the step (fields SS_MISSING where unknown); NULL when the
     * row has no host evidence. */
    const ss_host_step *host;
} ss_rank_step_row;

#define SS_RANK_STEPS_PHASES 1u  /* phase totals, starts, counts, self */
#define SS_RANK_STEPS_SYNCS 2u
#define SS_RANK_STEPS_METRICS 4u
#define SS_RANK_STEPS_HOST 8u
#define SS_RANK_STEPS_ONE_RANK 16u /* only the rows of rank `rank` */

/* Which rank-step rows to read: steps FIRST..LAST inclusive (-1: open),
 * ordered by step then rank; with SS_RANK_STEPS_ONE_RANK in FIELDS, those
 * of RANK alone in the attempt's finalized steps, read at the cost of its
 * steps whatever the world. */
typedef struct {
    int64_t run_id, attempt;
    int64_t first, last;
    unsigned fields; /* SS_RANK_STEPS_* */
    int64_t rank;    /* with SS_RANK_STEPS_ONE_RANK */
} ss_rank_step_query;

/* A cursor over rank-step rows: memory follows one row, not the range. */
typedef struct ss_rank_steps ss_rank_steps;

/* Opens a cursor for Q into *CUR.  Close with ss_rank_steps_close. */
int ss_reader_rank_steps(ss_reader *r, const ss_rank_step_query *q,
                         ss_rank_steps **cur);
/* The next row into *ROW: 1, 0 at the end, SS_READ_ERROR (errmsg on the
 * reader). */
int ss_rank_steps_next(ss_rank_steps *cur, const ss_rank_step_row **row);
/* The name of index IDX (phases, syncs and metrics share one table, which
 * grows as rows are read); NULL when out of range. */
const char *ss_rank_steps_name(const ss_rank_steps *cur, uint32_t idx);
void ss_rank_steps_close(ss_rank_steps *cur); /* NULL: no-op */

/* The host evidence of one rank over an attempt's kept rank-steps
 * (retention thins old steps): per field, the median and the largest value
 * per step and the sum, over the steps where that field is known. */
typedef struct {
    int64_t rank;
    int64_t steps;          /* kept rank-steps with host evidence */
    int64_t stopped_steps;  /* of them, steps with some stopped time */
    int64_t throttled_steps;/* of them, steps with some throttled time */
    ss_host_step median, max, sum; /* their gpu members are not used */
    /* The rank's GPU over the same steps (gpu_steps 0: no GPU evidence).
     * Counts of steps with some time held down, in total and per main
     * reason; GPU_SUM sums the durations and errors, holds the highest
     * temperature, the mean of the steps' SM clocks, the GPU's index and
     * the latest Xid code (gpu_sum.present 1 when gpu_steps > 0). */
    int64_t gpu_steps;
    int64_t gpu_clock_steps; /* of them, steps with a known SM clock */
    int64_t gpu_slowed_steps, gpu_power_cap_steps, gpu_thermal_steps,
        gpu_hw_slowdown_steps;
    ss_gpu_evidence gpu_sum;
} ss_rank_host;

/* The host evidence of every rank of the attempt that has some, ordered by
 * rank, into *OUT (*N entries; free with free(); NULL and 0 when none, as
 * in stores older than the host columns). */
int ss_reader_rank_host(ss_reader *r, int64_t run_id, int64_t attempt,
                        ss_rank_host **out, size_t *n);

/* What is kept of an attempt's rank-steps in steps FIRST..LAST (-1:
 * open). */
typedef struct {
    int64_t rows;       /* rank-step rows in the range */
    int64_t timed_rows; /* of them, with a timeline (begin_ns) */
    int64_t first_step, last_step; /* kept steps in the range; SS_MISSING */
    int64_t t0_ns; /* begin_ns of the attempt's first timed step (min over
                      its ranks), whatever the range; SS_MISSING */
} ss_rank_step_summary;

int ss_reader_rank_step_summary(ss_reader *r, int64_t run_id,
                                int64_t attempt, int64_t first, int64_t last,
                                ss_rank_step_summary *out);

/* The distinct kept steps of WINDOW (as for ss_reader_steps, over the
 * rank_steps rows), ascending, into *STEPS.  Free with free(). */
int ss_reader_rank_step_numbers(ss_reader *r, int64_t run_id,
                                int64_t attempt, const ss_step_window *window,
                                int64_t **steps, size_t *n);

/* ---- findings ---- */

typedef struct {
    int64_t id, attempt;
    char *kind, *severity; /* "warning" or "critical" */
    int64_t *ranks;        /* the ranks it names */
    size_t n_ranks;
    char *phase;           /* NULL when no phase is to blame */
    int64_t first_step, last_step;
    char *evidence;        /* a JSON object ("{}" when not one) */
    char *message;
    ss_wall_ns first_seen_at, updated_at;
} ss_finding_row;

/* The findings of the attempt that overlap steps FIRST..LAST (-1: open),
 * critical first, then by first step, then by id. */
int ss_reader_findings(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t first, int64_t last, ss_finding_row **rows,
                       size_t *n);
void ss_finding_rows_free(ss_finding_row *rows, size_t n);

/* ---- events ---- */

typedef struct {
    int64_t id, attempt;
    ss_wall_ns at;
    char *kind;
    int64_t rank; /* SS_MISSING when none */
    char *message;
} ss_event_row;

/*
 * Which events: ATTEMPT -1 for every attempt.  Without TAIL: the events
 * with id > AFTER_ID (-1: from the first), by id, at most LIMIT (0: no
 * limit).  With TAIL: the last LIMIT events by time (AFTER_ID ignored),
 * returned in time order (at, then id).
 */
typedef struct {
    int64_t attempt;
    int64_t after_id;
    int64_t limit;
    int tail;
} ss_event_query;

/* The events of RUN_ID that Q selects; *TOTAL (may be NULL) gets how many
 * events the run (attempt) has in all. */
int ss_reader_events(ss_reader *r, int64_t run_id, const ss_event_query *q,
                     ss_event_row **rows, size_t *n, int64_t *total);
void ss_event_rows_free(ss_event_row *rows, size_t n);

/* ---- metrics (ss_metric) ---- */

/* A metric over the kept rank-steps of an attempt: in how many steps some
 * rank reported it, and its values across ranks at the last of them,
 * ascending by value (then rank). */
typedef struct {
    char *name;
    int64_t steps, last_step;
    double *values;
    int64_t *ranks; /* ranks[i] reported values[i] */
    size_t n;
} ss_metric_row;

/* The metrics of the attempt, by name. */
int ss_reader_metrics(ss_reader *r, int64_t run_id, int64_t attempt,
                      ss_metric_row **rows, size_t *n);
void ss_metric_rows_free(ss_metric_row *rows, size_t n);

/* ---- step times ---- */

/*
 * The step times of every finalized step of the attempt, in no particular
 * order and the measured ones only: the median rank's (what
 * ss_step_row.step_median holds) into *MEDIAN (*N_MEDIAN of them) and the
 * slowest rank's (step_max) into *WORST (*N_WORST).  One pass, two numbers
 * per step, for percentiles over a whole run.  Free both with free().
 */
int ss_reader_step_times(ss_reader *r, int64_t run_id, int64_t attempt,
                         int64_t **median, size_t *n_median, int64_t **worst,
                         size_t *n_worst);

/* The world size run RUN_ID was started with into *WORLD (SS_MISSING when
 * not recorded): ss_run_row.world_size without the counts ss_reader_run
 * adds, which cost a pass over the run's steps.  NOT_FOUND: no such run. */
int ss_reader_world_size(ss_reader *r, int64_t run_id, int64_t *world);

/* The first and last step of WINDOW (as for ss_reader_steps; NULL: every
 * step) into *FIRST and *LAST, without loading the steps; both SS_MISSING
 * when the window holds none.  Fixes a window ("the latest N") before
 * reading it in pages. */
int ss_reader_step_bounds(ss_reader *r, int64_t run_id, int64_t attempt,
                          const ss_step_window *window, int64_t *first,
                          int64_t *last);

/* ---- run fingerprints (docs/guard.md) ---- */

/* The fingerprint recorded at launch for RUN_ID (a JSON object, caller
 * frees) into *JSON, NULL for a run recorded before fingerprints (schema
 * version 5).  SS_READ_NOT_FOUND when there is no such run. */
int ss_reader_run_fingerprint(ss_reader *r, int64_t run_id, char **json);

/* ---- nodes of a multi-node run (docs/store.md, `nodes`) ---- */

/* One agent's node (store.h ss_node_info): global ranks first_rank ..
 * first_rank + nranks - 1.  addr is "" for node 0; state one of
 * "joining", "running", "done", "lost", "never_joined"; joined_at,
 * ended_at, the clock offset and bound (ns, 0 on node 0) and lost_at_step
 * are SS_MISSING where unknown, host and lost_reason NULL. */
typedef struct {
    int64_t node_rank;
    char *host, *addr, *state, *lost_reason;
    int64_t first_rank, nranks;
    ss_wall_ns joined_at, ended_at;
    int64_t clock_offset_ns, clock_bound_ns;
    int64_t lost_at_step;
} ss_node_row;

/* The nodes recorded for ATTEMPT of RUN_ID, by node rank, into *ROWS (*N
 * of them).  None (a single-node run recorded without its node 0, or a
 * store older than schema version 9) is not an error: *N == 0.
 * SS_READ_NOT_FOUND when there is no such run. */
int ss_reader_nodes(ss_reader *r, int64_t run_id, int64_t attempt,
                    ss_node_row **rows, size_t *n);
/* Frees ROWS[0..N) and the array; NULL is a no-op. */
void ss_node_rows_free(ss_node_row *rows, size_t n);
/* ---- stacks snapshots (docs/debug.md) ---- */

/* One stored stacks snapshot. */
typedef struct {
    int64_t id;
    int64_t attempt;
    int64_t taken_at;   /* wall ns */
    char *trigger;      /* "request", "hang", "nonfinite" or "divergence" */
    int64_t finding_id; /* SS_MISSING: none */
    char *json;         /* the stacks document */
} ss_stack_snapshot_row;

/*
 * The newest stacks snapshot of RUN_ID's ATTEMPT (-1: of any attempt),
 * preferring one taken for a hang, into *ROW (free with
 * ss_stack_snapshot_row_clear).  Returns 1 with a row, 0 when there is
 * none (also in a store older than schema version 10), SS_READ_NOT_FOUND
 * when there is no such run, or SS_READ_ERROR.
 */
int ss_reader_stack_snapshot(ss_reader *r, int64_t run_id, int64_t attempt,
                             ss_stack_snapshot_row *row);
void ss_stack_snapshot_row_clear(ss_stack_snapshot_row *row);

/* ---- on-demand profiles (docs/store.md, `profiles`) ---- */

/* One rank's part of a profile request; path, host and message NULL where
 * unknown, marker_ns SS_MISSING. */
typedef struct {
    int64_t request_id, rank;
    ss_wall_ns requested_at;
    int64_t duration_ms;
    char *status, *path, *host, *message;
    int64_t marker_ns;
} ss_profile_row;

/* The profiles of ATTEMPT of RUN_ID (REQUEST_ID > 0: only that request),
 * by request then rank, into *ROWS (*N).  None, or a store older than
 * schema version 12, is not an error.  SS_READ_NOT_FOUND when there is
 * no such run. */
int ss_reader_profiles(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t request_id, ss_profile_row **rows, size_t *n);
/* Frees ROWS[0..N) and the array; NULL is a no-op. */
void ss_profile_rows_free(ss_profile_row *rows, size_t n);

/* ---- vectors (ss_values; schema 13, docs/store.md#vectors) ---- */

/*
 * Calls EACH(CTX, step, rank, V, N) for every stored vector NAME of the
 * attempt, by step then rank; STEP >= 0 reads that step alone.  V holds
 * the N doubles until EACH returns; EACH returns nonzero to stop.  Stores
 * older than version 13 have none.  Returns 0, NOT_FOUND or ERROR.
 */
int ss_reader_vectors(ss_reader *r, int64_t run_id, int64_t attempt,
                      const char *name, int64_t step,
                      int (*each)(void *ctx, int64_t step, int64_t rank,
                                  const double *v, uint32_t n),
                      void *ctx);

/* RANK's labels of vector NAME in the attempt, a JSON array of strings,
 * into *JSON (free(); NULL when it declared none).  Returns 0, NOT_FOUND
 * or ERROR. */
int ss_reader_vector_labels(ss_reader *r, int64_t run_id, int64_t attempt,
                            const char *name, int64_t rank, char **json);

/* ---- vectors (ss_values, docs/store.md#vectors) ---- */

/* One vector name of an attempt, over its kept rows (rank_values keeps
 * the latest steps and a sample of older ones: retention). */
typedef struct {
    char *name;
    int64_t *ranks;       /* the ranks with a kept vector, ascending */
    size_t n_ranks;
    int64_t first_step, last_step; /* its first and last kept step */
    int64_t steps;        /* distinct kept steps */
    int64_t rows;         /* kept (step, rank) vectors */
    int64_t max_n;        /* the longest kept vector's elements */
    int64_t truncated;    /* elements the recorder's cap cut, summed over
                             the kept rows */
    char *labels_json;    /* the labels of its indices as a JSON array of
                             strings (the lowest rank's that declared
                             some), NULL when no rank did */
} ss_values_name_row;

/* The vector names of the attempt, by name, into *ROWS (*N of them).
 * None, or a store older than schema version 13, is not an error: *N is
 * 0.  SS_READ_NOT_FOUND when there is no such run. */
int ss_reader_value_names(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_values_name_row **rows, size_t *n);
/* Frees ROWS[0..N) and the array; NULL is a no-op. */
void ss_values_name_rows_free(ss_values_name_row *rows, size_t n);

/* Which values of one vector name to read: RANK >= 0 reads that rank's
 * whole vectors (index x step); INDEX >= 0 reads element INDEX of every
 * rank's vector (rank x step); exactly one of them is >= 0.  Steps FROM..TO
 * inclusive (-1: open).  MAX_CELLS (0: no cap) caps the elements read:
 * the rows stop before the step that would go over it (never inside a
 * step), and *more says so. */
typedef struct {
    int64_t run_id, attempt;
    const char *name;
    int64_t rank, index;
    int64_t from, to;
    size_t max_cells;
} ss_values_query;

/* One kept vector (or, by index, one element of it).  v[0..n) are the
 * values as stored, NaN and infinities included; by index n is 1, or 0
 * when the rank's vector was shorter than INDEX + 1. */
typedef struct {
    int64_t step, rank;
    int64_t n;         /* values in v */
    int64_t truncated; /* elements the recorder's cap cut from the vector */
    const double *v;   /* into ss_values_rows.data */
} ss_values_row;

typedef struct {
    ss_values_row *rows; /* by step, then rank */
    size_t n_rows;
    double *data;        /* every row's values */
    size_t n_data;
    int more;            /* MAX_CELLS stopped the read before TO */
    int64_t next_step;   /* with more: the first step not read */
} ss_values_rows;

/* The values Q asks for into *OUT (free with ss_values_rows_free).  A name
 * nothing was recorded under, or a store older than schema version 13,
 * reads as no rows.  SS_READ_NOT_FOUND: no such run; SS_READ_ERROR also
 * for a query that sets neither or both of rank and index (the message
 * says so). */
int ss_reader_values(ss_reader *r, const ss_values_query *q, ss_values_rows *out);
void ss_values_rows_free(ss_values_rows *v);

#endif
