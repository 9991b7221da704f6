/*
 * run_inject.c - health checks and injected faults in `stepscope run`, as
 * node 0's controller carries them out (run_internal.h).
 *
 * Health: node 0 checks itself before its ranks start (health.h), before
 * the first attempt and before each restart; the other nodes' agents check
 * themselves before theirs (at the join, and on each RESTART) and report
 * HEALTH.
 * A failure anywhere stops the job, names the node, the check and its
 * output on stderr and in a `health_check_failed` event, and makes the
 * attempt's cause `health_check`.
 *
 * Faults (inject.h): the controller hears every rank's STATUS and step
 * records, so it decides when a fault is due; the signal comes from the
 * rank's parent: this controller for node 0's ranks, the node's agent for
 * the others (INJECT).  Each fault is an `injected` event; an attempt that
 * fails after a fault fired is charged to it (`injected:SPEC`), which
 * MTBF leaves out (goodput.h).  Each fault fires once per run: a restarted
 * attempt (run.c, attempt.h) runs without the faults that fired.
 */
#include "run_internal.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "link_wire.h"

/* ---- health ---- */

void run_health_failed(run_ctx *r, uint32_t node, const char *check,
                       const char *output)
{
    /* The event keeps what fits of the output (the store's message is
     * bounded); stderr gets all of it. */
    run_event(r, "health_check_failed", -1, "node %u failed the health "
              "check '%s': %s", node, check, output);
    /* Before the ranks start no summary follows: the output goes out now.
     * Later, the summary's failure line carries it. */
    if (!r->launcher)
        fprintf(stderr, "stepscope: node %u failed the health check '%s':\n"
                "%s%s", node, check, output,
                output[0] && output[strlen(output) - 1] == '\n' ? "" : "\n");
    else
        fprintf(stderr, "stepscope: node %u failed the health check '%s'; "
                "stopping the job\n", node, check);
    if (!r->faults.health_failed) {
        r->faults.health_failed = 1;
        if (r->first_failure_status < 0)
            r->first_failure_status = 1;
        snprintf(r->failure_text, sizeof r->failure_text, "node %u failed the "
                 "health check '%s': %s", node, check, output);
    }
    char why[96];
    snprintf(why, sizeof why, "node %u failed its health check", node);
    if (r->launcher || (r->nodes && r->o->nnodes > 1))
        run_stop_job(r, 0, why);
}

/* Node 0's configuration: the master port is bound only here, and only
 * when it is fixed (a single-node run's launcher picks a free one). */
static ss_health_config node0_config(const run_ctx *r)
{
    ss_health_config cfg = r->o->health_cfg;
    cfg.master_port = r->o->master_port;
    return cfg;
}

int run_health_first(run_ctx *r, char *err, size_t errlen)
{
    ss_health_config cfg = node0_config(r);
    ss_health_result res;
    if (ss_health_run(&cfg, &res) == 0) {
        /* said after run_started, the run's first event */
        snprintf(r->faults.health_notes, sizeof r->faults.health_notes, "%s", res.notes);
        return 0;
    }
    if (res.interrupted) {
        r->stop_requests++;
        r->stopped_starting = res.interrupted;
        run_event(r, "stop_requested", -1, "stopped by %s during node 0's "
                  "health check", strsignal(res.interrupted));
        snprintf(err, errlen, "stopped by %s during node 0's health check "
                 "(%s); no rank was started", strsignal(res.interrupted),
                 res.output);
        return -1;
    }
    run_health_failed(r, 0, res.check, res.output);
    snprintf(err, errlen, "node 0 failed the health check '%s'; no rank was "
             "started", res.check);
    return -1;
}

/* Node 0's health check before a later attempt is done: a failure is
 * reported like any node's, then the attempt goes on (run_health_done). */
static void on_attempt_health(void *ctx, const ss_health_result *res)
{
    run_ctx *r = ctx;
    if (res->ok && res->notes[0])
        run_event(r, "health_check", -1, "node 0 passed: %s", res->notes);
    else if (!res->ok)
        run_health_failed(r, 0, res->check, res->output);
    run_health_done(r);
}

/* Node 0's check on the run's loop (the links' heartbeats go on while a
 * site command runs). */
int run_health_start(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    run_ctx *r = ctx;
    (void)attempt;
    ss_health_config cfg = node0_config(r);
    return ss_health_start(&r->loop, &cfg, on_attempt_health, r, err,
                           errlen);
}

/* ---- injected faults ---- */

/* A new attempt's ranks run.  The plan is kept (a fault that fired stays
 * fired: a restarted job is not broken the same way again); no fault is
 * charged with this attempt's end yet, and a SIGCONT still due was for a
 * process group of the attempt before. */
void run_inject_arm(run_ctx *r)
{
    r->faults.inject_ended = -1;
    for (uint32_t i = 0; i < SS_INJECT_MAX; i++) {
        uv_timer_stop(&r->faults.inject_cont[i]);
        r->faults.inject_pid[i] = 0;
    }
}

void run_inject_init(run_ctx *r)
{
    r->faults.inject_ended = -1;
    for (uint32_t i = 0; i < SS_INJECT_MAX; i++) {
        uv_timer_init(&r->loop, &r->faults.inject_cont[i]);
        r->faults.inject_cont[i].data = r;
    }
}

static void on_inject_cont(uv_timer_t *t)
{
    run_ctx *r = t->data;
    int idx = (int)(t - r->faults.inject_cont);
    if (r->faults.inject_pid[idx] > 0)
        kill(-r->faults.inject_pid[idx], SIGCONT);
    run_event(r, "injected", (int32_t)r->faults.inject.items[idx].target,
              "%s: SIGCONT to rank %u", r->faults.inject.items[idx].spec,
              r->faults.inject.items[idx].target);
}

/* Signals RANK for fault IDX: node 0's from here, the others' through
 * their agent. */
static void send_fault(run_ctx *r, int idx, uint32_t rank, int sig,
                       uint32_t duration_ms)
{
    uint32_t node = run_node_of(r, rank);
    const char *what = sig == SIGKILL ? "SIGKILL" : "SIGSTOP";
    if (node == 0) {
        int pid = ss_launcher_rank_pid(r->launcher, rank);
        if (pid <= 0 || kill(-pid, sig) != 0) {
            run_event(r, "injected", (int32_t)rank, "%s: rank %u is not "
                      "running; nothing sent", r->faults.inject.items[idx].spec,
                      rank);
            return;
        }
        if (duration_ms) {
            r->faults.inject_pid[idx] = pid;
            uv_timer_start(&r->faults.inject_cont[idx], on_inject_cont, duration_ms,
                           0);
        }
    } else {
        link_inject x = {rank, (uint8_t)sig, duration_ms};
        if (run_nodes_inject(r->nodes, node, &x) != 0) {
            run_event(r, "injected", (int32_t)rank, "%s: node %u is not "
                      "joined; nothing sent", r->faults.inject.items[idx].spec, node);
            return;
        }
    }
    if (duration_ms)
        run_event(r, "injected", (int32_t)rank, "%s: %s to rank %u (node %u) "
                  "for %u ms", r->faults.inject.items[idx].spec, what, rank, node,
                  duration_ms);
    else
        run_event(r, "injected", (int32_t)rank, "%s: %s to rank %u (node %u)",
                  r->faults.inject.items[idx].spec, what, rank, node);
}

void run_inject_observe(run_ctx *r, uint32_t rank, int64_t step)
{
    if (r->faults.inject.n == 0 || r->job_stopping)
        return;
    int idx;
    while ((idx = ss_inject_due(&r->faults.inject, rank, step, r->o->nproc_local)) >=
           0) {
        const ss_inject *x = &r->faults.inject.items[idx];
        uint32_t first, count, ms;
        int sig = ss_inject_signal(x, &ms);
        ss_inject_targets(x, r->o->nproc_local, &first, &count);
        /* Said even with -q: the job is being broken on purpose. */
        fprintf(stderr, "stepscope: injecting %s (rank %u at step %lld)\n",
                x->spec, rank, (long long)step);
        /* The first fault that ends ranks is charged with the failure it
         * causes; a pause only if nothing worse fired. */
        if (r->faults.inject_ended < 0 ||
            (ss_inject_is_fatal(x) &&
             !ss_inject_is_fatal(&r->faults.inject.items[r->faults.inject_ended])))
            r->faults.inject_ended = idx;
        for (uint32_t k = 0; k < count; k++)
            send_fault(r, idx, first + k, sig, ms);
    }
}

const char *run_fault_cause(run_ctx *r, int status, char *buf, size_t len)
{
    if (r->faults.health_failed)
        return "health_check";
    if (status == 0 || r->stop_requests > 0 || r->faults.inject_ended < 0)
        return NULL;
    snprintf(buf, len, "injected:%s", r->faults.inject.items[r->faults.inject_ended].spec);
    return buf;
}
