/*
 * stack_collect_test.c - unit tests for stack_collect.c: faulthandler's
 * dump parsed into call paths; and the collector on a real loop against
 * child processes that play ranks: one answers the stack signal like a
 * rank that loaded stepscope's Python module (a dump and the end marker),
 * one never registered (no stack file: it must not be signalled), one
 * whose file another process made (it holds no descriptor of it: not
 * signalled either), one is stopped, one has exited, one blocks the signal (no answer by the
 * deadline); a collector closed while a request runs answers it; and
 * the source files a stack names are read off the loop (a FIFO among
 * them does not stop it).  Those children are not CPython, so each is
 * asked by the signal after its memory could not be read; a real
 * python3 child, running and then stopped, is read from its memory.
 */
#include "stack_collect.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "testing.h"
#include "testing_proc.h"
#include "testing_tmp.h"

static const char dump[] =
    "Thread 0x00007f65e93976c0 (most recent call first):\n"
    "  File \"/x/w.py\", line 6 in worker\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
    "\n"
    "Current thread 0x00007f65e968f2c0 (most recent call first):\n"
    "  File \"/x/m.py\", line 9 in stuck\n"
    "  File \"/x/m.py\", line 11 in <module>\n";

typedef struct {
    int n;
    char seen[256];
} leaves;

static void on_leaf(void *ctx, const char *file, long line, size_t at)
{
    leaves *l = ctx;
    size_t len = strlen(l->seen);
    snprintf(l->seen + len, sizeof l->seen - len, "%s:%ld@%zu ", file, line,
             at);
    l->n++;
}

static void parse_dump(void)
{
    ss_buf b = {0};
    leaves l = {0};
    ss_stack_parse_dump(dump, sizeof dump - 1, &b, on_leaf, &l);
    CHECK_STR(b.data,
              "{\"id\":\"0x00007f65e93976c0\",\"current\":false,\"frames\":["
              "{\"func\":\"run\",\"file\":\"/usr/lib/python3.11/threading.py\","
              "\"line\":975},"
              "{\"func\":\"worker\",\"file\":\"/x/w.py\",\"line\":6}]},"
              "{\"id\":\"0x00007f65e968f2c0\",\"current\":true,\"frames\":["
              "{\"func\":\"<module>\",\"file\":\"/x/m.py\",\"line\":11},"
              "{\"func\":\"stuck\",\"file\":\"/x/m.py\",\"line\":9}]}");
    /* each thread's innermost frame, where its "code" would go: no file
     * is opened while parsing */
    CHECK_EQ_INT(l.n, 2);
    static const char wn[] = "\"/x/w.py\",\"line\":6",
                      mn[] = "\"/x/m.py\",\"line\":9";
    const char *w = strstr(b.data, wn) + sizeof wn - 1;
    const char *m = strstr(b.data, mn) + sizeof mn - 1;
    char want[256];
    snprintf(want, sizeof want, "/x/w.py:6@%zu /x/m.py:9@%zu ",
             (size_t)(w - b.data), (size_t)(m - b.data));
    CHECK_STR(l.seen, want);
    CHECK(*w == '}' && *m == '}');
    ss_buf_reset(&b);
    ss_stack_parse_dump("garbage\n  File \"x\"\n", 19, &b, NULL, NULL);
    CHECK(b.len == 0);
    ss_buf_free(&b);
}

/* ---- children playing ranks ---- */

static int answer_fd = -1;
static const char default_answer[] =
    "Current thread 0x1 (most recent call first):\n"
    "  File \"/x/train.py\", line 3 in load_batch\n"
    "  File \"/x/train.py\", line 9 in <module>\n"
    "\n# stepscope: end of stacks\n";
static const char *answer_text = default_answer; /* set before a fork */

static void on_stack_signal(int sig)
{
    (void)sig;
    ssize_t rc = write(answer_fd, answer_text, strlen(answer_text));
    (void)rc;
}

enum { ANSWERS, BLOCKS };

/* A child that registers like a rank (its handler in place, then the file
 * under its name) and waits; KIND BLOCKS: it blocks the signal instead. */
static pid_t spawn_rank(const char *file, int kind)
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
        if (kind == ANSWERS) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_stack_signal;
            sigaction(ss_stack_signal(), &sa, NULL);
        } else {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, ss_stack_signal());
            sigprocmask(SIG_BLOCK, &set, NULL);
        }
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

static pid_t spawn_plain(void)
{
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0)
        for (;;)
            pause();
    return pid;
}

typedef struct {
    int calls;
    size_t n;
    char *ranks[8];
    double elapsed_ms;
} result;

static void on_done(void *ctx, const char *const *ranks, size_t n,
                    double elapsed_ms)
{
    result *r = ctx;
    r->calls++;
    r->n = n;
    r->elapsed_ms = elapsed_ms;
    for (size_t i = 0; i < n && i < 8; i++)
        r->ranks[i] = strdup(ranks[i]);
}

static void free_result(result *r)
{
    for (size_t i = 0; i < r->n && i < 8; i++)
        free(r->ranks[i]);
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void collect_states(void)
{
    const char *dir = testing_tmp_dir();
    char files[6][600];
    for (int i = 0; i < 6; i++)
        snprintf(files[i], sizeof files[i], "%s/stack.%d", dir, i);
    pid_t answers = spawn_rank(files[0], ANSWERS);
    pid_t unregistered = spawn_plain();
    pid_t stopped = spawn_plain();
    kill(stopped, SIGSTOP);
    int st;
    REQUIRE(waitpid(stopped, &st, WUNTRACED) == stopped && WIFSTOPPED(st));
    pid_t exited = spawn_plain();
    reap(exited);
    pid_t blocks = spawn_rank(files[4], BLOCKS);
    pid_t foreign = spawn_plain();
    int made = open(files[5], O_WRONLY | O_CREAT, 0600);
    REQUIRE(made >= 0);
    close(made);

    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_stack_collector *c = ss_stack_collector_new(&loop, "/bin/false", "h1");
    REQUIRE(c);
    ss_stack_target t[6] = {{0, answers, files[0]},
                            {1, unregistered, files[1]},
                            {2, stopped, files[2]},
                            {3, exited, files[3]},
                            {4, blocks, files[4]},
                            {5, foreign, files[5]}};
    /* The deadline is what the blocking child runs into; the answering
     * one must beat it, so it is not short: a child woken late by a
     * loaded machine, or a memory read slowed by the sanitizers, took
     * longer than 0.3 s. */
    ss_stack_options opt = {0, 2000};
    result res = {0};
    CHECK_EQ_INT(ss_stack_collect(c, t, 6, &opt, on_done, &res), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(res.calls, 1);
    REQUIRE(res.n == 6);
    CHECK(strstr(res.ranks[0], "\"rank\":0,\"host\":\"h1\"") != NULL);
    /* not CPython: asked by the signal, saying why not from memory */
    CHECK(strstr(res.ranks[0], "\"state\":\"ok\",\"via\":\"signal\","
                 "\"memory_error\":\"no CPython interpreter") != NULL);
    CHECK(strstr(res.ranks[0], "\"why\":null,\"threads\":"
                 "[{\"id\":\"0x1\",\"current\":true,\"frames\":[{\"func\":"
                 "\"<module>\",\"file\":\"/x/train.py\",\"line\":9},"
                 "{\"func\":\"load_batch\"") != NULL);
    CHECK(strstr(res.ranks[1], "\"state\":\"no_answer\",\"why\":\"no answer: "
                 "the rank does not load stepscope's Python module") != NULL);
    CHECK(strstr(res.ranks[2], "\"state\":\"stopped\",\"why\":\"stopped "
                 "(SIGSTOP): no Python stack (reading its memory: no CPython "
                 "interpreter") != NULL);
    CHECK(strstr(res.ranks[3], "\"state\":\"exited\"") != NULL);
    /* the time it says is the time waited: the deadline, or a little
     * more when the loop ran late */
    static const char waited_for[] = "\"state\":\"no_answer\",\"why\":\"no "
                                     "answer within ";
    const char *waited = strstr(res.ranks[4], waited_for);
    CHECK(waited != NULL);
    if (waited) {
        char *end;
        double s = strtod(waited + sizeof waited_for - 1, &end);
        CHECK(s >= 2.0 && s < 3.7 && strncmp(end, " s", 2) == 0);
    }
    CHECK(strstr(res.ranks[5], "\"state\":\"no_answer\",\"why\":\"no answer: "
                 "the rank's process does not hold its stack file open")
          != NULL);
    CHECK(res.elapsed_ms >= 2000 && res.elapsed_ms < 3700);
    /* Neither was signalled: they would have died of it. */
    int wst;
    CHECK_EQ_INT(waitpid(unregistered, &wst, WNOHANG), 0);
    CHECK_EQ_INT(waitpid(foreign, &wst, WNOHANG), 0);
    free_result(&res);

    /* A second request: the file was emptied, the answer is fresh. */
    result again = {0};
    ss_stack_target one[1] = {{0, answers, files[0]}};
    CHECK_EQ_INT(ss_stack_collect(c, one, 1, &opt, on_done, &again), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(again.calls, 1);
    CHECK(again.n == 1 && strstr(again.ranks[0], "\"state\":\"ok\"") &&
          again.elapsed_ms < 2000);
    free_result(&again);

    /* Closed while a request waits on the blocking child. */
    result closing = {0};
    ss_stack_target slow[1] = {{4, blocks, files[4]}};
    ss_stack_options longer = {0, 60000};
    CHECK_EQ_INT(ss_stack_collect(c, slow, 1, &longer, on_done, &closing), 0);
    CHECK_EQ_INT(ss_stack_collect(c, NULL, 0, &longer, on_done, &closing),
                 -EINVAL);
    uv_run(&loop, UV_RUN_NOWAIT);
    ss_stack_collector_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(closing.calls, 1);
    CHECK(closing.n == 1 &&
          strstr(closing.ranks[0], "the controller is closing") != NULL);
    free_result(&closing);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);

    kill(stopped, SIGCONT);
    reap(answers);
    reap(unregistered);
    reap(stopped);
    reap(blocks);
    reap(foreign);
}

/* The source files a stack names are opened off the loop, regular files
 * only: a rank whose innermost frame is in a FIFO (whose open() and read()
 * would wait for a writer forever) answers as fast as any, the lines of
 * the regular file beside it are there, and a FIFO in the place of a
 * rank's stack file is not waited on either. */
static void sources_never_block_the_loop(void)
{
    const char *dir = testing_tmp_dir();
    char fifo_py[600], real_py[600], text[2048], stack[600], fifo_stack[600];
    snprintf(fifo_py, sizeof fifo_py, "%s/fifo.py", dir);
    snprintf(real_py, sizeof real_py, "%s/real.py", dir);
    snprintf(stack, sizeof stack, "%s/stack.0", dir);
    snprintf(fifo_stack, sizeof fifo_stack, "%s/stack.1", dir);
    REQUIRE(mkfifo(fifo_py, 0600) == 0);
    REQUIRE(mkfifo(fifo_stack, 0600) == 0);
    FILE *f = fopen(real_py, "w");
    REQUIRE(f);
    fputs("import time\n    time.sleep(100000)  \r\n", f);
    fclose(f);
    snprintf(text, sizeof text,
             "Thread 0x2 (most recent call first):\n"
             "  File \"%s\", line 2 in nap\n"
             "\n"
             "Current thread 0x1 (most recent call first):\n"
             "  File \"%s\", line 1 in stuck\n"
             "  File \"%s\", line 2 in <module>\n"
             "\n# stepscope: end of stacks\n", real_py, fifo_py, real_py);
    answer_text = text;
    pid_t rank = spawn_rank(stack, ANSWERS);
    answer_text = default_answer;
    /* rank 1 holds its "stack file", a FIFO, open for reading; it says
     * so once it does (a fixed wait was too short for a child scheduled
     * late) */
    int opened[2];
    REQUIRE(pipe(opened) == 0);
    pid_t holder = fork();
    REQUIRE(holder >= 0);
    if (holder == 0) {
        close(opened[0]);
        int fd = open(fifo_stack, O_RDONLY | O_NONBLOCK);
        (void)fd;
        ssize_t rc = write(opened[1], "o", 1);
        (void)rc;
        for (;;)
            pause();
    }
    close(opened[1]);
    char ch;
    REQUIRE(read(opened[0], &ch, 1) == 1);
    close(opened[0]);
    alarm(30); /* a loop stuck in open() would never return */

    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_stack_collector *c = ss_stack_collector_new(&loop, "/bin/false", "h");
    REQUIRE(c);
    ss_stack_target t[2] = {{0, rank, stack}, {1, holder, fifo_stack}};
    /* long enough for rank 0 to answer on a loaded machine: answering
     * before it shows that no FIFO held the request */
    ss_stack_options opt = {0, 10000};
    result res = {0};
    CHECK_EQ_INT(ss_stack_collect(c, t, 2, &opt, on_done, &res), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(res.calls, 1);
    REQUIRE(res.n == 2);
    CHECK(strstr(res.ranks[0], "\"state\":\"ok\"") != NULL);
    /* the regular file's line, trimmed; none from the FIFO */
    CHECK(strstr(res.ranks[0], "\"func\":\"nap\",\"file\":") != NULL);
    CHECK(strstr(res.ranks[0], "\"line\":2,\"code\":\"time.sleep(100000)\"}]")
          != NULL);
    CHECK(strstr(res.ranks[0], "\"func\":\"stuck\"") != NULL);
    CHECK(strstr(res.ranks[0], "fifo.py\",\"line\":1}]") != NULL);
    CHECK(strstr(res.ranks[1], "\"state\":\"no_answer\",\"why\":\"no "
                 "answer: the rank does not load") != NULL);
    CHECK(res.elapsed_ms < 10000); /* answered, not timed out */
    free_result(&res);
    ss_stack_collector_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    alarm(0);
    reap(rank);
    reap(holder);
}

/* A CPython child, running and then stopped, is read from its memory:
 * never signalled (it has no handler: the signal would kill it). */
static void python_read_from_memory(void)
{
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("skip: no /usr/bin/python3\n");
        return;
    }
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(ready[1], 1);
        execl("/usr/bin/python3", "python3", "-c",
              "import sys, time\n"
              "def nap():\n"
              "    sys.stdout.write('r'); sys.stdout.flush()\n"
              "    time.sleep(100)\n"
              "nap()\n", (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    char ch;
    REQUIRE(read(ready[0], &ch, 1) == 1);
    close(ready[0]);
    /* from the write into time.sleep(), the only place it blocks (asleep:
     * state S); a fixed wait was too short for a child scheduled late */
    CHECK(testing_wait_proc_state(pid, 'S'));
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_stack_collector *c = ss_stack_collector_new(&loop, "/bin/false", "h");
    REQUIRE(c);
    const char *dir = testing_tmp_dir();
    char file[600];
    snprintf(file, sizeof file, "%s/stack.py", dir);
    ss_stack_target t[1] = {{0, pid, file}};
    ss_stack_options opt = {0, 1500};
    for (int stopped = 0; stopped < 2; stopped++) {
        if (stopped) {
            kill(pid, SIGSTOP);
            int st;
            REQUIRE(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
        }
        result res = {0};
        CHECK_EQ_INT(ss_stack_collect(c, t, 1, &opt, on_done, &res), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        REQUIRE(res.calls == 1 && res.n == 1);
        CHECK(strstr(res.ranks[0], stopped
                         ? "\"state\":\"stopped\",\"via\":\"memory\","
                           "\"why\":\"stopped (SIGSTOP): its Python stack "
                           "read from its memory\""
                         : "\"state\":\"ok\",\"via\":\"memory\","
                           "\"why\":null") != NULL);
        CHECK(strstr(res.ranks[0], "{\"func\":\"<module>\",\"file\":"
                     "\"<string>\",\"line\":5},{\"func\":\"nap\",\"file\":"
                     "\"<string>\",\"line\":4}]}") != NULL);
        CHECK(res.elapsed_ms < 1000);
        free_result(&res);
    }
    ss_stack_collector_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    reap(pid);
}

TEST_LIST(TEST(parse_dump), TEST(collect_states),
          TEST(sources_never_block_the_loop), TEST(python_read_from_memory))
