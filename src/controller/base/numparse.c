/*
 * numparse.c - strict decimal integers (numparse.h).
 *
 * Digits are accumulated as a negative number, whose range is one larger
 * than the positive one, so INT64_MIN parses without overflow and every
 * overflow is detected before it happens.
 */
#include "numparse.h"

int ss_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s)
        return -1;
    int negative = *s == '-';
    const char *p = s + negative;
    if (*p < '0' || *p > '9')
        return -1; /* empty, a lone '-', or not a digit first */
    int64_t v = 0; /* minus the value read so far */
    for (; *p >= '0' && *p <= '9'; p++) {
        int digit = *p - '0';
        if (v < (INT64_MIN + digit) / 10)
            return -1; /* beyond int64_t */
        v = v * 10 - digit;
    }
    if (*p)
        return -1; /* trailing characters */
    if (!negative) {
        if (v == INT64_MIN)
            return -1;
        v = -v;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}
