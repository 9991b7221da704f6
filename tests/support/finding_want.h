/*
 * finding_want.h - what a detector test expects of a finding, as one
 * field of a table row: the kind and how many of it, then of the first of
 * them (or of the Nth finding) its ranks, steps, severity, phase, message
 * and evidence.  check_finding_want() checks a row's expectations against
 * the findings captured (findings_capture.h) and names the row in every
 * failure; finding_want_checked counts the expectations checked, so that
 * a test can say how many it ran.  Header-only, like testing.h.
 */
#ifndef STEPSCOPE_FINDING_WANT_H
#define STEPSCOPE_FINDING_WANT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "findings_capture.h"
#include "testing.h"

/* An expected integer; unset (the default) is not checked. */
typedef struct {
    int on;
    int64_t v;
} want;
#define WANT(x) {1, (int64_t)(x)}

/* A number of the evidence: in (lo, hi), >= lo, == lo, or NaN. */
enum { EV_OPEN = 1, EV_AT_LEAST, EV_EQUALS, EV_IS_NAN };
typedef struct {
    const char *key;
    int op;
    double lo, hi;
} evidence_num;

typedef struct {
    const char *kind; /* NULL: nothing expected */
    want count;       /* findings of the kind; 0: none, nothing more */
    int nth;          /* 0: the first of the kind; N: the Nth finding */
    want n_ranks, rank, first_step, last_step, severity;
    want min_first_step; /* first_step at least this */
    const char *phase;   /* NULL: not checked */
    const char *message[3];
    const char *not_in_message;
    struct {
        const char *key, *value;
    } has[3];                /* evidence strings, json_has */
    const char *evidence[2]; /* substrings of the evidence JSON */
    evidence_num num[6];
} finding_want;

static unsigned finding_want_checked;

/* CHECK of COND, naming the row ROW (a string) when it fails. */
#define ROW_CHECK(row, cond)                                                  \
    do {                                                                      \
        int ok_ = (cond);                                                     \
        finding_want_checked++;                                               \
        if (!ok_)                                                             \
            fprintf(stderr, "  row '%s': %s\n", (row), #cond);                \
        CHECK(ok_);                                                           \
    } while (0)

/* Checks VALUE against the expectation W when it is set. */
#define ROW_WANT(row, w, value)                                               \
    do {                                                                      \
        if ((w).on) {                                                         \
            long long got_ = (long long)(value);                              \
            finding_want_checked++;                                           \
            if (got_ != (w).v)                                                \
                fprintf(stderr, "  row '%s': %s == %lld, expected %lld\n",    \
                        (row), #value, got_, (long long)(w).v);               \
            CHECK(got_ == (w).v);                                             \
        }                                                                     \
    } while (0)

static inline int evidence_num_ok(const evidence_num *e, double x)
{
    switch (e->op) {
    case EV_OPEN: return x > e->lo && x < e->hi;
    case EV_AT_LEAST: return x >= e->lo;
    case EV_EQUALS: return x == e->lo;
    default: return isnan(x);
    }
}

/* Checks W against the findings of FD, naming ROW in each failure. */
static inline void check_finding_want(const char *row, const found *fd,
                                      const finding_want *w)
{
    if (!w->kind)
        return;
    ROW_WANT(row, w->count, count_kind(fd, w->kind));
    if (w->count.on && w->count.v == 0)
        return;
    const ss_finding *f = w->nth ? ((uint32_t)w->nth <= fd->n_ids
                                        ? &fd->last[w->nth - 1]
                                        : NULL)
                                 : first_kind(fd, w->kind);
    if (!f)
        fprintf(stderr, "  row '%s': no %s finding\n", row, w->kind);
    ROW_CHECK(row, f != NULL);
    if (!f)
        return;
    ROW_WANT(row, w->n_ranks, f->n_ranks);
    ROW_WANT(row, w->rank, f->ranks[0]);
    ROW_WANT(row, w->first_step, f->first_step);
    ROW_WANT(row, w->last_step, f->last_step);
    ROW_WANT(row, w->severity, f->severity);
    if (w->min_first_step.on)
        ROW_CHECK(row, (int64_t)f->first_step >= w->min_first_step.v);
    if (w->phase)
        ROW_CHECK(row, strcmp(f->phase, w->phase) == 0);
    for (int i = 0; i < 3 && w->message[i]; i++) {
        if (!strstr(f->message, w->message[i]))
            fprintf(stderr, "  row '%s': message lacks \"%s\": %s\n", row,
                    w->message[i], f->message);
        ROW_CHECK(row, strstr(f->message, w->message[i]) != NULL);
    }
    if (w->not_in_message)
        ROW_CHECK(row, strstr(f->message, w->not_in_message) == NULL);
    for (int i = 0; i < 3 && w->has[i].key; i++)
        ROW_CHECK(row, json_has(f->evidence_json, w->has[i].key,
                                w->has[i].value));
    for (int i = 0; i < 2 && w->evidence[i]; i++)
        ROW_CHECK(row, strstr(f->evidence_json, w->evidence[i]) != NULL);
    for (int i = 0; i < 6 && w->num[i].key; i++) {
        double x = json_get(f->evidence_json, w->num[i].key);
        if (!evidence_num_ok(&w->num[i], x))
            fprintf(stderr, "  row '%s': evidence %s = %g\n", row,
                    w->num[i].key, x);
        ROW_CHECK(row, evidence_num_ok(&w->num[i], x));
    }
}

#endif
