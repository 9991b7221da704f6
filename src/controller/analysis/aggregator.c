/*
 * aggregator.c - step-aligned aggregation with a watermark (aggregator.h).
 *
 * Data layout.  The open steps live in a ring of window_steps slots (slot
 * index = step % window).  A slot that received at least one record owns a
 * buffer of world_size rows plus world_size "present" bytes; a row holds
 * step time, RSS and device bytes, the step's begin, and then one 8-byte
 * column per (kind, name) pair actually seen in the run (a name used as a
 * phase gets three columns: its total, its self time, and its first begin
 * after the step's begin packed with its run count; one used as a metric a
 * metric column),
 * so memory follows
 * the names in use rather than SS_MAX_RUN_NAMES.  When a record brings a
 * new (kind, name) the row width grows and the open buffers are re-laid
 * out once; buffers of finalized steps go to a small spare list, so the hot
 * path never calls malloc in steady state.
 *
 * Watermark.  Each slot counts done_live: the live ranks whose latest step
 * is >= the slot's step (a rank that skipped the step counts: it is
 * missing there).  A record moving a rank from step p to step s increments
 * the slots of (p, s]; a rank leaving decrements the slots it counted.  The
 * oldest open step is finalized as soon as done_live reaches the number of
 * live ranks, so the cost per record is O(1) amortized and independent of
 * the world size.  A record that lands window_steps or more beyond the
 * oldest open step forces the oldest steps out first (laggards missing);
 * so does one that opens a step past the first sure_window when the open
 * steps' rows would go over their budget (the default window).
 *
 * Vectors.  A slot that received vectors owns a world-sized array of
 * per-rank blocks; a rank's block holds its ss_values_item array and the
 * elements, copied from the record, and is freed with the slot.  Their
 * bytes count against values_budget_bytes; a record whose vectors would
 * go over it keeps its timings and loses its vectors (counted).  Labels
 * live apart, per rank and name, and are attached to the items when the
 * step is finalized.
 *
 * Finalization expands the rows into the name-indexed ss_rank_step arrays
 * of ss_step_view, computes order statistics with quickselect on scratch
 * arrays (stats.c), runs the detectors and then calls the sink.
 */
#include "aggregator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "stats.h"

enum {
    KIND_PHASE = 0,       /* total ns */
    KIND_SYNC = 1,        /* first arrival */
    KIND_METRIC = 2,      /* last value (double bits) */
    KIND_PHASE_TIME = 3,  /* first begin and run count, packed */
    KIND_PHASE_SELF = 4,  /* self ns (missing from recorders without it) */
    KIND_COUNT = 5
};
enum { COL_STEP = 0, COL_RSS = 1, COL_DEVICE = 2, COL_BEGIN = 3, COL_BASE = 4 };
enum { MAX_COLS = SS_MAX_RUN_NAMES * KIND_COUNT };
_Static_assert(SS_MAX_RUN_NAMES <= 255, "col_name holds a name in a byte");
enum { SPARE_MAX = 4 };              /* finalized buffers kept for reuse */
/* The default window: up to DEFAULT_WINDOW open steps, the first
 * SURE_WINDOW of them whatever their size, the rest while the open steps'
 * rows fit ROWS_BUDGET_BYTES (a 2-rank job holds 1024 steps in a few
 * hundred KiB; a world of 100,000 ranks stays at 64). */
enum { DEFAULT_WINDOW = 1024, SURE_WINDOW = 64, MAX_WINDOW = 65536 };
#define ROWS_BUDGET_BYTES ((size_t)64 << 20)
#define DEFAULT_VALUES_BUDGET ((uint64_t)256 << 20)
#define LABELS_BUDGET ((uint64_t)64 << 20)
#define VALUES_ITEM_COST 64 /* bytes counted per vector beyond its elements */

/* One rank's vectors of one step: the items, then their elements. */
typedef struct {
    uint64_t bytes; /* counted against the budget */
    uint32_t n;
    ss_values_item items[];
} agg_vblock;

/* The labels of one rank's vector: N pointers into the same block. */
typedef struct {
    uint32_t n;
    uint64_t bytes;
    const char **ptrs; /* n pointers, then the strings, one allocation */
} agg_labels;

typedef struct {
    uint32_t done_live; /* live ranks whose last step >= this step */
    uint32_t n_records; /* records received for this step */
    uint8_t *buf;       /* rows then present bytes; NULL when no record */
    agg_vblock **vals;  /* world entries, NULL until a vector arrives */
} agg_slot;

typedef struct {
    int64_t last_step; /* -1 before the first accepted record */
    uint8_t live;
    uint8_t crashed;
} agg_rank;

struct ss_aggregator {
    uint32_t world;
    uint32_t attempt;
    uint32_t window;
    uint32_t sure_window; /* steps a rank may lead whatever the rows cost */
    size_t open_slots;    /* slots holding a buffer */
    ss_sink sink;
    ss_detectors *det;
    int finished;

    char name_buf[SS_MAX_RUN_NAMES][SS_MAX_RUN_NAME_LEN + 1];
    const char *names[SS_MAX_RUN_NAMES];
    uint32_t n_names;

    /* Columns: col[kind][name] is the column (0-based after COL_BASE) or
     * -1; col_kind / col_name map back. */
    int16_t col[KIND_COUNT][SS_MAX_RUN_NAMES];
    uint8_t col_kind[MAX_COLS];
    uint8_t col_name[MAX_COLS];
    uint32_t n_cols;
    uint32_t col_cap;      /* columns the buffers have room for */
    uint32_t stride;       /* words per row: COL_BASE + col_cap */
    size_t buf_bytes;      /* bytes of one slot buffer */
    int64_t *template_row; /* stride words of "missing" */

    agg_rank *ranks;
    uint32_t n_live;
    agg_slot *slots;
    uint8_t *spare[SPARE_MAX];
    uint32_t n_spare;

    int have_base;     /* lo/hi are valid */
    int finalized_any; /* lo has moved forward at least once */
    uint64_t lo;       /* oldest open step */
    uint64_t hi;       /* newest accepted step */

    ss_aggregator_stats st;
    size_t bytes; /* everything allocated, for bytes_in_use */

    /* Finalization scratch, sized by world (and names for the view). */
    int64_t *vals;
    int32_t *vranks;
    uint32_t *missing;
    ss_rank_step *vrs;
    int64_t *vphase, *vsync; /* world * vnames_cap */
    int64_t *vpstart, *vpcount, *vpself;
    double *vmetric;
    int64_t *vmissing_i64;   /* vnames_cap words of SS_MISSING */
    double *vmissing_f64;    /* vnames_cap NaNs */
    uint32_t vnames_cap;
    ss_phase_stat phases[SS_MAX_RUN_NAMES];
    ss_stat phase_self[SS_MAX_RUN_NAMES]; /* parallel to phases */
    ss_sync_stat syncs[SS_MAX_RUN_NAMES];
    int metrics[SS_MAX_RUN_NAMES];

    /* Host evidence (aggregator.h): the provider, and per-rank scratch for
     * what it answers (world entries; NULL without a provider). */
    ss_host_provider host;
    ss_host_step *vhost;

    /* Vectors: the budget, what is held, and labels per rank (world
     * entries, each NULL or SS_MAX_RUN_NAMES entries). */
    uint64_t values_budget;
    uint64_t values_bytes;
    uint64_t labels_bytes;
    agg_labels **labels;
};

/* ---- allocation with accounting ---- */

static void *agg_alloc(ss_aggregator *a, size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p)
        a->bytes += size;
    return p;
}

static void agg_free(ss_aggregator *a, void *p, size_t size)
{
    if (!p)
        return;
    free(p);
    a->bytes -= size;
}

static int64_t *buf_rows(const uint8_t *buf)
{
    return (int64_t *)(uintptr_t)buf;
}

static uint8_t *buf_present(const ss_aggregator *a, uint8_t *buf)
{
    return buf + (size_t)a->world * a->stride * sizeof(int64_t);
}

static int64_t nan_bits(void)
{
    double d = NAN;
    int64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

void ss_aggregator_config_defaults(ss_aggregator_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    ss_detector_config_defaults(&cfg->detect);
}

/* A window of N steps as asked, within [2, MAX_WINDOW]. */
static uint32_t clamp_window(uint32_t n)
{
    return n < 2 ? 2 : n > MAX_WINDOW ? MAX_WINDOW : n;
}

uint32_t ss_aggregator_sure_window(const ss_aggregator_config *cfg)
{
    return cfg && cfg->window_steps ? clamp_window(cfg->window_steps)
                                    : SURE_WINDOW;
}

/* Rebuilds the template row for the current columns and stride. */
static void fill_template(ss_aggregator *a)
{
    int64_t nanw = nan_bits();
    for (uint32_t i = 0; i < a->stride; i++)
        a->template_row[i] = SS_MISSING;
    for (uint32_t c = 0; c < a->n_cols; c++)
        if (a->col_kind[c] == KIND_METRIC)
            a->template_row[COL_BASE + c] = nanw;
}

ss_aggregator *ss_aggregator_create(const ss_aggregator_config *cfg,
                                    uint32_t world_size, uint32_t attempt,
                                    const ss_sink *sink)
{
    if (world_size == 0)
        return NULL;
    ss_aggregator_config defaults;
    if (!cfg) {
        ss_aggregator_config_defaults(&defaults);
        cfg = &defaults;
    }
    ss_aggregator *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->bytes = sizeof *a;
    a->world = world_size;
    a->attempt = attempt;
    a->window = cfg->window_steps ? clamp_window(cfg->window_steps)
                                  : DEFAULT_WINDOW;
    a->sure_window = ss_aggregator_sure_window(cfg);
    if (sink)
        a->sink = *sink;
    memset(a->col, 0xff, sizeof a->col); /* every entry -1 */
    a->stride = COL_BASE;
    a->buf_bytes = (size_t)world_size * (a->stride * sizeof(int64_t) + 1);
    a->st.watermark = -1;
    a->n_live = world_size;

    size_t w = world_size;
    a->ranks = agg_alloc(a, w * sizeof *a->ranks);
    a->slots = agg_alloc(a, a->window * sizeof *a->slots);
    a->template_row = agg_alloc(a, a->stride * sizeof(int64_t));
    a->vals = agg_alloc(a, w * sizeof *a->vals);
    a->vranks = agg_alloc(a, w * sizeof *a->vranks);
    a->missing = agg_alloc(a, w * sizeof *a->missing);
    a->vrs = agg_alloc(a, w * sizeof *a->vrs);
    a->det = ss_detectors_create(&cfg->detect, world_size, attempt,
                                 &a->sink);
    if (!a->ranks || !a->slots || !a->template_row || !a->vals ||
        !a->vranks || !a->missing || !a->vrs || !a->det) {
        ss_aggregator_destroy(a);
        return NULL;
    }
    for (uint32_t r = 0; r < world_size; r++) {
        a->ranks[r].last_step = -1;
        a->ranks[r].live = 1;
        a->ranks[r].crashed = 0;
    }
    memset(a->slots, 0, a->window * sizeof *a->slots);
    fill_template(a);
    a->host = cfg->host;
    a->values_budget = cfg->values_budget_bytes ? cfg->values_budget_bytes
                                                : DEFAULT_VALUES_BUDGET;
    if (a->host.window && !(a->vhost = agg_alloc(a, w * sizeof *a->vhost))) {
        ss_aggregator_destroy(a);
        return NULL;
    }
    return a;
}

void ss_aggregator_destroy(ss_aggregator *a)
{
    if (!a)
        return;
    if (a->slots)
        for (uint32_t i = 0; i < a->window; i++) {
            free(a->slots[i].buf);
            if (a->slots[i].vals)
                for (uint32_t r = 0; r < a->world; r++)
                    free(a->slots[i].vals[r]);
            free(a->slots[i].vals);
        }
    if (a->labels)
        for (uint32_t r = 0; r < a->world; r++) {
            if (!a->labels[r])
                continue;
            for (uint32_t k = 0; k < SS_MAX_RUN_NAMES; k++)
                free(a->labels[r][k].ptrs);
            free(a->labels[r]);
        }
    free(a->labels);
    for (uint32_t i = 0; i < a->n_spare; i++)
        free(a->spare[i]);
    ss_detectors_destroy(a->det);
    free(a->ranks);
    free(a->slots);
    free(a->template_row);
    free(a->vals);
    free(a->vranks);
    free(a->missing);
    free(a->vrs);
    free(a->vhost);
    free(a->vphase);
    free(a->vsync);
    free(a->vpstart);
    free(a->vpcount);
    free(a->vpself);
    free(a->vmetric);
    free(a->vmissing_i64);
    free(a->vmissing_f64);
    free(a);
}

int ss_aggregator_intern(ss_aggregator *a, const char *name)
{
    if (!name || !name[0])
        return -1;
    size_t len = strlen(name);
    if (len > SS_MAX_RUN_NAME_LEN)
        return -1;
    for (uint32_t i = 0; i < a->n_names; i++)
        if (strcmp(a->names[i], name) == 0)
            return (int)i;
    if (a->n_names >= SS_MAX_RUN_NAMES)
        return -1;
    memcpy(a->name_buf[a->n_names], name, len + 1);
    a->names[a->n_names] = a->name_buf[a->n_names];
    return (int)a->n_names++;
}

const char *const *ss_aggregator_names(const ss_aggregator *a, uint32_t *n)
{
    if (n)
        *n = a->n_names;
    return a->names;
}

/* ---- columns ---- */

/*
 * Makes room for NEED columns in every buffer: open slots are copied into
 * wider buffers (new columns missing), spare buffers are dropped.  All or
 * nothing: returns -1 on out-of-memory with nothing changed.
 */
static int grow_columns(ss_aggregator *a, uint32_t need)
{
    uint32_t cap = (need + 1) & ~1u; /* even, to halve re-layouts */
    uint32_t stride = COL_BASE + cap;
    size_t bytes = (size_t)a->world * (stride * sizeof(int64_t) + 1);
    int64_t *tmpl = agg_alloc(a, stride * sizeof(int64_t));
    uint8_t **fresh = calloc(a->window, sizeof *fresh);
    if (!tmpl || !fresh) {
        agg_free(a, tmpl, stride * sizeof(int64_t));
        free(fresh);
        return -1;
    }
    for (uint32_t i = 0; i < a->window; i++) {
        if (!a->slots[i].buf)
            continue;
        fresh[i] = agg_alloc(a, bytes);
        if (!fresh[i]) {
            for (uint32_t j = 0; j < i; j++)
                agg_free(a, fresh[j], bytes);
            agg_free(a, tmpl, stride * sizeof(int64_t));
            free(fresh);
            return -1;
        }
    }
    uint32_t old_stride = a->stride;
    size_t old_bytes = a->buf_bytes;
    agg_free(a, a->template_row, old_stride * sizeof(int64_t));
    a->template_row = tmpl;
    a->stride = stride;
    a->col_cap = cap;
    a->buf_bytes = bytes;
    fill_template(a); /* columns not yet assigned stay SS_MISSING */
    for (uint32_t i = 0; i < a->window; i++) {
        uint8_t *old = a->slots[i].buf;
        if (!old)
            continue;
        int64_t *src = buf_rows(old), *dst = buf_rows(fresh[i]);
        for (uint32_t r = 0; r < a->world; r++) {
            memcpy(dst + (size_t)r * stride, a->template_row,
                   stride * sizeof(int64_t));
            memcpy(dst + (size_t)r * stride, src + (size_t)r * old_stride,
                   old_stride * sizeof(int64_t));
        }
        memcpy(fresh[i] + (size_t)a->world * stride * sizeof(int64_t),
               old + (size_t)a->world * old_stride * sizeof(int64_t),
               a->world);
        agg_free(a, old, old_bytes);
        a->slots[i].buf = fresh[i];
    }
    free(fresh);
    for (uint32_t i = 0; i < a->n_spare; i++)
        agg_free(a, a->spare[i], old_bytes);
    a->n_spare = 0;
    return 0;
}

/* Assigns a column to every (kind, name) of REC that lacks one.  Returns 0,
 * or -1 (nothing assigned) when memory runs out. */
static int ensure_columns(ss_aggregator *a, const ss_step_record *rec)
{
    /* The common case: every column exists.  A phase's columns are
     * assigned together, so its total column stands for both. */
    int complete = 1;
    for (uint32_t i = 0; i < rec->n_phases && complete; i++)
        complete = a->col[KIND_PHASE][rec->phases[i].name] >= 0;
    for (uint32_t i = 0; i < rec->n_syncs && complete; i++)
        complete = a->col[KIND_SYNC][rec->syncs[i].name] >= 0;
    for (uint32_t i = 0; i < rec->n_metrics && complete; i++)
        complete = a->col[KIND_METRIC][rec->metrics[i].name] >= 0;
    if (complete)
        return 0;
    uint8_t want[KIND_COUNT][SS_MAX_RUN_NAMES];
    memset(want, 0, sizeof want);
    uint32_t extra = 0;
    const struct {
        int kind;
        uint32_t n;
    } lists[KIND_COUNT] = {{KIND_PHASE, rec->n_phases},
                           {KIND_SYNC, rec->n_syncs},
                           {KIND_METRIC, rec->n_metrics},
                           {KIND_PHASE_TIME, rec->n_phases},
                           {KIND_PHASE_SELF, rec->n_phases}};
    for (int l = 0; l < KIND_COUNT; l++)
        for (uint32_t i = 0; i < lists[l].n; i++) {
            uint32_t id = l == KIND_SYNC     ? rec->syncs[i].name
                          : l == KIND_METRIC ? rec->metrics[i].name
                                             : rec->phases[i].name;
            if (a->col[l][id] < 0 && !want[l][id]) {
                want[l][id] = 1;
                extra++;
            }
        }
    if (a->n_cols + extra > a->col_cap &&
        grow_columns(a, a->n_cols + extra) < 0)
        return -1;
    int64_t nanw = nan_bits();
    for (int l = 0; l < KIND_COUNT; l++)
        for (uint32_t id = 0; id < SS_MAX_RUN_NAMES && extra; id++) {
            if (!want[l][id])
                continue;
            uint32_t c = a->n_cols++;
            a->col[l][id] = (int16_t)c;
            a->col_kind[c] = (uint8_t)l;
            a->col_name[c] = (uint8_t)id;
            extra--;
            if (l == KIND_METRIC) {
                /* Rows written before this column existed hold
                 * SS_MISSING there; metrics use NaN for missing. */
                a->template_row[COL_BASE + c] = nanw;
                for (uint32_t s = 0; s < a->window; s++) {
                    if (!a->slots[s].buf)
                        continue;
                    int64_t *rows = buf_rows(a->slots[s].buf);
                    for (uint32_t r = 0; r < a->world; r++)
                        rows[(size_t)r * a->stride + COL_BASE + c] = nanw;
                }
            }
        }
    return 0;
}

/* ---- slots ---- */

static agg_slot *slot_of(ss_aggregator *a, uint64_t step)
{
    return &a->slots[step % a->window];
}

static int slot_acquire(ss_aggregator *a, agg_slot *s)
{
    if (s->buf)
        return 0;
    uint8_t *buf = a->n_spare ? a->spare[--a->n_spare]
                              : agg_alloc(a, a->buf_bytes);
    if (!buf)
        return -1;
    memset(buf_present(a, buf), 0, a->world);
    s->buf = buf;
    a->open_slots++;
    return 0;
}

static void slot_release(ss_aggregator *a, agg_slot *s)
{
    if (s->vals) {
        for (uint32_t r = 0; r < a->world; r++)
            if (s->vals[r]) {
                a->values_bytes -= s->vals[r]->bytes;
                free(s->vals[r]);
            }
        free(s->vals);
        s->vals = NULL;
    }
    if (s->buf) {
        a->open_slots--;
        if (a->n_spare < SPARE_MAX)
            a->spare[a->n_spare++] = s->buf;
        else
            agg_free(a, s->buf, a->buf_bytes);
    }
    s->buf = NULL;
    s->n_records = 0;
    s->done_live = 0;
}

/* ---- packed phase times ---- */

/* A phase's first begin (ns after the step's begin) and its run count
 * share one column: the start in the low PHASE_START_BITS bits (two's
 * complement, clamped to +-2^47 ns, about 39 hours), the count above them
 * (clamped to 2^15 - 1, so the top bit stays clear and a packed value is
 * never SS_MISSING). */
#define PHASE_START_BITS 48
#define PHASE_START_MAX (((int64_t)1 << (PHASE_START_BITS - 1)) - 1)
#define PHASE_COUNT_MAX 0x7fff

static int64_t pack_phase_time(int64_t start, int64_t count)
{
    if (start > PHASE_START_MAX)
        start = PHASE_START_MAX;
    if (start < -PHASE_START_MAX)
        start = -PHASE_START_MAX;
    if (count > PHASE_COUNT_MAX)
        count = PHASE_COUNT_MAX;
    uint64_t mask = ((uint64_t)1 << PHASE_START_BITS) - 1;
    return (int64_t)(((uint64_t)count << PHASE_START_BITS) |
                     ((uint64_t)start & mask));
}

/* The inverse of pack_phase_time. */
static void unpack_phase_time(int64_t v, int64_t *start, int64_t *count)
{
    uint64_t u = (uint64_t)v;
    uint64_t sign = (uint64_t)1 << (PHASE_START_BITS - 1);
    uint64_t low = u & (((uint64_t)1 << PHASE_START_BITS) - 1);
    *start = (int64_t)(low ^ sign) - (int64_t)sign; /* sign-extends */
    *count = (int64_t)(u >> PHASE_START_BITS);
}

/* ---- finalization ---- */

/* Makes the name-indexed view arrays hold N names per rank. */
static int ensure_view_names(ss_aggregator *a, uint32_t n)
{
    if (n <= a->vnames_cap && a->vphase)
        return 0;
    uint32_t cap = n < 8 ? 8 : n;
    size_t cells = (size_t)a->world * cap;
    int64_t *ph = agg_alloc(a, cells * sizeof(int64_t));
    int64_t *sy = agg_alloc(a, cells * sizeof(int64_t));
    int64_t *pst = agg_alloc(a, cells * sizeof(int64_t));
    int64_t *pco = agg_alloc(a, cells * sizeof(int64_t));
    int64_t *pse = agg_alloc(a, cells * sizeof(int64_t));
    double *me = agg_alloc(a, cells * sizeof(double));
    int64_t *mi = agg_alloc(a, cap * sizeof(int64_t));
    double *mf = agg_alloc(a, cap * sizeof(double));
    if (!ph || !sy || !pst || !pco || !pse || !me || !mi || !mf) {
        agg_free(a, ph, cells * sizeof(int64_t));
        agg_free(a, sy, cells * sizeof(int64_t));
        agg_free(a, pst, cells * sizeof(int64_t));
        agg_free(a, pco, cells * sizeof(int64_t));
        agg_free(a, pse, cells * sizeof(int64_t));
        agg_free(a, me, cells * sizeof(double));
        agg_free(a, mi, cap * sizeof(int64_t));
        agg_free(a, mf, cap * sizeof(double));
        return -1;
    }
    size_t old_cells = (size_t)a->world * a->vnames_cap;
    agg_free(a, a->vphase, old_cells * sizeof(int64_t));
    agg_free(a, a->vsync, old_cells * sizeof(int64_t));
    agg_free(a, a->vpstart, old_cells * sizeof(int64_t));
    agg_free(a, a->vpcount, old_cells * sizeof(int64_t));
    agg_free(a, a->vpself, old_cells * sizeof(int64_t));
    agg_free(a, a->vmetric, old_cells * sizeof(double));
    agg_free(a, a->vmissing_i64, a->vnames_cap * sizeof(int64_t));
    agg_free(a, a->vmissing_f64, a->vnames_cap * sizeof(double));
    for (uint32_t i = 0; i < cap; i++) {
        mi[i] = SS_MISSING;
        mf[i] = NAN;
    }
    a->vphase = ph;
    a->vsync = sy;
    a->vpstart = pst;
    a->vpcount = pco;
    a->vpself = pse;
    a->vmetric = me;
    a->vmissing_i64 = mi;
    a->vmissing_f64 = mf;
    a->vnames_cap = cap;
    return 0;
}

/* Whether RANK, absent from STEP, counts as missing there (rather than
 * having left cleanly before it). */
static int rank_missing(const agg_rank *rk, uint64_t step)
{
    if (rk->live || rk->crashed)
        return 1;
    return rk->last_step >= 0 && step <= (uint64_t)rk->last_step;
}

/* Order statistics of row column COL over the present ranks (skipping
 * SS_MISSING). */
static void column_stat(ss_aggregator *a, const int64_t *rows,
                        const uint8_t *present, uint32_t col, ss_stat *out)
{
    size_t n = 0;
    for (uint32_t r = 0; r < a->world; r++) {
        if (!present[r])
            continue;
        int64_t v = rows[(size_t)r * a->stride + col];
        if (v == SS_MISSING)
            continue;
        a->vals[n] = v;
        a->vranks[n] = (int32_t)r;
        n++;
    }
    ss_stat_compute(out, a->vals, a->vranks, n);
}

static void sync_stat(ss_aggregator *a, const int64_t *rows,
                      const uint8_t *present, uint32_t col, ss_sync_stat *out)
{
    size_t n = 0;
    int64_t first = 0, last = 0;
    int32_t worst = SS_NO_RANK;
    for (uint32_t r = 0; r < a->world; r++) {
        if (!present[r])
            continue;
        int64_t v = rows[(size_t)r * a->stride + col];
        if (v == SS_MISSING)
            continue;
        if (n == 0 || v < first)
            first = v;
        if (n == 0 || v > last) {
            last = v;
            worst = (int32_t)r;
        }
        a->vals[n++] = v;
    }
    out->n = (uint32_t)n;
    out->worst_rank = worst;
    if (n == 0) {
        out->skew_ns = out->late_ns = SS_MISSING;
        return;
    }
    int64_t med = ss_median_i64(a->vals, n);
    out->skew_ns = last - first;
    out->late_ns = last - med;
}

/* Asks the host provider what it saw of each present rank during its
 * step, [begin, begin + step time), and points the rank's view at it. */
static void attach_host_evidence(ss_aggregator *a, uint64_t step)
{
    if (!a->host.window)
        return;
    for (uint32_t r = 0; r < a->world; r++) {
        ss_rank_step *rs = &a->vrs[r];
        if (!rs->present || rs->begin_ns == SS_MISSING ||
            rs->step_ns == SS_MISSING)
            continue;
        if (a->host.window(a->host.ctx, r, step, rs->begin_ns,
                           rs->begin_ns + rs->step_ns, &a->vhost[r]) == 0)
            rs->host = &a->vhost[r];
    }
}

/* Points RS at rank R's vectors in B, with the labels R declared. */
static void attach_values(ss_aggregator *a, uint32_t r, agg_vblock *b,
                          ss_rank_step *rs)
{
    const agg_labels *lab = a->labels ? a->labels[r] : NULL;
    for (uint32_t i = 0; i < b->n; i++) {
        ss_values_item *it = &b->items[i];
        const agg_labels *l = lab ? &lab[it->name] : NULL;
        it->n_labels = l && l->ptrs ? l->n : 0;
        it->labels = it->n_labels ? l->ptrs : NULL;
    }
    rs->n_values = b->n;
    rs->values = b->n ? b->items : NULL;
}

/* Builds the view of STEP (whose slot holds records) and hands it to the
 * detectors and the sink. */
static void emit_step(ss_aggregator *a, uint64_t step, agg_slot *slot)
{
    uint32_t nn = a->n_names;
    if (ensure_view_names(a, nn ? nn : 1) < 0)
        return; /* out of memory: the step is dropped, not corrupted */
    const int64_t *rows = buf_rows(slot->buf);
    const uint8_t *present = buf_present(a, slot->buf);
    uint32_t cap = a->vnames_cap;
    uint32_t n_present = 0, n_missing = 0;

    for (uint32_t r = 0; r < a->world; r++) {
        ss_rank_step *rs = &a->vrs[r];
        int64_t *ph = a->vphase + (size_t)r * cap;
        int64_t *sy = a->vsync + (size_t)r * cap;
        int64_t *pst = a->vpstart + (size_t)r * cap;
        int64_t *pco = a->vpcount + (size_t)r * cap;
        int64_t *pse = a->vpself + (size_t)r * cap;
        double *me = a->vmetric + (size_t)r * cap;
        memcpy(ph, a->vmissing_i64, nn * sizeof(int64_t));
        memcpy(sy, a->vmissing_i64, nn * sizeof(int64_t));
        memcpy(pst, a->vmissing_i64, nn * sizeof(int64_t));
        memcpy(pco, a->vmissing_i64, nn * sizeof(int64_t));
        memcpy(pse, a->vmissing_i64, nn * sizeof(int64_t));
        memcpy(me, a->vmissing_f64, nn * sizeof(double));
        rs->phase_ns = ph;
        rs->sync_arrival_ns = sy;
        rs->metric = me;
        rs->phase_start_ns = pst;
        rs->phase_count = pco;
        rs->phase_self_ns = pse;
        rs->host = NULL;
        rs->n_values = 0;
        rs->values = NULL;
        if (!present[r]) {
            rs->present = 0;
            rs->step_ns = rs->rss_bytes = rs->device_bytes = SS_MISSING;
            rs->begin_ns = SS_MISSING;
            if (rank_missing(&a->ranks[r], step))
                a->missing[n_missing++] = r;
            continue;
        }
        const int64_t *row = rows + (size_t)r * a->stride;
        n_present++;
        rs->present = 1;
        rs->step_ns = row[COL_STEP];
        rs->rss_bytes = row[COL_RSS];
        rs->device_bytes = row[COL_DEVICE];
        rs->begin_ns = row[COL_BEGIN];
        if (slot->vals && slot->vals[r])
            attach_values(a, r, slot->vals[r], rs);
        for (uint32_t c = 0; c < a->n_cols; c++) {
            int64_t v = row[COL_BASE + c];
            uint32_t name = a->col_name[c];
            switch (a->col_kind[c]) {
            case KIND_PHASE:
                ph[name] = v;
                break;
            case KIND_SYNC:
                sy[name] = v;
                break;
            case KIND_PHASE_TIME:
                if (v != SS_MISSING)
                    unpack_phase_time(v, &pst[name], &pco[name]);
                break;
            case KIND_PHASE_SELF:
                pse[name] = v;
                break;
            default:
                memcpy(&me[name], &v, sizeof v);
                break;
            }
        }
    }

    attach_host_evidence(a, step);

    ss_step_view v;
    memset(&v, 0, sizeof v);
    v.attempt = a->attempt;
    v.step = step;
    v.finalized_at = ss_wall_now();
    v.world_size = a->world;
    v.n_present = n_present;
    v.n_missing = n_missing;
    v.missing_ranks = a->missing;
    column_stat(a, rows, present, COL_STEP, &v.step_time);
    column_stat(a, rows, present, COL_RSS, &v.rss);
    column_stat(a, rows, present, COL_DEVICE, &v.device);
    uint32_t np = 0, ns = 0, nm = 0;
    for (uint32_t name = 0; name < nn; name++) {
        int c = a->col[KIND_PHASE][name];
        if (c >= 0) {
            ss_phase_stat *p = &a->phases[np];
            column_stat(a, rows, present, COL_BASE + (uint32_t)c, &p->stat);
            if (p->stat.n) {
                p->name = (int)name;
                column_stat(a, rows, present,
                            COL_BASE + (uint32_t)a->col[KIND_PHASE_SELF][name],
                            &a->phase_self[np]);
                np++;
            }
        }
        c = a->col[KIND_SYNC][name];
        if (c >= 0) {
            ss_sync_stat *s = &a->syncs[ns];
            sync_stat(a, rows, present, COL_BASE + (uint32_t)c, s);
            if (s->n) {
                s->name = (int)name;
                ns++;
            }
        }
        if (a->col[KIND_METRIC][name] >= 0) {
            for (uint32_t r = 0; r < a->world; r++)
                if (!isnan(a->vmetric[(size_t)r * cap + name])) {
                    a->metrics[nm++] = (int)name;
                    break;
                }
        }
    }
    v.n_phases = np;
    v.phases = a->phases;
    v.phase_self = a->phase_self;
    v.n_syncs = ns;
    v.syncs = a->syncs;
    v.n_metrics = nm;
    v.metrics = a->metrics;
    v.n_names = nn;
    v.ranks = a->vrs;

    ss_detectors_step(a->det, &v, a->names);
    if (a->sink.on_step)
        a->sink.on_step(a->sink.ctx, &v, a->names);
}

/* Finalizes the oldest open step (a->lo) and moves past it. */
static void finalize_oldest(ss_aggregator *a)
{
    agg_slot *slot = slot_of(a, a->lo);
    if (slot->n_records) {
        if (slot->done_live < a->n_live && !a->finished)
            a->st.forced_steps++;
        emit_step(a, a->lo, slot);
        a->st.finalized_steps++;
    }
    slot_release(a, slot);
    a->st.watermark = (int64_t)a->lo;
    a->finalized_any = 1;
    a->lo++;
}

/* Finalizes every oldest step that all live ranks have completed. */
static void advance(ss_aggregator *a)
{
    while (a->have_base && a->lo <= a->hi &&
           slot_of(a, a->lo)->done_live >= a->n_live)
        finalize_oldest(a);
}

/* ---- input ---- */

static int record_valid(const ss_aggregator *a, const ss_step_record *rec)
{
    if (rec->n_phases > SS_MAX_STEP_ITEMS || rec->n_syncs > SS_MAX_STEP_ITEMS ||
        rec->n_metrics > SS_MAX_STEP_ITEMS || rec->end_ns < rec->begin_ns ||
        rec->step > (uint64_t)INT64_MAX / 2)
        return 0;
    for (uint32_t i = 0; i < rec->n_phases; i++)
        if ((uint32_t)rec->phases[i].name >= a->n_names ||
            rec->phases[i].total_ns < 0 ||
            (rec->phases[i].self_ns < 0 &&
             rec->phases[i].self_ns != SS_MISSING))
            return 0;
    for (uint32_t i = 0; i < rec->n_syncs; i++)
        if ((uint32_t)rec->syncs[i].name >= a->n_names)
            return 0;
    for (uint32_t i = 0; i < rec->n_metrics; i++)
        if ((uint32_t)rec->metrics[i].name >= a->n_names)
            return 0;
    return 1;
}

/* CELL + D for durations, CELL being SS_MISSING before the first. */
static int64_t add_sat(int64_t cell, int64_t d)
{
    return cell == SS_MISSING       ? d
           : d > INT64_MAX - cell ? INT64_MAX
                                    : cell + d;
}

static void write_row(ss_aggregator *a, int64_t *row, const ss_step_record *rec)
{
    memcpy(row, a->template_row, a->stride * sizeof(int64_t));
    row[COL_STEP] = rec->end_ns - rec->begin_ns;
    row[COL_BEGIN] = rec->begin_ns;
    row[COL_RSS] = rec->rss_bytes;
    row[COL_DEVICE] = rec->device_bytes;
    for (uint32_t i = 0; i < rec->n_phases; i++) {
        /* a name repeated in one record: durations add up */
        int64_t *cell = &row[COL_BASE + a->col[KIND_PHASE]
                                                 [rec->phases[i].name]];
        *cell = add_sat(*cell, rec->phases[i].total_ns);
        if (rec->phases[i].self_ns != SS_MISSING) {
            int64_t *self = &row[COL_BASE + a->col[KIND_PHASE_SELF]
                                                    [rec->phases[i].name]];
            *self = add_sat(*self, rec->phases[i].self_ns);
        }
        /* the earliest begin counts, the runs add up */
        int64_t *time = &row[COL_BASE + a->col[KIND_PHASE_TIME]
                                                 [rec->phases[i].name]];
        int64_t start = rec->phases[i].first_begin_ns - rec->begin_ns;
        int64_t count = rec->phases[i].count;
        if (*time != SS_MISSING) {
            int64_t s0, c0;
            unpack_phase_time(*time, &s0, &c0);
            start = s0 < start ? s0 : start;
            count += c0;
        }
        *time = pack_phase_time(start, count);
    }
    for (uint32_t i = 0; i < rec->n_syncs; i++) {
        /* a sync point repeated in one record: the first arrival counts */
        int64_t *cell =
            &row[COL_BASE + a->col[KIND_SYNC][rec->syncs[i].name]];
        if (*cell == SS_MISSING)
            *cell = rec->syncs[i].arrival_ns;
    }
    for (uint32_t i = 0; i < rec->n_metrics; i++) {
        /* the last value wins */
        int64_t *cell =
            &row[COL_BASE + a->col[KIND_METRIC][rec->metrics[i].name]];
        memcpy(cell, &rec->metrics[i].value, sizeof(double));
    }
}

/* Before the first finalization, a record older than every open step
 * extends the window downward when everything still fits. */
static void lower_base(ss_aggregator *a, uint64_t step)
{
    uint32_t reported = 0; /* live ranks with a record: they skipped */
    for (uint32_t r = 0; r < a->world; r++)
        if (a->ranks[r].live && a->ranks[r].last_step >= 0)
            reported++;
    for (uint64_t s = step; s < a->lo; s++)
        slot_of(a, s)->done_live = reported;
    a->lo = step;
}

/* Copies RANK's vectors into SLOT, within the budget; counts what it
 * cannot keep. */
static void keep_values(ss_aggregator *a, agg_slot *slot, uint32_t rank,
                        const ss_values_item *values, uint32_t n)
{
    uint64_t bytes = sizeof(agg_vblock);
    uint32_t good = 0;
    for (uint32_t i = 0; i < n; i++) {
        int ok = values[i].name >= 0 && (uint32_t)values[i].name < a->n_names &&
                 (values[i].n == 0 || values[i].v);
        for (uint32_t k = 0; ok && k < i; k++)
            ok = values[k].name != values[i].name;
        if (!ok) {
            a->st.vectors_refused++;
            continue;
        }
        bytes += VALUES_ITEM_COST + (uint64_t)values[i].n * sizeof(double);
        good++;
    }
    if (!good)
        return;
    agg_vblock *b = NULL;
    if (a->values_bytes + bytes <= a->values_budget &&
        (slot->vals || (slot->vals = calloc(a->world, sizeof *slot->vals))))
        b = malloc(sizeof *b + good * sizeof(ss_values_item) +
                   (bytes - sizeof *b - good * VALUES_ITEM_COST));
    if (!b || slot->vals[rank]) { /* the slot's rank has its record once */
        free(b);
        a->st.vectors_refused += good;
        return;
    }
    b->bytes = bytes;
    b->n = 0;
    double *data = (double *)(void *)(b->items + good);
    for (uint32_t i = 0; i < n; i++) {
        int ok = values[i].name >= 0 && (uint32_t)values[i].name < a->n_names &&
                 (values[i].n == 0 || values[i].v);
        for (uint32_t k = 0; ok && k < i; k++)
            ok = values[k].name != values[i].name;
        if (!ok)
            continue;
        ss_values_item *it = &b->items[b->n++];
        it->name = values[i].name;
        it->n = values[i].n;
        it->truncated = values[i].truncated;
        it->v = data;
        it->n_labels = 0;
        it->labels = NULL;
        if (values[i].n)
            memcpy(data, values[i].v, values[i].n * sizeof(double));
        data += values[i].n;
    }
    slot->vals[rank] = b;
    a->values_bytes += bytes;
    a->st.vectors += good;
}

int ss_aggregator_set_labels(ss_aggregator *a, uint32_t rank, int name,
                             const char *const *labels, uint32_t n)
{
    if (rank >= a->world || name < 0 || (uint32_t)name >= a->n_names ||
        (n && !labels))
        goto refused;
    uint64_t bytes = (uint64_t)n * sizeof(char *);
    for (uint32_t i = 0; i < n; i++)
        bytes += strlen(labels[i]) + 1;
    if (!a->labels && !(a->labels = calloc(a->world, sizeof *a->labels)))
        goto refused;
    if (!a->labels[rank] &&
        !(a->labels[rank] = calloc(SS_MAX_RUN_NAMES, sizeof(agg_labels))))
        goto refused;
    agg_labels *l = &a->labels[rank][name];
    if (a->labels_bytes - l->bytes + bytes > LABELS_BUDGET)
        goto refused;
    const char **ptrs = malloc(bytes ? bytes : 1);
    if (!ptrs)
        goto refused;
    char *text = (char *)(ptrs + n);
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen(labels[i]) + 1;
        memcpy(text, labels[i], len);
        ptrs[i] = text;
        text += len;
    }
    free(l->ptrs);
    a->labels_bytes = a->labels_bytes - l->bytes + bytes;
    l->ptrs = ptrs;
    l->n = n;
    l->bytes = bytes;
    return 0;
refused:
    a->st.labels_refused++;
    return -1;
}

int ss_aggregator_add(ss_aggregator *a, uint32_t rank,
                      const ss_step_record *rec)
{
    return ss_aggregator_add_values(a, rank, rec, NULL, 0);
}

int ss_aggregator_add_values(ss_aggregator *a, uint32_t rank,
                             const ss_step_record *rec,
                             const ss_values_item *values,
                             uint32_t n_values)
{
    if (a->finished || !rec || rank >= a->world || !a->ranks[rank].live ||
        !record_valid(a, rec))
        goto refused;
    agg_rank *rk = &a->ranks[rank];
    uint64_t step = rec->step;
    if (rk->last_step >= 0 && step <= (uint64_t)rk->last_step)
        goto refused; /* duplicate or out of order */
    if (!a->have_base) {
        a->have_base = 1;
        a->lo = a->hi = step;
    } else if (step < a->lo) {
        if (a->finalized_any || a->hi - step >= a->window)
            goto refused; /* late: that step is already finalized */
        lower_base(a, step);
    }
    if (ensure_columns(a, rec) < 0)
        goto refused;
    if (step >= a->lo + a->window) {
        /* This rank is a window ahead: force the oldest steps out. */
        uint64_t new_lo = step - a->window + 1;
        uint64_t stop = new_lo - a->lo > a->window ? a->lo + a->window
                                                   : new_lo;
        while (a->lo < stop)
            finalize_oldest(a);
        a->lo = new_lo;
        a->st.watermark = (int64_t)new_lo - 1;
    }
    /* Past the steps always kept, a step that needs rows beyond the
     * budget forces the oldest out first (laggards missing). */
    while (step >= a->lo + a->sure_window && !slot_of(a, step)->buf &&
           (a->open_slots + 1) * a->buf_bytes > ROWS_BUDGET_BYTES)
        finalize_oldest(a);
    agg_slot *slot = slot_of(a, step);
    if (slot_acquire(a, slot) < 0)
        goto refused;
    write_row(a, buf_rows(slot->buf) + (size_t)rank * a->stride, rec);
    buf_present(a, slot->buf)[rank] = 1;
    if (n_values)
        keep_values(a, slot, rank, values, n_values);
    slot->n_records++;

    uint64_t from = rk->last_step + 1 > (int64_t)a->lo
                        ? (uint64_t)(rk->last_step + 1)
                        : a->lo;
    for (uint64_t s = from; s <= step; s++)
        slot_of(a, s)->done_live++;
    rk->last_step = (int64_t)step;
    if (step > a->hi)
        a->hi = step;
    a->st.records++;
    advance(a);
    return 0;
refused:
    a->st.refused++;
    a->st.vectors_refused += n_values;
    return -1;
}

void ss_aggregator_rank_left(ss_aggregator *a, uint32_t rank, int crashed)
{
    if (a->finished || rank >= a->world || !a->ranks[rank].live)
        return;
    agg_rank *rk = &a->ranks[rank];
    rk->live = 0;
    rk->crashed = crashed ? 1 : 0;
    a->n_live--;
    if (a->have_base && rk->last_step >= (int64_t)a->lo) {
        uint64_t last = (uint64_t)rk->last_step;
        for (uint64_t s = a->lo; s <= last; s++)
            slot_of(a, s)->done_live--;
    }
    advance(a);
}

void ss_aggregator_finish(ss_aggregator *a)
{
    if (a->finished)
        return;
    a->finished = 1;
    while (a->have_base && a->lo <= a->hi)
        finalize_oldest(a);
    ss_detectors_finish(a->det, a->names);
}

void ss_aggregator_set_clock_bound(ss_aggregator *agg, uint32_t rank,
                                   int64_t bound_ns)
{
    ss_detectors_set_clock_bound(agg->det, rank, bound_ns);
}

void ss_aggregator_get_stats(const ss_aggregator *a, ss_aggregator_stats *out)
{
    *out = a->st;
    out->bytes_in_use = a->bytes + a->values_bytes + a->labels_bytes;
    out->values_bytes = a->values_bytes;
}

void ss_aggregator_rank_state(const ss_aggregator *a, uint32_t rank,
                              ss_rank_state *out)
{
    if (rank >= a->world) {
        out->live = 0;
        out->crashed = 0;
        out->last_step = -1;
        return;
    }
    out->live = a->ranks[rank].live;
    out->crashed = a->ranks[rank].crashed;
    out->last_step = a->ranks[rank].last_step;
}

uint32_t ss_aggregator_publish_finding(ss_aggregator *a,
                                       const ss_finding *content)
{
    return ss_detectors_publish(a->det, content);
}
