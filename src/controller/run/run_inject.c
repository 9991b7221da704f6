/*
 * run_inject.c - health checks and injected faults in `stepscope run`, as
 * node 0's controller carries them out (run_inject.h).
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
#include "run_inject.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "health.h"

static void event(run_faults *f, const char *kind, int32_t rank,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void event(run_faults *f, const char *kind, int32_t rank,
                  const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f->ev.event(f->ev.ctx, kind, rank, msg);
}

void run_faults_setup(run_faults *f, const ss_run_opts *o, uv_loop_t *loop,
                      const run_inject_events *ev)
{
    memset(f, 0, sizeof *f);
    f->o = o;
    f->loop = loop;
    f->ev = *ev;
    f->inject = o->inject;
    f->inject_ended = -1;
}

/* ---- health ---- */

/* Node 0's configuration: the master port is bound only here, and only
 * when it is fixed (a single-node run's launcher picks a free one). */
static ss_health_config node0_config(const run_faults *f)
{
    ss_health_config cfg = f->o->health_cfg;
    cfg.master_port = f->o->master_port;
    return cfg;
}

int run_faults_health_first(run_faults *f, int *interrupted, char *err,
                            size_t errlen)
{
    ss_health_config cfg = node0_config(f);
    ss_health_result res;
    *interrupted = 0;
    if (ss_health_run(&cfg, &res) == 0) {
        /* said after run_started, the run's first event */
        snprintf(f->health_notes, sizeof f->health_notes, "%s", res.notes);
        return 0;
    }
    if (res.interrupted) {
        *interrupted = res.interrupted;
        snprintf(err, errlen, "stopped by %s during node 0's health check "
                 "(%s); no rank was started", strsignal(res.interrupted),
                 res.output);
        return -1;
    }
    f->ev.health_failed(f->ev.ctx, 0, res.check, res.output);
    snprintf(err, errlen, "node 0 failed the health check '%s'; no rank was "
             "started", res.check);
    return -1;
}

const char *run_faults_health_notes(const run_faults *f)
{
    return f->health_notes;
}

/* Node 0's health check before a later attempt is done: a failure is
 * reported like any node's, then the attempt goes on (health_done). */
static void on_attempt_health(void *ctx, const ss_health_result *res)
{
    run_faults *f = ctx;
    if (res->ok && res->notes[0])
        event(f, "health_check", -1, "node 0 passed: %s", res->notes);
    else if (!res->ok)
        f->ev.health_failed(f->ev.ctx, 0, res->check, res->output);
    f->ev.health_done(f->ev.ctx);
}

/* Node 0's check on the run's loop (the links' heartbeats go on while a
 * site command runs). */
int run_faults_health_start(run_faults *f, char *err, size_t errlen)
{
    ss_health_config cfg = node0_config(f);
    return ss_health_start(f->loop, &cfg, on_attempt_health, f, err, errlen);
}

/* ---- injected faults ---- */

/* A new attempt's ranks run.  The plan is kept (a fault that fired stays
 * fired: a restarted job is not broken the same way again); no fault is
 * charged with this attempt's end yet, and a SIGCONT still due was for a
 * process group of the attempt before. */
void run_faults_arm(run_faults *f)
{
    f->inject_ended = -1;
    for (uint32_t i = 0; i < SS_INJECT_MAX; i++) {
        uv_timer_stop(&f->inject_cont[i]);
        f->inject_pid[i] = 0;
    }
}

void run_faults_start(run_faults *f)
{
    f->inject_ended = -1;
    for (uint32_t i = 0; i < SS_INJECT_MAX; i++) {
        uv_timer_init(f->loop, &f->inject_cont[i]);
        f->inject_cont[i].data = f;
    }
}

static void on_inject_cont(uv_timer_t *t)
{
    run_faults *f = t->data;
    int idx = (int)(t - f->inject_cont);
    if (f->inject_pid[idx] > 0)
        kill(-f->inject_pid[idx], SIGCONT);
    event(f, "injected", (int32_t)f->inject.items[idx].target,
              "%s: SIGCONT to rank %u", f->inject.items[idx].spec,
              f->inject.items[idx].target);
}

/* Signals RANK for fault IDX: node 0's from here, the others' through
 * their agent. */
static void send_fault(run_faults *f, int idx, uint32_t rank, int sig,
                       uint32_t duration_ms)
{
    uint32_t node = f->o->nproc_local ? rank / f->o->nproc_local : 0;
    const char *what = sig == SIGKILL ? "SIGKILL" : "SIGSTOP";
    if (node == 0) {
        int pid = f->ev.rank_pid(f->ev.ctx, rank);
        if (pid <= 0 || kill(-pid, sig) != 0) {
            event(f, "injected", (int32_t)rank, "%s: rank %u is not "
                      "running; nothing sent", f->inject.items[idx].spec,
                      rank);
            return;
        }
        if (duration_ms) {
            f->inject_pid[idx] = pid;
            uv_timer_start(&f->inject_cont[idx], on_inject_cont, duration_ms,
                           0);
        }
    } else {
        link_inject x = {rank, (uint8_t)sig, duration_ms};
        if (f->ev.to_node(f->ev.ctx, node, &x) != 0) {
            event(f, "injected", (int32_t)rank, "%s: node %u is not "
                      "joined; nothing sent", f->inject.items[idx].spec, node);
            return;
        }
    }
    if (duration_ms)
        event(f, "injected", (int32_t)rank, "%s: %s to rank %u (node %u) "
                  "for %u ms", f->inject.items[idx].spec, what, rank, node,
                  duration_ms);
    else
        event(f, "injected", (int32_t)rank, "%s: %s to rank %u (node %u)",
                  f->inject.items[idx].spec, what, rank, node);
}

void run_faults_observe(run_faults *f, uint32_t rank, int64_t step)
{
    if (f->inject.n == 0 || f->ev.stopping(f->ev.ctx))
        return;
    int idx;
    while ((idx = ss_inject_due(&f->inject, rank, step, f->o->nproc_local)) >=
           0) {
        const ss_inject *x = &f->inject.items[idx];
        uint32_t first, count, ms;
        int sig = ss_inject_signal(x, &ms);
        ss_inject_targets(x, f->o->nproc_local, &first, &count);
        /* Said even with -q: the job is being broken on purpose. */
        fprintf(stderr, "stepscope: injecting %s (rank %u at step %lld)\n",
                x->spec, rank, (long long)step);
        /* The first fault that ends ranks is charged with the failure it
         * causes; a pause only if nothing worse fired. */
        if (f->inject_ended < 0 ||
            (ss_inject_is_fatal(x) &&
             !ss_inject_is_fatal(&f->inject.items[f->inject_ended])))
            f->inject_ended = idx;
        for (uint32_t k = 0; k < count; k++)
            send_fault(f, idx, first + k, sig, ms);
    }
}

const char *run_faults_cause(const run_faults *f, int status, int stopped,
                             char *buf, size_t len)
{
    if (status == 0 || stopped || f->inject_ended < 0)
        return NULL;
    snprintf(buf, len, "injected:%s", f->inject.items[f->inject_ended].spec);
    return buf;
}
