/*
 * stack_doc.c - the stacks document (stack_doc.h): reads each rank's
 * object in place (stack_json.h), picks its representative thread,
 * merges, groups the other threads, and writes it all.
 *
 * Thousands of ranks mostly share their frames, so the strings read are
 * interned: each distinct function name or source line is decoded once
 * into one arena sized by the input, and equal strings are the same
 * pointer, which makes the merge's comparisons and the other threads'
 * grouping cheap.  Nothing is allocated per frame.
 */
#include "stack_doc.h"

#include <stdlib.h>
#include <string.h>

#include "fnv1a.h"
#include "stack_json.h"
#include "stack_merge.h"

/* ---- strings, interned ---- */

typedef struct {
    char *arena;        /* room for every input byte: never grows */
    size_t used;
    const char **slots; /* open addressing; NULL: empty */
    uint64_t *hashes;
    size_t cap, count;
    int oom;
} interner;

static int grow(interner *in)
{
    size_t cap = in->cap ? in->cap * 2 : 1024;
    const char **slots = calloc(cap, sizeof *slots);
    uint64_t *hashes = calloc(cap, sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        return -1;
    }
    for (size_t i = 0; i < in->cap; i++) {
        if (!in->slots[i])
            continue;
        size_t j = in->hashes[i] & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = in->slots[i];
        hashes[j] = in->hashes[i];
    }
    free(in->slots);
    free(in->hashes);
    in->slots = slots;
    in->hashes = hashes;
    in->cap = cap;
    return 0;
}

/* The string V decoded, as the one pointer every equal string gets;
 * NULL when memory ran out. */
static const char *intern(interner *in, ss_sj_span v)
{
    if (in->oom || (2 * (in->count + 1) > in->cap && grow(in) != 0)) {
        in->oom = 1;
        return NULL;
    }
    char *s = in->arena + in->used;
    size_t n = ss_sj_str(v, s);
    uint64_t h = ss_fnv1a(SS_FNV1A_BASIS, s, n);
    size_t j = h & (in->cap - 1);
    while (in->slots[j]) {
        if (in->hashes[j] == h && strcmp(in->slots[j], s) == 0)
            return in->slots[j];
        j = (j + 1) & (in->cap - 1);
    }
    in->slots[j] = s;
    in->hashes[j] = h;
    in->count++;
    in->used += n + 1;
    return s;
}

/* ---- what each rank's object says ---- */

typedef struct {
    const char **v; /* every path read, end to end */
    size_t n, cap;
    int oom;
} func_pool;

/* One thread besides a rank's main one. */
typedef struct {
    uint32_t rank;
    const char *id;
    size_t funcs, depth; /* into the pool */
    const char *code;
    uint64_t key;        /* hash of its path and code */
    size_t order;        /* its place in the ranks' order */
} other_thread;

typedef struct {
    other_thread *v;
    size_t n, cap;
} other_list;

static int pool_add(func_pool *p, const char *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4096;
        const char **v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->oom = 1;
            return -1;
        }
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = s;
    return 0;
}

/* One thread of a rank: its frames in the pool from FIRST on. */
typedef struct {
    const char *id;
    size_t first, depth;
    const char *code; /* its innermost frame's */
} thread_rec;

static const char unknown[] = "?";

/* Reads the thread object TH walks: its id, its frames' functions (a
 * missing one "?") into the pool, its innermost frame's code. */
static void read_thread(ss_sj_iter *th, interner *in, func_pool *pool,
                        thread_rec *t)
{
    *t = (thread_rec){unknown, pool->n, 0, NULL};
    ss_sj_span k, v;
    int seen = 0; /* the first of a member given twice counts, as with
                     cJSON */
    while (ss_sj_key(th, &k)) {
        if (seen || !ss_sj_key_is(k, "frames")) {
            if (!ss_sj_take(th, &v))
                break;
            if (t->id == unknown && ss_sj_key_is(k, "id") && ss_sj_is_str(v))
                t->id = intern(in, v);
            continue;
        }
        seen = 1;
        ss_sj_iter fa, fo;
        if (ss_sj_enter(th, &fa, '[') != 0)
            continue;
        while (ss_sj_next(&fa)) {
            const char *func = unknown, *c = NULL;
            if (ss_sj_enter(&fa, &fo, '{') == 0) {
                while (ss_sj_key(&fo, &k) && ss_sj_take(&fo, &v)) {
                    if (func == unknown && ss_sj_key_is(k, "func") &&
                        ss_sj_is_str(v))
                        func = intern(in, v);
                    else if (!c && ss_sj_key_is(k, "code") &&
                             ss_sj_is_str(v))
                        c = intern(in, v);
                }
                ss_sj_leave(&fa, &fo);
            }
            if (pool_add(pool, func ? func : unknown) != 0)
                break;
            t->depth++;
            t->code = c;
        }
        ss_sj_leave(th, &fa);
    }
    if (!t->id)
        t->id = unknown;
}

static int other_add(other_list *l, const other_thread *t)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        other_thread *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *t;
    return 0;
}

/* Reads rank object TEXT into R (state, why, main thread's path) and its
 * other threads into OTHERS, each byte once.  Returns 0, or -1 when TEXT
 * is not one JSON object. */
static int read_rank(const char *text, ss_stack_rank_in *r, size_t index,
                     interner *in, func_pool *pool, other_list *others,
                     size_t *funcs_at, int *answered)
{
    size_t len = strlen(text);
    const char *end = text + len;
    const char *e = ss_sj_value(text, end);
    while (e && e < end && (*e == ' ' || *e == '\n' || *e == '\t' ||
                            *e == '\r'))
        e++;
    ss_sj_iter it, ta, to;
    ss_sj_span k, v;
    if (e != end || ss_sj_object((ss_sj_span){text, end}, &it) != 0)
        return -1;
    /* the first of a member given twice counts, as with cJSON */
    int have_threads = 0, have_rank = 0, have_why = 0;
    size_t nt = 0, others_from = others->n;
    thread_rec last = {0};
    while (ss_sj_key(&it, &k)) {
        if (!have_threads && ss_sj_key_is(k, "threads")) {
            have_threads = 1;
            if (ss_sj_enter(&it, &ta, '[') != 0)
                continue;
            while (ss_sj_next(&ta)) {
                thread_rec t = {unknown, pool->n, 0, NULL};
                if (ss_sj_enter(&ta, &to, '{') == 0) {
                    read_thread(&to, in, pool, &t);
                    ss_sj_leave(&ta, &to);
                }
                /* the one before is not the last: another thread */
                if (nt++ > 0) {
                    uint64_t key = (uint64_t)(uintptr_t)last.code *
                                   1099511628211ull ^ last.depth;
                    for (size_t f = 0; f < last.depth && !pool->oom; f++)
                        key = (key ^ (uint64_t)(uintptr_t)
                                         pool->v[last.first + f]) *
                              1099511628211ull;
                    other_thread o = {0, last.id, last.first, last.depth,
                                      last.code, key, others->n};
                    if (other_add(others, &o) != 0)
                        pool->oom = 1;
                }
                last = t;
            }
            ss_sj_leave(&it, &ta);
            continue;
        }
        if (!ss_sj_take(&it, &v))
            break;
        if (!have_rank && ss_sj_key_is(k, "rank")) {
            have_rank = 1;
            if (ss_sj_is_num(v))
                r->rank = (uint32_t)ss_sj_num(v, (double)index);
        } else if (!r->state && ss_sj_key_is(k, "state") && ss_sj_is_str(v)) {
            r->state = intern(in, v);
        } else if (!have_why && ss_sj_key_is(k, "why")) {
            have_why = 1;
            if (ss_sj_is_str(v))
                r->why = intern(in, v);
        }
    }
    for (size_t j = others_from; j < others->n; j++)
        others->v[j].rank = r->rank;
    if (!r->state)
        r->state = "no_answer";
    /* answered: gave its Python stack (a stopped rank read from its
     * memory did, in state "stopped") */
    *answered = strcmp(r->state, "ok") == 0 || nt > 0;
    if (nt == 0)
        return 0;
    /* the last thread, the oldest: the main thread */
    r->other_threads = (uint32_t)(nt - 1);
    *funcs_at = last.first;
    r->depth = last.depth;
    r->leaf_code = last.code;
    return 0;
}

/* ---- the other threads, grouped ---- */

static int same_path(const other_thread *a, const other_thread *b,
                     const func_pool *pool)
{
    return a->key == b->key && a->depth == b->depth && a->code == b->code &&
           memcmp(pool->v + a->funcs, pool->v + b->funcs,
                  a->depth * sizeof *pool->v) == 0;
}

/* By path (its hash, then its pointers), then the ranks' order. */
static int cmp_other(const void *pa, const void *pb, void *ctx)
{
    const other_thread *a = pa, *b = pb;
    const func_pool *g_pool = ctx;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (!same_path(a, b, g_pool)) {
        if (a->depth != b->depth)
            return a->depth < b->depth ? -1 : 1;
        if (a->code != b->code)
            return (uintptr_t)a->code < (uintptr_t)b->code ? -1 : 1;
        int c = memcmp(g_pool->v + a->funcs, g_pool->v + b->funcs,
                       a->depth * sizeof *g_pool->v);
        return c < 0 ? -1 : 1;
    }
    return a->order < b->order ? -1 : a->order > b->order;
}

typedef struct {
    size_t begin, count, order; /* into the sorted threads */
} other_group;

static int cmp_group_order(const void *pa, const void *pb)
{
    const other_group *a = pa, *b = pb;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* One line per distinct path, in the order its first thread comes:
 *   "  rank 3 thread 0x7f…: run → _bootstrap: code\n" for one thread,
 *   "  ranks 4-4095 (4092 threads): run → …\n" for more. */
static int other_text(other_list *l, const func_pool *pool, ss_buf *t)
{
    if (l->n == 0)
        return 0;
    qsort_r(l->v, l->n, sizeof *l->v, cmp_other, (void *)pool);
    other_group *g = malloc(l->n * sizeof *g);
    uint32_t *ranks = malloc(l->n * sizeof *ranks);
    if (!g || !ranks) {
        free(g);
        free(ranks);
        return -1;
    }
    size_t ng = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (i && same_path(&l->v[i - 1], &l->v[i], pool)) {
            g[ng - 1].count++;
            continue;
        }
        g[ng++] = (other_group){i, 1, l->v[i].order};
    }
    qsort(g, ng, sizeof *g, cmp_group_order);
    for (size_t k = 0; k < ng; k++) {
        const other_thread *o = &l->v[g[k].begin];
        if (g[k].count == 1) {
            ss_buf_printf(t, "  rank %u thread %s:", o->rank, o->id);
        } else {
            for (size_t i = 0; i < g[k].count; i++)
                ranks[i] = l->v[g[k].begin + i].rank;
            ss_buf_puts(t, "  ranks ");
            ss_stack_rankset_text(ranks, g[k].count, t);
            ss_buf_printf(t, " (%zu threads):", g[k].count);
        }
        for (size_t f = 0; f < o->depth; f++)
            ss_buf_printf(t, "%s%s", f ? " → " : " ",
                          pool->v[o->funcs + f]);
        if (o->code)
            ss_buf_printf(t, ": %s", o->code);
        ss_buf_puts(t, "\n");
    }
    free(g);
    free(ranks);
    return 0;
}

/* ---- the document ---- */

int ss_stack_doc(const ss_stack_doc_info *info, const char *const *ranks,
                 size_t n, ss_buf *out, size_t *ranks_at)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += ranks[i] ? strlen(ranks[i]) + 1 : 0;
    interner in = {malloc(bytes + 1), 0, NULL, NULL, 0, 0, 0};
    func_pool pool = {0};
    other_list others = {0};
    ss_stack_rank_in *rin = calloc(n ? n : 1, sizeof *rin);
    size_t *funcs_at = calloc(n ? n : 1, sizeof *funcs_at);
    char *parsed = calloc(n ? n : 1, 1);
    int rc = -1;
    ss_buf text = {0}, merged = {0}, other = {0};
    if (!in.arena || !rin || !funcs_at || !parsed)
        goto out;
    size_t answered = 0;
    for (size_t i = 0; i < n; i++) {
        ss_stack_rank_in *r = &rin[i];
        int ok = 0;
        r->rank = (uint32_t)i;
        parsed[i] = ranks[i] && read_rank(ranks[i], r, i, &in, &pool,
                                          &others, &funcs_at[i], &ok) == 0;
        if (!parsed[i]) {
            *r = (ss_stack_rank_in){(uint32_t)i, "no_answer",
                                    "the rank's answer did not parse", NULL,
                                    0, NULL, 0};
            continue;
        }
        answered += (size_t)ok;
    }
    if (in.oom || pool.oom)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (rin[i].depth)
            rin[i].funcs = pool.v + funcs_at[i];

    ss_buf_printf(out, "{\"run_id\":%lld,\"attempt\":%u,\"taken_at\":",
                  (long long)info->run_id, info->attempt);
    ss_buf_json_time(out, info->taken_at);
    ss_buf_puts(out, ",\"trigger\":");
    ss_buf_json_str(out, info->trigger ? info->trigger : "request");
    ss_buf_printf(out, ",\"native\":%s,\"elapsed_ms\":%.1f,\"answered\":%zu,"
                  "\"ranks_total\":%zu,\"merged_text\":",
                  info->native ? "true" : "false", info->elapsed_ms, answered,
                  n);
    int merged_rc = ss_stack_merge(rin, n, &text, &merged);
    if (other_text(&others, &pool, &other) != 0)
        goto out;
    ss_buf_json_str(out, text.data ? text.data : "");
    ss_buf_puts(out, ",\"other_threads_text\":");
    ss_buf_json_str(out, other.data ? other.data : "");
    ss_buf_puts(out, ",\"merged\":");
    if (merged_rc >= 0)
        ss_buf_add(out, merged.data, merged.len);
    else
        ss_buf_puts(out, "null");
    if (ranks_at)
        *ranks_at = out->len;
    ss_buf_puts(out, ",\"ranks\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ss_buf_puts(out, ",");
        /* Our own collector's JSON; a foreign one is re-printed. */
        if (parsed[i])
            ss_buf_puts(out, ranks[i]);
        else
            ss_buf_printf(out, "{\"rank\":%u,\"state\":\"no_answer\","
                          "\"why\":\"the rank's answer did not parse\","
                          "\"threads\":[]}", rin[i].rank);
    }
    ss_buf_puts(out, "]}");
    rc = out->oom || merged_rc < 0 ? -1 : 0;
out:
    ss_buf_free(&text);
    ss_buf_free(&merged);
    ss_buf_free(&other);
    free(in.arena);
    free(in.slots);
    free(in.hashes);
    free(pool.v);
    free(others.v);
    free(rin);
    free(funcs_at);
    free(parsed);
    return rc;
}
