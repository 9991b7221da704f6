/*
 * run_internal.h - what the files of `stepscope run` share: the run's
 * state and the few actions every part of the wiring takes.
 *
 * run.c wires one node's controller (store, ingest, aggregator, launcher,
 * HTTP); run_nodes.c adds the other nodes of a multi-node run (their agent
 * links, clocks, rank exits, losses and host evidence).  Both run on the
 * controller's one loop thread.  Not an interface for anything else.
 */
#ifndef STEPSCOPE_RUN_INTERNAL_H
#define STEPSCOPE_RUN_INTERNAL_H

#include <limits.h>
#include <stdint.h>
#include <uv.h>

#include "aggregator.h"
#include "attempt.h"
#include "clocks.h"
#include "hang.h"
#include "health.h"
#include "host_watch.h"
#include "http.h"
#include "ingest.h"
#include "inject.h"
#include "launcher.h"
#include "lifecycle.h"
#include "link_auth.h"
#include "live.h"
#include "run_hooks.h"
#include "run_inject.h"
#include "run_nodes.h"
#include "nodeconf.h"
#include "rank_env.h"
#include "recent_service.h"
#include "restart.h"
#include "run_opts.h"
#include "runlock.h"
#include "stack_service.h"
#include "store.h"

/* What the wiring keeps of a rank; its life cycle is in run_ctx.life. */
typedef struct {
    int64_t pid;
    char host[WIRE_MAX_STR + 1];
    wire_counters counters;
    uint64_t names_over_limit;  /* names it declared that the run refused */
    uint64_t values_over_limit; /* values under them, dropped */
    uv_timer_t linger;   /* closes a dead rank's connection after a while */
    /* its latest STATUS, for hang diagnosis */
    ss_mono_ns status_at;   /* 0: none yet */
    int64_t cur_step;       /* -1 between steps */
    int phase, collective;  /* run-wide name indexes, -1 none */
    uint64_t coll_seq;
    int coll_active;
    /* its first step of the attempt (run_ingest.c, "First steps") */
    int first_gate;         /* FIRST_NOT_YET, _HELD, _PASSED or _GONE */
    uint64_t first_step;    /* numbered as the rank sent it */
    int resumed_itself;     /* it said it resumed (RESUMED) */
    int64_t step_offset;    /* added to its step numbers */
} rank_slot;

typedef struct run_ctx run_ctx;

/* How one attempt ended, for the summary. */
typedef struct {
    char cause[48];
    int status;
} attempt_note;

/* The state of each part of the run, owned by the file named: the others
 * read it, only the owner writes it (but for the attempt's reset). */

/* The ranks' data path (run_ingest.c). */
typedef struct {
    uint64_t steps_finalized;
    uint32_t findings_seen;    /* finding ids run 1, 2, ... */
    uint64_t refused_records;
    uint64_t rejected_connections;
    uint64_t accepts_failed;   /* rank connections not accepted */
    uint64_t accepts_unsaid;   /* ... since the last time it was said */
    ss_mono_ns accept_said_at; /* 0: never */
    int said_names_over_limit; /* the stderr warning went out */
    int first_settled;         /* the attempt's first steps go on */
    ss_mono_ns first_held_at;  /* the first one held; 0: none */
} run_ingest_state;

/* What a nonfinite finding did in this attempt (run_numerics.c). */
typedef struct {
    uint32_t nonfinite_id;    /* this attempt's nonfinite finding, 0: none */
    int nonfinite_acted;      /* --on-nonfinite stop/restart ended it */
    int numerics_replay;      /* this attempt replays with --numerics full */
    char nonfinite_stop_why[512]; /* the finding that stopped it, or "" */
} run_numerics_state;

/* What a replica_divergence finding did in this attempt (run_replica.c). */
typedef struct {
    uint32_t divergence_id;   /* this attempt's replica_divergence, 0 */
    int divergence_acted;     /* --on-divergence stop/restart ended it */
    int64_t divergence_step;  /* the step of this attempt's divergence */
} run_replica_state;

struct run_ctx {
    const ss_run_opts *o;   /* as parsed by the front-end (run_opts.h) */
    const char *db_path;    /* o->db_path, or the default store's */
    const char *team_uri;   /* --db postgresql://...: db_path is the spool */
    struct ss_pg_pusher *team; /* copies the run there (pg_pusher.h) */
    ss_aggregator_config agg_cfg; /* o->agg_cfg with the host provider */
    int http_public;        /* listening beyond loopback: token required */
    const link_secret *secret; /* the agent links' (multi-node) */

    /* state */
    uv_loop_t loop;
    ss_store *store;
    ss_run_lock run_lock;   /* held while this controller lives (runlock.h) */
    int64_t run_id;
    char uuid[40];
    uint8_t token[WIRE_TOKEN_SIZE];
    char default_db[PATH_MAX]; /* db_path points here without --db */
    char sock_dir[PATH_MAX];
    char sock_path[PATH_MAX];
    char log_path[PATH_MAX];
    ss_aggregator *agg;
    ss_ingest *ingest;
    ss_launcher *launcher;  /* node 0's, behind the real hooks (run.c) */
    run_hooks hooks;        /* the launcher, timers and clock (run_hooks.h) */
    int launched;           /* node 0's ranks of this attempt were launched */
    ss_host_watch *host;    /* NULL with --host-interval 0 */
    ss_hang hang;
    ss_hang_rank *hang_ranks; /* nprocs, filled on each tick */
    char hang_stop_why[512]; /* --on-hang stop ended the job: the finding */
    rank_slot *ranks;
    ss_lifecycle life;
    uv_signal_t sig_int, sig_term, sig_hup;
    uv_timer_t tick;
    ss_mono_ns tick_at;         /* the housekeeping tick's last run (its
                                   start before the first) */
    ss_mono_ns started;         /* the run's start */
    uint32_t stop_requests;
    int last_signal;          /* the last stop request's signal and when */
    ss_mono_ns last_signal_at; /* it came, to know it again (run.c) */
    int stopped_starting;   /* the signal that stopped the start-up */
    int stop_signal;        /* the first SIGINT/SIGTERM/SIGHUP that asked
                               for a stop, 0: none (the run is then
                               `interrupted`, exit status 128 + it) */
    int64_t first_step, last_step; /* of this attempt's finalized steps */
    int64_t resumed_from;   /* the step the ranks resumed from; -1: none */
    ss_live *live;          /* what the HTTP server shows; NULL-safe */
    ss_http *http;          /* NULL with --no-http */
    struct ss_profiler *profiler; /* `stepscope profile`; NULL if none */
    char live_file[PATH_MAX]; /* PATH.d/live/run-ID.json, "" if none */
    run_nodes *nodes;       /* the other nodes (run_nodes.h); node 0's
                               record alone on a single-node run */
    int job_stopping;       /* the whole job is being stopped */
    int local_all_exited;   /* node 0's launcher reported its ranks gone */
    int first_failure_status; /* -1: none yet (the job's status) */
    char failure_text[4200];  /* why it failed, when on another node */
    int failure_said;         /* ... and it was printed when it happened */
    int store_moved;          /* the store's file left its path (removed or
                                 replaced) while the run recorded; saved
                                 there again at the end (run_summary.c) */
    ss_rank_env rank_env;   /* what the local ranks get */
    ss_stack_service *stacks; /* every rank's stacks (docs/debug.md);
                                 ss_stack_service_capture for the run */
    ss_recent_service *recent; /* a rank's latest steps (recent_service.h) */
    /* attempts (run.c, restart.h) */
    ss_attempt att;           /* the attempt, its health checks, the
                                 restart policy and its backoff */
    uv_timer_t restart_timer; /* the backoff before the next attempt */
    uv_timer_t leave_timer;   /* the agents' goodbye at the end */
    int hang_acted;           /* --on-hang stop/restart ended this attempt */
    int node_lost_attempt;    /* a node was lost in this attempt */
    char no_restart_why[300]; /* a failure no restart may follow, else "" */
    attempt_note *notes;      /* max_restarts + 1 */
    uint32_t n_notes;
    int final_status;         /* the last attempt's exit status */
    int ending;               /* no attempt follows: the agents leave */
    run_ingest_state in;      /* run_ingest.c */
    run_numerics_state num;   /* run_numerics.c */
    run_replica_state rep;    /* run_replica.c */
    run_faults faults;        /* run_inject.h */
    int health_failed;        /* a node failed its check: cause
                                 health_check */
    struct run_agg *aggregate; /* multi-node: --aggregate (run_aggregate.h);
                                  NULL on a single node */
};



/* The run's clock (run_hooks.h). */
static inline ss_mono_ns run_now(const run_ctx *r)
{
    return r->hooks.now(r->hooks.ctx);
}

/* ---- run.c: the run's parts and its attempts ---- */

/* Sets up the run's parts on R, whose options, store, run id, sink host
 * provider (agg_cfg) and hooks are set: the aggregator, the ranks' slots,
 * their life cycle, the attempts' notes and the attempt module with the
 * run's attempt hooks (launch, prepare, over, backoff through R->hooks).
 * Nothing is launched: ss_attempt_begin(&r->att) does.  Returns 0, or -1
 * with ERR. */
int run_parts_init(run_ctx *r, char *err, size_t errlen);

/* Frees what run_parts_init set up.  Safe on a part not set up. */
void run_parts_free(run_ctx *r);

/* The store's settings for the run of O: the defaults, a queue that holds
 * a few steps of its world, under node aggregation the rows of about
 * SS_AGGREGATE_NODE_ROWS ranks a step, and above SS_AGGREGATE_NODE_ABOVE
 * ranks the ranks' totals every SS_LARGE_WORLD_TOTALS_MS (docs/store.md). */
void run_store_config(const ss_run_opts *o, ss_store_config *cfg);

/* ---- run_ranks.c: the ranks' lives ---- */

/* RANK's linger timer fired (run_hooks.h): the process is gone but its
 * connection stays open; the life cycle decides whether to drop it. */
void run_linger_over(run_ctx *r, uint32_t rank);

/* The launcher's callbacks for node 0's ranks into CB (CTX: R). */
void run_launch_callbacks(run_ctx *r, ss_launch_callbacks *cb);

/* Records an event in the store. */
void run_event(run_ctx *r, const char *kind, int32_t rank, const char *fmt,
               ...) __attribute__((format(printf, 4, 5)));

/* Stores RANK's facts with STATE (NULL or "": leave the state as it is). */
void run_put_rank(run_ctx *r, uint32_t rank, const char *state);

/* Does what the life-cycle policy decided D for RANK. */
void run_carry_out(run_ctx *r, uint32_t rank, ss_life_decision d);

/* Ends the run when the policy says every rank is done. */
void run_maybe_finish(run_ctx *r);

/* Stops the whole job (every node) for REASON; KILL_NOW: SIGKILL at
 * once.  The first call decides the reason; later calls only escalate. */
void run_stop_job(run_ctx *r, int kill_now, const char *reason);

/* A rank ended: the life cycle, the store, the live state and, for a
 * failure, the job's first failure and its stop. */
void run_rank_exited(run_ctx *r, uint32_t rank, int64_t exit_code,
                     int term_signal, const char *failure_text);

/* The health checks started by run_faults_health_start are done;
 * a failure was reported with run_health_failed (r->health_failed): the
 * attempt ends (cause health_check, never restarted), else its ranks are
 * launched now. */
void run_health_done(run_ctx *r);

/* Ends the controller's loop: the run is over. */
void run_end_loop(run_ctx *r);

/* ---- run_ingest.c: the ranks' data path ---- */

/* The ingest socket's callbacks into CB (CTX: R). */
void run_ingest_callbacks(run_ctx *r, ss_ingest_callbacks *cb);

/* A new attempt: its ranks' first steps are held again until each of
 * node 0's ranks has sent one or said it resumed (run_ingest.c). */
void run_ingest_new_attempt(run_ctx *r);

/* Each tick: first steps held for FIRST_HOLD_MAX_NS go on. */
void run_ingest_tick(run_ctx *r, ss_mono_ns now);

/* The aggregator's sink (ss_sink, CTX: the run): a finalized step, and
 * every emission of a finding. */
void run_sink_step(void *ctx, const ss_step_view *v,
                   const char *const *names);
void run_sink_finding(void *ctx, const ss_finding *f);

/* ---- run_summary.c: the end of the run ---- */

/* The run is over with the job's STATUS: its losses recorded, the run
 * ended in the store, the summary printed (after the store committed). */
void run_summary_end(run_ctx *r, int status);

/* NODE failed its health check CHECK with OUTPUT (run_ranks.c): stderr,
 * an event, the job's failure (status 1, cause health_check) and its
 * stop. */
void run_health_failed(run_ctx *r, uint32_t node, const char *check,
                       const char *output);

/* Sets up the faults part (run_inject.h) with the run's callbacks. */
void run_faults_wire(run_ctx *r);

/* ---- run_numerics.c: what a nonfinite finding does (--on-nonfinite) ---- */

/* Every emission of a finding goes through here: the attempt's first
 * nonfinite finding gets an event and every rank's stacks stored with it;
 * then --on-nonfinite stop ends the job, restart the attempt (and a
 * replay's finding stops it: one diagnosis is enough). */
void run_numerics_finding(run_ctx *r, const ss_finding *f);

/* Why no attempt may follow this one for a non-finite value ("" when
 * none acted or --on-nonfinite restart allows one). */
const char *run_numerics_no_restart(const run_ctx *r);

/* A restart is scheduled: after --on-nonfinite restart acted, the next
 * attempt's ranks get --numerics full. */
void run_numerics_before_restart(run_ctx *r);

/* A new attempt begins: this attempt's numerics state is cleared. */
void run_numerics_new_attempt(run_ctx *r);

/* ---- run_replica.c: what --on-divergence does ---- */

/* Every emission of a finding goes through here: the attempt's first
 * replica_divergence gets an event and every rank's stacks stored with
 * it; then --on-divergence stop ends the job, restart the attempt. */
void run_replica_finding(run_ctx *r, const ss_finding *f);

/* Whether --on-divergence stop ended the job. */
int run_replica_stopped(const run_ctx *r);

/* Why no attempt may follow this one after a divergence
 * ("--on-divergence stop"), or "". */
const char *run_replica_no_restart(const run_ctx *r);

/* A restart is scheduled: after --on-divergence restart acted, the next
 * attempt's ranks get STEPSCOPE_DIVERGED_AT; after any other end, not. */
void run_replica_before_restart(run_ctx *r);

/* A new attempt begins: the divergence state is cleared. */
void run_replica_new_attempt(run_ctx *r);

/* The node of RANK. */
static inline uint32_t run_node_of(const run_ctx *r, uint32_t rank)
{
    return r->o->nproc_local ? rank / r->o->nproc_local : 0;
}

/* Starts the nodes part (run_nodes.h) with the run's callbacks: 0, or -1
 * with ERR. */
int run_nodes_wire(run_ctx *r, char *err, size_t errlen);

#endif
