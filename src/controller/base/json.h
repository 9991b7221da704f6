/*
 * json.h - a growable text buffer and the JSON value writers.
 *
 * Conventions (those of docs/report-json.md and docs/api.md): durations in
 * fields ending _ms are milliseconds with 3 decimals, sizes in _bytes are
 * bytes, times are ISO 8601 UTC strings; a value that was not measured is
 * null, never 0 (SS_MISSING, model.h).  Strings are escaped per RFC 8259,
 * invalid UTF-8 becomes U+FFFD.
 */
#ifndef STEPSCOPE_JSON_H
#define STEPSCOPE_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* ---- a growable text buffer ---- */

/* Zero-initialise ({0}) before use; free with ss_buf_free.  After an
 * allocation failure every append is ignored and OOM stays set; DATA is
 * always NUL-terminated when not NULL. */
typedef struct ss_buf {
    char *data;
    size_t len, cap;
    int oom;
} ss_buf;

void ss_buf_free(ss_buf *b);
void ss_buf_reset(ss_buf *b); /* len = 0, keeps the memory, clears OOM */
void ss_buf_add(ss_buf *b, const char *s, size_t n);
void ss_buf_puts(ss_buf *b, const char *s);
void ss_buf_printf(ss_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The length of the valid UTF-8 sequence that begins at P, whose first
 * byte is not ASCII: 2 to 4, or 0 when it is not valid UTF-8 (overlong
 * forms and surrogates included).  Reads no byte after the first that is
 * not a continuation byte, so a NUL-terminated P is never overrun. */
size_t ss_utf8_len(const unsigned char *p);
/* S as a JSON string literal (null for NULL), RFC 8259 escaping, invalid
 * UTF-8 replaced by U+FFFD. */
void ss_buf_json_str(ss_buf *b, const char *s);
/* Nanoseconds as milliseconds with 3 decimals; null for SS_MISSING. */
void ss_buf_json_ms(ss_buf *b, int64_t ns);
/* An integer; null for SS_MISSING. */
void ss_buf_json_int(ss_buf *b, int64_t v);
/* A value of a vector (ss_values): a finite number as the shortest
 * decimal that reads back as the same double; NaN as the string "nan",
 * infinities as "inf" and "-inf" (JSON has no such numbers). */
void ss_buf_json_value(ss_buf *b, double v);
/* Wall-clock nanoseconds as "2024-05-01T12:00:03.123Z"; null for
 * SS_MISSING. */
void ss_buf_json_time(ss_buf *b, int64_t wall_ns);

/* The same two for documents written straight to a FILE (report, trace):
 * ss_json_fput_str writes what ss_buf_json_str appends; ss_json_time puts
 * what ss_buf_json_time appends into OUT (N bytes; SS_JSON_TIME_LEN is
 * always enough) and returns OUT. */
void ss_json_fput_str(FILE *f, const char *s);
#define SS_JSON_TIME_LEN 96
const char *ss_json_time(char *out, size_t n, int64_t wall_ns);

/* The host evidence H as a JSON object: durations in ms (cpu_ms, runq_ms,
 * stopped_ms, throttled_ms, psi_cpu_ms, psi_memory_ms, psi_io_ms), counts
 * as integers (nr_throttled, vol_switches, invol_switches, major_faults);
 * null where SS_MISSING.  docs/report-json.md lists the fields. */
void ss_buf_json_host_step(ss_buf *b, const ss_host_step *h);

/* The GPU evidence G as a JSON object, or null when G->present is 0:
 * {"gpu": index, "covered_ms", "slowed_ms", "power_cap_ms", "thermal_ms",
 * "hw_slowdown_ms", "sm_clock_mhz", "temperature_c", "ecc_new", "xid_new",
 * "last_xid"}, null where SS_MISSING (docs/report-json.md). */
void ss_buf_json_gpu_evidence(ss_buf *b, const ss_gpu_evidence *g);

#endif
