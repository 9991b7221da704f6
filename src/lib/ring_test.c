/*
 * ring_test.c - the per-thread event ring: order, wrap-around, drop
 * counting and the loss mark, and one producer racing one consumer.
 */
#include <pthread.h>
#include <stdlib.h>

#include "ring.h"
#include "testing.h"

static ss__ring *new_ring(void)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, sizeof(ss__ring)) != 0)
        return NULL;
    return memset(p, 0, sizeof(ss__ring));
}

/* Copies out and consumes up to MAX events. */
static size_t drain(ss__ring *r, ss__event *out, size_t max)
{
    const ss__event *a, *b;
    size_t na, nb, n = 0;
    ss__ring_peek(r, &a, &na, &b, &nb);
    for (size_t i = 0; i < na && n < max; i++)
        out[n++] = a[i];
    for (size_t i = 0; i < nb && n < max; i++)
        out[n++] = b[i];
    ss__ring_consume(r, n);
    return n;
}

static void push_then_pop_keeps_fields_and_order(void)
{
    ss__ring *r = new_ring();
    REQUIRE(r);
    ss__ring_push(r, SS__EV_PHASE_BEGIN, 7, 42, 1000, 0);
    ss__ring_push(r, SS__EV_METRIC, 9, 42, 0, 0x4000000000000000ull);
    ss__event ev[4];
    REQUIRE(drain(r, ev, 4) == 2);
    CHECK_EQ_INT(ev[0].type, SS__EV_PHASE_BEGIN);
    CHECK_EQ_INT(ev[0].name, 7);
    CHECK_EQ_INT(ev[0].step, 42);
    CHECK_EQ_INT(ev[0].t, 1000);
    CHECK_EQ_INT(ev[1].type, SS__EV_METRIC);
    CHECK(ev[1].value == 0x4000000000000000ull);
    CHECK_EQ_INT(drain(r, ev, 4), 0);
    CHECK_EQ_INT(ss__ring_dropped(r), 0);
    free(r);
}

static void full_ring_drops_counts_and_marks_the_hole(void)
{
    ss__ring *r = new_ring();
    REQUIRE(r);
    const unsigned fit = SS__RING_CAP - SS__RING_STEP_RESERVE;
    for (unsigned i = 0; i < fit + 10; i++)
        ss__ring_push(r, SS__EV_SYNC, 1, i, (ss__mono_ns)i, 0);
    CHECK_EQ_INT(ss__ring_dropped(r), 10);
    /* Step boundaries still fit, in the reserve. */
    ss__ring_push(r, SS__EV_STEP_END, 0, 1, 0, 0);
    ss__ring_push(r, SS__EV_STEP_BEGIN, 0, 2, 0, 0);
    CHECK_EQ_INT(ss__ring_dropped(r), 10);
    static ss__event ev[SS__RING_CAP];
    REQUIRE(drain(r, ev, SS__RING_CAP) == fit + 2);
    CHECK_EQ_INT(ev[fit - 1].step, fit - 1);
    for (unsigned i = 0; i < fit; i++)
        CHECK(!(ev[i].type & SS__EV_AFTER_LOSS));
    CHECK_EQ_INT(ev[fit].type, SS__EV_STEP_END | SS__EV_AFTER_LOSS);
    CHECK_EQ_INT(ev[fit + 1].type, SS__EV_STEP_BEGIN);
    free(r);
}

/* A hole in which a metric value was dropped is marked as such, however
 * many other events it also swallowed. */
static void a_hole_that_lost_a_metric_says_so(void)
{
    ss__ring *r = new_ring();
    REQUIRE(r);
    const unsigned fit = SS__RING_CAP - SS__RING_STEP_RESERVE;
    for (unsigned i = 0; i < fit; i++)
        ss__ring_push(r, SS__EV_SYNC, 1, 1, (ss__mono_ns)i, 0);
    ss__ring_push(r, SS__EV_SYNC, 1, 1, 0, 0);
    ss__ring_push(r, SS__EV_METRIC, 2, 1, 0, 0);
    ss__ring_push(r, SS__EV_SYNC, 1, 1, 0, 0);
    ss__ring_push(r, SS__EV_STEP_END, 0, 1, 0, 0);
    CHECK_EQ_INT(ss__ring_dropped(r), 3);
    static ss__event ev[SS__RING_CAP];
    REQUIRE(drain(r, ev, SS__RING_CAP) == fit + 1);
    CHECK_EQ_INT(ev[fit].type,
                 SS__EV_STEP_END | SS__EV_AFTER_LOSS | SS__EV_LOST_METRIC);
    /* the marks go with the first event after the hole only */
    ss__ring_push(r, SS__EV_STEP_BEGIN, 0, 2, 0, 0);
    REQUIRE(drain(r, ev, SS__RING_CAP) == 1);
    CHECK_EQ_INT(ev[0].type, SS__EV_STEP_BEGIN);
    free(r);
}

static void wrap_around_returns_two_runs(void)
{
    ss__ring *r = new_ring();
    REQUIRE(r);
    static ss__event ev[SS__RING_CAP];
    for (unsigned i = 0; i < SS__RING_CAP - 3; i++)
        ss__ring_push(r, SS__EV_STEP_BEGIN, 1, i, 0, 0);
    REQUIRE(drain(r, ev, SS__RING_CAP) == SS__RING_CAP - 3);
    for (unsigned i = 0; i < 8; i++)
        ss__ring_push(r, SS__EV_STEP_BEGIN, 1, 100 + i, 0, 0);
    const ss__event *a, *b;
    size_t na, nb;
    ss__ring_peek(r, &a, &na, &b, &nb);
    CHECK_EQ_INT(na, 3);
    CHECK_EQ_INT(nb, 5);
    REQUIRE(drain(r, ev, 16) == 8);
    for (unsigned i = 0; i < 8; i++)
        CHECK_EQ_INT(ev[i].step, 100 + i);
    free(r);
}

#define RACE_EVENTS 2000000u

static void *race_producer(void *arg)
{
    ss__ring *r = arg;
    for (uint64_t i = 0; i < RACE_EVENTS; i++)
        ss__ring_push(r, SS__EV_SYNC, 1, i, 0, i);
    return NULL;
}

/* Whatever the producer drops, the consumer sees a strictly increasing
 * sequence with no torn event, and seen + dropped == made. */
static void producer_and_consumer_race_without_tearing(void)
{
    ss__ring *r = new_ring();
    REQUIRE(r);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, race_producer, r) == 0);
    uint64_t seen = 0, last = 0;
    int ok = 1, done = 0;
    static ss__event ev[SS__RING_CAP];
    while (!done || ss__ring_dropped(r) + seen < RACE_EVENTS) {
        size_t n = drain(r, ev, SS__RING_CAP);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].step != ev[i].value || (seen && ev[i].step <= last))
                ok = 0;
            last = ev[i].step;
            seen++;
        }
        if (!done && __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) +
                             ss__ring_dropped(r) == RACE_EVENTS)
            done = 1;
    }
    pthread_join(th, NULL);
    CHECK(ok);
    CHECK_EQ_INT(seen + ss__ring_dropped(r), RACE_EVENTS);
    free(r);
}

TEST_LIST(TEST(push_then_pop_keeps_fields_and_order),
          TEST(full_ring_drops_counts_and_marks_the_hole),
          TEST(a_hole_that_lost_a_metric_says_so),
          TEST(wrap_around_returns_two_runs),
          TEST(producer_and_consumer_race_without_tearing))
