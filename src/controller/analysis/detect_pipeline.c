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
 *   bubble   the step's extent - busy: the time the rank's compute thread
 *            was in no F/B/W span between the step's first span (of any
 *            rank) and its last one, the ranks' spans placed by their
 *            aligned step begins (each rank's own first and last span when
 *            a rank's begin is unknown);
 *
 * and, from the mean span of each kind over the ranks (F, B, W), the
 * schedule's bubble: the formulas and their sources are in
 * base/pipeline_bubble.c, shared with `stepscope trace`.
 *
 * The step's ratio is the mean measured bubble over the ranks divided by
 * the formula.  Over the last WINDOW steps that carried spans, once
 * MIN_STEPS of them are in, the medians are judged: the measured bubble
 * is over the formula when the median ratio is at least RATIO_MIN and the
 * median excess (measured - formula) at least EXCESS_MIN of the median
 * extent.  The formula takes the mean F and B over all stages, a heavy
 * stage's included (the bubble a balanced split of the same work would
 * have), so a first stage three times as heavy measures only about 1.6
 * times it on an idle machine: RATIO_MIN stays below that.  Then the rank (and its stage) whose busy time per step is the
 * largest is the stage the others wait for when it is at least BUSY_MIN
 * times the median of the other ranks' (an unbalanced layer split, a slow
 * rank), and a pipeline_bubble finding (warning) names it and by how
 * much.  Without such a stage the wait is in the transfers between stages
 * or the host, which a loaded machine adds to every schedule, so the
 * finding, naming no stage, needs the larger ratio RATIO_UNNAMED.  One
 * finding per attempt, rewritten while it holds; docs/detectors.md and
 * docs/workloads.md state the rules.
 * Nothing is allocated until a step carries pipeline vectors.
 */
#include "detectors_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline_bubble.h"
#include "stats.h"

#define WINDOW 16       /* steps judged together */
#define MIN_STEPS 4     /* steps with spans before anything is judged */
#define RATIO_MIN 1.25  /* measured / formula, median over the window */
#define EXCESS_MIN 0.10 /* of the median extent of the spans */
#define BUSY_MIN 1.6    /* the named stage's busy vs the others' median */
#define RATIO_UNNAMED 3.0 /* the ratio a finding naming no stage needs */

/* One step of the window. */
typedef struct {
    double measured_ms, formula_ms, extent_ms;
    double f_ms, b_ms, w_ms;
} step_row;

typedef struct {
    uint32_t world;
    int vec_spans, vec_config; /* name indexes, -1 unknown */
    /* allocated at the first pipeline step */
    step_row *rows;            /* WINDOW */
    double *busy_ms;           /* WINDOW x world, NaN: no spans */
    double *fb_ms;             /* WINDOW x world: mean F + B_full span */
    int32_t *stage;            /* world: the rank's stage, -1 unknown */
    double *first, *last;      /* world: this step's first begin and last
                                  end, ns (aligned when every rank's step
                                  begin is known) */
    double *scratch;           /* max(WINDOW, world) */
    double *spans;             /* scratch of ss_pipe_rank_read */
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
    free(g->fb_ms);
    free(g->stage);
    free(g->first);
    free(g->last);
    free(g->scratch);
    free(g->spans);
    free(g);
}

static int start(pipe_state *g)
{
    size_t w = g->world ? g->world : 1;
    g->rows = ss__zalloc(WINDOW, sizeof *g->rows);
    g->busy_ms = ss__zalloc(WINDOW * w, sizeof *g->busy_ms);
    g->fb_ms = ss__zalloc(WINDOW * w, sizeof *g->fb_ms);
    g->stage = ss__zalloc(w, sizeof *g->stage);
    g->first = ss__zalloc(w, sizeof *g->first);
    g->last = ss__zalloc(w, sizeof *g->last);
    g->scratch = ss__zalloc(w > WINDOW ? w : WINDOW, sizeof *g->scratch);
    g->spans = ss__zalloc(2 * SS_PIPE_SPANS_MAX, sizeof *g->spans);
    if (!g->rows || !g->busy_ms || !g->fb_ms ||
        !g->stage || !g->first || !g->last || !g->scratch || !g->spans)
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
    double own = NAN, others = NAN, own_fb = NAN, others_fb = NAN;
    int32_t rank = busiest(g, &own, &others, &own_fb, &others_fb);
    int named = rank >= 0 && others > 0 && own / others >= BUSY_MIN;
    if (!named && ratio < RATIO_UNNAMED)
        return;
    if (g->finding < 0) {
        g->finding = ss__finding_open(d, "pipeline_bubble");
        if (g->finding < 0)
            return;
        g->first_step = step;
    }
    ss_finding *f = ss__finding(d, g->finding);
    f->first_step = g->first_step;
    f->last_step = step;
    const char *sched = ss_pipe_schedule_name(g->schedule);
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
    double sum[4] = {0}, cnt[4] = {0};
    double t0 = INFINITY, t1 = -INFINITY; /* the step's extent, aligned */
    int aligned = 1;
    uint32_t ranks = 0;
    for (uint32_t r = 0; r < w; r++) {
        g->busy_ms[slot * w + r] = NAN;
        g->fb_ms[slot * w + r] = NAN;
        g->first[r] = g->last[r] = NAN;
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
        ss_pipe_rank pr;
        if (!ss_pipe_rank_read(sv->v, sv->n, g->spans, &pr))
            continue;
        const double *s = pr.sum_ns, *c = pr.count;
        double busy = pr.busy_ns, first = pr.first_ns, last = pr.last_ns;
        for (int k = 1; k <= 3; k++)
            sum[k] += s[k], cnt[k] += c[k];
        g->busy_ms[slot * w + r] = busy / 1e6;
        g->fb_ms[slot * w + r] =
            ((c[1] ? s[1] / c[1] : 0) + (c[2] ? s[2] / c[2] : 0) +
             (c[3] ? s[3] / c[3] : 0)) / 1e6;
        if (rs->begin_ns == SS_MISSING)
            aligned = 0;
        else {
            first += (double)rs->begin_ns;
            last += (double)rs->begin_ns;
        }
        g->first[r] = first, g->last[r] = last;
        if (first < t0)
            t0 = first;
        if (last > t1)
            t1 = last;
        ranks++;
    }
    double bubble_sum = 0, extent_max = 0;
    for (uint32_t r = 0; r < w; r++) {
        double busy = g->busy_ms[slot * w + r];
        if (!isfinite(busy))
            continue;
        double extent = aligned ? (t1 - t0) / 1e6
                                : (g->last[r] - g->first[r]) / 1e6;
        bubble_sum += extent - busy;
        if (extent > extent_max)
            extent_max = extent;
    }
    if (ranks < 2 || g->stages < 2)
        return;
    step_row *row = &g->rows[slot];
    row->f_ms = cnt[1] ? sum[1] / cnt[1] / 1e6 : 0;
    row->b_ms = cnt[2] ? sum[2] / cnt[2] / 1e6 : 0;
    row->w_ms = cnt[3] ? sum[3] / cnt[3] / 1e6 : 0;
    row->measured_ms = bubble_sum / ranks;
    row->formula_ms = ss_pipe_formula_ms(g->schedule, g->stages, row->f_ms,
                                         row->b_ms, row->w_ms);
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
