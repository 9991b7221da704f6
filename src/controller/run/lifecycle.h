/*
 * lifecycle.h - the rank life-cycle policy of `stepscope run`, without I/O.
 *
 * Decides when a rank leaves the live set (the ranks whose steps the
 * aggregator waits for), when the run ends, the run's final status, and
 * what the end-of-run summary says.  Pure: no clock, no loop, no store.
 * The controller (run.c) tells it what happened (a HELLO, a BYE, a
 * connection closing, a process exiting, the time at a housekeeping tick)
 * and carries out the decision it returns: tell the aggregator, record an
 * event, start or stop the linger timer, close a connection.
 *
 * The rules (docs/architecture.md, "Rank leaving").  A rank leaves exactly
 * once:
 *   - when it says BYE: clean;
 *   - when its connection closes after its process exited, or its process
 *     exits after its connection closed without BYE: clean if the process
 *     exited with status 0, else missing;
 *   - when its process exits without ever having connected: missing;
 *   - when it has not connected within the connect timeout: missing;
 *   - when the run ends and it is somehow still in (a safety net): missing.
 * "Missing" means the steps it did not complete are finalized with it
 * marked missing.  A connection still open when its process exits (a
 * forked child holding the socket) is closed after SS_LIFE_LINGER_MS; its
 * disconnect then decides.  The run ends once the launcher has reported
 * every process exited (and its output drained) and no rank connection is
 * open.
 *
 * Threading: an ss_lifecycle belongs to one thread (the controller's loop).
 */
#ifndef STEPSCOPE_LIFECYCLE_H
#define STEPSCOPE_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "model.h"
#include "store.h"

/* How long a connection may outlive its rank's process. */
#define SS_LIFE_LINGER_MS 2000

typedef enum {
    SS_STAYS = 0,      /* the rank stays in the live set (or left before) */
    SS_LEAVES_CLEAN,   /* it leaves now; nothing of it is missing */
    SS_LEAVES_MISSING, /* it leaves now; the steps it did not complete are
                          finalized with it missing */
} ss_leave;

typedef enum {
    SS_LINGER_KEEP = 0, /* leave the rank's linger timer as it is */
    SS_LINGER_START,    /* start it: SS_LIFE_LINGER_MS, then
                           ss_life_linger_over */
    SS_LINGER_STOP,     /* stop it: the connection closed */
} ss_linger;

/* What the controller does after an event of a rank's life. */
typedef struct {
    ss_leave leave;
    const char *why;     /* why it leaves, static text for the event
                            ("said goodbye", "never connected", ...); NULL
                            when it stays */
    ss_linger linger;
    int never_connected; /* record that the rank never sent telemetry */
} ss_life_decision;

/* What is known of one rank. */
typedef struct {
    int connected;      /* a connection is open now */
    int ever_connected;
    int said_bye;
    int exited;         /* its process exited: exit_code, term_signal */
    int64_t exit_code;
    int term_signal;    /* 0: it exited by itself */
    int left;           /* has left the live set */
    int left_missing;   /* ... and its unfinished steps are missing */
    int lost;           /* its node was lost: nothing more is known */
    int stopped;        /* it ended without success after stepscope
                           stopped the job (ss_life_stopping) */
} ss_rank_life;

/* The life cycle of one attempt's ranks.  Caller-owned; members are for
 * reading (tests, the controller); change them only through ss_life_*. */
typedef struct {
    uint32_t nprocs;
    uint32_t attempt;
    ss_dur_ns connect_timeout;
    ss_mono_ns launched_at; /* the connect timeout counts from here */
    int launched;
    int all_exited;         /* the launcher reported every process gone */
    int finished;           /* the run has ended */
    int stopping;           /* stepscope is stopping the ranks */
    ss_rank_life *ranks;    /* nprocs entries */
} ss_lifecycle;

/* Sets up LC for NPROCS ranks of ATTEMPT; a rank that has not connected
 * CONNECT_TIMEOUT after ss_life_launched is missing.  Returns 0, or -1 when
 * out of memory (LC then needs no release). */
int ss_life_init(ss_lifecycle *lc, uint32_t nprocs, uint32_t attempt,
                 ss_dur_ns connect_timeout);

/* Frees what ss_life_init allocated.  Safe on a zeroed LC and twice. */
void ss_life_release(ss_lifecycle *lc);

/* The ranks were started at NOW. */
void ss_life_launched(ss_lifecycle *lc, ss_mono_ns now);

/*
 * A connection says it is RANK of WORLD_SIZE ranks in ATTEMPT.  Returns 0
 * when it is accepted (the rank is connected), or -1 with a one-line reason
 * in REASON: another world size or attempt, a rank out of range, a rank
 * already connected or one that has already left the run.
 */
int ss_life_hello(ss_lifecycle *lc, uint32_t rank, uint32_t world_size,
                  uint32_t attempt, char *reason, size_t reasonlen);

/* RANK said BYE: it leaves, clean. */
ss_life_decision ss_life_bye(ss_lifecycle *lc, uint32_t rank);

/* RANK's connection closed (SAID_BYE: a BYE came on it).  It leaves when it
 * said BYE or its process has exited; otherwise its exit decides. */
ss_life_decision ss_life_disconnect(ss_lifecycle *lc, uint32_t rank,
                                    int said_bye);

/* RANK's process ended: EXIT_CODE when TERM_SIGNAL is 0, else killed by
 * TERM_SIGNAL.  Leaves it, or starts the linger timer while its connection
 * is open. */
ss_life_decision ss_life_exit(ss_lifecycle *lc, uint32_t rank,
                              int64_t exit_code, int term_signal);

/* RANK's linger timer fired: returns 1 when its connection must be closed
 * now (its process is gone and the connection is still open), else 0. */
int ss_life_linger_over(const ss_lifecycle *lc, uint32_t rank);

/* Housekeeping at NOW for RANK: it leaves, missing, when it has neither
 * connected nor exited within the connect timeout. */
ss_life_decision ss_life_tick(ss_lifecycle *lc, uint32_t rank,
                              ss_mono_ns now);

/* RANK's node was lost (its agent's link ended without goodbye, or it
 * never joined): nothing more will be heard of it, so it leaves now,
 * missing, for WHY (static text), and counts as gone, not open. */
ss_life_decision ss_life_node_lost(ss_lifecycle *lc, uint32_t rank,
                                   const char *why);

/* The launcher has reported every process exited and drained. */
void ss_life_all_exited(ss_lifecycle *lc);

/* Returns 1, once, when the run ends now: every process has exited and no
 * connection is open.  The controller then calls ss_life_finish_rank for
 * each rank before finishing the aggregator. */
int ss_life_finish(ss_lifecycle *lc);

/* At the end of the run: RANK leaves, missing, if it is still in. */
ss_life_decision ss_life_finish_rank(ss_lifecycle *lc, uint32_t rank);

/* 1 when a process that ended so succeeded (status 0, no signal). */
int ss_life_exit_ok(int64_t exit_code, int term_signal);

/* Stepscope has begun to stop the ranks (a stop asked for, a hang acted
 * on, another rank's failure): a rank that ends without success from now
 * on was stopped by stepscope, not failed. */
void ss_life_stopping(ss_lifecycle *lc);

/* 1 when RANK ended without success after ss_life_stopping. */
int ss_life_rank_stopped(const ss_lifecycle *lc, uint32_t rank);

/* RANK failed of its own and first, although its exit was seen after a
 * peer's failure had begun the stop (the launcher decides which rank
 * failed first from the ranks' last lines, ss_launcher_first_failure):
 * it reads "failed", not stopped.  Returns 1 when that changed its state,
 * 0 when it was not read as stopped. */
int ss_life_failed_first(ss_lifecycle *lc, uint32_t rank);

/* RANK's state for the store (static text): "stopped_by_stepscope" when
 * it ended without success after stepscope stopped it, "failed" or
 * "exited" once its process ended otherwise, "lost" when its node was
 * lost before, "never_connected" while it never connected, else
 * "running". */
const char *ss_life_rank_state(const ss_lifecycle *lc, uint32_t rank);

/* The run's final status for the store: "interrupted" when the user
 * asked the job to stop (INTERRUPTED != 0, whatever the ranks' exit
 * codes), else from the job's exit status: "succeeded" (0) or "failed".
 * The run's exit code is the job's. */
const char *ss_life_run_status(int job_status, int interrupted);

/* Why an attempt ended, for the store's attempts.cause
 * (docs/fault-tolerance.md): "interrupted" when the user asked the job to
 * stop (STOPPED != 0, whatever JOB_STATUS is: ranks that handle SIGTERM
 * may exit 0), else "completed" when JOB_STATUS is 0, else
 * "rank_crash". */
const char *ss_life_attempt_cause(int job_status, int stopped);

/* ---- the end-of-run summary ---- */

/* The facts the summary states. */
typedef struct {
    int64_t run_id;
    const char *db_path;        /* --db as given, NULL for the default */
    int job_status;             /* the job's exit status */
    double seconds;
    uint64_t steps_finalized;   /* by the aggregator */
    uint32_t findings;          /* distinct findings raised */
    uint64_t rank_dropped_events, rank_dropped_records; /* by the ranks */
    /* vectors (ss_values): whole vectors the ranks dropped, elements the
     * ranks' per-vector cap cut, vectors the controller refused (the
     * aggregator's budget); the store's own are in STORED */
    uint64_t rank_dropped_vectors, rank_truncated_values, refused_vectors;
    ss_store_outcome stored;    /* after the last flush */
    uint32_t ranks;             /* of the last attempt */
    uint32_t ranks_silent;      /* ... that never sent telemetry */
    uint32_t ranks_cut_off;     /* ... that exited with success but whose
                                   connection ended without goodbye: their
                                   last frames never arrived */
    uint32_t ranks_ended_early; /* ... that exited with success, saying
                                   goodbye, before the latest step another
                                   rank completed (a job that succeeded) */
    uint32_t early_rank;        /* the one of them that ended first */
    int64_t early_last_step;    /* its last step */
    int64_t last_step;          /* the latest step any rank completed */
    uint64_t accepts_failed;    /* rank connections not accepted */
    int interrupted;            /* the user stopped the job */
    int auto_mode;              /* --auto: the ranks were instrumented */
} ss_run_summary;

/*
 * Appends the end-of-run summary for a person to OUT: one line, e.g.
 *
 *   run 3 finished in 4.0 s: 6000 steps finalized, 15 findings. `stepscope
 *   report 3` explains it.
 *
 * a warning line when ranks never sent telemetry (ss_life_silent_note: a
 * job that succeeded but recorded nothing is not a success to hide), one
 * when ranks that exited with success were cut off (ss_life_cut_off_note:
 * what they recorded last, and their counts of dropped data, are lost), a
 * note when ranks ended before the others' last step (ss_life_early_note),
 * and a line when the run's end was not stored; each line ends with
 * "\n" and has no "stepscope: " prefix.  It claims only what the store
 * committed: when something was lost it says how much and why ("6000 steps
 * finalized, 637 stored (5363 lost: disk full: ...)") and sends the reader
 * to the report for what was stored, never for an explanation it cannot
 * give; when the run's end was not written it says so, and that the store,
 * and so `stepscope report`, still shows the run as running.
 */
void ss_life_summary(const ss_run_summary *s, ss_buf *out);

/*
 * When ranks of a job that succeeded ended before the others' last step
 * (uneven data, a condition only some ranks took), appends one sentence
 * saying which ended first, where, and that the steps after it were
 * finalized without it, and returns 1; else appends nothing and returns
 * 0.  The summary prints it as a note (ss_life_summary), the run stores
 * it as a `ranks_ended_early` event.
 */
int ss_life_early_note(const ss_run_summary *s, ss_buf *out);

/*
 * When ranks never sent telemetry, appends one sentence saying how many
 * (and that connections were refused, when some were) to OUT, for the
 * summary's warning line and an event, e.g. "30 of 30 ranks never sent
 * telemetry: nothing of them is in the store (30 rank connections were
 * not accepted: see the accept_failed events)", and returns 1; returns 0
 * (OUT untouched) when every rank did.
 */
int ss_life_silent_note(const ss_run_summary *s, ss_buf *out);

/*
 * When ranks that exited with success ended their connection without
 * goodbye (their last records, counters and BYE not read: the controller
 * could not read them within the rank's second at exit, or the rank ended
 * without its exit handlers, as os._exit does), appends one sentence
 * saying how many to OUT and returns 1; returns 0 (OUT untouched) when
 * none did.
 */
int ss_life_cut_off_note(const ss_run_summary *s, ss_buf *out);

/*
 * When ranks connected but no step was finalized in a run that succeeded
 * or was interrupted (a failure says why itself), appends one sentence
 * saying why nothing was recorded and what to do (under --auto: what auto
 * mode counts as a step and `stepscope.step()`; else `stepscope.step()`
 * or --auto) to OUT, for the summary and an event, and returns 1; returns
 * 0 (OUT untouched) when steps were recorded or no rank connected
 * (ss_life_silent_note says that, with what to do: add --auto).
 */
int ss_life_empty_note(const ss_run_summary *s, ss_buf *out);

/*
 * When the store lost something of the run, appends one sentence saying
 * what to OUT, for an event that the report shows, e.g. "the store lost
 * 5363 of 6000 steps, 15 of 15 findings and 12 events (disk full:
 * database or disk is full)", and returns 1; returns 0 (OUT untouched)
 * when nothing was lost.
 */
int ss_life_loss_note(const ss_run_summary *s, ss_buf *out);

#endif
