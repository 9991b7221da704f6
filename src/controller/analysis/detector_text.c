/*
 * detector_text.c - how the detectors word a finding: the numbers, byte
 * sizes and rank lists of its message, and its evidence object
 * (detectors_internal.h).
 *
 * Evidence goes through base/json.h (ss_buf, ss_buf_json_str,
 * ss_buf_json_int), so its strings are escaped like every other JSON the
 * controller writes; it lands in the fixed-size ss_finding.evidence_json,
 * and an item that would not fit there is left out whole.
 */
#include "detectors_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- message text ---- */

const char *ss__fmt_ms(char *buf, size_t len, double ms)
{
    snprintf(buf, len, fabs(ms) < 10 ? "%.1f" : "%.0f", ms);
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
