/*
 * goodput_test.c - unit tests for the goodput accounting and the
 * reliability figures (goodput.h) over store files written with the real
 * writer: a run with one restart (start-up, checkpoint, lost work = the
 * steps after the checkpoint the next attempt resumed from, restart
 * downtime), a hang acted on, data stalls and stragglers, a running run,
 * and the Young/Daly arithmetic.  Every scenario checks that the
 * categories add up to the wall time exactly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "goodput.h"
#include "store.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_tmp.h"

#define SEC ((int64_t)1000000000)
#define MS ((int64_t)1000000)
#define T0 SS_FIXTURE_T0

static ss_store *fresh_store(const char *file, char *path, size_t len)
{
    testing_tmp_path(file, path, len);
    remove(path);
    char err[256];
    ss_store *s = ss_store_open(path, NULL, 1, err, sizeof err);
    if (!s)
        fprintf(stderr, "  %s\n", err);
    return s;
}

static int load(const char *path, int64_t run, ss_wall_ns now, ss_goodput *g)
{
    char err[256];
    ss_reader *r = ss_reader_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    int rc = ss_goodput_load(r, run, now, g);
    if (rc)
        fprintf(stderr, "  %s\n", ss_reader_errmsg(r));
    ss_reader_close(r);
    return rc;
}

/* The categories of G and of each attempt add up exactly. */
static void check_sums(const ss_goodput *g)
{
    int64_t total = 0;
    for (int c = 0; c < SS_GP_N; c++) {
        CHECK(g->ns[c] >= 0);
        total += g->ns[c];
    }
    CHECK_EQ_INT(total, g->wall_ns);
    for (size_t i = 0; i < g->n_attempts; i++) {
        const ss_gp_attempt *a = &g->attempts[i];
        int64_t sum = 0;
        for (int c = 0; c < SS_GP_N; c++)
            sum += a->ns[c];
        CHECK_EQ_INT(sum, a->to - a->from);
    }
}

static void one_restart(void)
{
    char path[600];
    ss_store *s = fresh_store("restart.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_restart_run(s, "train", T0);
    ss_store_close(s);
    REQUIRE(run > 0);
    ss_goodput g;
    REQUIRE(load(path, run, 0, &g) == 0);
    check_sums(&g);
    CHECK_EQ_INT(g.wall_ns, 34 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_STARTUP], 8 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_PRODUCTIVE], 14500 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_CHECKPOINT], 500 * MS);
    /* Steps 5..9 of attempt 0 (k = 9 failed, checkpoint at 4) and the
     * step in progress (15 s to the failure at 15.4 s). */
    CHECK_EQ_INT(g.ns[SS_GP_LOST_WORK], 5400 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_RESTART], 4600 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_OTHER], 1 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_HANG], 0);
    CHECK(fabs(g.goodput - 14.5 / 34.0) < 1e-9);
    REQUIRE(g.n_attempts == 2);
    CHECK_EQ_INT(g.attempts[0].lost_steps, 6); /* 5..9 and 10 */
    CHECK_EQ_INT(g.attempts[0].saves, 1);
    CHECK_STR(g.attempts[0].cause, "rank_crash");
    CHECK_EQ_INT(g.attempts[1].resumed_from, 4);
    CHECK_EQ_INT(g.attempts[1].first_step, 5);
    CHECK_EQ_INT(g.attempts[0].to, g.attempts[1].from);
    /* One crash, recovered from the failure (15.4 s) to the next first
     * step's begin (23 s). */
    CHECK_EQ_INT(g.failures[SS_GP_CAUSE_RANK_CRASH], 1);
    CHECK_EQ_INT(g.recoveries, 1);
    CHECK_EQ_INT(g.recover_ns, 7600 * MS);
    ss_goodput_free(&g);
    ss_goodput_free(&g); /* twice: harmless */
}

/* A hang from the last progress (10.2 s) to when it was acted on (12 s);
 * the next attempt starts from scratch, so all of attempt 0's steps are
 * lost. */
static void hang_then_restart_from_scratch(void)
{
    char path[600];
    ss_store *s = fresh_store("hang.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_add_run(s, "hang-0000", "hang", 2, T0);
    ss_store_put_attempt(s, run, 0, T0);
    for (uint64_t i = 0; i < 5; i++)
        ss_fixture_goodput_step(s, run, 0, i, T0 + (int64_t)(6 + i) * SEC,
                                SEC, 0, 0, 0);
    char ev[128];
    snprintf(ev, sizeof ev, "{\"stalled_s\":1.5,\"last_progress_at\":%lld,"
             "\"acted_at\":%lld}", (long long)(T0 + 10200 * MS),
             (long long)(T0 + 12 * SEC));
    ss_fixture_put_finding(s, run, 1, SS_CRITICAL, "hang", 1, NULL, 4, 4, ev,
                           "rank 1 hung");
    ss_attempt_facts f = {.attempt = 0, .ended_at = T0 + 13 * SEC,
                          .cause = "hang", .first_step = 0, .last_step = 4,
                          .resumed_from = -1};
    ss_store_put_attempt_facts(s, run, &f);
    ss_store_put_attempt(s, run, 1, T0 + 14 * SEC);
    for (uint64_t i = 0; i < 3; i++)
        ss_fixture_goodput_step(s, run, 1, i, T0 + (int64_t)(16 + i) * SEC,
                                SEC, 0, 0, 0);
    ss_store_end_run(s, run, T0 + 18 * SEC, 0, "succeeded", 0, 0);
    ss_store_close(s);
    ss_goodput g;
    REQUIRE(load(path, run, 0, &g) == 0);
    check_sums(&g);
    CHECK_EQ_INT(g.ns[SS_GP_HANG], 1800 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_LOST_WORK], 5200 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_RESTART], 2 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_STARTUP], 5 * SEC + 1 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_PRODUCTIVE], 3 * SEC);
    CHECK_EQ_INT(g.failures[SS_GP_CAUSE_HANG], 1);
    ss_goodput_free(&g);
}

/* The hang finding as `stepscope run` stores it: the stall's start and
 * how long it had lasted when found, no acted_at: a hang stopped with
 * --on-hang stop lasts from its start to the attempt's end (the ranks
 * stopped); one the job recovered from (a step finalized after it was
 * found) adds no hang time after the last step. */
static void hang_from_its_start_to_the_stop(void)
{
    char path[600];
    ss_store *s = fresh_store("hangstop.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_add_run(s, "hang-0001", "hangstop", 2, T0);
    ss_store_put_attempt(s, run, 0, T0);
    for (uint64_t i = 0; i < 5; i++)
        ss_fixture_goodput_step(s, run, 0, i, T0 + (int64_t)(2 + i) * SEC,
                                SEC, 0, 0, 0);
    char ev[128];
    snprintf(ev, sizeof ev, "{\"stalled_s\":4.5,\"last_progress_at\":%lld}",
             (long long)(T0 + 6 * SEC));
    ss_fixture_put_finding(s, run, 1, SS_CRITICAL, "hang", 1, NULL, 5, 5, ev,
                           "rank 1 hung");
    ss_attempt_facts f = {.attempt = 0, .ended_at = T0 + 12 * SEC,
                          .cause = "hang", .first_step = 0, .last_step = 4,
                          .resumed_from = -1};
    ss_store_put_attempt_facts(s, run, &f);
    ss_store_end_run(s, run, T0 + 12 * SEC, 124, "failed", 0, 0);
    /* The same, but the job went on: step 5 finalized after the hang. */
    int64_t run2 = ss_fixture_add_run(s, "hang-0002", "hangon", 2, T0);
    ss_store_put_attempt(s, run2, 0, T0);
    for (uint64_t i = 0; i < 6; i++)
        ss_fixture_goodput_step(s, run2, 0, i,
                                T0 + (int64_t)(2 + i + (i == 5) * 5) * SEC,
                                SEC, 0, 0, 0);
    ss_fixture_put_finding(s, run2, 1, SS_CRITICAL, "hang", 1, NULL, 5, 5,
                           ev, "rank 1 hung");
    f.ended_at = T0 + 13 * SEC;
    snprintf(f.cause, sizeof f.cause, "completed");
    f.last_step = 5;
    ss_store_put_attempt_facts(s, run2, &f);
    ss_store_end_run(s, run2, T0 + 13 * SEC, 0, "succeeded", 0, 0);
    ss_store_close(s);
    ss_goodput g;
    REQUIRE(load(path, run, 0, &g) == 0);
    check_sums(&g);
    CHECK_EQ_INT(g.ns[SS_GP_HANG], 6 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_OTHER], 0);
    ss_goodput_free(&g);
    REQUIRE(load(path, run2, 0, &g) == 0);
    check_sums(&g);
    CHECK_EQ_INT(g.ns[SS_GP_HANG], 0);
    ss_goodput_free(&g);
}

/* Data stalls beyond the steady data time, lateness at the sync points
 * (less what the checkpoint and the stall explain), gaps between steps,
 * and a run still running (accounted up to NOW). */
static void stalls_stragglers_and_running(void)
{
    char path[600];
    ss_store *s = fresh_store("stall.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_add_run(s, "stall-0000", "stall", 2, T0);
    ss_store_put_attempt(s, run, 0, T0);
    /* Steps 0..4 of 1 s, each finalized 1.5 s after the previous: 0.5 s
     * gaps (other).  Data takes 200 ms (median 100 ms) except step 2:
     * 900 ms, a stall of 700 ms over the steady 200 ms.  Step 3 is late
     * 300 ms at its sync point; step 4 saves for 400 ms and is late
     * 500 ms, of which 100 ms remain waiting for a straggler. */
    int64_t data[5] = {200 * MS, 200 * MS, 900 * MS, 200 * MS, 200 * MS};
    int64_t late[5] = {0, 0, 0, 300 * MS, 500 * MS};
    int64_t ckpt[5] = {0, 0, 0, 0, 400 * MS};
    for (uint64_t i = 0; i < 5; i++)
        ss_fixture_goodput_step(s, run, 0, i,
                                T0 + 2 * SEC + (int64_t)i * 1500 * MS, SEC,
                                ckpt[i], data[i], late[i]);
    ss_store_close(s);
    ss_goodput g;
    REQUIRE(load(path, run, T0 + 20 * SEC, &g) == 0);
    check_sums(&g);
    CHECK(g.running);
    CHECK_EQ_INT(g.wall_ns, 20 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_STARTUP], 1 * SEC);
    CHECK_EQ_INT(g.ns[SS_GP_DATA_STALL], 700 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_STRAGGLER], 400 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_CHECKPOINT], 400 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_PRODUCTIVE], 5 * SEC - 1500 * MS);
    /* 4 gaps of 0.5 s, and 8 s after the last step up to NOW. */
    CHECK_EQ_INT(g.ns[SS_GP_OTHER], 2 * SEC + 12 * SEC);
    ss_goodput_free(&g);
}

/* Steps shorter than the ranks' 10 ms send batches are finalized
 * together: 40 steps of 2 ms, finalized 5 at a time every 10 ms.  Each
 * batch's 10 ms is its 5 steps' time, all productive; before, a step took
 * only the time since the previous finalization, one step per batch. */
static void steps_finalized_together(void)
{
    char path[600];
    ss_store *s = fresh_store("batched.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_add_run(s, "batch-0000", "batch", 2, T0);
    ss_store_put_attempt(s, run, 0, T0);
    for (uint64_t i = 0; i < 40; i++)
        ss_fixture_goodput_step(s, run, 0, i,
                                T0 + SEC + (int64_t)(i / 5 + 1) * 10 * MS,
                                2 * MS, 0, 0, 0);
    ss_store_close(s);
    ss_goodput g;
    REQUIRE(load(path, run, T0 + SEC + 80 * MS, &g) == 0);
    check_sums(&g);
    /* the attempt's first step began 2 ms before its finalization (the
     * first batch's other steps, before that, count as start-up) */
    CHECK_EQ_INT(g.ns[SS_GP_STARTUP], SEC + 8 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_PRODUCTIVE], 72 * MS);
    CHECK_EQ_INT(g.ns[SS_GP_OTHER], 0);
    ss_goodput_free(&g);
}

static void unknown_run_and_empty_run(void)
{
    char path[600];
    ss_store *s = fresh_store("empty.db", path, sizeof path);
    REQUIRE(s);
    int64_t run = ss_fixture_add_run(s, "empty-0000", "empty", 2, T0);
    ss_store_end_run(s, run, T0 + 3 * SEC, 1, "failed", 0, 0);
    ss_store_close(s);
    ss_goodput g;
    CHECK_EQ_INT(load(path, 99, 0, &g), SS_READ_NOT_FOUND);
    REQUIRE(load(path, run, 0, &g) == 0);
    check_sums(&g);
    CHECK_EQ_INT(g.ns[SS_GP_STARTUP], 3 * SEC);
    CHECK_EQ_INT(g.n_attempts, 0);
    ss_goodput_free(&g);
}

static void reliability_young_daly(void)
{
    /* C = 10 s, MTBF = 1 h, saves every 600 s. */
    ss_reliability rel;
    memset(&rel, 0, sizeof rel);
    ss_goodput g;
    memset(&g, 0, sizeof g);
    g.up_ns = 3 * 3600 * SEC;
    g.failures[SS_GP_CAUSE_RANK_CRASH] = 2;
    g.failures[SS_GP_CAUSE_NODE_LOST] = 1;
    g.recoveries = 3;
    g.recover_ns = 3 * 60 * SEC;
    g.saves = 4;
    g.save_ns = 40 * SEC;
    g.intervals = 3;
    g.interval_ns = 1800 * SEC;
    ss_reliability_add(&rel, &g);
    memset(&g, 0, sizeof g); /* a clean run adds runs, not failures */
    ss_reliability_add(&rel, &g);
    ss_reliability_finish(&rel);
    CHECK_EQ_INT(rel.runs, 2);
    CHECK_EQ_INT(rel.failed_runs, 1);
    CHECK_EQ_INT(rel.failures, 3);
    CHECK(fabs(rel.failures_per_hour - 1.0) < 1e-9);
    CHECK(fabs(rel.per_hour[SS_GP_CAUSE_NODE_LOST] - 1.0 / 3.0) < 1e-9);
    CHECK_EQ_INT(rel.mtbf_ns, 3600 * SEC);
    CHECK_EQ_INT(rel.mttr_ns, 60 * SEC);
    CHECK_EQ_INT(rel.save_cost_ns, 10 * SEC);
    CHECK_EQ_INT(rel.measured_interval_ns, 600 * SEC);
    CHECK(llabs(rel.optimal_interval_ns - (int64_t)(sqrt(72000.0) * 1e9)) <
          1000);
    CHECK(fabs(rel.waste_measured - 0.1) < 1e-9);
    CHECK(fabs(rel.waste_optimal - sqrt(20.0 / 3600.0)) < 1e-9);
    CHECK(fabs(rel.gain - (0.1 - sqrt(20.0 / 3600.0))) < 1e-9);
    /* Causes: injected faults and clean ends are not failures. */
    CHECK_EQ_INT(ss_gp_failure_cause("hang"), SS_GP_CAUSE_HANG);
    CHECK_EQ_INT(ss_gp_failure_cause("injected:kill-rank"), -1);
    CHECK_EQ_INT(ss_gp_failure_cause("completed"), -1);
    CHECK_STR(ss_gp_category_name(SS_GP_LOST_WORK), "lost_work");
}

TEST_LIST(TEST(one_restart), TEST(hang_then_restart_from_scratch),
          TEST(hang_from_its_start_to_the_stop),
          TEST(stalls_stragglers_and_running),
          TEST(steps_finalized_together), TEST(unknown_run_and_empty_run),
          TEST(reliability_young_daly))
