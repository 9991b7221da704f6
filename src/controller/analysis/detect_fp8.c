/*
 * detect_fp8.c - the float8 detector: a float8 cast that saturates, one
 * that underflows, and an invalid scale, named by layer, tensor, rank and
 * step.
 *
 * Ranks send the float8 health of each cast tensor through the vector
 * channel (python/stepscope/_fp8.py): per step five vectors, fp8.amax,
 * fp8.scale, fp8.saturated (the fraction of the elements the cast clips),
 * fp8.underflow (the fraction of the non-zero values it flushes to zero)
 * and fp8.format (the format's code, 0 where the tensor was not recorded in
 * the step), indexed alike and labelled "LAYER.TENSOR" (TENSOR input,
 * weight or grad).  A tensor is known by its label, whatever its index on
 * each rank; at most MAX_TENSORS labels per attempt are judged (the rest
 * are counted in dropped).
 *
 * Saturation (fp8_saturation) and underflow (fp8_underflow), per tensor: a
 * step is over the threshold when some rank's fraction is above
 * fp8.saturation_frac (fp8.underflow_frac); an episode is a run of such
 * steps no more than fp8.window steps apart, and it becomes a warning
 * finding once it holds fp8.min_steps of them: one cast that clips is what
 * a delayed scale does now and then, a cast that keeps clipping loses the
 * tensor's largest values.  The finding names the ranks over the
 * threshold, the episode's first step, and the worst step with its amax
 * and scale; it grows with the episode.  Fractions of a rank-step whose
 * scale is invalid are not judged (they mean nothing then).
 *
 * Invalid scale (fp8_scale): a scale that is not a positive finite number
 * makes the cast give NaN (0 x inf) or infinities, at once: one step is
 * enough for a critical finding.  Once one tensor's scale goes bad, the
 * NaN it makes spreads to the tensors after it, so one finding covers an
 * episode (until fp8.window steps pass without an invalid scale): it names
 * the first invalid scale, the first in the recording order of the lowest
 * rank of the episode's first step, with the ranks that had one in that
 * step, and counts the tensors, ranks and steps it spread to.
 *
 * docs/detectors.md states the rules and defaults.  Nothing is allocated
 * until a step carries float8 vectors.
 */
#include "detectors_internal.h"

#include <math.h>
#include <string.h>

enum { V_AMAX, V_SCALE, V_SAT, V_UNDER, V_FORMAT, N_VECTORS };
static const char *const vector_names[N_VECTORS] = {
    "fp8.amax", "fp8.scale", "fp8.saturated", "fp8.underflow", "fp8.format"};

#define MAX_TENSORS 1024          /* labels judged per attempt */
#define HASH_SLOTS (2 * MAX_TENSORS)
#define MAX_LABEL 255             /* bytes of a label kept */
#define N_JUDGED 2                /* saturation, underflow */

/* One episode of a tensor over a threshold. */
typedef struct {
    uint32_t hits;          /* steps over the threshold in the episode */
    uint64_t first_step, last_step;
    double worst, worst_amax, worst_scale;
    uint64_t worst_step;
    int32_t worst_rank;
    uint32_t n_ranks;       /* distinct ranks over it */
    int32_t ranks[MAX_LISTED];
    uint8_t *rank_seen;     /* world bits, from the first hit */
    int32_t finding;        /* -1 until the episode is one */
    uint8_t touched;        /* over the threshold in the current step */
} episode;

typedef struct {
    char *label;
    int format;             /* the latest format code */
    episode ep[N_JUDGED];
    uint32_t scale_episode; /* the scale episode it was last invalid in */
    uint8_t listed;         /* in fp8.touched for the current step */
} tensor;

/* The invalid-scale episode. */
typedef struct {
    uint32_t id;            /* 0: none yet */
    int32_t finding;        /* -1: no episode open */
    int origin;             /* the tensor of the first invalid scale */
    double scale, amax;     /* the origin's */
    uint64_t first_step, last_step;
    uint32_t steps, tensors, spread_ranks;
    uint32_t n_first;       /* ranks with one in the first step */
    int32_t first_ranks[MAX_LISTED];
    uint8_t *rank_seen;     /* world bits */
    uint8_t touched;
} scale_state;

typedef struct {
    uint32_t world;
    int vec[N_VECTORS];     /* name indexes of the vectors, -1 unknown */
    uint32_t n_tensors;
    tensor *tensors;        /* MAX_TENSORS, allocated at the first vectors */
    int16_t *slots;         /* HASH_SLOTS: tensor index + 1, 0 empty */
    uint32_t *touched;      /* tensors touched in the current step */
    uint32_t n_touched;
    scale_state scale;
    uint64_t dropped;       /* values of labels beyond MAX_TENSORS */
} fp8;

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < MAX_LABEL && s[i]; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* The index of LABEL's tensor, added when new; -1 when the table is full
 * or memory runs out. */
static int tensor_of(fp8 *g, const char *label)
{
    uint32_t k = hash(label) % HASH_SLOTS;
    for (; g->slots[k]; k = (k + 1) % HASH_SLOTS)
        if (strncmp(g->tensors[g->slots[k] - 1].label, label, MAX_LABEL) == 0)
            return g->slots[k] - 1;
    if (g->n_tensors >= MAX_TENSORS)
        return -1;
    tensor *t = &g->tensors[g->n_tensors];
    size_t n = strnlen(label, MAX_LABEL);
    t->label = malloc(n + 1);
    if (!t->label)
        return -1;
    memcpy(t->label, label, n);
    t->label[n] = '\0';
    for (int j = 0; j < N_JUDGED; j++)
        t->ep[j].finding = -1;
    g->slots[k] = (int16_t)(++g->n_tensors);
    return (int)g->n_tensors - 1;
}

static int start(fp8 *g)
{
    g->tensors = ss__zalloc(MAX_TENSORS, sizeof *g->tensors);
    g->slots = ss__zalloc(HASH_SLOTS, sizeof *g->slots);
    g->touched = ss__zalloc(MAX_TENSORS, sizeof *g->touched);
    g->scale.rank_seen = ss__zalloc((g->world + 7) / 8, 1);
    if (!g->tensors || !g->slots || !g->touched || !g->scale.rank_seen) {
        free(g->tensors);
        free(g->slots);
        free(g->touched);
        free(g->scale.rank_seen);
        g->tensors = NULL;
        g->slots = NULL;
        g->touched = NULL;
        g->scale.rank_seen = NULL;
        return -1;
    }
    return 0;
}

/* Sets rank R's bit in SEEN; returns 1 when it was not set. */
static int see_rank(uint8_t *seen, uint32_t r)
{
    uint8_t bit = (uint8_t)(1u << (r % 8));
    if (seen[r / 8] & bit)
        return 0;
    seen[r / 8] |= bit;
    return 1;
}

static double threshold(const ss_detectors *d, int j)
{
    return d->p[j == 0 ? P_F_SAT_FRAC : P_F_UNDER_FRAC];
}

/* Tensor T was over threshold J on rank R in STEP with FRAC. */
static void hit(fp8 *g, ss_detectors *d, uint32_t t, int j, uint32_t r,
                uint64_t step, double frac, double amax, double scale)
{
    episode *e = &g->tensors[t].ep[j];
    if (!e->touched) {
        if (e->hits && step - e->last_step > (uint64_t)d->p[P_F_WINDOW]) {
            /* a new episode: the old finding keeps its last form */
            uint8_t *seen = e->rank_seen;
            memset(e, 0, sizeof *e);
            e->rank_seen = seen;
            e->finding = -1;
            if (seen)
                memset(seen, 0, (g->world + 7) / 8);
        }
        if (!e->rank_seen) {
            e->rank_seen = ss__zalloc((g->world + 7) / 8, 1);
            if (!e->rank_seen)
                return;
        }
        if (e->hits++ == 0)
            e->first_step = step;
        e->last_step = step;
        e->touched = 1;
        if (!g->tensors[t].listed) {
            g->tensors[t].listed = 1;
            g->touched[g->n_touched++] = t;
        }
    }
    if (see_rank(e->rank_seen, r)) {
        if (e->n_ranks < MAX_LISTED)
            e->ranks[e->n_ranks] = (int32_t)r;
        e->n_ranks++;
    }
    if (frac > e->worst) {
        e->worst = frac;
        e->worst_step = step;
        e->worst_rank = (int32_t)r;
        e->worst_amax = amax;
        e->worst_scale = scale;
    }
}

/* Tensor T's scale SCALE (amax AMAX) is invalid on rank R in STEP. */
static void invalid(fp8 *g, ss_detectors *d, uint32_t t, uint32_t r,
                    uint64_t step, double scale, double amax)
{
    scale_state *s = &g->scale;
    if (s->finding >= 0 && !s->touched &&
        step - s->last_step > (uint64_t)d->p[P_F_WINDOW])
        s->finding = -1;
    if (s->finding < 0) {
        int32_t idx = ss__finding_open(d, "fp8_scale");
        if (idx < 0)
            return;
        s->finding = idx;
        s->id++;
        s->origin = (int)t;
        s->scale = scale;
        s->amax = amax;
        s->first_step = step;
        s->steps = s->tensors = s->spread_ranks = s->n_first = 0;
        memset(s->rank_seen, 0, (g->world + 7) / 8);
    }
    if (!s->touched) {
        s->steps++;
        s->last_step = step;
        s->touched = 1;
    }
    if (g->tensors[t].scale_episode != s->id) {
        g->tensors[t].scale_episode = s->id;
        s->tensors++;
    }
    if (see_rank(s->rank_seen, r)) {
        s->spread_ranks++;
        if (step == s->first_step && s->n_first < MAX_LISTED)
            s->first_ranks[s->n_first++] = (int32_t)r;
    }
}

/* The item of vector V in rank step RS, or NULL. */
static const ss_values_item *item(const fp8 *g, const ss_rank_step *rs, int v)
{
    if (g->vec[v] < 0)
        return NULL;
    for (uint32_t i = 0; i < rs->n_values; i++)
        if (rs->values[i].name == g->vec[v])
            return &rs->values[i];
    return NULL;
}

static double at(const ss_values_item *it, uint32_t i)
{
    return it && i < it->n ? it->v[i] : NAN;
}

static void rank_step(fp8 *g, ss_detectors *d, const ss_rank_step *rs,
                      uint32_t r, uint64_t step)
{
    const ss_values_item *it[N_VECTORS];
    for (int v = 0; v < N_VECTORS; v++)
        it[v] = item(g, rs, v);
    const ss_values_item *fmt = it[V_FORMAT];
    if (!fmt || !fmt->labels || !it[V_SCALE])
        return;
    for (uint32_t i = 0; i < fmt->n && i < fmt->n_labels; i++) {
        double code = fmt->v[i];
        if (!(code >= 1 && code <= 4) || !fmt->labels[i])
            continue;
        int t = tensor_of(g, fmt->labels[i]);
        if (t < 0) {
            g->dropped++;
            continue;
        }
        g->tensors[t].format = (int)code;
        double scale = at(it[V_SCALE], i), amax = at(it[V_AMAX], i);
        if (!(isfinite(scale) && scale > 0)) {
            invalid(g, d, (uint32_t)t, r, step, scale, amax);
            continue;
        }
        const double frac[N_JUDGED] = {at(it[V_SAT], i), at(it[V_UNDER], i)};
        for (int j = 0; j < N_JUDGED; j++)
            if (frac[j] > threshold(d, j))
                hit(g, d, (uint32_t)t, j, r, step, frac[j], amax, scale);
    }
}

static void describe_episode(fp8 *g, ss_detectors *d, uint32_t t, int j)
{
    episode *e = &g->tensors[t].ep[j];
    if (e->finding < 0) {
        if (e->hits < ss__param_u32(d, P_F_MIN_STEPS))
            return;
        e->finding = ss__finding_open(
            d, j == 0 ? "fp8_saturation" : "fp8_underflow");
        if (e->finding < 0)
            return;
    }
    ss__fp8_words w = {
        .kind = j == 0 ? SS_FP8_SATURATION : SS_FP8_UNDERFLOW,
        .label = g->tensors[t].label,
        .format = g->tensors[t].format,
        .first_step = e->first_step,
        .steps = e->hits,
        .threshold = threshold(d, j),
        .worst = e->worst,
        .worst_step = e->worst_step,
        .worst_rank = e->worst_rank,
        .amax = e->worst_amax,
        .scale = e->worst_scale,
        .ranks = e->ranks,
        .n_ranks = e->n_ranks < MAX_LISTED ? e->n_ranks : MAX_LISTED,
        .total_ranks = e->n_ranks,
    };
    ss_finding *f = ss__finding(d, e->finding);
    ss__fp8_describe(d, f, &w);
    f->last_step = e->last_step;
    ss__finding_touch(d, e->finding);
}

static void describe_scale(fp8 *g, ss_detectors *d)
{
    scale_state *s = &g->scale;
    tensor *o = &g->tensors[s->origin];
    ss__fp8_words w = {
        .kind = SS_FP8_SCALE,
        .label = o->label,
        .format = o->format,
        .first_step = s->first_step,
        .steps = s->steps,
        .worst = s->scale,
        .scale = s->scale,
        .amax = s->amax,
        .ranks = s->first_ranks,
        .n_ranks = s->n_first,
        .total_ranks = s->n_first,
        .tensors = s->tensors,
        .spread_ranks = s->spread_ranks,
    };
    ss_finding *f = ss__finding(d, s->finding);
    ss__fp8_describe(d, f, &w);
    f->last_step = s->last_step;
    ss__finding_touch(d, s->finding);
}

static void fp8_names(void *state, ss_detectors *d, uint32_t n_names,
                      const char *const *names)
{
    (void)d;
    fp8 *g = state;
    for (int v = 0; v < N_VECTORS; v++) {
        if (g->vec[v] >= 0)
            continue;
        for (uint32_t i = 0; i < n_names; i++)
            if (names[i] && strcmp(names[i], vector_names[v]) == 0) {
                g->vec[v] = (int)i;
                break;
            }
    }
}

static void fp8_step(void *state, ss_detectors *d, const ss_step_view *v,
                     uint32_t world)
{
    fp8 *g = state;
    if (g->vec[V_FORMAT] < 0 || (!g->tensors && start(g) < 0))
        return;
    g->n_touched = 0;
    g->scale.touched = 0;
    for (uint32_t r = 0; r < world && r < g->world; r++)
        if (v->ranks[r].present && v->ranks[r].n_values)
            rank_step(g, d, &v->ranks[r], r, v->step);
    for (uint32_t k = 0; k < g->n_touched; k++) {
        uint32_t t = g->touched[k];
        g->tensors[t].listed = 0;
        for (int j = 0; j < N_JUDGED; j++)
            if (g->tensors[t].ep[j].touched) {
                g->tensors[t].ep[j].touched = 0;
                describe_episode(g, d, t, j);
            }
    }
    if (g->scale.touched)
        describe_scale(g, d);
}

static void fp8_destroy(void *state)
{
    fp8 *g = state;
    if (g->tensors)
        for (uint32_t t = 0; t < g->n_tensors; t++) {
            free(g->tensors[t].label);
            for (int j = 0; j < N_JUDGED; j++)
                free(g->tensors[t].ep[j].rank_seen);
        }
    free(g->tensors);
    free(g->slots);
    free(g->touched);
    free(g->scale.rank_seen);
    free(g);
}

static void *fp8_create(ss_detectors *d)
{
    fp8 *g = ss__zalloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world = d->world;
    for (int v = 0; v < N_VECTORS; v++)
        g->vec[v] = -1;
    g->scale.finding = -1;
    return g;
}

const ss__detector ss__fp8_detector = {
    .name = "fp8",
    .create = fp8_create,
    .on_names = fp8_names,
    .on_step = fp8_step,
    .on_end = NULL,
    .destroy = fp8_destroy,
};
