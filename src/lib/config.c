/*
 * config.c - parses the STEPSCOPE_* and torchrun variables (see config.h).
 *
 * Every check names the variable and the expected form, because the one line
 * it produces on stderr is all that a user sees of a misconfigured rank.
 * Numbers are plain decimal without sign; addresses are numeric (no DNS
 * lookup, which could block the training process at start-up).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "stepscope.h"

static int env_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int env_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return SS_EENV;
}

/* Parses a decimal number of 1..10 digits that fits in MAX. */
static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
    if (!s || !*s || strlen(s) > 10)
        return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Reads the optional number NAME into *OUT, DEF when unset or empty. */
static int env_u32(char *(*get)(const char *), const char *name,
                   uint32_t def, uint32_t max, uint32_t *out, char *err,
                   size_t errlen)
{
    const char *s = get(name);
    if (!s || !*s) {
        *out = def;
        return 0;
    }
    if (parse_u32(s, max, out) < 0)
        return env_fail(err, errlen, "%s='%.40s' is not a number from 0 to %u",
                        name, s, (unsigned)max);
    return 0;
}

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static int parse_unix(ss__config *cfg, const char *path, char *err,
                      size_t errlen)
{
    struct sockaddr_un *sun = (struct sockaddr_un *)&cfg->addr;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof sun->sun_path)
        return env_fail(err, errlen,
                        "STEPSCOPE_ADDR: the unix socket path must have 1 to "
                        "%zu bytes", sizeof sun->sun_path - 1);
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, path, len + 1);
    cfg->addr_len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return 0;
}

static int parse_tcp(ss__config *cfg, const char *addr, char *err,
                     size_t errlen)
{
    const char *hostport = addr + 4; /* after "tcp:" */
    char host[64];
    const char *port;
    if (hostport[0] == '[') {
        const char *end = strchr(hostport, ']');
        size_t n = end ? (size_t)(end - hostport - 1) : 0;
        if (!end || end[1] != ':' || n >= sizeof host)
            goto bad;
        memcpy(host, hostport + 1, n);
        host[n] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(hostport, ':');
        if (!colon || (size_t)(colon - hostport) >= sizeof host)
            goto bad;
        memcpy(host, hostport, (size_t)(colon - hostport));
        host[colon - hostport] = '\0';
        port = colon + 1;
    }
    uint32_t portnum;
    if (parse_u32(port, 65535, &portnum) < 0 || portnum == 0)
        goto bad;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&cfg->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&cfg->addr;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)portnum);
        cfg->addr_len = sizeof *in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)portnum);
        cfg->addr_len = sizeof *in6;
        return 0;
    }
bad:
    return env_fail(err, errlen,
                    "STEPSCOPE_ADDR='%.80s' is not tcp:IPV4:PORT or "
                    "tcp:[IPV6]:PORT", addr);
}

int ss__config_parse(ss__config *cfg, char *(*get)(const char *name),
                     char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    if (errlen > 0)
        err[0] = '\0';
    const char *addr = get("STEPSCOPE_ADDR");
    if (!addr || !*addr)
        return SS__CONFIG_ABSENT;
    if (strlen(addr) > WIRE_MAX_STR)
        return env_fail(err, errlen, "STEPSCOPE_ADDR is longer than %d bytes",
                        WIRE_MAX_STR);
    strcpy(cfg->addr_text, addr);
    int rc;
    if (strncmp(addr, "unix:", 5) == 0)
        rc = parse_unix(cfg, addr + 5, err, errlen);
    else if (strncmp(addr, "tcp:", 4) == 0)
        rc = parse_tcp(cfg, addr, err, errlen);
    else
        rc = env_fail(err, errlen,
                      "STEPSCOPE_ADDR='%.80s' must start with unix: or tcp:",
                      addr);
    if (rc < 0)
        return rc;

    wire_hello *h = &cfg->hello;
    h->version = WIRE_VERSION;
    const char *token = get("STEPSCOPE_TOKEN");
    if (!token || wire_token_parse(token, h->token) < 0)
        return env_fail(err, errlen,
                        "STEPSCOPE_TOKEN must be %d hex digits",
                        2 * WIRE_TOKEN_SIZE);
    const char *run_id = get("STEPSCOPE_RUN_ID");
    if (!run_id || !*run_id || strlen(run_id) > WIRE_MAX_STR ||
        !printable(run_id))
        return env_fail(err, errlen,
                        "STEPSCOPE_RUN_ID must be 1 to %d printable bytes",
                        WIRE_MAX_STR);
    strcpy(h->run_id, run_id);

    if (env_u32(get, "WORLD_SIZE", 1, 1u << 24, &h->world_size, err, errlen) ||
        env_u32(get, "RANK", 0, UINT32_MAX, &h->rank, err, errlen) ||
        env_u32(get, "LOCAL_RANK", 0, UINT32_MAX, &h->local_rank, err,
                errlen) ||
        env_u32(get, "TORCHELASTIC_RESTART_COUNT", 0, UINT32_MAX, &h->attempt,
                err, errlen))
        return SS_EENV;
    if (h->world_size == 0 || h->rank >= h->world_size)
        return env_fail(err, errlen, "RANK=%u is outside WORLD_SIZE=%u",
                        (unsigned)h->rank, (unsigned)h->world_size);

    if (gethostname(h->host, sizeof h->host) != 0)
        strcpy(h->host, "unknown");
    h->host[WIRE_MAX_STR] = '\0';
    for (char *p = h->host; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return SS__CONFIG_ENABLED;
}
