/*
 * json.c - a growable text buffer and the JSON value writers.
 *
 * The bottom of the controller: the store, the detectors, the API and the
 * views all write JSON through these, so escaping (RFC 8259, invalid UTF-8
 * as U+FFFD), milliseconds with 3 decimals, missing values as null and
 * ISO 8601 times are the same everywhere.  It depends on nothing but libc.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- ss_buf ---- */

void ss_buf_free(ss_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

void ss_buf_reset(ss_buf *b)
{
    b->len = 0;
    b->oom = 0;
    if (b->data)
        b->data[0] = '\0';
}

/* Makes room for N more bytes plus the NUL.  Returns 0 or -1 (OOM set). */
static int buf_reserve(ss_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void ss_buf_add(ss_buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ss_buf_puts(ss_buf *b, const char *s)
{
    ss_buf_add(b, s, strlen(s));
}

void ss_buf_printf(ss_buf *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        ss_buf_add(b, small, (size_t)n);
        return;
    }
    if (buf_reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t ss_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

/* S as a JSON string literal (null for NULL) handed to PUT in pieces:
 * runs of plain ASCII at once, escapes and UTF-8 sequences one by one. */
static void json_escape(const char *s, void (*put)(void *, const char *,
                                                   size_t),
                        void *ctx)
{
    if (!s) {
        put(ctx, "null", 4);
        return;
    }
    put(ctx, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            put(ctx, (const char *)run, (size_t)(p - run));
        unsigned c = *p;
        if (!c)
            break;
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            put(ctx, e, 2);
            p++;
        } else if (c < 0x20) {
            const char *named = c == '\n'   ? "\\n"
                                : c == '\r' ? "\\r"
                                : c == '\t' ? "\\t"
                                : c == '\b' ? "\\b"
                                : c == '\f' ? "\\f"
                                             : NULL;
            if (named)
                put(ctx, named, 2);
            else
                put(ctx, e, (size_t)snprintf(e, sizeof e, "\\u%04x", c));
            p++;
        } else {
            size_t n = ss_utf8_len(p);
            if (n) {
                put(ctx, (const char *)p, n);
                p += n;
            } else {
                put(ctx, "\\ufffd", 6);
                p++;
            }
        }
    }
    put(ctx, "\"", 1);
}

static void put_buf(void *b, const char *s, size_t n)
{
    ss_buf_add(b, s, n);
}

/* The caller holds F's lock (ss_json_fput_str). */
static void put_file(void *f, const char *s, size_t n)
{
    if (n == 1)
        putc_unlocked(*s, (FILE *)f);
    else
        fwrite_unlocked(s, 1, n, f);
}

void ss_buf_json_str(ss_buf *b, const char *s)
{
    json_escape(s, put_buf, b);
}

void ss_json_fput_str(FILE *f, const char *s)
{
    flockfile(f);
    json_escape(s, put_file, f);
    funlockfile(f);
}

/* Appends the decimal digits of V (no sign). */
static void add_digits(ss_buf *b, uint64_t v)
{
    char d[24];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    ss_buf_add(b, d + i, sizeof d - i);
}

/* Integer arithmetic instead of printf: a 10,000-step document has 300,000
 * numbers.  Rounds half away from zero to the microsecond. */
void ss_buf_json_ms(ss_buf *b, int64_t ns)
{
    if (ns == SS_MISSING) {
        ss_buf_puts(b, "null");
        return;
    }
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    uint64_t us = a / 1000 + (a % 1000 >= 500);
    if (ns < 0 && us)
        ss_buf_add(b, "-", 1);
    add_digits(b, us / 1000);
    char frac[4] = {'.', (char)('0' + us / 100 % 10),
                    (char)('0' + us / 10 % 10), (char)('0' + us % 10)};
    ss_buf_add(b, frac, 4);
}

void ss_buf_json_value(ss_buf *b, double v)
{
    if (isnan(v)) {
        ss_buf_puts(b, "\"nan\"");
        return;
    }
    if (isinf(v)) {
        ss_buf_puts(b, v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    char num[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, v);
        if (strtod(num, NULL) == v)
            break;
    }
    ss_buf_puts(b, num);
}

void ss_buf_json_int(ss_buf *b, int64_t v)
{
    if (v == SS_MISSING) {
        ss_buf_puts(b, "null");
        return;
    }
    if (v < 0)
        ss_buf_add(b, "-", 1);
    add_digits(b, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

const char *ss_json_time(char *out, size_t n, int64_t ns)
{
    if (ns == SS_MISSING) {
        snprintf(out, n, "null");
        return out;
    }
    time_t t = (time_t)(ns / 1000000000);
    int ms = (int)(ns % 1000000000 / 1000000);
    if (ns < 0 && ns % 1000000000) {
        t--;
        ms += 1000;
    }
    struct tm tm;
    char day[64];
    gmtime_r(&t, &tm);
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "\"%s.%03dZ\"", day, ms);
    return out;
}

void ss_buf_json_time(ss_buf *b, int64_t ns)
{
    char text[SS_JSON_TIME_LEN];
    ss_buf_puts(b, ss_json_time(text, sizeof text, ns));
}

/* ---- the connection ---- */


void ss_buf_json_gpu_evidence(ss_buf *b, const ss_gpu_evidence *g)
{
    if (!g->present) {
        ss_buf_puts(b, "null");
        return;
    }
    const struct {
        const char *key;
        int64_t v;
        int ns;
    } fields[] = {
        {"covered_ms", g->covered_ns, 1},
        {"slowed_ms", g->slowed_ns, 1},
        {"power_cap_ms", g->power_cap_ns, 1},
        {"thermal_ms", g->thermal_ns, 1},
        {"hw_slowdown_ms", g->hw_slowdown_ns, 1},
        {"sm_clock_mhz", g->sm_clock_mhz, 0},
        {"temperature_c", g->temperature_c, 0},
        {"ecc_new", g->ecc_new, 0},
        {"xid_new", g->xid_new, 0},
        {"last_xid", g->last_xid, 0},
    };
    ss_buf_printf(b, "{\"gpu\": %d", (int)g->index);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        ss_buf_printf(b, ", \"%s\": ", fields[i].key);
        if (fields[i].ns)
            ss_buf_json_ms(b, fields[i].v);
        else
            ss_buf_json_int(b, fields[i].v);
    }
    ss_buf_puts(b, "}");
}

void ss_buf_json_host_step(ss_buf *b, const ss_host_step *h)
{
    static const struct {
        const char *key;
        size_t offset;
        int ns; /* a duration, written in ms */
    } fields[] = {
        {"cpu_ms", offsetof(ss_host_step, cpu_ns), 1},
        {"runq_ms", offsetof(ss_host_step, runq_ns), 1},
        {"stopped_ms", offsetof(ss_host_step, stopped_ns), 1},
        {"throttled_ms", offsetof(ss_host_step, throttled_ns), 1},
        {"nr_throttled", offsetof(ss_host_step, nr_throttled), 0},
        {"vol_switches", offsetof(ss_host_step, vol_switches), 0},
        {"invol_switches", offsetof(ss_host_step, invol_switches), 0},
        {"major_faults", offsetof(ss_host_step, major_faults), 0},
        {"psi_cpu_ms", offsetof(ss_host_step, psi_cpu_ns), 1},
        {"psi_memory_ms", offsetof(ss_host_step, psi_memory_ns), 1},
        {"psi_io_ms", offsetof(ss_host_step, psi_io_ns), 1},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        int64_t v;
        memcpy(&v, (const char *)h + fields[i].offset, sizeof v);
        ss_buf_printf(b, "%s\"%s\": ", i ? ", " : "{", fields[i].key);
        if (fields[i].ns)
            ss_buf_json_ms(b, v);
        else
            ss_buf_json_int(b, v);
    }
    ss_buf_puts(b, "}");
}
