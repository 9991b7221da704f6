/*
 * cmd_serve_test.c - unit tests for `stepscope serve` (cmd_serve.c, serve.c).
 *
 * Usage errors and unusable stores are refused before anything listens;
 * a forked child serves a store on a free loopback port, answers over
 * HTTP, and exits 0 on SIGTERM.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "store.h"
#include "testing.h"
#include "testing_tmp.h"

/* A store holding one run named "served". */
static const char *fixture(void)
{
    static char path[600];
    if (path[0])
        return path;
    testing_tmp_path("fx.db", path, sizeof path);
    char err[512] = "";
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  ss_store_open: %s\n", err);
        return path;
    }
    ss_run_info info = {.world_size = 1, .started_at = 1700000000000000000};
    snprintf(info.uuid, sizeof info.uuid, "u");
    snprintf(info.name, sizeof info.name, "served");
    int64_t id;
    ss_store_begin_run(s, &info, &id, err, sizeof err);
    ss_store_close(s);
    return path;
}

static int serve_(const char *a1, const char *a2, const char *a3,
                  const char *a4)
{
    char *argv[] = {"serve", (char *)a1, (char *)a2, (char *)a3, (char *)a4,
                    NULL};
    int argc = 1;
    while (argv[argc])
        argc++;
    return ss_cmd_serve(argc, argv);
}

static void refuses_before_listening(void)
{
    char path[600];
    CHECK_EQ_INT(serve_("--bogus", NULL, NULL, NULL), 2);
    CHECK_EQ_INT(serve_("extra", NULL, NULL, NULL), 2);
    CHECK_EQ_INT(serve_("--db", fixture(), "--http", "not-an-address"), 2);
    CHECK_EQ_INT(serve_("--db", testing_tmp_path("absent.db", path, sizeof path),
                        "--http", "127.0.0.1:0"), 1);
    CHECK_EQ_INT(serve_("--help", NULL, NULL, NULL), 0);
}

/* GET PATH from 127.0.0.1:PORT; the status, the body into BODY. */
static int get(unsigned port, const char *path, char *body, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    char all[8192];
    size_t got = 0;
    ssize_t k;
    while (got + 1 < sizeof all &&
           (k = read(fd, all + got, sizeof all - 1 - got)) > 0)
        got += (size_t)k;
    all[got] = '\0';
    close(fd);
    int status = -1;
    sscanf(all, "HTTP/1.%*d %d", &status);
    const char *sep = strstr(all, "\r\n\r\n");
    snprintf(body, len, "%s", sep ? sep + 4 : "");
    return status;
}

static void serves_until_sigterm(void)
{
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    const char *db = fixture();
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        _exit(serve_("--db", db, "--http", "127.0.0.1:0"));
    }
    close(pipefd[1]);
    FILE *f = fdopen(pipefd[0], "r");
    REQUIRE(f);
    char line[1024] = "";
    unsigned port = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "stepscope serve: serving %*s at "
                         "http://127.0.0.1:%u/", &port) == 1)
            break;
    CHECK(port != 0);
    char body[8192];
    if (port) {
        CHECK_EQ_INT(get(port, "/api/runs", body, sizeof body), 200);
        CHECK(strstr(body, "\"name\":\"served\"") != NULL);
        CHECK(strstr(body, "\"live\":false") != NULL);
        CHECK_EQ_INT(get(port, "/api/live", body, sizeof body), 404);
        CHECK_EQ_INT(get(port, "/metrics", body, sizeof body), 200);
        CHECK(strstr(body, "stepscope_info{mode=\"serve\"} 1") != NULL);
    }
    kill(pid, SIGTERM);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fclose(f);
}

TEST_LIST(TEST(refuses_before_listening), TEST(serves_until_sigterm))
