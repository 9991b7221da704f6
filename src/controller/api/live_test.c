/*
 * live_test.c - unit tests for the live state (live.c).
 *
 * A rank's life as the setters tell it, the notification feed (delivery,
 * time-outs, a reader that falls behind, the end of the run, a reader on
 * another thread woken by a step), and the Prometheus exposition (series,
 * values, escaping, findings counted by kind and severity).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "live.h"
#include "clocks.h"
#include "objects.h"
#include "testing.h"

#define MS 1000000LL

static const char *const names_[] = {"fwd\"x\\y", "allreduce"};

/* A finalized step of 2 ranks: 10 and 12 ms; rank 1 RSS 2048. */
typedef struct {
    ss_rank_step ranks[2];
    ss_phase_stat phase;
    ss_sync_stat sync;
    ss_step_view v;
} step_fx;

static void fx_build(step_fx *fx, uint64_t step)
{
    memset(fx, 0, sizeof *fx);
    fx->ranks[0] = (ss_rank_step){.present = 1, .step_ns = 10 * MS,
                                  .rss_bytes = SS_MISSING,
                                  .device_bytes = SS_MISSING,
                                  .begin_ns = SS_MISSING};
    fx->ranks[1] = (ss_rank_step){.present = 1, .step_ns = 12 * MS,
                                  .rss_bytes = 2048,
                                  .device_bytes = SS_MISSING,
                                  .begin_ns = SS_MISSING};
    fx->phase = (ss_phase_stat){0, {4 * MS, 4 * MS, 6 * MS, 6 * MS, 1, 2}};
    fx->sync = (ss_sync_stat){1, 1500, 750, 1, 2};
    fx->v = (ss_step_view){
        .step = step, .world_size = 2, .n_present = 2,
        .step_time = {10 * MS, 10 * MS, 12 * MS, 12 * MS, 1, 2},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 1, .phases = &fx->phase, .n_syncs = 1, .syncs = &fx->sync,
        .n_names = 2, .ranks = fx->ranks};
}

static ss_finding finding_(uint32_t id, const char *kind, ss_severity sev)
{
    ss_finding f;
    memset(&f, 0, sizeof f);
    f.id = id;
    snprintf(f.kind, sizeof f.kind, "%s", kind);
    f.severity = sev;
    snprintf(f.message, sizeof f.message, "finding %u", id);
    return f;
}

static void rank_life(void)
{
    ss_live *l = ss_live_create(5, 2);
    REQUIRE(l);
    CHECK_EQ_INT(ss_live_run_id(l), 5);
    CHECK_EQ_INT(ss_live_world_size(l), 2);
    CHECK(ss_live_running(l));
    ss_live_rank_info i;
    REQUIRE(ss_live_rank_get(l, 0, &i) == 0);
    CHECK_STR(i.state, "starting");
    CHECK_EQ_INT(i.pid, -1);
    CHECK_EQ_INT(i.last_step, -1);
    CHECK(i.last_heard_s < 0);
    CHECK(i.phase_s < 0);
    CHECK_EQ_INT(i.step_ns, SS_MISSING);
    CHECK_EQ_INT(i.dropped_events, -1);
    CHECK_EQ_INT(ss_live_rank_get(l, 2, &i), -1);

    ss_live_rank_hello(l, 1, "node9", 77);
    ss_live_rank_step(l, 1, 41);
    ss_live_rank_counters(l, 1, 3, 4);
    ss_live_rank_status(l, 1, 42, "backward", ss_mono_now() - 2000 * MS);
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_STR(i.state, "running");
    CHECK_STR(i.host, "node9");
    CHECK_EQ_INT(i.pid, 77);
    CHECK_EQ_INT(i.last_step, 41);
    CHECK_EQ_INT(i.current_step, 42);
    CHECK_STR(i.phase, "backward");
    CHECK(i.phase_s > 1.9 && i.phase_s < 10);
    CHECK(i.last_heard_s >= 0 && i.last_heard_s < 1);
    CHECK_EQ_INT(i.dropped_events, 3);
    CHECK_EQ_INT(i.dropped_records, 4);
    CHECK_EQ_INT(i.term_signal, -1);

    /* a phase change without a start time starts now */
    ss_live_rank_phase(l, 1, "optimizer");
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_STR(i.phase, "optimizer");
    CHECK_EQ_INT(i.current_step, 42);
    CHECK(i.phase_s >= 0 && i.phase_s < 1);
    ss_live_rank_phase(l, 1, NULL);
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_STR(i.phase, "");
    CHECK(i.phase_s < 0);

    ss_live_rank_status(l, 1, 43, "forward", 0);
    ss_live_rank_exit(l, 1, -1, 9);
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_STR(i.state, "failed");
    CHECK_STR(i.phase, "");
    CHECK_EQ_INT(i.current_step, -1);
    CHECK_EQ_INT(i.exit_code, -1);
    CHECK_EQ_INT(i.term_signal, 9);
    ss_live_rank_exit(l, 0, 0, 0);
    REQUIRE(ss_live_rank_get(l, 0, &i) == 0);
    CHECK_STR(i.state, "exited");
    CHECK_EQ_INT(i.exit_code, 0);
    CHECK_EQ_INT(i.term_signal, 0);
    ss_live_rank_state(l, 0, "never_connected");
    REQUIRE(ss_live_rank_get(l, 0, &i) == 0);
    CHECK_STR(i.state, "never_connected");

    /* out of range and NULL: ignored */
    ss_live_rank_hello(l, 9, "x", 1);
    ss_live_rank_phase(l, 9, "x");
    ss_live_rank_phase(NULL, 0, "x");
    ss_live_step(NULL, NULL, NULL);
    ss_live_finish(l);
    CHECK(!ss_live_running(l));
    ss_live_destroy(l);
    ss_live_destroy(NULL);
}

static void step_updates_ranks(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    step_fx fx;
    fx_build(&fx, 3);
    ss_live_step(l, &fx.v, names_);
    ss_live_rank_info i;
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_EQ_INT(i.step_ns, 12 * MS);
    CHECK_EQ_INT(i.rss_bytes, 2048);
    /* a step without an RSS sample keeps the last one; absent: missing */
    fx.ranks[1].rss_bytes = SS_MISSING;
    fx.ranks[0].present = 0;
    ss_live_step(l, &fx.v, names_);
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_EQ_INT(i.rss_bytes, 2048);
    REQUIRE(ss_live_rank_get(l, 0, &i) == 0);
    CHECK_EQ_INT(i.step_ns, SS_MISSING);
    ss_live_destroy(l);
}

static void feed_delivers(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    step_fx fx;
    fx_build(&fx, 1);
    ss_live_step(l, &fx.v, names_); /* before anyone listens: not queued */
    ss_live_cursor c = {0};
    ss_live_feed_join(l, &c);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_live_feed_wait(l, &c, 10, &b), 0);
    CHECK_EQ_INT(b.len, 0);

    fx_build(&fx, 2);
    ss_live_step(l, &fx.v, names_);
    ss_finding f = finding_(1, "jitter", SS_WARNING);
    ss_live_finding(l, &f);
    CHECK_EQ_INT(ss_live_feed_wait(l, &c, 10, &b), 2);
    ss_buf step = {0}, fnd = {0};
    ss_obj_step(&step, &fx.v, names_);
    ss_obj_finding(&fnd, &f);
    ss_buf want = {0};
    ss_buf_printf(&want, "event: step\ndata: %s\n\nevent: finding\ndata: "
                  "%s\n\n", step.data, fnd.data);
    CHECK_STR(b.data, want.data);
    ss_buf_free(&want);
    ss_buf_free(&step);
    ss_buf_free(&fnd);

    /* a reader that falls behind is told how much it missed */
    for (uint32_t i = 0; i < SS_LIVE_FEED_SIZE + 5; i++) {
        f = finding_(i + 2, "jitter", SS_WARNING);
        ss_live_finding(l, &f);
    }
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_live_feed_wait(l, &c, 10, &b), SS_LIVE_FEED_SIZE + 1);
    CHECK(strncmp(b.data, "event: lagged\ndata: {\"skipped\":5}\n\n", 35) ==
          0);
    CHECK(strstr(b.data, "\"id\":6,") == NULL);
    CHECK(strstr(b.data, "\"id\":7,") != NULL);

    ss_live_finish(l);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_live_feed_wait(l, &c, 10, &b), -1);
    ss_live_feed_leave(l);
    ss_buf_free(&b);
    ss_live_destroy(l);
}

typedef struct {
    ss_live *l;
    ss_live_cursor c;
    int got;
    double waited;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    ss_buf b = {0};
    ss_mono_ns t0 = ss_mono_now();
    w->got = ss_live_feed_wait(w->l, &w->c, 5000, &b);
    w->waited = (double)(ss_mono_now() - t0) / 1e9;
    ss_buf_free(&b);
    return NULL;
}

static void feed_wakes_reader(void)
{
    ss_live *l = ss_live_create(1, 2);
    REQUIRE(l);
    waiter w = {l, {0}, -9, 0};
    ss_live_feed_join(l, &w.c);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, wait_thread, &w) == 0);
    struct timespec pause = {0, 50 * 1000000};
    nanosleep(&pause, NULL);
    step_fx fx;
    fx_build(&fx, 1);
    ss_live_step(l, &fx.v, names_);
    pthread_join(t, NULL);
    CHECK_EQ_INT(w.got, 1);
    CHECK(w.waited < 2.0);
    ss_live_feed_leave(l);
    ss_live_destroy(l);
}

/* Every line is a comment or "name{labels} value". */
static int exposition_valid(const char *text)
{
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, '\n');
        if (!end)
            return 0;
        if (*p != '#') {
            const char *brace = memchr(p, '{', (size_t)(end - p));
            const char *close = brace ? memchr(brace, '}',
                                               (size_t)(end - brace))
                                      : NULL;
            if (!brace || !close || close[1] != ' ')
                return 0;
            char *num_end;
            strtod(close + 2, &num_end);
            if (num_end != end)
                return 0;
        }
        p = end + 1;
    }
    return 1;
}

static void metrics_exposition(void)
{
    ss_live *l = ss_live_create(3, 2);
    REQUIRE(l);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(exposition_valid(b.data));
    CHECK(strstr(b.data, "stepscope_steps_finalized_total{run=\"3\"} 0\n"));
    CHECK(strstr(b.data, "stepscope_step_seconds") == NULL);
    CHECK(strstr(b.data, "stepscope_rank_up{run=\"3\",rank=\"1\"} 0\n"));

    ss_live_rank_hello(l, 0, "h", 1);
    ss_live_rank_step(l, 0, 7);
    ss_live_rank_counters(l, 0, 2, 1);
    step_fx fx;
    fx_build(&fx, 7);
    ss_live_step(l, &fx.v, names_);
    ss_finding f1 = finding_(1, "straggler", SS_CRITICAL);
    ss_finding f2 = finding_(2, "straggler", SS_CRITICAL);
    ss_finding f3 = finding_(3, "jitter", SS_WARNING);
    ss_live_finding(l, &f1);
    ss_live_finding(l, &f2);
    ss_live_finding(l, &f3);
    ss_live_finding(l, &f1); /* an update, not a new one */
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(exposition_valid(b.data));
    static const char *const lines[] = {
        "# TYPE stepscope_steps_finalized_total counter\n",
        "stepscope_steps_finalized_total{run=\"3\"} 1\n",
        "stepscope_last_step{run=\"3\"} 7\n",
        "stepscope_step_seconds{run=\"3\",stat=\"min\"} 0.010000000\n",
        "stepscope_step_seconds{run=\"3\",stat=\"median\"} 0.010000000\n",
        "stepscope_step_seconds{run=\"3\",stat=\"p90\"} 0.012000000\n",
        "stepscope_step_seconds{run=\"3\",stat=\"max\"} 0.012000000\n",
        "stepscope_step_worst_rank{run=\"3\"} 1\n",
        "stepscope_step_missing_ranks{run=\"3\"} 0\n",
        "stepscope_phase_seconds{run=\"3\",phase=\"fwd\\\"x\\\\y\","
        "stat=\"p90\"} 0.006000000\n",
        "stepscope_sync_skew_seconds{run=\"3\",sync=\"allreduce\"} "
        "0.000001500\n",
        "stepscope_rank_up{run=\"3\",rank=\"0\"} 1\n",
        "stepscope_rank_up{run=\"3\",rank=\"1\"} 0\n",
        "stepscope_rank_last_step{run=\"3\",rank=\"0\"} 7\n",
        "stepscope_rank_step_seconds{run=\"3\",rank=\"1\"} 0.012000000\n",
        "stepscope_rank_rss_bytes{run=\"3\",rank=\"1\"} 2048\n",
        "stepscope_dropped_events_total{run=\"3\",rank=\"0\"} 2\n",
        "stepscope_dropped_records_total{run=\"3\",rank=\"0\"} 1\n",
        "stepscope_findings{run=\"3\",kind=\"straggler\","
        "severity=\"critical\"} 2\n",
        "stepscope_findings{run=\"3\",kind=\"jitter\",severity=\"warning\"} "
        "1\n",
        "stepscope_run_running{run=\"3\"} 1\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(b.data, lines[i])) {
            fprintf(stderr, "  missing: %s", lines[i]);
            CHECK(0);
        }
    /* series for unknown values are left out, not zero */
    CHECK(strstr(b.data, "stepscope_rank_rss_bytes{run=\"3\",rank=\"0\"}") ==
          NULL);
    CHECK(strstr(b.data, "stepscope_rank_last_step{run=\"3\",rank=\"1\"}") ==
          NULL);
    ss_live_finish(l);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(strstr(b.data, "stepscope_run_running{run=\"3\"} 0\n"));
    ss_buf_free(&b);
    ss_live_destroy(l);
}

/* The per-rank host counters: only once the host stage published some,
 * and only the known ones. */
static void host_metrics(void)
{
    ss_live *l = ss_live_create(4, 2);
    REQUIRE(l);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(strstr(b.data, "stepscope_rank_runqueue_seconds_total") == NULL);
    ss_host_step h = {.cpu_ns = 2500000000, .runq_ns = 120000000,
                      .stopped_ns = 30000000, .throttled_ns = SS_MISSING,
                      .nr_throttled = SS_MISSING, .vol_switches = 10,
                      .invol_switches = 7, .major_faults = 3,
                      .psi_cpu_ns = 0, .psi_memory_ns = 0,
                      .psi_io_ns = SS_MISSING};
    ss_live_rank_host(l, 1, &h);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(exposition_valid(b.data));
    static const char *const lines[] = {
        "# TYPE stepscope_rank_cpu_seconds_total counter\n",
        "stepscope_rank_cpu_seconds_total{run=\"4\",rank=\"1\"} 2.500000\n",
        "stepscope_rank_runqueue_seconds_total{run=\"4\",rank=\"1\"} "
        "0.120000\n",
        "stepscope_rank_stopped_seconds_total{run=\"4\",rank=\"1\"} "
        "0.030000\n",
        "stepscope_rank_involuntary_switches_total{run=\"4\",rank=\"1\"} 7\n",
        "stepscope_rank_major_faults_total{run=\"4\",rank=\"1\"} 3\n",
        "# TYPE stepscope_rank_throttled_seconds_total counter\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(b.data, lines[i])) {
            fprintf(stderr, "  missing: %s", lines[i]);
            CHECK(0);
        }
    CHECK(strstr(b.data, "stepscope_rank_throttled_seconds_total{") == NULL);
    CHECK(strstr(b.data, "stepscope_rank_cpu_seconds_total{run=\"4\","
                         "rank=\"0\"}") == NULL);
    ss_buf_free(&b);
    ss_live_destroy(l);
}

/* The per-rank GPU counters: by reason, with the GPU's index, only for the
 * ranks with a GPU (the evidence is made up here: no GPU is read). */
static void gpu_metrics(void)
{
    ss_live *l = ss_live_create(4, 2);
    REQUIRE(l);
    ss_host_step h = {.cpu_ns = SS_MISSING, .runq_ns = SS_MISSING,
                      .stopped_ns = SS_MISSING, .throttled_ns = SS_MISSING,
                      .nr_throttled = SS_MISSING, .vol_switches = SS_MISSING,
                      .invol_switches = SS_MISSING, .major_faults = SS_MISSING,
                      .psi_cpu_ns = SS_MISSING, .psi_memory_ns = SS_MISSING,
                      .psi_io_ns = SS_MISSING};
    ss_live_rank_host(l, 0, &h); /* no GPU */
    h.gpu = (ss_gpu_evidence){.present = 1, .index = 2,
                              .slowed_ns = 1500000000,
                              .power_cap_ns = 1500000000, .thermal_ns = 0,
                              .hw_slowdown_ns = 0, .ecc_new = 0,
                              .xid_new = 1, .last_xid = 79};
    ss_live_rank_host(l, 1, &h);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_live_metrics(l, &b), 0);
    CHECK(exposition_valid(b.data));
    static const char *const lines[] = {
        "# TYPE stepscope_rank_gpu_throttled_seconds_total counter\n",
        "stepscope_rank_gpu_throttled_seconds_total{run=\"4\",rank=\"1\","
        "gpu=\"2\",reason=\"any\"} 1.500000\n",
        "stepscope_rank_gpu_throttled_seconds_total{run=\"4\",rank=\"1\","
        "gpu=\"2\",reason=\"power_cap\"} 1.500000\n",
        "stepscope_rank_gpu_throttled_seconds_total{run=\"4\",rank=\"1\","
        "gpu=\"2\",reason=\"thermal\"} 0.000000\n",
        "stepscope_rank_gpu_xid_errors_total{run=\"4\",rank=\"1\",gpu=\"2\"} "
        "1\n",
        "stepscope_rank_gpu_ecc_errors_total{run=\"4\",rank=\"1\",gpu=\"2\"} "
        "0\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(b.data, lines[i])) {
            fprintf(stderr, "  missing: %s", lines[i]);
            CHECK(0);
        }
    CHECK(strstr(b.data, "rank=\"0\",gpu=") == NULL);
    ss_buf_free(&b);
    ss_live_destroy(l);
}

/* A restart: the attempt shows and every rank starts over. */
static void next_attempt_resets_ranks(void)
{
    ss_live *l = ss_live_create(5, 2);
    REQUIRE(l);
    CHECK_EQ_INT(ss_live_get_attempt(l), 0);
    ss_live_rank_hello(l, 1, "node9", 77);
    ss_live_rank_step(l, 1, 41);
    ss_live_rank_exit(l, 1, 1, 0);
    ss_live_attempt(l, 1);
    CHECK_EQ_INT(ss_live_get_attempt(l), 1);
    ss_live_rank_info i;
    REQUIRE(ss_live_rank_get(l, 1, &i) == 0);
    CHECK_STR(i.state, "starting");
    CHECK_EQ_INT(i.pid, -1);
    CHECK_EQ_INT(i.last_step, -1);
    CHECK_EQ_INT(i.exit_code, -1);
    CHECK(ss_live_running(l));
    ss_live_destroy(l);
}

TEST_LIST(TEST(rank_life), TEST(next_attempt_resets_ranks), TEST(step_updates_ranks), TEST(feed_delivers),
          TEST(feed_wakes_reader), TEST(metrics_exposition),
          TEST(host_metrics), TEST(gpu_metrics))
