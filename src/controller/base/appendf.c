/*
 * appendf.c - formatted text into fixed buffers (appendf.h).
 */
#include "appendf.h"

#include <stdarg.h>
#include <stdio.h>

void ss_appendf(char *buf, size_t buflen, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < buflen ? buf + *len : NULL,
                      *len < buflen ? buflen - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

void ss_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
