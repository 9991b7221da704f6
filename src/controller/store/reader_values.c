/*
 * reader_values.c - the loaders of vectors (reader.h; schema 13,
 * docs/store.md#vectors): one rank's vector per step and name
 * (rank_values, a blob of little-endian doubles), their labels, the names
 * a run has, and a name's series by rank or by element.
 */
#include "reader.h"

#include <stdlib.h>
#include <string.h>

#include "reader_internal.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rank_values.data is little-endian: convert here"
#endif

/* ---- one name's vectors, row by row ---- */

/* The caller's callback, and the buffer a row's doubles are copied to. */
typedef struct {
    int (*each)(void *ctx, int64_t step, int64_t rank, const double *v,
                uint32_t n);
    void *ctx;
    double *buf;
    size_t cap;
} vector_walk;

static int vector_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    vector_walk *w = arg;
    int bytes = sqlite3_column_bytes(st, 3);
    const void *blob = sqlite3_column_blob(st, 3);
    size_t n = (size_t)bytes / sizeof(double);
    if (n > w->cap) {
        double *p = realloc(w->buf, n * sizeof *p);
        if (!p)
            return ss__rd_oom(r);
        w->buf = p, w->cap = n;
    }
    if (n)
        memcpy(w->buf, blob, n * sizeof *w->buf);
    return w->each(w->ctx, ss__rd_col_i64(st, 0), ss__rd_col_i64(st, 1),
                   w->buf, (uint32_t)n)
               ? 1
               : 0;
}

int ss_reader_vectors(ss_reader *r, int64_t run_id, int64_t attempt,
                      const char *name, int64_t step,
                      int (*each)(void *ctx, int64_t step, int64_t rank,
                                  const double *v, uint32_t n),
                      void *ctx)
{
    int rc = ss__rd_run_exists(r, run_id);
    if (rc || r->version < SCHEMA_VALUES)
        return rc;
    int64_t args[4] = {run_id, attempt, step < 0 ? INT64_MIN : step,
                       step < 0 ? INT64_MAX : step};
    vector_walk w = {each, ctx, NULL, 0};
    rc = ss__rd_each(r, &(ss__rd_query){
                         "SELECT step, rank, n, data FROM rank_values WHERE "
                         "run_id = ?1 AND attempt = ?2 AND name = ?5 AND "
                         "step BETWEEN ?3 AND ?4 ORDER BY step, rank",
                         args, 4, name, 5},
                     vector_row, &w);
    free(w.buf);
    return rc;
}

static int dup_first(ss_reader *r, sqlite3_stmt *st, void *out)
{
    return ss__rd_col_dup(st, 0, out) == 0 ? 0 : ss__rd_oom(r);
}

int ss_reader_vector_labels(ss_reader *r, int64_t run_id, int64_t attempt,
                            const char *name, int64_t rank, char **json)
{
    *json = NULL;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc || r->version < SCHEMA_VALUES)
        return rc;
    int64_t args[3] = {run_id, attempt, rank};
    rc = ss__rd_one(r, &(ss__rd_query){
                        "SELECT labels FROM value_labels WHERE run_id = ?1 "
                        "AND attempt = ?2 AND rank = ?3 AND name = ?4",
                        args, 3, name, 4},
                    dup_first, json);
    return rc < 0 ? SS_READ_ERROR : 0;
}

/* ---- the names a run has ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void ss_values_name_rows_free(ss_values_name_row *rows, size_t n)
{
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].name);
        free(rows[i].ranks);
        free(rows[i].labels_json);
    }
    free(rows);
}

static void free_names(void *rows, size_t n)
{
    ss_values_name_rows_free(rows, n);
}

static int name_fill(ss_reader *r, sqlite3_stmt *st, void *elem, void *ctx)
{
    (void)ctx;
    ss_values_name_row *x = elem;
    if (ss__rd_col_dup(st, 0, &x->name) |
            ss__rd_col_dup(st, 8, &x->labels_json) ||
        ss__rd_parse_csv((const char *)sqlite3_column_text(st, 1), &x->ranks,
                         &x->n_ranks) != 0)
        return ss__rd_oom(r);
    qsort(x->ranks, x->n_ranks, sizeof *x->ranks, cmp_i64);
    x->first_step = ss__rd_col_i64(st, 2);
    x->last_step = ss__rd_col_i64(st, 3);
    x->steps = sqlite3_column_int64(st, 4);
    x->rows = sqlite3_column_int64(st, 5);
    x->max_n = ss__rd_col_i64(st, 6);
    x->truncated = ss__rd_col_i64(st, 7);
    return 0;
}

int ss_reader_value_names(ss_reader *r, int64_t run_id, int64_t attempt,
                          ss_values_name_row **rows, size_t *n)
{
    static const ss__rd_rows how = {sizeof(ss_values_name_row), name_fill,
                                    free_names};
    *rows = NULL;
    *n = 0;
    int rc = ss__rd_run_exists(r, run_id);
    if (rc != 0 || r->version < SCHEMA_VALUES)
        return rc;
    int64_t args[2] = {run_id, attempt};
    return ss__rd_collect(r, &(ss__rd_query){
                              "SELECT v.name, group_concat(DISTINCT v.rank), "
                              "min(v.step), max(v.step), "
                              "count(DISTINCT v.step), count(*), max(v.n), "
                              "sum(v.truncated), "
                              "(SELECT l.labels FROM value_labels l WHERE "
                              "l.run_id = ?1 AND l.attempt = ?2 AND "
                              "l.name = v.name ORDER BY l.rank LIMIT 1) "
                              "FROM rank_values v WHERE v.run_id = ?1 AND "
                              "v.attempt = ?2 GROUP BY v.name "
                              "ORDER BY v.name",
                              args, 2, NULL, 0},
                          &how, NULL, rows, n);
}

/* ---- a name's series ---- */

/* Appends the doubles of blob column I of ST (at most N of them, the
 * store's little-endian doubles) to OUT's data.  Returns how many, or -1
 * when memory ran out. */
static int64_t add_doubles(ss_values_rows *out, size_t *cap, sqlite3_stmt *st,
                           int i, int64_t n)
{
    const void *blob = sqlite3_column_blob(st, i);
    int64_t have = sqlite3_column_bytes(st, i) / (int64_t)sizeof(double);
    if (n > have)
        n = have;
    if (n <= 0 || !blob)
        return 0;
    if (out->n_data + (size_t)n > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < out->n_data + (size_t)n)
            c *= 2;
        double *p = realloc(out->data, c * sizeof *p);
        if (!p)
            return -1;
        out->data = p;
        *cap = c;
    }
    memcpy(out->data + out->n_data, blob, (size_t)n * sizeof(double));
    out->n_data += (size_t)n;
    return n;
}

/* A series being read: whole steps only, up to max_cells doubles. */
typedef struct {
    const ss_values_query *q;
    ss_values_rows *out;
    size_t rows_cap, data_cap;
    size_t step_row0, step_data0; /* where the current step began */
    int64_t cur_step;
} series;

static int series_row(ss_reader *r, sqlite3_stmt *st, void *arg)
{
    series *s = arg;
    ss_values_rows *out = s->out;
    int64_t step = sqlite3_column_int64(st, 0);
    if (step != s->cur_step) {
        s->cur_step = step;
        s->step_row0 = out->n_rows;
        s->step_data0 = out->n_data;
    }
    if (ss__rd_grow((void **)&out->rows, sizeof *out->rows, out->n_rows,
                    &s->rows_cap) != 0)
        return ss__rd_oom(r);
    ss_values_row *x = &out->rows[out->n_rows];
    x->step = step;
    x->rank = sqlite3_column_int64(st, 1);
    x->truncated = sqlite3_column_int64(st, 3);
    int64_t want = s->q->rank >= 0 ? sqlite3_column_int64(st, 2) : 1;
    int64_t got = add_doubles(out, &s->data_cap, st, 4, want);
    if (got < 0)
        return ss__rd_oom(r);
    x->n = got;
    x->v = NULL;
    out->n_rows++;
    if (s->q->max_cells && out->n_data > s->q->max_cells &&
        s->step_row0 > 0) {
        /* over the cap: this step is left for the next read */
        out->n_rows = s->step_row0;
        out->n_data = s->step_data0;
        out->more = 1;
        out->next_step = step;
        return 1;
    }
    return 0;
}

int ss_reader_values(ss_reader *r, const ss_values_query *q, ss_values_rows *out)
{
    memset(out, 0, sizeof *out);
    out->next_step = SS_MISSING;
    if ((q->rank >= 0) == (q->index >= 0))
        return ss__rd_fail(r, SS_READ_ERROR, "reading vector '%s': give a "
                           "rank or an index, not %s", q->name ? q->name : "",
                           q->rank >= 0 ? "both" : "neither");
    int rc = ss__rd_run_exists(r, q->run_id);
    if (rc != 0 || r->version < SCHEMA_VALUES || !q->name)
        return rc;
    int by_rank = q->rank >= 0;
    int64_t args[6] = {q->run_id, q->attempt, 0, by_rank ? q->rank : q->index,
                       q->from < 0 ? 0 : q->from, q->to};
    series s = {q, out, 0, 0, 0, 0, SS_MISSING};
    rc = ss__rd_each(r, &(ss__rd_query){
        by_rank ? "SELECT step, rank, n, truncated, data FROM rank_values "
                  "WHERE run_id = ?1 AND attempt = ?2 AND name = ?3 AND "
                  "rank = ?4 AND step >= ?5 AND (?6 < 0 OR step <= ?6) "
                  "ORDER BY step, rank"
                : "SELECT step, rank, n, truncated, CASE WHEN n > ?4 THEN "
                  "substr(data, ?4 * 8 + 1, 8) END FROM rank_values "
                  "WHERE run_id = ?1 AND attempt = ?2 AND name = ?3 AND "
                  "step >= ?5 AND (?6 < 0 OR step <= ?6) "
                  "ORDER BY step, rank",
        args, 6, q->name, 3}, series_row, &s);
    if (rc < 0) {
        ss_values_rows_free(out);
        out->next_step = SS_MISSING;
        return rc;
    }
    size_t at = 0;
    for (size_t i = 0; i < out->n_rows; i++) {
        out->rows[i].v = out->n_data ? out->data + at : NULL;
        at += (size_t)out->rows[i].n;
    }
    return 0;
}

void ss_values_rows_free(ss_values_rows *v)
{
    if (!v)
        return;
    free(v->rows);
    free(v->data);
    memset(v, 0, sizeof *v);
}
