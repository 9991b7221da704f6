/*
 * detector_text.c - how the detectors word a finding: the numbers, byte
 * sizes and rank lists of its message, and its evidence object
 * (detectors_internal.h); and the float8 findings' messages and evidence
 * whole (ss__fp8_describe), from what detect_fp8.c judged.
 *
 * Evidence goes through base/json.h (ss_buf, ss_buf_json_str,
 * ss_buf_json_int), so its strings are escaped like every other JSON the
 * controller writes; it lands in the fixed-size ss_finding.evidence_json,
 * and an item that would not fit there is left out whole.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- message text ---- */

const char *ss__fmt_ms(char *buf, size_t len, double ms)
{
    double a = fabs(ms);
    if (a == 0 || a >= 1) {
        snprintf(buf, len, a >= 10 ? "%.0f" : "%.1f", ms);
        return buf;
    }
    /* Under a millisecond, two significant digits: 0.04 is not 0.0 and
     * 0.15 not 0.2 (a rank's 0.15 ms beside its peers' 0.10). */
    int decimals = 2;
    for (double lim = 0.1; a < lim && decimals < 4; lim /= 10)
        decimals++;
    snprintf(buf, len, "%.*f", decimals, ms);
    size_t n = strlen(buf); /* 0.50 reads 0.5 */
    while (n > 3 && buf[n - 1] == '0' && buf[n - 2] != '.')
        buf[--n] = '\0';
    return buf;
}

const char *ss__fmt_bytes(char *buf, size_t len, double bytes)
{
    double a = fabs(bytes);
    if (a >= 1024 * MIB)
        snprintf(buf, len, "%.2f GiB", bytes / (1024 * MIB));
    else if (a >= MIB)
        snprintf(buf, len, "%.1f MiB", bytes / MIB);
    else
        snprintf(buf, len, "%.0f KiB", bytes / 1024);
    return buf;
}

const char *ss__fmt_ranks(char *buf, size_t len, const int32_t *ranks,
                          uint32_t n, uint32_t total)
{
    size_t o = (size_t)snprintf(buf, len, n == 1 ? "rank" : "ranks");
    for (uint32_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s %d",
                              i == 0           ? ""
                              : i + 1 == n && total == n ? " and"
                                                         : ",",
                              ranks[i]);
    if (total > n && o < len)
        snprintf(buf + o, len - o, " (%u ranks in all)", total);
    return buf;
}

const char *ss__fmt_clock_bound(char *buf, size_t len, int64_t bound_ns)
{
    char ms[32];
    if (bound_ns <= 0)
        snprintf(buf, len, "%s", "");
    else if (bound_ns < 100000)
        snprintf(buf, len, " (clocks aligned \u00b1 %.0f \u00b5s)",
                 ceil((double)bound_ns / 1e3));
    else
        snprintf(buf, len, " (clocks aligned \u00b1 %s ms)",
                 ss__fmt_ms(ms, sizeof ms, (double)bound_ns / 1e6));
    return buf;
}

const char *ss__name_of(const ss_detectors *d, int idx)
{
    if (idx < 0 || idx == NO_NAME || !d->names || !d->names[idx])
        return "?";
    return d->names[idx];
}

void ss__set_ranks(ss_finding *f, const int32_t *ranks, uint32_t n)
{
    f->n_ranks = n > SS_FINDING_MAX_RANKS ? SS_FINDING_MAX_RANKS : n;
    if (f->n_ranks) /* RANKS may be NULL for none */
        memcpy(f->ranks, ranks, f->n_ranks * sizeof ranks[0]);
}

/* ---- evidence ---- */

#define EVIDENCE_CAP sizeof(((ss_finding *)0)->evidence_json)

void ss__evidence_begin(ss_buf *ev)
{
    ss_buf_reset(ev);
    ss_buf_puts(ev, "{");
}

/* Starts an item: the separator and "KEY":.  Returns the length to go
 * back to when the item does not fit. */
static size_t item_begin(ss_buf *ev, const char *key)
{
    size_t before = ev->len;
    if (before > 1)
        ss_buf_puts(ev, ",");
    ss_buf_json_str(ev, key);
    ss_buf_puts(ev, ":");
    return before;
}

/* Ends an item: drops it when the object would no longer fit in the
 * finding with its closing brace and NUL. */
static void item_end(ss_buf *ev, size_t before)
{
    if (ev->oom || ev->len + 2 <= EVIDENCE_CAP)
        return;
    ev->len = before;
    ev->data[before] = '\0';
}

void ss__evidence_str(ss_buf *ev, const char *key, const char *value)
{
    size_t before = item_begin(ev, key);
    ss_buf_json_str(ev, value);
    item_end(ev, before);
}

void ss__evidence_num(ss_buf *ev, const char *key, double v)
{
    if (!isfinite(v))
        return;
    char num[64];
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(num, sizeof num, "%.0f", v);
    } else {
        snprintf(num, sizeof num, "%.3f", v);
        char *e = num + strlen(num) - 1;
        while (*e == '0')
            *e-- = '\0';
        if (*e == '.')
            *e = '\0';
        if (strcmp(num, "-0") == 0)
            strcpy(num, "0");
    }
    size_t before = item_begin(ev, key);
    ss_buf_puts(ev, num);
    item_end(ev, before);
}

void ss__evidence_int(ss_buf *ev, const char *key, int64_t v)
{
    size_t before = item_begin(ev, key);
    ss_buf_json_int(ev, v);
    item_end(ev, before);
}

void ss__evidence_clock_bound(ss_buf *ev, int64_t bound_ns, int uncertain)
{
    if (bound_ns <= 0)
        return;
    ss__evidence_int(ev, "clock_bound_ns", bound_ns);
    if (uncertain)
        ss__evidence_int(ev, "clock_uncertain", 1);
}

void ss__evidence_end(ss_buf *ev, ss_finding *f)
{
    ss_buf_puts(ev, "}");
    /* out of memory: an empty object rather than a partial one */
    snprintf(f->evidence_json, sizeof f->evidence_json, "%s",
             ev->oom || !ev->data ? "{}" : ev->data);
}

/* ---- float8 health ---- */

const char *ss__fp8_format_name(int code)
{
    static const char *const names[] = {"e4m3", "e5m2", "e4m3fnuz",
                                        "e5m2fnuz"};
    return code >= 1 && code <= 4 ? names[code - 1] : "?";
}

/* A float8 number for a person: 3 significant digits, "inf", "nan". */
static const char *fmt_g(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "nan");
    else if (isinf(v))
        snprintf(buf, len, v > 0 ? "inf" : "-inf");
    else
        snprintf(buf, len, "%.3g", v);
    return buf;
}

/* A float8 number in evidence: 6 significant digits (an amax of 3e-10
 * stays readable), or the string "inf", "-inf" or "nan". */
static void evidence_g(ss_buf *ev, const char *key, double v)
{
    char num[32];
    if (!isfinite(v)) {
        ss__evidence_str(ev, key, fmt_g(num, sizeof num, v));
        return;
    }
    snprintf(num, sizeof num, "%.6g", v);
    size_t before = item_begin(ev, key);
    ss_buf_puts(ev, num);
    item_end(ev, before);
}

/* A fraction as a percentage for a person: "1.56", "99.8", "0.1". */
static const char *fmt_pct(char *buf, size_t len, double frac)
{
    snprintf(buf, len, "%.3g", frac * 100);
    return buf;
}

/* LABEL's layer (up to its last dot) into LAYER, and its tensor after it
 * ("" without a dot). */
static const char *split_label(const char *label, char *layer, size_t len)
{
    const char *dot = strrchr(label, '.');
    size_t n = dot ? (size_t)(dot - label) : strlen(label);
    snprintf(layer, len, "%.*s", (int)n, label);
    return dot ? dot + 1 : "";
}

/* The tensor's name in a sentence: "grad" is "gradient". */
static const char *tensor_words(const char *tensor)
{
    return strcmp(tensor, "grad") == 0 ? "gradient" : tensor;
}

/* Why a scale is invalid: its evidence key and its words. */
static const char *scale_cause(double scale, double amax, int words)
{
    if (amax == 0 && !(isfinite(scale) && scale > 0))
        return words ? "amax is 0: the tensor is all zeros"
                     : "amax_zero";
    if (!isfinite(amax))
        return words ? "its amax is not finite: the tensor holds NaN or "
                       "infinities"
                     : "amax_nonfinite";
    if (!isfinite(scale))
        return words ? "the scale is not finite" : "scale_nonfinite";
    return words ? "a scale must be above 0" : "scale_nonpositive";
}

void ss__fp8_describe(ss_detectors *d, ss_finding *f, const ss__fp8_words *w)
{
    char layer[128], ranks[160], a[32], b[32], c[32], e[32];
    const char *tensor = split_label(w->label, layer, sizeof layer);
    const char *fmt = ss__fp8_format_name(w->format);
    ss__set_ranks(f, w->ranks, w->n_ranks);
    ss__fmt_ranks(ranks, sizeof ranks, w->ranks,
                  w->n_ranks < MAX_LISTED ? w->n_ranks : MAX_LISTED,
                  w->total_ranks);
    f->phase[0] = '\0';
    f->first_step = w->first_step;
    f->severity = w->kind == SS_FP8_SCALE ? SS_CRITICAL : SS_WARNING;
    if (w->kind == SS_FP8_SCALE) {
        snprintf(f->message, sizeof f->message,
                 "Invalid float8 scale of layer %s's %s (%s) on %s in step "
                 "%" PRIu64 ": %s (%s), so its cast gives NaN or "
                 "infinities%s", layer, tensor_words(tensor), fmt, ranks,
                 w->first_step, fmt_g(a, sizeof a, w->scale),
                 scale_cause(w->scale, w->amax, 1),
                 w->tensors > 1 || w->steps > 1 ? "" : ".");
        if (w->tensors > 1 || w->steps > 1) {
            size_t o = strlen(f->message);
            snprintf(f->message + o, sizeof f->message - o,
                     "; %u tensor%s on %u rank%s had an invalid scale in %u "
                     "step%s from then on.", w->tensors, w->tensors == 1 ? "" : "s",
                     w->spread_ranks, w->spread_ranks == 1 ? "" : "s",
                     w->steps, w->steps == 1 ? "" : "s");
        }
    } else {
        int sat = w->kind == SS_FP8_SATURATION;
        snprintf(f->message, sizeof f->message,
                 "Float8 %s in layer %s's %s (%s) on %s: the cast %s up to "
                 "%s %% of its %s (threshold %s %%) in %u step%s since step "
                 "%" PRIu64 "; in step %" PRIu64 " (rank %d) amax %s, scale "
                 "%s: %s.", sat ? "saturation" : "underflow", layer,
                 tensor_words(tensor), fmt, ranks,
                 sat ? "clipped" : "flushed to zero",
                 fmt_pct(a, sizeof a, w->worst),
                 sat ? "elements" : "non-zero values",
                 fmt_pct(b, sizeof b, w->threshold), w->steps,
                 w->steps == 1 ? "" : "s", w->first_step, w->worst_step,
                 (int)w->worst_rank, fmt_g(c, sizeof c, w->amax),
                 fmt_g(e, sizeof e, w->scale),
                 sat ? "the scale is too large for the values it meets "
                       "(a stale or fixed scale behind a growing tensor)"
                     : "the scale is too small for values this small (a "
                       "stale or fixed scale, or values beyond the "
                       "format's range below its amax)");
    }
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "layer", layer);
    ss__evidence_str(ev, "tensor", tensor);
    ss__evidence_str(ev, "label", w->label);
    ss__evidence_str(ev, "format", fmt);
    if (w->kind == SS_FP8_SCALE) {
        ss__evidence_str(ev, "cause", scale_cause(w->scale, w->amax, 0));
        evidence_g(ev, "scale", w->scale);
        evidence_g(ev, "amax", w->amax);
        ss__evidence_int(ev, "invalid_steps", w->steps);
        ss__evidence_int(ev, "invalid_tensors", w->tensors);
        ss__evidence_int(ev, "invalid_ranks", w->spread_ranks);
    } else {
        evidence_g(ev, "threshold_pct", w->threshold * 100);
        ss__evidence_int(ev, "steps_over", w->steps);
        evidence_g(ev, "worst_pct", w->worst * 100);
        ss__evidence_int(ev, "worst_step", (int64_t)w->worst_step);
        ss__evidence_int(ev, "worst_rank", w->worst_rank);
        evidence_g(ev, "amax", w->amax);
        evidence_g(ev, "scale", w->scale);
        ss__evidence_int(ev, "ranks_over", w->total_ranks);
    }
    ss__evidence_end(ev, f);
}

/* ---- replica_divergence (detect_replica.c) ---- */

void ss__replica_message(ss_detectors *d, const ss_replica_facts *x,
                         ss_finding *f)
{
    char ranks[160], group[64], more[96] = "";
    ss__fmt_ranks(ranks, sizeof ranks, x->ranks, x->n_ranks,
                  x->n_ranks_total);
    if (x->group_key == 0 && x->compared == d->world)
        snprintf(group, sizeof group, "all %u ranks", x->compared);
    else
        snprintf(group, sizeof group, "the replica group of rank %lld "
                 "(%u ranks hashed)", (long long)x->group_key, x->compared);
    if (x->params_differ > 1)
        snprintf(more, sizeof more, " and %u of %u parameters differ",
                 x->params_differ, x->params_total);
    else
        snprintf(more, sizeof more, ", the only one of %u that differs",
                 x->params_total);
    if (x->majority)
        snprintf(f->message, sizeof f->message,
                 "%s %s parameters that differ from the majority's (%u of "
                 "%s agree) at step %llu, the first checksum step that "
                 "shows it: %s first in module "
                 "order%s (a silent data corruption, a lost update or a "
                 "nondeterministic kernel on %s)",
                 ranks, x->n_ranks_total == 1 ? "holds" : "hold",
                 x->majority, group, (unsigned long long)x->step, x->param,
                 more, x->n_ranks_total == 1 ? "that rank" : "those ranks");
    else if (x->compared == 2)
        snprintf(f->message, sizeof f->message,
                 "the 2 ranks%s%s hold different parameters at step %llu: "
                 "of two there is no majority, so neither can be named as "
                 "the odd one: %s first in module order%s (%s)",
                 x->group_key == 0 && d->world == 2 ? "" : " of ",
                 x->group_key == 0 && d->world == 2 ? "" : group,
                 (unsigned long long)x->step, x->param, more, ranks);
    else
        snprintf(f->message, sizeof f->message,
                 "%s split into %u different sets of parameters at step "
                 "%llu with no majority, so no rank can be named as the odd "
                 "one: %s first in module order%s (%s)",
                 group, x->classes, (unsigned long long)x->step, x->param,
                 more, ranks);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "step", (int64_t)x->step);
    ss__evidence_int(ev, "group", x->group_key);
    ss__evidence_int(ev, "ranks_compared", x->compared);
    ss__evidence_int(ev, "majority", x->majority);
    ss__evidence_int(ev, "no_majority", x->majority ? 0 : 1);
    ss__evidence_int(ev, "classes", x->classes);
    ss__evidence_str(ev, "first_param", x->param);
    ss__evidence_int(ev, "first_param_index", x->param_index);
    ss__evidence_int(ev, "params_differ", x->params_differ);
    ss__evidence_int(ev, "params_total", x->params_total);
    ss__evidence_int(ev, "ranks_diverged", x->n_ranks_total);
    ss__evidence_end(ev, f);
}
