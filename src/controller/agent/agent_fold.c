/*
 * agent_fold.c - a node's ranks' records folded per step (agent_fold.h).
 */
#include "agent_fold.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int open;
    uint64_t first_ms;
    uint32_t running_present; /* of the ranks that still run */
    uint8_t *seen;            /* per local rank */
    ss_node_partial p;
} slot;

struct ss_agent_fold {
    uint32_t rank_base, nproc, running;
    uint8_t *gone;            /* per local rank */
    int have_emitted;
    uint64_t last_emitted;    /* the highest step emitted */
    uint64_t late_pending;    /* drops for the next partial */
    ss_agent_fold_emit emit;
    void *ctx;
    ss_agent_fold_stats stats;
    slot slots[SS_AGENT_FOLD_SLOTS];
};

ss_agent_fold *ss_agent_fold_new(uint32_t rank_base, uint32_t nproc,
                                  ss_agent_fold_emit emit, void *ctx)
{
    ss_agent_fold *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->gone = calloc(nproc ? nproc : 1, 1);
    int ok = f->gone != NULL;
    for (int i = 0; i < SS_AGENT_FOLD_SLOTS && ok; i++)
        ok = (f->slots[i].seen = calloc(nproc ? nproc : 1, 1)) != NULL;
    if (!ok) {
        ss_agent_fold_free(f);
        return NULL;
    }
    f->rank_base = rank_base;
    f->nproc = f->running = nproc;
    f->emit = emit;
    f->ctx = ctx;
    return f;
}

static void emit_slot(ss_agent_fold *f, slot *s)
{
    s->p.dropped += f->late_pending;
    f->late_pending = 0;
    f->stats.partials++;
    if (s->running_present < f->running)
        f->stats.incomplete++;
    if (!f->have_emitted || s->p.step > f->last_emitted)
        f->last_emitted = s->p.step;
    f->have_emitted = 1;
    s->open = 0;
    f->emit(f->ctx, &s->p);
}

/* The open slot of the oldest step, or NULL. */
static slot *oldest(ss_agent_fold *f)
{
    slot *o = NULL;
    for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++)
        if (f->slots[i].open && (!o || f->slots[i].p.step < o->p.step))
            o = &f->slots[i];
    return o;
}

/* Emits the complete steps, and, while a complete one is newer, the ones
 * before it: ranks report in step order, so a step some rank skipped is
 * not waited for once a later one is complete. */
static void emit_complete(ss_agent_fold *f)
{
    for (;;) {
        slot *o = oldest(f);
        if (!o)
            return;
        int complete_later = 0;
        for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++) {
            slot *s = &f->slots[i];
            if (s->open && s->running_present >= f->running)
                complete_later = 1;
        }
        if (o->running_present < f->running && !complete_later)
            return;
        emit_slot(f, o);
    }
}

void ss_agent_fold_add(ss_agent_fold *f, uint32_t rank, const wire_step *s,
                       const char *const *names, uint64_t now_ms)
{
    uint32_t local = rank - f->rank_base;
    if (local >= f->nproc)
        return;
    if (f->have_emitted && s->step <= f->last_emitted) {
        slot *o = NULL;
        for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++)
            if (f->slots[i].open && f->slots[i].p.step == s->step)
                o = &f->slots[i];
        if (!o) {
            f->late_pending++;
            f->stats.late_records++;
            return;
        }
    }
    slot *sl = NULL, *free_slot = NULL;
    for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++) {
        if (f->slots[i].open && f->slots[i].p.step == s->step)
            sl = &f->slots[i];
        else if (!f->slots[i].open && !free_slot)
            free_slot = &f->slots[i];
    }
    if (!sl) {
        if (!free_slot) { /* the ring is full: its oldest step goes */
            free_slot = oldest(f);
            emit_slot(f, free_slot);
        }
        sl = free_slot;
        sl->open = 1;
        sl->first_ms = now_ms;
        sl->running_present = 0;
        memset(sl->seen, 0, f->nproc);
        ss_np_init(&sl->p, s->step, f->nproc);
    }
    if (sl->seen[local]) { /* a rank sends each step once */
        f->stats.late_records++;
        sl->p.dropped++;
        return;
    }
    sl->seen[local] = 1;
    if (!f->gone[local])
        sl->running_present++;
    const char *pn[WIRE_MAX_ITEMS];
    int64_t durs[WIRE_MAX_ITEMS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_phases; i++) {
        uint32_t id = s->phases[i].name_id;
        const char *name = id <= WIRE_MAX_NAME_ID ? names[id] : NULL;
        if (!name) {
            sl->p.dropped++;
            continue;
        }
        pn[n] = name;
        durs[n++] = (int64_t)s->phases[i].total_ns;
    }
    ss_np_add_rank(&sl->p, rank, s->begin_ns, s->end_ns, n, pn, durs);
    emit_complete(f);
}

void ss_agent_fold_rank_gone(ss_agent_fold *f, uint32_t rank)
{
    uint32_t local = rank - f->rank_base;
    if (local >= f->nproc || f->gone[local])
        return;
    f->gone[local] = 1;
    f->running--;
    for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++)
        if (f->slots[i].open && f->slots[i].seen[local])
            f->slots[i].running_present--;
    emit_complete(f);
}

void ss_agent_fold_reset(ss_agent_fold *f)
{
    ss_agent_fold_flush(f);
    memset(f->gone, 0, f->nproc);
    f->running = f->nproc;
    f->have_emitted = 0;
}

void ss_agent_fold_expire(ss_agent_fold *f, uint64_t now_ms,
                          uint64_t max_age_ms)
{
    for (;;) {
        slot *o = oldest(f);
        if (!o || now_ms - o->first_ms < max_age_ms)
            return;
        emit_slot(f, o);
    }
}

void ss_agent_fold_flush(ss_agent_fold *f)
{
    slot *o;
    while ((o = oldest(f)) != NULL)
        emit_slot(f, o);
}

void ss_agent_fold_get_stats(const ss_agent_fold *f, ss_agent_fold_stats *out)
{
    *out = f->stats;
}

void ss_agent_fold_free(ss_agent_fold *f)
{
    if (!f)
        return;
    for (int i = 0; i < SS_AGENT_FOLD_SLOTS; i++)
        free(f->slots[i].seen);
    free(f->gone);
    free(f);
}
