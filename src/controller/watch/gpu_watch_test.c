/*
 * gpu_watch_test.c - the GPU sampler thread (gpu_watch.c): ranks mapped to
 * their GPUs, each rank-step's GPU evidence and the totals.
 *
 * NO GPU IS READ HERE.  The NVML these tests load is a TEST DOUBLE,
 * tests/support/fake_nvml.c (libfake_nvml.so), loaded through
 * STEPSCOPE_NVML_LIB as the real libnvidia-ml.so.1 would be and scripted by
 * FAKE_NVML_* variables; the AMD SMI they load is AMD SMI's TEST DOUBLE,
 * tests/support/fake_amdsmi.c (STEPSCOPE_AMDSMI_LIB, FAKE_AMDSMI_*
 * variables).  The ranks' environments are files under a fake
 * /proc.  A real GPU is checked by scripts/gpu_check.sh (docs/gpu.md).
 */
#include "gpu_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"
#include "testing.h"
#include "testing_tmp.h"

#define FAKE_COMPLETE FAKE_NVML_DIR "/libfake_nvml.so"

/* Writes PROC/PID/environ holding ENV (NUL-separated, LEN bytes). */
static void fake_environ(const char *proc, int pid, const char *env,
                         size_t len)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%d", proc, pid);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%d/environ", proc, pid);
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    fwrite(env, 1, len, f);
    fclose(f);
}

/* Waits until GW took at least N samples (20 s at most: the sampler is a
 * thread that a loaded machine may run late). */
static void wait_samples(ss_gpu_watch *gw, uint64_t n)
{
    ss_mono_ns end = ss_mono_now() + 20 * 1000000000LL;
    while (ss_gpu_watch_samples(gw) < n && ss_mono_now() < end)
        usleep(10000);
    REQUIRE(ss_gpu_watch_samples(gw) >= n);
}

/* Rank 0 on GPU 0 (LOCAL_RANK 0), rank 1 on GPU 1 (CUDA_VISIBLE_DEVICES),
 * rank 2 on GPU 2 (LOCAL_RANK 2), rank 3 never said hello.  GPU 2 is held
 * by the power cap, GPU 1 had Xid 79. */
static void each_rank_gets_its_gpus_evidence(void)
{
    char proc[600];
    testing_tmp_path("proc", proc, sizeof proc);
    mkdir(proc, 0700);
    fake_environ(proc, 100, "LOCAL_RANK=0", sizeof "LOCAL_RANK=0");
    fake_environ(proc, 101, "CUDA_VISIBLE_DEVICES=1\0LOCAL_RANK=0",
                 sizeof "CUDA_VISIBLE_DEVICES=1\0LOCAL_RANK=0");
    fake_environ(proc, 102, "LOCAL_RANK=2", sizeof "LOCAL_RANK=2");
    setenv("FAKE_NVML_GPUS", "4", 1);
    setenv("FAKE_NVML_REASONS", "2:0x4", 1);
    setenv("FAKE_NVML_XID", "1:79", 1);
    ss_mono_ns t0 = ss_mono_now();
    ss_gpu_watch *gw = ss_gpu_watch_start(4, 10, proc, FAKE_COMPLETE);
    REQUIRE(gw != NULL);
    for (uint32_t r = 0; r < 3; r++)
        ss_gpu_watch_rank(gw, r, 100 + (pid_t)r);
    wait_samples(gw, 4 * 6);
    ss_mono_ns t1 = ss_mono_now();
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 0), 0);
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 1), 1);
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 2), 2);
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 3), -1);

    ss_gpu_evidence g;
    CHECK_EQ_INT(ss_gpu_watch_window(gw, 2, t0, t1, &g), 0);
    CHECK_EQ_INT(g.present, 1);
    CHECK_EQ_INT(g.index, 2);
    CHECK(g.covered_ns > 0);
    CHECK_EQ_INT(g.power_cap_ns, g.covered_ns); /* held all along */
    CHECK_EQ_INT(g.slowed_ns, g.covered_ns);
    CHECK_EQ_INT(g.thermal_ns, 0);
    CHECK_EQ_INT(g.hw_slowdown_ns, 0);
    CHECK(g.sm_clock_mhz > 0);

    CHECK_EQ_INT(ss_gpu_watch_window(gw, 0, t0, t1, &g), 0);
    CHECK_EQ_INT(g.index, 0);
    CHECK_EQ_INT(g.slowed_ns, 0);
    CHECK_EQ_INT(g.last_xid, 0);

    CHECK_EQ_INT(ss_gpu_watch_window(gw, 1, t0, t1, &g), 0);
    CHECK_EQ_INT(g.index, 1);
    CHECK_EQ_INT(g.last_xid, 79);

    CHECK_EQ_INT(ss_gpu_watch_window(gw, 3, t0, t1, &g), -1);
    CHECK_EQ_INT(g.present, 0);
    /* An interval before any sample: nothing known. */
    CHECK_EQ_INT(ss_gpu_watch_window(gw, 2, t0 - 10000000000LL,
                                     t0 - 5000000000LL, &g), -1);

    CHECK_EQ_INT(ss_gpu_watch_totals(gw, 1, &g), 0);
    CHECK_EQ_INT(g.xid_new, 1);
    CHECK_EQ_INT(g.last_xid, 79);
    CHECK_EQ_INT(ss_gpu_watch_totals(gw, 2, &g), 0);
    CHECK(g.power_cap_ns > 0);
    CHECK_EQ_INT(g.power_cap_ns, g.slowed_ns);
    CHECK_EQ_INT(ss_gpu_watch_totals(gw, 3, &g), -1);
    ss_gpu_watch_stop(gw);
    unsetenv("FAKE_NVML_REASONS");
    unsetenv("FAKE_NVML_XID");
}

/* The same evidence from AMD GPUs, through AMD SMI's TEST DOUBLE
 * (tests/support/fake_amdsmi.c, loaded through STEPSCOPE_AMDSMI_LIB) when
 * there is no NVML: rank 0 on GPU 2 (HIP_VISIBLE_DEVICES), held by the
 * power cap; rank 1 on GPU 1 (ROCR_VISIBLE_DEVICES and LOCAL_RANK), its HBM
 * too hot. */
static void each_rank_gets_its_amd_gpus_evidence(void)
{
    char proc[600];
    testing_tmp_path("amd_proc", proc, sizeof proc);
    mkdir(proc, 0700);
    static const char env0[] = "HIP_VISIBLE_DEVICES=2\0LOCAL_RANK=0";
    static const char env1[] = "ROCR_VISIBLE_DEVICES=0,1\0LOCAL_RANK=1";
    fake_environ(proc, 200, env0, sizeof env0);
    fake_environ(proc, 201, env1, sizeof env1);
    setenv("STEPSCOPE_AMDSMI_LIB", FAKE_AMDSMI_DIR "/libfake_amdsmi.so", 1);
    setenv("FAKE_AMDSMI_GPUS", "4", 1);
    setenv("FAKE_AMDSMI_VIOLATION", "2:0x2,1:0x10", 1);
    ss_mono_ns t0 = ss_mono_now();
    ss_gpu_watch *gw =
        ss_gpu_watch_start(2, 10, proc, "/nonexistent/libnvidia-ml.so.1");
    REQUIRE(gw != NULL);
    ss_gpu_watch_rank(gw, 0, 200);
    ss_gpu_watch_rank(gw, 1, 201);
    wait_samples(gw, 4 * 6);
    ss_mono_ns t1 = ss_mono_now();
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 0), 2);
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 1), 1);
    ss_gpu_evidence g;
    CHECK_EQ_INT(ss_gpu_watch_window(gw, 0, t0, t1, &g), 0);
    CHECK_EQ_INT(g.index, 2);
    CHECK(g.covered_ns > 0);
    CHECK_EQ_INT(g.power_cap_ns, g.covered_ns);
    CHECK_EQ_INT(g.slowed_ns, g.covered_ns);
    CHECK_EQ_INT(g.sm_clock_mhz, 2080);
    CHECK_EQ_INT(g.temperature_c, 52);
    CHECK_EQ_INT(ss_gpu_watch_window(gw, 1, t0, t1, &g), 0);
    CHECK_EQ_INT(g.index, 1);
    CHECK_EQ_INT(g.thermal_ns, g.covered_ns);
    CHECK_EQ_INT(g.power_cap_ns, 0);
    CHECK_EQ_INT(ss_gpu_watch_totals(gw, 1, &g), 0);
    CHECK(g.thermal_ns > 0);
    CHECK(g.xid_new == SS_MISSING); /* no Xid errors on AMD */
    ss_gpu_watch_stop(gw);
    unsetenv("STEPSCOPE_AMDSMI_LIB");
    unsetenv("FAKE_AMDSMI_GPUS");
    unsetenv("FAKE_AMDSMI_VIOLATION");
}

/* No NVML: the watch starts, knows no GPU, and stops at once. */
static void without_nvml_no_gpu_and_no_error(void)
{
    ss_gpu_watch *gw = ss_gpu_watch_start(2, 10, "/proc",
                                          "/nonexistent/libnvidia-ml.so.1");
    REQUIRE(gw != NULL);
    ss_gpu_watch_rank(gw, 0, getpid());
    usleep(50000);
    CHECK_EQ_INT(ss_gpu_watch_samples(gw), 0);
    CHECK_EQ_INT(ss_gpu_watch_gpu_of(gw, 0), -1);
    ss_gpu_evidence g;
    CHECK_EQ_INT(ss_gpu_watch_window(gw, 0, 0, ss_mono_now(), &g), -1);
    CHECK_EQ_INT(g.present, 0);
    CHECK_EQ_INT(ss_gpu_watch_totals(gw, 0, &g), -1);
    ss_gpu_watch_stop(gw);
    ss_gpu_watch_stop(NULL);
}

/* Stopping does not wait out the sampling interval. */
static void stop_is_prompt(void)
{
    ss_gpu_watch *gw = ss_gpu_watch_start(1, 60000, "/proc", FAKE_COMPLETE);
    REQUIRE(gw != NULL);
    wait_samples(gw, 1);
    ss_mono_ns t = ss_mono_now();
    ss_gpu_watch_stop(gw);
    CHECK(ss_mono_now() - t < 1000000000LL);
}

TEST_LIST(TEST(each_rank_gets_its_gpus_evidence),
          TEST(each_rank_gets_its_amd_gpus_evidence),
          TEST(without_nvml_no_gpu_and_no_error), TEST(stop_is_prompt))
