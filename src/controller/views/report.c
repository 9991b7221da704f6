/*
 * report.c - `stepscope report` and `stepscope runs`: the store explained.
 *
 * The report reads one run attempt from the store (read-only; a store from
 * an older schema is migrated first) into a `report` struct, then prints it
 * as text or as the JSON object of docs/report-json.md.  Findings come
 * first: they are the point of the report; the tables after them are the
 * evidence a person checks the findings against.
 *
 * Statistics: percentiles are nearest-rank over the sorted values (pN is
 * the smallest value with at least N% of the values at or below it; p50 is
 * the lower median).  Step and phase statistics are over every finalized
 * step of the attempt; per-rank medians and p90s are over the rank-step
 * rows the store kept (retention, docs/store.md); per-rank step counts,
 * means and maxima are over every step written (rank_totals).  A value that
 * was not measured is printed as "-" (text) or null (JSON), never 0.
 *
 * JSON is written by hand: json_str escapes per RFC 8259 and replaces
 * invalid UTF-8 by U+FFFD, so the output is valid whatever a rank sent.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "html_report.h"
#include "model.h"
#include "progress.h"
#include "query.h"
#include "runsel.h"
#include "store.h"

#define MAX_EVENTS_TEXT 20    /* events listed in the text report */
#define MAX_EVENTS_JSON 10000 /* events listed in the JSON report */
#define MAX_RANKS_TEXT 32     /* above this, the text shows notable ranks */

/* ---- growable vectors and percentiles ---- */

typedef struct {
    int64_t *v;
    size_t n, cap;
} vec;

static int vec_push(vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void vec_sort(vec *a)
{
    if (a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, cmp_i64);
}

/* Nearest-rank percentile P (0 < P <= 100) of sorted A; SS_MISSING if
 * empty. */
static int64_t pct(const vec *a, double p)
{
    if (a->n == 0)
        return SS_MISSING;
    size_t k = (size_t)ceil(p / 100.0 * (double)a->n);
    return a->v[k ? k - 1 : 0];
}

/* ---- the report, in memory ---- */

typedef struct {
    int64_t id;
    char *uuid, *name, *command, *host, *status;
    int64_t world_size, started_at, ended_at, exit_code;
    int64_t dropped_events, dropped_records, dropped_rank_steps;
} run_row;

typedef struct {
    int64_t id, first_step, last_step;
    char *kind, *severity, *ranks_csv, *phase, *evidence, *message;
} finding_row;

/* Per-step values of one phase or sync point, sorted.  Phase: a = the
 * median rank's duration, b = the worst rank's; top_rank = the rank most
 * often worst.  Sync: a = arrival skew, b = lateness of the last rank;
 * top_rank = the rank most often last. */
typedef struct {
    char *name;
    vec a, b;
    int64_t top_rank, top_count;
} series;

typedef struct {
    char *host, *state;
    int64_t pid, exit_code, signal, last_step;
    int64_t dropped_events, dropped_records;
    int64_t steps, step_ns_n, step_ns_sum, step_ns_max, max_rss, max_device;
    int64_t median_ns, p90_ns, samples;
    int64_t *phase_med; /* n_phases entries, SS_MISSING when none */
    int named;          /* named by a finding */
} rank_row;

typedef struct {
    int64_t at, rank;
    char *kind, *message;
} event_row;

/* A metric (ss_metric) over the kept rank-steps: in how many steps some
 * rank reported it, and its values across ranks at the last of them. */
typedef struct {
    char *name;
    int64_t steps, last_step;
    int64_t n;                  /* ranks with a value at last_step */
    double median, min, max;
    int64_t min_rank, max_rank;
} metric_row;

typedef struct {
    run_row run;
    int64_t attempt, n_attempts;
    finding_row *findings;
    size_t n_findings;
    vec step_med, step_max;
    int64_t first_step, last_step, incomplete_steps;
    int64_t step_worst_rank, step_worst_count;
    series *phases;
    size_t n_phases;
    series *syncs;
    size_t n_syncs;
    metric_row *metrics;
    size_t n_metrics;
    rank_row *ranks;
    size_t n_ranks;
    event_row *events;
    size_t n_events;
    int64_t events_total;
} report;

/* ---- reading the store ---- */

typedef struct {
    const char *cmd;  /* "report" or "runs", for messages */
    FILE *err;
    ss_store_reader rd;
} dbctx;

static void db_fail(dbctx *c, const char *what)
{
    fprintf(c->err, "stepscope %s: %s: %s: %s\n", c->cmd, c->rd.path, what,
            sqlite3_errmsg(c->rd.db));
}

static sqlite3_stmt *prep(dbctx *c, const char *sql, int64_t run_id,
                          int64_t attempt)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(c->rd.db, sql, -1, &st, NULL) != SQLITE_OK) {
        db_fail(c, "cannot query the store");
        return NULL;
    }
    if (sqlite3_bind_parameter_count(st) >= 1)
        sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_bind_parameter_count(st) >= 2)
        sqlite3_bind_int64(st, 2, attempt);
    return st;
}

/* Steps ST: 1 for a row, 0 at the end, -1 on error (reported). */
static int next_row(dbctx *c, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    db_fail(c, "cannot read the store");
    return -1;
}

static int64_t col_i64(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
               ? SS_MISSING
               : sqlite3_column_int64(st, i);
}

/* A copy of text column I (NULL for SQL NULL or out of memory). */
static char *col_str(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* One integer from SQL (bound ?1 = RUN_ID, ?2 = ATTEMPT) into *OUT
 * (SS_MISSING for NULL or no row).  Returns 0 or -1. */
static int query_i64(dbctx *c, const char *sql, int64_t run_id,
                     int64_t attempt, int64_t *out)
{
    sqlite3_stmt *st = prep(c, sql, run_id, attempt);
    if (!st)
        return -1;
    int r = next_row(c, st);
    *out = r == 1 ? col_i64(st, 0) : SS_MISSING;
    sqlite3_finalize(st);
    return r < 0 ? -1 : 0;
}

static void oom(dbctx *c)
{
    fprintf(c->err, "stepscope %s: out of memory\n", c->cmd);
}

static int db_open(dbctx *c, const char *db_arg)
{
    char err[1024];
    if (ss_store_reader_open(&c->rd, db_arg, err, sizeof err) == 0)
        return 0;
    fprintf(c->err, "stepscope %s: %s\n", c->cmd, err);
    return -1;
}

static int is_number(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* Finds the run SPEC names (NULL: the latest) and stores its id.  Returns
 * 0, or -1 with the reason printed. */
static int resolve_run(dbctx *c, const char *spec, int64_t *run_id)
{
    int64_t id = SS_MISSING;
    if (!spec) {
        if (query_i64(c, "SELECT max(id) FROM runs", 0, 0, &id) != 0)
            return -1;
        if (id == SS_MISSING) {
            fprintf(c->err, "stepscope %s: no runs in %s yet (`stepscope "
                            "run` records one)\n", c->cmd, c->rd.path);
            return -1;
        }
        *run_id = id;
        return 0;
    }
    if (is_number(spec) && strlen(spec) < 19) {
        int64_t want = strtoll(spec, NULL, 10);
        if (query_i64(c, "SELECT id FROM runs WHERE id = ?1", want, 0, &id))
            return -1;
        if (id != SS_MISSING) {
            *run_id = id;
            return 0;
        }
    }
    sqlite3_stmt *st = prep(c, "SELECT max(id) FROM runs WHERE name = ?1", 0,
                            0);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, spec, -1, SQLITE_STATIC);
    int r = next_row(c, st);
    id = r == 1 ? col_i64(st, 0) : SS_MISSING;
    sqlite3_finalize(st);
    if (r < 0)
        return -1;
    if (id != SS_MISSING) {
        *run_id = id;
        return 0;
    }
    st = prep(c, "SELECT count(*), max(id) FROM runs "
                 "WHERE substr(uuid, 1, length(?1)) = ?1",
              0, 0);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, spec, -1, SQLITE_STATIC);
    r = next_row(c, st);
    int64_t matches = r == 1 ? sqlite3_column_int64(st, 0) : 0;
    id = r == 1 ? col_i64(st, 1) : SS_MISSING;
    sqlite3_finalize(st);
    if (r < 0)
        return -1;
    if (matches > 1) {
        fprintf(c->err, "stepscope %s: run '%s' is ambiguous: %" PRId64
                        " runs in %s have a uuid starting with it; give "
                        "more of it or the run id\n",
                c->cmd, spec, matches, c->rd.path);
        return -1;
    }
    if (matches == 1) {
        *run_id = id;
        return 0;
    }
    fprintf(c->err, "stepscope %s: no run '%s' in %s; `stepscope runs` "
                    "lists them\n", c->cmd, spec, c->rd.path);
    return -1;
}

static int load_run(dbctx *c, int64_t run_id, run_row *r)
{
    sqlite3_stmt *st = prep(c,
                            "SELECT id, uuid, name, command, host, status, "
                            "world_size, started_at, ended_at, exit_code, "
                            "dropped_events, dropped_records, "
                            "dropped_rank_steps FROM runs WHERE id = ?1",
                            run_id, 0);
    if (!st)
        return -1;
    int rc = next_row(c, st);
    if (rc == 1) {
        r->id = sqlite3_column_int64(st, 0);
        r->uuid = col_str(st, 1);
        r->name = col_str(st, 2);
        r->command = col_str(st, 3);
        r->host = col_str(st, 4);
        r->status = col_str(st, 5);
        r->world_size = col_i64(st, 6);
        r->started_at = col_i64(st, 7);
        r->ended_at = col_i64(st, 8);
        r->exit_code = col_i64(st, 9);
        r->dropped_events = col_i64(st, 10);
        r->dropped_records = col_i64(st, 11);
        r->dropped_rank_steps = col_i64(st, 12);
    }
    sqlite3_finalize(st);
    return rc == 1 ? 0 : -1;
}

static int load_findings(dbctx *c, report *rp)
{
    sqlite3_stmt *st = prep(
        c,
        "SELECT finding_id, kind, severity, "
        "CASE WHEN json_valid(ranks) THEN (SELECT group_concat(value, ',') "
        "FROM json_each(findings.ranks) WHERE type = 'integer') END, "
        "phase, first_step, last_step, "
        "CASE WHEN json_valid(evidence) AND json_type(evidence) = 'object' "
        "THEN json(evidence) ELSE '{}' END, message "
        "FROM findings WHERE run_id = ?1 AND attempt = ?2 "
        "ORDER BY severity = 'critical' DESC, first_step, finding_id",
        rp->run.id, rp->attempt);
    if (!st)
        return -1;
    int r;
    size_t cap = 0;
    while ((r = next_row(c, st)) == 1) {
        if (rp->n_findings == cap) {
            cap = cap ? cap * 2 : 8;
            finding_row *f = realloc(rp->findings, cap * sizeof *f);
            if (!f) {
                oom(c);
                r = -1;
                break;
            }
            rp->findings = f;
        }
        finding_row *f = &rp->findings[rp->n_findings++];
        f->id = sqlite3_column_int64(st, 0);
        f->kind = col_str(st, 1);
        f->severity = col_str(st, 2);
        f->ranks_csv = col_str(st, 3);
        f->phase = col_str(st, 4);
        f->first_step = col_i64(st, 5);
        f->last_step = col_i64(st, 6);
        f->evidence = col_str(st, 7);
        f->message = col_str(st, 8);
    }
    sqlite3_finalize(st);
    return r < 0 ? -1 : 0;
}

static int load_steps(dbctx *c, report *rp)
{
    sqlite3_stmt *st = prep(c,
                            "SELECT step, step_median, step_max, n_missing "
                            "FROM steps WHERE run_id = ?1 AND attempt = ?2",
                            rp->run.id, rp->attempt);
    if (!st)
        return -1;
    int r;
    rp->first_step = rp->last_step = SS_MISSING;
    while ((r = next_row(c, st)) == 1) {
        int64_t step = sqlite3_column_int64(st, 0);
        int64_t med = col_i64(st, 1), max = col_i64(st, 2);
        if (rp->first_step == SS_MISSING || step < rp->first_step)
            rp->first_step = step;
        if (rp->last_step == SS_MISSING || step > rp->last_step)
            rp->last_step = step;
        rp->incomplete_steps += sqlite3_column_int64(st, 3) > 0;
        if ((med != SS_MISSING && vec_push(&rp->step_med, med) != 0) ||
            (max != SS_MISSING && vec_push(&rp->step_max, max) != 0)) {
            oom(c);
            r = -1;
            break;
        }
    }
    sqlite3_finalize(st);
    if (r < 0)
        return -1;
    vec_sort(&rp->step_med);
    vec_sort(&rp->step_max);
    rp->step_worst_rank = rp->step_worst_count = SS_MISSING;
    st = prep(c, "SELECT step_worst_rank, count(*) FROM steps "
                 "WHERE run_id = ?1 AND attempt = ?2 AND step_worst_rank "
                 "IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1",
              rp->run.id, rp->attempt);
    if (!st)
        return -1;
    r = next_row(c, st);
    if (r == 1) {
        rp->step_worst_rank = sqlite3_column_int64(st, 0);
        rp->step_worst_count = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return r < 0 ? -1 : 0;
}

/* Loads the per-phase (or, with SYNCS, per-sync) series of the attempt,
 * then the most frequent worst rank of each. */
static int load_series(dbctx *c, report *rp, int syncs)
{
    const char *sql = syncs
        ? "SELECT sync, skew_ns, late_ns FROM step_syncs "
          "WHERE run_id = ?1 AND attempt = ?2 ORDER BY sync"
        : "SELECT phase, median, max FROM step_phases "
          "WHERE run_id = ?1 AND attempt = ?2 ORDER BY phase";
    series **out = syncs ? &rp->syncs : &rp->phases;
    size_t *n_out = syncs ? &rp->n_syncs : &rp->n_phases;
    sqlite3_stmt *st = prep(c, sql, rp->run.id, rp->attempt);
    if (!st)
        return -1;
    size_t cap = 0;
    int r = 0, nomem = 0;
    while (!nomem && (r = next_row(c, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name)
            continue;
        series *rows = *out;
        size_t n = *n_out;
        if (n == 0 || strcmp(rows[n - 1].name, name) != 0) {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                rows = realloc(rows, cap * sizeof *rows);
                if (!rows) {
                    nomem = 1;
                    break;
                }
                *out = rows;
            }
            memset(&rows[n], 0, sizeof rows[n]);
            rows[n].top_rank = rows[n].top_count = SS_MISSING;
            rows[n].name = strdup(name);
            *n_out = ++n;
            if (!rows[n - 1].name) {
                nomem = 1;
                break;
            }
        }
        int64_t va = col_i64(st, 1), vb = col_i64(st, 2);
        if ((va != SS_MISSING && vec_push(&rows[n - 1].a, va) != 0) ||
            (vb != SS_MISSING && vec_push(&rows[n - 1].b, vb) != 0))
            nomem = 1;
    }
    sqlite3_finalize(st);
    if (nomem)
        oom(c);
    if (nomem || r < 0)
        return -1;
    series *rows = *out;
    for (size_t i = 0; i < *n_out; i++) {
        vec_sort(&rows[i].a);
        vec_sort(&rows[i].b);
    }
    sql = syncs ? "SELECT sync, worst_rank, count(*) FROM step_syncs "
                  "WHERE run_id = ?1 AND attempt = ?2 AND worst_rank IS NOT "
                  "NULL GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2"
                : "SELECT phase, worst_rank, count(*) FROM step_phases "
                  "WHERE run_id = ?1 AND attempt = ?2 AND worst_rank IS NOT "
                  "NULL GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2";
    st = prep(c, sql, rp->run.id, rp->attempt);
    if (!st)
        return -1;
    while ((r = next_row(c, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        for (size_t i = 0; name && i < *n_out; i++)
            if (strcmp(rows[i].name, name) == 0 &&
                rows[i].top_count == SS_MISSING) {
                rows[i].top_rank = sqlite3_column_int64(st, 1);
                rows[i].top_count = sqlite3_column_int64(st, 2);
            }
    }
    sqlite3_finalize(st);
    return r < 0 ? -1 : 0;
}

/* Phases in order of their median-rank p50, longest first (unmeasured
 * last), then by name. */
static int cmp_phase(const void *x, const void *y)
{
    const series *p = x, *q = y;
    int64_t mp = pct(&p->a, 50), mq = pct(&q->a, 50);
    if (mp != mq) {
        if (mp == SS_MISSING || mq == SS_MISSING)
            return mp == SS_MISSING ? 1 : -1;
        return mp > mq ? -1 : 1;
    }
    return strcmp(p->name, q->name);
}

/* Ends the metric being read (M, with its N values at the last step in
 * ascending order in V). */
static void metric_finish(metric_row *m, const double *v, int64_t n)
{
    m->n = n;
    m->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    m->min = v[0];
    m->max = v[n - 1];
}

static int load_metrics(dbctx *c, report *rp)
{
    sqlite3_stmt *st = prep(
        c,
        "WITH m AS (SELECT j.key AS name, step, rank, j.value AS v "
        "  FROM rank_steps, json_each(rank_steps.metrics) AS j "
        "  WHERE run_id = ?1 AND attempt = ?2 AND metrics IS NOT NULL "
        "  AND j.type IN ('integer', 'real')), "
        "last AS (SELECT name, max(step) AS step, count(DISTINCT step) AS n "
        "  FROM m GROUP BY name) "
        "SELECT m.name, last.n, m.step, m.rank, m.v FROM m "
        "JOIN last USING (name, step) ORDER BY m.name, m.v, m.rank",
        rp->run.id, rp->attempt);
    if (!st)
        return -1;
    size_t cap = 0, vcap = 0;
    double *vals = NULL;
    int64_t nv = 0;
    int r = 0, nomem = 0;
    while ((r = next_row(c, st)) == 1) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name)
            continue;
        metric_row *m = rp->n_metrics ? &rp->metrics[rp->n_metrics - 1]
                                      : NULL;
        if (!m || strcmp(m->name, name) != 0) {
            if (m)
                metric_finish(m, vals, nv);
            if (rp->n_metrics == cap) {
                cap = cap ? cap * 2 : 8;
                metric_row *rows = realloc(rp->metrics, cap * sizeof *rows);
                if (!rows) {
                    nomem = 1;
                    break;
                }
                rp->metrics = rows;
            }
            m = &rp->metrics[rp->n_metrics++];
            memset(m, 0, sizeof *m);
            m->name = strdup(name);
            m->steps = sqlite3_column_int64(st, 1);
            m->last_step = sqlite3_column_int64(st, 2);
            m->min_rank = sqlite3_column_int64(st, 3);
            nv = 0;
            if (!m->name) {
                rp->n_metrics--;
                nomem = 1;
                break;
            }
        }
        if ((size_t)nv == vcap) {
            vcap = vcap ? vcap * 2 : 64;
            double *v = realloc(vals, vcap * sizeof *v);
            if (!v) {
                nomem = 1;
                break;
            }
            vals = v;
        }
        vals[nv++] = sqlite3_column_double(st, 4);
        m->max_rank = sqlite3_column_int64(st, 3);
    }
    if (!nomem && r >= 0 && rp->n_metrics)
        metric_finish(&rp->metrics[rp->n_metrics - 1], vals, nv);
    sqlite3_finalize(st);
    free(vals);
    if (nomem)
        oom(c);
    return nomem || r < 0 ? -1 : 0;
}

static void rank_init(rank_row *k)
{
    memset(k, 0, sizeof *k);
    k->pid = k->exit_code = k->signal = k->last_step = SS_MISSING;
    k->dropped_events = k->dropped_records = SS_MISSING;
    k->step_ns_max = k->max_rss = k->max_device = SS_MISSING;
    k->median_ns = k->p90_ns = SS_MISSING;
}

static int load_ranks(dbctx *c, report *rp)
{
    int64_t max_rank = SS_MISSING;
    if (query_i64(c, "SELECT max(m) FROM (SELECT max(rank) m FROM ranks "
                     "WHERE run_id = ?1 AND attempt = ?2 UNION ALL "
                     "SELECT max(rank) FROM rank_totals WHERE run_id = ?1 "
                     "AND attempt = ?2)",
                  rp->run.id, rp->attempt, &max_rank) != 0)
        return -1;
    int64_t n = rp->run.world_size == SS_MISSING ? 0 : rp->run.world_size;
    if (max_rank != SS_MISSING && max_rank + 1 > n)
        n = max_rank + 1;
    if (n > (1 << 20)) /* a damaged world_size must not exhaust memory */
        n = 1 << 20;
    rp->n_ranks = (size_t)n;
    rp->ranks = calloc(rp->n_ranks ? rp->n_ranks : 1, sizeof *rp->ranks);
    if (!rp->ranks) {
        oom(c);
        return -1;
    }
    for (size_t i = 0; i < rp->n_ranks; i++) {
        rank_init(&rp->ranks[i]);
        rp->ranks[i].phase_med = malloc((rp->n_phases ? rp->n_phases : 1) *
                                        sizeof(int64_t));
        if (!rp->ranks[i].phase_med) {
            oom(c);
            return -1;
        }
        for (size_t p = 0; p < rp->n_phases; p++)
            rp->ranks[i].phase_med[p] = SS_MISSING;
    }

    sqlite3_stmt *st = prep(c, "SELECT rank, host, state, pid, exit_code, "
                               "term_signal, last_step, dropped_events, "
                               "dropped_records FROM ranks "
                               "WHERE run_id = ?1 AND attempt = ?2",
                            rp->run.id, rp->attempt);
    if (!st)
        return -1;
    int r;
    while ((r = next_row(c, st)) == 1) {
        int64_t rank = sqlite3_column_int64(st, 0);
        if (rank < 0 || (size_t)rank >= rp->n_ranks)
            continue;
        rank_row *k = &rp->ranks[rank];
        k->host = col_str(st, 1);
        k->state = col_str(st, 2);
        k->pid = col_i64(st, 3);
        k->exit_code = col_i64(st, 4);
        k->signal = col_i64(st, 5);
        k->last_step = col_i64(st, 6);
        k->dropped_events = col_i64(st, 7);
        k->dropped_records = col_i64(st, 8);
    }
    sqlite3_finalize(st);
    if (r < 0)
        return -1;

    st = prep(c, "SELECT rank, steps, step_ns_n, step_ns_sum, step_ns_max, "
                 "max_rss_bytes, max_device_bytes, last_step "
                 "FROM rank_totals WHERE run_id = ?1 AND attempt = ?2",
              rp->run.id, rp->attempt);
    if (!st)
        return -1;
    while ((r = next_row(c, st)) == 1) {
        int64_t rank = sqlite3_column_int64(st, 0);
        if (rank < 0 || (size_t)rank >= rp->n_ranks)
            continue;
        rank_row *k = &rp->ranks[rank];
        k->steps = sqlite3_column_int64(st, 1);
        k->step_ns_n = sqlite3_column_int64(st, 2);
        k->step_ns_sum = sqlite3_column_int64(st, 3);
        k->step_ns_max = col_i64(st, 4);
        k->max_rss = col_i64(st, 5);
        k->max_device = col_i64(st, 6);
        if (k->last_step == SS_MISSING)
            k->last_step = col_i64(st, 7);
    }
    sqlite3_finalize(st);
    if (r < 0)
        return -1;

    /* Medians over the kept rows; SQLite sorts, we walk each group. */
    vec g = {0};
    st = prep(c, "SELECT rank, step_ns FROM rank_steps WHERE run_id = ?1 AND "
                 "attempt = ?2 AND step_ns IS NOT NULL ORDER BY rank, step_ns",
              rp->run.id, rp->attempt);
    if (!st)
        return -1;
    int64_t cur = -1;
    for (;;) {
        r = next_row(c, st);
        int64_t rank = r == 1 ? sqlite3_column_int64(st, 0) : -1;
        if ((r != 1 || rank != cur) && cur >= 0 &&
            (size_t)cur < rp->n_ranks) {
            rp->ranks[cur].median_ns = pct(&g, 50);
            rp->ranks[cur].p90_ns = pct(&g, 90);
            rp->ranks[cur].samples = (int64_t)g.n;
        }
        if (r != 1)
            break;
        if (rank != cur) {
            cur = rank;
            g.n = 0;
        }
        if (vec_push(&g, sqlite3_column_int64(st, 1)) != 0) {
            oom(c);
            r = -1;
            break;
        }
    }
    sqlite3_finalize(st);
    if (r < 0 || rp->n_phases == 0) {
        free(g.v);
        return r < 0 ? -1 : 0;
    }

    st = prep(c, "SELECT r.rank, j.key, j.value FROM rank_steps r, "
                 "json_each(r.phases) j WHERE r.run_id = ?1 AND "
                 "r.attempt = ?2 AND r.phases IS NOT NULL AND "
                 "json_valid(r.phases) AND j.type = 'integer' "
                 "ORDER BY r.rank, j.key, j.value",
              rp->run.id, rp->attempt);
    if (!st) {
        free(g.v);
        return -1;
    }
    cur = -1;
    char key[256] = "";
    for (;;) {
        r = next_row(c, st);
        int64_t rank = r == 1 ? sqlite3_column_int64(st, 0) : -1;
        const char *k = r == 1 ? (const char *)sqlite3_column_text(st, 1)
                               : NULL;
        int same = r == 1 && rank == cur && k && strcmp(k, key) == 0;
        if (!same && cur >= 0 && (size_t)cur < rp->n_ranks) {
            for (size_t p = 0; p < rp->n_phases; p++)
                if (strcmp(rp->phases[p].name, key) == 0)
                    rp->ranks[cur].phase_med[p] = pct(&g, 50);
        }
        if (r != 1)
            break;
        if (!same) {
            cur = rank;
            snprintf(key, sizeof key, "%s", k ? k : "");
            g.n = 0;
        }
        if (vec_push(&g, sqlite3_column_int64(st, 2)) != 0) {
            oom(c);
            r = -1;
            break;
        }
    }
    sqlite3_finalize(st);
    free(g.v);
    return r < 0 ? -1 : 0;
}

static int load_events(dbctx *c, report *rp)
{
    if (query_i64(c, "SELECT count(*) FROM events WHERE run_id = ?1 AND "
                     "attempt = ?2", rp->run.id, rp->attempt,
                  &rp->events_total) != 0)
        return -1;
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT at, kind, rank, message FROM (SELECT * FROM events "
             "WHERE run_id = ?1 AND attempt = ?2 ORDER BY at DESC, id DESC "
             "LIMIT %d) ORDER BY at, id", MAX_EVENTS_JSON);
    sqlite3_stmt *st = prep(c, sql, rp->run.id, rp->attempt);
    if (!st)
        return -1;
    size_t cap = 0;
    int r;
    while ((r = next_row(c, st)) == 1) {
        if (rp->n_events == cap) {
            cap = cap ? cap * 2 : 16;
            event_row *e = realloc(rp->events, cap * sizeof *e);
            if (!e) {
                oom(c);
                r = -1;
                break;
            }
            rp->events = e;
        }
        event_row *e = &rp->events[rp->n_events++];
        e->at = col_i64(st, 0);
        e->kind = col_str(st, 1);
        e->rank = col_i64(st, 2);
        e->message = col_str(st, 3);
    }
    sqlite3_finalize(st);
    return r < 0 ? -1 : 0;
}

/* Marks the ranks findings name, for the text report's rank selection. */
static void mark_named_ranks(report *rp)
{
    for (size_t i = 0; i < rp->n_findings; i++) {
        const char *p = rp->findings[i].ranks_csv;
        while (p && *p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (v >= 0 && (size_t)v < rp->n_ranks)
                rp->ranks[v].named = 1;
            p = *end == ',' ? end + 1 : end;
        }
    }
}

/* SQLite's progress callback: keeps the progress line alive while one
 * long query (a sort over every rank-step row) runs. */
static int progress_tick(void *pg)
{
    ss_progress_tick(pg);
    return 0;
}

static int load_report(dbctx *c, int64_t run_id, int64_t attempt, report *rp)
{
    if (load_run(c, run_id, &rp->run) != 0)
        return -1;
    int64_t latest;
    if (query_i64(c, "SELECT max(a) FROM ("
                     "SELECT max(attempt) a FROM attempts WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM steps "
                     "WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM ranks "
                     "WHERE run_id = ?1 "
                     "UNION ALL SELECT max(attempt) FROM findings "
                     "WHERE run_id = ?1)",
                  run_id, 0, &latest) != 0)
        return -1;
    if (latest == SS_MISSING)
        latest = 0;
    if (attempt > latest) {
        fprintf(c->err, "stepscope %s: run %" PRId64 " has no attempt %" PRId64
                        " (attempts 0 to %" PRId64 ")\n",
                c->cmd, run_id, attempt, latest);
        return -1;
    }
    rp->attempt = attempt >= 0 ? attempt : latest;
    rp->n_attempts = latest + 1;
    /* Large runs take seconds here: say which part on a terminal. */
    ss_progress pg;
    ss_progress_begin(&pg, c->err, "stepscope report: reading steps", 4);
    sqlite3_progress_handler(c->rd.db, 100000, progress_tick, &pg);
    int ok = load_findings(c, rp) == 0 && load_steps(c, rp) == 0;
    ss_progress_stage(&pg, "stepscope report: reading phases", 1, 4);
    ok = ok && load_series(c, rp, 0) == 0 && load_series(c, rp, 1) == 0 &&
         load_metrics(c, rp) == 0;
    if (ok && rp->n_phases > 1)
        qsort(rp->phases, rp->n_phases, sizeof *rp->phases, cmp_phase);
    ss_progress_stage(&pg, "stepscope report: reading per-rank steps", 2, 4);
    ok = ok && load_ranks(c, rp) == 0;
    ss_progress_stage(&pg, "stepscope report: reading events", 3, 4);
    ok = ok && load_events(c, rp) == 0;
    sqlite3_progress_handler(c->rd.db, 0, NULL, NULL);
    ss_progress_end(&pg);
    if (!ok)
        return -1;
    mark_named_ranks(rp);
    return 0;
}

static void report_free(report *rp)
{
    run_row *r = &rp->run;
    free(r->uuid);
    free(r->name);
    free(r->command);
    free(r->host);
    free(r->status);
    for (size_t i = 0; i < rp->n_findings; i++) {
        finding_row *f = &rp->findings[i];
        free(f->kind);
        free(f->severity);
        free(f->ranks_csv);
        free(f->phase);
        free(f->evidence);
        free(f->message);
    }
    free(rp->findings);
    free(rp->step_med.v);
    free(rp->step_max.v);
    for (size_t i = 0; i < rp->n_phases; i++) {
        free(rp->phases[i].name);
        free(rp->phases[i].a.v);
        free(rp->phases[i].b.v);
    }
    free(rp->phases);
    for (size_t i = 0; i < rp->n_syncs; i++) {
        free(rp->syncs[i].name);
        free(rp->syncs[i].a.v);
        free(rp->syncs[i].b.v);
    }
    free(rp->syncs);
    for (size_t i = 0; i < rp->n_metrics; i++)
        free(rp->metrics[i].name);
    free(rp->metrics);
    for (size_t i = 0; rp->ranks && i < rp->n_ranks; i++) {
        free(rp->ranks[i].host);
        free(rp->ranks[i].state);
        free(rp->ranks[i].phase_med);
    }
    free(rp->ranks);
    for (size_t i = 0; i < rp->n_events; i++) {
        free(rp->events[i].kind);
        free(rp->events[i].message);
    }
    free(rp->events);
}

/* ---- formatting helpers ---- */

static void json_int(FILE *f, int64_t v)
{
    if (v == SS_MISSING)
        fputs("null", f);
    else
        fprintf(f, "%" PRId64, v);
}

/* Nanoseconds as milliseconds with 3 decimals (null if missing). */
static void json_ms(FILE *f, int64_t ns)
{
    if (ns == SS_MISSING)
        fputs("null", f);
    else
        fprintf(f, "%.3f", (double)ns / 1e6);
}

/* Wall nanoseconds as ISO 8601 UTC ("2024-05-01T12:00:03.123Z"). */
static void json_time(FILE *f, int64_t ns)
{
    char text[SS_JSON_TIME_LEN];
    fputs(ss_json_time(text, sizeof text, ns), f);
}

static void json_pcts(FILE *f, const vec *a)
{
    fputs("{\"p50\": ", f);
    json_ms(f, pct(a, 50));
    fputs(", \"p90\": ", f);
    json_ms(f, pct(a, 90));
    fputs(", \"p99\": ", f);
    json_ms(f, pct(a, 99));
    fputs("}", f);
}

/* Milliseconds for a table: 3 decimals under 1 ms (sync skews are often
 * microseconds), 1 decimal above; "-" if missing. */
static const char *fmt_ms(char *buf, size_t n, int64_t ns)
{
    if (ns == SS_MISSING)
        snprintf(buf, n, "-");
    else if (ns > -1000000 && ns < 1000000)
        snprintf(buf, n, "%.3f", (double)ns / 1e6);
    else
        snprintf(buf, n, "%.1f", (double)ns / 1e6);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, int64_t b)
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

static const char *fmt_int(char *buf, size_t n, int64_t v)
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
static const char *fmt_exit(char *buf, size_t n, int64_t code, int64_t sig)
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

/* The totals of dropped data: the run's own when it ended, else the sum of
 * what the ranks reported so far. */
static void dropped_totals(const report *rp, int64_t *events,
                           int64_t *records)
{
    *events = rp->run.dropped_events;
    *records = rp->run.dropped_records;
    int64_t se = SS_MISSING, sr = SS_MISSING;
    for (size_t i = 0; i < rp->n_ranks; i++) {
        const rank_row *k = &rp->ranks[i];
        if (k->dropped_events != SS_MISSING)
            se = (se == SS_MISSING ? 0 : se) + k->dropped_events;
        if (k->dropped_records != SS_MISSING)
            sr = (sr == SS_MISSING ? 0 : sr) + k->dropped_records;
    }
    if (*events == SS_MISSING)
        *events = se;
    if (*records == SS_MISSING)
        *records = sr;
}

static int rank_notable(const rank_row *k)
{
    return k->named || (k->signal != SS_MISSING && k->signal > 0) ||
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

static void clean_for_text(report *rp)
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
    for (size_t i = 0; i < rp->n_ranks; i++) {
        clean(rp->ranks[i].host);
        clean(rp->ranks[i].state);
    }
    for (size_t i = 0; i < rp->n_events; i++) {
        clean(rp->events[i].kind);
        clean(rp->events[i].message);
    }
}

static void text_header(FILE *f, const report *rp)
{
    const run_row *r = &rp->run;
    char a[64], b[64];
    fprintf(f, "run %" PRId64 "  %s  (uuid %s)\n", r->id,
            r->name ? r->name : "-", r->uuid ? r->uuid : "-");
    fprintf(f, "  command     %s\n", r->command ? r->command : "-");
    fprintf(f, "  world size  %s rank%s", fmt_int(a, sizeof a, r->world_size),
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
    fprintf(f, "  started     %s", fmt_wall(a, sizeof a, r->started_at, 1));
    if (r->ended_at != SS_MISSING && r->started_at != SS_MISSING)
        fprintf(f, ", ran %s",
                fmt_duration(b, sizeof b, r->ended_at - r->started_at));
    else
        fputs(", still running or stopped without an end record", f);
    fputc('\n', f);
    fprintf(f, "  steps       %zu finalized", rp->step_max.n > rp->step_med.n
                                                   ? rp->step_max.n
                                                   : rp->step_med.n);
    if (rp->first_step != SS_MISSING) {
        fputs(" (", f);
        print_steps_range(f, rp->first_step, rp->last_step);
        fputc(')', f);
    }
    if (rp->incomplete_steps)
        fprintf(f, ", %" PRId64 " with missing ranks", rp->incomplete_steps);
    fputs("\n\n", f);
}

static void text_findings(FILE *f, const report *rp)
{
    if (rp->n_findings == 0) {
        fputs("FINDINGS: none\n\n", f);
        return;
    }
    fprintf(f, "FINDINGS (%zu)\n", rp->n_findings);
    for (size_t i = 0; i < rp->n_findings; i++) {
        const finding_row *x = &rp->findings[i];
        int crit = x->severity && strcmp(x->severity, "critical") == 0;
        fprintf(f, "  %-8s  %-16s  ranks %-8s  phase %-12s  steps ",
                crit ? "CRITICAL" : "WARNING", x->kind ? x->kind : "-",
                x->ranks_csv && *x->ranks_csv ? x->ranks_csv : "-",
                x->phase ? x->phase : "-");
        print_steps_range(f, x->first_step, x->last_step);
        fprintf(f, "\n            %s\n", x->message ? x->message : "");
    }
    fputc('\n', f);
}

static void text_steps(FILE *f, const report *rp)
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
            fmt_ms(a, sizeof a, pct(&rp->step_med, 50)),
            fmt_ms(b, sizeof b, pct(&rp->step_med, 90)),
            fmt_ms(c, sizeof c, pct(&rp->step_med, 99)));
    fprintf(f, "  worst rank                  %10s %10s %10s\n",
            fmt_ms(a, sizeof a, pct(&rp->step_max, 50)),
            fmt_ms(b, sizeof b, pct(&rp->step_max, 90)),
            fmt_ms(c, sizeof c, pct(&rp->step_max, 99)));
    if (rp->step_worst_rank != SS_MISSING)
        fprintf(f, "  slowest rank most often: rank %" PRId64 " (%" PRId64
                   " of %zu steps)\n",
                rp->step_worst_rank, rp->step_worst_count, n);
    fputc('\n', f);
}

static void text_phases(FILE *f, const report *rp)
{
    char a[32], b[32], c[32];
    if (rp->n_phases) {
        fprintf(f, "PHASES (ms)        %15s %15s %15s   %s\n",
                "median rank p50", "worst rank p50", "worst rank p90",
                "most often worst");
        for (size_t i = 0; i < rp->n_phases; i++) {
            const series *p = &rp->phases[i];
            fprintf(f, "  %-16s %15s %15s %15s   ", p->name,
                    fmt_ms(a, sizeof a, pct(&p->a, 50)),
                    fmt_ms(b, sizeof b, pct(&p->b, 50)),
                    fmt_ms(c, sizeof c, pct(&p->b, 90)));
            if (p->top_rank != SS_MISSING)
                fprintf(f, "rank %" PRId64 " (%.0f%% of steps)\n",
                        p->top_rank,
                        p->b.n ? 100.0 * (double)p->top_count /
                                     (double)p->b.n
                               : 0.0);
            else
                fputs("-\n", f);
        }
        fputc('\n', f);
    }
    if (rp->n_syncs) {
        fprintf(f, "SYNC ARRIVAL (ms)  %15s %15s %15s   %s\n", "skew p50",
                "skew p90", "late p90", "most often last");
        for (size_t i = 0; i < rp->n_syncs; i++) {
            const series *y = &rp->syncs[i];
            fprintf(f, "  %-16s %15s %15s %15s   ", y->name,
                    fmt_ms(a, sizeof a, pct(&y->a, 50)),
                    fmt_ms(b, sizeof b, pct(&y->a, 90)),
                    fmt_ms(c, sizeof c, pct(&y->b, 90)));
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

static void text_metrics(FILE *f, const report *rp)
{
    if (!rp->n_metrics)
        return;
    fprintf(f, "METRICS  %-12s %7s %10s %14s %22s %22s\n", "", "steps",
            "last step", "median rank", "min", "max");
    for (size_t i = 0; i < rp->n_metrics; i++) {
        const metric_row *m = &rp->metrics[i];
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%.6g (rank %" PRId64 ")", m->min,
                 m->min_rank);
        snprintf(hi, sizeof hi, "%.6g (rank %" PRId64 ")", m->max,
                 m->max_rank);
        fprintf(f, "  %-19s %7" PRId64 " %10" PRId64 " %14.6g %22s %22s\n",
                m->name, m->steps, m->last_step, m->median, lo, hi);
    }
    fputc('\n', f);
}

static int cmp_rank_median(const void *a, const void *b, void *arg)
{
    const rank_row *ranks = arg;
    int64_t x = ranks[*(const size_t *)a].median_ns;
    int64_t y = ranks[*(const size_t *)b].median_ns;
    return (x < y) - (x > y); /* slowest first; SS_MISSING sorts last */
}

static void text_ranks(FILE *f, const report *rp)
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
        show[i] = rp->n_ranks <= MAX_RANKS_TEXT || rank_notable(&rp->ranks[i]);
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
    fprintf(f, "  %5s  %-15s %-9s %9s %7s %10s %8s", "rank", "state", "exit",
            "last step", "steps", "median ms", "p90 ms");
    for (size_t p = 0; p < rp->n_phases; p++)
        fprintf(f, " %10.10s", rp->phases[p].name);
    fprintf(f, " %10s %9s\n", "max RSS", "dropped");
    char a[32], b[32], c[32], d[32], e[32], g[32];
    for (size_t i = 0; i < rp->n_ranks; i++) {
        if (!show[i])
            continue;
        shown++;
        const rank_row *k = &rp->ranks[i];
        fprintf(f, "  %5zu  %-15.15s %-9s %9s %7" PRId64 " %10s %8s", i,
                k->state ? k->state : "-",
                fmt_exit(a, sizeof a, k->exit_code, k->signal),
                fmt_int(b, sizeof b, k->last_step), k->steps,
                fmt_ms(c, sizeof c, k->median_ns),
                fmt_ms(d, sizeof d, k->p90_ns));
        for (size_t p = 0; p < rp->n_phases; p++)
            fprintf(f, " %10s", fmt_ms(e, sizeof e, k->phase_med[p]));
        int64_t dropped = SS_MISSING;
        if (k->dropped_events != SS_MISSING || k->dropped_records != SS_MISSING)
            dropped = (k->dropped_events == SS_MISSING ? 0
                                                       : k->dropped_events) +
                      (k->dropped_records == SS_MISSING ? 0
                                                        : k->dropped_records);
        fprintf(f, " %10s %9s\n", fmt_bytes(g, sizeof g, k->max_rss),
                fmt_int(e, sizeof e, dropped));
    }
    if (shown < rp->n_ranks)
        fprintf(f, "  ... %zu more ranks (`--json` lists every rank)\n",
                rp->n_ranks - shown);
    fputc('\n', f);
    free(show);
    free(order);
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

static void text_dropped_and_events(FILE *f, const report *rp)
{
    int64_t ev, rec;
    char a[32], b[32], c[32];
    dropped_totals(rp, &ev, &rec);
    fprintf(f, "DROPPED  by the ranks: %s events, %s records; by the store: "
               "%s rank-steps\n\n",
            fmt_int(a, sizeof a, ev), fmt_int(b, sizeof b, rec),
            fmt_int(c, sizeof c, rp->run.dropped_rank_steps));

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
        const event_row *e = &rp->events[i];
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

static void print_text(FILE *f, report *rp)
{
    clean_for_text(rp);
    text_header(f, rp);
    text_findings(f, rp);
    text_steps(f, rp);
    text_phases(f, rp);
    text_metrics(f, rp);
    text_ranks(f, rp);
    text_dropped_and_events(f, rp);
}

/* ---- JSON output (docs/report-json.md) ---- */

static void json_run(FILE *f, const report *rp)
{
    const run_row *r = &rp->run;
    fprintf(f, "  \"run\": {\"id\": %" PRId64 ", \"uuid\": ", r->id);
    ss_json_fput_str(f, r->uuid);
    fputs(", \"name\": ", f);
    ss_json_fput_str(f, r->name);
    fputs(", \"command\": ", f);
    ss_json_fput_str(f, r->command);
    fputs(", \"host\": ", f);
    ss_json_fput_str(f, r->host);
    fputs(", \"world_size\": ", f);
    json_int(f, r->world_size);
    fputs(", \"status\": ", f);
    ss_json_fput_str(f, r->status);
    fputs(", \"exit_code\": ", f);
    json_int(f, r->exit_code);
    fputs(", \"started_at\": ", f);
    json_time(f, r->started_at);
    fputs(", \"ended_at\": ", f);
    json_time(f, r->ended_at);
    fputs(", \"started_at_ns\": ", f);
    json_int(f, r->started_at);
    fputs(", \"ended_at_ns\": ", f);
    json_int(f, r->ended_at);
    fputs(", \"duration_s\": ", f);
    if (r->ended_at != SS_MISSING && r->started_at != SS_MISSING)
        fprintf(f, "%.3f", (double)(r->ended_at - r->started_at) / 1e9);
    else
        fputs("null", f);
    fprintf(f, ", \"attempt\": %" PRId64 ", \"attempts\": %" PRId64 "},\n",
            rp->attempt, rp->n_attempts);
}

static void json_findings(FILE *f, const report *rp)
{
    fputs("  \"findings\": [", f);
    for (size_t i = 0; i < rp->n_findings; i++) {
        const finding_row *x = &rp->findings[i];
        fprintf(f, "%s\n    {\"id\": %" PRId64 ", \"kind\": ", i ? "," : "",
                x->id);
        ss_json_fput_str(f, x->kind);
        fputs(", \"severity\": ", f);
        ss_json_fput_str(f, x->severity);
        fprintf(f, ", \"ranks\": [%s], \"phase\": ",
                x->ranks_csv ? x->ranks_csv : "");
        ss_json_fput_str(f, x->phase);
        fputs(", \"first_step\": ", f);
        json_int(f, x->first_step);
        fputs(", \"last_step\": ", f);
        json_int(f, x->last_step);
        fprintf(f, ", \"evidence\": %s, \"message\": ",
                x->evidence ? x->evidence : "{}");
        ss_json_fput_str(f, x->message);
        fputc('}', f);
    }
    fputs(rp->n_findings ? "\n  ],\n" : "],\n", f);
}

static void json_steps(FILE *f, const report *rp)
{
    fprintf(f, "  \"steps\": {\"count\": %zu, \"first\": ",
            rp->step_max.n > rp->step_med.n ? rp->step_max.n
                                            : rp->step_med.n);
    json_int(f, rp->first_step);
    fputs(", \"last\": ", f);
    json_int(f, rp->last_step);
    fprintf(f, ", \"with_missing_ranks\": %" PRId64 ",\n", rp->incomplete_steps);
    fputs("    \"step_time_ms\": {\"median_rank\": ", f);
    json_pcts(f, &rp->step_med);
    fputs(", \"worst_rank\": ", f);
    json_pcts(f, &rp->step_max);
    fputs("},\n    \"slowest_rank_most_often\": ", f);
    json_int(f, rp->step_worst_rank);
    fputs(", \"slowest_rank_steps\": ", f);
    json_int(f, rp->step_worst_count);
    fputs(",\n    \"phases\": [", f);
    for (size_t i = 0; i < rp->n_phases; i++) {
        const series *p = &rp->phases[i];
        fprintf(f, "%s\n      {\"name\": ", i ? "," : "");
        ss_json_fput_str(f, p->name);
        fprintf(f, ", \"steps\": %zu, \"median_rank_ms\": ", p->b.n);
        json_pcts(f, &p->a);
        fputs(", \"worst_rank_ms\": ", f);
        json_pcts(f, &p->b);
        fputs(", \"most_often_worst_rank\": ", f);
        json_int(f, p->top_rank);
        fputs(", \"most_often_worst_steps\": ", f);
        json_int(f, p->top_count);
        fputc('}', f);
    }
    fputs(rp->n_phases ? "\n    ],\n" : "],\n", f);
    fputs("    \"syncs\": [", f);
    for (size_t i = 0; i < rp->n_syncs; i++) {
        const series *y = &rp->syncs[i];
        fprintf(f, "%s\n      {\"name\": ", i ? "," : "");
        ss_json_fput_str(f, y->name);
        fprintf(f, ", \"steps\": %zu, \"skew_ms\": ", y->a.n);
        json_pcts(f, &y->a);
        fputs(", \"late_ms\": ", f);
        json_pcts(f, &y->b);
        fputs(", \"most_often_last_rank\": ", f);
        json_int(f, y->top_rank);
        fputs(", \"most_often_last_steps\": ", f);
        json_int(f, y->top_count);
        fputc('}', f);
    }
    fputs(rp->n_syncs ? "\n    ]\n  },\n" : "]\n  },\n", f);
}

static void json_metrics(FILE *f, const report *rp)
{
    fputs("  \"metrics\": [", f);
    for (size_t i = 0; i < rp->n_metrics; i++) {
        const metric_row *m = &rp->metrics[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        ss_json_fput_str(f, m->name);
        fprintf(f, ", \"steps\": %" PRId64 ", \"last_step\": %" PRId64
                   ", \"last\": {\"ranks\": %" PRId64 ", \"median\": %.17g"
                   ", \"min\": %.17g, \"min_rank\": %" PRId64
                   ", \"max\": %.17g, \"max_rank\": %" PRId64 "}}",
                m->steps, m->last_step, m->n, m->median, m->min, m->min_rank,
                m->max, m->max_rank);
    }
    fputs(rp->n_metrics ? "\n  ],\n" : "],\n", f);
}

static void json_ranks(FILE *f, const report *rp)
{
    fputs("  \"ranks\": [", f);
    for (size_t i = 0; i < rp->n_ranks; i++) {
        const rank_row *k = &rp->ranks[i];
        fprintf(f, "%s\n    {\"rank\": %zu, \"host\": ", i ? "," : "", i);
        ss_json_fput_str(f, k->host);
        fputs(", \"pid\": ", f);
        json_int(f, k->pid);
        fputs(", \"state\": ", f);
        ss_json_fput_str(f, k->state);
        fputs(", \"exit_code\": ", f);
        json_int(f, k->exit_code);
        fputs(", \"signal\": ", f);
        json_int(f, k->signal == 0 ? SS_MISSING : k->signal);
        fputs(", \"last_step\": ", f);
        json_int(f, k->last_step);
        fprintf(f, ", \"steps\": %" PRId64 ", \"median_step_ms\": ", k->steps);
        json_ms(f, k->median_ns);
        fputs(", \"p90_step_ms\": ", f);
        json_ms(f, k->p90_ns);
        fputs(", \"mean_step_ms\": ", f);
        json_ms(f, k->step_ns_n ? k->step_ns_sum / k->step_ns_n : SS_MISSING);
        fputs(", \"max_step_ms\": ", f);
        json_ms(f, k->step_ns_max);
        fputs(", \"phase_median_ms\": {", f);
        int first = 1;
        for (size_t p = 0; p < rp->n_phases; p++) {
            if (k->phase_med[p] == SS_MISSING)
                continue;
            fputs(first ? "" : ", ", f);
            first = 0;
            ss_json_fput_str(f, rp->phases[p].name);
            fputs(": ", f);
            json_ms(f, k->phase_med[p]);
        }
        fputs("}, \"max_rss_bytes\": ", f);
        json_int(f, k->max_rss);
        fputs(", \"max_device_bytes\": ", f);
        json_int(f, k->max_device);
        fputs(", \"dropped_events\": ", f);
        json_int(f, k->dropped_events);
        fputs(", \"dropped_records\": ", f);
        json_int(f, k->dropped_records);
        fputc('}', f);
    }
    fputs(rp->n_ranks ? "\n  ],\n" : "],\n", f);
}

static void json_tail(FILE *f, const report *rp)
{
    int64_t ev, rec;
    dropped_totals(rp, &ev, &rec);
    fputs("  \"dropped\": {\"events\": ", f);
    json_int(f, ev);
    fputs(", \"records\": ", f);
    json_int(f, rec);
    fputs(", \"rank_steps\": ", f);
    json_int(f, rp->run.dropped_rank_steps);
    fputs("},\n  \"events\": [", f);
    for (size_t i = 0; i < rp->n_events; i++) {
        const event_row *e = &rp->events[i];
        fprintf(f, "%s\n    {\"at\": ", i ? "," : "");
        json_time(f, e->at);
        fputs(", \"kind\": ", f);
        ss_json_fput_str(f, e->kind);
        fputs(", \"rank\": ", f);
        json_int(f, e->rank);
        fputs(", \"message\": ", f);
        ss_json_fput_str(f, e->message);
        fputc('}', f);
    }
    fputs(rp->n_events ? "\n  ],\n" : "],\n", f);
    fprintf(f, "  \"events_total\": %" PRId64 "\n", rp->events_total);
}

static void print_json(FILE *f, const report *rp, const char *db_path)
{
    fputs("{\n  \"format\": \"stepscope.report/1\",\n  \"db\": ", f);
    ss_json_fput_str(f, db_path);
    fputs(",\n", f);
    json_run(f, rp);
    json_findings(f, rp);
    json_steps(f, rp);
    json_metrics(f, rp);
    json_ranks(f, rp);
    json_tail(f, rp);
    fputs("}\n", f);
}

/* ---- command lines ---- */

typedef struct {
    const char *db;
    const char *run;
    int json;
    int64_t attempt; /* -1: the latest */
    int html;           /* --html (html_report.c) */
    const char *output; /* -o FILE with --html */
} opts;

static const char report_usage[] =
    "usage: stepscope report [--db PATH] [--json] [--attempt N] [RUN]\n"
    "       stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]\n"
    "\n"
    "Explains a recorded run: findings first, then step time (median rank\n"
    "vs worst rank), phases, ranks, dropped data and events.\n"
    "\n"
    "  RUN          a run id, a run name (its latest run) or a uuid prefix;\n"
    "               default: the latest run\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print one JSON object (docs/report-json.md)\n"
    "  --html       write the dashboard's charts of the run as one HTML file\n"
    "               that needs no network (docs/dashboard.md)\n"
    "  -o FILE      where --html writes; default: stepscope-run-ID.html,\n"
    "               '-' for stdout\n"
    "  --attempt N  report attempt N of a restarted run; default: the latest\n"
    "  -h, --help   print this help\n";

static const char runs_usage[] =
    "usage: stepscope runs [--db PATH] [--json]\n"
    "\n"
    "Lists the runs in the store, oldest first.\n"
    "\n"
    "  --db PATH    the store; default: $XDG_DATA_HOME/stepscope/stepscope.db\n"
    "               or ~/.local/share/stepscope/stepscope.db\n"
    "  --json       print {\"db\": PATH, \"runs\": [...]}\n"
    "  -h, --help   print this help\n";

/* Parses ARGV into O.  Returns -1 to go on, or the exit status to return
 * (0 after --help, 2 for a usage error, reported on ERR). */
static int parse_args(const char *cmd, int argc, char **argv, int with_run,
                      opts *o, FILE *out, FILE *err)
{
    const char *usage = with_run ? report_usage : runs_usage;
    *o = (opts){NULL, NULL, 0, -1, 0, NULL};
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!only_args && strcmp(a, "--") == 0) {
            only_args = 1;
        } else if (!only_args && (strcmp(a, "-h") == 0 ||
                                  strcmp(a, "--help") == 0)) {
            fputs(usage, out);
            return 0;
        } else if (!only_args && strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (!only_args && with_run && strcmp(a, "--html") == 0) {
            o->html = 1;
        } else if (!only_args && with_run &&
                   (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
                    strncmp(a, "--output=", 9) == 0)) {
            val = a[1] == '-' && a[8] == '=' ? a + 9
                                             : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(err, "stepscope %s: %s needs a file name ('-' for "
                             "stdout)\n", cmd, a);
                return 2;
            }
            o->output = val;
        } else if (!only_args && (strcmp(a, "--db") == 0 ||
                                  strncmp(a, "--db=", 5) == 0)) {
            val = a[4] == '=' ? a + 5 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !*val) {
                fprintf(err, "stepscope %s: --db needs a path\n", cmd);
                return 2;
            }
            o->db = val;
        } else if (!only_args && with_run &&
                   (strcmp(a, "--attempt") == 0 ||
                    strncmp(a, "--attempt=", 10) == 0)) {
            val = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val || !is_number(val) || strlen(val) > 9) {
                fprintf(err, "stepscope %s: --attempt needs a number (0 is "
                             "the first attempt)\n", cmd);
                return 2;
            }
            o->attempt = strtoll(val, NULL, 10);
        } else if (!only_args && a[0] == '-' && a[1] != '\0') {
            fprintf(err, "stepscope %s: unknown option '%s' (see `stepscope "
                         "%s --help`)\n", cmd, a, cmd);
            return 2;
        } else if (with_run && !o->run) {
            o->run = a;
        } else {
            fprintf(err, "stepscope %s: unexpected argument '%s' (see "
                         "`stepscope %s --help`)\n", cmd, a, cmd);
            return 2;
        }
    }
    if (o->html && o->json) {
        fprintf(err, "stepscope %s: --html and --json exclude each other\n",
                cmd);
        return 2;
    }
    if (o->output && !o->html) {
        fprintf(err, "stepscope %s: -o is for --html (the text and JSON "
                     "reports go to stdout)\n", cmd);
        return 2;
    }
    return -1;
}

int ss_report_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    opts o;
    int rc = parse_args("report", argc, argv, 1, &o, out, err);
    if (rc >= 0)
        return rc;
    dbctx c = {.cmd = "report", .err = err};
    if (db_open(&c, o.db) != 0)
        return 1;
    int64_t run_id = 0;
    report rp;
    memset(&rp, 0, sizeof rp);
    rc = 1;
    if (o.html) {
        if (resolve_run(&c, o.run, &run_id) == 0)
            rc = ss_html_report_cmd(c.rd.path, run_id, o.attempt, o.output, out,
                                    err);
    } else if (resolve_run(&c, o.run, &run_id) == 0 &&
               load_report(&c, run_id, o.attempt, &rp) == 0) {
        if (o.json)
            print_json(out, &rp, c.rd.path);
        else
            print_text(out, &rp);
        rc = fflush(out) == 0 ? 0 : 1;
        if (rc)
            fprintf(err, "stepscope report: writing the report: %s\n",
                    strerror(errno));
    }
    report_free(&rp);
    ss_store_reader_close(&c.rd);
    return rc;
}

int ss_runs_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    opts o;
    int rc = parse_args("runs", argc, argv, 0, &o, out, err);
    if (rc >= 0)
        return rc;
    dbctx c = {.cmd = "runs", .err = err};
    if (db_open(&c, o.db) != 0)
        return 1;
    sqlite3_stmt *st = prep(
        &c,
        "SELECT r.id, r.uuid, r.name, r.command, r.started_at, r.ended_at, "
        "r.world_size, r.status, r.exit_code, "
        "(SELECT count(*) FROM steps s WHERE s.run_id = r.id), "
        "(SELECT count(*) FROM findings f WHERE f.run_id = r.id) "
        "FROM runs r ORDER BY r.id",
        0, 0);
    if (!st) {
        ss_store_reader_close(&c.rd);
        return 1;
    }
    if (o.json) {
        fputs("{\"db\": ", out);
        ss_json_fput_str(out, c.rd.path);
        fputs(", \"runs\": [", out);
    }
    int r, n = 0;
    while ((r = next_row(&c, st)) == 1) {
        int64_t id = sqlite3_column_int64(st, 0);
        const char *uuid = (const char *)sqlite3_column_text(st, 1);
        const char *name = (const char *)sqlite3_column_text(st, 2);
        const char *command = (const char *)sqlite3_column_text(st, 3);
        int64_t started = col_i64(st, 4), ended = col_i64(st, 5);
        int64_t world = col_i64(st, 6), code = col_i64(st, 8);
        const char *status = (const char *)sqlite3_column_text(st, 7);
        int64_t steps = sqlite3_column_int64(st, 9);
        int64_t findings = sqlite3_column_int64(st, 10);
        if (o.json) {
            fprintf(out, "%s\n  {\"id\": %" PRId64 ", \"uuid\": ",
                    n ? "," : "", id);
            ss_json_fput_str(out, uuid);
            fputs(", \"name\": ", out);
            ss_json_fput_str(out, name);
            fputs(", \"command\": ", out);
            ss_json_fput_str(out, command);
            fputs(", \"started_at\": ", out);
            json_time(out, started);
            fputs(", \"ended_at\": ", out);
            json_time(out, ended);
            fputs(", \"world_size\": ", out);
            json_int(out, world);
            fputs(", \"status\": ", out);
            ss_json_fput_str(out, status);
            fputs(", \"exit_code\": ", out);
            json_int(out, code);
            fprintf(out, ", \"steps\": %" PRId64 ", \"findings\": %" PRId64
                         "}", steps, findings);
        } else {
            if (n == 0)
                fprintf(out, "%5s  %-20s %-19s %6s  %-14s %8s %8s\n", "id",
                        "name", "started", "ranks", "status", "steps",
                        "findings");
            char t[64], w[32], s[64];
            if (code != SS_MISSING && status && strcmp(status, "running"))
                snprintf(s, sizeof s, "%s (%" PRId64 ")", status, code);
            else
                snprintf(s, sizeof s, "%s", status ? status : "-");
            fprintf(out, "%5" PRId64 "  %-20.20s %-19s %6s  %-14s %8" PRId64
                         " %8" PRId64 "\n",
                    id, name ? name : "-", fmt_wall(t, sizeof t, started, 1),
                    fmt_int(w, sizeof w, world), s, steps, findings);
        }
        n++;
    }
    sqlite3_finalize(st);
    if (r == 0) {
        if (o.json)
            fputs(n ? "\n]}\n" : "]}\n", out);
        else if (n == 0)
            fprintf(out, "no runs in %s yet\n", c.rd.path);
        rc = fflush(out) == 0 ? 0 : 1;
    } else {
        rc = 1;
    }
    ss_store_reader_close(&c.rd);
    return rc;
}

int ss_report_main(int argc, char **argv)
{
    return ss_report_cmd(argc, argv, stdout, stderr);
}

int ss_runs_main(int argc, char **argv)
{
    return ss_runs_cmd(argc, argv, stdout, stderr);
}
