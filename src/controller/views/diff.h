/*
 * diff.h - the `stepscope diff` command: do two runs compute the same
 * bits?  (docs/consistency.md)
 *
 *   stepscope diff [--db PATH] [--db-b PATH] [--json] RUN_A RUN_B
 *
 * Compares the latest attempt of each run step by step and rank by rank:
 * the loss (numerics.loss, else a metric named loss), the numerics.*
 * scalars and the parameter checksums (checksum.hi/lo, stepscope run
 * --checksum-every).  Exit status 0: identical over their common steps;
 * 1: diverged, with the first step, its rank(s), what differed first (the
 * loss comes before the update within a step), the first parameter that
 * differs and how far the losses differ after it; 2: cannot compare (a
 * different world size, no common step, no checksums), or a usage error
 * or a store that cannot be read.
 */
#ifndef STEPSCOPE_DIFF_H
#define STEPSCOPE_DIFF_H

#include <stdio.h>

/* `stepscope diff`: the result to OUT, errors to ERR; returns the exit
 * status above. */
int ss_diff_cmd(int argc, char **argv, FILE *out, FILE *err);
int ss_diff_main(int argc, char **argv);

#endif
