/*
 * cmd_top_test.c - `stepscope top` against a canned controller API on
 * loopback: a snapshot shows every rank with its bar, ratio, phase and
 * last step, the step rate and worst-vs-median line and the newest
 * findings; the controller is found through a live-run file (stale files
 * are ignored); no job, a vanished controller and bad options are clear
 * errors.  The interactive terminal view is exercised end to end by
 * tests/e2e/test_top.py.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "testing.h"
#include "testing_cmd.h"
#include "testing_tmp.h"

/* ---- a canned API ---- */

static const struct {
    const char *path, *body;
} routes[] = {
    {"/api/live", "{\"run_id\":7,\"world_size\":3,\"running\":true}"},
    {"/api/runs/7", "{\"run\":{\"id\":7,\"name\":\"llama-7b\"}}"},
    {"/api/runs/7/ranks",
     "{\"ranks\":[{\"rank\":0,\"state\":\"running\",\"last_step\":41,"
     "\"current_step\":42,\"phase\":\"forward\",\"phase_s\":0.2,"
     "\"last_heard_s\":0.1},{\"rank\":1,\"state\":\"running\",\"last_step\":"
     "41,\"current_step\":42,\"phase\":\"allreduce\",\"phase_s\":0.05,"
     "\"last_heard_s\":0.3},{\"rank\":2,\"state\":\"failed\",\"last_step\":"
     "17,\"current_step\":null,\"phase\":null,\"phase_s\":null,"
     "\"last_heard_s\":12.5}]}"},
    {"/api/runs/7/steps?limit=20",
     "{\"steps\":[{\"step\":40,\"step_ms\":{\"median\":100.0,\"max\":"
     "150.0,\"worst_rank\":1}},{\"step\":41,\"step_ms\":{\"median\":102.0,"
     "\"max\":160.0,\"worst_rank\":1}}]}"},
    {"/api/runs/7/heatmap?limit=16",
     "{\"ranks\":[0,1,2],\"steps\":[40,41],\"step_ms\":[[100.0,102.0],"
     "[150.0,160.0],[null,null]]}"},
    {"/api/runs/7/findings",
     "{\"findings\":[{\"kind\":\"data_stall\",\"severity\":\"warning\","
     "\"first_step\":3,\"last_step\":3,\"message\":\"rank 0 waited for "
     "data\"},{\"kind\":\"straggler\",\"severity\":\"critical\","
     "\"first_step\":10,\"last_step\":41,\"message\":\"rank 1 is a "
     "persistent straggler\"}]}"},
};

typedef struct {
    int listen_fd;
    char url[64];
    int stop;
    pthread_t thread;
} api;

static void *serve(void *arg)
{
    api *a = arg;
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        int fd = accept(a->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        char req[2048] = "", path[512] = "";
        size_t len = 0;
        while (len + 1 < sizeof req && !strstr(req, "\r\n\r\n")) {
            ssize_t n = read(fd, req + len, sizeof req - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
        }
        sscanf(req, "GET %511s", path);
        const char *body = NULL;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (strcmp(path, routes[i].path) == 0)
                body = routes[i].body;
        char head[256];
        if (!body)
            body = "{\"error\":\"no such endpoint\"}";
        snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\n\r\n",
                 strstr(body, "error") ? "404 Not Found" : "200 OK",
                 strlen(body));
        if (write(fd, head, strlen(head)) < 0 ||
            write(fd, body, strlen(body)) < 0)
            len = 0;
        close(fd);
    }
    return NULL;
}

static int api_start(api *a)
{
    a->stop = 0;
    a->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof in;
    if (a->listen_fd < 0 || bind(a->listen_fd, (struct sockaddr *)&in, len) ||
        listen(a->listen_fd, 16) ||
        getsockname(a->listen_fd, (struct sockaddr *)&in, &len))
        return -1;
    snprintf(a->url, sizeof a->url, "http://127.0.0.1:%u/",
             (unsigned)ntohs(in.sin_port));
    return pthread_create(&a->thread, NULL, serve, a);
}

static void api_stop(api *a)
{
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
    shutdown(a->listen_fd, SHUT_RDWR);
    pthread_join(a->thread, NULL);
    close(a->listen_fd);
}

/* Runs `stepscope top ARGS` (not on a terminal: one snapshot). */
static int top(char *out_text, size_t outlen, char *err_text, size_t errlen,
               int argc, char **argv)
{
    FILE *out = tmpfile(), *err = tmpfile();
    int rc = testing_cmd_run(ss_cmd_top, argc, argv, out, err);
    rewind(out);
    rewind(err);
    size_t n = fread(out_text, 1, outlen - 1, out);
    out_text[n] = '\0';
    n = fread(err_text, 1, errlen - 1, err);
    err_text[n] = '\0';
    fclose(out);
    fclose(err);
    return rc;
}

/* The line of OUT that starts (after blanks) with the rank number R. */
static const char *rank_line(const char *out, int r, char *line, size_t cap)
{
    for (const char *p = out; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        int got;
        char tail;
        if (sscanf(p, "%d %c", &got, &tail) == 2 && got == r) {
            snprintf(line, cap, "%.*s", (int)n, p);
            return line;
        }
        p = eol ? eol + 1 : NULL;
    }
    line[0] = '\0';
    return line;
}

static void snapshot_shows_ranks_and_findings(void)
{
    api a;
    REQUIRE(api_start(&a) == 0);
    char out[8192], err[1024], ln[512];
    char *argv[] = {"top", "--url", a.url, "--once"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 4, argv), 0);
    api_stop(&a);
    CHECK(strstr(out, "run 7 llama-7b  3 ranks") != NULL);
    CHECK(strstr(out, "[running]") != NULL);
    CHECK(strstr(out, "step 41") != NULL);
    CHECK(strstr(out, "steps/s") != NULL);
    CHECK(strstr(out, "median rank 101.0 ms, worst rank 155.0 ms (+53 %, "
                      "mostly rank 1)") != NULL);
    rank_line(out, 0, ln, sizeof ln);
    CHECK(strstr(ln, " 41 ") && strstr(ln, "0.79x") &&
          strstr(ln, "forward 0.2s"));
    rank_line(out, 1, ln, sizeof ln);
    CHECK(strstr(ln, "1.21x") && strstr(ln, "allreduce") &&
          strstr(ln, "155.0") && strstr(ln, "+"));
    rank_line(out, 2, ln, sizeof ln);
    CHECK(strstr(ln, " 17 ") && strstr(ln, "failed") && strstr(ln, "12s"));
    /* Newest finding first. */
    const char *crit = strstr(out, "CRITICAL straggler");
    const char *warn = strstr(out, "warning  data_stall");
    CHECK(crit && warn && crit < warn);
    CHECK(strstr(out, "\033") == NULL); /* no escape codes off a terminal */
}

static void finds_the_job_through_its_live_file(void)
{
    api a;
    REQUIRE(api_start(&a) == 0);
    char dir[600], file[700], db[700];
    testing_tmp_path("store", dir, sizeof dir);
    mkdir(dir, 0700);
    snprintf(db, sizeof db, "%s/stepscope.db", dir);
    snprintf(file, sizeof file, "%s/stepscope.db.d", dir);
    mkdir(file, 0700);
    snprintf(file, sizeof file, "%s/stepscope.db.d/live", dir);
    mkdir(file, 0700);
    /* Another store in the same directory: its live runs are not ours. */
    snprintf(file, sizeof file, "%s/other.db.d", dir);
    mkdir(file, 0700);
    snprintf(file, sizeof file, "%s/other.db.d/live", dir);
    mkdir(file, 0700);
    snprintf(file, sizeof file, "%s/other.db.d/live/run-8.json", dir);
    FILE *other = fopen(file, "w");
    REQUIRE(other != NULL);
    fprintf(other, "{\"url\":\"http://127.0.0.1:1/\",\"pid\":%d,"
            "\"run_id\":8}\n", (int)getpid());
    fclose(other);
    /* A stale file: its controller (a child that has exited) is gone. */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(file, sizeof file, "%s/stepscope.db.d/live/run-9.json", dir);
    FILE *f = fopen(file, "w");
    REQUIRE(f != NULL);
    fprintf(f, "{\"url\":\"http://127.0.0.1:1/\",\"pid\":%d,\"run_id\":9}\n",
            (int)dead);
    fclose(f);
    char out[8192], err[1024];
    char *argv[] = {"top", "--db", db};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 3, argv), 1);
    CHECK(strstr(err, "no job is running") != NULL);

    snprintf(file, sizeof file, "%s/stepscope.db.d/live/run-7.json", dir);
    f = fopen(file, "w");
    REQUIRE(f != NULL);
    fprintf(f, "{\"url\":\"%s\",\"pid\":%d,\"run_id\":7}\n", a.url,
            (int)getpid());
    fclose(f);
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 3, argv), 0);
    CHECK(strstr(out, "run 7 llama-7b") != NULL);
    char *argv7[] = {"top", "--db", db, "7"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 4, argv7), 0);
    char *argv9[] = {"top", "--db", db, "9"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 4, argv9), 1);
    CHECK(strstr(err, "run 9 is not running") != NULL);
    api_stop(&a);

    /* The controller has gone away. */
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 3, argv), 1);
    CHECK(strstr(err, "does not answer") != NULL);
}

static void refuses_bad_options(void)
{
    char out[1024], err[1024];
    char *a1[] = {"top", "--interval", "0"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 3, a1), 2);
    CHECK(strstr(err, "--interval") != NULL);
    char *a2[] = {"top", "--url", "ftp://x"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 3, a2), 2);
    char *a3[] = {"top", "--frobnicate"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 2, a3), 2);
    char *a4[] = {"top", "--db"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 2, a4), 2);
    char *a5[] = {"top", "--help"};
    CHECK_EQ_INT(top(out, sizeof out, err, sizeof err, 2, a5), 0);
    CHECK(strstr(out, "usage: stepscope top") != NULL);
}

TEST_LIST(TEST(snapshot_shows_ranks_and_findings),
          TEST(finds_the_job_through_its_live_file),
          TEST(refuses_bad_options))
