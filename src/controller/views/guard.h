/*
 * guard.h - `stepscope guard`: did this run regress against the comparable
 * runs before it, in what, by how much, and since which run (docs/guard.md).
 *
 *   stepscope guard [--db PATH] [--name NAME] [RUN] [--baseline RUNS |
 *                   --last N] [--metric M ...] [--json] [--junit FILE]
 *                   [--markdown FILE] [--set NAME=VALUE ...]
 *
 * Exit status, made for CI: 0 no regression, 1 a regression, 2 cannot
 * judge (too few comparable runs, no steps, bad arguments, no store).
 *
 * The parts: base/guard_stats.c (the statistics), api/guard_load.c (a
 * run's metric samples from the store, through store/reader.h),
 * api/guard_judge.c (the choice of baseline, the comparison, the history;
 * also behind the API's history document), guard.c (options),
 * guard_out.c (terminal table, Markdown, JUnit XML, JSON).
 * api/guard_model.h is what they share.
 */
#ifndef STEPSCOPE_GUARD_H
#define STEPSCOPE_GUARD_H

#include <stdio.h>

#include "guard_model.h" /* SS_GUARD_OK 0, _REGRESSION 1, _CANNOT_JUDGE 2 */

/* `stepscope guard`; ARGV[0] is the subcommand's name.  Writes the verdict
 * to OUT and messages to ERR; returns the exit status above. */
int ss_guard_run(int argc, char **argv, FILE *out, FILE *err);

/* The entry point main.c calls: ss_guard_run on stdout and stderr. */
int ss_guard_main(int argc, char **argv);

#endif
