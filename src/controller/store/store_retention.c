/*
 * store_retention.c - the writer's state per (run, attempt): rank totals
 * and retention (store_retention.h).
 *
 * Rank-step rows are tiered (docs/store.md): tier A keeps every step of
 * the latest cfg.recent_steps, tier B every cfg.sample_every-th step for
 * good, and the first and last step of every finding are kept too; the
 * rest is pruned after each batch, in the batch's transaction, so a run
 * of any length holds a bounded number of rows.  rank_values has its own
 * window (cfg.values_recent_steps) with the same exceptions.  Each track
 * remembers where it has pruned to, so each batch deletes only what left
 * the window since the last one.  rank_totals are the exact per-rank
 * totals over every step, pruned or not: a batch's rows are summed into
 * per-rank deltas; a committed batch's deltas are owed until a batch adds
 * them (one upsert per rank) to rank_totals, which one does when
 * cfg.totals_interval_ms has passed since the last (0: every batch), or
 * when told to (a flush, the close, a run's end), so that a large world
 * pays its upserts every few seconds, not every batch.  A lost batch forgets only
 * its own deltas.
 */
#include "store_retention.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const rank_delta empty_delta = {0, 0, 0, SS_MISSING, SS_MISSING,
                                       SS_MISSING, SS_MISSING};

/* Forgets T's batch deltas (after they are written, owed or lost). */
static void track_clear(track *t)
{
    t->totals_in_batch = 0;
    if (!t->dirty)
        return;
    for (uint32_t r = 0; r < t->n_ranks; r++)
        t->delta[r] = empty_delta;
    t->dirty = 0;
}

/* Forgets T's owed deltas (after a committed batch wrote them). */
static void track_clear_owed(track *t)
{
    if (!t->owed_dirty)
        return;
    for (uint32_t r = 0; r < t->n_ranks; r++)
        t->owed[r] = empty_delta;
    t->owed_dirty = 0;
}

track *ss__track_get(ss_store *s, int64_t run_id, uint32_t attempt,
                        uint32_t n_ranks)
{
    track *t = NULL;
    for (size_t i = 0; i < s->n_tracks; i++)
        if (s->tracks[i].run_id == run_id && s->tracks[i].attempt == attempt)
            t = &s->tracks[i];
    if (!t) {
        track *n = realloc(s->tracks, (s->n_tracks + 1) * sizeof *n);
        if (!n)
            return NULL;
        s->tracks = n;
        t = &n[s->n_tracks++];
        memset(t, 0, sizeof *t);
        t->run_id = run_id;
        t->attempt = attempt;
        t->max_step = -1;
    }
    if (n_ranks > t->n_ranks) {
        rank_delta *d = realloc(t->delta, n_ranks * sizeof *d);
        if (!d)
            return NULL;
        t->delta = d;
        rank_delta *o = realloc(t->owed, n_ranks * sizeof *o);
        if (!o)
            return NULL;
        t->owed = o;
        for (uint32_t r = t->n_ranks; r < n_ranks; r++)
            d[r] = o[r] = empty_delta;
        t->n_ranks = n_ranks;
    }
    return t;
}

/* The larger of A and B, ignoring SS_MISSING. */
static int64_t max_known(int64_t a, int64_t b)
{
    if (a == SS_MISSING)
        return b;
    if (b == SS_MISSING)
        return a;
    return a > b ? a : b;
}

/* Adds the totals of B to A. */
static void delta_add(rank_delta *a, const rank_delta *b)
{
    a->steps += b->steps;
    a->n_ns += b->n_ns;
    a->sum_ns += b->sum_ns;
    a->max_ns = max_known(a->max_ns, b->max_ns);
    a->max_rss = max_known(a->max_rss, b->max_rss);
    a->max_dev = max_known(a->max_dev, b->max_dev);
    a->last_step = max_known(a->last_step, b->last_step);
}

void ss__track_count_row(track *t, uint32_t rank, int64_t step_ns,
                         int64_t rss, int64_t device, int64_t step)
{
    if (rank >= t->n_ranks)
        return;
    rank_delta *d = &t->delta[rank];
    d->steps++;
    if (step_ns != SS_MISSING) {
        d->n_ns++;
        d->sum_ns += step_ns;
        d->max_ns = max_known(d->max_ns, step_ns);
    }
    d->max_rss = max_known(d->max_rss, rss);
    d->max_dev = max_known(d->max_dev, device);
    d->last_step = max_known(d->last_step, step);
    t->dirty = 1;
}

void ss__tracks_forget_batch(ss_store *s)
{
    for (size_t i = 0; i < s->n_tracks; i++)
        track_clear(&s->tracks[i]);
}

int ss__tracks_committed(ss_store *s)
{
    int owed = 0;
    for (size_t i = 0; i < s->n_tracks; i++) {
        track *t = &s->tracks[i];
        if (t->totals_in_batch) {
            track_clear_owed(t);
        } else if (t->dirty) {
            for (uint32_t r = 0; r < t->n_ranks; r++)
                delta_add(&t->owed[r], &t->delta[r]);
            t->owed_dirty = 1;
        }
        track_clear(t);
        owed |= t->owed_dirty;
    }
    return owed;
}

void ss__tracks_free(ss_store *s)
{
    for (size_t i = 0; i < s->n_tracks; i++) {
        free(s->tracks[i].delta);
        free(s->tracks[i].owed);
        free(s->tracks[i].committed_findings);
    }
    free(s->tracks);
    s->tracks = NULL;
    s->n_tracks = 0;
}

/* Prunes the rows of T that statement WHICH (SS__ST_PRUNE or
 * SS__ST_PRUNE_VALUES) covers and that left the window of T's latest
 * RECENT steps (0: every step stays) since *KEPT_FROM, then moves
 * *KEPT_FROM.  Returns 0 or -1 (reported as WHAT). */
static int prune_window(ss_store *s, const track *t, int which,
                        uint32_t recent, int64_t *kept_from,
                        const char *what)
{
    if (recent == 0 || t->max_step + 1 <= (int64_t)recent)
        return 0;
    int64_t cutoff = t->max_step + 1 - (int64_t)recent;
    if (cutoff <= *kept_from)
        return 0;
    sqlite3_stmt *q = s->st[which];
    sqlite3_bind_int64(q, 1, t->run_id);
    sqlite3_bind_int64(q, 2, t->attempt);
    sqlite3_bind_int64(q, 3, *kept_from);
    sqlite3_bind_int64(q, 4, cutoff);
    sqlite3_bind_int64(q, 5, s->cfg.sample_every);
    if (ss__store_run(s, q, what) != 0)
        return -1;
    *kept_from = cutoff;
    return 0;
}

/* Adds T's owed and batch deltas to rank_totals (forgotten once the batch
 * commits: ss__tracks_committed). */
static int write_totals(ss_store *s, track *t)
{
    if (!t->dirty && !t->owed_dirty)
        return 0;
    sqlite3_stmt *q = s->st[SS__ST_TOTALS];
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        rank_delta sum = t->owed[r], *d = &sum;
        delta_add(d, &t->delta[r]);
        if (!d->steps)
            continue;
        sqlite3_bind_int64(q, 1, t->run_id);
        sqlite3_bind_int64(q, 2, t->attempt);
        sqlite3_bind_int64(q, 3, r);
        sqlite3_bind_int64(q, 4, d->steps);
        sqlite3_bind_int64(q, 5, d->n_ns);
        sqlite3_bind_int64(q, 6, d->sum_ns);
        ss__bind_opt_int(q, 7, d->max_ns);
        ss__bind_opt_int(q, 8, d->max_rss);
        ss__bind_opt_int(q, 9, d->max_dev);
        ss__bind_opt_int(q, 10, d->last_step);
        if (ss__store_run(s, q, "writing rank totals") != 0)
            return -1;
    }
    t->totals_in_batch = 1;
    return 0;
}

/* Adds the vectors refused at the queue since the last batch to their
 * run's dropped_vectors. */
static int save_dropped_vectors(ss_store *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t run = s->dropped_vectors_run;
    uint64_t dropped = s->dropped_vectors_unsaved;
    s->dropped_vectors_unsaved = 0;
    pthread_mutex_unlock(&s->mu);
    if (!dropped)
        return 0;
    sqlite3_stmt *q = s->st[SS__ST_DROPPED_VECTORS];
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_int64(q, 2, (int64_t)dropped);
    return ss__store_run(s, q, "counting dropped vectors");
}

int ss__retention_finish(ss_store *s, int totals)
{
    for (size_t i = 0; i < s->n_tracks; i++) {
        track *t = &s->tracks[i];
        if ((totals && write_totals(s, t) != 0) ||
            prune_window(s, t, SS__ST_PRUNE, s->cfg.recent_steps,
                         &t->kept_from, "pruning rank steps") != 0)
            return -1;
    }
    if (save_dropped_vectors(s) != 0)
        return -1;
    for (size_t i = 0; i < s->n_tracks; i++) {
        track *t = &s->tracks[i];
        if (prune_window(s, t, SS__ST_PRUNE_VALUES, s->cfg.values_recent_steps,
                         &t->values_kept_from, "pruning vectors") != 0)
            return -1;
    }
    return 0;
}
