/*
 * httpget_test.c - the GET client against a canned loopback server: bodies
 * framed by Content-Length, by chunks and by the connection closing, error
 * statuses, the token header, and what is refused (truncated, malformed,
 * no server, a server that never answers).
 */
#include "httpget.h"
#include "testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* The client's timeout where the server answers: generous, as a server
 * thread that a loaded machine runs late must not make it expire. */
#define HTTP_WAIT_MS 20000

typedef struct {
    int listen_fd;
    char url[64];
    const char *answer; /* written whole after the request, then closed */
    int silent;         /* instead: say nothing until the client goes */
    char request[2048]; /* what the client sent */
    pthread_t thread;
} canned;

/* Says nothing on FD until the client gives up and closes it (30 s at
 * most): a fixed silence could end, on a loaded machine, before the
 * client's timeout was noticed, and the client would see the close.  A
 * function of its own: serve_one's frame stays as it was, as the thread
 * cancelled in accept() leaves that frame's redzones behind. */
static void wait_client_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b;
    while (poll(&p, 1, 30000) == 1 && read(fd, &b, 1) > 0)
        ;
}

static void *serve_one(void *arg)
{
    canned *c = arg;
    int fd = accept(c->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    size_t len = 0;
    while (len + 1 < sizeof c->request) {
        ssize_t n = read(fd, c->request + len, sizeof c->request - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        c->request[len] = '\0';
        if (strstr(c->request, "\r\n\r\n"))
            break;
    }
    if (c->silent)
        wait_client_gone(fd);
    else if (write(fd, c->answer, strlen(c->answer)) < 0)
        c->request[0] = '\0';
    close(fd);
    return NULL;
}

static int start(canned *c, const char *answer)
{
    memset(c->request, 0, sizeof c->request);
    c->answer = answer;
    c->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&a, alen) ||
        listen(c->listen_fd, 4) ||
        getsockname(c->listen_fd, (struct sockaddr *)&a, &alen))
        return -1;
    snprintf(c->url, sizeof c->url, "http://127.0.0.1:%u/",
             (unsigned)ntohs(a.sin_port));
    return pthread_create(&c->thread, NULL, serve_one, c);
}

static void stop(canned *c)
{
    pthread_join(c->thread, NULL);
    close(c->listen_fd);
}

static void content_length_and_token(void)
{
    canned c = {0};
    REQUIRE(start(&c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Content-Length: 11\r\n\r\n{\"a\":[1,2]}") == 0);
    ss_httpget_reply r;
    char err[256];
    CHECK_EQ_INT(ss_httpget(c.url, "/api/live?x=1", "s3cret", HTTP_WAIT_MS,
                            &r, err, sizeof err),
                 0);
    stop(&c);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(r.len, 11);
    CHECK_STR(r.body, "{\"a\":[1,2]}");
    CHECK(strncmp(c.request, "GET /api/live?x=1 HTTP/1.1\r\n", 28) == 0);
    CHECK(strstr(c.request, "\r\nAuthorization: Bearer s3cret\r\n") != NULL);
    CHECK(strstr(c.request, "\r\nConnection: close\r\n") != NULL);
    ss_httpget_free(&r);
    ss_httpget_free(&r);
}

static void chunked_and_until_close(void)
{
    canned c = {0};
    REQUIRE(start(&c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "4\r\n{\"ab\r\n3;ext=1\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n") ==
            0);
    ss_httpget_reply r;
    char err[256];
    CHECK_EQ_INT(
        ss_httpget(c.url, "/", NULL, HTTP_WAIT_MS, &r, err, sizeof err), 0);
    stop(&c);
    CHECK_STR(r.body ? r.body : "", "{\"ab\":1}");
    CHECK(strstr(c.request, "Authorization") == NULL);
    ss_httpget_free(&r);

    REQUIRE(start(&c, "HTTP/1.0 404 Not Found\r\n\r\n{\"error\":\"no\"}") == 0);
    CHECK_EQ_INT(
        ss_httpget(c.url, "/x", NULL, HTTP_WAIT_MS, &r, err, sizeof err), 0);
    stop(&c);
    CHECK_EQ_INT(r.status, 404);
    CHECK_STR(r.body ? r.body : "", "{\"error\":\"no\"}");
    ss_httpget_free(&r);
}

static void refuses_bad_answers(void)
{
    const char *bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        "SSH-2.0-OpenSSH\r\n",
        "",
    };
    const char *why[] = {"truncated", "chunked", "malformed",
                         "without answering"};
    for (int i = 0; i < 4; i++) {
        canned c = {0};
        REQUIRE(start(&c, bad[i]) == 0);
        ss_httpget_reply r;
        char err[256] = "";
        CHECK_EQ_INT(ss_httpget(c.url, "/", NULL, HTTP_WAIT_MS, &r, err,
                                sizeof err),
                     -1);
        stop(&c);
        CHECK(strstr(err, why[i]) != NULL);
        CHECK(r.body == NULL);
    }
}

static void no_server_and_silent_server(void)
{
    canned c = {0};
    REQUIRE(start(&c, "") == 0);
    char url[64];
    snprintf(url, sizeof url, "%s", c.url);
    /* Close the listener before anyone connects: the port refuses. */
    pthread_cancel(c.thread);
    pthread_join(c.thread, NULL);
    close(c.listen_fd);
    ss_httpget_reply r;
    char err[256] = "";
    CHECK_EQ_INT(ss_httpget(url, "/", NULL, 1000, &r, err, sizeof err), -1);
    CHECK(strstr(err, "cannot connect") != NULL);

    canned s = {.silent = 1};
    REQUIRE(start(&s, "") == 0);
    CHECK_EQ_INT(ss_httpget(s.url, "/", NULL, 200, &r, err, sizeof err), -1);
    CHECK(strstr(err, "timed out") != NULL);
    stop(&s);

    CHECK_EQ_INT(ss_httpget("ftp://x/", "/", NULL, 100, &r, err, sizeof err),
                 -1);
    CHECK(strstr(err, "not an http") != NULL);
}

TEST_LIST(TEST(content_length_and_token), TEST(chunked_and_until_close),
          TEST(refuses_bad_answers), TEST(no_server_and_silent_server))
