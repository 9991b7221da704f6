/*
 * query_history_test.c - unit tests for the history document
 * (ss_query_history, docs/api.md "History") over a real store file written
 * with the store's writer: five clean runs of "train" at 10 ms a step, a
 * run of another name, then three runs of "train" 30 % slower.  The document
 * lists the comparable runs oldest first with one value per run and
 * metric, judges the latest as guard does (a regression since the first
 * slow run), marks the change point at that run, and honours metric= and
 * last=; unknown runs and names are NOT_FOUND.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "query.h"
#include "store.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_tmp.h"

#define STEPS 80
#define WORLD 2

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static char db_[600];

/* Runs 1-5 "train" at 10 ms, 6 "other", 7-9 "train" at 13 ms. */
static const char *store_path(void)
{
    if (db_[0])
        return db_;
    testing_tmp_path("history.db", db_, sizeof db_);
    remove(db_);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    char err[256];
    ss_store *s = ss_store_open(db_, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  %s\n", err);
        return db_;
    }
    for (int i = 0; i < 5; i++)
        ss_fixture_timed_run(s, "train", WORLD, STEPS,
                             10.0 * (1.0 + 0.01 * (i % 3)), &rng);
    ss_fixture_timed_run(s, "other", WORLD, STEPS, 10.0, &rng);
    for (int i = 0; i < 3; i++)
        ss_fixture_timed_run(s, "train", WORLD, STEPS, 13.0, &rng);
    ss_store_close(s);
    return db_;
}

/* The document for A, parsed; NULL (and a failed check) when the call
 * does not return 0 or the JSON does not parse. */
static cJSON *history(const ss_query_history_args *a)
{
    char err[512] = "";
    ss_query *q = ss_query_open(store_path(), err, sizeof err);
    if (!q) {
        fprintf(stderr, "  %s\n", err);
        CHECK(q != NULL);
        return NULL;
    }
    ss_buf b = {0};
    int rc = ss_query_history(q, a, &b, err, sizeof err);
    ss_query_close(q);
    if (rc != 0)
        fprintf(stderr, "  ss_query_history: %d %s\n", rc, err);
    CHECK_EQ_INT(rc, 0);
    cJSON *doc = rc == 0 ? cJSON_ParseWithLength(b.data, b.len) : NULL;
    CHECK(rc != 0 || doc != NULL);
    ss_buf_free(&b);
    return doc;
}

static cJSON *metric(const cJSON *doc, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(doc, "metrics"))
        if (strcmp(cJSON_GetObjectItem(m, "name")->valuestring, name) == 0)
            return (cJSON *)m;
    return NULL;
}

/* Run ids of the document's runs, as "1,2,3". */
static void run_ids(const cJSON *doc, char *out, size_t len)
{
    out[0] = '\0';
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(doc, "runs"))
        snprintf(out + strlen(out), len - strlen(out), "%s%d",
                 out[0] ? "," : "",
                 cJSON_GetObjectItem(r, "id")->valueint);
}

static void latest_of_a_name_regressed_since_the_first_slow_run(void)
{
    ss_query_history_args a = {0, "train", NULL, SS_QUERY_DEFAULT_HISTORY};
    cJSON *doc = history(&a);
    REQUIRE(doc != NULL);
    CHECK_EQ_INT(cJSON_GetObjectItem(doc, "run_id")->valueint, 9);
    CHECK_STR(cJSON_GetObjectItem(doc, "name")->valuestring, "train");
    CHECK_STR(cJSON_GetObjectItem(doc, "verdict")->valuestring,
              "regression");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(doc, "reason")));
    char ids[128];
    run_ids(doc, ids, sizeof ids);
    CHECK_STR(ids, "1,2,3,4,5,7,8,9"); /* "other" is not of this name */
    const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "runs"), 0);
    CHECK_STR(cJSON_GetObjectItem(run0, "status")->valuestring, "succeeded");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(run0, "started_at")));
    CHECK_EQ_INT(cJSON_GetObjectItem(run0, "steps")->valueint, STEPS);

    const cJSON *st = metric(doc, "step_time");
    REQUIRE(st != NULL);
    CHECK_STR(cJSON_GetObjectItem(st, "unit")->valuestring, "ms");
    CHECK_STR(cJSON_GetObjectItem(st, "worse")->valuestring, "higher");
    CHECK_STR(cJSON_GetObjectItem(st, "verdict")->valuestring, "regressed");
    CHECK_EQ_INT(cJSON_GetObjectItem(st, "since_run")->valueint, 7);
    const cJSON *values = cJSON_GetObjectItem(st, "values");
    CHECK_EQ_INT(cJSON_GetArraySize(values), 8);
    double first = cJSON_GetArrayItem(values, 0)->valuedouble;
    double last = cJSON_GetArrayItem(values, 7)->valuedouble;
    CHECK(first > 9.5 && first < 10.5);
    CHECK(last > 12.5 && last < 13.5);
    double rel = cJSON_GetObjectItem(st, "relative")->valuedouble;
    CHECK(rel > 0.2 && rel < 0.4);
    CHECK(cJSON_GetObjectItem(st, "relative_low")->valuedouble > 0.1);
    const cJSON *cp = cJSON_GetObjectItem(st, "change_points");
    REQUIRE(cJSON_GetArraySize(cp) == 1);
    CHECK_EQ_INT(cJSON_GetArrayItem(cp, 0)->valueint, 7);
    /* Throughput is worse when lower; every tested metric is there. */
    const cJSON *tp = metric(doc, "throughput");
    REQUIRE(tp != NULL);
    CHECK_STR(cJSON_GetObjectItem(tp, "worse")->valuestring, "lower");
    CHECK_STR(cJSON_GetObjectItem(tp, "verdict")->valuestring, "regressed");
    CHECK(metric(doc, "phase.compute") != NULL);
    CHECK(metric(doc, "step_time_p90") != NULL);
    /* No device memory was recorded: no series without a value. */
    CHECK(metric(doc, "device_peak") == NULL);
    cJSON_Delete(doc);
}

static void an_earlier_run_by_id_is_judged_against_its_past(void)
{
    ss_query_history_args a = {5, NULL, NULL, SS_QUERY_DEFAULT_HISTORY};
    cJSON *doc = history(&a);
    REQUIRE(doc != NULL);
    CHECK_EQ_INT(cJSON_GetObjectItem(doc, "run_id")->valueint, 5);
    CHECK_STR(cJSON_GetObjectItem(doc, "verdict")->valuestring, "ok");
    char ids[128];
    run_ids(doc, ids, sizeof ids);
    CHECK_STR(ids, "1,2,3,4,5");
    const cJSON *st = metric(doc, "step_time");
    REQUIRE(st != NULL);
    CHECK_STR(cJSON_GetObjectItem(st, "verdict")->valuestring, "same");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(st, "since_run")));
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(st, "change_points")),
                 0);
    cJSON_Delete(doc);
}

static void metric_and_last_narrow_the_document(void)
{
    ss_query_history_args a = {0, "train", "phase.", SS_QUERY_DEFAULT_HISTORY};
    cJSON *doc = history(&a);
    REQUIRE(doc != NULL);
    const cJSON *ms = cJSON_GetObjectItem(doc, "metrics");
    CHECK_EQ_INT(cJSON_GetArraySize(ms), 1);
    CHECK(metric(doc, "phase.compute") != NULL);
    cJSON_Delete(doc);

    /* Two runs before the latest: too few to judge, the history and its
     * values are still there. */
    ss_query_history_args b = {0, "train", "step_time", 2};
    doc = history(&b);
    REQUIRE(doc != NULL);
    CHECK_STR(cJSON_GetObjectItem(doc, "verdict")->valuestring,
              "cannot_judge");
    CHECK(strstr(cJSON_GetObjectItem(doc, "reason")->valuestring,
                 "comparable run") != NULL);
    char ids[128];
    run_ids(doc, ids, sizeof ids);
    CHECK_STR(ids, "7,8,9");
    const cJSON *st = metric(doc, "step_time");
    REQUIRE(st != NULL);
    CHECK_STR(cJSON_GetObjectItem(st, "verdict")->valuestring, "no_data");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(st, "values")), 3);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(st, "relative")));
    cJSON_Delete(doc);
}

static void unknown_runs_and_names_are_not_found(void)
{
    char err[512] = "";
    ss_query *q = ss_query_open(store_path(), err, sizeof err);
    REQUIRE(q != NULL);
    ss_buf b = {0};
    ss_query_history_args a = {0, "nope", NULL, SS_QUERY_DEFAULT_HISTORY};
    CHECK_EQ_INT(ss_query_history(q, &a, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    CHECK(strstr(err, "nope") != NULL);
    /* A name made of digits is a name, not run 5. */
    a.name = "5";
    CHECK_EQ_INT(ss_query_history(q, &a, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_query_history_args c = {99, NULL, NULL, SS_QUERY_DEFAULT_HISTORY};
    CHECK_EQ_INT(ss_query_history(q, &c, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

TEST_LIST(TEST(latest_of_a_name_regressed_since_the_first_slow_run),
          TEST(an_earlier_run_by_id_is_judged_against_its_past),
          TEST(metric_and_last_narrow_the_document),
          TEST(unknown_runs_and_names_are_not_found))
