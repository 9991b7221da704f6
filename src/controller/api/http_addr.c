/*
 * http_addr.c - the server's addresses and who may ask it (http.h):
 * parsing --http values, whether an address is loopback, the token check
 * (constant time), and the Host and Origin checks that keep pages of other
 * sites from reading or acting through a browser.
 *
 * Pure functions of their arguments; the server (http.c) calls them for
 * every request, the command line for --http.
 */
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "numparse.h"

int ss_http_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return 1;
        if (IN6_IS_ADDR_V4MAPPED(&a6))
            return a6.s6_addr[12] == 127;
    }
    return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
    int64_t v;
    if (ss_parse_i64(s, 0, 65535, &v) != 0)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

int ss_http_parse_addr(const char *spec, char *host, size_t hostlen,
                       uint16_t *port, char *err, size_t errlen)
{
    char h[INET6_ADDRSTRLEN + 2] = "127.0.0.1";
    *port = SS_HTTP_DEFAULT_PORT;
    const char *p = NULL;
    size_t n = strlen(spec);
    if (n == 0) {
        snprintf(err, errlen, "empty address");
        return -1;
    }
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || (size_t)(close - spec - 1) >= sizeof h ||
            (close[1] && close[1] != ':')) {
            snprintf(err, errlen, "bad address '%s' (want [V6ADDR]:PORT)",
                     spec);
            return -1;
        }
        memcpy(h, spec + 1, (size_t)(close - spec - 1));
        h[close - spec - 1] = '\0';
        p = close[1] ? close + 2 : NULL;
    } else if (strspn(spec, "0123456789") == n) {
        p = spec; /* just a port */
    } else {
        const char *colon = strrchr(spec, ':');
        if (colon && strchr(spec, ':') == colon) { /* ADDR:PORT or :PORT */
            if ((size_t)(colon - spec) >= sizeof h) {
                snprintf(err, errlen, "bad address '%s'", spec);
                return -1;
            }
            if (colon > spec) {
                memcpy(h, spec, (size_t)(colon - spec));
                h[colon - spec] = '\0';
            }
            p = colon + 1;
        } else { /* an address alone (IPv6 has several colons) */
            snprintf(h, sizeof h, "%s", spec);
        }
    }
    if (strcmp(h, "localhost") == 0)
        snprintf(h, sizeof h, "127.0.0.1");
    struct in6_addr a;
    if (inet_pton(AF_INET, h, &a) != 1 && inet_pton(AF_INET6, h, &a) != 1) {
        snprintf(err, errlen, "'%s' is not a numeric IPv4 or IPv6 address",
                 h);
        return -1;
    }
    if (p && parse_port(p, port) != 0) {
        snprintf(err, errlen, "bad port '%s' (0 to 65535)", p);
        return -1;
    }
    if (strlen(h) >= hostlen) {
        snprintf(err, errlen, "address too long");
        return -1;
    }
    snprintf(host, hostlen, "%s", h);
    return 0;
}

/* Constant-time comparison of A with B (lengths may differ). */
static int same_secret(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char diff = (unsigned char)(na != nb);
    for (size_t i = 0; i < nb; i++)
        diff |= (unsigned char)(b[i] ^ (i < na ? a[i] : 0));
    return diff == 0;
}

int ss_http_authorized(const char *required, const char *auth_header,
                       const char *query_token)
{
    if (!required)
        return 1;
    if (query_token && same_secret(query_token, required))
        return 1;
    if (auth_header && strncasecmp(auth_header, "Bearer ", 7) == 0) {
        const char *t = auth_header + 7;
        while (*t == ' ')
            t++;
        return same_secret(t, required);
    }
    return 0;
}

int ss_http_host_allowed(const char *listen_host, const char *host_header)
{
    if (!host_header)
        return 1; /* HTTP/1.0 without Host: not a browser */
    const char *h = host_header, *port;
    size_t n;
    if (*h == '[') {
        const char *close = strchr(h, ']');
        if (!close)
            return 0;
        n = (size_t)(close + 1 - h);
        port = close + 1;
    } else {
        n = strcspn(h, ":");
        port = h + n;
        if (strchr(port + (*port == ':'), ':'))
            return 0; /* an unbracketed IPv6 address, or junk */
    }
    if (*port == ':') {
        uint16_t p;
        if (!port[1] || parse_port(port + 1, &p) != 0)
            return 0;
    } else if (*port) {
        return 0;
    }
    char own[INET6_ADDRSTRLEN + 2];
    snprintf(own, sizeof own, strchr(listen_host, ':') ? "[%s]" : "%s",
             listen_host);
    const char *names[] = {"localhost", "127.0.0.1", "[::1]", own};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(h, names[i], n) == 0)
            return 1;
    return 0;
}

int ss_http_origin_allowed(const char *origin, const char *host_header)
{
    if (!origin || !host_header)
        return !origin;
    /* https: the same server behind a TLS proxy (docs/api.md) */
    size_t skip = strncasecmp(origin, "http://", 7) == 0    ? 7
                  : strncasecmp(origin, "https://", 8) == 0 ? 8
                                                            : 0;
    return skip && strcasecmp(origin + skip, host_header) == 0;
}
