/*
 * cmd_guard_test.c - unit tests for `stepscope guard` over a real store file
 * written with the store's writer: runs with a known step-time
 * distribution and run-to-run offset, then the exit status and what the
 * outputs say for a clear slowdown, for a clean run, for a run of another
 * world size, with --set thresholds, and for bad arguments.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "store.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_cmd.h"
#include "testing_tmp.h"

#define STEPS 80
#define WORLD 2

static uint64_t rng = 0x1234567ull;

/* Runs `stepscope guard ARGS...` on the store at DB; the output and the
 * error output into OUT and ERR (LEN bytes each).  Returns the status. */
static int guard(const char *db, char *out, char *err, size_t len, ...)
{
    char *argv[32] = {"guard", "--db", (char *)db};
    int argc = 3;
    va_list ap;
    va_start(ap, len);
    for (char *a; argc < 31 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    FILE *fo = tmpfile(), *fe = tmpfile();
    int status = testing_cmd_run(ss_cmd_guard, argc, argv, fo, fe);
    FILE *files[2] = {fo, fe};
    char *bufs[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        rewind(files[i]);
        size_t n = fread(bufs[i], 1, len - 1, files[i]);
        bufs[i][n] = '\0';
        fclose(files[i]);
    }
    return status;
}

static char db_[600];

/* Six clean runs of "train" at 10 ms. */
static void make_history(void)
{
    testing_tmp_path("guard.db", db_, sizeof db_);
    remove(db_);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    char err[256];
    ss_store *s = ss_store_open(db_, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    for (int i = 0; i < 6; i++)
        ss_fixture_timed_run(s, "train", WORLD, STEPS,
                             10.0 * (1.0 + 0.01 * (i % 3)), &rng);
    ss_store_close(s);
}

static void append_run(const char *name, uint32_t world, double mean_ms)
{
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    char err[256];
    ss_store *s = ss_store_open(db_, &cfg, 1, err, sizeof err);
    if (!s)
        return;
    ss_fixture_timed_run(s, name, world, STEPS, mean_ms, &rng);
    ss_store_close(s);
}

static char out_[32768], err_[4096];

static void a_clear_slowdown_is_a_regression(void)
{
    make_history();
    append_run("train", WORLD, 13.0); /* +30 % */
    int status = guard(db_, out_, err_, sizeof out_, (char *)NULL);
    CHECK_EQ_INT(status, 1);
    CHECK(strstr(out_, "run 7 'train' against 6 runs (1, 2, 3, 4, 5, 6)"));
    CHECK(strstr(out_, "REGRESSION: step_time +"));
    CHECK(strstr(out_, "REGRESSION: phase.compute +"));
    CHECK(strstr(out_, "since run 7"));
    /* A threshold above the change: no longer a regression. */
    status = guard(db_, out_, err_, sizeof out_, "--set", "threshold=50",
                   (char *)NULL);
    CHECK_EQ_INT(status, 0);
    CHECK(strstr(out_, "no regression"));
    /* One metric's threshold alone. */
    status = guard(db_, out_, err_, sizeof out_, "--metric", "step_time",
                   "--set", "threshold.step_time=50", (char *)NULL);
    CHECK_EQ_INT(status, 0);
    status = guard(db_, out_, err_, sizeof out_, "--metric", "phase.",
                   "--set", "threshold.step_time=50", (char *)NULL);
    CHECK_EQ_INT(status, 1);
    CHECK(!strstr(out_, "REGRESSION: step_time"));
}

/* --set consecutive=N: a regression counts once it lasted N runs in a
 * row; before that it is "suspect" and the exit status 0. */
static void consecutive_runs_when_asked(void)
{
    make_history();
    append_run("train", WORLD, 13.0);
    int status = guard(db_, out_, err_, sizeof out_, "--set", "consecutive=2",
                       (char *)NULL);
    CHECK_EQ_INT(status, 0);
    CHECK(strstr(out_, "suspect (not yet 2 runs in a row): step_time +"));
    append_run("train", WORLD, 13.0);
    status = guard(db_, out_, err_, sizeof out_, "--set", "consecutive=2",
                   (char *)NULL);
    CHECK_EQ_INT(status, 1);
    CHECK(strstr(out_, "REGRESSION: step_time +"));
    CHECK(strstr(out_, "since run 7"));
    status = guard(db_, out_, err_, sizeof out_, "--json", "--set",
                   "consecutive=3", (char *)NULL);
    CHECK_EQ_INT(status, 0);
    CHECK(strstr(out_, "\"verdict\":\"suspect\""));
}

static void a_clean_run_is_not(void)
{
    make_history();
    append_run("train", WORLD, 10.1);
    int status = guard(db_, out_, err_, sizeof out_, "--json", (char *)NULL);
    CHECK_EQ_INT(status, 0);
    CHECK(strstr(out_, "\"verdict\":\"ok\""));
    CHECK(strstr(out_, "\"baseline\":[1,2,3,4,5,6]"));
    CHECK(strstr(out_, "\"fingerprint\":{\"command\":\"./train\""));
    /* --last 3: the baseline is runs 4..6; the history still covers every
     * comparable run for the metrics of the steps table, and the baseline
     * runs for those of the rank-steps. */
    status = guard(db_, out_, err_, sizeof out_, "--json", "--last", "3",
                   (char *)NULL);
    CHECK_EQ_INT(status, 0);
    CHECK(strstr(out_, "\"baseline\":[4,5,6]"));
    const char *step = strstr(out_, "{\"name\":\"step_time\"");
    const char *worst = strstr(out_, "{\"name\":\"step_time_worst_rank\"");
    REQUIRE(step && worst);
    CHECK(strstr(step, "\"history\":[{\"run\":1,"));
    CHECK(strstr(worst, "\"history\":[{\"run\":4,"));
}

static void another_world_size_is_not_compared(void)
{
    make_history();
    append_run("train", 1, 10.0);
    int status = guard(db_, out_, err_, sizeof out_, "train", (char *)NULL);
    CHECK_EQ_INT(status, 2);
    CHECK(strstr(out_, "cannot judge: 0 comparable runs of 'train' before "
                       "run 7 (at least 3 needed)"));
    CHECK(strstr(out_, "run 6: world_size 1 vs 2"));
    /* Named explicitly, they are compared and the difference is said. */
    status = guard(db_, out_, err_, sizeof out_, "--baseline", "1-3",
                   (char *)NULL);
    CHECK(status != 2);
    CHECK(strstr(out_, "compared although they differ: run 3: world_size 1 "
                       "vs 2"));
    /* Ten runs left out are named, the rest counted. */
    for (int i = 0; i < 6; i++)
        append_run("train", WORLD, 10.0);
    append_run("train", 1, 10.0);
    status = guard(db_, out_, err_, sizeof out_, (char *)NULL);
    CHECK_EQ_INT(status, 2);
    CHECK(strstr(out_, "1 comparable run of 'train' before run 14"));
    CHECK(strstr(out_, "run 3: world_size 1 vs 2; and 2 more\n"));
}

static void other_names_and_too_few_runs(void)
{
    make_history();
    append_run("eval", WORLD, 10.0);
    int status = guard(db_, out_, err_, sizeof out_, (char *)NULL);
    CHECK_EQ_INT(status, 2);
    CHECK(strstr(out_, "0 comparable runs of 'eval'"));
    status = guard(db_, out_, err_, sizeof out_, "--name", "train",
                   "--set", "min_runs=6", (char *)NULL);
    CHECK_EQ_INT(status, 2);
    CHECK(strstr(out_, "5 comparable runs of 'train' before run 6 (at "
                       "least 6 needed)"));
}

static void bad_arguments_say_why(void)
{
    make_history();
    static const char *const bad[][3] = {
        {"--set", "alpha=1.5", "out of range 'alpha=1.5'"},
        {"--set", "threshold.step_time=x", "expected a number"},
        {"--set", "colour=3", "unknown setting"},
        {"--baseline", "3-1", "--baseline: expected run ids"},
        {"--baseline", " 3", "got ' 3' in ' 3'"},
        {"--baseline", "+3", "got '+3'"},
        {"--baseline", "1,-2", "got '-2'"},
        {"--baseline", "1- 4", "got '1- 4'"},
        {"--baseline", "1-+4", "got '1-+4'"},
        {"--baseline", "1,,2", "got '' in '1,,2'"},
        {"--baseline", "1,2,", "got '' in '1,2,'"},
        {"--baseline", "0", "got '0'"},
        {"--baseline", "99999999999999999999", "expected run ids"},
        /* 1,000 ranges of 100,001 ids: refused before any is stored. */
        {"--baseline", "1-100001,1-100001", "at most 10000 runs"},
        {"--baseline", "1-10001", "at most 10000 runs"},
        {"--baseline", "1-9223372036854775807", "at most 10000 runs"},
        {"--last", "0", "--last: expected 1..10000"},
        {"--metric", NULL, "needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int status = guard(db_, out_, err_, sizeof out_, bad[i][0], bad[i][1],
                           (char *)NULL);
        CHECK_EQ_INT(status, 2);
        if (!strstr(err_, bad[i][2]))
            fprintf(stderr, "  %s %s: %s", bad[i][0],
                    bad[i][1] ? bad[i][1] : "", err_);
        CHECK(strstr(err_, bad[i][2]) != NULL);
    }
    /* 10,000 ids in all are accepted (runs that do not exist are not a
     * baseline: the verdict says so); a 1,000-range list is refused at
     * once, without building it. */
    CHECK_EQ_INT(guard(db_, out_, err_, sizeof out_, "--json", "--baseline",
                       "1-10000", (char *)NULL), 0);
    CHECK(strstr(out_, "\"baseline\":[1,2,3,4,5]"));
    static char many[1000 * 16];
    size_t len = 0;
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(many + len, sizeof many - len, "%s1-100001",
                                i ? "," : "");
    CHECK_EQ_INT(guard(db_, out_, err_, sizeof out_, "--baseline", many,
                       (char *)NULL), 2);
    CHECK(strstr(err_, "--baseline: at most 10000 runs"));
    char missing[700];
    testing_tmp_path("none.db", missing, sizeof missing);
    CHECK_EQ_INT(guard(missing, out_, err_, sizeof out_, (char *)NULL), 2);
    CHECK(strstr(err_, "no store at"));
    CHECK_EQ_INT(guard(db_, out_, err_, sizeof out_, "99", (char *)NULL), 2);
    CHECK(strstr(err_, "no run"));
    CHECK_EQ_INT(guard(db_, out_, err_, sizeof out_, "--help", (char *)NULL), 0);
    CHECK(strstr(out_, "Exit status: 0 no regression"));
}

TEST_LIST({"a_clear_slowdown_is_a_regression",
           a_clear_slowdown_is_a_regression},
          {"consecutive_runs_when_asked", consecutive_runs_when_asked},
          {"a_clean_run_is_not", a_clean_run_is_not},
          {"another_world_size_is_not_compared",
           another_world_size_is_not_compared},
          {"other_names_and_too_few_runs", other_names_and_too_few_runs},
          {"bad_arguments_say_why", bad_arguments_say_why})
