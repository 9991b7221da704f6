/*
 * run_diff.c - the comparison of two runs (run_diff.h).
 *
 * Each run's latest attempt is loaded into a grid of cells, one per
 * (step, rank) over the common steps: the loss, a digest of the numerics.*
 * scalars and a digest of the checksum vectors.  The grid is bounded
 * (SS_DIFF_MAX_CELLS; steps beyond it are left out and said so).  The
 * first differing parameter is found by reading that step's two checksum
 * vectors again.
 */
#include "run_diff.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "model.h"

enum { HAS_LOSS = 1, HAS_NUM = 2, HAS_HI = 4, HAS_LO = 8 };

typedef struct {
    double loss;
    uint64_t num;  /* digest of the numerics.* scalars */
    uint64_t hi, lo; /* digests of checksum.hi / checksum.lo */
    uint8_t has;
} cell;

/* A run being compared: the fields of ss_diff_side, and its cells. */
typedef struct {
    ss_reader *r;
    int64_t run, attempt, world, first, last; /* first..last: the range */
    cell *cells;         /* (last - first + 1) * world */
    int64_t n_checksum;  /* cells with both checksum halves */
} side;

typedef ss_diff_result result;

static cell *at(side *s, int64_t step, int64_t rank)
{
    if (step < s->first || step > s->last || rank < 0 || rank >= s->world)
        return NULL;
    return &s->cells[(step - s->first) * s->world + rank];
}

typedef struct {
    side *s;
    int lo; /* 1: checksum.lo, 0: checksum.hi */
} vec_ctx;

static int on_vector(void *ctx, int64_t step, int64_t rank, const double *v,
                     uint32_t n)
{
    vec_ctx *c = ctx;
    cell *x = at(c->s, step, rank);
    if (!x)
        return 0;
    uint64_t h = ss_fnv1a(ss_fnv1a(SS_FNV1A_BASIS, &n, sizeof n), v,
                     (size_t)n * sizeof *v);
    if (c->lo)
        x->lo = h, x->has |= HAS_LO;
    else
        x->hi = h, x->has |= HAS_HI;
    return 0;
}

/* Loads side S over steps S->first..S->last.  Returns a reader code. */
static int load(side *s)
{
    size_t n = (size_t)(s->last - s->first + 1) * (size_t)s->world;
    s->cells = calloc(n ? n : 1, sizeof *s->cells);
    if (!s->cells)
        return SS_READ_ERROR;
    for (size_t i = 0; i < n; i++)
        s->cells[i].loss = NAN;
    ss_rank_step_query q = {s->run, s->attempt, s->first, s->last,
                            SS_RANK_STEPS_METRICS, 0};
    ss_rank_steps *cur = NULL;
    int rc = ss_reader_rank_steps(s->r, &q, &cur);
    const ss_rank_step_row *row;
    while (rc == 0 && cur && ss_rank_steps_next(cur, &row) == 1) {
        cell *x = at(s, row->step, row->rank);
        if (!x)
            continue;
        uint64_t h = SS_FNV1A_BASIS;
        double loss = NAN, plain = NAN;
        for (size_t i = 0; i < row->n_metrics; i++) {
            const char *name = ss_rank_steps_name(cur, row->metrics[i].name);
            double v = row->metrics[i].value;
            if (!name)
                continue;
            if (strcmp(name, "numerics.loss") == 0)
                loss = v;
            else if (strcmp(name, "loss") == 0)
                plain = v;
            if (strncmp(name, "numerics.", 9) == 0) {
                h = ss_fnv1a(ss_fnv1a(h, name, strlen(name) + 1), &v,
                             sizeof v);
                x->has |= HAS_NUM;
            }
        }
        x->num = h;
        x->loss = isnan(loss) ? plain : loss;
        if (!isnan(x->loss))
            x->has |= HAS_LOSS;
    }
    if (rc == 0 && cur && ss_rank_steps_next(cur, &row) < 0)
        rc = SS_READ_ERROR;
    ss_rank_steps_close(cur);
    if (rc < 0)
        return rc;
    vec_ctx c = {s, 0};
    rc = ss_reader_vectors(s->r, s->run, s->attempt, "checksum.hi", -1,
                           on_vector, &c);
    c.lo = 1;
    if (rc == 0)
        rc = ss_reader_vectors(s->r, s->run, s->attempt, "checksum.lo", -1,
                               on_vector, &c);
    for (size_t i = 0; i < n; i++)
        s->n_checksum += (s->cells[i].has & (HAS_HI | HAS_LO)) ==
                         (HAS_HI | HAS_LO);
    return rc;
}

/* ---- the first differing parameter ---- */

typedef struct {
    int64_t rank;
    double *v;
    uint32_t n;
} grab_ctx;

static int grab(void *ctx, int64_t step, int64_t rank, const double *v,
                uint32_t n)
{
    grab_ctx *g = ctx;
    (void)step;
    if (rank != g->rank)
        return 0;
    g->v = malloc((n ? n : 1) * sizeof *v);
    if (g->v) {
        memcpy(g->v, v, (size_t)n * sizeof *v);
        g->n = n;
    }
    return 1;
}

/* The hashes of RANK's parameters at STEP in side S (hi << 32 | lo) into a
 * new array *OUT of *N. */
static void hashes(side *s, int64_t step, int64_t rank, uint64_t **out,
                   uint32_t *n)
{
    grab_ctx hi = {rank, NULL, 0}, lo = {rank, NULL, 0};
    ss_reader_vectors(s->r, s->run, s->attempt, "checksum.hi", step, grab,
                      &hi);
    ss_reader_vectors(s->r, s->run, s->attempt, "checksum.lo", step, grab,
                      &lo);
    *n = hi.n < lo.n ? hi.n : lo.n;
    *out = calloc(*n ? *n : 1, sizeof **out);
    for (uint32_t i = 0; *out && hi.v && lo.v && i < *n; i++)
        (*out)[i] = ((uint64_t)hi.v[i] << 32) | (uint64_t)lo.v[i];
    free(hi.v);
    free(lo.v);
}

/* Label I of RANK's checksum.hi in side S into OUT ("#I" without). */
static void label(side *s, int64_t rank, uint32_t i, char *out, size_t len)
{
    char *json = NULL;
    snprintf(out, len, "#%u", i);
    if (ss_reader_vector_labels(s->r, s->run, s->attempt, "checksum.hi",
                                rank, &json) != 0 || !json)
        return;
    /* the I-th string of a JSON array of plain names */
    const char *p = json;
    for (uint32_t k = 0; p && *p; k++) {
        p = strchr(p, '"');
        if (!p)
            break;
        const char *e = p + 1;
        while (*e && *e != '"')
            e += (*e == '\\' && e[1]) ? 2 : 1;
        if (k == i) {
            size_t m = (size_t)(e - p - 1);
            if (m >= len)
                m = len - 1;
            memcpy(out, p + 1, m);
            out[m] = '\0';
            break;
        }
        p = *e ? e + 1 : e;
    }
    free(json);
}

/* Compares A and B (loaded) into RES. */
static void compare(side *a, side *b, result *res)
{
    res->step = -1;
    res->max_loss_step = res->last_step = -1;
    for (int64_t step = a->first; step <= a->last; step++) {
        int common = 0;
        for (int64_t r = 0; r < a->world; r++) {
            cell *x = at(a, step, r), *y = at(b, step, r);
            common |= x && y && x->has && y->has;
        }
        uint32_t named = 0, total = 0;
        int by_loss = 0;
        for (int pass = 0; pass < 2 && res->step < 0; pass++) {
            for (int64_t r = 0; r < a->world; r++) {
                cell *x = at(a, step, r), *y = at(b, step, r);
                if (!x || !y || !x->has || !y->has)
                    continue;
                int differs;
                if (pass == 0) /* the forward pass: loss and numerics */
                    differs =
                        ((x->has & y->has & HAS_LOSS) &&
                         memcmp(&x->loss, &y->loss, sizeof x->loss) != 0) ||
                        ((x->has & y->has & HAS_NUM) && x->num != y->num);
                else           /* the update: the checksums */
                    differs = (x->has & y->has & (HAS_HI | HAS_LO)) ==
                                  (HAS_HI | HAS_LO) &&
                              (x->hi != y->hi || x->lo != y->lo);
                if (!differs)
                    continue;
                total++;
                if (named < SS_DIFF_MAX_NAMED)
                    res->ranks[named++] = (int32_t)r;
            }
            if (total) {
                res->step = step;
                res->n_ranks = named;
                res->n_ranks_total = total;
                by_loss = pass == 0;
            }
        }
        if (common)
            res->common++;
        int sums = 0;
        for (int64_t r = 0; r < a->world; r++) {
            cell *x = at(a, step, r), *y = at(b, step, r);
            if (x && y && (x->has & y->has & (HAS_HI | HAS_LO)) ==
                              (HAS_HI | HAS_LO))
                sums = 1;
        }
        res->checksum_steps += sums;
        if (res->step == step && !res->what) {
            cell *x = at(a, step, res->ranks[0]), *y = at(b, step,
                                                          res->ranks[0]);
            res->what = !by_loss ? "checksum"
                        : (x->has & y->has & HAS_LOSS) &&
                                  memcmp(&x->loss, &y->loss,
                                         sizeof x->loss) != 0
                            ? "loss"
                            : "numerics";
            res->loss_a = x->loss;
            res->loss_b = y->loss;
        }
        /* how far the losses drift apart from the divergence on: the mean
         * over the ranks that have both */
        if (res->step >= 0 && step >= res->step) {
            double sa = 0, sb = 0;
            int k = 0;
            for (int64_t r = 0; r < a->world; r++) {
                cell *x = at(a, step, r), *y = at(b, step, r);
                if (x && y && (x->has & y->has & HAS_LOSS)) {
                    sa += x->loss, sb += y->loss, k++;
                }
            }
            if (k) {
                double d = fabs(sa / k - sb / k);
                if (res->max_loss_step < 0 || d > res->max_loss_diff)
                    res->max_loss_diff = d, res->max_loss_step = step;
                res->last_loss_diff = d;
                res->last_step = step;
            }
        }
    }
    if (res->common == 0) {
        res->status = 2;
        snprintf(res->why, sizeof res->why, "no common steps (run A steps "
                 "%" PRId64 "-%" PRId64 ", run B %" PRId64 "-%" PRId64 ")",
                 a->first, a->last, b->first, b->last);
        return;
    }
    if (res->step < 0 && res->checksum_steps == 0) {
        res->status = 2;
        snprintf(res->why, sizeof res->why, "no checksums in common (run "
                 "both with `stepscope run --auto --checksum-every N`); the "
                 "losses of %" PRId64 " common steps are equal", res->common);
        return;
    }
    res->status = res->step >= 0 ? 1 : 0;
    if (res->status == 1) {
        /* the first differing parameter of the first named rank with
         * checksums at (or after) the step */
        for (int64_t step = res->step; step <= a->last; step++) {
            cell *x = at(a, step, res->ranks[0]), *y = at(b, step,
                                                          res->ranks[0]);
            if (!x || !y || (x->has & y->has & (HAS_HI | HAS_LO)) !=
                                (HAS_HI | HAS_LO))
                continue;
            if (x->hi == y->hi && x->lo == y->lo)
                continue;
            uint64_t *ha, *hb;
            uint32_t na, nb;
            hashes(a, step, res->ranks[0], &ha, &na);
            hashes(b, step, res->ranks[0], &hb, &nb);
            uint32_t n = na > nb ? na : nb, first = UINT32_MAX;
            for (uint32_t i = 0; ha && hb && i < n; i++)
                if (i >= na || i >= nb || ha[i] != hb[i]) {
                    if (first == UINT32_MAX)
                        first = i;
                    res->params_differ++;
                }
            res->params_total = n;
            if (first != UINT32_MAX) {
                label(a, res->ranks[0], first, res->param,
                      sizeof res->param);
                if (step != res->step) {
                    size_t m = strlen(res->param);
                    snprintf(res->param + m, sizeof res->param - m,
                             " (checksum step %" PRId64 ")", step);
                }
            }
            free(ha);
            free(hb);
            break;
        }
    }
}

static void put_num(ss_buf *b, double v)
{
    if (isfinite(v))
        ss_buf_printf(b, "%.17g", v);
    else
        ss_buf_puts(b, "null");
}

static void json_side(ss_buf *b, const char *key, const ss_diff_side *s)
{
    ss_buf_printf(b, "  \"%s\": {\"db\": ", key);
    ss_buf_json_str(b, ss_reader_path(s->r));
    ss_buf_printf(b, ", \"run\": %" PRId64 ", \"attempt\": %" PRId64
                  ", \"world_size\": %" PRId64 ", \"first_step\": %" PRId64
                  ", \"last_step\": %" PRId64 "},\n", s->run, s->attempt,
                  s->world, s->first, s->last);
}

static void json_divergence(ss_buf *b, const ss_diff_result *res);

void ss_run_diff_json(ss_buf *b, const ss_diff_side *a,
                      const ss_diff_side *c, const ss_diff_result *res)
{
    static const char *const words[] = {"identical", "diverged",
                                        "incomparable"};
    ss_buf_printf(b, "{\n  \"status\": \"%s\",\n  \"exit\": %d,\n",
                  words[res->status], res->status);
    json_side(b, "a", a);
    json_side(b, "b", c);
    ss_buf_puts(b, "  \"reason\": ");
    ss_buf_json_str(b, res->status == 2 ? res->why : NULL);
    ss_buf_printf(b, ",\n  \"common_steps\": %" PRId64 ",\n  "
                  "\"checksum_steps\": %" PRId64 ",\n", res->common,
                  res->checksum_steps);
    if (res->status != 1)
        ss_buf_puts(b, "  \"divergence\": null");
    else
        json_divergence(b, res);
    if (res->loss_series_a && res->loss_series_b) {
        int64_t n = res->last - res->first + 1;
        int64_t stride = (n + SS_DIFF_SERIES_POINTS - 1) / SS_DIFF_SERIES_POINTS;
        ss_buf_printf(b, ",\n  \"series\": {\"steps\": [%" PRId64 ", %" PRId64
                      "], \"stride\": %" PRId64, res->first, res->last,
                      stride);
        const double *v[2] = {res->loss_series_a, res->loss_series_b};
        for (int k = 0; k < 2; k++) {
            ss_buf_printf(b, ", \"loss_%c\": [", k ? 'b' : 'a');
            for (int64_t i = 0; i < n; i += stride) {
                if (i)
                    ss_buf_puts(b, ",");
                put_num(b, v[k][i]);
            }
            ss_buf_puts(b, "]");
        }
        ss_buf_puts(b, "}");
    }
    ss_buf_puts(b, "\n}\n");
}

/* The "divergence" object of a DIVERGED result. */
static void json_divergence(ss_buf *b, const ss_diff_result *res)
{
    ss_buf_printf(b, "  \"divergence\": {\"step\": %" PRId64 ", \"ranks\": [",
                  res->step);
    for (uint32_t i = 0; i < res->n_ranks; i++)
        ss_buf_printf(b, "%s%d", i ? ", " : "", res->ranks[i]);
    ss_buf_printf(b, "], \"ranks_total\": %u, \"what\": ",
                  res->n_ranks_total);
    ss_buf_json_str(b, res->what);
    ss_buf_puts(b, ", \"loss_a\": ");
    put_num(b, res->loss_a);
    ss_buf_puts(b, ", \"loss_b\": ");
    put_num(b, res->loss_b);
    ss_buf_puts(b, ", \"first_param\": ");
    ss_buf_json_str(b, res->param[0] ? res->param : NULL);
    ss_buf_printf(b, ", \"params_differ\": %u, \"params_total\": %u, "
                  "\"max_loss_diff\": ", res->params_differ,
                  res->params_total);
    put_num(b, res->last_step >= 0 ? res->max_loss_diff : NAN);
    ss_buf_printf(b, ", \"max_loss_diff_step\": %" PRId64
                  ", \"last_loss_diff\": ", res->max_loss_step);
    put_num(b, res->last_step >= 0 ? res->last_loss_diff : NAN);
    ss_buf_printf(b, ", \"last_step\": %" PRId64 "}", res->last_step);
}


/* Opens side S's run through its reader: id, latest attempt, world size
 * and step range.  Returns 0 or the reader's code with its words in
 * ERR. */
static int open_side(ss_diff_side *s, char *err, size_t errlen)
{
    int rc = ss_reader_select_run(s->r, s->spec, &s->run);
    if (rc == 0)
        rc = ss_reader_attempt(s->r, s->run, -1, &s->attempt, NULL);
    if (rc == 0)
        rc = ss_reader_world_size(s->r, s->run, &s->world);
    if (rc == 0)
        rc = ss_reader_step_bounds(s->r, s->run, s->attempt, NULL, &s->first,
                                   &s->last);
    if (rc)
        snprintf(err, errlen, "%s", ss_reader_errmsg(s->r));
    return rc;
}

/* The mean loss over the ranks of S at each step of its range into a new
 * array (NaN where no rank has one); NULL when out of memory. */
static double *loss_series(const side *s)
{
    int64_t n = s->last - s->first + 1;
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) {
        double sum = 0;
        int k = 0;
        for (int64_t r = 0; r < s->world; r++) {
            const cell *x = &s->cells[i * s->world + r];
            if (x->has & HAS_LOSS)
                sum += x->loss, k++;
        }
        v[i] = k ? sum / k : NAN;
    }
    return v;
}

int ss_run_diff(ss_diff_side *a, ss_diff_side *b, unsigned flags,
                ss_diff_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->first = res->last = res->step = -1;
    int orc = open_side(a, err, errlen);
    if (orc == 0)
        orc = open_side(b, err, errlen);
    if (orc != 0)
        return orc;
    if (a->world != b->world) {
        res->status = SS_DIFF_INCOMPARABLE;
        snprintf(res->why, sizeof res->why, "different world sizes (%" PRId64
                 " and %" PRId64 " ranks)", a->world, b->world);
        return 0;
    }
    if (a->first == SS_MISSING || b->first == SS_MISSING || a->world <= 0) {
        res->status = SS_DIFF_INCOMPARABLE;
        snprintf(res->why, sizeof res->why, "%s has no finalized step",
                 a->first == SS_MISSING ? "run A" : "run B");
        return 0;
    }
    /* both sides over the common range, bounded */
    int64_t first = a->first > b->first ? a->first : b->first;
    int64_t last = a->last < b->last ? a->last : b->last;
    if (last < first) {
        res->status = SS_DIFF_INCOMPARABLE;
        snprintf(res->why, sizeof res->why, "no common steps (run A steps "
                 "%" PRId64 "-%" PRId64 ", run B %" PRId64 "-%" PRId64 ")",
                 a->first, a->last, b->first, b->last);
        return 0;
    }
    int64_t max_steps = (int64_t)(SS_DIFF_MAX_CELLS / (uint64_t)a->world);
    if (last - first + 1 > max_steps) {
        last = first + max_steps - 1;
        res->truncated = 1;
    }
    a->first = b->first = res->first = first;
    a->last = b->last = res->last = last;
    side sa = {a->r, a->run, a->attempt, a->world, first, last, NULL, 0};
    side sb = {b->r, b->run, b->attempt, b->world, first, last, NULL, 0};
    int rc = SS_READ_ERROR;
    if (load(&sa) != 0 || load(&sb) != 0) {
        snprintf(err, errlen, "%s", ss_reader_errmsg(sa.cells && sb.cells
                                                         ? sb.r : sa.r));
        goto done;
    }
    compare(&sa, &sb, res);
    if (flags & SS_DIFF_SERIES) {
        res->loss_series_a = loss_series(&sa);
        res->loss_series_b = loss_series(&sb);
        if (!res->loss_series_a || !res->loss_series_b) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
    }
    rc = 0;
done:
    free(sa.cells);
    free(sb.cells);
    return rc;
}

void ss_diff_result_free(ss_diff_result *res)
{
    free(res->loss_series_a);
    free(res->loss_series_b);
    res->loss_series_a = res->loss_series_b = NULL;
}
