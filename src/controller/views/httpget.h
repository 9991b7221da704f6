/*
 * httpget.h - a minimal HTTP/1.1 GET (and empty POST) client for the
 * controller's own API (used by `stepscope top`, `stacks` and `profile`).
 *
 * One request per connection ("Connection: close"), plain TCP (no TLS:
 * the API listens on loopback unless told otherwise), a bearer token when
 * one is given, a deadline for the whole exchange.  It reads the status
 * line and headers and the body as the server framed it: Content-Length,
 * chunked transfer coding, or until the connection closes.  Bodies are
 * capped at SS_HTTPGET_MAX_BODY.
 */
#ifndef STEPSCOPE_HTTPGET_H
#define STEPSCOPE_HTTPGET_H

#include <stddef.h>

#define SS_HTTPGET_MAX_BODY (64u << 20)

/* What a GET returned. */
typedef struct {
    int status;   /* the HTTP status, e.g. 200 */
    char *body;   /* NUL-terminated, malloc'ed; free with ss_httpget_free */
    size_t len;   /* bytes of body, without the NUL */
} ss_httpget_reply;

/*
 * GETs PATH (starting with '/', query included) from the server at BASE
 * ("http://HOST:PORT/" or "http://HOST:PORT"; HOST a name, a numeric IPv4
 * address or a bracketed IPv6 address), with "Authorization: Bearer TOKEN"
 * when TOKEN is not NULL, giving up after TIMEOUT_MS.  Returns 0 with
 * *OUT filled (any status, also 404 or 500), or -1 with a one-line reason
 * in ERR ("connection refused", "timed out", "malformed response") and
 * *OUT zeroed.
 */
int ss_httpget(const char *base, const char *path, const char *token,
               int timeout_ms, ss_httpget_reply *out, char *err,
               size_t errlen);

/* ss_httpget with POST and an empty body (`stepscope profile`, `stacks`). */
int ss_httppost(const char *base, const char *path, const char *token,
                int timeout_ms, ss_httpget_reply *out, char *err,
                size_t errlen);

/* Frees R's body; R may be zeroed or already freed. */
void ss_httpget_free(ss_httpget_reply *r);

#endif
