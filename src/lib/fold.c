/*
 * fold.c - turns drained events into per-step records (rules in fold.h).
 *
 * A small array of open steps (SS__FOLD_OPEN) is enough: steps complete in
 * order and only events that straggle across a step boundary, or steps
 * made on other threads, keep more than one or two open at a time.  When
 * the array is full the lowest step is given up (a dropped record).
 */
#include "fold.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void ss__track_reset(ss__track *t)
{
    memset(t->depth, 0, sizeof t->depth);
    t->n_open = 0;
}

void ss__fold_init(ss__fold *f, const ss__fold_sink *sink)
{
    memset(f, 0, sizeof *f);
    f->sink = *sink;
    f->round = 1;
    f->cur_step = SS__NO_STEP;
}

/* Leaves out of A's record the metrics whose last value is in doubt. */
static void drop_doubted_metrics(ss__acc *a)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < a->rec.n_metrics; i++)
        if (!a->metric_doubt[i])
            a->rec.metrics[kept++] = a->rec.metrics[i];
    a->rec.n_metrics = (uint8_t)kept;
}

/* Hands A on when it is complete (and above every step handed on so far:
 * the wire wants increasing steps), else drops it; either way no event can
 * reach its step any more. */
static void finish(ss__fold *f, ss__acc *a)
{
    int in_order = !f->have_final || a->rec.step > f->last_final;
    if (a->ended && a->has_begin && in_order) {
        if (a->rec.end_ns < a->rec.begin_ns)
            a->rec.end_ns = a->rec.begin_ns;
        drop_doubted_metrics(a);
        for (unsigned i = 0; i < a->n_vec; i++)
            f->vecs[i] = (ss__vec){.name_id = a->vec[i].name_id,
                                   .n = a->vec[i].n,
                                   .truncated = a->vec[i].truncated,
                                   .v = a->arena + a->vec[i].off};
        f->sink.on_step(f->sink.ctx, &a->rec, f->vecs, a->n_vec);
    } else {
        f->dropped_records++;
        f->dropped_vectors += a->n_vec;
    }
    if (in_order) {
        f->have_final = 1;
        f->last_final = a->rec.step;
    }
    a->used = 0;
}

static void acc_start(ss__acc *a, uint64_t step)
{
    a->used = 1;
    a->has_begin = 0;
    a->ended = 0;
    a->superseded = 0;
    memset(&a->rec, 0, offsetof(wire_step, phases));
    a->rec.step = step;
    a->rec.flags = WIRE_STEP_HAS_SELF;
    memset(a->phase_slot, 0, sizeof a->phase_slot);
    memset(a->sync_slot, 0, sizeof a->sync_slot);
    memset(a->metric_slot, 0, sizeof a->metric_slot);
    if (a->n_vec)
        memset(a->vec_slot, 0, sizeof a->vec_slot);
    a->n_vec = 0;
    a->arena_used = 0;
}

/* The open step STEP, opened on first use; NULL when the event is to be
 * ignored (no step) or dropped (a step already handed on). */
static ss__acc *acc_for(ss__fold *f, uint64_t step)
{
    if (step == SS__NO_STEP)
        return NULL;
    if (f->have_final && step <= f->last_final) {
        f->dropped_events++;
        return NULL;
    }
    ss__acc *free_slot = NULL, *lowest = NULL;
    for (int i = 0; i < SS__FOLD_OPEN; i++) {
        ss__acc *a = &f->acc[i];
        if (!a->used) {
            if (!free_slot)
                free_slot = a;
            continue;
        }
        if (a->rec.step == step)
            return a;
        if (!lowest || a->rec.step < lowest->rec.step)
            lowest = a;
    }
    if (!free_slot) {
        if (lowest->rec.step > step) {
            f->dropped_events++;
            return NULL;
        }
        /* Many short steps in one round: hand on the lowest now if it is
         * complete (its stragglers will count as dropped events). */
        finish(f, lowest);
        free_slot = lowest;
    }
    acc_start(free_slot, step);
    return free_slot;
}

static int valid_name(unsigned id)
{
    return id >= 1 && id <= WIRE_MAX_NAME_ID;
}

static int named_type(unsigned type)
{
    return type == SS__EV_PHASE_BEGIN || type == SS__EV_PHASE_END ||
           type == SS__EV_PHASE_SPAN || type == SS__EV_SYNC ||
           type == SS__EV_METRIC;
}

/* Adds one run of phase ID, which began at BEGIN and lasted D, of which
 * SELF was its own (not covered by nested runs). */
static void add_phase(ss__fold *f, ss__acc *a, unsigned id, ss__mono_ns begin,
                      ss__dur_ns d, ss__dur_ns self)
{
    unsigned slot = a->phase_slot[id];
    if (!slot) {
        if (a->rec.n_phases >= WIRE_MAX_ITEMS) {
            f->dropped_events++;
            return;
        }
        slot = ++a->rec.n_phases;
        a->phase_slot[id] = (uint8_t)slot;
        a->rec.phases[slot - 1] = (wire_phase){.name_id = id,
                                               .first_begin_ns = begin};
    }
    wire_phase *p = &a->rec.phases[slot - 1];
    if (begin < p->first_begin_ns)
        p->first_begin_ns = begin;
    p->count++;
    p->total_ns += (uint64_t)(d > 0 ? d : 0);
    p->self_ns += (uint64_t)(self > 0 ? (self < d ? self : d) : 0);
}

/* ---- nesting, for self time (rules in fold.h) ---- */

/* Notes that [FROM, TO) was covered by a run nested in R. */
static void cover(ss__open_run *r, ss__mono_ns from, ss__mono_ns to)
{
    if (from < r->covered_to)
        from = r->covered_to;
    if (to <= from)
        return;
    r->child_ns += (uint64_t)(to - from);
    r->covered_to = to;
}

static void open_run(ss__track *t, unsigned id, ss__mono_ns begin)
{
    if (t->n_open >= SS__NEST_MAX)
        return;
    t->open[t->n_open++] = (ss__open_run){.id = (uint8_t)id, .begin = begin,
                                          .covered_to = begin};
}

/* Closes the open run of ID at END and returns its self time; its whole
 * duration when the run was not tracked (nested too deep). */
static ss__dur_ns close_run(ss__track *t, unsigned id, ss__mono_ns begin,
                            ss__mono_ns end)
{
    unsigned k = t->n_open;
    while (k > 0 && t->open[k - 1].id != id)
        k--;
    if (k == 0)
        return end - begin;
    ss__open_run *r = &t->open[k - 1];
    /* Runs begun inside it and still open cover it up to its end. */
    for (unsigned i = k; i < t->n_open; i++)
        cover(r, t->open[i].begin, end);
    ss__dur_ns self = (end - begin) - (ss__dur_ns)r->child_ns;
    memmove(r, r + 1, (t->n_open - k) * sizeof *r);
    t->n_open--;
    if (k >= 2)
        cover(&t->open[k - 2], begin, end);
    return self;
}

/* A span [BEGIN, END) folded now: it covers the innermost open run that
 * began no later than it. */
static void nest_span(ss__track *t, ss__mono_ns begin, ss__mono_ns end)
{
    for (unsigned k = t->n_open; k > 0; k--)
        if (t->open[k - 1].begin <= begin) {
            cover(&t->open[k - 1], begin, end);
            return;
        }
}

static void add_sync(ss__fold *f, ss__acc *a, unsigned id, ss__mono_ns t)
{
    if (a->sync_slot[id])
        return; /* the first arrival counts */
    if (a->rec.n_syncs >= WIRE_MAX_ITEMS) {
        f->dropped_events++;
        return;
    }
    unsigned slot = ++a->rec.n_syncs;
    a->sync_slot[id] = (uint8_t)slot;
    a->rec.syncs[slot - 1] = (wire_sync){.name_id = id, .arrival_ns = t};
}

static void add_metric(ss__fold *f, ss__acc *a, const ss__track *by,
                       unsigned id, uint64_t bits)
{
    unsigned slot = a->metric_slot[id];
    if (!slot) {
        if (a->rec.n_metrics >= WIRE_MAX_ITEMS) {
            f->dropped_events++;
            return;
        }
        slot = ++a->rec.n_metrics;
        a->metric_slot[id] = (uint8_t)slot;
        a->rec.metrics[slot - 1].name_id = id;
    }
    memcpy(&a->rec.metrics[slot - 1].value, &bits, sizeof(double));
    a->metric_by[slot - 1] = by;
    a->metric_doubt[slot - 1] = 0;
}

/* A metric value of TRACK's thread was lost in a hole of its stream: the
 * values it gave to steps it may still have been recording into may not be
 * the last ones. */
static void doubt_metrics(ss__fold *f, const ss__track *track)
{
    for (int i = 0; i < SS__FOLD_OPEN; i++) {
        ss__acc *a = &f->acc[i];
        if (!a->used || a->rec.step < track->open_from)
            continue;
        for (unsigned k = 0; k < a->rec.n_metrics; k++)
            if (a->metric_by[k] == track)
                a->metric_doubt[k] = 1;
    }
}

/* Moves TRACK's open_from past what EV shows its thread is done with. */
static void advance_track(ss__track *track, unsigned type, uint64_t step)
{
    if (step == SS__NO_STEP)
        return;
    uint64_t from = type == SS__EV_STEP_END ? step + 1 : step;
    if (from > track->open_from)
        track->open_from = from;
}

static void add_max(uint64_t *field, uint8_t *flags, uint8_t flag,
                    uint64_t bytes)
{
    if (!(*flags & flag) || bytes > *field)
        *field = bytes;
    *flags |= flag;
}

/* Marks the open steps below STEP, which began: their ends were lost. */
static void supersede(ss__fold *f, uint64_t step)
{
    for (int i = 0; i < SS__FOLD_OPEN; i++) {
        ss__acc *a = &f->acc[i];
        if (a->used && !a->ended && a->rec.step < step && !a->superseded)
            a->superseded = f->round;
    }
}

void ss__fold_event(ss__fold *f, ss__track *track, const ss__event *ev)
{
    if (ev->type & SS__EV_AFTER_LOSS)
        ss__track_reset(track);
    if (ev->type & SS__EV_LOST_METRIC)
        doubt_metrics(f, track);
    unsigned id = ev->name;
    unsigned type = ev->type & SS__EV_TYPE_MASK;
    if (type != SS__EV_PHASE_END && type != SS__EV_CHECKPOINT &&
        type != SS__EV_RESUMED)
        advance_track(track, type, ev->step);
    if (named_type(type) && !valid_name(id)) {
        /* Recorded under no name (ss_name refused it: the table was full,
         * or the name was bad): lost, and counted like a dropped event.  A
         * phase's end does not count again. */
        if (type != SS__EV_PHASE_END && ev->step != SS__NO_STEP)
            f->dropped_events++;
        return;
    }
    ss__acc *a;
    switch (type) {
    case SS__EV_STEP_BEGIN:
        if ((a = acc_for(f, ev->step))) {
            a->has_begin = 1;
            a->rec.begin_ns = ev->t;
            supersede(f, ev->step);
        }
        if (ev->step != SS__NO_STEP) {
            f->step_track = track;
            f->cur_step = ev->step;
            f->step_since = ev->t;
        }
        break;
    case SS__EV_STEP_END:
        if ((a = acc_for(f, ev->step))) {
            a->ended = 1;
            a->rec.end_ns = ev->t;
        }
        if (ev->step == f->cur_step && ev->step != SS__NO_STEP) {
            f->cur_step = SS__NO_STEP;
            f->step_since = ev->t;
        }
        break;
    case SS__EV_PHASE_BEGIN:
        if (track->depth[id]++ == 0) {
            track->begin[id] = ev->t;
            track->step[id] = ev->step;
            open_run(track, id, ev->t);
        }
        break;
    case SS__EV_PHASE_END: {
        if (track->depth[id] == 0)
            break; /* unmatched: its begin was lost or never made */
        if (--track->depth[id] != 0)
            break;
        ss__mono_ns begin = track->begin[id];
        ss__dur_ns self = close_run(track, id, begin, ev->t);
        if ((a = acc_for(f, track->step[id])))
            add_phase(f, a, id, begin, ev->t - begin, self);
        break;
    }
    case SS__EV_PHASE_SPAN: {
        ss__mono_ns end = (ss__mono_ns)ev->value;
        if ((a = acc_for(f, ev->step))) {
            nest_span(track, ev->t, end);
            add_phase(f, a, id, ev->t, end - ev->t, end - ev->t);
        }
        break;
    }
    case SS__EV_SYNC:
        if ((a = acc_for(f, ev->step)))
            add_sync(f, a, id, ev->t);
        break;
    case SS__EV_METRIC:
        if ((a = acc_for(f, ev->step)))
            add_metric(f, a, track, id, ev->value);
        break;
    case SS__EV_RSS:
        if ((a = acc_for(f, ev->step)))
            add_max(&a->rec.rss_bytes, &a->rec.flags, WIRE_STEP_HAS_RSS,
                    ev->value);
        break;
    case SS__EV_DEVICE:
        if ((a = acc_for(f, ev->step)))
            add_max(&a->rec.device_bytes, &a->rec.flags,
                    WIRE_STEP_HAS_DEVICE, ev->value);
        break;
    case SS__EV_CHECKPOINT:
        f->sink.on_checkpoint(f->sink.ctx, ev->value, ev->t);
        break;
    case SS__EV_RESUMED:
        if (f->sink.on_resumed)
            f->sink.on_resumed(f->sink.ctx, ev->value, ev->t);
        break;
    default:
        break;
    }
}

void ss__fold_values(ss__fold *f, ss__track *track, const ss__event *ev,
                     const double *v)
{
    if (ev->type & SS__EV_AFTER_LOSS)
        ss__track_reset(track);
    if (ev->type & SS__EV_LOST_METRIC)
        doubt_metrics(f, track);
    advance_track(track, SS__EV_VALUES, ev->step);
    unsigned id = ev->name;
    uint32_t n = (uint32_t)ev->value, cut = (uint32_t)(ev->value >> 32);
    ss__acc *a;
    if (!valid_name(id) || n > SS_MAX_VALUES ||
        !(a = acc_for(f, ev->step))) {
        if (ev->step != SS__NO_STEP)
            f->dropped_vectors++;
        return;
    }
    if (!a->arena &&
        !(a->arena = malloc(SS__STEP_VALUES * sizeof(double)))) {
        f->dropped_vectors++;
        return;
    }
    unsigned slot = a->vec_slot[id];
    ss__acc_vec *x = slot ? &a->vec[slot - 1] : NULL;
    if (!x || x->room < n) {
        if (a->arena_used + n > SS__STEP_VALUES) {
            f->dropped_vectors++;
            return;
        }
        if (!x) {
            a->vec_slot[id] = (uint8_t)++a->n_vec;
            x = &a->vec[a->n_vec - 1];
            x->name_id = id;
        }
        x->off = a->arena_used;
        x->room = n;
        a->arena_used += n;
    }
    x->n = n;
    x->truncated = cut;
    memcpy(a->arena + x->off, v, (size_t)n * sizeof(double));
}

void ss__fold_release(ss__fold *f)
{
    for (int i = 0; i < SS__FOLD_OPEN; i++) {
        free(f->acc[i].arena);
        f->acc[i].arena = NULL;
    }
}

/* Hands on complete steps, lowest first. */
static void complete_steps(ss__fold *f)
{
    for (;;) {
        ss__acc *done = NULL;
        for (int i = 0; i < SS__FOLD_OPEN; i++) {
            ss__acc *a = &f->acc[i];
            if (a->used && a->ended && (!done || a->rec.step < done->rec.step))
                done = a;
        }
        if (!done)
            return;
        /* Open steps below a complete one can no longer end: drop them,
         * lowest first so that last_final only grows. */
        for (;;) {
            ss__acc *stale = NULL;
            for (int i = 0; i < SS__FOLD_OPEN; i++) {
                ss__acc *a = &f->acc[i];
                if (a->used && a->rec.step < done->rec.step &&
                    (!stale || a->rec.step < stale->rec.step))
                    stale = a;
            }
            if (!stale)
                break;
            finish(f, stale);
        }
        finish(f, done);
    }
}

void ss__fold_round(ss__fold *f)
{
    complete_steps(f);
    /* Steps superseded in an earlier round will not end any more. */
    for (;;) {
        ss__acc *stale = NULL;
        for (int i = 0; i < SS__FOLD_OPEN; i++) {
            ss__acc *a = &f->acc[i];
            if (a->used && a->superseded && a->superseded < f->round &&
                (!stale || a->rec.step < stale->rec.step))
                stale = a;
        }
        if (!stale)
            break;
        finish(f, stale);
    }
    f->round++;
}

uint64_t ss__fold_last_step(const ss__fold *f)
{
    return f->have_final ? f->last_final : SS__NO_STEP;
}

void ss__fold_status(const ss__fold *f, wire_status *out)
{
    out->step = f->cur_step == SS__NO_STEP ? WIRE_NO_STEP : f->cur_step;
    out->name_id = 0;
    out->since_ns = f->step_since > 0 ? f->step_since : 0;
    out->coll_name_id = 0; /* the sender adds the collective */
    out->coll_seq = 0;
    out->coll_flags = 0;
    const ss__track *t = f->step_track;
    if (!t)
        return;
    /* The innermost open phase is the one that began last.  One that began
     * before the current state did was left open by an earlier step (its
     * end lost or never made): not what runs now. */
    for (unsigned id = 1; id < SS__NAME_SLOTS; id++)
        if (t->depth[id] && t->begin[id] >= out->since_ns) {
            out->name_id = id;
            out->since_ns = t->begin[id];
        }
}

void ss__fold_forget_track(ss__fold *f, const ss__track *track)
{
    if (f->step_track == track)
        f->step_track = NULL;
    /* Its memory may be given to a new thread: keep no pointer to it. */
    for (int i = 0; i < SS__FOLD_OPEN; i++)
        for (unsigned k = 0; f->acc[i].used && k < f->acc[i].rec.n_metrics;
             k++)
            if (f->acc[i].metric_by[k] == track)
                f->acc[i].metric_by[k] = NULL;
}
