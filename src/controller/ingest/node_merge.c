/*
 * node_merge.c - node partials merged into each step's aggregate
 * (node_merge.h).
 */
#include "node_merge.h"

#include <stdlib.h>

typedef struct {
    int open;
    uint64_t accounted; /* ranks: partials' expected + local records */
    ss_node_partial p;
} slot;

struct ss_node_merge {
    uint32_t world;
    ss_node_merge_final final;
    void *ctx;
    int have_final;
    uint64_t last_final;  /* the highest step finalized */
    ss_node_merge_stats st;
    slot slots[SS_NODE_MERGE_SLOTS];
};

ss_node_merge *ss_node_merge_new(uint32_t world_size,
                                 ss_node_merge_final final, void *ctx)
{
    ss_node_merge *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->world = world_size;
    m->final = final;
    m->ctx = ctx;
    ss_dds_init(&m->st.latency_ns);
    return m;
}

static void finalize(ss_node_merge *m, slot *s, int64_t now_ns)
{
    int complete = s->accounted >= m->world;
    if (complete)
        m->st.steps_complete++;
    else
        m->st.steps_incomplete++;
    if (s->p.n_latest > 0)
        ss_dds_add(&m->st.latency_ns, (double)(now_ns - s->p.latest[0].value));
    if (!m->have_final || s->p.step > m->last_final)
        m->last_final = s->p.step;
    m->have_final = 1;
    s->open = 0;
    m->final(m->ctx, &s->p, complete);
}

static slot *oldest(ss_node_merge *m)
{
    slot *o = NULL;
    for (int i = 0; i < SS_NODE_MERGE_SLOTS; i++)
        if (m->slots[i].open && (!o || m->slots[i].p.step < o->p.step))
            o = &m->slots[i];
    return o;
}

/* The open slot of STEP (opened when needed), or NULL when STEP was
 * finalized already. */
static slot *slot_of(ss_node_merge *m, uint64_t step, int64_t now_ns)
{
    slot *free_slot = NULL;
    for (int i = 0; i < SS_NODE_MERGE_SLOTS; i++) {
        slot *s = &m->slots[i];
        if (s->open && s->p.step == step)
            return s;
        if (!s->open && !free_slot)
            free_slot = s;
    }
    if (m->have_final && step <= m->last_final) {
        m->st.late++;
        return NULL;
    }
    if (!free_slot) {
        free_slot = oldest(m);
        finalize(m, free_slot, now_ns);
    }
    free_slot->open = 1;
    free_slot->accounted = 0;
    ss_np_init(&free_slot->p, step, 0);
    return free_slot;
}

void ss_node_merge_partial(ss_node_merge *m, const ss_node_partial *p,
                           int64_t now_ns)
{
    slot *s = slot_of(m, p->step, now_ns);
    if (!s)
        return;
    ss_np_merge(&s->p, p);
    s->accounted += p->ranks_expected;
    m->st.partials++;
    if (s->accounted >= m->world)
        finalize(m, s, now_ns);
}

void ss_node_merge_rank(ss_node_merge *m, uint64_t step, uint32_t rank,
                        int64_t begin_ns, int64_t end_ns, uint32_t n,
                        const char *const *names, const int64_t *durs,
                        int64_t now_ns)
{
    slot *s = slot_of(m, step, now_ns);
    if (!s)
        return;
    s->p.ranks_expected++;
    ss_np_add_rank(&s->p, rank, begin_ns, end_ns, n, names, durs);
    s->accounted++;
    m->st.local_records++;
    if (s->accounted >= m->world)
        finalize(m, s, now_ns);
}

void ss_node_merge_flush(ss_node_merge *m, int64_t now_ns)
{
    slot *o;
    while ((o = oldest(m)) != NULL)
        finalize(m, o, now_ns);
}

const ss_node_merge_stats *ss_node_merge_get_stats(const ss_node_merge *m)
{
    return &m->st;
}

void ss_node_merge_free(ss_node_merge *m)
{
    free(m);
}
