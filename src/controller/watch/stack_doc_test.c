/*
 * stack_doc_test.c - unit tests for stack_doc.c: the document of a few
 * ranks (one outlier, one that did not parse, one with trailing bytes,
 * escaped names), checked with cJSON; the other threads grouped by call
 * path ("ranks SET (N threads)") with a thread of its own kept as it was;
 * the document without its ranks' objects at *RANKS_AT; and 4,096 ranks
 * of which 3 are elsewhere.
 */
#include "stack_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "testing.h"

/* A rank's object: a helper thread (HELPER: its innermost function, or
 * NULL for none) and the main thread, whose innermost is LEAF. */
static char *obj(uint32_t rank, const char *helper, const char *leaf)
{
    char *s = malloc(1024);
    int n = snprintf(s, 1024, "{\"rank\":%u,\"host\":\"h\",\"pid\":%u,"
                     "\"state\":\"ok\",\"why\":null,\"threads\":[", rank,
                     100 + rank);
    if (helper)
        n += snprintf(s + n, 1024 - (size_t)n,
                      "{\"id\":\"0x%x\",\"current\":false,\"frames\":["
                      "{\"func\":\"_bootstrap\",\"file\":\"t.py\",\"line\":1},"
                      "{\"func\":\"%s\",\"file\":\"t.py\",\"line\":2,"
                      "\"code\":\"q.get()\"}]},", 0x1000 + rank, helper);
    snprintf(s + n, 1024 - (size_t)n,
             "{\"id\":\"0x1\",\"current\":true,\"frames\":["
             "{\"func\":\"<module>\",\"file\":\"m.py\",\"line\":9},"
             "{\"func\":\"%s\",\"file\":\"m.py\",\"line\":3,"
             "\"code\":\"wait()\"}]}]}", leaf);
    return s;
}

static cJSON *doc_of(char **ranks, size_t n, ss_buf *out, size_t *at)
{
    ss_stack_doc_info info = {7, 0, 0, "request", 0, 12.5};
    ss_buf_reset(out);
    if (ss_stack_doc(&info, (const char *const *)ranks, n, out, at) != 0)
        return NULL;
    return cJSON_Parse(out->data);
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "(none)";
}

static void a_few_ranks(void)
{
    char *r[6];
    r[0] = obj(0, "pin", "all_reduce");
    r[1] = obj(1, "pin", "all_reduce");
    r[2] = obj(2, "loader", "load_batch");
    r[3] = strdup("{\"rank\":3,\"threads\":[");          /* cut short */
    r[4] = strdup("{\"rank\":4,\"state\":\"ok\"} trailing"); /* bytes after */
    r[5] = obj(5, NULL, "all_\\u0072educe"); /* an escape, the same name */
    ss_buf out = {0};
    size_t at = 0;
    cJSON *d = doc_of(r, 6, &out, &at);
    REQUIRE(d);
    CHECK_EQ_INT(cJSON_GetObjectItem(d, "answered")->valueint, 4);
    CHECK_EQ_INT(cJSON_GetObjectItem(d, "ranks_total")->valueint, 6);
    CHECK_STR(jstr(d, "merged_text"),
              "rank 2 (1): <module> → load_batch: wait()\n"
              "ranks 3,4 (2): the rank's answer did not parse\n"
              "ranks 0,1,5 (3): <module> → all_reduce: wait()\n");
    CHECK_STR(jstr(d, "other_threads_text"),
              "  ranks 0,1 (2 threads): _bootstrap → pin: q.get()\n"
              "  rank 2 thread 0x1002: _bootstrap → loader: q.get()\n");
    const cJSON *ranks = cJSON_GetObjectItem(d, "ranks");
    CHECK_EQ_INT(cJSON_GetArraySize(ranks), 6);
    CHECK_STR(jstr(cJSON_GetArrayItem(ranks, 3), "why"),
              "the rank's answer did not parse");
    CHECK_EQ_INT((int)cJSON_GetObjectItem(cJSON_GetArrayItem(ranks, 5),
                                          "pid")->valueint, 105);
    /* the document up to *AT, closed, is the one without the ranks */
    REQUIRE(at > 0 && at < out.len);
    CHECK(strncmp(out.data + at, ",\"ranks\":[", 10) == 0);
    out.data[at] = '}';
    out.data[at + 1] = 0;
    cJSON *brief = cJSON_Parse(out.data);
    REQUIRE(brief);
    CHECK(cJSON_GetObjectItem(brief, "ranks") == NULL);
    CHECK_STR(jstr(brief, "merged_text"), jstr(d, "merged_text"));
    CHECK(cJSON_GetObjectItem(brief, "merged") != NULL);
    cJSON_Delete(brief);
    cJSON_Delete(d);
    ss_buf_free(&out);
    for (int i = 0; i < 6; i++)
        free(r[i]);
}

static void thousands_of_ranks(void)
{
    enum { N = 4096 };
    static char *r[N];
    for (uint32_t i = 0; i < N; i++)
        r[i] = obj(i, "pin", i == 17 ? "load_batch" : i == 900 ? "save"
                             : i == 3001 ? "softmax" : "all_gather");
    ss_buf out = {0};
    cJSON *d = doc_of(r, N, &out, NULL);
    REQUIRE(d);
    CHECK_EQ_INT(cJSON_GetObjectItem(d, "answered")->valueint, N);
    CHECK_STR(jstr(d, "merged_text"),
              "rank 17 (1): <module> → load_batch: wait()\n"
              "rank 900 (1): <module> → save: wait()\n"
              "rank 3001 (1): <module> → softmax: wait()\n"
              "ranks 0-4095 except 17, 900, 3001 (4093): <module> → "
              "all_gather: wait()\n");
    CHECK_STR(jstr(d, "other_threads_text"),
              "  ranks 0-4095 (4096 threads): _bootstrap → pin: q.get()\n");
    cJSON_Delete(d);
    ss_buf_free(&out);
    for (uint32_t i = 0; i < N; i++)
        free(r[i]);
}

TEST_LIST(TEST(a_few_ranks), TEST(thousands_of_ranks))
