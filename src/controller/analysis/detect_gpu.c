/*
 * detect_gpu.c - the GPU detector: a rank whose GPU runs below its clocks,
 * and a GPU that reports errors.
 *
 * The host stage reads each rank's GPU through NVML or AMD SMI
 * (host/gpu_backend.h; ss_gpu_evidence,
 * model.h): for every step, how much of it the GPU's clocks were held
 * down, and by what (power cap, thermal slowdown, hardware slowdown or
 * power brake), and the uncorrected ECC and Xid errors it reported.
 *
 * Unlike the host's CPU causes, a clock event reason is the driver's own
 * statement that the GPU ran slower, not a measurement to be told from
 * noise: no peer comparison is needed (every GPU of a job can be power
 * capped).  Over the last host.window steps with GPU evidence, a step of a
 * rank is "slowed" when its GPU was held down for at least gpu.step_share
 * of the step's sampled time; the rank is named (kind gpu_throttled) when
 * its slowed steps are at least gpu.min_frac of its steps (and it has at
 * least host.min_steps of them), with the reason that held it down in the
 * most steps: "GPU 2 (rank 2) throttled (power cap) in 40 % of steps,
 * 18 ms per step".  The episode goes on while half that fraction holds.
 *
 * New uncorrected ECC errors and Xid errors make a critical finding
 * (gpu_error) naming the GPU, the ranks on it and the Xid code, once per
 * GPU, refreshed when its counts grow.
 *
 * The straggler detector asks ss__gpu_explain whether a late rank's GPU
 * was throttled over its late steps.  docs/detectors.md states the rules
 * and defaults.  Nothing is allocated until a step carries GPU evidence.
 */
#include "detect_gpu.h"

#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { R_POWER_CAP, R_THERMAL, R_HW_SLOWDOWN, N_REASONS };

static const char *const reason_words[N_REASONS] = {
    "power cap", "thermal", "hardware slowdown"};
static const char *const reason_key[N_REASONS] = {"power_cap", "thermal",
                                                  "hw_slowdown"};

/* One rank-step's GPU, as kept in the ring. */
enum {
    F_KNOWN = 1,   /* the rank had GPU evidence in this step */
    F_SLOWED = 2,  /* held down for gpu.step_share of it */
    F_REASON0 = 4, /* ... by reason r: F_REASON0 << r */
};

#define MAX_GPUS 64 /* GPUs told apart for gpu_error (nvml.h's bound) */

typedef struct {
    uint32_t known, slowed;       /* steps in the ring */
    uint32_t reason[N_REASONS];   /* slowed steps held by each reason */
    double slowed_ms;             /* time held down in the slowed steps */
    int32_t gpu;                  /* its GPU (latest seen), -1 */
    int32_t finding;              /* open gpu_throttled episode, -1 */
} rank_state;

typedef struct {
    int64_t ecc, xid;       /* errors counted so far */
    int64_t last_xid;       /* the latest Xid code (0: none) */
    int32_t finding;        /* its gpu_error finding, -1 */
    uint64_t first_step;
} gpu_state;

typedef struct {
    uint32_t world, hw, head, fill;
    int started;
    uint64_t *step;   /* per slot */
    uint8_t *flags;   /* per slot and rank: [k * world + r] */
    float *slowed_ms; /* per slot and rank */
    rank_state *rs;
    gpu_state gpus[MAX_GPUS];
} gpu;

static size_t at(const gpu *g, uint32_t r, uint32_t k)
{
    return (size_t)k * g->world + r;
}

static int start_ring(gpu *g)
{
    g->step = ss__zalloc(g->hw, sizeof *g->step);
    g->flags = ss__zalloc((size_t)g->hw * g->world, sizeof *g->flags);
    g->slowed_ms = ss__zalloc((size_t)g->hw * g->world, sizeof *g->slowed_ms);
    g->rs = ss__zalloc(g->world, sizeof *g->rs);
    if (!g->step || !g->flags || !g->slowed_ms || !g->rs) {
        free(g->step);
        free(g->flags);
        free(g->slowed_ms);
        free(g->rs);
        g->step = NULL;
        g->flags = NULL;
        g->slowed_ms = NULL;
        g->rs = NULL;
        return -1;
    }
    for (uint32_t r = 0; r < g->world; r++)
        g->rs[r].gpu = g->rs[r].finding = -1;
    for (int i = 0; i < MAX_GPUS; i++)
        g->gpus[i].finding = -1;
    g->started = 1;
    return 0;
}

/* Adds (SIGN 1) or takes out (SIGN -1) rank R's values in slot K. */
static void count_slot(gpu *g, uint32_t r, uint32_t k, int sign)
{
    uint8_t f = g->flags[at(g, r, k)];
    rank_state *s = &g->rs[r];
    if (!(f & F_KNOWN))
        return;
    s->known += (uint32_t)sign;
    if (!(f & F_SLOWED))
        return;
    s->slowed += (uint32_t)sign;
    s->slowed_ms += sign * (double)g->slowed_ms[at(g, r, k)];
    for (int c = 0; c < N_REASONS; c++)
        if (f & (F_REASON0 << c))
            s->reason[c] += (uint32_t)sign;
}

/* The reason that held rank state S down in the most slowed steps. */
static int main_reason(const rank_state *s)
{
    int best = 0;
    for (int c = 1; c < N_REASONS; c++)
        if (s->reason[c] > s->reason[best])
            best = c;
    return best;
}

static uint8_t step_flags(const ss_detectors *d, const ss_gpu_evidence *e,
                          double *slowed_ms)
{
    *slowed_ms = 0;
    if (!e->present || e->covered_ns <= 0)
        return 0;
    uint8_t f = F_KNOWN;
    double need = d->p[P_G_STEP_SHARE] * (double)e->covered_ns;
    if (e->slowed_ns > 0 && (double)e->slowed_ns >= need) {
        f |= F_SLOWED;
        *slowed_ms = (double)e->slowed_ns / 1e6;
        const ss_dur_ns by[N_REASONS] = {e->power_cap_ns, e->thermal_ns,
                                         e->hw_slowdown_ns};
        for (int c = 0; c < N_REASONS; c++)
            if (by[c] != SS_MISSING && by[c] > 0 && (double)by[c] >= need)
                f |= (uint8_t)(F_REASON0 << c);
    }
    return f;
}

static void refresh_throttled(ss_detectors *d, gpu *g, uint32_t r,
                              int opening, uint64_t step)
{
    rank_state *s = &g->rs[r];
    ss_finding *f = ss__finding(d, s->finding);
    if (opening)
        f->first_step = step;
    f->last_step = step;
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->phase[0] = '\0';
    f->severity = SS_WARNING;
    int c = main_reason(s);
    double frac = s->known ? (double)s->slowed / s->known : 0;
    double per_step = s->slowed ? s->slowed_ms / s->slowed : 0;
    char a[32];
    snprintf(f->message, sizeof f->message,
             "GPU %d (rank %u) throttled (%s) in %d %% of steps, %s ms per "
             "step (the last %u steps with GPU evidence).", (int)s->gpu, r,
             reason_words[c], (int)lround(frac * 100),
             ss__fmt_ms(a, sizeof a, per_step), s->known);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "gpu", s->gpu);
    ss__evidence_str(ev, "reason", reason_key[c]);
    ss__evidence_int(ev, "steps_seen", s->known);
    ss__evidence_int(ev, "steps_slowed", s->slowed);
    for (int k = 0; k < N_REASONS; k++) {
        char key[48];
        snprintf(key, sizeof key, "steps_%s", reason_key[k]);
        ss__evidence_int(ev, key, s->reason[k]);
    }
    ss__evidence_num(ev, "slowed_pct", round(frac * 1000) / 10);
    ss__evidence_num(ev, "slowed_ms_per_step", round(per_step * 100) / 100);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, s->finding);
}

static void judge_rank(ss_detectors *d, gpu *g, uint32_t r, uint64_t step)
{
    rank_state *s = &g->rs[r];
    uint32_t min = ss__param_u32(d, P_H_MIN_STEPS);
    double frac = s->known ? (double)s->slowed / s->known : 0;
    if (s->finding < 0) {
        if (s->known < min || s->known == 0 || frac < d->p[P_G_MIN_FRAC] ||
            s->gpu < 0)
            return;
        s->finding = ss__finding_open(d, "gpu_throttled");
        if (s->finding >= 0)
            refresh_throttled(d, g, r, 1, step);
    } else if (frac < 0.5 * d->p[P_G_MIN_FRAC]) {
        s->finding = -1; /* keeps its last snapshot */
    } else {
        refresh_throttled(d, g, r, 0, step);
    }
}

/* Counts the errors GPU E of rank R reported in STEP; opens or refreshes
 * its gpu_error finding when they grew. */
static void judge_errors(ss_detectors *d, gpu *g, uint32_t r,
                         const ss_gpu_evidence *e, uint64_t step,
                         const ss_step_view *v, uint32_t world)
{
    if (e->index < 0 || e->index >= MAX_GPUS)
        return;
    gpu_state *gs = &g->gpus[e->index];
    int grew = 0;
    if (e->ecc_new != SS_MISSING && e->ecc_new > 0) {
        gs->ecc += e->ecc_new;
        grew = 1;
    }
    if (e->xid_new != SS_MISSING && e->xid_new > 0) {
        gs->xid += e->xid_new;
        grew = 1;
    }
    /* an Xid that arrived before the first step's window is known only by
     * its code */
    if (e->last_xid != SS_MISSING && e->last_xid > 0 &&
        e->last_xid != gs->last_xid) {
        gs->last_xid = e->last_xid;
        if (gs->xid == 0)
            gs->xid = 1;
        grew = 1;
    }
    if (!grew)
        return;
    if (gs->finding < 0) {
        gs->finding = ss__finding_open(d, "gpu_error");
        if (gs->finding < 0)
            return;
        gs->first_step = step;
    }
    ss_finding *f = ss__finding(d, gs->finding);
    f->first_step = gs->first_step;
    f->last_step = step;
    f->severity = SS_CRITICAL;
    f->phase[0] = '\0';
    int32_t ranks[MAX_LISTED];
    uint32_t n = 0;
    for (uint32_t k = 0; k < world && n < MAX_LISTED; k++) {
        const ss_rank_step *rs = &v->ranks[k];
        if (k == r || (rs->present && rs->host && rs->host->gpu.present &&
                       rs->host->gpu.index == e->index))
            ranks[n++] = (int32_t)k;
    }
    ss__set_ranks(f, ranks, n);
    char xid[96] = "", ecc[96] = "";
    if (gs->xid > 0)
        snprintf(xid, sizeof xid, "Xid %" PRId64 "%s", gs->last_xid,
                 gs->xid > 1 ? " (and earlier Xid errors)" : "");
    if (gs->ecc > 0)
        snprintf(ecc, sizeof ecc, "%s%" PRId64 " uncorrected ECC error%s",
                 gs->xid > 0 ? " and " : "", gs->ecc, gs->ecc > 1 ? "s" : "");
    snprintf(f->message, sizeof f->message,
             "GPU %d (rank %u) reported %s%s since step %" PRIu64 ".",
             (int)e->index, r, xid, ecc, gs->first_step);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "gpu", e->index);
    ss__evidence_int(ev, "xid_errors", gs->xid);
    ss__evidence_int(ev, "last_xid", gs->last_xid);
    ss__evidence_int(ev, "ecc_uncorrected", gs->ecc);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, gs->finding);
}

static int any_gpu_evidence(const ss_step_view *v, uint32_t world)
{
    for (uint32_t r = 0; r < world; r++)
        if (v->ranks[r].present && v->ranks[r].host &&
            v->ranks[r].host->gpu.present)
            return 1;
    return 0;
}

static void gpu_step(void *state, ss_detectors *d, const ss_step_view *v,
                     uint32_t world)
{
    gpu *g = state;
    if (!g->started && (!any_gpu_evidence(v, world) || start_ring(g) < 0))
        return;
    uint32_t k = g->head;
    for (uint32_t r = 0; r < g->world && g->fill == g->hw; r++)
        count_slot(g, r, k, -1);
    g->head = (k + 1) % g->hw;
    if (g->fill < g->hw)
        g->fill++;
    g->step[k] = v->step;
    for (uint32_t r = 0; r < g->world; r++) {
        const ss_rank_step *rs = r < world ? &v->ranks[r] : NULL;
        const ss_gpu_evidence *e =
            rs && rs->present && rs->host ? &rs->host->gpu : NULL;
        double ms = 0;
        g->flags[at(g, r, k)] = e ? step_flags(d, e, &ms) : 0;
        g->slowed_ms[at(g, r, k)] = (float)ms;
        count_slot(g, r, k, 1);
        if (e && e->present) {
            g->rs[r].gpu = e->index;
            judge_errors(d, g, r, e, v->step, v, world);
        }
        judge_rank(d, g, r, v->step);
    }
}

int ss__gpu_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                    uint64_t last, ss__host_cause *out)
{
    const gpu *g = ss__detector_state(d, &ss__gpu_detector);
    if (!g || !g->started || r >= g->world || g->rs[r].gpu < 0)
        return 0;
    uint32_t known = 0, slowed = 0, reason[N_REASONS] = {0};
    double ms = 0;
    for (uint32_t i = 0; i < g->fill; i++) {
        uint32_t k = ss__ring_back(g->head, g->hw, i);
        uint8_t f = g->flags[at(g, r, k)];
        if (g->step[k] < first || g->step[k] > last || !(f & F_KNOWN))
            continue;
        known++;
        if (!(f & F_SLOWED))
            continue;
        slowed++;
        ms += g->slowed_ms[at(g, r, k)];
        for (int c = 0; c < N_REASONS; c++)
            reason[c] += (f & (F_REASON0 << c)) != 0;
    }
    if (!known || (double)slowed < d->p[P_G_MIN_FRAC] * known)
        return 0;
    int best = 0;
    for (int c = 1; c < N_REASONS; c++)
        if (reason[c] > reason[best])
            best = c;
    memset(out, 0, sizeof *out);
    out->cause = SS_HOST_CAUSE_GPU;
    out->ms_per_step = ms / slowed;
    out->median_rank_ms = 0;
    out->steps = known;
    out->gpu = g->rs[r].gpu;
    out->gpu_reason = reason_words[best];
    out->gpu_frac = (double)slowed / known;
    return 1;
}

static void gpu_destroy(void *state)
{
    gpu *g = state;
    free(g->step);
    free(g->flags);
    free(g->slowed_ms);
    free(g->rs);
    free(g);
}

static void *gpu_create(ss_detectors *d)
{
    gpu *g = ss__zalloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world = d->world;
    g->hw = ss__param_u32(d, P_H_WINDOW);
    return g;
}

const ss__detector ss__gpu_detector = {
    .name = "gpu",
    .create = gpu_create,
    .on_names = NULL,
    .on_step = gpu_step,
    .on_end = NULL,
    .destroy = gpu_destroy,
};
