/*
 * goodput.c - the goodput accounting and reliability figures (goodput.h;
 * the definitions are docs/fault-tolerance.md's).
 *
 * For each attempt: its row (launch, end, cause, resumed_from), its steps
 * read in pages (finalization time, slowest rank's step time, the
 * checkpoint and data phases, the sync points' lateness), its first
 * rank_failed event and its hang finding.  The cuts are clamped into
 * order and every nanosecond of the window goes to exactly one category.
 */
#include "goodput.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define PAGE 4096

static const char *const category_names[SS_GP_N] = {
    "productive", "startup",    "checkpoint", "lost_work", "restart",
    "hang",       "data_stall", "straggler",  "other"};

const char *ss_gp_category_name(ss_gp_category c)
{
    return (unsigned)c < SS_GP_N ? category_names[c] : "unknown";
}

static const char *const cause_names[SS_GP_CAUSES] = {
    "rank_crash", "hang", "node_lost", "health_check"};

const char *ss_gp_cause_name(int cause)
{
    return cause >= 0 && cause < SS_GP_CAUSES ? cause_names[cause]
                                              : "unknown";
}

int ss_gp_failure_cause(const char *cause)
{
    for (int i = 0; cause && i < SS_GP_CAUSES; i++)
        if (strcmp(cause, cause_names[i]) == 0)
            return i;
    return -1;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t pos(int64_t v) { return v == SS_MISSING || v < 0 ? 0 : v; }

/* ---- the inputs of one attempt ---- */

/* What one step contributes, from its row. */
typedef struct {
    int64_t step;
    ss_wall_ns finalized_at;
    ss_dur_ns duration;   /* the slowest rank's step time */
    ss_dur_ns checkpoint; /* the checkpoint phase, slowest rank; 0: none */
    ss_dur_ns data;       /* the data phase, slowest rank; SS_MISSING */
    ss_dur_ns late;       /* summed lateness at its sync points */
} step_facts;

/* The slowest rank's time in phase NAME in ROW; SS_MISSING: none. */
static int64_t phase_named(const ss_steps *s, const ss_step_row *row,
                           const char *name)
{
    for (size_t i = row->phase0; i < row->phase0 + row->n_phases; i++) {
        const ss_step_phase *p = &s->phases[i];
        if (p->name < s->n_names && strcmp(s->names[p->name], name) == 0)
            return p->max;
    }
    return SS_MISSING;
}

static step_facts facts_of(const ss_steps *s, const ss_step_row *row)
{
    step_facts f = {.step = row->step, .finalized_at = row->finalized_at};
    f.duration = pos(row->step_max);
    f.checkpoint = pos(phase_named(s, row, SS_GP_PHASE_CHECKPOINT));
    f.data = phase_named(s, row, SS_GP_PHASE_DATA);
    for (size_t i = row->sync0; i < row->sync0 + row->n_syncs; i++)
        f.late += pos(s->syncs[i].late_ns);
    return f;
}

typedef int (*step_fn)(void *ctx, const step_facts *f);

/* Calls FN for each step of the attempt in order, reading PAGE at a
 * time.  Returns 0 or the reader's error. */
static int each_step(ss_reader *r, int64_t run_id, int64_t attempt,
                     step_fn fn, void *ctx)
{
    int64_t from = 0;
    for (;;) {
        ss_steps s;
        ss_step_window w = {from, -1, PAGE};
        int rc = ss_reader_steps(r, run_id, attempt, &w,
                                 SS_STEPS_PHASES | SS_STEPS_SYNCS, &s);
        if (rc)
            return rc;
        for (size_t i = 0; i < s.n_steps && rc == 0; i++) {
            step_facts f = facts_of(&s, &s.steps[i]);
            rc = fn(ctx, &f);
        }
        size_t n = s.n_steps;
        if (n)
            from = s.steps[n - 1].step + 1;
        ss_steps_free(&s);
        if (rc)
            return rc;
        if (n < PAGE)
            return 0;
    }
}

/* Pass 1: the steady data-phase time (the median over the steps),
 * the first step's begin and the last step's finalization. */
typedef struct {
    int64_t *data;
    size_t n_data, cap;
    int64_t steps;
    ss_wall_ns first_begin, last_fin;
} pass1;

static int pass1_step(void *ctx, const step_facts *f)
{
    pass1 *p = ctx;
    if (p->steps++ == 0)
        p->first_begin = f->finalized_at - f->duration;
    p->last_fin = f->finalized_at;
    if (f->data != SS_MISSING) {
        if (p->n_data == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 256;
            int64_t *d = realloc(p->data, cap * sizeof *d);
            if (!d)
                return SS_READ_ERROR;
            p->data = d;
            p->cap = cap;
        }
        p->data[p->n_data++] = f->data;
    }
    return 0;
}

/* Pass 2: the slots of [B, T]. */
typedef struct {
    ss_gp_attempt *a;
    ss_goodput *g;
    ss_wall_ns prev, last;   /* the previous slot's end; T */
    ss_dur_ns pool;          /* slot time no step has taken yet */
    int64_t lost_after;      /* steps above it are lost work */
    ss_dur_ns data_steady;   /* SS_MISSING: no data phase */
    ss_wall_ns last_save_at; /* SS_MISSING: none yet */
} pass2;

static int pass2_step(void *ctx, const step_facts *f)
{
    pass2 *p = ctx;
    ss_gp_attempt *a = p->a;
    ss_wall_ns end = clamp(f->finalized_at, p->prev, p->last);
    /* Steps finalized together (a rank's sender delivers the steps of its
     * 10 ms batches at once) share the time since the last finalization:
     * a step takes its time from what the slots before it left. */
    p->pool += end - p->prev;
    p->prev = end;
    ss_dur_ns d = min64(f->duration, p->pool);
    p->pool -= d;
    if (f->step > p->lost_after) {
        a->ns[SS_GP_LOST_WORK] += d;
        a->lost_steps++;
        return 0;
    }
    ss_dur_ns c = min64(f->checkpoint, d);
    ss_dur_ns stall = 0;
    if (p->data_steady != SS_MISSING && f->data != SS_MISSING)
        stall = min64(pos(f->data - p->data_steady), d - c);
    ss_dur_ns wait = min64(pos(f->late - c - stall), d - c - stall);
    a->ns[SS_GP_CHECKPOINT] += c;
    a->ns[SS_GP_DATA_STALL] += stall;
    a->ns[SS_GP_STRAGGLER] += wait;
    a->ns[SS_GP_PRODUCTIVE] += d - c - stall - wait;
    if (f->checkpoint > 0) {
        a->saves++;
        p->g->saves++;
        p->g->save_ns += f->checkpoint;
        if (p->last_save_at != SS_MISSING) {
            p->g->intervals++;
            p->g->interval_ns += f->finalized_at - p->last_save_at;
        }
        p->last_save_at = f->finalized_at;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Reads a wall time in ns from evidence KEY; SS_MISSING when absent. */
static ss_wall_ns evidence_time(const cJSON *ev, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, key);
    return cJSON_IsNumber(v) && v->valuedouble > 0
               ? (ss_wall_ns)v->valuedouble
               : SS_MISSING;
}

/* The attempt's hang into *P, *A (wall ns; SS_MISSING when none): a
 * finding of kind "hang" whose evidence says when the stall began
 * (last_progress_at) and how long it had lasted when it was found
 * (stalled_s), with no step finalized after that (LAST_FIN, the last
 * finalized step's time; a hang the job recovered from is inside a
 * step's time).  It lasts until acted_at when the evidence has it, else
 * until the attempt's END: the ranks were stopped, or the job ended,
 * without progress. */
static int hang_of(ss_reader *r, int64_t run_id, int64_t attempt,
                   ss_wall_ns last_fin, ss_wall_ns end, ss_wall_ns *p,
                   ss_wall_ns *a)
{
    ss_finding_row *rows;
    size_t n;
    int rc = ss_reader_findings(r, run_id, attempt, -1, -1, &rows, &n);
    if (rc)
        return rc;
    *p = *a = SS_MISSING;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].kind, "hang") != 0 || !rows[i].evidence)
            continue;
        cJSON *ev = cJSON_Parse(rows[i].evidence);
        ss_wall_ns from = evidence_time(ev, "last_progress_at");
        ss_wall_ns to = evidence_time(ev, "acted_at");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(ev, "stalled_s");
        ss_wall_ns found = from != SS_MISSING && cJSON_IsNumber(st)
                               ? from + (ss_wall_ns)(st->valuedouble * 1e9)
                               : SS_MISSING;
        cJSON_Delete(ev);
        if (to == SS_MISSING)
            to = end;
        if (found != SS_MISSING && last_fin < found && to >= from) {
            *p = from;
            *a = to;
            break;
        }
    }
    ss_finding_rows_free(rows, n);
    return 0;
}

/* The time of the attempt's first rank_failed event; SS_MISSING. */
static int first_failure(ss_reader *r, int64_t run_id, int64_t attempt,
                         ss_wall_ns *at)
{
    ss_event_query q = {attempt, -1, 0, 0};
    ss_event_row *ev;
    size_t n;
    int rc = ss_reader_events(r, run_id, &q, &ev, &n, NULL);
    if (rc)
        return rc;
    *at = SS_MISSING;
    for (size_t i = 0; i < n; i++)
        if (strcmp(ev[i].kind, "rank_failed") == 0 &&
            (*at == SS_MISSING || ev[i].at < *at))
            *at = ev[i].at;
    ss_event_rows_free(ev, n);
    return 0;
}

/* The last step an attempt's work counts up to: the step the NEXT
 * attempt resumed from, else the one before its first finalized step;
 * INT64_MAX (nothing lost) when there is no next attempt or it has
 * neither. */
static int kept_up_to(ss_reader *r, int64_t run_id,
                      const ss_attempt_row *next, int64_t *k)
{
    *k = INT64_MAX;
    if (!next)
        return 0;
    if (next->resumed_from != SS_MISSING) {
        *k = next->resumed_from;
        return 0;
    }
    ss_step_counts c;
    int rc = ss_reader_step_counts(r, run_id, next->attempt, &c);
    if (rc == 0 && c.first != SS_MISSING)
        *k = c.first - 1;
    return rc;
}

static int account_attempt(ss_reader *r, ss_goodput *g,
                           const ss_attempt_row *row,
                           const ss_attempt_row *next, ss_wall_ns w0,
                           ss_wall_ns w1, ss_gp_attempt *a)
{
    memset(a, 0, sizeof *a);
    a->attempt = row->attempt;
    a->from = w0;
    a->to = w1;
    snprintf(a->cause, sizeof a->cause, "%s", row->cause);
    a->first_step = row->first_step;
    a->last_step = row->last_step;
    a->resumed_from = row->resumed_from;
    a->failed_at = a->first_step_at = SS_MISSING;
    ss_wall_ns end = row->ended_at == SS_MISSING ? w1
                                                 : clamp(row->ended_at, w0, w1);

    pass1 p1 = {0};
    int rc = each_step(r, g->run_id, row->attempt, pass1_step, &p1);
    if (rc) {
        free(p1.data);
        return rc;
    }
    a->steps = p1.steps;
    ss_wall_ns b = p1.steps ? clamp(p1.first_begin, w0, end) : end;
    ss_wall_ns t = p1.steps ? clamp(p1.last_fin, b, end) : end;
    if (p1.steps)
        a->first_step_at = b;

    int failed = next != NULL || ss_gp_failure_cause(row->cause) >= 0;
    ss_wall_ns f = end, hang_from, hang_to, rank_failed;
    if ((rc = hang_of(r, g->run_id, row->attempt, t, end, &hang_from,
                      &hang_to)) ||
        (rc = first_failure(r, g->run_id, row->attempt, &rank_failed))) {
        free(p1.data);
        return rc;
    }
    if (failed) {
        if (hang_to != SS_MISSING)
            f = clamp(hang_to, t, end);
        else if (rank_failed != SS_MISSING)
            f = clamp(rank_failed, t, end);
        a->failed_at = f;
    }
    ss_dur_ns hang = 0;
    if (hang_to != SS_MISSING)
        hang = clamp(hang_to, t, f) - clamp(hang_from, t, f);

    a->ns[SS_GP_STARTUP] += b - w0;
    pass2 p2 = {a, g, b, t, 0, INT64_MAX, SS_MISSING, SS_MISSING};
    if ((rc = kept_up_to(r, g->run_id, next, &p2.lost_after))) {
        free(p1.data);
        return rc;
    }
    if (p1.n_data) {
        qsort(p1.data, p1.n_data, sizeof *p1.data, cmp_i64);
        p2.data_steady = p1.data[(p1.n_data - 1) / 2];
    }
    free(p1.data);
    if (p1.steps &&
        (rc = each_step(r, g->run_id, row->attempt, pass2_step, &p2)))
        return rc;
    /* what no step took, and the steps lost since pass 1 */
    a->ns[SS_GP_OTHER] += p2.pool + (t - p2.prev);
    a->ns[SS_GP_HANG] += hang;
    a->ns[next ? SS_GP_LOST_WORK : SS_GP_OTHER] += f - t - hang;
    /* The step in progress when it failed is computed again too: with one
     * restart, lost steps = k - the checkpoint's step. */
    if (next && failed && f - t - hang > 0)
        a->lost_steps++;
    a->ns[next ? SS_GP_RESTART : SS_GP_OTHER] += w1 - f;

    g->up_ns += f - w0;
    int cause = ss_gp_failure_cause(row->cause);
    if (cause >= 0)
        g->failures[cause]++;
    return 0;
}

int ss_goodput_load(ss_reader *r, int64_t run_id, ss_wall_ns now,
                    ss_goodput *out)
{
    memset(out, 0, sizeof *out);
    ss_run_row run;
    int rc = ss_reader_run(r, run_id, &run);
    if (rc)
        return rc;
    ss_attempt_row *rows;
    size_t n;
    rc = ss_reader_attempts(r, run_id, &rows, &n);
    if (rc) {
        ss_run_row_clear(&run);
        return rc;
    }
    out->run_id = run_id;
    out->started_at = run.started_at;
    out->running = run.ended_at == SS_MISSING;
    out->ended_at = out->running ? now : run.ended_at;
    if (out->ended_at < out->started_at)
        out->ended_at = out->started_at;
    ss_run_row_clear(&run);
    out->wall_ns = out->ended_at - out->started_at;
    if (n == 0) {
        /* Nothing but the run: all of it is start-up. */
        out->ns[SS_GP_STARTUP] = out->wall_ns;
        ss_attempt_rows_free(rows);
        out->goodput = 0;
        return 0;
    }
    out->attempts = calloc(n, sizeof *out->attempts);
    if (!out->attempts) {
        ss_attempt_rows_free(rows);
        return SS_READ_ERROR;
    }
    out->n_attempts = n;
    ss_wall_ns w0 = out->started_at;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const ss_attempt_row *next = i + 1 < n ? &rows[i + 1] : NULL;
        ss_wall_ns w1 = next ? clamp(next->started_at, w0, out->ended_at)
                             : out->ended_at;
        rc = account_attempt(r, out, &rows[i], next, w0, w1,
                             &out->attempts[i]);
        w0 = w1;
    }
    ss_attempt_rows_free(rows);
    if (rc) {
        ss_goodput_free(out);
        return rc;
    }
    /* Recovered once the next attempt reached its first step. */
    for (size_t i = 0; i + 1 < n; i++) {
        const ss_gp_attempt *a = &out->attempts[i], *b = a + 1;
        if (a->failed_at != SS_MISSING && b->first_step_at != SS_MISSING) {
            out->recoveries++;
            out->recover_ns += b->first_step_at - a->failed_at;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < SS_GP_N; c++)
            out->ns[c] += out->attempts[i].ns[c];
    out->goodput = out->wall_ns > 0 ? (double)out->ns[SS_GP_PRODUCTIVE] /
                                          (double)out->wall_ns
                                    : 0.0;
    return 0;
}

void ss_goodput_free(ss_goodput *g)
{
    if (!g)
        return;
    free(g->attempts);
    memset(g, 0, sizeof *g);
}

/* ---- reliability ---- */

void ss_reliability_add(ss_reliability *rel, const ss_goodput *g)
{
    int64_t failures = 0;
    for (int c = 0; c < SS_GP_CAUSES; c++) {
        rel->by_cause[c] += g->failures[c];
        failures += g->failures[c];
    }
    rel->runs++;
    rel->failed_runs += failures > 0;
    rel->failures += failures;
    rel->up_ns += g->up_ns;
    rel->recoveries += g->recoveries;
    rel->recover_ns += g->recover_ns;
    rel->saves += g->saves;
    rel->save_ns += g->save_ns;
    rel->intervals += g->intervals;
    rel->interval_ns += g->interval_ns;
}

/* Expected waste per unit time of checkpointing every TAU with cost C
 * and failures every MTBF (Young's first-order model). */
static double waste(double c, double tau, double mtbf)
{
    return c / tau + tau / (2.0 * mtbf);
}

void ss_reliability_finish(ss_reliability *rel)
{
    double hours = (double)rel->up_ns / 3.6e12;
    rel->failures_per_hour = hours > 0 ? (double)rel->failures / hours : -1;
    for (int c = 0; c < SS_GP_CAUSES; c++)
        rel->per_hour[c] = hours > 0 ? (double)rel->by_cause[c] / hours : -1;
    rel->mtbf_ns = rel->failures ? rel->up_ns / rel->failures : SS_MISSING;
    rel->mttr_ns = rel->recoveries ? rel->recover_ns / rel->recoveries
                                   : SS_MISSING;
    rel->save_cost_ns = rel->saves ? rel->save_ns / rel->saves : SS_MISSING;
    rel->measured_interval_ns = rel->intervals
                                    ? rel->interval_ns / rel->intervals
                                    : SS_MISSING;
    rel->optimal_interval_ns = SS_MISSING;
    rel->waste_measured = rel->waste_optimal = rel->gain = -1;
    if (rel->mtbf_ns == SS_MISSING || rel->save_cost_ns == SS_MISSING ||
        rel->mtbf_ns <= 0 || rel->save_cost_ns <= 0)
        return;
    double c = (double)rel->save_cost_ns, m = (double)rel->mtbf_ns;
    double opt = sqrt(2.0 * c * m);
    rel->optimal_interval_ns = (ss_dur_ns)opt;
    rel->waste_optimal = waste(c, opt, m);
    if (rel->measured_interval_ns != SS_MISSING &&
        rel->measured_interval_ns > 0) {
        rel->waste_measured = waste(c, (double)rel->measured_interval_ns, m);
        rel->gain = rel->waste_measured - rel->waste_optimal;
    }
}
