/*
 * cgroup_cpu_test.c - a rank's cgroup throttling and pressure: exact
 * values from fake /proc and cgroup trees laid out in a scratch directory
 * (v1 beside an empty v2 hierarchy, as hybrid hosts mount them; v2 alone;
 * v2 seen from inside a container; a rank moved to another cgroup; a
 * frozen cgroup, v2's events and v1's freezer), and the real machine's
 * (a busy child throttled by a v1 CPU quota, when this host lets us make
 * a cgroup).
 */
#include "cgroup_cpu.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

#define PID 4242

static const char PSI_TEXT[] =
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n";

static void put_psi(const char *root, const char *rel, int total_us)
{
    char text[256];
    snprintf(text, sizeof text, PSI_TEXT, total_us);
    testing_write_file(root, rel, text);
}

/* A fake /proc under PROC whose mountinfo mounts cgroup2 at CG2 (root
 * CG2_ROOT) and, when CG1 is not NULL, the v1 cpu controller at CG1. */
static void fake_proc(const char *proc, const char *cg2, const char *cg2_root,
                      const char *cg1, const char *pid_cgroup)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                     "41 31 0:38 %s %s rw,relatime - cgroup2 cgroup2 rw\n",
                     cg2_root, cg2);
    if (cg1)
        snprintf(text + n, sizeof text - (size_t)n,
                 "33 31 0:30 / %s/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                 "32 31 0:29 / %s rw,relatime - cgroup cgroup rw,cpu\n",
                 cg1, cg1);
    testing_write_file(proc, "self/mountinfo", text);
    char rel[64];
    snprintf(rel, sizeof rel, "%d/cgroup", PID);
    testing_write_file(proc, rel, pid_cgroup);
}

static void v1_beside_empty_v2(void)
{
    char proc[512], cg2[512], cg1[512];
    testing_tmp_path("h1-proc", proc, sizeof proc);
    testing_tmp_path("h1-unified", cg2, sizeof cg2);
    testing_tmp_path("h1-cpu", cg1, sizeof cg1);
    fake_proc(proc, cg2, "/", cg1, "4:cpu:/job/r0\n2:cpuacct:/\n0::/\n");
    /* the v2 root's cpu.stat has no throttling; its pressure is the
     * machine's */
    testing_write_file(cg2, "cpu.stat", "usage_usec 5\nuser_usec 3\n");
    put_psi(cg2, "cpu.pressure", 1500);
    put_psi(cg2, "memory.pressure", 20);
    put_psi(cg2, "io.pressure", 7);
    testing_write_file(cg1, "job/r0/cpu.stat",
                       "nr_periods 9\nnr_throttled 4\nthrottled_time 123456\n");
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_sources(c), SS_CGROUP_V1 | SS_CGROUP_PSI_SYSTEM);
    CHECK_STR(ss_cgroup_cpu_path(c), "/job/r0");
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.nr_throttled, 4);
    CHECK_EQ_INT(k.throttled_ns, 123456);
    CHECK_EQ_INT(k.psi_cpu_ns, 1500000);
    CHECK_EQ_INT(k.psi_memory_ns, 20000);
    CHECK_EQ_INT(k.psi_io_ns, 7000);
    ss_cgroup_cpu_free(c);
}

/* The regression: the v2 line of /proc/PID/cgroup ("0::/PATH") was never
 * recognised, so v2 hosts had no throttling and the machine's pressure. */
static void v2_alone(void)
{
    char proc[512], cg2[512];
    testing_tmp_path("h2-proc", proc, sizeof proc);
    testing_tmp_path("h2-cg", cg2, sizeof cg2);
    fake_proc(proc, cg2, "/", NULL, "0::/kubepods/pod1\n");
    testing_write_file(cg2, "kubepods/pod1/cpu.stat",
                       "usage_usec 100\nnr_periods 10\nnr_throttled 3\n"
                       "throttled_usec 2500\n");
    put_psi(cg2, "kubepods/pod1/cpu.pressure", 40);
    put_psi(cg2, "kubepods/pod1/memory.pressure", 50);
    put_psi(cg2, "kubepods/pod1/io.pressure", 60);
    put_psi(proc, "pressure/cpu", 999);
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_sources(c), SS_CGROUP_V2);
    CHECK_STR(ss_cgroup_cpu_path(c), "/kubepods/pod1");
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.nr_throttled, 3);
    CHECK_EQ_INT(k.throttled_ns, 2500000);
    CHECK_EQ_INT(k.psi_cpu_ns, 40000); /* the cgroup's, not the machine's */
    CHECK_EQ_INT(k.psi_memory_ns, 50000);
    CHECK_EQ_INT(k.psi_io_ns, 60000);
    ss_cgroup_cpu_free(c);
}

/* Inside a container the mount shows only part of the hierarchy: the
 * directory is the mount point plus the path below the mount's root. */
static void v2_in_a_container(void)
{
    char proc[512], cg2[512];
    testing_tmp_path("h3-proc", proc, sizeof proc);
    testing_tmp_path("h3-cg", cg2, sizeof cg2);
    fake_proc(proc, cg2, "/kubepods/pod1", NULL, "0::/kubepods/pod1/c\n");
    testing_write_file(cg2, "c/cpu.stat", "nr_throttled 1\nthrottled_usec 9\n");
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_sources(c) & SS_CGROUP_V2, SS_CGROUP_V2);
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.throttled_ns, 9000);
    ss_cgroup_cpu_free(c);
}

/* A rank moved to another cgroup: the counters go on from where they were
 * (cumulative), then count the new cgroup's throttling. */
static void moved_rank_keeps_counting(void)
{
    char proc[512], cg2[512], cg1[512];
    testing_tmp_path("h4-proc", proc, sizeof proc);
    testing_tmp_path("h4-unified", cg2, sizeof cg2);
    testing_tmp_path("h4-cpu", cg1, sizeof cg1);
    fake_proc(proc, cg2, "/", cg1, "1:cpu:/\n0::/\n");
    testing_write_file(cg1, "cpu.stat", "nr_throttled 100\nthrottled_time 5000\n");
    testing_write_file(cg1, "q/cpu.stat", "nr_throttled 0\nthrottled_time 0\n");
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_refresh(c), 0);
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.throttled_ns, 5000);
    testing_write_file(proc, "4242/cgroup", "1:cpu:/q\n0::/\n");
    CHECK_EQ_INT(ss_cgroup_cpu_refresh(c), 1);
    CHECK_STR(ss_cgroup_cpu_path(c), "/q");
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.nr_throttled, 100);
    CHECK_EQ_INT(k.throttled_ns, 5000);
    testing_write_file(cg1, "q/cpu.stat", "nr_throttled 2\nthrottled_time 700\n");
    ss_cgroup_cpu_read(c, &k);
    CHECK_EQ_INT(k.nr_throttled, 102);
    CHECK_EQ_INT(k.throttled_ns, 5700);
    CHECK_EQ_INT(ss_cgroup_cpu_refresh(c), 0);
    ss_cgroup_cpu_free(c);
}

static void nothing_mounted(void)
{
    char proc[512];
    testing_tmp_path("h5-proc", proc, sizeof proc);
    testing_write_file(proc, "self/mountinfo",
                       "22 1 0:21 / /proc rw - proc proc rw\n");
    testing_write_file(proc, "4242/cgroup", "0::/\n");
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_sources(c), 0);
    CHECK_STR(ss_cgroup_cpu_path(c), "");
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    CHECK(k.nr_throttled == SS_MISSING && k.throttled_ns == SS_MISSING);
    CHECK(k.psi_cpu_ns == SS_MISSING && k.psi_io_ns == SS_MISSING);
    CHECK_EQ_INT(ss_cgroup_cpu_refresh(c), 0);
    ss_cgroup_cpu_free(c);
    ss_cgroup_cpu_free(NULL);
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = fputs(text, f) < 0;
    return fclose(f) != 0 || rc ? -1 : 0;
}

/* The real machine: this process's cgroup is found and read; then, where
 * the v1 cpu controller is writable, a busy child moved into a cgroup with
 * a 10 % quota is throttled, and the counters follow it there. */
/* A frozen cgroup: v2's cgroup.events "frozen 1" in the rank's cgroup;
 * v1's freezer controller (its own mount and path) "FROZEN" or
 * "FREEZING"; thawed, 0; a host without a freezer, 0. */
static void frozen_by_the_freezer(void)
{
    char proc[512], cg2[512];
    testing_tmp_path("h6-proc", proc, sizeof proc);
    testing_tmp_path("h6-cg", cg2, sizeof cg2);
    fake_proc(proc, cg2, "/", NULL, "0::/paused\n");
    testing_write_file(cg2, "paused/cgroup.events",
                       "populated 1\nfrozen 1\n");
    ss_cgroup_cpu *c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 1);
    testing_write_file(cg2, "paused/cgroup.events",
                       "populated 1\nfrozen 0\n");
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 0);
    ss_cgroup_cpu_free(c);

    char cg1[512], text[2048];
    testing_tmp_path("h7-proc", proc, sizeof proc);
    testing_tmp_path("h7-unified", cg2, sizeof cg2);
    testing_tmp_path("h7-v1", cg1, sizeof cg1);
    fake_proc(proc, cg2, "/", cg1,
              "7:freezer:/job/r1\n4:cpu:/\n0::/\n");
    snprintf(text, sizeof text,
             "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
             "41 31 0:38 / %s rw,relatime - cgroup2 cgroup2 rw\n"
             "32 31 0:29 / %s/cpu rw,relatime - cgroup cgroup rw,cpu\n"
             "35 31 0:32 / %s/freezer rw,relatime - cgroup cgroup "
             "rw,freezer\n",
             cg2, cg1, cg1);
    testing_write_file(proc, "self/mountinfo", text);
    testing_write_file(cg1, "freezer/job/r1/freezer.state", "FREEZING\n");
    c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 1);
    testing_write_file(cg1, "freezer/job/r1/freezer.state", "FROZEN\n");
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 1);
    testing_write_file(cg1, "freezer/job/r1/freezer.state", "THAWED\n");
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 0);
    ss_cgroup_cpu_free(c);

    /* a hybrid host: the rank in a v2 cgroup of its own (systemd's), not
     * frozen there, frozen through the v1 freezer */
    testing_write_file(proc, "4242/cgroup",
                       "7:freezer:/job/r1\n4:cpu:/\n0::/user.slice/s\n");
    testing_write_file(cg2, "user.slice/s/cgroup.events",
                       "populated 1\nfrozen 0\n");
    testing_write_file(cg1, "freezer/job/r1/freezer.state", "FROZEN\n");
    c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 1);
    ss_cgroup_cpu_free(c);

    testing_tmp_path("h8-proc", proc, sizeof proc);
    testing_tmp_path("h8-cg", cg2, sizeof cg2);
    fake_proc(proc, cg2, "/", NULL, "0::/\n"); /* the root: no events */
    c = ss_cgroup_cpu_open(proc, PID);
    REQUIRE(c);
    CHECK_EQ_INT(ss_cgroup_cpu_frozen(c), 0);
    ss_cgroup_cpu_free(c);
}

static void real_machine(void)
{
    ss_cgroup_cpu *c = ss_cgroup_cpu_open("/proc", getpid());
    REQUIRE(c);
    int src = ss_cgroup_cpu_sources(c);
    ss_cgroup_counters k;
    ss_cgroup_cpu_read(c, &k);
    if (src & (SS_CGROUP_V1 | SS_CGROUP_V2))
        CHECK(k.nr_throttled >= 0 && k.throttled_ns >= 0);
    if (access("/proc/pressure/cpu", R_OK) == 0)
        CHECK(k.psi_cpu_ns >= 0);
    ss_cgroup_cpu_free(c);

    char dir[128];
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/cpu/stepscope-test-%d",
             (int)getpid());
    if (!(src & SS_CGROUP_V1) || mkdir(dir, 0755) != 0) {
        fprintf(stderr, "  real_machine: skipping the quota part: %s\n",
                src & SS_CGROUP_V1 ? strerror(errno)
                                   : "no v1 cpu controller here");
        return;
    }
    char path[256], pid_text[32];
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    int quota_ok = write_text(path, "10000\n") == 0; /* of 100 ms periods */
    pid_t child = fork();
    if (child == 0) {
        for (volatile unsigned x = 0;; x++)
            ;
    }
    REQUIRE(child > 0);
    c = ss_cgroup_cpu_open("/proc", child);
    ss_cgroup_counters before, after;
    ss_cgroup_cpu_read(c, &before);
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    snprintf(pid_text, sizeof pid_text, "%d\n", (int)child);
    int moved = quota_ok && write_text(path, pid_text) == 0;
    CHECK(moved);
    CHECK_EQ_INT(ss_cgroup_cpu_refresh(c), moved);
    /* 90 ms of each 100 ms period throttled, less the loaded machine's
     * share: well over 100 ms in 400 ms on most machines; on a loaded one
     * the child runs less, so read until it shows (20 s at most) */
    usleep(400000);
    ss_cgroup_cpu_read(c, &after);
    for (int i = 0; moved && i < 196 &&
                    (after.nr_throttled - before.nr_throttled < 2 ||
                     after.throttled_ns - before.throttled_ns <= 100000000);
         i++) {
        usleep(100000);
        ss_cgroup_cpu_read(c, &after);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    ss_cgroup_cpu_free(c);
    if (rmdir(dir) != 0)
        fprintf(stderr, "  rmdir %s: %s\n", dir, strerror(errno));
    CHECK(after.nr_throttled - before.nr_throttled >= 2);
    CHECK(after.throttled_ns - before.throttled_ns > 100000000);
}

TEST_LIST(TEST(v1_beside_empty_v2), TEST(v2_alone), TEST(v2_in_a_container),
          TEST(moved_rank_keeps_counting), TEST(nothing_mounted),
          TEST(frozen_by_the_freezer), TEST(real_machine))
