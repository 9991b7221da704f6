/*
 * stack_merge_test.c - unit tests for stack_merge.c: compact rank sets
 * ("0-4095 except 17, 900, 3001" for a person where that is shorter),
 * groups ordered outlier first, ranks without a Python stack grouped by
 * why, long paths elided in the text, the prefix tree's rank sets, and
 * 4,096 ranks of which 3 are elsewhere.
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

static const char *RANKTEXT(const uint32_t *v, size_t n, ss_buf *b)
{
    ss_buf_reset(b);
    ss_stack_rankset_text(v, n, b);
    return b->data;
}

static void rankset_text_says_except_when_shorter(void)
{
    ss_buf b = {0};
    static uint32_t v[5000];
    size_t n = 0;
    for (uint32_t r = 4096; r-- > 0;) /* any order */
        if (r != 17 && r != 900 && r != 3001)
            v[n++] = r;
    CHECK_STR(RANKTEXT(v, n, &b), "0-4095 except 17, 900, 3001");
    CHECK_STR(RANKSET(v, n, &b), "0-16,18-899,901-3000,3002-4095");
    /* not shorter: the plain form stays */
    uint32_t a[] = {7, 0, 2, 1, 3};
    CHECK_STR(RANKTEXT(a, 5, &b), "0-3,7");
    uint32_t c[] = {0, 1, 3};
    CHECK_STR(RANKTEXT(c, 3, &b), "0,1,3");
    uint32_t d[] = {9, 9};
    CHECK_STR(RANKTEXT(d, 2, &b), "9");
    /* more than SS_STACK_MERGE_EXCEPT left out: the plain form */
    n = 0;
    for (uint32_t r = 0; r < 4096; r++)
        if (r % 400 != 5)
            v[n++] = r;
    CHECK_STR(RANKTEXT(v, n, &b), "0-4,6-404,406-804,806-1204,1206-1604,"
                                  "1606-2004,2006-2404,2406-2804,2806-3204,"
                                  "3206-3604,3606-4004,4006-4095");
    /* up to the bound: except */
    n = 0;
    for (uint32_t r = 100; r < 5000; r++)
        if (r % 600 != 7)
            v[n++] = r;
    CHECK_STR(RANKTEXT(v, n, &b), "100-4999 except 607, 1207, 1807, 2407, "
                                  "3007, 3607, 4207, 4807");
    ss_buf_free(&b);
}

/* 4,096 ranks, all in one all-gather but 3: each of those is a group of
 * its own, first, and the rest one line with its three exceptions. */
static void thousands_of_ranks_three_elsewhere(void)
{
    static const char *const gather[] = {"<module>", "train", "train_step",
                                         "forward", "all_gather", "wait"};
    static const char *const loader[] = {"<module>", "train", "get_batch",
                                         "__next__", "wait"};
    static const char *const ckpt[] = {"<module>", "train", "save", "write"};
    static ss_stack_rank_in r[4096];
    for (uint32_t i = 0; i < 4096; i++)
        r[i] = (ss_stack_rank_in){i, "ok", NULL, gather, 6, "work.wait()", 1};
    r[17] = (ss_stack_rank_in){17, "ok", NULL, loader, 5, "waiter.acquire()",
                               1};
    r[900] = (ss_stack_rank_in){900, "ok", NULL, ckpt, 4, NULL, 0};
    r[3001] = (ss_stack_rank_in){3001, "no_answer", "no answer within 1.5 s",
                                 NULL, 0, NULL, 0};
    ss_buf t = {0}, j = {0};
    CHECK_EQ_INT(ss_stack_merge(r, 4096, &t, &j), 4);
    CHECK_STR(t.data,
              "rank 17 (1): <module> → train → get_batch → __next__ → wait: "
              "waiter.acquire()\n"
              "rank 900 (1): <module> → train → save → write\n"
              "rank 3001 (1): no answer within 1.5 s\n"
              "ranks 0-4095 except 17, 900, 3001 (4093): <module> → train → "
              "train_step → forward → all_gather → wait: work.wait()\n");
    /* the JSON keeps the machine's form */
    CHECK(strstr(j.data, "{\"ranks\":\"0-16,18-899,901-3000,3002-4095\","
                         "\"count\":4093,") != NULL);
    CHECK(strstr(j.data, "\"tree\":{\"func\":null,\"ranks\":"
                         "\"0-3000,3002-4095\"") != NULL);
    ss_buf_free(&t);
    ss_buf_free(&j);
}

TEST_LIST(TEST(rankset), TEST(outlier_first), TEST(long_path_elided),
          TEST(same_why_grouped), TEST(rankset_text_says_except_when_shorter),
          TEST(thousands_of_ranks_three_elsewhere))
