/*
 * httpget.c - the minimal HTTP/1.1 GET client (httpget.h).
 *
 * The request asks the server to close the connection, so the whole
 * response is read until EOF (bounded by the deadline and the size cap)
 * and then parsed: status line, headers, and the body by Content-Length,
 * by chunks, or as everything after the headers.  The socket is
 * non-blocking and every wait is a poll() against the one deadline.
 */
#include "httpget.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Splits BASE into HOST and PORT.  Returns 0 or -1. */
static int parse_base(const char *base, char *host, size_t hostlen,
                      char *port, size_t portlen)
{
    if (strncmp(base, "http://", 7) != 0)
        return -1;
    const char *h = base + 7, *end;
    if (*h == '[') {
        end = strchr(h, ']');
        if (!end)
            return -1;
        h++;
    } else {
        end = h + strcspn(h, ":/");
    }
    size_t n = (size_t)(end - h);
    if (n == 0 || n >= hostlen)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    if (*end == ']')
        end++;
    if (*end == ':') {
        size_t p = strspn(end + 1, "0123456789");
        if (p == 0 || p >= portlen || (end[1 + p] && end[1 + p] != '/'))
            return -1;
        memcpy(port, end + 1, p);
        port[p] = '\0';
    } else if (*end == '/' || *end == '\0') {
        snprintf(port, portlen, "80");
    } else {
        return -1;
    }
    return 0;
}

/* Waits until FD is ready for EVENTS or DEADLINE passes.  Returns 1 when
 * ready, 0 on timeout, -1 on error. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : n > 0;
    }
}

static int dial(const char *host, const char *port, long long deadline,
                char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, last = ECONNREFUSED;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK |
                                      SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
            int e = 0;
            socklen_t len = sizeof e;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
            if (e == 0)
                break;
            last = e;
        } else {
            last = errno == EINPROGRESS ? ETIMEDOUT : errno;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s:%s: %s", host, port,
                 strerror(last));
    return fd;
}

/* Decodes the chunked body at P[0..N) in place.  Returns its length, or
 * -1 when malformed or incomplete. */
static long long dechunk(char *p, size_t n)
{
    size_t in = 0, out = 0;
    for (;;) {
        char *end;
        errno = 0;
        unsigned long long size = strtoull(p + in, &end, 16);
        if (end == p + in || errno || (size_t)(end - p) > n)
            return -1;
        char *eol = memmem(end, n - (size_t)(end - p), "\r\n", 2);
        if (!eol)
            return -1;
        in = (size_t)(eol - p) + 2;
        if (size == 0)
            return (long long)out;
        if (size > n - in || n - in - size < 2 ||
            memcmp(p + in + size, "\r\n", 2) != 0)
            return -1;
        memmove(p + out, p + in, size);
        out += size;
        in += size + 2;
    }
}

/* Parses the whole response BUF[0..N) into OUT (taking BUF over). */
static int parse_response(char *buf, size_t n, ss_httpget_reply *out,
                          char *err, size_t errlen)
{
    if (n == 0) {
        snprintf(err, errlen, "the server closed the connection without "
                              "answering");
        return -1;
    }
    char *hend = memmem(buf, n, "\r\n\r\n", 4);
    int major, minor, status;
    if (!hend || sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3 ||
        status < 100 || status > 999) {
        snprintf(err, errlen, "malformed response (no HTTP status line and "
                              "headers)");
        return -1;
    }
    *hend = '\0';
    char *body = hend + 4;
    size_t blen = n - (size_t)(body - buf);
    long long clen = -1;
    int chunked = 0;
    for (char *line = strstr(buf, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtoll(line + 15, NULL, 10);
        else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
                 strstr(line + 18, "chunked"))
            chunked = 1;
    }
    if (chunked) {
        long long len = dechunk(body, blen);
        if (len < 0) {
            snprintf(err, errlen, "malformed or truncated chunked response");
            return -1;
        }
        blen = (size_t)len;
    } else if (clen >= 0) {
        if ((unsigned long long)clen > blen) {
            snprintf(err, errlen, "truncated response (%zu of %lld bytes)",
                     blen, clen);
            return -1;
        }
        blen = (size_t)clen;
    }
    memmove(buf, body, blen);
    buf[blen] = '\0';
    out->status = status;
    out->body = buf;
    out->len = blen;
    return 0;
}

/* One request of METHOD ("GET", or "POST" with an empty body). */
static int http_request(const char *method, const char *base,
                        const char *path, const char *token, int timeout_ms,
                        ss_httpget_reply *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char host[256], port[16];
    if (parse_base(base, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen, "not an http:// URL: %s", base);
        return -1;
    }
    long long deadline = now_ms() + timeout_ms;
    int fd = dial(host, port, deadline, err, errlen);
    if (fd < 0)
        return -1;
    int v6 = strchr(host, ':') != NULL; /* bracketed in Host, as in URLs */
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: %s%s%s:%s\r\n"
                     "Connection: close\r\n"
                     "Accept: application/json\r\n%s%s%s%s"
                     "User-Agent: stepscope\r\n\r\n",
                     method, path, v6 ? "[" : "", host, v6 ? "]" : "", port,
                     strcmp(method, "POST") == 0 ? "Content-Length: 0\r\n"
                                                 : "",
                     token ? "Authorization: Bearer " : "",
                     token ? token : "", token ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof req) {
        snprintf(err, errlen, "request too long");
        close(fd);
        return -1;
    }
    size_t sent = 0;
    while (sent < (size_t)n) {
        ssize_t k = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
        if (k > 0) {
            sent += (size_t)k;
        } else if (k < 0 && errno == EAGAIN &&
                   wait_fd(fd, POLLOUT, deadline) == 1) {
            continue;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else {
            snprintf(err, errlen, "cannot send the request: %s",
                     k < 0 && errno != EAGAIN ? strerror(errno) : "timed out");
            close(fd);
            return -1;
        }
    }
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    int rc = -1;
    while (buf) {
        if (len + 1 >= cap) {
            if (cap >= SS_HTTPGET_MAX_BODY) {
                snprintf(err, errlen, "response larger than %u bytes",
                         SS_HTTPGET_MAX_BODY);
                break;
            }
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                snprintf(err, errlen, "out of memory");
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t k = recv(fd, buf + len, cap - 1 - len, 0);
        if (k > 0) {
            len += (size_t)k;
        } else if (k == 0) {
            buf[len] = '\0';
            rc = parse_response(buf, len, out, err, errlen);
            break;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w == 1)
                continue;
            snprintf(err, errlen, "%s", w == 0 ? "timed out waiting for the "
                                                 "answer"
                                               : strerror(errno));
            break;
        } else {
            snprintf(err, errlen, "reading the answer: %s", strerror(errno));
            break;
        }
    }
    if (!buf)
        snprintf(err, errlen, "out of memory");
    close(fd);
    if (rc != 0)
        free(buf);
    return rc;
}

int ss_httpget(const char *base, const char *path, const char *token,
               int timeout_ms, ss_httpget_reply *out, char *err,
               size_t errlen)
{
    return http_request("GET", base, path, token, timeout_ms, out, err,
                        errlen);
}

int ss_httppost(const char *base, const char *path, const char *token,
                int timeout_ms, ss_httpget_reply *out, char *err,
                size_t errlen)
{
    return http_request("POST", base, path, token, timeout_ms, out, err,
                        errlen);
}

void ss_httpget_free(ss_httpget_reply *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
