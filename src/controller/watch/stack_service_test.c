/*
 * stack_service_test.c - unit tests for stack_service.c: a request from
 * another thread (as the HTTP builders make) is collected on the loop and
 * answered with the stacks document; a capture from the loop calls back
 * once; before start and after close the service refuses (503), and
 * nothing is left allocated.
 */
#include "stack_service.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http_types.h"
#include "stack_collect.h"
#include "testing.h"
#include "testing_tmp.h"

static int answer_fd = -1;

static void on_stack_signal(int sig)
{
    (void)sig;
    static const char text[] =
        "Current thread 0x1 (most recent call first):\n"
        "  File \"/x/train.py\", line 3 in load_batch\n"
        "\n# stepscope: end of stacks\n";
    ssize_t rc = write(answer_fd, text, sizeof text - 1);
    (void)rc;
}

/* A child registered like a rank: handler first, then the file. */
static pid_t spawn_rank(const char *file)
{
    int ready[2];
    if (pipe(ready) != 0)
        abort();
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        close(ready[0]);
        answer_fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0600);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stack_signal;
        sigaction(ss_stack_signal(), &sa, NULL);
        ssize_t rc = write(ready[1], "r", 1);
        (void)rc;
        for (;;)
            pause();
    }
    close(ready[1]);
    char c;
    if (read(ready[0], &c, 1) != 1)
        abort();
    close(ready[0]);
    return pid;
}

static pid_t the_rank;

static pid_t pid_of(void *ctx, uint32_t rank)
{
    (void)ctx;
    return rank == 0 ? the_rank : 0;
}

typedef struct {
    ss_stack_service *s;
    unsigned status;
    ss_buf out;
    volatile int done;
    int flags; /* ss_http_stacks_fn's */
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    w->status = ss_stack_service_http(w->s, w->flags, &w->out);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void on_tick(uv_timer_t *t)
{
    worker *w = t->data;
    if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE))
        uv_timer_stop(t);
}

/* Runs LOOP until W's thread has its answer. */
static void serve_worker(uv_loop_t *loop, worker *w)
{
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, worker_main, w) == 0);
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    tick.data = w;
    uv_timer_start(&tick, on_tick, 5, 5);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
}

typedef struct {
    int calls;
    char doc[4096];
} captured;

static void on_captured(void *ctx, const char *doc, size_t len,
                        const char *why)
{
    captured *c = ctx;
    c->calls++;
    snprintf(c->doc, sizeof c->doc, "%.*s", (int)len, doc ? doc : why);
}

static void http_and_capture(void)
{
    char file[600];
    snprintf(file, sizeof file, "%s/stack.0", testing_tmp_dir());
    the_rank = spawn_rank(file);
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_stack_service *s = ss_stack_service_new(&loop);
    REQUIRE(s);

    worker early = {s, 0, {0}, 0, 0}; /* not started: refused */
    serve_worker(&loop, &early);
    CHECK_EQ_INT((int)early.status, 503);
    ss_buf_free(&early.out);

    char err[256] = "";
    ss_stack_service_config cfg = {.exe = "/bin/false", .host = "h",
                                   .stack_dir = testing_tmp_dir(),
                                   .nprocs = 2, .pid_of = pid_of,
                                   .run_id = 7, .attempt = 1};
    REQUIRE(ss_stack_service_start(s, &cfg, err, sizeof err) == 0);
    worker w = {s, 0, {0}, 0, 0};
    serve_worker(&loop, &w);
    CHECK_EQ_INT((int)w.status, 200);
    REQUIRE(w.out.data);
    CHECK(strncmp(w.out.data, "{\"run_id\":7,\"attempt\":1,", 24) == 0);
    CHECK(strstr(w.out.data, "\"trigger\":\"request\"") != NULL);
    CHECK(strstr(w.out.data, "\"answered\":1,\"ranks_total\":2") != NULL);
    CHECK(strstr(w.out.data, "\"merged_text\":\"rank 0 (1): load_batch\\n"
                             "rank 1 (1): the rank's process has exited\\n"
                             "\"") != NULL);
    CHECK(strstr(w.out.data, ",\"ranks\":[{\"rank\":0,") != NULL);
    ss_buf_free(&w.out);

    /* brief: the same document without its ranks' objects */
    worker b = {s, 0, {0}, 0, SS_HTTP_STACKS_BRIEF};
    serve_worker(&loop, &b);
    CHECK_EQ_INT((int)b.status, 200);
    REQUIRE(b.out.data);
    CHECK(strstr(b.out.data, "\"merged_text\":\"rank 0 (1): load_batch\\n")
          != NULL);
    CHECK(strstr(b.out.data, "\"ranks\":[") == NULL);
    CHECK(b.out.len > 2 && strcmp(b.out.data + b.out.len - 2, "}}") == 0);
    ss_buf_free(&b.out);

    captured c = {0};
    CHECK_EQ_INT(ss_stack_service_capture(s, 0, "hang", 3, on_captured, &c),
                 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(c.calls, 1);
    CHECK(strstr(c.doc, "\"trigger\":\"hang\"") != NULL);

    ss_stack_service_close(s);
    CHECK_EQ_INT(ss_stack_service_capture(s, 0, "hang", 3, on_captured, &c),
                 -1);
    worker late = {s, 0, {0}, 0, 0};
    serve_worker(&loop, &late);
    CHECK_EQ_INT((int)late.status, 503);
    ss_buf_free(&late.out);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    ss_stack_service_free(s);
    kill(the_rank, SIGKILL);
    waitpid(the_rank, NULL, 0);
}

/* ---- the other nodes' ranks (a fake remote fetch) ---- */

typedef struct {
    int calls, refuse;
    uint32_t deadline_ms;
    ss_stack_remote_done_cb done;
    void *done_ctx;
    uv_timer_t later;
} fake_remote;

static void answer_later(uv_timer_t *t)
{
    fake_remote *f = t->data;
    static const char *const ranks[] = {
        "{\"rank\":2,\"host\":\"n1\",\"pid\":5,\"state\":\"ok\",\"why\":null,"
        "\"threads\":[{\"id\":\"0x1\",\"current\":true,\"frames\":["
        "{\"func\":\"train\",\"file\":\"t.py\",\"line\":1},"
        "{\"func\":\"sleep\",\"file\":\"t.py\",\"line\":2}]}]}",
        "{\"rank\":3,\"host\":\"n1\",\"pid\":0,\"state\":\"no_answer\","
        "\"why\":\"node 1 did not answer within 1.9 s\",\"threads\":[]}"};
    f->done(f->done_ctx, ranks, 2);
}

static int fake_fetch(void *ctx, int native, uint32_t deadline_ms,
                      ss_stack_remote_done_cb done, void *done_ctx)
{
    fake_remote *f = ctx;
    f->calls++;
    f->deadline_ms = deadline_ms;
    if (f->refuse)
        return -1;
    f->done = done;
    f->done_ctx = done_ctx;
    uv_timer_start(&f->later, answer_later, 20, 0);
    return 0;
}

/* A capture of a world of 4 on a node of 2: the other node's ranks come
 * through the remote hook, at the same time, and are merged; a hook that
 * cannot ask says so for each of its ranks. */
static void other_nodes_ranks_are_in_the_document(void)
{
    char file[600];
    snprintf(file, sizeof file, "%s/stack.0", testing_tmp_dir());
    the_rank = spawn_rank(file);
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_stack_service *s = ss_stack_service_new(&loop);
    REQUIRE(s);
    fake_remote f = {0};
    uv_timer_init(&loop, &f.later);
    f.later.data = &f;
    char err[256] = "";
    ss_stack_service_config cfg = {.exe = "/bin/false", .host = "h",
                                   .stack_dir = testing_tmp_dir(),
                                   .nprocs = 2, .world = 4,
                                   .pid_of = pid_of, .run_id = 7,
                                   .attempt = 1};
    CHECK_EQ_INT(ss_stack_service_start(s, &cfg, err, sizeof err), -1);
    CHECK(strstr(err, "2 ranks on other nodes") != NULL);
    cfg.remote = fake_fetch;
    cfg.remote_ctx = &f;
    REQUIRE(ss_stack_service_start(s, &cfg, err, sizeof err) == 0);

    captured c = {0};
    CHECK_EQ_INT(ss_stack_service_capture(s, 0, "hang", 3, on_captured, &c),
                 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(c.calls, 1);
    CHECK_EQ_INT(f.calls, 1);
    CHECK_EQ_INT(f.deadline_ms, SS_STACK_DEADLINE_MS_DEFAULT);
    CHECK(strstr(c.doc, "\"answered\":2,\"ranks_total\":4") != NULL);
    CHECK(strstr(c.doc, "rank 2 (1): train → sleep") != NULL);
    CHECK(strstr(c.doc, "node 1 did not answer within 1.9 s") != NULL);
    CHECK(strstr(c.doc, "\"rank\":3,\"host\":\"n1\"") != NULL);

    f.refuse = 1;
    captured c2 = {0};
    CHECK_EQ_INT(ss_stack_service_capture(s, 0, "request", -1, on_captured,
                                          &c2), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(c2.calls, 1);
    CHECK(strstr(c2.doc, "\"ranks_total\":4") != NULL);
    CHECK(strstr(c2.doc, "could not ask the other nodes") != NULL);

    ss_stack_service_close(s);
    uv_close((uv_handle_t *)&f.later, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    ss_stack_service_free(s);
    kill(the_rank, SIGKILL);
    waitpid(the_rank, NULL, 0);
}

TEST_LIST(TEST(http_and_capture),
          TEST(other_nodes_ranks_are_in_the_document))
