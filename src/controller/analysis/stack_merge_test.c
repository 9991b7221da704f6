/*
 * stack_merge_test.c - unit tests for stack_merge.c: compact rank sets,
 * groups ordered outlier first, ranks without a Python stack grouped by
 * why, long paths elided in the text, and the prefix tree's rank sets.
 */
#include "stack_merge.h"

#include <string.h>

#include "testing.h"

static const char *RANKSET(const uint32_t *v, size_t n, ss_buf *b)
{
    ss_buf_reset(b);
    ss_stack_rankset(v, n, b);
    return b->data;
}

static void rankset(void)
{
    ss_buf b = {0};
    uint32_t a[] = {7, 0, 2, 1, 3};
    CHECK_STR(RANKSET(a, 5, &b), "0-3,7");
    uint32_t c[] = {4, 5};
    CHECK_STR(RANKSET(c, 2, &b), "4,5");
    uint32_t d[] = {9};
    CHECK_STR(RANKSET(d, 1, &b), "9");
    uint32_t e[] = {1, 1, 2, 3, 5, 6, 7, 10};
    CHECK_STR(RANKSET(e, 8, &b), "1-3,5-7,10");
    ss_buf_free(&b);
}

static const char *const wait_path[] = {"<module>", "train", "backward",
                                        "all_reduce"};
static const char *const sleep_path[] = {"<module>", "train", "load_batch"};

static void outlier_first(void)
{
    ss_stack_rank_in r[5] = {
        {0, "ok", NULL, wait_path, 4, NULL, 1},
        {1, "ok", NULL, wait_path, 4, NULL, 1},
        {2, "ok", NULL, sleep_path, 3, "time.sleep(3600)", 0},
        {3, "ok", NULL, wait_path, 4, NULL, 1},
        {4, "stopped", "stopped (SIGSTOP): no Python stack", NULL, 0, NULL, 0},
    };
    ss_buf t = {0}, j = {0};
    CHECK_EQ_INT(ss_stack_merge(r, 5, &t, &j), 3);
    CHECK_STR(t.data,
              "rank 2 (1): <module> → train → load_batch: time.sleep(3600)\n"
              "rank 4 (1): stopped (SIGSTOP): no Python stack\n"
              "ranks 0,1,3 (3): <module> → train → backward → all_reduce\n");
    CHECK(strstr(j.data, "\"tree\":{\"func\":null,\"ranks\":\"0-3\"") != NULL);
    CHECK(strstr(j.data, "{\"func\":\"train\",\"ranks\":\"0-3\",\"children\":"
                         "[{\"func\":\"backward\",\"ranks\":\"0,1,3\"") != NULL);
    CHECK(strstr(j.data, "{\"ranks\":\"2\",\"count\":1,\"state\":\"ok\","
                         "\"path\":[\"<module>\",\"train\",\"load_batch\"],"
                         "\"code\":\"time.sleep(3600)\",\"why\":null}") != NULL);
    ss_buf_free(&t);
    ss_buf_free(&j);
}

static void long_path_elided(void)
{
    const char *const p[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    ss_stack_rank_in r[1] = {{0, "ok", NULL, p, 10, NULL, 0}};
    ss_buf t = {0};
    CHECK_EQ_INT(ss_stack_merge(r, 1, &t, NULL), 1);
    CHECK_STR(t.data, "rank 0 (1): a → b → … → f → g → h → i → j\n");
    ss_buf_free(&t);
}

static void same_why_grouped(void)
{
    ss_stack_rank_in r[3] = {
        {5, "no_answer", "no answer within 1.5 s", NULL, 0, NULL, 0},
        {6, "no_answer", "no answer within 1.5 s", NULL, 0, NULL, 0},
        {7, "exited", "the rank's process has exited", NULL, 0, NULL, 0},
    };
    ss_buf t = {0}, j = {0};
    CHECK_EQ_INT(ss_stack_merge(r, 3, &t, &j), 2);
    CHECK_STR(t.data, "rank 7 (1): the rank's process has exited\n"
                      "ranks 5,6 (2): no answer within 1.5 s\n");
    CHECK(strstr(j.data, "\"tree\":{\"func\":null,\"ranks\":\"\","
                         "\"children\":[]}") != NULL);
    ss_buf_free(&t);
    ss_buf_free(&j);
    CHECK_EQ_INT(ss_stack_merge(r, 0, NULL, NULL), 0);
}

TEST_LIST(TEST(rankset), TEST(outlier_first), TEST(long_path_elided),
          TEST(same_why_grouped))
