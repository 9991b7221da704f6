/*
 * nvml_test.c - the NVML reader (nvml.c) and the backend over it
 * (gpu_backend.c), its step alignment (nvml_timeline.c) and `stepscope
 * gpus` (gpu_cmd.c) on NVIDIA.
 *
 * NO GPU IS READ HERE.  Every NVML these tests load is a TEST DOUBLE,
 * tests/support/fake_nvml.c, built as three shared libraries (complete,
 * minimal, broken) and loaded through STEPSCOPE_NVML_LIB exactly as the
 * real libnvidia-ml.so.1 would be; its values are scripted by FAKE_NVML_*
 * variables.  What the double cannot show (that a real driver answers the
 * way NVML's documentation says) is checked on a machine with NVIDIA GPUs
 * by scripts/gpu_check.sh (docs/gpu.md).
 */
#include "nvml.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_backend.h"
#include "nvml_timeline.h"
#include "testing.h"
#include "testing_tmp.h"

#define FAKE_COMPLETE FAKE_NVML_DIR "/libfake_nvml.so"
#define FAKE_MINIMAL FAKE_NVML_DIR "/libfake_nvml_minimal.so"
#define FAKE_BROKEN FAKE_NVML_DIR "/libfake_nvml_broken.so"

static char log_path[512];

/* Scripts the test double for the next ss_nvml_open: NULL leaves a
 * variable unset.  Calls are logged into a fresh file (log_path). */
static void script(const char *lib, const char *gpus, const char *reasons,
                   const char *xid, const char *ecc)
{
    static int n_logs;
    char name[64];
    snprintf(name, sizeof name, "nvml_calls_%d.log", n_logs++);
    testing_tmp_path(name, log_path, sizeof log_path);
    setenv("FAKE_NVML_LOG", log_path, 1);
    const char *names[] = {SS_NVML_LIB_ENV, "FAKE_NVML_GPUS",
                           "FAKE_NVML_REASONS", "FAKE_NVML_XID",
                           "FAKE_NVML_ECC"};
    const char *values[] = {lib, gpus, reasons, xid, ecc};
    for (size_t i = 0; i < 5; i++) {
        if (values[i])
            setenv(names[i], values[i], 1);
        else
            unsetenv(names[i]);
    }
    unsetenv("FAKE_NVML_LOST");
    unsetenv("FAKE_NVML_INIT_RC");
}

/* How many lines of the call log are WHAT. */
static int logged(const char *what)
{
    FILE *f = fopen(log_path, "r");
    char line[128];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        n += strcmp(line, what) == 0;
    }
    if (f)
        fclose(f);
    return n;
}

/* Whether the shared library at PATH is still mapped in this process. */
static int still_loaded(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

static void the_nvml_here_is_a_test_double(void)
{
    script(FAKE_COMPLETE, "1", NULL, NULL, NULL);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n && ss_nvml_state_of(n) == SS_NVML_READY);
    CHECK(strstr(ss_nvml_gpu(n, 0)->name, "(test double)") != NULL);
    ss_nvml_close(n);
}

static void a_missing_library_is_no_nvml_not_an_error(void)
{
    script("/nonexistent/libnvidia-ml.so.1", NULL, NULL, NULL, NULL);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n != NULL);
    CHECK_EQ_INT(ss_nvml_state_of(n), SS_NVML_ABSENT);
    CHECK(strncmp(ss_nvml_why(n), "no NVML: ", 9) == 0);
    CHECK(strstr(ss_nvml_why(n), "/nonexistent/libnvidia-ml.so.1") != NULL);
    CHECK_EQ_INT(ss_nvml_count(n), 0);
    CHECK(ss_nvml_gpu(n, 0) == NULL);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_nvml_sample(n, 0, 1, &s), -1);
    CHECK(s.sm_clock_mhz == SS_MISSING && s.xid_count == SS_MISSING);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, "0"), -1);
    ss_nvml_close(n);
    ss_nvml_close(NULL);
    /* The default name too: this machine has no NVIDIA driver. */
    unsetenv(SS_NVML_LIB_ENV);
    n = ss_nvml_open(NULL);
    REQUIRE(n != NULL);
    if (ss_nvml_state_of(n) == SS_NVML_ABSENT)
        CHECK(strstr(ss_nvml_why(n), SS_NVML_DEFAULT_LIB) != NULL);
    ss_nvml_close(n);
}

static void reads_every_gpu_of_the_double(void)
{
    script(FAKE_COMPLETE, "4", "2:0x4", "1:79", "1:3");
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n && ss_nvml_state_of(n) == SS_NVML_READY);
    CHECK_STR(ss_nvml_why(n), "");
    REQUIRE(ss_nvml_count(n) == 4);
    CHECK(ss_nvml_watches_xid(n));
    const ss_gpu_info *g1 = ss_nvml_gpu(n, 1);
    CHECK_EQ_INT(g1->index, 1);
    CHECK_STR(g1->uuid, "GPU-00000001-fake-4000-8000-000000000001");
    CHECK_STR(g1->pci_bus_id, "00000000:11:00.0");
    CHECK_STR(g1->name, "Fake GPU 1 (test double)");

    ss_gpu_sample s;
    REQUIRE(ss_nvml_sample(n, 0, 12345, &s) == 0);
    CHECK_EQ_INT(s.at, 12345);
    CHECK_EQ_INT(s.index, 0);
    CHECK_EQ_INT(s.sm_clock_mhz, 1400);
    CHECK_EQ_INT(s.mem_clock_mhz, 1593);
    CHECK(s.reasons_known && s.reasons == 0);
    CHECK_EQ_INT(s.temperature_c, 60);
    CHECK_EQ_INT(s.power_mw, 250000);
    CHECK_EQ_INT(s.power_limit_mw, 300000);
    CHECK_EQ_INT(s.mem_used_bytes, 1LL << 30);
    CHECK_EQ_INT(s.mem_total_bytes, 80LL << 30);
    CHECK_EQ_INT(s.util_gpu_pct, 90);
    CHECK_EQ_INT(s.util_mem_pct, 40);
    CHECK_EQ_INT(s.ecc_uncorrected, 0);
    CHECK_EQ_INT(s.xid_count, 0);

    /* GPU 1: an Xid 79 (fallen off the bus) and 3 uncorrected ECC errors;
     * the Xid is counted once, however often the GPU is read. */
    for (int k = 0; k < 3; k++) {
        REQUIRE(ss_nvml_sample(n, 1, 2, &s) == 0);
        CHECK_EQ_INT(s.xid_count, 1);
        CHECK_EQ_INT(s.last_xid, 79);
        CHECK_EQ_INT(s.ecc_uncorrected, 3);
        CHECK_EQ_INT(s.sm_clock_mhz, 1410);
    }
    /* GPU 2: held down by the power cap. */
    REQUIRE(ss_nvml_sample(n, 2, 3, &s) == 0);
    CHECK(s.reasons_known);
    CHECK_EQ_INT(s.reasons, ss_gpu_reason_bit(SS_GPU_REASON_POWER_CAP));
    CHECK_EQ_INT(s.xid_count, 0);
    char buf[128];
    CHECK_STR(ss_gpu_reasons_format(s.reasons, buf, sizeof buf), "power_cap");
    CHECK_EQ_INT(ss_nvml_sample(n, 4, 4, &s), -1); /* no GPU 4 */
    ss_nvml_close(n);
}

static void decodes_clock_event_reasons(void)
{
    char buf[128];
    CHECK_STR(ss_gpu_reasons_format(0, buf, sizeof buf), "none");
    CHECK_STR(ss_gpu_reasons_format(0x4 | 0x40, buf, sizeof buf),
              "power_cap,hw_thermal");
    CHECK_STR(ss_gpu_reasons_format(0x8 | 0x80, buf, sizeof buf),
              "hw_slowdown,hw_power_brake");
    CHECK_STR(ss_gpu_reasons_format(0x1 | 0x2 | 0x10 | 0x20 | 0x100, buf,
                                    sizeof buf),
              "idle,app_clocks,sync_boost,sw_thermal,display_clocks");
    /* A bit NVML may add later is shown, not dropped. */
    CHECK_STR(ss_gpu_reasons_format(0x4 | 0x1000, buf, sizeof buf),
              "power_cap,0x1000");
    CHECK_STR(ss_gpu_reasons_format(0x400, buf, sizeof buf), "0x400");
    /* A short buffer is cut, never overrun. */
    char small[8];
    ss_gpu_reasons_format(0x4 | 0x40, small, sizeof small);
    CHECK(strlen(small) < sizeof small);
    /* NVML's bit values (nvmlClocksEventReason*), and which reasons slow
     * the work. */
    CHECK_EQ_INT(ss_gpu_reason_bit(SS_GPU_REASON_IDLE), 0x1);
    CHECK_EQ_INT(ss_gpu_reason_bit(SS_GPU_REASON_SW_THERMAL), 0x20);
    CHECK_EQ_INT(ss_gpu_reason_bit(SS_GPU_REASON_HW_POWER_BRAKE), 0x80);
    CHECK_EQ_INT(ss_gpu_reason_bit(SS_GPU_N_REASONS), 0);
    CHECK_STR(ss_gpu_reason_name(SS_GPU_N_REASONS), "?");
    CHECK(!ss_gpu_reason_slows(SS_GPU_REASON_IDLE));
    CHECK(!ss_gpu_reason_slows(SS_GPU_REASON_APP_CLOCKS));
    CHECK(ss_gpu_reason_slows(SS_GPU_REASON_POWER_CAP));
    CHECK(ss_gpu_reason_slows(SS_GPU_REASON_HW_THERMAL));
    CHECK(ss_gpu_reason_slows(SS_GPU_REASON_SYNC_BOOST));
}

static void maps_ranks_to_gpus(void)
{
    script(FAKE_COMPLETE, "4", NULL, NULL, NULL);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n && ss_nvml_count(n) == 4);
    /* No CUDA_VISIBLE_DEVICES: LOCAL_RANK is the NVML index. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, NULL), 0);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, "3"), 3);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, "4"), -1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, "x"), -1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, NULL, "-1"), -1);
    /* A list: LOCAL_RANK picks the entry. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "3,1,2", "0"), 3);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "3,1,2", "2"), 2);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "3, 1 ,2", "1"), 1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "3,1,2", "3"), -1);
    /* One GPU visible: that one, whatever LOCAL_RANK says. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "2", "5"), 2);
    /* UUIDs, or unique prefixes of them. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(
                     n, "GPU-00000002-fake-4000-8000-000000000002", "0"),
                 2);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "0,GPU-00000003", "1"), 3);
    /* An ambiguous prefix ends the list: one GPU is left. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "0,GPU-0000000", "1"), 0);
    /* The list ends at the first entry naming no GPU, as for CUDA. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "1,7,2", "1"), 1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "0,1,x,3", "2"), -1);
    /* No GPU. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "", "0"), -1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "-1", "0"), -1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "MIG-2d3f", "0"), -1);
    ss_nvml_close(n);
}

static void maps_a_process_by_its_environment(void)
{
    script(FAKE_COMPLETE, "4", NULL, NULL, NULL);
    ss_gpu_backend *n = ss_gpu_backend_open(NULL, "/nonexistent/amd.so");
    REQUIRE(n && ss_gpu_backend_count(n) == 4);
    CHECK_EQ_INT(ss_gpu_backend_vendor(n), SS_GPU_VENDOR_NVIDIA);
    /* A fake /proc. */
    char root[512], path[600];
    testing_tmp_path("proc", root, sizeof root);
    mkdir(root, 0700);
    snprintf(path, sizeof path, "%s/42", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/42/environ", root);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    static const char env[] = "PATH=/bin\0LOCAL_RANK=1\0HOME=/\0"
                              "CUDA_VISIBLE_DEVICES=2,3\0";
    fwrite(env, 1, sizeof env - 1, f);
    fclose(f);
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_pid(n, root, 42), 3);
    /* no such process */
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_pid(n, root, 43), -1);
    /* A real process started with its own environment. */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char *const argv[] = {"sleep", "30", NULL};
        char *const envp[] = {"LOCAL_RANK=2", "CUDA_VISIBLE_DEVICES=0,1,3",
                              NULL};
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    int gpu = -1;
    for (int tries = 0; tries < 200 && gpu != 3; tries++) {
        gpu = ss_gpu_backend_gpu_for_pid(n, "/proc", pid); /* after the exec */
        if (gpu != 3)
            usleep(10000);
    }
    CHECK_EQ_INT(gpu, 3);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ss_gpu_backend_close(n);
}

static void missing_functions_degrade_the_readings(void)
{
    script(FAKE_MINIMAL, "2", "1:0x20", "1:48", "1:5");
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n && ss_nvml_state_of(n) == SS_NVML_READY);
    REQUIRE(ss_nvml_count(n) == 2);
    CHECK(!ss_nvml_watches_xid(n)); /* no event functions */
    CHECK_STR(ss_nvml_gpu(n, 1)->uuid, "");
    CHECK_STR(ss_nvml_gpu(n, 1)->pci_bus_id, "");
    ss_gpu_sample s;
    REQUIRE(ss_nvml_sample(n, 1, 1, &s) == 0);
    CHECK_EQ_INT(s.sm_clock_mhz, 1410);
    /* The reasons through the function's older name. */
    CHECK(s.reasons_known && s.reasons == 0x20);
    CHECK(s.temperature_c == SS_MISSING && s.power_mw == SS_MISSING);
    CHECK(s.power_limit_mw == SS_MISSING && s.mem_used_bytes == SS_MISSING);
    CHECK(s.util_gpu_pct == SS_MISSING && s.ecc_uncorrected == SS_MISSING);
    CHECK(s.xid_count == SS_MISSING);
    /* Without UUIDs a UUID entry names no GPU; indexes still work. */
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "GPU-00000001", "0"), -1);
    CHECK_EQ_INT(ss_nvml_gpu_for_rank(n, "1", "0"), 1);
    ss_nvml_close(n);
    CHECK_EQ_INT(logged("init"), 1);
    CHECK_EQ_INT(logged("shutdown"), 1);
    CHECK(!still_loaded(FAKE_MINIMAL));
}

static void a_missing_required_function_makes_it_unusable(void)
{
    script(FAKE_BROKEN, "2", NULL, NULL, NULL);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n != NULL);
    CHECK_EQ_INT(ss_nvml_state_of(n), SS_NVML_UNUSABLE);
    CHECK(strstr(ss_nvml_why(n), "nvmlDeviceGetCount_v2") != NULL);
    CHECK_EQ_INT(ss_nvml_count(n), 0);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_nvml_sample(n, 0, 1, &s), -1);
    CHECK_EQ_INT(logged("init"), 0); /* refused before initialising */
    CHECK(!still_loaded(FAKE_BROKEN)); /* unloaded at once */
    ss_nvml_close(n);
}

static void a_failed_init_is_unusable_or_no_driver(void)
{
    script(FAKE_COMPLETE, "2", NULL, NULL, NULL);
    setenv("FAKE_NVML_INIT_RC", "999", 1);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n != NULL);
    CHECK_EQ_INT(ss_nvml_state_of(n), SS_NVML_UNUSABLE);
    CHECK(strstr(ss_nvml_why(n), "nvmlInit_v2") != NULL);
    CHECK(strstr(ss_nvml_why(n), "(999)") != NULL);
    ss_nvml_close(n);
    /* A library without its driver: no NVML, as on a CPU machine. */
    setenv("FAKE_NVML_INIT_RC", "9", 1);
    n = ss_nvml_open(NULL);
    REQUIRE(n != NULL);
    CHECK_EQ_INT(ss_nvml_state_of(n), SS_NVML_ABSENT);
    CHECK(strncmp(ss_nvml_why(n), "no NVML", 7) == 0);
    ss_nvml_close(n);
    CHECK_EQ_INT(logged("shutdown"), 0); /* never initialised */
    CHECK(!still_loaded(FAKE_COMPLETE));
    unsetenv("FAKE_NVML_INIT_RC");
}

static void a_lost_gpu_reads_as_missing(void)
{
    script(FAKE_COMPLETE, "4", NULL, NULL, NULL);
    setenv("FAKE_NVML_LOST", "3", 1);
    ss_nvml *n = ss_nvml_open(NULL);
    REQUIRE(n && ss_nvml_count(n) == 4);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_nvml_sample(n, 3, 1, &s), -1);
    CHECK(s.sm_clock_mhz == SS_MISSING && !s.reasons_known);
    CHECK_EQ_INT(ss_nvml_sample(n, 2, 1, &s), 0);
    ss_nvml_close(n);
    unsetenv("FAKE_NVML_LOST");
}

static void leaves_no_nvml_state_behind(void)
{
    script(FAKE_COMPLETE, "3", NULL, "0:13", NULL);
    ss_nvml *a = ss_nvml_open(FAKE_COMPLETE);
    ss_nvml *b = ss_nvml_open(NULL); /* NVML counts its initialisations */
    REQUIRE(a && b);
    CHECK(ss_nvml_state_of(a) == SS_NVML_READY &&
          ss_nvml_state_of(b) == SS_NVML_READY);
    CHECK(still_loaded(FAKE_COMPLETE));
    ss_nvml_close(a);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_nvml_sample(b, 2, 1, &s), 0); /* b unaffected */
    ss_nvml_close(b);
    CHECK_EQ_INT(logged("init"), 2);
    CHECK_EQ_INT(logged("shutdown"), 2);
    CHECK_EQ_INT(logged("event_set_create"), 2);
    CHECK_EQ_INT(logged("event_set_free"), 2);
    CHECK(!still_loaded(FAKE_COMPLETE));
}

/* A sample at AT_MS milliseconds with REASONS held, ECC errors and Xid
 * errors counted so far. */
static ss_gpu_sample at_ms(int64_t ms, uint64_t reasons, int64_t ecc,
                           int64_t xid)
{
    ss_gpu_sample s;
    memset(&s, 0, sizeof s);
    s.at = ms * 1000000;
    s.reasons_known = 1;
    s.reasons = reasons;
    s.sm_clock_mhz = reasons ? 1000 : 2000;
    s.mem_clock_mhz = s.mem_used_bytes = SS_MISSING;
    s.mem_total_bytes = s.util_mem_pct = SS_MISSING;
    s.power_mw = 300000;
    s.power_limit_mw = 350000;
    s.temperature_c = 50 + ms / 100;
    s.util_gpu_pct = 100;
    s.ecc_uncorrected = ecc;
    s.xid_count = xid;
    s.last_xid = xid ? 63 : 0;
    return s;
}

#define MS 1000000LL

static void timeline_gives_the_time_held_by_each_reason(void)
{
    ss_gpu_timeline *tl = ss_gpu_timeline_new();
    REQUIRE(tl != NULL);
    ss_gpu_step st;
    CHECK_EQ_INT(ss_gpu_timeline_window(tl, 0, 100 * MS, &st), -1);
    const uint64_t cap = ss_gpu_reason_bit(SS_GPU_REASON_POWER_CAP);
    const uint64_t idle = ss_gpu_reason_bit(SS_GPU_REASON_IDLE);
    ss_gpu_sample s[] = {at_ms(0, 0, 0, 0), at_ms(100, cap, 0, 0),
                         at_ms(200, idle, 2, 1), at_ms(300, 0, 2, 1)};
    for (size_t i = 0; i < 4; i++)
        ss_gpu_timeline_add(tl, &s[i]);
    /* [50, 250): 50 ms clean, 100 ms power cap, 50 ms idle. */
    REQUIRE(ss_gpu_timeline_window(tl, 50 * MS, 250 * MS, &st) == 0);
    CHECK_EQ_INT(st.covered_ns, 200 * MS);
    CHECK_EQ_INT(st.reason_ns[SS_GPU_REASON_POWER_CAP], 100 * MS);
    CHECK_EQ_INT(st.reason_ns[SS_GPU_REASON_IDLE], 50 * MS);
    CHECK_EQ_INT(st.slowed_ns, 100 * MS); /* idle does not slow */
    CHECK_EQ_INT(st.sm_clock_mhz, (50 * 2000 + 100 * 1000 + 50 * 1000) / 200);
    CHECK_EQ_INT(st.temperature_c, 52);
    CHECK_EQ_INT(st.power_mw, 300000);
    CHECK_EQ_INT(st.power_limit_mw, 350000);
    CHECK_EQ_INT(st.ecc_uncorrected_new, 2);
    CHECK_EQ_INT(st.xid_new, 1);
    CHECK_EQ_INT(st.last_xid, 63);
    /* A step shorter than the sampling period gets the state in force. */
    REQUIRE(ss_gpu_timeline_window(tl, 120 * MS, 130 * MS, &st) == 0);
    CHECK_EQ_INT(st.covered_ns, 10 * MS);
    CHECK_EQ_INT(st.reason_ns[SS_GPU_REASON_POWER_CAP], 10 * MS);
    CHECK_EQ_INT(st.ecc_uncorrected_new, 0);
    CHECK_EQ_INT(st.xid_new, 0);
    /* After the last sample its state holds for SS_GPU_SAMPLE_HOLD_NS. */
    REQUIRE(ss_gpu_timeline_window(tl, 300 * MS, 400 * MS, &st) == 0);
    CHECK_EQ_INT(st.covered_ns, 100 * MS);
    ss_mono_ns stale = 300 * MS + SS_GPU_SAMPLE_HOLD_NS;
    CHECK_EQ_INT(ss_gpu_timeline_window(tl, stale, stale + MS, &st), -1);
    CHECK(st.sm_clock_mhz == SS_MISSING && st.covered_ns == 0);
    /* Before the first sample nothing is known. */
    CHECK_EQ_INT(ss_gpu_timeline_window(tl, -100 * MS, 0, &st), -1);
    /* An older sample than the newest is ignored. */
    ss_gpu_sample late = at_ms(250, cap, 0, 0);
    ss_gpu_timeline_add(tl, &late);
    REQUIRE(ss_gpu_timeline_window(tl, 200 * MS, 300 * MS, &st) == 0);
    CHECK_EQ_INT(st.reason_ns[SS_GPU_REASON_POWER_CAP], 0);
    ss_gpu_timeline_free(tl);
    ss_gpu_timeline_free(NULL);
}

static void timeline_keeps_a_bounded_ring(void)
{
    ss_gpu_timeline *tl = ss_gpu_timeline_new();
    REQUIRE(tl != NULL);
    for (int i = 0; i < SS_GPU_TIMELINE_SAMPLES + 100; i++) {
        ss_gpu_sample s = at_ms(i * 10, 0, 0, 0);
        ss_gpu_timeline_add(tl, &s);
    }
    ss_gpu_step st;
    /* The first 100 samples are gone. */
    CHECK_EQ_INT(ss_gpu_timeline_window(tl, 0, 990 * MS, &st), -1);
    REQUIRE(ss_gpu_timeline_window(tl, 1000 * MS, 2000 * MS, &st) == 0);
    CHECK_EQ_INT(st.covered_ns, 1000 * MS);
    ss_gpu_timeline_free(tl);
}

/* Runs `stepscope gpus` with O (its front-end's options) in process;
 * returns its status and fills OUT with what it printed (stdout and
 * stderr).  The option checks: src/cli/cmd_cli_test.c. */
static int run_gpus(char *out, size_t len, const ss_gpus_opts *o)
{
    FILE *f = tmpfile();
    if (!f)
        return -100;
    int rc = ss_gpus_cmd(o, f, f);
    rewind(f);
    size_t got = fread(out, 1, len - 1, f);
    out[got] = '\0';
    fclose(f);
    return rc;
}

static void gpus_command_prints_every_gpu(void)
{
    static char out[1 << 16];
    script(FAKE_COMPLETE, "3", "2:0x44", "1:79", "1:3");
    setenv("CUDA_VISIBLE_DEVICES", "2,1", 1);
    setenv("LOCAL_RANK", "1", 1);
    const ss_gpus_opts plain = {.interval_ms = 500};
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 0);
    CHECK(strstr(out, "NVML: 3 GPUs, Xid errors watched") != NULL);
    CHECK(strstr(out, "GPU 2  Fake GPU 2 (test double)") != NULL);
    CHECK(strstr(out, "held down by  power_cap,hw_thermal") != NULL);
    CHECK(strstr(out, "power         252.0 W of a 300.0 W limit") != NULL);
    CHECK(strstr(out, "ECC           3 uncorrected") != NULL);
    CHECK(strstr(out, "Xid           1 seen, last 79") != NULL);
    CHECK(strstr(out, "LOCAL_RANK=1 -> GPU 1") != NULL);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("LOCAL_RANK");

    const ss_gpus_opts watch = {.watch_s = 1, .interval_ms = 200};
    CHECK_EQ_INT(run_gpus(out, sizeof out, &watch), 0);
    CHECK(strstr(out, "t=0.00s gpu=2 sm_mhz=1420") != NULL);
    CHECK(strstr(out, "summary gpu=2 util=90 sm_mhz=1420") != NULL);
    CHECK(strstr(out, "slowed=100% power_cap=100% hw_thermal=100%") != NULL);
    CHECK(strstr(out, "summary gpu=0 util=90 sm_mhz=1400 power_w=250.0 "
                      "max_temp_c=60 new_ecc=0 new_xid=0 slowed=0%\n") !=
          NULL);
    CHECK_EQ_INT(logged("shutdown"), 2);
}

static void gpus_command_fails_when_nvml_is_unreadable(void)
{
    static char out[1 << 16];
    const ss_gpus_opts plain = {.interval_ms = 500};
    const ss_gpus_opts require = {.interval_ms = 500, .require = 1};
    /* No NVML: fine, unless required. */
    script("/nonexistent/libnvidia-ml.so.1", NULL, NULL, NULL, NULL);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 0);
    CHECK(strncmp(out, "no NVML: ", 9) == 0);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &require), 1);
    /* NVML there, but a GPU cannot be read. */
    script(FAKE_COMPLETE, "2", NULL, NULL, NULL);
    setenv("FAKE_NVML_LOST", "1", 1);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 1);
    CHECK(strstr(out, "GPU 1 could not be read") != NULL);
    unsetenv("FAKE_NVML_LOST");
    /* NVML there, but unusable. */
    script(FAKE_BROKEN, "2", NULL, NULL, NULL);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 1);
    CHECK(strstr(out, "NVML unusable") != NULL);
    /* NVML there, no GPU: fine, unless required. */
    script(FAKE_COMPLETE, "0", NULL, NULL, NULL);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 0);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &require), 1);
}

TEST_LIST({"the_nvml_here_is_a_test_double", the_nvml_here_is_a_test_double},
          {"a_missing_library_is_no_nvml_not_an_error",
           a_missing_library_is_no_nvml_not_an_error},
          {"reads_every_gpu_of_the_double", reads_every_gpu_of_the_double},
          {"decodes_clock_event_reasons", decodes_clock_event_reasons},
          {"maps_ranks_to_gpus", maps_ranks_to_gpus},
          {"maps_a_process_by_its_environment",
           maps_a_process_by_its_environment},
          {"missing_functions_degrade_the_readings",
           missing_functions_degrade_the_readings},
          {"a_missing_required_function_makes_it_unusable",
           a_missing_required_function_makes_it_unusable},
          {"a_failed_init_is_unusable_or_no_driver",
           a_failed_init_is_unusable_or_no_driver},
          {"a_lost_gpu_reads_as_missing", a_lost_gpu_reads_as_missing},
          {"leaves_no_nvml_state_behind", leaves_no_nvml_state_behind},
          {"timeline_gives_the_time_held_by_each_reason",
           timeline_gives_the_time_held_by_each_reason},
          {"timeline_keeps_a_bounded_ring", timeline_keeps_a_bounded_ring},
          {"gpus_command_prints_every_gpu", gpus_command_prints_every_gpu},
          {"gpus_command_fails_when_nvml_is_unreadable",
           gpus_command_fails_when_nvml_is_unreadable})
