/*
 * recent_service_test.c - unit tests for recent_service.c on a real loop,
 * with HTTP requests made from a worker thread as the server does: node
 * 0's rank answered from its own rows; another node's through the ask
 * hook, its answer assembled from chunks; a node that cannot be asked, a
 * rank outside the run, an agent that never answers, one that answers an
 * error, too much or what is not the rank's JSON object, chunks of other
 * requests ignored; and what waits when the service closes.
 */
#include "recent_service.h"

#include <stdio.h>
#include <string.h>

#include "testing.h"
#include "testing_worker.h"

#define NPROC 2
#define WORLD 6
#define WAIT_MS 200

/* What the ask hook was given; node 2 cannot be asked. */
static link_recent_req asked;
static uint32_t asked_node;
static int asks;

static int fake_ask(void *ctx, uint32_t node, const link_recent_req *req,
                    char *why, size_t whylen)
{
    (void)ctx;
    if (node == 2) {
        snprintf(why, whylen, "node 2 was lost");
        return -1;
    }
    asked = *req;
    asked_node = node;
    asks++;
    return 0;
}

/* One HTTP request, made on a worker thread. */
typedef struct {
    ss_recent_service *s;
    uint32_t rank, steps;
    unsigned status;
    ss_buf out;
    testing_worker w;
} call;

static void call_main(void *arg)
{
    call *c = arg;
    c->status = ss_recent_service_http(c->s, c->rank, c->steps, &c->out);
}

static void call_start(call *c, ss_recent_service *s, uint32_t rank,
                       uint32_t steps)
{
    *c = (call){.s = s, .rank = rank, .steps = steps};
    REQUIRE(testing_worker_start(&c->w, call_main, c) == 0);
}

static int asked_since(void *before)
{
    return asks != *(int *)before;
}

/* Runs LOOP until C's worker has an answer or a new ask came (after
 * ASKS_BEFORE). */
static void run_until(uv_loop_t *loop, call *c, int asks_before)
{
    testing_worker_run_loop(&c->w, loop, asked_since, &asks_before);
}

static void call_end(uv_loop_t *loop, call *c)
{
    testing_worker_join(&c->w, loop);
    ss_buf_add(&c->out, "", 1);
}

static void part(ss_recent_service *s, uint32_t node, uint32_t id,
                 uint32_t rank, int last, const char *text)
{
    link_recent_part p = {id, rank, (uint8_t)last, (uint32_t)strlen(text),
                          (const uint8_t *)text};
    ss_recent_service_part(s, node, &p);
}

static void record(ss_recent_service *s, uint32_t rank, uint64_t step)
{
    static const char *const names[] = {"forward", "backward"};
    ss_step_record rec = {.step = step, .begin_ns = 1000, .end_ns = 3001000,
                          .rss_bytes = 4096, .device_bytes = SS_MISSING,
                          .n_phases = 2};
    rec.phases[0] = (ss_phase_record){.name = 1, .total_ns = 2000000};
    rec.phases[1] = (ss_phase_record){.name = 0, .total_ns = 500000};
    ss_recent_service_record(s, rank, 0, &rec, names);
}

static void answers_local_and_remote_ranks(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t alive;
    testing_loop_keep_alive(&loop, &alive);
    ss_recent_service_config cfg = {NPROC, WORLD, fake_ask, NULL, WAIT_MS};
    ss_recent_service *s = ss_recent_service_new(&loop, &cfg);
    REQUIRE(s != NULL);
    call c;

    /* node 0's rank, from the controller's own rows */
    record(s, 1, 7);
    record(s, 1, 8);
    record(s, 5, 8); /* another node's rank: not kept here */
    call_start(&c, s, 1, 1);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 200);
    CHECK_STR(c.out.data, "{\"node\":0,\"from\":\"controller\",\"rank\":1,"
                          "\"kept\":1,\"recorded\":2,\"capacity\":256,"
                          "\"rows\":[{\"attempt\":0,\"step\":8,\"step_ms\":"
                          "3.000,\"rss_bytes\":4096,\"device_bytes\":null,"
                          "\"phases\":{\"backward\":2.000,\"forward\":"
                          "0.500},\"phases_dropped\":0}]}");
    ss_buf_free(&c.out);

    /* node 1's rank: asked of its agent, the answer in two chunks */
    int before = asks;
    call_start(&c, s, 3, 5);
    run_until(&loop, &c, before);
    CHECK_EQ_INT(asks, before + 1);
    CHECK_EQ_INT((int)asked_node, 1);
    CHECK_EQ_INT((int)asked.rank, 3);
    CHECK_EQ_INT((int)asked.steps, 5);
    part(s, 1, asked.request_id + 1, 3, 1, "{\"rank\":3}"); /* not ours */
    part(s, 0, asked.request_id, 3, 1, "{\"rank\":3}");     /* wrong node */
    part(s, 1, asked.request_id, 3, 0, "{\"rank\":3,\"kept\":0,");
    part(s, 1, asked.request_id, 3, 1, "\"rows\":[]}");
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 200);
    CHECK_STR(c.out.data, "{\"node\":1,\"from\":\"agent\",\"rank\":3,"
                          "\"kept\":0,\"rows\":[]}");
    ss_buf_free(&c.out);
    part(s, 1, asked.request_id, 3, 1, "{}"); /* answered: dropped */

    /* a node that cannot be asked; a rank outside the run */
    call_start(&c, s, 5, 5);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 503);
    CHECK_STR(c.out.data, "node 2 was lost");
    ss_buf_free(&c.out);
    call_start(&c, s, WORLD, 5);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 404);
    CHECK(strstr(c.out.data, "rank 6 is not in the run (6 ranks)") != NULL);
    ss_buf_free(&c.out);

    /* an agent that never answers; one that answers an error */
    call_start(&c, s, 2, 5);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 504);
    CHECK_STR(c.out.data, "node 1's agent did not answer within 200 ms");
    ss_buf_free(&c.out);
    before = asks;
    call_start(&c, s, 2, 5);
    run_until(&loop, &c, before);
    part(s, 1, asked.request_id, 2, 1,
         "{\"rank\":2,\"error\":\"the rank is not one of this node's\"}");
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 502);
    CHECK(strstr(c.out.data, "node 1's agent answered {\"rank\":2,\"error\"")
          != NULL);
    ss_buf_free(&c.out);

    /* answers that are not the rank's JSON object */
    const char *bad[] = {"{\"rank\":3,\"rows\":[", "{\"rank\":2,\"rows\":[]}",
                         " {\"rank\":3}", "[3]", "{\"rank\":3}{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        before = asks;
        call_start(&c, s, 3, 5);
        run_until(&loop, &c, before);
        part(s, 1, asked.request_id, 3, 1, bad[i]);
        call_end(&loop, &c);
        CHECK_EQ_INT((int)c.status, 502);
        CHECK(strstr(c.out.data, "something else than rank 3's rows") != NULL);
        ss_buf_free(&c.out);
    }
    /* a phase named "error" is a phase, not an error */
    before = asks;
    call_start(&c, s, 3, 5);
    run_until(&loop, &c, before);
    part(s, 1, asked.request_id, 3, 1,
         "{\"rank\":3,\"rows\":[{\"phases\":{\"error\":1.0}}]}");
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 200);
    ss_buf_free(&c.out);

    /* an answer over the limit */
    before = asks;
    call_start(&c, s, 3, 5);
    run_until(&loop, &c, before);
    static char big[65536];
    memset(big, ' ', sizeof big - 1);
    for (uint32_t i = 0; i <= SS_RECENT_MAX_ANSWER / (sizeof big - 1); i++)
        part(s, 1, asked.request_id, 3, 0, big);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 502);
    CHECK(strstr(c.out.data, "answer is over 1048576 bytes") != NULL);
    ss_buf_free(&c.out);

    /* closing answers what waits */
    before = asks;
    call_start(&c, s, 3, 5);
    run_until(&loop, &c, before);
    ss_recent_service_close(s);
    call_end(&loop, &c);
    CHECK_EQ_INT((int)c.status, 503);
    CHECK_STR(c.out.data, "the run is ending");
    ss_buf_free(&c.out);
    uv_close((uv_handle_t *)&alive, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    ss_recent_service_free(s);
}

TEST_LIST(TEST(answers_local_and_remote_ranks))
