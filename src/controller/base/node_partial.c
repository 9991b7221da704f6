/*
 * node_partial.c - fold, merge and codec of node partials
 * (node_partial.h).  Little-endian, fixed fields, u8-counted lists.
 */
#include "node_partial.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void stat_init(ss_np_stat *s)
{
    memset(s, 0, sizeof *s - sizeof s->slow);
    ss_dds_init(&s->sketch);
    s->n_slow = 0;
}

void ss_np_init(ss_node_partial *p, uint64_t step, uint32_t expected)
{
    p->step = step;
    p->ranks_expected = expected;
    p->ranks_present = 0;
    p->dropped = 0;
    stat_init(&p->step_time);
    p->n_latest = 0;
    p->n_phases = 0;
}

/* Before: larger value, then lower rank. */
static int before(const ss_np_rank_value *a, const ss_np_rank_value *b)
{
    return a->value > b->value || (a->value == b->value && a->rank < b->rank);
}

/* Inserts V into the descending list L of *N (at most SS_NP_TOPK). */
static void top_insert(ss_np_rank_value *l, uint32_t *n, ss_np_rank_value v)
{
    uint32_t i = *n;
    if (i == SS_NP_TOPK) {
        if (!before(&v, &l[SS_NP_TOPK - 1]))
            return;
        i--;
    } else {
        (*n)++;
    }
    while (i > 0 && before(&v, &l[i - 1])) {
        l[i] = l[i - 1];
        i--;
    }
    l[i] = v;
}

static void stat_add(ss_np_stat *s, uint32_t rank, int64_t v)
{
    if (s->count == 0 || v < s->min_ns)
        s->min_ns = v;
    if (s->count == 0 || v > s->max_ns)
        s->max_ns = v;
    s->count++;
    s->sum_ns += v;
    ss_dds_add(&s->sketch, (double)v);
    top_insert(s->slow, &s->n_slow, (ss_np_rank_value){rank, v});
}

static void stat_merge(ss_np_stat *into, const ss_np_stat *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min_ns < into->min_ns)
        into->min_ns = from->min_ns;
    if (into->count == 0 || from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
    into->count += from->count;
    into->sum_ns += from->sum_ns;
    ss_dds_merge(&into->sketch, &from->sketch);
    for (uint32_t i = 0; i < from->n_slow; i++)
        top_insert(into->slow, &into->n_slow, from->slow[i]);
}

const ss_np_phase *ss_np_find(const ss_node_partial *p, const char *name)
{
    for (uint32_t i = 0; i < p->n_phases; i++)
        if (strcmp(p->phases[i].name, name) == 0)
            return &p->phases[i];
    return NULL;
}

/* The phase NAME, added when there is room; NULL otherwise. */
static ss_np_phase *phase_of(ss_node_partial *p, const char *name)
{
    ss_np_phase *ph = (ss_np_phase *)ss_np_find(p, name);
    if (ph)
        return ph;
    size_t len = strlen(name);
    if (p->n_phases == SS_NP_MAX_PHASES || len == 0 || len > SS_NP_NAME_MAX)
        return NULL;
    ph = &p->phases[p->n_phases++];
    memcpy(ph->name, name, len + 1);
    stat_init(&ph->stat);
    return ph;
}

void ss_np_add_rank(ss_node_partial *p, uint32_t rank, int64_t begin_ns,
                    int64_t end_ns, uint32_t n, const char *const *names,
                    const int64_t *durs)
{
    p->ranks_present++;
    stat_add(&p->step_time, rank, end_ns - begin_ns);
    top_insert(p->latest, &p->n_latest, (ss_np_rank_value){rank, end_ns});
    for (uint32_t i = 0; i < n; i++) {
        /* a name that repeats adds to its first occurrence */
        int repeat = 0;
        for (uint32_t j = 0; j < i && !repeat; j++)
            repeat = strcmp(names[j], names[i]) == 0;
        if (repeat)
            continue;
        int64_t d = durs[i];
        for (uint32_t j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) == 0)
                d += durs[j];
        ss_np_phase *ph = phase_of(p, names[i]);
        if (ph)
            stat_add(&ph->stat, rank, d);
        else
            p->dropped++;
    }
}

int ss_np_merge(ss_node_partial *into, const ss_node_partial *from)
{
    if (into->step != from->step)
        return -1;
    into->ranks_expected += from->ranks_expected;
    into->ranks_present += from->ranks_present;
    into->dropped += from->dropped;
    stat_merge(&into->step_time, &from->step_time);
    for (uint32_t i = 0; i < from->n_latest; i++)
        top_insert(into->latest, &into->n_latest, from->latest[i]);
    for (uint32_t i = 0; i < from->n_phases; i++) {
        ss_np_phase *ph = phase_of(into, from->phases[i].name);
        if (ph)
            stat_merge(&ph->stat, &from->phases[i].stat);
        else
            into->dropped += from->phases[i].stat.count;
    }
    return 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

void ss_np_shift(ss_node_partial *p, int64_t offset_ns)
{
    for (uint32_t i = 0; i < p->n_latest; i++)
        p->latest[i].value = sat_add(p->latest[i].value, offset_ns);
}

/* ---- encoding ---- */

typedef struct {
    uint8_t *p;
    size_t cap, len;
    int bad;
} wbuf;

static void put(wbuf *b, uint64_t v, int n)
{
    if (b->bad || b->cap - b->len < (size_t)n) {
        b->bad = 1;
        return;
    }
    for (int i = 0; i < n; i++)
        b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static void put_list(wbuf *b, const ss_np_rank_value *l, uint32_t n)
{
    put(b, n, 1);
    for (uint32_t i = 0; i < n; i++) {
        put(b, l[i].rank, 4);
        put(b, (uint64_t)l[i].value, 8);
    }
}

static void put_stat(wbuf *b, const ss_np_stat *s)
{
    if (s->n_slow > SS_NP_TOPK || s->n_slow > s->count ||
        s->sketch.n_bins > SS_DDS_MAX_BINS)
        b->bad = 1;
    put(b, s->count, 8);
    put(b, (uint64_t)s->sum_ns, 8);
    put(b, (uint64_t)s->min_ns, 8);
    put(b, (uint64_t)s->max_ns, 8);
    put_list(b, s->slow, s->n_slow);
    put(b, s->sketch.zero, 8);
    put(b, s->sketch.collapsed, 1);
    put(b, s->sketch.n_bins, 2);
    for (uint32_t i = 0; i < s->sketch.n_bins && !b->bad; i++) {
        put(b, (uint16_t)s->sketch.bins[i].index, 2);
        put(b, s->sketch.bins[i].count, 4);
    }
}

size_t ss_np_encode(const ss_node_partial *p, uint8_t *buf, size_t cap)
{
    wbuf b = {buf, cap, 0, 0};
    if (p->n_latest > SS_NP_TOPK || p->n_phases > SS_NP_MAX_PHASES ||
        p->ranks_present > p->ranks_expected)
        return 0;
    put(&b, p->step, 8);
    put(&b, p->ranks_expected, 4);
    put(&b, p->ranks_present, 4);
    put(&b, p->dropped, 8);
    put_stat(&b, &p->step_time);
    put_list(&b, p->latest, p->n_latest);
    put(&b, p->n_phases, 1);
    for (uint32_t i = 0; i < p->n_phases; i++) {
        size_t n = strnlen(p->phases[i].name, sizeof p->phases[i].name);
        if (n == 0 || n > SS_NP_NAME_MAX)
            b.bad = 1;
        put(&b, n, 1);
        if (!b.bad && b.cap - b.len >= n) {
            memcpy(b.p + b.len, p->phases[i].name, n);
            b.len += n;
        } else {
            b.bad = 1;
        }
        put_stat(&b, &p->phases[i].stat);
    }
    return b.bad ? 0 : b.len;
}

/* ---- decoding ---- */

typedef struct {
    const uint8_t *p;
    size_t len, off;
    int short_read;
} rbuf;

static uint64_t get(rbuf *r, int n)
{
    if (r->short_read || r->len - r->off < (size_t)n) {
        r->short_read = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->off++] << (8 * i);
    return v;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* A list of at most SS_NP_TOPK, descending; 0 or -1. */
static int get_list(rbuf *r, ss_np_rank_value *l, uint32_t *n)
{
    *n = (uint32_t)get(r, 1);
    if (*n > SS_NP_TOPK)
        return -1;
    for (uint32_t i = 0; i < *n; i++) {
        l[i].rank = (uint32_t)get(r, 4);
        l[i].value = (int64_t)get(r, 8);
        if (i > 0 && !before(&l[i - 1], &l[i]))
            return -1;
    }
    return 0;
}

static const char *get_stat(rbuf *r, ss_np_stat *s)
{
    s->count = get(r, 8);
    s->sum_ns = (int64_t)get(r, 8);
    s->min_ns = (int64_t)get(r, 8);
    s->max_ns = (int64_t)get(r, 8);
    if (get_list(r, s->slow, &s->n_slow) != 0)
        return "a top-k list is too long or out of order";
    s->sketch.zero = get(r, 8);
    s->sketch.collapsed = (uint32_t)get(r, 1);
    s->sketch.n_bins = (uint32_t)get(r, 2);
    if (r->short_read)
        return NULL;
    if (s->sketch.collapsed > 1 || s->sketch.n_bins > SS_DDS_MAX_BINS)
        return "a sketch's header is out of range";
    uint64_t total = s->sketch.zero;
    for (uint32_t i = 0; i < s->sketch.n_bins; i++) {
        ss_dds_bin *bin = &s->sketch.bins[i];
        bin->index = (int32_t)get(r, 2);
        bin->count = (uint32_t)get(r, 4);
        if (r->short_read)
            return NULL;
        if (bin->index > SS_DDS_MAX_INDEX || bin->count == 0 ||
            (i > 0 && bin->index <= s->sketch.bins[i - 1].index))
            return "a sketch's bins are out of range or out of order";
        total += bin->count;
    }
    if (total != s->count)
        return "a sketch's count differs from its statistic's";
    if (s->n_slow > s->count)
        return "a top-k list is longer than its count";
    if (s->count > 0 && (s->min_ns > s->max_ns || s->slow[0].value != s->max_ns))
        return "a statistic's minimum, maximum and slowest disagree";
    return NULL;
}

int ss_np_decode(const uint8_t *buf, size_t len, ss_node_partial *out,
                 char *err, size_t errlen)
{
    rbuf r = {buf, len, 0, 0};
    out->step = get(&r, 8);
    out->ranks_expected = (uint32_t)get(&r, 4);
    out->ranks_present = (uint32_t)get(&r, 4);
    out->dropped = get(&r, 8);
    const char *why = get_stat(&r, &out->step_time);
    if (!why && get_list(&r, out->latest, &out->n_latest) != 0)
        why = "the latest-ending list is too long or out of order";
    out->n_phases = why ? 0 : (uint32_t)get(&r, 1);
    if (!why && out->n_phases > SS_NP_MAX_PHASES)
        why = "too many phases";
    for (uint32_t i = 0; !why && !r.short_read && i < out->n_phases; i++) {
        ss_np_phase *ph = &out->phases[i];
        size_t n = (size_t)get(&r, 1);
        if (r.short_read)
            break;
        if (n == 0 || n > SS_NP_NAME_MAX || len - r.off < n) {
            why = n == 0 || n > SS_NP_NAME_MAX ? "a phase name is empty"
                                               : NULL;
            r.short_read = why == NULL;
            break;
        }
        memcpy(ph->name, buf + r.off, n);
        ph->name[n] = '\0';
        r.off += n;
        for (size_t j = 0; j < n && !why; j++)
            if ((unsigned char)ph->name[j] < 0x20 || ph->name[j] == 0x7f)
                why = "a phase name has a control character";
        for (uint32_t j = 0; j < i && !why; j++)
            if (strcmp(out->phases[j].name, ph->name) == 0)
                why = "a phase name repeats";
        if (!why)
            why = get_stat(&r, &ph->stat);
    }
    if (r.short_read)
        return fail(err, errlen, "NODE_PARTIAL is truncated");
    if (why)
        return fail(err, errlen, "NODE_PARTIAL: %s", why);
    if (r.off != len)
        return fail(err, errlen, "NODE_PARTIAL has %zu trailing bytes",
                    len - r.off);
    if (out->ranks_present > out->ranks_expected ||
        out->step_time.count != out->ranks_present ||
        out->n_latest > out->ranks_present)
        return fail(err, errlen, "NODE_PARTIAL counts more ranks present "
                    "than expected or than its step times");
    return 0;
}
