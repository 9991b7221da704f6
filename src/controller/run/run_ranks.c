/*
 * run_ranks.c - the ranks' lives in `stepscope run`: what the launcher
 * (node 0's ranks) and the nodes part (run_nodes.h: the other nodes'
 * ranks and the nodes themselves) report, turned into the life-cycle
 * policy's decisions (lifecycle.h) and carried out: the aggregator stops
 * waiting for a rank that left, the linger timer, the ranks' rows and
 * live state, the job's first failure and the stop of every node.  Runs
 * on the controller's loop.
 */
#include "run_aggregate.h"
#include "run_internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* Stores RANK's facts with STATE (NULL or "": leave the state as it is). */
void run_put_rank(run_ctx *r, uint32_t rank, const char *state)
{
    rank_slot *s = &r->ranks[rank];
    const ss_rank_life *life = &r->life.ranks[rank];
    ss_rank_info info;
    memset(&info, 0, sizeof info);
    info.rank = rank;
    info.attempt = r->att.attempt;
    snprintf(info.host, sizeof info.host, "%s", s->host);
    info.pid = s->pid ? s->pid : -1;
    snprintf(info.state, sizeof info.state, "%s", state ? state : "");
    info.exit_code = life->exited && !life->term_signal ? life->exit_code
                                                         : -1;
    info.term_signal = life->exited ? life->term_signal : -1;
    ss_rank_state st;
    ss_aggregator_rank_state(r->agg, rank, &st);
    info.last_step = st.last_step;
    info.dropped_events = (int64_t)s->counters.dropped_events;
    info.dropped_records = (int64_t)s->counters.dropped_records;
    info.names_over_limit = (int64_t)s->names_over_limit;
    info.values_over_limit = (int64_t)s->values_over_limit;
    if (r->log_path[0])
        snprintf(info.log_path, sizeof info.log_path, "%s/rank-%u.log",
                 r->log_path, rank);
    ss_store_put_rank(r->store, r->run_id, &info);
    if (state && state[0])
        ss_live_rank_state(r->live, rank, state);
}

/* Does what the policy decided D for RANK: the aggregator stops waiting
 * for a rank that leaves (a missing one's unfinished steps are finalized
 * with it missing, and an event says so), and the linger timer. */
void run_carry_out(run_ctx *r, uint32_t rank, ss_life_decision d)
{
    if (d.leave != SS_STAYS) {
        int missing = d.leave == SS_LEAVES_MISSING;
        ss_aggregator_rank_left(r->agg, rank, missing);
        if (missing)
            run_event(r, "rank_missing", (int32_t)rank, "rank %u %s; its "
                  "unfinished steps are finalized with it missing", rank,
                  d.why);
    }
    if (d.linger == SS_LINGER_START)
        r->hooks.linger(r->hooks.ctx, rank, 1);
    else if (d.linger == SS_LINGER_STOP)
        r->hooks.linger(r->hooks.ctx, rank, 0);
}

void run_linger_over(run_ctx *r, uint32_t rank)
{
    /* The process is gone but something keeps its socket open (a forked
     * child, say): stop waiting for it; its disconnect decides. */
    if (ss_life_linger_over(&r->life, rank))
        ss_ingest_drop_rank(r->ingest, rank);
}

void run_rank_exited(run_ctx *r, uint32_t rank, int64_t exit_code,
                     int term_signal, const char *failure_text)
{
    ss_life_decision d = ss_life_exit(&r->life, rank, exit_code, term_signal);
    if (rank < r->o->nproc_local)
        ss_host_watch_rank_exited(r->host, rank);
    ss_live_rank_exit(r->live, rank, exit_code, term_signal);
    int ok = ss_life_exit_ok(exit_code, term_signal);
    /* A rank that stepscope stopped did not fail: "rank_stopped". */
    int stopped = ss_life_rank_stopped(&r->life, rank);
    const char *kind = ok ? "rank_exited" : stopped ? "rank_stopped"
                                                    : "rank_failed";
    const char *by = stopped ? " (stopped by stepscope)" : "";
    char oom[320] = "";
    if (term_signal == SIGKILL && !stopped && rank < r->o->nproc_local &&
        r->hooks.oom_kill && r->hooks.oom_kill(r->hooks.ctx, rank, oom + 2,
                                               sizeof oom - 2))
        memcpy(oom, ": ", 2);
    if (term_signal)
        run_event(r, kind, (int32_t)rank, "rank %u was killed by signal %d "
                  "(%s)%s%s", rank, term_signal, strsignal(term_signal), by,
                  oom);
    else
        run_event(r, kind, (int32_t)rank, "rank %u exited with status "
                  "%" PRId64 "%s", rank, exit_code, by);
    if (d.never_connected)
        run_event(r, "rank_never_connected", (int32_t)rank,
              "rank %u exited without ever sending telemetry", rank);
    run_carry_out(r, rank, d);
    run_put_rank(r, rank, ss_life_rank_state(&r->life, rank));
    if (ok || r->job_stopping)
        return;
    /* The job's first failure: every node stops (torchrun's policy). */
    if (r->first_failure_status < 0) {
        r->first_failure_status =
            term_signal ? 128 + term_signal : (int)(exit_code & 0xff);
        if (failure_text)
            snprintf(r->failure_text, sizeof r->failure_text,
                     "node %u: %s", run_node_of(r, rank), failure_text);
    }
    char why[96];
    snprintf(why, sizeof why, "rank %u failed", rank);
    run_stop_job(r, 0, why);
}

/* Node 0's own ranks: the launcher's local index is the global rank. */
static void cb_rank_exit(void *ctx, uint32_t rank, int64_t exit_code,
                         int term_signal)
{
    run_rank_exited(ctx, rank, exit_code, term_signal, NULL);
}

void run_stop_job(run_ctx *r, int kill_now, const char *reason)
{
    if (r->job_stopping && !kill_now)
        return;
    r->job_stopping = 1;
    ss_life_stopping(&r->life);
    r->hooks.stop_ranks(r->hooks.ctx, kill_now, reason);
    run_nodes_stop_all(r->nodes, kill_now, reason);
}

static int cb_last_step(void *ctx, uint32_t rank, uint64_t *step)
{
    run_ctx *r = ctx;
    ss_rank_state st;
    ss_aggregator_rank_state(r->agg, rank, &st);
    if (st.last_step < 0)
        return 0;
    *step = (uint64_t)st.last_step;
    return 1;
}

/* Every node has ended its ranks: the life cycle may end the run. */
static void check_all_exited(run_ctx *r)
{
    if (r->local_all_exited && run_nodes_all_exited(r->nodes)) {
        ss_life_all_exited(&r->life);
        run_maybe_finish(r);
    }
}

static void cb_all_exited(void *ctx)
{
    run_ctx *r = ctx;
    uint32_t left = r->hooks.left_behind(r->hooks.ctx);
    if (left) {
        fprintf(stderr, "stepscope: ended %" PRIu32 " process%s the ranks "
                "left behind\n", left, left == 1 ? "" : "es");
        run_event(r, "left_behind", -1, "%" PRIu32 " process%s the ranks left "
              "behind (outside their process groups) were ended", left,
              left == 1 ? "" : "es");
    }
    r->local_all_exited = 1;
    check_all_exited(r);
}


void run_launch_callbacks(run_ctx *r, ss_launch_callbacks *cb)
{
    *cb = (ss_launch_callbacks){r, cb_rank_exit, cb_all_exited,
                                cb_last_step};
}

/* ---- what the nodes part reports (run_nodes_events) ---- */

static void nodes_event(void *ctx, const char *kind, const char *msg)
{
    run_event(ctx, kind, -1, "%s", msg);
}

static void nodes_rank_started(void *ctx, uint32_t rank, uint32_t pid)
{
    run_ctx *r = ctx;
    r->ranks[rank].pid = pid;
}

static void nodes_rank_exited(void *ctx, uint32_t rank, int64_t exit_code,
                              int term_signal, const char *failure_text)
{
    run_rank_exited(ctx, rank, exit_code, term_signal, failure_text);
}

static void nodes_ranks_lost(void *ctx, uint32_t node, const char *why)
{
    run_ctx *r = ctx;
    for (uint32_t i = 0; i < r->o->nproc_local; i++) {
        uint32_t rank = node * r->o->nproc_local + i;
        run_carry_out(r, rank, ss_life_node_lost(&r->life, rank, why));
        run_put_rank(r, rank, ss_life_rank_state(&r->life, rank));
        ss_live_rank_state(r->live, rank, "lost");
    }
}

static void nodes_node_failed(void *ctx, const char *msg,
                              const char *no_restart)
{
    run_ctx *r = ctx;
    r->node_lost_attempt = 1;
    if (no_restart)
        snprintf(r->no_restart_why, sizeof r->no_restart_why, "%s",
                 no_restart);
    if (r->first_failure_status < 0) {
        r->first_failure_status = 1;
        snprintf(r->failure_text, sizeof r->failure_text, "%s", msg);
        r->failure_said = 1; /* the nodes part printed it (run_nodes.c) */
    }
    run_stop_job(r, 0, msg);
}

static void nodes_health_failed(void *ctx, uint32_t node, const char *check,
                                const char *output)
{
    run_health_failed(ctx, node, check, output);
}

static void nodes_exited(void *ctx)
{
    check_all_exited(ctx);
}

static void nodes_all_gone(void *ctx)
{
    run_end_loop(ctx);
}

static int64_t nodes_last_step(void *ctx, uint32_t rank)
{
    run_ctx *r = ctx;
    ss_rank_state st;
    ss_aggregator_rank_state(r->agg, rank, &st);
    return st.last_step;
}

static void nodes_clock_bound(void *ctx, uint32_t rank, int64_t bound_ns)
{
    run_ctx *r = ctx;
    ss_aggregator_set_clock_bound(r->agg, rank, bound_ns);
}

static int nodes_stopping(void *ctx)
{
    return ((run_ctx *)ctx)->job_stopping;
}

static int nodes_ending(void *ctx)
{
    return ((run_ctx *)ctx)->ending;
}

static void nodes_partial(void *ctx, const ss_node_partial *p)
{
    run_ctx *r = ctx;
    run_agg_partial(r->aggregate, p, run_now(r));
}

/* A chunk of another node's answer to a rank's recent steps. */
static void nodes_recent_part(void *ctx, uint32_t node,
                              const link_recent_part *p)
{
    run_ctx *r = ctx;
    ss_recent_service_part(r->recent, node, p);
}

int run_nodes_wire(run_ctx *r, char *err, size_t errlen)
{
    run_nodes_config cfg = {r->o, &r->loop, r->ingest, r->store, r->run_id,
                            r->secret, r->uuid, r->token};
    run_nodes_events ev = {.ctx = r,
                           .event = nodes_event,
                           .rank_started = nodes_rank_started,
                           .rank_exited = nodes_rank_exited,
                           .ranks_lost = nodes_ranks_lost,
                           .node_failed = nodes_node_failed,
                           .health_failed = nodes_health_failed,
                           .exited = nodes_exited,
                           .all_gone = nodes_all_gone,
                           .last_step = nodes_last_step,
                           .clock_bound = nodes_clock_bound,
                           .stopping = nodes_stopping,
                           .ending = nodes_ending,
                           .partial = nodes_partial,
                           .recent_part = nodes_recent_part};
    r->nodes = run_nodes_start(&cfg, &ev, err, errlen);
    return r->nodes ? 0 : -1;
}

/* ---- health checks and injected faults (run_inject.h) ---- */

void run_health_failed(run_ctx *r, uint32_t node, const char *check,
                       const char *output)
{
    /* The event keeps what fits of the output (the store's message is
     * bounded); stderr gets all of it. */
    run_event(r, "health_check_failed", -1, "node %u failed the health "
              "check '%s': %s", node, check, output);
    /* Before the ranks start no summary follows: the output goes out now.
     * Later, the summary's failure line carries it. */
    if (!r->launched)
        fprintf(stderr, "stepscope: node %u failed the health check '%s':\n"
                "%s%s", node, check, output,
                output[0] && output[strlen(output) - 1] == '\n' ? "" : "\n");
    else
        fprintf(stderr, "stepscope: node %u failed the health check '%s'; "
                "stopping the job\n", node, check);
    if (!r->health_failed) {
        r->health_failed = 1;
        if (r->first_failure_status < 0)
            r->first_failure_status = 1;
        snprintf(r->failure_text, sizeof r->failure_text, "node %u failed the "
                 "health check '%s': %s", node, check, output);
    }
    char why[96];
    snprintf(why, sizeof why, "node %u failed its health check", node);
    if (r->launched || (r->nodes && r->o->nnodes > 1))
        run_stop_job(r, 0, why);
}

static void faults_event(void *ctx, const char *kind, int32_t rank,
                         const char *msg)
{
    run_event(ctx, kind, rank, "%s", msg);
}

static int faults_rank_pid(void *ctx, uint32_t rank)
{
    run_ctx *r = ctx;
    return r->hooks.rank_pid(r->hooks.ctx, rank);
}

static int faults_to_node(void *ctx, uint32_t node, const link_inject *x)
{
    run_ctx *r = ctx;
    return run_nodes_inject(r->nodes, node, x);
}

static void faults_health_failed(void *ctx, uint32_t node, const char *check,
                                 const char *output)
{
    run_health_failed(ctx, node, check, output);
}

static void faults_health_done(void *ctx)
{
    run_health_done(ctx);
}

void run_faults_wire(run_ctx *r)
{
    run_inject_events ev = {.ctx = r,
                            .event = faults_event,
                            .rank_pid = faults_rank_pid,
                            .to_node = faults_to_node,
                            .stopping = nodes_stopping,
                            .health_failed = faults_health_failed,
                            .health_done = faults_health_done};
    run_faults_setup(&r->faults, r->o, &r->loop, &ev);
}
