/*
 * detect_memory.c - the three memory detectors, for RSS and for device
 * memory alike: memory_spike, memory_creep and memory_imbalance.
 *
 * They share one walk over the ranks of each step and one lazily allocated
 * state per kind of memory (mem_kind: allocated when a value of that kind
 * is first seen), so they live in one file, one section each:
 *
 *  - memory_spike: a rank's value far above its own recent baseline (the
 *    median of its last memory_spike.baseline_steps values).
 *  - memory_creep: a steady rise, the Theil-Sen slope over a decimated
 *    (step, bytes) history per rank, sustained in both halves of it.
 *  - memory_imbalance: a rank far above the median rank (of two, the
 *    other: ss__reference) for memory_imbalance.min_steps consecutive
 *    steps.
 *
 * docs/detectors.md states every rule and default.
 */
#include "detectors_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stats.h"

enum { MEM_RSS = 0, MEM_DEVICE = 1, MEM_KINDS = 2 };

typedef struct {
    int on; /* arrays allocated: a value of this kind was seen */
    /* spike */
    int64_t *base;      /* world * baseline ring */
    uint8_t *base_n;    /* values in each ring */
    uint8_t *in_spike;
    uint8_t *spiked;
    uint32_t spikes, n_spiked;
    int32_t spike_rank;
    uint64_t spike_step, spike_first, spike_last;
    int64_t spike_from, spike_to;
    int32_t spike_finding;
    /* creep */
    int64_t *pv;        /* world * points */
    uint64_t *ps;
    uint16_t *pn;
    uint32_t *pstride, *pwait;
    double *slope;      /* bytes/step while creeping, else 0 */
    uint64_t *cfirst, *clast;
    uint16_t *csamples;
    int32_t creep_finding;
    /* imbalance */
    uint32_t *irun;
    uint8_t *imbalanced;
    uint32_t n_imbalanced, imb_run;
    int32_t imb_rank;
    int64_t imb_bytes, imb_median;
    uint64_t imb_first, imb_last;
    int32_t imb_finding;
} mem_kind;

typedef struct {
    mem_kind mem[MEM_KINDS];
    /* scratch */
    double *f64;     /* max(world, memory_spike.baseline_steps) */
    int32_t *order;  /* world */
    double *tx, *ty; /* creep points */
    double *ts;      /* Theil-Sen pairs */
    size_t ts_len;
} memory;

/* ---- per kind of memory ---- */

static void mem_kind_free(mem_kind *m)
{
    free(m->base);
    free(m->base_n);
    free(m->in_spike);
    free(m->spiked);
    free(m->pv);
    free(m->ps);
    free(m->pn);
    free(m->pstride);
    free(m->pwait);
    free(m->slope);
    free(m->cfirst);
    free(m->clast);
    free(m->csamples);
    free(m->irun);
    free(m->imbalanced);
}

static const char *mem_label(int kind)
{
    return kind == MEM_RSS ? "RSS" : "device memory";
}

static int mem_kind_init(const ss_detectors *d, mem_kind *m)
{
    size_t w = d->world, b = ss__param_u32(d, P_M_BASELINE);
    size_t pts = ss__param_u32(d, P_C_POINTS) & ~1u;
    m->base = ss__zalloc(w * b, sizeof *m->base);
    m->base_n = ss__zalloc(w, 1);
    m->in_spike = ss__zalloc(w, 1);
    m->spiked = ss__zalloc(w, 1);
    m->pv = ss__zalloc(w * pts, sizeof *m->pv);
    m->ps = ss__zalloc(w * pts, sizeof *m->ps);
    m->pn = ss__zalloc(w, sizeof *m->pn);
    m->pstride = ss__zalloc(w, sizeof *m->pstride);
    m->pwait = ss__zalloc(w, sizeof *m->pwait);
    m->slope = ss__zalloc(w, sizeof *m->slope);
    m->cfirst = ss__zalloc(w, sizeof *m->cfirst);
    m->clast = ss__zalloc(w, sizeof *m->clast);
    m->csamples = ss__zalloc(w, sizeof *m->csamples);
    m->irun = ss__zalloc(w, sizeof *m->irun);
    m->imbalanced = ss__zalloc(w, 1);
    if (!m->base || !m->base_n || !m->in_spike || !m->spiked || !m->pv ||
        !m->ps || !m->pn || !m->pstride || !m->pwait || !m->slope ||
        !m->cfirst || !m->clast || !m->csamples || !m->irun ||
        !m->imbalanced) {
        mem_kind_free(m);
        memset(m, 0, sizeof *m);
        m->spike_finding = m->creep_finding = m->imb_finding = -1;
        return -1;
    }
    for (size_t r = 0; r < w; r++)
        m->pstride[r] = 1;
    m->spike_rank = m->imb_rank = -1;
    m->on = 1;
    return 0;
}

/* ---- memory_spike ---- */

static void refresh_spike(ss_detectors *d, memory *mm, int kind)
{
    mem_kind *m = &mm->mem[kind];
    ss_finding *f = ss__finding(d, m->spike_finding);
    int32_t ranks[MAX_LISTED];
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world && n < MAX_LISTED; r++)
        if (m->spiked[r])
            ranks[n++] = (int32_t)r;
    ss__set_ranks(f, ranks, n);
    f->first_step = m->spike_first;
    f->last_step = m->spike_last;
    double jump = (double)(m->spike_to - m->spike_from);
    double frac = m->spike_from > 0 ? jump / (double)m->spike_from : 0;
    f->severity = frac >= d->p[P_M_CRIT_FRAC] ? SS_CRITICAL : SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "memory", kind == MEM_RSS ? "rss" : "device");
    ss__evidence_int(ev, "spikes", m->spikes);
    ss__evidence_int(ev, "ranks_spiking", m->n_spiked);
    ss__evidence_int(ev, "worst_rank", m->spike_rank);
    ss__evidence_int(ev, "worst_step", (int64_t)m->spike_step);
    ss__evidence_int(ev, "baseline_bytes", m->spike_from);
    ss__evidence_int(ev, "peak_bytes", m->spike_to);
    ss__evidence_num(ev, "jump_mib", round(jump / MIB * 10) / 10);
    ss__evidence_num(ev, "jump_pct", round(frac * 1000) / 10);
    ss__evidence_end(ev, f);
    char a[32], b[32], c[32], list[160];
    if (m->spikes == 1)
        snprintf(f->message, sizeof f->message,
                 "%s of rank %d spiked at step %" PRIu64 ": from %s (its "
                 "recent baseline) to %s (+%s, +%.0f %%).",
                 mem_label(kind), m->spike_rank, m->spike_step,
                 ss__fmt_bytes(a, sizeof a, (double)m->spike_from),
                 ss__fmt_bytes(b, sizeof b, (double)m->spike_to),
                 ss__fmt_bytes(c, sizeof c, jump), frac * 100);
    else
        snprintf(f->message, sizeof f->message,
                 "%s spiked %u times on %s; the largest jump: rank %d at "
                 "step %" PRIu64 ", from %s (its recent baseline) to %s "
                 "(+%s, +%.0f %%).",
                 mem_label(kind), m->spikes,
                 ss__fmt_ranks(list, sizeof list, ranks, n, m->n_spiked),
                 m->spike_rank, m->spike_step,
                 ss__fmt_bytes(a, sizeof a, (double)m->spike_from),
                 ss__fmt_bytes(b, sizeof b, (double)m->spike_to),
                 ss__fmt_bytes(c, sizeof c, jump), frac * 100);
    ss__finding_touch(d, m->spike_finding);
}

static void spike_check(ss_detectors *d, memory *mm, int kind, uint32_t r,
                        uint64_t step, int64_t val)
{
    mem_kind *m = &mm->mem[kind];
    uint32_t b = ss__param_u32(d, P_M_BASELINE);
    int64_t *ring = m->base + (size_t)r * b;
    uint32_t have = m->base_n[r];
    int spike = 0;
    int64_t base = 0;
    if (have >= (b + 1) / 2) {
        uint32_t cnt = have < b ? have : b;
        /* the baseline (a median) is at least the ring's minimum, so a
         * value within the floor of that minimum needs no median */
        int64_t lo = ring[0];
        for (uint32_t i = 1; i < cnt; i++)
            if (ring[i] < lo)
                lo = ring[i];
        double floor_bytes = d->p[P_M_MIN_MIB] * MIB;
        if ((double)val - (double)lo >= floor_bytes) {
            for (uint32_t i = 0; i < cnt; i++)
                mm->f64[i] = (double)ring[i];
            base = (int64_t)ss_median_f64(mm->f64, cnt);
            double jump = (double)val - (double)base;
            spike = jump >= floor_bytes &&
                    jump >= d->p[P_M_MIN_FRAC] * (double)base;
        }
    }
    ring[have % b] = val;
    m->base_n[r] = (uint8_t)(have + 1 >= 2 * b ? b + (have + 1) % b
                                               : have + 1);
    if (!spike) {
        m->in_spike[r] = 0;
        return;
    }
    if (m->in_spike[r]) {
        /* still rising within the same spike: keep its peak */
        if (m->spike_rank == (int32_t)r && val > m->spike_to &&
            m->spike_finding >= 0) {
            m->spike_to = val;
            m->spike_last = step;
            refresh_spike(d, mm, kind);
        }
        return;
    }
    m->in_spike[r] = 1;
    m->spikes++;
    if (!m->spiked[r]) {
        m->spiked[r] = 1;
        m->n_spiked++;
    }
    if (m->spikes == 1)
        m->spike_first = step;
    m->spike_last = step;
    if (m->spikes == 1 || val - base > m->spike_to - m->spike_from) {
        m->spike_rank = (int32_t)r;
        m->spike_step = step;
        m->spike_from = base;
        m->spike_to = val;
    }
    if (m->spike_finding < 0)
        m->spike_finding = ss__finding_open(d, "memory_spike");
    if (m->spike_finding >= 0)
        refresh_spike(d, mm, kind);
}

/* ---- memory_creep ---- */

static void creep_append(ss_detectors *d, mem_kind *m, uint32_t r,
                         uint64_t step, int64_t val)
{
    if (m->pwait[r] > 1) {
        m->pwait[r]--;
        return;
    }
    uint32_t pts = ss__param_u32(d, P_C_POINTS) & ~1u;
    int64_t *pv = m->pv + (size_t)r * pts;
    uint64_t *ps = m->ps + (size_t)r * pts;
    if (m->pn[r] == pts) {
        /* full: keep every other sample, sample half as often */
        for (uint32_t i = 0; i < pts / 2; i++) {
            pv[i] = pv[2 * i];
            ps[i] = ps[2 * i];
        }
        m->pn[r] = (uint16_t)(pts / 2);
        m->pstride[r] *= 2;
    }
    pv[m->pn[r]] = val;
    ps[m->pn[r]] = step;
    m->pn[r]++;
    m->pwait[r] = m->pstride[r];
}

static void refresh_creep(ss_detectors *d, memory *mm, int kind)
{
    mem_kind *m = &mm->mem[kind];
    ss_finding *f = ss__finding(d, m->creep_finding);
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world; r++)
        if (m->slope[r] > 0)
            mm->order[n++] = (int32_t)r;
    if (n == 0)
        return;
    /* worst first (selection of the top MAX_LISTED by slope) */
    uint32_t listed = n < MAX_LISTED ? n : MAX_LISTED;
    for (uint32_t i = 0; i < listed; i++) {
        uint32_t best = i;
        for (uint32_t j = i + 1; j < n; j++)
            if (m->slope[mm->order[j]] > m->slope[mm->order[best]])
                best = j;
        int32_t t = mm->order[i];
        mm->order[i] = mm->order[best];
        mm->order[best] = t;
    }
    int32_t w = mm->order[0];
    for (uint32_t i = 0; i < n; i++)
        mm->f64[i] = m->slope[mm->order[i]];
    double med_slope = ss_median_f64(mm->f64, n);
    ss__set_ranks(f, mm->order, listed);
    uint64_t first = m->cfirst[w], last = m->clast[w];
    for (uint32_t i = 0; i < listed; i++) {
        if (m->cfirst[mm->order[i]] < first)
            first = m->cfirst[mm->order[i]];
        if (m->clast[mm->order[i]] > last)
            last = m->clast[mm->order[i]];
    }
    f->first_step = first;
    f->last_step = last;
    double slope = m->slope[w];
    double per1000 = slope * 1000 / MIB;
    double span = (double)(m->clast[w] - m->cfirst[w]);
    f->severity = per1000 >= d->p[P_C_CRIT_MIB] ? SS_CRITICAL : SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "memory", kind == MEM_RSS ? "rss" : "device");
    ss__evidence_num(ev, "bytes_per_step", round(slope));
    ss__evidence_num(ev, "mib_per_1000_steps", round(per1000 * 10) / 10);
    ss__evidence_num(ev, "growth_mib", round(slope * span / MIB * 10) / 10);
    ss__evidence_num(ev, "span_steps", span);
    ss__evidence_int(ev, "samples", m->csamples[w]);
    ss__evidence_int(ev, "worst_rank", w);
    ss__evidence_int(ev, "ranks_creeping", n);
    ss__evidence_num(ev, "median_bytes_per_step", round(med_slope));
    ss__evidence_end(ev, f);
    char a[32], b[32], list[160], who[200];
    if (n == 1)
        snprintf(who, sizeof who, "%s of rank %d grows steadily",
                 mem_label(kind), w);
    else
        snprintf(who, sizeof who, "%s grows steadily on %s; the fastest, "
                 "rank %d,", mem_label(kind),
                 ss__fmt_ranks(list, sizeof list, mm->order, listed, n), w);
    snprintf(f->message, sizeof f->message,
             "%s by %s per step (%.0f MiB per 1000 steps, Theil-Sen slope "
             "over %u samples): +%s between steps %" PRIu64 " and "
             "%" PRIu64 ".",
             who, ss__fmt_bytes(a, sizeof a, slope), per1000, m->csamples[w],
             ss__fmt_bytes(b, sizeof b, slope * span), m->cfirst[w],
             m->clast[w]);
    ss__finding_touch(d, m->creep_finding);
}

static void creep_eval(ss_detectors *d, memory *mm, int kind)
{
    mem_kind *m = &mm->mem[kind];
    uint32_t pts = ss__param_u32(d, P_C_POINTS) & ~1u;
    uint32_t min_pts = pts / 4 > 8 ? pts / 4 : 8;
    double min_bps = d->p[P_C_MIN_BPS];
    double min_growth = d->p[P_C_MIN_GROWTH_MIB] * MIB;
    int changed = 0;
    for (uint32_t r = 0; r < d->world; r++) {
        uint32_t n = m->pn[r];
        if (n < min_pts)
            continue;
        const int64_t *pv = m->pv + (size_t)r * pts;
        const uint64_t *ps = m->ps + (size_t)r * pts;
        double span = (double)(ps[n - 1] - ps[0]);
        if (span < d->p[P_C_MIN_SPAN])
            continue;
        /* cheap gate: the fitted growth cannot be far above the range */
        int64_t lo = pv[0], hi = pv[0];
        for (uint32_t i = 1; i < n; i++) {
            if (pv[i] < lo)
                lo = pv[i];
            if (pv[i] > hi)
                hi = pv[i];
        }
        if ((double)(hi - lo) < 0.5 * min_growth)
            continue;
        for (uint32_t i = 0; i < n; i++) {
            mm->tx[i] = (double)(ps[i] - ps[0]);
            mm->ty[i] = (double)pv[i];
        }
        double s = ss_theil_sen(mm->tx, mm->ty, n, mm->ts, mm->ts_len);
        if (!(s >= min_bps) || s * span < min_growth)
            continue;
        /* sustained: both halves grow, so one jump is not creep */
        uint32_t h = n / 2;
        double s1 = ss_theil_sen(mm->tx, mm->ty, h, mm->ts, mm->ts_len);
        double s2 = ss_theil_sen(mm->tx + h, mm->ty + h, n - h, mm->ts,
                                 mm->ts_len);
        if (!(s1 >= 0.5 * min_bps) || !(s2 >= 0.5 * min_bps))
            continue;
        m->slope[r] = s;
        m->cfirst[r] = ps[0];
        m->clast[r] = ps[n - 1];
        m->csamples[r] = (uint16_t)n;
        changed = 1;
    }
    if (!changed)
        return;
    if (m->creep_finding < 0)
        m->creep_finding = ss__finding_open(d, "memory_creep");
    if (m->creep_finding >= 0)
        refresh_creep(d, mm, kind);
}

/* ---- memory_imbalance ---- */

static void refresh_imbalance(ss_detectors *d, memory *mm, int kind)
{
    mem_kind *m = &mm->mem[kind];
    ss_finding *f = ss__finding(d, m->imb_finding);
    int32_t ranks[MAX_LISTED];
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world && n < MAX_LISTED; r++)
        if (m->imbalanced[r])
            ranks[n++] = (int32_t)r;
    ss__set_ranks(f, ranks, n);
    f->first_step = m->imb_first;
    f->last_step = m->imb_last;
    double excess = (double)(m->imb_bytes - m->imb_median);
    double frac = m->imb_median > 0 ? excess / (double)m->imb_median : 0;
    f->severity = frac >= d->p[P_I_CRIT_FRAC] ? SS_CRITICAL : SS_WARNING;
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_str(ev, "memory", kind == MEM_RSS ? "rss" : "device");
    ss__evidence_int(ev, "worst_rank", m->imb_rank);
    ss__evidence_int(ev, "rank_bytes", m->imb_bytes);
    ss__evidence_int(ev, "median_bytes", m->imb_median);
    ss__evidence_num(ev, "excess_mib", round(excess / MIB * 10) / 10);
    ss__evidence_num(ev, "excess_pct", round(frac * 1000) / 10);
    ss__evidence_int(ev, "steps_sustained", m->imb_run);
    ss__evidence_int(ev, "ranks_above", m->n_imbalanced);
    ss__evidence_end(ev, f);
    char a[32], b[32], c[32], list[160];
    snprintf(f->message, sizeof f->message,
             "%s is imbalanced: %s stay%s well above the %s rank for "
             "%u+ consecutive steps; rank %d holds %s against %s"
             "%s (+%s, +%.0f %%).",
             mem_label(kind), ss__fmt_ranks(list, sizeof list, ranks, n,
                                        m->n_imbalanced),
             m->n_imbalanced == 1 ? "s" : "",
             d->world == 2 ? "other" : "median", m->imb_run, m->imb_rank,
             ss__fmt_bytes(a, sizeof a, (double)m->imb_bytes),
             d->world == 2 ? "the other rank's " : "a median of ",
             ss__fmt_bytes(b, sizeof b, (double)m->imb_median),
             ss__fmt_bytes(c, sizeof c, excess), frac * 100);
    ss__finding_touch(d, m->imb_finding);
}

/* Rank R holds VAL of this kind in STEP, against the step's statistics
 * ST: counts the steps it stays far above the median rank.  Returns 1 when
 * it counts as imbalanced in this step (the finding is to refresh). */
static int imbalance_check(const ss_detectors *d, mem_kind *m, uint32_t r,
                           uint64_t step, int64_t val, const ss_stat *st)
{
    double med = ss__reference(st, (double)val);
    double ex = (double)val - med;
    if (!(st->n >= 2 && ex >= d->p[P_I_MIN_MIB] * MIB &&
          ex >= d->p[P_I_MIN_FRAC] * med)) {
        m->irun[r] = 0;
        return 0;
    }
    if (++m->irun[r] < ss__param_u32(d, P_I_MIN_STEPS))
        return 0;
    if (!m->imbalanced[r]) {
        m->imbalanced[r] = 1;
        if (m->n_imbalanced++ == 0)
            m->imb_first = step + 1 - m->irun[r];
    }
    m->imb_last = step;
    if (m->irun[r] > m->imb_run)
        m->imb_run = m->irun[r];
    /* the evidence follows the rank with the largest excess */
    if (m->imb_rank < 0 || (int32_t)r == m->imb_rank ||
        ex > (double)(m->imb_bytes - m->imb_median)) {
        m->imb_rank = (int32_t)r;
        m->imb_bytes = val;
        m->imb_median = (int64_t)med;
    }
    return 1;
}

/* ---- one step, per kind of memory ---- */

static void memory_kind_step(ss_detectors *d, memory *mm,
                             const ss_step_view *v, uint32_t world, int kind)
{
    const ss_stat *st = kind == MEM_RSS ? &v->rss : &v->device;
    mem_kind *m = &mm->mem[kind];
    if (st->n == 0)
        return;
    if (!m->on && mem_kind_init(d, m) < 0)
        return;
    int imb_changed = 0;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        int64_t val = kind == MEM_RSS ? rs->rss_bytes : rs->device_bytes;
        if (!rs->present || val == SS_MISSING)
            continue;
        spike_check(d, mm, kind, r, v->step, val);
        creep_append(d, m, r, v->step, val);
        if (imbalance_check(d, m, r, v->step, val, st))
            imb_changed = 1;
    }
    if (imb_changed) {
        if (m->imb_finding < 0)
            m->imb_finding = ss__finding_open(d, "memory_imbalance");
        if (m->imb_finding >= 0)
            refresh_imbalance(d, mm, kind);
    }
    if (d->n_eval % ss__param_u32(d, P_C_EVAL_EVERY) == 0)
        creep_eval(d, mm, kind);
}

/* ---- the ss__detector hooks ---- */

static void memory_destroy(void *state)
{
    memory *mm = state;
    for (int k = 0; k < MEM_KINDS; k++)
        mem_kind_free(&mm->mem[k]);
    free(mm->f64);
    free(mm->order);
    free(mm->tx);
    free(mm->ty);
    free(mm->ts);
    free(mm);
}

static void *memory_create(ss_detectors *d)
{
    memory *mm = ss__zalloc(1, sizeof *mm);
    if (!mm)
        return NULL;
    for (int k = 0; k < MEM_KINDS; k++)
        mm->mem[k].spike_finding = mm->mem[k].creep_finding =
            mm->mem[k].imb_finding = -1;
    size_t w = d->world, b = ss__param_u32(d, P_M_BASELINE);
    uint32_t points = ss__param_u32(d, P_C_POINTS) & ~1u;
    mm->f64 = ss__zalloc(w > b ? w : b, sizeof *mm->f64);
    mm->order = ss__zalloc(w, sizeof *mm->order);
    mm->tx = ss__zalloc(points, sizeof *mm->tx);
    mm->ty = ss__zalloc(points, sizeof *mm->ty);
    mm->ts_len = ss_theil_sen_scratch(points);
    mm->ts = ss__zalloc(mm->ts_len, sizeof *mm->ts);
    if (!mm->f64 || !mm->order || !mm->tx || !mm->ty || !mm->ts) {
        memory_destroy(mm);
        return NULL;
    }
    return mm;
}

static void memory_step(void *state, ss_detectors *d, const ss_step_view *v,
                        uint32_t world)
{
    memory *mm = state;
    memory_kind_step(d, mm, v, world, MEM_RSS);
    memory_kind_step(d, mm, v, world, MEM_DEVICE);
}

/* The run ends: a last creep evaluation over what was seen. */
static void memory_end(void *state, ss_detectors *d)
{
    memory *mm = state;
    for (int k = 0; k < MEM_KINDS; k++)
        if (mm->mem[k].on)
            creep_eval(d, mm, k);
}

const ss__detector ss__memory_detector = {
    .name = "memory",
    .create = memory_create,
    .on_names = NULL,
    .on_step = memory_step,
    .on_end = memory_end,
    .destroy = memory_destroy,
};
