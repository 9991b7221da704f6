/*
 * profile_test.c - the profiler's rank lists, requests and answers, with
 * no rank connected (the ingest is left out): every rank asked is
 * "not_connected" at once, a second request waits for none, bad
 * arguments are refused with a reason.
 */
#include "profile.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testing.h"
#include "testing_tmp.h"

static void parses_rank_lists(void)
{
    uint8_t sel[8];
    char err[160];
    CHECK_EQ_INT(ss_profile_parse_ranks("2,5", 8, sel, err, sizeof err), 2);
    CHECK(sel[2] && sel[5] && !sel[0] && !sel[3]);
    CHECK_EQ_INT(ss_profile_parse_ranks("0-3,2,7", 8, sel, err, sizeof err),
                 5);
    CHECK(sel[0] && sel[3] && sel[7] && !sel[4]);
    CHECK_EQ_INT(ss_profile_parse_ranks("8", 8, sel, err, sizeof err), -1);
    CHECK(strstr(err, "rank 8 is out of range: the run has 8 ranks") != NULL);
    static const char *const bad[] = {"", "a", "1,", "3-1", "1--2", ",1",
                                      "-1", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(ss_profile_parse_ranks(bad[i], 8, sel, err, sizeof err),
                     -1);
        CHECK(err[0] != '\0');
    }
}

typedef struct {
    ss_profiler *p;
    uv_async_t *done;
    int start;
    const char *ranks, *seconds, *request;
    unsigned status;
    ss_buf out;
} call;

static void *http_thread(void *arg)
{
    call *c = arg;
    c->status = ss_profiler_http(c->p, c->start, c->ranks, c->seconds,
                                 c->request, &c->out);
    uv_async_send(c->done);
    return NULL;
}

static void on_done(uv_async_t *a)
{
    uv_stop(a->loop);
}

/* Makes one HTTP-side call while the loop runs, as a worker would. */
static unsigned http_call(uv_loop_t *loop, ss_profiler *p, int start,
                          const char *ranks, const char *seconds,
                          const char *request, char *out, size_t cap)
{
    uv_async_t done;
    uv_async_init(loop, &done, on_done);
    call c = {p, &done, start, ranks, seconds, request, 0, {0}};
    pthread_t t;
    pthread_create(&t, NULL, http_thread, &c);
    uv_run(loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    uv_close((uv_handle_t *)&done, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    snprintf(out, cap, "%s", c.out.data ? c.out.data : "");
    ss_buf_free(&c.out);
    return c.status;
}

static void requests_without_ranks_connected(void)
{
    char dir[600], out[2048], err[256];
    testing_tmp_path("profiles/run-1", dir, sizeof dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_profiler_config cfg = {&loop, NULL, NULL, NULL, 1, 0, 4, dir};
    ss_profiler *p = ss_profiler_start(&cfg, err, sizeof err);
    REQUIRE(p != NULL);

    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, NULL, out, sizeof out),
                 404); /* no request yet */
    CHECK_EQ_INT(http_call(&loop, p, 1, "1,3", "0", NULL, out, sizeof out),
                 400);
    CHECK(strstr(out, "seconds must be") != NULL);
    CHECK_EQ_INT(http_call(&loop, p, 1, "1,3", "601", NULL, out, sizeof out),
                 400);
    CHECK_EQ_INT(http_call(&loop, p, 1, "4", "1", NULL, out, sizeof out),
                 400);
    CHECK(strstr(out, "out of range") != NULL);

    CHECK_EQ_INT(http_call(&loop, p, 1, "1,3", "2.5", NULL, out, sizeof out),
                 202);
    CHECK_STR(out, "{\"request\":1,\"duration_ms\":2500,\"finished\":true,"
                   "\"ranks\":[{\"rank\":1,\"status\":\"not_connected\","
                   "\"path\":null,\"host\":null,\"message\":\"rank 1 is not "
                   "connected\"},{\"rank\":3,\"status\":\"not_connected\","
                   "\"path\":null,\"host\":null,\"message\":\"rank 3 is not "
                   "connected\"}]}");
    /* finished: a new request may start; the old one is still known */
    CHECK_EQ_INT(http_call(&loop, p, 1, "0", "1", NULL, out, sizeof out),
                 202);
    CHECK(strncmp(out, "{\"request\":2,", 13) == 0);
    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, "1", out, sizeof out),
                 200);
    CHECK(strncmp(out, "{\"request\":1,", 13) == 0);
    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, "x", out, sizeof out),
                 400);
    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, "9", out, sizeof out),
                 404);

    /* an answer nobody asked for changes nothing */
    wire_profile_done pd = {1, WIRE_PROFILE_OK, 5, "/x/rank1.json"};
    ss_profiler_on_done(p, 1, &pd);
    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, "1", out, sizeof out),
                 200);
    CHECK(strstr(out, "rank1.json") == NULL);

    ss_profiler_close(p);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(http_call(&loop, p, 0, NULL, NULL, "1", out, sizeof out),
                 503);
    ss_profiler_free(p);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

TEST_LIST(TEST(parses_rank_lists), TEST(requests_without_ranks_connected))
