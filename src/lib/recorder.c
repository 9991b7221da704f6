/*
 * recorder.c - the public API of libstepscope (include/stepscope.h).
 *
 * This file owns the recorder's global state: whether it is enabled, the
 * current step, the statm file, and the init / shutdown / fork life cycle.
 * The hot-path calls are here too, and deliberately small: one relaxed load
 * of `rec_state` (perfetto-style), then on the enabled path a thread-local
 * load of the ring, a relaxed load of the current step, a vDSO clock read
 * and ss__ring_push().  Everything heavier happens on the sender thread
 * (sender.c).
 *
 * Life cycle: UNINIT -> (ss_init or any first call) -> ENABLED | DISABLED;
 * ENABLED -> (ss_shutdown, or fork() in the child) -> DISABLED, for good.
 */
#include "stepscope.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "collective.h"
#include "config.h"
#include "names.h"
#include "pipeline.h"
#include "ring.h"
#include "sender.h"
#include "threads.h"

#define SS_API __attribute__((visibility("default")))

enum { ST_UNINIT = 0, ST_DISABLED = 1, ST_ENABLED = 2 };

static int rec_state;                   /* atomic: ST_* */
uint64_t ss__coll_word;                 /* collective.h */
/* atomic: 1 while the latest collective was entered by ss_sync, which
 * the next step or phase call of any thread ends */
static int rec_sync_open;
static uint64_t rec_step = SS__NO_STEP; /* atomic: the open step */
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER; /* life cycle */
static int rec_init_rc;      /* atomic: what the first ss_init() returned */
static int rec_finished;     /* ss_shutdown() ran, or this is a fork child */
static int rec_forked_child; /* set in a child of fork() */
static int rec_hooks_done;   /* atfork and atexit handlers registered */
static int rec_statm_fd = -1;
static long rec_page_size;

/* ---- fork ---- */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&rec_mu);
    ss__names_lock();
    ss__threads_lock();
    ss__sender_atfork_prepare();
}

static void atfork_parent(void)
{
    ss__sender_atfork_parent();
    ss__threads_unlock();
    ss__names_unlock();
    pthread_mutex_unlock(&rec_mu);
}

/* The child has one thread and a copy of the parent's memory: it must not
 * touch the parent's connection or rings, so it is disabled for good. */
static void atfork_child(void)
{
    __atomic_store_n(&rec_state, ST_DISABLED, __ATOMIC_RELAXED);
    __atomic_store_n(&rec_step, SS__NO_STEP, __ATOMIC_RELAXED);
    rec_finished = 1;
    rec_forked_child = 1;
    if (rec_statm_fd >= 0)
        close(rec_statm_fd);
    rec_statm_fd = -1;
    ss__sender_atfork_child();
    ss__threads_unlock();
    ss__names_unlock();
    pthread_mutex_unlock(&rec_mu);
}

/* ---- init and shutdown ---- */

static void exit_handler(void) { ss_shutdown(); }

/* Called with rec_mu held and rec_state == ST_UNINIT. */
static int init_locked(void)
{
    if (!rec_hooks_done) {
        rec_hooks_done = 1;
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atexit(exit_handler);
    }
    if (rec_finished)
        return 0;
    ss__config cfg;
    char err[256];
    int rc = ss__config_parse(&cfg, getenv, err, sizeof err);
    if (rc == SS__CONFIG_ABSENT)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "stepscope: %s; the recorder is disabled\n", err);
        return rc;
    }
    rec_page_size = sysconf(_SC_PAGESIZE);
    rec_statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    rc = ss__sender_start(&cfg, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "stepscope: %s; the recorder is disabled\n", err);
        if (rec_statm_fd >= 0)
            close(rec_statm_fd);
        rec_statm_fd = -1;
        return rc;
    }
    __atomic_store_n(&rec_state, ST_ENABLED, __ATOMIC_RELEASE);
    return 0;
}

SS_API int ss_init(void)
{
    if (__atomic_load_n(&rec_state, __ATOMIC_ACQUIRE) != ST_UNINIT)
        return __atomic_load_n(&rec_init_rc, __ATOMIC_RELAXED);
    pthread_mutex_lock(&rec_mu);
    if (__atomic_load_n(&rec_state, __ATOMIC_RELAXED) == ST_UNINIT) {
        __atomic_store_n(&rec_init_rc, init_locked(), __ATOMIC_RELAXED);
        if (__atomic_load_n(&rec_state, __ATOMIC_RELAXED) == ST_UNINIT)
            __atomic_store_n(&rec_state, ST_DISABLED, __ATOMIC_RELEASE);
    }
    int rc = rec_init_rc;
    pthread_mutex_unlock(&rec_mu);
    return rc;
}

SS_API void ss_shutdown(void)
{
    pthread_mutex_lock(&rec_mu);
    int was = __atomic_load_n(&rec_state, __ATOMIC_RELAXED);
    __atomic_store_n(&rec_state, ST_DISABLED, __ATOMIC_RELEASE);
    int owner = was == ST_ENABLED && !rec_forked_child;
    rec_finished = 1;
    if (owner) {
        __atomic_store_n(&rec_step, SS__NO_STEP, __ATOMIC_RELAXED);
        ss__sender_stop();
        if (rec_statm_fd >= 0)
            close(rec_statm_fd);
        rec_statm_fd = -1;
    }
    pthread_mutex_unlock(&rec_mu);
}

/* ---- hot path ---- */

/* 1 when events are to be recorded.  The common cases cost one load. */
static inline int active(void)
{
    int s = __atomic_load_n(&rec_state, __ATOMIC_RELAXED);
    if (__builtin_expect(s == ST_ENABLED, 1))
        return 1;
    if (s == ST_UNINIT) {
        ss_init();
        return __atomic_load_n(&rec_state, __ATOMIC_RELAXED) == ST_ENABLED;
    }
    return 0;
}

static inline void record(unsigned type, unsigned name, uint64_t step,
                          ss__mono_ns t, uint64_t value)
{
    ss__thread *th = ss__tls_thread;
    if (__builtin_expect(th == NULL, 0)) {
        th = ss__thread_attach();
        if (!th)
            return;
    }
    ss__ring_push(&th->ring, type, name, step, t, value);
}

/* Ends a collective that ss_sync entered: the process went on. */
static inline void sync_moved_on(void)
{
    if (__builtin_expect(__atomic_load_n(&rec_sync_open, __ATOMIC_RELAXED),
                         0)) {
        __atomic_store_n(&rec_sync_open, 0, __ATOMIC_RELAXED);
        ss__coll_end();
    }
}

static inline uint64_t current_step(void)
{
    return __atomic_load_n(&rec_step, __ATOMIC_RELAXED);
}

SS_API void ss_step_begin(uint64_t step)
{
    if (!active() || step == SS__NO_STEP)
        return;
    sync_moved_on();
    ss__mono_ns t = ss__now();
    uint64_t open = current_step();
    if (open != SS__NO_STEP) {
        ss__pipeline_step_flush();
        record(SS__EV_STEP_END, 0, open, t, 0);
    }
    ss__pipeline_step_begin(t);
    record(SS__EV_STEP_BEGIN, 0, step, t, 0);
    __atomic_store_n(&rec_step, step, __ATOMIC_RELAXED);
}

SS_API void ss_step_end(void)
{
    if (!active())
        return;
    sync_moved_on();
    uint64_t open = current_step();
    if (open == SS__NO_STEP)
        return;
    ss__pipeline_step_flush();
    __atomic_store_n(&rec_step, SS__NO_STEP, __ATOMIC_RELAXED);
    record(SS__EV_STEP_END, 0, open, ss__now(), 0);
}

SS_API void ss_phase_begin(ss_name_id id)
{
    if (!active())
        return;
    sync_moved_on();
    record(SS__EV_PHASE_BEGIN, id, current_step(), ss__now(), 0);
}

SS_API void ss_phase_end(ss_name_id id)
{
    if (!active())
        return;
    sync_moved_on();
    record(SS__EV_PHASE_END, id, SS__NO_STEP, ss__now(), 0);
}

SS_API void ss_phase_span(ss_name_id id, int64_t begin_ns, int64_t end_ns)
{
    if (active() && end_ns >= begin_ns && begin_ns >= 0)
        record(SS__EV_PHASE_SPAN, id, current_step(), begin_ns,
               (uint64_t)end_ns);
}

SS_API int64_t ss_now_ns(void)
{
    return ss__now();
}

SS_API void ss_sync(ss_name_id id)
{
    if (!active())
        return;
    record(SS__EV_SYNC, id, current_step(), ss__now(), 0);
    if (id >= 1 && id <= SS_MAX_NAMES) {
        ss__coll_begin(id);
        __atomic_store_n(&rec_sync_open, 1, __ATOMIC_RELAXED);
    }
}

SS_API void ss_collective_begin(ss_name_id kind)
{
    if (!active() || kind < 1 || kind > SS_MAX_NAMES)
        return;
    __atomic_store_n(&rec_sync_open, 0, __ATOMIC_RELAXED);
    ss__coll_begin(kind);
}

SS_API void ss_collective_end(void)
{
    if (!active())
        return;
    __atomic_store_n(&rec_sync_open, 0, __ATOMIC_RELAXED);
    ss__coll_end();
}

SS_API void ss_sync_at(ss_name_id id, int64_t at_ns)
{
    if (active() && at_ns >= 0)
        record(SS__EV_SYNC, id, current_step(), (ss__mono_ns)at_ns, 0);
}

SS_API void ss_metric(ss_name_id id, double value)
{
    if (!active())
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    record(SS__EV_METRIC, id, current_step(), 0, bits);
}

SS_API void ss_values(ss_name_id id, const double *v, size_t n)
{
    if (!active() || !v || n == 0)
        return;
    uint64_t step = current_step();
    if (step == SS__NO_STEP)
        return;
    ss__thread *th = ss__tls_thread;
    if (__builtin_expect(th == NULL, 0) && !(th = ss__thread_attach()))
        return;
    ss__vring *vr = th->vring;
    if (__builtin_expect(vr == NULL, 0) && !(vr = ss__thread_vring(th)))
        return;
    size_t keep = n > SS_MAX_VALUES ? SS_MAX_VALUES : n;
    uint64_t cut = n - keep;
    if (cut)
        __atomic_store_n(&vr->truncated,
                         vr->truncated + (cut > UINT32_MAX ? UINT32_MAX : cut),
                         __ATOMIC_RELAXED);
    uint64_t bytes = keep * sizeof(double);
    uint64_t pos = ss__vring_reserve(vr, bytes);
    if (pos == UINT64_MAX) {
        __atomic_store_n(&vr->dropped, vr->dropped + 1, __ATOMIC_RELAXED);
        return;
    }
    memcpy(ss__vring_at(vr, pos), v, bytes);
    uint64_t value = (uint64_t)keep |
                     (cut > UINT32_MAX ? (uint64_t)UINT32_MAX : cut) << 32;
    if (ss__ring_push(&th->ring, SS__EV_VALUES, id, step, (ss__mono_ns)pos,
                      value))
        ss__vring_commit(vr, pos + bytes);
    else
        __atomic_store_n(&vr->dropped, vr->dropped + 1, __ATOMIC_RELAXED);
}

/* ---- not hot path ---- */

SS_API int ss_values_labels(ss_name_id id, const char *const *labels,
                            size_t n)
{
    if (id < 1 || id > SS_MAX_NAMES || !labels || n == 0 ||
        n > SS_MAX_VALUES)
        return SS_EINVAL;
    if (!active())
        return SS_ESTATE;
    return ss__sender_labels(id, labels, n);
}

SS_API void ss_memory_sample(void)
{
    if (!active() || rec_statm_fd < 0)
        return;
    char buf[128];
    ssize_t n = pread(rec_statm_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return;
    buf[n] = '\0';
    unsigned long long size_pages, rss_pages;
    if (sscanf(buf, "%llu %llu", &size_pages, &rss_pages) != 2)
        return;
    record(SS__EV_RSS, 0, current_step(), 0,
           (uint64_t)rss_pages * (uint64_t)rec_page_size);
}

SS_API void ss_memory_record(ss_mem_kind kind, uint64_t bytes)
{
    if ((kind == SS_MEM_DEVICE_ALLOCATED || kind == SS_MEM_DEVICE_PEAK) &&
        active())
        record(SS__EV_DEVICE, (unsigned)kind, current_step(), 0, bytes);
}

SS_API void ss_checkpoint_saved(uint64_t step)
{
    if (active())
        record(SS__EV_CHECKPOINT, 0, SS__NO_STEP, ss__now(), step);
}

SS_API void ss_resumed_from(uint64_t step)
{
    if (active() && step <= INT64_MAX)
        record(SS__EV_RESUMED, 0, SS__NO_STEP, ss__now(), step);
}

SS_API int ss_profile_enable(void)
{
    if (!active())
        return SS_ESTATE;
    ss__sender_profile_enable();
    return 0;
}

SS_API int ss_profile_poll(ss_profile_request *out)
{
    return active() ? ss__sender_profile_take(out) : 0;
}

SS_API int ss_profile_done(uint32_t request_id, int ok, int64_t marker_ns,
                           const char *text)
{
    if (!active())
        return SS_ESTATE;
    return ss__sender_profile_answer(request_id, ok, marker_ns, text);
}

SS_API int ss_enabled(void)
{
    return active() && !ss__sender_rejected();
}

SS_API ss_name_id ss_name(const char *name)
{
    ss_init();
    return ss__name_intern(name);
}

SS_API void ss_get_counters(ss_counters *out)
{
    if (!out)
        return;
    ss_init();
    out->dropped_events = ss__threads_dropped() + ss__sender_dropped_events();
    out->dropped_records = ss__sender_dropped_records();
    ss__threads_vector_drops(&out->dropped_vectors, &out->truncated_values);
    out->dropped_vectors += ss__sender_dropped_vectors();
}

SS_API const char *ss_strerror(int code)
{
    switch (code) {
    case SS_OK:
        return "success";
    case SS_EINVAL:
        return "invalid argument";
    case SS_ENAMES:
        return "the name table is full";
    case SS_EENV:
        return "the STEPSCOPE_* environment is malformed";
    case SS_ENOMEM:
        return "out of memory";
    case SS_ESTATE:
        return "call not valid in the current state";
    default:
        return "unknown error";
    }
}
