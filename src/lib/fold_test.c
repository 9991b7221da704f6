/*
 * fold_test.c - folding of event streams into step records: phase pairing
 * and nesting, sync / metric / memory rules, step completion order, late
 * and excess events, lost begins, and many steps in one round.
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

static void phases_pair_and_same_name_nesting_counts_once(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 100, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 1, 110, 0);  /* fwd */
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 1, 120, 0);  /* fwd nested in itself */
    ev(h, 0, SS__EV_PHASE_BEGIN, 3, 1, 125, 0);  /* attn inside fwd */
    ev(h, 0, SS__EV_PHASE_END, 3, SS__NO_STEP, 135, 0);
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 140, 0);
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 150, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 1, 160, 0);  /* fwd again */
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 170, 0);
    ev(h, 0, SS__EV_PHASE_END, 4, SS__NO_STEP, 171, 0); /* unmatched */
    ev(h, 0, SS__EV_STEP_END, 0, 1, 200, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    const wire_step *s = &h->log.steps[0];
    CHECK_EQ_INT(s->step, 1);
    CHECK_EQ_INT(s->begin_ns, 100);
    CHECK_EQ_INT(s->end_ns, 200);
    CHECK_EQ_INT(s->n_phases, 2);
    REQUIRE(phase(s, 2) && phase(s, 3));
    CHECK_EQ_INT(phase(s, 2)->count, 2);
    CHECK_EQ_INT(phase(s, 2)->total_ns, 40 + 10);
    CHECK_EQ_INT(phase(s, 3)->count, 1);
    CHECK_EQ_INT(phase(s, 3)->total_ns, 10);
    CHECK_EQ_INT(phase(s, 2)->first_begin_ns, 110);
    CHECK_EQ_INT(phase(s, 3)->first_begin_ns, 125);
    CHECK_EQ_INT(s->flags, WIRE_STEP_HAS_SELF);
    /* fwd's self time leaves out attn, nested in it; the inner fwd pair
     * is fwd's own time. */
    CHECK_EQ_INT(phase(s, 2)->self_ns, 30 + 10);
    CHECK_EQ_INT(phase(s, 3)->self_ns, 10);
    free(h);
}

static void self_time_leaves_out_nested_runs_once(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    /* backward [100, 190): its all-reduce wait is a span from the arrival
     * (150) to when the wait was seen to end (188), recorded inside it. */
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 1, 100, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 3, 1, 110, 0);  /* user phase inside */
    ev(h, 0, SS__EV_PHASE_END, 3, 1, 130, 0);
    ev(h, 0, SS__EV_PHASE_SPAN, 4, 1, 150, 188);
    ev(h, 0, SS__EV_PHASE_END, 2, 1, 190, 0);
    /* A span of another thread nests in nothing of this one; nor does a
     * span that began before every open phase. */
    ev(h, 1, SS__EV_PHASE_SPAN, 5, 1, 120, 140);
    ev(h, 0, SS__EV_PHASE_BEGIN, 6, 1, 200, 0);
    ev(h, 0, SS__EV_PHASE_SPAN, 5, 1, 195, 205);
    /* Overlapping children count once: [210, 230) and [220, 240). */
    ev(h, 0, SS__EV_PHASE_SPAN, 7, 1, 210, 230);
    ev(h, 0, SS__EV_PHASE_SPAN, 7, 1, 220, 240);
    /* A run still open when its parent ends covers it up to that end. */
    ev(h, 0, SS__EV_PHASE_BEGIN, 8, 1, 250, 0);
    ev(h, 0, SS__EV_PHASE_END, 6, 1, 260, 0);
    ev(h, 0, SS__EV_PHASE_END, 8, 1, 280, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 1, 300, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    const wire_step *s = &h->log.steps[0];
    REQUIRE(phase(s, 2) && phase(s, 3) && phase(s, 4) && phase(s, 5));
    CHECK_EQ_INT(phase(s, 2)->total_ns, 90);
    CHECK_EQ_INT(phase(s, 2)->self_ns, 90 - 20 - 38);
    CHECK_EQ_INT(phase(s, 3)->self_ns, 20);
    CHECK_EQ_INT(phase(s, 4)->self_ns, 38);
    CHECK_EQ_INT(phase(s, 5)->self_ns, 20 + 10);
    REQUIRE(phase(s, 6) && phase(s, 7) && phase(s, 8));
    CHECK_EQ_INT(phase(s, 6)->total_ns, 60);
    CHECK_EQ_INT(phase(s, 6)->self_ns, 60 - 30 - 10);
    CHECK_EQ_INT(phase(s, 7)->self_ns, 40);
    CHECK_EQ_INT(phase(s, 8)->self_ns, 30);
    free(h);
}

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

static void spans_add_to_the_step_current_when_recorded(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 3, 100, 0);
    /* A wait measured on another thread, reported once it completed. */
    ev(h, 1, SS__EV_PHASE_SPAN, 2, 3, 120, 150);
    ev(h, 1, SS__EV_PHASE_SPAN, 2, 3, 160, 165);
    ev(h, 0, SS__EV_STEP_END, 0, 3, 200, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    const wire_step *s = &h->log.steps[0];
    REQUIRE(phase(s, 2) != NULL);
    CHECK_EQ_INT(phase(s, 2)->count, 2);
    CHECK_EQ_INT(phase(s, 2)->total_ns, 30 + 5);
    CHECK_EQ_INT(phase(s, 2)->first_begin_ns, 120);
    free(h);
}

static void phases_pair_per_thread(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 5, 0, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 5, 10, 0);
    ev(h, 1, SS__EV_PHASE_BEGIN, 2, 5, 12, 0);
    ev(h, 1, SS__EV_PHASE_END, 2, SS__NO_STEP, 22, 0);
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 40, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 5, 50, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    REQUIRE(phase(&h->log.steps[0], 2));
    CHECK_EQ_INT(phase(&h->log.steps[0], 2)->count, 2);
    CHECK_EQ_INT(phase(&h->log.steps[0], 2)->total_ns, 30 + 10);
    CHECK_EQ_INT(phase(&h->log.steps[0], 2)->first_begin_ns, 10);
    free(h);
}

static void sync_first_metric_last_memory_max(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 3, 0, 0);
    ev(h, 0, SS__EV_SYNC, 7, 3, 30, 0);
    ev(h, 1, SS__EV_SYNC, 7, 3, 35, 0);
    ev(h, 0, SS__EV_METRIC, 8, 3, 0, dbits(1.5));
    ev(h, 0, SS__EV_METRIC, 8, 3, 0, dbits(0.25));
    ev(h, 0, SS__EV_RSS, 0, 3, 0, 4096);
    ev(h, 0, SS__EV_RSS, 0, 3, 0, 8192);
    ev(h, 0, SS__EV_RSS, 0, 3, 0, 1024);
    ev(h, 0, SS__EV_DEVICE, 1, 3, 0, 10);
    ev(h, 0, SS__EV_DEVICE, 2, 3, 0, 30);
    ev(h, 0, SS__EV_STEP_END, 0, 3, 90, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    const wire_step *s = &h->log.steps[0];
    REQUIRE(s->n_syncs == 1);
    CHECK_EQ_INT(s->syncs[0].name_id, 7);
    CHECK_EQ_INT(s->syncs[0].arrival_ns, 30);
    REQUIRE(s->n_metrics == 1);
    CHECK(s->metrics[0].value == 0.25);
    CHECK_EQ_INT(s->flags, WIRE_STEP_HAS_RSS | WIRE_STEP_HAS_DEVICE |
                               WIRE_STEP_HAS_SELF);
    CHECK_EQ_INT(s->rss_bytes, 8192);
    CHECK_EQ_INT(s->device_bytes, 30);
    free(h);
}

static void events_without_step_are_ignored(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_SYNC, 7, SS__NO_STEP, 30, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, SS__NO_STEP, 30, 0);
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 40, 0);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->log.n_steps, 0);
    CHECK_EQ_INT(h->fold.dropped_events, 0);
    CHECK_EQ_INT(h->fold.dropped_records, 0);
    CHECK(ss__fold_last_step(&h->fold) == SS__NO_STEP);
    free(h);
}

static void late_events_are_dropped_events(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 1, SS__EV_PHASE_BEGIN, 2, 1, 5, 0); /* spans the step's end */
    ev(h, 0, SS__EV_STEP_END, 0, 1, 10, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].n_phases, 0);
    ev(h, 1, SS__EV_PHASE_END, 2, SS__NO_STEP, 15, 0);
    ev(h, 1, SS__EV_METRIC, 9, 1, 0, dbits(1.0));
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->log.n_steps, 1);
    CHECK_EQ_INT(h->fold.dropped_events, 2);
    CHECK_EQ_INT(ss__fold_last_step(&h->fold), 1);
    free(h);
}

static void steps_complete_in_order_and_stale_ones_drop(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    /* Step 1 begins on thread 1 but its end is lost; step 2 completes. */
    ev(h, 1, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 2, 10, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 2, 20, 0);
    /* Step 4 ends without a begin (lost): dropped as well. */
    ev(h, 0, SS__EV_STEP_END, 0, 4, 40, 0);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 5, 50, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].step, 2);
    CHECK_EQ_INT(h->fold.dropped_records, 2); /* 1 and 4 */
    CHECK_EQ_INT(ss__fold_last_step(&h->fold), 4);
    ev(h, 0, SS__EV_STEP_END, 0, 5, 60, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 2);
    CHECK_EQ_INT(h->log.steps[1].step, 5);
    free(h);
}

static void a_step_whose_end_was_lost_drops_a_round_later(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    /* ... step 1's end was lost on a full ring ... */
    ev(h, 0, SS__EV_STEP_BEGIN | SS__EV_AFTER_LOSS, 0, 2, 10, 0);
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->fold.dropped_records, 0); /* an end may still come */
    ss__fold_round(&h->fold);
    CHECK_EQ_INT(h->fold.dropped_records, 1);
    CHECK_EQ_INT(ss__fold_last_step(&h->fold), 1);
    ev(h, 0, SS__EV_STEP_END, 0, 2, 20, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].step, 2);
    free(h);
}

static void an_end_from_another_thread_in_the_next_round_counts(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 2, 10, 0);
    ss__fold_round(&h->fold);
    ev(h, 1, SS__EV_STEP_END, 0, 1, 9, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].step, 1);
    CHECK_EQ_INT(h->fold.dropped_records, 0);
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

static void a_hole_in_the_stream_resets_pairing(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 2, 1, 10, 0);
    /* ... its end was dropped; after the hole a fresh pair follows. */
    ev(h, 0, SS__EV_PHASE_BEGIN | SS__EV_AFTER_LOSS, 2, 1, 50, 0);
    ev(h, 0, SS__EV_PHASE_END, 2, SS__NO_STEP, 60, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 1, 70, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    REQUIRE(phase(&h->log.steps[0], 2));
    CHECK_EQ_INT(phase(&h->log.steps[0], 2)->count, 1);
    CHECK_EQ_INT(phase(&h->log.steps[0], 2)->total_ns, 10);
    free(h);
}

static const wire_metric *metric(const wire_step *s, unsigned id)
{
    for (unsigned i = 0; i < s->n_metrics; i++)
        if (s->metrics[i].name_id == id)
            return &s->metrics[i];
    return NULL;
}

/* A full ring dropped later values of a metric: the value kept before the
 * hole is not the step's last one, so the metric is missing there, never
 * that earlier value.  Only the thread with the hole, only steps it may
 * still have been recording into, and only holes that lost a metric. */
static void a_metric_whose_later_values_were_lost_is_missing(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    const unsigned lost = SS__EV_AFTER_LOSS | SS__EV_LOST_METRIC;
    /* step 1: thread 0 records 8 (kept) and 9 (kept, later lost ones of 9
     * on thread 1 do not matter to it) */
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 0, SS__EV_METRIC, 8, 1, 0, dbits(1.0));
    ev(h, 1, SS__EV_METRIC, 9, 1, 0, dbits(2.0));
    ev(h, 0, SS__EV_METRIC, 9, 1, 0, dbits(3.0));
    ev(h, 0, SS__EV_STEP_END, 0, 1, 10, 0);
    /* step 2: thread 0 keeps 8 = 4.0, then loses 8's later values */
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 2, 20, 0);
    ev(h, 0, SS__EV_METRIC, 8, 2, 0, dbits(4.0));
    ev(h, 0, SS__EV_METRIC, 9, 2, 0, dbits(5.0));
    /* ... a hole that lost metric values, then 9 is recorded again ... */
    ev(h, 0, SS__EV_METRIC | lost, 9, 2, 0, dbits(6.0));
    ev(h, 0, SS__EV_STEP_END, 0, 2, 30, 0);
    /* a hole after step 2 ended: step 2 is behind the thread */
    ev(h, 0, SS__EV_STEP_BEGIN | lost, 0, 3, 40, 0);
    ev(h, 0, SS__EV_METRIC, 8, 3, 0, dbits(7.0));
    /* a hole that lost only other events leaves 8 as it is */
    ev(h, 0, SS__EV_SYNC | SS__EV_AFTER_LOSS, 5, 3, 45, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 3, 50, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 3);
    const wire_step *s1 = &h->log.steps[0], *s2 = &h->log.steps[1],
                    *s3 = &h->log.steps[2];
    REQUIRE(metric(s1, 8) && metric(s1, 9));
    CHECK(metric(s1, 8)->value == 1.0);
    CHECK(metric(s1, 9)->value == 3.0);
    CHECK(metric(s2, 8) == NULL); /* missing, not the stale 4.0 */
    REQUIRE(metric(s2, 9));
    CHECK(metric(s2, 9)->value == 6.0); /* recorded after the hole */
    CHECK_EQ_INT(s2->n_metrics, 1);
    REQUIRE(metric(s3, 8));
    CHECK(metric(s3, 8)->value == 7.0);
    free(h);
}

/* A hole on a thread that never steps (a data loader recording metrics)
 * puts in doubt only the steps it may still record into. */
static void a_metric_lost_on_another_thread_spares_steps_behind_it(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    const unsigned lost = SS__EV_AFTER_LOSS | SS__EV_LOST_METRIC;
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 1, SS__EV_METRIC, 8, 1, 0, dbits(1.0));
    ev(h, 0, SS__EV_STEP_END, 0, 1, 10, 0);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 2, 20, 0);
    ev(h, 1, SS__EV_METRIC, 8, 2, 0, dbits(2.0));
    ev(h, 0, SS__EV_METRIC, 9, 2, 0, dbits(3.0));
    ev(h, 1, SS__EV_SYNC | lost, 5, 2, 25, 0);
    ev(h, 0, SS__EV_STEP_END, 0, 2, 30, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 2);
    REQUIRE(metric(&h->log.steps[0], 8));
    CHECK(metric(&h->log.steps[0], 8)->value == 1.0);
    CHECK(metric(&h->log.steps[1], 8) == NULL);
    REQUIRE(metric(&h->log.steps[1], 9));
    CHECK(metric(&h->log.steps[1], 9)->value == 3.0);
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

/* Id 0 is what ss_name returns for a name it refuses (a full table, a bad
 * name): what is recorded under it is lost, and counted. */
static void bad_name_ids_are_dropped_and_counted(void)
{
    harness *h = new_harness();
    REQUIRE(h);
    ev(h, 0, SS__EV_STEP_BEGIN, 0, 1, 0, 0);
    ev(h, 0, SS__EV_PHASE_BEGIN, 0, 1, 1, 0);
    ev(h, 0, SS__EV_PHASE_END, 0, 1, 2, 0);
    ev(h, 0, SS__EV_SYNC, 300, 1, 3, 0);
    ev(h, 0, SS__EV_METRIC, 0, 1, 0, dbits(NAN));
    ev(h, 0, SS__EV_STEP_END, 0, 1, 9, 0);
    ss__fold_round(&h->fold);
    REQUIRE(h->log.n_steps == 1);
    CHECK_EQ_INT(h->log.steps[0].n_phases + h->log.steps[0].n_syncs +
                     h->log.steps[0].n_metrics, 0);
    CHECK_EQ_INT(h->fold.dropped_events, 3); /* the end does not count */
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

TEST_LIST(TEST(phases_pair_and_same_name_nesting_counts_once),
          TEST(vectors_go_with_their_step_and_the_last_one_wins),
          TEST(vectors_over_the_step_budget_late_or_unnamed_are_counted),
          TEST(phases_pair_per_thread),
          TEST(self_time_leaves_out_nested_runs_once),
          TEST(phases_nested_too_deep_count_as_their_parents_time),
          TEST(spans_add_to_the_step_current_when_recorded),
          TEST(sync_first_metric_last_memory_max),
          TEST(events_without_step_are_ignored),
          TEST(late_events_are_dropped_events),
          TEST(steps_complete_in_order_and_stale_ones_drop),
          TEST(a_step_whose_end_was_lost_drops_a_round_later),
          TEST(an_end_from_another_thread_in_the_next_round_counts),
          TEST(many_steps_in_one_round_are_all_handed_on),
          TEST(items_beyond_the_wire_limit_are_dropped),
          TEST(a_hole_in_the_stream_resets_pairing),
          TEST(a_metric_whose_later_values_were_lost_is_missing),
          TEST(a_metric_lost_on_another_thread_spares_steps_behind_it),
          TEST(checkpoints_pass_straight_through),
          TEST(bad_name_ids_are_dropped_and_counted),
          TEST(status_follows_the_stepping_thread))
