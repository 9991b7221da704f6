/*
 * attempt_test.c - unit tests for the attempt sequence (attempt.c),
 * driven without a process: a fake launcher, fake health checks, a fake
 * clock and a fake backoff timer record every call in order, and the test
 * fires the timer by moving the clock.
 *
 * Covered: the order of health checks and launches (from the first
 * checked attempt on, the controller's 1 and the agent's 0), restart
 * counts and the give-up after --max-restarts, the backoff's doubling and
 * its cap on the fake clock, a failed check (nothing launched), an
 * abandoned one, a launch or a set-up that fails on a later attempt, and
 * a restart called off during the backoff.
 */
#include <stdio.h>
#include <string.h>

#include "attempt.h"
#include "testing.h"

#define MS ((ss_mono_ns)1000000)

/* The fakes' shared state: a log of calls, the clock, the timer. */
typedef struct {
    char log[1024];
    ss_mono_ns now;
    int timer_armed;
    uint32_t timer_delay_ms;
    ss_mono_ns timer_armed_at;
    int launch_fails_at;   /* attempt whose launch fails; -1: none */
    int prepare_fails_at;  /* attempt whose set-up fails; -1: none */
    int health_sync;       /* health checks answer at once: 1 pass, 2 fail */
    uint32_t not_launched, start_failed;
    char last_err[128];
    ss_attempt att;
} fake;

static void say(fake *f, const char *fmt, uint32_t n)
{
    size_t len = strlen(f->log);
    snprintf(f->log + len, sizeof f->log - len, fmt, n);
}

static int fk_health(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    fake *f = ctx;
    (void)err;
    (void)errlen;
    say(f, "H%u ", attempt);
    if (f->health_sync)
        ss_attempt_health_done(&f->att, f->health_sync == 1
                                            ? SS_ATTEMPT_LAUNCH
                                            : SS_ATTEMPT_NO_LAUNCH);
    return 0;
}

static int fk_launch(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    fake *f = ctx;
    if ((int)attempt == f->launch_fails_at) {
        snprintf(err, errlen, "no exec for attempt %u", attempt);
        say(f, "L%u! ", attempt);
        return -1;
    }
    say(f, "L%u ", attempt);
    return 0;
}

static void fk_not_launched(void *ctx, uint32_t attempt)
{
    fake *f = ctx;
    f->not_launched++;
    say(f, "N%u ", attempt);
}

static void fk_start_failed(void *ctx, uint32_t attempt, const char *err)
{
    fake *f = ctx;
    f->start_failed++;
    snprintf(f->last_err, sizeof f->last_err, "%s", err);
    say(f, "F%u ", attempt);
}

static int fk_prepare(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    fake *f = ctx;
    say(f, "P%u ", attempt);
    if ((int)attempt == f->prepare_fails_at) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static ss_mono_ns fk_now(void *ctx)
{
    return ((fake *)ctx)->now;
}

static void fk_timer_start(void *ctx, uint32_t delay_ms)
{
    fake *f = ctx;
    f->timer_armed = 1;
    f->timer_delay_ms = delay_ms;
    f->timer_armed_at = f->now;
}

static void fk_timer_stop(void *ctx)
{
    ((fake *)ctx)->timer_armed = 0;
}

/* A controller's attempts (checks from attempt 1 on) with MAX restarts
 * and BACKOFF_MS, or an agent's (checks from 0, no policy) with MAX < 0. */
static void setup(fake *f, int max, uint32_t backoff_ms)
{
    memset(f, 0, sizeof *f);
    f->now = 1000 * MS;
    f->launch_fails_at = f->prepare_fails_at = -1;
    f->health_sync = 1;
    ss_attempt_hooks h = {.ctx = f,
                          .health_start = fk_health,
                          .launch = fk_launch,
                          .not_launched = fk_not_launched,
                          .start_failed = fk_start_failed,
                          .prepare = fk_prepare,
                          .now = fk_now,
                          .timer_start = fk_timer_start,
                          .timer_stop = fk_timer_stop};
    ss_restart_config rc = {.max_restarts = max > 0 ? (uint32_t)max : 0,
                            .backoff_ms = backoff_ms};
    ss_attempt_init(&f->att, &h, max < 0 ? 0 : 1, max < 0 ? NULL : &rc);
}

/* The current attempt failed after some steps, each time differently (no
 * deterministic-failure rule): returns the verdict. */
static int fail_attempt(fake *f, ss_restart_verdict *v)
{
    char sig[32];
    snprintf(sig, sizeof sig, "status 1: signal %u", f->att.attempt);
    ss_attempt_end end = {.attempt = f->att.attempt,
                          .restartable = 1,
                          .made_progress = 1,
                          .signature = sig,
                          .now = f->now};
    return ss_attempt_over(&f->att, &end, v);
}

/* The backoff timer fires on the fake clock. */
static void fire(fake *f)
{
    REQUIRE(f->timer_armed);
    f->now = f->timer_armed_at + (ss_mono_ns)f->timer_delay_ms * MS;
    f->timer_armed = 0;
    ss_attempt_backoff_over(&f->att);
}

static void restarts_up_to_the_maximum_then_gives_up(void)
{
    fake f;
    setup(&f, 3, 1000);
    char err[128] = "";
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_restart_verdict v;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(fail_attempt(&f, &v), 1);
        CHECK_EQ_INT(f.att.restart_pending, 1);
        fire(&f);
        CHECK_EQ_INT(f.att.restart_pending, 0);
    }
    CHECK_EQ_INT(f.att.attempt, 3);
    CHECK_EQ_INT(fail_attempt(&f, &v), 0);
    CHECK_EQ_INT(f.timer_armed, 0);
    CHECK_EQ_INT(f.att.restart_pending, 0);
    CHECK(strstr(v.why, "3") != NULL);
    CHECK_EQ_INT(f.att.launches, 4);
    /* attempt 0 unchecked (the controller checked it before listening) */
    CHECK_STR(f.log, "L0 P1 H1 L1 P2 H2 L2 P3 H3 L3 ");
    CHECK_EQ_INT(f.start_failed, 0);
}

static void no_restart_without_max_restarts(void)
{
    fake f;
    setup(&f, 0, 1000);
    char err[128];
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_restart_verdict v;
    CHECK_EQ_INT(fail_attempt(&f, &v), 0);
    CHECK_EQ_INT(f.timer_armed, 0);
    CHECK_STR(f.log, "L0 ");
}

static void backoff_doubles_on_the_clock_up_to_its_cap(void)
{
    fake f;
    setup(&f, 6, 4000);
    char err[128];
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    const uint32_t want[] = {4000, 8000, 16000, 30000, 30000};
    ss_restart_verdict v;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ss_mono_ns began = f.att.started;
        f.now += 5000 * MS; /* the attempt ran 5 s */
        CHECK_EQ_INT(fail_attempt(&f, &v), 1);
        CHECK_EQ_INT((int)v.delay_ms, (int)want[i]);
        CHECK_EQ_INT((int)f.timer_delay_ms, (int)want[i]);
        fire(&f);
        /* the next attempt began when the timer fired, not before */
        CHECK(f.att.started == f.now);
        CHECK(f.att.started - began == (5000 + (ss_mono_ns)want[i]) * MS);
    }
}

static void health_checks_come_before_each_launch(void)
{
    /* the agent: every attempt checked, its number set by the controller */
    fake f;
    setup(&f, -1, 0);
    char err[128];
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_attempt_set(&f.att, 2);
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    CHECK_STR(f.log, "H0 L0 H2 L2 ");

    /* checks that answer later: nothing launched until they do */
    setup(&f, -1, 0);
    f.health_sync = 0;
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    CHECK_EQ_INT(f.att.health_pending, 1);
    CHECK_STR(f.log, "H0 ");
    ss_attempt_health_done(&f.att, SS_ATTEMPT_LAUNCH);
    CHECK_EQ_INT(f.att.health_pending, 0);
    ss_attempt_health_done(&f.att, SS_ATTEMPT_LAUNCH); /* not pending */
    CHECK_STR(f.log, "H0 L0 ");
}

static void a_failed_check_launches_nothing(void)
{
    fake f;
    setup(&f, 2, 1000);
    char err[128];
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_restart_verdict v;
    CHECK_EQ_INT(fail_attempt(&f, &v), 1);
    f.health_sync = 2;
    fire(&f);
    CHECK_EQ_INT(f.not_launched, 1);
    CHECK_EQ_INT(f.att.launches, 1);
    CHECK_STR(f.log, "L0 P1 H1 N1 ");

    /* abandoned (the node was lost meanwhile): neither launch nor end */
    setup(&f, -1, 0);
    f.health_sync = 0;
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_attempt_health_done(&f.att, SS_ATTEMPT_ABANDONED);
    CHECK_EQ_INT(f.att.health_pending, 0);
    CHECK_EQ_INT(f.not_launched, 0);
    CHECK_STR(f.log, "H0 ");
}

static void a_later_attempt_that_cannot_start_is_reported_once(void)
{
    fake f;
    setup(&f, 3, 1000);
    f.launch_fails_at = 0;
    char err[128] = "";
    /* attempt 0: the error is the caller's */
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), -1);
    CHECK_STR(err, "no exec for attempt 0");
    CHECK_EQ_INT(f.start_failed, 0);

    setup(&f, 3, 1000);
    f.launch_fails_at = 1;
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    ss_restart_verdict v;
    CHECK_EQ_INT(fail_attempt(&f, &v), 1);
    fire(&f);
    CHECK_EQ_INT(f.start_failed, 1);
    CHECK_STR(f.last_err, "no exec for attempt 1");
    CHECK_STR(f.log, "L0 P1 H1 L1! F1 ");

    setup(&f, 3, 1000);
    f.prepare_fails_at = 1;
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    CHECK_EQ_INT(fail_attempt(&f, &v), 1);
    fire(&f);
    CHECK_EQ_INT(f.start_failed, 1);
    CHECK_STR(f.last_err, "out of memory");
    CHECK_STR(f.log, "L0 P1 F1 ");
}

static void a_stop_during_the_backoff_calls_the_restart_off(void)
{
    fake f;
    setup(&f, 3, 1000);
    char err[128];
    CHECK_EQ_INT(ss_attempt_begin(&f.att, err, sizeof err), 0);
    CHECK_EQ_INT(ss_attempt_cancel(&f.att), 0); /* nothing pending */
    ss_restart_verdict v;
    CHECK_EQ_INT(fail_attempt(&f, &v), 1);
    CHECK_EQ_INT(ss_attempt_cancel(&f.att), 1);
    CHECK_EQ_INT(f.timer_armed, 0);
    CHECK_EQ_INT(f.att.restart_pending, 0);
    CHECK_EQ_INT(f.att.attempt, 0);
    CHECK_STR(f.log, "L0 ");
}

TEST_LIST(TEST(restarts_up_to_the_maximum_then_gives_up),
          TEST(no_restart_without_max_restarts),
          TEST(backoff_doubles_on_the_clock_up_to_its_cap),
          TEST(health_checks_come_before_each_launch),
          TEST(a_failed_check_launches_nothing),
          TEST(a_later_attempt_that_cannot_start_is_reported_once),
          TEST(a_stop_during_the_backoff_calls_the_restart_off))
