/*
 * progress.h - one updating progress line for long operations on a
 * terminal.
 *
 * Commands that read large runs (`stepscope report`, `stepscope trace`)
 * say what they are doing on stderr while they work: a single line such as
 * "stepscope trace: reading steps 12000/100000", rewritten in place with a
 * carriage return and erased when the work ends, so the terminal is left
 * as it was.  When the stream is not a terminal (a pipe, a file, a test
 * harness) or TERM is "dumb", nothing is ever written.  A line appears only
 * once the operation has taken SS_PROGRESS_DELAY_MS, and is redrawn at most
 * every SS_PROGRESS_EVERY_MS, so quick commands print nothing and slow ones
 * cost a few writes per second.
 *
 * Usage:
 *   ss_progress p;
 *   ss_progress_begin(&p, stderr, "stepscope trace: reading steps", n);
 *   for (i = 0; i < n; i++) { ...; ss_progress_update(&p, i + 1); }
 *   ss_progress_end(&p);
 */
#ifndef STEPSCOPE_PROGRESS_H
#define STEPSCOPE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#define SS_PROGRESS_DELAY_MS 300
#define SS_PROGRESS_EVERY_MS 100

/* The state of one line.  Fields are for this module; tests may set
 * delay_ns to 0 after ss_progress_begin to draw at once. */
typedef struct {
    FILE *out;         /* NULL when quiet */
    char what[128];    /* "stepscope trace: reading steps" */
    uint64_t done, total;
    int64_t start_ns;  /* CLOCK_MONOTONIC at begin */
    int64_t delay_ns;  /* nothing is drawn before start_ns + delay_ns */
    int64_t drawn_ns;  /* when the line was last drawn; 0 never */
} ss_progress;

/* Starts a progress line on OUT (usually stderr) for an operation of
 * TOTAL units (0 when unknown: the count is shown alone).  Quiet unless
 * OUT is a terminal.  Never fails; writes nothing yet. */
void ss_progress_begin(ss_progress *p, FILE *out, const char *what,
                       uint64_t total);

/* DONE units of the total are done.  Redraws when due. */
void ss_progress_update(ss_progress *p, uint64_t done);

/* Moves on to another stage of the same operation: new label WHAT and
 * totals, drawn when due (the start time is kept). */
void ss_progress_stage(ss_progress *p, const char *what, uint64_t done,
                       uint64_t total);

/* Redraws when due without changing the count: for a caller waiting in
 * one long call that reports back periodically (e.g. a SQLite progress
 * handler during a large sort), so the line appears and stays current. */
void ss_progress_tick(ss_progress *p);

/* Erases the line if one was drawn.  P may be begun again afterwards. */
void ss_progress_end(ss_progress *p);

#endif
