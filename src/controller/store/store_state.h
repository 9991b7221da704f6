/*
 * store_state.h - what the store's files share: the queued items, the
 * writer's per-run state and the store handle itself.
 *
 * The files of the store, in the order a record goes through them:
 *   store_put.c        the ss_store_put_* functions: copy a record into
 *                      one heap item and queue it (the caller's thread)
 *   store_writer.c     the queue and the writer thread: batches, one
 *                      transaction each, a failed batch's retry
 *   store_apply.c      binding an item's record to its statements
 *                      (store_bind.c: the binding conventions and JSON)
 *   store_retention.c  rank totals and the retention windows, per run
 *   store_outcome.c    loss accounting: what was committed, what was lost
 *   store_sql.c        the SQL text
 *   store_sweep.c      runs whose controller died, marked interrupted
 *   store.c            opening, flushing and closing the handle
 * Only these files include this header; everything else sees store.h.
 *
 * Threads: `mu` guards the queue part of ss_store (the queue, counters,
 * flags and the outcome); `dbmu` guards the writer part (the connection,
 * statements, tracks and row buffers).  Each field below says which.
 */
#ifndef STEPSCOPE_STORE_STATE_H
#define STEPSCOPE_STORE_STATE_H

#include <pthread.h>
#include <sys/types.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "json.h"
#include "model.h"
#include "store_bind.h"
#include "store_records.h"
#include "store_sql.h"

/* A store that keeps failing says so at most this often (store_writer.c). */
#define SS__STORE_SAY_EVERY_MS 10000

/* ---- queued items (made by store_put.c, freed by the writer) ---- */

typedef enum {
    IT_ATTEMPT,
    IT_ATTEMPT_FACTS,
    IT_RANK,
    IT_NODE,
    IT_PROFILE,
    IT_STEP,
    IT_VALUES,
    IT_LABELS,
    IT_FINDING,
    IT_EVENT,
    IT_STACKS,
    IT_END_RUN,
    IT_DROPPED_VECTORS,
} item_kind;

/* What a rank's totals need of a step whose row is not written. */
typedef struct {
    int64_t step_ns, rss, device;
    uint32_t rank;
} rank_tally;

/* A finalized step, deep-copied.  Rank rows are parallel arrays: row i is
 * rank row_rank[i] with row_vals[i * ss__row_stride(step) ...] = step_ns,
 * rss, device, begin (ROW_FIXED values), then per phase in phases[] order the
 * durations, then the first begins (ns after begin), then the counts, then
 * per sync in syncs[] order the arrival (ns after begin), then per metric
 * in metric_names[] order the value (the bits of a double), then per phase
 * its self time; SS_MISSING (NaN for a metric) where the rank did not
 * report it.  phase_self[i] is the statistics of phases[i]'s self time
 * (n == 0 when no rank reported it). */
typedef struct {
    uint32_t attempt;
    uint64_t step;
    ss_wall_ns finalized_at;
    uint32_t world_size, n_present, n_missing;
    uint32_t *missing;
    ss_stat step_time, rss, device;
    uint32_t n_phases;
    ss_phase_stat *phases;
    ss_stat *phase_self;
    char **phase_names;
    uint32_t n_syncs;
    ss_sync_stat *syncs;
    char **sync_names;
    uint32_t n_metrics;
    char **metric_names;
    uint32_t n_rows;
    uint32_t *row_rank;
    int64_t *row_vals;
    uint64_t dropped_rows; /* rank rows refused at the queue */
    ss_host_step *row_host; /* n_rows entries (all SS_MISSING where a rank
                               has none), or NULL when no row has any */
    uint32_t n_tallies;     /* present ranks without a row (row_pick in */
    rank_tally *tallies;    /* store_put.c): their totals only */
} step_item;

/* Tallies a queue unit stands for (a tally is a tenth of a row's bytes). */
enum { TALLIES_PER_UNIT = 8 };

enum { ROW_FIXED = 4 }; /* step_ns, rss, device, begin */

/* The int64 values of one rank row of V. */
static inline size_t ss__row_stride(const step_item *v)
{
    return ROW_FIXED + 4 * (size_t)v->n_phases + v->n_syncs + v->n_metrics;
}

/* One vector of a rank in a step, deep-copied. */
typedef struct {
    uint32_t rank, n, truncated;
    const char *name;
    double *v;
} value_row;

/* A step's vectors, every rank's. */
typedef struct {
    uint32_t attempt;
    uint64_t step;
    uint32_t world_size;
    uint32_t n;
    value_row *rows;
    uint64_t bytes; /* counted in pending_value_bytes */
} values_item;

typedef struct item {
    struct item *next;
    item_kind kind;
    int64_t run_id;
    uint64_t units;
    union {
        struct {
            uint32_t attempt;
            ss_wall_ns started_at;
        } attempt;
        ss_attempt_facts facts;
        ss_rank_info rank;
        ss_node_info node;
        ss_profile_info profile;
        step_item step;
        values_item values;
        struct {
            uint32_t attempt, rank;
            char *name, *json;
        } labels;
        struct {
            ss_finding f;
            ss_wall_ns at;
        } finding;
        struct {
            uint32_t attempt;
            ss_wall_ns at;
            int32_t rank;
            char *kind, *message;
        } event;
        struct {
            uint32_t attempt;
            ss_wall_ns taken_at;
            int64_t finding_id; /* < 0: none */
            char *trigger, *json;
        } stacks;
        struct {
            ss_wall_ns ended_at;
            int exit_code;
            char *status;
            int64_t dropped_events, dropped_records;
        } end;
        uint64_t dropped_vectors;
    } u;
} item;

/* A step and its vectors are the bulk of a batch: when a batch fails, the
 * rest is tried again without them. */
static inline int ss__item_is_bulk(item_kind kind)
{
    return kind == IT_STEP || kind == IT_VALUES;
}

/* ---- the writer's state per (run, attempt) (store_retention.c) ---- */

/* Per-rank totals accumulated over one batch (or owed by committed ones)
 * until a batch adds them to rank_totals.  Maxima are SS_MISSING until a
 * value is seen. */
typedef struct {
    uint32_t steps, n_ns;
    int64_t sum_ns, max_ns, max_rss, max_dev, last_step;
} rank_delta;

/* Retention and totals state for one (run, attempt) being written. */
typedef struct {
    int64_t run_id;
    uint32_t attempt;
    int64_t max_step;  /* highest step written, -1 before the first */
    int64_t kept_from; /* tier-A rows below this step are already pruned */
    int64_t values_kept_from; /* the same for rank_values */
    uint32_t n_ranks;
    rank_delta *delta; /* n_ranks entries: the batch's */
    int dirty;         /* delta holds something */
    rank_delta *owed;  /* n_ranks entries: committed, not in rank_totals */
    int owed_dirty;    /* owed holds something */
    int totals_in_batch; /* this batch adds owed + delta to rank_totals */
    uint8_t *committed_findings; /* bit i: finding id i has a committed
                                    version (for ss_store_outcome) */
    uint32_t committed_findings_bytes;
} track;

/* ---- the handle ---- */

struct ss_store {
    /* Set by ss_store_open, read-only after; db is used under dbmu. */
    sqlite3 *db;
    char *path;
    ss_store_config cfg;
    int file_known;         /* file_dev and file_ino are the file's */
    dev_t file_dev;         /* the file opened at PATH */
    ino_t file_ino;

    pthread_mutex_t mu;     /* queue, counters, flags */
    pthread_cond_t wake;    /* writer: work, flush or stop */
    pthread_cond_t done;    /* flushers: a batch was applied */
    item *head, *tail;
    uint64_t pending_units;
    uint64_t pending_value_bytes; /* vectors' bytes in the queue */
    /* vectors refused at a full queue and not yet added to their run's
     * dropped_vectors: per run (the latest one seen) */
    int64_t dropped_vectors_run;
    uint64_t dropped_vectors_unsaved;
    struct timespec first_at; /* when the oldest queued item arrived */
    uint64_t enq_seq, done_seq; /* items queued / applied, ever */
    int flush_wanted, stop;
    /* Totals: a batch must add what is owed (a flush, the close, a run's
     * end); some are owed (after the last commit); a flush with an empty
     * queue asks the writer for the totals alone and waits for it. */
    int totals_force, totals_owed, totals_wanted;
    struct timespec totals_at; /* when rank_totals were last written */
    ss_store_stats stats;
    ss_store_outcome outcome;
    int has_writer;
    pthread_t writer;

    pthread_mutex_t dbmu;   /* the connection and everything below */
    char batch_err[256];    /* the first error of the batch being applied */
    /* A store that keeps failing (a full disk) is said once, then every
     * SS__STORE_SAY_EVERY_MS (10 s) with what was lost between: */
    int failing;            /* the last batch was not written */
    int quiet;              /* said lately: its SQL errors are not printed */
    int64_t said_ms;        /* when a failure was last said (monotonic) */
    uint64_t unsaid_batches, unsaid_items; /* lost since then, not said */
    sqlite3_stmt *st[SS__ST_COUNT];
    int owed_after;         /* totals owed after the last commit */
    track *tracks;
    size_t n_tracks;
    ss_buf rowjson[6];      /* a rank row's JSON: phases, phase_starts,
                               phase_counts, syncs, metrics, phase_self */
    ss__json_keys keys;     /* the current step's phase names */
    ss__json_keys skeys;    /* its sync names */
    ss__json_keys mkeys;    /* its metric names */
};

/* Steps ST of S's writer once (dbmu held), keeping a failure's reason as
 * the batch's error (store_sql.h).  Returns 0 or -1. */
static inline int ss__store_run(ss_store *s, sqlite3_stmt *st,
                                const char *what)
{
    return ss__store_sql_step(s->db, st, s->path, what, s->quiet,
                              s->batch_err, sizeof s->batch_err);
}

#endif
