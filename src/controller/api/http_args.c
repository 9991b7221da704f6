/*
 * http_args.c - a request's query arguments (http_state.h): the
 * percent-decoding libmicrohttpd is given for the path and the arguments,
 * and reading an integer or a text argument with a 400 answer when it is
 * malformed.
 *
 * "%00" is never decoded: a NUL would cut the text short, so that
 * "limit=10%00" would read as 10 and "/api/runs/1%00" as run 1.
 */
#include "http_state.h"

#include <inttypes.h>
#include <string.h>

#include "numparse.h"

static int hex_digit(char ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Percent-decodes S in place, as libmicrohttpd does for the path and the
 * query arguments, except that "%00" stays as it is: a NUL would cut the
 * text short, so that "limit=10%00" read as 10 and "/api/runs/1%00" as
 * run 1.  Returns the new length. */
size_t ss__http_unescape_keeping_nul(void *cls, struct MHD_Connection *c,
                            char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r;) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_digit(r[1])) >= 0 &&
            (lo = hex_digit(r[2])) >= 0 && (hi | lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Reads argument NAME as an integer in [MIN, MAX] into *OUT (left as is
 * when absent).  Returns 0, or -1 after answering 400. */
int ss__http_arg_i64(struct MHD_Connection *c, const char *name, int64_t min,
                     int64_t max, int64_t *out, enum MHD_Result *ret)
{
    const char *s = NULL;
    if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &s, NULL) != MHD_YES)
        return 0; /* absent */
    if (!s)
        s = ""; /* "?limit" without a value */
    if (ss_parse_i64(s, min, max, out) != 0) {
        *ret = ss__http_reply_error(
            c, MHD_HTTP_BAD_REQUEST,
            "query argument %s=%s is not an integer from %" PRId64
            " to %" PRId64,
            name, s, min, max);
        return -1;
    }
    return 0;
}

/* Reads text argument NAME into *OUT (left as is when absent).  Returns 0,
 * or -1 after answering 400 when it is empty or longer than a run name
 * may sensibly be. */
int ss__http_arg_text(struct MHD_Connection *c, const char *name,
                      const char **out, enum MHD_Result *ret)
{
    const char *s = NULL;
    if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &s, NULL) != MHD_YES)
        return 0; /* absent */
    if (!s || !*s || strlen(s) > 1024 || strstr(s, "%00")) {
        *ret = ss__http_reply_error(
            c, MHD_HTTP_BAD_REQUEST,
            "query argument %s is empty, too long or holds %%00", name);
        return -1;
    }
    *out = s;
    return 0;
}
