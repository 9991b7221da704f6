/*
 * reader_ranks.c - the loaders of ranks, nodes and profile requests
 * (reader.h).
 *
 * A rank's row joins what the launcher recorded (ranks), the writer's
 * exact totals over every step (rank_totals) and, on request, percentiles
 * over the rank-step rows retention kept (rank_steps): the medians are
 * computed here from rows read in (rank, value) order, one rank (and
 * phase) at a time, so memory holds one group, not the run.
 */
#include "reader.h"

#include <stdlib.h>
#include <string.h>

#include "reader_internal.h"
#include "stats.h"

/* ---- ranks ---- */

static void rank_row_init(ss_rank_row *k, int64_t rank)
{
    memset(k, 0, sizeof *k);
    k->rank = rank;
    k->pid = k->exit_code = k->term_signal = k->last_step = SS_MISSING;
    k->dropped_events = k->dropped_records = SS_MISSING;
    k->names_over_limit = k->values_over_limit = SS_MISSING;
    k->step_ns_max = k->max_rss_bytes = k->max_device_bytes = SS_MISSING;
    k->median_step_ns = k->p90_step_ns = SS_MISSING;
}

void ss_rank_rows_free(ss_rank_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].host);
        free(rows[i].state);
        for (size_t p = 0; p < rows[i].n_phase_medians; p++)
            free(rows[i].phase_median_ns[p].name);
        free(rows[i].phase_median_ns);
        for (size_t p = 0; p < rows[i].n_phase_self_medians; p++)
            free(rows[i].phase_self_median_ns[p].name);
        free(rows[i].phase_self_median_ns);
    }
    free(rows);
}

/* The value at nearest-rank percentile PERMILLE of sorted V[0..N). */
static int64_t sorted_pct(const int64_t *v, size_t n, unsigned permille)
{
    return n ? v[ss_nearest_rank(n, permille)] : SS_MISSING;
}

/* The rank rows being filled: K[0..WORLD). */
typedef struct {
    ss_rank_row *k;
    int64_t world;
} rank_table;

/* The row of rank column 0 of ST in T, NULL when out of range. */
static ss_rank_row *rank_of(const rank_table *t, sqlite3_stmt *st)
{
    int64_t rank = sqlite3_column_int64(st, 0);
    return rank < 0 || rank >= t->world ? NULL : &t->k[rank];
}

/* A `ranks` row: what the launcher knows. */
static int launcher_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    ss_rank_row *x = rank_of(arg, st);
    if (!x)
        return 0;
    free(x->host);
    free(x->state);
    if (ss__rd_col_dup(st, 1, &x->host) | ss__rd_col_dup(st, 2, &x->state))
        return ss__rd_oom(r);
    x->pid = ss__rd_col_i64(st, 3);
    x->exit_code = ss__rd_col_i64(st, 4);
    x->term_signal = ss__rd_col_i64(st, 5);
    x->last_step = ss__rd_col_i64(st, 6);
    x->dropped_events = ss__rd_col_i64(st, 7);
    x->dropped_records = ss__rd_col_i64(st, 8);
    x->names_over_limit = ss__rd_col_i64(st, 9);
    x->values_over_limit = ss__rd_col_i64(st, 10);
    return 0;
}

/* A `rank_totals` row: the writer's totals. */
static int totals_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    (void)r;
    ss_rank_row *x = rank_of(arg, st);
    if (!x)
        return 0;
    x->steps = sqlite3_column_int64(st, 1);
    x->step_ns_n = sqlite3_column_int64(st, 2);
    x->step_ns_sum = sqlite3_column_int64(st, 3);
    x->step_ns_max = ss__rd_col_i64(st, 4);
    x->max_rss_bytes = ss__rd_col_i64(st, 5);
    x->max_device_bytes = ss__rd_col_i64(st, 6);
    int64_t last = ss__rd_col_i64(st, 7);
    if (last != SS_MISSING &&
        (x->last_step == SS_MISSING || last > x->last_step))
        x->last_step = last;
    return 0;
}

/* One group of sorted values being gathered: rank CUR (and phase KEY). */
typedef struct {
    rank_table t;
    int self;      /* phase medians: of self time */
    int64_t cur;   /* the group's rank, -1 before the first row */
    char *key;     /* the group's phase (phase medians) */
    int64_t *g;    /* its values, ascending */
    size_t n, cap;
} group;

/* Ends M's group of step times: its rank's p50 and p90. */
static void step_group_end(group *m)
{
    if (m->cur < 0 || m->cur >= m->t.world)
        return;
    ss_rank_row *x = &m->t.k[m->cur];
    x->median_step_ns = sorted_pct(m->g, m->n, 500);
    x->p90_step_ns = sorted_pct(m->g, m->n, 900);
    x->samples = (int64_t)m->n;
}

static int add_to_group(ss_reader *r, group *m, int64_t v)
{
    if (ss__rd_grow((void **)&m->g, sizeof *m->g, m->n, &m->cap) != 0)
        return ss__rd_oom(r);
    m->g[m->n++] = v;
    return 0;
}

static int step_time_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    group *m = arg;
    int64_t rank = sqlite3_column_int64(st, 0);
    if (rank != m->cur) {
        step_group_end(m);
        m->cur = rank;
        m->n = 0;
    }
    return add_to_group(r, m, sqlite3_column_int64(st, 1));
}

/* Per-rank step-time p50 / p90 over the kept rows at or after ARGS[2]. */
static int rank_medians(ss_reader *r, const int64_t args[3], rank_table t)
{
    group m = {t, 0, -1, NULL, NULL, 0, 0};
    int rc = ss__rd_each(r, &(ss__rd_query){
                             "SELECT rank, step_ns FROM rank_steps WHERE "
                             "run_id = ?1 AND attempt = ?2 AND step >= ?3 "
                             "AND step_ns IS NOT NULL ORDER BY rank, step_ns",
                             args, 3, NULL, 0},
                         step_time_row, &m);
    if (rc == 0)
        step_group_end(&m);
    free(m.g);
    return rc;
}

/* Ends M's group of a phase's times: appends its p50 to the rank's list.
 * Returns 0 or SS_READ_ERROR. */
static int phase_group_end(ss_reader *r, group *m)
{
    if (!m->key || m->cur < 0 || m->cur >= m->t.world)
        return 0;
    ss_rank_row *x = &m->t.k[m->cur];
    ss_named_i64 **list = m->self ? &x->phase_self_median_ns
                                  : &x->phase_median_ns;
    size_t *count = m->self ? &x->n_phase_self_medians : &x->n_phase_medians;
    ss_named_i64 *p = realloc(*list, (*count + 1) * sizeof *p);
    if (!p)
        return ss__rd_oom(r);
    *list = p;
    p[(*count)++] = (ss_named_i64){m->key, sorted_pct(m->g, m->n, 500)};
    m->key = NULL;
    return 0;
}

static int phase_time_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    group *m = arg;
    int64_t rank = sqlite3_column_int64(st, 0);
    const char *name = (const char *)sqlite3_column_text(st, 1);
    if (!(rank == m->cur && m->key && name && strcmp(name, m->key) == 0)) {
        if (phase_group_end(r, m) != 0)
            return SS_READ_ERROR;
        free(m->key);
        m->cur = rank;
        m->n = 0;
        if (!(m->key = strdup(name ? name : "")))
            return ss__rd_oom(r);
    }
    return add_to_group(r, m, sqlite3_column_int64(st, 2));
}

/* Per-rank, per-phase p50 over the same rows, appended to each rank's
 * phase_median_ns (SELF: of self time, phase_self_median_ns) in name
 * order.  A row's self time of a phase is its phase_self entry, else (a
 * phase with nothing nested in it) its time; rows without phase_self have
 * none. */
static int rank_phase_medians(ss_reader *r, const int64_t args[3],
                              rank_table t, int self)
{
    const char *sql = self
        ? "SELECT r.rank, j.key, coalesce((SELECT s.value FROM "
          "json_each(r.phase_self) s WHERE s.key = j.key), j.value) v "
          "FROM rank_steps r, json_each(r.phases) j WHERE "
          "r.run_id = ?1 AND r.attempt = ?2 AND r.step >= ?3 AND "
          "r.phases IS NOT NULL AND json_valid(r.phases) AND "
          "r.phase_self IS NOT NULL AND json_valid(r.phase_self) AND "
          "j.type = 'integer' ORDER BY r.rank, j.key, v"
        : "SELECT r.rank, j.key, j.value FROM "
          "rank_steps r, json_each(r.phases) j WHERE "
          "r.run_id = ?1 AND r.attempt = ?2 AND "
          "r.step >= ?3 AND r.phases IS NOT NULL AND "
          "json_valid(r.phases) AND j.type = 'integer' "
          "ORDER BY r.rank, j.key, j.value";
    group m = {t, self, -1, NULL, NULL, 0, 0};
    int rc = ss__rd_each(r, &(ss__rd_query){sql, args, 3, NULL, 0},
                         phase_time_row, &m);
    if (rc == 0)
        rc = phase_group_end(r, &m);
    free(m.key);
    free(m.g);
    return rc;
}

int ss_reader_ranks(ss_reader *r, int64_t run_id, int64_t attempt,
                    int64_t since_step, unsigned flags, ss_rank_row **rows,
                    size_t *n)
{
    *rows = NULL;
    *n = 0;
    int64_t args[3] = {run_id, attempt, since_step};
    int64_t world, max_rank;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc)
        return rc;
    if (ss__rd_i64(r, &(ss__rd_query){"SELECT world_size FROM runs "
                                      "WHERE id = ?1", args, 1, NULL, 0},
                   &world) ||
        ss__rd_i64(r, &(ss__rd_query){"SELECT max(m) FROM (SELECT max(rank) "
                                      "m FROM ranks WHERE run_id = ?1 AND "
                                      "attempt = ?2 UNION ALL SELECT "
                                      "max(rank) FROM rank_totals WHERE "
                                      "run_id = ?1 AND attempt = ?2)",
                                      args, 2, NULL, 0},
                   &max_rank))
        return SS_READ_ERROR;
    if (world == SS_MISSING || world < 0)
        world = 0;
    if (max_rank != SS_MISSING && max_rank + 1 > world)
        world = max_rank + 1;
    if (world > SS_READ_MAX_RANKS)
        world = SS_READ_MAX_RANKS;
    ss_rank_row *k = calloc(world ? (size_t)world : 1, sizeof *k);
    if (!k)
        return ss__rd_oom(r);
    for (int64_t i = 0; i < world; i++)
        rank_row_init(&k[i], i);
    rank_table t = {k, world};

    rc = ss__rd_each(r, &(ss__rd_query){
                         r->version >= SCHEMA_NAME_LIMIT
                             ? "SELECT rank, host, state, pid, exit_code, "
                               "term_signal, last_step, dropped_events, "
                               "dropped_records, names_over_limit, "
                               "values_over_limit FROM ranks "
                               "WHERE run_id = ?1 AND attempt = ?2"
                             : "SELECT rank, host, state, pid, exit_code, "
                               "term_signal, last_step, dropped_events, "
                               "dropped_records, NULL, NULL FROM ranks "
                               "WHERE run_id = ?1 AND attempt = ?2",
                         args, 2, NULL, 0},
                     launcher_row, &t);
    if (rc == 0)
        rc = ss__rd_each(r, &(ss__rd_query){
                             "SELECT rank, steps, step_ns_n, step_ns_sum, "
                             "step_ns_max, max_rss_bytes, max_device_bytes, "
                             "last_step FROM rank_totals "
                             "WHERE run_id = ?1 AND attempt = ?2",
                             args, 2, NULL, 0},
                         totals_row, &t);
    int medians = !(flags & SS_RANKS_NO_MEDIANS);
    int phases = medians && (flags & SS_RANKS_PHASE_MEDIANS);
    if (rc == 0 && medians)
        rc = rank_medians(r, args, t);
    if (rc == 0 && phases)
        rc = rank_phase_medians(r, args, t, 0);
    if (rc == 0 && phases && r->version >= SCHEMA_SELF)
        rc = rank_phase_medians(r, args, t, 1);
    if (rc < 0) {
        ss_rank_rows_free(k, (size_t)world);
        return rc;
    }
    *rows = k;
    *n = (size_t)world;
    return 0;
}

/* ---- nodes ---- */

void ss_node_rows_free(ss_node_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].host);
        free(rows[i].addr);
        free(rows[i].state);
        free(rows[i].lost_reason);
    }
    free(rows);
}

static void free_nodes(void *rows, size_t n)
{
    ss_node_rows_free(rows, n);
}

static int node_fill(ss_reader *r, sqlite3_stmt *st, void *elem, void *ctx)
{
    (void)ctx;
    ss_node_row *x = elem;
    x->node_rank = sqlite3_column_int64(st, 0);
    if (ss__rd_col_dup(st, 1, &x->host) | ss__rd_col_dup(st, 2, &x->addr) |
        ss__rd_col_dup(st, 3, &x->state) |
        ss__rd_col_dup(st, 4, &x->lost_reason))
        return ss__rd_oom(r);
    x->first_rank = sqlite3_column_int64(st, 5);
    x->nranks = sqlite3_column_int64(st, 6);
    x->joined_at = ss__rd_col_i64(st, 7);
    x->ended_at = ss__rd_col_i64(st, 8);
    x->clock_offset_ns = ss__rd_col_i64(st, 9);
    x->clock_bound_ns = ss__rd_col_i64(st, 10);
    x->lost_at_step = ss__rd_col_i64(st, 11);
    return 0;
}

int ss_reader_nodes(ss_reader *r, int64_t run_id, int64_t attempt,
                    ss_node_row **rows, size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_node_row), node_fill,
                                    free_nodes};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_NODES)
        return rc;
    int64_t args[2] = {run_id, attempt};
    return ss__rd_collect(r, &(ss__rd_query){
                              "SELECT node_rank, host, coalesce(addr, ''), "
                              "state, lost_reason, first_rank, nranks, "
                              "joined_at, ended_at, clock_offset_ns, "
                              "clock_bound_ns, lost_at_step FROM nodes "
                              "WHERE run_id = ?1 AND attempt = ?2 "
                              "ORDER BY node_rank",
                              args, 2, NULL, 0},
                          &how, NULL, rows, n);
}

/* ---- profile requests ---- */

void ss_profile_rows_free(ss_profile_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].status);
        free(rows[i].path);
        free(rows[i].host);
        free(rows[i].message);
    }
    free(rows);
}

static void free_profiles(void *rows, size_t n)
{
    ss_profile_rows_free(rows, n);
}

static int profile_fill(ss_reader *r, sqlite3_stmt *st, void *elem,
                        void *ctx)
{
    (void)ctx;
    ss_profile_row *x = elem;
    x->request_id = sqlite3_column_int64(st, 0);
    x->rank = sqlite3_column_int64(st, 1);
    x->requested_at = sqlite3_column_int64(st, 2);
    x->duration_ms = sqlite3_column_int64(st, 3);
    if (ss__rd_col_dup(st, 4, &x->status) | ss__rd_col_dup(st, 5, &x->path) |
        ss__rd_col_dup(st, 6, &x->host) | ss__rd_col_dup(st, 7, &x->message))
        return ss__rd_oom(r);
    x->marker_ns = ss__rd_col_i64(st, 8);
    return 0;
}

int ss_reader_profiles(ss_reader *r, int64_t run_id, int64_t attempt,
                       int64_t request_id, ss_profile_row **rows, size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_profile_row), profile_fill,
                                    free_profiles};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_PROFILES)
        return rc;
    int64_t args[3] = {run_id, attempt, request_id};
    return ss__rd_collect(r, &(ss__rd_query){
                              "SELECT request_id, rank, requested_at, "
                              "duration_ms, status, path, host, message, "
                              "marker_ns FROM profiles "
                              "WHERE run_id = ?1 AND attempt = ?2 AND "
                              "(?3 <= 0 OR request_id = ?3) "
                              "ORDER BY request_id, rank",
                              args, 3, NULL, 0},
                          &how, NULL, rows, n);
}
