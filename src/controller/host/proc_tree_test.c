/*
 * proc_tree_test.c - a rank's process tree read from /proc: exact values
 * from a fake /proc laid out in a scratch directory, and the real /proc on
 * real processes (a CPU-burning child with a setsid grandchild, a stopped
 * child, a descendant that ends).
 */
#include "proc_tree.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

static ss_mono_ns now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ss_mono_ns)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A process line of /proc/PID/stat with majflt, utime, stime, cutime and
 * num_threads set. */
static void fake_stat_threads(const char *root, int pid, char state,
                              int majflt, int utime, int stime, int cutime,
                              int threads)
{
    char rel[64], text[512];
    snprintf(rel, sizeof rel, "%d/stat", pid);
    snprintf(text, sizeof text,
             "%d (py thon) %c 1 1 1 0 -1 0 10 0 %d 1 %d %d %d 0 20 0 %d 0 1 "
             "1000 100 0\n",
             pid, state, majflt, utime, stime, cutime, threads);
    testing_write_file(root, rel, text);
}

/* The same with one thread. */
static void fake_stat(const char *root, int pid, char state, int majflt,
                      int utime, int stime, int cutime)
{
    fake_stat_threads(root, pid, state, majflt, utime, stime, cutime, 1);
}

static void fake_task(const char *root, int pid, int tid, long long run,
                      long long wait, const char *children)
{
    char rel[96], text[128];
    snprintf(rel, sizeof rel, "%d/task/%d/schedstat", pid, tid);
    snprintf(text, sizeof text, "%lld %lld 7\n", run, wait);
    testing_write_file(root, rel, text);
    snprintf(rel, sizeof rel, "%d/task/%d/children", pid, tid);
    testing_write_file(root, rel, children);
}

static void fake_status(const char *root, int pid, int vol, int invol)
{
    char rel[64], text[256];
    snprintf(rel, sizeof rel, "%d/status", pid);
    snprintf(text, sizeof text,
             "Name:\tpython\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t%d\n"
             "nonvoluntary_ctxt_switches:\t%d\n",
             vol, invol);
    testing_write_file(root, rel, text);
}

static void fake_tree_exact(void)
{
    char root[512];
    testing_tmp_path("proc1", root, sizeof root);
    /* rank 100 with two threads; its child 200 (a data-loader worker) */
    fake_stat(root, 100, 'S', 3, 50, 25, 0);
    fake_status(root, 100, 40, 4);
    fake_task(root, 100, 100, 1000000, 200000, "200 ");
    fake_task(root, 100, 101, 500000, 50000, "");
    int64_t tick = 1000000000LL / sysconf(_SC_CLK_TCK);
    fake_stat(root, 200, 'R', 2, 10, 5, 0);
    fake_status(root, 200, 6, 1);
    fake_task(root, 200, 200, 15 * tick, 30000, "");
    ss_proc_tree *t = ss_proc_tree_new(root, 100);
    REQUIRE(t);
    ss_proc_counters c;
    REQUIRE(ss_proc_tree_sample(t, 1, &c) == 0);
    CHECK_EQ_INT(c.n_procs, 2);
    CHECK_EQ_INT(c.n_threads, 3);
    /* with schedstat, CPU time is the threads' run time (ns), not the
     * processes' 90 ticks */
    CHECK_EQ_INT(c.cpu_ns, 1500000 + 15 * tick);
    CHECK_EQ_INT(c.runq_ns, 280000);
    CHECK_EQ_INT(c.vol_switches, 46);
    CHECK_EQ_INT(c.invol_switches, 5);
    CHECK_EQ_INT(c.major_faults, 7);
    CHECK_EQ_INT(c.stopped, 0);
    CHECK_EQ_INT(ss_proc_tree_open_files(t), 7);

    /* the worker ends and the rank reaps it (its 15 ticks move into the
     * rank's cutime; it is gone from the children at the next membership
     * rescan): what it used stays counted once, from the rank's cutime
     * now; the rank is stopped */
    char path[600];
    snprintf(path, sizeof path, "%s/200/stat", root);
    remove(path);
    fake_stat(root, 100, 'T', 3, 60, 25, 15);
    fake_task(root, 100, 100, 1100000, 250000, "");
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS, &c) == 0);
    CHECK_EQ_INT(c.n_procs, 1);
    CHECK_EQ_INT(c.cpu_ns, 1600000 + 15 * tick);
    CHECK_EQ_INT(c.runq_ns, 330000);
    CHECK_EQ_INT(c.vol_switches, 46);
    CHECK_EQ_INT(c.major_faults, 7); /* a drop is carried */
    CHECK_EQ_INT(c.stopped, 1);
    ss_proc_tree_free(t);
}

/* A thread started between two periodic rescans is followed from the
 * sample that finds the process's thread count changed, with what it
 * waited since its start; one that ends keeps what it counted. */
static void a_new_thread_is_followed_at_once(void)
{
    char root[512];
    testing_tmp_path("proc_threads", root, sizeof root);
    fake_stat_threads(root, 100, 'S', 0, 10, 0, 0, 1);
    fake_task(root, 100, 100, 1000000, 200000, "");
    ss_proc_tree *t = ss_proc_tree_new(root, 100);
    REQUIRE(t);
    ss_proc_counters c;
    REQUIRE(ss_proc_tree_sample(t, 1, &c) == 0);
    CHECK_EQ_INT(c.n_threads, 1);
    CHECK_EQ_INT(c.runq_ns, 200000);
    CHECK_EQ_INT(c.cpu_ns, 1000000);

    /* 100 ms later: a second thread, which has waited 300 us */
    fake_stat_threads(root, 100, 'S', 0, 12, 0, 0, 2);
    fake_task(root, 100, 100, 1100000, 250000, "");
    fake_task(root, 100, 101, 400000, 300000, "");
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS / 10, &c) == 0);
    CHECK_EQ_INT(c.n_threads, 2);
    CHECK_EQ_INT(c.runq_ns, 550000);
    CHECK_EQ_INT(c.cpu_ns, 1500000);

    /* it runs and waits 100 us more, then ends */
    fake_task(root, 100, 101, 500000, 400000, "");
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS / 5, &c) == 0);
    CHECK_EQ_INT(c.runq_ns, 650000);
    CHECK_EQ_INT(c.cpu_ns, 1600000);
    char path[600];
    snprintf(path, sizeof path, "%s/100/task/101/schedstat", root);
    remove(path);
    snprintf(path, sizeof path, "%s/100/task/101/children", root);
    remove(path);
    snprintf(path, sizeof path, "%s/100/task/101", root);
    rmdir(path);
    fake_stat_threads(root, 100, 'S', 0, 13, 0, 0, 1);
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS / 10 * 3, &c) ==
            0);
    CHECK_EQ_INT(c.n_threads, 1);
    CHECK_EQ_INT(c.runq_ns, 650000);
    CHECK_EQ_INT(c.cpu_ns, 1600000);

    /* a new thread given the ended one's id before a rescan noticed the
     * end: its smaller run time is taken for the old thread's, and the
     * CPU time does not go down */
    fake_stat_threads(root, 100, 'S', 0, 14, 0, 0, 2);
    fake_task(root, 100, 101, 500000, 400000, "");
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS / 10 * 4, &c) ==
            0);
    CHECK_EQ_INT(c.cpu_ns, 2100000);
    fake_task(root, 100, 101, 100000, 0, "");
    REQUIRE(ss_proc_tree_sample(t, 1 + SS_PROC_TREE_RESCAN_NS / 10 * 5, &c) ==
            0);
    CHECK(c.cpu_ns >= 2100000);
    ss_proc_tree_free(t);
}

static void fake_without_schedstat_uses_ticks(void)
{
    char root[512];
    testing_tmp_path("proc2", root, sizeof root);
    fake_stat(root, 300, 'S', 0, 7, 3, 0);
    fake_status(root, 300, 1, 1);
    testing_write_file(root, "300/task/300/children", "");
    ss_proc_tree *t = ss_proc_tree_new(root, 300);
    ss_proc_counters c;
    REQUIRE(ss_proc_tree_sample(t, 1, &c) == 0);
    long hz = sysconf(_SC_CLK_TCK);
    CHECK_EQ_INT(c.cpu_ns, 10 * (1000000000LL / hz));
    CHECK(c.runq_ns == SS_MISSING);
    ss_proc_tree_free(t);
}

static void missing_root_is_an_error(void)
{
    ss_proc_tree *t = ss_proc_tree_new("/proc", 0x7ffffff0);
    ss_proc_counters c;
    CHECK_EQ_INT(ss_proc_tree_sample(t, 1, &c), -1);
    ss_proc_tree_free(t);
    ss_proc_tree_free(NULL);
}

/* Burns SECONDS of this thread's CPU time (not wall time: the machine may
 * be loaded). */
static void burn_cpu(double seconds)
{
    struct timespec ts;
    volatile unsigned x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x++;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    } while ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9 < seconds);
}

/* A real child burning 0.2 s of CPU with a setsid grandchild burning 0.2 s
 * too: both are found, CPU time grows by what they burned, the stop is
 * seen, and the grandchild's CPU stays counted after it ends. */
static void real_tree(void)
{
    /* Separate pipes for "the child is set up" (child -> test) and "the
     * grandchild may start" (test -> grandchild): on one shared pipe the
     * grandchild could take the child's byte and the test would wait
     * forever. */
    int ready[2], go[2], done[2];
    REQUIRE(pipe(ready) == 0 && pipe(go) == 0 && pipe(done) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        pid_t g = fork();
        if (g == 0) {
            setsid();
            char byte;
            (void)!read(go[0], &byte, 1); /* start after the first sample */
            burn_cpu(0.2);
            _exit(0);
        }
        (void)!write(ready[1], "x", 1);
        usleep(100000);
        burn_cpu(0.2);
        waitpid(g, NULL, 0);
        (void)!write(done[1], "x", 1);
        pause();
        _exit(0);
    }
    char b;
    REQUIRE(read(ready[0], &b, 1) == 1);
    ss_proc_tree *t = ss_proc_tree_new("/proc", child);
    ss_proc_counters c0, c1;
    REQUIRE(ss_proc_tree_sample(t, now_ns(), &c0) == 0);
    CHECK_EQ_INT(c0.n_procs, 2);
    REQUIRE(write(go[1], "x", 1) == 1); /* the grandchild may start */
    REQUIRE(read(done[0], &b, 1) == 1);
    REQUIRE(ss_proc_tree_sample(t, now_ns() + 2000000000LL, &c1) == 0);
    CHECK_EQ_INT(c1.n_procs, 1);
    double used = (double)(c1.cpu_ns - c0.cpu_ns) / 1e9;
    if (!(used > 0.35 && used < 0.5))
        fprintf(stderr, "  used %.3f s\n", used);
    CHECK(used > 0.35 && used < 0.5);
    CHECK(c1.runq_ns != SS_MISSING && c1.runq_ns >= c0.runq_ns);
    kill(child, SIGSTOP);
    c1.stopped = 0;
    /* 20 s at most: the child stops when it is next scheduled, late on a
     * loaded machine */
    for (int i = 0; i < 2000 && !c1.stopped; i++) {
        usleep(10000);
        REQUIRE(ss_proc_tree_sample(t, now_ns(), &c1) == 0);
    }
    CHECK_EQ_INT(c1.stopped, 1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ss_proc_counters c2;
    CHECK_EQ_INT(ss_proc_tree_sample(t, now_ns() + 4000000000LL, &c2), 0);
    CHECK(c2.cpu_ns >= c1.cpu_ns);
    CHECK_EQ_INT(ss_proc_tree_open_files(t), 0);
    ss_proc_tree_free(t);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    close(done[0]);
    close(done[1]);
}

TEST_LIST(TEST(fake_tree_exact), TEST(a_new_thread_is_followed_at_once),
          TEST(fake_without_schedstat_uses_ticks),
          TEST(missing_root_is_an_error), TEST(real_tree))
