/*
 * health_test.c - the health checks: a disk threshold no disk meets, the
 * GPUs of the NVML and AMD SMI test doubles with and without ECC and Xid
 * errors, a
 * port in use, and site commands that pass, fail, print a lot and hang,
 * and one that leaves a child in the background holding its output open.
 */
#include "health.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testing.h"

#define FAKE_COMPLETE FAKE_NVML_DIR "/libfake_nvml.so"

static void disk_threshold(void)
{
    ss_health_result r;
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_disk(".", 0.000001, &r), 0);
    CHECK(strstr(r.notes, "GB free in .") != NULL);
    CHECK_EQ_INT(ss_health_check_disk(".", 1e12, &r), -1);
    CHECK_STR(r.check, "disk");
    CHECK(strstr(r.output, "less than the 1000000000000.00 GB required "
                           "(--min-free-gb)") != NULL);
    CHECK_EQ_INT(ss_health_check_disk("/no/such/dir", 1, &r), -1);
    CHECK(strstr(r.output, "cannot read the free space of /no/such/dir"));
}

static void gpus_through_nvml(void)
{
    ss_health_result r;
    memset(&r, 0, sizeof r);
    /* No NVML: skipped with a note. */
    CHECK_EQ_INT(ss_health_check_gpus("/no/such/libnvidia-ml.so", &r), 0);
    CHECK(strstr(r.notes, "gpu: skipped") != NULL);
    /* Four healthy GPUs. */
    setenv("FAKE_NVML_GPUS", "4", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), 0);
    CHECK(strstr(r.notes, "4 GPUs without ECC or Xid errors") != NULL);
    /* GPU 2 has uncorrected ECC errors. */
    setenv("FAKE_NVML_ECC", "2:3", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), -1);
    CHECK_STR(r.check, "gpu");
    CHECK(strstr(r.output, "GPU 2 (GPU-") != NULL);
    CHECK(strstr(r.output, "3 uncorrected ECC errors") != NULL);
    unsetenv("FAKE_NVML_ECC");
    /* GPU 1 reports an Xid. */
    setenv("FAKE_NVML_XID", "1:79", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), -1);
    CHECK(strstr(r.output, "GPU 1 (") && strstr(r.output, "last Xid 79"));
    unsetenv("FAKE_NVML_XID");
    /* A lost GPU. */
    setenv("FAKE_NVML_LOST", "0", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), -1);
    CHECK(strstr(r.output, "GPU 0") && strstr(r.output, "cannot be read"));
    unsetenv("FAKE_NVML_LOST");
    /* NVML there but not usable (an unknown error). */
    setenv("FAKE_NVML_INIT_RC", "999", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), -1);
    CHECK(strstr(r.output, "cannot be used") != NULL);
    /* The library without its driver: no GPU here, skipped. */
    setenv("FAKE_NVML_INIT_RC", "9", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus(FAKE_COMPLETE, &r), 0);
    CHECK(strstr(r.notes, "gpu: skipped") != NULL);
    unsetenv("FAKE_NVML_INIT_RC");
}

/* The same checks on AMD GPUs, through AMD SMI's TEST DOUBLE
 * (tests/support/fake_amdsmi.c) when there is no NVML. */
static void gpus_through_amd_smi(void)
{
    ss_health_result r;
    setenv("STEPSCOPE_AMDSMI_LIB", FAKE_AMDSMI_DIR "/libfake_amdsmi.so", 1);
    setenv("FAKE_AMDSMI_GPUS", "2", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus("/no/such/libnvidia-ml.so", &r), 0);
    CHECK(strstr(r.notes, "2 GPUs without ECC or Xid errors") != NULL);
    setenv("FAKE_AMDSMI_ECC", "1:5", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus("/no/such/libnvidia-ml.so", &r), -1);
    CHECK(strstr(r.output, "GPU 1 (fa4e0001-") != NULL);
    CHECK(strstr(r.output, "5 uncorrected ECC errors") != NULL);
    unsetenv("FAKE_AMDSMI_ECC");
    setenv("FAKE_AMDSMI_INIT_RC", "18", 1);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_gpus("/no/such/libnvidia-ml.so", &r), -1);
    CHECK(strstr(r.output, "AMD SMI unusable") != NULL);
    unsetenv("FAKE_AMDSMI_INIT_RC");
    unsetenv("FAKE_AMDSMI_GPUS");
    unsetenv("STEPSCOPE_AMDSMI_LIB");
}

static void port_in_use(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    REQUIRE(listen(fd, 1) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    uint16_t port = ntohs(a.sin_port);
    ss_health_result r;
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_port(port, &r), -1);
    CHECK_STR(r.check, "master_port");
    CHECK(strstr(r.output, "cannot be bound") != NULL);
    close(fd);
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(ss_health_check_port(port, &r), 0);
    CHECK(strstr(r.notes, "free") != NULL);
    CHECK_EQ_INT(ss_health_check_port(0, &r), 0);
}

static void base_config(ss_health_config *cfg)
{
    ss_health_config_defaults(cfg);
    cfg->min_free_gb = 0.000001;
    cfg->nvml_lib = "/no/such/libnvidia-ml.so";
}

static void site_commands(void)
{
    ss_health_config cfg;
    ss_health_result r;
    base_config(&cfg);
    /* No command: the built-in checks alone. */
    CHECK_EQ_INT(ss_health_run(&cfg, &r), 0);
    CHECK(r.ok);
    CHECK(strstr(r.notes, "disk:") && strstr(r.notes, "gpu: skipped"));
    cfg.command = "echo all good";
    CHECK_EQ_INT(ss_health_run(&cfg, &r), 0);
    CHECK(strstr(r.notes, "command: 'echo all good' passed") != NULL);
    /* A failing one: its status and its output, stderr included. */
    cfg.command = "echo checking fabric; echo 'ib0 is down' >&2; exit 3";
    CHECK_EQ_INT(ss_health_run(&cfg, &r), -1);
    CHECK(!r.ok);
    CHECK_STR(r.check, "command");
    CHECK(strstr(r.output, "exited with status 3\n") != NULL);
    CHECK(strstr(r.output, "checking fabric\nib0 is down\n") != NULL);
    /* A loud one: only the end is kept, bounded. */
    cfg.command = "seq 1 100000; exit 1";
    CHECK_EQ_INT(ss_health_run(&cfg, &r), -1);
    CHECK(strlen(r.output) <= SS_HEALTH_OUTPUT_MAX);
    CHECK(strstr(r.output, "(the output's end)") != NULL);
    CHECK(strstr(r.output, "99999\n100000\n") != NULL);
    /* A hung one, and its child, are killed at the timeout. */
    cfg.command = "sleep 30 & sleep 30";
    cfg.timeout_ms = 300;
    CHECK_EQ_INT(ss_health_run(&cfg, &r), -1);
    CHECK(strstr(r.output, "timed out after 0.3 s") != NULL);
    /* A built-in failure comes first: the command does not run. */
    cfg.command = "exit 0";
    cfg.min_free_gb = 1e12;
    CHECK_EQ_INT(ss_health_run(&cfg, &r), -1);
    CHECK_STR(r.check, "disk");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The command exits at once but its background child keeps the pipe: the
 * check ends a short drain later, not when the child does (20 s) nor at
 * its timeout, and the child is ended with it.  The timeout and the bound
 * are far from those 20 s but not short: starting the shells takes a
 * loaded machine a while. */
static void a_background_child_does_not_hold_the_check(void)
{
    ss_health_config cfg;
    ss_health_result r;
    base_config(&cfg);
    char pidfile[64], cmd[160];
    snprintf(pidfile, sizeof pidfile, "/tmp/ss-health-test-%d.pid",
             (int)getpid());
    snprintf(cmd, sizeof cmd, "(sleep 20 & echo $! > %s); echo ok", pidfile);
    cfg.command = cmd;
    cfg.timeout_ms = 15000;
    double t0 = now_s();
    CHECK_EQ_INT(ss_health_run(&cfg, &r), 0);
    double took = now_s() - t0;
    CHECK(took < 10.0);
    CHECK(strstr(r.notes, "passed") != NULL);
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    if (f) {
        CHECK_EQ_INT(fscanf(f, "%d", &pid), 1);
        fclose(f);
    }
    unlink(pidfile);
    REQUIRE(pid > 0);
    int gone = 0;
    for (int i = 0; i < 1000 && !gone; i++) { /* 20 s at most */
        gone = kill(pid, 0) != 0;
        if (!gone)
            usleep(20000);
    }
    CHECK(gone);
    if (!gone)
        kill(pid, SIGKILL);
}

TEST_LIST({"disk_threshold", disk_threshold},
          {"gpus_through_nvml", gpus_through_nvml},
          {"gpus_through_amd_smi", gpus_through_amd_smi},
          {"port_in_use", port_in_use},
          {"site_commands", site_commands},
          {"a_background_child_does_not_hold_the_check",
           a_background_child_does_not_hold_the_check});
