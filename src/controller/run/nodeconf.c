/*
 * nodeconf.c - resolves a multi-node run's node settings from the flags,
 * Slurm's environment and torchrun's PET_* variables (see nodeconf.h for
 * the precedence), and expands Slurm's compressed host lists.
 *
 * Everything here is pure: the environment is an argument, errors go to a
 * caller-owned buffer, memory is bounded by SS_HOSTLIST_MAX_HOSTS names of
 * at most 255 bytes.
 */
#include "nodeconf.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "appendf.h"

#define HOST_NAME_MAX_LEN 255
#define RANGE_DIGITS_MAX 9   /* bounds stay well inside uint32_t */

/* Errors quote at most the first 64 bytes of a host list. */
#define LIST_ARG(list) (list), strlen(list) > 64 ? "..." : ""


/* ---- host lists ---- */

typedef struct {
    char **v;
    size_t n, cap, max;
} name_list;

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int names_push(name_list *l, char *name)
{
    if (l->n + 1 >= l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = name;
    l->v[l->n] = NULL;
    return 0;
}

/* One range of a bracket group: LO..HI printed with at least WIDTH digits. */
typedef struct {
    uint32_t lo, hi;
    int width;
} host_range;

/* Parses a bound of at most RANGE_DIGITS_MAX digits at *P. */
static int parse_bound(const char **p, uint32_t *v, int *width)
{
    const char *s = *p;
    int k = 0;
    uint32_t x = 0;
    while (isdigit((unsigned char)s[k])) {
        if (k == RANGE_DIGITS_MAX)
            return -1;
        x = x * 10 + (uint32_t)(s[k] - '0');
        k++;
    }
    if (k == 0)
        return -1;
    *p = s + k;
    *v = x;
    *width = k;
    return 0;
}

/* Parses the group between '[' and ']' (START..END exclusive) into RANGES
 * (at most MAXR).  Returns the count, or -1 with ERR set. */
static int parse_group(const char *list, const char *start, const char *end,
                       host_range *ranges, int maxr, char *err, size_t errlen)
{
    int n = 0;
    const char *p = start;
    if (p == end) {
        ss_set_err(err, errlen, "'%.64s%s': empty bracket group []", LIST_ARG(list));
        return -1;
    }
    for (;;) {
        host_range r;
        const char *at = p;
        if (parse_bound(&p, &r.lo, &r.width) < 0) {
            ss_set_err(err, errlen, "'%.64s%s': '%.*s' in brackets is not a number of "
                    "at most %d digits", LIST_ARG(list), (int)(end - at), at,
                    RANGE_DIGITS_MAX);
            return -1;
        }
        r.hi = r.lo;
        if (p < end && *p == '-') {
            p++;
            int w;
            if (parse_bound(&p, &r.hi, &w) < 0) {
                ss_set_err(err, errlen, "'%.64s%s': range '%.*s' lacks an upper bound "
                        "of at most %d digits", LIST_ARG(list), (int)(end - at), at,
                        RANGE_DIGITS_MAX);
                return -1;
            }
            if (r.hi < r.lo) {
                ss_set_err(err, errlen, "'%.64s%s': reversed range %" PRIu32
                        "-%" PRIu32, LIST_ARG(list), r.lo, r.hi);
                return -1;
            }
        }
        if (n == maxr) {
            ss_set_err(err, errlen, "'%.64s%s': more than %d ranges in one group",
                    LIST_ARG(list), maxr);
            return -1;
        }
        ranges[n++] = r;
        if (p == end)
            return n;
        if (*p != ',') {
            ss_set_err(err, errlen, "'%.64s%s': unexpected '%c' in brackets", LIST_ARG(list), *p);
            return -1;
        }
        p++;
        if (p == end) {
            ss_set_err(err, errlen, "'%.64s%s': trailing ',' in brackets", LIST_ARG(list));
            return -1;
        }
    }
}

/* Appends SUFFIX (LEN bytes) to every name in CUR from index FROM. */
static int append_literal(name_list *cur, size_t from, const char *s,
                          size_t len, const char *list, char *err,
                          size_t errlen)
{
    for (size_t i = from; i < cur->n; i++) {
        size_t old = strlen(cur->v[i]);
        if (old + len > HOST_NAME_MAX_LEN) {
            ss_set_err(err, errlen, "'%.64s%s': a host name is longer than %d bytes",
                    LIST_ARG(list), HOST_NAME_MAX_LEN);
            return -1;
        }
        char *v = realloc(cur->v[i], old + len + 1);
        if (!v) {
            ss_set_err(err, errlen, "out of memory");
            return -1;
        }
        memcpy(v + old, s, len);
        v[old + len] = '\0';
        cur->v[i] = v;
    }
    return 0;
}

#define GROUP_RANGES_MAX 1024

/* Replaces the names CUR[FROM..] by each of them followed by each number
 * of RANGES (the leftmost group varies slowest). */
static int cross_group(name_list *cur, size_t from, const host_range *ranges,
                       int nr, const char *list, char *err, size_t errlen)
{
    uint64_t per = 0;
    for (int i = 0; i < nr; i++)
        per += (uint64_t)ranges[i].hi - ranges[i].lo + 1;
    uint64_t have = cur->n - from;
    if (per * have + from > cur->max) {
        ss_set_err(err, errlen, "'%.64s%s' names more than %zu hosts", LIST_ARG(list), cur->max);
        return -1;
    }
    size_t nprefix = (size_t)have;
    char **prefixes = malloc((nprefix ? nprefix : 1) * sizeof *prefixes);
    if (!prefixes) {
        ss_set_err(err, errlen, "out of memory");
        return -1;
    }
    memcpy(prefixes, cur->v + from, nprefix * sizeof *prefixes);
    cur->n = from;
    cur->v[from] = NULL;
    int rc = 0;
    for (size_t i = 0; i < nprefix && rc == 0; i++) {
        for (int g = 0; g < nr && rc == 0; g++) {
            for (uint64_t x = ranges[g].lo; x <= ranges[g].hi; x++) {
                char *name = NULL;
                if (asprintf(&name, "%s%0*" PRIu64, prefixes[i],
                             ranges[g].width, x) < 0) {
                    ss_set_err(err, errlen, "out of memory");
                    rc = -1;
                    break;
                }
                if (strlen(name) > HOST_NAME_MAX_LEN) {
                    free(name);
                    ss_set_err(err, errlen, "'%.64s%s': a host name is longer than "
                            "%d bytes", LIST_ARG(list), HOST_NAME_MAX_LEN);
                    rc = -1;
                    break;
                }
                if (names_push(cur, name) < 0) {
                    free(name);
                    ss_set_err(err, errlen, "out of memory");
                    rc = -1;
                    break;
                }
            }
        }
    }
    for (size_t i = 0; i < nprefix; i++)
        free(prefixes[i]);
    free(prefixes);
    return rc;
}

/* Expands one comma-free-at-top-level item LIST[START..END) onto CUR. */
static int expand_item(name_list *cur, const char *list, const char *start,
                       const char *end, char *err, size_t errlen)
{
    if (start == end) {
        ss_set_err(err, errlen, "'%.64s%s': empty host name", LIST_ARG(list));
        return -1;
    }
    size_t from = cur->n;
    char *empty = strdup("");
    if (!empty || names_push(cur, empty) < 0) {
        free(empty);
        ss_set_err(err, errlen, "out of memory");
        return -1;
    }
    if (cur->n > cur->max) {
        ss_set_err(err, errlen, "'%.64s%s' names more than %zu hosts", LIST_ARG(list), cur->max);
        return -1;
    }
    host_range ranges[GROUP_RANGES_MAX];
    const char *p = start;
    while (p < end) {
        if (*p == '[') {
            const char *close = memchr(p, ']', (size_t)(end - p));
            const char *open2 = memchr(p + 1, '[', (size_t)(end - p - 1));
            if (!close) {
                ss_set_err(err, errlen, "'%.64s%s': '[' without ']'", LIST_ARG(list));
                return -1;
            }
            if (open2 && open2 < close) {
                ss_set_err(err, errlen, "'%.64s%s': nested '['", LIST_ARG(list));
                return -1;
            }
            int nr = parse_group(list, p + 1, close, ranges, GROUP_RANGES_MAX,
                                 err, errlen);
            if (nr < 0 ||
                cross_group(cur, from, ranges, nr, list, err, errlen) < 0)
                return -1;
            p = close + 1;
        } else if (*p == ']') {
            ss_set_err(err, errlen, "'%.64s%s': ']' without '['", LIST_ARG(list));
            return -1;
        } else {
            size_t len = strcspn(p, "[]");
            if (len > (size_t)(end - p))
                len = (size_t)(end - p);
            for (size_t i = 0; i < len; i++)
                if (isspace((unsigned char)p[i])) {
                    ss_set_err(err, errlen, "'%.64s%s': white space in a host name",
                            LIST_ARG(list));
                    return -1;
                }
            if (append_literal(cur, from, p, len, list, err, errlen) < 0)
                return -1;
            p += len;
        }
    }
    return 0;
}

char **ss_hostlist_expand(const char *list, size_t max_hosts, size_t *n,
                          char *err, size_t errlen)
{
    if (!list || !*list) {
        ss_set_err(err, errlen, "empty host list");
        return NULL;
    }
    name_list cur = {.max = max_hosts ? max_hosts : SS_HOSTLIST_MAX_HOSTS};
    const char *p = list, *item = list;
    int depth = 0;
    for (;; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']')
            depth--;
        if (depth < 0) {
            ss_set_err(err, errlen, "'%.64s%s': ']' without '['", LIST_ARG(list));
            goto fail;
        }
        if ((*p == ',' && depth == 0) || *p == '\0') {
            if (depth > 0) {
                ss_set_err(err, errlen, "'%.64s%s': '[' without ']'", LIST_ARG(list));
                goto fail;
            }
            if (expand_item(&cur, list, item, p, err, errlen) < 0)
                goto fail;
            if (*p == '\0')
                break;
            item = p + 1;
        }
    }
    if (n)
        *n = cur.n;
    return cur.v;
fail:
    names_free(&cur);
    return NULL;
}

void ss_hostlist_free(char **hosts)
{
    if (!hosts)
        return;
    for (char **h = hosts; *h; h++)
        free(*h);
    free(hosts);
}

/* ---- resolving ---- */

/* The value of NAME in ENVP, or NULL; an empty value counts as unset. */
static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return (*envp)[n + 1] ? *envp + n + 1 : NULL;
    return NULL;
}

/* Parses a decimal number MIN..MAX with nothing else around it. */
static int parse_num(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static const ss_node_origin origin_default = {SS_NODE_FROM_DEFAULT, "default"};

/* A value and where it came from; NULL TEXT: not given by this source. */
typedef struct {
    const char *text;
    ss_node_origin from;
} candidate;

/* The first given of the candidates, in order. */
static const candidate *pick(const candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i].text)
            return &c[i];
    return NULL;
}

#define PICK(arr) pick(arr, sizeof arr / sizeof arr[0])

/* "--nnodes 3" or "SLURM_NNODES=3": how ERR names a value's origin. */
static void name_value(const candidate *c, char *buf, size_t len)
{
    if (c->from.source == SS_NODE_FROM_FLAG)
        snprintf(buf, len, "%s %s", c->from.what, c->text);
    else
        snprintf(buf, len, "%s=%s", c->from.what, c->text);
}

/* Parses "N" or "N:N" (torchrun's MIN:MAX with MIN == MAX). */
static int parse_nnodes(const candidate *c, uint32_t *out, char *err,
                        size_t errlen)
{
    char what[128];
    name_value(c, what, sizeof what);
    const char *colon = strchr(c->text, ':');
    uint32_t lo, hi;
    if (colon) {
        char min[24];
        size_t k = (size_t)(colon - c->text);
        if (k >= sizeof min)
            k = sizeof min - 1;
        memcpy(min, c->text, k);
        min[k] = '\0';
        if (parse_num(min, 1, UINT32_MAX, &lo) < 0 ||
            parse_num(colon + 1, 1, UINT32_MAX, &hi) < 0) {
            ss_set_err(err, errlen, "%s: not a number of nodes (N, or N:N)", what);
            return -1;
        }
        if (lo != hi) {
            ss_set_err(err, errlen, "%s: elastic ranges (MIN:MAX) are not "
                    "supported; give one number of nodes", what);
            return -1;
        }
    } else if (parse_num(c->text, 1, UINT32_MAX, &lo) < 0) {
        ss_set_err(err, errlen, "%s: not a number of nodes (N, or N:N)", what);
        return -1;
    }
    if (lo > SS_NODECONF_MAX_NODES) {
        ss_set_err(err, errlen, "%s: at most %d nodes", what,
                SS_NODECONF_MAX_NODES);
        return -1;
    }
    *out = lo;
    return 0;
}

static int parse_port(const candidate *c, uint16_t *out, char *err,
                      size_t errlen)
{
    uint32_t v;
    if (parse_num(c->text, 1, 65535, &v) < 0) {
        char what[128];
        name_value(c, what, sizeof what);
        ss_set_err(err, errlen, "%s: a port must be a number 1..65535", what);
        return -1;
    }
    *out = (uint16_t)v;
    return 0;
}

static int check_addr(const candidate *c, char *err, size_t errlen)
{
    char what[SS_NODECONF_ADDR_MAX + 64];
    name_value(c, what, sizeof what);
    if (strlen(c->text) >= SS_NODECONF_ADDR_MAX) {
        ss_set_err(err, errlen, "%.60s...: a host name is at most %d bytes",
                what, SS_NODECONF_ADDR_MAX - 1);
        return -1;
    }
    for (const char *s = c->text; *s; s++)
        if (isspace((unsigned char)*s) || !isprint((unsigned char)*s)) {
            ss_set_err(err, errlen, "%s: not a host name or address", what);
            return -1;
        }
    return 0;
}

/* torchrun's rendezvous: the backend's name and the endpoint split into
 * host and port text ("" none), from the flag or else the variable. */
typedef struct {
    candidate backend, endpoint; /* TEXT NULL: not given */
    char host[SS_NODECONF_ADDR_MAX];
    char port[8];
} rendezvous;

enum { RDZV_STATIC, RDZV_C10D, RDZV_ETCD };

/* The backend R names (static when none). */
static int rdzv_kind(const rendezvous *r)
{
    const char *b = r->backend.text;
    if (!b || strcmp(b, "static") == 0)
        return RDZV_STATIC;
    return strcmp(b, "c10d") == 0 ? RDZV_C10D : RDZV_ETCD;
}

/* Reads the rendezvous of F, or else (with PET) of ENVP's PET_RDZV_*,
 * into R and checks it: a known backend, an endpoint HOST, HOST:PORT or
 * [ADDR]:PORT.  Returns 0, or -1 with ERR. */
static int read_rendezvous(const ss_node_flags *f, char *const *envp,
                           int pet, rendezvous *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    char what[SS_NODECONF_ADDR_MAX + 64];
    candidate be[] = {
        {f->rdzv_backend, {SS_NODE_FROM_FLAG, "--rdzv-backend"}},
        {pet ? env_get(envp, "PET_RDZV_BACKEND") : NULL,
         {SS_NODE_FROM_PET, "PET_RDZV_BACKEND"}},
    };
    candidate ep[] = {
        {f->rdzv_endpoint, {SS_NODE_FROM_FLAG, "--rdzv-endpoint"}},
        {pet ? env_get(envp, "PET_RDZV_ENDPOINT") : NULL,
         {SS_NODE_FROM_PET, "PET_RDZV_ENDPOINT"}},
    };
    const candidate *c = PICK(be);
    if (c) {
        r->backend = *c;
        if (strcmp(c->text, "static") != 0 && strcmp(c->text, "c10d") != 0 &&
            strcmp(c->text, "etcd") != 0 && strcmp(c->text, "etcd-v2") != 0) {
            name_value(c, what, sizeof what);
            ss_set_err(err, errlen, "%s: torchrun's rendezvous backends are "
                       "static, c10d, etcd and etcd-v2", what);
            return -1;
        }
    }
    if (!(c = PICK(ep)))
        return 0;
    r->endpoint = *c;
    name_value(c, what, sizeof what);
    const char *t = c->text, *host = t, *port = NULL;
    size_t hlen;
    if (*t == '[') {
        const char *close = strchr(t, ']');
        if (!close || close == t + 1 || (close[1] && close[1] != ':')) {
            ss_set_err(err, errlen, "%s: an IPv6 endpoint is [ADDR]:PORT",
                       what);
            return -1;
        }
        host = t + 1;
        hlen = (size_t)(close - host);
        port = close[1] ? close + 2 : NULL;
    } else {
        const char *colon = strchr(t, ':');
        if (colon && strchr(colon + 1, ':'))
            colon = NULL; /* a bare IPv6 address, no port */
        hlen = colon ? (size_t)(colon - t) : strlen(t);
        port = colon ? colon + 1 : NULL;
    }
    uint32_t v;
    if (hlen == 0 || hlen >= sizeof r->host ||
        (port && parse_num(port, 0, 65535, &v) < 0)) {
        ss_set_err(err, errlen, "%s: torchrun's endpoint is HOST or HOST:PORT "
                   "(a port 0..65535)", what);
        return -1;
    }
    memcpy(r->host, host, hlen);
    r->host[hlen] = '\0';
    for (const char *s = r->host; *s; s++)
        if (isspace((unsigned char)*s) || !isprint((unsigned char)*s)) {
            ss_set_err(err, errlen, "%s: not a host name or address", what);
            return -1;
        }
    /* port 0 asks torchrun to pick one: for one node only, not a port
     * several nodes can meet at */
    if (port && v > 0)
        snprintf(r->port, sizeof r->port, "%" PRIu32, v);
    return 0;
}

/* Is Slurm's environment to be used?  Inside a Slurm job spanning more
 * than one node, or when the flags ask for more than one node. */
static int use_slurm(char *const *envp, const ss_node_flags *f)
{
    if (!env_get(envp, "SLURM_JOB_ID"))
        return 0;
    uint32_t n;
    const char *nn = env_get(envp, "SLURM_NNODES");
    if (!nn)
        nn = env_get(envp, "SLURM_JOB_NUM_NODES");
    if (nn && parse_num(nn, 2, UINT32_MAX, &n) == 0)
        return 1;
    return f->nnodes && parse_num(f->nnodes, 2, UINT32_MAX, &n) == 0;
}

int ss_nodeconf_resolve(const ss_node_flags *flags, char *const *envp,
                        ss_node_conf *out, char *err, size_t errlen)
{
    static const ss_node_flags no_flags;
    const ss_node_flags *f = flags ? flags : &no_flags;
    memset(out, 0, sizeof *out);
    int slurm = use_slurm(envp, f);
    char **hosts = NULL;
    char what[160];

    /* Number of nodes. */
    const char *slurm_nn_name = env_get(envp, "SLURM_NNODES")
                                    ? "SLURM_NNODES" : "SLURM_JOB_NUM_NODES";
    candidate nn[] = {
        {f->nnodes, {SS_NODE_FROM_FLAG, "--nnodes"}},
        {slurm ? env_get(envp, slurm_nn_name) : NULL,
         {SS_NODE_FROM_SLURM, slurm_nn_name}},
        {env_get(envp, "PET_NNODES"), {SS_NODE_FROM_PET, "PET_NNODES"}},
    };
    const candidate *c = PICK(nn);
    out->nnodes = 1;
    out->nnodes_from = origin_default;
    if (c) {
        if (parse_nnodes(c, &out->nnodes, err, errlen) < 0)
            return -1;
        out->nnodes_from = c->from;
    }

    /* Node rank. */
    candidate nr[] = {
        {f->node_rank, {SS_NODE_FROM_FLAG, "--node-rank"}},
        {slurm ? env_get(envp, "SLURM_NODEID") : NULL,
         {SS_NODE_FROM_SLURM, "SLURM_NODEID"}},
        {env_get(envp, "PET_NODE_RANK"), {SS_NODE_FROM_PET, "PET_NODE_RANK"}},
    };
    out->node_rank_from = origin_default;
    if ((c = PICK(nr))) {
        name_value(c, what, sizeof what);
        if (parse_num(c->text, 0, UINT32_MAX, &out->node_rank) < 0) {
            ss_set_err(err, errlen, "%s: a node rank must be a number 0..N-1",
                    what);
            return -1;
        }
        out->node_rank_from = c->from;
        if (out->node_rank >= out->nnodes) {
            ss_set_err(err, errlen, "%s is not below the number of nodes "
                    "(%" PRIu32 ", from %s)", what, out->nnodes,
                    out->nnodes_from.what);
            return -1;
        }
    }

    /* torchrun's rendezvous names node 0 only across nodes; where no
     * source gives a node rank, c10d's nodes are numbered as they join
     * (the front-end decides which one is node 0), and etcd's cannot be. */
    rendezvous rdzv;
    if (read_rendezvous(f, envp, out->nnodes > 1, &rdzv, err, errlen) < 0)
        return -1;
    int rdzv_nodes = out->nnodes > 1 && rdzv.endpoint.text &&
                     rdzv_kind(&rdzv) != RDZV_ETCD;
    if (out->nnodes > 1 && rdzv_kind(&rdzv) == RDZV_C10D &&
        out->node_rank_from.source == SS_NODE_FROM_DEFAULT) {
        out->node_rank = SS_NODECONF_RANK_AT_JOIN;
        out->node_rank_from = (ss_node_origin){
            SS_NODE_FROM_JOIN, "the controller, as the node joins"};
    } else if (out->nnodes > 1 && rdzv_kind(&rdzv) == RDZV_ETCD &&
               out->node_rank_from.source == SS_NODE_FROM_DEFAULT) {
        name_value(&rdzv.backend, what, sizeof what);
        ss_set_err(err, errlen, "%s: the nodes meet at node 0's controller, "
                   "not at an etcd server; give --node-rank K on each node "
                   "and --master-addr (node 0's address)", what);
        return -1;
    }

    /* Ranks on this node.  Slurm's task and GPU counts are not it. */
    candidate np[] = {
        {f->nproc_per_node, {SS_NODE_FROM_FLAG, "-n"}},
        {env_get(envp, "PET_NPROC_PER_NODE"),
         {SS_NODE_FROM_PET, "PET_NPROC_PER_NODE"}},
    };
    out->nproc_from = origin_default;
    if ((c = PICK(np))) {
        name_value(c, what, sizeof what);
        if (parse_num(c->text, 1, UINT32_MAX, &out->nproc_per_node) < 0) {
            ss_set_err(err, errlen, "%s: ranks per node must be a number of at "
                    "least 1%s", what, c->from.source == SS_NODE_FROM_PET
                    ? " (give -n N)" : "");
            return -1;
        }
        out->nproc_from = c->from;
    }

    /* Master address: Slurm's is the first host of the node list. */
    const char *list_name = env_get(envp, "SLURM_JOB_NODELIST")
                                ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
    const char *list = slurm && !f->master_addr ? env_get(envp, list_name)
                                                : NULL;
    if (list) {
        char herr[256];
        if (!(hosts = ss_hostlist_expand(list, 0, NULL, herr, sizeof herr))) {
            ss_set_err(err, errlen, "%s: %s", list_name, herr);
            return -1;
        }
    }
    int rdzv_flag = rdzv_nodes &&
                    rdzv.endpoint.from.source == SS_NODE_FROM_FLAG;
    int rdzv_pet = rdzv_nodes && !rdzv_flag;
    candidate ma[] = {
        {f->master_addr, {SS_NODE_FROM_FLAG, "--master-addr"}},
        {rdzv_flag ? rdzv.host : NULL, rdzv.endpoint.from},
        {hosts ? hosts[0] : NULL,
         {SS_NODE_FROM_SLURM, strcmp(list_name, "SLURM_JOB_NODELIST") == 0
                                  ? "first host of SLURM_JOB_NODELIST"
                                  : "first host of SLURM_NODELIST"}},
        {env_get(envp, "PET_MASTER_ADDR"),
         {SS_NODE_FROM_PET, "PET_MASTER_ADDR"}},
        {rdzv_pet ? rdzv.host : NULL, rdzv.endpoint.from},
    };
    snprintf(out->master_addr, sizeof out->master_addr, "127.0.0.1");
    out->master_addr_from = origin_default;
    if ((c = PICK(ma))) {
        if (check_addr(c, err, errlen) < 0) {
            ss_hostlist_free(hosts);
            return -1;
        }
        snprintf(out->master_addr, sizeof out->master_addr, "%s", c->text);
        out->master_addr_from = c->from;
    }
    ss_hostlist_free(hosts);
    if (out->nnodes > 1 && out->master_addr_from.source == SS_NODE_FROM_DEFAULT) {
        ss_set_err(err, errlen, "%" PRIu32 " nodes (from %s) need the master's "
                "address: give --master-addr HOST (node 0's name or address)",
                out->nnodes, out->nnodes_from.what);
        return -1;
    }

    /* Ports. */
    int rdzv_static = rdzv_nodes && rdzv_kind(&rdzv) == RDZV_STATIC &&
                      rdzv.port[0];
    int rdzv_c10d = rdzv_nodes && rdzv_kind(&rdzv) == RDZV_C10D &&
                    rdzv.port[0];
    candidate mp[] = {
        {f->master_port, {SS_NODE_FROM_FLAG, "--master-port"}},
        {rdzv_static && rdzv_flag ? rdzv.port : NULL, rdzv.endpoint.from},
        {env_get(envp, "PET_MASTER_PORT"),
         {SS_NODE_FROM_PET, "PET_MASTER_PORT"}},
        {rdzv_static && rdzv_pet ? rdzv.port : NULL, rdzv.endpoint.from},
    };
    out->master_port_from = origin_default;
    if ((c = PICK(mp))) {
        if (parse_port(c, &out->master_port, err, errlen) < 0)
            return -1;
        out->master_port_from = c->from;
    } else if (out->nnodes > 1 ||
               out->master_addr_from.source != SS_NODE_FROM_DEFAULT) {
        /* Only this host's own loopback master may pick a free port. */
        out->master_port = SS_NODECONF_DEFAULT_PORT;
    }
    if (f->controller_port || rdzv_c10d) {
        candidate cp = {f->controller_port,
                        {SS_NODE_FROM_FLAG, "--controller-port"}};
        if (!f->controller_port)
            cp = (candidate){rdzv.port, rdzv.endpoint.from};
        if (parse_port(&cp, &out->controller_port, err, errlen) < 0)
            return -1;
        out->controller_port_from = cp.from;
        if (out->controller_port == out->master_port &&
            out->master_port_from.source == SS_NODE_FROM_DEFAULT) {
            /* the endpoint's port is the controller's: the ranks' master
             * port moves out of its way */
            out->master_port = out->controller_port == 65535
                                   ? 65534 : out->controller_port + 1;
            out->master_port_from = (ss_node_origin){
                SS_NODE_FROM_DERIVED, out->controller_port == 65535
                                          ? "controller port - 1"
                                          : "controller port + 1"};
        }
        if (out->controller_port == out->master_port) {
            ss_set_err(err, errlen, "%s %" PRIu16 " is the master "
                    "port (from %s): the ranks' rendezvous needs it; choose "
                    "another", cp.from.what, out->controller_port,
                    out->master_port_from.what);
            return -1;
        }
    } else if (out->master_port) {
        if (out->master_port == 65535) {
            ss_set_err(err, errlen, "master port 65535 (from %s) leaves no "
                    "master port + 1 for the controller: give "
                    "--controller-port", out->master_port_from.what);
            return -1;
        }
        out->controller_port = (uint16_t)(out->master_port + 1);
        out->controller_port_from =
            (ss_node_origin){SS_NODE_FROM_DERIVED, "master port + 1"};
    } else {
        out->controller_port_from = origin_default;
    }

    /* Job id. */
    candidate ji[] = {
        {f->job_id, {SS_NODE_FROM_FLAG, "--job-id"}},
        {f->rdzv_id, {SS_NODE_FROM_FLAG, "--rdzv-id"}},
        {slurm ? env_get(envp, "SLURM_JOB_ID") : NULL,
         {SS_NODE_FROM_SLURM, "SLURM_JOB_ID"}},
        {env_get(envp, "PET_RDZV_ID"), {SS_NODE_FROM_PET, "PET_RDZV_ID"}},
    };
    out->job_id_from = origin_default;
    if ((c = PICK(ji))) {
        name_value(c, what, sizeof what);
        if (strlen(c->text) >= SS_NODECONF_JOB_ID_MAX) {
            ss_set_err(err, errlen, "%.60s...: a job id is at most %d bytes",
                    what, SS_NODECONF_JOB_ID_MAX - 1);
            return -1;
        }
        for (const char *s = c->text; *s; s++)
            if (!isgraph((unsigned char)*s)) {
                ss_set_err(err, errlen, "%s: a job id is printable characters "
                        "without spaces", what);
                return -1;
            }
        snprintf(out->job_id, sizeof out->job_id, "%s", c->text);
        out->job_id_from = c->from;
    }
    return 0;
}


size_t ss_nodeconf_describe(const ss_node_conf *c, char *buf, size_t buflen)
{
    size_t len = 0;
    if (buflen > 0)
        buf[0] = '\0';
    if (c->nnodes == 1 && !c->master_port &&
        c->master_addr_from.source == SS_NODE_FROM_DEFAULT) {
        ss_appendf(buf, buflen, &len, "single node, master port chosen at start");
    } else {
        if (c->node_rank == SS_NODECONF_RANK_AT_JOIN)
            ss_appendf(buf, buflen, &len, "a node of %" PRIu32, c->nnodes);
        else
            ss_appendf(buf, buflen, &len, "node %" PRIu32 " of %" PRIu32,
                       c->node_rank, c->nnodes);
        ss_appendf(buf, buflen, &len, " (node rank from %s, %" PRIu32
               " node%s from %s), master %s:", c->node_rank_from.what,
               c->nnodes, c->nnodes == 1 ? "" : "s", c->nnodes_from.what,
               c->master_addr);
        if (c->master_port)
            ss_appendf(buf, buflen, &len, "%" PRIu16, c->master_port);
        else
            ss_appendf(buf, buflen, &len, "(free port)");
        ss_appendf(buf, buflen, &len, " (address from %s, port from %s)",
               c->master_addr_from.what, c->master_port_from.what);
        if (c->controller_port)
            ss_appendf(buf, buflen, &len, ", controller port %" PRIu16 " (%s)",
                   c->controller_port, c->controller_port_from.what);
    }
    if (c->nproc_per_node && c->nproc_from.source == SS_NODE_FROM_PET)
        ss_appendf(buf, buflen, &len, ", %" PRIu32 " ranks per node (%s)",
               c->nproc_per_node, c->nproc_from.what);
    if (c->job_id[0])
        ss_appendf(buf, buflen, &len, ", job %s (%s)", c->job_id,
               c->job_id_from.what);
    return len;
}
