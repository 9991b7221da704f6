/*
 * attempt.c - the sequence of one node's attempts (attempt.h): health
 * checks before the launch, the restart policy's verdict, the backoff,
 * the next attempt.  No I/O and no clock of its own: the hooks do both.
 */
#include "attempt.h"

#include <stdio.h>
#include <string.h>

void ss_attempt_init(ss_attempt *a, const ss_attempt_hooks *hooks,
                     uint32_t health_from, const ss_restart_config *restart)
{
    memset(a, 0, sizeof *a);
    a->hooks = *hooks;
    a->health_from = health_from;
    if (restart)
        ss_restart_init(&a->restart, restart);
}

static int launch(ss_attempt *a, char *err, size_t errlen)
{
    if (a->hooks.launch(a->hooks.ctx, a->attempt, err, errlen) != 0)
        return -1;
    a->launches++;
    return 0;
}

int ss_attempt_begin(ss_attempt *a, char *err, size_t errlen)
{
    a->started = a->hooks.now ? a->hooks.now(a->hooks.ctx) : 0;
    /* Call point: the health checks before the launch. */
    if (a->attempt >= a->health_from && a->hooks.health_start) {
        a->health_pending = 1;
        if (a->hooks.health_start(a->hooks.ctx, a->attempt, err, errlen) !=
            0) {
            a->health_pending = 0;
            return -1;
        }
        return 0;
    }
    return launch(a, err, errlen);
}

void ss_attempt_health_done(ss_attempt *a, ss_attempt_health v)
{
    if (!a->health_pending)
        return;
    a->health_pending = 0;
    if (v == SS_ATTEMPT_ABANDONED)
        return;
    if (v == SS_ATTEMPT_NO_LAUNCH) {
        a->hooks.not_launched(a->hooks.ctx, a->attempt);
        return;
    }
    char err[512] = "";
    if (launch(a, err, sizeof err) != 0)
        a->hooks.start_failed(a->hooks.ctx, a->attempt, err);
}

int ss_attempt_over(ss_attempt *a, const ss_attempt_end *end,
                    ss_restart_verdict *v)
{
    ss_restart_decide(&a->restart, end, v);
    if (!v->restart)
        return 0;
    a->restart_pending = 1;
    a->hooks.timer_start(a->hooks.ctx, v->delay_ms);
    return 1;
}

void ss_attempt_backoff_over(ss_attempt *a)
{
    a->restart_pending = 0;
    ss_attempt_next(a, a->attempt + 1);
}

void ss_attempt_next(ss_attempt *a, uint32_t attempt)
{
    char err[512] = "";
    a->attempt = attempt;
    a->health_pending = 0;
    int ok = !a->hooks.prepare ||
             a->hooks.prepare(a->hooks.ctx, attempt, err, sizeof err) == 0;
    if (ok)
        ok = ss_attempt_begin(a, err, sizeof err) == 0;
    if (!ok)
        a->hooks.start_failed(a->hooks.ctx, a->attempt, err);
}

void ss_attempt_set(ss_attempt *a, uint32_t attempt)
{
    a->attempt = attempt;
}

int ss_attempt_cancel(ss_attempt *a)
{
    if (!a->restart_pending)
        return 0;
    a->restart_pending = 0;
    if (a->hooks.timer_stop)
        a->hooks.timer_stop(a->hooks.ctx);
    return 1;
}
