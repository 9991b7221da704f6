/*
 * cmd_goodput_test.c - `stepscope goodput` and the report's GOODPUT and
 * RELIABILITY parts over a store with restarted runs: the text table per
 * attempt, the JSON objects (whose categories add up to the wall time),
 * --name over several runs with the Young/Daly advice, the report showing
 * RELIABILITY only once three runs of the name failed, and the usage
 * errors.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "goodput.h"
#include "store.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_cmd.h"
#include "testing_tmp.h"

#define SEC ((int64_t)1000000000)

static char db_[600];

/* Runs 1..N_FAILED of "train" each one restart (the fixture's), then a
 * failed run without steps; N_FAILED + 1 runs in all. */
static void build(int n_failed)
{
    testing_tmp_path("gpview.db", db_, sizeof db_);
    remove(db_);
    char err[256];
    ss_store *s = ss_store_open(db_, NULL, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    for (int i = 0; i < n_failed; i++)
        ss_fixture_restart_run(s, "train", SS_FIXTURE_T0 + i * 100 * SEC);
    int64_t run = ss_fixture_add_run(s, "crash-0000", "train", 2,
                                     SS_FIXTURE_T0 + 1000 * SEC);
    ss_store_put_attempt(s, run, 0, SS_FIXTURE_T0 + 1000 * SEC);
    ss_attempt_facts f = {.attempt = 0, .ended_at = SS_FIXTURE_T0 + 1002 * SEC,
                          .cause = "rank_crash", .first_step = -1,
                          .last_step = -1, .resumed_from = -1};
    ss_store_put_attempt_facts(s, run, &f);
    ss_store_end_run(s, run, SS_FIXTURE_T0 + 1002 * SEC, 1, "failed", 0, 0);
    ss_store_close(s);
}

/* Runs CMD (a NULL-terminated argv after the db) and returns its stdout
 * (caller frees) and status. */
static char *run_cmd(testing_cmd_fn cmd,
                     const char *const *args, int *status)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = "cmd";
    argv[argc++] = "--db";
    argv[argc++] = db_;
    for (; *args && argc < 15; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    char *buf = NULL, *ebuf = NULL;
    size_t len = 0, elen = 0;
    FILE *out = open_memstream(&buf, &len);
    FILE *err = open_memstream(&ebuf, &elen);
    *status = testing_cmd_run(cmd, argc, argv, out, err);
    fclose(out);
    fclose(err);
    if (elen)
        fprintf(stderr, "  stderr: %s", ebuf);
    free(ebuf);
    return buf;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The "ms" object of O adds up to its wall_ms. */
static void check_json_sums(const cJSON *g)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(g, "ms");
    REQUIRE(cJSON_IsObject(ms));
    double sum = 0;
    int n = 0;
    for (const cJSON *c = ms->child; c; c = c->next, n++)
        sum += c->valuedouble;
    CHECK_EQ_INT(n, SS_GP_N);
    CHECK(sum > 0 && sum == num(g, "wall_ms"));
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(g, "attempts"))
    {
        double part = 0;
        for (const cJSON *c = cJSON_GetObjectItem(a, "ms")->child; c;
             c = c->next)
            part += c->valuedouble;
        CHECK(part > 0 && part == num(a, "wall_ms"));
    }
}

static void text_and_json_of_one_run(void)
{
    build(1);
    int st;
    char *text = run_cmd(ss_cmd_goodput, (const char *[]){"1", NULL}, &st);
    CHECK_EQ_INT(st, 0);
    REQUIRE(text);
    CHECK(strstr(text, "GOODPUT 42.6 % (productive 14.5 s of 34.0 s wall)"));
    CHECK(strstr(text, "  lost_work       5.40 s  15.9 %"));
    CHECK(strstr(text, "  0       rank_crash   0-9"));
    CHECK(strstr(text, "  1       completed    5-14                4"));
    free(text);

    char *js = run_cmd(ss_cmd_goodput, (const char *[]){"--json", "1", NULL},
                       &st);
    CHECK_EQ_INT(st, 0);
    cJSON *g = cJSON_Parse(js);
    free(js);
    REQUIRE(g);
    CHECK(num(g, "wall_ms") == 34000);
    check_json_sums(g);
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(g, "attempts");
    REQUIRE(cJSON_GetArraySize(att) == 2);
    const cJSON *a0 = cJSON_GetArrayItem(att, 0);
    CHECK(num(a0, "lost_steps") == 6);
    CHECK(num(cJSON_GetObjectItemCaseSensitive(a0, "ms"), "restart") ==
          4600);
    CHECK(num(cJSON_GetArrayItem(att, 1), "resumed_from") == 4);
    cJSON_Delete(g);

    /* The report carries the same object, and no reliability yet (one
     * failed run of the name). */
    char *rep = run_cmd(ss_cmd_report, (const char *[]){"--json", "1", NULL},
                        &st);
    CHECK_EQ_INT(st, 0);
    cJSON *r = cJSON_Parse(rep);
    REQUIRE(r);
    check_json_sums(cJSON_GetObjectItemCaseSensitive(r, "goodput"));
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "reliability")));
    cJSON_Delete(r);
    free(rep);
    rep = run_cmd(ss_cmd_report, (const char *[]){"1", NULL}, &st);
    REQUIRE(rep);
    CHECK(strstr(rep, "\nGOODPUT 42.6 %"));
    CHECK(!strstr(rep, "RELIABILITY"));
    free(rep);
}

static void name_reliability_and_report(void)
{
    build(3);
    int st;
    char *text = run_cmd(ss_cmd_goodput,
                         (const char *[]){"--name", "train", NULL}, &st);
    CHECK_EQ_INT(st, 0);
    REQUIRE(text);
    CHECK(strstr(text, "RELIABILITY of the 4 runs named train (4 failed"));
    CHECK(strstr(text, "rank_crash    4"));
    /* 3 recoveries of 7.6 s; saves of 0.5 s, one per run: no interval. */
    CHECK(strstr(text, "MTTR 7.60 s (3 recoveries)"));
    CHECK(strstr(text, "Young/Daly interval"));
    free(text);

    char *js = run_cmd(ss_cmd_goodput,
                       (const char *[]){"--json", "--name", "train", NULL},
                       &st);
    cJSON *g = cJSON_Parse(js);
    free(js);
    REQUIRE(g);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(g, "runs")), 4);
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(g, "reliability");
    CHECK(num(rel, "failures") == 4);
    CHECK(num(rel, "mttr_ms") == 7600);
    CHECK(num(rel, "save_cost_ms") == 500);
    /* up: 3 x 28.9 s + 2 s; MTBF = up / 4 */
    CHECK(num(rel, "mtbf_ms") == (3 * 28900.0 + 2000.0) / 4);
    cJSON_Delete(g);

    char *rep = run_cmd(ss_cmd_report, (const char *[]){"1", NULL}, &st);
    REQUIRE(rep);
    CHECK(strstr(rep, "RELIABILITY of the 4 runs named train"));
    free(rep);
}

static void errors(void)
{
    build(1);
    int st;
    free(run_cmd(ss_cmd_goodput, (const char *[]){"--name", "nope", NULL},
                 &st));
    CHECK_EQ_INT(st, 1);
    free(run_cmd(ss_cmd_goodput, (const char *[]){"1", "--name", "x", NULL},
                 &st));
    CHECK_EQ_INT(st, 2);
    free(run_cmd(ss_cmd_goodput, (const char *[]){"--bogus", NULL}, &st));
    CHECK_EQ_INT(st, 2);
    free(run_cmd(ss_cmd_goodput, (const char *[]){"77", NULL}, &st));
    CHECK_EQ_INT(st, 1);
}

TEST_LIST(TEST(text_and_json_of_one_run), TEST(name_reliability_and_report),
          TEST(errors))
