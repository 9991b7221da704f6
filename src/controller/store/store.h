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
 * 250 ms), so a controller killed with SIGKILL loses at most that interval
 * (and of the ranks' totals, at most cfg.totals_interval_ms).
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
#include "store_files.h"   /* ss_store_default_path, PATH.d */
#include "store_records.h" /* the handle and its records */

void ss_store_config_defaults(ss_store_config *cfg);

/* Steps of a whole world the queue holds before rank rows drop. */
#define SS_STORE_QUEUE_STEPS 4

/* Raises CFG's queue_limit, never lowers it, so that the queue holds
 * SS_STORE_QUEUE_STEPS finalized steps of WORLD ranks (each step is one
 * unit plus one per rank row): a step's rows are kept or dropped whole, so
 * a queue smaller than one step would drop every row of every step. */
void ss_store_config_fit_world(ss_store_config *cfg, uint32_t world);

/*
 * Creates the store file PATH 0600 if it is missing, or checks that the
 * existing one, and the -wal, -shm and -journal files SQLite keeps beside
 * it, are private (private_fs.h): another user's store, or one they can
 * write, would let them read and change every run.  PATH itself may be a
 * symbolic link of the user or root (store_files.h: it names the same
 * store); what it leads to is checked.  Missing parent directories are
 * made 0700.  Returns 0/-1 with ERR.  ss_store_open does it first; so
 * does the local copy of a team database (pg_mirror.c).
 */
int ss_store_file_check(const char *path, char *err, size_t errlen);

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

/* ---- writing (controller; all asynchronous except store_begin_run) ---- */

/* Inserts the run synchronously and returns its numeric id in *RUN_ID (0),
 * or -1 with a reason in ERR. */
int ss_store_begin_run(ss_store *s, const ss_run_info *info, int64_t *run_id,
                       char *err, size_t errlen);

void ss_store_put_attempt(ss_store *s, int64_t run_id, uint32_t attempt,
                          ss_wall_ns started_at);

/* Updates the facts of an attempt put before with ss_store_put_attempt. */
void ss_store_put_attempt_facts(ss_store *s, int64_t run_id,
                                const ss_attempt_facts *f);

void ss_store_put_rank(ss_store *s, int64_t run_id, const ss_rank_info *r);

/* Fills N with "unknown / leave as it is" (SS_MISSING, "") for every
 * optional field, and zero for the rest; set what is known after it. */
void ss_node_info_init(ss_node_info *n);

/* Queues an upsert of node N of RUN_ID by (run, attempt, node_rank), like
 * ss_store_put_rank.  A state that is not one of SS_NODE_* is refused: a
 * line on stderr, counted in the outcome's other_lost, nothing written. */
void ss_store_put_node(ss_store *s, int64_t run_id, const ss_node_info *n);

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

void ss_store_get_stats(ss_store *s, ss_store_stats *out);

/* Whether the store's file is still the one at its path: 0 when it is,
 * 1 when it was removed or another file took the path since the store
 * opened it (the store goes on writing into the file it holds open, which
 * nobody can reach once the store closes: ss_store_save_again), -1 when
 * that cannot be told (an in-memory store, a path stat cannot read).
 * One stat(2). */
int ss_store_file_moved(const ss_store *s);

/* Writes a copy of everything the store's open file holds (every run of
 * it, as a fresh SQLite file) to its path when that is free, else to
 * PATH.saved-N beside it (never over the file that took the path); the
 * name used into WHERE.  Flushes first; call it after the run's last
 * write.  Returns 0, or -1 with ERR. */
int ss_store_save_again(ss_store *s, char *where, size_t wherelen, char *err,
                        size_t errlen);

/* Copies the outcome so far into OUT (call ss_store_flush first for a
 * complete one). */
void ss_store_get_outcome(ss_store *s, ss_store_outcome *out);

/* Blocks until everything queued so far is committed. */
void ss_store_flush(ss_store *s);

/* The writer's connection, for tests and benchmarks that check what was
 * written; views read through reader.h instead. */
struct sqlite3 *ss_store_db(ss_store *s);

#endif
