/*
 * detect_workload.c - the load of mixture-of-experts layers and sharded
 * embedding tables, summed over the ranks and windowed, for detect_moe.c
 * and detect_embedding.c; and the one question the straggler detector
 * asks them (ss__workload_explain).
 *
 * Each rank sends per step one vector per layer or table: what its router
 * sent to each expert, or what its batch looked up in each shard.  An
 * item's load in a step is the sum over the ranks; the window keeps the
 * last WIN steps of it per item and their sum.  With the items' hosts (a
 * layer's placement, or shard i on rank i) each rank's load is what the
 * items it hosts received, and its ratio to the mean hosting rank's is
 * kept per step for SS_WL_RANK_RING steps, so that a straggler's late
 * steps can be compared with the load its rank carried in them.
 * Everything is bounded: SS_WL_MAX_KEYS keys, SS_WL_MAX_ITEMS items each;
 * more are counted in dropped and ignored.
 */
#include "detect_workload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

int ss__wl_init(ss__wl *w, uint32_t world, uint32_t win,
                const char *load_prefix, const char *place_prefix)
{
    memset(w, 0, sizeof *w);
    w->world = world;
    w->win = win < 1 ? 1 : win;
    w->load_prefix = load_prefix;
    w->place_prefix = place_prefix;
    w->rratio = ss__zalloc((size_t)SS_WL_RANK_RING * world, sizeof(float));
    w->rkey = ss__zalloc((size_t)SS_WL_RANK_RING * world, 1);
    w->mark = ss__zalloc(world, 1);
    w->scratch = ss__zalloc(world > SS_WL_MAX_ITEMS ? world : SS_WL_MAX_ITEMS,
                            sizeof(double));
    if (!w->rratio || !w->rkey || !w->mark || !w->scratch) {
        ss__wl_free(w);
        return -1;
    }
    return 0;
}

void ss__wl_free(ss__wl *w)
{
    if (w->keys)
        for (uint32_t k = 0; k < w->n_keys; k++) {
            free(w->keys[k].ring);
            free(w->keys[k].sum);
            free(w->keys[k].now);
            free(w->keys[k].host);
        }
    free(w->keys);
    free(w->rratio);
    free(w->rkey);
    free(w->mark);
    free(w->scratch);
    memset(w, 0, sizeof *w);
}

/* The key labelled LABEL, added when new; -1 when full or out of
 * memory. */
static int key_of(ss__wl *w, const char *label)
{
    for (uint32_t k = 0; k < w->n_keys; k++)
        if (strcmp(w->keys[k].label, label) == 0)
            return (int)k;
    if (!w->keys && !(w->keys = ss__zalloc(SS_WL_MAX_KEYS, sizeof *w->keys)))
        return -1;
    if (w->n_keys >= SS_WL_MAX_KEYS) {
        w->dropped++;
        return -1;
    }
    ss__wl_key *k = &w->keys[w->n_keys];
    memset(k, 0, sizeof *k);
    k->ring = ss__zalloc((size_t)w->win * SS_WL_MAX_ITEMS, sizeof(float));
    k->sum = ss__zalloc(SS_WL_MAX_ITEMS, sizeof(double));
    k->now = ss__zalloc(SS_WL_MAX_ITEMS, sizeof(double));
    k->host = ss__zalloc(SS_WL_MAX_ITEMS, sizeof(int32_t));
    if (!k->ring || !k->sum || !k->now || !k->host) {
        free(k->ring);
        free(k->sum);
        free(k->now);
        free(k->host);
        return -1;
    }
    for (uint32_t i = 0; i < SS_WL_MAX_ITEMS; i++)
        k->host[i] = -1;
    snprintf(k->label, sizeof k->label, "%s", label);
    k->finding = -1;
    k->join_rank = -1;
    return (int)w->n_keys++;
}

void ss__wl_names(ss__wl *w, uint32_t n_names, const char *const *names)
{
    size_t nl = strlen(w->load_prefix);
    size_t np = w->place_prefix ? strlen(w->place_prefix) : 0;
    for (uint32_t i = w->n_names_seen; i < n_names && i < SS_MAX_RUN_NAMES;
         i++) {
        const char *s = names[i];
        if (!s)
            continue;
        int k;
        if (strncmp(s, w->load_prefix, nl) == 0 && s[nl]) {
            if ((k = key_of(w, s + nl)) >= 0)
                w->by_name[i] = (int16_t)(k + 1);
        } else if (np && strncmp(s, w->place_prefix, np) == 0 && s[np]) {
            if ((k = key_of(w, s + np)) >= 0)
                w->by_name[i] = (int16_t)-(k + 1);
        }
    }
    if (n_names > w->n_names_seen)
        w->n_names_seen = n_names > SS_MAX_RUN_NAMES ? SS_MAX_RUN_NAMES
                                                     : n_names;
}

int32_t ss__wl_host(const ss__wl *w, const ss__wl_key *k, uint32_t i)
{
    if (!w->place_prefix)
        return i < w->world ? (int32_t)i : -1;
    return i < SS_WL_MAX_ITEMS ? k->host[i] : -1;
}

/* Takes placement vector IT of key K. */
static void take_placement(ss__wl *w, ss__wl_key *k, const ss_values_item *it)
{
    k->n_host = 0;
    for (uint32_t i = 0; i < SS_WL_MAX_ITEMS; i++) {
        double r = i < it->n ? it->v[i] : -1;
        k->host[i] = isfinite(r) && r >= 0 && r < w->world && r == floor(r)
                         ? (int32_t)r
                         : -1;
        k->n_host += k->host[i] >= 0;
    }
}

/* Each rank's share of LOAD (K's items) into OUT; returns the number of
 * ranks hosting an item, whatever its load. */
static uint32_t rank_load_of(ss__wl *w, const ss__wl_key *k,
                             const double *load, double *out)
{
    memset(out, 0, w->world * sizeof *out);
    memset(w->mark, 0, w->world);
    uint32_t hosting = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        int32_t r = ss__wl_host(w, k, i);
        if (r < 0)
            continue;
        out[r] += load[i];
        if (!w->mark[r]) {
            w->mark[r] = 1;
            hosting++;
        }
    }
    return hosting;
}

uint32_t ss__wl_rank_load(ss__wl *w, const ss__wl_key *k, double *out)
{
    return rank_load_of(w, k, k->sum, out);
}

void ss__wl_step(ss__wl *w, const ss_step_view *v, uint32_t world)
{
    if (!w->n_keys)
        return;
    for (uint32_t k = 0; k < w->n_keys; k++) {
        w->keys[k].touched = 0;
        memset(w->keys[k].now, 0, SS_WL_MAX_ITEMS * sizeof(double));
    }
    for (uint32_t r = 0; r < world && r < w->world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        for (uint32_t j = 0; j < rs->n_values; j++) {
            const ss_values_item *it = &rs->values[j];
            if (it->name < 0 || it->name >= SS_MAX_RUN_NAMES ||
                !w->by_name[it->name])
                continue;
            int code = w->by_name[it->name];
            ss__wl_key *k = &w->keys[(code > 0 ? code : -code) - 1];
            if (code < 0) {
                take_placement(w, k, it);
                continue;
            }
            uint32_t n = it->n;
            if (n + it->truncated > SS_WL_MAX_ITEMS)
                w->dropped++;
            if (n > SS_WL_MAX_ITEMS)
                n = SS_WL_MAX_ITEMS;
            for (uint32_t i = 0; i < n; i++) {
                double x = it->v[i];
                if (isfinite(x) && x > 0)
                    k->now[i] += x;
            }
            if (n > k->n)
                k->n = n;
            k->touched = 1;
        }
    }
    /* the per-rank ring: this step's largest ratio over the keys */
    uint32_t slot = w->rhead;
    w->rstep[slot] = v->step;
    float *ratio = w->rratio + (size_t)slot * w->world;
    uint8_t *rkey = w->rkey + (size_t)slot * w->world;
    memset(ratio, 0, w->world * sizeof *ratio);
    memset(rkey, 0, w->world);
    int any = 0;
    for (uint32_t kk = 0; kk < w->n_keys; kk++) {
        ss__wl_key *k = &w->keys[kk];
        if (!k->touched)
            continue;
        float *row = k->ring + (size_t)k->head * SS_WL_MAX_ITEMS;
        for (uint32_t i = 0; i < SS_WL_MAX_ITEMS; i++) {
            if (k->fill == w->win)
                k->sum[i] -= row[i];
            row[i] = (float)k->now[i];
            k->sum[i] += row[i];
            if (k->sum[i] < 0.5) /* float rounding left over */
                k->sum[i] = 0;
        }
        k->head = (k->head + 1) % w->win;
        if (k->fill < w->win)
            k->fill++;
        double *per = w->scratch; /* world entries */
        uint32_t hosting = rank_load_of(w, k, k->now, per);
        double total = 0;
        for (uint32_t q = 0; q < w->world; q++)
            total += per[q];
        if (!hosting || total <= 0)
            continue;
        double mean = total / hosting;
        for (uint32_t q = 0; q < w->world; q++) {
            float x = (float)(per[q] / mean);
            if (x > ratio[q]) {
                ratio[q] = x;
                rkey[q] = (uint8_t)kk;
                any = 1;
            }
        }
    }
    if (any) {
        w->rhead = (w->rhead + 1) % SS_WL_RANK_RING;
        if (w->rfill < SS_WL_RANK_RING)
            w->rfill++;
    }
}

double ss__wl_rank_ratio(const ss__wl *w, uint32_t r, uint64_t first,
                         uint64_t last, int *key)
{
    *key = -1;
    if (!w->rratio || r >= w->world || !w->rfill)
        return 0;
    double vals[SS_WL_RANK_RING];
    uint32_t votes[SS_WL_MAX_KEYS] = {0};
    uint32_t n = 0;
    for (uint32_t i = 0; i < w->rfill; i++) {
        uint32_t s = ss__ring_back(w->rhead, SS_WL_RANK_RING, i);
        if (w->rstep[s] < first || w->rstep[s] > last)
            continue;
        size_t at = (size_t)s * w->world + r;
        vals[n++] = w->rratio[at];
        if (w->rkey[at] < SS_WL_MAX_KEYS)
            votes[w->rkey[at]]++;
    }
    if (!n)
        return 0;
    uint32_t best = 0;
    for (int k = 0; k < SS_WL_MAX_KEYS; k++)
        if (votes[k] > best) {
            best = votes[k];
            *key = k;
        }
    return ss_median_f64(vals, n);
}

void ss__late_join_add(ss__late_join *j, const ss_step_view *v,
                       uint32_t world, uint32_t r, double *scratch)
{
    if (r >= world || !v->ranks[r].present)
        return;
    uint32_t n_names = v->n_names < SS_MAX_RUN_NAMES ? v->n_names
                                                     : SS_MAX_RUN_NAMES;
    for (uint32_t p = 0; p < n_names; p++) {
        uint32_t m = 0;
        int64_t mine = SS_MISSING;
        for (uint32_t q = 0; q < world; q++) {
            const ss_rank_step *rs = &v->ranks[q];
            if (!rs->present || !rs->phase_ns)
                continue;
            int64_t x = rs->phase_self_ns && rs->phase_self_ns[p] != SS_MISSING
                            ? rs->phase_self_ns[p]
                            : rs->phase_ns[p];
            if (x == SS_MISSING)
                continue;
            scratch[m++] = (double)x;
            if (q == r)
                mine = x;
        }
        if (mine == SS_MISSING || m < 2)
            continue;
        j->excess_ms[p] += ((double)mine - ss_median_f64(scratch, m)) / 1e6;
    }
    j->steps++;
}

const char *ss__late_join_words(const ss_detectors *d, const ss__late_join *j,
                                uint32_t r, double med_step_ms, ss_buf *ev,
                                char *buf, size_t len)
{
    buf[0] = '\0';
    if (!j->steps)
        return buf;
    int best = -1;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (best < 0 || j->excess_ms[p] > j->excess_ms[best])
            best = p;
    double ms = j->excess_ms[best] / j->steps;
    if (!(ms >= 1.0 && ms >= 0.05 * med_step_ms))
        return buf;
    char a[32];
    snprintf(buf, len, "; rank %u spends %s ms per step more than the median "
             "rank in %s", r, ss__fmt_ms(a, sizeof a, ms),
             ss__name_of(d, best));
    if (ev) {
        ss__evidence_str(ev, "late_phase", ss__name_of(d, best));
        ss__evidence_num(ev, "late_ms_per_step", round(ms * 10) / 10);
    }
    return buf;
}

double ss__chi2_upper(double x, double df)
{
    if (!(x > 0) || !(df > 0))
        return 1;
    double h = 2.0 / (9.0 * df);
    double z = (cbrt(x / df) - (1.0 - h)) / sqrt(h);
    return 0.5 * erfc(z / sqrt(2.0));
}

const char *ss__workload_explain(const ss_detectors *d, uint32_t r,
                                 uint64_t first, uint64_t last, char *buf,
                                 size_t len)
{
    ss__moe_explain(d, r, first, last, buf, len);
    if (!buf[0])
        ss__embedding_explain(d, r, first, last, buf, len);
    return buf;
}
