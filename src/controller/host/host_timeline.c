/*
 * host_timeline.c - host evidence of one rank, aligned to its steps
 * (host_timeline.h).
 *
 * Each sample stores its counters as an array of NFIELDS cumulative values
 * (SS_MISSING where unknown), so interpolation and deltas are one loop.
 */
#include "host_timeline.h"

#include <stdlib.h>
#include <string.h>

enum {
    F_CPU, F_RUNQ, F_THROTTLED, F_NR_THROTTLED, F_VOL, F_INVOL, F_MAJOR,
    F_PSI_CPU, F_PSI_MEM, F_PSI_IO, NFIELDS
};

typedef struct {
    ss_mono_ns at;
    int64_t v[NFIELDS];
} sample;

typedef struct {
    ss_mono_ns from, to; /* to == INT64_MAX: still stopped */
} stop_interval;

struct ss_host_timeline {
    sample samples[SS_HOST_TIMELINE_SAMPLES];
    uint32_t n_samples, head; /* head: index of the oldest */
    stop_interval stops[SS_HOST_TIMELINE_STOPS];
    uint32_t n_stops, stops_head;
    uint64_t stops_dropped; /* intervals overwritten (windows before them
                               are not exact any more) */
    ss_mono_ns stops_kept_since;
    ss_mono_ns following_since; /* the first sample: stops before it were
                                   not watched (INT64_MAX: none yet) */
};

ss_host_timeline *ss_host_timeline_new(void)
{
    ss_host_timeline *tl = calloc(1, sizeof *tl);
    if (tl) {
        tl->stops_kept_since = INT64_MIN;
        tl->following_since = INT64_MAX;
    }
    return tl;
}

void ss_host_timeline_free(ss_host_timeline *tl) { free(tl); }

void ss_host_step_clear(ss_host_step *h)
{
    h->cpu_ns = h->runq_ns = h->stopped_ns = h->throttled_ns = SS_MISSING;
    h->nr_throttled = h->vol_switches = h->invol_switches = SS_MISSING;
    h->major_faults = SS_MISSING;
    h->psi_cpu_ns = h->psi_memory_ns = h->psi_io_ns = SS_MISSING;
    memset(&h->gpu, 0, sizeof h->gpu); /* no GPU evidence */
}

static const sample *sample_at(const ss_host_timeline *tl, uint32_t i)
{
    return &tl->samples[(tl->head + i) % SS_HOST_TIMELINE_SAMPLES];
}

void ss_host_timeline_add(ss_host_timeline *tl, ss_mono_ns at,
                          const ss_proc_counters *proc,
                          const ss_cgroup_counters *cg)
{
    if (tl->n_samples && at < sample_at(tl, tl->n_samples - 1)->at)
        return;
    if (at < tl->following_since)
        tl->following_since = at;
    sample s = {.at = at};
    s.v[F_CPU] = proc->cpu_ns;
    s.v[F_RUNQ] = proc->runq_ns;
    s.v[F_VOL] = proc->vol_switches;
    s.v[F_INVOL] = proc->invol_switches;
    s.v[F_MAJOR] = proc->major_faults;
    s.v[F_THROTTLED] = cg ? cg->throttled_ns : SS_MISSING;
    s.v[F_NR_THROTTLED] = cg ? cg->nr_throttled : SS_MISSING;
    s.v[F_PSI_CPU] = cg ? cg->psi_cpu_ns : SS_MISSING;
    s.v[F_PSI_MEM] = cg ? cg->psi_memory_ns : SS_MISSING;
    s.v[F_PSI_IO] = cg ? cg->psi_io_ns : SS_MISSING;
    if (tl->n_samples < SS_HOST_TIMELINE_SAMPLES) {
        tl->samples[(tl->head + tl->n_samples++) % SS_HOST_TIMELINE_SAMPLES] = s;
    } else {
        tl->samples[tl->head] = s;
        tl->head = (tl->head + 1) % SS_HOST_TIMELINE_SAMPLES;
    }
}

static stop_interval *stop_at(ss_host_timeline *tl, uint32_t i)
{
    return &tl->stops[(tl->stops_head + i) % SS_HOST_TIMELINE_STOPS];
}

void ss_host_timeline_stopped(ss_host_timeline *tl, ss_mono_ns at)
{
    if (tl->n_stops && stop_at(tl, tl->n_stops - 1)->to == INT64_MAX)
        return; /* already stopped */
    stop_interval s = {at, INT64_MAX};
    if (tl->n_stops < SS_HOST_TIMELINE_STOPS) {
        *stop_at(tl, tl->n_stops++) = s;
        return;
    }
    tl->stops_kept_since = tl->stops[tl->stops_head].to;
    tl->stops_dropped++;
    tl->stops[tl->stops_head] = s;
    tl->stops_head = (tl->stops_head + 1) % SS_HOST_TIMELINE_STOPS;
}

void ss_host_timeline_continued(ss_host_timeline *tl, ss_mono_ns at)
{
    if (!tl->n_stops)
        return;
    stop_interval *last = stop_at(tl, tl->n_stops - 1);
    if (last->to == INT64_MAX)
        last->to = at < last->from ? last->from : at;
}

/* The counters interpolated at T into V; -1 when T is outside the samples. */
static int value_at(const ss_host_timeline *tl, ss_mono_ns t, int64_t *v)
{
    if (!tl->n_samples || t < sample_at(tl, 0)->at ||
        t > sample_at(tl, tl->n_samples - 1)->at)
        return -1;
    uint32_t lo = 0, hi = tl->n_samples - 1; /* samples[lo].at <= t */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sample_at(tl, mid)->at <= t)
            lo = mid;
        else
            hi = mid;
    }
    const sample *a = sample_at(tl, lo), *b = sample_at(tl, hi);
    if (b->at < t || lo == hi)
        b = a;
    double f = b->at > a->at ? (double)(t - a->at) / (double)(b->at - a->at) : 0;
    for (int i = 0; i < NFIELDS; i++) {
        if (a->v[i] == SS_MISSING || b->v[i] == SS_MISSING)
            v[i] = SS_MISSING;
        else
            v[i] = a->v[i] + (int64_t)((double)(b->v[i] - a->v[i]) * f + 0.5);
    }
    return 0;
}

static ss_dur_ns stopped_in(const ss_host_timeline *tl, ss_mono_ns begin,
                            ss_mono_ns end)
{
    if (begin < tl->stops_kept_since || begin < tl->following_since)
        return SS_MISSING;
    ss_dur_ns sum = 0;
    for (uint32_t i = 0; i < tl->n_stops; i++) {
        const stop_interval *s =
            &tl->stops[(tl->stops_head + i) % SS_HOST_TIMELINE_STOPS];
        ss_mono_ns from = s->from > begin ? s->from : begin;
        ss_mono_ns to = s->to < end ? s->to : end;
        if (to > from)
            sum += to - from;
    }
    return sum;
}

int ss_host_timeline_window(const ss_host_timeline *tl, ss_mono_ns begin,
                            ss_mono_ns end, ss_host_step *out)
{
    ss_host_step_clear(out);
    out->stopped_ns = end >= begin ? stopped_in(tl, begin, end) : SS_MISSING;
    int64_t a[NFIELDS], b[NFIELDS];
    if (end < begin || value_at(tl, begin, a) || value_at(tl, end, b))
        return -1;
    int64_t d[NFIELDS];
    for (int i = 0; i < NFIELDS; i++)
        d[i] = a[i] == SS_MISSING || b[i] == SS_MISSING || b[i] < a[i]
                   ? SS_MISSING
                   : b[i] - a[i];
    out->cpu_ns = d[F_CPU];
    out->runq_ns = d[F_RUNQ];
    out->throttled_ns = d[F_THROTTLED];
    out->nr_throttled = d[F_NR_THROTTLED];
    out->vol_switches = d[F_VOL];
    out->invol_switches = d[F_INVOL];
    out->major_faults = d[F_MAJOR];
    out->psi_cpu_ns = d[F_PSI_CPU];
    out->psi_memory_ns = d[F_PSI_MEM];
    out->psi_io_ns = d[F_PSI_IO];
    return 0;
}
