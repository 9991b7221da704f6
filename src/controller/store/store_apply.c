/*
 * store_apply.c - binding a queued item's record to the writer's
 * statements (store_apply.h).
 *
 * One case per item kind: the record's fields go to the parameters of its
 * statement in store_sql.c, by number, with the conventions of
 * store_bind.h.  A step also writes its phases, syncs and rank rows (each
 * rank row's phases, syncs and metrics as JSON objects built with the
 * step's names escaped once) and counts its rows into the run's track for
 * rank_totals and retention (store_retention.c), and its tallies (ranks
 * without a row) into the same totals.
 */
#include "store_apply.h"

#include <string.h>

#include "store_retention.h"

/* Writes a finalized step: its aggregates, phases and syncs, the rank
 * rows it carries (counted into its track), and its dropped rows. */
static int apply_step(ss_store *s, int64_t run_id, const step_item *v)
{
    sqlite3_stmt *q = s->st[SS__ST_STEP];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 3, (int64_t)v->step);
    sqlite3_bind_int64(q, 4, v->finalized_at);
    sqlite3_bind_int64(q, 5, v->world_size);
    sqlite3_bind_int64(q, 6, v->n_present);
    sqlite3_bind_int64(q, 7, v->n_missing);
    ss_buf miss = {0};
    if (v->n_missing) {
        for (uint32_t i = 0; i < v->n_missing; i++) {
            ss_buf_add(&miss, i ? "," : "[", 1);
            ss_buf_json_int(&miss, v->missing[i]);
        }
        ss_buf_add(&miss, "]", 1);
        if (miss.oom) {
            ss_buf_free(&miss);
            return -1;
        }
        sqlite3_bind_text(q, 8, miss.data, (int)miss.len, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(q, 8);
    }
    sqlite3_bind_int64(q, 9, v->step_time.n);
    ss__bind_opt_int(q, 10, v->step_time.min);
    ss__bind_opt_int(q, 11, v->step_time.median);
    ss__bind_opt_int(q, 12, v->step_time.p90);
    ss__bind_opt_int(q, 13, v->step_time.max);
    ss__bind_rank(q, 14, v->step_time.worst_rank);
    ss__bind_opt_int(q, 15, v->rss.median);
    ss__bind_opt_int(q, 16, v->rss.max);
    ss__bind_rank(q, 17, v->rss.worst_rank);
    ss__bind_opt_int(q, 18, v->device.median);
    ss__bind_opt_int(q, 19, v->device.max);
    ss__bind_rank(q, 20, v->device.worst_rank);
    int rc = ss__store_run(s, q, "writing a step");
    sqlite3_clear_bindings(q);
    ss_buf_free(&miss);
    if (rc != 0)
        return -1;

    q = s->st[SS__ST_PHASE];
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_stat *ps = &v->phases[i].stat;
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, v->attempt);
        sqlite3_bind_int64(q, 3, (int64_t)v->step);
        sqlite3_bind_text(q, 4, v->phase_names[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, ps->n);
        ss__bind_opt_int(q, 6, ps->min);
        ss__bind_opt_int(q, 7, ps->median);
        ss__bind_opt_int(q, 8, ps->p90);
        ss__bind_opt_int(q, 9, ps->max);
        ss__bind_rank(q, 10, ps->worst_rank);
        const ss_stat *self = &v->phase_self[i];
        sqlite3_bind_int64(q, 11, self->n);
        ss__bind_opt_int(q, 12, self->min);
        ss__bind_opt_int(q, 13, self->median);
        ss__bind_opt_int(q, 14, self->p90);
        ss__bind_opt_int(q, 15, self->max);
        ss__bind_rank(q, 16, self->worst_rank);
        if (ss__store_run(s, q, "writing a step phase") != 0)
            return -1;
    }
    q = s->st[SS__ST_SYNC];
    for (uint32_t i = 0; i < v->n_syncs; i++) {
        const ss_sync_stat *ys = &v->syncs[i];
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, v->attempt);
        sqlite3_bind_int64(q, 3, (int64_t)v->step);
        sqlite3_bind_text(q, 4, v->sync_names[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, ys->n);
        ss__bind_opt_int(q, 6, ys->skew_ns);
        ss__bind_opt_int(q, 7, ys->late_ns);
        ss__bind_rank(q, 8, ys->worst_rank);
        if (ss__store_run(s, q, "writing a step sync") != 0)
            return -1;
    }

    if (v->dropped_rows) {
        q = s->st[SS__ST_DROPPED];
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, (int64_t)v->dropped_rows);
        if (ss__store_run(s, q, "counting dropped rank steps") != 0)
            return -1;
    }

    track *t = ss__track_get(s, run_id, v->attempt, v->world_size);
    if (!t)
        return -1;
    if ((int64_t)v->step > t->max_step)
        t->max_step = (int64_t)v->step;
    for (uint32_t i = 0; i < v->n_tallies; i++) {
        const rank_tally *y = &v->tallies[i];
        ss__track_count_row(t, y->rank, y->step_ns, y->rss, y->device,
                            (int64_t)v->step);
    }
    if (v->n_rows == 0)
        return 0;

    if (ss__json_keys_set(&s->keys, v->phase_names, v->n_phases) != 0 ||
        ss__json_keys_set(&s->skeys, v->sync_names, v->n_syncs) != 0 ||
        ss__json_keys_set(&s->mkeys, v->metric_names, v->n_metrics) != 0)
        return -1;
    q = s->st[SS__ST_RANK_STEP];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 3, (int64_t)v->step);
    size_t stride = ss__row_stride(v);
    uint32_t np = v->n_phases;
    for (uint32_t i = 0; i < v->n_rows; i++) {
        const int64_t *vals = v->row_vals + i * stride;
        const int64_t *ph = vals + ROW_FIXED;
        uint32_t rank = v->row_rank[i];
        if (ss__json_object(&s->rowjson[0], ph, np, &s->keys,
                            SS_MISSING) != 0 ||
            ss__json_object(&s->rowjson[1], ph + np, np, &s->keys,
                            SS_MISSING) != 0 ||
            ss__json_object(&s->rowjson[2], ph + 2 * np, np, &s->keys,
                            1) != 0 ||
            ss__json_object(&s->rowjson[3], ph + 3 * np, v->n_syncs,
                            &s->skeys, SS_MISSING) != 0 ||
            ss__json_doubles(&s->rowjson[4], ph + 3 * np + v->n_syncs,
                             v->n_metrics, &s->mkeys) != 0 ||
            ss__json_self(&s->rowjson[5], ph,
                          ph + 3 * np + v->n_syncs + v->n_metrics, np,
                          &s->keys) != 0)
            return -1;
        sqlite3_bind_int64(q, 4, rank);
        ss__bind_opt_int(q, 5, vals[0]);
        ss__bind_opt_int(q, 6, vals[1]);
        ss__bind_opt_int(q, 7, vals[2]);
        ss__bind_json(q, 8, &s->rowjson[0]);
        ss__bind_opt_int(q, 9, vals[3]);
        ss__bind_json(q, 10, &s->rowjson[1]);
        ss__bind_json(q, 11, &s->rowjson[2]);
        ss__bind_json(q, 12, &s->rowjson[3]);
        ss__bind_json(q, 13, &s->rowjson[4]);
        ss__bind_json(q, 14, &s->rowjson[5]);
        ss__bind_host(q, v->row_host ? &v->row_host[i] : NULL);
        if (ss__store_run(s, q, "writing a rank step") != 0)
            return -1;
        ss__track_count_row(t, rank, vals[0], vals[1], vals[2],
                            (int64_t)v->step);
    }
    return 0;
}

/* Writes a step's vectors: one row per rank and name, the elements as a
 * blob of little-endian doubles. */
static int apply_values(ss_store *s, int64_t run_id, const values_item *v)
{
    track *t = ss__track_get(s, run_id, v->attempt, v->world_size);
    if (!t)
        return -1;
    if ((int64_t)v->step > t->max_step)
        t->max_step = (int64_t)v->step;
    sqlite3_stmt *q = s->st[SS__ST_VALUES];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 4, (int64_t)v->step);
    for (uint32_t i = 0; i < v->n; i++) {
        const value_row *r = &v->rows[i];
        sqlite3_bind_text(q, 3, r->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, r->rank);
        sqlite3_bind_int64(q, 6, r->n);
        sqlite3_bind_int64(q, 7, r->truncated);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rank_values.data is little-endian: convert here"
#endif
        sqlite3_bind_blob(q, 8, r->n ? (const void *)r->v : "", 
                          (int)(r->n * sizeof(double)), SQLITE_STATIC);
        if (ss__store_run(s, q, "writing a vector") != 0)
            return -1;
    }
    return 0;
}

int ss__store_apply(ss_store *s, const item *it)
{
    sqlite3_stmt *q;
    switch (it->kind) {
    case IT_ATTEMPT:
        q = s->st[SS__ST_ATTEMPT];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.attempt.attempt);
        sqlite3_bind_int64(q, 3, it->u.attempt.started_at);
        return ss__store_run(s, q, "writing an attempt");
    case IT_ATTEMPT_FACTS: {
        const ss_attempt_facts *f = &it->u.facts;
        q = s->st[SS__ST_ATTEMPT_FACTS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, f->attempt);
        ss__bind_known_int(q, 3, f->ended_at);
        ss__bind_known_text(q, 4, f->cause);
        ss__bind_known_int(q, 5, f->first_step);
        ss__bind_known_int(q, 6, f->last_step);
        ss__bind_known_int(q, 7, f->resumed_from);
        return ss__store_run(s, q, "writing an attempt's facts");
    }
    case IT_RANK: {
        const ss_rank_info *r = &it->u.rank;
        q = s->st[SS__ST_RANK];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, r->attempt);
        sqlite3_bind_int64(q, 3, r->rank);
        ss__bind_known_text(q, 4, r->host);
        ss__bind_known_int(q, 5, r->pid);
        ss__bind_known_text(q, 6, r->state);
        ss__bind_known_int(q, 7, r->exit_code);
        ss__bind_known_int(q, 8, r->term_signal);
        ss__bind_known_int(q, 9, r->last_step);
        ss__bind_known_int(q, 10, r->dropped_events);
        ss__bind_known_int(q, 11, r->dropped_records);
        ss__bind_known_text(q, 12, r->log_path);
        ss__bind_known_int(q, 13, r->names_over_limit);
        ss__bind_known_int(q, 14, r->values_over_limit);
        return ss__store_run(s, q, "writing a rank");
    }
    case IT_NODE: {
        const ss_node_info *n = &it->u.node;
        q = s->st[SS__ST_NODE];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, n->attempt);
        sqlite3_bind_int64(q, 3, n->node_rank);
        ss__bind_known_text(q, 4, n->host);
        sqlite3_bind_text(q, 5, n->addr, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 6, n->first_rank);
        sqlite3_bind_int64(q, 7, n->nranks);
        sqlite3_bind_text(q, 8, n->state, -1, SQLITE_STATIC);
        ss__bind_opt_int(q, 9, n->joined_at);
        ss__bind_opt_int(q, 10, n->ended_at);
        ss__bind_opt_int(q, 11, n->clock_offset_ns);
        ss__bind_opt_int(q, 12, n->clock_bound_ns);
        ss__bind_known_text(q, 13, n->lost_reason);
        ss__bind_opt_int(q, 14, n->lost_at_step);
        return ss__store_run(s, q, "writing a node");
    }
    case IT_PROFILE: {
        const ss_profile_info *p = &it->u.profile;
        q = s->st[SS__ST_PROFILE];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, p->attempt);
        sqlite3_bind_int64(q, 3, p->request_id);
        sqlite3_bind_int64(q, 4, p->rank);
        sqlite3_bind_int64(q, 5, p->requested_at);
        sqlite3_bind_int64(q, 6, p->duration_ms);
        sqlite3_bind_text(q, 7, p->status, -1, SQLITE_STATIC);
        ss__bind_known_text(q, 8, p->path);
        ss__bind_known_text(q, 9, p->host);
        ss__bind_known_text(q, 10, p->message);
        ss__bind_opt_int(q, 11, p->marker_ns);
        return ss__store_run(s, q, "writing a profile");
    }
    case IT_STEP:
        return apply_step(s, it->run_id, &it->u.step);
    case IT_VALUES:
        return apply_values(s, it->run_id, &it->u.values);
    case IT_LABELS:
        q = s->st[SS__ST_LABELS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.labels.attempt);
        sqlite3_bind_text(q, 3, it->u.labels.name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 4, it->u.labels.rank);
        sqlite3_bind_text(q, 5, it->u.labels.json, -1, SQLITE_STATIC);
        return ss__store_run(s, q, "writing a vector's labels");
    case IT_FINDING: {
        const ss_finding *f = &it->u.finding.f;
        ss_buf ranks = {0};
        ss_buf_add(&ranks, "[", 1);
        for (uint32_t i = 0; i < f->n_ranks && i < SS_FINDING_MAX_RANKS; i++) {
            if (i)
                ss_buf_add(&ranks, ",", 1);
            ss_buf_json_int(&ranks, f->ranks[i]);
        }
        ss_buf_add(&ranks, "]", 1);
        if (ranks.oom) {
            ss_buf_free(&ranks);
            return -1;
        }
        q = s->st[SS__ST_FINDING];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, f->attempt);
        sqlite3_bind_int64(q, 3, f->id);
        sqlite3_bind_text(q, 4, f->kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 5, f->severity == SS_CRITICAL ? "critical"
                                                           : "warning",
                          -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 6, ranks.data, (int)ranks.len, SQLITE_STATIC);
        ss__bind_known_text(q, 7, f->phase);
        sqlite3_bind_int64(q, 8, (int64_t)f->first_step);
        sqlite3_bind_int64(q, 9, (int64_t)f->last_step);
        sqlite3_bind_text(q, 10, f->evidence_json[0] ? f->evidence_json : "{}",
                          -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 11, f->message, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 12, it->u.finding.at);
        int rc = ss__store_run(s, q, "writing a finding");
        sqlite3_clear_bindings(q);
        ss_buf_free(&ranks);
        return rc;
    }
    case IT_EVENT:
        q = s->st[SS__ST_EVENT];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.event.attempt);
        sqlite3_bind_int64(q, 3, it->u.event.at);
        sqlite3_bind_text(q, 4, it->u.event.kind, -1, SQLITE_STATIC);
        ss__bind_rank(q, 5, it->u.event.rank);
        ss__bind_known_text(q, 6, it->u.event.message);
        return ss__store_run(s, q, "writing an event");
    case IT_STACKS:
        q = s->st[SS__ST_STACKS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.stacks.attempt);
        sqlite3_bind_int64(q, 3, it->u.stacks.taken_at);
        sqlite3_bind_text(q, 4, it->u.stacks.trigger, -1, SQLITE_STATIC);
        if (it->u.stacks.finding_id >= 0)
            sqlite3_bind_int64(q, 5, it->u.stacks.finding_id);
        else
            sqlite3_bind_null(q, 5);
        sqlite3_bind_text(q, 6, it->u.stacks.json, -1, SQLITE_STATIC);
        return ss__store_run(s, q, "writing a stacks snapshot");
    case IT_END_RUN:
        q = s->st[SS__ST_END_RUN];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.end.ended_at);
        sqlite3_bind_int64(q, 3, it->u.end.exit_code);
        sqlite3_bind_text(q, 4, it->u.end.status, -1, SQLITE_STATIC);
        ss__bind_known_int(q, 5, it->u.end.dropped_events);
        ss__bind_known_int(q, 6, it->u.end.dropped_records);
        return ss__store_run(s, q, "ending a run");
    case IT_DROPPED_VECTORS:
        q = s->st[SS__ST_DROPPED_VECTORS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, (int64_t)it->u.dropped_vectors);
        return ss__store_run(s, q, "counting dropped vectors");
    }
    return -1;
}
