/*
 * detect_moe.c - the mixture-of-experts detector: a layer whose router
 * sends too many tokens to a few experts (expert_imbalance), and the load
 * that explains a straggler hosting them.
 *
 * Ranks send per step moe.load.LAYER, the tokens their router sent to
 * each global expert, and once moe.placement.LAYER, the rank hosting each
 * expert (python/stepscope/_workloads.py; detect_workload.c sums and
 * windows them).  An expert's load in a step is the sum over the ranks.
 * Per layer, over the window of the last MOE_WINDOW steps it was sent in:
 *
 *   MaxVio = (max - mean) / mean of the load per expert (Wang et al.,
 *            "Auxiliary-loss-free load balancing strategy for mixture-of-
 *            experts", 2024), the coefficient of variation (standard
 *            deviation / mean), the experts that received nothing (dead),
 *            and with a placement the tokens each expert-parallel rank
 *            received (what the experts it hosts received).
 *
 * A layer is unbalanced once the window holds MOE_MIN_STEPS steps and
 * either its MaxVio is at least MOE_MAXVIO and a chi-square test of the
 * window's loads against an even split rejects it at MOE_ALPHA (so that a
 * handful of tokens cannot look unbalanced), or some expert received no
 * token while an even split would have given each at least MOE_DEAD_MIN.
 * One finding per episode (until the MaxVio falls under MOE_END_FRAC of
 * the threshold with no dead expert), refreshed every step: the hot
 * experts (those at least 1 + MOE_MAXVIO times the mean), the MaxVio and
 * CV, the dead experts, the rank hosting the most tokens with its ratio to
 * the mean hosting rank, and that rank's lateness phase by phase
 * (ss__late_join).  docs/workloads.md states the rules.
 *
 * For the straggler detector, ss__moe_explain: a straggler whose load
 * (the tokens its experts received, over the mean hosting rank's) was at
 * least MOE_EXPLAIN in the median of its late steps is explained by the
 * experts it hosts.
 */
#include "detect_workload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

#define MOE_WINDOW 20
#define MOE_MIN_STEPS 8
#define MOE_MAXVIO 0.5
#define MOE_ALPHA 1e-6
#define MOE_DEAD_MIN 20.0
#define MOE_END_FRAC 0.8
#define MOE_EXPLAIN 1.25
#define MAX_NAMED 6 /* experts named in a message */

typedef struct {
    ss__wl w;
} moe;

static void *moe_create(ss_detectors *d)
{
    moe *m = ss__zalloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (ss__wl_init(&m->w, d->world, MOE_WINDOW, "moe.load.",
                    "moe.placement.") < 0) {
        free(m);
        return NULL;
    }
    return m;
}

static void moe_destroy(void *state)
{
    moe *m = state;
    ss__wl_free(&m->w);
    free(m);
}

static void moe_names(void *state, ss_detectors *d, uint32_t n_names,
                      const char *const *names)
{
    (void)d;
    ss__wl_names(&((moe *)state)->w, n_names, names);
}

/* The window's statistics of one layer. */
typedef struct {
    double total, mean, max, maxvio, cv, chi2, p;
    uint32_t dead;
    uint32_t hot[MAX_NAMED], n_hot, n_hot_all;
    int32_t rank;       /* the hosting rank with the most tokens, -1 */
    double rank_ratio;  /* its tokens over the mean hosting rank's */
    double step_maxvio; /* the median of the window's per-step MaxVio */
} layer_stats;

static void layer_window(ss__wl *w, const ss__wl_key *k, layer_stats *s)
{
    memset(s, 0, sizeof *s);
    s->rank = -1;
    uint32_t n = k->n;
    for (uint32_t i = 0; i < n; i++) {
        s->total += k->sum[i];
        if (k->sum[i] > s->max)
            s->max = k->sum[i];
    }
    if (!n || s->total <= 0)
        return;
    s->mean = s->total / n;
    s->maxvio = (s->max - s->mean) / s->mean;
    double var = 0;
    for (uint32_t i = 0; i < n; i++) {
        double dx = k->sum[i] - s->mean;
        var += dx * dx;
        s->dead += k->sum[i] == 0;
    }
    s->chi2 = var / s->mean;
    s->p = n > 1 ? ss__chi2_upper(s->chi2, n - 1) : 1;
    s->cv = sqrt(var / n) / s->mean;
    /* hot experts, hottest first */
    for (;;) {
        int best = -1;
        for (uint32_t i = 0; i < n; i++) {
            if (k->sum[i] < (1 + MOE_MAXVIO) * s->mean)
                continue;
            int taken = 0;
            for (uint32_t j = 0; j < s->n_hot && !taken; j++)
                taken = s->hot[j] == i;
            if (!taken && (best < 0 || k->sum[i] > k->sum[best]))
                best = (int)i;
        }
        if (best < 0 || s->n_hot == MAX_NAMED)
            break;
        s->hot[s->n_hot++] = (uint32_t)best;
    }
    for (uint32_t i = 0; i < n; i++)
        s->n_hot_all += k->sum[i] >= (1 + MOE_MAXVIO) * s->mean;
    double *per = w->scratch;
    uint32_t hosting = ss__wl_rank_load(w, k, per);
    if (hosting) {
        double tot = 0;
        for (uint32_t q = 0; q < w->world; q++) {
            tot += per[q];
            if (s->rank < 0 || per[q] > per[s->rank])
                s->rank = (int32_t)q;
        }
        s->rank_ratio = tot > 0 ? per[s->rank] / (tot / hosting) : 0;
        if (tot <= 0)
            s->rank = -1;
    }
    /* the per-step MaxVio, median over the window */
    double vio[MOE_WINDOW];
    uint32_t m = 0;
    for (uint32_t j = 0; j < k->fill; j++) {
        const float *row = k->ring + (size_t)j * SS_WL_MAX_ITEMS;
        double t = 0, mx = 0;
        for (uint32_t i = 0; i < n; i++) {
            t += row[i];
            if (row[i] > mx)
                mx = row[i];
        }
        if (t > 0)
            vio[m++] = (mx - t / n) / (t / n);
    }
    s->step_maxvio = m ? ss_median_f64(vio, m) : NAN;
}

/* "6 and 7", "1, 4 and 9", with " (and N more)" when cut. */
static void list_items(char *buf, size_t len, const uint32_t *items,
                       uint32_t n, uint32_t total)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t j = 0; j < n && at < len; j++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u",
                               j == 0 ? "" : j + 1 == n ? " and " : ", ",
                               items[j]);
    if (total > n && at < len)
        snprintf(buf + at, len - at, " (and %u more)", total - n);
}

static void describe(ss_detectors *d, ss__wl *w, ss__wl_key *k,
                     const layer_stats *s, const ss_step_view *v)
{
    ss_finding *f = ss__finding(d, k->finding);
    char hot[96], ratios[96] = "", dead[96] = "", host[160] = "";
    char late[160] = "", list[96];
    list_items(hot, sizeof hot, s->hot, s->n_hot, s->n_hot_all);
    size_t at = 0;
    for (uint32_t j = 0; j < s->n_hot && at < sizeof ratios; j++)
        at += (size_t)snprintf(ratios + at, sizeof ratios - at, "%s%.1f×",
                               j == 0 ? "" : j + 1 == s->n_hot ? " and " : ", ",
                               k->sum[s->hot[j]] / s->mean);
    if (s->dead) {
        uint32_t ids[MAX_NAMED], nd = 0;
        for (uint32_t i = 0; i < k->n && nd < MAX_NAMED; i++)
            if (k->sum[i] == 0)
                ids[nd++] = i;
        list_items(list, sizeof list, ids, nd, s->dead);
        snprintf(dead, sizeof dead, "; expert%s %s received no token",
                 s->dead > 1 ? "s" : "", list);
    }
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "layer", k->label);
    ss__evidence_int(ev, "experts", k->n);
    ss__evidence_int(ev, "window", k->fill);
    char ids[96] = "";
    at = 0;
    for (uint32_t j = 0; j < s->n_hot && at < sizeof ids; j++)
        at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%u",
                               j ? "," : "", s->hot[j]);
    ss__evidence_str(ev, "hot_experts", ids);
    ss__evidence_num(ev, "maxvio", round(s->maxvio * 1000) / 1000);
    ss__evidence_num(ev, "maxvio_step_median",
                     round(s->step_maxvio * 1000) / 1000);
    ss__evidence_num(ev, "worst_maxvio", round(k->worst * 1000) / 1000);
    ss__evidence_num(ev, "cv", round(s->cv * 1000) / 1000);
    ss__evidence_int(ev, "dead_experts", s->dead);
    ss__evidence_num(ev, "tokens_per_step", round(s->total / k->fill));
    ss__evidence_int(ev, "steps_over", k->steps_over);
    /* the ranks named: the hosts of the hot experts, hottest first, else
     * those of the dead ones */
    int32_t ranks[MAX_LISTED];
    uint32_t n_ranks = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        uint32_t e = i < s->n_hot ? s->hot[i] : i;
        if (s->n_hot ? i >= s->n_hot : k->sum[e] != 0)
            continue;
        int32_t q = ss__wl_host(w, k, e);
        int dup = q < 0;
        for (uint32_t x = 0; x < n_ranks && !dup; x++)
            dup = ranks[x] == q;
        if (!dup && n_ranks < MAX_LISTED)
            ranks[n_ranks++] = q;
    }
    /* the tokens each expert-parallel rank received, per step */
    if (s->rank >= 0 && w->world <= MAX_LISTED) {
        double *per = w->scratch;
        ss__wl_rank_load(w, k, per);
        char tok[MAX_LISTED * 12] = "";
        size_t tat = 0;
        for (uint32_t q = 0; q < w->world && tat < sizeof tok; q++)
            tat += (size_t)snprintf(tok + tat, sizeof tok - tat, "%s%.0f",
                                    q ? "," : "", per[q] / k->fill);
        ss__evidence_str(ev, "rank_tokens_per_step", tok);
    }
    if (s->rank >= 0 && s->rank_ratio >= MOE_EXPLAIN) {
        ss__evidence_int(ev, "rank", s->rank);
        ss__evidence_num(ev, "rank_load_ratio",
                         round(s->rank_ratio * 100) / 100);
        uint32_t mine[MAX_NAMED], nm = 0, all = 0;
        for (uint32_t j = 0; j < s->n_hot; j++)
            if (ss__wl_host(w, k, s->hot[j]) == s->rank)
                mine[nm++] = s->hot[j];
        for (uint32_t i = 0; i < k->n; i++)
            all += ss__wl_host(w, k, i) == s->rank &&
                   k->sum[i] >= (1 + MOE_MAXVIO) * s->mean;
        if (nm) {
            list_items(list, sizeof list, mine, nm, all);
            snprintf(host, sizeof host, "; rank %d hosts expert%s %s and "
                     "received %.1f× the mean rank's tokens", s->rank,
                     all > 1 ? "s" : "", list, s->rank_ratio);
        } else {
            snprintf(host, sizeof host, "; rank %d received the most "
                     "tokens, %.1f× the mean rank's", s->rank,
                     s->rank_ratio);
        }
        ss__late_join_words(d, &k->join, (uint32_t)s->rank,
                            v->step_time.n ? (double)v->step_time.median / 1e6
                                           : 0,
                            ev, late, sizeof late);
    }
    ss__evidence_end(ev, f);
    ss__set_ranks(f, ranks, n_ranks);
    if (s->n_hot)
        snprintf(f->message, sizeof f->message,
                 "layer %s's experts are unbalanced: over the last %u steps "
                 "expert%s %s received %s the mean expert's tokens (MaxVio "
                 "%.2f, coefficient of variation %.2f)%s%s%s.",
                 k->label, k->fill, s->n_hot > 1 ? "s" : "", hot, ratios,
                 s->maxvio, s->cv, dead, host, late);
    else
        snprintf(f->message, sizeof f->message,
                 "layer %s's experts are unbalanced: over the last %u steps "
                 "(MaxVio %.2f, coefficient of variation %.2f)%s%s%s.",
                 k->label, k->fill, s->maxvio, s->cv, dead, host, late);
    ss__finding_touch(d, k->finding);
}

static void judge(ss_detectors *d, ss__wl *w, ss__wl_key *k,
                  const ss_step_view *v, uint32_t world)
{
    if (k->fill < MOE_MIN_STEPS)
        return;
    layer_stats s;
    layer_window(w, k, &s);
    if (s.mean <= 0)
        return;
    int unbalanced = s.maxvio >= MOE_MAXVIO && s.p < MOE_ALPHA;
    int dead = s.dead && s.mean >= MOE_DEAD_MIN;
    if (k->finding < 0) {
        if (!unbalanced && !dead)
            return;
        int32_t idx = ss__finding_open(d, "expert_imbalance");
        if (idx < 0)
            return;
        k->finding = idx;
        k->first = v->step;
        k->steps_over = 0;
        k->worst = 0;
        k->join_rank = -1;
        ss__finding(d, idx)->first_step = v->step;
    } else if (!dead && s.maxvio < MOE_END_FRAC * MOE_MAXVIO) {
        k->finding = -1; /* the episode ended */
        return;
    }
    if (!unbalanced && !dead)
        return; /* fading: the finding keeps the episode's words */
    k->steps_over++;
    k->last = v->step;
    ss__finding(d, k->finding)->last_step = v->step;
    /* the words follow the episode at its height, not its fading end */
    int at_height = s.maxvio >= 0.9 * k->worst || dead;
    if (s.maxvio > k->worst)
        k->worst = s.maxvio;
    if (s.rank >= 0) {
        if (k->join_rank != s.rank) {
            memset(&k->join, 0, sizeof k->join);
            k->join_rank = s.rank;
        }
        ss__late_join_add(&k->join, v, world, (uint32_t)s.rank, w->scratch);
    }
    if (at_height)
        describe(d, w, k, &s, v);
    else
        ss__finding_touch(d, k->finding); /* its last step moved */
}

static void moe_step(void *state, ss_detectors *d, const ss_step_view *v,
                     uint32_t world)
{
    ss__wl *w = &((moe *)state)->w;
    ss__wl_step(w, v, world);
    for (uint32_t k = 0; k < w->n_keys; k++)
        if (w->keys[k].touched)
            judge(d, w, &w->keys[k], v, world);
}

const ss__detector ss__moe_detector = {
    .name = "moe",
    .create = moe_create,
    .on_names = moe_names,
    .on_step = moe_step,
    .destroy = moe_destroy,
    .warmup_too = 1, /* a placement comes with the first steps */
};

const char *ss__moe_explain(const ss_detectors *d, uint32_t r, uint64_t first,
                            uint64_t last, char *buf, size_t len)
{
    buf[0] = '\0';
    moe *m = ss__detector_state(d, &ss__moe_detector);
    if (!m)
        return buf;
    ss__wl *w = &m->w;
    int key;
    double ratio = ss__wl_rank_ratio(w, r, first, last, &key);
    if (ratio < MOE_EXPLAIN || key < 0 || (uint32_t)key >= w->n_keys)
        return buf;
    const ss__wl_key *k = &w->keys[key];
    /* the experts it hosts, most loaded first, those above the mean */
    double total = 0;
    for (uint32_t i = 0; i < k->n; i++)
        total += k->sum[i];
    double mean = k->n ? total / k->n : 0;
    uint32_t ids[MAX_NAMED], n = 0, all = 0;
    for (uint32_t i = 0; i < k->n; i++)
        all += ss__wl_host(w, k, i) == (int32_t)r && k->sum[i] > mean;
    while (n < MAX_NAMED) {
        int best = -1;
        for (uint32_t i = 0; i < k->n; i++) {
            if (ss__wl_host(w, k, i) != (int32_t)r || k->sum[i] <= mean)
                continue;
            int taken = 0;
            for (uint32_t j = 0; j < n && !taken; j++)
                taken = ids[j] == i;
            if (!taken && (best < 0 || k->sum[i] > k->sum[best]))
                best = (int)i;
        }
        if (best < 0)
            break;
        ids[n++] = (uint32_t)best;
    }
    if (!n)
        return buf;
    char list[96];
    list_items(list, sizeof list, ids, n, all);
    snprintf(buf, len, "; it is late because it hosts expert%s %s, which "
             "received %.1f× the mean rank's load in layer %s",
             all > 1 ? "s" : "", list, ratio, k->label);
    return buf;
}
