/*
 * inject.c - the fault injector's plan: parsing --inject specs, checking
 * them against the job and deciding which fault is due (inject.h).  No
 * signal is sent here.
 */
#include "inject.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "numparse.h"

#define MAX_STEP 1000000000000LL /* far beyond any job's step count */

static const struct {
    const char *name;
    ss_inject_kind kind;
    const char *form;
} k_kinds[] = {
    {"kill-rank", SS_INJECT_KILL_RANK, "kill-rank:R@STEP"},
    {"kill-node", SS_INJECT_KILL_NODE, "kill-node:K@STEP"},
    {"hang-rank", SS_INJECT_HANG_RANK, "hang-rank:R@STEP"},
    {"stop-rank", SS_INJECT_STOP_RANK, "stop-rank:R:MS or stop-rank:R:MS@STEP"},
};

/* Parses the decimal number S[0..LEN) into [MIN, MAX]. */
static int number(const char *s, size_t len, int64_t min, int64_t max,
                  int64_t *out)
{
    char buf[24];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (buf[i] < '0' || buf[i] > '9')
            return -1;
    return ss_parse_i64(buf, min, max, out);
}

int ss_inject_parse(const char *spec, ss_inject *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) {
        snprintf(err, errlen, "an empty --inject spec (kill-rank:R@STEP, "
                 "kill-node:K@STEP, hang-rank:R@STEP, stop-rank:R:MS[@STEP])");
        return -1;
    }
    if (strlen(spec) > SS_INJECT_SPEC_MAX) {
        snprintf(err, errlen, "--inject '%.48s...' is too long", spec);
        return -1;
    }
    const char *colon = strchr(spec, ':');
    size_t i = 0, nk = sizeof k_kinds / sizeof k_kinds[0];
    for (; colon && i < nk; i++)
        if (strlen(k_kinds[i].name) == (size_t)(colon - spec) &&
            !strncmp(spec, k_kinds[i].name, (size_t)(colon - spec)))
            break;
    if (!colon || i == nk) {
        snprintf(err, errlen, "--inject '%s': unknown fault (kill-rank:R@STEP, "
                 "kill-node:K@STEP, hang-rank:R@STEP, stop-rank:R:MS[@STEP])",
                 spec);
        return -1;
    }
    out->kind = k_kinds[i].kind;
    const char *form = k_kinds[i].form;
    const char *p = colon + 1;
    const char *at = strchr(p, '@');
    const char *end = at ? at : p + strlen(p);
    const char *second = memchr(p, ':', (size_t)(end - p));
    int is_stop = out->kind == SS_INJECT_STOP_RANK;
    if (!is_stop && !at) {
        snprintf(err, errlen, "--inject '%s': missing @STEP (%s)", spec, form);
        return -1;
    }
    if (is_stop != (second != NULL)) {
        snprintf(err, errlen, "--inject '%s': %s (%s)", spec,
                 is_stop ? "missing :MS" : "one number before @", form);
        return -1;
    }
    const char *tend = second ? second : end;
    int64_t v;
    if (number(p, (size_t)(tend - p), 0, UINT32_MAX - 1, &v) != 0) {
        snprintf(err, errlen, "--inject '%s': '%.*s' is not a %s number (%s)",
                 spec, (int)(tend - p), p,
                 out->kind == SS_INJECT_KILL_NODE ? "node" : "rank", form);
        return -1;
    }
    out->target = (uint32_t)v;
    if (second) {
        if (number(second + 1, (size_t)(end - second - 1), 1,
                   SS_INJECT_MAX_MS, &v) != 0) {
            snprintf(err, errlen, "--inject '%s': '%.*s' is not a duration "
                     "of 1 to %u ms (%s)", spec, (int)(end - second - 1),
                     second + 1, SS_INJECT_MAX_MS, form);
            return -1;
        }
        out->duration_ms = (uint32_t)v;
    }
    out->step = -1;
    if (at) {
        if (number(at + 1, strlen(at + 1), 0, MAX_STEP, &v) != 0) {
            snprintf(err, errlen, "--inject '%s': '%s' is not a step number "
                     "(%s)", spec, at + 1, form);
            return -1;
        }
        out->step = v;
    }
    snprintf(out->spec, sizeof out->spec, "%s", spec);
    return 0;
}

int ss_inject_add(ss_inject_plan *plan, const char *spec, char *err,
                  size_t errlen)
{
    if (plan->n >= SS_INJECT_MAX) {
        snprintf(err, errlen, "at most %d --inject flags", SS_INJECT_MAX);
        return -1;
    }
    if (ss_inject_parse(spec, &plan->items[plan->n], err, errlen) != 0)
        return -1;
    plan->n++;
    return 0;
}

int ss_inject_check(const ss_inject_plan *plan, uint32_t world,
                    uint32_t nnodes, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < plan->n; i++) {
        const ss_inject *x = &plan->items[i];
        if (x->kind == SS_INJECT_KILL_NODE && x->target >= nnodes) {
            snprintf(err, errlen, "--inject '%s': node %u does not exist (the "
                     "job has %u node%s, 0 to %u)", x->spec, x->target, nnodes,
                     nnodes == 1 ? "" : "s", nnodes - 1);
            return -1;
        }
        if (x->kind != SS_INJECT_KILL_NODE && x->target >= world) {
            snprintf(err, errlen, "--inject '%s': rank %u does not exist (the "
                     "job has %u rank%s, 0 to %u)", x->spec, x->target, world,
                     world == 1 ? "" : "s", world - 1);
            return -1;
        }
    }
    return 0;
}

void ss_inject_targets(const ss_inject *inj, uint32_t nproc_local,
                       uint32_t *first, uint32_t *count)
{
    if (inj->kind == SS_INJECT_KILL_NODE) {
        *first = inj->target * nproc_local;
        *count = nproc_local;
    } else {
        *first = inj->target;
        *count = 1;
    }
}

int ss_inject_due(ss_inject_plan *plan, uint32_t rank, int64_t step,
                  uint32_t nproc_local)
{
    for (uint32_t i = 0; i < plan->n; i++) {
        ss_inject *x = &plan->items[i];
        if (x->fired)
            continue;
        uint32_t first, count;
        ss_inject_targets(x, nproc_local, &first, &count);
        if (rank < first || rank - first >= count)
            continue;
        /* At the start: the first sign of the rank.  At a step: the rank
         * is there or beyond (a record may be the first sign of it). */
        if (x->step >= 0 && step < x->step)
            continue;
        x->fired = 1;
        return (int)i;
    }
    return -1;
}

int ss_inject_signal(const ss_inject *inj, uint32_t *duration_ms)
{
    *duration_ms = inj->kind == SS_INJECT_STOP_RANK ? inj->duration_ms : 0;
    return inj->kind == SS_INJECT_KILL_RANK || inj->kind == SS_INJECT_KILL_NODE
               ? SIGKILL
               : SIGSTOP;
}

int ss_inject_is_fatal(const ss_inject *inj)
{
    return inj->kind != SS_INJECT_STOP_RANK;
}
