/*
 * host_watch_test.c - the ranks' host evidence on a real libuv loop with
 * real child processes: a stop and continue seen through SIGCHLD land in
 * the step window that covers them (and not in one that does not); the
 * timer and step reports sample; a burning child's CPU shows in its
 * window and totals; exits and unknown ranks are handled; the stop
 * watcher consumes no exit (waitpid still reaps the child); a rank's GPU
 * evidence fills its window, read through NVML's test double (no GPU).
 */
#include "host_watch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"

#define MS 1000000LL

static ss_mono_ns now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ss_mono_ns)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void on_keepalive(uv_timer_t *t) { (void)t; }

/* Runs LOOP for about MS_WAIT milliseconds.  The watch's handles do not
 * keep a loop alive (the controller's other handles do): a timer here
 * does. */
static void run_for(uv_loop_t *loop, int ms_wait)
{
    uv_timer_t keepalive;
    uv_timer_init(loop, &keepalive);
    uv_timer_start(&keepalive, on_keepalive, 1, 1);
    ss_mono_ns end = now_ns() + ms_wait * MS;
    while (now_ns() < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&keepalive, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* How long the test waits for the loop (or a child) to get somewhere: a
 * fixed run of the loop was enough only on a fast machine, and under the
 * sanitizers on a loaded one a child is scheduled, or a SIGCHLD handled,
 * late. */
#define WAIT_MS 20000

/* Runs LOOP until the watch has seen rank RANK stopped (its stopped time
 * grows), WAIT_MS at most.  Returns 1 when it did. */
static int run_until_seen_stopped(uv_loop_t *loop, ss_host_watch *hw,
                                  uint32_t rank)
{
    ss_mono_ns end = now_ns() + WAIT_MS * MS;
    ss_host_step tot;
    while (now_ns() < end) {
        if (ss_host_watch_totals(hw, rank, &tot) == 0 && tot.stopped_ns > 0 &&
            tot.stopped_ns != SS_MISSING) {
            ss_dur_ns a = tot.stopped_ns;
            if (ss_host_watch_totals(hw, rank, &tot) == 0 &&
                tot.stopped_ns > a)
                return 1;
        }
        run_for(loop, 1);
    }
    return 0;
}

/* Runs LOOP until the watch has seen rank RANK continue (its stopped time
 * no longer grows), WAIT_MS at most.  Returns 1 when it did. */
static int run_until_seen_continued(uv_loop_t *loop, ss_host_watch *hw,
                                    uint32_t rank)
{
    ss_mono_ns end = now_ns() + WAIT_MS * MS;
    ss_host_step a, b;
    while (now_ns() < end) {
        run_for(loop, 1);
        if (ss_host_watch_totals(hw, rank, &a) != 0)
            continue;
        usleep(1000);
        if (ss_host_watch_totals(hw, rank, &b) == 0 &&
            a.stopped_ns == b.stopped_ns)
            return 1;
    }
    return 0;
}

/* Process PID's CPU time in ns (user and system), or -1. */
static int64_t cpu_ns_of(pid_t pid)
{
    clockid_t id;
    struct timespec ts;
    if (clock_getcpuclockid(pid, &id) != 0 || clock_gettime(id, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static pid_t start_child(int burn)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (burn)
            for (volatile unsigned x = 0;; x++)
                ;
        for (;;)
            pause();
    }
    return pid;
}

static void stop_seen_in_its_window(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_host_watch *hw = ss_host_watch_start(&loop, 2, 20, "/proc");
    REQUIRE(hw);
    pid_t sleeper = start_child(0), burner = start_child(1);
    REQUIRE(sleeper > 0 && burner > 0);
    CHECK_EQ_INT(ss_host_watch_rank(hw, 0, sleeper), 0);
    CHECK_EQ_INT(ss_host_watch_rank(hw, 1, burner), 0);
    CHECK_EQ_INT(ss_host_watch_rank(hw, 2, sleeper), -1); /* out of range */
    ss_mono_ns t0 = now_ns();
    int64_t burnt0 = cpu_ns_of(burner);
    run_for(&loop, 60);
    ss_mono_ns before_stop = now_ns();
    kill(sleeper, SIGSTOP);
    /* The stop, as the watch sees it, begins between the kill and the
     * moment its stopped time is seen growing, and ends between the
     * SIGCONT and the moment it is seen still: how long the child and
     * the loop took to get there depends on the machine, so the bounds
     * are taken from those moments, not from the 80 ms alone. */
    CHECK(run_until_seen_stopped(&loop, hw, 0));
    ss_mono_ns stop_seen = now_ns();
    run_for(&loop, 80);
    ss_mono_ns before_cont = now_ns();
    kill(sleeper, SIGCONT);
    CHECK(run_until_seen_continued(&loop, hw, 0));
    ss_mono_ns cont_seen = now_ns();
    run_for(&loop, 60);
    /* The burner needs CPU in its window: run until it had 60 ms. */
    for (ss_mono_ns end = now_ns() + WAIT_MS * MS;
         now_ns() < end && cpu_ns_of(burner) - burnt0 < 60 * MS;)
        run_for(&loop, 10);
    ss_host_watch_step_done(hw, 0);
    ss_mono_ns t1 = now_ns();

    ss_host_step h;
    CHECK_EQ_INT(ss_host_watch_window(hw, 0, t0, t1, &h), 0);
    /* at least the 80 ms between seeing the stop and SIGCONT, at most the
     * time from the kill to seeing it continue */
    CHECK(h.stopped_ns >= before_cont - stop_seen &&
          h.stopped_ns <= cont_seen - before_stop);
    if (h.stopped_ns < before_cont - stop_seen ||
        h.stopped_ns > cont_seen - before_stop)
        fprintf(stderr, "  stopped %.1f ms, outside [%.1f, %.1f]\n",
                h.stopped_ns / 1e6, (before_cont - stop_seen) / 1e6,
                (cont_seen - before_stop) / 1e6);
    CHECK(h.cpu_ns != SS_MISSING && h.cpu_ns < 20 * MS);
    CHECK_EQ_INT(ss_host_watch_window(hw, 0, t0, before_stop - MS, &h), 0);
    CHECK_EQ_INT(h.stopped_ns, 0);
    /* the burner used CPU in its window */
    CHECK_EQ_INT(ss_host_watch_window(hw, 1, t0, t1, &h), 0);
    CHECK(h.cpu_ns > 20 * MS);
    CHECK_EQ_INT(h.stopped_ns, 0);
    /* a window before anything was read is not known */
    CHECK_EQ_INT(ss_host_watch_window(hw, 1, t0 - 1000 * MS, t0 - 900 * MS,
                                      &h), -1);
    CHECK_EQ_INT(ss_host_watch_window(hw, 5, t0, t1, &h), -1);
    /* the timer (every 20 ms) and the step report: 5 rounds of the timer
     * over the 200 ms and more that the loop ran, unless the machine held
     * this process back, so the loop runs on until then */
    for (ss_mono_ns end = now_ns() + WAIT_MS * MS;
         now_ns() < end && ss_host_watch_samples(hw) < 2 * 5;)
        run_for(&loop, 20);
    CHECK(ss_host_watch_samples(hw) >= 2 * 5);

    ss_host_step tot;
    CHECK_EQ_INT(ss_host_watch_totals(hw, 0, &tot), 0);
    CHECK(tot.stopped_ns > 50 * MS);
    CHECK_EQ_INT(ss_host_watch_totals(hw, 1, &tot), 0);
    CHECK(tot.cpu_ns > 20 * MS && tot.stopped_ns == 0);
    CHECK_EQ_INT(ss_host_watch_totals(hw, 7, &tot), -1);

    /* The exits are still the parent's to reap: the watch consumed only
     * stop and continue notifications. */
    kill(sleeper, SIGKILL);
    kill(burner, SIGKILL);
    run_for(&loop, 20);
    int status;
    CHECK_EQ_INT(waitpid(sleeper, &status, 0), sleeper);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK_EQ_INT(waitpid(burner, &status, 0), burner);
    ss_host_watch_rank_exited(hw, 0);
    ss_host_watch_rank_exited(hw, 1);
    ss_host_watch_rank_exited(hw, 9);
    /* the last steps of an exited rank are still answered */
    CHECK_EQ_INT(ss_host_watch_window(hw, 1, t0, t1, &h), 0);
    CHECK(h.cpu_ns > 20 * MS);

    ss_host_watch_close(hw);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    ss_host_watch_free(hw);
    ss_host_watch_close(NULL);
    ss_host_watch_free(NULL);
}

/* A rank still stopped when it exits: its stop ends at the exit. */
static void exit_while_stopped(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_host_watch *hw = ss_host_watch_start(&loop, 1, 50, "/proc");
    REQUIRE(hw);
    pid_t child = start_child(0);
    REQUIRE(child > 0);
    CHECK_EQ_INT(ss_host_watch_rank(hw, 0, child), 0);
    ss_mono_ns t0 = now_ns();
    kill(child, SIGSTOP);
    /* 40 ms from the moment the watch saw the stop, however late the
     * child stopped or the loop took the SIGCHLD */
    CHECK(run_until_seen_stopped(&loop, hw, 0));
    run_for(&loop, 40);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ss_host_watch_rank_exited(hw, 0);
    ss_mono_ns t1 = now_ns();
    run_for(&loop, 40);
    ss_host_step h;
    ss_host_watch_window(hw, 0, t0, t1 + 30 * MS, &h);
    CHECK(h.stopped_ns > 20 * MS && h.stopped_ns <= t1 - t0);
    ss_host_watch_close(hw);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    ss_host_watch_free(hw);
}

/* Waits (WAIT_MS at most) until PID's environment holds ENTRY. */
static int wait_environ(pid_t pid, const char *entry)
{
    char path[64], env[4096];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(env, 1, sizeof env - 1, f) : 0;
        if (f)
            fclose(f);
        for (size_t at = 0; at < n; at += strlen(env + at) + 1) {
            env[n] = '\0';
            if (strcmp(env + at, entry) == 0)
                return 1;
        }
        usleep(5000);
    }
    return 0;
}

/* The GPU evidence of a rank's window, through NVML's TEST DOUBLE
 * (tests/support/fake_nvml.c; no GPU is read): the rank's process, exec'd
 * with CUDA_VISIBLE_DEVICES=1, is mapped to GPU 1 at hello, and GPU 1's
 * power cap shows in its window and totals. */
static void gpu_evidence_of_a_rank(void)
{
    setenv("STEPSCOPE_NVML_LIB", FAKE_NVML_DIR "/libfake_nvml.so", 1);
    setenv("FAKE_NVML_REASONS", "1:0x4", 1);
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_host_watch *hw = ss_host_watch_start(&loop, 2, 20, "/proc");
    REQUIRE(hw);
    pid_t pid = fork();
    if (pid == 0) {
        char *const argv[] = {"sleep", "30", NULL};
        char *const envp[] = {"CUDA_VISIBLE_DEVICES=1", NULL};
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    REQUIRE(pid > 0);
    CHECK_EQ_INT(ss_host_watch_rank(hw, 0, pid), 0);
    /* exec'd: its environment is its own (a fixed wait was too short when
     * the child was scheduled late) */
    CHECK(wait_environ(pid, "CUDA_VISIBLE_DEVICES=1"));
    ss_host_watch_rank_hello(hw, 0, pid);
    ss_mono_ns t0 = now_ns();
    run_for(&loop, 200);
    /* The GPU sampler is a thread of its own: run until its samples cover
     * 150 ms of the window and the totals have two of them (one sample
     * spans no time), however late it ran. */
    ss_host_step h, sofar;
    for (ss_mono_ns end = now_ns() + WAIT_MS * MS; now_ns() < end;) {
        if (ss_host_watch_window(hw, 0, t0, now_ns(), &h) == 0 &&
            h.gpu.present && h.gpu.covered_ns > 150 * MS &&
            ss_host_watch_totals(hw, 0, &sofar) == 0 &&
            sofar.gpu.covered_ns > 0)
            break;
        run_for(&loop, 20);
    }
    ss_mono_ns t1 = now_ns();
    CHECK_EQ_INT(ss_host_watch_window(hw, 0, t0, t1, &h), 0);
    CHECK_EQ_INT(h.gpu.present, 1);
    CHECK_EQ_INT(h.gpu.index, 1);
    CHECK(h.gpu.power_cap_ns > 100 * MS);
    CHECK_EQ_INT(h.gpu.slowed_ns, h.gpu.power_cap_ns);
    CHECK(h.cpu_ns != SS_MISSING); /* the process tree's evidence too */
    /* rank 1 never said hello: no GPU */
    CHECK_EQ_INT(ss_host_watch_window(hw, 1, t0, t1, &h), -1);
    ss_host_step tot;
    CHECK_EQ_INT(ss_host_watch_totals(hw, 0, &tot), 0);
    CHECK_EQ_INT(tot.gpu.index, 1);
    CHECK(tot.gpu.power_cap_ns > 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ss_host_watch_rank_exited(hw, 0);
    ss_host_watch_close(hw);
    uv_run(&loop, UV_RUN_DEFAULT);
    ss_host_watch_free(hw);
    uv_loop_close(&loop);
    unsetenv("STEPSCOPE_NVML_LIB");
    unsetenv("FAKE_NVML_REASONS");
}

TEST_LIST(TEST(stop_seen_in_its_window), TEST(exit_while_stopped),
          TEST(gpu_evidence_of_a_rank))
