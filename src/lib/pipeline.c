/*
 * pipeline.c - pipeline-parallel microbatch spans (include/stepscope.h,
 * docs/workloads.md#pipelines).
 *
 * The hot path is two calls per microbatch on the stage's compute thread:
 * ss_microbatch_begin stores the index, the kind and a vDSO timestamp in
 * the thread's open slot, ss_microbatch_end appends the finished span to a
 * fixed per-thread array of SS_PIPE_MAX_SPANS (past it, spans are dropped
 * and counted).  The array (6 KiB) is allocated at the thread's first
 * microbatch and freed when the thread exits: a thread-local pointer, not
 * a thread-local array, because the recorder is also linked into a Python
 * extension, loaded late, whose static TLS block is small.  Nothing is sent per span: when the thread ends the step
 * (ss_step_end, or ss_step_begin of the next one), recorder.c calls
 * ss__pipeline_step_flush, which turns the spans into one vector,
 *
 *   pipeline.spans  = [index, kind, begin, end] per span, kind 1 F, 2 B,
 *                     3 W, begin and end in ns after the step's begin,
 *
 * and the shape declared by ss_pipeline into another,
 *
 *   pipeline.config = [stage, stages, schedule, microbatches, chunks,
 *                      dropped spans of the step],
 *
 * both through ss_values, so they reach the controller with the step.  The
 * step's begin is the time ss_step_begin recorded, so the controller adds
 * the offsets to the rank's aligned step begin to place the spans.
 */
#include "stepscope.h"

#include <pthread.h>
#include <stdlib.h>

#include "pipeline.h"

#define SS_API __attribute__((visibility("default")))

enum { K_F = 1, K_B = 2, K_W = 3 };

typedef struct {
    uint32_t index;
    uint32_t kind;
    ss__mono_ns begin, end;
} span;

/* One thread's spans since its last flush; only that thread touches it. */
typedef struct {
    uint32_t n, dropped;
    uint32_t open_kind; /* 0: no span open */
    uint32_t open_index;
    ss__mono_ns open_begin;
    span spans[SS_PIPE_MAX_SPANS];
} thread_spans;

static _Thread_local thread_spans *tl;
static pthread_key_t tl_key; /* frees a thread's spans at its exit */
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static int tl_key_ok;
/* Spans lost because a thread's buffer could not be allocated (atomic);
 * reported with the next flush of any thread. */
static uint32_t alloc_dropped;

/* The declared shape (atomics: written by ss_pipeline, read at flushes);
 * stages 0 means "not declared". */
static uint32_t pipe_stage, pipe_stages, pipe_schedule, pipe_mb, pipe_chunks;
/* The open step's begin (atomic), set by the thread that began it. */
static ss__mono_ns step_begin_ns;

SS_API int ss_pipeline(uint32_t stage, uint32_t stages,
                       ss_pipe_schedule schedule, uint32_t microbatches,
                       uint32_t chunks)
{
    if (stages == 0 || stages > 4096 || stage >= stages ||
        schedule < SS_PIPE_GPIPE || schedule > SS_PIPE_DUALPIPE ||
        microbatches == 0 || chunks == 0 ||
        (chunks != 1 && schedule != SS_PIPE_INTERLEAVED) ||
        (schedule == SS_PIPE_DUALPIPE && stages % 2))
        return SS_EINVAL;
    __atomic_store_n(&pipe_stage, stage, __ATOMIC_RELAXED);
    __atomic_store_n(&pipe_schedule, (uint32_t)schedule, __ATOMIC_RELAXED);
    __atomic_store_n(&pipe_mb, microbatches, __ATOMIC_RELAXED);
    __atomic_store_n(&pipe_chunks, chunks, __ATOMIC_RELAXED);
    __atomic_store_n(&pipe_stages, stages, __ATOMIC_RELEASE);
    return SS_OK;
}

static void make_key(void)
{
    tl_key_ok = pthread_key_create(&tl_key, free) == 0;
}

/* The calling thread's buffer, allocated at its first use; NULL when out
 * of memory (the span is counted as dropped). */
static thread_spans *spans_of_thread(void)
{
    thread_spans *s = tl;
    if (__builtin_expect(s != NULL, 1))
        return s;
    pthread_once(&tl_once, make_key);
    if (!tl_key_ok || !(s = calloc(1, sizeof *s))) {
        __atomic_add_fetch(&alloc_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    pthread_setspecific(tl_key, s);
    return tl = s;
}

static inline void close_open(thread_spans *s, ss__mono_ns t)
{
    if (!s->open_kind)
        return;
    if (s->n < SS_PIPE_MAX_SPANS)
        s->spans[s->n++] = (span){s->open_index, s->open_kind, s->open_begin,
                                  t};
    else
        s->dropped++;
    s->open_kind = 0;
}

SS_API void ss_microbatch_begin(uint32_t index, char kind)
{
    ss__mono_ns t = ss__now();
    thread_spans *s = spans_of_thread();
    if (!s)
        return;
    uint32_t k = kind == 'F' ? K_F : kind == 'B' ? K_B : kind == 'W' ? K_W : 0;
    close_open(s, t);
    if (!k) {
        s->dropped++;
        return;
    }
    s->open_kind = k;
    s->open_index = index;
    s->open_begin = t;
}

SS_API void ss_microbatch_end(void)
{
    thread_spans *s = tl;
    if (s)
        close_open(s, ss__now());
}

void ss__pipeline_step_begin(ss__mono_ns t)
{
    __atomic_store_n(&step_begin_ns, t, __ATOMIC_RELAXED);
}

void ss__pipeline_step_flush(void)
{
    thread_spans *s = tl;
    uint32_t stages = __atomic_load_n(&pipe_stages, __ATOMIC_ACQUIRE);
    if (!s && !stages)
        return; /* not a pipeline: nothing to say */
    static thread_spans none; /* a thread without spans reads as empty */
    if (!s)
        s = &none;
    uint32_t lost = __atomic_exchange_n(&alloc_dropped, 0, __ATOMIC_RELAXED);
    ss__mono_ns t0 = __atomic_load_n(&step_begin_ns, __ATOMIC_RELAXED);
    if (s->n) {
        double v[4 * SS_PIPE_MAX_SPANS];
        for (uint32_t i = 0; i < s->n; i++) {
            v[4 * i] = s->spans[i].index;
            v[4 * i + 1] = s->spans[i].kind;
            v[4 * i + 2] = (double)(s->spans[i].begin - t0);
            v[4 * i + 3] = (double)(s->spans[i].end - t0);
        }
        ss_values(SS_NAME("pipeline.spans"), v, 4 * (size_t)s->n);
    }
    if (stages) {
        double c[6] = {__atomic_load_n(&pipe_stage, __ATOMIC_RELAXED), stages,
                       __atomic_load_n(&pipe_schedule, __ATOMIC_RELAXED),
                       __atomic_load_n(&pipe_mb, __ATOMIC_RELAXED),
                       __atomic_load_n(&pipe_chunks, __ATOMIC_RELAXED),
                       (double)s->dropped + lost};
        ss_values(SS_NAME("pipeline.config"), c, 6);
    }
    if (s != &none) {
        s->n = 0;
        s->dropped = 0;
    }
}
