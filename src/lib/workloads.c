/*
 * workloads.c - the C API of parallel workloads' load (stepscope.h,
 * "parallel workloads"; docs/workloads.md): a mixture-of-experts layer's
 * tokens per expert and its placement, a sharded embedding table's
 * lookups per shard, recorded as vectors (ss_values) under the names the
 * controller's detectors know: moe.load.LAYER, moe.placement.LAYER and
 * emb.load.TABLE, as python/stepscope/_workloads.py records them.
 *
 * A placement is given once, maybe before the first step, so it is kept
 * here (at most MAX_PENDING layers at a time) and sent with the layer's
 * next ss_expert_load.  The hot path pays one atomic load while nothing
 * is pending; while something is, a trylock, never a wait: a load that
 * finds the lock taken leaves the placement for its next call.
 */
#include "stepscope.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SS_API __attribute__((visibility("default")))
#define MAX_PENDING 64

typedef struct {
    ss_name_id load, place; /* 0: the slot is free */
    size_t n;
    double *ranks;
} pending_placement;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pending_placement g_pending[MAX_PENDING];
static int g_n_pending; /* written under g_lock, read without it */

/* The id of PREFIX + KEY, 0 when it is not a valid name. */
static ss_name_id prefixed(const char *prefix, const char *key)
{
    char name[SS_MAX_NAME_LEN + 2];
    if (!key || !key[0])
        return 0;
    int n = snprintf(name, sizeof name, "%s%s", prefix, key);
    if (n < 0 || n > SS_MAX_NAME_LEN)
        return 0;
    return ss_name(name);
}

SS_API ss_name_id ss_expert_layer(const char *layer)
{
    /* the layer's placement name must fit too */
    if (!layer || strlen(layer) + strlen("moe.placement.") > SS_MAX_NAME_LEN)
        return 0;
    return prefixed("moe.load.", layer);
}

SS_API ss_name_id ss_embedding_table(const char *table)
{
    return prefixed("emb.load.", table);
}

SS_API int ss_expert_placement(const char *layer, const int32_t *expert_to_rank,
                               size_t n)
{
    if (!expert_to_rank || n == 0 || n > SS_MAX_VALUES)
        return SS_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (expert_to_rank[i] < 0)
            return SS_EINVAL;
    ss_name_id load = prefixed("moe.load.", layer);
    ss_name_id place = prefixed("moe.placement.", layer);
    if (!load || !place)
        return layer && layer[0] &&
                       strlen(layer) + strlen("moe.placement.") <=
                           SS_MAX_NAME_LEN
                   ? SS_ENAMES
                   : SS_EINVAL;
    double *ranks = malloc(n * sizeof *ranks);
    if (!ranks)
        return SS_ENOMEM;
    for (size_t i = 0; i < n; i++)
        ranks[i] = expert_to_rank[i];
    pthread_mutex_lock(&g_lock);
    pending_placement *slot = NULL;
    for (int i = 0; i < MAX_PENDING && !slot; i++)
        if (g_pending[i].load == load)
            slot = &g_pending[i]; /* a newer placement replaces it */
    for (int i = 0; i < MAX_PENDING && !slot; i++)
        if (!g_pending[i].load)
            slot = &g_pending[i];
    int rc = SS_OK;
    if (!slot) {
        rc = SS_ENOMEM; /* MAX_PENDING layers wait already */
        free(ranks);
    } else {
        if (slot->load)
            free(slot->ranks);
        else
            __atomic_store_n(&g_n_pending, g_n_pending + 1, __ATOMIC_RELEASE);
        *slot = (pending_placement){load, place, n, ranks};
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* Sends LOAD's pending placement, if any and if the lock is free. */
static void send_placement(ss_name_id load)
{
    if (pthread_mutex_trylock(&g_lock) != 0)
        return;
    for (int i = 0; i < MAX_PENDING; i++) {
        pending_placement *p = &g_pending[i];
        if (p->load != load)
            continue;
        ss_values(p->place, p->ranks, p->n);
        free(p->ranks);
        memset(p, 0, sizeof *p);
        __atomic_store_n(&g_n_pending, g_n_pending - 1, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&g_lock);
}

SS_API void ss_expert_load(ss_name_id layer, const double *tokens_per_expert,
                           size_t n)
{
    if (__builtin_expect(__atomic_load_n(&g_n_pending, __ATOMIC_ACQUIRE), 0))
        send_placement(layer);
    ss_values(layer, tokens_per_expert, n);
}

SS_API void ss_shard_load(ss_name_id table, const double *lookups_per_shard,
                          size_t n)
{
    ss_values(table, lookups_per_shard, n);
}
