/*
 * detect_pipeline.c - the pipeline detector: each stage's measured bubble
 * against its schedule's formula, and the stage that makes the others wait
 * (pipeline_bubble).
 *
 * Ranks that declare a pipeline (ss_pipeline, stepscope.pipeline) send per
 * step two vectors (src/lib/pipeline.c): pipeline.config = [stage, stages,
 * schedule, microbatches, chunks, dropped spans] and pipeline.spans =
 * [index, kind (1 F, 2 B, 3 W), begin, end] per microbatch span, times in
 * ns after the rank's step begin.  Per rank and step this detector takes
 *
 *   busy     the union of the rank's spans;
 *   bubble   (its last span's end - its first span's begin) - busy: the
 *            time its compute thread was in no F/B/W span in between;
 *
 * and, from the mean span of each kind over the ranks (F, B, W; B_full =
 * B + W, the whole backward), the schedule's bubble, with p the stages:
 *
 *   gpipe, 1f1b   (p-1)(F + B_full)          GPipe; PipeDream-Flush
 *   interleaved   (p-1)(F + B_full), F and B one chunk's spans, so
 *                 1/chunks of the stage's     (Megatron-LM, Narayanan
 *                 work per microbatch          et al. 2021)
 *   zb1p          (p-1)(F + B_full - 2W)     (Qi et al. 2023, as tabled
 *   dualpipe      (p/2-1)(F&B + B_full - 3W)  in DeepSeek-V3, 2024); F&B,
 *                 an overlapped forward and backward, is taken as
 *                 F + B_full (no overlap gain: an upper bound)
 *
 * The step's ratio is the mean measured bubble over the ranks divided by
 * the formula.  Over the last WINDOW steps that carried spans, once
 * MIN_STEPS of them are in, a pipeline_bubble finding (warning) is made
 * when the median ratio is at least RATIO_MIN and the median excess
 * (measured - formula) at least EXCESS_MIN of the median span extent: the
 * stages wait for something the schedule does not explain.  It names the
 * rank (and its stage) whose busy time per step is the largest, when that
 * is at least BUSY_MIN times the median of the other ranks' (an unbalanced
 * layer split, a slow rank): the stage the others wait for, and by how
 * much; otherwise it says that no stage stands out (the wait is in the
 * transfers or the host).  One finding per attempt, rewritten while it
 * holds; docs/detectors.md and docs/workloads.md state the rules.
 * Nothing is allocated until a step carries pipeline vectors.
 */
#include "detectors_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "detect_pipeline.h"
#include "stats.h"

#define WINDOW 16       /* steps judged together */
#define MIN_STEPS 4     /* steps with spans before anything is judged */
#define RATIO_MIN 1.5   /* measured / formula, median over the window */
#define EXCESS_MIN 0.10 /* of the median extent of the spans */
#define BUSY_MIN 1.2    /* the named stage's busy vs the others' median */
#define MAX_SPANS 256   /* SS_PIPE_MAX_SPANS of the recorder */

static const char *const schedule_names[] = {"?", "gpipe", "1f1b",
                                             "interleaved", "zb1p",
                                             "dualpipe"};

/* One step of the window. */
typedef struct {
    uint64_t step;
    double measured_ms, formula_ms, extent_ms;
    double f_ms, b_ms, w_ms;
} step_row;

typedef struct {
    uint32_t world;
    int vec_spans, vec_config; /* name indexes, -1 unknown */
    /* allocated at the first pipeline step */
    step_row *rows;            /* WINDOW */
    double *busy_ms;           /* WINDOW x world, NaN: no spans */
    double *bubble_ms;         /* WINDOW x world */
    double *fb_ms;             /* WINDOW x world: mean F + B_full span */
    int32_t *stage;            /* world: the rank's stage, -1 unknown */
    double *scratch;           /* max(WINDOW, world) */
    double *spans;             /* MAX_SPANS x 2 (begin, end) */
    uint32_t head, n;          /* ring of rows */
    int stages, schedule, microbatches, chunks;
    uint64_t dropped;          /* spans the ranks dropped */
    int32_t finding;           /* -1 until one is made */
    uint64_t first_step;
} pipe_state;

static void *pipe_create(ss_detectors *d)
{
    pipe_state *g = ss__zalloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world = d->world;
    g->vec_spans = g->vec_config = -1;
    g->finding = -1;
    return g;
}

static void pipe_destroy(void *state)
{
    pipe_state *g = state;
    free(g->rows);
    free(g->busy_ms);
    free(g->bubble_ms);
    free(g->fb_ms);
    free(g->stage);
    free(g->scratch);
    free(g->spans);
    free(g);
}

static int start(pipe_state *g)
{
    size_t w = g->world ? g->world : 1;
    g->rows = ss__zalloc(WINDOW, sizeof *g->rows);
    g->busy_ms = ss__zalloc(WINDOW * w, sizeof *g->busy_ms);
    g->bubble_ms = ss__zalloc(WINDOW * w, sizeof *g->bubble_ms);
    g->fb_ms = ss__zalloc(WINDOW * w, sizeof *g->fb_ms);
    g->stage = ss__zalloc(w, sizeof *g->stage);
    g->scratch = ss__zalloc(w > WINDOW ? w : WINDOW, sizeof *g->scratch);
    g->spans = ss__zalloc(2 * MAX_SPANS, sizeof *g->spans);
    if (!g->rows || !g->busy_ms || !g->bubble_ms || !g->fb_ms ||
        !g->stage || !g->scratch || !g->spans)
        return -1;
    for (size_t r = 0; r < w; r++)
        g->stage[r] = -1;
    return 0;
}

static void pipe_names(void *state, ss_detectors *d, uint32_t n_names,
                       const char *const *names)
{
    (void)d;
    pipe_state *g = state;
    for (uint32_t i = 0; i < n_names; i++) {
        if (!names[i])
            continue;
        if (g->vec_spans < 0 && strcmp(names[i], "pipeline.spans") == 0)
            g->vec_spans = (int)i;
        if (g->vec_config < 0 && strcmp(names[i], "pipeline.config") == 0)
            g->vec_config = (int)i;
    }
}

static const ss_values_item *vector_of(const ss_rank_step *rs, int name)
{
    for (uint32_t i = 0; i < rs->n_values; i++)
        if (rs->values[i].name == name)
            return &rs->values[i];
    return NULL;
}

static int cmp_begin(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

double ss__pipeline_formula_ms(int schedule, int stages, double f_ms,
                               double b_ms, double w_ms)
{
    double p = stages, b_full = b_ms + w_ms, v;
    switch (schedule) {
    case 1: /* gpipe */
    case 2: /* 1f1b */
    case 3: /* interleaved: F and B are one chunk's spans */
        v = (p - 1) * (f_ms + b_full);
        break;
    case 4: /* zb1p */
        v = (p - 1) * (f_ms + b_full - 2 * w_ms);
        break;
    case 5: /* dualpipe: F&B taken as F + B_full */
        v = (p / 2 - 1) * ((f_ms + b_full) + b_full - 3 * w_ms);
        break;
    default:
        return NAN;
    }
    return v > 0 ? v : 0;
}

/* Busy and bubble of one rank's spans SV (4 doubles per span), in ms, and
 * its sums per kind into SUM/CNT (indexed by kind 1..3).  Returns 0, or
 * -1 when the vector holds no whole span. */
static int rank_spans(pipe_state *g, const ss_values_item *sv, double *busy,
                      double *bubble, double *extent, double sum[4],
                      double cnt[4])
{
    uint32_t n = sv->n / 4;
    if (n > MAX_SPANS)
        n = MAX_SPANS;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        const double *s = &sv->v[4 * i];
        int kind = (int)s[1];
        if (!isfinite(s[2]) || !isfinite(s[3]) || s[3] < s[2] || kind < 1 ||
            kind > 3)
            continue;
        g->spans[2 * k] = s[2];
        g->spans[2 * k + 1] = s[3];
        sum[kind] += s[3] - s[2];
        cnt[kind] += 1;
        k++;
    }
    if (!k)
        return -1;
    qsort(g->spans, k, 2 * sizeof *g->spans, cmp_begin);
    double first = g->spans[0], last = g->spans[1], u = 0;
    double cur_b = g->spans[0], cur_e = g->spans[1];
    for (uint32_t i = 1; i < k; i++) {
        double b = g->spans[2 * i], e = g->spans[2 * i + 1];
        if (e > last)
            last = e;
        if (b > cur_e) {
            u += cur_e - cur_b;
            cur_b = b, cur_e = e;
        } else if (e > cur_e) {
            cur_e = e;
        }
    }
    u += cur_e - cur_b;
    *busy = u / 1e6;
    *extent = (last - first) / 1e6;
    *bubble = *extent - *busy;
    return 0;
}

static double median_of(double *x, uint32_t n)
{
    return n ? ss_median_f64(x, n) : NAN;
}

/* The rank with the largest median busy time over the window, its median
 * and the median of the other ranks' medians; -1 when fewer than 2 ranks
 * have spans. */
static int32_t busiest(pipe_state *g, double *own_ms, double *others_ms,
                       double *own_fb, double *others_fb)
{
    uint32_t w = g->world;
    double *med = ss__zalloc(w, sizeof *med), *fb = ss__zalloc(w, sizeof *fb);
    int32_t best = -1;
    uint32_t with = 0;
    if (!med || !fb)
        goto out;
    for (uint32_t r = 0; r < w; r++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < g->n; i++) {
            double x = g->busy_ms[i * w + r];
            if (isfinite(x))
                g->scratch[n++] = x;
        }
        med[r] = median_of(g->scratch, n);
        n = 0;
        for (uint32_t i = 0; i < g->n; i++) {
            double x = g->fb_ms[i * w + r];
            if (isfinite(x))
                g->scratch[n++] = x;
        }
        fb[r] = median_of(g->scratch, n);
        if (!isfinite(med[r]))
            continue;
        with++;
        if (best < 0 || med[r] > med[best])
            best = (int32_t)r;
    }
    if (with < 2) {
        best = -1;
        goto out;
    }
    uint32_t n = 0, m = 0;
    double *fbs = ss__zalloc(w, sizeof *fbs);
    if (!fbs) {
        best = -1;
        goto out;
    }
    for (uint32_t r = 0; r < w; r++)
        if ((int32_t)r != best && isfinite(med[r])) {
            g->scratch[n++] = med[r];
            if (isfinite(fb[r]))
                fbs[m++] = fb[r];
        }
    *own_ms = med[best];
    *others_ms = median_of(g->scratch, n);
    *own_fb = fb[best];
    *others_fb = median_of(fbs, m);
    free(fbs);
out:
    free(med);
    free(fb);
    return best;
}

/* Writes the finding from the window's medians. */
static void describe(pipe_state *g, ss_detectors *d, uint64_t step,
                     double ratio, double measured, double formula,
                     double extent)
{
    if (g->finding < 0) {
        g->finding = ss__finding_open(d, "pipeline_bubble");
        if (g->finding < 0)
            return;
        g->first_step = step;
    }
    ss_finding *f = ss__finding(d, g->finding);
    f->first_step = g->first_step;
    f->last_step = step;
    double own = NAN, others = NAN, own_fb = NAN, others_fb = NAN;
    int32_t rank = busiest(g, &own, &others, &own_fb, &others_fb);
    int named = rank >= 0 && others > 0 && own / others >= BUSY_MIN;
    const char *sched = schedule_names[g->schedule >= 1 &&
                                               g->schedule <= 5
                                           ? g->schedule
                                           : 0];
    char a[32], b[32], c[32], e[32];
    int len = snprintf(f->message, sizeof f->message,
                       "The %d-stage %s pipeline waits %s ms per step per "
                       "stage against the schedule's %s ms (x%.1f, median "
                       "of %u steps). ",
                       g->stages, sched, ss__fmt_ms(a, sizeof a, measured),
                       ss__fmt_ms(b, sizeof b, formula), ratio, g->n);
    if (len < 0)
        len = 0;
    if ((size_t)len >= sizeof f->message)
        len = (int)sizeof f->message - 1;
    if (named) {
        int stage = g->stage[rank];
        snprintf(f->message + len, sizeof f->message - (size_t)len,
                 "Stage %d (rank %d) makes the others wait: it computes "
                 "%s ms per step, x%.1f the other stages' %s ms (a "
                 "microbatch's F+B %s ms against %s ms).",
                 stage, rank, ss__fmt_ms(a, sizeof a, own), own / others,
                 ss__fmt_ms(b, sizeof b, others),
                 ss__fmt_ms(c, sizeof c, own_fb),
                 ss__fmt_ms(e, sizeof e, others_fb));
        ss__set_ranks(f, &rank, 1);
    } else {
        snprintf(f->message + len, sizeof f->message - (size_t)len,
                 "No stage computes much more than the others: the wait is "
                 "in the transfers between stages or the host.");
        f->n_ranks = 0;
    }
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "schedule", sched);
    ss__evidence_int(ev, "stages", g->stages);
    ss__evidence_int(ev, "microbatches", g->microbatches);
    if (g->chunks > 1)
        ss__evidence_int(ev, "chunks", g->chunks);
    ss__evidence_num(ev, "measured_ms", measured);
    ss__evidence_num(ev, "formula_ms", formula);
    ss__evidence_num(ev, "ratio", ratio);
    ss__evidence_num(ev, "extent_ms", extent);
    ss__evidence_int(ev, "window", g->n);
    if (named) {
        ss__evidence_int(ev, "stage", g->stage[rank]);
        ss__evidence_int(ev, "rank", rank);
        ss__evidence_num(ev, "stage_busy_ms", own);
        ss__evidence_num(ev, "others_busy_ms", others);
        ss__evidence_num(ev, "busy_ratio", own / others);
        ss__evidence_num(ev, "stage_fb_ms", own_fb);
        ss__evidence_num(ev, "others_fb_ms", others_fb);
    }
    if (g->dropped)
        ss__evidence_int(ev, "dropped_spans", (int64_t)g->dropped);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, g->finding);
}

static void pipe_step(void *state, ss_detectors *d, const ss_step_view *v,
                      uint32_t world)
{
    pipe_state *g = state;
    if (g->vec_spans < 0 || g->vec_config < 0 || world > g->world)
        return;
    if (!g->rows && start(g) < 0)
        return;
    uint32_t slot = g->head, w = g->world;
    double sum[4] = {0}, cnt[4] = {0}, bubble_sum = 0, extent_max = 0;
    uint32_t ranks = 0;
    for (uint32_t r = 0; r < w; r++) {
        g->busy_ms[slot * w + r] = NAN;
        g->bubble_ms[slot * w + r] = NAN;
        g->fb_ms[slot * w + r] = NAN;
    }
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        const ss_values_item *cv = vector_of(rs, g->vec_config);
        const ss_values_item *sv = vector_of(rs, g->vec_spans);
        if (!cv || cv->n < 6 || !sv)
            continue;
        g->stage[r] = (int32_t)cv->v[0];
        g->stages = (int)cv->v[1];
        g->schedule = (int)cv->v[2];
        g->microbatches = (int)cv->v[3];
        g->chunks = (int)cv->v[4];
        if (cv->v[5] > 0)
            g->dropped += (uint64_t)cv->v[5];
        double busy, bubble, extent, s[4] = {0}, c[4] = {0};
        if (rank_spans(g, sv, &busy, &bubble, &extent, s, c) < 0)
            continue;
        for (int k = 1; k <= 3; k++)
            sum[k] += s[k], cnt[k] += c[k];
        g->busy_ms[slot * w + r] = busy;
        g->bubble_ms[slot * w + r] = bubble;
        g->fb_ms[slot * w + r] =
            ((c[1] ? s[1] / c[1] : 0) + (c[2] ? s[2] / c[2] : 0) +
             (c[3] ? s[3] / c[3] : 0)) / 1e6;
        bubble_sum += bubble;
        if (extent > extent_max)
            extent_max = extent;
        ranks++;
    }
    if (ranks < 2 || g->stages < 2)
        return;
    step_row *row = &g->rows[slot];
    row->step = v->step;
    row->f_ms = cnt[1] ? sum[1] / cnt[1] / 1e6 : 0;
    row->b_ms = cnt[2] ? sum[2] / cnt[2] / 1e6 : 0;
    row->w_ms = cnt[3] ? sum[3] / cnt[3] / 1e6 : 0;
    row->measured_ms = bubble_sum / ranks;
    row->formula_ms = ss__pipeline_formula_ms(g->schedule, g->stages,
                                              row->f_ms, row->b_ms, row->w_ms);
    row->extent_ms = extent_max;
    g->head = (g->head + 1) % WINDOW;
    if (g->n < WINDOW)
        g->n++;
    if (g->n < MIN_STEPS)
        return;
    double ratio[WINDOW], excess[WINDOW], meas[WINDOW], form[WINDOW],
        ext[WINDOW];
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n; i++) {
        const step_row *x = &g->rows[i];
        if (!(x->formula_ms > 0))
            continue;
        ratio[n] = x->measured_ms / x->formula_ms;
        excess[n] = x->measured_ms - x->formula_ms;
        meas[n] = x->measured_ms;
        form[n] = x->formula_ms;
        ext[n] = x->extent_ms;
        n++;
    }
    if (n < MIN_STEPS)
        return;
    double med_ratio = median_of(ratio, n), med_excess = median_of(excess, n),
           med_ext = median_of(ext, n);
    if (med_ratio >= RATIO_MIN && med_excess >= EXCESS_MIN * med_ext)
        describe(g, d, v->step, med_ratio, median_of(meas, n),
                 median_of(form, n), med_ext);
}

const ss__detector ss__pipeline_detector = {
    .name = "pipeline",
    .create = pipe_create,
    .on_names = pipe_names,
    .on_step = pipe_step,
    .destroy = pipe_destroy,
};
