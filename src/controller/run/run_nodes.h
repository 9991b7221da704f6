/*
 * run_nodes.h - the other nodes of a multi-node `stepscope run`, as the
 * controller on node 0 sees them: a part of the run that owns its state
 * (each node's slot, the agent links, the other nodes' ranks' host
 * evidence and stacks) and reports to the run through a table of
 * callbacks (run_nodes_events), never by reaching into the run's state.
 *
 * An agent joins when its node rank is free and in range and it runs the
 * same job (node count, ranks per node, job id); its clock estimate
 * bounds its ranks' arrival comparisons; its ranks' starts and exits are
 * handed to the run; its host evidence is kept per rank step for the
 * aggregator.  A node whose link ends without goodbye, or that has not
 * joined within the join timeout, is lost: an event and the node's row
 * say so with its address, ranks and step, and the run is told (its ranks
 * leave, missing, and the job stops).  The stacks of the other nodes'
 * ranks are asked of their agents and assembled by remote_stacks.h; a
 * node that leaves answers for its ranks with why.  Single-threaded: the
 * controller's loop.
 */
#ifndef STEPSCOPE_RUN_NODES_H
#define STEPSCOPE_RUN_NODES_H

#include <stdint.h>
#include <uv.h>

#include "clocks.h"
#include "ingest.h"
#include "link_auth.h"
#include "model.h"
#include "node_partial.h"
#include "remote_stacks.h"
#include "run_opts.h"
#include "store.h"

/* How long the agents have to say goodbye once the job is over. */
#define SS_AGENTS_LEAVE_MS 5000

/* What the nodes report to the run, and the little they ask of it; every
 * call on the loop thread. */
typedef struct {
    void *ctx;
    /* An event of the run (no rank). */
    void (*event)(void *ctx, const char *kind, const char *msg);
    /* Global RANK, of another node, started as process PID. */
    void (*rank_started)(void *ctx, uint32_t rank, uint32_t pid);
    /* Global RANK, of another node, exited (FAILURE_TEXT: its agent's
     * words on a failure, or NULL). */
    void (*rank_exited)(void *ctx, uint32_t rank, int64_t exit_code,
                        int term_signal, const char *failure_text);
    /* NODE's ranks leave the run, missing, for WHY. */
    void (*ranks_lost)(void *ctx, uint32_t node, const char *why);
    /* A node was lost (MSG: which, how, at which step): the job's failure
     * and its stop.  NO_RESTART: why no attempt may follow, or NULL. */
    void (*node_failed)(void *ctx, const char *msg, const char *no_restart);
    /* NODE's health check before its ranks started failed. */
    void (*health_failed)(void *ctx, uint32_t node, const char *check,
                          const char *output);
    /* A node's ranks have all exited, or it is gone: the run may end. */
    void (*exited)(void *ctx);
    /* The job is over and every agent that joined has left. */
    void (*all_gone)(void *ctx);
    /* The last step RANK completed, -1 when none. */
    int64_t (*last_step)(void *ctx, uint32_t rank);
    /* RANK's records are compared with this clock bound. */
    void (*clock_bound)(void *ctx, uint32_t rank, int64_t bound_ns);
    /* Whether the job is being stopped (no node may join), and whether it
     * is over (the agents are leaving). */
    int (*stopping)(void *ctx);
    int (*ending)(void *ctx);
    /* A node's step partial (--aggregate node), times on the controller's
     * clock.  May be NULL. */
    void (*partial)(void *ctx, const ss_node_partial *p);
    /* A chunk of NODE's answer to a RECENT_REQ (run_nodes_recent); P's
     * bytes are valid during the call only.  May be NULL. */
    void (*recent_part)(void *ctx, uint32_t node, const link_recent_part *p);
} run_nodes_events;

typedef struct {
    const ss_run_opts *o;
    uv_loop_t *loop;
    ss_ingest *ingest;       /* the agents' ranks' bytes go there */
    ss_store *store;
    int64_t run_id;
    const link_secret *secret;
    const char *uuid;        /* the run's */
    const uint8_t *token;    /* the ranks' token, sealed for each agent */
} run_nodes_config;

typedef struct run_nodes run_nodes;

/* The nodes of the run: node 0's record, and on a multi-node run the
 * agents' listener.  NULL with ERR.  CFG and EV are copied. */
run_nodes *run_nodes_start(const run_nodes_config *cfg,
                           const run_nodes_events *ev, char *err,
                           size_t errlen);

/* The attempt whose facts the nodes' rows get from now on. */
void run_nodes_set_attempt(run_nodes *n, uint32_t attempt);

/* Whether every other node's ranks have exited (or the node is gone). */
int run_nodes_all_exited(const run_nodes *n);

/* Whether every node that joined has left (1 on a single node). */
int run_nodes_all_gone(const run_nodes *n);

/* The first non-zero status of another node's ranks (ALL_EXITED), or 0. */
int run_nodes_status(const run_nodes *n);

/* Housekeeping: nodes not joined within the join timeout of the attempt
 * that began at ATTEMPT_STARTED are lost. */
void run_nodes_tick(run_nodes *n, ss_mono_ns now, ss_mono_ns attempt_started);

/* The host evidence another node's agent sent for RANK's STEP: 0, or -1
 * when there is none. */
int run_nodes_host(const run_nodes *n, uint32_t rank, uint64_t step,
                   ss_host_step *out);

/* How long another node's RANK has been stopped at NOW, as its agent
 * said, and by what (*KIND); 0 while it runs, for a rank of this node, or
 * when its agent said nothing. */
ss_dur_ns run_nodes_stopped_for(const run_nodes *n, uint32_t rank,
                                ss_mono_ns now, ss_stop_kind *kind);

/* The other nodes' ranks' stacks (NULL on a single node). */
ss_remote_stacks *run_nodes_stacks(run_nodes *n);

/* Asks NODE's agent (not node 0) for a rank's latest rows (REQ; the
 * answer goes to run_nodes_events.recent_part): 0, or -1 with why it
 * cannot be asked in WHY. */
int run_nodes_recent(run_nodes *n, uint32_t node, const link_recent_req *req,
                     char *why, size_t whylen);

/* Stops every node's ranks for REASON (KILL_NOW: SIGKILL at once). */
void run_nodes_stop_all(run_nodes *n, int kill_now, const char *reason);

/* Sends fault X to NODE's agent: 0, or -1 when the node is not joined. */
int run_nodes_inject(run_nodes *n, uint32_t node, const link_inject *x);

/* No attempt follows: the agents are told to leave (END). */
void run_nodes_end_all(run_nodes *n);

/* At the end of the attempt: the nodes whose ranks all exited are done. */
void run_nodes_finish(run_nodes *n);

/* A new attempt begins (run_nodes_set_attempt said which): joined nodes
 * are told to relaunch their ranks (LINK_RESTART), lost ones must join
 * again within the join timeout. */
void run_nodes_restart(run_nodes *n);

/* The job was stopped on request (WHY: "stopped by Interrupt"): the nodes
 * that have not joined are no longer waited for.  They are recorded as
 * never joined, their ranks as lost, and the run ends as soon as the
 * joined nodes' ranks have; not a failure of its own. */
void run_nodes_stop_waiting(run_nodes *n, const char *why);

/* Closes the links (end of run); run_nodes_free once the loop ran on. */
void run_nodes_close(run_nodes *n);
void run_nodes_free(run_nodes *n);

#endif
