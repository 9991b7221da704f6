/*
 * trace.c - `stepscope trace`: rank timelines as a Chrome / Perfetto trace
 * (trace.h, docs/trace.md).
 *
 * One pass, one step at a time: the rank-step rows of the chosen steps
 * are read through the store's reader (reader.h) in key order (step, then
 * rank), their phases and syncs copied into flat arrays.  Once a step's
 * rows are together, each sync arrival gets its skew against the median
 * arrival of every rank of that step (not only the ranks drawn), the
 * step's earliest begin is kept to place findings, and the step's events
 * are written; then its buffers are reused.  Memory therefore follows the world size, not
 * the range: the trace-event format does not need events in time order,
 * viewers sort them.
 *
 * Drawing: a step is one "X" slice; its phases are drawn from their first
 * begin for their total duration, which
 * for a phase that ran several times (or on another thread) can overlap a
 * sibling or outrun the step.  Trace viewers need the slices of a track to
 * nest, so each phase is clipped to the step and to the phase it starts
 * inside (its parent): a clipped phase says so in its args, which always
 * carry the true total and count.  Timestamps are written as exact decimal
 * microseconds from integer nanoseconds.
 */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "progress.h"
#include "reader.h"
#include "stats.h"
#include "trace_pipeline.h"
#include "trace_profiles.h"

typedef struct {
    uint32_t name;
    int64_t total, start, count; /* start: ns after the step's begin */
} tr_phase;

typedef struct {
    uint32_t name;
    int64_t at;        /* absolute arrival, ns */
    int64_t vs_median; /* arrival - median arrival of the step's ranks */
} tr_sync;

typedef struct {
    int64_t step, rank;
    int64_t begin, dur;
    size_t phase0, n_phases, sync0, n_syncs;
} tr_row;

typedef struct {
    int64_t step, begin; /* a step and its earliest begin */
} tr_step;

typedef struct {
    /* the run */
    int64_t run_id, attempt, world;
    char *run_name, *uuid;
    int64_t first, last; /* the step range asked for */
    int64_t t0;          /* the run's first step's begin */
    /* the step being read: its rows and their phases and syncs, named by
     * the cursor's name indexes */
    ss_rank_steps *cur;
    tr_row *rows;
    size_t n_rows, cap_rows;
    tr_phase *phases;
    size_t n_phases, cap_phases;
    tr_sync *syncs;
    size_t n_syncs, cap_syncs;
    int64_t *scratch;     /* world entries, for medians */
    /* the steps drawn so far, in order */
    tr_step *steps;
    size_t n_steps, cap_steps;
    uint64_t no_timeline; /* rows without a begin (older stepscope) */
    /* the output */
    uint8_t *want_rank;   /* world entries: draw this rank */
    uint64_t events;
    struct drawn *draw;   /* a row's phases as drawn, and their stack */
    int64_t *stack;
    size_t cap_draw;
} trace;

/* ---- small helpers ---- */

/* Makes room for one more element in *ARR (of SIZE bytes, *N used of
 * *CAP).  Returns 0 or -1 on out-of-memory. */
static int grow(void **arr, size_t size, size_t n, size_t *cap)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, c * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

static void trace_free(trace *t)
{
    ss_rank_steps_close(t->cur);
    free(t->rows);
    free(t->phases);
    free(t->syncs);
    free(t->scratch);
    free(t->steps);
    free(t->draw);
    free(t->stack);
    free(t->want_rank);
    free(t->run_name);
    free(t->uuid);
}

/* Writes S as a JSON string ("" for NULL). */
static void json_str(FILE *f, const char *s)
{
    ss_json_fput_str(f, s ? s : "");
}

/* Writes NS / DIV with 3 decimals, exactly (DIV is 1000 or 1000000). */
static void put_fixed(FILE *f, int64_t ns, int64_t div)
{
    uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    uint64_t d = (uint64_t)div, milli = d / 1000;
    fprintf(f, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", u / d,
            (u % d) / milli);
}

/* ---- reading ---- */

/* The run, its attempt and its world (the run's world size, or one more
 * than the highest rank recorded). */
static int load_run(ss_reader *rd, trace *t, int64_t attempt, FILE *err)
{
    ss_run_row run;
    int rc = ss_reader_run(rd, t->run_id, &run);
    if (rc == 0) {
        t->run_name = strdup(run.name ? run.name : "");
        t->uuid = strdup(run.uuid ? run.uuid : "");
        ss_run_row_clear(&run);
        if (!t->run_name || !t->uuid) {
            fprintf(err, "stepscope trace: out of memory\n");
            return -1;
        }
        rc = ss_reader_attempt(rd, t->run_id, attempt, &t->attempt, NULL);
    }
    ss_rank_row *ranks = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = ss_reader_ranks(rd, t->run_id, t->attempt, 0,
                             SS_RANKS_NO_MEDIANS, &ranks, &n);
    ss_rank_rows_free(ranks, n);
    if (rc != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return -1;
    }
    t->world = (int64_t)n;
    if (t->world < 1) {
        fprintf(err, "stepscope trace: run %" PRId64 " has an unusable "
                "world size %" PRId64 "\n", t->run_id, t->world);
        return -1;
    }
    return 0;
}

/* Adds the phases and syncs of ROW (the cursor's) to the step being read
 * as its row X.  Returns 0 or -1 on out-of-memory. */
static int add_row(trace *t, const ss_rank_step_row *row, tr_row *x)
{
    for (size_t i = 0; i < row->n_phases; i++) {
        if (grow((void **)&t->phases, sizeof *t->phases, t->n_phases,
                 &t->cap_phases) != 0)
            return -1;
        const ss_rank_phase *p = &row->phases[i];
        t->phases[t->n_phases++] = (tr_phase){p->name, p->total_ns,
                                              p->start_ns, p->count};
        x->n_phases++;
    }
    for (size_t i = 0; i < row->n_syncs; i++) {
        if (grow((void **)&t->syncs, sizeof *t->syncs, t->n_syncs,
                 &t->cap_syncs) != 0)
            return -1;
        t->syncs[t->n_syncs++] = (tr_sync){
            row->syncs[i].name, row->begin_ns + row->syncs[i].at_ns,
            SS_MISSING};
        x->n_syncs++;
    }
    return 0;
}

/* ---- choosing ---- */

/* Parses "A:B", "A:", ":B" or "A" into *FIRST / *LAST (-1: open). */
static int parse_steps(const char *s, int64_t *first, int64_t *last)
{
    char *end;
    *first = *last = -1;
    const char *colon = strchr(s, ':');
    if (s[0] != ':') {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || v < 0 || (*end && *end != ':'))
            return -1;
        *first = v;
    }
    if (!colon) {
        *last = *first;
        return *first >= 0 ? 0 : -1;
    }
    if (colon[1]) {
        errno = 0;
        long long v = strtoll(colon + 1, &end, 10);
        if (errno || end == colon + 1 || v < 0 || *end)
            return -1;
        *last = v;
    }
    return *first >= 0 && *last >= 0 && *first > *last ? -1 : 0;
}

/* Parses "0,2,5-7" into WANT (WORLD entries).  Returns 0 or -1. */
static int parse_ranks(const char *s, uint8_t *want, int64_t world)
{
    const char *p = s;
    int any = 0;
    while (*p) {
        char *end;
        errno = 0;
        long long a = strtoll(p, &end, 10), b;
        if (errno || end == p || a < 0)
            return -1;
        b = a;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtoll(q, &end, 10);
            if (errno || end == q || b < a)
                return -1;
        }
        if (*end && *end != ',')
            return -1;
        for (long long r = a; r <= b && r < world; r++)
            want[r] = any = 1;
        p = *end ? end + 1 : end;
    }
    return any ? 0 : -1;
}

/* Chooses the step range: the one asked for, or the latest
 * SS_TRACE_DEFAULT_STEPS kept steps. */
static int choose_steps(ss_reader *rd, trace *t, const char *spec, FILE *err)
{
    int64_t first = -1, last = -1;
    if (spec && parse_steps(spec, &first, &last) != 0) {
        fprintf(err, "stepscope trace: --steps wants A:B, A:, :B or A "
                     "(step numbers, A <= B), not '%s'\n", spec);
        return 2;
    }
    ss_step_window latest = {-1, -1, spec ? 1 : SS_TRACE_DEFAULT_STEPS};
    int64_t *steps;
    size_t n;
    if (ss_reader_rank_step_numbers(rd, t->run_id, t->attempt, &latest,
                                    &steps, &n) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return 1;
    }
    if (n == 0) {
        fprintf(err, "stepscope trace: run %" PRId64 " attempt %" PRId64
                " has no per-rank steps stored\n", t->run_id, t->attempt);
        return 1;
    }
    if (!spec)
        first = steps[0];
    t->first = first < 0 ? 0 : first;
    t->last = last < 0 ? steps[n - 1] : last;
    free(steps);
    return 0;
}

/* ---- writing ---- */

typedef struct drawn {
    int64_t start, end; /* absolute ns, clipped */
    const tr_phase *p;
    int clipped;
} drawn;

static int cmp_drawn(const void *a, const void *b)
{
    const drawn *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1; /* the longer one is the parent */
    return (x->p->name > y->p->name) - (x->p->name < y->p->name);
}

static void event_head(FILE *f, trace *t, const char *name, const char *cat,
                       const char *ph, int64_t tid, int64_t at)
{
    fputs(t->events++ ? ",\n{\"name\":" : "{\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"%s\",\"pid\":%" PRId64
               ",\"tid\":%" PRId64 ",\"ts\":",
            cat, ph, t->run_id, tid);
    put_fixed(f, at - t->t0, 1000);
}

/* The slices and instants of one rank-step.  T's draw and stack hold
 * at least its n_phases entries. */
static void write_row(FILE *f, trace *t, const tr_row *row)
{
    drawn *d = t->draw;
    int64_t *stack = t->stack;
    int64_t tid = row->rank + 1, end = row->begin + row->dur;
    char label[48];
    snprintf(label, sizeof label, "step %" PRId64, row->step);
    event_head(f, t, label, "step", "X", tid, row->begin);
    fputs(",\"dur\":", f);
    put_fixed(f, row->dur, 1000);
    fprintf(f, ",\"args\":{\"step\":%" PRId64 ",\"rank\":%" PRId64
               ",\"step_ms\":",
            row->step, row->rank);
    put_fixed(f, row->dur, 1000000);
    fputs("}}", f);

    size_t n = 0;
    for (size_t i = 0; i < row->n_phases; i++) {
        const tr_phase *p = &t->phases[row->phase0 + i];
        if (p->total == SS_MISSING || p->start == SS_MISSING)
            continue;
        int64_t s = row->begin + p->start, e = s + p->total;
        drawn x = {s < row->begin ? row->begin : s, e > end ? end : e, p, 0};
        if (x.end < x.start)
            continue; /* wholly outside the step */
        x.clipped = x.start != s || x.end != e;
        d[n++] = x;
    }
    qsort(d, n, sizeof *d, cmp_drawn);
    /* Clip each phase to the one it starts in: the ends of the open
     * phases are a stack; one that ended by this start is a sibling. */
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        while (depth && stack[depth - 1] <= d[i].start)
            depth--;
        if (depth && d[i].end > stack[depth - 1]) {
            d[i].end = stack[depth - 1];
            d[i].clipped = 1;
        }
        stack[depth++] = d[i].end;
        event_head(f, t, ss_rank_steps_name(t->cur, d[i].p->name), "phase",
                   "X", tid,
                   d[i].start);
        fputs(",\"dur\":", f);
        put_fixed(f, d[i].end - d[i].start, 1000);
        fprintf(f, ",\"args\":{\"step\":%" PRId64 ",\"total_ms\":",
                row->step);
        put_fixed(f, d[i].p->total, 1000000);
        if (d[i].p->count != 1)
            fprintf(f, ",\"count\":%" PRId64, d[i].p->count);
        if (d[i].clipped)
            fputs(",\"clipped\":true", f);
        fputs("}}", f);
    }

    for (size_t i = 0; i < row->n_syncs; i++) {
        const tr_sync *y = &t->syncs[row->sync0 + i];
        event_head(f, t, ss_rank_steps_name(t->cur, y->name), "sync", "i",
                   tid, y->at);
        fprintf(f, ",\"s\":\"t\",\"args\":{\"step\":%" PRId64
                   ",\"vs_median_ms\":",
                row->step);
        put_fixed(f, y->vs_median, 1000000);
        fputs("}}", f);
    }
}

/* The begin of the first drawn step at or after STEP; SS_MISSING. */
static int64_t step_time(const trace *t, int64_t step)
{
    size_t lo = 0, hi = t->n_steps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n_steps ? t->steps[lo].begin : SS_MISSING;
}

/* Findings by their first step, as they are drawn. */
static int cmp_finding(const void *a, const void *b)
{
    const ss_finding_row *x = a, *y = b;
    if (x->first_step != y->first_step)
        return x->first_step < y->first_step ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int write_findings(ss_reader *rd, FILE *f, trace *t, FILE *err)
{
    ss_finding_row *fs;
    size_t n;
    if (ss_reader_findings(rd, t->run_id, t->attempt, t->first, t->last, &fs,
                           &n) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return -1;
    }
    if (n > 1)
        qsort(fs, n, sizeof *fs, cmp_finding);
    for (size_t i = 0; i < n; i++) {
        const ss_finding_row *x = &fs[i];
        int64_t at = step_time(t, x->first_step);
        if (at == SS_MISSING)
            continue;
        event_head(f, t, x->kind ? x->kind : "finding", "finding", "i", 0,
                   at);
        fputs(",\"s\":\"g\",\"args\":{\"severity\":", f);
        json_str(f, x->severity);
        fputs(",\"message\":", f);
        json_str(f, x->message);
        fprintf(f, ",\"first_step\":%" PRId64 ",\"last_step\":%" PRId64
                   ",\"ranks\":[", x->first_step, x->last_step);
        for (size_t k = 0; k < x->n_ranks; k++)
            fprintf(f, k ? ",%" PRId64 : "%" PRId64, x->ranks[k]);
        fputc(']', f);
        if (x->phase) {
            fputs(",\"phase\":", f);
            json_str(f, x->phase);
        }
        fprintf(f, ",\"evidence\":%s}}", x->evidence ? x->evidence : "{}");
    }
    ss_finding_rows_free(fs, n);
    return 0;
}

/* Gives every sync arrival of the step's rows its skew against the
 * median arrival at that sync point, and keeps the step's earliest
 * begin.  Returns 0 or -1 on out-of-memory. */
static int finish_step(trace *t)
{
    for (size_t i = 0; i < t->n_syncs; i++) {
        if (t->syncs[i].vs_median != SS_MISSING)
            continue;
        uint32_t name = t->syncs[i].name;
        size_t n = 0;
        for (size_t k = i; k < t->n_syncs; k++)
            if (t->syncs[k].name == name)
                t->scratch[n++] = t->syncs[k].at;
        int64_t med = ss_median_i64(t->scratch, n);
        for (size_t k = i; k < t->n_syncs; k++)
            if (t->syncs[k].name == name)
                t->syncs[k].vs_median = t->syncs[k].at - med;
    }
    int64_t begin = t->rows[0].begin;
    for (size_t r = 1; r < t->n_rows; r++)
        if (t->rows[r].begin < begin)
            begin = t->rows[r].begin;
    if (grow((void **)&t->steps, sizeof *t->steps, t->n_steps,
             &t->cap_steps) != 0)
        return -1;
    t->steps[t->n_steps++] = (tr_step){t->rows[0].step, begin};
    return 0;
}

/* Writes the step whose rows have been read, then forgets them. */
static int emit_step(FILE *f, trace *t)
{
    if (finish_step(t) != 0)
        return -1;
    size_t most = 1;
    for (size_t i = 0; i < t->n_rows; i++)
        if (t->rows[i].n_phases > most)
            most = t->rows[i].n_phases;
    if (most > t->cap_draw) {
        drawn *d = realloc(t->draw, most * sizeof *d);
        if (d)
            t->draw = d;
        int64_t *st = realloc(t->stack, most * sizeof *st);
        if (st)
            t->stack = st;
        if (!d || !st)
            return -1;
        t->cap_draw = most;
    }
    for (size_t i = 0; i < t->n_rows; i++)
        if (t->want_rank[t->rows[i].rank])
            write_row(f, t, &t->rows[i]);
    t->n_rows = t->n_phases = t->n_syncs = 0;
    return 0;
}

/* Reads the range's rows, TOTAL of them, step by step, writing each step
 * as soon as its rows are together. */
static int stream_steps(ss_reader *rd, FILE *f, trace *t, uint64_t total,
                        ss_progress *pg, FILE *err)
{
    ss_progress_stage(pg, "stepscope trace: rank-steps", 0, total);
    ss_rank_step_query q = {t->run_id, t->attempt, t->first, t->last,
                            SS_RANK_STEPS_PHASES | SS_RANK_STEPS_SYNCS, 0};
    if (ss_reader_rank_steps(rd, &q, &t->cur) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return -1;
    }
    const ss_rank_step_row *row;
    int rc, nomem = 0;
    uint64_t seen = 0;
    while (!nomem && (rc = ss_rank_steps_next(t->cur, &row)) == 1) {
        ss_progress_update(pg, ++seen);
        if (row->begin_ns == SS_MISSING || row->step_ns == SS_MISSING) {
            t->no_timeline++;
            continue;
        }
        if (row->rank < 0 || row->rank >= t->world)
            continue;
        if (t->n_rows && t->rows[0].step != row->step && emit_step(f, t)) {
            nomem = 1;
            break;
        }
        if (grow((void **)&t->rows, sizeof *t->rows, t->n_rows,
                 &t->cap_rows) != 0) {
            nomem = 1;
            break;
        }
        tr_row *x = &t->rows[t->n_rows++];
        *x = (tr_row){row->step, row->rank, row->begin_ns, row->step_ns,
                      t->n_phases, 0, t->n_syncs, 0};
        nomem = add_row(t, row, x) != 0;
    }
    if (!nomem && rc == 0 && t->n_rows && emit_step(f, t) != 0)
        nomem = 1;
    if (nomem)
        fprintf(err, "stepscope trace: out of memory\n");
    else if (rc < 0)
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
    return nomem || rc < 0 ? -1 : 0;
}

static void write_head(FILE *f, trace *t)
{
    char label[512];
    snprintf(label, sizeof label, "run %" PRId64 " %s (attempt %" PRId64 ")",
             t->run_id, t->run_name, t->attempt);
    fputs("{\"traceEvents\":[\n", f);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRId64
               ",\"tid\":0,\"args\":{\"name\":",
            t->run_id);
    json_str(f, label);
    fputs("}}", f);
    t->events = 1;
    for (int64_t r = 0; r < t->world; r++) {
        if (!t->want_rank[r])
            continue;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%" PRId64
                   ",\"tid\":%" PRId64 ",\"args\":{\"name\":\"rank %" PRId64
                   "\"}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\","
                   "\"pid\":%" PRId64 ",\"tid\":%" PRId64
                   ",\"args\":{\"sort_index\":%" PRId64 "}}",
                t->run_id, r + 1, r, t->run_id, r + 1, r);
        t->events += 2;
    }
}

static void write_tail(FILE *f, const trace *t)
{
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{"
          "\"generator\":\"stepscope trace\",\"run_id\":", f);
    fprintf(f, "%" PRId64 ",\"run_name\":", t->run_id);
    json_str(f, t->run_name);
    fputs(",\"uuid\":", f);
    json_str(f, t->uuid);
    fprintf(f, ",\"attempt\":%" PRId64 ",\"first_step\":%" PRId64
               ",\"last_step\":%" PRId64 ",\"steps\":%zu,\"world_size\":%"
               PRId64 ",\"clock\":\"microseconds since the run's first step "
               "began (CLOCK_MONOTONIC of the ranks' host)\"}}\n",
            t->attempt, t->first, t->last, t->n_steps, t->world);
}

/* ---- the command ---- */

/* The reader's progress callback: keeps the progress line current while
 * a query works before its first row (the count of a large range). */
static void progress_tick(void *pg)
{
    ss_progress_tick(pg);
}

/* Reads and writes once the store is open.  Returns the exit status. */
static int make_trace(ss_reader *rd, const ss_trace_opts *o, trace *t, FILE *out,
                      FILE *err)
{
    if (ss_reader_select_run(rd, o->run, &t->run_id) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return 1;
    }
    if (load_run(rd, t, o->attempt, err) != 0)
        return 1;
    t->want_rank = calloc((size_t)t->world, 1);
    if (!t->want_rank) {
        fprintf(err, "stepscope trace: out of memory\n");
        return 1;
    }
    if (!o->ranks)
        memset(t->want_rank, 1, (size_t)t->world);
    else if (parse_ranks(o->ranks, t->want_rank, t->world) != 0) {
        fprintf(err, "stepscope trace: --ranks wants ranks below %" PRId64
                     " like 0,3,8-15, not '%s'\n", t->world, o->ranks);
        return 2;
    }
    int rc = choose_steps(rd, t, o->steps, err);
    if (rc)
        return rc;
    ss_rank_step_summary sum;
    if (ss_reader_rank_step_summary(rd, t->run_id, t->attempt, t->first,
                                    t->last, &sum) != 0) {
        fprintf(err, "stepscope trace: %s\n", ss_reader_errmsg(rd));
        return 1;
    }
    t->t0 = sum.t0_ns;
    if (sum.timed_rows <= 0) {
        fprintf(err, "stepscope trace: run %" PRId64 " has no step timelines "
                "for steps %" PRId64 " to %" PRId64 "%s\n", t->run_id,
                t->first, t->last,
                sum.rows > 0 ? " (they were recorded by a stepscope that did "
                               "not store timelines)"
                             : "");
        return 1;
    }
    t->scratch = malloc((size_t)t->world * sizeof *t->scratch);
    if (!t->scratch) {
        fprintf(err, "stepscope trace: out of memory\n");
        return 1;
    }
    int to_stdout = strcmp(o->output, "-") == 0;
    FILE *f = to_stdout ? out : fopen(o->output, "w");
    if (!f) {
        fprintf(err, "stepscope trace: cannot write %s: %s\n", o->output,
                strerror(errno));
        return 1;
    }
    static char big[1 << 16];
    if (!to_stdout)
        setvbuf(f, big, _IOFBF, sizeof big);
    ss_progress pg;
    ss_progress_begin(&pg, err, "stepscope trace", 0);
    ss_reader_set_progress(rd, progress_tick, &pg);
    write_head(f, t);
    rc = stream_steps(rd, f, t, (uint64_t)sum.rows, &pg, err);
    if (rc == 0)
        rc = write_findings(rd, f, t, err);
    if (rc == 0 && ss_trace_pipeline_write(rd, f, t->run_id, t->attempt,
                                           t->first, t->last, t->want_rank,
                                           t->world, t->t0, t->run_id,
                                           &t->events, err) != 0)
        rc = 1;
    int profiles = 0;
    if (rc == 0 &&
        (profiles = ss_trace_profiles_write(rd, f, t->run_id, t->attempt,
                                            t->want_rank, t->world, t->t0,
                                            t->run_id + 1, &t->events,
                                            err)) < 0)
        rc = 1;
    if (rc == 0)
        write_tail(f, t);
    ss_reader_set_progress(rd, NULL, NULL);
    ss_progress_end(&pg);
    int werr = ferror(f) || fflush(f) != 0;
    if (!to_stdout && fclose(f) != 0)
        werr = 1;
    if (werr && rc == 0)
        fprintf(err, "stepscope trace: writing %s: %s\n", o->output,
                strerror(errno));
    if (rc != 0 || werr) {
        if (!to_stdout)
            unlink(o->output); /* no half-written trace */
        return 1;
    }
    fprintf(err, "stepscope trace: run %" PRId64 " steps %" PRId64 "-%" PRId64
            " (%zu drawn), %" PRId64 " ranks, %" PRIu64 " events -> %s\n",
            t->run_id, t->first, t->last, t->n_steps, t->world, t->events,
            to_stdout ? "stdout" : o->output);
    if (profiles > 0)
        fprintf(err, "stepscope trace: %d torch.profiler trace%s merged\n",
                profiles, profiles == 1 ? "" : "s");
    if (t->no_timeline)
        fprintf(err, "stepscope trace: %" PRIu64 " rank-steps were recorded "
                "without timelines and are left out\n", t->no_timeline);
    return 0;
}

int ss_trace_cmd(const ss_trace_opts *o, FILE *out, FILE *err)
{
    char msg[1024];
    ss_reader *rd = ss_reader_open(o->db, msg, sizeof msg);
    if (!rd) {
        fprintf(err, "stepscope trace: %s\n", msg);
        return 1;
    }
    trace t;
    memset(&t, 0, sizeof t);
    int rc = make_trace(rd, o, &t, out, err);
    trace_free(&t);
    ss_reader_close(rd);
    return rc;
}
