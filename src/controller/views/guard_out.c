/*
 * guard_out.c - what `stepscope guard` prints: the terminal table, a
 * Markdown report for a pull-request comment (with the metric's history as
 * a text sparkline, change points marked '|'), JUnit XML for CI systems
 * (one test case per metric) and JSON (docs/guard.md, "Outputs").
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"
#include "guard_model.h"
#include "json.h"

/* V in the metric's unit, with as many decimals as it deserves. */
static const char *fmt_value(char *buf, size_t len, double v, const char *unit)
{
    if (!isfinite(v))
        snprintf(buf, len, "-");
    else if (fabs(v) >= 1000)
        snprintf(buf, len, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, len, "%.2f", v);
    else
        snprintf(buf, len, "%.3f", v);
    (void)unit;
    return buf;
}

static const char *fmt_p(char *buf, size_t len, double p)
{
    if (!isfinite(p))
        snprintf(buf, len, "-");
    else if (p < 1e-12)
        snprintf(buf, len, "<1e-12");
    else
        snprintf(buf, len, "%.2g", p);
    return buf;
}

/* The metric's name with its unit: "step_time (ms)". */
static const char *label(char *buf, size_t len, const guard_series *s)
{
    if (s->unit && s->unit[0])
        snprintf(buf, len, "%s (%s)", s->name, s->unit);
    else
        snprintf(buf, len, "%s", s->name);
    return buf;
}

const char *guard_describe(const guard_result *r, char *buf, size_t len)
{
    char a[32], b[32], p[32];
    const char *unit = r->run->unit && r->run->unit[0] ? r->run->unit : "";
    snprintf(buf, len,
             "%s %+.1f %% [%+.1f %%, %+.1f %%] (%s%s%s vs %s%s%s, p %s%s)",
             r->run->name, 100 * r->rel, 100 * r->rel_lo, 100 * r->rel_hi,
             fmt_value(a, sizeof a, r->run->value, unit), unit[0] ? " " : "",
             unit, fmt_value(b, sizeof b, r->baseline, unit),
             unit[0] ? " " : "", unit, r->t.p < 1e-12 ? "" : "= ",
             fmt_p(p, sizeof p, r->t.p));
    return buf;
}

static int shown(const guard_result *r)
{
    return r->verdict != GUARD_NO_DATA;
}

static void print_baseline_line(FILE *out, const guard_report *rep,
                                const char *prefix)
{
    fprintf(out, "%s%zu run%s", prefix, rep->n_baseline,
            rep->n_baseline == 1 ? "" : "s");
    for (size_t i = 0; i < rep->n_baseline; i++)
        fprintf(out, "%s%lld", i ? ", " : " (", (long long)rep->baseline_ids[i]);
    fprintf(out, "%s", rep->n_baseline ? ")" : "");
}

/* Whether --set determinism=1 found the run diverged. */
static int diverged(const guard_report *rep)
{
    return rep->det.checked && rep->det.against &&
           rep->det.diff.status == SS_DIFF_DIVERGED;
}

void guard_print_table(FILE *out, const guard_report *rep)
{
    const guard_run *run = rep->run;
    fprintf(out, "stepscope guard: run %lld '%s'", (long long)run->row.id,
            run->row.name ? run->row.name : "");
    print_baseline_line(out, rep, " against ");
    fputc('\n', out);
    if (rep->differences && rep->differences[0])
        fprintf(out, "  compared although they differ: %s\n", rep->differences);
    if (rep->excluded && rep->excluded[0])
        fprintf(out, "  not comparable, left out: %s\n", rep->excluded);
    if (rep->det.checked)
        fprintf(out, "determinism: %s\n", rep->det.text);
    if (rep->status == SS_GUARD_CANNOT_JUDGE) {
        fprintf(out, "cannot judge: %s\n", rep->reason);
        return;
    }
    if (!rep->n_results) { /* a divergence; the metrics not judged */
        fprintf(out, "metrics not judged: %s\nREGRESSION: determinism: %s\n",
                rep->reason, rep->det.text);
        return;
    }
    fprintf(out, "\n%-30s %11s %11s %9s %21s %8s  %s\n", "metric", "baseline",
            "run", "change", "95% interval", "p", "verdict");
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (!shown(r))
            continue;
        char name[160], a[32], b[32], p[32], ci[64], ch[32], v[64];
        label(name, sizeof name, r->run);
        if (r->verdict == GUARD_SHOWN) {
            fprintf(out, "%-30s %11.1f %11.0f %9s %21s %8s  %s\n", name,
                    r->baseline, r->run->value, "", "", "", "(count, not tested)");
            continue;
        }
        snprintf(ch, sizeof ch, "%+.1f%%", 100 * r->rel);
        snprintf(ci, sizeof ci, "[%+.1f%%, %+.1f%%]", 100 * r->rel_lo,
                 100 * r->rel_hi);
        if (r->verdict == GUARD_REGRESSED)
            snprintf(v, sizeof v, "REGRESSED since run %lld",
                     (long long)r->since_run);
        else
            snprintf(v, sizeof v, "%s", guard_verdict_word(r->verdict));
        fprintf(out, "%-30s %11s %11s %9s %21s %8s  %s\n", name,
                fmt_value(a, sizeof a, r->baseline, r->run->unit),
                fmt_value(b, sizeof b, r->run->value, r->run->unit), ch, ci,
                fmt_p(p, sizeof p, r->t.p), v);
    }
    fputc('\n', out);
    int any_change = 0;
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (!r->n_change || r->verdict == GUARD_SHOWN)
            continue;
        fprintf(out, "%s%s at run", any_change ? "; " : "change points in the "
                "history: ", r->run->name);
        for (size_t k = 0; k < r->n_change; k++)
            fprintf(out, "%s %lld", k ? "," : "", (long long)r->change_runs[k]);
        any_change = 1;
    }
    if (any_change)
        fputc('\n', out);
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        char d[512];
        if (r->verdict == GUARD_SUSPECT)
            fprintf(out, "suspect (not yet %zu runs in a row): %s, since run "
                    "%lld\n", rep->settings->consecutive,
                    guard_describe(r, d, sizeof d), (long long)r->since_run);
    }
    if (rep->status == SS_GUARD_OK) {
        fprintf(out, "no regression\n");
        return;
    }
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (r->verdict != GUARD_REGRESSED)
            continue;
        char d[512];
        fprintf(out, "REGRESSION: %s, since run %lld\n",
                guard_describe(r, d, sizeof d), (long long)r->since_run);
    }
    if (diverged(rep))
        fprintf(out, "REGRESSION: determinism: %s\n", rep->det.text);
}

/* ---- Markdown ---- */

/* The history as ▁..█ (min to max), '|' before each change point. */
static void sparkline(FILE *out, const guard_result *r)
{
    static const char *const bars[] = {"▁", "▂", "▃", "▄",
                                       "▅", "▆", "▇", "█"};
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < r->n_history; i++) {
        lo = fmin(lo, r->history_values[i]);
        hi = fmax(hi, r->history_values[i]);
    }
    for (size_t i = 0; i < r->n_history; i++) {
        for (size_t c = 0; c < r->n_change; c++)
            if (r->change_runs[c] == r->history_runs[i])
                fputc('|', out);
        int level = hi > lo ? (int)floor((r->history_values[i] - lo) /
                                         (hi - lo) * 7.999)
                            : 0;
        fputs(bars[level], out);
    }
}

void guard_write_markdown(FILE *out, const guard_report *rep)
{
    const guard_run *run = rep->run;
    const char *head = rep->status == SS_GUARD_OK ? "no regression"
                       : rep->status == SS_GUARD_REGRESSION ? "**regression**"
                                                            : "cannot judge";
    fprintf(out, "### stepscope guard: %s in run %lld (`%s`)\n\n", head,
            (long long)run->row.id, run->row.name ? run->row.name : "");
    print_baseline_line(out, rep, "Baseline: ");
    fprintf(out, " of the same name and fingerprint.\n");
    if (rep->differences && rep->differences[0])
        fprintf(out, "Compared although they differ: %s.\n", rep->differences);
    if (rep->excluded && rep->excluded[0])
        fprintf(out, "Not comparable, left out: %s.\n", rep->excluded);
    if (rep->det.checked)
        fprintf(out, "\nDeterminism: %s%s%s.\n", diverged(rep) ? "**" : "",
                rep->det.text, diverged(rep) ? "**" : "");
    if (rep->status == SS_GUARD_CANNOT_JUDGE || !rep->n_results) {
        fprintf(out, "\n%s: %s.\n", rep->status == SS_GUARD_CANNOT_JUDGE
                                          ? "Cannot judge"
                                          : "Metrics not judged",
                rep->reason);
        return;
    }
    fprintf(out, "\n| metric | baseline | run | change (%.0f %% interval) | p "
            "| history | verdict |\n|---|---:|---:|---|---:|---|---|\n",
            100 * rep->settings->confidence);
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (!shown(r) || r->verdict == GUARD_SHOWN)
            continue;
        char name[160], a[32], b[32], p[32];
        label(name, sizeof name, r->run);
        fprintf(out, "| %s | %s | %s | %+.1f %% (%+.1f … %+.1f) | %s | `", name,
                fmt_value(a, sizeof a, r->baseline, r->run->unit),
                fmt_value(b, sizeof b, r->run->value, r->run->unit),
                100 * r->rel, 100 * r->rel_lo, 100 * r->rel_hi,
                fmt_p(p, sizeof p, r->t.p));
        sparkline(out, r);
        if (r->verdict == GUARD_REGRESSED)
            fprintf(out, "` | **regressed** since run %lld |\n",
                    (long long)r->since_run);
        else
            fprintf(out, "` | %s |\n", guard_verdict_word(r->verdict));
    }
    int any = 0;
    for (size_t i = 0; i < rep->n_results; i++)
        if (rep->results[i].verdict == GUARD_SHOWN) {
            fprintf(out, "%s`%s` %.0f (baseline mean %.1f)",
                    any ? ", " : "\nFindings: ", rep->results[i].run->name,
                    rep->results[i].run->value, rep->results[i].baseline);
            any = 1;
        }
    fprintf(out, "%s\nHistory: one bar per comparable run, oldest first, the "
            "judged run last; `|` marks a change point.\n", any ? ".\n" : "");
}

/* ---- JUnit XML ---- */

static void xml_str(FILE *out, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, out);
        }
    }
}

void guard_write_junit(FILE *out, const guard_report *rep)
{
    size_t tests = 0, failures = 0;
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (r->verdict == GUARD_SHOWN || !shown(r))
            continue;
        tests++;
        failures += r->verdict == GUARD_REGRESSED;
    }
    const char *name = rep->run->row.name ? rep->run->row.name : "";
    int cannot = rep->status == SS_GUARD_CANNOT_JUDGE;
    if (!cannot && rep->det.checked) {
        tests++;
        failures += diverged(rep);
    }
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites>\n<testsuite name=\"stepscope guard: ");
    xml_str(out, name);
    fprintf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" "
            "skipped=\"%d\">\n", cannot ? 1 : tests, failures, cannot);
    if (cannot) {
        fprintf(out, "  <testcase classname=\"stepscope.guard\" name=\"run %lld\">"
                "<skipped message=\"", (long long)rep->run->row.id);
        xml_str(out, rep->reason);
        fprintf(out, "\"/></testcase>\n");
    }
    for (size_t i = 0; !cannot && i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        if (r->verdict == GUARD_SHOWN || !shown(r))
            continue;
        fprintf(out, "  <testcase classname=\"stepscope.guard.");
        xml_str(out, name);
        fprintf(out, "\" name=\"");
        xml_str(out, r->run->name);
        fprintf(out, "\">");
        if (r->verdict == GUARD_REGRESSED) {
            char d[512];
            guard_describe(r, d, sizeof d);
            fprintf(out, "<failure message=\"");
            xml_str(out, d);
            fprintf(out, "\">run %lld against %zu baseline runs; regressed since "
                    "run %lld</failure>", (long long)rep->run->row.id,
                    rep->n_baseline, (long long)r->since_run);
        }
        fprintf(out, "</testcase>\n");
    }
    if (!cannot && rep->det.checked) {
        fprintf(out, "  <testcase classname=\"stepscope.guard.");
        xml_str(out, name);
        fprintf(out, "\" name=\"determinism\">");
        if (diverged(rep)) {
            fprintf(out, "<failure message=\"");
            xml_str(out, rep->det.text);
            fprintf(out, "\">run %lld against run %lld</failure>",
                    (long long)rep->run->row.id, (long long)rep->det.against);
        }
        fprintf(out, "</testcase>\n");
    }
    fprintf(out, "</testsuite>\n</testsuites>\n");
}

/* ---- JSON ---- */

static void json_num(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.6g", v);
    else
        fputs("null", out);
}

void guard_write_json(FILE *out, const guard_report *rep)
{
    const guard_run *run = rep->run;
    fprintf(out, "{\"db\":");
    ss_json_fput_str(out, rep->db);
    fprintf(out, ",\"verdict\":\"%s\",\"exit_status\":%d,\"reason\":",
            guard_status_word(rep->status), rep->status);
    if (rep->status == SS_GUARD_CANNOT_JUDGE)
        ss_json_fput_str(out, rep->reason);
    else
        fputs("null", out);
    fprintf(out, ",\"run\":%lld,\"name\":", (long long)run->row.id);
    ss_json_fput_str(out, run->row.name);
    fprintf(out, ",\"fingerprint\":%s,\"baseline\":[",
            run->fingerprint ? run->fingerprint : "null");
    for (size_t i = 0; i < rep->n_baseline; i++)
        fprintf(out, "%s%lld", i ? "," : "", (long long)rep->baseline_ids[i]);
    fprintf(out, "],\"left_out\":");
    ss_json_fput_str(out, rep->excluded ? rep->excluded : "");
    fprintf(out, ",\"differences\":");
    ss_json_fput_str(out, rep->differences ? rep->differences : "");
    fprintf(out, ",\"settings\":{\"alpha\":");
    json_num(out, rep->settings->alpha);
    fprintf(out, ",\"run_alpha\":");
    json_num(out, rep->settings->run_alpha);
    fprintf(out, ",\"confidence\":");
    json_num(out, rep->settings->confidence);
    fprintf(out, ",\"warmup\":%zu,\"min_runs\":%zu,\"last\":%zu,"
            "\"history\":%zu,\"consecutive\":%zu,\"determinism\":%d},"
            "\"determinism\":", rep->settings->warmup,
            rep->settings->min_runs, rep->settings->last,
            rep->settings->history, rep->settings->consecutive,
            rep->settings->determinism);
    if (!rep->det.checked) {
        fputs("null", out);
    } else {
        fprintf(out, "{\"against\":");
        if (rep->det.against)
            fprintf(out, "%lld", (long long)rep->det.against);
        else
            fputs("null", out);
        fprintf(out, ",\"text\":");
        ss_json_fput_str(out, rep->det.text);
        fprintf(out, ",\"diff\":");
        ss_buf b = {0};
        if (rep->det.against)
            ss_run_diff_json(&b, &rep->det.a, &rep->det.b, &rep->det.diff);
        if (b.len && !b.oom)
            fwrite(b.data, 1, b.len - 1, out); /* less its newline */
        else
            fputs("null", out);
        ss_buf_free(&b);
        fputc('}', out);
    }
    fprintf(out, ",\"metrics\":[");
    for (size_t i = 0; i < rep->n_results; i++) {
        const guard_result *r = &rep->results[i];
        fprintf(out, "%s{\"name\":", i ? "," : "");
        ss_json_fput_str(out, r->run->name);
        fprintf(out, ",\"unit\":");
        ss_json_fput_str(out, r->run->unit);
        fprintf(out, ",\"worse\":\"%s\",\"verdict\":\"%s\",\"value\":",
                r->run->direction == GUARD_HIGHER_IS_WORSE   ? "higher"
                : r->run->direction == GUARD_LOWER_IS_WORSE ? "lower"
                                                            : "either",
                guard_verdict_word(r->verdict));
        json_num(out, r->run->value);
        fprintf(out, ",\"baseline\":");
        json_num(out, r->baseline);
        fprintf(out, ",\"samples\":%zu,\"baseline_samples\":%zu",
                r->run->n, r->n_baseline);
        if (r->verdict != GUARD_SHOWN && r->verdict != GUARD_NO_DATA) {
            fprintf(out, ",\"shift\":");
            json_num(out, r->t.shift);
            fprintf(out, ",\"shift_low\":");
            json_num(out, r->t.lo);
            fprintf(out, ",\"shift_high\":");
            json_num(out, r->t.hi);
            fprintf(out, ",\"relative\":");
            json_num(out, r->rel);
            fprintf(out, ",\"relative_low\":");
            json_num(out, r->rel_lo);
            fprintf(out, ",\"relative_high\":");
            json_num(out, r->rel_hi);
            fprintf(out, ",\"p\":");
            json_num(out, r->t.p);
            fprintf(out, ",\"threshold\":");
            json_num(out, r->threshold);
            fprintf(out, ",\"run_level_bound\":");
            json_num(out, r->spread);
            fprintf(out, ",\"baseline_runs_left_out\":%zu", r->runs_left_out);
        }
        fprintf(out, ",\"since_run\":");
        if (r->since_run)
            fprintf(out, "%lld", (long long)r->since_run);
        else
            fputs("null", out);
        fprintf(out, ",\"history\":[");
        for (size_t k = 0; k < r->n_history; k++) {
            fprintf(out, "%s{\"run\":%lld,\"value\":", k ? "," : "",
                    (long long)r->history_runs[k]);
            json_num(out, r->history_values[k]);
            fputc('}', out);
        }
        fprintf(out, "],\"change_points\":[");
        for (size_t k = 0; k < r->n_change; k++)
            fprintf(out, "%s%lld", k ? "," : "", (long long)r->change_runs[k]);
        fprintf(out, "]}");
    }
    fprintf(out, "]}\n");
}
