/*
 * goodput_view.c - `stepscope goodput` and the GOODPUT / RELIABILITY
 * renderings shared with `report` (goodput_view.h).  Numbers come from
 * goodput.h; this file only lays them out.
 */
#include "goodput_view.h"
#include "clocks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A duration: "0 s", milliseconds below 1 s, seconds with two decimals below
 * 10 s and one above, hours from 10 h; "-" for SS_MISSING. */
static const char *fmt_s(char *buf, size_t n, int64_t ns)
{
    if (ns == SS_MISSING)
        snprintf(buf, n, "-");
    else if (ns == 0)
        snprintf(buf, n, "0 s");
    else if (ns < 1000000000)
        snprintf(buf, n, "%.1f ms", (double)ns / 1e6);
    else if (ns < 36000 * (int64_t)1000000000)
        snprintf(buf, n, ns < 10000000000 ? "%.2f s" : "%.1f s",
                 (double)ns / 1e9);
    else
        snprintf(buf, n, "%.2f h", (double)ns / 3.6e12);
    return buf;
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

void ss_goodput_text(ss_buf *b, const ss_goodput *g)
{
    char s[32], w[32];
    ss_buf_printf(b, "GOODPUT %.1f %% (productive %s of %s wall%s)\n",
                  100.0 * g->goodput,
                  fmt_s(s, sizeof s, g->ns[SS_GP_PRODUCTIVE]),
                  fmt_s(w, sizeof w, g->wall_ns),
                  g->running ? ", so far" : "");
    for (int c = 0; c < SS_GP_N; c++)
        ss_buf_printf(b, "  %-11s %10s %5.1f %%\n", ss_gp_category_name(c),
                      fmt_s(s, sizeof s, g->ns[c]), pct(g->ns[c], g->wall_ns));
    if (g->n_attempts == 0) {
        ss_buf_puts(b, "\n");
        return;
    }
    ss_buf_printf(b, "  %-7s %-12s %-11s %9s", "attempt", "cause", "steps",
                  "resumed");
    for (int c = 0; c < SS_GP_N; c++)
        ss_buf_printf(b, " %10s", ss_gp_category_name(c));
    ss_buf_puts(b, "\n");
    for (size_t i = 0; i < g->n_attempts; i++) {
        const ss_gp_attempt *a = &g->attempts[i];
        char steps[32] = "-", res[24] = "-";
        if (a->steps && a->first_step != SS_MISSING &&
            a->last_step != SS_MISSING)
            snprintf(steps, sizeof steps, "%" PRId64 "-%" PRId64,
                     a->first_step, a->last_step);
        else if (a->steps)
            snprintf(steps, sizeof steps, "%" PRId64, a->steps);
        if (a->resumed_from != SS_MISSING)
            snprintf(res, sizeof res, "%" PRId64, a->resumed_from);
        ss_buf_printf(b, "  %-7" PRId64 " %-12s %-11s %9s", a->attempt,
                      a->cause[0] ? a->cause : "-", steps, res);
        for (int c = 0; c < SS_GP_N; c++)
            ss_buf_printf(b, " %10s", fmt_s(s, sizeof s, a->ns[c]));
        ss_buf_puts(b, "\n");
    }
    ss_buf_puts(b, "\n");
}

void ss_reliability_text(ss_buf *b, const ss_reliability *rel,
                         const char *name)
{
    char s1[32], s2[32], s3[32];
    ss_buf_printf(b, "RELIABILITY of the %" PRId64 " run%s named %s (%" PRId64
                     " failed; injected faults excluded)\n",
                  rel->runs, rel->runs == 1 ? "" : "s", name,
                  rel->failed_runs);
    ss_buf_printf(b, "  up %s, %" PRId64 " failure%s",
                  fmt_s(s1, sizeof s1, rel->up_ns), rel->failures,
                  rel->failures == 1 ? "" : "s");
    if (rel->failures_per_hour >= 0)
        ss_buf_printf(b, ", %.2f per hour", rel->failures_per_hour);
    ss_buf_puts(b, "\n");
    for (int c = 0; c < SS_GP_CAUSES; c++)
        if (rel->by_cause[c])
            ss_buf_printf(b, "    %-13s %" PRId64 " (%.2f per hour)\n",
                          ss_gp_cause_name(c), rel->by_cause[c],
                          rel->per_hour[c]);
    ss_buf_printf(b, "  MTBF %s, MTTR %s (%" PRId64 " recover%s)\n",
                  fmt_s(s1, sizeof s1, rel->mtbf_ns),
                  fmt_s(s2, sizeof s2, rel->mttr_ns), rel->recoveries,
                  rel->recoveries == 1 ? "y" : "ies");
    ss_buf_printf(b, "  checkpoint: %" PRId64 " save%s, cost %s, every %s",
                  rel->saves, rel->saves == 1 ? "" : "s",
                  fmt_s(s1, sizeof s1, rel->save_cost_ns),
                  fmt_s(s2, sizeof s2, rel->measured_interval_ns));
    if (rel->optimal_interval_ns != SS_MISSING) {
        ss_buf_printf(b, "; Young/Daly interval %s",
                      fmt_s(s3, sizeof s3, rel->optimal_interval_ns));
        if (rel->gain >= 0)
            ss_buf_printf(b, " (expected waste %.1f %% -> %.1f %%: %+.1f "
                             "points of goodput)",
                          100.0 * rel->waste_measured,
                          100.0 * rel->waste_optimal, 100.0 * rel->gain);
    }
    ss_buf_puts(b, "\n\n");
}

/* Calls FN for each run named NAME, the latest SS_RELIABILITY_MAX_RUNS,
 * oldest first.  Returns 0, SS_READ_NOT_FOUND when none is so named, or
 * the reader's error. */
typedef int (*run_fn)(void *ctx, const ss_goodput *g);

static int each_run_named(ss_reader *r, const char *name, ss_wall_ns now,
                          run_fn fn, void *ctx)
{
    ss_run_row *runs;
    size_t n;
    int rc = ss_reader_runs(r, &runs, &n);
    if (rc)
        return rc;
    size_t seen = 0, skip = 0;
    for (size_t i = 0; i < n; i++)
        seen += runs[i].name && strcmp(runs[i].name, name) == 0;
    if (seen > SS_RELIABILITY_MAX_RUNS)
        skip = seen - SS_RELIABILITY_MAX_RUNS;
    size_t k = 0, done = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!runs[i].name || strcmp(runs[i].name, name) != 0 || k++ < skip)
            continue;
        ss_goodput g;
        rc = ss_goodput_load(r, runs[i].id, now, &g);
        if (rc == 0)
            rc = fn(ctx, &g);
        ss_goodput_free(&g);
        done++;
    }
    ss_run_rows_free(runs, n);
    return rc == 0 && done == 0 ? SS_READ_NOT_FOUND : rc;
}

static int add_run(void *ctx, const ss_goodput *g)
{
    ss_reliability_add(ctx, g);
    return 0;
}

int ss_reliability_load(ss_reader *r, const char *name, ss_wall_ns now,
                        ss_reliability *rel)
{
    memset(rel, 0, sizeof *rel);
    int rc = each_run_named(r, name, now, add_run, rel);
    ss_reliability_finish(rel);
    return rc;
}

/* ---- the command ---- */

typedef struct {
    ss_buf *b;
    int json;
    ss_reliability rel;
    int n;
} name_ctx;

static int print_named(void *ctx, const ss_goodput *g)
{
    name_ctx *c = ctx;
    ss_reliability_add(&c->rel, g);
    if (c->json) {
        ss_buf_puts(c->b, c->n++ ? ",\n    " : "\n    ");
        ss_goodput_json(c->b, g);
    } else {
        char w[32];
        snprintf(w, sizeof w, "%.1f s", (double)g->wall_ns / 1e9);
        if (c->n++ == 0)
            ss_buf_printf(c->b, "%5s %8s %12s %9s %9s\n", "run", "attempts",
                          "wall", "goodput", "failures");
        int64_t f = 0;
        for (int k = 0; k < SS_GP_CAUSES; k++)
            f += g->failures[k];
        ss_buf_printf(c->b, "%5" PRId64 " %8zu %12s %7.1f %% %9" PRId64 "\n",
                      g->run_id, g->n_attempts, w, 100.0 * g->goodput, f);
    }
    return 0;
}

int ss_goodput_cmd(const ss_goodput_opts *o, FILE *out, FILE *err)
{
    const char *name = o->name;
    int json = o->json;
    char msg[1024];
    ss_reader *r = ss_reader_open(o->db, msg, sizeof msg);
    if (!r) {
        fprintf(err, "stepscope goodput: %s\n", msg);
        return 1;
    }
    ss_buf b = {0};
    int rc;
    ss_wall_ns now = ss_wall_now();
    if (name) {
        name_ctx c = {&b, json, {0}, 0};
        if (json) {
            ss_buf_puts(&b, "{\"name\": ");
            ss_buf_json_str(&b, name);
            ss_buf_puts(&b, ", \"runs\": [");
        }
        rc = each_run_named(r, name, now, print_named, &c);
        ss_reliability_finish(&c.rel);
        if (rc == SS_READ_NOT_FOUND)
            fprintf(err, "stepscope goodput: no run named '%s' in %s\n", name,
                    ss_reader_path(r));
        else if (rc)
            fprintf(err, "stepscope goodput: %s\n", ss_reader_errmsg(r));
        else if (json) {
            ss_buf_puts(&b, "\n  ],\n  \"reliability\": ");
            ss_reliability_json(&b, &c.rel);
            ss_buf_puts(&b, "}\n");
        } else {
            ss_buf_puts(&b, "\n");
            ss_reliability_text(&b, &c.rel, name);
        }
    } else {
        int64_t run_id;
        ss_goodput g = {0};
        rc = ss_reader_select_run(r, o->run, &run_id);
        if (rc == 0)
            rc = ss_goodput_load(r, run_id, now, &g);
        if (rc)
            fprintf(err, "stepscope goodput: %s\n", ss_reader_errmsg(r));
        else if (json) {
            ss_goodput_json(&b, &g);
            ss_buf_puts(&b, "\n");
        } else {
            ss_buf_printf(&b, "run %" PRId64 "\n", run_id);
            ss_goodput_text(&b, &g);
        }
        ss_goodput_free(&g);
    }
    ss_reader_close(r);
    int status = rc ? 1 : 0;
    if (status == 0) {
        if (b.oom) {
            fprintf(err, "stepscope goodput: out of memory\n");
            status = 1;
        } else if (b.data) {
            fwrite(b.data, 1, b.len, out);
        }
        if (fflush(out) != 0 || ferror(out)) {
            fprintf(err, "stepscope goodput: writing the output: %s\n",
                    strerror(errno));
            status = 1;
        }
    }
    ss_buf_free(&b);
    return status;
}
