/*
 * goodput_view.h - the work of the `stepscope goodput` command (its
 * command line: src/cli/cmd_goodput.c), and the GOODPUT and RELIABILITY
 * renderings that `report` (text and JSON) shares with it.
 *
 * RUN: one run's goodput, a table per attempt (the latest run by
 * default); --name NAME: every run of that name, one line each, then the
 * reliability figures over them (MTBF, MTTR, the checkpoint interval).
 * The numbers are goodput.h's; docs/fault-tolerance.md defines them and
 * docs/report-json.md documents the JSON.
 */
#ifndef STEPSCOPE_GOODPUT_VIEW_H
#define STEPSCOPE_GOODPUT_VIEW_H

#include <stdio.h>

#include "goodput.h"
#include "goodput_out.h"
#include "json.h"

/* The GOODPUT section: the run's split and one line per attempt. */
void ss_goodput_text(ss_buf *b, const ss_goodput *g);

/* The RELIABILITY section over the runs of NAME in REL (finished). */
void ss_reliability_text(ss_buf *b, const ss_reliability *rel,
                         const char *name);

/* The reliability of the runs named NAME (at most the latest
 * SS_RELIABILITY_MAX_RUNS of them) into *REL (finished).  Returns 0 or
 * the reader's error. */
#define SS_RELIABILITY_MAX_RUNS 200
int ss_reliability_load(ss_reader *r, const char *name, ss_wall_ns now,
                        ss_reliability *rel);

/* `stepscope goodput`'s options. */
typedef struct {
    const char *db;   /* NULL: the default store */
    const char *run;  /* NULL: the latest run (unless name) */
    const char *name; /* every run of this name; never with run */
    int json;
} ss_goodput_opts;

/* `stepscope goodput`: output to OUT, errors "stepscope goodput: ..." to
 * ERR.  Returns 0, or 1 when it cannot be made (no store, no such run or
 * name). */
int ss_goodput_cmd(const ss_goodput_opts *o, FILE *out, FILE *err);

#endif
