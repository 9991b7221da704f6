/*
 * detect_spike.c - the loss_spike and grad_spike detectors: a rank's loss
 * (numerics.loss) or gradient norm (numerics.grad_norm, its own gradients
 * before the all-reduce; python/stepscope/_numerics.py) far above its
 * recent values.
 *
 * Each rank's series is judged on its own, against the values before it:
 * a value is a spike when it lies above the median of the rank's last
 * spike.window values by more than K robust sigmas (1.4826 x MAD, of the
 * logarithms when the values are positive: losses and norms vary by
 * factors;
 * loss_spike.mad_k, grad_spike.mad_k; 1.2533 x the mean absolute
 * deviation when the MAD is 0) and is at least a factor of that
 * median (loss_spike.factor, grad_spike.factor) and rises above it by at
 * least spike.min_rise of the highest median the window has had (a loss
 * that converged near 0 and jumps by a hundredth of its first level is
 * noise, however many times its median that is), once the window holds
 * spike.min_samples values; or, as large trainers check, when after
 * spike.max_warmup values it is spike.max_ratio times the largest value
 * seen before.  The ranks spiking in one step make one finding; spikes
 * within spike.merge_steps of a finding's last step extend it, and at
 * most spike.max_findings findings of each kind are opened per attempt.
 * Missing values (a NaN loss is sent as missing, and counted by the
 * nonfinite detector) are skipped.  In full mode (the vector
 * numerics.param_grad_norm, labelled by parameter) each rank's parameters
 * have a moving average of their gradient norms over the steps without a
 * spike, and a grad_spike names the LAYERS parameters whose norm jumped
 * most above it.  Memory: spike.window floats per rank and kind, and one
 * float per parameter and rank in full mode.  docs/numerics.md states the rule and its defaults.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sorted_window.h"
#include "stats.h"

enum { K_LOSS, K_GRAD, N_KINDS };

#define LAYERS 3           /* parameters a grad_spike names */
#define EMA_ALPHA 0.2      /* weight of the newest norm in the average */
static const char *const layer_vector = "numerics.param_grad_norm";

static const char *const kind_names[N_KINDS] = {"loss_spike", "grad_spike"};
static const char *const metric_names[N_KINDS] = {"numerics.loss",
                                                  "numerics.grad_norm"};
static const char *const kind_words[N_KINDS] = {"loss", "gradient norm"};

typedef struct {
    float *ring;      /* the last `window` values, ring */
    uint32_t n, head; /* values held, next slot */
    ss_sorted_window sorted; /* ring's values, ascending (a float's
                                overflow counted apart) */
    uint32_t nonpositive;    /* ring's values <= 0: no logarithms */
    uint64_t seen;    /* values seen in all */
    double max_seen;
    double max_median; /* the highest median of the window judged against */
} series;

/* The finding being extended. */
typedef struct {
    int32_t finding;  /* -1: none open */
    uint32_t opened;  /* findings opened in this attempt */
    uint64_t first_step, last_step, peak_step;
    uint32_t spikes;  /* steps with a spike in the finding */
    int32_t ranks[SS_FINDING_MAX_RANKS];
    uint32_t n_ranks;
    double value, median, ratio, z; /* of the largest spike */
    int32_t peak_rank;
    int by_max;       /* the largest one was judged by spike.max_ratio */
    char layer[LAYERS][96]; /* the peak rank's parameters that jumped */
    double layer_ratio[LAYERS];
    uint32_t n_layers;
} episode;

/* A rank's average gradient norm per parameter (full mode). */
typedef struct {
    float *avg;   /* n entries, NaN until the parameter had a value */
    uint32_t n;
} layer_avg;

typedef struct {
    uint32_t world, window;
    int sig[N_KINDS];
    uint32_t n_classified;
    series *s[N_KINDS]; /* world each */
    episode ep[N_KINDS];
    double *scratch;    /* window */
    int vec;            /* name index of layer_vector, -1 */
    layer_avg *layers;  /* world */
} spikes;

static void add_rank(episode *e, int32_t r)
{
    for (uint32_t i = 0; i < e->n_ranks; i++)
        if (e->ranks[i] == r)
            return;
    if (e->n_ranks < SS_FINDING_MAX_RANKS)
        e->ranks[e->n_ranks++] = r;
}

static void refresh(ss_detectors *d, int k, episode *e)
{
    ss_finding *f = ss__finding(d, e->finding);
    ss__set_ranks(f, e->ranks, e->n_ranks);
    f->first_step = e->first_step;
    f->last_step = e->last_step;
    f->severity = SS_WARNING;
    char ranks[128], more[96] = "", why[96];
    ss__fmt_ranks(ranks, sizeof ranks, e->ranks, e->n_ranks, e->n_ranks);
    if (e->spikes > 1)
        snprintf(more, sizeof more, "; %u spiking steps from %" PRIu64
                 " to %" PRIu64, e->spikes, e->first_step, e->last_step);
    if (e->by_max)
        snprintf(why, sizeof why, "%.3g times the largest value seen before",
                 e->ratio);
    else
        snprintf(why, sizeof why, "%.3g times the median (%.4g) of its last "
                 "%u steps, %.0f robust sigmas above it", e->ratio,
                 e->median, (unsigned)d->p[P_SP_WINDOW], e->z);
    char whose[32] = "its";
    if (e->n_ranks > 1)
        snprintf(whose, sizeof whose, "rank %d's", e->peak_rank);
    char layers[400] = "", list[360] = "";
    for (uint32_t i = 0; i < e->n_layers; i++) {
        size_t o = strlen(list);
        snprintf(list + o, sizeof list - o, "%s%s (x%.3g)", i ? ", " : "",
                 e->layer[i], e->layer_ratio[i]);
    }
    if (e->n_layers)
        snprintf(layers, sizeof layers, "; the parameters whose gradient "
                 "norm jumped most: %s", list);
    snprintf(f->message, sizeof f->message,
             "%s spike at step %" PRIu64 " on %s: %s %s reached %.4g, %s%s%s.",
             k == K_LOSS ? "Loss" : "Gradient norm", e->peak_step, ranks,
             whose, kind_words[k], e->value, why, layers, more);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "step", (int64_t)e->peak_step);
    ss__evidence_int(ev, "rank", e->peak_rank);
    ss__evidence_num(ev, "value", e->value);
    ss__evidence_num(ev, "median", e->median);
    ss__evidence_num(ev, "ratio", round(e->ratio * 1000) / 1000);
    if (!e->by_max)
        ss__evidence_num(ev, "robust_z", round(e->z * 10) / 10);
    ss__evidence_str(ev, "rule", e->by_max ? "max_ratio" : "median_mad");
    ss__evidence_int(ev, "spikes", e->spikes);
    ss__evidence_int(ev, "window", (int64_t)d->p[P_SP_WINDOW]);
    if (e->n_layers)
        ss__evidence_str(ev, "layers", list);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, e->finding);
}

/* Judges V, the next value of series S, and adds it.  Returns 1 for a
 * spike, with its median, ratio, robust z and rule in the out-values. */
static int judge(ss_detectors *d, spikes *sp, int k, series *s, double v,
                 double *med_out, double *ratio_out, double *z_out,
                 int *by_max)
{
    double mad_k = d->p[k == K_LOSS ? P_LS_MAD_K : P_GS_MAD_K];
    double factor = d->p[k == K_LOSS ? P_LS_FACTOR : P_GS_FACTOR];
    int spike = 0;
    if (s->n >= ss__param_u32(d, P_SP_MIN_SAMPLES)) {
        /* Losses and norms vary by factors: judged on their logarithms
         * when the window and V are positive (a loss near 0 that goes
         * from 0.05 to 0.4 on one batch is noise, not a spike). */
        int logs = v > 0 && s->nonpositive == 0;
        double x = logs ? log(v) : v, lmed, mad;
        if (s->sorted.nonfinite == 0) {
            mad = logs ? ss_sorted_window_mad_log(&s->sorted, &lmed)
                       : ss_sorted_window_mad(&s->sorted, &lmed);
        } else {
            for (uint32_t i = 0; i < s->n; i++)
                sp->scratch[i] = logs ? log(s->ring[i]) : s->ring[i];
            mad = ss_mad_f64(sp->scratch, s->n, &lmed);
        }
        double sigma = 1.4826 * mad;
        if (sigma == 0) {
            /* More than half the window alike: the mean absolute
             * deviation stands in for the MAD (1.2533 x it estimates a
             * normal sigma), so one value above a flat median is not
             * infinitely far. */
            double sum = 0;
            for (uint32_t i = 0; i < s->n; i++)
                sum += fabs((logs ? log(s->ring[i]) : s->ring[i]) - lmed);
            sigma = 1.2533 * sum / s->n;
        }
        double z = sigma > 0 ? (x - lmed) / sigma : x > lmed ? INFINITY : 0;
        double med = logs ? exp(lmed) : lmed;
        if (med > s->max_median)
            s->max_median = med;
        if (z > mad_k && (med > 0 ? v >= factor * med : 1) &&
            v - med >= d->p[P_SP_MIN_RISE] * s->max_median) {
            spike = 1;
            *med_out = med;
            *ratio_out = med > 0 ? v / med : NAN;
            *z_out = z;
            *by_max = 0;
        }
    }
    if (!spike && s->seen >= (uint64_t)d->p[P_SP_MAX_WARMUP] &&
        s->max_seen > 0 && v >= d->p[P_SP_MAX_RATIO] * s->max_seen) {
        spike = 1;
        *med_out = NAN;
        *ratio_out = v / s->max_seen;
        *z_out = NAN;
        *by_max = 1;
    }
    if (s->n == sp->window) { /* the oldest value leaves */
        s->nonpositive -= !(s->ring[s->head] > 0);
        ss_sorted_window_remove(&s->sorted, s->ring[s->head]);
    }
    s->ring[s->head] = (float)v;
    s->nonpositive += !(s->ring[s->head] > 0);
    ss_sorted_window_add(&s->sorted, s->ring[s->head]);
    s->head = (s->head + 1) % sp->window;
    if (s->n < sp->window)
        s->n++;
    if (s->seen++ == 0 || v > s->max_seen)
        s->max_seen = v;
    return spike;
}

/* Rank RS's vector of per-parameter gradient norms, or NULL. */
static const ss_values_item *layer_item(const spikes *sp,
                                        const ss_rank_step *rs)
{
    for (uint32_t i = 0; sp->vec >= 0 && rs->values && i < rs->n_values; i++)
        if (rs->values[i].name == sp->vec)
            return &rs->values[i];
    return NULL;
}

/* Adds IT's norms to rank R's averages (a step without a spike). */
static void layers_learn(spikes *sp, uint32_t r, const ss_values_item *it)
{
    layer_avg *la = &sp->layers[r];
    if (la->n != it->n) { /* first time, or the model changed */
        free(la->avg);
        la->n = 0;
        la->avg = malloc(it->n * sizeof *la->avg);
        if (!la->avg)
            return;
        la->n = it->n;
        for (uint32_t i = 0; i < la->n; i++)
            la->avg[i] = NAN;
    }
    for (uint32_t i = 0; i < la->n; i++) {
        double x = it->v[i];
        if (!isfinite(x))
            continue;
        la->avg[i] = isnan(la->avg[i])
                         ? (float)x
                         : (float)(EMA_ALPHA * x +
                                   (1 - EMA_ALPHA) * la->avg[i]);
    }
}

/* The LAYERS parameters of IT (the spike's) most above rank R's
 * averages, into E. */
static void layers_name(const spikes *sp, uint32_t r,
                        const ss_values_item *it, episode *e)
{
    const layer_avg *la = &sp->layers[r];
    e->n_layers = 0;
    if (la->n != it->n || !it->labels)
        return;
    for (uint32_t i = 0; i < it->n && i < it->n_labels; i++) {
        double ratio = la->avg[i] > 0 ? it->v[i] / la->avg[i] : NAN;
        if (!isfinite(ratio) || ratio <= 1 || !it->labels[i])
            continue;
        uint32_t at = e->n_layers < LAYERS ? e->n_layers++ : LAYERS;
        if (at == LAYERS) {
            if (ratio <= e->layer_ratio[LAYERS - 1])
                continue;
            at = LAYERS - 1;
        }
        while (at > 0 && e->layer_ratio[at - 1] < ratio) {
            e->layer_ratio[at] = e->layer_ratio[at - 1];
            memcpy(e->layer[at], e->layer[at - 1], sizeof e->layer[at]);
            at--;
        }
        e->layer_ratio[at] = ratio;
        snprintf(e->layer[at], sizeof e->layer[at], "%s", it->labels[i]);
    }
}

static void kind_step(ss_detectors *d, spikes *sp, int k,
                      const ss_step_view *v, uint32_t world)
{
    int idx = sp->sig[k];
    if (idx < 0 || (uint32_t)idx >= v->n_names)
        return;
    episode *e = &sp->ep[k];
    int any = 0;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present || !rs->metric || !isfinite(rs->metric[idx]))
            continue;
        double med, ratio, z;
        int by_max;
        const ss_values_item *it = k == K_GRAD ? layer_item(sp, rs) : NULL;
        if (!judge(d, sp, k, &sp->s[k][r], rs->metric[idx], &med, &ratio, &z,
                   &by_max)) {
            if (it)
                layers_learn(sp, r, it);
            continue;
        }
        if (!any) {
            int extend = e->finding >= 0 &&
                         (v->step - e->last_step <=
                              (uint64_t)d->p[P_SP_MERGE] ||
                          e->opened >= ss__param_u32(d, P_SP_MAX_FINDINGS));
            if (!extend) {
                int32_t f = ss__finding_open(d, kind_names[k]);
                if (f < 0)
                    return;
                uint32_t opened = e->opened + 1;
                memset(e, 0, sizeof *e);
                e->finding = f;
                e->opened = opened;
                e->first_step = v->step;
                e->ratio = -1;
            }
            e->spikes++;
            e->last_step = v->step;
            any = 1;
        }
        add_rank(e, (int32_t)r);
        double strength = isfinite(ratio) ? ratio : z;
        if (strength > e->ratio || e->ratio < 0) {
            e->ratio = strength;
            e->value = rs->metric[idx];
            e->median = med;
            e->z = z;
            e->by_max = by_max;
            e->peak_rank = (int32_t)r;
            e->peak_step = v->step;
            e->n_layers = 0;
            if (it)
                layers_name(sp, r, it, e);
        }
    }
    if (any)
        refresh(d, k, e);
}

/* ---- the ss__detector hooks ---- */

static void spike_destroy(void *state)
{
    spikes *sp = state;
    for (int k = 0; k < N_KINDS; k++) {
        for (uint32_t r = 0; sp->s[k] && r < sp->world; r++) {
            free(sp->s[k][r].ring);
            ss_sorted_window_free(&sp->s[k][r].sorted);
        }
        free(sp->s[k]);
    }
    for (uint32_t r = 0; sp->layers && r < sp->world; r++)
        free(sp->layers[r].avg);
    free(sp->layers);
    free(sp->scratch);
    free(sp);
}

static void *spike_create(ss_detectors *d)
{
    spikes *sp = ss__zalloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->world = d->world;
    sp->window = ss__param_u32(d, P_SP_WINDOW);
    sp->scratch = ss__zalloc(sp->window, sizeof *sp->scratch);
    sp->vec = -1;
    sp->layers = ss__zalloc(d->world, sizeof *sp->layers);
    int ok = sp->scratch != NULL && sp->layers != NULL;
    for (int k = 0; k < N_KINDS; k++) {
        sp->sig[k] = -1;
        sp->ep[k].finding = -1;
        sp->s[k] = ss__zalloc(d->world, sizeof *sp->s[k]);
        ok = ok && sp->s[k];
    }
    if (!ok) {
        spike_destroy(sp);
        return NULL;
    }
    return sp;
}

static void spike_names(void *state, ss_detectors *d, uint32_t n_names,
                        const char *const *names)
{
    spikes *sp = state;
    (void)d;
    for (uint32_t i = sp->n_classified; names && i < n_names; i++)
    {
        for (int k = 0; k < N_KINDS; k++)
            if (names[i] && strcmp(names[i], metric_names[k]) == 0)
                sp->sig[k] = (int)i;
        if (names[i] && strcmp(names[i], layer_vector) == 0)
            sp->vec = (int)i;
    }
    if (n_names > sp->n_classified)
        sp->n_classified = n_names;
}

static void spike_step(void *state, ss_detectors *d, const ss_step_view *v,
                       uint32_t world)
{
    spikes *sp = state;
    if (world > sp->world)
        world = sp->world;
    for (int k = 0; k < N_KINDS; k++) {
        if (sp->sig[k] < 0)
            continue;
        /* A rank's window is allocated when it first sends the metric. */
        for (uint32_t r = 0; r < world; r++)
            if (!sp->s[k][r].ring && v->ranks[r].present) {
                series *s = &sp->s[k][r];
                if (ss_sorted_window_init(&s->sorted, sp->window) != 0)
                    return;
                s->ring = ss__zalloc(sp->window, sizeof(float));
                if (!s->ring) {
                    ss_sorted_window_free(&s->sorted);
                    return;
                }
            }
        kind_step(d, sp, k, v, world);
    }
}

const ss__detector ss__spike_detector = {
    .name = "spike",
    .create = spike_create,
    .on_names = spike_names,
    .on_step = spike_step,
    .on_end = NULL,
    .destroy = spike_destroy,
};
