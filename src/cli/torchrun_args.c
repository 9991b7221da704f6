/*
 * torchrun_args.c - torchrun's output and rendezvous options, read the way
 * torchrun reads them, and whether a host is this machine as its c10d
 * rendezvous decides it (torchrun_args.h).
 */
#include "torchrun_args.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher.h"
#include "numparse.h"

/* A decimal number of at most 9 digits at *P, moved past; -1 when none. */
static long take_number(const char **p)
{
    const char *s = *p;
    long v = 0;
    int digits = 0;
    while (isdigit((unsigned char)*s) && digits < 9) {
        v = v * 10 + (*s++ - '0');
        digits++;
    }
    if (digits == 0 || isdigit((unsigned char)*s))
        return -1;
    *p = s;
    return v;
}

int ss_torchrun_streams_check(const char *opt, const char *spec, char *err,
                              size_t errlen)
{
    const char *p = spec;
    long v = take_number(&p);
    if (v >= 0 && !*p) {
        if (v <= 3)
            return 0;
    } else {
        p = spec;
        for (;;) {
            long rank = take_number(&p);
            if (rank < 0 || *p++ != ':')
                break;
            v = take_number(&p);
            if (v < 0 || v > 3)
                break;
            if (!*p)
                return 0;
            if (*p++ != ',')
                break;
        }
    }
    snprintf(err, errlen, "%s '%s': torchrun's form is one of 0 (none), 1 "
             "(stdout), 2 (stderr), 3 (both) for every rank, or RANK:N,... "
             "per local rank", opt, spec);
    return -1;
}

/* The value a checked SPEC gives local rank RANK (0 when it names other
 * ranks only). */
static unsigned spec_value(const char *spec, uint32_t rank)
{
    if (!spec)
        return 0;
    const char *p = spec;
    long v = take_number(&p);
    if (!*p)
        return (unsigned)v;
    p = spec;
    while (*p) {
        long r = take_number(&p);
        p++; /* ':' */
        v = take_number(&p);
        if (r == (long)rank)
            return (unsigned)v;
        if (*p)
            p++; /* ',' */
    }
    return 0;
}

int ss_torchrun_filter_check(const char *list, char *err, size_t errlen)
{
    const char *p = list;
    for (;;) {
        if (take_number(&p) < 0)
            break;
        if (!*p)
            return 0;
        if (*p++ != ',')
            break;
    }
    snprintf(err, errlen, "--local-ranks-filter '%s': local ranks joined by "
             "',' (0,1,2)", list);
    return -1;
}

/* Whether local rank RANK is in the checked LIST. */
static int in_filter(const char *list, uint32_t rank)
{
    const char *p = list;
    while (*p) {
        if (take_number(&p) == (long)rank)
            return 1;
        if (*p)
            p++;
    }
    return 0;
}

uint8_t *ss_torchrun_echo_mask(const ss_torchrun_flags *tf, uint32_t nprocs)
{
    if (!tf->redirects && !tf->ranks_filter)
        return NULL; /* --tee alone adds a log stepscope keeps anyway */
    uint8_t *mask = malloc(nprocs ? nprocs : 1);
    if (!mask)
        return NULL;
    for (uint32_t r = 0; r < nprocs; r++) {
        unsigned hidden = spec_value(tf->redirects, r) &
                          ~spec_value(tf->tee, r);
        mask[r] = (uint8_t)((SS_ECHO_STDOUT | SS_ECHO_STDERR) & ~hidden);
        if (tf->ranks_filter && !in_filter(tf->ranks_filter, r))
            mask[r] = 0;
    }
    return mask;
}

/* Whether the N bytes at P are KEY. */
static int is_key(const char *p, size_t n, const char *key)
{
    return n == strlen(key) && strncmp(p, key, n) == 0;
}

/* torchrun's truth values (its rendezvous parameters' as_bool): 1 true, 0
 * false, -1 neither. */
static int truth(const char *v)
{
    static const char *const yes[] = {"1", "true", "t", "yes", "y", NULL};
    static const char *const no[] = {"0", "false", "f", "no", "n", NULL};
    for (int i = 0; yes[i]; i++)
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
    for (int i = 0; no[i]; i++)
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    return -1;
}

int ss_torchrun_rdzv_conf(const char *conf, uint32_t *join_timeout_ms,
                          int *is_host, char *err, size_t errlen)
{
    const char *p = conf;
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        if (!eq || eq == p || eq == p + n - 1) {
            snprintf(err, errlen, "--rdzv-conf '%s': KEY=VALUE pairs joined "
                     "by ',' (join_timeout=600)", conf);
            return -1;
        }
        size_t klen = (size_t)(eq - p);
        char value[24];
        size_t vlen = n - klen - 1;
        if (vlen >= sizeof value)
            vlen = sizeof value - 1;
        memcpy(value, eq + 1, vlen);
        value[vlen] = '\0';
        if (is_key(p, klen, "is_host")) {
            int t = truth(value);
            if (t < 0) {
                snprintf(err, errlen, "--rdzv-conf is_host '%s': true or "
                         "false", value);
                return -1;
            }
            *is_host = t;
        } else if (is_key(p, klen, "join_timeout")) {
            int64_t s;
            if (ss_parse_i64(value, 1, 86400, &s) != 0) {
                snprintf(err, errlen, "--rdzv-conf join_timeout '%s': whole "
                         "seconds from 1 to 86400", value);
                return -1;
            }
            *join_timeout_ms = (uint32_t)s * 1000;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Whether address A (AF_INET or AF_INET6) is a loopback address or one
 * of IFS's. */
static int address_is_here(const struct sockaddr *a, const struct ifaddrs *ifs)
{
    if (a->sa_family == AF_INET) {
        const struct in_addr *in = &((const struct sockaddr_in *)a)->sin_addr;
        if ((ntohl(in->s_addr) >> 24) == 127)
            return 1;
        for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
                    in->s_addr)
                return 1;
    } else if (a->sa_family == AF_INET6) {
        const struct in6_addr *in6 =
            &((const struct sockaddr_in6 *)a)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(in6))
            return 1;
        for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
                memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                       in6, sizeof *in6) == 0)
                return 1;
    }
    return 0;
}

int ss_torchrun_is_host(const char *host)
{
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) == 0 && strcasecmp(me, host) == 0)
        return 1;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return 0;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        ifs = NULL;
    int here = 0;
    for (const struct addrinfo *r = res; r && !here; r = r->ai_next)
        here = address_is_here(r->ai_addr, ifs);
    freeifaddrs(ifs);
    freeaddrinfo(res);
    return here;
}
