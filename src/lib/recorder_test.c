/*
 * recorder_test.c - the public recorder API end to end, against a fake
 * controller (fake_controller.h) that decodes what the recorder sends with
 * the real wire decoder.
 *
 * The environment is read once per process, so each scenario runs its
 * "rank" in a forked child; the test process itself never initialises the
 * recorder.  A child reports its own CHECK failures through its exit
 * status; the parent then checks what the controller received.
 */
#include <dirent.h>
#include <math.h>

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

static void sleep_ms(int ms) { fc_sleep_ms(ms); }

/* How long a rank waits for the sender to have done something (drained a
 * ring, counted a drop).  A fixed sleep was enough only on a fast machine:
 * under the sanitizers on a loaded one the sender's ~10 ms rounds come
 * late. */
#define SENDER_WAIT_MS 20000

/* Waits (SENDER_WAIT_MS at most) for the sender to drain the calling
 * thread's ring. */
static int wait_ring_drained(void)
{
    ss__ring *r = &ss__tls_thread->ring;
    for (int waited = 0; waited < SENDER_WAIT_MS; waited++) {
        if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ==
            __atomic_load_n(&r->head, __ATOMIC_RELAXED))
            return 1;
        sleep_ms(1);
    }
    return 0;
}

/* Waits (SENDER_WAIT_MS at most) until the sender counted N dropped
 * records; returns the count then. */
static uint64_t wait_dropped_records(uint64_t n)
{
    ss_counters c;
    ss_get_counters(&c);
    for (int waited = 0; waited < SENDER_WAIT_MS && c.dropped_records < n;
         waited += 5) {
        sleep_ms(5);
        ss_get_counters(&c);
    }
    return c.dropped_records;
}

static const char *name_of(const fake_ctl *fc, int conn, uint32_t id)
{
    for (int k = 0; k < fc->n_frames; k++)
        if (fc->frame_conn[k] == conn && fc->frames[k].type == WIRE_NAME &&
            fc->frames[k].u.name.name_id == id)
            return fc->frames[k].u.name.name;
    return "?";
}

static const wire_phase *phase_named(const fake_ctl *fc, const wire_step *s,
                                     const char *name)
{
    for (unsigned i = 0; i < s->n_phases; i++)
        if (strcmp(name_of(fc, 0, s->phases[i].name_id), name) == 0)
            return &s->phases[i];
    return NULL;
}

static char stderr_file[128];

static const char *stderr_path(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(stderr_file, sizeof stderr_file, "%s/ssrec-stderr-%d.txt",
             tmp && *tmp && strlen(tmp) < 80 ? tmp : "/tmp", (int)getpid());
    return stderr_file;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- disabled ---- */

static int body_disabled(void *arg)
{
    (void)arg;
    unsetenv("STEPSCOPE_ADDR");
    CHECK_EQ_INT(ss_init(), 0);
    CHECK_EQ_INT(ss_enabled(), 0);
    ss_name_id a = ss_name("a"), b = SS_NAME("b");
    CHECK(a != 0 && b != 0 && a != b);
    CHECK_EQ_INT(ss_name("a"), a);
    CHECK_EQ_INT(ss_name(""), 0);
    ss_step_begin(1);
    ss_phase_begin(a);
    ss_sync(b);
    ss_metric(b, 1.0);
    ss_memory_sample();
    ss_memory_record(SS_MEM_DEVICE_PEAK, 1);
    ss_checkpoint_saved(1);
    ss_phase_end(a);
    double v[2] = {1, 2};
    ss_values(a, v, 2);
    ss_step_end();
    const char *lab[1] = {"x"};
    CHECK_EQ_INT(ss_values_labels(a, lab, 1), SS_ESTATE);
    ss_counters c = {7, 7, 7, 7};
    ss_get_counters(&c);
    CHECK_EQ_INT(c.dropped_events, 0);
    CHECK_EQ_INT(c.dropped_records, 0);
    CHECK_EQ_INT(c.dropped_vectors, 0);
    CHECK_EQ_INT(c.truncated_values, 0);
    ss_shutdown();
    CHECK_EQ_INT(ss_init(), 0);
    CHECK_EQ_INT(ss_enabled(), 0);
    return testing_failures_ != 0;
}

static void disabled_without_env(void)
{
    CHECK_EQ_INT(rank_wait(rank_spawn(body_disabled, NULL, NULL, NULL)), 0);
}

/* The first call initialises implicitly, also when it is a hot-path call. */
static int body_implicit_init(void *arg)
{
    (void)arg;
    ss_step_begin(1);
    CHECK_EQ_INT(ss_enabled(), 1);
    ss_step_end();
    return testing_failures_ != 0;
}

static void first_call_initialises(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_implicit_init, NULL, &fc, NULL)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.count[WIRE_HELLO], 1);
    CHECK_EQ_INT(fc.count[WIRE_BYE], 1);
    fc_free(&fc);
}

static int body_malformed(void *arg)
{
    (void)arg;
    setenv("STEPSCOPE_ADDR", "unix:/tmp/whatever.sock", 1);
    setenv("STEPSCOPE_TOKEN", "not-hex", 1);
    setenv("STEPSCOPE_RUN_ID", "r", 1);
    CHECK_EQ_INT(ss_init(), SS_EENV);
    CHECK_EQ_INT(ss_init(), SS_EENV); /* no second message */
    CHECK_EQ_INT(ss_enabled(), 0);
    ss_step_begin(1);
    ss_step_end();
    return testing_failures_ != 0;
}

static void malformed_env_disables_with_one_line(void)
{
    const char *path = stderr_path();
    CHECK_EQ_INT(rank_wait(rank_spawn(body_malformed, NULL, NULL, path)), 0);
    char text[4096];
    read_text(path, text, sizeof text);
    unlink(path);
    if (testing_failures_)
        fprintf(stderr, "  rank's stderr:\n%s", text);
    CHECK(strncmp(text, "stepscope: ", 11) == 0);
    CHECK(strstr(text, "STEPSCOPE_TOKEN") != NULL);
    CHECK_EQ_INT(count_lines_with(text, "\n"), 1);
    CHECK_STR(ss_strerror(SS_EENV), "the STEPSCOPE_* environment is malformed");
    CHECK_STR(ss_strerror(12345), "unknown error");
}

/* ---- handshake ---- */

static int body_hello(void *arg)
{
    (void)arg;
    setenv("LOCAL_RANK", "1", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
    CHECK_EQ_INT(ss_init(), 0);
    CHECK_EQ_INT(ss_enabled(), 1);
    ss_shutdown();
    CHECK_EQ_INT(ss_enabled(), 0);
    return testing_failures_ != 0;
}

static void hello_carries_rank_identity(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 3, 8);
    pid_t pid = rank_spawn(body_hello, NULL, &fc, NULL);
    CHECK_EQ_INT(rank_wait(pid), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    REQUIRE(fc.n_frames >= 1);
    REQUIRE(fc.frames[0].type == WIRE_HELLO);
    const wire_hello *h = &fc.frames[0].u.hello;
    CHECK_EQ_INT(h->version, WIRE_VERSION);
    CHECK_EQ_INT(h->rank, 3);
    CHECK_EQ_INT(h->world_size, 8);
    CHECK_EQ_INT(h->local_rank, 1);
    CHECK_EQ_INT(h->attempt, 2);
    CHECK_EQ_INT(h->pid, pid);
    CHECK_STR(h->run_id, FC_RUN_ID);
    char host[256] = "";
    gethostname(host, sizeof host);
    CHECK_STR(h->host, host);
    const wire_frame *bye = fc_find(&fc, WIRE_BYE, 0);
    REQUIRE(bye);
    CHECK(bye->u.bye.last_step == UINT64_MAX);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 0);
    fc_free(&fc);
}

/* ---- step records ---- */

static ss_name_id id_io;

static void *worker(void *arg)
{
    (void)arg;
    ss_phase_begin(id_io);
    sleep_ms(1);
    ss_phase_end(id_io);
    return NULL;
}

static int body_steps(void *arg)
{
    (void)arg;
    ss_name_id fwd = SS_NAME("forward"), bwd = SS_NAME("backward");
    ss_name_id ar = SS_NAME("allreduce"), loss = SS_NAME("loss");
    ss_name_id grads = SS_NAME("grads");
    id_io = SS_NAME("io");
    CHECK_EQ_INT(ss_init(), 0);
    ss_resumed_from(UINT64_MAX); /* out of range: ignored */
    ss_resumed_from(0);          /* steps continue with 1 */
    for (uint64_t step = 1; step <= 3; step++) {
        ss_step_begin(step);
        int64_t early = ss_now_ns();
        ss_phase_begin(fwd);
        ss_phase_begin(fwd); /* the same name nested: counts once */
        sleep_ms(2);
        ss_phase_end(fwd);
        ss_phase_end(fwd);
        for (int i = 0; i < 2; i++) {
            ss_phase_begin(bwd);
            sleep_ms(1);
            ss_phase_end(bwd);
        }
        pthread_t th;
        CHECK(pthread_create(&th, NULL, worker, NULL) == 0);
        pthread_join(th, NULL);
        ss_sync(ar);
        ss_sync(ar); /* the first arrival counts */
        ss_sync_at(grads, -1); /* ignored */
        ss_sync_at(grads, early); /* an arrival taken before */
        ss_metric(loss, 10.0);
        ss_metric(loss, 1.0 / (double)step); /* the last value counts */
        ss_memory_sample();
        if (step == 2) {
            ss_memory_record(SS_MEM_DEVICE_ALLOCATED, 1000);
            ss_memory_record(SS_MEM_DEVICE_PEAK, 5000);
            ss_memory_record(SS_MEM_DEVICE_ALLOCATED, 2000);
            ss_checkpoint_saved(2);
        }
        ss_step_end();
    }
    sleep_ms(30);
    ss_counters c;
    ss_get_counters(&c);
    CHECK_EQ_INT(c.dropped_events, 0);
    CHECK_EQ_INT(c.dropped_records, 0);
    ss_shutdown();
    return testing_failures_ != 0;
}

static void steps_carry_phases_syncs_metrics_memory(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 2);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_steps, NULL, &fc, NULL)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    /* The decoder refuses undeclared or twice-declared names and
     * non-increasing steps, so no error means those rules held. */
    CHECK_EQ_INT(fc.n_errors, 0);
    if (fc.n_errors)
        fprintf(stderr, "  controller: %s\n", fc.error);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 3);
    CHECK_EQ_INT(fc.count[WIRE_NAME], 6);
    for (int i = 0; i < 3; i++) {
        const wire_frame *f = fc_find(&fc, WIRE_STEP, i);
        REQUIRE(f);
        const wire_step *s = &f->u.step;
        CHECK_EQ_INT(s->step, i + 1);
        CHECK(s->end_ns - s->begin_ns >= 5 * 1000000);
        const wire_phase *fwd = phase_named(&fc, s, "forward");
        const wire_phase *bwd = phase_named(&fc, s, "backward");
        const wire_phase *io = phase_named(&fc, s, "io");
        REQUIRE(fwd && bwd && io);
        CHECK_EQ_INT(fwd->count, 1);
        CHECK(fwd->total_ns >= 2 * 1000000);
        CHECK_EQ_INT(bwd->count, 2);
        CHECK(bwd->total_ns >= 2 * 1000000);
        CHECK_EQ_INT(io->count, 1);
        CHECK(io->total_ns >= 1000000);
        CHECK(fwd->total_ns + bwd->total_ns + io->total_ns <=
              (uint64_t)(s->end_ns - s->begin_ns));
        REQUIRE(s->n_syncs == 2);
        for (int k = 0; k < 2; k++) {
            const char *name = name_of(&fc, 0, s->syncs[k].name_id);
            REQUIRE(name);
            if (strcmp(name, "grads") == 0) {
                /* ss_sync_at's time is the one given: before the phases */
                CHECK(s->syncs[k].arrival_ns >= s->begin_ns &&
                      s->syncs[k].arrival_ns < fwd->first_begin_ns);
            } else {
                CHECK_STR(name, "allreduce");
                CHECK(s->syncs[k].arrival_ns >= s->begin_ns + 5000000 &&
                      s->syncs[k].arrival_ns <= s->end_ns);
            }
        }
        REQUIRE(s->n_metrics == 1);
        CHECK_STR(name_of(&fc, 0, s->metrics[0].name_id), "loss");
        CHECK(s->metrics[0].value == 1.0 / (double)(i + 1));
        CHECK(s->flags & WIRE_STEP_HAS_RSS);
        CHECK(s->rss_bytes > 1024 * 1024);
        if (i == 1) {
            CHECK(s->flags & WIRE_STEP_HAS_DEVICE);
            CHECK_EQ_INT(s->device_bytes, 5000);
        } else {
            CHECK(!(s->flags & WIRE_STEP_HAS_DEVICE));
        }
    }
    const wire_frame *ck = fc_find(&fc, WIRE_CHECKPOINT, 0);
    REQUIRE(ck);
    CHECK_EQ_INT(ck->u.checkpoint.step, 2);
    CHECK_EQ_INT(fc.count[WIRE_RESUMED], 1);
    const wire_frame *rs = fc_find(&fc, WIRE_RESUMED, 0);
    REQUIRE(rs);
    CHECK_EQ_INT(rs->u.resumed.step, 0);
    CHECK(rs->u.resumed.t_ns > 0);
    const wire_frame *cn = fc_find(&fc, WIRE_COUNTERS, 0);
    REQUIRE(cn);
    CHECK_EQ_INT(cn->u.counters.dropped_events, 0);
    CHECK_EQ_INT(cn->u.counters.dropped_records, 0);
    const wire_frame *bye = fc_find(&fc, WIRE_BYE, 0);
    REQUIRE(bye);
    CHECK_EQ_INT(bye->u.bye.last_step, 3);
    CHECK(fc.frames[fc.n_frames - 1].type == WIRE_BYE);
    fc_free(&fc);
}

/* A metric recorded many times in one step, more often than its thread's
 * ring can hold: the record carries the step's last value or no value,
 * never an earlier one (the values count up, so an earlier one is
 * smaller). */
#define FLOOD_VALUES (4 * 8192)

static int body_metric_flood(void *arg)
{
    (void)arg;
    ss_name_id loss = SS_NAME("loss");
    CHECK_EQ_INT(ss_init(), 0);
    ss_step_begin(1);
    for (int i = 1; i <= FLOOD_VALUES; i++)
        ss_metric(loss, (double)i);
    ss_step_end();
    /* Step 2 starts on an empty ring, else its one value could be lost
     * too. */
    CHECK(wait_ring_drained());
    ss_step_begin(2);
    ss_metric(loss, 0.5);
    ss_step_end();
    sleep_ms(30);
    ss_counters c;
    ss_get_counters(&c);
    CHECK(c.dropped_events > 0); /* the ring did overflow */
    ss_shutdown();
    return testing_failures_ != 0;
}

static void a_metric_flood_never_leaves_a_stale_value(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_metric_flood, NULL, &fc, NULL)),
                 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    REQUIRE(fc.count[WIRE_STEP] == 2);
    const wire_step *s1 = &fc_find(&fc, WIRE_STEP, 0)->u.step;
    const wire_step *s2 = &fc_find(&fc, WIRE_STEP, 1)->u.step;
    CHECK_EQ_INT(s1->step, 1);
    if (s1->n_metrics)
        CHECK(s1->metrics[0].value == (double)FLOOD_VALUES);
    REQUIRE(s2->n_metrics == 1);
    CHECK(s2->metrics[0].value == 0.5);
    fc_free(&fc);
}

/* Steps left open or begun twice: ss_step_begin ends the open step. */
static int body_forgotten_end(void *arg)
{
    (void)arg;
    CHECK_EQ_INT(ss_init(), 0);
    ss_step_begin(10);
    ss_step_begin(11); /* ends 10 */
    ss_step_end();
    ss_step_end();     /* nothing open: ignored */
    ss_step_begin(12); /* left open at exit: not sent */
    return testing_failures_ != 0; /* atexit runs ss_shutdown */
}

static void step_begin_ends_the_open_step_and_atexit_says_bye(void)
{
    fake_ctl fc = {0};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_forgotten_end, NULL, &fc, NULL)),
                 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 2);
    const wire_frame *s0 = fc_find(&fc, WIRE_STEP, 0);
    const wire_frame *s1 = fc_find(&fc, WIRE_STEP, 1);
    REQUIRE(s0 && s1);
    CHECK_EQ_INT(s0->u.step.step, 10);
    CHECK_EQ_INT(s1->u.step.step, 11);
    const wire_frame *bye = fc_find(&fc, WIRE_BYE, 0);
    REQUIRE(bye);
    CHECK_EQ_INT(bye->u.bye.last_step, 11);
    fc_free(&fc);
}

/* ---- no controller ---- */

static int body_no_controller(void *arg)
{
    (void)arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    CHECK_EQ_INT(ss_enabled(), 1);
    int64_t busy = 0;
    for (uint64_t step = 1; step <= 10; step++) {
        int64_t t0 = now_ns();
        ss_step_begin(step);
        for (int i = 0; i < 10000; i++) {
            ss_phase_begin(ph);
            ss_phase_end(ph);
        }
        ss_step_end();
        busy += now_ns() - t0;
        sleep_ms(15); /* let the sender drain and drop the record */
    }
    /* 100k phase pairs: the caller is never held up by the missing
     * controller (generous bound for sanitizer builds). */
    CHECK(busy < 500 * 1000000LL);
    /* The sender counts a record as dropped when it drains it. */
    CHECK(wait_dropped_records(5) >= 5);
    ss_counters c;
    ss_get_counters(&c);
    CHECK(c.dropped_events > 0); /* 20k events per step, 8k per ring */
    int64_t t0 = now_ns();
    ss_shutdown();
    CHECK(now_ns() - t0 < 200 * 1000000LL); /* nothing to wait for */
    return testing_failures_ != 0;
}

static void no_controller_drops_and_never_blocks(void)
{
    const char *path = stderr_path();
    rank_env(NULL, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_no_controller, NULL, NULL, path)),
                 0);
    unsetenv("STEPSCOPE_ADDR");
    char text[4096];
    read_text(path, text, sizeof text);
    unlink(path);
    if (testing_failures_)
        fprintf(stderr, "  rank's stderr:\n%s", text);
    CHECK_EQ_INT(count_lines_with(text, "stepscope: cannot reach"), 1);
}

/* ---- REJECT ---- */

static int body_rejected(void *arg)
{
    (void)arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    for (int waited = 0; waited < SENDER_WAIT_MS && ss_enabled();
         waited += 10)
        sleep_ms(10);
    CHECK_EQ_INT(ss_enabled(), 0);
    for (uint64_t step = 1; step <= 3; step++) {
        ss_step_begin(step);
        ss_phase_begin(ph);
        ss_phase_end(ph);
        ss_step_end();
    }
    /* Dropped when the sender drains them: not before, never more. */
    CHECK_EQ_INT(wait_dropped_records(3), 3);
    ss_shutdown();
    return testing_failures_ != 0;
}

static void reject_is_reported_once_and_records_dropped(void)
{
    fake_ctl fc = {.reject = 1};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    const char *path = stderr_path();
    CHECK_EQ_INT(rank_wait(rank_spawn(body_rejected, NULL, &fc, path)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    char text[4096];
    read_text(path, text, sizeof text);
    unlink(path);
    if (testing_failures_)
        fprintf(stderr, "  rank's stderr:\n%s", text);
    CHECK_EQ_INT(count_lines_with(text, "stepscope: "), 1);
    CHECK(strstr(text, "test says no") != NULL);
    CHECK_EQ_INT(fc.n_conns, 1);
    CHECK_EQ_INT(fc.count[WIRE_HELLO], 1);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 0);
    fc_free(&fc);
}

/* ---- fork ---- */

/* Counts this process's open sockets and statm files. */
static void count_fds(int *sockets, int *statm)
{
    *sockets = *statm = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char link[300], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        *sockets += strncmp(target, "socket:", 7) == 0;
        *statm += strstr(target, "/statm") != NULL;
    }
    closedir(d);
}

static int body_fork(void *arg)
{
    (void)arg;
    ss_name_id ph = SS_NAME("work");
    CHECK_EQ_INT(ss_init(), 0);
    ss_step_begin(1);
    ss_phase_begin(ph);
    ss_memory_sample();
    fflush(NULL);
    pid_t pid = fork(); /* inside an open step and phase */
    if (pid == 0) {
        int bad = 0, sockets, statm;
        count_fds(&sockets, &statm);
        bad |= sockets != 0 || statm != 0;
        bad |= ss_enabled() != 0;
        bad |= ss_init() != 0 || ss_enabled() != 0;
        ss_phase_end(ph);
        ss_step_end();
        for (uint64_t s = 100; s < 110; s++) {
            ss_step_begin(s);
            ss_phase_begin(ph);
            ss_phase_end(ph);
            ss_memory_sample();
            ss_step_end();
        }
        bad |= SS_NAME("child-only") == 0; /* names still work */
        ss_counters c;
        ss_get_counters(&c);
        /* What exit() would run: it must not say BYE for the parent.
         * _exit then, as the sanitizers' leak check at exit cannot stop
         * the threads that the fork left behind. */
        ss_shutdown();
        _exit(bad);
    }
    CHECK(pid > 0);
    CHECK_EQ_INT(rank_wait(pid), 0);
    ss_phase_end(ph);
    ss_step_end();
    ss_step_begin(2);
    ss_step_end();
    ss_shutdown();
    return testing_failures_ != 0;
}

static void fork_child_is_disabled_and_parent_stream_stays_valid(void)
{
    /* The deadline only ends a failed case; two processes and a fork
     * under the sanitizers on a loaded machine can take longer than 5 s. */
    fake_ctl fc = {.deadline_ms = 30000};
    REQUIRE(fc_start(&fc) == 0);
    rank_env(&fc, 0, 1);
    CHECK_EQ_INT(rank_wait(rank_spawn(body_fork, NULL, &fc, NULL)), 0);
    unsetenv("STEPSCOPE_ADDR");
    fc_wait(&fc);
    CHECK_EQ_INT(fc.n_errors, 0);
    CHECK_EQ_INT(fc.n_conns, 1);
    CHECK_EQ_INT(fc.count[WIRE_HELLO], 1);
    CHECK_EQ_INT(fc.count[WIRE_STEP], 2);
    CHECK_EQ_INT(fc.count[WIRE_BYE], 1);
    const wire_frame *s0 = fc_find(&fc, WIRE_STEP, 0);
    REQUIRE(s0);
    CHECK_EQ_INT(s0->u.step.step, 1);
    CHECK_EQ_INT(s0->u.step.n_phases, 1);
    const wire_frame *bye = fc_find(&fc, WIRE_BYE, 0);
    REQUIRE(bye);
    CHECK_EQ_INT(bye->u.bye.last_step, 2);
    fc_free(&fc);
}

TEST_LIST(TEST(disabled_without_env),
          TEST(first_call_initialises),
          TEST(malformed_env_disables_with_one_line),
          TEST(hello_carries_rank_identity),
          TEST(steps_carry_phases_syncs_metrics_memory),
          TEST(a_metric_flood_never_leaves_a_stale_value),
          TEST(step_begin_ends_the_open_step_and_atexit_says_bye),
          TEST(no_controller_drops_and_never_blocks),
          TEST(reject_is_reported_once_and_records_dropped),
          TEST(fork_child_is_disabled_and_parent_stream_stays_valid))
