/*
 * diff.c - `stepscope diff` (diff.h): two runs side by side, step by step
 * and rank by rank, to find the first step at which they stop computing
 * the same bits.
 *
 * Each run's latest attempt is loaded into a grid of cells, one per
 * (step, rank) over the steps both may hold: the loss, a digest of the
 * numerics.* scalars and a digest of the checksum vectors.  The grid is
 * bounded (DIFF_MAX_CELLS; steps beyond it are left out and said so).  The
 * first step with a differing cell is the divergence; a rank's loss or
 * numerics differing is named before a checksum differing, since within a
 * step the forward pass precedes the update.  The first differing
 * parameter is found by reading that step's two checksum vectors again.
 */
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"
#include "reader.h"

#define DIFF_MAX_CELLS (16u << 20) /* (step, rank) cells per run */
#define DIFF_MAX_NAMED 16          /* ranks listed at the divergence */

static const char usage[] =
    "usage: stepscope diff [--db PATH] [--db-b PATH] [--json] RUN_A RUN_B\n"
    "\n"
    "Compares two runs step by step and rank by rank: the loss, the\n"
    "numerics scalars and the parameter checksums (`stepscope run\n"
    "--checksum-every`).  RUN_B is read from --db-b when given.  Exit\n"
    "status 0: identical; 1: diverged (the first step, rank and parameter,\n"
    "and how far the losses differ after it); 2: cannot compare (why is\n"
    "said), or an error.  docs/consistency.md.\n";

enum { HAS_LOSS = 1, HAS_NUM = 2, HAS_HI = 4, HAS_LO = 8 };

typedef struct {
    double loss;
    uint64_t num;  /* digest of the numerics.* scalars */
    uint64_t hi, lo; /* digests of checksum.hi / checksum.lo */
    uint8_t has;
} cell;

typedef struct {
    const char *db, *spec;
    ss_reader *r;
    int64_t run, attempt, world, first, last;
    cell *cells;         /* (last - first + 1) * world */
    int64_t n_checksum;  /* cells with both checksum halves */
} side;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

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
    uint64_t h = fnv(fnv(1469598103934665603ull, &n, sizeof n), v,
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
                            SS_RANK_STEPS_METRICS};
    ss_rank_steps *cur = NULL;
    int rc = ss_reader_rank_steps(s->r, &q, &cur);
    const ss_rank_step_row *row;
    while (rc == 0 && cur && ss_rank_steps_next(cur, &row) == 1) {
        cell *x = at(s, row->step, row->rank);
        if (!x)
            continue;
        uint64_t h = 1469598103934665603ull;
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
                h = fnv(fnv(h, name, strlen(name) + 1), &v, sizeof v);
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

/* ---- the command ---- */

typedef struct {
    int status;           /* 0, 1, 2 */
    char why[256];        /* 2: why not */
    int64_t common;       /* common steps compared */
    int64_t checksum_steps;
    int64_t step;         /* 1: the first divergent step */
    int32_t ranks[DIFF_MAX_NAMED];
    uint32_t n_ranks, n_ranks_total;
    const char *what;     /* "loss", "numerics", "checksum" */
    double loss_a, loss_b;
    char param[192];
    uint32_t params_differ, params_total;
    double max_loss_diff;
    int64_t max_loss_step;
    double last_loss_diff;
    int64_t last_step;
} result;

static int open_side(side *s, FILE *err)
{
    char msg[1024];
    s->r = ss_reader_open(s->db, msg, sizeof msg);
    if (!s->r) {
        fprintf(err, "stepscope diff: %s\n", msg);
        return -1;
    }
    int rc = ss_reader_select_run(s->r, s->spec, &s->run);
    if (rc == 0)
        rc = ss_reader_attempt(s->r, s->run, -1, &s->attempt, NULL);
    if (rc == 0)
        rc = ss_reader_world_size(s->r, s->run, &s->world);
    if (rc == 0)
        rc = ss_reader_step_bounds(s->r, s->run, s->attempt, NULL, &s->first,
                                   &s->last);
    if (rc) {
        fprintf(err, "stepscope diff: %s\n", ss_reader_errmsg(s->r));
        return -1;
    }
    return 0;
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
                if (named < DIFF_MAX_NAMED)
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

static void fmt_ranks(ss_buf *b, const result *res)
{
    ss_buf_printf(b, "rank%s ", res->n_ranks_total == 1 ? "" : "s");
    for (uint32_t i = 0; i < res->n_ranks; i++)
        ss_buf_printf(b, "%s%d", i ? ", " : "", res->ranks[i]);
    if (res->n_ranks_total > res->n_ranks)
        ss_buf_printf(b, " (%u ranks in all)", res->n_ranks_total);
}

static void put_num(ss_buf *b, double v)
{
    if (isfinite(v))
        ss_buf_printf(b, "%.17g", v);
    else
        ss_buf_puts(b, "null");
}

static void text(ss_buf *b, const side *a, const side *c, const result *res)
{
    ss_buf_printf(b, "run A: run %" PRId64 " of %s (attempt %" PRId64 ", "
                  "steps %" PRId64 "-%" PRId64 ")\n", a->run,
                  ss_reader_path(a->r), a->attempt, a->first, a->last);
    ss_buf_printf(b, "run B: run %" PRId64 " of %s (attempt %" PRId64 ", "
                  "steps %" PRId64 "-%" PRId64 ")\n", c->run,
                  ss_reader_path(c->r), c->attempt, c->first, c->last);
    if (res->status == 2) {
        ss_buf_printf(b, "cannot compare: %s\n", res->why);
        return;
    }
    ss_buf_printf(b, "compared: %" PRId64 " common steps, %" PRId64
                  " with checksums, %" PRId64 " ranks\n", res->common,
                  res->checksum_steps, a->world);
    if (res->status == 0) {
        ss_buf_puts(b, "identical: every loss, numerics value and "
                       "checksum is the same\n");
        return;
    }
    ss_buf_printf(b, "diverged at step %" PRId64 " on ", res->step);
    fmt_ranks(b, res);
    ss_buf_printf(b, ": %s first",
                  strcmp(res->what, "loss") == 0 ? "the loss differs"
                  : strcmp(res->what, "numerics") == 0
                      ? "a numerics value (a gradient or parameter norm) "
                        "differs"
                      : "the parameters' checksums differ");
    if (strcmp(res->what, "loss") == 0)
        ss_buf_printf(b, " (%.9g vs %.9g)", res->loss_a, res->loss_b);
    ss_buf_puts(b, "\n");
    if (res->param[0])
        ss_buf_printf(b, "first parameter that differs: %s (%u of %u "
                      "differ on rank %d)\n", res->param,
                      res->params_differ, res->params_total, res->ranks[0]);
    if (res->last_step >= 0)
        ss_buf_printf(b, "after it the mean loss differs by up to %.6g "
                      "(step %" PRId64 "), by %.6g at the last common step "
                      "%" PRId64 "\n", res->max_loss_diff,
                      res->max_loss_step, res->last_loss_diff,
                      res->last_step);
}

static void json_side(ss_buf *b, const char *key, const side *s)
{
    ss_buf_printf(b, "  \"%s\": {\"db\": ", key);
    ss_buf_json_str(b, ss_reader_path(s->r));
    ss_buf_printf(b, ", \"run\": %" PRId64 ", \"attempt\": %" PRId64
                  ", \"world_size\": %" PRId64 ", \"first_step\": %" PRId64
                  ", \"last_step\": %" PRId64 "},\n", s->run, s->attempt,
                  s->world, s->first, s->last);
}

static void json(ss_buf *b, const side *a, const side *c, const result *res)
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
    if (res->status != 1) {
        ss_buf_puts(b, "  \"divergence\": null\n}\n");
        return;
    }
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
    ss_buf_printf(b, ", \"last_step\": %" PRId64 "}\n}\n", res->last_step);
}

int ss_diff_cmd(int argc, char **argv, FILE *out, FILE *err)
{
    side a = {0}, c = {0};
    const char *db_b = NULL;
    int as_json = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            fputs(usage, out);
            return 0;
        } else if (strcmp(o, "--json") == 0) {
            as_json = 1;
        } else if (strcmp(o, "--db") == 0 || strcmp(o, "--db-b") == 0) {
            if (i + 1 >= argc || !*argv[i + 1]) {
                fprintf(err, "stepscope diff: %s needs a value\n", o);
                return 2;
            }
            *(o[4] == '-' ? &db_b : &a.db) = argv[++i];
        } else if (o[0] == '-' && o[1]) {
            fprintf(err, "stepscope diff: unknown option '%s' (see "
                         "`stepscope diff --help`)\n", o);
            return 2;
        } else if (!a.spec) {
            a.spec = o;
        } else if (!c.spec) {
            c.spec = o;
        } else {
            fprintf(err, "stepscope diff: unexpected argument '%s'\n", o);
            return 2;
        }
    }
    if (!a.spec || !c.spec) {
        fprintf(err, "stepscope diff: give two runs, RUN_A and RUN_B\n%s",
                usage);
        return 2;
    }
    c.db = db_b ? db_b : a.db;
    int status = 2;
    result res = {0};
    ss_buf b = {0};
    if (open_side(&a, err) != 0 || open_side(&c, err) != 0)
        goto done;
    if (a.world != c.world) {
        res.status = 2;
        snprintf(res.why, sizeof res.why, "different world sizes (%" PRId64
                 " and %" PRId64 " ranks)", a.world, c.world);
    } else if (a.first == SS_MISSING || c.first == SS_MISSING ||
               a.world <= 0) {
        res.status = 2;
        snprintf(res.why, sizeof res.why, "%s has no finalized step",
                 a.first == SS_MISSING ? "run A" : "run B");
    } else {
        /* both sides over the common range, bounded */
        int64_t first = a.first > c.first ? a.first : c.first;
        int64_t last = a.last < c.last ? a.last : c.last;
        if (last < first) {
            res.status = 2;
            snprintf(res.why, sizeof res.why, "no common steps (run A steps "
                     "%" PRId64 "-%" PRId64 ", run B %" PRId64 "-%" PRId64
                     ")", a.first, a.last, c.first, c.last);
        } else {
            int64_t max_steps = (int64_t)(DIFF_MAX_CELLS / (uint64_t)a.world);
            if (last - first + 1 > max_steps) {
                fprintf(err, "stepscope diff: comparing steps %" PRId64
                        "-%" PRId64 " only (a bound of %u rank-steps)\n",
                        first, first + max_steps - 1, DIFF_MAX_CELLS);
                last = first + max_steps - 1;
            }
            a.first = c.first = first;
            a.last = c.last = last;
            if (load(&a) != 0 || load(&c) != 0) {
                fprintf(err, "stepscope diff: %s\n",
                        ss_reader_errmsg(a.cells && c.cells ? c.r : a.r));
                goto done;
            }
            compare(&a, &c, &res);
        }
    }
    if (as_json)
        json(&b, &a, &c, &res);
    else
        text(&b, &a, &c, &res);
    if (b.oom) {
        fprintf(err, "stepscope diff: out of memory\n");
        goto done;
    }
    fwrite(b.data, 1, b.len, out);
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(err, "stepscope diff: writing the output: %s\n",
                strerror(errno));
        goto done;
    }
    status = res.status;
done:
    ss_buf_free(&b);
    free(a.cells);
    free(c.cells);
    ss_reader_close(a.r);
    ss_reader_close(c.r);
    return status;
}

int ss_diff_main(int argc, char **argv)
{
    return ss_diff_cmd(argc, argv, stdout, stderr);
}
