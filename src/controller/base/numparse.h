/*
 * numparse.h - strict parsing of decimal integers from text people and
 * programs type: command-line flags and HTTP query arguments.
 *
 * The C library's strtol family accepts more than a number: leading white
 * space, a '+', trailing garbage (when the end pointer is not checked) and,
 * through errno rules that are easy to forget, out-of-range values clamped
 * to LONG_MAX.  "limit= 10", "limit=+10" or "--window 4x" then mean
 * something.  Here a number is exactly an optional '-' and one or more ASCII
 * digits, nothing before, nothing after, within the range the caller gives.
 */
#ifndef STEPSCOPE_NUMPARSE_H
#define STEPSCOPE_NUMPARSE_H

#include <stdint.h>

/*
 * Parses S as a decimal integer in [MIN, MAX] into *OUT.  S must match
 * -?[0-9]+ exactly (leading zeros are allowed; no white space, no '+', no
 * other character before or after).  Returns 0, or -1 (with *OUT left as
 * it was) when S is NULL, empty, not of that form, or out of [MIN, MAX]
 * (overflow of int64_t included).
 */
int ss_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

#endif
