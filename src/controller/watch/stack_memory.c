/*
 * stack_memory.c - the ranks' Python stacks read from their memory, off
 * the loop (stack_memory.h).
 *
 * One detached thread per request reads the targets in order through
 * py_remote.h (the python's symbol table read once for them all) and
 * publishes each target's result with a release store of
 * its state; the loop reads a state with an acquire load before it looks
 * at the result.  The set is shared by the loop and the reader through a
 * count of holders; whichever lets go last frees it.
 */
#include "stack_memory.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "py_remote.h"

typedef struct {
    pid_t pid;
    atomic_int state;          /* 0 reading, 1 read, -1 failed */
    ss_buf threads;
    ss_stack_memory_leaf *leaves;
    size_t nleaves, cap;
    int leaves_oom;
    char why[256];
} target;

struct ss_stack_memory {
    atomic_int holders;        /* the caller and the reader */
    size_t n;
    target *t;
};

static atomic_int readers_alive;

static void free_set(ss_stack_memory *m)
{
    for (size_t i = 0; i < m->n; i++) {
        ss_buf_free(&m->t[i].threads);
        for (size_t k = 0; k < m->t[i].nleaves; k++)
            free((char *)m->t[i].leaves[k].file);
        free(m->t[i].leaves);
    }
    free(m->t);
    free(m);
}

static void let_go(ss_stack_memory *m)
{
    if (atomic_fetch_sub_explicit(&m->holders, 1, memory_order_acq_rel) == 1)
        free_set(m);
}

static void on_leaf(void *ctx, const char *file, long line, size_t at)
{
    target *t = ctx;
    if (t->nleaves == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        ss_stack_memory_leaf *grown = realloc(t->leaves, cap * sizeof *grown);
        if (!grown) {
            t->leaves_oom = 1;
            return;
        }
        t->leaves = grown;
        t->cap = cap;
    }
    char *copy = strdup(file);
    if (!copy) {
        t->leaves_oom = 1;
        return;
    }
    t->leaves[t->nleaves++] = (ss_stack_memory_leaf){copy, line, at};
}

static void *reader(void *arg)
{
    ss_stack_memory *m = arg;
    ss_py_cache cache;
    memset(&cache, 0, sizeof cache);
    for (size_t i = 0; i < m->n; i++) {
        target *t = &m->t[i];
        if (t->pid <= 0) { /* not asked for: its rank has exited */
            snprintf(t->why, sizeof t->why, "no process");
            atomic_store_explicit(&t->state, -1, memory_order_release);
            continue;
        }
        int rc = ss_py_read_stacks(t->pid, &cache, &t->threads, on_leaf, t,
                                   t->why, sizeof t->why);
        if (rc == 0 && (t->threads.oom || t->leaves_oom)) {
            snprintf(t->why, sizeof t->why, "out of memory");
            rc = -1;
        }
        atomic_store_explicit(&t->state, rc == 0 ? 1 : -1,
                              memory_order_release);
    }
    atomic_fetch_sub(&readers_alive, 1);
    let_go(m);
    return NULL;
}

ss_stack_memory *ss_stack_memory_start(const pid_t *pids, size_t n)
{
    if (!n || !pids)
        return NULL;
    ss_stack_memory *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->t = calloc(n, sizeof *m->t);
    if (!m->t) {
        free(m);
        return NULL;
    }
    m->n = n;
    for (size_t i = 0; i < n; i++) {
        m->t[i].pid = pids[i];
        atomic_init(&m->t[i].state, 0);
    }
    if (atomic_fetch_add(&readers_alive, 1) >= SS_STACK_MEMORY_MAX_READERS) {
        atomic_fetch_sub(&readers_alive, 1);
        free_set(m);
        return NULL;
    }
    atomic_init(&m->holders, 2);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 512u << 10);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the reader takes none */
    pthread_t th;
    int rc = pthread_create(&th, &attr, reader, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_fetch_sub(&readers_alive, 1);
        free_set(m);
        return NULL;
    }
    return m;
}

int ss_stack_memory_result(const ss_stack_memory *m, size_t i,
                           const char **threads, size_t *len,
                           const ss_stack_memory_leaf **leaves,
                           size_t *nleaves, const char **why)
{
    if (!m || i >= m->n)
        return -1;
    const target *t = &m->t[i];
    int st = atomic_load_explicit(&((target *)t)->state,
                                  memory_order_acquire);
    if (st == 1) {
        *threads = t->threads.data ? t->threads.data : "";
        *len = t->threads.len;
        *leaves = t->leaves;
        *nleaves = t->nleaves;
    } else if (st < 0) {
        *why = t->why;
    }
    return st;
}

void ss_stack_memory_release(ss_stack_memory *m)
{
    if (m)
        let_go(m);
}
