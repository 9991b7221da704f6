/*
 * live.c - the live state of the run a controller drives (live.h).
 *
 * One mutex guards everything; the loop thread's setters hold it for a few
 * stores (a finalized step: a copy of its phase and sync statistics), the
 * HTTP threads' readers for a copy.  The feed is a ring of the last
 * SS_LIVE_FEED_SIZE notifications, each a ready-made server-sent event;
 * a condition variable wakes stream readers.  Step notifications are
 * formatted (outside the lock) only while a stream reader is registered,
 * so a controller nobody watches pays nothing for them.
 */
#include "live.h"

#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "objects.h"

typedef struct {
    char state[16];
    char host[256];
    int64_t pid;
    int64_t last_step;
    int64_t current_step;
    char phase[SS_LIVE_NAME_MAX];
    ss_mono_ns phase_since; /* 0 unknown */
    ss_mono_ns heard;       /* 0 never */
    int64_t exit_code, term_signal;
    int64_t dropped_events, dropped_records;
    int64_t step_ns, rss_bytes; /* in the latest finalized step */
    int have_host;
    ss_host_step host_totals; /* since the controller began reading */
} rank_live;

typedef struct {
    char name[SS_LIVE_NAME_MAX];
    ss_stat stat;
} phase_live;

typedef struct {
    char name[SS_LIVE_NAME_MAX];
    ss_dur_ns skew_ns, late_ns;
    int32_t worst_rank;
} sync_live;

typedef struct {
    uint32_t id;
    char kind[32];
    int critical;
} finding_live;

struct ss_live {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int64_t run_id;
    uint32_t world;
    rank_live *ranks;
    int finished;
    uint32_t attempt;

    /* the latest finalized step */
    int have_step;
    uint64_t step;
    uint32_t n_missing;
    ss_stat step_time;
    uint32_t n_phases, n_syncs;
    phase_live phases[SS_MAX_RUN_NAMES];
    sync_live syncs[SS_MAX_RUN_NAMES];
    uint64_t steps_finalized;

    finding_live *findings;
    size_t n_findings, cap_findings;

    /* the feed: notification s lives in feed[s % SS_LIVE_FEED_SIZE] */
    int readers;
    uint64_t feed_next;
    char *feed[SS_LIVE_FEED_SIZE];
};

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* A rank launched and not heard from yet. */
static void rank_starting(rank_live *r)
{
    memset(r, 0, sizeof *r);
    copy_str(r->state, sizeof r->state, "starting");
    r->pid = r->last_step = r->current_step = -1;
    r->exit_code = r->term_signal = -1;
    r->dropped_events = r->dropped_records = -1;
    r->step_ns = r->rss_bytes = SS_MISSING;
}

ss_live *ss_live_create(int64_t run_id, uint32_t world_size)
{
    ss_live *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->ranks = calloc(world_size ? world_size : 1, sizeof *l->ranks);
    if (!l->ranks) {
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cond, &ca);
    pthread_condattr_destroy(&ca);
    l->run_id = run_id;
    l->world = world_size;
    for (uint32_t i = 0; i < world_size; i++)
        rank_starting(&l->ranks[i]);
    return l;
}

void ss_live_attempt(ss_live *l, uint32_t attempt)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->attempt = attempt;
    for (uint32_t i = 0; i < l->world; i++)
        rank_starting(&l->ranks[i]);
    pthread_mutex_unlock(&l->mu);
}

uint32_t ss_live_get_attempt(ss_live *l)
{
    pthread_mutex_lock(&l->mu);
    uint32_t a = l->attempt;
    pthread_mutex_unlock(&l->mu);
    return a;
}

void ss_live_destroy(ss_live *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < SS_LIVE_FEED_SIZE; i++)
        free(l->feed[i]);
    free(l->findings);
    free(l->ranks);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---- writers ---- */

/* Locks L and returns RANK's slot, or NULL (not locked) when out of
 * range. */
static rank_live *lock_rank(ss_live *l, uint32_t rank)
{
    if (!l || rank >= l->world)
        return NULL;
    pthread_mutex_lock(&l->mu);
    return &l->ranks[rank];
}

void ss_live_rank_hello(ss_live *l, uint32_t rank, const char *host,
                        int64_t pid)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    copy_str(r->host, sizeof r->host, host);
    r->pid = pid;
    copy_str(r->state, sizeof r->state, "running");
    r->heard = ss_mono_now();
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_heard(ss_live *l, uint32_t rank)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    r->heard = ss_mono_now();
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_step(ss_live *l, uint32_t rank, uint64_t step)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    r->last_step = step > INT64_MAX ? INT64_MAX : (int64_t)step;
    r->heard = ss_mono_now();
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_host(ss_live *l, uint32_t rank, const ss_host_step *totals)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    r->host_totals = *totals;
    r->have_host = 1;
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_counters(ss_live *l, uint32_t rank, uint64_t dropped_events,
                           uint64_t dropped_records)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    r->dropped_events = dropped_events > INT64_MAX ? INT64_MAX
                                                   : (int64_t)dropped_events;
    r->dropped_records = dropped_records > INT64_MAX
                             ? INT64_MAX
                             : (int64_t)dropped_records;
    r->heard = ss_mono_now();
    pthread_mutex_unlock(&l->mu);
}

/* Sets the phase of R (locked) with its start time SINCE (0: now). */
static void set_phase(rank_live *r, const char *phase, ss_mono_ns since,
                      ss_mono_ns now)
{
    const char *p = phase ? phase : "";
    if (strncmp(r->phase, p, sizeof r->phase - 1) != 0 || since > 0)
        r->phase_since = since > 0 && since <= now ? since : now;
    copy_str(r->phase, sizeof r->phase, p);
}

void ss_live_rank_status(ss_live *l, uint32_t rank, int64_t step,
                         const char *phase_or_null, ss_mono_ns since)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    ss_mono_ns now = ss_mono_now();
    r->current_step = step < 0 ? -1 : step;
    set_phase(r, phase_or_null, since, now);
    r->heard = now;
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_phase(ss_live *l, uint32_t rank, const char *phase_or_null)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    ss_mono_ns now = ss_mono_now();
    set_phase(r, phase_or_null, 0, now);
    r->heard = now;
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_state(ss_live *l, uint32_t rank, const char *state)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    copy_str(r->state, sizeof r->state, state);
    if (strcmp(r->state, "running") != 0) {
        r->phase[0] = '\0';
        r->current_step = -1;
    }
    pthread_mutex_unlock(&l->mu);
}

void ss_live_rank_exit(ss_live *l, uint32_t rank, int64_t exit_code,
                       int term_signal)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return;
    r->exit_code = term_signal ? -1 : exit_code;
    r->term_signal = term_signal;
    copy_str(r->state, sizeof r->state,
             exit_code == 0 && term_signal == 0 ? "exited" : "failed");
    r->phase[0] = '\0';
    r->current_step = -1;
    pthread_mutex_unlock(&l->mu);
}

/* Appends EVENT (ownership taken) to the feed and wakes readers; L
 * locked. */
static void feed_push(ss_live *l, char *event)
{
    char **slot = &l->feed[l->feed_next % SS_LIVE_FEED_SIZE];
    free(*slot);
    *slot = event;
    l->feed_next++;
    pthread_cond_broadcast(&l->cond);
}

/* The server-sent event "event: KIND\ndata: JSON\n\n", or NULL when out
 * of memory. */
static char *sse_event(const char *kind, ss_buf *json)
{
    if (json->oom || !json->data)
        return NULL;
    ss_buf e = {0};
    ss_buf_printf(&e, "event: %s\ndata: ", kind);
    ss_buf_add(&e, json->data, json->len);
    ss_buf_puts(&e, "\n\n");
    if (e.oom) {
        ss_buf_free(&e);
        return NULL;
    }
    return e.data;
}

void ss_live_step(ss_live *l, const ss_step_view *v, const char *const *names)
{
    if (!l)
        return;
    char *event = NULL;
    if (__atomic_load_n(&l->readers, __ATOMIC_ACQUIRE) > 0) {
        ss_buf json = {0};
        ss_obj_step(&json, v, names);
        event = sse_event("step", &json);
        ss_buf_free(&json);
    }
    pthread_mutex_lock(&l->mu);
    l->have_step = 1;
    l->step = v->step;
    l->n_missing = v->n_missing;
    l->step_time = v->step_time;
    l->steps_finalized++;
    l->n_phases = 0;
    for (uint32_t i = 0; i < v->n_phases && i < SS_MAX_RUN_NAMES; i++) {
        int idx = v->phases[i].name;
        phase_live *p = &l->phases[l->n_phases++];
        copy_str(p->name, sizeof p->name,
                 names && idx >= 0 && names[idx] ? names[idx] : "?");
        p->stat = v->phases[i].stat;
    }
    l->n_syncs = 0;
    for (uint32_t i = 0; i < v->n_syncs && i < SS_MAX_RUN_NAMES; i++) {
        int idx = v->syncs[i].name;
        sync_live *y = &l->syncs[l->n_syncs++];
        copy_str(y->name, sizeof y->name,
                 names && idx >= 0 && names[idx] ? names[idx] : "?");
        y->skew_ns = v->syncs[i].skew_ns;
        y->late_ns = v->syncs[i].late_ns;
        y->worst_rank = v->syncs[i].worst_rank;
    }
    for (uint32_t i = 0; i < l->world && v->ranks && i < v->world_size; i++) {
        const ss_rank_step *rs = &v->ranks[i];
        l->ranks[i].step_ns = rs->present ? rs->step_ns : SS_MISSING;
        if (rs->present && rs->rss_bytes != SS_MISSING)
            l->ranks[i].rss_bytes = rs->rss_bytes;
    }
    if (event)
        feed_push(l, event);
    pthread_mutex_unlock(&l->mu);
}

void ss_live_finding(ss_live *l, const ss_finding *f)
{
    if (!l)
        return;
    ss_buf json = {0};
    ss_obj_finding(&json, f);
    char *event = sse_event("finding", &json);
    ss_buf_free(&json);
    pthread_mutex_lock(&l->mu);
    finding_live *x = NULL;
    for (size_t i = 0; i < l->n_findings; i++)
        if (l->findings[i].id == f->id)
            x = &l->findings[i];
    if (!x && l->n_findings == l->cap_findings) {
        size_t cap = l->cap_findings ? l->cap_findings * 2 : 16;
        finding_live *g = realloc(l->findings, cap * sizeof *g);
        if (g) {
            l->findings = g;
            l->cap_findings = cap;
        }
    }
    if (!x && l->n_findings < l->cap_findings)
        x = &l->findings[l->n_findings++];
    if (x) {
        x->id = f->id;
        copy_str(x->kind, sizeof x->kind, f->kind);
        x->critical = f->severity == SS_CRITICAL;
    }
    if (event)
        feed_push(l, event);
    pthread_mutex_unlock(&l->mu);
}

void ss_live_finish(ss_live *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->finished = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->mu);
}

/* ---- readers ---- */

int64_t ss_live_run_id(const ss_live *l)
{
    return l->run_id; /* set once at creation */
}

uint32_t ss_live_world_size(const ss_live *l)
{
    return l->world;
}

int ss_live_running(ss_live *l)
{
    pthread_mutex_lock(&l->mu);
    int running = !l->finished;
    pthread_mutex_unlock(&l->mu);
    return running;
}

int ss_live_rank_get(ss_live *l, uint32_t rank, ss_live_rank_info *out)
{
    rank_live *r = lock_rank(l, rank);
    if (!r)
        return -1;
    ss_mono_ns now = ss_mono_now();
    copy_str(out->state, sizeof out->state, r->state);
    copy_str(out->host, sizeof out->host, r->host);
    out->pid = r->pid;
    out->last_step = r->last_step;
    out->current_step = r->current_step;
    copy_str(out->phase, sizeof out->phase, r->phase);
    out->phase_s = r->phase[0] && r->phase_since
                       ? (double)(now - r->phase_since) / 1e9
                       : -1;
    out->last_heard_s = r->heard ? (double)(now - r->heard) / 1e9 : -1;
    out->exit_code = r->exit_code;
    out->term_signal = r->term_signal;
    out->dropped_events = r->dropped_events;
    out->dropped_records = r->dropped_records;
    out->step_ns = r->step_ns;
    out->rss_bytes = r->rss_bytes;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* ---- the feed ---- */

void ss_live_feed_join(ss_live *l, ss_live_cursor *c)
{
    pthread_mutex_lock(&l->mu);
    __atomic_add_fetch(&l->readers, 1, __ATOMIC_RELEASE);
    c->next = l->feed_next;
    pthread_mutex_unlock(&l->mu);
}

void ss_live_feed_leave(ss_live *l)
{
    __atomic_sub_fetch(&l->readers, 1, __ATOMIC_RELEASE);
}

int ss_live_feed_wait(ss_live *l, ss_live_cursor *c, int timeout_ms,
                      ss_buf *out)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&l->mu);
    while (c->next == l->feed_next && !l->finished)
        if (pthread_cond_timedwait(&l->cond, &l->mu, &until) != 0)
            break;
    int n = 0;
    if (l->feed_next - c->next > SS_LIVE_FEED_SIZE) {
        uint64_t skipped = l->feed_next - SS_LIVE_FEED_SIZE - c->next;
        ss_buf_printf(out, "event: lagged\ndata: {\"skipped\":%" PRIu64
                      "}\n\n", skipped);
        c->next += skipped;
        n++;
    }
    for (; c->next < l->feed_next; c->next++, n++) {
        const char *e = l->feed[c->next % SS_LIVE_FEED_SIZE];
        if (e)
            ss_buf_puts(out, e);
    }
    int done = l->finished && n == 0;
    pthread_mutex_unlock(&l->mu);
    if (out->oom)
        return -2;
    return done ? -1 : n;
}

/* ---- Prometheus ---- */

/* A label value, escaped per the exposition format. */
static void label(ss_buf *b, const char *s)
{
    ss_buf_add(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            ss_buf_printf(b, "\\%c", *s);
        else if (*s == '\n')
            ss_buf_puts(b, "\\n");
        else
            ss_buf_add(b, s, 1);
    }
    ss_buf_add(b, "\"", 1);
}

static void help(ss_buf *b, const char *name, const char *type,
                 const char *text)
{
    ss_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

/* The per-rank GPU counters (docs/api.md), for the ranks whose GPU NVML
 * reads: time held below its clocks, by reason; Xid and ECC errors; the
 * GPU's index as a label. */
static void gpu_metrics(ss_buf *out, const ss_live *l, const char *run)
{
    int any = 0;
    for (uint32_t i = 0; i < l->world && !any; i++)
        any = l->ranks[i].have_host && l->ranks[i].host_totals.gpu.present;
    if (!any)
        return;
    static const char *const reasons[] = {"any", "power_cap", "thermal",
                                          "hw_slowdown"};
    help(out, "stepscope_rank_gpu_throttled_seconds_total", "counter",
         "Time the rank's GPU was held below its clocks, by reason (any: "
         "every reason that slows the work).");
    for (uint32_t i = 0; i < l->world; i++) {
        const ss_gpu_evidence *g = &l->ranks[i].host_totals.gpu;
        if (!l->ranks[i].have_host || !g->present)
            continue;
        const int64_t v[] = {g->slowed_ns, g->power_cap_ns, g->thermal_ns,
                             g->hw_slowdown_ns};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            if (v[k] != SS_MISSING)
                ss_buf_printf(out,
                              "stepscope_rank_gpu_throttled_seconds_total{%s,"
                              "rank=\"%" PRIu32 "\",gpu=\"%d\",reason=\"%s\"} "
                              "%.6f\n",
                              run, i, (int)g->index, reasons[k],
                              (double)v[k] / 1e9);
    }
    static const struct {
        const char *name, *help;
        size_t field;
    } errors[] = {
        {"stepscope_rank_gpu_xid_errors_total",
         "Xid errors the rank's GPU reported.",
         offsetof(ss_gpu_evidence, xid_new)},
        {"stepscope_rank_gpu_ecc_errors_total",
         "Uncorrected ECC errors the rank's GPU reported.",
         offsetof(ss_gpu_evidence, ecc_new)},
    };
    for (size_t m = 0; m < sizeof errors / sizeof errors[0]; m++) {
        help(out, errors[m].name, "counter", errors[m].help);
        for (uint32_t i = 0; i < l->world; i++) {
            const ss_gpu_evidence *g = &l->ranks[i].host_totals.gpu;
            int64_t v;
            memcpy(&v, (const char *)g + errors[m].field, sizeof v);
            if (!l->ranks[i].have_host || !g->present || v == SS_MISSING)
                continue;
            ss_buf_printf(out, "%s{%s,rank=\"%" PRIu32 "\",gpu=\"%d\"} %" PRId64
                               "\n", errors[m].name, run, i, (int)g->index, v);
        }
    }
}

/* The per-rank host counters (docs/api.md): what the host saw of each
 * rank's process tree since the controller began reading it. */
static void host_metrics(ss_buf *out, const ss_live *l, const char *run)
{
    static const struct {
        const char *name, *help;
        size_t field; /* offset in ss_host_step */
        int seconds;  /* a duration in ns, exported in seconds */
    } host[] = {
        {"stepscope_rank_cpu_seconds_total",
         "CPU time the rank's process tree used.",
         offsetof(ss_host_step, cpu_ns), 1},
        {"stepscope_rank_runqueue_seconds_total",
         "Time the rank's threads were runnable but waited for a CPU "
         "(run-queue delay).", offsetof(ss_host_step, runq_ns), 1},
        {"stepscope_rank_stopped_seconds_total",
         "Time the rank's process was stopped (SIGSTOP, a debugger).",
         offsetof(ss_host_step, stopped_ns), 1},
        {"stepscope_rank_throttled_seconds_total",
         "Time the rank's cgroup was throttled (CPU quota spent).",
         offsetof(ss_host_step, throttled_ns), 1},
        {"stepscope_rank_involuntary_switches_total",
         "Times the rank's main threads were preempted.",
         offsetof(ss_host_step, invol_switches), 0},
        {"stepscope_rank_major_faults_total",
         "Page faults of the rank's process tree that waited for I/O.",
         offsetof(ss_host_step, major_faults), 0},
    };
    int any = 0;
    for (uint32_t i = 0; i < l->world && !any; i++)
        any = l->ranks[i].have_host;
    if (!any)
        return;
    for (size_t m = 0; m < sizeof host / sizeof host[0]; m++) {
        help(out, host[m].name, "counter", host[m].help);
        for (uint32_t i = 0; i < l->world; i++) {
            const rank_live *r = &l->ranks[i];
            int64_t v;
            memcpy(&v, (const char *)&r->host_totals + host[m].field, sizeof v);
            if (!r->have_host || v == SS_MISSING)
                continue;
            ss_buf_printf(out, "%s{%s,rank=\"%" PRIu32 "\"} ", host[m].name,
                          run, i);
            if (host[m].seconds)
                ss_buf_printf(out, "%.6f\n", (double)v / 1e9);
            else
                ss_buf_printf(out, "%" PRId64 "\n", v);
        }
    }
    gpu_metrics(out, l, run);
}

/* NAME{run="ID"[,EXTRA]} as seconds (nanoseconds in), skipped when
 * missing. */
static void sample_secs(ss_buf *b, const char *series, int64_t ns)
{
    if (ns == SS_MISSING)
        return;
    ss_buf_printf(b, "%s %.9f\n", series, (double)ns / 1e9);
}

static void stat_samples(ss_buf *b, const char *prefix, const ss_stat *s)
{
    static const char *const names[4] = {"min", "median", "p90", "max"};
    const int64_t v[4] = {s->min, s->median, s->p90, s->max};
    char series[256];
    for (int i = 0; i < 4; i++) {
        snprintf(series, sizeof series, "%sstat=\"%s\"}", prefix, names[i]);
        sample_secs(b, series, v[i]);
    }
}

int ss_live_metrics(ss_live *l, ss_buf *out)
{
    pthread_mutex_lock(&l->mu);
    ss_mono_ns now = ss_mono_now();
    char run[32];
    snprintf(run, sizeof run, "run=\"%" PRId64 "\"", l->run_id);

    help(out, "stepscope_run_running", "gauge",
         "1 while the run is going, 0 once every rank has left.");
    ss_buf_printf(out, "stepscope_run_running{%s} %d\n", run, !l->finished);
    help(out, "stepscope_attempt", "gauge",
         "The current attempt (TORCHELASTIC_RESTART_COUNT): 0 until a "
         "restart.");
    ss_buf_printf(out, "stepscope_attempt{%s} %" PRIu32 "\n", run,
                  l->attempt);
    help(out, "stepscope_world_size", "gauge", "Ranks launched.");
    ss_buf_printf(out, "stepscope_world_size{%s} %" PRIu32 "\n", run,
                  l->world);
    help(out, "stepscope_steps_finalized_total", "counter",
         "Steps finalized (every live rank completed them).");
    ss_buf_printf(out, "stepscope_steps_finalized_total{%s} %" PRIu64 "\n",
                  run, l->steps_finalized);

    if (l->have_step) {
        help(out, "stepscope_last_step", "gauge",
             "The latest finalized step.");
        ss_buf_printf(out, "stepscope_last_step{%s} %" PRIu64 "\n", run,
                      l->step);
        help(out, "stepscope_step_seconds", "gauge",
             "Step time over the ranks in the latest finalized step "
             "(stat: min, median, p90, max = the worst rank).");
        char prefix[128];
        snprintf(prefix, sizeof prefix, "stepscope_step_seconds{%s,", run);
        stat_samples(out, prefix, &l->step_time);
        if (l->step_time.worst_rank >= 0) {
            help(out, "stepscope_step_worst_rank", "gauge",
                 "The slowest rank in the latest finalized step.");
            ss_buf_printf(out, "stepscope_step_worst_rank{%s} %" PRId32 "\n",
                          run, l->step_time.worst_rank);
        }
        help(out, "stepscope_step_missing_ranks", "gauge",
             "Ranks missing from the latest finalized step.");
        ss_buf_printf(out, "stepscope_step_missing_ranks{%s} %" PRIu32 "\n",
                      run, l->n_missing);
        if (l->n_phases)
            help(out, "stepscope_phase_seconds", "gauge",
                 "Phase duration over the ranks in the latest finalized "
                 "step (stat: min, median, p90, max).");
        for (uint32_t i = 0; i < l->n_phases; i++) {
            ss_buf p = {0};
            ss_buf_printf(&p, "stepscope_phase_seconds{%s,phase=", run);
            label(&p, l->phases[i].name);
            ss_buf_puts(&p, ",");
            if (!p.oom)
                stat_samples(out, p.data, &l->phases[i].stat);
            ss_buf_free(&p);
        }
        if (l->n_syncs)
            help(out, "stepscope_sync_skew_seconds", "gauge",
                 "Arrival skew (last - first rank) at each sync point in "
                 "the latest finalized step.");
        for (uint32_t i = 0; i < l->n_syncs; i++) {
            if (l->syncs[i].skew_ns == SS_MISSING)
                continue;
            ss_buf_printf(out, "stepscope_sync_skew_seconds{%s,sync=", run);
            label(out, l->syncs[i].name);
            ss_buf_printf(out, "} %.9f\n",
                          (double)l->syncs[i].skew_ns / 1e9);
        }
    }

    static const struct {
        const char *name, *type, *help;
    } per_rank[] = {
        {"stepscope_rank_up", "gauge",
         "1 while the rank is connected and running."},
        {"stepscope_rank_last_step", "gauge",
         "The last step the rank completed."},
        {"stepscope_rank_step_seconds", "gauge",
         "The rank's step time in the latest finalized step."},
        {"stepscope_rank_rss_bytes", "gauge",
         "The rank's resident memory in the latest step that sampled it."},
        {"stepscope_rank_last_heard_seconds", "gauge",
         "Seconds since the rank's last frame."},
        {"stepscope_dropped_events_total", "counter",
         "Events the rank's recorder dropped."},
        {"stepscope_dropped_records_total", "counter",
         "Step records the rank's recorder dropped."},
    };
    for (size_t m = 0; m < sizeof per_rank / sizeof per_rank[0]; m++) {
        help(out, per_rank[m].name, per_rank[m].type, per_rank[m].help);
        for (uint32_t i = 0; i < l->world; i++) {
            const rank_live *r = &l->ranks[i];
            char series[160];
            snprintf(series, sizeof series, "%s{%s,rank=\"%" PRIu32 "\"}",
                     per_rank[m].name, run, i);
            switch (m) {
            case 0:
                ss_buf_printf(out, "%s %d\n", series,
                              strcmp(r->state, "running") == 0);
                break;
            case 1:
                if (r->last_step >= 0)
                    ss_buf_printf(out, "%s %" PRId64 "\n", series,
                                  r->last_step);
                break;
            case 2:
                sample_secs(out, series, r->step_ns);
                break;
            case 3:
                if (r->rss_bytes != SS_MISSING)
                    ss_buf_printf(out, "%s %" PRId64 "\n", series,
                                  r->rss_bytes);
                break;
            case 4:
                if (r->heard)
                    ss_buf_printf(out, "%s %.3f\n", series,
                                  (double)(now - r->heard) / 1e9);
                break;
            case 5:
                if (r->dropped_events >= 0)
                    ss_buf_printf(out, "%s %" PRId64 "\n", series,
                                  r->dropped_events);
                break;
            default:
                if (r->dropped_records >= 0)
                    ss_buf_printf(out, "%s %" PRId64 "\n", series,
                                  r->dropped_records);
                break;
            }
        }
    }

    host_metrics(out, l, run);

    help(out, "stepscope_findings", "gauge",
         "Findings of the run so far, by kind and severity.");
    for (size_t i = 0; i < l->n_findings; i++) {
        const finding_live *f = &l->findings[i];
        int seen = 0;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(l->findings[k].kind, f->kind) == 0 &&
                   l->findings[k].critical == f->critical;
        if (seen)
            continue;
        size_t count = 0;
        for (size_t k = i; k < l->n_findings; k++)
            count += strcmp(l->findings[k].kind, f->kind) == 0 &&
                     l->findings[k].critical == f->critical;
        ss_buf_printf(out, "stepscope_findings{%s,kind=", run);
        label(out, f->kind);
        ss_buf_printf(out, ",severity=\"%s\"} %zu\n",
                      f->critical ? "critical" : "warning", count);
    }
    pthread_mutex_unlock(&l->mu);
    return out->oom ? -1 : 0;
}
