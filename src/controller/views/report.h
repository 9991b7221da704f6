/*
 * report.h - the work of the `stepscope report` and `stepscope runs`
 * commands (their command lines: src/cli/cmd_report.c, cmd_runs.c).
 *
 * Both read the store through its read API (reader.h): they never create,
 * migrate or write it.  `report` explains one run attempt, findings first,
 * as text for people or as the JSON object documented in
 * docs/report-json.md, or as one self-contained HTML page (--html:
 * html_report.h); `runs` lists the runs in the store.
 *
 * RUN is a numeric run id, a run name (the latest run of that name) or a
 * prefix of a run's uuid; the latest run by default.  A NULL db is
 * ss_store_default_path().
 */
#ifndef STEPSCOPE_REPORT_H
#define STEPSCOPE_REPORT_H

#include <stdint.h>
#include <stdio.h>

/* `stepscope report`'s options, checked by its front-end. */
typedef struct {
    const char *db;     /* NULL: the default store */
    const char *run;    /* NULL: the latest run */
    int json;           /* --json */
    int64_t attempt;    /* --attempt N; -1: the latest */
    int html;           /* --html (html_report.c); never with json */
    const char *output; /* -o FILE with --html; NULL: the default name */
    int64_t rank;       /* --rank R: that rank's view; -1: the whole run */
} ss_report_opts;

/*
 * Makes the report O asks for.  Writes it to OUT and errors, one line each
 * starting "stepscope report: ", to ERR.  Returns the process exit status:
 * 0 on success, 1 when the report cannot be made (no store, not a store,
 * no such run, an empty store).  OUT and ERR stay open.
 */
int ss_report_cmd(const ss_report_opts *o, FILE *out, FILE *err);

/* `stepscope runs`'s options. */
typedef struct {
    const char *db; /* NULL: the default store */
    int json;
} ss_runs_opts;

/* Lists the runs: the same conventions as ss_report_cmd ("stepscope runs:
 * "); an empty store is not an error (it says so and returns 0). */
int ss_runs_cmd(const ss_runs_opts *o, FILE *out, FILE *err);

#endif
