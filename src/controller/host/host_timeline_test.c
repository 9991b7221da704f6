/*
 * host_timeline_test.c - host counters aligned to step windows: linear
 * interpolation between samples, exact stop overlaps (closed and open),
 * windows the samples do not cover, a counter that goes down, and both
 * rings overflowing.
 */
#include "host_timeline.h"

#include "testing.h"

/* Proc counters all equal to V (cpu V, run queue V/2, switches, faults). */
static ss_proc_counters proc_at(int64_t v)
{
    ss_proc_counters p = {.cpu_ns = v, .runq_ns = v / 2, .vol_switches = v,
                          .invol_switches = v / 10, .major_faults = v / 100};
    return p;
}

static ss_cgroup_counters cg_at(int64_t v)
{
    ss_cgroup_counters c = {.nr_throttled = v / 1000, .throttled_ns = v,
                            .psi_cpu_ns = 2 * v, .psi_memory_ns = 0,
                            .psi_io_ns = SS_MISSING};
    return c;
}

static void add(ss_host_timeline *tl, ss_mono_ns at, int64_t v)
{
    ss_proc_counters p = proc_at(v);
    ss_cgroup_counters c = cg_at(v);
    ss_host_timeline_add(tl, at, &p, &c);
}

static void interpolates_between_samples(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    REQUIRE(tl);
    add(tl, 1000, 0);
    add(tl, 2000, 10000);
    add(tl, 4000, 10000); /* idle from 2000 on */
    ss_host_step h;
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1250, 1750, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 5000);
    CHECK_EQ_INT(h.runq_ns, 2500);
    CHECK_EQ_INT(h.vol_switches, 5000);
    CHECK_EQ_INT(h.invol_switches, 500);
    CHECK_EQ_INT(h.major_faults, 50);
    CHECK_EQ_INT(h.throttled_ns, 5000);
    CHECK_EQ_INT(h.nr_throttled, 5);
    CHECK_EQ_INT(h.psi_cpu_ns, 10000);
    CHECK_EQ_INT(h.psi_memory_ns, 0);
    CHECK(h.psi_io_ns == SS_MISSING); /* missing at the samples */
    CHECK_EQ_INT(h.stopped_ns, 0);
    /* across samples, and ending exactly on the last one */
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1500, 4000, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 5000);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1000, 1000, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 0);
    ss_host_timeline_free(tl);
    ss_host_timeline_free(NULL);
}

static void uncovered_windows(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    ss_host_step h;
    CHECK_EQ_INT(ss_host_timeline_window(tl, 0, 10, &h), -1); /* empty */
    CHECK(h.cpu_ns == SS_MISSING);
    /* nothing watched yet: no claim that it was not stopped (the old code
     * said 0) */
    CHECK(h.stopped_ns == SS_MISSING);
    add(tl, 1000, 0);
    add(tl, 2000, 100);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 500, 1500, &h), -1);
    CHECK(h.stopped_ns == SS_MISSING); /* begins before the watch */
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1500, 2500, &h), -1);
    CHECK(h.cpu_ns == SS_MISSING && h.runq_ns == SS_MISSING);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1800, 1200, &h), -1);
    CHECK(h.stopped_ns == SS_MISSING);
    /* an older sample arriving late is ignored */
    add(tl, 1500, 7);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 1000, 2000, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 100);
    ss_host_timeline_free(tl);
}

/* A counter that goes down (a cgroup recreated, a kernel oddity) gives no
 * value rather than a huge one. */
static void counter_going_down_is_missing(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    add(tl, 0, 1000);
    add(tl, 100, 400);
    ss_host_step h;
    CHECK_EQ_INT(ss_host_timeline_window(tl, 0, 100, &h), 0);
    CHECK(h.cpu_ns == SS_MISSING);
    ss_host_timeline_free(tl);
}

static void stops_overlap_exactly(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    add(tl, 0, 0);
    add(tl, 1000, 1000);
    ss_host_timeline_continued(tl, 5); /* nothing to continue: ignored */
    ss_host_timeline_stopped(tl, 100);
    ss_host_timeline_stopped(tl, 120); /* already stopped */
    ss_host_timeline_continued(tl, 400);
    ss_host_timeline_continued(tl, 450); /* already running */
    ss_host_timeline_stopped(tl, 600);
    ss_host_timeline_continued(tl, 700);
    ss_host_timeline_stopped(tl, 900); /* still stopped */
    ss_host_step h;
    CHECK_EQ_INT(ss_host_timeline_window(tl, 0, 1000, &h), 0);
    CHECK_EQ_INT(h.stopped_ns, 300 + 100 + 100);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 200, 650, &h), 0);
    CHECK_EQ_INT(h.stopped_ns, 200 + 50);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 400, 600, &h), 0);
    CHECK_EQ_INT(h.stopped_ns, 0);
    /* the open stop counts to the end of a window past the samples */
    CHECK_EQ_INT(ss_host_timeline_window(tl, 950, 1200, &h), -1);
    CHECK_EQ_INT(h.stopped_ns, 250);
    ss_host_timeline_free(tl);
}

/* More samples than the ring holds: the newest are kept and windows on
 * them are answered; the oldest are not covered any more. */
static void sample_ring_overflows(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    int n = SS_HOST_TIMELINE_SAMPLES + 100;
    for (int i = 0; i < n; i++)
        add(tl, (ss_mono_ns)i * 100, (int64_t)i * 10);
    ss_host_step h;
    CHECK_EQ_INT(ss_host_timeline_window(tl, 0, 1000, &h), -1);
    CHECK_EQ_INT(ss_host_timeline_window(tl, 9900, 10000, &h), -1);
    ss_mono_ns oldest = (ss_mono_ns)(n - SS_HOST_TIMELINE_SAMPLES) * 100;
    CHECK_EQ_INT(ss_host_timeline_window(tl, oldest, oldest + 150, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 15);
    ss_mono_ns last = (ss_mono_ns)(n - 1) * 100;
    CHECK_EQ_INT(ss_host_timeline_window(tl, last - 250, last, &h), 0);
    CHECK_EQ_INT(h.cpu_ns, 25);
    ss_host_timeline_free(tl);
}

/* More stops than the ring holds: a window reaching back before the end
 * of the oldest dropped stop has no exact stopped time any more. */
static void stop_ring_overflows(void)
{
    ss_host_timeline *tl = ss_host_timeline_new();
    add(tl, 0, 0);
    int n = SS_HOST_TIMELINE_STOPS + 3;
    for (int i = 0; i < n; i++) {
        ss_host_timeline_stopped(tl, (ss_mono_ns)i * 100 + 10);
        ss_host_timeline_continued(tl, (ss_mono_ns)i * 100 + 40);
    }
    ss_mono_ns end = (ss_mono_ns)n * 100;
    add(tl, end, 1);
    ss_host_step h;
    ss_host_timeline_window(tl, 0, 100, &h);
    CHECK(h.stopped_ns == SS_MISSING);
    ss_host_timeline_window(tl, 240, 340, &h); /* after the 3 dropped */
    CHECK_EQ_INT(h.stopped_ns, 30);
    CHECK_EQ_INT(ss_host_timeline_window(tl, end - 1000, end, &h), 0);
    CHECK_EQ_INT(h.stopped_ns, 300);
    ss_host_timeline_free(tl);
}

static void clear_marks_everything_missing(void)
{
    ss_host_step h = {0};
    ss_host_step_clear(&h);
    CHECK(h.cpu_ns == SS_MISSING && h.runq_ns == SS_MISSING &&
          h.stopped_ns == SS_MISSING && h.throttled_ns == SS_MISSING &&
          h.nr_throttled == SS_MISSING && h.vol_switches == SS_MISSING &&
          h.invol_switches == SS_MISSING && h.major_faults == SS_MISSING &&
          h.psi_cpu_ns == SS_MISSING && h.psi_memory_ns == SS_MISSING &&
          h.psi_io_ns == SS_MISSING);
}

TEST_LIST(TEST(interpolates_between_samples), TEST(uncovered_windows),
          TEST(counter_going_down_is_missing), TEST(stops_overlap_exactly),
          TEST(sample_ring_overflows), TEST(stop_ring_overflows),
          TEST(clear_marks_everything_missing))
