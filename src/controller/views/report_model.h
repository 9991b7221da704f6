/*
 * report_model.h - one run attempt as `stepscope report` explains it: the
 * model report_load.c builds from the store's reader (reader.h), and the
 * two renderings of it, text (report_text.c) and JSON (report_json.c,
 * docs/report-json.md).  Internal to the report's modules; the commands
 * are in report.h.
 *
 * Statistics: percentiles are nearest-rank over the sorted values (pN is
 * the smallest value with at least N% of the values at or below it; p50 is
 * the lower median).  Step and phase statistics are over every finalized
 * step of the attempt; per-rank medians and p90s are over the rank-step
 * rows the store kept (retention, docs/store.md); per-rank step counts,
 * means and maxima are over every step written.  A value that was not
 * measured is SS_MISSING, printed as "-" (text) or null (JSON), never 0.
 */
#ifndef STEPSCOPE_REPORT_MODEL_H
#define STEPSCOPE_REPORT_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "goodput.h"
#include "json.h"
#include "reader.h"

#define SS_REPORT_MAX_EVENTS 10000 /* events kept: the latest ones */

/* A sorted series of values. */
typedef struct {
    int64_t *v;
    size_t n, cap;
} ss_report_vec;

/* Nearest-rank percentile PERMILLE (1..1000) of sorted A; SS_MISSING if
 * empty. */
int64_t ss_report_pct(const ss_report_vec *a, unsigned permille);

/* Per-step values of one phase or sync point, sorted.  Phase: a = the
 * median rank's duration, b = the worst rank's, self = the median rank's
 * self time (the phase less the phases nested in it; empty when not
 * recorded); nests: in some step its self time differed from its time
 * (phases were nested in it); top_rank = the rank most often worst.
 * Sync: a = arrival skew, b = lateness of the last rank; top_rank = the
 * rank most often last. */
typedef struct {
    char *name;
    ss_report_vec a, b, self;
    int nests;
    int64_t top_rank, top_count;
} ss_report_series;

/* A metric (ss_metric) at the last kept step some rank reported it in. */
typedef struct {
    char *name;
    int64_t steps, last_step;
    int64_t n; /* ranks with a value at last_step */
    double median, min, max;
    int64_t min_rank, max_rank;
} ss_report_metric;

/* The report shows the latest kept step's vector of at most this many
 * ranks per name (the lowest ranks): bounded whatever the world size. */
#define SS_REPORT_VALUES_RANKS 8

/* A vector name (ss_values) of the attempt: its kept rows in brief, and
 * its latest kept step's vectors of the first SS_REPORT_VALUES_RANKS
 * ranks that have one (latest[k]: one rank's, one row or none). */
typedef struct {
    ss_values_name_row name;
    ss_values_rows *latest;
    size_t n_latest;
} ss_report_values;

typedef struct {
    ss_run_row run;
    int64_t attempt, n_attempts;
    ss_finding_row *findings; /* critical first */
    size_t n_findings;
    ss_report_vec step_med, step_max;
    int64_t first_step, last_step, incomplete_steps;
    int64_t step_worst_rank, step_worst_count;
    ss_report_series *phases; /* longest median-rank p50 first */
    size_t n_phases;
    ss_report_series *syncs;  /* by name */
    size_t n_syncs;
    ss_report_metric *metrics;
    size_t n_metrics;
    ss_rank_row *ranks;       /* ranks 0 .. n_ranks-1 */
    size_t n_ranks;
    int64_t *phase_med;       /* [rank * n_phases + phase]: the rank's p50 */
    int64_t *phase_self_med;  /* the same of its self time */
    int any_nests;            /* some phase nests others */
    uint8_t *named;           /* n_ranks: named by a finding */
    ss_event_row *events;     /* the latest SS_REPORT_MAX_EVENTS, in time
                                 order */
    size_t n_events;
    int64_t events_total;
    ss_rank_host *hosts;      /* host evidence of the ranks that have some,
                                 by rank (reader.h); NULL when none */
    size_t n_hosts;
    ss_node_row *nodes;       /* the nodes of a multi-node run, by node
                                 rank; none for a run recorded without */
    size_t n_nodes;
    ss_goodput goodput;       /* the whole run's, every attempt */
    /* Over every run of the run's name, when at least
     * SS_REPORT_RELIABILITY_RUNS of them failed (has_reliability). */
    ss_reliability reliability;
    int has_reliability;
    /* The stacks captured while the attempt ran (docs/debug.md): the
     * newest snapshot, one taken for a hang first; stacks.json NULL when
     * none.  stacks_text: its merged text (malloc'ed, NULL if unreadable). */
    ss_stack_snapshot_row stacks;
    char *stacks_text;
    int64_t stacks_answered, stacks_total;
    ss_report_values *values; /* by name; none before schema 13 */
    size_t n_values;
} ss_report;

#define SS_REPORT_RELIABILITY_RUNS 3


/*
 * Reads attempt ATTEMPT (-1: the latest) of run RUN_ID through R into RP
 * (zeroed first), saying which part it reads on a progress line on ERR
 * when ERR is a terminal.  Returns 0, or -1 with the reason printed to ERR
 * as "stepscope report: ...".  Free RP with ss_report_free either way.
 */
int ss_report_load(ss_reader *r, int64_t run_id, int64_t attempt,
                   ss_report *rp, FILE *err);
void ss_report_free(ss_report *rp);

/* ---- one rank (`stepscope report --rank R`, report_rank.c) ---- */

#define SS_REPORT_RANK_LATEST 10 /* the latest kept rows shown */
#define SS_REPORT_RANK_LIVE 20   /* the latest steps asked of a live run */

/* One kept rank-step row of the rank beside its step's median rank. */
typedef struct {
    int64_t step, step_ns;
    int64_t step_median_ns; /* the step's median rank; SS_MISSING */
    int64_t rss_bytes;
} ss_report_rank_step;

typedef struct {
    int64_t rank;
    /* over every finalized step of the attempt */
    int64_t steps, missing_steps; /* finalized; of them without the rank */
    int64_t slowest_steps;        /* the rank had the longest step time */
    int64_t *phase_worst; /* per phase of the report: steps it was slowest */
    int64_t *sync_last;   /* per sync point: steps it arrived last */
    int64_t kept_rows;    /* its kept rank-step rows */
    ss_report_rank_step latest[SS_REPORT_RANK_LATEST]; /* a ring */
    size_t n_latest, latest_first; /* rows held; the oldest one's slot */
    int64_t *latest_phase_ns; /* [i * n_phases + phase] of latest[i] */
    /* a running run (report_live.c): the rank's latest steps as its node
     * keeps them, the API's /recent object (a cJSON tree), or NULL with
     * why in LIVE_WHY ("" when the run is not running) */
    struct cJSON *live_recent;
    char live_why[600];
} ss_report_rank;

/*
 * Reads what the view of rank RANK adds to RP (loaded by ss_report_load
 * from R) into RK (zeroed first).  Returns 0, or -1 with the reason
 * printed to ERR as "stepscope report: ..." (a rank the run does not
 * have, a store error, out of memory).  Free RK with ss_report_rank_free
 * either way.
 */
int ss_report_rank_load(ss_reader *r, const ss_report *rp, int64_t rank,
                        ss_report_rank *rk, FILE *err);
void ss_report_rank_free(ss_report_rank *rk);

/* The rank's view as text (RP's stored strings are cleaned for a terminal
 * first), and as JSON (docs/report-json.md, "One rank"; 0, or -1 when
 * memory ran out and nothing was written). */
void ss_report_rank_print_text(FILE *f, ss_report *rp,
                               const ss_report_rank *rk);
int ss_report_rank_print_json(FILE *f, const ss_report *rp,
                              const ss_report_rank *rk, const char *db_path);

/* The totals of dropped data: the run's own when it ended, else the sum of
 * what the ranks reported so far. */
/* Over the ranks: names the run's name table refused, the values under them
 * that were dropped, and how many ranks had any (SS_MISSING when the store
 * does not know). */
void ss_report_names_over_limit(const ss_report *rp, int64_t *names,
                                int64_t *values, int64_t *ranks);
void ss_report_dropped(const ss_report *rp, int64_t *events,
                       int64_t *records);

/* The text report (control characters in stored strings are replaced by
 * spaces in RP first: the text goes to a terminal). */
void ss_report_print_text(FILE *f, ss_report *rp);

/* The JSON report of docs/report-json.md; DB_PATH is its "db".  Returns
 * 0, or -1 when memory ran out (the output is then incomplete). */
int ss_report_print_json(FILE *f, const ss_report *rp, const char *db_path);

/* Pieces of the JSON report the rank view shares (report_json.c): the
 * line "  \"run\": {...},\n", and rank RANK's object of "ranks" (RANK <
 * rp->n_ranks), without a line break. */
void ss__report_json_run(ss_buf *b, const ss_report *rp);
void ss__report_json_rank(ss_buf *b, const ss_report *rp, size_t rank);

/* When run RUN_ID of the store DB_PATH is running, asks its controller
 * for RK->rank's latest SS_REPORT_RANK_LIVE steps (report_live.c):
 * RK->live_recent, or why not in RK->live_why.  A run that is not
 * running leaves both empty. */
void ss_report_rank_live_fetch(const char *db_path, int64_t run_id,
                               ss_report_rank *rk);
/* Their table in the text view (nothing when the run is not running),
 * and their JSON ("null" then). */
void ss__report_rank_text_live(FILE *f, const ss_report *rp,
                               const ss_report_rank *rk);
void ss__report_rank_json_live(ss_buf *b, const ss_report_rank *rk);

/* Pieces of the text report the rank view shares (report_text.c): the
 * run's header, the cleaning of stored strings for a terminal, and the
 * formats of a table cell: milliseconds, bytes, an integer, an exit ("-"
 * when missing).  Each fmt writes BUF (N bytes) and returns it. */
void ss__report_text_header(FILE *f, const ss_report *rp);
void ss__report_clean_for_text(ss_report *rp);
const char *ss__report_ms(char *buf, size_t n, int64_t ns);
const char *ss__report_bytes(char *buf, size_t n, int64_t b);
const char *ss__report_int(char *buf, size_t n, int64_t v);
const char *ss__report_exit(char *buf, size_t n, int64_t code, int64_t sig);

/* `stepscope runs` as text; "no runs in DB_PATH yet" for none. */
void ss_runs_print_text(FILE *f, const ss_run_row *runs, size_t n,
                        const char *db_path);
/* `stepscope runs --json`: {"db": DB_PATH, "runs": [...]}; 0 or -1 as
 * ss_report_print_json. */
int ss_runs_print_json(FILE *f, const ss_run_row *runs, size_t n,
                       const char *db_path);

#endif
