/*
 * fold_test.c - folding of event streams into step records: phase pairing
 * and nesting, sync / metric / memory rules, step completion order, late
 * and excess events, lost begins, and many steps in one round.
 *
 * Most cases are rows of one table (cases[]): a script of events made on
 * two threads, with rounds and the counters expected between them, and
 * the step records expected at the end (their phases, syncs, metrics and
 * memory); one loop runs them and names the failing row.  The cases of
 * other shapes (loops over limits, the status, checkpoints, vectors)
 * follow as functions.
 */
#include <math.h>
#include <stdlib.h>

#include "fold.h"
#include "testing.h"

#define MAX_OUT 64

typedef struct {
    wire_step steps[MAX_OUT];
    int n_steps;
    /* vectors of the steps: count, and of each its name, n, cut, v[0] */
    unsigned n_vecs[MAX_OUT];
    ss__vec vecs[MAX_OUT][4];
    double first[MAX_OUT][4], last[MAX_OUT][4];
    uint64_t ckpt_step[4];
    int n_ckpt;
} sink_log;

static void log_step(void *ctx, const wire_step *rec, const ss__vec *vecs,
                     unsigned n_vecs)
{
    sink_log *l = ctx;
    if (l->n_steps >= MAX_OUT)
        return;
    int k = l->n_steps++;
    l->steps[k] = *rec;
    l->n_vecs[k] = n_vecs;
    for (unsigned i = 0; i < n_vecs && i < 4; i++) {
        l->vecs[k][i] = vecs[i];
        l->vecs[k][i].v = NULL; /* valid during the call only */
        l->first[k][i] = vecs[i].n ? vecs[i].v[0] : NAN;
        l->last[k][i] = vecs[i].n ? vecs[i].v[vecs[i].n - 1] : NAN;
    }
}

static void log_ckpt(void *ctx, uint64_t step, ss__mono_ns t)
{
    sink_log *l = ctx;
    (void)t;
    if (l->n_ckpt < 4)
        l->ckpt_step[l->n_ckpt++] = step;
}

typedef struct {
    ss__fold fold;
    sink_log log;
    ss__track tracks[2];
} harness;

static harness *new_harness(void)
{
    harness *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    ss__fold_sink sink = {&h->log, log_step, log_ckpt, NULL};
    ss__fold_init(&h->fold, &sink);
    ss__track_reset(&h->tracks[0]);
    ss__track_reset(&h->tracks[1]);
    return h;
}

/* Feeds one event made on thread TID. */
static void ev(harness *h, int tid, unsigned type, unsigned name,
               uint64_t step, ss__mono_ns t, uint64_t value)
{
    ss__event e = {.t = t, .step = step, .value = value,
                   .type = (uint8_t)type, .name = (uint16_t)name};
    ss__fold_event(&h->fold, &h->tracks[tid], &e);
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static const wire_phase *phase(const wire_step *s, unsigned id)
{
    for (unsigned i = 0; i < s->n_phases; i++)
        if (s->phases[i].name_id == id)
            return &s->phases[i];
    return NULL;
}

static const wire_metric *metric(const wire_step *s, unsigned id)
{
    for (unsigned i = 0; i < s->n_metrics; i++)
        if (s->metrics[i].name_id == id)
            return &s->metrics[i];
    return NULL;
}

/* ---- the table ---- */

/* A step of a script: an event, a round, or a counter expected now. */
enum {
    OP_END,
    OP_EV,              /* TYPE NAME STEP T VALUE on thread TID */
    OP_METRIC,          /* ... with the double D as the value */
    OP_ROUND,           /* ss__fold_round */
    OP_STEPS,           /* VALUE records handed on so far */
    OP_DROPPED_EVENTS,  /* the fold's dropped_events == VALUE */
    OP_DROPPED_RECORDS, /* the fold's dropped_records == VALUE */
    OP_LAST_STEP,       /* ss__fold_last_step == VALUE */
};
typedef struct {
    int op, tid;
    unsigned type, name;
    uint64_t step;
    ss__mono_ns t;
    uint64_t value;
    double d;
} script_op;
#define EV(tid, type, name, step, t, value)                                   \
    {OP_EV, (tid), (type), (name), (step), (t), (value), 0}
#define MET(tid, type, name, step, d)                                         \
    {OP_METRIC, (tid), (type), (name), (step), 0, 0, (d)}
#define ROUND {.op = OP_ROUND}
#define EXPECT(what, v) {.op = (what), .value = (uint64_t)(v)}

/* An expected integer; unset (the default) is not checked. */
typedef struct {
    int on;
    int64_t v;
} want;
#define WANT(x) {1, (int64_t)(x)}

typedef struct {
    int on;
    want step, begin_ns, end_ns, flags, rss, device;
    want n_phases, n_syncs, n_metrics;
} step_want;

/* Phase ID of the record at index AT: present, and these figures. */
typedef struct {
    int on, at;
    unsigned id;
    want count, total_ns, self_ns, first_begin_ns;
} phase_want;

/* Metric ID of the record at index AT: VALUE, or absent. */
typedef struct {
    int on, at;
    unsigned id;
    int absent;
    double value;
} metric_want;

/* The INDEX-th sync of the record at index AT. */
typedef struct {
    int on, at;
    unsigned index;
    want name_id, arrival_ns;
} sync_want;

typedef struct {
    const char *name;
    script_op script[24];
    want n_steps; /* records handed on, at the end */
    step_want steps[3];
    phase_want phases[10];
    metric_want metrics[6];
    sync_want syncs[2];
    want dropped_events, dropped_records, last_step;
} fold_case;

#define ST(at, ...) [at] = {.on = 1, __VA_ARGS__}
#define PH(at_, id_, ...) {.on = 1, .at = (at_), .id = (id_), __VA_ARGS__}
#define M(at_, id_, v) {.on = 1, .at = (at_), .id = (id_), .value = (v)}
#define M_ABSENT(at_, id_) {.on = 1, .at = (at_), .id = (id_), .absent = 1}
#define LOST (SS__EV_AFTER_LOSS | SS__EV_LOST_METRIC)

static const fold_case cases[] = {
    {.name = "phases pair, and same-name nesting counts once",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 100, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, 1, 110, 0), /* fwd */
                EV(0, SS__EV_PHASE_BEGIN, 2, 1, 120, 0), /* fwd in itself */
                EV(0, SS__EV_PHASE_BEGIN, 3, 1, 125, 0), /* attn in fwd */
                EV(0, SS__EV_PHASE_END, 3, SS__NO_STEP, 135, 0),
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 140, 0),
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 150, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, 1, 160, 0), /* fwd again */
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 170, 0),
                EV(0, SS__EV_PHASE_END, 4, SS__NO_STEP, 171, 0), /* unmatched */
                EV(0, SS__EV_STEP_END, 0, 1, 200, 0), ROUND},
     .n_steps = WANT(1),
     .steps = {ST(0, .step = WANT(1), .begin_ns = WANT(100),
                  .end_ns = WANT(200), .n_phases = WANT(2),
                  .flags = WANT(WIRE_STEP_HAS_SELF))},
     /* fwd's self time leaves out attn, nested in it; the inner fwd pair
      * is fwd's own time */
     .phases = {PH(0, 2, .count = WANT(2), .total_ns = WANT(40 + 10),
                   .first_begin_ns = WANT(110), .self_ns = WANT(30 + 10)),
                PH(0, 3, .count = WANT(1), .total_ns = WANT(10),
                   .first_begin_ns = WANT(125), .self_ns = WANT(10))}},
    /* backward [100, 190): its all-reduce wait is a span from the arrival
     * (150) to when the wait was seen to end (188), recorded inside it.  A
     * span of another thread nests in nothing of this one; nor does a span
     * that began before every open phase.  Overlapping children count
     * once: [210, 230) and [220, 240).  A run still open when its parent
     * ends covers it up to that end. */
    {.name = "self time leaves out nested runs once",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, 1, 100, 0),
                EV(0, SS__EV_PHASE_BEGIN, 3, 1, 110, 0),
                EV(0, SS__EV_PHASE_END, 3, 1, 130, 0),
                EV(0, SS__EV_PHASE_SPAN, 4, 1, 150, 188),
                EV(0, SS__EV_PHASE_END, 2, 1, 190, 0),
                EV(1, SS__EV_PHASE_SPAN, 5, 1, 120, 140),
                EV(0, SS__EV_PHASE_BEGIN, 6, 1, 200, 0),
                EV(0, SS__EV_PHASE_SPAN, 5, 1, 195, 205),
                EV(0, SS__EV_PHASE_SPAN, 7, 1, 210, 230),
                EV(0, SS__EV_PHASE_SPAN, 7, 1, 220, 240),
                EV(0, SS__EV_PHASE_BEGIN, 8, 1, 250, 0),
                EV(0, SS__EV_PHASE_END, 6, 1, 260, 0),
                EV(0, SS__EV_PHASE_END, 8, 1, 280, 0),
                EV(0, SS__EV_STEP_END, 0, 1, 300, 0), ROUND},
     .n_steps = WANT(1),
     .phases = {PH(0, 2, .total_ns = WANT(90),
                   .self_ns = WANT(90 - 20 - 38)),
                PH(0, 3, .self_ns = WANT(20)), PH(0, 4, .self_ns = WANT(38)),
                PH(0, 5, .self_ns = WANT(20 + 10)),
                PH(0, 6, .total_ns = WANT(60),
                   .self_ns = WANT(60 - 30 - 10)),
                PH(0, 7, .self_ns = WANT(40)), PH(0, 8, .self_ns = WANT(30))}},
    /* a wait measured on another thread, reported once it completed */
    {.name = "spans add to the step current when recorded",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 3, 100, 0),
                EV(1, SS__EV_PHASE_SPAN, 2, 3, 120, 150),
                EV(1, SS__EV_PHASE_SPAN, 2, 3, 160, 165),
                EV(0, SS__EV_STEP_END, 0, 3, 200, 0), ROUND},
     .n_steps = WANT(1),
     .phases = {PH(0, 2, .count = WANT(2), .total_ns = WANT(30 + 5),
                   .first_begin_ns = WANT(120))}},
    {.name = "phases pair per thread",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 5, 0, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, 5, 10, 0),
                EV(1, SS__EV_PHASE_BEGIN, 2, 5, 12, 0),
                EV(1, SS__EV_PHASE_END, 2, SS__NO_STEP, 22, 0),
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 40, 0),
                EV(0, SS__EV_STEP_END, 0, 5, 50, 0), ROUND},
     .n_steps = WANT(1),
     .phases = {PH(0, 2, .count = WANT(2), .total_ns = WANT(30 + 10),
                   .first_begin_ns = WANT(10))}},
    {.name = "the first sync, the last metric, the most memory",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 3, 0, 0),
                EV(0, SS__EV_SYNC, 7, 3, 30, 0),
                EV(1, SS__EV_SYNC, 7, 3, 35, 0),
                MET(0, SS__EV_METRIC, 8, 3, 1.5),
                MET(0, SS__EV_METRIC, 8, 3, 0.25),
                EV(0, SS__EV_RSS, 0, 3, 0, 4096),
                EV(0, SS__EV_RSS, 0, 3, 0, 8192),
                EV(0, SS__EV_RSS, 0, 3, 0, 1024),
                EV(0, SS__EV_DEVICE, 1, 3, 0, 10),
                EV(0, SS__EV_DEVICE, 2, 3, 0, 30),
                EV(0, SS__EV_STEP_END, 0, 3, 90, 0), ROUND},
     .n_steps = WANT(1),
     .steps = {ST(0, .n_syncs = WANT(1), .n_metrics = WANT(1),
                  .flags = WANT(WIRE_STEP_HAS_RSS | WIRE_STEP_HAS_DEVICE |
                                WIRE_STEP_HAS_SELF),
                  .rss = WANT(8192), .device = WANT(30))},
     .syncs = {{1, 0, 0, WANT(7), WANT(30)}},
     .metrics = {M(0, 8, 0.25)}},
    {.name = "events without a step are ignored",
     .script = {EV(0, SS__EV_SYNC, 7, SS__NO_STEP, 30, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, SS__NO_STEP, 30, 0),
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 40, 0), ROUND},
     .n_steps = WANT(0), .dropped_events = WANT(0),
     .dropped_records = WANT(0), .last_step = WANT(SS__NO_STEP)},
    {.name = "late events are dropped events",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(1, SS__EV_PHASE_BEGIN, 2, 1, 5, 0), /* spans the end */
                EV(0, SS__EV_STEP_END, 0, 1, 10, 0), ROUND,
                EXPECT(OP_STEPS, 1),
                EV(1, SS__EV_PHASE_END, 2, SS__NO_STEP, 15, 0),
                MET(1, SS__EV_METRIC, 9, 1, 1.0), ROUND},
     .n_steps = WANT(1), .steps = {ST(0, .n_phases = WANT(0))},
     .dropped_events = WANT(2), .last_step = WANT(1)},
    /* step 1 begins on thread 1 but its end is lost; step 2 completes;
     * step 4 ends without a begin (lost): dropped as well */
    {.name = "steps complete in order and stale ones drop",
     .script = {EV(1, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_STEP_BEGIN, 0, 2, 10, 0),
                EV(0, SS__EV_STEP_END, 0, 2, 20, 0),
                EV(0, SS__EV_STEP_END, 0, 4, 40, 0),
                EV(0, SS__EV_STEP_BEGIN, 0, 5, 50, 0), ROUND,
                EXPECT(OP_STEPS, 1), EXPECT(OP_DROPPED_RECORDS, 2),
                EXPECT(OP_LAST_STEP, 4),
                EV(0, SS__EV_STEP_END, 0, 5, 60, 0), ROUND},
     .n_steps = WANT(2),
     .steps = {ST(0, .step = WANT(2)), ST(1, .step = WANT(5))}},
    /* step 1's end was lost on a full ring; an end may still come in the
     * round that saw the loss */
    {.name = "a step whose end was lost drops a round later",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_STEP_BEGIN | SS__EV_AFTER_LOSS, 0, 2, 10, 0),
                ROUND, EXPECT(OP_DROPPED_RECORDS, 0), ROUND,
                EXPECT(OP_DROPPED_RECORDS, 1), EXPECT(OP_LAST_STEP, 1),
                EV(0, SS__EV_STEP_END, 0, 2, 20, 0), ROUND},
     .n_steps = WANT(1), .steps = {ST(0, .step = WANT(2))}},
    {.name = "an end from another thread in the next round counts",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_STEP_BEGIN, 0, 2, 10, 0), ROUND,
                EV(1, SS__EV_STEP_END, 0, 1, 9, 0), ROUND},
     .n_steps = WANT(1), .steps = {ST(0, .step = WANT(1))},
     .dropped_records = WANT(0)},
    /* the first begin's end was dropped; after the hole a fresh pair */
    {.name = "a hole in the stream resets pairing",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_PHASE_BEGIN, 2, 1, 10, 0),
                EV(0, SS__EV_PHASE_BEGIN | SS__EV_AFTER_LOSS, 2, 1, 50, 0),
                EV(0, SS__EV_PHASE_END, 2, SS__NO_STEP, 60, 0),
                EV(0, SS__EV_STEP_END, 0, 1, 70, 0), ROUND},
     .n_steps = WANT(1),
     .phases = {PH(0, 2, .count = WANT(1), .total_ns = WANT(10))}},
    /* A full ring dropped later values of a metric: the value kept before
     * the hole is not the step's last one, so the metric is missing there,
     * never that earlier value.  Only the thread with the hole, only steps
     * it may still have been recording into, and only holes that lost a
     * metric.  Step 1: thread 0 records 8 and 9 (later lost ones of 9 on
     * thread 1 do not matter to it).  Step 2: thread 0 keeps 8 = 4.0, then
     * loses 8's later values, and 9 is recorded again after the hole.  A
     * hole after step 2 ended leaves step 2 alone; a hole that lost only
     * other events leaves 8 as it is. */
    {.name = "a metric whose later values were lost is missing",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                MET(0, SS__EV_METRIC, 8, 1, 1.0),
                MET(1, SS__EV_METRIC, 9, 1, 2.0),
                MET(0, SS__EV_METRIC, 9, 1, 3.0),
                EV(0, SS__EV_STEP_END, 0, 1, 10, 0),
                EV(0, SS__EV_STEP_BEGIN, 0, 2, 20, 0),
                MET(0, SS__EV_METRIC, 8, 2, 4.0),
                MET(0, SS__EV_METRIC, 9, 2, 5.0),
                MET(0, SS__EV_METRIC | LOST, 9, 2, 6.0),
                EV(0, SS__EV_STEP_END, 0, 2, 30, 0),
                EV(0, SS__EV_STEP_BEGIN | LOST, 0, 3, 40, 0),
                MET(0, SS__EV_METRIC, 8, 3, 7.0),
                EV(0, SS__EV_SYNC | SS__EV_AFTER_LOSS, 5, 3, 45, 0),
                EV(0, SS__EV_STEP_END, 0, 3, 50, 0), ROUND},
     .n_steps = WANT(3), .steps = {ST(1, .n_metrics = WANT(1))},
     .metrics = {M(0, 8, 1.0), M(0, 9, 3.0),
                 M_ABSENT(1, 8), /* missing, not the stale 4.0 */
                 M(1, 9, 6.0),   /* recorded after the hole */
                 M(2, 8, 7.0)}},
    /* a hole on a thread that never steps (a data loader recording
     * metrics) puts in doubt only the steps it may still record into */
    {.name = "a metric lost on another thread spares steps behind it",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                MET(1, SS__EV_METRIC, 8, 1, 1.0),
                EV(0, SS__EV_STEP_END, 0, 1, 10, 0),
                EV(0, SS__EV_STEP_BEGIN, 0, 2, 20, 0),
                MET(1, SS__EV_METRIC, 8, 2, 2.0),
                MET(0, SS__EV_METRIC, 9, 2, 3.0),
                EV(1, SS__EV_SYNC | LOST, 5, 2, 25, 0),
                EV(0, SS__EV_STEP_END, 0, 2, 30, 0), ROUND},
     .n_steps = WANT(2),
     .metrics = {M(0, 8, 1.0), M_ABSENT(1, 8), M(1, 9, 3.0)}},
    /* id 0 is what ss_name returns for a name it refuses (a full table, a
     * bad name): what is recorded under it is lost, and counted (the
     * step's end does not count) */
    {.name = "bad name ids are dropped and counted",
     .script = {EV(0, SS__EV_STEP_BEGIN, 0, 1, 0, 0),
                EV(0, SS__EV_PHASE_BEGIN, 0, 1, 1, 0),
                EV(0, SS__EV_PHASE_END, 0, 1, 2, 0),
                EV(0, SS__EV_SYNC, 300, 1, 3, 0),
                MET(0, SS__EV_METRIC, 0, 1, NAN),
                EV(0, SS__EV_STEP_END, 0, 1, 9, 0), ROUND},
     .n_steps = WANT(1),
     .steps = {ST(0, .n_phases = WANT(0), .n_syncs = WANT(0),
                  .n_metrics = WANT(0))},
     .dropped_events = WANT(3)},
};

static unsigned n_checked; /* expectations checked, over every row */

/* Checks that GOT is W's value when W is set, naming row C and WHAT. */
static void check_want(const fold_case *c, const char *what, want w,
                       int64_t got)
{
    if (!w.on)
        return;
    n_checked++;
    if (got != w.v)
        fprintf(stderr, "  row '%s': %s == %lld, expected %lld\n", c->name,
                what, (long long)got, (long long)w.v);
    CHECK(got == w.v);
}

/* CHECK, naming the row. */
#define ROW_CHECK(c, cond)                                                    \
    do {                                                                      \
        int ok_ = (cond);                                                     \
        n_checked++;                                                          \
        if (!ok_)                                                             \
            fprintf(stderr, "  row '%s': %s\n", (c)->name, #cond);            \
        CHECK(ok_);                                                           \
    } while (0)

/* Runs C's script, checking the counters it expects on the way. */
static void run_script(const fold_case *c, harness *h)
{
    for (const script_op *o = c->script; o->op != OP_END; o++) {
        int64_t v = (int64_t)o->value;
        switch (o->op) {
        case OP_EV:
            ev(h, o->tid, o->type, o->name, o->step, o->t, o->value);
            break;
        case OP_METRIC:
            ev(h, o->tid, o->type, o->name, o->step, 0, dbits(o->d));
            break;
        case OP_ROUND:
            ss__fold_round(&h->fold);
            break;
        case OP_STEPS:
            check_want(c, "records so far", (want)WANT(v), h->log.n_steps);
            break;
        case OP_DROPPED_EVENTS:
            check_want(c, "dropped events so far", (want)WANT(v),
                       (int64_t)h->fold.dropped_events);
            break;
        case OP_DROPPED_RECORDS:
            check_want(c, "dropped records so far", (want)WANT(v),
                       (int64_t)h->fold.dropped_records);
            break;
        case OP_LAST_STEP:
            check_want(c, "last step so far", (want)WANT(v),
                       (int64_t)ss__fold_last_step(&h->fold));
            break;
        }
    }
}

/* The record at index AT, or NULL (a failed check) when there is none. */
static const wire_step *record(const fold_case *c, const harness *h, int at)
{
    ROW_CHECK(c, at < h->log.n_steps);
    return at < h->log.n_steps ? &h->log.steps[at] : NULL;
}

static void run_case(const fold_case *c)
{
    harness *h = new_harness();
    REQUIRE(h);
    run_script(c, h);
    check_want(c, "records", c->n_steps, h->log.n_steps);
    check_want(c, "dropped events", c->dropped_events,
               (int64_t)h->fold.dropped_events);
    check_want(c, "dropped records", c->dropped_records,
               (int64_t)h->fold.dropped_records);
    check_want(c, "last step", c->last_step,
               (int64_t)ss__fold_last_step(&h->fold));
    for (int at = 0; at < 3; at++) {
        const step_want *w = &c->steps[at];
        const wire_step *s = w->on ? record(c, h, at) : NULL;
        if (!s)
            continue;
        check_want(c, "step", w->step, (int64_t)s->step);
        check_want(c, "begin_ns", w->begin_ns, s->begin_ns);
        check_want(c, "end_ns", w->end_ns, s->end_ns);
        check_want(c, "flags", w->flags, s->flags);
        check_want(c, "rss_bytes", w->rss, (int64_t)s->rss_bytes);
        check_want(c, "device_bytes", w->device, (int64_t)s->device_bytes);
        check_want(c, "n_phases", w->n_phases, s->n_phases);
        check_want(c, "n_syncs", w->n_syncs, s->n_syncs);
        check_want(c, "n_metrics", w->n_metrics, s->n_metrics);
    }
    for (int i = 0; i < 10 && c->phases[i].on; i++) {
        const phase_want *w = &c->phases[i];
        const wire_step *s = record(c, h, w->at);
        const wire_phase *p = s ? phase(s, w->id) : NULL;
        if (!p)
            fprintf(stderr, "  row '%s': no phase %u in record %d\n",
                    c->name, w->id, w->at);
        ROW_CHECK(c, p != NULL);
        if (!p)
            continue;
        check_want(c, "phase count", w->count, p->count);
        check_want(c, "phase total_ns", w->total_ns, p->total_ns);
        check_want(c, "phase self_ns", w->self_ns, p->self_ns);
        check_want(c, "phase first_begin_ns", w->first_begin_ns,
                   p->first_begin_ns);
    }
    for (int i = 0; i < 6 && c->metrics[i].on; i++) {
        const metric_want *w = &c->metrics[i];
        const wire_step *s = record(c, h, w->at);
        const wire_metric *m = s ? metric(s, w->id) : NULL;
        if (w->absent) {
            ROW_CHECK(c, s && m == NULL);
        } else {
            ROW_CHECK(c, m != NULL && m->value == w->value);
        }
    }
    for (int i = 0; i < 2 && c->syncs[i].on; i++) {
        const sync_want *w = &c->syncs[i];
        const wire_step *s = record(c, h, w->at);
        ROW_CHECK(c, s && w->index < s->n_syncs);
        if (!s || w->index >= s->n_syncs)
            continue;
        check_want(c, "sync name_id", w->name_id, s->syncs[w->index].name_id);
        check_want(c, "sync arrival_ns", w->arrival_ns,
                   s->syncs[w->index].arrival_ns);
    }
    free(h);
}

static void every_case(void)
{
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i]);
    printf("  %zu cases, %u expectations checked\n", n, n_checked);
}

/* ---- cases of other shapes ---- */

static void phases_nested_too_deep_count_as_their_parents_time(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    for (unsigned k = 0; k <= SS__NEST_MAX; k++)
        ev(h, 0, SS__EV_PHASE_BEGIN, 10 + k, 1, 10 + k, 0);
    for (unsigned k = SS__NEST_MAX + 1; k-- > 0;)
        ev(h, 0, SS__EV_PHASE_END, 10 + k, 1, 100 - k, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 1, 200, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    const wire_step *s = &h->log.steps[0];
    const wire_phase *deepest = phase(s, 10 + SS__NEST_MAX);
    const wire_phase *last_tracked = phase(s, 10 + SS__NEST_MAX - 1);
    REQUIRE(deepest && last_tracked);
    CHECK_EQ_INT(deepest->self_ns, deepest->total_ns);
    CHECK_EQ_INT(last_tracked->self_ns, last_tracked->total_ns);
    CHECK_EQ_INT(phase(s, 10)->self_ns, 2);
    free(h);
}

static void many_steps_in_one_round_are_all_handed_on(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    for (uint64_t s = 1; s <= 3 * SS__FOLD_OPEN; s++) {
        ev(h, 0, SS__EV_STEP_BEGIN, 0, s, (ss__mono_ns)s * 10, 0);
        ev(h, 0, SS__EV_STEP_END, 0, s, (ss__mono_ns)s * 10 + 5, 0);
    }
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 3 * SS__FOLD_OPEN);
    for (int i = 0; i < h->log.n_steps; i++)
        CHECK_EQ_INT(h->log.steps[i].step, i + 1);
    CHECK_EQ_INT(h->fold.dropped_records, 0);
    free(h);
}

static void items_beyond_the_wire_limit_are_dropped(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    for (unsigned id = 1; id <= WIRE_MAX_ITEMS + 3; id++)
        ev(h, 0, SS__EV_METRIC, id, 1, 0, dbits(id));
    ev(h, 0, SS__EV_STEP_END, 0, 1, 9, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].n_metrics, WIRE_MAX_ITEMS);
    CHECK_EQ_INT(h->fold.dropped_events, 3);
    free(h);
}

static void checkpoints_pass_straight_through(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_CHECKPOINT, 0, SS__NO_STEP, 5, 1000);
    CHECK_EQ_INT(h->log.n_ckpt, 1);
    CHECK_EQ_INT(h->log.ckpt_step[0], 1000);
    free(h);
}

static void status_follows_the_stepping_thread(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    wire_status st;
    ss__fold_status(&h->fold, &st);
    CHECK(st.step == WIRE_NO_STEP);
    CHECK_EQ_INT(st.name_id, 0);
    CHECK_EQ_INT(st.since_ns, 0);

    ev(h, 0, SS__EV_STEP_BEGIN, 0, 4, 100, 0);
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.step, 4);
    CHECK_EQ_INT(st.name_id, 0);
    CHECK_EQ_INT(st.since_ns, 100);

    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 4, 110, 0); /* fwd */
    ev(h, 0, SS__EV_PHASE_BEGIN, 3, 4, 120, 0); /* attn inside fwd */
    ev(h, 1, SS__EV_PHASE_BEGIN, 5, 4, 130, 0); /* another thread */
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.name_id, 3);
    CHECK_EQ_INT(st.since_ns, 120);
    ev(h, 0, SS__EV_PHASE_END, 3, SS__NO_STEP, 125, 0);
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.name_id, 2);
    CHECK_EQ_INT(st.since_ns, 110);

    /* A phase left open (its end lost) is not reported in the next step. */
    ev(h, 0, SS__EV_STEP_END, 0, 4, 200, 0);
    ss__fold_status(&h->fold, &st);
    CHECK(st.step == WIRE_NO_STEP);
    CHECK_EQ_INT(st.name_id, 0);
    CHECK_EQ_INT(st.since_ns, 200);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 5, 210, 0);
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.step, 5);
    CHECK_EQ_INT(st.name_id, 0);
    CHECK_EQ_INT(st.since_ns, 210);

    /* The step moves to the thread that began it; a gone thread is
     * forgotten. */
    ev(h, 1, SS__EV_STEP_BEGIN, 0, 6, 300, 0);
    ev(h, 1, SS__EV_PHASE_BEGIN, 6, 6, 310, 0);
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.step, 6);
    CHECK_EQ_INT(st.name_id, 6);
    ss__fold_forget_track(&h->fold, &h->tracks[1]);
    ss__fold_status(&h->fold, &st);
    CHECK_EQ_INT(st.step, 6);
    CHECK_EQ_INT(st.name_id, 0);
    CHECK_EQ_INT(st.since_ns, 300);
    free(h);
}

/* Feeds one vector of N elements V made on thread TID. */
static void vec(harness *h, int tid, unsigned name, uint64_t step,
                const double *v, uint32_t n, uint32_t cut)
{
    ss__event e = {.step = step, .value = (uint64_t)n | (uint64_t)cut << 32,
                   .type = SS__EV_VALUES, .name = (uint16_t)name};
    ss__fold_values(&h->fold, &h->tracks[tid], &e, v);
}

static void vectors_go_with_their_step_and_the_last_one_wins(void)
{
    harness *h = new_harness();
    double a[3] = {1, NAN, INFINITY}, b[2] = {5, 6}, c[4] = {7, 8, 9, -INFINITY};
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 100, 0);
    vec(h, 0, 3, 1, a, 3, 0);
    vec(h, 0, 4, 1, b, 2, 10);
    vec(h, 0, 3, 1, b, 2, 0); /* replaces a, in place */
    vec(h, 0, 4, 1, c, 4, 0); /* replaces b, in new room */
    ev(h, 0, SS__EV_STEP_END, 0, 1, 200, 0);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->log.n_steps, 1);
    CHECK_EQ_INT(h->log.n_vecs[0], 2);
    CHECK_EQ_INT(h->log.vecs[0][0].name_id, 3);
    CHECK_EQ_INT(h->log.vecs[0][0].n, 2);
    CHECK(h->log.first[0][0] == 5 && h->log.last[0][0] == 6);
    CHECK_EQ_INT(h->log.vecs[0][1].name_id, 4);
    CHECK_EQ_INT(h->log.vecs[0][1].n, 4);
    CHECK_EQ_INT(h->log.vecs[0][1].truncated, 0);
    CHECK(h->log.first[0][1] == 7 && isinf(h->log.last[0][1]) &&
          h->log.last[0][1] < 0);
    CHECK_EQ_INT(h->fold.dropped_vectors, 0);
    /* NaN and infinities pass unchanged */
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 2, 300, 0);
    vec(h, 0, 3, 2, a, 3, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 2, 400, 0);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->log.n_steps, 2);
    CHECK(h->log.first[1][0] == 1 && isinf(h->log.last[1][0]));
    ss__fold_release(&h->fold);
    free(h);
}

static void vectors_over_the_step_budget_late_or_unnamed_are_counted(void)
{
    harness *h = new_harness();
    static double big[SS_MAX_VALUES];
    unsigned fit = (unsigned)(SS__STEP_VALUES / SS_MAX_VALUES);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 100, 0);
    for (unsigned i = 0; i < fit + 2; i++)
        vec(h, 0, 1 + i, 1, big, SS_MAX_VALUES, 0);
    vec(h, 0, 0, 1, big, 1, 0); /* no name */
    ev(h, 0, SS__EV_STEP_END, 0, 1, 200, 0);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->log.n_steps, 1);
    CHECK_EQ_INT(h->log.n_vecs[0], fit);
    CHECK_EQ_INT(h->fold.dropped_vectors, 3);
    vec(h, 0, 1, 1, big, 4, 0); /* step 1 was handed on: late */
    CHECK_EQ_INT(h->fold.dropped_vectors, 4);
    /* a dropped record takes its vectors with it */
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 3, 300, 0);
    vec(h, 0, 1, 3, big, 4, 0);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 4, 400, 0); /* step 3's end lost */
    ss__fold_round(&h->fold);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->fold.dropped_vectors, 5);
    ss__fold_release(&h->fold);
    free(h);
}

TEST_LIST(TEST(every_case),
          TEST(phases_nested_too_deep_count_as_their_parents_time),
          TEST(many_steps_in_one_round_are_all_handed_on),
          TEST(items_beyond_the_wire_limit_are_dropped),
          TEST(checkpoints_pass_straight_through),
          TEST(status_follows_the_stepping_thread),
          TEST(vectors_go_with_their_step_and_the_last_one_wins),
          TEST(vectors_over_the_step_budget_late_or_unnamed_are_counted))
