/*
 * stack_merge.c - ranks grouped by identical stacks (stack_merge.h).
 *
 * Grouping compares whole call paths (function names; a rank without a
 * path by its state and why) with a sort, so N ranks cost O(N log N)
 * comparisons.  The prefix tree is built by walking the groups' sorted
 * paths: siblings share a prefix exactly when consecutive groups do.
 */
#include "stack_merge.h"

#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The ranks in V (N, sorted) as "0-3,7". */
static void rankset_sorted(const uint32_t *v, size_t n, ss_buf *out)
{
    int first = 1;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && (v[j + 1] == v[j] || v[j + 1] == v[j] + 1))
            j++;
        ss_buf_printf(out, "%s%u", first ? "" : ",", v[i]);
        if (v[j] > v[i] + 1)
            ss_buf_printf(out, "-%u", v[j]);
        else if (v[j] == v[i] + 1)
            ss_buf_printf(out, ",%u", v[j]);
        first = 0;
        i = j + 1;
    }
}

/* RANKS[0..N) copied and sorted (free it), or NULL with "?" put in OUT
 * when memory is short. */
static uint32_t *sorted_copy(const uint32_t *ranks, size_t n, ss_buf *out)
{
    uint32_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        ss_buf_puts(out, "?");
        return NULL;
    }
    memcpy(v, ranks, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_u32);
    return v;
}

void ss_stack_rankset(const uint32_t *ranks, size_t n, ss_buf *out)
{
    uint32_t *v = sorted_copy(ranks, n, out);
    if (!v)
        return;
    rankset_sorted(v, n, out);
    free(v);
}

void ss_stack_rankset_text(const uint32_t *ranks, size_t n, ss_buf *out)
{
    uint32_t *v = sorted_copy(ranks, n, out);
    if (!v)
        return;
    size_t m = 0; /* duplicates kept once */
    for (size_t i = 0; i < n; i++)
        if (!m || v[i] != v[m - 1])
            v[m++] = v[i];
    ss_buf plain = {0}, except = {0};
    rankset_sorted(v, m, &plain);
    uint64_t span = m ? (uint64_t)v[m - 1] - v[0] + 1 : 0;
    if (m >= 2 && span - m >= 1 && span - m <= SS_STACK_MERGE_EXCEPT) {
        ss_buf_printf(&except, "%u-%u except ", v[0], v[m - 1]);
        int first = 1;
        for (size_t i = 1; i < m; i++)
            for (uint32_t r = v[i - 1] + 1; r < v[i]; r++) {
                ss_buf_printf(&except, "%s%u", first ? "" : ", ", r);
                first = 0;
            }
    }
    const ss_buf *best = except.len && except.len < plain.len ? &except
                                                               : &plain;
    if (best->oom || !best->data)
        ss_buf_puts(out, "?");
    else
        ss_buf_add(out, best->data, best->len);
    ss_buf_free(&plain);
    ss_buf_free(&except);
    free(v);
}

/* Equal pointers first: the document's reader gives equal strings one
 * pointer, so thousands of ranks' shared frames compare at once. */
static int streq(const char *a, const char *b)
{
    return a == b || strcmp(a ? a : "", b ? b : "") == 0;
}

static int cmp_str(const char *a, const char *b)
{
    return a == b ? 0 : strcmp(a ? a : "", b ? b : "");
}

/* Orders ranks by their path (no path after any path), then state/why,
 * then rank: equal keys end up next to each other. */
static int cmp_rank(const void *pa, const void *pb)
{
    const ss_stack_rank_in *a = *(const ss_stack_rank_in *const *)pa;
    const ss_stack_rank_in *b = *(const ss_stack_rank_in *const *)pb;
    int ha = a->depth > 0, hb = b->depth > 0;
    if (ha != hb)
        return hb - ha;
    size_t d = a->depth < b->depth ? a->depth : b->depth;
    for (size_t i = 0; i < d; i++) {
        int c = cmp_str(a->funcs[i], b->funcs[i]);
        if (c)
            return c;
    }
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    int c = cmp_str(a->state, b->state);
    if (!c && !ha)
        c = cmp_str(a->why, b->why);
    if (c)
        return c;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static int same_group(const ss_stack_rank_in *a, const ss_stack_rank_in *b)
{
    if (a->depth != b->depth)
        return 0;
    for (size_t i = 0; i < a->depth; i++)
        if (!streq(a->funcs[i], b->funcs[i]))
            return 0;
    if (a->depth)
        return 1;
    return streq(a->state, b->state) && streq(a->why, b->why);
}

typedef struct {
    const ss_stack_rank_in *first; /* its path and state */
    size_t begin, count;           /* into the sorted array */
    uint32_t lowest;
} group;

static int cmp_group(const void *pa, const void *pb)
{
    const group *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count < b->count ? -1 : 1;
    return a->lowest < b->lowest ? -1 : a->lowest > b->lowest;
}

static void ranks_of(const ss_stack_rank_in **sorted, size_t begin,
                     size_t count, uint32_t *tmp, ss_buf *out)
{
    for (size_t i = 0; i < count; i++)
        tmp[i] = sorted[begin + i]->rank;
    ss_stack_rankset(tmp, count, out);
}

/* The same for a person (ss_stack_rankset_text). */
static void ranks_text(const ss_stack_rank_in **sorted, size_t begin,
                       size_t count, uint32_t *tmp, ss_buf *out)
{
    for (size_t i = 0; i < count; i++)
        tmp[i] = sorted[begin + i]->rank;
    ss_stack_rankset_text(tmp, count, out);
}

static void text_line(const group *g, const ss_stack_rank_in **sorted,
                      uint32_t *tmp, ss_buf *t)
{
    const ss_stack_rank_in *r = g->first;
    ss_buf_puts(t, g->count == 1 ? "rank " : "ranks ");
    ranks_text(sorted, g->begin, g->count, tmp, t);
    ss_buf_printf(t, " (%zu): ", g->count);
    if (!r->depth) {
        if (r->why && *r->why)
            ss_buf_puts(t, r->why);
        else
            ss_buf_printf(t, "%s: no Python stack", r->state);
        ss_buf_puts(t, "\n");
        return;
    }
    for (size_t i = 0; i < r->depth; i++) {
        if (r->depth > SS_STACK_MERGE_SHOWN && i == 2) {
            ss_buf_puts(t, " → …");
            i = r->depth - (SS_STACK_MERGE_SHOWN - 3);
        }
        ss_buf_printf(t, "%s%s", i ? " → " : "", r->funcs[i]);
    }
    if (r->leaf_code && *r->leaf_code)
        ss_buf_printf(t, ": %s", r->leaf_code);
    ss_buf_puts(t, "\n");
}

static void json_group(const group *g, const ss_stack_rank_in **sorted,
                       uint32_t *tmp, ss_buf *j, int comma)
{
    const ss_stack_rank_in *r = g->first;
    ss_buf t = {0};
    ranks_of(sorted, g->begin, g->count, tmp, &t);
    ss_buf_puts(j, comma ? ",{\"ranks\":" : "{\"ranks\":");
    ss_buf_json_str(j, t.data ? t.data : "");
    ss_buf_free(&t);
    ss_buf_printf(j, ",\"count\":%zu,\"state\":", g->count);
    ss_buf_json_str(j, r->state ? r->state : "ok");
    ss_buf_puts(j, ",\"path\":[");
    for (size_t i = 0; i < r->depth; i++) {
        if (i)
            ss_buf_puts(j, ",");
        ss_buf_json_str(j, r->funcs[i]);
    }
    ss_buf_puts(j, "],\"code\":");
    if (r->leaf_code)
        ss_buf_json_str(j, r->leaf_code);
    else
        ss_buf_puts(j, "null");
    ss_buf_puts(j, ",\"why\":");
    if (!r->depth && r->why)
        ss_buf_json_str(j, r->why);
    else
        ss_buf_puts(j, "null");
    ss_buf_puts(j, "}");
}

/* The prefix tree below LEVEL over sorted ranks [BEGIN, END), all of which
 * share their first LEVEL functions and have a path longer than LEVEL. */
static void json_tree(const ss_stack_rank_in **sorted, size_t begin,
                      size_t end, size_t level, uint32_t *tmp, ss_buf *j)
{
    int first = 1;
    for (size_t i = begin; i < end;) {
        const char *f = sorted[i]->funcs[level];
        size_t k = i + 1;
        while (k < end && streq(sorted[k]->funcs[level], f))
            k++;
        ss_buf_puts(j, first ? "{\"func\":" : ",{\"func\":");
        first = 0;
        ss_buf_json_str(j, f);
        ss_buf_puts(j, ",\"ranks\":\"");
        ranks_of(sorted, i, k - i, tmp, j);
        ss_buf_puts(j, "\",\"children\":[");
        size_t c = i;
        while (c < k && sorted[c]->depth <= level + 1)
            c++;
        /* ranks ending here sort before the longer paths below */
        json_tree(sorted, c, k, level + 1, tmp, j);
        ss_buf_puts(j, "]}");
        i = k;
    }
}

int ss_stack_merge(const ss_stack_rank_in *ranks, size_t n, ss_buf *text,
                   ss_buf *json)
{
    const ss_stack_rank_in **sorted = malloc((n ? n : 1) * sizeof *sorted);
    group *groups = malloc((n ? n : 1) * sizeof *groups);
    uint32_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!sorted || !groups || !tmp) {
        free(sorted);
        free(groups);
        free(tmp);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        sorted[i] = &ranks[i];
    qsort(sorted, n, sizeof *sorted, cmp_rank);
    size_t ng = 0, with_path = 0;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i]->depth)
            with_path = i + 1;
        if (i && same_group(sorted[i - 1], sorted[i])) {
            groups[ng - 1].count++;
            if (sorted[i]->rank < groups[ng - 1].lowest)
                groups[ng - 1].lowest = sorted[i]->rank;
            continue;
        }
        groups[ng++] = (group){sorted[i], i, 1, sorted[i]->rank};
    }
    /* The tree wants path order; the text wants outliers first. */
    if (json) {
        ss_buf_puts(json, "{\"tree\":{\"func\":null,\"ranks\":\"");
        ranks_of(sorted, 0, with_path, tmp, json);
        ss_buf_puts(json, "\",\"children\":[");
        json_tree(sorted, 0, with_path, 0, tmp, json);
        ss_buf_puts(json, "]},\"groups\":[");
    }
    qsort(groups, ng, sizeof *groups, cmp_group);
    for (size_t g = 0; g < ng; g++) {
        if (text)
            text_line(&groups[g], sorted, tmp, text);
        if (json)
            json_group(&groups[g], sorted, tmp, json, g > 0);
    }
    if (json)
        ss_buf_puts(json, "]}");
    free(sorted);
    free(groups);
    free(tmp);
    int oom = (text && text->oom) || (json && json->oom);
    return oom ? -1 : (int)ng;
}
