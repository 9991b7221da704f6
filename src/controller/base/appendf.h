/*
 * appendf.h - formatted text into a caller's fixed buffer: snprintf at a
 * running length, for texts built piece by piece whose callers want
 * snprintf's contract (the buffer is always terminated, and the length
 * counts what the whole text needs, so a caller can tell it was cut); and
 * the one-line reason of a failed call, into an optional ERR buffer.
 */
#ifndef STEPSCOPE_APPENDF_H
#define STEPSCOPE_APPENDF_H

#include <stddef.h>

/* Formats into BUF (BUFLEN bytes) at *LEN and adds the formatted length to
 * *LEN, also past BUFLEN (then nothing more is written; BUF stays
 * terminated). */
void ss_appendf(char *buf, size_t buflen, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Formats a one-line reason into ERR (ERRLEN bytes); ERR NULL or ERRLEN
 * 0: nothing is written. */
void ss_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
