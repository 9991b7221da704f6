/*
 * stack_json.c - the stacks' JSON, checked and read in place
 * (stack_json.h).
 *
 * ss_sj_value is a recursive descent over the bytes, its depth bounded,
 * that looks at a string's bytes eight at a time.  The walks go over
 * values it accepted, so they only step: over a string to its closing
 * quote (eight bytes at a time), over a value the caller does not enter
 * to its end, out of one it entered to its closing bracket; on other
 * bytes they still never read past END.
 */
#include "stack_json.h"

#include <stdlib.h>
#include <string.h>

static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Does any of the 8 bytes of X need a look: a quote, a backslash, a
 * control character? */
static int special8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull, high = ones << 7;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) |
            ((x - ones * 0x20) & ~x)) & high ? 1 : 0;
}

/* P at the opening quote: past the closing one, or NULL. */
static const char *str_end(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        uint64_t x;
        while (end - p >= 8 && (memcpy(&x, p, 8), !special8(x)))
            p += 8;
        if (p >= end)
            break;
        unsigned char c = (unsigned char)*p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c != '\\')
            continue;
        if (++p >= end)
            return NULL;
        switch (*p) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n':
        case 'r': case 't':
            break;
        case 'u':
            if (end - p < 5 || hex(p[1]) < 0 || hex(p[2]) < 0 ||
                hex(p[3]) < 0 || hex(p[4]) < 0)
                return NULL;
            p += 4;
            break;
        default:
            return NULL;
        }
    }
    return NULL;
}

static const char *digits(const char *p, const char *end)
{
    const char *s = p;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p > s ? p : NULL;
}

static const char *num_end(const char *p, const char *end)
{
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if (!(p = digits(p, end)))
        return NULL;
    if (p < end && *p == '.' && !(p = digits(p + 1, end)))
        return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (!(p = digits(p, end)))
            return NULL;
    }
    return p;
}

static const char *lit_end(const char *p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

static const char *value(const char *p, const char *end, int depth);

/* P at '{' or '[': past the matching close, or NULL. */
static const char *container(const char *p, const char *end, int depth)
{
    int obj = *p == '{';
    char close = obj ? '}' : ']';
    if (depth >= SS_SJ_MAX_DEPTH)
        return NULL;
    p = ws(p + 1, end);
    if (p < end && *p == close)
        return p + 1;
    for (;;) {
        if (obj) {
            if (p >= end || *p != '"' || !(p = str_end(p, end)))
                return NULL;
            p = ws(p, end);
            if (p >= end || *p != ':')
                return NULL;
            p++;
        }
        if (!(p = value(p, end, depth + 1)))
            return NULL;
        p = ws(p, end);
        if (p >= end)
            return NULL;
        if (*p == close)
            return p + 1;
        if (*p != ',')
            return NULL;
        p = ws(p + 1, end);
    }
}

static const char *value(const char *p, const char *end, int depth)
{
    p = ws(p, end);
    if (p >= end)
        return NULL;
    switch (*p) {
    case '{': case '[': return container(p, end, depth);
    case '"': return str_end(p, end);
    case 't': return lit_end(p, end, "true");
    case 'f': return lit_end(p, end, "false");
    case 'n': return lit_end(p, end, "null");
    default: return num_end(p, end);
    }
}

const char *ss_sj_value(const char *p, const char *end)
{
    return p && end && p <= end ? value(p, end, 0) : NULL;
}

/* ---- walking what was checked ---- */

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* P at a string's opening quote: past its closing one (END if none). */
static const char *skip_str(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        uint64_t x;
        while (end - p >= 8 && (memcpy(&x, p, 8), !special8(x)))
            p += 8;
        if (p >= end)
            break;
        if (*p == '"')
            return p + 1;
        if (*p == '\\')
            p++;
    }
    return end;
}

/* Past the value at P (white space skipped), assumed valid. */
static const char *skip(const char *p, const char *end)
{
    p = ws(p, end);
    if (p >= end)
        return end;
    if (*p == '"')
        return skip_str(p, end);
    if (*p != '{' && *p != '[') {
        while (p < end && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p))
            p++;
        return p;
    }
    int depth = 0;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            p = skip_str(p, end);
            continue;
        }
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return p + 1;
        p++;
    }
    return end;
}

int ss_sj_object(ss_sj_span v, ss_sj_iter *it)
{
    const char *p = ws(v.p, v.end);
    if (p >= v.end || *p != '{')
        return -1;
    *it = (ss_sj_iter){p + 1, v.end, 1};
    return 0;
}

/* Past the separator before the next item: 1, or 0 at the close. */
static int next_item(ss_sj_iter *it)
{
    const char *p = ws(it->p, it->end);
    if (p < it->end && !it->first && *p == ',')
        p = ws(p + 1, it->end);
    it->first = 0;
    it->p = p;
    return p < it->end && *p != '}' && *p != ']';
}

static int take_value(ss_sj_iter *it, ss_sj_span *v)
{
    const char *p = ws(it->p, it->end);
    const char *e = skip(p, it->end);
    if (e == p) {
        it->p = it->end;
        return 0;
    }
    *v = (ss_sj_span){p, e};
    it->p = e;
    return 1;
}

int ss_sj_key(ss_sj_iter *it, ss_sj_span *key)
{
    if (!next_item(it) || *it->p != '"')
        return 0;
    const char *k = skip_str(it->p, it->end);
    *key = (ss_sj_span){it->p, k};
    const char *p = ws(k, it->end);
    if (p >= it->end || *p != ':') {
        it->p = it->end;
        return 0;
    }
    it->p = p + 1;
    return 1;
}

int ss_sj_next(ss_sj_iter *it)
{
    return next_item(it);
}

int ss_sj_take(ss_sj_iter *it, ss_sj_span *value)
{
    return take_value(it, value);
}

int ss_sj_enter(ss_sj_iter *it, ss_sj_iter *inner, char open)
{
    const char *p = ws(it->p, it->end);
    if (p < it->end && *p == open) {
        *inner = (ss_sj_iter){p + 1, it->end, 1};
        return 0;
    }
    ss_sj_span v;
    take_value(it, &v);
    return -1;
}

void ss_sj_leave(ss_sj_iter *it, const ss_sj_iter *inner)
{
    /* past the bracket that closes what INNER walks */
    const char *p = inner->p;
    int depth = 1;
    while (p < it->end) {
        char c = *p;
        if (c == '"') {
            p = skip_str(p, it->end);
            continue;
        }
        p++;
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            break;
    }
    it->p = p;
}

int ss_sj_key_is(ss_sj_span key, const char *name)
{
    size_t n = strlen(name);
    return (size_t)(key.end - key.p) == n + 2 &&
           memcmp(key.p + 1, name, n) == 0;
}

int ss_sj_is_str(ss_sj_span v) { return v.p < v.end && *v.p == '"'; }

int ss_sj_is_num(ss_sj_span v)
{
    return v.p < v.end && (*v.p == '-' || (*v.p >= '0' && *v.p <= '9'));
}

static char *put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xc0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | cp >> 12);
        *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | cp >> 18);
        *o++ = (char)(0x80 | (cp >> 12 & 0x3f));
        *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

static unsigned u4(const char *p)
{
    return (unsigned)(hex(p[0]) << 12 | hex(p[1]) << 8 | hex(p[2]) << 4 |
                      hex(p[3]));
}

size_t ss_sj_str(ss_sj_span v, char *out)
{
    char *o = out;
    const char *p = v.p + 1, *end = v.end - 1; /* inside the quotes */
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t plain = (size_t)((bs ? bs : end) - p);
        memcpy(o, p, plain);
        o += plain;
        p += plain;
        if (!bs)
            break;
        char c = p[1];
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp = u4(p);
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\' &&
                p[1] == 'u' && u4(p + 2) >= 0xdc00 && u4(p + 2) < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (u4(p + 2) - 0xdc00);
                p += 6;
            } else if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            o = put_utf8(o, cp);
            break;
        }
        default: *o++ = c; break; /* " \ / */
        }
    }
    *o = 0;
    size_t n = strlen(out); /* a decoded NUL ends it */
    return n;
}

double ss_sj_num(ss_sj_span v, double def)
{
    if (!ss_sj_is_num(v))
        return def;
    char buf[64];
    size_t n = (size_t)(v.end - v.p);
    if (n >= sizeof buf)
        return def;
    memcpy(buf, v.p, n);
    buf[n] = 0;
    return strtod(buf, NULL);
}

int ss_sj_is_rank_object(const char *text, size_t len, uint32_t rank)
{
    const char *end = text + len;
    const char *e = ss_sj_value(text, end);
    if (!e || ws(e, end) != end)
        return 0;
    ss_sj_iter it;
    ss_sj_span k, v;
    if (ss_sj_object((ss_sj_span){text, e}, &it) != 0)
        return 0;
    while (ss_sj_key(&it, &k) && ss_sj_take(&it, &v))
        if (ss_sj_key_is(k, "rank"))
            return ss_sj_is_num(v) && ss_sj_num(v, -1) == (double)rank;
    return 0;
}
