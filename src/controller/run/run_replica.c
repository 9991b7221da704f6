/*
 * run_replica.c - what a replica_divergence finding does in `stepscope
 * run` (docs/consistency.md).
 *
 * --checksum-every N|auto, --checksum params|optimizer and
 * --replica-groups "0,1;2,3" are checked by the front-end (run_opts.h:
 * o->replica); the controller and every agent put them into their ranks' environment as
 * STEPSCOPE_CHECKSUM_EVERY, STEPSCOPE_CHECKSUM and STEPSCOPE_REPLICA_GROUPS
 * (rank_env.h; python/stepscope/_checksum.py reads them).  The attempt's
 * first replica_divergence finding always gets an event and every rank's
 * stacks stored with it (trigger 'divergence'); then --on-divergence
 * `stop` ends the job with SS_DIVERGENCE_EXIT_STATUS, `restart` ends the
 * attempt so that the restart policy (--max-restarts) starts the next
 * one, whose ranks on this node find the step that diverged in
 * STEPSCOPE_DIVERGED_AT and resume from a checkpoint taken before it.
 */
#include "run_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stack_service.h"

/* The stacks are stored (or WHY they are not); then --on-divergence stop
 * or restart ends the attempt, unless it ended meanwhile. */
static void on_divergence_stacks(void *ctx, const char *doc, size_t len,
                                 const char *why)
{
    run_ctx *r = ctx;
    (void)len;
    if (!doc)
        fprintf(stderr, "stepscope: replica divergence: no stacks: %s\n",
                why);
    else if (!r->o->quiet)
        fprintf(stderr, "stepscope: replica divergence: every rank's stacks "
                "are stored (`stepscope report` shows them merged)\n");
    if (r->o->on_divergence == SS_ON_DIVERGENCE_DUMP || r->rep.divergence_acted ||
        r->att.restart_pending || r->att.health_pending || r->ending ||
        r->job_stopping)
        return;
    r->rep.divergence_acted = 1;
    long long at = (long long)r->rep.divergence_step;
    if (r->o->on_divergence == SS_ON_DIVERGENCE_RESTART) {
        fprintf(stderr, "stepscope: replica divergence at step %lld: ending "
                "attempt %u to restart it from a checkpoint taken before "
                "(--on-divergence restart)\n", at, r->att.attempt);
        run_event(r, "stop_requested", -1, "stopped on a replica divergence "
                  "at step %lld to restart (--on-divergence restart)", at);
    } else {
        fprintf(stderr, "stepscope: replica divergence at step %lld: "
                "stopping the job (--on-divergence stop; exit status %d)\n",
                at, SS_DIVERGENCE_EXIT_STATUS);
        run_event(r, "stop_requested", -1, "stopped on a replica divergence "
                  "at step %lld (--on-divergence stop)", at);
    }
    run_stop_job(r, 0, "stopped on a replica divergence");
}

void run_replica_finding(run_ctx *r, const ss_finding *f)
{
    if (strcmp(f->kind, "replica_divergence") != 0 || r->rep.divergence_id)
        return;
    r->rep.divergence_id = f->id;
    r->rep.divergence_step = (int64_t)f->first_step;
    run_event(r, "replica_divergence", f->n_ranks == 1 ? f->ranks[0] : -1,
              "%s", f->message);
    if (ss_stack_service_capture(r->stacks, 0, "divergence", f->id,
                                 on_divergence_stacks, r) != 0)
        on_divergence_stacks(r, NULL, 0, "the stack service did not take "
                             "the request");
}

int run_replica_stopped(const run_ctx *r)
{
    return r->rep.divergence_acted && r->o->on_divergence == SS_ON_DIVERGENCE_STOP;
}

const char *run_replica_no_restart(const run_ctx *r)
{
    return run_replica_stopped(r) ? "--on-divergence stop" : "";
}

void run_replica_before_restart(run_ctx *r)
{
    int again = r->rep.divergence_acted &&
                r->o->on_divergence == SS_ON_DIVERGENCE_RESTART;
    ss_rank_env_set_diverged_at(&r->rank_env,
                                again ? r->rep.divergence_step : -1);
}

void run_replica_new_attempt(run_ctx *r)
{
    r->rep.divergence_id = 0;
    r->rep.divergence_acted = 0;
    r->rep.divergence_step = -1;
}
