/*
 * recent_rows_test.c - unit tests for recent_rows.c: the ring keeps a
 * rank's latest rows in order and answers the latest N; repeated names
 * add up; phases over the row's limit and names over the table's are
 * counted, not kept; a rank the table does not hold is refused.
 */
#include "recent_rows.h"

#include <stdio.h>
#include <string.h>

#include "model.h"
#include "testing.h"

static const char *const NAMES[] = {"forward", "backward", "forward"};

static void add_step(ss_recent_rows *r, uint32_t rank, uint64_t step)
{
    int64_t durs[] = {1000000, 2000000, 500000};
    int64_t begin = 1000000000 + (int64_t)step * 10000000;
    ss_recent_rows_add(r, rank, 1, step, begin, begin + 4000000 + 1000 *
                       (int64_t)step, 1 << 20, SS_MISSING, 3, NAMES, durs);
}

static char *json_of(ss_recent_rows *r, uint32_t rank, uint32_t steps,
                     ss_buf *b)
{
    ss_buf_reset(b);
    if (ss_recent_rows_json(r, rank, steps, b) != 0)
        return NULL;
    ss_buf_add(b, "", 1);
    return b->data;
}

static void keeps_the_latest_rows_in_order(void)
{
    ss_recent_rows *r = ss_recent_rows_new(8, 2);
    REQUIRE(r != NULL);
    ss_buf b = {0};
    const char *j = json_of(r, 9, 10, &b);
    REQUIRE(j != NULL);
    CHECK(strcmp(j, "{\"rank\":9,\"kept\":0,\"recorded\":0,\"capacity\":256,"
                    "\"rows\":[]}") == 0);
    for (uint64_t s = 0; s < SS_RECENT_STEPS + 44; s++)
        add_step(r, 9, s);
    j = json_of(r, 9, 2, &b);
    REQUIRE(j != NULL);
    CHECK(strcmp(j, "{\"rank\":9,\"kept\":2,\"recorded\":300,\"capacity\":256,"
                    "\"rows\":[{\"attempt\":1,\"step\":298,\"step_ms\":4.298,"
                    "\"rss_bytes\":1048576,\"device_bytes\":null,\"phases\":{"
                    "\"forward\":1.500,\"backward\":2.000},"
                    "\"phases_dropped\":0},{\"attempt\":1,\"step\":299,"
                    "\"step_ms\":4.299,\"rss_bytes\":1048576,"
                    "\"device_bytes\":null,\"phases\":{\"forward\":1.500,"
                    "\"backward\":2.000},\"phases_dropped\":0}]}") == 0);
    j = json_of(r, 9, 1000, &b);
    REQUIRE(j != NULL);
    CHECK(strstr(j, "\"kept\":256,") != NULL);
    CHECK(strstr(j, "\"rows\":[{\"attempt\":1,\"step\":44,") != NULL);
    CHECK(strstr(j, "\"step\":43,") == NULL);
    /* the other rank has none; ranks 7 and 10 are not held */
    j = json_of(r, 8, 5, &b);
    REQUIRE(j != NULL);
    CHECK(strstr(j, "\"kept\":0,\"recorded\":0") != NULL);
    CHECK(json_of(r, 7, 5, &b) == NULL);
    CHECK(json_of(r, 10, 5, &b) == NULL);
    CHECK(!ss_recent_rows_holds(r, 10) && ss_recent_rows_holds(r, 8));
    add_step(r, 10, 1);
    CHECK_EQ_INT((int)ss_recent_rows_lost(r), 1);
    ss_buf_free(&b);
    ss_recent_rows_free(r);
}

static void phases_over_the_limits_are_counted(void)
{
    ss_recent_rows *r = ss_recent_rows_new(0, 1);
    REQUIRE(r != NULL);
    char names[SS_RECENT_NAMES + 40][16];
    const char *np[SS_RECENT_NAMES + 40];
    int64_t durs[SS_RECENT_NAMES + 40];
    for (int i = 0; i < SS_RECENT_NAMES + 40; i++) {
        snprintf(names[i], sizeof names[i], "p%d", i);
        np[i] = names[i];
        durs[i] = 1000000;
    }
    /* 20 phases in one row: 16 kept, 4 dropped */
    ss_recent_rows_add(r, 0, 1, 1, 0, 5000000, SS_MISSING, SS_MISSING, 20, np,
                       durs);
    ss_buf b = {0};
    const char *j = json_of(r, 0, 1, &b);
    REQUIRE(j != NULL);
    CHECK(strstr(j, "\"p15\":1.000},\"phases_dropped\":4}") != NULL);
    CHECK(strstr(j, "\"p16\"") == NULL);
    /* every name once, 16 a row: the table fills at SS_RECENT_NAMES */
    for (int first = 0; first < SS_RECENT_NAMES + 40; first += 16) {
        int n = SS_RECENT_NAMES + 40 - first < 16 ? SS_RECENT_NAMES + 40 - first
                                                  : 16;
        ss_recent_rows_add(r, 0, 1, 2, 0, 5000000, SS_MISSING, SS_MISSING,
                           (uint32_t)n, np + first, durs);
    }
    j = json_of(r, 0, 1, &b);
    REQUIRE(j != NULL);
    /* the last row's names (from 544) are all past the table's 512 */
    CHECK(strstr(j, "\"phases\":{},\"phases_dropped\":8}") != NULL);
    /* a name cut at SS_RECENT_NAME_MAX bytes, and NULL names skipped */
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *odd[] = {NULL, longname};
    ss_recent_rows_free(r);
    r = ss_recent_rows_new(0, 1);
    REQUIRE(r != NULL);
    ss_recent_rows_add(r, 0, 2, 3, 0, 1, SS_MISSING, 7, 2, odd, durs);
    j = json_of(r, 0, 1, &b);
    REQUIRE(j != NULL);
    char want[SS_RECENT_NAME_MAX + 8];
    snprintf(want, sizeof want, "{\"%.*s\":", SS_RECENT_NAME_MAX, longname);
    CHECK(strstr(j, want) != NULL);
    CHECK(strstr(j, "\"device_bytes\":7,") != NULL);
    CHECK(strstr(j, "\"attempt\":2,") != NULL);
    ss_buf_free(&b);
    ss_recent_rows_free(r);
}

TEST_LIST(TEST(keeps_the_latest_rows_in_order),
          TEST(phases_over_the_limits_are_counted))
