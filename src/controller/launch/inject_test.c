/*
 * inject_test.c - the fault injector's plan: specs, their errors, the
 * job's shape and when each fault is due.
 */
#include "inject.h"

#include <signal.h>
#include <string.h>

#include "testing.h"

static int refused(const char *spec, const char *says)
{
    ss_inject x;
    char err[256] = "";
    int rc = ss_inject_parse(spec, &x, err, sizeof err);
    if (rc == 0 || !strstr(err, says))
        fprintf(stderr, "  '%s': rc %d, \"%s\"\n", spec, rc, err);
    return rc == -1 && strstr(err, says) != NULL;
}

static void specs_parse(void)
{
    ss_inject x;
    char err[256];
    REQUIRE(ss_inject_parse("kill-rank:1@5", &x, err, sizeof err) == 0);
    CHECK(x.kind == SS_INJECT_KILL_RANK);
    CHECK_EQ_INT(x.target, 1);
    CHECK_EQ_INT(x.step, 5);
    CHECK_STR(x.spec, "kill-rank:1@5");
    uint32_t ms = 99;
    CHECK_EQ_INT(ss_inject_signal(&x, &ms), SIGKILL);
    CHECK_EQ_INT(ms, 0);
    CHECK(ss_inject_is_fatal(&x));

    REQUIRE(ss_inject_parse("kill-node:1@0", &x, err, sizeof err) == 0);
    CHECK(x.kind == SS_INJECT_KILL_NODE);
    CHECK_EQ_INT(x.step, 0);

    REQUIRE(ss_inject_parse("hang-rank:3@12", &x, err, sizeof err) == 0);
    CHECK(x.kind == SS_INJECT_HANG_RANK);
    CHECK_EQ_INT(ss_inject_signal(&x, &ms), SIGSTOP);
    CHECK_EQ_INT(ms, 0);
    CHECK(ss_inject_is_fatal(&x));

    REQUIRE(ss_inject_parse("stop-rank:0:500", &x, err, sizeof err) == 0);
    CHECK(x.kind == SS_INJECT_STOP_RANK);
    CHECK_EQ_INT(x.duration_ms, 500);
    CHECK_EQ_INT(x.step, -1);
    CHECK_EQ_INT(ss_inject_signal(&x, &ms), SIGSTOP);
    CHECK_EQ_INT(ms, 500);
    CHECK(!ss_inject_is_fatal(&x));

    REQUIRE(ss_inject_parse("stop-rank:2:750@3", &x, err, sizeof err) == 0);
    CHECK_EQ_INT(x.target, 2);
    CHECK_EQ_INT(x.duration_ms, 750);
    CHECK_EQ_INT(x.step, 3);
}

static void bad_specs_say_why(void)
{
    CHECK(refused("", "empty"));
    CHECK(refused("kill-rank", "unknown fault"));
    CHECK(refused("kill-proc:1@5", "unknown fault"));
    CHECK(refused("kill-rank:1", "missing @STEP (kill-rank:R@STEP)"));
    CHECK(refused("hang-rank:1", "missing @STEP"));
    CHECK(refused("kill-rank:x@5", "'x' is not a rank number"));
    CHECK(refused("kill-node:@5", "'' is not a node number"));
    CHECK(refused("kill-rank:-1@5", "not a rank number"));
    CHECK(refused("kill-rank:1@", "'' is not a step number"));
    CHECK(refused("kill-rank:1@five", "'five' is not a step number"));
    CHECK(refused("kill-rank:1@5@6", "not a step number"));
    CHECK(refused("kill-rank:1:500@5", "one number before @"));
    CHECK(refused("stop-rank:1", "missing :MS"));
    CHECK(refused("stop-rank:1:0", "'0' is not a duration"));
    CHECK(refused("stop-rank:1:99999999", "not a duration of 1 to 3600000"));
    CHECK(refused("stop-rank:1:5s", "'5s' is not a duration"));
    CHECK(refused("stop-rank:1:500:2", "'500:2' is not a duration"));
    CHECK(refused("kill-rank:1@+5", "not a step number"));
    CHECK(refused("kill-rank:1@55555555555555555555555555555555555", "too long"));
}

static void plan_and_shape(void)
{
    ss_inject_plan plan;
    memset(&plan, 0, sizeof plan);
    char err[256];
    REQUIRE(ss_inject_add(&plan, "kill-rank:3@5", err, sizeof err) == 0);
    REQUIRE(ss_inject_add(&plan, "kill-node:1@2", err, sizeof err) == 0);
    CHECK(ss_inject_add(&plan, "kill-rank", err, sizeof err) == -1);
    CHECK_EQ_INT(plan.n, 2);
    CHECK(ss_inject_check(&plan, 4, 2, err, sizeof err) == 0);
    CHECK(ss_inject_check(&plan, 3, 2, err, sizeof err) == -1);
    CHECK(strstr(err, "rank 3 does not exist (the job has 3 ranks, 0 to 2)"));
    CHECK(ss_inject_check(&plan, 4, 1, err, sizeof err) == -1);
    CHECK(strstr(err, "'kill-node:1@2': node 1 does not exist (the job has 1 "
                      "node, 0 to 0)"));
    for (int i = 2; i < SS_INJECT_MAX; i++)
        REQUIRE(ss_inject_add(&plan, "stop-rank:0:1", err, sizeof err) == 0);
    CHECK(ss_inject_add(&plan, "stop-rank:0:1", err, sizeof err) == -1);
    CHECK(strstr(err, "at most 16") != NULL);
}

static void faults_fire_once_when_due(void)
{
    ss_inject_plan plan;
    memset(&plan, 0, sizeof plan);
    char err[256];
    REQUIRE(ss_inject_add(&plan, "kill-rank:1@5", err, sizeof err) == 0);
    REQUIRE(ss_inject_add(&plan, "stop-rank:0:500", err, sizeof err) == 0);
    REQUIRE(ss_inject_add(&plan, "kill-node:1@3", err, sizeof err) == 0);
    REQUIRE(ss_inject_add(&plan, "hang-rank:2@4", err, sizeof err) == 0);
    /* 2 nodes of 2 ranks. */
    CHECK_EQ_INT(ss_inject_due(&plan, 1, 4, 2), -1); /* rank 1 not yet at 5 */
    CHECK_EQ_INT(ss_inject_due(&plan, 0, -1, 2), 1);  /* stop at the start */
    CHECK_EQ_INT(ss_inject_due(&plan, 0, -1, 2), -1); /* once */
    CHECK_EQ_INT(ss_inject_due(&plan, 0, 100, 2), -1);
    CHECK_EQ_INT(ss_inject_due(&plan, 3, 2, 2), -1);  /* node 1 not at 3 */
    CHECK_EQ_INT(ss_inject_due(&plan, 3, -1, 2), -1); /* a hello is not a step */
    /* rank 2 at step 4: node 1's kill (3) and rank 2's hang (4) both due. */
    CHECK_EQ_INT(ss_inject_due(&plan, 2, 4, 2), 2);
    CHECK_EQ_INT(ss_inject_due(&plan, 2, 4, 2), 3);
    CHECK_EQ_INT(ss_inject_due(&plan, 2, 4, 2), -1);
    /* A record beyond the step (the STATUS was missed) still fires. */
    CHECK_EQ_INT(ss_inject_due(&plan, 1, 7, 2), 0);
    CHECK_EQ_INT(ss_inject_due(&plan, 1, 8, 2), -1);
    uint32_t first, count;
    ss_inject_targets(&plan.items[2], 2, &first, &count);
    CHECK_EQ_INT(first, 2);
    CHECK_EQ_INT(count, 2);
    ss_inject_targets(&plan.items[0], 2, &first, &count);
    CHECK_EQ_INT(first, 1);
    CHECK_EQ_INT(count, 1);
}

TEST_LIST({"specs_parse", specs_parse},
          {"bad_specs_say_why", bad_specs_say_why},
          {"plan_and_shape", plan_and_shape},
          {"faults_fire_once_when_due", faults_fire_once_when_due});
