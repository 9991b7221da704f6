/*
 * detectors.c - the driver of the detectors (detectors.h): their life
 * cycle, the order they see each finalized step in, and the findings table
 * and its emission.
 *
 * Each detector is a file of its own behind the ss__detector interface
 * (detectors_internal.h):
 *
 *   detect_data_stall.c  a data-loading phase far above the median rank's
 *   detect_host.c        a rank that loses its step time to the host (run-
 *                        queue delay, stops, CPU quota), steadily or in the
 *                        job's slow steps
 *   detect_straggler.c   a rank the others wait for, persistent or
 *                        transient, with the phase that explains it
 *   detect_jitter.c      outliers and spread of the median-rank step time
 *   detect_memory.c      memory_spike, memory_creep, memory_imbalance for
 *                        RSS and device memory
 *   detect_nonfinite.c   the first NaN or infinity of the attempt: rank,
 *                        step, module, direction, spread (from the first
 *                        step on, warm-up included)
 *   detect_spike.c       loss_spike and grad_spike: robust outliers of a
 *                        rank's loss and gradient norm
 *   detect_fp8.c         fp8_saturation, fp8_underflow, fp8_scale: float8
 *                        casts that clip, flush to zero, or get an
 *                        invalid scale (from the ranks' fp8.* vectors)
 *   detect_replica.c     replica_divergence: the first checksum step at
 *                        which a rank's parameters differ from its replica
 *                        group's majority, the rank and the parameter
 *   detect_pipeline.c    pipeline_bubble: a pipeline's measured bubble
 *                        over its schedule's formula, and the stage the
 *                        others wait for (from the pipeline.* vectors)
 *   detect_moe.c         expert_imbalance: a mixture-of-experts layer's
 *                        hot and dead experts (moe.* vectors); with
 *                        detect_workload.c, what explains a straggler
 *   detect_embedding.c   embedding_imbalance: a sharded table's hot shard
 *                        and its rank (emb.load.* vectors)
 *   detect_rl.c          rollout_long_tail, reward_collapse, kl_spike,
 *                        entropy_collapse: RL post-training (docs/rl.md)
 *
 * and the tunables are in detector_params.h / detector_params.c.  The
 * order of the table below matters: jitter leaves out the steps data_stall
 * saw a stall in and the part of the step straggler blames on the latest
 * rank or the host detector on one rank's lost time (ss__step_notes), the
 * straggler asks the host detector about the step it just recorded, and
 * finding ids follow the order findings are opened in.
 *
 * The first warmup_steps finalized steps are ignored by all of them.
 * Findings are kept in a table (at most MAX_FINDINGS); each is emitted when
 * created, again (same id) when its content changed and update_steps steps
 * passed since its last emission, and once more by ss_detectors_finish.
 * docs/detectors.md states every rule and default.
 */
#include "detectors_internal.h"

#include <stdio.h>
#include <string.h>

#define MAX_FINDINGS 4096

static const ss__detector *const detector_table[] = {
    &ss__data_stall_detector,
    &ss__host_detector,
    &ss__gpu_detector,
    &ss__straggler_detector,
    &ss__jitter_detector,
    &ss__memory_detector,
    &ss__nonfinite_detector,
    &ss__spike_detector,
    &ss__fp8_detector,
    &ss__replica_detector,
    &ss__pipeline_detector,
    &ss__moe_detector,
    &ss__embedding_detector,
    &ss__rl_detector,
};
#define N_DETECTORS (sizeof detector_table / sizeof detector_table[0])

struct ss__finding_slot {
    ss_finding f;
    uint64_t emitted_at; /* d->n_steps at the last emission */
    uint8_t emitted;
    uint8_t dirty;
};

/* ---- the findings table ---- */

int32_t ss__finding_open(ss_detectors *d, const char *kind)
{
    if (d->n_fd >= MAX_FINDINGS)
        return -1;
    if (d->n_fd == d->cap_fd) {
        uint32_t cap = d->cap_fd ? d->cap_fd * 2 : 16;
        struct ss__finding_slot *fd = realloc(d->fd, cap * sizeof *fd);
        if (!fd)
            return -1;
        d->fd = fd;
        d->cap_fd = cap;
    }
    struct ss__finding_slot *slot = &d->fd[d->n_fd];
    memset(slot, 0, sizeof *slot);
    slot->f.id = d->n_fd + 1;
    slot->f.attempt = d->attempt;
    snprintf(slot->f.kind, sizeof slot->f.kind, "%s", kind);
    slot->f.severity = SS_WARNING;
    return (int32_t)d->n_fd++;
}

ss_finding *ss__finding(ss_detectors *d, int32_t idx)
{
    return &d->fd[idx].f;
}

void ss__finding_touch(ss_detectors *d, int32_t idx)
{
    d->fd[idx].dirty = 1;
}

int ss__words_at_height(double *height, double strength, int opening)
{
    if (opening || strength > *height)
        *height = strength;
    return opening || strength >= 0.9 * *height;
}

int32_t ss__finding_publish(ss_detectors *d, const ss_finding *content)
{
    int32_t idx = ss__finding_open(d, content->kind);
    if (idx < 0)
        return -1;
    ss_finding *f = &d->fd[idx].f;
    uint32_t id = f->id;
    *f = *content;
    f->id = id;
    f->attempt = d->attempt;
    d->fd[idx].dirty = 1;
    return idx;
}

static void finding_emit(ss_detectors *d, struct ss__finding_slot *slot)
{
    slot->emitted = 1;
    slot->dirty = 0;
    slot->emitted_at = d->n_steps;
    if (d->sink.on_finding)
        d->sink.on_finding(d->sink.ctx, &slot->f);
}

/* Emits what is due: new findings at once, changed ones once per
 * update_steps. */
static void flush_findings(ss_detectors *d)
{
    uint64_t every = (uint64_t)d->p[P_UPDATE];
    for (uint32_t i = 0; i < d->n_fd; i++) {
        struct ss__finding_slot *slot = &d->fd[i];
        if (slot->dirty &&
            (!slot->emitted || d->n_steps - slot->emitted_at >= every))
            finding_emit(d, slot);
    }
}

uint32_t ss_detectors_publish(ss_detectors *d, const ss_finding *content)
{
    int32_t idx = ss__finding_publish(d, content);
    if (idx < 0)
        return 0;
    finding_emit(d, &d->fd[idx]);
    return d->fd[idx].f.id;
}

void *ss__detector_state(const ss_detectors *d, const ss__detector *detector)
{
    for (size_t i = 0; i < N_DETECTORS; i++)
        if (detector_table[i] == detector)
            return d->state ? d->state[i] : NULL;
    return NULL;
}

/* ---- life cycle ---- */

ss_detectors *ss_detectors_create(const ss_detector_config *cfg,
                                  uint32_t world_size, uint32_t attempt,
                                  const ss_sink *sink)
{
    ss_detectors *d = ss__zalloc(1, sizeof *d);
    if (!d)
        return NULL;
    ss__detector_params_resolve(cfg, d->p);
    d->world = world_size;
    d->attempt = attempt;
    if (sink)
        d->sink = *sink;
    d->state = ss__zalloc(N_DETECTORS, sizeof *d->state);
    d->clock_bound_ns = ss__zalloc(world_size, sizeof *d->clock_bound_ns);
    if (!d->state || !d->clock_bound_ns) {
        ss_detectors_destroy(d);
        return NULL;
    }
    for (size_t i = 0; i < N_DETECTORS; i++) {
        d->state[i] = detector_table[i]->create(d);
        if (!d->state[i]) {
            ss_detectors_destroy(d);
            return NULL;
        }
    }
    return d;
}

void ss_detectors_destroy(ss_detectors *d)
{
    if (!d)
        return;
    if (d->state)
        for (size_t i = 0; i < N_DETECTORS; i++)
            if (d->state[i])
                detector_table[i]->destroy(d->state[i]);
    free(d->state);
    free(d->clock_bound_ns);
    ss_buf_free(&d->evidence);
    free(d->fd);
    free(d);
}

int ss_detectors_set_clock_bound(ss_detectors *d, uint32_t rank,
                                 int64_t bound_ns)
{
    if (rank >= d->world || bound_ns < 0)
        return -1;
    d->clock_bound_ns[rank] = bound_ns;
    return 0;
}

void ss_detectors_step(ss_detectors *d, const ss_step_view *v,
                       const char *const *names)
{
    d->names = names;
    for (size_t i = 0; i < N_DETECTORS; i++)
        if (detector_table[i]->on_names)
            detector_table[i]->on_names(d->state[i], d, v->n_names, names);
    d->n_steps++;
    uint32_t world = v->world_size < d->world ? v->world_size : d->world;
    if (d->n_steps <= (uint64_t)d->p[P_WARMUP]) {
        memset(&d->note, 0, sizeof d->note);
        for (size_t i = 0; i < N_DETECTORS; i++)
            if (detector_table[i]->warmup_too)
                detector_table[i]->on_step(d->state[i], d, v, world);
        flush_findings(d);
        return;
    }
    d->n_eval++;
    memset(&d->note, 0, sizeof d->note);
    for (size_t i = 0; i < N_DETECTORS; i++)
        detector_table[i]->on_step(d->state[i], d, v, world);
    flush_findings(d);
}

void ss_detectors_finish(ss_detectors *d, const char *const *names)
{
    d->names = names;
    for (size_t i = 0; i < N_DETECTORS; i++)
        if (detector_table[i]->on_end)
            detector_table[i]->on_end(d->state[i], d);
    for (uint32_t i = 0; i < d->n_fd; i++)
        finding_emit(d, &d->fd[i]);
}
