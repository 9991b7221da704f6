/*
 * oom_log_test.c - the OOM killer's reports read from a log file standing
 * for /dev/kmsg: a cgroup's kill and the host's, only what came after the
 * open, other processes' kills, lines in dmesg's form, a log that cannot
 * be read (the host's count answers, once per kill), and the sentence.
 */
#include "oom_log.h"

#include <stdio.h>
#include <string.h>

#include "testing.h"
#include "testing_tmp.h"

static char log_path[512], vmstat_path[512];

static void write_file(const char *path, const char *mode, const char *text)
{
    FILE *f = fopen(path, mode);
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

static void set_up(void)
{
    snprintf(log_path, sizeof log_path, "%s/kmsg", testing_tmp_dir());
    snprintf(vmstat_path, sizeof vmstat_path, "%s/vmstat", testing_tmp_dir());
    write_file(log_path, "w", "6,1,100,-;before the job: Killed process "
               "4242 (python3) total-vm:1kB, anon-rss:1kB, file-rss:1kB\n");
    write_file(vmstat_path, "w", "pgfault 7\noom_kill 3\npgmajfault 1\n");
}

static const char CGROUP_KILL[] =
    "6,17750,42322015841,-;memory: usage 1035364kB, limit 1035364kB, failcnt 45\n"
    "6,17751,42322015842,-;memory+swap: usage 1035364kB, limit 9007199254740988kB, failcnt 0\n"
    " SUBSYSTEM=memory\n"
    "6,17798,42322015953,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
    "cpuset=/,mems_allowed=0,oom_memcg=/job/rank1,task_memcg=/job/rank1,"
    "task=python3,pid=9799,uid=0\n"
    "3,17799,42322016013,-;Memory cgroup out of memory: Killed process 9799 "
    "(python3) total-vm:2689740kB, anon-rss:1789772kB, file-rss:128308kB, "
    "shmem-rss:0kB, UID:0 pgtables:4320kB oom_score_adj:0\n";

static void a_cgroup_kill_is_named(void)
{
    set_up();
    ss_oom_log *o = ss_oom_log_open(log_path, vmstat_path);
    REQUIRE(o);
    CHECK_STR(ss_oom_log_unreadable(o), "");
    write_file(log_path, "a", CGROUP_KILL);
    ss_oom_kill k;
    REQUIRE(ss_oom_log_explain(o, 9799, &k) == 1);
    CHECK_EQ_INT(k.pid, 9799);
    CHECK_STR(k.comm, "python3");
    CHECK_EQ_INT(k.memcg, 1);
    CHECK_STR(k.cgroup, "/job/rank1");
    CHECK_EQ_INT(k.limit_kb, 1035364);
    CHECK_EQ_INT(k.anon_kb, 1789772);
    CHECK_EQ_INT(k.file_kb, 128308);
    char text[256];
    ss_oom_kill_describe(&k, text, sizeof text);
    CHECK_STR(text, "its memory cgroup /job/rank1 reached its limit of "
              "1011 MiB (the process held 1.7 GiB anonymous and 125 MiB "
              "file-backed memory)");
    /* Asked again: the kill is still known. */
    CHECK_EQ_INT(ss_oom_log_explain(o, 9799, NULL), 1);
    ss_oom_log_free(o);
}

static void only_what_came_after_the_open(void)
{
    set_up();
    ss_oom_log *o = ss_oom_log_open(log_path, vmstat_path);
    REQUIRE(o);
    /* 4242 was killed before the job: not this job's. */
    CHECK_EQ_INT(ss_oom_log_explain(o, 4242, NULL), 0);
    /* Another process's kill names nobody else. */
    write_file(log_path, "a", CGROUP_KILL);
    CHECK_EQ_INT(ss_oom_log_explain(o, 9800, NULL), 0);
    ss_oom_log_free(o);
}

static void a_host_kill_in_dmesg_form(void)
{
    set_up();
    ss_oom_log *o = ss_oom_log_open(log_path, vmstat_path);
    REQUIRE(o);
    /* A memory cgroup's lines, then the host's own kill: the cgroup's
     * limit does not carry over to it.  Lines may come split over reads. */
    write_file(log_path, "a",
               "[ 4021.1] memory: usage 10kB, limit 10kB, failcnt 1\n"
               "[ 4021.2] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),"
               "cpuset=/,mems_allowed=0,global_oom,task_memcg=/user,"
               "task=pt_main_thread,pid=5150,uid=1000\n"
               "[ 4021.3] Out of memory: Killed process 5150 (pt_main_thr");
    CHECK_EQ_INT(ss_oom_log_explain(o, 5150, NULL), 0); /* not yet ended */
    write_file(log_path, "a", "ead) total-vm:900kB, anon-rss:3145728kB, "
               "file-rss:0kB\n");
    ss_oom_kill k;
    REQUIRE(ss_oom_log_explain(o, 5150, &k) == 1);
    CHECK_EQ_INT(k.memcg, 0);
    CHECK_STR(k.comm, "pt_main_thread");
    CHECK_EQ_INT(k.limit_kb, -1);
    char text[256];
    ss_oom_kill_describe(&k, text, sizeof text);
    CHECK_STR(text, "the host ran out of memory (the process held 3.0 GiB "
              "anonymous and 0 MiB file-backed memory)");
    ss_oom_log_free(o);
}

static void an_unreadable_log_falls_back_to_the_count(void)
{
    set_up();
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-log", testing_tmp_dir());
    ss_oom_log *o = ss_oom_log_open(missing, vmstat_path);
    REQUIRE(o);
    CHECK(strstr(ss_oom_log_unreadable(o), "No such file") != NULL);
    CHECK_EQ_INT(ss_oom_log_explain(o, 1, NULL), 0); /* count still 3 */
    write_file(vmstat_path, "w", "pgfault 9\noom_kill 5\n");
    /* Two kills since the open: two deaths may be told "probably"; a
     * third is not. */
    CHECK_EQ_INT(ss_oom_log_explain(o, 1, NULL), 2);
    CHECK_EQ_INT(ss_oom_log_explain(o, 2, NULL), 2);
    CHECK_EQ_INT(ss_oom_log_explain(o, 3, NULL), 0);
    ss_oom_log_free(o);
    /* No count either: nothing to say. */
    ss_oom_log *none = ss_oom_log_open(missing, missing);
    REQUIRE(none);
    CHECK_EQ_INT(ss_oom_log_explain(none, 1, NULL), 0);
    ss_oom_log_free(none);
}

static void a_child_named_in_the_last_lines(void)
{
    set_up();
    ss_oom_log *o = ss_oom_log_open(log_path, vmstat_path);
    REQUIRE(o);
    write_file(log_path, "a", CGROUP_KILL);
    ss_oom_kill k;
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "RuntimeError: DataLoader "
                 "worker (pid 9799) is killed by signal: Killed.", &k), 1);
    CHECK_EQ_INT(k.pid, 9799);
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "DataLoader worker (pid(s) "
                 "12, 9799) exited unexpectedly", NULL), 1);
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "task=x,pid=9799", NULL), 1);
    /* Another number, or the pid's digits inside a longer one: no. */
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "worker (pid 97991) died; "
                 "step 9799", NULL), 0);
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "rapid 9799", NULL), 0);
    CHECK_EQ_INT(ss_oom_log_kill_named_in(o, "", NULL), 0);
    ss_oom_log_free(o);
}

TEST_LIST(TEST(a_cgroup_kill_is_named), TEST(a_child_named_in_the_last_lines), TEST(only_what_came_after_the_open),
          TEST(a_host_kill_in_dmesg_form),
          TEST(an_unreadable_log_falls_back_to_the_count))
