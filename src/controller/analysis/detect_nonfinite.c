/*
 * detect_nonfinite.c - the nonfinite detector: the first NaN or infinity
 * of an attempt, with the rank, the step and, when the rank ran with
 * --numerics full, where it was born: a module's forward output, a value
 * handed to a module that no module made, the loss computed outside the
 * modules, or a parameter's gradient in the backward pass; then the ranks
 * it spread to.
 *
 * It reads auto mode's numerics metrics (python/stepscope/_numerics.py):
 * numerics.loss_nonfinite, numerics.grad_nonfinite (this rank's own
 * gradients, before the all-reduce) and numerics.origin_* are the rank's
 * own values; numerics.param_nonfinite (after the optimizer step) is also
 * reached through the all-reduce.  So in the first step that has any, the
 * ranks with an own non-finite value are where it began, and among several
 * the first by the aligned clock (the step's begin + origin_ns) when full
 * mode timed them; ranks whose only non-finite values are their updated
 * parameters received it.  A rank with only non-finite parameters and no
 * rank with an own value: the optimizer step produced it.
 *
 * It sees every step, the warm-up included (warmup_too): the first step
 * may be the one that matters.  One finding per attempt, critical, updated
 * as the value reaches more ranks.  Nothing here has a threshold: any
 * non-finite value is one.  docs/numerics.md states what it says.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
    SIG_LOSS,   /* numerics.loss_nonfinite */
    SIG_GRAD,   /* numerics.grad_nonfinite */
    SIG_PARAM,  /* numerics.param_nonfinite */
    SIG_DIR,    /* numerics.origin_dir: 1 forward, 2 backward, 3 input,
                   4 loss */
    SIG_INDEX,  /* numerics.origin_index */
    SIG_NS,     /* numerics.origin_ns: after the step's begin */
    VEC_MODULE, /* numerics.module_nonfinite, labelled by module */
    VEC_PARAM,  /* numerics.param_grad_nonfinite, labelled by parameter */
    N_SIG
};

static const char *const sig_names[N_SIG] = {
    "numerics.loss_nonfinite", "numerics.grad_nonfinite",
    "numerics.param_nonfinite", "numerics.origin_dir",
    "numerics.origin_index", "numerics.origin_ns",
    "numerics.module_nonfinite", "numerics.param_grad_nonfinite"};

/* What the first rank said of the value. */
enum { WHAT_LOSS = 1, WHAT_GRAD = 2, WHAT_PARAM = 4 };
enum {
    DIR_NONE = 0,
    DIR_FORWARD = 1,  /* a module's output, its inputs finite */
    DIR_BACKWARD = 2, /* a parameter's local gradient */
    DIR_INPUT = 3,    /* the first module handed it; none made it */
    DIR_LOSS = 4      /* the loss, every module's output finite */
};

/* The phase, and the evidence's "direction", of an origin DIR. */
static const char *dir_words(int dir)
{
    switch (dir) {
    case DIR_FORWARD:
        return "forward";
    case DIR_BACKWARD:
        return "backward";
    case DIR_INPUT:
        return "input";
    case DIR_LOSS:
        return "loss";
    }
    return "";
}

typedef struct {
    uint32_t world;
    int sig[N_SIG];            /* name indexes, -1 until the name is seen */
    uint32_t n_classified;
    int32_t finding;           /* -1: nothing non-finite yet */
    uint64_t first_step, last_step;
    int32_t first;             /* the rank where it began */
    int what;                  /* WHAT_* of the first rank */
    int dir;                   /* DIR_* (full mode only) */
    int64_t index;             /* of the module or parameter, -1 */
    char module[128];          /* its module's name, "" unknown */
    char param[128];           /* the parameter's name (backward) */
    double origin_ms;          /* after the step's begin, NAN unknown */
    int timed;                 /* the first rank was picked by the clock */
    int32_t same[SS_FINDING_MAX_RANKS]; /* own values in the first step */
    uint32_t n_same;
    uint8_t *reached;          /* world: went non-finite */
    int32_t *order;            /* ranks in the order they were reached */
    uint32_t n_reached;
} nonfinite;

static double sig(const nonfinite *nf, const ss_step_view *v,
                  const ss_rank_step *rs, int s)
{
    int i = nf->sig[s];
    if (i < 0 || (uint32_t)i >= v->n_names || !rs->metric)
        return NAN;
    return rs->metric[i];
}

/* Whether rank RS has its own non-finite value in this step (its loss,
 * its local gradients, or an origin found by full mode). */
static int own_value(const nonfinite *nf, const ss_step_view *v,
                     const ss_rank_step *rs)
{
    return sig(nf, v, rs, SIG_LOSS) > 0 || sig(nf, v, rs, SIG_GRAD) > 0 ||
           sig(nf, v, rs, SIG_DIR) > 0;
}

/* Label INDEX of vector SIG of rank RS into OUT ("" when unknown). */
static void label_of(const nonfinite *nf, const ss_rank_step *rs, int s,
                     int64_t index, char *out, size_t len)
{
    out[0] = '\0';
    for (uint32_t i = 0; rs->values && i < rs->n_values; i++) {
        const ss_values_item *it = &rs->values[i];
        if (it->name != nf->sig[s] || !it->labels || index < 0 ||
            (uint64_t)index >= it->n_labels || !it->labels[index])
            continue;
        snprintf(out, len, "%s", it->labels[index]);
        return;
    }
}

static int any_value(const nonfinite *nf, const ss_step_view *v,
                     const ss_rank_step *rs)
{
    return own_value(nf, v, rs) || sig(nf, v, rs, SIG_PARAM) > 0;
}

/* "loss", "gradients", "loss and gradients" or "parameters". */
static const char *what_words(int what)
{
    if ((what & WHAT_LOSS) && (what & WHAT_GRAD))
        return "loss and gradients";
    if (what & WHAT_LOSS)
        return "loss";
    if (what & WHAT_GRAD)
        return "gradients";
    return "parameters";
}

static void refresh(ss_detectors *d, nonfinite *nf)
{
    ss_finding *f = ss__finding(d, nf->finding);
    ss__set_ranks(f, nf->order, nf->n_reached);
    f->first_step = nf->first_step;
    f->last_step = nf->last_step;
    f->severity = SS_CRITICAL;
    /* the input and the loss are made in no phase auto mode times (the
     * data or the script's own code; the code between forward and
     * backward) */
    snprintf(f->phase, sizeof f->phase, "%s",
             nf->dir == DIR_FORWARD || nf->dir == DIR_BACKWARD
                 ? dir_words(nf->dir)
                 : "");
    char where[300] = "", spread[160] = "", same[160] = "", ranks[128];
    if ((nf->dir == DIR_FORWARD || nf->dir == DIR_INPUT) && nf->module[0])
        snprintf(where, sizeof where, "module %s", nf->module);
    else if (nf->dir == DIR_BACKWARD && nf->param[0])
        snprintf(where, sizeof where, "parameter %s (module %s)", nf->param,
                 nf->module[0] ? nf->module : "(the model)");
    else if (nf->dir != DIR_NONE && nf->dir != DIR_LOSS) /* no labels */
        snprintf(where, sizeof where, "%s #%" PRId64,
                 nf->dir == DIR_BACKWARD ? "parameter" : "module", nf->index);
    if (nf->n_reached > 1) {
        snprintf(spread, sizeof spread, "; it reached %s by step %" PRIu64,
                 ss__fmt_ranks(ranks, sizeof ranks, nf->order + 1,
                               nf->n_reached - 1 < MAX_LISTED
                                   ? nf->n_reached - 1
                                   : MAX_LISTED,
                               nf->n_reached - 1),
                 nf->last_step);
    }
    if (nf->n_same > 1)
        snprintf(same, sizeof same, " (%s went non-finite in that step; "
                 "rank %d %s)",
                 ss__fmt_ranks(ranks, sizeof ranks, nf->same, nf->n_same,
                               nf->n_same),
                 nf->first,
                 nf->timed ? "first by the aligned clock"
                           : "named as the lowest: light numerics do not "
                             "time it");
    char when[48] = "";
    if (isfinite(nf->origin_ms))
        snprintf(when, sizeof when, ", %.1f ms into the step", nf->origin_ms);
    if (nf->dir == DIR_FORWARD)
        snprintf(f->message, sizeof f->message,
                 "rank %d produced the first non-finite value at step "
                 "%" PRIu64 ", in the forward output of %s while its inputs "
                 "were finite%s%s%s.",
                 nf->first, nf->first_step, where, when, same, spread);
    else if (nf->dir == DIR_BACKWARD)
        snprintf(f->message, sizeof f->message,
                 "rank %d produced the first non-finite value at step "
                 "%" PRIu64 ", in the backward pass: the local gradient of "
                 "%s%s%s%s.",
                 nf->first, nf->first_step, where, when, same, spread);
    else if (nf->dir == DIR_INPUT)
        snprintf(f->message, sizeof f->message,
                 "rank %d handed a non-finite value to %s at step "
                 "%" PRIu64 " that no module had made: it came with the "
                 "data or from the script's own code outside the "
                 "modules%s%s%s.",
                 nf->first, where[0] ? where : "a module", nf->first_step,
                 when, same, spread);
    else if (nf->dir == DIR_LOSS)
        snprintf(f->message, sizeof f->message,
                 "rank %d's loss went non-finite first, at step %" PRIu64
                 ", while every module's output was finite: it was made "
                 "outside the modules, where the loss is computed (a log "
                 "or a division of the script's own code, or a "
                 "non-finite target in the batch)%s%s%s.",
                 nf->first, nf->first_step, when, same, spread);
    else if (nf->what == WHAT_PARAM)
        snprintf(f->message, sizeof f->message,
                 "rank %d's parameters went non-finite in the optimizer "
                 "step of step %" PRIu64 " while every loss and gradient "
                 "was finite: the update produced it (learning rate, "
                 "optimizer state)%s%s.",
                 nf->first, nf->first_step, same, spread);
    else
        snprintf(f->message, sizeof f->message,
                 "rank %d's %s went non-finite first, at step %" PRIu64
                 "%s%s.  Where it began is not known: run with `--numerics "
                 "full`, or with `--on-nonfinite restart` to replay from "
                 "the last checkpoint in full mode.",
                 nf->first, what_words(nf->what), nf->first_step, same,
                 spread);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "step", (int64_t)nf->first_step);
    ss__evidence_int(ev, "rank", nf->first);
    ss__evidence_str(ev, "signal", what_words(nf->what));
    ss__evidence_str(ev, "mode", nf->dir != DIR_NONE ? "full" : "light");
    if (nf->dir != DIR_NONE) {
        ss__evidence_str(ev, "direction", dir_words(nf->dir));
        if (nf->dir != DIR_LOSS)
            ss__evidence_int(ev, nf->dir == DIR_BACKWARD ? "param_index"
                                                         : "module_index",
                             nf->index);
        if (nf->module[0])
            ss__evidence_str(ev, "module", nf->module);
        if (nf->param[0])
            ss__evidence_str(ev, "param", nf->param);
    }
    ss__evidence_num(ev, "origin_ms", round(nf->origin_ms * 1000) / 1000);
    ss__evidence_int(ev, "same_step_ranks", nf->n_same);
    ss__evidence_int(ev, "ranks_reached", nf->n_reached);
    ss__evidence_int(ev, "reached_by_step", (int64_t)nf->last_step);
    if (nf->dir == DIR_NONE && nf->what != WHAT_PARAM)
        ss__evidence_str(ev, "next", "stepscope run --auto --numerics full "
                         "(or --on-nonfinite restart --max-restarts 1)");
    ss__evidence_end(ev, f);
    ss__finding_touch(d, nf->finding);
}

/* The first step with a non-finite value: where it began. */
static void begin(nonfinite *nf, const ss_step_view *v,
                  uint32_t world)
{
    int own = 0;
    for (uint32_t r = 0; r < world; r++)
        own |= v->ranks[r].present && own_value(nf, v, &v->ranks[r]);
    nf->first = -1;
    nf->origin_ms = NAN;
    double best = INFINITY;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present || !(own ? own_value(nf, v, rs)
                                  : any_value(nf, v, rs)))
            continue;
        if (nf->n_same < SS_FINDING_MAX_RANKS)
            nf->same[nf->n_same++] = (int32_t)r;
        double ns = sig(nf, v, rs, SIG_NS);
        double at = isfinite(ns) && rs->begin_ns != SS_MISSING
                        ? (double)rs->begin_ns + ns
                        : INFINITY;
        if (nf->first < 0 || at < best) {
            if (at < best)
                best = at;
            nf->first = (int32_t)r;
        }
    }
    nf->timed = isfinite(best);
    const ss_rank_step *rs = &v->ranks[nf->first];
    nf->what = (sig(nf, v, rs, SIG_LOSS) > 0 ? WHAT_LOSS : 0) |
               (sig(nf, v, rs, SIG_GRAD) > 0 ? WHAT_GRAD : 0);
    if (!nf->what)
        nf->what = WHAT_PARAM;
    double dir = sig(nf, v, rs, SIG_DIR), idx = sig(nf, v, rs, SIG_INDEX);
    nf->dir = DIR_NONE;
    for (int k = DIR_FORWARD; k <= DIR_LOSS; k++)
        if (dir == k)
            nf->dir = k;
    nf->index = nf->dir != DIR_NONE && isfinite(idx) ? (int64_t)idx : -1;
    double ns = sig(nf, v, rs, SIG_NS);
    if (nf->dir != DIR_NONE && isfinite(ns))
        nf->origin_ms = ns / 1e6;
    if (nf->dir == DIR_FORWARD || nf->dir == DIR_INPUT) {
        label_of(nf, rs, VEC_MODULE, nf->index, nf->module,
                 sizeof nf->module);
    } else if (nf->dir == DIR_BACKWARD) {
        /* "blocks.1.fc1.weight": module "blocks.1.fc1" */
        label_of(nf, rs, VEC_PARAM, nf->index, nf->param, sizeof nf->param);
        snprintf(nf->module, sizeof nf->module, "%s", nf->param);
        char *dot = strrchr(nf->module, '.');
        if (dot)
            *dot = '\0';
        else
            nf->module[0] = '\0';
    }
    nf->first_step = v->step;
    nf->reached[nf->first] = 1;
    nf->order[nf->n_reached++] = nf->first;
}

/* ---- the ss__detector hooks ---- */

static void nonfinite_destroy(void *state)
{
    nonfinite *nf = state;
    free(nf->reached);
    free(nf->order);
    free(nf);
}

static void *nonfinite_create(ss_detectors *d)
{
    nonfinite *nf = ss__zalloc(1, sizeof *nf);
    if (!nf)
        return NULL;
    nf->world = d->world;
    nf->finding = -1;
    for (int s = 0; s < N_SIG; s++)
        nf->sig[s] = -1;
    nf->reached = ss__zalloc(d->world, sizeof *nf->reached);
    nf->order = ss__zalloc(d->world, sizeof *nf->order);
    if (!nf->reached || !nf->order) {
        nonfinite_destroy(nf);
        return NULL;
    }
    return nf;
}

static void nonfinite_names(void *state, ss_detectors *d, uint32_t n_names,
                            const char *const *names)
{
    nonfinite *nf = state;
    (void)d;
    for (uint32_t i = nf->n_classified; names && i < n_names; i++)
        for (int s = 0; s < N_SIG; s++)
            if (names[i] && strcmp(names[i], sig_names[s]) == 0)
                nf->sig[s] = (int)i;
    if (n_names > nf->n_classified)
        nf->n_classified = n_names;
}

static void nonfinite_step(void *state, ss_detectors *d,
                           const ss_step_view *v, uint32_t world)
{
    nonfinite *nf = state;
    if (nf->sig[SIG_LOSS] < 0 && nf->sig[SIG_GRAD] < 0 &&
        nf->sig[SIG_PARAM] < 0 && nf->sig[SIG_DIR] < 0)
        return; /* no rank sends numerics */
    if (world > nf->world)
        world = nf->world;
    int changed = 0;
    if (nf->finding < 0) {
        int any = 0;
        for (uint32_t r = 0; r < world && !any; r++)
            any = v->ranks[r].present && any_value(nf, v, &v->ranks[r]);
        if (!any)
            return;
        nf->finding = ss__finding_open(d, "nonfinite");
        if (nf->finding < 0)
            return;
        begin(nf, v, world);
        changed = 1;
    }
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (nf->reached[r] || !rs->present || !any_value(nf, v, rs))
            continue;
        nf->reached[r] = 1;
        nf->order[nf->n_reached++] = (int32_t)r;
        nf->last_step = v->step;
        changed = 1;
    }
    if (nf->n_reached == 1)
        nf->last_step = nf->first_step;
    if (changed)
        refresh(d, nf);
}

const ss__detector ss__nonfinite_detector = {
    .name = "nonfinite",
    .create = nonfinite_create,
    .on_names = nonfinite_names,
    .on_step = nonfinite_step,
    .on_end = NULL,
    .destroy = nonfinite_destroy,
    .warmup_too = 1,
};
