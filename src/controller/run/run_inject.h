/*
 * run_inject.h - health checks and injected faults in `stepscope run`, as
 * node 0's controller carries them out: a part of the run that owns its
 * state (the injector's plan and what fired, node 0's check notes) and
 * reports to the run through a table of callbacks (run_inject_events).
 *
 * Health: node 0 checks itself before its ranks start (health.h), before
 * the first attempt and before each restart; the other nodes' agents check
 * themselves before theirs (at the join, and on each RESTART) and report
 * HEALTH to the nodes part.
 *
 * Faults (inject.h): the controller hears every rank's STATUS and step
 * records, so it decides when a fault is due; the signal comes from the
 * rank's parent: this controller for node 0's ranks, the node's agent for
 * the others (INJECT).  Each fault is an `injected` event; an attempt that
 * fails after a fault fired is charged to it (`injected:SPEC`), which
 * MTBF leaves out (goodput.h).  Each fault fires once per run: a restarted
 * attempt runs without the faults that fired.
 */
#ifndef STEPSCOPE_RUN_INJECT_H
#define STEPSCOPE_RUN_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "inject.h"
#include "link_wire.h"
#include "run_opts.h"

/* What the faults part reports to the run, and asks of it. */
typedef struct {
    void *ctx;
    /* An event of the run (RANK -1: none). */
    void (*event)(void *ctx, const char *kind, int32_t rank,
                  const char *msg);
    /* The process (group) of node 0's RANK now; <= 0 when not running. */
    int (*rank_pid)(void *ctx, uint32_t rank);
    /* Sends fault X to NODE's agent: 0, or -1 when it is not joined. */
    int (*to_node)(void *ctx, uint32_t node, const link_inject *x);
    /* Whether the job is being stopped (no fault is sent then). */
    int (*stopping)(void *ctx);
    /* Node 0 failed its check CHECK with OUTPUT (the job's failure). */
    void (*health_failed)(void *ctx, uint32_t node, const char *check,
                          const char *output);
    /* Node 0's checks before a later attempt are done (a failure was
     * reported first). */
    void (*health_done)(void *ctx);
} run_inject_events;

/* Caller-owned; members private to run_inject.c. */
typedef struct {
    const ss_run_opts *o;
    uv_loop_t *loop;
    run_inject_events ev;
    ss_inject_plan inject;  /* o->inject, with the faults that fired */
    char health_notes[512]; /* what node 0's passed checks saw, for the
                               event after run_started */
    int inject_ended;       /* index of the injection charged with the
                               attempt's failure; -1: none fired */
    uv_timer_t inject_cont[SS_INJECT_MAX]; /* stop-rank's SIGCONT */
    int inject_pid[SS_INJECT_MAX];         /* ... to this process group */
} run_faults;

/* Sets F up for the run (nothing on LOOP yet). */
void run_faults_setup(run_faults *f, const ss_run_opts *o, uv_loop_t *loop,
                      const run_inject_events *ev);

/* Node 0's health check before the first attempt, on a private loop (no
 * agent has joined yet, so no link waits).  Returns 0 when it passed
 * (its notes: run_faults_health_notes); -1 after health_failed with a
 * short reason in ERR, or -1 with *INTERRUPTED set to the signal that
 * stopped it (a reason in ERR). */
int run_faults_health_first(run_faults *f, int *interrupted, char *err,
                            size_t errlen);

/* What node 0's passed first check saw ("" when nothing). */
const char *run_faults_health_notes(const run_faults *f);

/* Node 0's checks before a later attempt's ranks are launched, without
 * blocking the loop (the links' heartbeats go on): returns 0 and later
 * calls health_done exactly once, after health_failed when a check
 * failed; or -1 with a reason in ERR when the checks could not start. */
int run_faults_health_start(run_faults *f, char *err, size_t errlen);

/* The injector's timers, once, on the run's loop. */
void run_faults_start(run_faults *f);

/* Right after each attempt's ranks were launched: faults that fired stay
 * fired; none is charged with this attempt's end yet. */
void run_faults_arm(run_faults *f);

/* The controller learned RANK is at STEP (-1: it just connected): sends
 * every fault now due, to node 0's ranks directly and to other nodes'
 * ranks through their agent, with an `injected` event. */
void run_faults_observe(run_faults *f, uint32_t rank, int64_t step);

/* The attempt's cause when an injected fault explains its end with
 * STATUS ("injected:SPEC" into BUF), or NULL (a success, a stop on
 * request (STOPPED), or no fault fired). */
const char *run_faults_cause(const run_faults *f, int status, int stopped,
                             char *buf, size_t len);

#endif
