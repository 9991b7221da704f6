/*
 * gpu_watch.c - the GPU library (NVML or AMD SMI, gpu_backend.h) sampled
 * on a thread of its own, read by the loop.
 *
 * The sampler thread owns the GPU backend: it opens it, maps ranks to
 * GPUs, samples, and closes it; no other thread calls the library.
 * Everything it shares with the loop (the per-GPU timelines and totals, the
 * rank map) sits behind one mutex, taken after each library call returns.
 * See gpu_watch.h.
 */
#include "gpu_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "gpu_backend.h"
#include "nvml_timeline.h"

enum { GPU_UNMAPPED = -2, GPU_NONE = -1 };

/* One GPU's running totals, accumulated sample to sample. */
typedef struct {
    ss_gpu_timeline *timeline;
    int sampled;           /* LAST holds a sample */
    ss_gpu_sample first, last;
    ss_dur_ns slowed_ns;
    ss_dur_ns reason_ns[SS_GPU_N_REASONS];
} watched_gpu;

typedef struct {
    pid_t pid;   /* 0: not said hello yet */
    int gpu;     /* GPU_UNMAPPED until the thread looked, then an index or
                    GPU_NONE */
} rank_gpu;

struct ss_gpu_watch {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stopping;
    uint32_t interval_ms;
    char proc_root[256];
    char lib_path[512]; /* "" : the default */
    uint32_t nprocs;
    rank_gpu *ranks;
    uint32_t n_gpus;    /* set once by the thread, under MU */
    watched_gpu *gpus;
    uint64_t samples;
};

/* Adds the time since G's last sample to its totals, by the reasons in
 * force over it (a gap longer than a sample holds counts for nothing). */
static void accumulate(watched_gpu *g, const ss_gpu_sample *s)
{
    if (!g->sampled) {
        g->first = *s;
        return;
    }
    ss_dur_ns dt = s->at - g->last.at;
    if (dt <= 0 || dt > SS_GPU_SAMPLE_HOLD_NS || !g->last.reasons_known)
        return;
    int slowed = 0;
    for (int r = 0; r < SS_GPU_N_REASONS; r++)
        if (g->last.reasons & ss_gpu_reason_bit((ss_gpu_reason)r)) {
            g->reason_ns[r] += dt;
            slowed |= ss_gpu_reason_slows((ss_gpu_reason)r);
        }
    if (slowed)
        g->slowed_ns += dt;
}

/* Looks up the GPU of every rank that said hello and was not mapped. */
static void map_ranks(ss_gpu_watch *gw, const ss_gpu_backend *n)
{
    for (uint32_t i = 0; i < gw->nprocs; i++) {
        pthread_mutex_lock(&gw->mu);
        pid_t pid = gw->ranks[i].gpu == GPU_UNMAPPED ? gw->ranks[i].pid : 0;
        pthread_mutex_unlock(&gw->mu);
        if (!pid)
            continue;
        int gpu = ss_gpu_backend_gpu_for_pid(n, gw->proc_root, pid);
        pthread_mutex_lock(&gw->mu);
        if (gw->ranks[i].pid == pid)
            gw->ranks[i].gpu = gpu >= 0 ? gpu : GPU_NONE;
        pthread_mutex_unlock(&gw->mu);
    }
}

static void *sampler(void *arg)
{
    ss_gpu_watch *gw = arg;
    ss_gpu_backend *n =
        ss_gpu_backend_open(gw->lib_path[0] ? gw->lib_path : NULL, NULL);
    uint32_t count = n ? ss_gpu_backend_count(n) : 0;
    if (n && ss_gpu_backend_state(n) == SS_GPU_UNUSABLE)
        fprintf(stderr, "stepscope: GPUs not read: %s\n",
                ss_gpu_backend_why(n)); /* once: the thread ends */
    watched_gpu *gpus = count ? calloc(count, sizeof *gpus) : NULL;
    for (uint32_t i = 0; gpus && i < count; i++)
        if (!(gpus[i].timeline = ss_gpu_timeline_new()))
            count = i; /* out of memory: follow the GPUs that fit */
    pthread_mutex_lock(&gw->mu);
    gw->gpus = gpus;
    gw->n_gpus = gpus ? count : 0;
    while (!gw->stopping && gw->n_gpus) {
        pthread_mutex_unlock(&gw->mu);
        map_ranks(gw, n);
        for (uint32_t i = 0; i < count; i++) {
            ss_gpu_sample s;
            if (ss_gpu_backend_sample(n, i, ss_mono_now(), &s) != 0)
                continue;
            pthread_mutex_lock(&gw->mu);
            accumulate(&gpus[i], &s);
            gpus[i].last = s;
            gpus[i].sampled = 1;
            ss_gpu_timeline_add(gpus[i].timeline, &s);
            gw->samples++;
            pthread_mutex_unlock(&gw->mu);
        }
        pthread_mutex_lock(&gw->mu);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long ns = until.tv_nsec + (long long)gw->interval_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        while (!gw->stopping &&
               pthread_cond_timedwait(&gw->wake, &gw->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&gw->mu);
    ss_gpu_backend_close(n);
    return NULL;
}

ss_gpu_watch *ss_gpu_watch_start(uint32_t nprocs, uint32_t interval_ms,
                                 const char *proc_root, const char *lib_path)
{
    ss_gpu_watch *gw = calloc(1, sizeof *gw);
    if (!gw)
        return NULL;
    gw->ranks = calloc(nprocs ? nprocs : 1, sizeof *gw->ranks);
    if (!gw->ranks) {
        free(gw);
        return NULL;
    }
    for (uint32_t i = 0; i < nprocs; i++)
        gw->ranks[i].gpu = GPU_UNMAPPED;
    gw->nprocs = nprocs;
    gw->interval_ms = interval_ms ? interval_ms : 100;
    snprintf(gw->proc_root, sizeof gw->proc_root, "%s", proc_root);
    snprintf(gw->lib_path, sizeof gw->lib_path, "%s", lib_path ? lib_path : "");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&gw->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&gw->mu, NULL);
    if (pthread_create(&gw->thread, NULL, sampler, gw) != 0) {
        pthread_cond_destroy(&gw->wake);
        pthread_mutex_destroy(&gw->mu);
        free(gw->ranks);
        free(gw);
        return NULL;
    }
    return gw;
}

void ss_gpu_watch_rank(ss_gpu_watch *gw, uint32_t rank, pid_t pid)
{
    if (!gw || rank >= gw->nprocs || pid <= 0)
        return;
    pthread_mutex_lock(&gw->mu);
    if (gw->ranks[rank].pid != pid) {
        gw->ranks[rank].pid = pid;
        gw->ranks[rank].gpu = GPU_UNMAPPED;
    }
    pthread_mutex_unlock(&gw->mu);
}

/* RANK's GPU, or NULL; with MU held. */
static watched_gpu *gpu_of_locked(ss_gpu_watch *gw, uint32_t rank, int *index)
{
    if (rank >= gw->nprocs)
        return NULL;
    int g = gw->ranks[rank].gpu;
    if (g < 0 || (uint32_t)g >= gw->n_gpus)
        return NULL;
    *index = g;
    return &gw->gpus[g];
}

int ss_gpu_watch_gpu_of(ss_gpu_watch *gw, uint32_t rank)
{
    if (!gw)
        return -1;
    int index = -1;
    pthread_mutex_lock(&gw->mu);
    gpu_of_locked(gw, rank, &index);
    pthread_mutex_unlock(&gw->mu);
    return index;
}

static ss_dur_ns capped(ss_dur_ns v, ss_dur_ns cap)
{
    return v > cap ? cap : v;
}

int ss_gpu_watch_window(ss_gpu_watch *gw, uint32_t rank, ss_mono_ns begin,
                        ss_mono_ns end, ss_gpu_evidence *out)
{
    memset(out, 0, sizeof *out);
    if (!gw)
        return -1;
    int index = -1;
    ss_gpu_step st;
    int rc = -1;
    pthread_mutex_lock(&gw->mu);
    watched_gpu *g = gpu_of_locked(gw, rank, &index);
    if (g)
        rc = ss_gpu_timeline_window(g->timeline, begin, end, &st);
    pthread_mutex_unlock(&gw->mu);
    if (rc != 0)
        return -1;
    out->present = 1;
    out->index = index;
    out->covered_ns = st.covered_ns;
    out->slowed_ns = st.slowed_ns;
    out->power_cap_ns = st.reason_ns[SS_GPU_REASON_POWER_CAP];
    out->thermal_ns = capped(st.reason_ns[SS_GPU_REASON_SW_THERMAL] +
                                 st.reason_ns[SS_GPU_REASON_HW_THERMAL] +
                                 st.reason_ns[SS_GPU_REASON_MEM_THERMAL],
                             st.covered_ns);
    out->hw_slowdown_ns = capped(st.reason_ns[SS_GPU_REASON_HW_SLOWDOWN] +
                                     st.reason_ns[SS_GPU_REASON_HW_POWER_BRAKE],
                                 st.covered_ns);
    out->sm_clock_mhz = st.sm_clock_mhz;
    out->temperature_c = st.temperature_c;
    out->ecc_new = st.ecc_uncorrected_new;
    out->xid_new = st.xid_new;
    out->last_xid = st.last_xid;
    return 0;
}

static int64_t rise(int64_t first, int64_t last)
{
    return first == SS_MISSING || last == SS_MISSING || last < first
               ? SS_MISSING
               : last - first;
}

int ss_gpu_watch_totals(ss_gpu_watch *gw, uint32_t rank,
                        ss_gpu_evidence *out)
{
    memset(out, 0, sizeof *out);
    if (!gw)
        return -1;
    int index = -1;
    pthread_mutex_lock(&gw->mu);
    const watched_gpu *g = gpu_of_locked(gw, rank, &index);
    if (g && g->sampled) {
        out->present = 1;
        out->index = index;
        out->covered_ns = g->last.at - g->first.at;
        out->slowed_ns = g->slowed_ns;
        out->power_cap_ns = g->reason_ns[SS_GPU_REASON_POWER_CAP];
        out->thermal_ns = g->reason_ns[SS_GPU_REASON_SW_THERMAL] +
                          g->reason_ns[SS_GPU_REASON_HW_THERMAL] +
                          g->reason_ns[SS_GPU_REASON_MEM_THERMAL];
        out->hw_slowdown_ns = g->reason_ns[SS_GPU_REASON_HW_SLOWDOWN] +
                              g->reason_ns[SS_GPU_REASON_HW_POWER_BRAKE];
        out->sm_clock_mhz = g->last.sm_clock_mhz;
        out->temperature_c = g->last.temperature_c;
        out->ecc_new = rise(g->first.ecc_uncorrected, g->last.ecc_uncorrected);
        /* Xid errors are counted from the handle's opening: all are new. */
        out->xid_new = g->last.xid_count;
        out->last_xid = g->last.last_xid;
    }
    pthread_mutex_unlock(&gw->mu);
    return out->present ? 0 : -1;
}

uint64_t ss_gpu_watch_samples(ss_gpu_watch *gw)
{
    if (!gw)
        return 0;
    pthread_mutex_lock(&gw->mu);
    uint64_t n = gw->samples;
    pthread_mutex_unlock(&gw->mu);
    return n;
}

void ss_gpu_watch_stop(ss_gpu_watch *gw)
{
    if (!gw)
        return;
    pthread_mutex_lock(&gw->mu);
    gw->stopping = 1;
    pthread_cond_signal(&gw->wake);
    pthread_mutex_unlock(&gw->mu);
    pthread_join(gw->thread, NULL);
    for (uint32_t i = 0; i < gw->n_gpus; i++)
        ss_gpu_timeline_free(gw->gpus[i].timeline);
    free(gw->gpus);
    pthread_cond_destroy(&gw->wake);
    pthread_mutex_destroy(&gw->mu);
    free(gw->ranks);
    free(gw);
}
