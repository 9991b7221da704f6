/*
 * restart_test.c - unit tests for the restart policy (restart.c): each rule
 * of restart.h in turn (what restarts, the deterministic start-up failure,
 * --max-restarts, the hourly budget, the doubling backoff) and the
 * failure signature read from the launcher's failure text.
 */
#include <string.h>

#include "restart.h"
#include "testing.h"

#define SEC ((ss_mono_ns)1000000000)

static ss_restart_verdict decide(ss_restart_policy *p, uint32_t attempt,
                                 int progress, const char *sig,
                                 ss_mono_ns now)
{
    ss_attempt_end e = {.attempt = attempt, .restartable = 1,
                        .made_progress = progress, .signature = sig,
                        .now = now};
    ss_restart_verdict v;
    ss_restart_decide(p, &e, &v);
    return v;
}

static void test_only_failures_restart(void)
{
    ss_restart_policy p;
    ss_restart_init(&p, &(ss_restart_config){3, 1000, 0});
    ss_attempt_end e = {.attempt = 0, .restartable = 0,
                        .why_not = "the job completed", .now = SEC};
    ss_restart_verdict v;
    ss_restart_decide(&p, &e, &v);
    CHECK_EQ_INT(v.restart, 0);
    CHECK(strstr(v.why, "the job completed") != NULL);
}

static void test_max_restarts_and_backoff(void)
{
    ss_restart_policy p;
    ss_restart_init(&p, &(ss_restart_config){6, 1000, 0});
    uint32_t want[] = {1000, 2000, 4000, 8000, 16000, 30000};
    for (uint32_t i = 0; i < 6; i++) {
        ss_restart_verdict v = decide(&p, i, 1, "status 1: x | y",
                                      (ss_mono_ns)(i + 1) * SEC);
        CHECK_EQ_INT(v.restart, 1);
        CHECK_EQ_INT(v.delay_ms, want[i]);
    }
    ss_restart_verdict v = decide(&p, 6, 1, "status 1: x | y", 10 * SEC);
    CHECK_EQ_INT(v.restart, 0);
    CHECK(strstr(v.why, "all 6 restarts used") != NULL);

    ss_restart_init(&p, &(ss_restart_config){0, 1000, 0});
    v = decide(&p, 0, 1, "", SEC);
    CHECK_EQ_INT(v.restart, 0);
    CHECK(strstr(v.why, "--max-restarts 0") != NULL);

    ss_restart_init(&p, &(ss_restart_config){2, 0, 0});
    v = decide(&p, 0, 1, "", SEC);
    CHECK_EQ_INT(v.restart, 1);
    CHECK_EQ_INT(v.delay_ms, 0);
}

static void test_deterministic_early_failure(void)
{
    ss_restart_policy p;
    ss_restart_init(&p, &(ss_restart_config){5, 0, 0});
    const char *a = "status 1: exited with code 1 | ModuleNotFoundError: x";
    const char *b = "status 1: exited with code 1 | ModuleNotFoundError: y";
    /* Different early failures, then progress in between: restarted. */
    CHECK_EQ_INT(decide(&p, 0, 0, a, SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 1, 0, b, SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 2, 1, b, SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 3, 0, b, SEC).restart, 1);
    /* The same early failure twice in a row: stopped, and said why. */
    ss_restart_verdict v = decide(&p, 4, 0, b, SEC);
    CHECK_EQ_INT(v.restart, 0);
    CHECK(strstr(v.why, "attempts 3 and 4 failed the same way before their "
                        "first step") != NULL);
    CHECK(strstr(v.why, "ModuleNotFoundError: y") != NULL);
    /* An unknown signature never counts as the same. */
    ss_restart_init(&p, &(ss_restart_config){5, 0, 0});
    CHECK_EQ_INT(decide(&p, 0, 0, "", SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 1, 0, "", SEC).restart, 1);
}

static void test_hourly_budget(void)
{
    ss_restart_policy p;
    ss_restart_init(&p, &(ss_restart_config){100, 0, 2});
    CHECK_EQ_INT(decide(&p, 0, 1, "", 10 * SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 1, 1, "", 20 * SEC).restart, 1);
    ss_restart_verdict v = decide(&p, 2, 1, "", 30 * SEC);
    CHECK_EQ_INT(v.restart, 0);
    CHECK(strstr(v.why, "--max-restarts-per-hour 2") != NULL);
    /* An hour after the first one, one restart is free again. */
    ss_restart_init(&p, &(ss_restart_config){100, 0, 2});
    decide(&p, 0, 1, "", 10 * SEC);
    decide(&p, 1, 1, "", 20 * SEC);
    CHECK_EQ_INT(decide(&p, 2, 1, "", 3611 * SEC).restart, 1);
    CHECK_EQ_INT(decide(&p, 3, 1, "", 3612 * SEC).restart, 0);
}

static void test_signature(void)
{
    char sig[SS_RESTART_SIG_MAX];
    const char *text =
        "node 1: rank 3 failed first: exited with code 1 (pid 4242, last "
        "step: unknown)\nlast 2 lines of rank 3 (all of them in /l/rank-3."
        "log):\n[rank 3] Traceback\n[rank 3] ModuleNotFoundError: No "
        "module named 'nope'\nthe other ranks were stopped: 1 ended on "
        "SIGTERM\n";
    ss_restart_signature(1, text, sig, sizeof sig);
    CHECK_STR(sig, "status 1: exited with code 1 | ModuleNotFoundError: No "
                   "module named 'nope'");
    /* Another pid and log path: the same signature. */
    char sig2[SS_RESTART_SIG_MAX];
    ss_restart_signature(1, "rank 3 failed first: exited with code 1 (pid 7,"
                         " last step: 4)\n[rank 3] ModuleNotFoundError: No "
                         "module named 'nope'\n", sig2, sizeof sig2);
    CHECK_STR(sig2, sig);
    ss_restart_signature(137, NULL, sig, sizeof sig);
    CHECK_STR(sig, "status 137:  | ");
    ss_restart_signature(1, "rank 0 failed first: killed by signal SIGKILL "
                         "(pid 1, last step: 2)\nrank 0 printed nothing\n",
                         sig, sizeof sig);
    CHECK_STR(sig, "status 1: killed by signal SIGKILL | ");
}

TEST_LIST(TEST(test_only_failures_restart),
          TEST(test_max_restarts_and_backoff),
          TEST(test_deterministic_early_failure),
          TEST(test_hourly_budget),
          TEST(test_signature))
