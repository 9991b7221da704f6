/*
 * report_rank.c - one rank of a run attempt (`stepscope report --rank R`):
 * what the report says of every rank, said of one, beside the run's median
 * rank (report_model.h).
 *
 * The run's report model (report_load.c) gives the rank's totals, its
 * medians per phase and those of the other ranks, its host evidence, and
 * the findings and events of the attempt.  This module adds what only one
 * rank's view needs: over every finalized step, how often the rank was the
 * slowest (step time, each phase) or the last at each sync point and how
 * often it was missing; and its latest kept rank-step rows beside each
 * step's median rank.  Steps are read in windows and the rank's rows with a
 * cursor, so memory stays small however long the run and large the world.
 * A run that is still running adds the rank's latest steps as its node
 * keeps them (report_live.c).
 *
 * Counts over steps are exact.  The rank's percentiles are over its kept
 * rows: retention thins old steps, and above 4,096 ranks node aggregation
 * writes a rank's row on the steps that single it out and on a rotating
 * share of the others (docs/store.md); the view says how many steps it was
 * counted in and how many rows were kept.
 */
#include "report_model.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define STEP_WINDOW 4096 /* finalized steps read at a time */
#define MAX_EVENTS_TEXT 20

/* Index of NAME among N names (the report's phases or syncs), or -1. */
static long find_series(const ss_report_series *s, size_t n,
                        const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(s[i].name, name) == 0)
            return (long)i;
    return -1;
}

static int has_rank(const int64_t *ranks, size_t n, int64_t rank)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranks[mid] == rank)
            return 1;
        if (ranks[mid] < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The rank's latest kept rows (a ring of SS_REPORT_RANK_LATEST) and their
 * count, through one cursor. */
static int load_rows(ss_reader *r, const ss_report *rp, ss_report_rank *rk)
{
    ss_rank_step_query q = {rp->run.id, rp->attempt, -1, -1,
                            SS_RANK_STEPS_PHASES | SS_RANK_STEPS_ONE_RANK,
                            rk->rank};
    ss_rank_steps *cur;
    if (ss_reader_rank_steps(r, &q, &cur) != 0)
        return -1;
    const ss_rank_step_row *row;
    int rc;
    size_t np = rp->n_phases;
    while ((rc = ss_rank_steps_next(cur, &row)) == 1) {
        size_t slot = (size_t)(rk->kept_rows % SS_REPORT_RANK_LATEST);
        rk->kept_rows++;
        ss_report_rank_step *x = &rk->latest[slot];
        *x = (ss_report_rank_step){row->step, row->step_ns, SS_MISSING,
                                   row->rss_bytes};
        int64_t *ph = rk->latest_phase_ns + slot * np;
        for (size_t p = 0; p < np; p++)
            ph[p] = SS_MISSING;
        for (size_t i = 0; i < row->n_phases; i++) {
            long p = find_series(rp->phases, np,
                                 ss_rank_steps_name(cur, row->phases[i].name));
            if (p >= 0)
                ph[p] = row->phases[i].total_ns;
        }
    }
    ss_rank_steps_close(cur);
    if (rc != 0)
        return -1;
    rk->n_latest = rk->kept_rows < SS_REPORT_RANK_LATEST
                       ? (size_t)rk->kept_rows
                       : SS_REPORT_RANK_LATEST;
    rk->latest_first = rk->kept_rows <= SS_REPORT_RANK_LATEST
                           ? 0
                           : (size_t)(rk->kept_rows % SS_REPORT_RANK_LATEST);
    return 0;
}

/* The ring slot of the I-th oldest of the latest rows. */
static size_t latest_slot(const ss_report_rank *rk, size_t i)
{
    return (rk->latest_first + i) % SS_REPORT_RANK_LATEST;
}

/* Counts one window of finalized steps into RK: presence, the slowest
 * rank of the step and of each phase, the last at each sync point; and
 * fills the step medians of the latest rows. */
static void count_steps(const ss_report *rp, const ss_steps *w,
                        ss_report_rank *rk)
{
    for (size_t i = 0; i < w->n_steps; i++) {
        const ss_step_row *s = &w->steps[i];
        rk->steps++;
        if (has_rank(s->missing_ranks, s->n_missing_ranks, rk->rank)) {
            rk->missing_steps++;
            continue;
        }
        rk->slowest_steps += s->step_worst_rank == rk->rank;
        for (size_t k = s->phase0; k < s->phase0 + s->n_phases; k++) {
            const ss_step_phase *p = &w->phases[k];
            long at = find_series(rp->phases, rp->n_phases,
                                  w->names[p->name]);
            if (at >= 0 && p->worst_rank == rk->rank)
                rk->phase_worst[at]++;
        }
        for (size_t k = s->sync0; k < s->sync0 + s->n_syncs; k++) {
            const ss_step_sync *y = &w->syncs[k];
            long at = find_series(rp->syncs, rp->n_syncs, w->names[y->name]);
            if (at >= 0 && y->worst_rank == rk->rank)
                rk->sync_last[at]++;
        }
        for (size_t k = 0; k < rk->n_latest; k++)
            if (rk->latest[k].step == s->step)
                rk->latest[k].step_median_ns = s->step_median;
    }
}

int ss_report_rank_load(ss_reader *r, const ss_report *rp, int64_t rank,
                        ss_report_rank *rk, FILE *err)
{
    *rk = (ss_report_rank){.rank = rank};
    if (rank < 0 || (size_t)rank >= rp->n_ranks) {
        if (rp->n_ranks)
            fprintf(err, "stepscope report: run %" PRId64 " has no rank %"
                         PRId64 " (its ranks are 0-%zu)\n",
                    rp->run.id, rank, rp->n_ranks - 1);
        else
            fprintf(err, "stepscope report: run %" PRId64 " recorded no "
                         "rank\n", rp->run.id);
        return -1;
    }
    size_t np = rp->n_phases ? rp->n_phases : 1;
    rk->phase_worst = calloc(np, sizeof *rk->phase_worst);
    rk->sync_last = calloc(rp->n_syncs ? rp->n_syncs : 1,
                           sizeof *rk->sync_last);
    rk->latest_phase_ns = malloc(np * SS_REPORT_RANK_LATEST *
                                 sizeof *rk->latest_phase_ns);
    if (!rk->phase_worst || !rk->sync_last || !rk->latest_phase_ns) {
        fprintf(err, "stepscope report: out of memory\n");
        return -1;
    }
    if (load_rows(r, rp, rk) != 0) {
        fprintf(err, "stepscope report: %s\n", ss_reader_errmsg(r));
        return -1;
    }
    for (int64_t from = 0;;) {
        ss_step_window win = {from, -1, STEP_WINDOW};
        ss_steps w;
        if (ss_reader_steps(r, rp->run.id, rp->attempt, &win,
                            SS_STEPS_PHASES | SS_STEPS_SYNCS, &w) != 0) {
            fprintf(err, "stepscope report: %s\n", ss_reader_errmsg(r));
            return -1;
        }
        count_steps(rp, &w, rk);
        size_t n = w.n_steps;
        if (n)
            from = w.steps[n - 1].step + 1;
        ss_steps_free(&w);
        if (n < STEP_WINDOW)
            break;
    }
    return 0;
}

void ss_report_rank_free(ss_report_rank *rk)
{
    free(rk->phase_worst);
    free(rk->sync_last);
    free(rk->latest_phase_ns);
    cJSON_Delete(rk->live_recent);
    *rk = (ss_report_rank){0};
}

/* The ratio A / B as "1.03x", "-" when either is missing or B is 0. */
static const char *fmt_ratio(char *buf, size_t n, int64_t a, int64_t b)
{
    if (a == SS_MISSING || b == SS_MISSING || b <= 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.2fx", (double)a / (double)b);
    return buf;
}

/* Milliseconds with their unit, "-" when missing. */
static const char *fmt_ms_unit(char *buf, size_t n, int64_t ns)
{
    ss__report_ms(buf, n, ns);
    if (ns != SS_MISSING)
        strncat(buf, " ms", n - strlen(buf) - 1);
    return buf;
}

/* Whether finding X names RANK. */
static int finding_names(const ss_finding_row *x, int64_t rank)
{
    for (size_t i = 0; i < x->n_ranks; i++)
        if (x->ranks[i] == rank)
            return 1;
    return 0;
}

static const ss_rank_host *host_of(const ss_report *rp, int64_t rank)
{
    for (size_t i = 0; i < rp->n_hosts; i++)
        if (rp->hosts[i].rank == rank)
            return &rp->hosts[i];
    return NULL;
}

/* The rank's kept rows against the steps it was counted in. */
static void text_kept(FILE *f, const ss_rank_row *k)
{
    fprintf(f, "  kept rows   %" PRId64 " of its %" PRId64 " steps",
            k->samples, k->steps);
    if (k->samples != SS_MISSING && k->steps != SS_MISSING &&
        k->samples < k->steps)
        fputs(": its percentiles are over\n"
              "              the kept rows, its counts, mean and maximum "
              "over every step\n"
              "              (retention thins old steps; above 4,096 ranks "
              "node aggregation\n"
              "              keeps a rank's row on the steps that single it "
              "out and a share)", f);
    fputc('\n', f);
}

static void text_rank_summary(FILE *f, const ss_report *rp,
                              const ss_report_rank *rk)
{
    const ss_rank_row *k = &rp->ranks[rk->rank];
    char a[64], b[64], c[64], d[64];
    fprintf(f, "RANK %" PRId64 "  host %s, pid %s, %s", rk->rank,
            k->host ? k->host : "-", ss__report_int(a, sizeof a, k->pid),
            k->state ? k->state : "state unknown");
    if (k->exit_code != SS_MISSING || (k->term_signal != SS_MISSING &&
                                       k->term_signal > 0))
        fprintf(f, " (exit %s)",
                ss__report_exit(b, sizeof b, k->exit_code, k->term_signal));
    fprintf(f, ", last step %s\n", ss__report_int(c, sizeof c, k->last_step));
    fprintf(f, "  steps       in %" PRId64 " of %" PRId64 " finalized steps",
            rk->steps - rk->missing_steps, rk->steps);
    if (rk->missing_steps)
        fprintf(f, " (missing from %" PRId64 ")", rk->missing_steps);
    fprintf(f, "; the slowest rank by step time in %" PRId64 "\n",
            rk->slowest_steps);
    text_kept(f, k);
    int64_t mean = k->step_ns_n ? k->step_ns_sum / k->step_ns_n : SS_MISSING;
    fprintf(f, "  step time   p50 %s, p90 %s, mean %s, max %s\n",
            fmt_ms_unit(a, sizeof a, k->median_step_ns),
            fmt_ms_unit(b, sizeof b, k->p90_step_ns),
            fmt_ms_unit(c, sizeof c, mean),
            fmt_ms_unit(d, sizeof d, k->step_ns_max));
    int64_t med = ss_report_pct(&rp->step_med, 500);
    fprintf(f, "              the median rank's p50 %s: this rank %s\n",
            fmt_ms_unit(a, sizeof a, med),
            fmt_ratio(b, sizeof b, k->median_step_ns, med));
    fprintf(f, "  memory      RSS max %s, device max %s\n",
            ss__report_bytes(a, sizeof a, k->max_rss_bytes),
            ss__report_bytes(b, sizeof b, k->max_device_bytes));
    fprintf(f, "  dropped     %s events, %s records\n\n",
            ss__report_int(a, sizeof a, k->dropped_events),
            ss__report_int(b, sizeof b, k->dropped_records));
}

static void text_rank_phases(FILE *f, const ss_report *rp,
                             const ss_report_rank *rk)
{
    if (rp->n_phases) {
        fputs("PHASES (p50 over steps: this rank's, the median rank's)\n", f);
        fprintf(f, "  %-24s %12s %12s %7s %14s\n", "phase", "rank ms",
                "median ms", "ratio", "slowest in");
        const int64_t *mine = rp->phase_med + rk->rank * rp->n_phases;
        for (size_t p = 0; p < rp->n_phases; p++) {
            char a[32], b[32], c[32], d[32];
            int64_t med = ss_report_pct(&rp->phases[p].a, 500);
            snprintf(d, sizeof d, "%" PRId64 " steps", rk->phase_worst[p]);
            fprintf(f, "  %-24s %12s %12s %7s %14s\n", rp->phases[p].name,
                    ss__report_ms(a, sizeof a, mine[p]),
                    ss__report_ms(b, sizeof b, med),
                    fmt_ratio(c, sizeof c, mine[p], med), d);
        }
        fputc('\n', f);
    }
    if (rp->n_syncs) {
        fputs("SYNC POINTS (steps in which this rank arrived last)\n", f);
        for (size_t y = 0; y < rp->n_syncs; y++)
            fprintf(f, "  %-24s %" PRId64 " of %zu\n", rp->syncs[y].name,
                    rk->sync_last[y], rp->syncs[y].a.n);
        fputc('\n', f);
    }
}

static void text_rank_findings(FILE *f, const ss_report *rp, int64_t rank)
{
    fprintf(f, "FINDINGS naming rank %" PRId64 "\n", rank);
    int any = 0;
    for (size_t i = 0; i < rp->n_findings; i++) {
        const ss_finding_row *x = &rp->findings[i];
        if (!finding_names(x, rank))
            continue;
        any = 1;
        fprintf(f, "  [%s] %s, steps %" PRId64 "-%" PRId64 ": %s\n",
                x->severity ? x->severity : "-", x->kind ? x->kind : "-",
                x->first_step, x->last_step, x->message ? x->message : "");
    }
    if (!any)
        fprintf(f, "  none (%zu finding%s in the attempt)\n", rp->n_findings,
                rp->n_findings == 1 ? "" : "s");
    fputc('\n', f);
}

static void text_rank_host(FILE *f, const ss_report *rp, int64_t rank)
{
    const ss_rank_host *h = host_of(rp, rank);
    if (!h)
        return;
    char a[32], b[32], c[32], d[32], e[32];
    fputs("HOST (per step: median / worst step; its process tree as the "
          "kernel saw it)\n", f);
    fprintf(f, "  run queue %s / %s ms, stopped %s / %s ms in %" PRId64
               " of %" PRId64 " steps, CPU %s ms\n",
            ss__report_ms(a, sizeof a, h->median.runq_ns),
            ss__report_ms(b, sizeof b, h->max.runq_ns),
            ss__report_ms(c, sizeof c, h->median.stopped_ns),
            ss__report_ms(d, sizeof d, h->max.stopped_ns), h->stopped_steps,
            h->steps, ss__report_ms(e, sizeof e, h->median.cpu_ns));
    fprintf(f, "  throttled in %" PRId64 " steps, preempted %s times a step, "
               "%s major faults a step",
            h->throttled_steps, ss__report_int(a, sizeof a,
                                            h->median.invol_switches),
            ss__report_int(b, sizeof b, h->median.major_faults));
    if (h->gpu_steps)
        fprintf(f, "\n  GPU %d held down in %" PRId64 " of %" PRId64 " steps",
                h->gpu_sum.index, h->gpu_slowed_steps, h->gpu_steps);
    fputs("\n\n", f);
}

static void text_rank_events(FILE *f, const ss_report *rp, int64_t rank)
{
    size_t n = 0, shown = 0;
    for (size_t i = 0; i < rp->n_events; i++)
        n += rp->events[i].rank == rank;
    if (!n)
        return;
    fprintf(f, "EVENTS of rank %" PRId64 "%s\n", rank,
            n > MAX_EVENTS_TEXT ? " (the latest 20)" : "");
    for (size_t i = 0; i < rp->n_events; i++) {
        const ss_event_row *e = &rp->events[i];
        if (e->rank != rank || n - shown++ > MAX_EVENTS_TEXT)
            continue;
        fprintf(f, "  %-18s %s\n", e->kind ? e->kind : "-",
                e->message ? e->message : "");
    }
    fputc('\n', f);
}

/* The latest kept rows, with the first phases of the report as columns. */
static void text_rank_latest(FILE *f, const ss_report *rp,
                             const ss_report_rank *rk)
{
    if (!rk->n_latest)
        return;
    size_t cols = rp->n_phases < 4 ? rp->n_phases : 4;
    fprintf(f, "LATEST KEPT STEPS (ms; median: the step's median rank)\n");
    fprintf(f, "  %8s %10s %10s %7s", "step", "time", "median", "ratio");
    for (size_t p = 0; p < cols; p++)
        fprintf(f, " %12.12s", rp->phases[p].name);
    fputc('\n', f);
    for (size_t i = 0; i < rk->n_latest; i++) {
        size_t k = latest_slot(rk, i);
        const ss_report_rank_step *x = &rk->latest[k];
        char a[32], b[32], c[32];
        fprintf(f, "  %8" PRId64 " %10s %10s %7s", x->step,
                ss__report_ms(a, sizeof a, x->step_ns),
                ss__report_ms(b, sizeof b, x->step_median_ns),
                fmt_ratio(c, sizeof c, x->step_ns, x->step_median_ns));
        for (size_t p = 0; p < cols; p++)
            fprintf(f, " %12s",
                    ss__report_ms(a, sizeof a,
                               rk->latest_phase_ns[k * rp->n_phases + p]));
        fputc('\n', f);
    }
    fputc('\n', f);
}

void ss_report_rank_print_text(FILE *f, ss_report *rp,
                               const ss_report_rank *rk)
{
    ss__report_clean_for_text(rp);
    ss__report_text_header(f, rp);
    text_rank_summary(f, rp, rk);
    text_rank_findings(f, rp, rk->rank);
    text_rank_phases(f, rp, rk);
    text_rank_host(f, rp, rk->rank);
    text_rank_events(f, rp, rk->rank);
    text_rank_latest(f, rp, rk);
    ss__report_rank_text_live(f, rp, rk);
}

int ss_report_rank_print_json(FILE *f, const ss_report *rp,
                              const ss_report_rank *rk, const char *db_path)
{
    ss_buf b = {0};
    ss_buf_puts(&b, "{\n  \"format\": \"stepscope.report.rank/1\",\n"
                    "  \"db\": ");
    ss_buf_json_str(&b, db_path);
    ss_buf_puts(&b, ",\n");
    ss__report_json_run(&b, rp);
    ss_buf_puts(&b, "  \"rank\": ");
    ss__report_json_rank(&b, rp, (size_t)rk->rank);
    ss_buf_printf(&b, ",\n  \"steps\": {\"finalized\": %" PRId64
                      ", \"missing\": %" PRId64 ", \"slowest\": %" PRId64
                      ", \"kept_rows\": %" PRId64 ", \"median_rank_p50_ms\": ",
                  rk->steps, rk->missing_steps, rk->slowest_steps,
                  rk->kept_rows);
    ss_buf_json_ms(&b, ss_report_pct(&rp->step_med, 500));
    ss_buf_puts(&b, "},\n  \"phases\": [");
    const int64_t *mine = rp->phase_med + rk->rank * rp->n_phases;
    for (size_t p = 0; p < rp->n_phases; p++) {
        ss_buf_puts(&b, p ? ", {\"name\": " : "{\"name\": ");
        ss_buf_json_str(&b, rp->phases[p].name);
        ss_buf_puts(&b, ", \"median_ms\": ");
        ss_buf_json_ms(&b, mine[p]);
        ss_buf_puts(&b, ", \"median_rank_p50_ms\": ");
        ss_buf_json_ms(&b, ss_report_pct(&rp->phases[p].a, 500));
        ss_buf_printf(&b, ", \"slowest_steps\": %" PRId64 "}",
                      rk->phase_worst[p]);
    }
    ss_buf_puts(&b, "],\n  \"syncs\": [");
    for (size_t y = 0; y < rp->n_syncs; y++) {
        ss_buf_puts(&b, y ? ", {\"name\": " : "{\"name\": ");
        ss_buf_json_str(&b, rp->syncs[y].name);
        ss_buf_printf(&b, ", \"last_steps\": %" PRId64 ", \"steps\": %zu}",
                      rk->sync_last[y], rp->syncs[y].a.n);
    }
    ss_buf_puts(&b, "],\n  \"findings\": [");
    int first = 1;
    for (size_t i = 0; i < rp->n_findings; i++) {
        const ss_finding_row *x = &rp->findings[i];
        if (!finding_names(x, rk->rank))
            continue;
        ss_buf_printf(&b, "%s{\"id\": %" PRId64 ", \"kind\": ",
                      first ? "" : ", ", x->id);
        first = 0;
        ss_buf_json_str(&b, x->kind);
        ss_buf_puts(&b, ", \"severity\": ");
        ss_buf_json_str(&b, x->severity);
        ss_buf_puts(&b, ", \"phase\": ");
        ss_buf_json_str(&b, x->phase);
        ss_buf_printf(&b, ", \"first_step\": %" PRId64 ", \"last_step\": %"
                          PRId64 ", \"message\": ",
                      x->first_step, x->last_step);
        ss_buf_json_str(&b, x->message);
        ss_buf_puts(&b, "}");
    }
    ss_buf_puts(&b, "],\n  \"events\": [");
    first = 1;
    for (size_t i = 0; i < rp->n_events; i++) {
        const ss_event_row *e = &rp->events[i];
        if (e->rank != rk->rank)
            continue;
        ss_buf_puts(&b, first ? "{\"at\": " : ", {\"at\": ");
        first = 0;
        ss_buf_json_time(&b, e->at);
        ss_buf_puts(&b, ", \"kind\": ");
        ss_buf_json_str(&b, e->kind);
        ss_buf_puts(&b, ", \"message\": ");
        ss_buf_json_str(&b, e->message);
        ss_buf_puts(&b, "}");
    }
    ss_buf_puts(&b, "],\n  \"latest\": [");
    for (size_t i = 0; i < rk->n_latest; i++) {
        size_t k = latest_slot(rk, i);
        const ss_report_rank_step *x = &rk->latest[k];
        ss_buf_printf(&b, "%s\n    {\"step\": %" PRId64 ", \"step_ms\": ",
                      i ? "," : "", x->step);
        ss_buf_json_ms(&b, x->step_ns);
        ss_buf_puts(&b, ", \"median_rank_ms\": ");
        ss_buf_json_ms(&b, x->step_median_ns);
        ss_buf_puts(&b, ", \"rss_bytes\": ");
        ss_buf_json_int(&b, x->rss_bytes);
        ss_buf_puts(&b, ", \"phases_ms\": {");
        int any = 0;
        for (size_t p = 0; p < rp->n_phases; p++) {
            int64_t v = rk->latest_phase_ns[k * rp->n_phases + p];
            if (v == SS_MISSING)
                continue;
            ss_buf_puts(&b, any ? ", " : "");
            any = 1;
            ss_buf_json_str(&b, rp->phases[p].name);
            ss_buf_puts(&b, ": ");
            ss_buf_json_ms(&b, v);
        }
        ss_buf_puts(&b, "}}");
    }
    ss_buf_puts(&b, rk->n_latest ? "\n  ],\n  \"live\": " : "],\n  \"live\": ");
    ss__report_rank_json_live(&b, rk);
    ss_buf_puts(&b, "\n}\n");
    int nomem = b.oom;
    if (!nomem)
        fwrite(b.data, 1, b.len, f);
    ss_buf_free(&b);
    return nomem ? -1 : 0;
}
