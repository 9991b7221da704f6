/*
 * run_diff.h - do two runs compute the same bits?  The comparison behind
 * `stepscope diff` (views/diff.c), `stepscope guard --set determinism=1`
 * (guard_judge.c) and GET /api/diff (query.c); docs/consistency.md.
 *
 * Two runs' latest attempts are compared step by step and rank by rank
 * over their common steps: the loss (numerics.loss, else a metric named
 * loss), the numerics.* scalars and the parameter checksums
 * (checksum.hi/lo).  The first step with a difference is the divergence;
 * within a step a rank's loss or numerics differing is named before a
 * checksum differing (the forward pass precedes the update).
 */
#ifndef STEPSCOPE_RUN_DIFF_H
#define STEPSCOPE_RUN_DIFF_H

#include <stdint.h>

#include "json.h"
#include "reader.h"

#define SS_DIFF_MAX_CELLS (16u << 20) /* (step, rank) cells per run */
#define SS_DIFF_MAX_NAMED 16          /* ranks listed at the divergence */

/* The verdict, also `stepscope diff`'s exit status. */
#define SS_DIFF_IDENTICAL 0
#define SS_DIFF_DIVERGED 1
#define SS_DIFF_INCOMPARABLE 2

/* One run of the comparison: R (the caller's reader) and SPEC (a run id,
 * name or uuid prefix, as ss_reader_select_run reads it) in; the rest is
 * filled by ss_run_diff.  FIRST..LAST: the run's own finalized steps. */
typedef struct {
    ss_reader *r;
    const char *spec;
    int64_t run, attempt, world, first, last;
} ss_diff_side;

typedef struct {
    int status;            /* SS_DIFF_* */
    char why[256];         /* INCOMPARABLE: why not */
    int64_t first, last;   /* the common steps compared (-1: none) */
    int truncated;         /* SS_DIFF_MAX_CELLS cut the range */
    int64_t common;        /* common steps both hold */
    int64_t checksum_steps;/* ... of which with checksums on both sides */
    int64_t step;          /* DIVERGED: the first divergent step */
    int32_t ranks[SS_DIFF_MAX_NAMED];
    uint32_t n_ranks, n_ranks_total;
    const char *what;      /* "loss", "numerics", "checksum" */
    double loss_a, loss_b; /* the first named rank's losses at STEP */
    char param[192];       /* the first differing parameter, "" unknown */
    uint32_t params_differ, params_total;
    double max_loss_diff;  /* the mean losses' largest gap from STEP on */
    int64_t max_loss_step;
    double last_loss_diff; /* ... at the last common step with losses */
    int64_t last_step;
    /* With SS_DIFF_SERIES: the mean loss over ranks of each run at steps
     * first..last (NaN where a run has none), last - first + 1 each. */
    double *loss_series_a, *loss_series_b;
} ss_diff_result;

#define SS_DIFF_SERIES 1u

/*
 * Compares runs A and B (A->spec, B->spec read through A->r, B->r) into
 * RES.  Returns 0 with RES->status set (INCOMPARABLE with RES->why for
 * different world sizes, no finalized or common steps, no checksums);
 * SS_READ_NOT_FOUND when a run does not exist, SS_READ_ERROR when a store
 * cannot be read or memory runs out, with a one-line reason in ERR.  That
 * the range was cut is said in RES->truncated.  Free RES with
 * ss_diff_result_free in every case.
 */
int ss_run_diff(ss_diff_side *a, ss_diff_side *b, unsigned flags,
                ss_diff_result *res, char *err, size_t errlen);
void ss_diff_result_free(ss_diff_result *res);

/* The comparison as the JSON document of docs/report-json.md (`diff
 * --json`); with the series when RES has them ("series": {"steps":
 * [first, last], "stride": K, "loss_a": [...], "loss_b": [...]}: every
 * K-th step from first, at most SS_DIFF_SERIES_POINTS of them, null for
 * a step without a loss). */
#define SS_DIFF_SERIES_POINTS 5000
void ss_run_diff_json(ss_buf *b, const ss_diff_side *a,
                      const ss_diff_side *c, const ss_diff_result *res);

#endif
