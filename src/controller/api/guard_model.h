/*
 * guard_model.h - what the parts of `stepscope guard` hand each other: a
 * run's metric samples, the settings, the verdict per metric, and the
 * judgement that both the command (views/guard.c) and the HTTP API's
 * history document (query.c) are made from.  Internal to stepscope.
 */
#ifndef STEPSCOPE_GUARD_MODEL_H
#define STEPSCOPE_GUARD_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "guard_stats.h"
#include "reader.h"
#include "run_diff.h"

/* The verdict of a whole judgement, also guard's exit status. */
#define SS_GUARD_OK 0
#define SS_GUARD_REGRESSION 1
#define SS_GUARD_CANNOT_JUDGE 2

/* Which way is worse. */
typedef enum {
    GUARD_HIGHER_IS_WORSE, /* times, memory */
    GUARD_LOWER_IS_WORSE,  /* throughput, user rates */
    GUARD_EITHER_IS_WORSE, /* a user metric of unknown meaning */
} guard_direction;

/* One metric of one run: its per-step (or per-block) samples. */
typedef struct {
    char *name;          /* "step_time", "phase.compute", "metric.loss" */
    const char *unit;    /* "ms", "steps/s", "MiB", "" */
    guard_direction direction;
    int tested;          /* 0: shown only (finding counts) */
    double *v;           /* samples; n of them (cap allocated) */
    size_t n, cap;
    double value;        /* the run's summary: the median of v (or count) */
} guard_series;

/* A run and its metrics. */
typedef struct {
    ss_run_row row;
    char *fingerprint; /* JSON object; NULL when not recorded */
    guard_series *m;
    size_t n_m;
} guard_run;

/* Settings (--set NAME=VALUE; docs/guard.md lists the defaults). */
typedef struct {
    double alpha;        /* significance of the rank-sum test */
    double run_alpha;    /* one-sided level of the run-level bound */
    double confidence;   /* of the shift's interval */
    size_t warmup;       /* first steps of a run left out */
    size_t min_runs;     /* fewest baseline runs to judge */
    size_t last;         /* default baseline: the last N comparable runs */
    size_t history;      /* runs the change-point search looks at */
    size_t block;        /* steps per block for the p90 metric */
    size_t consecutive;  /* runs in a row a regression must last */
    int determinism;     /* 1: the run must compute the same bits as its
                            newest baseline run (run_diff.h) */
    /* per-metric overrides, "name=percent" or "family.=percent" */
    char **thresholds;
    size_t n_thresholds;
} guard_settings;

typedef enum {
    GUARD_SAME,        /* no significant change beyond the threshold */
    GUARD_REGRESSED,
    GUARD_SUSPECT,     /* regressed, in fewer than `consecutive` runs */
    GUARD_IMPROVED,
    GUARD_SHOWN,       /* not tested (finding counts) */
    GUARD_NO_DATA,     /* the run or its baseline lacks the metric */
} guard_verdict;

/* The comparison of one metric. */
typedef struct {
    const guard_series *run;      /* the candidate's series */
    double baseline;              /* median of the pooled baseline samples */
    double spread;                /* the run-level bound, relative to the
                                     baseline (run_level_bound) */
    size_t n_baseline;            /* pooled samples */
    size_t runs_left_out;         /* latest baseline runs already worse */
    ss_shift_test t;              /* shift = run - baseline */
    double rel, rel_lo, rel_hi;   /* shift and interval / baseline */
    double threshold;             /* relative, e.g. 0.05 */
    double min_abs;               /* smallest absolute shift that counts */
    guard_verdict verdict;
    int64_t since_run;            /* the run the change starts at; 0: none */
    /* the history: per comparable run (oldest first) its summary value */
    int64_t *history_runs;
    double *history_values;
    size_t n_history;
    int64_t *change_runs;         /* runs that start a new level */
    size_t n_change;
} guard_result;

/* --set determinism=1: the run against its newest baseline run. */
typedef struct {
    int checked;          /* asked for */
    int64_t against;      /* the baseline run compared with; 0: none */
    ss_diff_side a, b;    /* as ss_run_diff left them */
    ss_diff_result diff;  /* valid when AGAINST */
    char text[640];       /* one line: what was found */
} guard_determinism;

/* Everything the outputs print. */
typedef struct {
    const char *db;
    const guard_run *run;
    int64_t *baseline_ids;
    size_t n_baseline;
    char *excluded;          /* why runs were left out, "" when none */
    char *differences;       /* explicit baseline runs that differ */
    int status;              /* SS_GUARD_* */
    char reason[512];        /* for SS_GUARD_CANNOT_JUDGE */
    guard_result *results;
    size_t n_results;
    const guard_settings *settings;
    guard_determinism det;   /* --set determinism=1 */
} guard_report;

/* ---- guard_load.c ---- */

/*
 * Loads run RUN_ID's row, fingerprint and metric samples (docs/guard.md,
 * "Metrics") through reader R into OUT, leaving out the first SETTINGS->
 * warmup steps.  Returns 0, or an SS_READ_* code (the reader's errmsg says
 * why).  Free with guard_run_free (also after an error).
 */
int guard_load_run(ss_reader *r, int64_t run_id, const guard_settings *settings,
                   guard_run *out);

/* The two halves of guard_load_run: the row and fingerprint into OUT
 * (cheap: enough to tell whether the run is comparable), then the samples
 * into RUN.  WHAT: 0 for the metrics of the steps table and the findings
 * only, GUARD_LOAD_RANK_STEPS to add those of the kept rank-steps
 * (step_time_worst_rank, metric.*), which cost a row per rank per step. */
#define GUARD_LOAD_RANK_STEPS 1u
int guard_load_identity(ss_reader *r, int64_t run_id, guard_run *out);
int guard_load_samples(ss_reader *r, const guard_settings *settings,
                       unsigned what, guard_run *run);

void guard_run_free(guard_run *run);

/* The series named NAME of RUN, or NULL. */
const guard_series *guard_find_series(const guard_run *run, const char *name);

/* ---- guard_judge.c ---- */

/* The documented defaults (docs/guard.md); guard_settings_free frees the
 * thresholds --set added (the struct itself is the caller's). */
void guard_settings_defaults(guard_settings *s);
void guard_settings_free(guard_settings *s);

/* What to judge. */
typedef struct {
    const char *selector; /* the run, as ss_reader_select_run reads it; NULL:
                             the latest run */
    const char *baseline; /* explicit baseline runs "3,5,7-9", or NULL: the
                             last comparable runs of the run's name */
    char **metrics;       /* only these metrics (a name, or a prefix ending in
                             '.'); none: all */
    size_t n_metrics;
} guard_request;

/* The runs a judgement loaded besides the candidate: RUNS owns them
 * (newest first); BASE and HIST point into it, oldest first.  Only
 * baseline runs keep their samples; the rest of the history keeps its
 * per-run medians. */
typedef struct {
    guard_run *runs;
    size_t n;
    const guard_run **base, **hist;
    size_t n_base, n_hist;
} guard_set;

/* A judgement: the candidate, the runs compared with it and the report.
 * REP points into the struct: do not copy it. */
typedef struct {
    guard_run cand;
    guard_set set;
    guard_report rep;
} guard_judgement;

/*
 * Judges the run Q->selector names against its comparable runs with
 * SETTINGS (which must outlive J), filling J.  Returns 0 when J->rep holds
 * a verdict (rep.status SS_GUARD_*, rep.reason saying why when it cannot
 * judge: too few steps or comparable runs); or SS_READ_NOT_FOUND (no such
 * run, a malformed baseline list) or SS_READ_ERROR (store unreadable, out
 * of memory) with a one-line reason in ERR.  Free J with
 * guard_judgement_free in every case.
 */
int guard_judge(ss_reader *rd, const guard_request *q,
                const guard_settings *settings, guard_judgement *j,
                char *err, size_t errlen);
void guard_judgement_free(guard_judgement *j);

/* 1 when metric NAME is among WANT[0..N_WANT) (a name, or a prefix ending
 * in '.'), or when N_WANT is 0. */
int guard_wanted_metric(const char *name, char **want, size_t n_want);

/*
 * The history of metric NAME over HIST[0..N_HIST) (oldest first) and CAND
 * (last) into R: the runs with a value and their medians, the E-divisive
 * change points, and, when R->verdict is GUARD_REGRESSED, since which run
 * (a regression shorter than SETTINGS->consecutive runs becomes
 * GUARD_SUSPECT).  R's other fields are the caller's (zeroed, verdict
 * GUARD_NO_DATA, when there was no comparison).  Returns 0 or -1 when out
 * of memory; free R's arrays with guard_result_free either way.
 */
int guard_history_of(guard_result *r, const char *name,
                     const guard_run *const *hist, size_t n_hist,
                     const guard_run *cand, const guard_settings *settings);
void guard_result_free(guard_result *r);

/* The words --json and the API use: "regressed", "suspect", "improved",
 * "same", "shown", "no_data"; and "ok", "regression", "cannot_judge" for
 * an SS_GUARD_* status.  Static strings. */
const char *guard_verdict_word(guard_verdict v);
const char *guard_status_word(int status);

/* ---- guard_out.c (views) ---- */

void guard_print_table(FILE *out, const guard_report *rep);
void guard_write_markdown(FILE *out, const guard_report *rep);
void guard_write_junit(FILE *out, const guard_report *rep);
void guard_write_json(FILE *out, const guard_report *rep);

/* "step_time +11.2 % [+10.1, +12.3] (p < 1e-9)" style summary of R into
 * BUF; returns BUF. */
const char *guard_describe(const guard_result *r, char *buf, size_t len);

#endif
