/*
 * guard.h - the work of `stepscope guard` (its command line:
 * src/cli/cmd_guard.c): did this run regress against the comparable runs
 * before it, in what, by how much, and since which run (docs/guard.md).
 *
 * Exit status, made for CI: 0 no regression, 1 a regression, 2 cannot
 * judge (too few comparable runs, no steps, bad arguments, no store).
 *
 * The parts: base/guard_stats.c (the statistics), api/guard_load.c (a
 * run's metric samples from the store, through store/reader.h),
 * api/guard_judge.c (the choice of baseline, the comparison, the history;
 * also behind the API's history document), guard.c (the command),
 * guard_out.c (terminal table, Markdown, JUnit XML, JSON).
 * api/guard_model.h is what they share.
 */
#ifndef STEPSCOPE_GUARD_H
#define STEPSCOPE_GUARD_H

#include <stdio.h>

#include "guard_model.h" /* SS_GUARD_OK 0, _REGRESSION 1, _CANNOT_JUDGE 2 */

/* `stepscope guard`'s options, checked by its front-end. */
typedef struct {
    const char *db;       /* NULL: the default store */
    const char *run;      /* the run judged; NULL: the latest (of name) */
    const char *name;     /* judge the latest run of NAME; never with run */
    const char *baseline; /* "3,5,7-9"; NULL: the comparable runs */
    const char *junit, *markdown; /* report files ("-": stdout); or NULL */
    int json;
    char **metrics; /* --metric M ...: only these (names or prefixes) */
    size_t n_metrics;
    const guard_settings *settings; /* defaults with --last and --set */
} ss_guard_opts;

/* Judges the run O names.  Writes the verdict to OUT and messages
 * ("stepscope guard: ") to ERR; returns the exit status above. */
int ss_guard_cmd(const ss_guard_opts *o, FILE *out, FILE *err);

#endif
