/*
 * detectors.c - findings computed from finalized steps (detectors.h).
 *
 * Every finalized step goes through six detectors, each with bounded
 * per-rank state (sizes fixed at creation from the world size and the
 * window parameters):
 *
 *  - straggler: a ring of the last straggler.window steps per rank holds
 *    how late the rank was (arrival at a sync point vs the median rank; or,
 *    without sync points, how much less it waited in the phase that holds
 *    the synchronization; or how much longer its step took) and which of
 *    its phases explains it.  Late in most of the window: persistent; a run
 *    of consecutive late steps that never became persistent: transient.
 *  - data_stall: a data-loading phase (names in data_phase_names[]) far
 *    above the median rank's in the same step, counted per rank with the
 *    period of the stalls when they are regular.
 *  - jitter: robust outliers (median + max(k MAD, relative and absolute
 *    floors)) and robust spread of the median-rank step time over a ring of
 *    recent steps; steps explained by a data stall are left out.
 *  - memory_spike / memory_creep / memory_imbalance: per rank and per kind
 *    of memory (RSS, device), a short ring for the spike baseline, a
 *    decimated (step, bytes) history for a Theil-Sen slope, and a run
 *    length of steps far above the median rank.
 *
 * The first warmup_steps finalized steps are ignored by all of them.
 * Findings are kept in a table (at most MAX_FINDINGS); each is emitted when
 * created, again (same id) when its content changed and update_steps steps
 * passed since its last emission, and once more by ss_detectors_finish.
 * docs/detectors.md states every rule and default.
 */
#include "detectors.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stats.h"

/* X(enum id, name, default, unit, min, max, doc) */
#define SS_DETECTOR_PARAMS(X)                                                 \
    X(P_WARMUP, "warmup_steps", 3, "steps", 0, 1e6,                           \
      "first finalized steps ignored by every detector")                      \
    X(P_UPDATE, "update_steps", 50, "steps", 1, 1e9,                          \
      "a changed finding is emitted again at most once per this many steps")  \
    X(P_S_MIN_LATE_MS, "straggler.min_late_ms", 5, "ms", 0, 1e9,              \
      "a rank is late in a step when it is this much behind the median "      \
      "rank...")                                                              \
    X(P_S_MIN_LATE_FRAC, "straggler.min_late_frac", 0.10, "ratio", 0, 100,    \
      "...and this fraction of the median step time...")                      \
    X(P_S_MAD_K, "straggler.mad_k", 3, "sigmas", 0, 1e3,                      \
      "...and this many robust sigmas of all ranks' lateness in that step")   \
    X(P_S_BLAME_FRAC, "straggler.blame_frac", 0.25, "ratio", 0, 1e3,          \
      "a phase is blamed only when it explains this share of the lateness")   \
    X(P_S_WINDOW, "straggler.window", 100, "steps", 10, 1024,                 \
      "recent steps over which lateness is counted")                          \
    X(P_S_PERSIST_FRAC, "straggler.persistent_frac", 0.5, "ratio", 0.01, 1,   \
      "persistent: late in at least this fraction of the window's steps")     \
    X(P_S_END_FRAC, "straggler.end_frac", 0.25, "ratio", 0, 1,                \
      "a persistent straggler episode ends below this late fraction")         \
    X(P_S_MIN_STEPS, "straggler.min_steps", 20, "steps", 1, 1024,             \
      "steps a rank must have been seen in before it can be persistent")      \
    X(P_S_TRANSIENT, "straggler.transient_steps", 5, "steps", 2, 1e6,         \
      "transient: at least this many consecutive late steps")                 \
    X(P_S_CRIT_FRAC, "straggler.critical_frac", 0.25, "ratio", 0, 100,        \
      "critical when the median lateness is this fraction of a median step")  \
    X(P_S_SYNC_RATIO, "straggler.sync_phase_ratio", 0.5, "ratio", 0, 1,       \
      "sync-phase rule only when the step-time spread is below this "         \
      "fraction of the shortest wait's gap to the median wait")               \
    X(P_D_MIN_MS, "data_stall.min_ms", 20, "ms", 0, 1e9,                      \
      "a data phase stalls when it exceeds the median rank's by this much...")\
    X(P_D_FACTOR, "data_stall.factor", 4, "ratio", 1, 1e6,                    \
      "...and is at least this multiple of the median rank's")                \
    X(P_D_MIN_COUNT, "data_stall.min_count", 3, "stalls", 1, 1e9,             \
      "stalls on one rank before it is reported")                             \
    X(P_D_PERIOD_FRAC, "data_stall.period_frac", 0.75, "ratio", 0.1, 1,       \
      "stalls are periodic when this fraction of the gaps match the median "  \
      "gap")                                                                  \
    X(P_D_CRIT_FRAC, "data_stall.critical_frac", 1.0, "ratio", 0, 1e6,        \
      "critical when the median stall is this fraction of a median step")     \
    X(P_J_WINDOW, "jitter.window", 200, "steps", 20, 4096,                    \
      "recent steps of median-rank step time kept")                           \
    X(P_J_MIN_STEPS, "jitter.min_steps", 30, "steps", 5, 4096,                \
      "steps needed before jitter is judged")                                 \
    X(P_J_MAD_K, "jitter.mad_k", 6, "sigmas", 0, 1e3,                         \
      "outlier: above median + this many robust sigmas (1.4826 MAD)...")      \
    X(P_J_REL_FLOOR, "jitter.rel_floor", 0.5, "ratio", 0, 1e3,                \
      "...and above median * (1 + this)...")                                  \
    X(P_J_ABS_FLOOR_MS, "jitter.abs_floor_ms", 20, "ms", 0, 1e9,               \
      "...and above median + this")                                           \
    X(P_J_MIN_OUTLIERS, "jitter.min_outliers", 8, "steps", 1, 1e6,            \
      "outlier steps in the window needed for a finding...")                  \
    X(P_J_MIN_FRAC, "jitter.min_outlier_frac", 0.05, "ratio", 0, 1,           \
      "...and fraction of the window's steps they must make up")              \
    X(P_J_MAX_CV, "jitter.max_cv", 1.0, "ratio", 0, 1e3,                     \
      "spread finding: robust sigma / median at least this...")               \
    X(P_J_MIN_SPREAD_MS, "jitter.min_spread_ms", 20, "ms", 0, 1e9,            \
      "...and robust sigma at least this")                                    \
    X(P_J_CRIT_FRAC, "jitter.critical_frac", 0.2, "ratio", 0, 1,              \
      "critical when outliers make up this fraction of the window")           \
    X(P_M_BASELINE, "memory_spike.baseline_steps", 8, "steps", 2, 64,         \
      "previous steps whose median is a rank's memory baseline")              \
    X(P_M_MIN_MIB, "memory_spike.min_mib", 128, "MiB", 0, 1e9,                \
      "a spike rises this much above the baseline...")                        \
    X(P_M_MIN_FRAC, "memory_spike.min_frac", 0.2, "ratio", 0, 1e6,            \
      "...and this fraction of it")                                           \
    X(P_M_CRIT_FRAC, "memory_spike.critical_frac", 1.0, "ratio", 0, 1e6,      \
      "critical when the largest spike is this fraction of its baseline")     \
    X(P_C_MIN_BPS, "memory_creep.min_bytes_per_step", 65536, "bytes/step", 0, \
      1e15, "creep: Theil-Sen slope at least this")                           \
    X(P_C_MIN_GROWTH_MIB, "memory_creep.min_growth_mib", 64, "MiB", 0, 1e9,   \
      "...and slope * observed span at least this")                           \
    X(P_C_MIN_SPAN, "memory_creep.min_span_steps", 50, "steps", 2, 1e9,       \
      "steps the history must span before creep is judged")                   \
    X(P_C_POINTS, "memory_creep.points", 64, "samples", 16, 256,              \
      "samples kept per rank (decimated by 2 when full)")                     \
    X(P_C_EVAL_EVERY, "memory_creep.eval_every", 16, "steps", 1, 1e6,         \
      "steps between two creep evaluations")                                  \
    X(P_C_CRIT_MIB, "memory_creep.critical_mib_per_1000", 1024,               \
      "MiB/1000 steps", 0, 1e12, "critical at this growth rate")              \
    X(P_I_MIN_MIB, "memory_imbalance.min_mib", 256, "MiB", 0, 1e9,            \
      "a rank is above the median rank by this much...")                      \
    X(P_I_MIN_FRAC, "memory_imbalance.min_frac", 0.3, "ratio", 0, 1e6,        \
      "...and by this fraction of it...")                                     \
    X(P_I_MIN_STEPS, "memory_imbalance.min_steps", 20, "steps", 1, 1e9,       \
      "...for this many consecutive steps")                                   \
    X(P_I_CRIT_FRAC, "memory_imbalance.critical_frac", 1.0, "ratio", 0, 1e6,  \
      "critical when the excess is this fraction of the median rank's")

enum {
#define X(id, name, def, unit, lo, hi, doc) id,
    SS_DETECTOR_PARAMS(X)
#undef X
        P_COUNT
};

_Static_assert(P_COUNT <= 64, "ss_detector_config holds 64 values");

const ss_detector_param ss_detector_params[] = {
#define X(id, name, def, unit, lo, hi, doc) {name, def, unit, doc},
    SS_DETECTOR_PARAMS(X)
#undef X
    {NULL, 0, NULL, NULL}};

static const double param_min[P_COUNT] = {
#define X(id, name, def, unit, lo, hi, doc) lo,
    SS_DETECTOR_PARAMS(X)
#undef X
};

static const double param_max[P_COUNT] = {
#define X(id, name, def, unit, lo, hi, doc) hi,
    SS_DETECTOR_PARAMS(X)
#undef X
};

/* Phase names treated as data loading (compared ignoring case). */
static const char *const data_phase_names[] = {
    "data",      "data_wait",    "dataloader", "data_loader", "data_load",
    "data_loading", "data_fetch", "input_wait", "batch_wait", NULL};

#define MIB (1024.0 * 1024.0)
#define NO_NAME 255
#define MAX_FINDINGS 4096
#define STALL_RING 32
#define MAX_LISTED 16

enum { F_SEEN = 1, F_LATE = 2 };
enum { M_NONE = 0, M_ARRIVAL = 1, M_SYNC_PHASE = 2, M_STEP_TIME = 3 };
enum { MEM_RSS = 0, MEM_DEVICE = 1, MEM_KINDS = 2 };

typedef struct {
    ss_finding f;
    uint64_t emitted_at; /* d->n_steps at the last emission */
    uint8_t emitted;
    uint8_t dirty;
} det_finding;

typedef struct {
    uint32_t late, seen;   /* flags in the ring */
    int32_t persistent;    /* finding of the open persistent episode, -1 */
    uint32_t run;          /* consecutive late steps */
    uint64_t run_first, run_last;
    uint8_t run_persistent; /* persistent at some point during the run */
    ss_finding *pending;    /* a transient burst awaiting judgement */
} strag_rank;

typedef struct {
    uint32_t count;
    double total_ms, max_ms, med_step_ms;
    uint64_t first, last;
    uint64_t steps[STALL_RING]; /* ring, count % STALL_RING is next */
    float excess_ms[STALL_RING];
    uint8_t phase;
    int32_t finding;
} stall_rank;

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

struct ss_detectors {
    double p[P_COUNT];
    uint32_t world, attempt;
    ss_sink sink;
    const char *const *names;
    uint64_t n_steps; /* finalized steps fed */
    uint64_t n_eval;  /* steps past the warm-up */
    int8_t is_data[SS_MAX_RUN_NAMES];
    uint32_t n_classified;
    int stall_on_step;
    double step_sync_late_ms; /* latest rank's lateness, synced steps */

    /* scratch */
    double *f64;     /* max(world, windows) */
    int64_t *i64;    /* world */
    double *tx, *ty; /* creep points */
    double *ts;      /* Theil-Sen pairs */
    size_t ts_len;
    int32_t *order;  /* world */

    /* straggler */
    uint32_t sw, s_head, s_fill;
    uint64_t *s_step;
    float *s_med_ms;
    uint8_t *s_method, *s_ref;
    float *s_late_ms, *s_expl_ms; /* world * sw */
    uint8_t *s_blame, *s_flags;
    strag_rank *sr;

    /* data stall */
    stall_rank **stall;

    /* jitter */
    uint32_t jw, j_head, j_fill, j_outliers;
    double *j_ms;
    uint64_t *j_step;
    uint8_t *j_out, *j_blame;
    float *j_expl_ms;
    int32_t *j_worst;
    float *j_phase[SS_MAX_RUN_NAMES]; /* per phase median ms ring, lazy */
    int32_t *j_sort; /* scratch */
    double *j_raw;  /* the median step time itself, for reporting */
    uint64_t j_stall_excluded;
    double j_med, j_sigma, j_thr;
    int32_t j_finding;

    mem_kind mem[MEM_KINDS];

    det_finding *fd;
    uint32_t n_fd, cap_fd;
};

/* ---- configuration ---- */

void ss_detector_config_defaults(ss_detector_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < P_COUNT; i++)
        cfg->values[i] = ss_detector_params[i].default_value;
}

int ss_detector_config_set(ss_detector_config *cfg, const char *name,
                           const char *value, char *err, size_t errlen)
{
    for (int i = 0; i < P_COUNT; i++) {
        if (strcmp(ss_detector_params[i].name, name) != 0)
            continue;
        char *end;
        errno = 0;
        double v = value ? strtod(value, &end) : 0;
        if (!value || end == value || *end || errno || !isfinite(v)) {
            snprintf(err, errlen, "%s: '%s' is not a number", name,
                     value ? value : "");
            return -1;
        }
        if (v < param_min[i] || v > param_max[i]) {
            snprintf(err, errlen, "%s: %g is outside [%g, %g] %s", name, v,
                     param_min[i], param_max[i], ss_detector_params[i].unit);
            return -1;
        }
        cfg->values[i] = v;
        return 0;
    }
    snprintf(err, errlen, "unknown detector setting '%s'", name ? name : "");
    return -1;
}

/* ---- text helpers ---- */

typedef struct {
    char *buf;
    size_t cap, len;
    int items;
} jbuf;

static void jb_begin(jbuf *j, char *buf, size_t cap)
{
    j->buf = buf;
    j->cap = cap;
    j->len = 1;
    j->items = 0;
    buf[0] = '{';
    buf[1] = '\0';
}

/* Appends ,"KEY":VALUE (VALUE already JSON) when it fits with the closing
 * brace; otherwise drops the whole item, so the object stays valid. */
static void jb_item(jbuf *j, const char *key, const char *value)
{
    char item[640];
    int n = snprintf(item, sizeof item, "%s\"%s\":%s", j->items ? "," : "",
                     key, value);
    if (n < 0 || (size_t)n >= sizeof item || j->len + (size_t)n + 2 > j->cap)
        return;
    memcpy(j->buf + j->len, item, (size_t)n + 1);
    j->len += (size_t)n;
    j->items++;
}

static void jb_num(jbuf *j, const char *key, double v)
{
    if (!isfinite(v))
        return;
    char num[64];
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(num, sizeof num, "%.0f", v);
    } else {
        snprintf(num, sizeof num, "%.3f", v);
        char *e = num + strlen(num) - 1;
        while (*e == '0')
            *e-- = '\0';
        if (*e == '.')
            *e = '\0';
        if (strcmp(num, "-0") == 0)
            strcpy(num, "0");
    }
    jb_item(j, key, num);
}

static void jb_str(jbuf *j, const char *key, const char *s)
{
    char esc[300];
    size_t o = 0;
    esc[o++] = '"';
    for (; *s && o + 8 < sizeof esc; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            esc[o++] = '\\';
            esc[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(esc + o, sizeof esc - o, "\\u%04x", c);
        } else {
            esc[o++] = (char)c;
        }
    }
    esc[o++] = '"';
    esc[o] = '\0';
    jb_item(j, key, esc);
}

static void jb_end(jbuf *j)
{
    j->buf[j->len++] = '}';
    j->buf[j->len] = '\0';
}

/* "41.2" below 10, "48" above: what a person reads. */
static const char *fmt_ms(char *buf, size_t len, double ms)
{
    snprintf(buf, len, fabs(ms) < 10 ? "%.1f" : "%.0f", ms);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t len, double bytes)
{
    double a = fabs(bytes);
    if (a >= 1024 * MIB)
        snprintf(buf, len, "%.2f GiB", bytes / (1024 * MIB));
    else if (a >= MIB)
        snprintf(buf, len, "%.1f MiB", bytes / MIB);
    else
        snprintf(buf, len, "%.0f KiB", bytes / 1024);
    return buf;
}

/* "rank 3" or "ranks 1, 3 and 5" (with "of N" when the list is cut). */
static const char *fmt_ranks(char *buf, size_t len, const int32_t *ranks,
                             uint32_t n, uint32_t total)
{
    size_t o = (size_t)snprintf(buf, len, n == 1 ? "rank" : "ranks");
    for (uint32_t i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s %d",
                              i == 0           ? ""
                              : i + 1 == n && total == n ? " and"
                                                         : ",",
                              ranks[i]);
    if (total > n && o < len)
        snprintf(buf + o, len - o, " (%u ranks in all)", total);
    return buf;
}

static const char *name_of(const ss_detectors *d, int idx)
{
    if (idx < 0 || idx == NO_NAME || !d->names || !d->names[idx])
        return "?";
    return d->names[idx];
}

/* ---- findings table ---- */

/* Opens a new finding of KIND; returns its index, or -1 (the finding is
 * dropped) when the table is full or memory runs out. */
static int32_t finding_new(ss_detectors *d, const char *kind)
{
    if (d->n_fd >= MAX_FINDINGS)
        return -1;
    if (d->n_fd == d->cap_fd) {
        uint32_t cap = d->cap_fd ? d->cap_fd * 2 : 16;
        det_finding *fd = realloc(d->fd, cap * sizeof *fd);
        if (!fd)
            return -1;
        d->fd = fd;
        d->cap_fd = cap;
    }
    det_finding *f = &d->fd[d->n_fd];
    memset(f, 0, sizeof *f);
    f->f.id = d->n_fd + 1;
    f->f.attempt = d->attempt;
    snprintf(f->f.kind, sizeof f->f.kind, "%s", kind);
    f->f.severity = SS_WARNING;
    return (int32_t)d->n_fd++;
}

static void finding_emit(ss_detectors *d, det_finding *f)
{
    f->emitted = 1;
    f->dirty = 0;
    f->emitted_at = d->n_steps;
    if (d->sink.on_finding)
        d->sink.on_finding(d->sink.ctx, &f->f);
}

/* Emits what is due: new findings at once, changed ones once per
 * update_steps. */
static void flush_findings(ss_detectors *d)
{
    uint64_t every = (uint64_t)d->p[P_UPDATE];
    for (uint32_t i = 0; i < d->n_fd; i++) {
        det_finding *f = &d->fd[i];
        if (f->dirty && (!f->emitted || d->n_steps - f->emitted_at >= every))
            finding_emit(d, f);
    }
}

static void set_ranks(ss_finding *f, const int32_t *ranks, uint32_t n)
{
    f->n_ranks = n > SS_FINDING_MAX_RANKS ? SS_FINDING_MAX_RANKS : n;
    memcpy(f->ranks, ranks, f->n_ranks * sizeof ranks[0]);
}

/* ---- creation ---- */

static void *zalloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

static uint32_t param_u32(const ss_detectors *d, int id)
{
    return (uint32_t)d->p[id];
}

ss_detectors *ss_detectors_create(const ss_detector_config *cfg,
                                  uint32_t world_size, uint32_t attempt,
                                  const ss_sink *sink)
{
    ss_detectors *d = zalloc(1, sizeof *d);
    if (!d)
        return NULL;
    ss_detector_config defaults;
    if (!cfg) {
        ss_detector_config_defaults(&defaults);
        cfg = &defaults;
    }
    for (int i = 0; i < P_COUNT; i++) {
        double v = cfg->values[i];
        if (!isfinite(v))
            v = ss_detector_params[i].default_value;
        d->p[i] = v < param_min[i] ? param_min[i]
                  : v > param_max[i] ? param_max[i]
                                     : v;
    }
    if (d->p[P_S_MIN_STEPS] > d->p[P_S_WINDOW])
        d->p[P_S_MIN_STEPS] = d->p[P_S_WINDOW];
    if (d->p[P_J_MIN_STEPS] > d->p[P_J_WINDOW])
        d->p[P_J_MIN_STEPS] = d->p[P_J_WINDOW];
    d->world = world_size;
    d->attempt = attempt;
    if (sink)
        d->sink = *sink;
    d->j_finding = -1;
    for (int k = 0; k < MEM_KINDS; k++)
        d->mem[k].spike_finding = d->mem[k].creep_finding =
            d->mem[k].imb_finding = -1;

    size_t w = world_size;
    d->sw = param_u32(d, P_S_WINDOW);
    d->jw = param_u32(d, P_J_WINDOW);
    uint32_t points = param_u32(d, P_C_POINTS) & ~1u;
    size_t scratch = w;
    if (scratch < 4 * (size_t)d->sw)
        scratch = 4 * (size_t)d->sw;
    if (scratch < d->jw)
        scratch = d->jw;
    if (scratch < STALL_RING)
        scratch = STALL_RING;
    if (scratch < (size_t)param_max[P_M_BASELINE])
        scratch = (size_t)param_max[P_M_BASELINE];
    d->f64 = zalloc(scratch, sizeof *d->f64);
    d->i64 = zalloc(w, sizeof *d->i64);
    d->order = zalloc(w, sizeof *d->order);
    d->tx = zalloc(points, sizeof *d->tx);
    d->ty = zalloc(points, sizeof *d->ty);
    d->ts_len = ss_theil_sen_scratch(points);
    d->ts = zalloc(d->ts_len, sizeof *d->ts);
    d->s_step = zalloc(d->sw, sizeof *d->s_step);
    d->s_med_ms = zalloc(d->sw, sizeof *d->s_med_ms);
    d->s_method = zalloc(d->sw, 1);
    d->s_ref = zalloc(d->sw, 1);
    d->s_late_ms = zalloc(w * d->sw, sizeof(float));
    d->s_expl_ms = zalloc(w * d->sw, sizeof(float));
    d->s_blame = zalloc(w * d->sw, 1);
    d->s_flags = zalloc(w * d->sw, 1);
    d->sr = zalloc(w, sizeof *d->sr);
    d->stall = zalloc(w, sizeof *d->stall);
    d->j_ms = zalloc(d->jw, sizeof *d->j_ms);
    d->j_raw = zalloc(d->jw, sizeof *d->j_raw);
    d->j_step = zalloc(d->jw, sizeof *d->j_step);
    d->j_out = zalloc(d->jw, 1);
    d->j_blame = zalloc(d->jw, 1);
    d->j_expl_ms = zalloc(d->jw, sizeof(float));
    d->j_worst = zalloc(d->jw, sizeof(int32_t));
    d->j_sort = zalloc(d->jw, sizeof(int32_t));
    if (!d->f64 || !d->i64 || !d->order || !d->tx || !d->ty || !d->ts ||
        !d->s_step || !d->s_med_ms || !d->s_method || !d->s_ref ||
        !d->s_late_ms || !d->s_expl_ms || !d->s_blame || !d->s_flags ||
        !d->sr || !d->stall || !d->j_ms || !d->j_raw || !d->j_step ||
        !d->j_out || !d->j_blame || !d->j_expl_ms || !d->j_worst ||
        !d->j_sort) {
        ss_detectors_destroy(d);
        return NULL;
    }
    for (uint32_t r = 0; r < world_size; r++)
        d->sr[r].persistent = -1;
    return d;
}

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

void ss_detectors_destroy(ss_detectors *d)
{
    if (!d)
        return;
    free(d->f64);
    free(d->i64);
    free(d->order);
    free(d->tx);
    free(d->ty);
    free(d->ts);
    free(d->s_step);
    free(d->s_med_ms);
    free(d->s_method);
    free(d->s_ref);
    free(d->s_late_ms);
    free(d->s_expl_ms);
    free(d->s_blame);
    free(d->s_flags);
    if (d->sr)
        for (uint32_t r = 0; r < d->world; r++)
            free(d->sr[r].pending);
    free(d->sr);
    if (d->stall)
        for (uint32_t r = 0; r < d->world; r++)
            free(d->stall[r]);
    free(d->stall);
    free(d->j_ms);
    free(d->j_raw);
    free(d->j_step);
    free(d->j_out);
    free(d->j_blame);
    free(d->j_expl_ms);
    free(d->j_worst);
    free(d->j_sort);
    for (int i = 0; i < SS_MAX_RUN_NAMES; i++)
        free(d->j_phase[i]);
    for (int k = 0; k < MEM_KINDS; k++)
        mem_kind_free(&d->mem[k]);
    free(d->fd);
    free(d);
}

/* ---- straggler ---- */

static const char *method_name(int m)
{
    return m == M_ARRIVAL      ? "arrival"
           : m == M_SYNC_PHASE ? "sync_phase"
                               : "step_time";
}

/* Index of the ring slot I positions before the newest one. */
static uint32_t ring_back(uint32_t head, uint32_t cap, uint32_t i)
{
    return (head + cap - 1 - i % cap) % cap;
}

/* Summary of rank R's late entries in the straggler ring, newest first,
 * skipping the newest SKIP slots and stopping after MAX_LATE late entries
 * when MAX_LATE > 0. */
typedef struct {
    uint32_t n_late;
    double late_med_ms, late_max_ms, pct_med, med_step_ms;
    int blame;
    double explained_ms;
    int method, ref;
    uint64_t first, last;
} late_summary;

static void summarize_late(ss_detectors *d, uint32_t r, uint32_t skip,
                           uint32_t max_late, late_summary *out)
{
    memset(out, 0, sizeof *out);
    out->blame = NO_NAME;
    out->ref = NO_NAME;
    size_t base = (size_t)r * d->sw;
    const float *late = d->s_late_ms + base;
    const uint8_t *blame = d->s_blame + base;
    const uint8_t *flags = d->s_flags + base;
    /* scratch: four arrays of sw doubles */
    double *lv = d->f64, *pct = lv + d->sw, *med = pct + d->sw;
    double *ex = med + d->sw;
    uint32_t votes[SS_MAX_RUN_NAMES];
    memset(votes, 0, sizeof votes);
    uint32_t n = 0, m = 0;
    for (uint32_t i = skip; i < d->s_fill; i++) {
        uint32_t k = ring_back(d->s_head, d->sw, i);
        if (!(flags[k] & F_LATE))
            continue;
        if (n == 0) {
            out->last = d->s_step[k];
            out->method = d->s_method[k];
            out->ref = d->s_ref[k];
        }
        out->first = d->s_step[k];
        lv[n++] = late[k];
        if (late[k] > out->late_max_ms)
            out->late_max_ms = late[k];
        if (blame[k] != NO_NAME)
            votes[blame[k]]++;
        if (d->s_med_ms[k] > 0) {
            pct[m] = late[k] / d->s_med_ms[k];
            med[m++] = d->s_med_ms[k];
        }
        if (max_late && n >= max_late)
            break;
    }
    out->n_late = n;
    if (n == 0)
        return;
    uint32_t best = 0;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            out->blame = p;
        }
    /* what the blamed phase explains, over the same late entries */
    uint32_t e = 0, seen = 0;
    for (uint32_t i = skip; i < d->s_fill && seen < n; i++) {
        uint32_t k = ring_back(d->s_head, d->sw, i);
        if (!(flags[k] & F_LATE))
            continue;
        seen++;
        if (out->blame != NO_NAME && blame[k] == out->blame)
            ex[e++] = d->s_expl_ms[base + k];
    }
    out->late_med_ms = ss_median_f64(lv, n);
    if (m) {
        out->med_step_ms = ss_median_f64(med, m);
        out->pct_med = ss_median_f64(pct, m);
    }
    if (e)
        out->explained_ms = ss_median_f64(ex, e);
    if (out->explained_ms < d->p[P_S_BLAME_FRAC] * out->late_med_ms) {
        out->blame = NO_NAME; /* no phase explains enough of it */
        out->explained_ms = 0;
    }
}

static void blame_clause(const ss_detectors *d, const late_summary *s,
                         char *buf, size_t len)
{
    char a[32];
    if (s->blame == NO_NAME || s->explained_ms <= 0) {
        buf[0] = '\0';
        return;
    }
    if (s->explained_ms >= s->late_med_ms)
        snprintf(buf, len, "; its %s phase explains all of it (%s ms "
                 "longer than the median rank's)", name_of(d, s->blame),
                 fmt_ms(a, sizeof a, s->explained_ms));
    else
        snprintf(buf, len, "; its %s phase explains %s ms of it",
                 name_of(d, s->blame), fmt_ms(a, sizeof a, s->explained_ms));
}

static void straggler_evidence(ss_detectors *d, ss_finding *f,
                               const char *mode, const late_summary *s,
                               uint32_t steps_seen)
{
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_str(&j, "mode", mode);
    jb_str(&j, "method", method_name(s->method));
    if (s->method == M_ARRIVAL)
        jb_str(&j, "sync", name_of(d, s->ref));
    if (s->method == M_SYNC_PHASE)
        jb_str(&j, "sync_phase", name_of(d, s->ref));
    jb_num(&j, "late_ms_median", round(s->late_med_ms * 10) / 10);
    jb_num(&j, "late_ms_max", round(s->late_max_ms * 10) / 10);
    jb_num(&j, "late_pct_median", round(s->pct_med * 1000) / 10);
    jb_num(&j, "median_step_ms", round(s->med_step_ms * 10) / 10);
    jb_num(&j, "steps_late", s->n_late);
    jb_num(&j, "steps_seen", steps_seen);
    if (s->blame != NO_NAME && s->explained_ms > 0) {
        jb_str(&j, "phase", name_of(d, s->blame));
        jb_num(&j, "explained_ms", round(s->explained_ms * 10) / 10);
    }
    jb_end(&j);
    if (s->blame != NO_NAME && s->explained_ms > 0)
        snprintf(f->phase, sizeof f->phase, "%s", name_of(d, s->blame));
    else
        f->phase[0] = '\0';
}

/* One sentence on how late the rank is, by the method that measured it. */
static void lateness_words(const ss_detectors *d, const late_summary *s,
                           char *buf, size_t len)
{
    char a[32];
    int pct = (int)lround(s->pct_med * 100);
    const char *ms = fmt_ms(a, sizeof a, s->late_med_ms);
    if (s->method == M_ARRIVAL)
        snprintf(buf, len, "it reaches %s %s ms (+%d %% of a median step) "
                 "after the median rank", name_of(d, s->ref), ms, pct);
    else if (s->method == M_SYNC_PHASE)
        snprintf(buf, len, "it waits %s ms (%d %% of a median step) less "
                 "than the median rank in %s, the phase that holds the "
                 "synchronization, so every other rank waits for it",
                 ms, pct, name_of(d, s->ref));
    else
        snprintf(buf, len, "its step takes %s ms (+%d %%) longer than the "
                 "median rank's", ms, pct);
}

static void refresh_persistent(ss_detectors *d, uint32_t r, int opening)
{
    strag_rank *sr = &d->sr[r];
    det_finding *df = &d->fd[sr->persistent];
    ss_finding *f = &df->f;
    late_summary s;
    summarize_late(d, r, 0, 0, &s);
    if (s.n_late == 0)
        return;
    if (opening)
        f->first_step = s.first;
    f->last_step = s.last;
    int32_t rank = (int32_t)r;
    set_ranks(f, &rank, 1);
    f->severity = s.pct_med >= d->p[P_S_CRIT_FRAC] ? SS_CRITICAL
                                                   : SS_WARNING;
    straggler_evidence(d, f, "persistent", &s, sr->seen);
    char how[256], why[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    snprintf(f->message, sizeof f->message,
             "rank %u is a persistent straggler: in %u of the last %u steps "
             "%s%s.", r, s.n_late, sr->seen, how, why);
    df->dirty = 1;
}

/* Publishes rank R's pending transient burst as a finding. */
static void commit_pending(ss_detectors *d, uint32_t r)
{
    strag_rank *sr = &d->sr[r];
    int32_t idx = finding_new(d, "straggler");
    if (idx >= 0) {
        uint32_t id = d->fd[idx].f.id;
        d->fd[idx].f = *sr->pending;
        d->fd[idx].f.id = id;
        d->fd[idx].f.attempt = d->attempt;
        d->fd[idx].dirty = 1;
    }
    free(sr->pending);
    sr->pending = NULL;
}

/*
 * Rank R's run of late steps ended (or the run of the job ends).  A run
 * long enough and never part of a persistent episode is a transient
 * straggler; it stays pending until the rank has been seen in
 * straggler.min_steps steps, because a run at the very start may be the
 * opening of a persistent episode.
 */
static void end_run(ss_detectors *d, uint32_t r, int current_included)
{
    strag_rank *sr = &d->sr[r];
    uint32_t run = sr->run;
    int report = run >= param_u32(d, P_S_TRANSIENT) && !sr->run_persistent &&
                 sr->persistent < 0;
    sr->run = 0;
    sr->run_persistent = 0;
    if (!report || (sr->pending && sr->pending->last_step -
                                           sr->pending->first_step + 1 >=
                                       run))
        return; /* a longer burst is already pending */
    /* the late entries of the run are the newest ones, after the current
     * (not late) entry when the run just ended */
    late_summary s;
    summarize_late(d, r, current_included ? 0 : 1, run, &s);
    if (s.n_late == 0)
        return;
    ss_finding *f = sr->pending ? sr->pending : malloc(sizeof *f);
    if (!f)
        return;
    memset(f, 0, sizeof *f);
    sr->pending = f;
    snprintf(f->kind, sizeof f->kind, "straggler");
    f->first_step = sr->run_first;
    f->last_step = sr->run_last;
    int32_t rank = (int32_t)r;
    set_ranks(f, &rank, 1);
    f->severity = SS_WARNING;
    straggler_evidence(d, f, "transient", &s, run);
    char how[256], why[128];
    lateness_words(d, &s, how, sizeof how);
    blame_clause(d, &s, why, sizeof why);
    snprintf(f->message, sizeof f->message,
             "rank %u was a transient straggler for %u consecutive steps "
             "(%" PRIu64 " to %" PRIu64 "): %s%s.",
             r, run, sr->run_first, sr->run_last, how, why);
    if (sr->seen >= param_u32(d, P_S_MIN_STEPS))
        commit_pending(d, r);
}

/* Picks how lateness is measured in this step and fills LATE (ns, per
 * rank; SS_MISSING where not measurable).  Returns the method and sets
 * *REF to the sync point or sync phase used. */
static int measure_lateness(ss_detectors *d, const ss_step_view *v,
                            uint32_t world, double thr_ns, int64_t *late,
                            int *ref)
{
    *ref = NO_NAME;
    for (uint32_t r = 0; r < world; r++)
        late[r] = SS_MISSING;

    /* 1. arrival at the sync point most ranks reported */
    int best = -1;
    uint32_t best_n = 1;
    for (uint32_t i = 0; i < v->n_syncs; i++)
        if (v->syncs[i].n > best_n && v->syncs[i].name >= 0 &&
            (uint32_t)v->syncs[i].name < v->n_names) {
            best_n = v->syncs[i].n;
            best = v->syncs[i].name;
        }
    if (best >= 0) {
        size_t n = 0;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (rs->present && rs->sync_arrival_ns[best] != SS_MISSING)
                d->i64[n++] = rs->sync_arrival_ns[best];
        }
        int64_t med = ss_median_i64(d->i64, n);
        /* LATE may be the scratch just used: write every entry */
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            late[r] = rs->present && rs->sync_arrival_ns[best] != SS_MISSING
                          ? rs->sync_arrival_ns[best] - med
                          : SS_MISSING;
        }
        *ref = best;
        return M_ARRIVAL;
    }

    /* 2. the phase holding the synchronization: its shortest rank lies far
     * below the median rank (it waits least) and is the rank with the
     * most time outside that phase.  A slow compute phase has its outlier
     * above the median instead, which tells the two apart even though
     * every rank's step takes the same time. */
    int sync_phase = -1;
    double sync_spread = 0, sync_median = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_phase_stat *ps = &v->phases[i];
        int p = ps->name;
        if (p < 0 || (uint32_t)p >= v->n_names || ps->stat.n < 2)
            continue;
        double spread = (double)ps->stat.median - (double)ps->stat.min;
        if (spread < thr_ns || spread <= sync_spread)
            continue;
        int32_t rmin = -1, rrest = -1;
        int64_t vmin = 0, rest_max = 0;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (!rs->present || rs->phase_ns[p] == SS_MISSING)
                continue;
            int64_t val = rs->phase_ns[p];
            int64_t rest = rs->step_ns - val;
            if (rmin < 0 || val < vmin) {
                vmin = val;
                rmin = (int32_t)r;
            }
            if (rrest < 0 || rest > rest_max) {
                rest_max = rest;
                rrest = (int32_t)r;
            }
        }
        if (rmin >= 0 && rmin == rrest) {
            sync_phase = p;
            sync_spread = spread;
            sync_median = (double)ps->stat.median;
        }
    }
    double step_spread = (double)v->step_time.max - (double)v->step_time.min;
    if (sync_phase >= 0 && step_spread < d->p[P_S_SYNC_RATIO] * sync_spread) {
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (rs->present && rs->phase_ns[sync_phase] != SS_MISSING)
                late[r] = (int64_t)(sync_median -
                                    (double)rs->phase_ns[sync_phase]);
        }
        *ref = sync_phase;
        return M_SYNC_PHASE;
    }

    /* 3. unsynchronized ranks: the step itself */
    for (uint32_t r = 0; r < world; r++)
        if (v->ranks[r].present && v->ranks[r].step_ns != SS_MISSING)
            late[r] = v->ranks[r].step_ns - v->step_time.median;
    return M_STEP_TIME;
}

/* The phase (other than SKIP) in which rank RS exceeds the median rank the
 * most; NO_NAME when none exceeds it. */
static int blame_phase(const ss_step_view *v, const ss_rank_step *rs,
                       int skip, double *excess_ms)
{
    int best = NO_NAME;
    double best_ex = 0;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p == skip || p < 0 || (uint32_t)p >= v->n_names ||
            rs->phase_ns[p] == SS_MISSING)
            continue;
        double ex = (double)rs->phase_ns[p] - (double)v->phases[i].stat.median;
        if (ex > best_ex) {
            best_ex = ex;
            best = p;
        }
    }
    *excess_ms = best_ex / 1e6;
    return best;
}

static void straggler_step(ss_detectors *d, const ss_step_view *v,
                           uint32_t world)
{
    uint32_t sw = d->sw, idx = d->s_head;
    d->s_head = (idx + 1) % sw;
    if (d->s_fill < sw)
        d->s_fill++;
    for (uint32_t r = 0; r < world; r++) {
        uint8_t *fl = &d->s_flags[(size_t)r * sw + idx];
        if (*fl & F_SEEN)
            d->sr[r].seen--;
        if (*fl & F_LATE)
            d->sr[r].late--;
        *fl = 0;
    }
    double med_step = (double)v->step_time.median;
    d->s_step[idx] = v->step;
    d->s_med_ms[idx] =
        v->step_time.median == SS_MISSING ? 0 : (float)(med_step / 1e6);
    d->s_method[idx] = M_NONE;
    d->s_ref[idx] = NO_NAME;
    if (v->n_present >= 2 && v->step_time.median != SS_MISSING &&
        med_step > 0) {
        double thr = d->p[P_S_MIN_LATE_MS] * 1e6;
        if (thr < d->p[P_S_MIN_LATE_FRAC] * med_step)
            thr = d->p[P_S_MIN_LATE_FRAC] * med_step;
        int ref;
        int64_t *late = d->i64;
        int method = measure_lateness(d, v, world, thr, late, &ref);
        /* With three ranks or more, a rank must also stand out from the
         * spread of all ranks: when ranks share few cores, arrivals spread
         * evenly and the last one is not a straggler. */
        size_t n = 0;
        for (uint32_t r = 0; r < world; r++)
            if (late[r] != SS_MISSING)
                d->f64[n++] = (double)late[r];
        if (n >= 3) {
            double spread = d->p[P_S_MAD_K] * SS_MAD_TO_SIGMA *
                            ss_mad_f64(d->f64, n, NULL);
            if (thr < spread)
                thr = spread;
        }
        d->s_method[idx] = (uint8_t)method;
        d->s_ref[idx] = (uint8_t)ref;
        for (uint32_t r = 0; r < world; r++) {
            if (late[r] == SS_MISSING)
                continue;
            if (method != M_STEP_TIME &&
                (double)late[r] / 1e6 > d->step_sync_late_ms)
                d->step_sync_late_ms = (double)late[r] / 1e6;
            size_t k = (size_t)r * sw + idx;
            strag_rank *sr = &d->sr[r];
            d->s_flags[k] = F_SEEN;
            sr->seen++;
            d->s_late_ms[k] = (float)((double)late[r] / 1e6);
            d->s_blame[k] = NO_NAME;
            d->s_expl_ms[k] = 0;
            if ((double)late[r] < thr) {
                if (sr->run)
                    end_run(d, r, 0);
                continue;
            }
            d->s_flags[k] |= F_LATE;
            sr->late++;
            double ex;
            d->s_blame[k] = (uint8_t)blame_phase(
                v, &v->ranks[r], method == M_SYNC_PHASE ? ref : -1, &ex);
            d->s_expl_ms[k] = (float)ex;
            if (sr->run++ == 0)
                sr->run_first = v->step;
            sr->run_last = v->step;
        }
    }
    for (uint32_t r = 0; r < world; r++) {
        strag_rank *sr = &d->sr[r];
        if (sr->persistent < 0) {
            if (sr->seen >= param_u32(d, P_S_MIN_STEPS) &&
                sr->late >= d->p[P_S_PERSIST_FRAC] * sr->seen &&
                sr->late > 0) {
                sr->persistent = finding_new(d, "straggler");
                if (sr->persistent >= 0)
                    refresh_persistent(d, r, 1);
            }
        } else if (sr->late < d->p[P_S_END_FRAC] * sr->seen) {
            sr->persistent = -1; /* keeps the last snapshot */
        } else if (d->s_flags[(size_t)r * sw + idx] & F_SEEN) {
            refresh_persistent(d, r, 0);
        }
        if (sr->persistent >= 0 && sr->run)
            sr->run_persistent = 1;
        if (sr->pending && sr->persistent >= 0) {
            free(sr->pending); /* it opened this persistent episode */
            sr->pending = NULL;
        } else if (sr->pending && sr->seen >= param_u32(d, P_S_MIN_STEPS)) {
            commit_pending(d, r);
        }
    }
}

/* ---- data stall ---- */

static int is_data_name(const char *name)
{
    for (int i = 0; data_phase_names[i]; i++)
        if (strcasecmp(name, data_phase_names[i]) == 0)
            return 1;
    return 0;
}

static void refresh_stall(ss_detectors *d, uint32_t r)
{
    stall_rank *st = d->stall[r];
    det_finding *df = &d->fd[st->finding];
    ss_finding *f = &df->f;
    uint32_t n = st->count < STALL_RING ? st->count : STALL_RING;
    uint64_t steps[STALL_RING];
    double *ex = d->f64;
    for (uint32_t i = 0; i < n; i++) {
        /* oldest first */
        uint32_t k = (st->count - n + i) % STALL_RING;
        steps[i] = st->steps[k];
        ex[i] = st->excess_ms[k];
    }
    uint64_t period = ss_regular_period(steps, n, d->p[P_D_PERIOD_FRAC]);
    double med = ss_median_f64(ex, n);
    int32_t rank = (int32_t)r;
    set_ranks(f, &rank, 1);
    snprintf(f->phase, sizeof f->phase, "%s", name_of(d, st->phase));
    f->first_step = st->first;
    f->last_step = st->last;
    f->severity = st->med_step_ms > 0 &&
                          med >= d->p[P_D_CRIT_FRAC] * st->med_step_ms
                      ? SS_CRITICAL
                      : SS_WARNING;
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_num(&j, "stalls", st->count);
    jb_num(&j, "total_stall_ms", round(st->total_ms * 10) / 10);
    jb_num(&j, "stall_ms_median", round(med * 10) / 10);
    jb_num(&j, "stall_ms_max", round(st->max_ms * 10) / 10);
    jb_num(&j, "median_step_ms", round(st->med_step_ms * 10) / 10);
    jb_num(&j, "steps_seen", (double)d->n_eval);
    if (period)
        jb_num(&j, "period_steps", (double)period);
    jb_end(&j);
    char a[32], b[32], per[64] = "";
    if (period)
        snprintf(per, sizeof per, "; the stalls recur every %" PRIu64
                 " steps",
                 period);
    snprintf(f->message, sizeof f->message,
             "rank %u stalls waiting for data: %u times since step "
             "%" PRIu64 " its %s phase took %s ms (median) longer than the "
             "median rank's, %s s in all%s.",
             r, st->count, st->first, f->phase, fmt_ms(a, sizeof a, med),
             fmt_ms(b, sizeof b, st->total_ms / 1000), per);
    df->dirty = 1;
}

static void stall_seen(ss_detectors *d, uint32_t r, uint64_t step, int phase,
                       double excess_ms, double med_step_ms)
{
    stall_rank *st = d->stall[r];
    if (!st) {
        st = d->stall[r] = zalloc(1, sizeof *st);
        if (!st)
            return;
        st->finding = -1;
        st->first = step;
    }
    if (st->count && st->last == step) {
        /* two data phases stalled in one step: one stall */
        uint32_t k = (st->count - 1) % STALL_RING;
        if (excess_ms > st->excess_ms[k]) {
            st->total_ms += excess_ms - st->excess_ms[k];
            st->excess_ms[k] = (float)excess_ms;
            st->phase = (uint8_t)phase;
        }
    } else {
        uint32_t k = st->count % STALL_RING;
        st->steps[k] = step;
        st->excess_ms[k] = (float)excess_ms;
        st->count++;
        st->total_ms += excess_ms;
        st->phase = (uint8_t)phase;
    }
    st->last = step;
    if (excess_ms > st->max_ms)
        st->max_ms = excess_ms;
    st->med_step_ms = med_step_ms;
    if (st->count < param_u32(d, P_D_MIN_COUNT))
        return;
    if (st->finding < 0)
        st->finding = finding_new(d, "data_stall");
    if (st->finding >= 0)
        refresh_stall(d, r);
}

static void data_stall_step(ss_detectors *d, const ss_step_view *v,
                            uint32_t world)
{
    double med_step_ms = v->step_time.median == SS_MISSING
                             ? 0
                             : (double)v->step_time.median / 1e6;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_phase_stat *ps = &v->phases[i];
        int p = ps->name;
        if (p < 0 || (uint32_t)p >= v->n_names || !d->is_data[p] ||
            ps->stat.n == 0)
            continue;
        double med = (double)ps->stat.median;
        double floor_ns = d->p[P_D_MIN_MS] * 1e6;
        for (uint32_t r = 0; r < world; r++) {
            const ss_rank_step *rs = &v->ranks[r];
            if (!rs->present || rs->phase_ns[p] == SS_MISSING)
                continue;
            double val = (double)rs->phase_ns[p];
            if (val - med >= floor_ns && val >= d->p[P_D_FACTOR] * med) {
                d->stall_on_step = 1;
                stall_seen(d, r, v->step, p, (val - med) / 1e6, med_step_ms);
            }
        }
    }
}

/* ---- jitter ---- */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Fills RANKS with up to MAX ranks that were the slowest in the most
 * outlier steps (at least twice); returns how many. */
static uint32_t frequent_ranks(int32_t *wr, uint32_t n, int32_t *ranks,
                               uint32_t max)
{
    qsort(wr, n, sizeof wr[0], cmp_i32);
    uint32_t counts[4] = {0}, got = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i;
        while (j < n && wr[j] == wr[i])
            j++;
        uint32_t c = j - i;
        if (wr[i] >= 0 && c >= 2) {
            /* insert into the top list, most frequent first */
            uint32_t pos = got < max ? got++ : max;
            while (pos > 0 && counts[pos - 1] < c) {
                if (pos < max) {
                    counts[pos] = counts[pos - 1];
                    ranks[pos] = ranks[pos - 1];
                }
                pos--;
            }
            if (pos < max) {
                counts[pos] = c;
                ranks[pos] = wr[i];
            }
        }
        i = j;
    }
    return got;
}

static void refresh_jitter(ss_detectors *d, int opening, int by_outliers)
{
    det_finding *df = &d->fd[d->j_finding];
    ss_finding *f = &df->f;
    uint32_t n = d->j_fill, out = 0;
    uint32_t votes[SS_MAX_RUN_NAMES];
    double expl_sum[SS_MAX_RUN_NAMES];
    memset(votes, 0, sizeof votes);
    memset(expl_sum, 0, sizeof expl_sum);
    double worst = 0;
    uint64_t worst_step = 0, first = 0, last = 0;
    uint64_t oldest = d->j_step[ring_back(d->j_head, d->jw, n - 1)];
    uint64_t newest = d->j_step[ring_back(d->j_head, d->jw, 0)];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = ring_back(d->j_head, d->jw, n - 1 - i); /* oldest first */
        if (!d->j_out[k])
            continue;
        if (out == 0)
            first = d->j_step[k];
        last = d->j_step[k];
        if (d->j_raw[k] > worst) {
            worst = d->j_raw[k];
            worst_step = d->j_step[k];
        }
        if (d->j_blame[k] != NO_NAME) {
            votes[d->j_blame[k]]++;
            expl_sum[d->j_blame[k]] += d->j_expl_ms[k];
        }
        d->j_sort[out++] = d->j_worst[k];
    }
    int32_t ranks[4];
    uint32_t n_ranks = frequent_ranks(d->j_sort, out, ranks, 4);
    set_ranks(f, ranks, n_ranks);
    int blame = NO_NAME;
    uint32_t best = 0;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (votes[p] > best) {
            best = votes[p];
            blame = p;
        }
    double expl = blame != NO_NAME ? expl_sum[blame] / votes[blame] : 0;
    if (blame != NO_NAME && votes[blame] * 2 >= out)
        snprintf(f->phase, sizeof f->phase, "%s", name_of(d, blame));
    else
        f->phase[0] = '\0';
    double frac = n ? (double)out / n : 0;
    double cv = d->j_med > 0 ? d->j_sigma / d->j_med : 0;
    if (opening)
        f->first_step = out ? first : oldest;
    f->last_step = out ? last : newest;
    f->severity = frac >= d->p[P_J_CRIT_FRAC] ||
                          cv >= 2 * d->p[P_J_MAX_CV]
                      ? SS_CRITICAL
                      : SS_WARNING;
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_str(&j, "trigger", by_outliers ? "outliers" : "spread");
    jb_num(&j, "steps_seen", n);
    jb_num(&j, "outliers", out);
    jb_num(&j, "outlier_frac", round(frac * 1000) / 1000);
    jb_num(&j, "median_step_ms", round(d->j_med * 10) / 10);
    jb_num(&j, "robust_sigma_ms", round(d->j_sigma * 10) / 10);
    jb_num(&j, "robust_cv", round(cv * 1000) / 1000);
    jb_num(&j, "threshold_ms", round(d->j_thr * 10) / 10);
    if (out) {
        jb_num(&j, "worst_step_ms", round(worst * 10) / 10);
        jb_num(&j, "worst_step", (double)worst_step);
    }
    jb_num(&j, "stall_steps_excluded", (double)d->j_stall_excluded);
    if (f->phase[0]) {
        jb_str(&j, "phase", f->phase);
        jb_num(&j, "explained_ms", round(expl * 10) / 10);
    }
    jb_end(&j);
    char a[32], b[32], c[32], e[32], phase[160] = "", who[160] = "";
    if (f->phase[0])
        snprintf(phase, sizeof phase, "; the %s phase accounts for %s ms of "
                 "a typical slow step", f->phase, fmt_ms(e, sizeof e, expl));
    if (n_ranks) {
        char list[96];
        snprintf(who, sizeof who, "; the slowest rank in those steps is "
                 "most often %s", fmt_ranks(list, sizeof list, ranks,
                                            n_ranks, n_ranks));
    }
    if (by_outliers)
        snprintf(f->message, sizeof f->message,
                 "step time jitters: %u of the last %u steps took longer "
                 "than %s ms (median step %s ms, worst %s ms at step "
                 "%" PRIu64 ")%s%s.",
                 out, n, fmt_ms(a, sizeof a, d->j_thr),
                 fmt_ms(b, sizeof b, d->j_med), fmt_ms(c, sizeof c, worst),
                 worst_step, phase, who);
    else
        snprintf(f->message, sizeof f->message,
                 "step time varies widely: a robust spread of %s ms around "
                 "a median step of %s ms (CV %.2f) over the last %u steps.",
                 fmt_ms(a, sizeof a, d->j_sigma),
                 fmt_ms(b, sizeof b, d->j_med), cv, n);
    df->dirty = 1;
}

static void jitter_step(ss_detectors *d, const ss_step_view *v)
{
    if (v->step_time.median == SS_MISSING)
        return;
    if (d->stall_on_step) {
        d->j_stall_excluded++;
        return;
    }
    /* In synchronized steps every rank waits for the latest one; that
     * part of the step belongs to the straggler detector, so jitter looks
     * at the step time without it. */
    double raw = (double)v->step_time.median / 1e6;
    double x = raw - d->step_sync_late_ms;
    uint32_t jw = d->jw, n = d->j_fill;
    int outlier = 0;
    if (n >= param_u32(d, P_J_MIN_STEPS)) {
        for (uint32_t i = 0; i < n; i++)
            d->f64[i] = d->j_ms[i];
        double med;
        double sigma = ss_mad_f64(d->f64, n, &med) * SS_MAD_TO_SIGMA;
        double margin = d->p[P_J_MAD_K] * sigma;
        if (margin < d->p[P_J_REL_FLOOR] * med)
            margin = d->p[P_J_REL_FLOOR] * med;
        if (margin < d->p[P_J_ABS_FLOOR_MS])
            margin = d->p[P_J_ABS_FLOOR_MS];
        d->j_med = med;
        d->j_sigma = sigma;
        d->j_thr = med + margin;
        outlier = x > d->j_thr;
    }
    uint32_t k = d->j_head;
    if (n == jw && d->j_out[k])
        d->j_outliers--;
    int blame = NO_NAME;
    double blame_ex = 0;
    if (outlier) {
        /* the phase whose median rose most above its own recent median */
        for (uint32_t i = 0; i < v->n_phases; i++) {
            int p = v->phases[i].name;
            if (p < 0 || (uint32_t)p >= v->n_names || !d->j_phase[p])
                continue;
            uint32_t m = 0;
            for (uint32_t t = 0; t < n; t++)
                if (!isnan(d->j_phase[p][t]))
                    d->f64[m++] = d->j_phase[p][t];
            if (m == 0)
                continue;
            double ex = (double)v->phases[i].stat.median / 1e6 -
                        ss_median_f64(d->f64, m);
            if (ex > blame_ex) {
                blame_ex = ex;
                blame = p;
            }
        }
    }
    d->j_ms[k] = x;
    d->j_raw[k] = raw;
    d->j_step[k] = v->step;
    d->j_out[k] = (uint8_t)outlier;
    d->j_blame[k] = (uint8_t)blame;
    d->j_expl_ms[k] = (float)blame_ex;
    d->j_worst[k] = v->step_time.worst_rank;
    for (int p = 0; p < SS_MAX_RUN_NAMES; p++)
        if (d->j_phase[p])
            d->j_phase[p][k] = NAN;
    for (uint32_t i = 0; i < v->n_phases; i++) {
        int p = v->phases[i].name;
        if (p < 0 || (uint32_t)p >= v->n_names)
            continue;
        if (!d->j_phase[p]) {
            d->j_phase[p] = malloc(jw * sizeof(float));
            if (!d->j_phase[p])
                continue;
            for (uint32_t t = 0; t < jw; t++)
                d->j_phase[p][t] = NAN;
        }
        d->j_phase[p][k] = (float)((double)v->phases[i].stat.median / 1e6);
    }
    d->j_head = (k + 1) % jw;
    if (d->j_fill < jw)
        d->j_fill++;
    if (outlier)
        d->j_outliers++;
    if (n < param_u32(d, P_J_MIN_STEPS))
        return;

    double cv = d->j_med > 0 ? d->j_sigma / d->j_med : 0;
    double fill = d->j_fill;
    int by_outliers = d->j_outliers >= d->p[P_J_MIN_OUTLIERS] &&
                      d->j_outliers >= d->p[P_J_MIN_FRAC] * fill;
    int by_spread = cv >= d->p[P_J_MAX_CV] &&
                    d->j_sigma >= d->p[P_J_MIN_SPREAD_MS];
    if (d->j_finding < 0) {
        if (by_outliers || by_spread) {
            d->j_finding = finding_new(d, "jitter");
            if (d->j_finding >= 0)
                refresh_jitter(d, 1, by_outliers);
        }
        return;
    }
    /* an open episode ends with hysteresis: well below both triggers */
    int keep_outliers = d->j_outliers * 2 >= d->p[P_J_MIN_OUTLIERS] &&
                        d->j_outliers * 2 >= d->p[P_J_MIN_FRAC] * fill;
    int keep_spread = cv >= 0.8 * d->p[P_J_MAX_CV] &&
                      d->j_sigma >= 0.8 * d->p[P_J_MIN_SPREAD_MS];
    if (!keep_outliers && !keep_spread)
        d->j_finding = -1; /* keeps the last snapshot */
    else if (outlier || by_spread)
        refresh_jitter(d, 0, by_outliers || (!by_spread && keep_outliers));
}

/* ---- memory ---- */

static const char *mem_label(int kind)
{
    return kind == MEM_RSS ? "RSS" : "device memory";
}

static int mem_kind_init(ss_detectors *d, mem_kind *m)
{
    size_t w = d->world, b = param_u32(d, P_M_BASELINE);
    size_t pts = param_u32(d, P_C_POINTS) & ~1u;
    m->base = zalloc(w * b, sizeof *m->base);
    m->base_n = zalloc(w, 1);
    m->in_spike = zalloc(w, 1);
    m->spiked = zalloc(w, 1);
    m->pv = zalloc(w * pts, sizeof *m->pv);
    m->ps = zalloc(w * pts, sizeof *m->ps);
    m->pn = zalloc(w, sizeof *m->pn);
    m->pstride = zalloc(w, sizeof *m->pstride);
    m->pwait = zalloc(w, sizeof *m->pwait);
    m->slope = zalloc(w, sizeof *m->slope);
    m->cfirst = zalloc(w, sizeof *m->cfirst);
    m->clast = zalloc(w, sizeof *m->clast);
    m->csamples = zalloc(w, sizeof *m->csamples);
    m->irun = zalloc(w, sizeof *m->irun);
    m->imbalanced = zalloc(w, 1);
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

static void refresh_spike(ss_detectors *d, int kind)
{
    mem_kind *m = &d->mem[kind];
    det_finding *df = &d->fd[m->spike_finding];
    ss_finding *f = &df->f;
    int32_t ranks[MAX_LISTED];
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world && n < MAX_LISTED; r++)
        if (m->spiked[r])
            ranks[n++] = (int32_t)r;
    set_ranks(f, ranks, n);
    f->first_step = m->spike_first;
    f->last_step = m->spike_last;
    double jump = (double)(m->spike_to - m->spike_from);
    double frac = m->spike_from > 0 ? jump / (double)m->spike_from : 0;
    f->severity = frac >= d->p[P_M_CRIT_FRAC] ? SS_CRITICAL : SS_WARNING;
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_str(&j, "memory", kind == MEM_RSS ? "rss" : "device");
    jb_num(&j, "spikes", m->spikes);
    jb_num(&j, "ranks_spiking", m->n_spiked);
    jb_num(&j, "worst_rank", m->spike_rank);
    jb_num(&j, "worst_step", (double)m->spike_step);
    jb_num(&j, "baseline_bytes", (double)m->spike_from);
    jb_num(&j, "peak_bytes", (double)m->spike_to);
    jb_num(&j, "jump_mib", round(jump / MIB * 10) / 10);
    jb_num(&j, "jump_pct", round(frac * 1000) / 10);
    jb_end(&j);
    char a[32], b[32], c[32], list[160];
    if (m->spikes == 1)
        snprintf(f->message, sizeof f->message,
                 "%s of rank %d spiked at step %" PRIu64 ": from %s (its "
                 "recent baseline) to %s (+%s, +%.0f %%).",
                 mem_label(kind), m->spike_rank, m->spike_step,
                 fmt_bytes(a, sizeof a, (double)m->spike_from),
                 fmt_bytes(b, sizeof b, (double)m->spike_to),
                 fmt_bytes(c, sizeof c, jump), frac * 100);
    else
        snprintf(f->message, sizeof f->message,
                 "%s spiked %u times on %s; the largest jump: rank %d at "
                 "step %" PRIu64 ", from %s (its recent baseline) to %s "
                 "(+%s, +%.0f %%).",
                 mem_label(kind), m->spikes,
                 fmt_ranks(list, sizeof list, ranks, n, m->n_spiked),
                 m->spike_rank, m->spike_step,
                 fmt_bytes(a, sizeof a, (double)m->spike_from),
                 fmt_bytes(b, sizeof b, (double)m->spike_to),
                 fmt_bytes(c, sizeof c, jump), frac * 100);
    df->dirty = 1;
}

static void spike_check(ss_detectors *d, int kind, uint32_t r, uint64_t step,
                        int64_t val)
{
    mem_kind *m = &d->mem[kind];
    uint32_t b = param_u32(d, P_M_BASELINE);
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
                d->f64[i] = (double)ring[i];
            base = (int64_t)ss_median_f64(d->f64, cnt);
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
            refresh_spike(d, kind);
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
        m->spike_finding = finding_new(d, "memory_spike");
    if (m->spike_finding >= 0)
        refresh_spike(d, kind);
}

static void creep_append(ss_detectors *d, mem_kind *m, uint32_t r,
                         uint64_t step, int64_t val)
{
    if (m->pwait[r] > 1) {
        m->pwait[r]--;
        return;
    }
    uint32_t pts = param_u32(d, P_C_POINTS) & ~1u;
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

static void refresh_creep(ss_detectors *d, int kind)
{
    mem_kind *m = &d->mem[kind];
    det_finding *df = &d->fd[m->creep_finding];
    ss_finding *f = &df->f;
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world; r++)
        if (m->slope[r] > 0)
            d->order[n++] = (int32_t)r;
    if (n == 0)
        return;
    /* worst first (selection of the top MAX_LISTED by slope) */
    uint32_t listed = n < MAX_LISTED ? n : MAX_LISTED;
    for (uint32_t i = 0; i < listed; i++) {
        uint32_t best = i;
        for (uint32_t j = i + 1; j < n; j++)
            if (m->slope[d->order[j]] > m->slope[d->order[best]])
                best = j;
        int32_t t = d->order[i];
        d->order[i] = d->order[best];
        d->order[best] = t;
    }
    int32_t w = d->order[0];
    for (uint32_t i = 0; i < n; i++)
        d->f64[i] = m->slope[d->order[i]];
    double med_slope = ss_median_f64(d->f64, n);
    set_ranks(f, d->order, listed);
    uint64_t first = m->cfirst[w], last = m->clast[w];
    for (uint32_t i = 0; i < listed; i++) {
        if (m->cfirst[d->order[i]] < first)
            first = m->cfirst[d->order[i]];
        if (m->clast[d->order[i]] > last)
            last = m->clast[d->order[i]];
    }
    f->first_step = first;
    f->last_step = last;
    double slope = m->slope[w];
    double per1000 = slope * 1000 / MIB;
    double span = (double)(m->clast[w] - m->cfirst[w]);
    f->severity = per1000 >= d->p[P_C_CRIT_MIB] ? SS_CRITICAL : SS_WARNING;
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_str(&j, "memory", kind == MEM_RSS ? "rss" : "device");
    jb_num(&j, "bytes_per_step", round(slope));
    jb_num(&j, "mib_per_1000_steps", round(per1000 * 10) / 10);
    jb_num(&j, "growth_mib", round(slope * span / MIB * 10) / 10);
    jb_num(&j, "span_steps", span);
    jb_num(&j, "samples", m->csamples[w]);
    jb_num(&j, "worst_rank", w);
    jb_num(&j, "ranks_creeping", n);
    jb_num(&j, "median_bytes_per_step", round(med_slope));
    jb_end(&j);
    char a[32], b[32], list[160], who[200];
    if (n == 1)
        snprintf(who, sizeof who, "%s of rank %d grows steadily",
                 mem_label(kind), w);
    else
        snprintf(who, sizeof who, "%s grows steadily on %s; the fastest, "
                 "rank %d,", mem_label(kind),
                 fmt_ranks(list, sizeof list, d->order, listed, n), w);
    snprintf(f->message, sizeof f->message,
             "%s by %s per step (%.0f MiB per 1000 steps, Theil-Sen slope "
             "over %u samples): +%s between steps %" PRIu64 " and "
             "%" PRIu64 ".",
             who, fmt_bytes(a, sizeof a, slope), per1000, m->csamples[w],
             fmt_bytes(b, sizeof b, slope * span), m->cfirst[w], m->clast[w]);
    df->dirty = 1;
}

static void creep_eval(ss_detectors *d, int kind)
{
    mem_kind *m = &d->mem[kind];
    uint32_t pts = param_u32(d, P_C_POINTS) & ~1u;
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
            d->tx[i] = (double)(ps[i] - ps[0]);
            d->ty[i] = (double)pv[i];
        }
        double s = ss_theil_sen(d->tx, d->ty, n, d->ts, d->ts_len);
        if (!(s >= min_bps) || s * span < min_growth)
            continue;
        /* sustained: both halves grow, so one jump is not creep */
        uint32_t h = n / 2;
        double s1 = ss_theil_sen(d->tx, d->ty, h, d->ts, d->ts_len);
        double s2 = ss_theil_sen(d->tx + h, d->ty + h, n - h, d->ts,
                                 d->ts_len);
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
        m->creep_finding = finding_new(d, "memory_creep");
    if (m->creep_finding >= 0)
        refresh_creep(d, kind);
}

static void refresh_imbalance(ss_detectors *d, int kind)
{
    mem_kind *m = &d->mem[kind];
    det_finding *df = &d->fd[m->imb_finding];
    ss_finding *f = &df->f;
    int32_t ranks[MAX_LISTED];
    uint32_t n = 0;
    for (uint32_t r = 0; r < d->world && n < MAX_LISTED; r++)
        if (m->imbalanced[r])
            ranks[n++] = (int32_t)r;
    set_ranks(f, ranks, n);
    f->first_step = m->imb_first;
    f->last_step = m->imb_last;
    double excess = (double)(m->imb_bytes - m->imb_median);
    double frac = m->imb_median > 0 ? excess / (double)m->imb_median : 0;
    f->severity = frac >= d->p[P_I_CRIT_FRAC] ? SS_CRITICAL : SS_WARNING;
    jbuf j;
    jb_begin(&j, f->evidence_json, sizeof f->evidence_json);
    jb_str(&j, "memory", kind == MEM_RSS ? "rss" : "device");
    jb_num(&j, "worst_rank", m->imb_rank);
    jb_num(&j, "rank_bytes", (double)m->imb_bytes);
    jb_num(&j, "median_bytes", (double)m->imb_median);
    jb_num(&j, "excess_mib", round(excess / MIB * 10) / 10);
    jb_num(&j, "excess_pct", round(frac * 1000) / 10);
    jb_num(&j, "steps_sustained", m->imb_run);
    jb_num(&j, "ranks_above", m->n_imbalanced);
    jb_end(&j);
    char a[32], b[32], c[32], list[160];
    snprintf(f->message, sizeof f->message,
             "%s is imbalanced: %s stay%s well above the median rank for "
             "%u+ consecutive steps; rank %d holds %s against a median of "
             "%s (+%s, +%.0f %%).",
             mem_label(kind), fmt_ranks(list, sizeof list, ranks, n,
                                        m->n_imbalanced),
             m->n_imbalanced == 1 ? "s" : "", m->imb_run, m->imb_rank,
             fmt_bytes(a, sizeof a, (double)m->imb_bytes),
             fmt_bytes(b, sizeof b, (double)m->imb_median),
             fmt_bytes(c, sizeof c, excess), frac * 100);
    df->dirty = 1;
}

static void memory_step(ss_detectors *d, const ss_step_view *v,
                        uint32_t world, int kind)
{
    const ss_stat *st = kind == MEM_RSS ? &v->rss : &v->device;
    mem_kind *m = &d->mem[kind];
    if (st->n == 0)
        return;
    if (!m->on && mem_kind_init(d, m) < 0)
        return;
    double med = (double)st->median;
    double imb_floor = d->p[P_I_MIN_MIB] * MIB;
    uint32_t min_run = param_u32(d, P_I_MIN_STEPS);
    int imb_changed = 0;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        int64_t val = kind == MEM_RSS ? rs->rss_bytes : rs->device_bytes;
        if (!rs->present || val == SS_MISSING)
            continue;
        spike_check(d, kind, r, v->step, val);
        creep_append(d, m, r, v->step, val);
        double ex = (double)val - med;
        if (st->n >= 2 && ex >= imb_floor && ex >= d->p[P_I_MIN_FRAC] * med) {
            if (++m->irun[r] < min_run)
                continue;
            if (!m->imbalanced[r]) {
                m->imbalanced[r] = 1;
                if (m->n_imbalanced++ == 0)
                    m->imb_first = v->step + 1 - m->irun[r];
            }
            m->imb_last = v->step;
            if (m->irun[r] > m->imb_run)
                m->imb_run = m->irun[r];
            /* the evidence follows the rank with the largest excess */
            if (m->imb_rank < 0 || (int32_t)r == m->imb_rank ||
                ex > (double)(m->imb_bytes - m->imb_median)) {
                m->imb_rank = (int32_t)r;
                m->imb_bytes = val;
                m->imb_median = (int64_t)med;
            }
            imb_changed = 1;
        } else {
            m->irun[r] = 0;
        }
    }
    if (imb_changed) {
        if (m->imb_finding < 0)
            m->imb_finding = finding_new(d, "memory_imbalance");
        if (m->imb_finding >= 0)
            refresh_imbalance(d, kind);
    }
    if (d->n_eval % param_u32(d, P_C_EVAL_EVERY) == 0)
        creep_eval(d, kind);
}

/* ---- driver ---- */

static void classify_names(ss_detectors *d, uint32_t n_names,
                           const char *const *names)
{
    if (n_names > SS_MAX_RUN_NAMES)
        n_names = SS_MAX_RUN_NAMES;
    for (uint32_t i = d->n_classified; i < n_names; i++)
        d->is_data[i] = (int8_t)(names && names[i] && is_data_name(names[i]));
    if (n_names > d->n_classified)
        d->n_classified = n_names;
}

void ss_detectors_step(ss_detectors *d, const ss_step_view *v,
                       const char *const *names)
{
    d->names = names;
    classify_names(d, v->n_names, names);
    d->n_steps++;
    if (d->n_steps <= (uint64_t)d->p[P_WARMUP])
        return;
    d->n_eval++;
    uint32_t world = v->world_size < d->world ? v->world_size : d->world;
    d->stall_on_step = 0;
    d->step_sync_late_ms = 0;
    data_stall_step(d, v, world);
    straggler_step(d, v, world);
    jitter_step(d, v);
    memory_step(d, v, world, MEM_RSS);
    memory_step(d, v, world, MEM_DEVICE);
    flush_findings(d);
}

void ss_detectors_finish(ss_detectors *d, const char *const *names)
{
    d->names = names;
    for (uint32_t r = 0; r < d->world; r++) {
        if (d->sr[r].run)
            end_run(d, r, 1);
        if (d->sr[r].pending && d->sr[r].persistent < 0)
            commit_pending(d, r);
    }
    for (int k = 0; k < MEM_KINDS; k++)
        if (d->mem[k].on)
            creep_eval(d, k);
    for (uint32_t i = 0; i < d->n_fd; i++)
        finding_emit(d, &d->fd[i]);
}
