/*
 * run_numerics.c - what `stepscope run` does when the detectors find the
 * first non-finite value of an attempt (a `nonfinite` finding,
 * analysis/detect_nonfinite.c), as --on-nonfinite says: always an event
 * and every rank's stacks stored with the finding (as for a hang); then
 * `stop` ends the job with SS_NONFINITE_EXIT_STATUS, and `restart` ends
 * the attempt and launches the next one with --numerics full, so that the
 * replay from the last checkpoint names the module where the value was
 * born.  A replay that meets a non-finite value again is stopped: the
 * diagnosis is made, restarting once more would only repeat it
 * (docs/numerics.md).
 */
#include "run_internal.h"

#include <stdio.h>
#include <string.h>

#include "stack_service.h"

/* The stacks are stored (or WHY they are not); then --on-nonfinite stop
 * or restart ends the attempt. */
static void on_nonfinite_stacks(void *ctx, const char *doc, size_t len,
                                const char *why)
{
    run_ctx *r = ctx;
    (void)len;
    if (!doc)
        fprintf(stderr, "stepscope: non-finite value: no stacks: %s\n", why);
    else if (!r->o->quiet)
        fprintf(stderr, "stepscope: non-finite value: every rank's stacks "
                "are stored (`stepscope report` shows them merged)\n");
    /* Nothing to act on, or the attempt ended meanwhile. */
    if (!r->num.nonfinite_stop_why[0] || r->att.restart_pending ||
        r->att.health_pending || r->ending || r->job_stopping)
        return;
    r->num.nonfinite_acted = 1;
    if (!run_numerics_no_restart(r)[0]) {
        fprintf(stderr, "stepscope: non-finite value: stopping attempt %u "
                "to replay it with --numerics full (--on-nonfinite "
                "restart; SIGTERM, then SIGKILL after %.1f s)\n", r->att.attempt,
                r->o->grace_ms / 1000.0);
        run_event(r, "stop_requested", -1, "stopped on a non-finite value "
                  "to replay with --numerics full (--on-nonfinite restart)");
    } else {
        fprintf(stderr, "stepscope: non-finite value: stopping the job "
                "(%s; SIGTERM, then SIGKILL after %.1f s)\n",
                run_numerics_no_restart(r), r->o->grace_ms / 1000.0);
        run_event(r, "stop_requested", -1, "stopped on a non-finite value "
                  "(%s)", run_numerics_no_restart(r));
    }
    run_stop_job(r, 0, "stopped on a non-finite value");
}

void run_numerics_finding(run_ctx *r, const ss_finding *f)
{
    if (strcmp(f->kind, "nonfinite") != 0 || r->num.nonfinite_id)
        return;
    r->num.nonfinite_id = f->id;
    run_event(r, "nonfinite", f->n_ranks == 1 ? f->ranks[0] : -1, "%s",
              f->message);
    if (r->o->on_nonfinite != SS_ON_NONFINITE_DUMP)
        snprintf(r->num.nonfinite_stop_why, sizeof r->num.nonfinite_stop_why, "%s",
                 f->message);
    if (ss_stack_service_capture(r->stacks, 0, "nonfinite", f->id,
                                 on_nonfinite_stacks, r) != 0)
        on_nonfinite_stacks(r, NULL, 0, "the stack service did not take "
                            "the request");
}

const char *run_numerics_no_restart(const run_ctx *r)
{
    if (!r->num.nonfinite_acted)
        return "";
    if (r->o->on_nonfinite == SS_ON_NONFINITE_STOP)
        return "--on-nonfinite stop";
    if (r->num.numerics_replay)
        return "found again in the replay with --numerics full";
    return "";
}

void run_numerics_before_restart(run_ctx *r)
{
    if (!r->num.nonfinite_acted)
        return;
    r->num.numerics_replay = 1;
    ss_rank_env_set_numerics(&r->rank_env, "full");
}

void run_numerics_new_attempt(run_ctx *r)
{
    r->num.nonfinite_id = 0;
    r->num.nonfinite_acted = 0;
    r->num.nonfinite_stop_why[0] = '\0';
}
