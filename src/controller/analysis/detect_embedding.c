/*
 * detect_embedding.c - the sharded-embedding detector: a table sharded
 * by rows whose lookups fall on one shard more than the others
 * (embedding_imbalance), joined with the lateness of the rank serving it,
 * and the load that explains a straggler serving a hot shard.
 *
 * Ranks send per step emb.load.TABLE, the lookups their batch made in
 * each shard (python/stepscope/_workloads.py); shard i is served by rank
 * i.  A shard's load in a step is the sum over the ranks
 * (detect_workload.c).  Per table, over the window of the last EMB_WINDOW
 * steps it was sent in: max / mean of the load per shard, the total
 * variation distance of the shards' shares from the uniform 1/n
 * (half the sum of |share - 1/n|: the fraction of the lookups that would
 * have to move for an even split), and Pearson's chi-square statistic of
 * the loads against an even split with its p-value (n - 1 degrees of
 * freedom).  The hot shard is the one with the most lookups.
 *
 * A table is unbalanced once the window holds EMB_MIN_STEPS steps, its
 * max / mean is at least EMB_MAX_MEAN and the chi-square test rejects an
 * even split at EMB_ALPHA.  One finding per episode (until max / mean
 * falls under 1 + EMB_END_FRAC x (EMB_MAX_MEAN - 1)), refreshed every
 * step, naming the table, the hot shard's rank and the share it served,
 * and that rank's lateness phase by phase (ss__late_join).
 * docs/workloads.md states the rules.
 *
 * For the straggler detector, ss__embedding_explain: a straggler that
 * served at least EMB_EXPLAIN times the mean shard's lookups in the median
 * of its late steps is explained by its shard.
 */
#include "detect_workload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EMB_WINDOW 20
#define EMB_MIN_STEPS 8
#define EMB_MAX_MEAN 1.5
#define EMB_ALPHA 1e-6
#define EMB_END_FRAC 0.8
#define EMB_EXPLAIN 1.25

typedef struct {
    ss__wl w;
} embedding;

static void *emb_create(ss_detectors *d)
{
    embedding *e = ss__zalloc(1, sizeof *e);
    if (!e)
        return NULL;
    if (ss__wl_init(&e->w, d->world, EMB_WINDOW, "emb.load.", NULL) < 0) {
        free(e);
        return NULL;
    }
    return e;
}

static void emb_destroy(void *state)
{
    embedding *e = state;
    ss__wl_free(&e->w);
    free(e);
}

static void emb_names(void *state, ss_detectors *d, uint32_t n_names,
                      const char *const *names)
{
    (void)d;
    ss__wl_names(&((embedding *)state)->w, n_names, names);
}

/* The window's statistics of one table. */
typedef struct {
    double total, mean, max_mean, tvd, chi2, p, share;
    uint32_t hot;
} table_stats;

static void table_window(const ss__wl_key *k, table_stats *s)
{
    memset(s, 0, sizeof *s);
    uint32_t n = k->n;
    for (uint32_t i = 0; i < n; i++) {
        s->total += k->sum[i];
        if (k->sum[i] > k->sum[s->hot])
            s->hot = i;
    }
    if (!n || s->total <= 0)
        return;
    s->mean = s->total / n;
    s->max_mean = k->sum[s->hot] / s->mean;
    s->share = k->sum[s->hot] / s->total;
    for (uint32_t i = 0; i < n; i++) {
        double dx = k->sum[i] - s->mean;
        s->chi2 += dx * dx / s->mean;
        s->tvd += fabs(k->sum[i] / s->total - 1.0 / n);
    }
    s->tvd /= 2;
    s->p = n > 1 ? ss__chi2_upper(s->chi2, n - 1) : 1;
}

static void describe(ss_detectors *d, ss__wl *w, ss__wl_key *k,
                     const table_stats *s, const ss_step_view *v)
{
    ss_finding *f = ss__finding(d, k->finding);
    int32_t rank = ss__wl_host(w, k, s->hot);
    char late[160] = "", on[32] = "", p[32];
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "table", k->label);
    ss__evidence_int(ev, "shards", k->n);
    ss__evidence_int(ev, "window", k->fill);
    ss__evidence_int(ev, "hot_shard", s->hot);
    ss__evidence_num(ev, "share_pct", round(s->share * 1000) / 10);
    ss__evidence_num(ev, "max_mean", round(s->max_mean * 100) / 100);
    ss__evidence_num(ev, "tvd", round(s->tvd * 1000) / 1000);
    ss__evidence_num(ev, "chi2", round(s->chi2));
    ss__evidence_num(ev, "p_log10",
                     s->p > 0 ? round(log10(s->p) * 10) / 10 : -300);
    ss__evidence_num(ev, "lookups_per_step", round(s->total / k->fill));
    ss__evidence_int(ev, "steps_over", k->steps_over);
    if (rank >= 0) {
        ss__evidence_int(ev, "rank", rank);
        snprintf(on, sizeof on, " (rank %d)", rank);
        ss__late_join_words(d, &k->join, (uint32_t)rank,
                            v->step_time.n ? (double)v->step_time.median / 1e6
                                           : 0,
                            ev, late, sizeof late);
    }
    ss__evidence_end(ev, f);
    if (rank >= 0)
        ss__set_ranks(f, &rank, 1);
    f->last_step = k->last;
    if (s->p > 0)
        snprintf(p, sizeof p, "p %.1g", s->p);
    else
        snprintf(p, sizeof p, "p < 1e-300");
    snprintf(f->message, sizeof f->message,
             "table %s: its shards are unbalanced: over the last %u steps shard "
             "%u%s served %.1f %% of the lookups, %.2f× the mean shard's "
             "(%.1f %% each if even; total variation from uniform %.2f, "
             "chi-square %.3g with %u degrees of freedom, %s)%s.",
             k->label, k->fill, s->hot, on, s->share * 100, s->max_mean,
             100.0 / k->n, s->tvd, s->chi2, k->n - 1, p, late);
    ss__finding_touch(d, k->finding);
}

static void judge(ss_detectors *d, ss__wl *w, ss__wl_key *k,
                  const ss_step_view *v, uint32_t world)
{
    if (k->fill < EMB_MIN_STEPS || k->n < 2)
        return;
    table_stats s;
    table_window(k, &s);
    if (s.mean <= 0)
        return;
    int over = s.max_mean >= EMB_MAX_MEAN && s.p < EMB_ALPHA;
    if (k->finding < 0) {
        if (!over)
            return;
        int32_t idx = ss__finding_open(d, "embedding_imbalance");
        if (idx < 0)
            return;
        k->finding = idx;
        k->first = v->step;
        k->steps_over = 0;
        k->join_rank = -1;
        ss__finding(d, idx)->first_step = v->step;
    } else if (s.max_mean < 1 + EMB_END_FRAC * (EMB_MAX_MEAN - 1)) {
        k->finding = -1; /* the episode ended */
        return;
    }
    if (!over)
        return; /* fading: the finding keeps the episode's words */
    k->steps_over++;
    k->last = v->step;
    int32_t rank = ss__wl_host(w, k, s.hot);
    if (rank >= 0) {
        if (k->join_rank != rank) {
            memset(&k->join, 0, sizeof k->join);
            k->join_rank = rank;
        }
        ss__late_join_add(&k->join, v, world, (uint32_t)rank, w->scratch);
    }
    describe(d, w, k, &s, v);
}

static void emb_step(void *state, ss_detectors *d, const ss_step_view *v,
                     uint32_t world)
{
    ss__wl *w = &((embedding *)state)->w;
    ss__wl_step(w, v, world);
    for (uint32_t k = 0; k < w->n_keys; k++)
        if (w->keys[k].touched)
            judge(d, w, &w->keys[k], v, world);
}

const ss__detector ss__embedding_detector = {
    .name = "embedding",
    .create = emb_create,
    .on_names = emb_names,
    .on_step = emb_step,
    .destroy = emb_destroy,
};

const char *ss__embedding_explain(const ss_detectors *d, uint32_t r,
                                  uint64_t first, uint64_t last, char *buf,
                                  size_t len)
{
    buf[0] = '\0';
    embedding *e = ss__detector_state(d, &ss__embedding_detector);
    if (!e)
        return buf;
    int key;
    double ratio = ss__wl_rank_ratio(&e->w, r, first, last, &key);
    if (ratio < EMB_EXPLAIN || key < 0 || (uint32_t)key >= e->w.n_keys)
        return buf;
    snprintf(buf, len, "; it is late because it serves shard %u of table "
             "%s, which received %.1f× the mean shard's lookups", r,
             e->w.keys[key].label, ratio);
    return buf;
}
