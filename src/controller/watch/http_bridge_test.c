/*
 * http_bridge_test.c - unit tests for http_bridge.c on a real loop, the
 * calls made from worker threads: a call answered on the loop gives its
 * status and body; calls queued together start oldest first; a call not
 * answered in time is a 504 and its late answer frees it; closing answers
 * what is queued and refuses what comes after.
 */
#include "http_bridge.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testing.h"
#include "testing_worker.h"

static ss_bridge_call *held; /* a call the test answers itself */
static char started[64];     /* the arguments of the calls started */

/* Answers a call at once with its argument doubled, except 7 (held). */
static void start(void *ctx, ss_bridge_call *call)
{
    ss_http_bridge *b = *(ss_http_bridge **)ctx;
    int v = *(const int *)ss_bridge_call_args(call);
    size_t n = strlen(started);
    snprintf(started + n, sizeof started - n, "%d ", v);
    if (v == 7) {
        held = call;
        return;
    }
    char body[32];
    snprintf(body, sizeof body, "%d", 2 * v);
    ss_http_bridge_answer_text(b, call, 200, body);
}

/* One call of the bridge, made on a worker thread. */
typedef struct {
    ss_http_bridge *b;
    int arg;
    uint32_t wait_ms;
    unsigned status;
    ss_buf out;
    testing_worker w;
} call;

static void call_main(void *p)
{
    call *c = p;
    c->status = ss_http_bridge_call(c->b, &c->arg, sizeof c->arg, c->wait_ms,
                                    &c->out);
    ss_buf_add(&c->out, "", 1);
}

static void begin(call *c, ss_http_bridge *b, int arg, uint32_t wait_ms)
{
    *c = (call){.b = b, .arg = arg, .wait_ms = wait_ms};
    REQUIRE(testing_worker_start(&c->w, call_main, c) == 0);
}

static void end(uv_loop_t *loop, call *c)
{
    testing_worker_join(&c->w, loop);
}

static void calls_answered_late_and_closed(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t alive;
    testing_loop_keep_alive(&loop, &alive);
    ss_http_bridge *b = NULL;
    b = ss_http_bridge_new(&loop, start, &b);
    REQUIRE(b != NULL);
    call c[3];

    begin(&c[0], b, 21, 2000);
    end(&loop, &c[0]);
    CHECK_EQ_INT((int)c[0].status, 200);
    CHECK_STR(c[0].out.data, "42");
    ss_buf_free(&c[0].out);

    /* three calls queued before the loop runs start oldest first */
    started[0] = '\0';
    for (int i = 0; i < 3; i++) {
        begin(&c[i], b, i + 1, 2000);
        usleep(20000); /* each queued before the next */
    }
    for (int i = 0; i < 3; i++) {
        end(&loop, &c[i]);
        CHECK_EQ_INT((int)c[i].status, 200);
        ss_buf_free(&c[i].out);
    }
    CHECK_STR(started, "1 2 3 ");

    /* not answered in time: 504; the late answer frees the call */
    begin(&c[0], b, 7, 100);
    end(&loop, &c[0]);
    CHECK_EQ_INT((int)c[0].status, 504);
    CHECK_STR(c[0].out.data, "the controller did not answer in time");
    ss_buf_free(&c[0].out);
    REQUIRE(held != NULL);
    ss_http_bridge_answer_text(b, held, 200, "late"); /* freed: ASan knows */

    /* closing: what is queued is answered, what comes after refused */
    begin(&c[0], b, 5, 2000);
    usleep(50000); /* queued; the loop does not run */
    ss_http_bridge_close(b);
    end(&loop, &c[0]);
    CHECK_EQ_INT((int)c[0].status, 503);
    CHECK_STR(c[0].out.data, "the run is ending");
    ss_buf_free(&c[0].out);
    begin(&c[0], b, 6, 2000);
    end(&loop, &c[0]);
    CHECK_EQ_INT((int)c[0].status, 503);
    ss_buf_free(&c[0].out);

    uv_close((uv_handle_t *)&alive, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    ss_http_bridge_free(b);
}

TEST_LIST(TEST(calls_answered_late_and_closed))
