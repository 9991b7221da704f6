/*
 * goodput_view.h - the `stepscope goodput` command, and the GOODPUT and
 * RELIABILITY renderings that `report` (text and JSON) shares with it.
 *
 *   stepscope goodput [--db PATH] [--json] [RUN | --name NAME]
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

/* `stepscope goodput`: output to OUT, errors "stepscope goodput: ..." to
 * ERR.  Returns 0, 1 when it cannot be made (no store, no such run or
 * name), 2 for a usage error. */
int ss_goodput_cmd(int argc, char **argv, FILE *out, FILE *err);
int ss_goodput_main(int argc, char **argv);

#endif
