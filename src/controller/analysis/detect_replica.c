/*
 * detect_replica.c - the replica_divergence detector: the first checksum
 * step at which a rank's parameters differ from those of the majority of
 * its replica group (a silent data corruption, a lost update, a
 * nondeterministic kernel on one rank), with the rank or ranks, the first
 * parameter that differs in module order and how many differ; or, when the
 * group splits with no majority, every rank and the split.
 *
 * It reads what python/stepscope/_checksum.py records in a checksum step:
 * the vectors checksum.hi / checksum.lo (the two 32-bit halves of each
 * parameter's 64-bit hash, labelled by parameter name) and, with
 * --checksum optimizer, checksum.opt.hi / checksum.opt.lo, and the metric
 * checksum.group (the smallest rank of the rank's replica group; missing
 * means every rank is one group).  Ranks of different groups are never
 * compared; a step is judged among the ranks that hashed it, so ranks on
 * different checksum intervals meet at their common multiples.
 *
 * Per group and step: each rank's vectors are reduced to a digest, ranks
 * with equal digests (and equal vectors, checked) form a class; a class
 * holding more than half of the ranks compared is the majority, every rank
 * outside it diverged.  No class above half, and more than one class: the
 * group has no majority.  One finding per group and attempt, critical,
 * at the first such step; its last_step follows while the group stays
 * split and ranks that a majority later finds diverged are added.  It sees the warm-up too.
 * Its wording is detector_text.c's (ss__replica_message); docs/detectors.md
 * and docs/consistency.md state what it says.
 */
#include "fnv1a.h"
#include "detectors_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { V_HI, V_LO, V_OHI, V_OLO, N_VEC };
static const char *const vec_names[N_VEC] = {
    "checksum.hi", "checksum.lo", "checksum.opt.hi", "checksum.opt.lo"};
static const char *const group_name = "checksum.group";

typedef struct {
    uint32_t world;
    int vec[N_VEC];            /* name indexes, -1 until seen */
    int group_metric;          /* checksum.group's index, -1 */
    /* per rank, rebuilt every step */
    const ss_values_item **item; /* world * N_VEC, NULL where absent */
    int64_t *key;              /* world: the group key, -1 not hashed */
    uint64_t *digest;          /* world */
    int32_t *cls;              /* world: class (index of its first rank) */
    int32_t *members;          /* world: scratch, a group's ranks */
    /* per group key (a rank number): the finding, -1 none yet */
    int32_t *finding;          /* world */
    uint8_t *named;            /* world: a rank named in its group's */
    uint32_t n_findings;
} replica;

static void *create(ss_detectors *d)
{
    replica *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->world = d->world;
    for (int i = 0; i < N_VEC; i++)
        s->vec[i] = -1;
    s->group_metric = -1;
    size_t w = d->world ? d->world : 1;
    s->item = calloc(w * N_VEC, sizeof *s->item);
    s->key = calloc(w, sizeof *s->key);
    s->digest = calloc(w, sizeof *s->digest);
    s->cls = calloc(w, sizeof *s->cls);
    s->members = calloc(w, sizeof *s->members);
    s->finding = calloc(w, sizeof *s->finding);
    s->named = calloc(w, 1);
    if (!s->item || !s->key || !s->digest || !s->cls || !s->members ||
        !s->finding || !s->named) {
        free(s->item), free(s->key), free(s->digest), free(s->cls);
        free(s->members), free(s->finding), free(s->named), free(s);
        return NULL;
    }
    for (size_t r = 0; r < w; r++)
        s->finding[r] = -1;
    return s;
}

static void destroy(void *state)
{
    replica *s = state;
    free(s->item), free(s->key), free(s->digest), free(s->cls);
    free(s->members), free(s->finding), free(s->named), free(s);
}

static void on_names(void *state, ss_detectors *d, uint32_t n_names,
                     const char *const *names)
{
    replica *s = state;
    (void)d;
    for (uint32_t i = 0; i < n_names; i++) {
        if (!names[i])
            continue;
        for (int k = 0; k < N_VEC; k++)
            if (s->vec[k] < 0 && strcmp(names[i], vec_names[k]) == 0)
                s->vec[k] = (int)i;
        if (s->group_metric < 0 && strcmp(names[i], group_name) == 0)
            s->group_metric = (int)i;
    }
}

static const ss_values_item *find_item(const ss_rank_step *rs, int name)
{
    for (uint32_t i = 0; name >= 0 && rs->values && i < rs->n_values; i++)
        if (rs->values[i].name == name)
            return &rs->values[i];
    return NULL;
}

#define ITEM(s, r, k) ((s)->item[(size_t)(r) * N_VEC + (k)])

/* FNV-1a over the lengths and the bits of rank R's vectors. */
static uint64_t digest_of(const replica *s, uint32_t r)
{
    uint64_t h = SS_FNV1A_BASIS;
    for (int k = 0; k < N_VEC; k++) {
        const ss_values_item *it = ITEM(s, r, k);
        uint32_t n = it ? it->n : 0;
        h = ss_fnv1a(h, &n, sizeof n);
        if (it)
            h = ss_fnv1a(h, it->v, (size_t)n * sizeof(double));
    }
    return h;
}

static int same_vectors(const replica *s, uint32_t a, uint32_t b)
{
    for (int k = 0; k < N_VEC; k++) {
        const ss_values_item *x = ITEM(s, a, k), *y = ITEM(s, b, k);
        uint32_t nx = x ? x->n : 0, ny = y ? y->n : 0;
        if (nx != ny ||
            (nx && memcmp(x->v, y->v, (size_t)nx * sizeof(double)) != 0))
            return 0;
    }
    return 1;
}

/* Entry I of the parameter list (the parameters, then the optimizer's
 * state) of rank R as one 64-bit value, and whether it exists. */
static int entry(const replica *s, uint32_t r, uint32_t i, uint64_t *out)
{
    int hi = V_HI, lo = V_LO;
    const ss_values_item *h = ITEM(s, r, hi), *l = ITEM(s, r, lo);
    uint32_t np = h && l ? (h->n < l->n ? h->n : l->n) : 0;
    if (i >= np) {
        i -= np;
        h = ITEM(s, r, V_OHI), l = ITEM(s, r, V_OLO);
        uint32_t no = h && l ? (h->n < l->n ? h->n : l->n) : 0;
        if (i >= no)
            return 0;
    }
    *out = ((uint64_t)h->v[i] << 32) | (uint64_t)l->v[i];
    return 1;
}

static uint32_t n_entries(const replica *s, uint32_t r)
{
    uint32_t n = 0;
    for (int k = 0; k < N_VEC; k += 2) {
        const ss_values_item *h = ITEM(s, r, k), *l = ITEM(s, r, k + 1);
        n += h && l ? (h->n < l->n ? h->n : l->n) : 0;
    }
    return n;
}

/* The label of entry I of rank R: the parameter's name, "P:KEY" for the
 * optimizer's state, or "#I" when the rank sent no labels. */
static void label_of(const replica *s, uint32_t r, uint32_t i, char *out,
                     size_t len)
{
    uint32_t np = 0;
    const ss_values_item *h = ITEM(s, r, V_HI), *l = ITEM(s, r, V_LO);
    np = h && l ? (h->n < l->n ? h->n : l->n) : 0;
    const ss_values_item *it = h;
    uint32_t at = i;
    if (i >= np) {
        it = ITEM(s, r, V_OHI);
        at = i - np;
    }
    if (it && it->labels && at < it->n_labels && it->labels[at])
        snprintf(out, len, "%s%s", i >= np ? "optimizer state " : "",
                 it->labels[at]);
    else
        snprintf(out, len, "#%u", i);
}

/* Compares rank R with rank REF entry by entry: the first that differs
 * (UINT32_MAX when none) and how many do; a length difference counts. */
static uint32_t compare(const replica *s, uint32_t r, uint32_t ref,
                        uint32_t *n_diff)
{
    uint32_t a = n_entries(s, r), b = n_entries(s, ref);
    uint32_t n = a > b ? a : b, first = UINT32_MAX;
    *n_diff = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = 0, y = 0;
        int hx = entry(s, r, i, &x), hy = entry(s, ref, i, &y);
        if (hx != hy || x != y) {
            if (first == UINT32_MAX)
                first = i;
            (*n_diff)++;
        }
    }
    return first;
}

/* Judges the ranks M[0..K) of one group (key KEY) in step V. */
static void judge(replica *s, ss_detectors *d, const ss_step_view *v,
                  int64_t key, const int32_t *m, uint32_t k)
{
    /* classes: cls[r] = the first rank of m[] with the same vectors */
    uint32_t best = 0, best_n = 0, n_classes = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t r = (uint32_t)m[i];
        s->cls[r] = -1;
        for (uint32_t j = 0; j < i; j++) {
            uint32_t q = (uint32_t)m[j];
            if (s->cls[q] == m[j] && s->digest[q] == s->digest[r] &&
                same_vectors(s, q, r)) {
                s->cls[r] = m[j];
                break;
            }
        }
        if (s->cls[r] < 0) {
            s->cls[r] = (int32_t)r;
            n_classes++;
        }
    }
    if (n_classes <= 1)
        return;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t c = 0;
        for (uint32_t j = 0; j < k; j++)
            c += s->cls[m[j]] == s->cls[m[i]];
        if (c > best_n)
            best_n = c, best = (uint32_t)s->cls[m[i]];
    }
    int majority = 2 * best_n > k;
    /* the ranks to name: outside the majority, or all without one */
    int32_t out[SS_FINDING_MAX_RANKS];
    uint32_t n_out = 0, n_total = 0, first = UINT32_MAX, most = 0;
    uint32_t first_rank = (uint32_t)m[0];
    for (uint32_t i = 0; i < k; i++) {
        uint32_t r = (uint32_t)m[i];
        if (majority && (uint32_t)s->cls[r] == best)
            continue;
        n_total++;
        if (n_out < SS_FINDING_MAX_RANKS)
            out[n_out++] = (int32_t)r;
        uint32_t nd = 0, f = compare(s, r, best, &nd);
        if (f < first || (f == first && nd > most))
            first = f, first_rank = r;
        if (nd > most)
            most = nd;
    }
    int32_t idx = s->finding[key];
    if (idx >= 0) {
        ss_finding *f = ss__finding(d, idx);
        f->last_step = v->step;
        /* a later rank joins the finding only when a majority names it (a
         * step that fewer ranks hashed, as when a job stops, may have
         * none) */
        uint32_t added = 0;
        for (uint32_t i = 0; majority && i < n_out; i++)
            if (!s->named[out[i]] && f->n_ranks < SS_FINDING_MAX_RANKS) {
                f->ranks[f->n_ranks++] = out[i];
                s->named[out[i]] = 1;
                added++;
            }
        if (added)
            ss__finding_touch(d, idx);
        return;
    }
    if (s->n_findings >= (uint32_t)d->p[P_R_MAX_FINDINGS])
        return;
    idx = ss__finding_open(d, "replica_divergence");
    if (idx < 0)
        return;
    s->finding[key] = idx;
    s->n_findings++;
    for (uint32_t i = 0; i < n_out; i++)
        s->named[out[i]] = 1;
    char param[192];
    label_of(s, first_rank, first, param, sizeof param);
    ss_replica_facts facts = {
        .step = v->step,
        .group_key = key,
        .compared = k,
        .majority = majority ? best_n : 0,
        .majority_rank = majority ? (int32_t)best : -1,
        .ranks = out,
        .n_ranks = n_out,
        .n_ranks_total = n_total,
        .param = param,
        .param_index = first,
        .params_differ = most,
        .params_total = n_entries(s, best),
        .classes = n_classes,
    };
    ss_finding *f = ss__finding(d, idx);
    f->severity = SS_CRITICAL;
    f->first_step = f->last_step = v->step;
    ss__set_ranks(f, out, n_out);
    ss__replica_message(d, &facts, f);
    ss__finding_touch(d, idx);
}

static void on_step(void *state, ss_detectors *d, const ss_step_view *v,
                    uint32_t world)
{
    replica *s = state;
    if (s->vec[V_HI] < 0 || s->vec[V_LO] < 0)
        return;
    if (world > s->world)
        world = s->world;
    uint32_t hashed = 0;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        s->key[r] = -1;
        for (int k = 0; k < N_VEC; k++)
            ITEM(s, r, k) = rs->present ? find_item(rs, s->vec[k]) : NULL;
        if (!ITEM(s, r, V_HI) || !ITEM(s, r, V_LO))
            continue;
        double g = NAN;
        if (s->group_metric >= 0 && (uint32_t)s->group_metric < v->n_names &&
            rs->metric)
            g = rs->metric[s->group_metric];
        s->key[r] = isfinite(g) && g >= 0 && g < (double)world
                        ? (int64_t)g : 0;
        s->digest[r] = digest_of(s, r);
        hashed++;
    }
    if (hashed < 2)
        return;
    /* each group key once, its ranks in rank order */
    for (uint32_t g = 0; g < world; g++) {
        uint32_t k = 0;
        for (uint32_t r = 0; r < world; r++)
            if (s->key[r] == (int64_t)g)
                s->members[k++] = (int32_t)r;
        if (k >= 2)
            judge(s, d, v, (int64_t)g, s->members, k);
    }
}

const ss__detector ss__replica_detector = {
    .name = "replica",
    .create = create,
    .on_names = on_names,
    .on_step = on_step,
    .destroy = destroy,
    .warmup_too = 1,
};
