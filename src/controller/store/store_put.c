/*
 * store_put.c - the writing half of store.h: each ss_store_put_* copies
 * its record into one heap item and queues it.
 *
 * Runs on the caller's thread (the controller's loop): no SQL and no I/O,
 * one malloc per item (the strings and arrays a record carries are carved
 * out of the same block), a mutex for the queue.  Only rank-step rows are
 * ever refused: a step's rows go only when the queue has room for all of
 * them (cfg.queue_limit units), and a step's vectors only when they fit in
 * cfg.values_queue_bytes; both are counted when refused.  Everything else
 * (a step's aggregates, runs, ranks, findings, events) is queued whatever
 * the queue holds: small and rare.  An item that cannot be allocated is
 * counted lost (store_outcome.c), as a crash would lose it.
 *
 * With cfg.rank_rows_per_step set (node aggregation of a large world), a
 * step writes the rows of the ranks it singles out, of a rotating share of
 * the world and of every rank on tier B's steps (row_pick); the other
 * present ranks travel as tallies (rank, step time, RSS, device memory) so
 * that the ranks' totals stay exact.
 */
#include "store.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clocks.h"
#include "json.h"
#include "store_state.h"
#include "store_outcome.h"
#include "store_writer.h"

/* Allocates a zeroed item of KIND with EXTRA uninitialized bytes after it
 * (for the copies it carries).  NULL on out-of-memory. */
static item *item_new(item_kind kind, int64_t run_id, size_t extra)
{
    item *it = malloc(sizeof(item) + extra);
    if (!it)
        return NULL;
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->run_id = run_id;
    it->units = 1;
    return it;
}

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Carves N bytes aligned to 8 from *P (inside an item's extra space, which
 * the caller sized as the sum of round8() of every carve). */
static void *carve(char **p, size_t n)
{
    void *r = *p;
    *p += round8(n);
    return r;
}

static char *carve_str(char **p, const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *r = carve(p, n);
    memcpy(r, s, n);
    return r;
}

static size_t str_space(const char *s)
{
    return round8((s ? strlen(s) : 0) + 1);
}

/* Out of memory in a put: the item is lost, as the store would lose it on a
 * crash, and counted; the controller goes on.  ROWS: the rank-step rows a
 * lost step carried. */
static void put_failed(ss_store *s, item_kind kind, uint32_t rows,
                       const char *what)
{
    fprintf(stderr, "stepscope: store %s: out of memory, %s not written\n",
            s->path, what);
    ss__outcome_lost_at_put(s, kind, rows, "out of memory");
}

void ss_store_put_attempt(ss_store *s, int64_t run_id, uint32_t attempt,
                          ss_wall_ns started_at)
{
    item *it = item_new(IT_ATTEMPT, run_id, 0);
    if (!it) {
        put_failed(s, IT_ATTEMPT, 0, "an attempt");
        return;
    }
    it->u.attempt.attempt = attempt;
    it->u.attempt.started_at = started_at;
    ss__store_enqueue(s, it);
}

void ss_store_put_attempt_facts(ss_store *s, int64_t run_id,
                                const ss_attempt_facts *f)
{
    item *it = item_new(IT_ATTEMPT_FACTS, run_id, 0);
    if (!it) {
        put_failed(s, IT_ATTEMPT_FACTS, 0, "an attempt's facts");
        return;
    }
    it->u.facts = *f;
    it->u.facts.cause[sizeof f->cause - 1] = '\0';
    ss__store_enqueue(s, it);
}

void ss_store_put_rank(ss_store *s, int64_t run_id, const ss_rank_info *r)
{
    item *it = item_new(IT_RANK, run_id, 0);
    if (!it) {
        put_failed(s, IT_RANK, 0, "a rank");
        return;
    }
    it->u.rank = *r;
    it->u.rank.host[sizeof r->host - 1] = '\0';
    it->u.rank.state[sizeof r->state - 1] = '\0';
    it->u.rank.log_path[sizeof r->log_path - 1] = '\0';
    ss__store_enqueue(s, it);
}

void ss_node_info_init(ss_node_info *n)
{
    memset(n, 0, sizeof *n);
    n->joined_at = SS_MISSING;
    n->ended_at = SS_MISSING;
    n->clock_offset_ns = SS_MISSING;
    n->clock_bound_ns = SS_MISSING;
    n->lost_at_step = SS_MISSING;
}

static int node_state_known(const char *state)
{
    static const char *const known[] = {SS_NODE_JOINING, SS_NODE_RUNNING,
                                        SS_NODE_DONE, SS_NODE_LOST,
                                        SS_NODE_NEVER_JOINED};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(state, known[i]) == 0)
            return 1;
    return 0;
}

void ss_store_put_node(ss_store *s, int64_t run_id, const ss_node_info *n)
{
    char state[sizeof n->state];
    snprintf(state, sizeof state, "%.*s", (int)sizeof state - 1, n->state);
    if (!node_state_known(state)) {
        fprintf(stderr, "stepscope: store %s: node %u has an unknown state "
                "'%s', not written\n", s->path, n->node_rank, state);
        ss__outcome_lost_at_put(s, IT_NODE, 0,
                                "a node with an unknown state");
        return;
    }
    item *it = item_new(IT_NODE, run_id, 0);
    if (!it) {
        put_failed(s, IT_NODE, 0, "a node");
        return;
    }
    it->u.node = *n;
    it->u.node.host[sizeof n->host - 1] = '\0';
    it->u.node.addr[sizeof n->addr - 1] = '\0';
    it->u.node.state[sizeof n->state - 1] = '\0';
    it->u.node.lost_reason[sizeof n->lost_reason - 1] = '\0';
    ss__store_enqueue(s, it);
}

void ss_store_put_profile(ss_store *s, int64_t run_id,
                          const ss_profile_info *p)
{
    item *it = item_new(IT_PROFILE, run_id, 0);
    if (!it) {
        put_failed(s, IT_PROFILE, 0, "a profile");
        return;
    }
    it->u.profile = *p;
    it->u.profile.status[sizeof p->status - 1] = '\0';
    it->u.profile.path[sizeof p->path - 1] = '\0';
    it->u.profile.host[sizeof p->host - 1] = '\0';
    it->u.profile.message[sizeof p->message - 1] = '\0';
    ss__store_enqueue(s, it);
}

/* ARR[IDX] of a per-name array that may be NULL (nothing known). */
static int64_t name_value(const int64_t *arr, int idx)
{
    return arr ? arr[idx] : SS_MISSING;
}

static const char *name_of(const char *const *names, int idx)
{
    return names && idx >= 0 && names[idx] ? names[idx] : "?";
}

/* Does some present rank of V carry host evidence? */
/* The slowest ranks of a step whose rows are always written. */
#define PICK_SLOWEST 4
/* Ranks a step singles out: the worst of its step time, memory, phases,
 * self times and syncs, and its PICK_SLOWEST slowest. */
#define PICK_MAX (3 + 2 * SS_MAX_STEP_ITEMS + SS_MAX_STEP_ITEMS + PICK_SLOWEST)

/* Which present ranks of a step get a row: every one (stride 1), or those
 * with (rank + step) % stride == 0 and the ranks in singled[]. */
typedef struct {
    uint32_t stride;
    uint64_t step;
    uint32_t n_singled;
    int32_t singled[PICK_MAX];
} row_pick;

static void pick_add(row_pick *pk, int32_t rank)
{
    if (rank < 0 || pk->n_singled >= PICK_MAX)
        return;
    for (uint32_t i = 0; i < pk->n_singled; i++)
        if (pk->singled[i] == rank)
            return;
    pk->singled[pk->n_singled++] = rank;
}

/* Fills PK for step V under CFG: every rank when rank_rows_per_step is 0
 * or covers the world, and on tier B's steps (kept for ever). */
static void row_pick_init(row_pick *pk, const ss_store_config *cfg,
                          const ss_step_view *v)
{
    memset(pk, 0, sizeof *pk);
    pk->step = v->step;
    pk->stride = 1;
    uint32_t per = cfg->rank_rows_per_step;
    if (per == 0 || v->world_size <= per || !v->ranks ||
        (cfg->sample_every && v->step % cfg->sample_every == 0))
        return;
    pk->stride = (v->world_size + per - 1) / per;
    pick_add(pk, v->step_time.worst_rank);
    pick_add(pk, v->rss.worst_rank);
    pick_add(pk, v->device.worst_rank);
    for (uint32_t i = 0; i < v->n_phases; i++) {
        pick_add(pk, v->phases[i].stat.worst_rank);
        if (v->phase_self)
            pick_add(pk, v->phase_self[i].worst_rank);
    }
    for (uint32_t i = 0; i < v->n_syncs; i++)
        pick_add(pk, v->syncs[i].worst_rank);
    int32_t slow[PICK_SLOWEST];
    int64_t slow_ns[PICK_SLOWEST];
    uint32_t n_slow = 0;
    for (uint32_t r = 0; r < v->world_size; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present || rs->step_ns == SS_MISSING)
            continue;
        if (n_slow == PICK_SLOWEST && rs->step_ns <= slow_ns[n_slow - 1])
            continue;
        uint32_t k = n_slow < PICK_SLOWEST ? n_slow++ : n_slow - 1;
        for (; k > 0 && slow_ns[k - 1] < rs->step_ns; k--) {
            slow[k] = slow[k - 1];
            slow_ns[k] = slow_ns[k - 1];
        }
        slow[k] = (int32_t)r;
        slow_ns[k] = rs->step_ns;
    }
    for (uint32_t k = 0; k < n_slow; k++)
        pick_add(pk, slow[k]);
}

/* Whether present rank R gets a row under PK. */
static int row_picked(const row_pick *pk, uint32_t r)
{
    if (pk->stride <= 1 || (r + pk->step) % pk->stride == 0)
        return 1;
    for (uint32_t i = 0; i < pk->n_singled; i++)
        if (pk->singled[i] == (int32_t)r)
            return 1;
    return 0;
}

/* Queues the vectors of step V, all of them or none (over
 * values_queue_bytes: counted). */
static void put_values(ss_store *s, int64_t run_id, const ss_step_view *v,
                       const char *const *names)
{
    uint32_t n = 0;
    size_t extra = 0;
    for (uint32_t r = 0; v->ranks && r < v->world_size; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        for (uint32_t i = 0; i < rs->n_values; i++) {
            n++;
            extra += round8(rs->values[i].n * sizeof(double)) +
                     str_space(name_of(names, rs->values[i].name));
        }
    }
    if (n == 0)
        return;
    extra += round8(n * sizeof(value_row));
    pthread_mutex_lock(&s->mu);
    int keep = s->pending_value_bytes + extra <= s->cfg.values_queue_bytes;
    if (keep) {
        s->pending_value_bytes += extra;
        s->stats.vectors_queued += n;
    } else {
        s->stats.dropped_vectors += n;
        if (s->dropped_vectors_run != run_id)
            s->dropped_vectors_unsaved = 0; /* a new run: counted anew */
        s->dropped_vectors_run = run_id;
        s->dropped_vectors_unsaved += n;
    }
    pthread_mutex_unlock(&s->mu);
    if (!keep)
        return;
    item *it = item_new(IT_VALUES, run_id, extra);
    if (!it) {
        put_failed(s, IT_VALUES, n, "a step's vectors");
        return;
    }
    values_item *vi = &it->u.values;
    char *p = (char *)(it + 1);
    vi->attempt = v->attempt;
    vi->step = v->step;
    vi->world_size = v->world_size;
    vi->n = n;
    vi->bytes = extra;
    vi->rows = carve(&p, n * sizeof(value_row));
    uint32_t k = 0;
    for (uint32_t r = 0; r < v->world_size; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        for (uint32_t i = 0; i < rs->n_values; i++, k++) {
            const ss_values_item *x = &rs->values[i];
            value_row *row = &vi->rows[k];
            row->rank = r;
            row->n = x->n;
            row->truncated = x->truncated;
            row->name = carve_str(&p, name_of(names, x->name));
            row->v = carve(&p, x->n * sizeof(double));
            if (x->n)
                memcpy(row->v, x->v, x->n * sizeof(double));
        }
    }
    ss__store_enqueue(s, it);
}

void ss_store_put_labels(ss_store *s, int64_t run_id, uint32_t attempt,
                         uint32_t rank, const char *name,
                         const char *const *labels, uint32_t n)
{
    ss_buf json = {0};
    ss_buf_add(&json, "[", 1);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            ss_buf_add(&json, ",", 1);
        ss_buf_json_str(&json, labels[i]);
    }
    ss_buf_add(&json, "]", 1);
    item *it = json.oom ? NULL
                        : item_new(IT_LABELS, run_id,
                                   str_space(name) + json.len + 1);
    if (!it) {
        ss_buf_free(&json);
        put_failed(s, IT_LABELS, 0, "a vector's labels");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.labels.attempt = attempt;
    it->u.labels.rank = rank;
    it->u.labels.name = carve_str(&p, name);
    it->u.labels.json = p;
    memcpy(p, json.data, json.len);
    p[json.len] = '\0';
    ss_buf_free(&json);
    ss__store_enqueue(s, it);
}

void ss_store_put_step(ss_store *s, int64_t run_id, const ss_step_view *v,
                       const char *const *names)
{
    row_pick pk;
    row_pick_init(&pk, &s->cfg, v);
    uint32_t n_rows = 0, n_tallies = 0;
    int any_host = 0; /* some row has host evidence */
    if (v->ranks)
        for (uint32_t r = 0; r < v->world_size; r++)
            if (v->ranks[r].present) {
                if (row_picked(&pk, r)) {
                    n_rows++;
                    any_host |= v->ranks[r].host != NULL;
                } else {
                    n_tallies++;
                }
            }
    uint64_t units = 1 + n_rows + (n_tallies + TALLIES_PER_UNIT - 1) /
                                      TALLIES_PER_UNIT;

    /* Rank rows (and tallies) go only when the queue has room for them;
     * the rest of the step always goes. */
    pthread_mutex_lock(&s->mu);
    int keep_rows = s->pending_units + units <= s->cfg.queue_limit;
    if (!keep_rows)
        s->stats.dropped_rank_steps += n_rows + n_tallies;
    else
        s->stats.unpicked_rank_steps += n_tallies;
    pthread_mutex_unlock(&s->mu);
    uint32_t rows = keep_rows ? n_rows : 0;
    uint32_t tallies = keep_rows ? n_tallies : 0;
    int with_host = rows && any_host;

    size_t stride = ROW_FIXED + 4 * (size_t)v->n_phases + v->n_syncs +
                    v->n_metrics;
    size_t extra = round8((size_t)v->n_missing * sizeof(uint32_t)) +
                   round8((size_t)v->n_phases * sizeof(ss_phase_stat)) +
                   round8((size_t)v->n_phases * sizeof(ss_stat)) +
                   round8((size_t)v->n_phases * sizeof(char *)) +
                   round8((size_t)v->n_syncs * sizeof(ss_sync_stat)) +
                   round8((size_t)v->n_syncs * sizeof(char *)) +
                   round8((size_t)v->n_metrics * sizeof(char *)) +
                   round8((size_t)rows * sizeof(uint32_t)) +
                   (size_t)rows * stride * sizeof(int64_t) +
                   (with_host ? (size_t)rows * sizeof(ss_host_step) : 0) +
                   round8((size_t)tallies * sizeof(rank_tally));
    for (uint32_t i = 0; i < v->n_phases; i++)
        extra += str_space(name_of(names, v->phases[i].name));
    for (uint32_t i = 0; i < v->n_syncs; i++)
        extra += str_space(name_of(names, v->syncs[i].name));
    for (uint32_t i = 0; i < v->n_metrics; i++)
        extra += str_space(name_of(names, v->metrics[i]));
    item *it = item_new(IT_STEP, run_id, extra);
    if (!it) {
        put_failed(s, IT_STEP, rows, "a step");
        return;
    }
    step_item *st = &it->u.step;
    char *p = (char *)(it + 1);
    st->attempt = v->attempt;
    st->step = v->step;
    st->finalized_at = v->finalized_at;
    st->world_size = v->world_size;
    st->n_present = v->n_present;
    st->n_missing = v->n_missing;
    st->missing = carve(&p, (size_t)v->n_missing * sizeof(uint32_t));
    if (v->n_missing)
        memcpy(st->missing, v->missing_ranks,
               (size_t)v->n_missing * sizeof(uint32_t));
    st->step_time = v->step_time;
    st->rss = v->rss;
    st->device = v->device;
    st->n_phases = v->n_phases;
    st->phases = carve(&p, (size_t)v->n_phases * sizeof(ss_phase_stat));
    st->phase_self = carve(&p, (size_t)v->n_phases * sizeof(ss_stat));
    st->phase_names = carve(&p, (size_t)v->n_phases * sizeof(char *));
    for (uint32_t i = 0; i < v->n_phases; i++) {
        st->phases[i] = v->phases[i];
        if (v->phase_self)
            st->phase_self[i] = v->phase_self[i];
        else
            st->phase_self[i] = (ss_stat){SS_MISSING, SS_MISSING, SS_MISSING,
                                          SS_MISSING, SS_NO_RANK, 0};
        st->phase_names[i] = carve_str(&p, name_of(names, v->phases[i].name));
    }
    st->n_syncs = v->n_syncs;
    st->syncs = carve(&p, (size_t)v->n_syncs * sizeof(ss_sync_stat));
    st->sync_names = carve(&p, (size_t)v->n_syncs * sizeof(char *));
    for (uint32_t i = 0; i < v->n_syncs; i++) {
        st->syncs[i] = v->syncs[i];
        st->sync_names[i] = carve_str(&p, name_of(names, v->syncs[i].name));
    }
    st->n_metrics = v->n_metrics;
    st->metric_names = carve(&p, (size_t)v->n_metrics * sizeof(char *));
    for (uint32_t i = 0; i < v->n_metrics; i++)
        st->metric_names[i] = carve_str(&p, name_of(names, v->metrics[i]));
    st->n_rows = rows;
    st->row_rank = carve(&p, (size_t)rows * sizeof(uint32_t));
    st->row_vals = carve(&p, (size_t)rows * stride * sizeof(int64_t));
    st->n_tallies = tallies;
    st->tallies = carve(&p, (size_t)tallies * sizeof(rank_tally));
    /* Every row's host evidence when some row has any (all SS_MISSING
     * for a rank without), or none. */
    st->row_host = with_host ? carve(&p, (size_t)rows * sizeof(ss_host_step))
                             : NULL;
    uint32_t i = 0, n_tallied = 0;
    for (uint32_t r = 0;
         r < v->world_size && (i < rows || n_tallied < tallies); r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        if (!row_picked(&pk, r)) {
            if (n_tallied < tallies)
                st->tallies[n_tallied++] = (rank_tally){
                    rs->step_ns, rs->rss_bytes, rs->device_bytes, r};
            continue;
        }
        if (i == rows)
            continue;
        if (with_host && rs->host)
            st->row_host[i] = *rs->host;
        else if (with_host)
            for (size_t k = 0; k < sizeof st->row_host[i] / sizeof(int64_t);
                 k++)
                ((int64_t *)&st->row_host[i])[k] = SS_MISSING;
        int64_t *vals = st->row_vals + (size_t)i * stride;
        st->row_rank[i] = r;
        vals[0] = rs->step_ns;
        vals[1] = rs->rss_bytes;
        vals[2] = rs->device_bytes;
        vals[3] = rs->begin_ns;
        int64_t *ph = vals + ROW_FIXED;
        uint32_t np = v->n_phases;
        for (uint32_t k = 0; k < v->n_phases; k++) {
            int idx = v->phases[k].name;
            int ok = idx >= 0 && (uint32_t)idx < v->n_names;
            ph[k] = ok ? name_value(rs->phase_ns, idx) : SS_MISSING;
            ph[np + k] = ok ? name_value(rs->phase_start_ns, idx) : SS_MISSING;
            ph[2 * np + k] = ok ? name_value(rs->phase_count, idx)
                                : SS_MISSING;
        }
        for (uint32_t k = 0; k < v->n_syncs; k++) {
            int idx = v->syncs[k].name;
            int64_t t = idx >= 0 && (uint32_t)idx < v->n_names
                            ? name_value(rs->sync_arrival_ns, idx)
                            : SS_MISSING;
            ph[3 * np + k] = t == SS_MISSING || rs->begin_ns == SS_MISSING
                                 ? SS_MISSING
                                 : t - rs->begin_ns;
        }
        int64_t *me = ph + 3 * np + v->n_syncs;
        for (uint32_t k = 0; k < v->n_metrics; k++) {
            int idx = v->metrics[k];
            double d = idx >= 0 && (uint32_t)idx < v->n_names && rs->metric
                           ? rs->metric[idx]
                           : NAN;
            memcpy(&me[k], &d, sizeof d);
        }
        int64_t *self = me + v->n_metrics;
        for (uint32_t k = 0; k < np; k++) {
            int idx = v->phases[k].name;
            self[k] = idx >= 0 && (uint32_t)idx < v->n_names
                          ? name_value(rs->phase_self_ns, idx)
                          : SS_MISSING;
        }
        i++;
    }
    st->dropped_rows = keep_rows ? 0 : n_rows + n_tallies;
    it->units = keep_rows ? units : 1;
    ss__store_enqueue(s, it);
    put_values(s, run_id, v, names);
}

void ss_store_put_finding(ss_store *s, int64_t run_id, const ss_finding *f)
{
    item *it = item_new(IT_FINDING, run_id, 0);
    if (!it) {
        put_failed(s, IT_FINDING, 0, "a finding");
        return;
    }
    ss_finding *c = &it->u.finding.f;
    *c = *f;
    c->kind[sizeof c->kind - 1] = '\0';
    c->phase[sizeof c->phase - 1] = '\0';
    c->evidence_json[sizeof c->evidence_json - 1] = '\0';
    c->message[sizeof c->message - 1] = '\0';
    if (c->n_ranks > SS_FINDING_MAX_RANKS)
        c->n_ranks = SS_FINDING_MAX_RANKS;
    it->u.finding.at = ss_wall_now();
    ss__store_enqueue(s, it);
}

void ss_store_put_event(ss_store *s, int64_t run_id, uint32_t attempt,
                        ss_wall_ns at, const char *kind, int32_t rank,
                        const char *message)
{
    item *it = item_new(IT_EVENT, run_id,
                        str_space(kind) + str_space(message));
    if (!it) {
        put_failed(s, IT_EVENT, 0, "an event");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.event.attempt = attempt;
    it->u.event.at = at;
    it->u.event.rank = rank;
    it->u.event.kind = carve_str(&p, kind);
    it->u.event.message = carve_str(&p, message);
    ss__store_enqueue(s, it);
}

void ss_store_put_stacks(ss_store *s, int64_t run_id, uint32_t attempt,
                         ss_wall_ns taken_at, const char *trigger,
                         int64_t finding_id, const char *json)
{
    item *it = item_new(IT_STACKS, run_id,
                        str_space(trigger) + str_space(json));
    if (!it) {
        put_failed(s, IT_STACKS, 0, "a stacks snapshot");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.stacks.attempt = attempt;
    it->u.stacks.taken_at = taken_at;
    it->u.stacks.finding_id = finding_id;
    it->u.stacks.trigger = carve_str(&p, trigger);
    it->u.stacks.json = carve_str(&p, json);
    ss__store_enqueue(s, it);
}

void ss_store_end_run(ss_store *s, int64_t run_id, ss_wall_ns ended_at,
                      int exit_code, const char *status,
                      int64_t dropped_events, int64_t dropped_records)
{
    item *it = item_new(IT_END_RUN, run_id, str_space(status));
    if (!it) {
        put_failed(s, IT_END_RUN, 0, "the end of the run");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.end.ended_at = ended_at;
    it->u.end.exit_code = exit_code;
    it->u.end.status = carve_str(&p, status && *status ? status : "ended");
    it->u.end.dropped_events = dropped_events;
    it->u.end.dropped_records = dropped_records;
    ss__store_enqueue(s, it);
}

void ss_store_add_dropped_vectors(ss_store *s, int64_t run_id, uint64_t n)
{
    if (n == 0)
        return;
    item *it = item_new(IT_DROPPED_VECTORS, run_id, 0);
    if (!it) {
        put_failed(s, IT_DROPPED_VECTORS, 0, "a count of dropped vectors");
        return;
    }
    it->u.dropped_vectors = n;
    ss__store_enqueue(s, it);
}
