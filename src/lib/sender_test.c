/*
 * sender_test.c - the sender's connection handling, through the public API
 * and a fake controller: connecting late, reconnecting (names declared
 * again on the new connection), TCP, and a controller that stops reading (the
 * bounded buffer drops records, the caller never waits).
 */
#include "testing.h" /* first: fake_controller.h resets its counter */

#include "fake_controller.h"
#include "stepscope.h"
#include "threads.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void one_step(uint64_t step, ss_name_id ph)
{
    ss_step_begin(step);
    ss_phase_begin(ph);
    ss_phase_end(ph);
    ss_step_end();
}

static const char *scratch_path(char *buf, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/sssend-stderr-%d.txt",
             tmp && *tmp && strlen(tmp) < 80 ? tmp : "/tmp", (int)getpid());
    return buf;
}

/* The last COUNTERS frame of connection CONN, or NULL. */
static const wire_counters *last_counters(const fake_ctl *fc, int conn)
{
    const wire_counters *c = NULL;
    for (int k = 0; k < fc->n_frames; k++)
        if (fc->frame_conn[k] == conn && fc->frames[k].type == WIRE_COUNTERS)
            c = &fc->frames[k].u.counters;
    return c;
}

/* ---- gates between the rank and the test ----
 *
 * The scenarios below need the rank and the controller in a given order
 * (nothing listening yet, then connected; connected, then reconnected).
 * Fixed sleeps got that order only on a machine fast enough: a slow
 * sender (sanitizers, a loaded machine) let steps meant for no controller
 * reach one, or steps meant for the new connection be dropped.  So each
 * side waits for the other to say that its state was reached, through a
 * pipe, with a generous deadline. */

#define GATE_WAIT_MS 30000

typedef struct {
    int to_test[2], to_rank[2];
} gate;

static int gate_open(gate *g)
{
    return pipe(g->to_test) == 0 && pipe(g->to_rank) == 0 ? 0 : -1;
}

static void gate_close(gate *g)
{
    close(g->to_test[0]);
    close(g->to_test[1]);
    close(g->to_rank[0]);
    close(g->to_rank[1]);
}

static void gate_say(int fd)
{
    CHECK(write(fd, "x", 1) == 1);
}

/* 1 once a byte came on FD, 0 after GATE_WAIT_MS without one. */
static int gate_heard(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b;
    return poll(&p, 1, GATE_WAIT_MS) == 1 && read(fd, &b, 1) == 1;
}

/* Waits (GATE_WAIT_MS at most) until FC decoded N frames of TYPE; its
 * thread counts them as they come. */
static int fc_wait_count(fake_ctl *fc, wire_type type, int n)
{
    for (int waited = 0; waited < GATE_WAIT_MS; waited += 5) {
        if (__atomic_load_n(&fc->count[type], __ATOMIC_ACQUIRE) >= n)
            return 1;
        fc_sleep_ms(5);
    }
    return 0;
}

/* Waits (GATE_WAIT_MS at most) until the sender counted N dropped
 * records. */
static int wait_dropped_records(uint64_t n)
{
    ss_counters c;
    for (int waited = 0; waited < GATE_WAIT_MS; waited += 5) {
        ss_get_counters(&c);
        if (c.dropped_records >= n)
            return 1;
        fc_sleep_ms(5);
    }
    return 0;
}

/* ---- late controller ---- */

/* Steps 1-5 while nothing listens (dropped, and the rank says so before
 * the controller is started), then steps 10-12 once the controller has
 * the rank's HELLO. */
static int body_late(void *arg)
{
    gate *g = arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    for (uint64_t s = 1; s <= 5; s++) {
        one_step(s, ph);
        fc_sleep_ms(15);
    }
    CHECK(wait_dropped_records(5));
    gate_say(g->to_test[1]);
    CHECK(gate_heard(g->to_rank[0])); /* the controller has our HELLO */
    for (uint64_t s = 10; s <= 12; s++)
        one_step(s, ph);
    ss_shutdown();
    ss_counters c;
    ss_get_counters(&c);
    CHECK(c.dropped_records >= 5);
    return testing_failures_ != 0;
}

static void connects_when_the_controller_appears_late(void)
{
    /* The socket is made only once the serving thread runs (after 0.2 s),
     * and that thread is started only once the rank dropped steps 1-5. */
    fake_ctl fc = {.listen_delay_ms = 200, .deadline_ms = 2 * GATE_WAIT_MS};
    REQUIRE(fc_start(&fc) == 0);
    gate g;
    REQUIRE(gate_open(&g) == 0);
    rank_env(&fc, 0, 1);
    char path[128];
    scratch_path(path, sizeof path);
    pid_t pid = rank_spawn(body_late, &g, NULL, path);
    CHECK(pid > 0);
    CHECK(gate_heard(g.to_test[0]));
    if (pthread_create(&fc.thread, NULL, fc_main, &fc) == 0)
        fc.running = 1;
    CHECK(fc.running);
    CHECK(fc_wait_count(&fc, WIRE_HELLO, 1));
    gate_say(g.to_rank[1]);
    CHECK_EQ_INT(rank_wait(pid), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    gate_close(&g);
    unlink(path);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.n_conns, 1);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 3);
    const wire_frame *s0 = fc_find(&fc, WIRE_STEP, 0);
    REQUIRE(s0);
    CHECK_EQ_INT(s0->u.step.step, 10);
    const wire_counters *c = last_counters(&fc, 0);
    REQUIRE(c);
    CHECK(c->dropped_records >= 5);
    fc_free(&fc);
}

/* ---- reconnect ---- */

/* Steps 1-3 (the controller closes the first connection after step 2),
 * then steps 4-5 once the controller has the second connection's HELLO:
 * the sender retries every ~0.5 s, which a loaded machine stretches. */
static int body_reconnect(void *arg)
{
    gate *g = arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    for (uint64_t s = 1; s <= 3; s++) {
        one_step(s, ph);
        fc_sleep_ms(30);
    }
    CHECK(gate_heard(g->to_rank[0])); /* lost, then back */
    for (uint64_t s = 4; s <= 5; s++)
        one_step(s, ph);
    ss_shutdown();
    return testing_failures_ != 0;
}

static void reconnects_and_declares_names_again(void)
{
    fake_ctl fc = {.close_after = 2, .conns = 2,
                   .deadline_ms = 2 * GATE_WAIT_MS};
    REQUIRE(fc_start(&fc) == 0);
    gate g;
    REQUIRE(gate_open(&g) == 0);
    rank_env(&fc, 0, 1);
    char path[128];
    scratch_path(path, sizeof path);
    pid_t pid = rank_spawn(body_reconnect, &g, &fc, path);
    CHECK(pid > 0);
    CHECK(fc_wait_count(&fc, WIRE_HELLO, 2));
    gate_say(g.to_rank[1]);
    CHECK_EQ_INT(rank_wait(pid), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    gate_close(&g);
    char text[2048];
    read_text(path, text, sizeof text);
    unlink(path);
    CHECK(strstr(text, "stepscope: lost the connection") != NULL);
    /* The decoder of the second connection refuses undeclared names. */
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.n_conns, 2);
    CHECK_EQ_INT(fc.count[WIRE_HELLO], 2);
    CHECK_EQ_INT(fc.count[WIRE_NAME], 2);
    int steps_on_second = 0;
    uint64_t last = 0;
    for (int k = 0; k < fc.n_frames; k++) {
        if (fc.frame_conn[k] == 1 && fc.frames[k].type == WIRE_STEP) {
            steps_on_second++;
            last = fc.frames[k].u.step.step;
        }
    }
    CHECK(steps_on_second >= 2);
    CHECK_EQ_INT(last, 5);
    const wire_frame *bye = fc_find(&fc, WIRE_BYE, 0);
    REQUIRE(bye);
    CHECK_EQ_INT(bye->u.bye.last_step, 5);
    fc_free(&fc);
}

/* ---- TCP ---- */

static int body_tcp(void *arg)
{
    (void)arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    for (uint64_t s = 1; s <= 3; s++)
        one_step(s, ph);
    ss_shutdown();
    ss_counters c;
    ss_get_counters(&c);
    CHECK_EQ_INT(c.dropped_records, 0);
    return testing_failures_ != 0;
}

static void speaks_tcp_on_loopback(void)
{
    fake_ctl fc = {.tcp = 1};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_tcp, NULL, &fc, NULL)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.count[WIRE_HELLO], 1);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 3);
    CHECK_EQ_INT(fc.count[WIRE_BYE], 1);
    fc_free(&fc);
}

/* ---- a controller that stops reading ---- */

#define STALL_BATCHES 40
#define STALL_BATCH_STEPS 1000 /* 4000 events: half a ring */

/* Waits (5 s at most) for the sender to drain the calling thread's ring,
 * so that every batch starts on an empty ring however slowly the sender
 * runs (sanitizers, a loaded machine): a stalled controller must cost
 * records, never events. */
static void wait_ring_drained(void)
{
    ss__ring *r = &ss__tls_thread->ring;
    for (int i = 0; i < 5000; i++) {
        if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ==
            __atomic_load_n(&r->head, __ATOMIC_RELAXED))
            return;
        fc_sleep_ms(1);
    }
}

/* ARG: the descriptor that brings the stalled controller back, written
 * once every batch went through the sender. */
static int body_stalled(void *arg)
{
    int release = *(const int *)arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    int64_t busy = 0, worst = 0;
    uint64_t step = 1;
    for (int b = 0; b < STALL_BATCHES; b++) {
        int64_t t0 = now_ns();
        for (int i = 0; i < STALL_BATCH_STEPS; i++)
            one_step(step++, ph);
        int64_t d = now_ns() - t0;
        busy += d;
        worst = d > worst ? d : worst;
        wait_ring_drained(); /* untimed: one sender round or more */
    }
    CHECK(write(release, "x", 1) == 1);
    CHECK(busy < 1000 * 1000000LL);
    CHECK(worst < 200 * 1000000LL);
    ss_counters c;
    ss_get_counters(&c);
    CHECK(c.dropped_records > 0);
    CHECK_EQ_INT(c.dropped_events, 0);
    ss_shutdown();
    return testing_failures_ != 0;
}

static void stalled_controller_costs_records_not_time(void)
{
    /* The controller stops reading after the handshake until the rank has
     * put all its batches through the sender, however slowly it runs
     * (sanitizers, a loaded machine): the sender's buffer fills and its
     * records are dropped, never its time.  The controller's deadline only
     * ends a failed case. */
    int release[2];
    REQUIRE(pipe(release) == 0);
    fake_ctl fc = {.stall_fd = release[0], .deadline_ms = 60000};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_stalled, &release[1], &fc, NULL)),
                 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    close(release[0]);
    close(release[1]);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK(fc.count[WIRE_STEP] > 1000);
    CHECK(fc.counters.dropped_records > 0);
    /* Every step either arrived or was counted as dropped. */
    CHECK_EQ_INT((uint64_t)fc.count[WIRE_STEP] + fc.counters.dropped_records,
                 STALL_BATCHES * STALL_BATCH_STEPS);
    CHECK_EQ_INT(fc.count[WIRE_BYE], 1);
    fc_free(&fc);
}

/* ---- live state (STATUS) ---- */

static int body_status(void *arg)
{
    (void)arg;
    ss_name_id outer = SS_NAME("outer"), inner = SS_NAME("slow_inner");
    CHECK_EQ_INT(ss_init(), 0);
    ss_step_begin(1);
    ss_phase_begin(outer);
    ss_phase_begin(inner);
    fc_sleep_ms(300);
    ss_phase_end(inner);
    ss_phase_end(outer);
    ss_collective_begin(SS_NAME("all_reduce")); /* collective #1 */
    fc_sleep_ms(300);
    ss_collective_end();
    ss_sync(SS_NAME("barrier")); /* #2, open until the step's end */
    fc_sleep_ms(300);
    ss_step_end();
    fc_sleep_ms(1300); /* idle: a heartbeat STATUS between steps */
    ss_shutdown();
    return testing_failures_ != 0;
}

static void reports_the_current_phase_and_a_heartbeat(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    int64_t t0 = now_ns();
    CHECK_EQ_INT(rank_wait(rank_spawn(body_status, NULL, &fc, NULL)), 0);
    double secs = (double)(now_ns() - t0) / 1e9;
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0); /* names were declared before use */
    uint32_t inner_id = 0;
    for (int k = 0; k < fc.n_frames; k++)
        if (fc.frames[k].type == WIRE_NAME &&
            strcmp(fc.frames[k].u.name.name, "slow_inner") == 0)
            inner_id = fc.frames[k].u.name.name_id;
    REQUIRE(inner_id != 0);
    uint32_t ar_id = 0, barrier_id = 0;
    for (int k = 0; k < fc.n_frames; k++)
        if (fc.frames[k].type == WIRE_NAME) {
            if (strcmp(fc.frames[k].u.name.name, "all_reduce") == 0)
                ar_id = fc.frames[k].u.name.name_id;
            if (strcmp(fc.frames[k].u.name.name, "barrier") == 0)
                barrier_id = fc.frames[k].u.name.name_id;
        }
    REQUIRE(ar_id != 0 && barrier_id != 0);
    int in_ar = 0, in_barrier = 0, after_barrier = 0;
    for (int k = 0; k < fc.n_frames; k++) {
        const wire_status *st = &fc.frames[k].u.status;
        if (fc.frames[k].type != WIRE_STATUS)
            continue;
        int active = st->coll_flags & WIRE_STATUS_COLL_ACTIVE;
        in_ar += st->coll_name_id == ar_id && st->coll_seq == 1 && active;
        in_barrier += st->coll_name_id == barrier_id && st->coll_seq == 2 &&
                      active;
        after_barrier += st->coll_name_id == barrier_id &&
                         st->coll_seq == 2 && !active &&
                         st->step == WIRE_NO_STEP;
    }
    CHECK(in_ar >= 1);
    CHECK(in_barrier >= 1);
    CHECK(after_barrier >= 1);
    int in_inner = 0, idle = 0;
    for (int k = 0; k < fc.n_frames; k++) {
        const wire_frame *f = &fc.frames[k];
        if (f->type != WIRE_STATUS)
            continue;
        if (f->u.status.step == 1 && f->u.status.name_id == inner_id &&
            f->u.status.since_ns > 0)
            in_inner++;
        if (f->u.status.step == WIRE_NO_STEP && f->u.status.name_id == 0)
            idle++;
    }
    CHECK(in_inner >= 1);
    CHECK(idle >= 2); /* the step's end, then the heartbeat */
    /* Changes at most every 100 ms, else once a second. */
    CHECK(fc.count[WIRE_STATUS] <= (int)(secs * 10) + 2);
    fc_free(&fc);
}

/* ---- profiling commands ---- */

static int body_profile(void *arg)
{
    (void)arg;
    ss_profile_request req;
    CHECK_EQ_INT(ss_profile_poll(&req), 0); /* before init: nothing */
    CHECK_EQ_INT(ss_init(), 0);
    CHECK_EQ_INT(ss_profile_enable(), 0);
    int got = 0;
    for (int i = 0; i < 300 && !got; i++) {
        got = ss_profile_poll(&req);
        if (!got)
            fc_sleep_ms(10);
    }
    CHECK_EQ_INT(got, 1);
    CHECK_EQ_INT(req.request_id, 5);
    CHECK_EQ_INT(req.duration_ms, 1500);
    CHECK_STR(req.dir, "/tmp/fc");
    CHECK_EQ_INT(ss_profile_poll(&req), 0); /* taken once */
    CHECK_EQ_INT(ss_profile_done(5, 1, 42, "relative.json"), SS_EINVAL);
    CHECK_EQ_INT(ss_profile_done(5, 1, 42, "/tmp/fc/rank0.json"), 0);
    ss_shutdown();
    return testing_failures_ != 0;
}

static void takes_a_profile_command_and_answers(void)
{
    fake_ctl fc = {.command_ms = 1500};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    char path[128];
    scratch_path(path, sizeof path);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_profile, NULL, &fc, path)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    unlink(path);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.count[WIRE_FEATURES], 1);
    CHECK_EQ_INT(fc.count[WIRE_PROFILE_DONE], 1);
    for (int k = 0; k < fc.n_frames; k++)
        if (fc.frames[k].type == WIRE_PROFILE_DONE) {
            CHECK_EQ_INT(fc.frames[k].u.profile_done.request_id, 5);
            CHECK(fc.frames[k].u.profile_done.marker_ns == 42);
            CHECK_STR(fc.frames[k].u.profile_done.text, "/tmp/fc/rank0.json");
        }
    fc_free(&fc);
}

/* A process that never enables profiling announces nothing. */
static int body_no_profile(void *arg)
{
    (void)arg;
    CHECK_EQ_INT(ss_init(), 0);
    one_step(1, SS_NAME("work"));
    ss_shutdown();
    return testing_failures_ != 0;
}

static void announces_nothing_unless_enabled(void)
{
    fake_ctl fc = {.command_ms = 1500};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    char path[128];
    scratch_path(path, sizeof path);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_no_profile, NULL, &fc, path)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    unlink(path);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.count[WIRE_FEATURES], 0);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 1);
    fc_free(&fc);
}

TEST_LIST(TEST(takes_a_profile_command_and_answers),
          TEST(announces_nothing_unless_enabled),
          TEST(connects_when_the_controller_appears_late),
          TEST(reconnects_and_declares_names_again),
          TEST(speaks_tcp_on_loopback),
          TEST(stalled_controller_costs_records_not_time),
          TEST(reports_the_current_phase_and_a_heartbeat))
