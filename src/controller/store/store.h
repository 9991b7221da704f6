/*
 * store.h - the SQLite store of runs, steps, findings and events.
 *
 * One file (WAL mode) holds every run.  The schema and its numbered
 * migrations live in store_schema.c; opening a file migrates it forward and
 * refuses a file that is not a stepscope store or is from a newer version.
 *
 * Writing: the controller's loop calls the store_put_* functions, which copy
 * their arguments into a bounded queue and return at once; a writer thread
 * applies the queue in batched transactions every flush interval (default
 * 250 ms), so a controller killed with SIGKILL loses at most that interval.
 * When the queue is full, rank-step rows are dropped first and counted
 * (store_stats); runs, findings and events are never dropped at the queue.
 * A batch the file refuses (disk full, I/O error, locked) is lost; the
 * writer then retries the batch's small items (ranks, findings, events, the
 * run's end) without its steps.  ss_store_get_outcome says what was
 * committed and what was lost, so the controller tells only what it stored.
 *
 * Retention of per-rank step rows (rank_steps) is tiered so a 4096-rank x
 * 100k-step run stays bounded; docs/store.md states the bound.
 */
#ifndef STEPSCOPE_STORE_H
#define STEPSCOPE_STORE_H

#include <stddef.h>
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
} ss_store_config;

void ss_store_config_defaults(ss_store_config *cfg);

/* Steps of a whole world the queue holds before rank rows drop. */
#define SS_STORE_QUEUE_STEPS 4

/* Raises CFG's queue_limit, never lowers it, so that the queue holds
 * SS_STORE_QUEUE_STEPS finalized steps of WORLD ranks (each step is one
 * unit plus one per rank row): a step's rows are kept or dropped whole, so
 * a queue smaller than one step would drop every row of every step. */
void ss_store_config_fit_world(ss_store_config *cfg, uint32_t world);

/*
 * Opens (creating if needed) the store at PATH, migrating the schema.  With
 * WRITER != 0 starts the writer thread.  Returns NULL with a one-line reason
 * in ERR when PATH is not a stepscope store, is corrupt, is from a newer
 * version, or cannot be opened.  A new store file is created 0600 (its
 * -wal and -shm files get the same mode from SQLite) and missing parent
 * directories 0700, whatever the umask (private_fs.h).
 */
ss_store *ss_store_open(const char *path, const ss_store_config *cfg,
                        int writer, char *err, size_t errlen);

/* Flushes the queue (writer), stops the writer thread and closes.  NULL is a
 * no-op. */
void ss_store_close(ss_store *s);

/* The default path: $XDG_DATA_HOME/stepscope/stepscope.db, else
 * $HOME/.local/share/stepscope/stepscope.db.  Returns 0 or -1 (no HOME). */
int ss_store_default_path(char *out, size_t outlen);

/* ---- writing (controller; all asynchronous except store_begin_run) ---- */

typedef struct {
    char uuid[40];        /* the run id given to ranks (STEPSCOPE_RUN_ID) */
    char name[128];       /* --name, or the command's basename */
    char command[1024];   /* the command line, shell-quoted */
    uint32_t world_size;
    ss_wall_ns started_at;
    char host[256];
    const char *fingerprint; /* JSON object (docs/guard.md); NULL: none */
} ss_run_info;

/* Inserts the run synchronously and returns its numeric id in *RUN_ID (0),
 * or -1 with a reason in ERR. */
int ss_store_begin_run(ss_store *s, const ss_run_info *info, int64_t *run_id,
                       char *err, size_t errlen);

void ss_store_put_attempt(ss_store *s, int64_t run_id, uint32_t attempt,
                          ss_wall_ns started_at);

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

/* Updates the facts of an attempt put before with ss_store_put_attempt. */
void ss_store_put_attempt_facts(ss_store *s, int64_t run_id,
                                const ss_attempt_facts *f);

/* Rank facts; fields set to -1 / "" are left as they are. */
typedef struct {
    uint32_t rank;
    uint32_t attempt;
    char host[256];
    int64_t pid;
    char state[16];        /* "running", "exited", "failed", "never_connected" */
    int64_t exit_code;     /* -1 unknown */
    int64_t term_signal;   /* 0 none, -1 unknown */
    int64_t last_step;     /* -1 none */
    int64_t dropped_events;
    int64_t dropped_records;
    char log_path[512];
    int64_t names_over_limit;  /* names refused: the run's table was full */
    int64_t values_over_limit; /* values under them, dropped */
} ss_rank_info;

void ss_store_put_rank(ss_store *s, int64_t run_id, const ss_rank_info *r);

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

/* Fills N with "unknown / leave as it is" (SS_MISSING, "") for every
 * optional field, and zero for the rest; set what is known after it. */
void ss_node_info_init(ss_node_info *n);

/* Queues an upsert of node N of RUN_ID by (run, attempt, node_rank), like
 * ss_store_put_rank.  A state that is not one of SS_NODE_* is refused: a
 * line on stderr, counted in the outcome's other_lost, nothing written. */
void ss_store_put_node(ss_store *s, int64_t run_id, const ss_node_info *n);

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

/* Queues an upsert of P for RUN_ID by (run, attempt, request, rank). */
void ss_store_put_profile(ss_store *s, int64_t run_id,
                          const ss_profile_info *p);

/* Copies a finalized step (aggregates, per-phase, per-sync, and per-rank
 * rows subject to retention) and its ranks' vectors (rank_values, their
 * own retention; dropped whole and counted over values_queue_bytes). */
void ss_store_put_step(ss_store *s, int64_t run_id, const ss_step_view *v,
                       const char *const *names);

/* Sets RANK's labels of vector NAME in RUN_ID's ATTEMPT (N strings,
 * copied), replacing earlier ones.  Never dropped at a full queue. */
void ss_store_put_labels(ss_store *s, int64_t run_id, uint32_t attempt,
                         uint32_t rank, const char *name,
                         const char *const *labels, uint32_t n);

/* Adds N to RUN_ID's runs.dropped_vectors: vectors lost before the
 * store (the ranks', the ingest's and the aggregator's drops, counted by
 * the caller).  Never dropped at a full queue; N 0 is a no-op. */
void ss_store_add_dropped_vectors(ss_store *s, int64_t run_id, uint64_t n);

/* Inserts or replaces finding F (keyed by run, attempt and F->id). */
void ss_store_put_finding(ss_store *s, int64_t run_id, const ss_finding *f);

/* Appends an event: KIND is a short word ("rank_connected", "rank_failed",
 * "rejected_connection", "checkpoint", ...), RANK -1 when none. */
void ss_store_put_event(ss_store *s, int64_t run_id, uint32_t attempt,
                        ss_wall_ns at, const char *kind, int32_t rank,
                        const char *message);

/*
 * Rewrites the status of every run whose row says `running` but whose
 * controller is gone (runlock.h: nobody holds its run lock) to
 * `interrupted` (and its ranks whose state is `running`), with ended_at
 * the last time anything was heard of it and an `interrupted` event, then removes the lock files nobody holds.  The
 * controller calls it once, synchronously, when it opens the store, before
 * registering its own run.  Returns how many runs it marked (a run another
 * process marks first is not counted).
 */
int ss_store_mark_interrupted(ss_store *s);

/* Queues a stacks snapshot of RUN_ID's ATTEMPT (docs/debug.md): JSON, the
 * stacks document, taken at TAKEN_AT because of TRIGGER ("request" or
 * "hang"), for the finding FINDING_ID (< 0: none).  Copied; never dropped
 * for a full queue, like events. */
void ss_store_put_stacks(ss_store *s, int64_t run_id, uint32_t attempt,
                         ss_wall_ns taken_at, const char *trigger,
                         int64_t finding_id, const char *json);

/* Marks the run ended with the job's exit status and totals. */
void ss_store_end_run(ss_store *s, int64_t run_id, ss_wall_ns ended_at,
                      int exit_code, const char *status,
                      int64_t dropped_events, int64_t dropped_records);

/* Queue accounting in units (one per item plus one per rank-step row it
 * carries): accepted, taken off the queue and applied (committed or lost),
 * rank-step rows refused at a full queue, and transactions run. */
typedef struct {
    uint64_t queued, written, dropped_rank_steps, transactions;
    uint64_t vectors_queued;  /* vectors accepted */
    uint64_t dropped_vectors; /* vectors refused at a full queue */
} ss_store_stats;
void ss_store_get_stats(ss_store *s, ss_store_stats *out);

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

/* Copies the outcome so far into OUT (call ss_store_flush first for a
 * complete one). */
void ss_store_get_outcome(ss_store *s, ss_store_outcome *out);

/* Blocks until everything queued so far is committed. */
void ss_store_flush(ss_store *s);

/* The writer's connection, for tests and benchmarks that check what was
 * written; views read through reader.h instead. */
struct sqlite3 *ss_store_db(ss_store *s);

#endif
