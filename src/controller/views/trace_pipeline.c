/*
 * trace_pipeline.c - pipeline microbatches in `stepscope trace`
 * (trace_pipeline.h).
 *
 * One pass over the range's rank-step rows (their begins alone), a step at
 * a time: once a step's begins are together, its pipeline.spans and
 * pipeline.config vectors are read (one query each), every rank's spans
 * are placed at its begin, and the drawn ranks' tracks are written.
 * Memory follows the world size: a step's vectors, SS_MAX_VALUES doubles
 * per rank at most.
 */
#include "trace_pipeline.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "pipeline_bubble.h"
#include "stepscope.h"

typedef struct {
    FILE *f;
    int64_t run_id, attempt, world, t0, pid;
    const uint8_t *want_rank;
    uint64_t *events;
    /* the step being read */
    int64_t step;
    int64_t *begin;     /* world: the rank's step begin, SS_MISSING */
    double *spans;      /* world x SS_MAX_VALUES */
    uint32_t *n_spans;  /* world: doubles in spans */
    double *config;     /* world x SS_PIPE_CONFIG_LEN */
    uint8_t *has_config;
    uint8_t *named;     /* world: the track's metadata is written */
    double scratch[2 * SS_PIPE_SPANS_MAX];
} tp;

static int take_spans(void *ctx, int64_t step, int64_t rank, const double *v,
                      uint32_t n)
{
    tp *p = ctx;
    if (rank < 0 || rank >= p->world)
        return 0;
    if (n > SS_MAX_VALUES)
        n = SS_MAX_VALUES;
    memcpy(&p->spans[rank * SS_MAX_VALUES], v, n * sizeof *v);
    p->n_spans[rank] = n;
    return 0;
}

static int take_config(void *ctx, int64_t step, int64_t rank, const double *v,
                       uint32_t n)
{
    tp *p = ctx;
    if (rank < 0 || rank >= p->world || n < SS_PIPE_CONFIG_LEN)
        return 0;
    memcpy(&p->config[rank * SS_PIPE_CONFIG_LEN], v,
           SS_PIPE_CONFIG_LEN * sizeof *v);
    p->has_config[rank] = 1;
    return 0;
}

/* Writes NS (relative to the trace's origin) as microseconds. */
static void put_us(FILE *f, double ns)
{
    fprintf(f, "%.3f", ns / 1000.0);
}

static void head(tp *p, const char *name, int64_t rank, double at_ns)
{
    FILE *f = p->f;
    fputs(",\n{\"name\":", f);
    ss_json_fput_str(f, name);
    fprintf(f, ",\"cat\":\"microbatch\",\"ph\":\"X\",\"pid\":%" PRId64
               ",\"tid\":%" PRId64 ",\"ts\":",
            p->pid, (int64_t)SS_TRACE_PIPE_TID(rank));
    put_us(f, at_ns - (double)p->t0);
    ++*p->events;
}

static void name_track(tp *p, int64_t r)
{
    if (p->named[r])
        return;
    p->named[r] = 1;
    fprintf(p->f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRId64
                  ",\"tid\":%" PRId64 ",\"args\":{\"name\":\"rank %" PRId64
                  " microbatches\"}},\n{\"name\":\"thread_sort_index\","
                  "\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%" PRId64
                  ",\"args\":{\"sort_index\":%" PRId64 "}}",
            p->pid, (int64_t)SS_TRACE_PIPE_TID(r), r, p->pid,
            (int64_t)SS_TRACE_PIPE_TID(r), r);
    *p->events += 2;
}

static void write_step(tp *p)
{
    int64_t w = p->world;
    ss_pipe_rank *pr = calloc((size_t)w, sizeof *pr);
    if (!pr)
        return;
    double t0 = INFINITY, t1 = -INFINITY, sum[4] = {0}, cnt[4] = {0};
    int stages = 0, schedule = 0;
    for (int64_t r = 0; r < w; r++) {
        if (!p->n_spans[r] || !p->has_config[r] || p->begin[r] == SS_MISSING)
            continue;
        if (!ss_pipe_rank_read(&p->spans[r * SS_MAX_VALUES], p->n_spans[r],
                               p->scratch, &pr[r]))
            continue;
        double b = (double)p->begin[r];
        if (b + pr[r].first_ns < t0)
            t0 = b + pr[r].first_ns;
        if (b + pr[r].last_ns > t1)
            t1 = b + pr[r].last_ns;
        for (int k = 1; k <= 3; k++)
            sum[k] += pr[r].sum_ns[k], cnt[k] += pr[r].count[k];
        stages = (int)p->config[r * SS_PIPE_CONFIG_LEN + 1];
        schedule = (int)p->config[r * SS_PIPE_CONFIG_LEN + 2];
    }
    if (!(t1 > t0)) {
        free(pr);
        return;
    }
    double mean[4];
    for (int k = 1; k <= 3; k++)
        mean[k] = cnt[k] ? sum[k] / cnt[k] / 1e6 : 0;
    double formula = ss_pipe_formula_ms(schedule, stages, mean[1], mean[2],
                                        mean[3]);
    static const char *const kinds[] = {"?", "F", "B", "W"};
    static const char *const colours[] = {"grey", "good", "terrible",
                                          "yellow"};
    char name[64];
    for (int64_t r = 0; r < w; r++) {
        if (!p->want_rank[r] || !(pr[r].count[1] + pr[r].count[2] +
                                  pr[r].count[3]))
            continue;
        name_track(p, r);
        int stage = (int)p->config[r * SS_PIPE_CONFIG_LEN];
        double busy = pr[r].busy_ns / 1e6, bubble = (t1 - t0) / 1e6 - busy;
        snprintf(name, sizeof name, "stage %d, step %" PRId64, stage,
                 p->step);
        head(p, name, r, t0);
        fputs(",\"dur\":", p->f);
        put_us(p->f, t1 - t0);
        fprintf(p->f, ",\"args\":{\"step\":%" PRId64 ",\"stage\":%d,"
                      "\"schedule\":\"%s\",\"busy_ms\":%.3f,"
                      "\"bubble_ms\":%.3f",
                p->step, stage, ss_pipe_schedule_name(schedule), busy,
                bubble);
        if (isfinite(formula))
            fprintf(p->f, ",\"formula_ms\":%.3f", formula);
        if (isfinite(formula) && formula > 0)
            fprintf(p->f, ",\"ratio\":%.3f", bubble / formula);
        fputs("}}", p->f);
        const double *v = &p->spans[r * SS_MAX_VALUES];
        for (uint32_t i = 0; i + SS_PIPE_SPAN_LEN <= p->n_spans[r];
             i += SS_PIPE_SPAN_LEN) {
            int k = (int)v[i + 1];
            if (k < SS_PIPE_F || k > SS_PIPE_W || !(v[i + 3] >= v[i + 2]))
                continue;
            snprintf(name, sizeof name, "%s %.0f", kinds[k], v[i]);
            head(p, name, r, (double)p->begin[r] + v[i + 2]);
            fputs(",\"dur\":", p->f);
            put_us(p->f, v[i + 3] - v[i + 2]);
            fprintf(p->f, ",\"cname\":\"%s\",\"args\":{\"step\":%" PRId64
                          ",\"microbatch\":%.0f,\"kind\":\"%s\"}}",
                    colours[k], p->step, v[i], kinds[k]);
        }
    }
    free(pr);
}

/* Reads the step's vectors and writes it; then forgets it. */
static int flush_step(ss_reader *rd, tp *p)
{
    memset(p->n_spans, 0, (size_t)p->world * sizeof *p->n_spans);
    memset(p->has_config, 0, (size_t)p->world);
    if (ss_reader_vectors(rd, p->run_id, p->attempt, "pipeline.spans",
                          p->step, take_spans, p) != 0 ||
        ss_reader_vectors(rd, p->run_id, p->attempt, "pipeline.config",
                          p->step, take_config, p) != 0)
        return -1;
    write_step(p);
    for (int64_t r = 0; r < p->world; r++)
        p->begin[r] = SS_MISSING;
    return 0;
}

static int has_pipeline(ss_reader *rd, int64_t run_id, int64_t attempt,
                        int *yes)
{
    ss_values_name_row *rows;
    size_t n;
    *yes = 0;
    if (ss_reader_value_names(rd, run_id, attempt, &rows, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        *yes |= rows[i].name && strcmp(rows[i].name, "pipeline.spans") == 0;
    ss_values_name_rows_free(rows, n);
    return 0;
}

int ss_trace_pipeline_write(ss_reader *rd, FILE *f, int64_t run_id,
                            int64_t attempt, int64_t first, int64_t last,
                            const uint8_t *want_rank, int64_t world,
                            int64_t t0_ns, int64_t pid, uint64_t *events,
                            FILE *err)
{
    int yes;
    if (has_pipeline(rd, run_id, attempt, &yes) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return -1;
    }
    if (!yes || world <= 0)
        return 0;
    size_t w = (size_t)world;
    tp *p = calloc(1, sizeof *p);
    if (p) {
        *p = (tp){f, run_id, attempt, world, t0_ns, pid, want_rank, events,
                  -1, calloc(w, sizeof(int64_t)),
                  malloc(w * SS_MAX_VALUES * sizeof(double)),
                  calloc(w, sizeof(uint32_t)),
                  calloc(w * SS_PIPE_CONFIG_LEN, sizeof(double)),
                  calloc(w, 1), calloc(w, 1), {0}};
    }
    int rc = -1;
    ss_rank_steps *cur = NULL;
    if (!p || !p->begin || !p->spans || !p->n_spans || !p->config ||
        !p->has_config || !p->named) {
        fprintf(err, "stepscope trace: out of memory\n");
        goto out;
    }
    for (size_t r = 0; r < w; r++)
        p->begin[r] = SS_MISSING;
    ss_rank_step_query q = {run_id, attempt, first, last, 0, 0};
    if (ss_reader_rank_steps(rd, &q, &cur) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        goto out;
    }
    const ss_rank_step_row *row;
    int more;
    while ((more = ss_rank_steps_next(cur, &row)) == 1) {
        if (row->rank < 0 || row->rank >= world)
            continue;
        if (p->step >= 0 && row->step != p->step && flush_step(rd, p) != 0)
            break;
        p->step = row->step;
        p->begin[row->rank] = row->begin_ns;
    }
    if (more == 0 && (p->step < 0 || flush_step(rd, p) == 0))
        rc = 0;
    else
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
out:
    ss_rank_steps_close(cur);
    if (p) {
        free(p->begin);
        free(p->spans);
        free(p->n_spans);
        free(p->config);
        free(p->has_config);
        free(p->named);
        free(p);
    }
    return rc;
}
