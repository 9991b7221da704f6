/*
 * nvml_timeline.c - a GPU's NVML samples, aligned to step intervals
 * (nvml_timeline.h).
 */
#include "nvml_timeline.h"

#include <stdlib.h>
#include <string.h>

struct ss_gpu_timeline {
    ss_gpu_sample ring[SS_GPU_TIMELINE_SAMPLES];
    uint32_t next;  /* where the next sample goes */
    uint32_t count; /* samples kept */
};

ss_gpu_timeline *ss_gpu_timeline_new(void)
{
    return calloc(1, sizeof(ss_gpu_timeline));
}

void ss_gpu_timeline_free(ss_gpu_timeline *tl)
{
    free(tl);
}

/* The K-th oldest sample kept (K < count). */
static const ss_gpu_sample *kept(const ss_gpu_timeline *tl, uint32_t k)
{
    uint32_t first = (tl->next + SS_GPU_TIMELINE_SAMPLES - tl->count) %
                     SS_GPU_TIMELINE_SAMPLES;
    return &tl->ring[(first + k) % SS_GPU_TIMELINE_SAMPLES];
}

void ss_gpu_timeline_add(ss_gpu_timeline *tl, const ss_gpu_sample *s)
{
    if (tl->count && s->at < kept(tl, tl->count - 1)->at)
        return;
    tl->ring[tl->next] = *s;
    tl->next = (tl->next + 1) % SS_GPU_TIMELINE_SAMPLES;
    if (tl->count < SS_GPU_TIMELINE_SAMPLES)
        tl->count++;
}

/* A time-weighted mean under way. */
typedef struct {
    double sum, weight;
} weighted;

static void weigh(weighted *m, int64_t value, ss_dur_ns w)
{
    if (value != SS_MISSING) {
        m->sum += (double)value * (double)w;
        m->weight += (double)w;
    }
}

static int64_t mean_of(const weighted *m)
{
    return m->weight > 0 ? (int64_t)(m->sum / m->weight + 0.5) : SS_MISSING;
}

/* How much a cumulative counter rose from BASE to LAST (SS_MISSING when
 * either is missing; a counter that went down, reset by a driver reload,
 * counts from zero). */
static int64_t rise(int64_t base, int64_t last)
{
    if (base == SS_MISSING || last == SS_MISSING)
        return SS_MISSING;
    return last >= base ? last - base : last;
}

int ss_gpu_timeline_window(const ss_gpu_timeline *tl, ss_mono_ns begin,
                           ss_mono_ns end, ss_gpu_step *out)
{
    memset(out, 0, sizeof *out);
    out->power_limit_mw = out->temperature_c = SS_MISSING;
    weighted sm = {0, 0}, power = {0, 0}, util = {0, 0};
    const ss_gpu_sample *last = NULL, *base = NULL;
    ss_dur_ns any = 0;
    /* Newest first, down to the sample in force when the window opened. */
    for (uint32_t k = tl->count; k-- > 0;) {
        const ss_gpu_sample *s = kept(tl, k);
        ss_mono_ns next_at =
            k + 1 < tl->count ? kept(tl, k + 1)->at : INT64_MAX;
        if (next_at <= begin)
            break;
        if (s->at >= end)
            continue;
        if (!last)
            last = s;
        base = s;
        ss_mono_ns hold_end = s->at + SS_GPU_SAMPLE_HOLD_NS;
        if (next_at < hold_end)
            hold_end = next_at;
        ss_mono_ns from = s->at > begin ? s->at : begin;
        ss_mono_ns to = hold_end < end ? hold_end : end;
        if (to <= from)
            continue;
        ss_dur_ns w = to - from;
        any += w;
        if (s->reasons_known) {
            out->covered_ns += w;
            int slowed = 0;
            for (int r = 0; r < SS_GPU_N_REASONS; r++)
                if (s->reasons & ss_gpu_reason_bit((ss_gpu_reason)r)) {
                    out->reason_ns[r] += w;
                    slowed |= ss_gpu_reason_slows((ss_gpu_reason)r);
                }
            if (slowed)
                out->slowed_ns += w;
        }
        weigh(&sm, s->sm_clock_mhz, w);
        weigh(&power, s->power_mw, w);
        weigh(&util, s->util_gpu_pct, w);
        if (s->temperature_c != SS_MISSING &&
            (out->temperature_c == SS_MISSING ||
             s->temperature_c > out->temperature_c))
            out->temperature_c = s->temperature_c;
        if (s->power_limit_mw != SS_MISSING &&
            (out->power_limit_mw == SS_MISSING ||
             s->power_limit_mw < out->power_limit_mw))
            out->power_limit_mw = s->power_limit_mw;
    }
    out->sm_clock_mhz = mean_of(&sm);
    out->power_mw = mean_of(&power);
    out->util_gpu_pct = mean_of(&util);
    out->ecc_uncorrected_new = SS_MISSING;
    out->xid_new = SS_MISSING;
    out->last_xid = SS_MISSING;
    if (last) {
        out->ecc_uncorrected_new =
            rise(base->ecc_uncorrected, last->ecc_uncorrected);
        out->xid_new = rise(base->xid_count, last->xid_count);
        if (last->xid_count != SS_MISSING)
            out->last_xid = last->last_xid;
    }
    return any > 0 ? 0 : -1;
}
