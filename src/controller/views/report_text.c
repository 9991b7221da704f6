/*
 * report_text.c - the text report and the text list of runs, for people
 * at a terminal (report_model.h).
 *
 * Findings come first: they are the point of the report; the tables after
 * them are the evidence a person checks the findings against.  Every
 * string that came from a rank or a command line has its control
 * characters replaced by spaces first, so stored text cannot drive the
 * terminal.  Large worlds list only the notable ranks (failed, named by a
 * finding, the slowest); `--json` lists every rank.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goodput_view.h"
#include "headline.h"
#include "json.h"
#include "report_model.h"
#include "stats.h"

#define MAX_EVENTS_TEXT 20 /* events listed */
#define MAX_RANKS_TEXT 32  /* above this, the notable ranks only */

/* Milliseconds for a table: 3 decimals under 1 ms (sync skews are often
 * microseconds), 1 decimal above; "-" if missing. */
const char *ss__report_ms(char *buf, size_t n, int64_t ns)
{
    if (ns == SS_MISSING)
        snprintf(buf, n, "-");
    else if (ns > -1000000 && ns < 1000000)
        snprintf(buf, n, "%.3f", (double)ns / 1e6);
    else
        snprintf(buf, n, "%.1f", (double)ns / 1e6);
    return buf;
}

const char *ss__report_bytes(char *buf, size_t n, int64_t b)
{
    if (b == SS_MISSING)
        snprintf(buf, n, "-");
    else if (b >= (int64_t)1 << 30)
        snprintf(buf, n, "%.1f GiB", (double)b / (double)(1 << 30));
    else if (b >= 1 << 20)
        snprintf(buf, n, "%.1f MiB", (double)b / (double)(1 << 20));
    else if (b >= 1 << 10)
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, n, "%" PRId64 " B", b);
    return buf;
}

const char *ss__report_int(char *buf, size_t n, int64_t v)
{
    if (v == SS_MISSING)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%" PRId64, v);
    return buf;
}

/* Local wall time "2024-05-01 12:00:03" (WITH_DATE) or "12:00:03.123". */
static const char *fmt_wall(char *buf, size_t n, int64_t ns, int with_date)
{
    if (ns == SS_MISSING) {
        snprintf(buf, n, "-");
        return buf;
    }
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r(&t, &tm);
    if (with_date) {
        strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
    } else {
        char hms[16];
        strftime(hms, sizeof hms, "%H:%M:%S", &tm);
        snprintf(buf, n, "%s.%03d", hms,
                 (int)(ns % 1000000000 / 1000000 + 1000) % 1000);
    }
    return buf;
}

static const char *fmt_duration(char *buf, size_t n, int64_t ns)
{
    double s = (double)ns / 1e9;
    if (s < 60)
        snprintf(buf, n, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm %04.1fs", (int)(s / 60), fmod(s, 60));
    else
        snprintf(buf, n, "%dh %02dm", (int)(s / 3600),
                 (int)fmod(s / 60, 60));
    return buf;
}

/* "exit 0", "signal 9", or "-". */
const char *ss__report_exit(char *buf, size_t n, int64_t code, int64_t sig)
{
    if (sig != SS_MISSING && sig > 0)
        snprintf(buf, n, "signal %" PRId64, sig);
    else if (code != SS_MISSING)
        snprintf(buf, n, "%" PRId64, code);
    else
        snprintf(buf, n, "-");
    return buf;
}

static void print_steps_range(FILE *f, int64_t first, int64_t last)
{
    if (first == SS_MISSING)
        fputs("-", f);
    else if (first == last)
        fprintf(f, "%" PRId64, first);
    else
        fprintf(f, "%" PRId64 "-%" PRId64, first, last);
}

static int rank_notable(const ss_report *rp, size_t i)
{
    const ss_rank_row *k = &rp->ranks[i];
    return rp->named[i] ||
           (k->term_signal != SS_MISSING && k->term_signal > 0) ||
           (k->exit_code != SS_MISSING && k->exit_code != 0) ||
           (k->state && strcmp(k->state, "exited") != 0 &&
            strcmp(k->state, "running") != 0);
}

/* ---- text output ---- */

/* Replaces control characters in S by spaces: the text report goes to a
 * terminal, and what ranks and commands sent must not drive it. */
static void clean(char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

void ss__report_clean_for_text(ss_report *rp)
{
    clean(rp->run.uuid);
    clean(rp->run.name);
    clean(rp->run.command);
    clean(rp->run.host);
    clean(rp->run.status);
    for (size_t i = 0; i < rp->n_findings; i++) {
        clean(rp->findings[i].kind);
        clean(rp->findings[i].severity);
        clean(rp->findings[i].phase);
        clean(rp->findings[i].message);
    }
    for (size_t i = 0; i < rp->n_phases; i++)
        clean(rp->phases[i].name);
    for (size_t i = 0; i < rp->n_syncs; i++)
        clean(rp->syncs[i].name);
    for (size_t i = 0; i < rp->n_metrics; i++)
        clean(rp->metrics[i].name);
    for (size_t i = 0; i < rp->n_values; i++)
        clean(rp->values[i].name.name);
    for (size_t i = 0; i < rp->n_ranks; i++) {
        clean(rp->ranks[i].host);
        clean(rp->ranks[i].state);
    }
    clean(rp->stacks.trigger);
    for (char *c = rp->stacks_text; c && *c; c++) /* lines stay lines */
        if ((unsigned char)*c < 0x20 && *c != '\n')
            *c = ' ';
    for (size_t i = 0; i < rp->n_events; i++) {
        clean(rp->events[i].kind);
        clean(rp->events[i].message);
    }
    for (size_t i = 0; i < rp->n_nodes; i++) {
        clean(rp->nodes[i].host);
        clean(rp->nodes[i].addr);
        clean(rp->nodes[i].state);
        clean(rp->nodes[i].lost_reason);
    }
}

/* Why the run failed, in its own words: the parts of its last `failure`
 * event (" | " between them), one per line, but how the other ranks were
 * stopped (EVENTS has the whole event). */
static void text_failure(FILE *f, const ss_report *rp)
{
    const char *m = NULL;
    for (size_t i = rp->n_events; i-- > 0 && !m;)
        if (rp->events[i].kind && strcmp(rp->events[i].kind, "failure") == 0)
            m = rp->events[i].message;
    const char *label = "  why         ";
    while (m && *m) {
        const char *bar = strstr(m, " | ");
        int n = bar ? (int)(bar - m) : (int)strlen(m);
        if (strncmp(m, "the other ranks were stopped", 28) != 0 &&
            strncmp(m, "the ranks were stopped", 22) != 0) {
            fprintf(f, "%s%.*s\n", label, n, m);
            label = "              ";
        }
        m = bar ? bar + 3 : NULL;
    }
}

void ss__report_text_header(FILE *f, const ss_report *rp)
{
    const ss_run_row *r = &rp->run;
    char a[64], b[64];
    fprintf(f, "run %" PRId64 "  %s  (uuid %s)\n", r->id,
            r->name ? r->name : "-", r->uuid ? r->uuid : "-");
    fprintf(f, "  command     %s\n", r->command ? r->command : "-");
    fprintf(f, "  world size  %s rank%s",
            ss__report_int(a, sizeof a, r->world_size),
            r->world_size == 1 ? "" : "s");
    if (r->host && *r->host)
        fprintf(f, " (controller on %s)", r->host);
    fputc('\n', f);
    fprintf(f, "  status      %s", r->status ? r->status : "-");
    if (r->exit_code != SS_MISSING)
        fprintf(f, " (exit code %" PRId64 ")", r->exit_code);
    if (rp->n_attempts > 1)
        fprintf(f, ", attempt %" PRId64 " of %" PRId64 " shown",
                rp->attempt, rp->n_attempts);
    fputc('\n', f);
    text_failure(f, rp);
    fprintf(f, "  started     %s", fmt_wall(a, sizeof a, r->started_at, 1));
    if (r->ended_at != SS_MISSING && r->started_at != SS_MISSING)
        fprintf(f, ", ran %s",
                fmt_duration(b, sizeof b, r->ended_at - r->started_at));
    else
        fputs(", still running or stopped without an end record", f);
    fputc('\n', f);
    /* A run that stopped without its end record (its controller killed,
     * or its store full at the end) may have finalized more steps than
     * the store holds: the count is of what was stored. */
    int no_end = r->ended_at == SS_MISSING && r->status &&
                 strcmp(r->status, "running") != 0;
    fprintf(f, "  steps       %zu %s", rp->step_max.n > rp->step_med.n
                                           ? rp->step_max.n
                                           : rp->step_med.n,
            no_end ? "stored" : "finalized");
    if (rp->first_step != SS_MISSING) {
        fputs(" (", f);
        print_steps_range(f, rp->first_step, rp->last_step);
        fputc(')', f);
    }
    if (rp->incomplete_steps)
        fprintf(f, ", %" PRId64 " with missing ranks", rp->incomplete_steps);
    if (no_end)
        fputs("; the run's end was not stored: it may have finalized more",
              f);
    fputs("\n\n", f);
}

/* The run's answer, first: the first finding's ranks, phase and kind
 * (headline.h). */
static void text_headline(FILE *f, const ss_report *rp)
{
    if (rp->n_findings == 0)
        return;
    const ss_finding_row *x = &rp->findings[0];
    ss_buf b = {0};
    ss_headline(&b, x->kind, x->severity, x->ranks, x->n_ranks, x->phase);
    fprintf(f, "HEADLINE  %s\n\n", b.data ? b.data : "-");
    ss_buf_free(&b);
}

/* Whether the headline finding names RANK. */
static int headline_names(const ss_report *rp, int64_t rank)
{
    if (rp->n_findings == 0)
        return 0;
    for (size_t k = 0; k < rp->findings[0].n_ranks; k++)
        if (rp->findings[0].ranks[k] == rank)
            return 1;
    return 0;
}

/* Whether the headline finding names ranks, none of them RANK: a table
 * that singles RANK out must then say how that fits the headline. */
static int headline_names_other(const ss_report *rp, int64_t rank)
{
    return rp->n_findings && rp->findings[0].n_ranks &&
           !headline_names(rp, rank);
}

static void text_findings(FILE *f, const ss_report *rp)
{
    if (rp->n_findings == 0) {
        fputs("FINDINGS: none\n\n", f);
        return;
    }
    fprintf(f, "FINDINGS (%zu)\n", rp->n_findings);
    ss_buf ranks = {0};
    for (size_t i = 0; i < rp->n_findings; i++) {
        const ss_finding_row *x = &rp->findings[i];
        int crit = x->severity && strcmp(x->severity, "critical") == 0;
        ss_buf_reset(&ranks);
        for (size_t k = 0; k < x->n_ranks; k++)
            ss_buf_printf(&ranks, k ? ",%" PRId64 : "%" PRId64, x->ranks[k]);
        fprintf(f, "  %-8s  %-16s  ranks %-8s  phase %-12s  steps ",
                crit ? "CRITICAL" : "WARNING", x->kind ? x->kind : "-",
                ranks.len ? ranks.data : "-", x->phase ? x->phase : "-");
        print_steps_range(f, x->first_step, x->last_step);
        fprintf(f, "\n            %s\n", x->message ? x->message : "");
    }
    ss_buf_free(&ranks);
    fputc('\n', f);
}

static void text_steps(FILE *f, const ss_report *rp)
{
    char a[32], b[32], c[32];
    size_t n = rp->step_max.n;
    if (n == 0) {
        fputs("STEP TIME: no finalized steps\n\n", f);
        return;
    }
    fprintf(f, "STEP TIME over %zu steps (ms)   %10s %10s %10s\n", n, "p50",
            "p90", "p99");
    fprintf(f, "  median rank                 %10s %10s %10s\n",
            ss__report_ms(a, sizeof a, ss_report_pct(&rp->step_med, 500)),
            ss__report_ms(b, sizeof b, ss_report_pct(&rp->step_med, 900)),
            ss__report_ms(c, sizeof c, ss_report_pct(&rp->step_med, 990)));
    fprintf(f, "  worst rank                  %10s %10s %10s\n",
            ss__report_ms(a, sizeof a, ss_report_pct(&rp->step_max, 500)),
            ss__report_ms(b, sizeof b, ss_report_pct(&rp->step_max, 900)),
            ss__report_ms(c, sizeof c, ss_report_pct(&rp->step_max, 990)));
    /* Where the ranks wait for each other every step, their step times
     * come out alike and the last to finish is the one that waited
     * longest at the end, not the one that made the others wait: the
     * line says so rather than naming a rank the headline does not. */
    if (rp->step_worst_rank != SS_MISSING &&
        headline_names_other(rp, rp->step_worst_rank))
        fprintf(f, "  longest step time most often: rank %" PRId64
                   " (%" PRId64 " of %zu steps): synchronisation evens "
                   "step times out, so this does not name the cause (the "
                   "headline does)\n",
                rp->step_worst_rank, rp->step_worst_count, n);
    else if (rp->step_worst_rank != SS_MISSING)
        fprintf(f, "  slowest rank most often: rank %" PRId64 " (%" PRId64
                   " of %zu steps)\n",
                rp->step_worst_rank, rp->step_worst_count, n);
    fputc('\n', f);
}

/* Under the phases table, when the headline blames a phase and another
 * phase's "most often worst" is a rank the headline does not name: that
 * rank waited (in a collective) for the headline's, and the line says so,
 * so that the table does not read as a second answer. */
static void text_phases_headline(FILE *f, const ss_report *rp)
{
    if (!rp->n_findings || !rp->findings[0].phase ||
        !rp->findings[0].n_ranks)
        return;
    const ss_finding_row *x = &rp->findings[0];
    size_t others = 0;
    for (size_t i = 0; i < rp->n_phases; i++)
        others += rp->phases[i].top_rank != SS_MISSING &&
                  strcmp(rp->phases[i].name, x->phase) != 0 &&
                  headline_names_other(rp, rp->phases[i].top_rank);
    if (others)
        fprintf(f, "  (the headline blames phase %s of rank %" PRId64 "%s; "
                   "another phase's worst rank either waited for it there "
                   "or differs by little)\n",
                x->phase, x->ranks[0], x->n_ranks > 1 ? " and others" : "");
}

/* The width of a table's name column: at least MIN, as wide as the
 * longest of the N names (at most 48), so that long names (module paths,
 * "numerics.grad_nonfinite") keep the columns after them in line. */
static int name_width(const char *(*name_of)(const ss_report *, size_t),
                      const ss_report *rp, size_t n, int min)
{
    int w = min;
    for (size_t i = 0; i < n; i++) {
        const char *name = name_of(rp, i);
        int len = name ? (int)strlen(name) : 0;
        if (len > w)
            w = len < 48 ? len : 48;
    }
    return w;
}

static const char *phase_name(const ss_report *rp, size_t i)
{
    return rp->phases[i].name;
}

static const char *sync_name(const ss_report *rp, size_t i)
{
    return rp->syncs[i].name;
}

static const char *metric_name(const ss_report *rp, size_t i)
{
    return rp->metrics[i].name;
}

static void text_phases(FILE *f, const ss_report *rp)
{
    char a[32], b[32], c[32], d[32];
    if (rp->n_phases) {
        int w = name_width(phase_name, rp, rp->n_phases, 16);
        /* Where phases nest, their self time (less the phases nested in
         * them) goes next to the inclusive time. */
        fprintf(f, "%-*s %15s", 2 + w, "PHASES (ms)", "median rank p50");
        if (rp->any_nests)
            fprintf(f, " %15s", "self p50");
        fprintf(f, " %15s %15s   %s\n", "worst rank p50", "worst rank p90",
                "most often worst");
        for (size_t i = 0; i < rp->n_phases; i++) {
            const ss_report_series *p = &rp->phases[i];
            fprintf(f, "  %-*.*s %15s", w, w, p->name,
                    ss__report_ms(a, sizeof a, ss_report_pct(&p->a, 500)));
            if (rp->any_nests)
                fprintf(f, " %15s",
                        ss__report_ms(d, sizeof d,
                                      ss_report_pct(&p->self, 500)));
            fprintf(f, " %15s %15s   ",
                    ss__report_ms(b, sizeof b, ss_report_pct(&p->b, 500)),
                    ss__report_ms(c, sizeof c, ss_report_pct(&p->b, 900)));
            if (p->top_rank != SS_MISSING)
                fprintf(f, "rank %" PRId64 " (%.0f%% of steps)\n",
                        p->top_rank,
                        p->b.n ? 100.0 * (double)p->top_count /
                                     (double)p->b.n
                               : 0.0);
            else
                fputs("-\n", f);
        }
        text_phases_headline(f, rp);
        fputc('\n', f);
    }
    if (rp->n_syncs) {
        int w = name_width(sync_name, rp, rp->n_syncs, 16);
        fprintf(f, "%-*s %15s %15s %15s   %s\n", 2 + w, "SYNC ARRIVAL (ms)",
                "skew p50", "skew p90", "late p90", "most often last");
        for (size_t i = 0; i < rp->n_syncs; i++) {
            const ss_report_series *y = &rp->syncs[i];
            fprintf(f, "  %-*.*s %15s %15s %15s   ", w, w, y->name,
                    ss__report_ms(a, sizeof a, ss_report_pct(&y->a, 500)),
                    ss__report_ms(b, sizeof b, ss_report_pct(&y->a, 900)),
                    ss__report_ms(c, sizeof c, ss_report_pct(&y->b, 900)));
            if (y->top_rank != SS_MISSING)
                fprintf(f, "rank %" PRId64 " (%.0f%% of steps)\n",
                        y->top_rank,
                        y->a.n ? 100.0 * (double)y->top_count /
                                     (double)y->a.n
                               : 0.0);
            else
                fputs("-\n", f);
        }
        fputc('\n', f);
    }
}

static void text_metrics(FILE *f, const ss_report *rp)
{
    if (!rp->n_metrics)
        return;
    int w = name_width(metric_name, rp, rp->n_metrics, 19);
    fprintf(f, "%-*s %7s %10s %14s %22s %22s\n", 2 + w, "METRICS", "steps",
            "last step", "median rank", "min", "max");
    for (size_t i = 0; i < rp->n_metrics; i++) {
        const ss_report_metric *m = &rp->metrics[i];
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%.6g (rank %" PRId64 ")", m->min,
                 m->min_rank);
        snprintf(hi, sizeof hi, "%.6g (rank %" PRId64 ")", m->max,
                 m->max_rank);
        fprintf(f, "  %-*.*s %7" PRId64 " %10" PRId64 " %14.6g %22s %22s\n",
                w, w, m->name, m->steps, m->last_step, m->median, lo, hi);
    }
    fputc('\n', f);
}

/* VALUES: one line per vector name (ss_values) with its length, ranks,
 * kept steps and truncated elements, and the vectors dropped on the way;
 * nothing when the attempt has none and none were dropped. */
static void text_values(FILE *f, const ss_report *rp)
{
    int64_t dropped = rp->run.dropped_vectors;
    if (!rp->n_values && (dropped == SS_MISSING || dropped == 0))
        return;
    fprintf(f, "VALUES  %zu vector name%s", rp->n_values,
            rp->n_values == 1 ? "" : "s");
    if (dropped != SS_MISSING && dropped > 0)
        fprintf(f, "; %" PRId64 " vector%s dropped (ranks, controller and "
                   "store; EVENTS says where)", dropped,
                dropped == 1 ? "" : "s");
    fputc('\n', f);
    for (size_t i = 0; i < rp->n_values; i++) {
        const ss_values_name_row *v = &rp->values[i].name;
        fprintf(f, "  %-19s %5" PRId64 " elements%s, %zu rank%s, steps %"
                   PRId64 "-%" PRId64 " (%" PRId64 " kept)",
                v->name, v->max_n, v->labels_json ? " (labelled)" : "",
                v->n_ranks, v->n_ranks == 1 ? "" : "s", v->first_step,
                v->last_step, v->steps);
        if (v->truncated > 0)
            fprintf(f, ", %" PRId64 " element%s truncated", v->truncated,
                    v->truncated == 1 ? "" : "s");
        fputc('\n', f);
    }
    fputc('\n', f);
}

static int cmp_rank_median(const void *a, const void *b, void *arg)
{
    const ss_rank_row *ranks = arg;
    int64_t x = ranks[*(const size_t *)a].median_step_ns;
    int64_t y = ranks[*(const size_t *)b].median_step_ns;
    return (x < y) - (x > y); /* slowest first; SS_MISSING sorts last */
}

static void text_ranks(FILE *f, const ss_report *rp)
{
    if (rp->n_ranks == 0)
        return;
    char *show = calloc(rp->n_ranks, 1);
    size_t *order = malloc(rp->n_ranks * sizeof *order);
    if (!show || !order) {
        free(show);
        free(order);
        fputs("RANKS: out of memory\n\n", f);
        return;
    }
    size_t shown = 0;
    for (size_t i = 0; i < rp->n_ranks; i++) {
        order[i] = i;
        show[i] = rp->n_ranks <= MAX_RANKS_TEXT || rank_notable(rp, i);
    }
    if (rp->n_ranks > MAX_RANKS_TEXT) {
        qsort_r(order, rp->n_ranks, sizeof *order, cmp_rank_median,
                rp->ranks);
        for (size_t i = 0; i < 5 && i < rp->n_ranks; i++)
            show[order[i]] = 1;
    }
    fprintf(f, "RANKS%s\n", rp->n_ranks > MAX_RANKS_TEXT
                                ? " (failed, named by findings, and the 5 "
                                  "slowest)"
                                : "");
    /* A multi-node run names each rank's host. */
    int with_host = rp->n_nodes > 1;
    fprintf(f, "  %5s  ", "rank");
    if (with_host)
        fprintf(f, "%-20s ", "host");
    fprintf(f, "%-20s %-9s %9s %7s %10s %8s", "state", "exit",
            "last step", "steps", "median ms", "p90 ms");
    /* A phase that nests others shows the rank's self time, marked '*':
     * its inclusive time would hide a slow rank behind a shorter wait
     * nested in it. */
    for (size_t p = 0; p < rp->n_phases; p++) {
        char head[16];
        snprintf(head, sizeof head, rp->phases[p].nests ? "%.9s*" : "%.10s",
                 rp->phases[p].name);
        fprintf(f, " %10s", head);
    }
    fprintf(f, " %10s %9s\n", "max RSS", "dropped");
    char a[32], b[32], c[32], d[32], e[32], g[32];
    for (size_t i = 0; i < rp->n_ranks; i++) {
        if (!show[i])
            continue;
        shown++;
        const ss_rank_row *k = &rp->ranks[i];
        fprintf(f, "  %5zu  ", i);
        if (with_host)
            fprintf(f, "%-20.20s ", k->host ? k->host : "-");
        fprintf(f, "%-20.20s %-9s %9s %7" PRId64 " %10s %8s",
                k->state ? k->state : "-",
                ss__report_exit(a, sizeof a, k->exit_code, k->term_signal),
                ss__report_int(b, sizeof b, k->last_step), k->steps,
                ss__report_ms(c, sizeof c, k->median_step_ns),
                ss__report_ms(d, sizeof d, k->p90_step_ns));
        for (size_t p = 0; p < rp->n_phases; p++) {
            size_t cell = i * rp->n_phases + p;
            fprintf(f, " %10s",
                    ss__report_ms(e, sizeof e, rp->phases[p].nests
                                            ? rp->phase_self_med[cell]
                                            : rp->phase_med[cell]));
        }
        int64_t dropped = SS_MISSING;
        if (k->dropped_events != SS_MISSING || k->dropped_records != SS_MISSING)
            dropped = (k->dropped_events == SS_MISSING ? 0
                                                       : k->dropped_events) +
                      (k->dropped_records == SS_MISSING ? 0
                                                        : k->dropped_records);
        fprintf(f, " %10s %9s\n",
                ss__report_bytes(g, sizeof g, k->max_rss_bytes),
                ss__report_int(e, sizeof e, dropped));
    }
    if (shown < rp->n_ranks)
        fprintf(f, "  ... %zu more ranks (`--json` lists every rank)\n",
                rp->n_ranks - shown);
    if (rp->any_nests)
        fputs("  * self time: the phase less the phases nested in it\n", f);
    if (rp->n_ranks)
        fputs("  `stepscope report --rank R` explains one rank step by step\n",
              f);
    fputc('\n', f);
    free(show);
    free(order);
}

/* A node's global ranks: "2–3", "2" for one, "-" for none. */
static const char *fmt_rank_span(char *buf, size_t n, const ss_node_row *x)
{
    if (x->nranks <= 0)
        snprintf(buf, n, "-");
    else if (x->nranks == 1)
        snprintf(buf, n, "%" PRId64, x->first_rank);
    else
        snprintf(buf, n, "%" PRId64 "\u2013%" PRId64, x->first_rank,
                 x->first_rank + x->nranks - 1);
    return buf;
}

/* A node's clock against the controller's: "±0.3 ms (offset -1.2 ms)",
 * "reference" for the controller's own node, "-" when not estimated. */
static const char *fmt_clock(char *buf, size_t n, const ss_node_row *x)
{
    char a[32], b[32];
    if (x->clock_bound_ns == SS_MISSING)
        snprintf(buf, n, "-");
    else if (x->clock_bound_ns == 0 && x->clock_offset_ns == 0)
        snprintf(buf, n, "reference");
    else
        snprintf(buf, n, "\u00b1%s ms (offset %s ms)",
                 ss__report_ms(a, sizeof a, x->clock_bound_ns),
                 ss__report_ms(b, sizeof b, x->clock_offset_ns));
    return buf;
}

/* The nodes of a multi-node run; nothing for a single node (the report of
 * a run on one host is as it always was). */
static void text_nodes(FILE *f, const ss_report *rp)
{
    if (rp->n_nodes < 2)
        return;
    fputs("NODES\n", f);
    fprintf(f, "  %4s  %-20s %-21s %-11s %-12s %s\n", "node", "host", "addr",
            "ranks", "state", "clock");
    char a[48], b[96];
    for (size_t i = 0; i < rp->n_nodes; i++) {
        const ss_node_row *x = &rp->nodes[i];
        /* The en dash takes 3 bytes and one column: pad by hand. */
        fmt_rank_span(a, sizeof a, x);
        int pad = 11 - (int)strlen(a) + (strstr(a, "\u2013") ? 2 : 0);
        fprintf(f, "  %4" PRId64 "  %-20.20s %-21.21s %s%*s %-12s %s",
                x->node_rank, x->host ? x->host : "-",
                x->addr && *x->addr ? x->addr : "(local)", a,
                pad > 0 ? pad : 0, "", x->state ? x->state : "-",
                fmt_clock(b, sizeof b, x));
        if (x->lost_reason) {
            fprintf(f, "  %s", x->lost_reason);
            if (x->lost_at_step != SS_MISSING)
                fprintf(f, " at step %" PRId64, x->lost_at_step);
        }
        fputc('\n', f);
    }
    fputc('\n', f);
}

/* How much of a rank's step the host took from it (median run-queue
 * delay + stopped + throttled time per step), to pick the ranks shown. */
static int64_t host_burden(const ss_rank_host *h)
{
    int64_t v[3] = {h->median.runq_ns, h->median.stopped_ns,
                    h->median.throttled_ns};
    int64_t sum = 0;
    for (int i = 0; i < 3; i++)
        sum += v[i] == SS_MISSING ? 0 : v[i];
    return sum;
}

static int cmp_host_burden(const void *a, const void *b)
{
    int64_t x = host_burden(a), y = host_burden(b);
    return (x < y) - (x > y); /* most first */
}

/* The median and the worst step of one field: "1.2 [4.0]". */
static const char *fmt_ms_pair(char *buf, size_t n, int64_t med, int64_t max)
{
    char a[32], b[32];
    snprintf(buf, n, "%s [%s]", ss__report_ms(a, sizeof a, med),
             ss__report_ms(b, sizeof b, max));
    return buf;
}

/* The GPU lines of the HOST section (when any of the SHOWN ranks of ORDER
 * has GPU evidence): per rank, its GPU, in how many steps its clocks were
 * held down (in total and by the power cap, a thermal slowdown, a hardware
 * slowdown or brake), the time held down per step, the mean SM clock, the
 * highest temperature and the new ECC and Xid errors. */
static void text_host_gpus(FILE *f, const ss_rank_host *order, size_t shown)
{
    size_t with_gpu = 0;
    for (size_t i = 0; i < shown; i++)
        with_gpu += order[i].gpu_steps > 0;
    if (!with_gpu)
        return;
    fprintf(f, "  %5s %4s %11s %9s %9s %9s %10s %7s %6s %4s %9s\n", "rank",
            "GPU", "slowed", "power cap", "thermal", "hw slow", "slowed ms",
            "SM MHz", "max C", "ECC", "Xid");
    char a[32], b[32], c[32], d[32], e[32], g[32], t[32], ecc[32], x[48];
    for (size_t i = 0; i < shown; i++) {
        const ss_rank_host *h = &order[i];
        if (!h->gpu_steps)
            continue;
        const ss_gpu_evidence *s = &h->gpu_sum;
        snprintf(a, sizeof a, "%" PRId64 "/%" PRId64, h->gpu_slowed_steps,
                 h->gpu_steps);
        snprintf(b, sizeof b, "%" PRId64, h->gpu_power_cap_steps);
        snprintf(c, sizeof c, "%" PRId64, h->gpu_thermal_steps);
        snprintf(d, sizeof d, "%" PRId64, h->gpu_hw_slowdown_steps);
        if (s->last_xid != SS_MISSING && s->last_xid > 0)
            snprintf(x, sizeof x, "code %" PRId64, s->last_xid);
        else
            ss__report_int(x, sizeof x, s->xid_new);
        fprintf(f, "  %5" PRId64 " %4d %11s %9s %9s %9s %10s %7s %6s %4s "
                   "%9s\n",
                h->rank, (int)s->index, a, b, c, d,
                ss__report_ms(e, sizeof e,
                       s->slowed_ns == SS_MISSING
                           ? SS_MISSING
                           : s->slowed_ns / h->gpu_steps),
                ss__report_int(g, sizeof g, s->sm_clock_mhz),
                ss__report_int(t, sizeof t, s->temperature_c),
                ss__report_int(ecc, sizeof ecc, s->ecc_new), x);
    }
}

/* HOST: what the host saw of each rank's process tree per step (docs/
 * report.md), the ranks the host held back most first when there are
 * many, then the machine's pressure. */
static void text_host(FILE *f, const ss_report *rp)
{
    if (rp->n_hosts == 0)
        return;
    ss_rank_host *order = malloc(rp->n_hosts * sizeof *order);
    int64_t *psi = malloc(3 * rp->n_hosts * sizeof *psi);
    if (!order || !psi) {
        free(order);
        free(psi);
        fputs("HOST: out of memory\n\n", f);
        return;
    }
    memcpy(order, rp->hosts, rp->n_hosts * sizeof *order);
    size_t shown = rp->n_hosts;
    if (rp->n_hosts > MAX_RANKS_TEXT) {
        qsort(order, rp->n_hosts, sizeof *order, cmp_host_burden);
        shown = 8;
    }
    fprintf(f, "HOST (per step: median [worst step]; the ranks' process "
               "trees as the kernel saw them%s)\n",
            shown < rp->n_hosts ? "; the 8 ranks it held back most" : "");
    fprintf(f, "  %5s %18s %18s %8s %10s %18s %7s %9s\n", "rank",
            "run-queue ms", "stopped ms", "stopped", "CPU ms", "throttled ms",
            "preempt", "maj.fault");
    char a[64], b[64], c[32], d[64], e[32], g[32], steps[32];
    for (size_t i = 0; i < shown; i++) {
        const ss_rank_host *h = &order[i];
        snprintf(steps, sizeof steps, "%" PRId64 "/%" PRId64,
                 h->stopped_steps, h->steps);
        fprintf(f, "  %5" PRId64 " %18s %18s %8s %10s %18s %7s %9s\n",
                h->rank,
                fmt_ms_pair(a, sizeof a, h->median.runq_ns, h->max.runq_ns),
                fmt_ms_pair(b, sizeof b, h->median.stopped_ns,
                            h->max.stopped_ns),
                steps, ss__report_ms(c, sizeof c, h->median.cpu_ns),
                fmt_ms_pair(d, sizeof d, h->median.throttled_ns,
                            h->max.throttled_ns),
                ss__report_int(e, sizeof e, h->median.invol_switches),
                ss__report_int(g, sizeof g, h->median.major_faults));
    }
    if (shown < rp->n_hosts)
        fprintf(f, "  ... %zu more ranks (`--json` lists every rank)\n",
                rp->n_hosts - shown);
    text_host_gpus(f, order, shown);
    /* Pressure: the median over ranks of their medians (on cgroup v1 every
     * rank reads the machine's). */
    size_t n[3] = {0, 0, 0};
    for (size_t i = 0; i < rp->n_hosts; i++) {
        const ss_host_step *m = &rp->hosts[i].median;
        int64_t v[3] = {m->psi_cpu_ns, m->psi_memory_ns, m->psi_io_ns};
        for (int k = 0; k < 3; k++)
            if (v[k] != SS_MISSING)
                psi[(size_t)k * rp->n_hosts + n[k]++] = v[k];
    }
    int64_t med[3];
    for (int k = 0; k < 3; k++)
        med[k] = ss_median_i64(psi + (size_t)k * rp->n_hosts, n[k]);
    if (n[0] || n[1] || n[2])
        fprintf(f, "  pressure stalls per step (PSI some, median): cpu %s ms,"
                   " memory %s ms, io %s ms\n",
                ss__report_ms(a, sizeof a, med[0]),
                ss__report_ms(b, sizeof b, med[1]),
                ss__report_ms(c, sizeof c, med[2]));
    fputc('\n', f);
    free(order);
    free(psi);
}

/* Events every healthy run has (the header already says what they say);
 * the text report lists only the others. */
static int event_routine(const char *kind)
{
    static const char *const routine[] = {"run_started", "rank_connected",
                                          "rank_exited"};
    for (size_t i = 0; i < sizeof routine / sizeof routine[0]; i++)
        if (kind && strcmp(kind, routine[i]) == 0)
            return 1;
    return 0;
}

static void text_dropped_and_events(FILE *f, const ss_report *rp)
{
    int64_t ev, rec;
    char a[32], b[32], c[32];
    ss_report_dropped(rp, &ev, &rec);
    fprintf(f, "DROPPED  by the ranks: %s events, %s records; by the store: "
               "%s rank-steps",
            ss__report_int(a, sizeof a, ev), ss__report_int(b, sizeof b, rec),
            ss__report_int(c, sizeof c, rp->run.dropped_rank_steps));
    int64_t names, values, ranks;
    ss_report_names_over_limit(rp, &names, &values, &ranks);
    if (names != SS_MISSING && names > 0) {
        fprintf(f, "; over the run's name limit: %" PRId64 " value%s under %"
                   PRId64 " name%s (rank%s",
                values, values == 1 ? "" : "s", names, names == 1 ? "" : "s",
                ranks == 1 ? "" : "s");
        const char *sep = " ";
        for (size_t i = 0; i < rp->n_ranks; i++)
            if (rp->ranks[i].names_over_limit > 0 &&
                rp->ranks[i].names_over_limit != SS_MISSING) {
                fprintf(f, "%s%" PRId64, sep, rp->ranks[i].rank);
                sep = ", ";
            }
        fputc(')', f);
    }
    fputs("\n\n", f);

    size_t notable = 0;
    for (size_t i = 0; i < rp->n_events; i++)
        notable += !event_routine(rp->events[i].kind);
    if (notable == 0)
        return;
    fprintf(f, "EVENTS (%zu", notable);
    if (notable > MAX_EVENTS_TEXT)
        fprintf(f, ", the last %d shown", MAX_EVENTS_TEXT);
    fputs(")\n", f);
    size_t skip = notable > MAX_EVENTS_TEXT ? notable - MAX_EVENTS_TEXT : 0;
    for (size_t i = 0; i < rp->n_events; i++) {
        const ss_event_row *e = &rp->events[i];
        if (event_routine(e->kind))
            continue;
        if (skip) {
            skip--;
            continue;
        }
        char rank[32];
        if (e->rank != SS_MISSING)
            snprintf(rank, sizeof rank, "rank %" PRId64, e->rank);
        else
            snprintf(rank, sizeof rank, "-");
        fprintf(f, "  %s  %-9s %-20s %s\n", fmt_wall(a, sizeof a, e->at, 0),
                rank, e->kind, e->message ? e->message : "");
    }
    fputc('\n', f);
}

/* GOODPUT (every attempt of the run) and, for a name that failed often,
 * RELIABILITY. */
static void text_goodput(FILE *f, const ss_report *rp)
{
    ss_buf b = {0};
    ss_goodput_text(&b, &rp->goodput);
    if (rp->has_reliability)
        ss_reliability_text(&b, &rp->reliability, rp->run.name);
    if (b.data)
        fputs(b.data, f);
    ss_buf_free(&b);
}

/* The stacks captured while the job ran, merged: the outlier group first
 * (docs/debug.md). */
static void text_stacks(FILE *f, const ss_report *rp)
{
    if (!rp->stacks.json)
        return;
    char a[64];
    fprintf(f, "STACKS (taken %s, %s",
            fmt_wall(a, sizeof a, rp->stacks.taken_at, 1),
            !rp->stacks.trigger                        ? "on request"
            : strcmp(rp->stacks.trigger, "hang") == 0      ? "on a hang"
            : strcmp(rp->stacks.trigger, "nonfinite") == 0 ? "on a non-finite "
                                                             "value"
            : strcmp(rp->stacks.trigger, "divergence") == 0
                ? "on a replica divergence"
                : "on request");
    if (rp->stacks_total != SS_MISSING)
        fprintf(f, "; %" PRId64 " of %" PRId64 " ranks answered",
                rp->stacks_answered, rp->stacks_total);
    fputs(")\n", f);
    const char *p = rp->stacks_text ? rp->stacks_text : "";
    while (*p) {
        size_t n = strcspn(p, "\n");
        fprintf(f, "  %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    if (!rp->stacks_text)
        fputs("  (the stored snapshot could not be read)\n", f);
    fputc('\n', f);
}

void ss_report_print_text(FILE *f, ss_report *rp)
{
    ss__report_clean_for_text(rp);
    ss__report_text_header(f, rp);
    text_headline(f, rp);
    text_findings(f, rp);
    text_stacks(f, rp);
    text_steps(f, rp);
    text_goodput(f, rp);
    text_phases(f, rp);
    text_metrics(f, rp);
    text_values(f, rp);
    text_nodes(f, rp);
    text_ranks(f, rp);
    text_host(f, rp);
    text_dropped_and_events(f, rp);
}

/* `stepscope runs`: one line per run, oldest first. */
/* Run R's status as the list shows it: "failed (1)", "running". */
static void run_status_text(const ss_run_row *r, char *s, size_t len)
{
    if (r->exit_code != SS_MISSING && r->status &&
        strcmp(r->status, "running"))
        snprintf(s, len, "%s (%" PRId64 ")", r->status, r->exit_code);
    else
        snprintf(s, len, "%s", r->status ? r->status : "-");
}

void ss_runs_print_text(FILE *f, const ss_run_row *runs, size_t n,
                        const char *db_path)
{
    if (n == 0) {
        fprintf(f, "no runs in %s yet\n", db_path);
        return;
    }
    int width = 14; /* the status column, as wide as its widest */
    for (size_t i = 0; i < n; i++) {
        char s[64];
        run_status_text(&runs[i], s, sizeof s);
        if ((int)strlen(s) > width)
            width = (int)strlen(s);
    }
    fprintf(f, "%5s  %-20s %-19s %6s  %-*s %8s %8s\n", "id", "name",
            "started", "ranks", width, "status", "steps", "findings");
    for (size_t i = 0; i < n; i++) {
        const ss_run_row *r = &runs[i];
        char t[64], w[32], s[64];
        run_status_text(r, s, sizeof s);
        fprintf(f, "%5" PRId64 "  %-20.20s %-19s %6s  %-*s %8" PRId64
                   " %8" PRId64 "\n",
                r->id, r->name ? r->name : "-",
                fmt_wall(t, sizeof t, r->started_at, 1),
                ss__report_int(w, sizeof w, r->world_size), width, s,
                r->steps, r->findings);
    }
}
