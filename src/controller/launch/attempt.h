/*
 * attempt.h - the attempts of one job on one node: begin (the health
 * checks, then the launch), over (the restart policy decides, restart.h),
 * the backoff timer, and the next attempt.
 *
 * The controller of node 0 (run.c) and the node agent (agent.c) both run
 * their attempts through it; what an attempt does (check the node, launch
 * its ranks, set up a fresh state) and what time it is are the caller's,
 * given as hooks, so that the sequence itself is driven in tests without
 * a process or a real clock (attempt_test.c).
 *
 * The sequence:
 *   ss_attempt_begin      -> health_start (from attempt health_from on,
 *                            when set), later ss_attempt_health_done ->
 *                            launch; or launch at once;
 *   ss_attempt_over       -> the restart policy's verdict; a restart arms
 *                            the timer (timer_start) for its delay;
 *   ss_attempt_backoff_over (the timer fired) -> ss_attempt_next(n + 1);
 *   ss_attempt_next       -> prepare, then begin; a failure of either is
 *                            reported once through start_failed.
 * The agent, whose attempts the controller decides, sets the attempt it
 * was told (ss_attempt_set), begins it when ready and never calls
 * ss_attempt_over.
 *
 * Everything runs on the caller's one thread (its loop); hooks may be
 * called from inside any of these functions.
 */
#ifndef STEPSCOPE_ATTEMPT_H
#define STEPSCOPE_ATTEMPT_H

#include <stddef.h>
#include <stdint.h>

#include "clocks.h"
#include "restart.h"

typedef struct {
    void *ctx;
    /* Starts ATTEMPT's health checks without blocking: returns 0 and
     * later the caller calls ss_attempt_health_done exactly once (it may
     * do so before this returns), or -1 with ERR when they could not
     * start (the attempt fails to start).  NULL: no health checks. */
    int (*health_start)(void *ctx, uint32_t attempt, char *err,
                        size_t errlen);
    /* Launches ATTEMPT's ranks: 0, or -1 with ERR. */
    int (*launch)(void *ctx, uint32_t attempt, char *err, size_t errlen);
    /* The health checks failed (or a stop came during them): ATTEMPT
     * ends with nothing launched. */
    void (*not_launched)(void *ctx, uint32_t attempt);
    /* ATTEMPT could not start (ERR): its checks or its launch failed to
     * start, or prepare failed.  Not called for attempt 0's begin, whose
     * error ss_attempt_begin returns. */
    void (*start_failed)(void *ctx, uint32_t attempt, const char *err);
    /* Sets up the state of ATTEMPT before it begins (the ranks of the one
     * before are gone): 0, or -1 with ERR.  NULL: nothing to set up. */
    int (*prepare)(void *ctx, uint32_t attempt, char *err, size_t errlen);
    /* The clock and the one timer (the backoff): when it fires, the caller
     * calls ss_attempt_backoff_over.  NULL only where no restart is ever
     * decided here (the agent). */
    ss_mono_ns (*now)(void *ctx);
    void (*timer_start)(void *ctx, uint32_t delay_ms);
    void (*timer_stop)(void *ctx);
} ss_attempt_hooks;

/* Health verdicts for ss_attempt_health_done. */
typedef enum {
    SS_ATTEMPT_LAUNCH = 0,  /* the checks passed: launch the ranks */
    SS_ATTEMPT_NO_LAUNCH,   /* they failed, or a stop came: not_launched */
    SS_ATTEMPT_ABANDONED    /* the attempt was given up meanwhile: nothing */
} ss_attempt_health;

/* Caller-owned; read attempt, started and the pending flags, write none. */
typedef struct {
    ss_attempt_hooks hooks;
    uint32_t health_from;    /* the first attempt whose checks run here */
    ss_restart_policy restart;
    uint32_t attempt;        /* the current attempt, 0-based */
    ss_mono_ns started;      /* when it began (hooks.now; 0 without) */
    int health_pending;      /* its health checks run */
    int restart_pending;     /* the backoff timer runs */
    uint32_t launches;       /* attempts launched so far */
} ss_attempt;

/* Sets A up at attempt 0.  Health checks run from attempt HEALTH_FROM on
 * (the controller checks attempt 0 itself before anything listens: 1; the
 * agent: 0).  RESTART: the policy's options; NULL where no restart is
 * decided here. */
void ss_attempt_init(ss_attempt *a, const ss_attempt_hooks *hooks,
                     uint32_t health_from, const ss_restart_config *restart);

/* Begins the current attempt: its health checks (ss_attempt_health_done
 * launches it later), or the launch now.  Returns 0, or -1 with ERR when
 * the checks could not start or the launch failed. */
int ss_attempt_begin(ss_attempt *a, char *err, size_t errlen);

/* The health checks started by hooks.health_start are done (V).  Does
 * nothing unless they were pending.  A failed launch goes to
 * start_failed. */
void ss_attempt_health_done(ss_attempt *a, ss_attempt_health v);

/* The current attempt ended as END says: the restart policy decides into
 * V; on a restart the backoff timer is armed for V->delay_ms.  Returns
 * V->restart. */
int ss_attempt_over(ss_attempt *a, const ss_attempt_end *end,
                    ss_restart_verdict *v);

/* The backoff timer fired: the next attempt (ss_attempt_next). */
void ss_attempt_backoff_over(ss_attempt *a);

/* Makes ATTEMPT the current one, prepares and begins it; a failure goes
 * to start_failed. */
void ss_attempt_next(ss_attempt *a, uint32_t attempt);

/* Makes ATTEMPT the current one without beginning it (the agent: the
 * controller named it; ss_attempt_begin follows when the node is ready). */
void ss_attempt_set(ss_attempt *a, uint32_t attempt);

/* No attempt follows (a stop during the backoff): the timer is stopped.
 * Returns whether a restart was pending. */
int ss_attempt_cancel(ss_attempt *a);

#endif
