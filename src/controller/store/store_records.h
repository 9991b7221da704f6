/*
 * store_records.h - the store's handle and the records that go through it.
 *
 * The plain structs a caller fills for the ss_store_put_* functions and the
 * counts the store gives back (store.h declares the functions).  They live
 * in a header of their own so that the store's internal modules (the
 * queue, the writer, binding, retention, loss accounting) can hold and
 * bind these records without depending on store.h, whose functions sit
 * above them: the include graph of the store folder stays one-way.
 * Callers include store.h, which includes this.
 */
#ifndef STEPSCOPE_STORE_RECORDS_H
#define STEPSCOPE_STORE_RECORDS_H

#include <stdint.h>

#include "model.h"

typedef struct ss_store ss_store;

typedef struct {
    uint32_t flush_interval_ms; /* default 250 */
    uint32_t queue_limit;       /* queued items before rank-steps drop; default 65536 */
    uint32_t recent_steps;      /* tier A: every step for the latest N; default 512 */
    uint32_t sample_every;      /* tier B: every Nth step kept forever; default 100 */
    /* Vectors (rank_values): every step's for the latest N steps (tier B
     * and the steps findings name are kept as for rank_steps); default
     * 64, 0 keeps every one. */
    uint32_t values_recent_steps;
    /* Bytes of vectors the queue may hold; a step's vectors that would
     * go over it are dropped whole and counted; default 64 MiB. */
    uint64_t values_queue_bytes;
    /* Rank-step rows a step writes, about: 0 (default) writes every
     * present rank's; N writes the ranks the step singles out (the worst
     * of each statistic, the slowest few), every ceil(world / N)-th rank in
     * rotation, and every rank on tier B's steps; the others count only
     * into their ranks' totals (unpicked_rank_steps).  Node aggregation of
     * a large world sets it. */
    uint32_t rank_rows_per_step;
    /* The ranks' totals (rank_totals, an upsert per rank) are written
     * after every batch (0, the default), or at most every this many ms
     * and at a flush, the close and a run's end, owed in memory between:
     * what a large world sets, whose every batch would pay an upsert per
     * rank. */
    uint32_t totals_interval_ms;
} ss_store_config;

typedef struct {
    char uuid[40];        /* the run id given to ranks (STEPSCOPE_RUN_ID) */
    char name[128];       /* --name, or the command's basename */
    char command[1024];   /* the command line, shell-quoted */
    uint32_t world_size;
    ss_wall_ns started_at;
    char host[256];
    const char *fingerprint; /* JSON object (docs/guard.md); NULL: none */
} ss_run_info;

/* What an attempt came to (docs/fault-tolerance.md); fields set to -1 /
 * "" are left as they are.  CAUSE says why the attempt ended: "completed",
 * "interrupted", "rank_crash", "hang", "node_lost", "health_check", or
 * "injected:..." for a fault stepscope injected on purpose. */
typedef struct {
    uint32_t attempt;
    ss_wall_ns ended_at;
    char cause[48];
    int64_t first_step, last_step; /* finalized steps of this attempt */
    int64_t resumed_from; /* the step of the checkpoint it resumed from */
} ss_attempt_facts;

/* Rank facts; fields set to -1 / "" are left as they are. */
typedef struct {
    uint32_t rank;
    uint32_t attempt;
    char host[256];
    int64_t pid;
    char state[24];        /* "running", "exited", "failed", "never_connected",
                              "stopped_by_stepscope" */
    int64_t exit_code;     /* -1 unknown */
    int64_t term_signal;   /* 0 none, -1 unknown */
    int64_t last_step;     /* -1 none */
    int64_t dropped_events;
    int64_t dropped_records;
    char log_path[512];
    int64_t names_over_limit;  /* names refused: the run's table was full */
    int64_t values_over_limit; /* values under them, dropped */
} ss_rank_info;

/* The states of a node (ss_node_info.state). */
#define SS_NODE_JOINING "joining"           /* launched, not yet joined */
#define SS_NODE_RUNNING "running"           /* joined, its ranks running */
#define SS_NODE_DONE "done"                 /* its ranks ended, link closed */
#define SS_NODE_LOST "lost"                 /* link lost while running */
#define SS_NODE_NEVER_JOINED "never_joined" /* not joined by --join-timeout */

/* Node facts of a multi-node run (docs/store.md, `nodes`): one agent, which
 * launches global ranks first_rank .. first_rank + nranks - 1.  Node 0 is
 * the controller's own node (addr "", clock offset and bound 0).  The
 * int64 fields set to SS_MISSING and the text fields set to "" (host,
 * lost_reason) are left as they are; node_rank, attempt, addr, first_rank,
 * nranks and state are always written. */
typedef struct {
    uint32_t node_rank;
    uint32_t attempt;
    char host[256];           /* the agent's host name */
    char addr[128];           /* its address as the controller saw it
                                 ("10.0.0.2:40112"); "" for node 0 */
    uint32_t first_rank;
    uint32_t nranks;
    char state[16];           /* one of SS_NODE_* */
    ss_wall_ns joined_at;     /* SS_MISSING: not (yet) joined */
    ss_wall_ns ended_at;      /* SS_MISSING: not ended */
    int64_t clock_offset_ns;  /* its clock minus the controller's */
    int64_t clock_bound_ns;   /* |error| of that offset is at most this */
    char lost_reason[128];    /* lost: "lost its connection",
                                 "missed its heartbeats", ... */
    int64_t lost_at_step;     /* lost: the run's last step then */
} ss_node_info;

/* One rank's part of an on-demand profile request (docs/store.md,
 * `profiles`).  Text fields "" and marker_ns SS_MISSING are left as they
 * are by an update; the others are always written. */
typedef struct {
    uint32_t attempt;
    uint32_t request_id;
    uint32_t rank;
    ss_wall_ns requested_at;
    uint32_t duration_ms;
    char status[16];   /* "requested", "done", "failed", "unsupported",
                          "not_connected", "timeout" */
    char path[256];    /* the trace file, on HOST */
    char host[256];
    char message[256]; /* why there is no trace */
    int64_t marker_ns; /* controller's CLOCK_MONOTONIC of the marker */
} ss_profile_info;

/* Queue accounting in units (one per item plus one per rank-step row it
 * carries): accepted, taken off the queue and applied (committed or lost),
 * rank-step rows refused at a full queue, and transactions run. */
typedef struct {
    uint64_t queued, written, dropped_rank_steps, transactions;
    /* present ranks' rows not written by choice (rank_rows_per_step),
     * counted into their ranks' totals */
    uint64_t unpicked_rank_steps;
    uint64_t vectors_queued;  /* vectors accepted */
    uint64_t dropped_vectors; /* vectors refused at a full queue */
} ss_store_stats;

/*
 * What became of everything put since the store was opened: committed to
 * the file ("stored") or given up ("lost": a batch the file refused, or out
 * of memory in a put).  Counts are complete for everything put before the
 * last ss_store_flush.  Pruning by retention is not a loss.
 */
typedef struct {
    uint64_t steps_stored, steps_lost;
    uint64_t rank_steps_stored;  /* rows committed (retention may prune
                                    some of them later) */
    uint64_t rank_steps_lost;    /* rows in a lost batch */
    uint64_t rank_steps_dropped; /* rows refused at a full queue */
    uint64_t rank_steps_unpicked; /* rows not written by choice
                                     (rank_rows_per_step): totals only */
    uint64_t vectors_stored, vectors_lost; /* rank_values rows */
    uint64_t vectors_dropped;    /* vectors refused at a full queue */
    uint64_t findings_stored;    /* distinct findings (run, attempt, id)
                                    with at least one committed version */
    uint64_t finding_writes_lost; /* versions of a finding (its first
                                     sight or an update) not committed */
    uint64_t events_stored, events_lost;
    uint64_t other_lost;         /* attempts and rank facts not committed */
    int ends_stored, ends_lost;  /* ss_store_end_run calls committed/lost */
    char error[256];             /* why the first loss happened, e.g.
                                    "disk full: database or disk is full";
                                    "" when nothing was lost */
} ss_store_outcome;

#endif
