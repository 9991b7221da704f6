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
#include <stdlib.h>
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
    run_for(&loop, 60);
    ss_mono_ns before_stop = now_ns();
    kill(sleeper, SIGSTOP);
    run_for(&loop, 80);
    kill(sleeper, SIGCONT);
    run_for(&loop, 60);
    ss_host_watch_step_done(hw, 0);
    ss_mono_ns t1 = now_ns();

    ss_host_step h;
    CHECK_EQ_INT(ss_host_watch_window(hw, 0, t0, t1, &h), 0);
    /* 80 ms stopped, give or take the loop's reaction and the machine */
    CHECK(h.stopped_ns > 50 * MS && h.stopped_ns < 200 * MS);
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
    /* timer (every 20 ms over 200 ms) and the step report */
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
    usleep(50000); /* exec'd: its environment is its own */
    ss_host_watch_rank_hello(hw, 0, pid);
    ss_mono_ns t0 = now_ns();
    run_for(&loop, 200);
    ss_mono_ns t1 = now_ns();
    ss_host_step h;
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
