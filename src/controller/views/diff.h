/*
 * diff.h - the work of `stepscope diff` (its command line:
 * src/cli/cmd_diff.c): do two runs compute the same bits?
 * (docs/consistency.md)
 *
 * Compares the latest attempt of each run step by step and rank by rank:
 * the loss (numerics.loss, else a metric named loss), the numerics.*
 * scalars and the parameter checksums (checksum.hi/lo, stepscope run
 * --checksum-every).  Exit status 0: identical over their common steps;
 * 1: diverged, with the first step, its rank(s), what differed first (the
 * loss comes before the update within a step), the first parameter that
 * differs and how far the losses differ after it; 2: cannot compare (a
 * different world size, no common step, no checksums), or a store that
 * cannot be read.
 */
#ifndef STEPSCOPE_DIFF_H
#define STEPSCOPE_DIFF_H

#include <stdio.h>

/* `stepscope diff`'s options. */
typedef struct {
    const char *db;           /* RUN_A's store; NULL: the default */
    const char *db_b;         /* RUN_B's store; NULL: db */
    const char *run_a, *run_b; /* both given */
    int json;
} ss_diff_opts;

/* Compares the runs of O: the result to OUT, errors ("stepscope diff: ")
 * to ERR; returns the exit status above. */
int ss_diff_cmd(const ss_diff_opts *o, FILE *out, FILE *err);

#endif
