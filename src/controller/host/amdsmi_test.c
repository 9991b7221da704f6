/*
 * amdsmi_test.c - the AMD SMI reader (amdsmi.c), the GPU backend's choice
 * between NVML and AMD SMI (gpu_backend.c), and `stepscope gpus` on AMD
 * GPUs (gpu_cmd.c).
 *
 * NO GPU IS READ HERE.  Every AMD SMI these tests load is a TEST DOUBLE,
 * tests/support/fake_amdsmi.c, built as three shared libraries (complete,
 * minimal, broken) and loaded through STEPSCOPE_AMDSMI_LIB exactly as the
 * real libamd_smi.so would be; its values are scripted by FAKE_AMDSMI_*
 * variables.  The NVML met in the backend's tests is NVML's test double
 * (tests/support/fake_nvml.c).  What a double cannot show (that a real
 * driver answers the way AMD SMI's documentation says, and in the layouts
 * its header declares) is checked on a machine with AMD GPUs by
 * scripts/gpu_check.sh (docs/gpu.md).
 */
#include "amdsmi.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu_backend.h"
#include "nvml.h"
#include "testing.h"
#include "testing_tmp.h"

#define FAKE_COMPLETE FAKE_AMDSMI_DIR "/libfake_amdsmi.so"
#define FAKE_MINIMAL FAKE_AMDSMI_DIR "/libfake_amdsmi_minimal.so"
#define FAKE_BROKEN FAKE_AMDSMI_DIR "/libfake_amdsmi_broken.so"
#define FAKE_NVML FAKE_NVML_DIR "/libfake_nvml.so"
#define NO_NVML "/nonexistent/libnvidia-ml.so.1"

static char log_path[512];

/* Scripts the test double for the next open: LIB as STEPSCOPE_AMDSMI_LIB,
 * GPUS as FAKE_AMDSMI_GPUS (NULL: unset), every other FAKE_AMDSMI_*
 * variable unset; calls are logged into a fresh file (log_path). */
static void script(const char *lib, const char *gpus)
{
    static int n_logs;
    char name[64];
    snprintf(name, sizeof name, "amdsmi_calls_%d.log", n_logs++);
    testing_tmp_path(name, log_path, sizeof log_path);
    setenv("FAKE_AMDSMI_LOG", log_path, 1);
    static const char *const vars[] = {
        "FAKE_AMDSMI_SOCKETS",     "FAKE_AMDSMI_CPU",
        "FAKE_AMDSMI_VERSION",     "FAKE_AMDSMI_VIOLATION",
        "FAKE_AMDSMI_NO_VIOLATION", "FAKE_AMDSMI_THROTTLE",
        "FAKE_AMDSMI_ECC",         "FAKE_AMDSMI_MILLIDEGREES",
        "FAKE_AMDSMI_NO_EDGE",     "FAKE_AMDSMI_LOST",
        "FAKE_AMDSMI_INIT_RC"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    if (lib)
        setenv(SS_AMDSMI_LIB_ENV, lib, 1);
    else
        unsetenv(SS_AMDSMI_LIB_ENV);
    if (gpus)
        setenv("FAKE_AMDSMI_GPUS", gpus, 1);
    else
        unsetenv("FAKE_AMDSMI_GPUS");
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

static int still_loaded(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

/* Opens the double scripted so far and samples GPU INDEX into OUT. */
static void sample_one(uint32_t index, ss_gpu_sample *out)
{
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_state_of(a) == SS_GPU_READY);
    CHECK_EQ_INT(ss_amdsmi_sample(a, index, 5, out), 0);
    ss_amdsmi_close(a);
}

static void the_amd_smi_here_is_a_test_double(void)
{
    script(FAKE_COMPLETE, "1");
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_state_of(a) == SS_GPU_READY);
    CHECK(strstr(ss_amdsmi_gpu(a, 0)->name, "(test double)") != NULL);
    ss_amdsmi_close(a);
}

static void a_missing_library_is_no_amd_smi_not_an_error(void)
{
    script("/nonexistent/libamd_smi.so", NULL);
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(ss_amdsmi_state_of(a), SS_GPU_ABSENT);
    CHECK(strncmp(ss_amdsmi_why(a), "no AMD SMI: ", 12) == 0);
    CHECK(strstr(ss_amdsmi_why(a), "/nonexistent/libamd_smi.so") != NULL);
    CHECK_EQ_INT(ss_amdsmi_count(a), 0);
    CHECK(ss_amdsmi_gpu(a, 0) == NULL);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_amdsmi_sample(a, 0, 1, &s), -1);
    CHECK(s.mem_used_bytes == SS_MISSING && s.energy_mj == SS_MISSING);
    const ss_gpu_env env = {.local_rank = "0"};
    CHECK_EQ_INT(ss_amdsmi_gpu_for_rank(a, &env), -1);
    ss_amdsmi_close(a);
    ss_amdsmi_close(NULL);
    /* The default names too: this machine has no ROCm. */
    unsetenv(SS_AMDSMI_LIB_ENV);
    a = ss_amdsmi_open(NULL);
    REQUIRE(a != NULL);
    if (ss_amdsmi_state_of(a) == SS_GPU_ABSENT) {
        CHECK(strstr(ss_amdsmi_why(a), SS_AMDSMI_DEFAULT_LIB) != NULL);
        CHECK(strstr(ss_amdsmi_why(a), SS_AMDSMI_ROCM_LIB) != NULL);
    }
    ss_amdsmi_close(a);
}

/* Sockets, then processors; the CPU skipped; GPUs in PCI bus order. */
static void finds_the_gpus_of_every_socket_in_pci_order(void)
{
    script(FAKE_COMPLETE, "5");
    setenv("FAKE_AMDSMI_SOCKETS", "3", 1);
    setenv("FAKE_AMDSMI_CPU", "1", 1);
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_state_of(a) == SS_GPU_READY);
    CHECK_STR(ss_amdsmi_why(a), "");
    CHECK_STR(ss_amdsmi_version(a), "24.7.1");
    REQUIRE(ss_amdsmi_count(a) == 5);
    for (uint32_t i = 0; i < 5; i++) {
        const ss_gpu_info *g = ss_amdsmi_gpu(a, i);
        char want[96];
        CHECK_EQ_INT(g->index, i);
        snprintf(want, sizeof want, "00000000:%02X:00.0", 0x20 + i);
        CHECK_STR(g->pci_bus_id, want);
        snprintf(want, sizeof want, "fa4e%04x-0000-1000-8000-%012x", i, i);
        CHECK_STR(g->uuid, want);
        snprintf(want, sizeof want, "Fake AMD Instinct GPU %u (test double)",
                 i);
        CHECK_STR(g->name, want);
    }
    ss_amdsmi_close(a);
    CHECK_EQ_INT(logged("init"), 1);
    CHECK_EQ_INT(logged("shutdown"), 1);
}

/* Every field, in the 2024 layouts (the default of the double). */
static void reads_every_field_of_the_double(void)
{
    script(FAKE_COMPLETE, "4");
    setenv("FAKE_AMDSMI_ECC", "3:2", 1);
    ss_gpu_sample s;
    sample_one(3, &s);
    CHECK_EQ_INT(s.at, 5);
    CHECK_EQ_INT(s.index, 3);
    CHECK_EQ_INT(s.mem_used_bytes, 4LL << 30);
    CHECK_EQ_INT(s.mem_total_bytes, 192LL << 30);
    CHECK_EQ_INT(s.util_gpu_pct, 83);
    CHECK_EQ_INT(s.util_mem_pct, 30);
    CHECK_EQ_INT(s.temperature_c, 53);
    CHECK_EQ_INT(s.hotspot_c, 73);
    CHECK_EQ_INT(s.mem_temperature_c, 63);
    CHECK_EQ_INT(s.power_mw, 503000);
    CHECK_EQ_INT(s.power_avg_mw, 483000);
    CHECK_EQ_INT(s.power_limit_mw, 750000);
    CHECK_EQ_INT(s.energy_mj, 61200); /* 4e6 * 15.3 uJ */
    CHECK_EQ_INT(s.sm_clock_mhz, 2070); /* the average: MI300-like */
    CHECK_EQ_INT(s.mem_clock_mhz, 1300);
    CHECK_EQ_INT(s.reasons_known, 1);
    CHECK(s.reasons == 0);
    CHECK_EQ_INT(s.ecc_uncorrected, 2);
    CHECK_EQ_INT(s.ecc_corrected, 10);
    CHECK(s.xid_count == SS_MISSING); /* NVIDIA only */
    CHECK_EQ_INT(s.last_xid, 0);
}

/* The layouts of the other versions, and the temperature's unit. */
static void reads_the_layouts_of_each_version(void)
{
    ss_gpu_sample s;
    script(FAKE_COMPLETE, "2");
    setenv("FAKE_AMDSMI_VERSION", "23", 1);
    sample_one(1, &s);
    CHECK_EQ_INT(s.power_avg_mw, 481000);
    CHECK_EQ_INT(s.power_mw, 481000); /* no current power: the average */
    CHECK_EQ_INT(s.reasons_known, 0); /* no violation status, and the
                                         metrics say "not supported" */
    for (int v = 25; v <= 26; v++) {
        char ver[8];
        snprintf(ver, sizeof ver, "%d", v);
        setenv("FAKE_AMDSMI_VERSION", ver, 1);
        setenv("FAKE_AMDSMI_VIOLATION", "1:0x2", 1);
        sample_one(1, &s);
        CHECK_EQ_INT(s.power_mw, 501000);
        CHECK_EQ_INT(s.power_avg_mw, 481000);
        CHECK_EQ_INT(s.reasons_known, 1);
        CHECK(s.reasons == ss_gpu_reason_bit(SS_GPU_REASON_POWER_CAP));
    }
    script(FAKE_COMPLETE, "2");
    setenv("FAKE_AMDSMI_MILLIDEGREES", "1", 1);
    setenv("FAKE_AMDSMI_NO_EDGE", "1", 1);
    sample_one(0, &s);
    CHECK_EQ_INT(s.hotspot_c, 70);
    CHECK_EQ_INT(s.temperature_c, 70); /* no edge sensor: the hotspot */
    CHECK_EQ_INT(s.mem_temperature_c, 60);
}

/* Violation flags, and the throttle status where there are none. */
static void maps_violations_and_throttle_status_to_reasons(void)
{
    ss_gpu_sample s;
    script(FAKE_COMPLETE, "4");
    setenv("FAKE_AMDSMI_VIOLATION", "0:0x1,1:0x4,2:0x8,3:0x12", 1);
    const uint64_t want[4] = {
        ss_gpu_reason_bit(SS_GPU_REASON_HW_THERMAL),
        ss_gpu_reason_bit(SS_GPU_REASON_SW_THERMAL),
        ss_gpu_reason_bit(SS_GPU_REASON_HW_SLOWDOWN),
        ss_gpu_reason_bit(SS_GPU_REASON_POWER_CAP) |
            ss_gpu_reason_bit(SS_GPU_REASON_MEM_THERMAL),
    };
    for (uint32_t g = 0; g < 4; g++) {
        sample_one(g, &s);
        CHECK_EQ_INT(s.reasons_known, 1);
        CHECK(s.reasons == want[g]);
    }
    char buf[128];
    CHECK_STR(ss_gpu_reasons_format(want[3], buf, sizeof buf),
              "power_cap,mem_thermal");
    CHECK(ss_gpu_reason_slows(SS_GPU_REASON_MEM_THERMAL));
    script(FAKE_COMPLETE, "2");
    setenv("FAKE_AMDSMI_NO_VIOLATION", "1", 1);
    setenv("FAKE_AMDSMI_THROTTLE", "1:0x40", 1);
    sample_one(0, &s);
    CHECK_EQ_INT(s.reasons_known, 1);
    CHECK(s.reasons == 0);
    CHECK_EQ_INT(s.sm_clock_mhz, 2100); /* the current clock */
    sample_one(1, &s);
    CHECK(s.reasons == ss_gpu_reason_bit(SS_GPU_REASON_HW_SLOWDOWN));
}

static void missing_functions_degrade_the_readings(void)
{
    script(FAKE_MINIMAL, "2");
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_state_of(a) == SS_GPU_READY);
    CHECK_STR(ss_amdsmi_version(a), "?");
    REQUIRE(ss_amdsmi_count(a) == 2);
    const ss_gpu_info *g = ss_amdsmi_gpu(a, 0);
    CHECK_STR(g->uuid, "");
    CHECK_STR(g->name, "");
    CHECK_STR(g->pci_bus_id, "");
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_amdsmi_sample(a, 1, 5, &s), 0);
    CHECK(s.mem_used_bytes > 0);
    int64_t missing[] = {
        s.mem_total_bytes, s.util_gpu_pct,   s.util_mem_pct,
        s.temperature_c,   s.hotspot_c,      s.mem_temperature_c,
        s.power_mw,        s.power_avg_mw,   s.power_limit_mw,
        s.energy_mj,       s.sm_clock_mhz,   s.mem_clock_mhz,
        s.ecc_uncorrected, s.ecc_corrected,  s.xid_count};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
        CHECK(missing[i] == SS_MISSING);
    CHECK_EQ_INT(s.reasons_known, 0);
    ss_amdsmi_close(a);
}

static void a_missing_required_function_makes_it_unusable(void)
{
    script(FAKE_BROKEN, "2");
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(ss_amdsmi_state_of(a), SS_GPU_UNUSABLE);
    CHECK(strstr(ss_amdsmi_why(a), "has no amdsmi_get_processor_handles") !=
          NULL);
    CHECK_EQ_INT(ss_amdsmi_count(a), 0);
    ss_amdsmi_close(a);
    CHECK_EQ_INT(logged("init"), 0); /* checked before anything is called */
    CHECK(!still_loaded(FAKE_BROKEN));
}

static void a_failed_init_is_unusable_or_no_driver(void)
{
    script(FAKE_COMPLETE, "2");
    setenv("FAKE_AMDSMI_INIT_RC", "18", 1); /* AMDSMI_STATUS_INIT_ERROR */
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(ss_amdsmi_state_of(a), SS_GPU_UNUSABLE);
    CHECK(strstr(ss_amdsmi_why(a),
                 "AMD SMI unusable: amdsmi_init: Fake AMD SMI error (18)") !=
          NULL);
    ss_amdsmi_close(a);
    setenv("FAKE_AMDSMI_INIT_RC", "34", 1); /* DRIVER_NOT_LOADED */
    a = ss_amdsmi_open(NULL);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(ss_amdsmi_state_of(a), SS_GPU_ABSENT);
    CHECK(strncmp(ss_amdsmi_why(a), "no AMD SMI: amdsmi_init", 23) == 0);
    ss_amdsmi_close(a);
    CHECK_EQ_INT(logged("shutdown"), 0); /* nothing to shut down */
    CHECK(!still_loaded(FAKE_COMPLETE));
}

/* The double's GPU 1 answers nothing: its PCI bus id unknown, it is
 * numbered after the GPUs whose id is known. */
static void a_lost_gpu_reads_as_missing(void)
{
    script(FAKE_COMPLETE, "3");
    setenv("FAKE_AMDSMI_LOST", "1", 1);
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_count(a) == 3);
    CHECK_STR(ss_amdsmi_gpu(a, 1)->pci_bus_id, "00000000:22:00.0");
    CHECK_STR(ss_amdsmi_gpu(a, 2)->pci_bus_id, "");
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_amdsmi_sample(a, 2, 7, &s), -1);
    CHECK(s.mem_used_bytes == SS_MISSING && s.temperature_c == SS_MISSING);
    CHECK_EQ_INT(s.reasons_known, 0);
    CHECK_EQ_INT(ss_amdsmi_sample(a, 1, 7, &s), 0);
    CHECK_EQ_INT(ss_amdsmi_sample(a, 3, 7, &s), -1); /* out of range */
    ss_amdsmi_close(a);
}

static void leaves_no_amd_smi_state_behind(void)
{
    script(FAKE_COMPLETE, "2");
    ss_amdsmi *a = ss_amdsmi_open(FAKE_COMPLETE);
    ss_amdsmi *b = ss_amdsmi_open(NULL); /* AMD SMI counts its inits */
    REQUIRE(a && b);
    CHECK(ss_amdsmi_state_of(a) == SS_GPU_READY &&
          ss_amdsmi_state_of(b) == SS_GPU_READY);
    CHECK(still_loaded(FAKE_COMPLETE));
    ss_amdsmi_close(a);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_amdsmi_sample(b, 1, 1, &s), 0); /* b unaffected */
    ss_amdsmi_close(b);
    CHECK_EQ_INT(logged("init"), 2);
    CHECK_EQ_INT(logged("shutdown"), 2);
    CHECK(!still_loaded(FAKE_COMPLETE));
}

static void maps_ranks_to_gpus(void)
{
    script(FAKE_COMPLETE, "4");
    ss_amdsmi *a = ss_amdsmi_open(NULL);
    REQUIRE(a && ss_amdsmi_count(a) == 4);
    static const struct {
        const char *rocr, *hip, *cuda, *local_rank;
        int want;
    } cases[] = {
        {NULL, NULL, NULL, NULL, 0},
        {NULL, NULL, NULL, "3", 3},
        {NULL, NULL, NULL, "4", -1},
        {NULL, NULL, NULL, "x", -1},
        {NULL, "2,3", NULL, "1", 3},
        {NULL, NULL, "2,3", "1", 3},   /* HIP honours CUDA's variable */
        {NULL, "1", "2,3", "0", 1},    /* HIP's wins */
        {NULL, "2", NULL, "3", 2},     /* one GPU seen: that one */
        {"3,1,0", NULL, NULL, "1", 1},
        {"3,1,0", "2,0", NULL, "0", 0}, /* HIP indexes ROCR's list */
        {"3,1,0", "2,0", NULL, "1", 3},
        {"1,9,2", NULL, NULL, "1", 1},  /* the list ends at 9: only 1 */
        {"1,9,2", NULL, NULL, "0", 1},
        {"", NULL, NULL, "0", -1},      /* none visible */
        {"GPU-fa4e", NULL, NULL, "0", -1}, /* UUIDs are not resolved */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ss_gpu_env env = {.rocr_visible_devices = cases[i].rocr,
                                .hip_visible_devices = cases[i].hip,
                                .cuda_visible_devices = cases[i].cuda,
                                .local_rank = cases[i].local_rank};
        CHECK_EQ_INT(ss_amdsmi_gpu_for_rank(a, &env), cases[i].want);
    }
    ss_amdsmi_close(a);
}

/* NVML first when it sees a GPU, else AMD SMI; why names both. */
static void the_backend_falls_back_to_amd_smi(void)
{
    script(FAKE_COMPLETE, "3");
    setenv("FAKE_AMDSMI_VIOLATION", "2:0x2", 1);
    ss_gpu_backend *b = ss_gpu_backend_open(NO_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_state(b), SS_GPU_READY);
    CHECK_EQ_INT(ss_gpu_backend_vendor(b), SS_GPU_VENDOR_AMD);
    CHECK_STR(ss_gpu_backend_name(b), "AMD SMI");
    CHECK_STR(ss_gpu_backend_why(b), "");
    CHECK_EQ_INT(ss_gpu_backend_count(b), 3);
    CHECK_EQ_INT(ss_gpu_backend_watches_xid(b), 0);
    CHECK(strstr(ss_gpu_backend_gpu(b, 2)->name, "(test double)") != NULL);
    ss_gpu_sample s;
    CHECK_EQ_INT(ss_gpu_backend_sample(b, 2, 9, &s), 0);
    CHECK(s.reasons == ss_gpu_reason_bit(SS_GPU_REASON_POWER_CAP));
    const ss_gpu_env env = {.hip_visible_devices = "2", .local_rank = "0"};
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_env(b, &env), 2);
    ss_gpu_backend_close(b);
    CHECK_EQ_INT(logged("shutdown"), 1);

    /* NVML's double with GPUs wins, and AMD SMI is not even opened. */
    script(FAKE_COMPLETE, "3");
    setenv("FAKE_NVML_GPUS", "2", 1);
    b = ss_gpu_backend_open(FAKE_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_vendor(b), SS_GPU_VENDOR_NVIDIA);
    CHECK_EQ_INT(ss_gpu_backend_count(b), 2);
    ss_gpu_backend_close(b);
    CHECK_EQ_INT(logged("init"), 0);
    /* NVML without a GPU: AMD SMI's GPUs. */
    setenv("FAKE_NVML_GPUS", "0", 1);
    b = ss_gpu_backend_open(FAKE_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_vendor(b), SS_GPU_VENDOR_AMD);
    CHECK_EQ_INT(ss_gpu_backend_count(b), 3);
    ss_gpu_backend_close(b);
    /* Neither has a GPU: ready, with none. */
    setenv("FAKE_AMDSMI_GPUS", "0", 1);
    b = ss_gpu_backend_open(FAKE_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_state(b), SS_GPU_READY);
    CHECK_EQ_INT(ss_gpu_backend_vendor(b), SS_GPU_VENDOR_NVIDIA);
    CHECK_EQ_INT(ss_gpu_backend_count(b), 0);
    ss_gpu_backend_close(b);
    unsetenv("FAKE_NVML_GPUS");

    /* Neither library: absent, both named, said once in why. */
    script("/nonexistent/libamd_smi.so", NULL);
    b = ss_gpu_backend_open(NO_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_state(b), SS_GPU_ABSENT);
    CHECK_STR(ss_gpu_backend_name(b), "no GPU library");
    CHECK(strncmp(ss_gpu_backend_why(b), "no NVML: ", 9) == 0);
    CHECK(strstr(ss_gpu_backend_why(b), "; no AMD SMI: ") != NULL);
    CHECK_EQ_INT(ss_gpu_backend_count(b), 0);
    CHECK(ss_gpu_backend_gpu(b, 0) == NULL);
    CHECK_EQ_INT(ss_gpu_backend_sample(b, 0, 1, &s), -1);
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_env(b, &env), -1);
    ss_gpu_backend_close(b);
    /* One broken: unusable. */
    script(FAKE_BROKEN, "2");
    b = ss_gpu_backend_open(NO_NVML, NULL);
    REQUIRE(b != NULL);
    CHECK_EQ_INT(ss_gpu_backend_state(b), SS_GPU_UNUSABLE);
    CHECK(strstr(ss_gpu_backend_why(b), "AMD SMI unusable") != NULL);
    ss_gpu_backend_close(b);
}

/* A rank's AMD variables read from its /proc environment. */
static void maps_a_process_by_its_environment(void)
{
    script(FAKE_COMPLETE, "4");
    ss_gpu_backend *b = ss_gpu_backend_open(NO_NVML, NULL);
    REQUIRE(b && ss_gpu_backend_count(b) == 4);
    char root[512], path[600];
    testing_tmp_path("amd_proc", root, sizeof root);
    mkdir(root, 0700);
    snprintf(path, sizeof path, "%s/42", root);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/42/environ", root);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    static const char env[] = "PATH=/bin\0LOCAL_RANK=1\0"
                              "ROCR_VISIBLE_DEVICES=0,2,3\0"
                              "HIP_VISIBLE_DEVICES=2,1\0";
    fwrite(env, 1, sizeof env - 1, f);
    fclose(f);
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_pid(b, root, 42), 2);
    CHECK_EQ_INT(ss_gpu_backend_gpu_for_pid(b, root, 43), -1);
    ss_gpu_backend_close(b);
}

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

/* `stepscope gpus` lists AMD GPUs through the same command. */
static void gpus_command_lists_amd_gpus(void)
{
    static char out[1 << 16];
    script(FAKE_COMPLETE, "3");
    setenv(SS_NVML_LIB_ENV, NO_NVML, 1);
    setenv("FAKE_AMDSMI_VIOLATION", "2:0x12", 1);
    setenv("FAKE_AMDSMI_ECC", "1:4", 1);
    setenv("HIP_VISIBLE_DEVICES", "2,1", 1);
    setenv("LOCAL_RANK", "1", 1);
    const ss_gpus_opts plain = {.interval_ms = 500};
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 0);
    CHECK(strstr(out, "AMD SMI: 3 GPUs, no Xid errors (NVIDIA only)") !=
          NULL);
    CHECK(strstr(out, "GPU 2  Fake AMD Instinct GPU 2 (test double)  "
                      "fa4e0002-0000-1000-8000-000000000002  "
                      "00000000:22:00.0") != NULL);
    CHECK(strstr(out, "held down by  power_cap,mem_thermal") != NULL);
    CHECK(strstr(out, "temperature   52 C\n  hotspot       72 C, memory "
                      "62 C") != NULL);
    CHECK(strstr(out, "power         502.0 W of a 750.0 W limit\n"
                      "  power avg     482.0 W, energy 45.900 J") != NULL);
    CHECK(strstr(out, "memory        3.0 GiB used of 192.0 GiB") != NULL);
    CHECK(strstr(out, "utilisation   GPU 82 %, memory 30 %") != NULL);
    CHECK(strstr(out, "ECC           4 uncorrected, 8 corrected") != NULL);
    CHECK(strstr(out, "HIP_VISIBLE_DEVICES=2,1 CUDA_VISIBLE_DEVICES=(unset) "
                      "LOCAL_RANK=1 -> GPU 1") != NULL);
    unsetenv("HIP_VISIBLE_DEVICES");
    unsetenv("LOCAL_RANK");
    const ss_gpus_opts watch = {.watch_s = 1, .interval_ms = 200};
    CHECK_EQ_INT(run_gpus(out, sizeof out, &watch), 0);
    CHECK(strstr(out, "summary gpu=2 util=82 sm_mhz=2080") != NULL);
    CHECK(strstr(out, "slowed=100% power_cap=100% mem_thermal=100%") != NULL);
    CHECK(strstr(out, "summary gpu=0 util=80 sm_mhz=2100 power_w=500.0 "
                      "max_temp_c=50 new_ecc=0 new_xid=- slowed=0%\n") !=
          NULL);
    /* A GPU that cannot be read fails the command. */
    setenv("FAKE_AMDSMI_LOST", "1", 1);
    CHECK_EQ_INT(run_gpus(out, sizeof out, &plain), 1);
    CHECK(strstr(out, "GPU 2 could not be read") != NULL);
    unsetenv(SS_NVML_LIB_ENV);
}

TEST_LIST({"the_amd_smi_here_is_a_test_double",
           the_amd_smi_here_is_a_test_double},
          {"a_missing_library_is_no_amd_smi_not_an_error",
           a_missing_library_is_no_amd_smi_not_an_error},
          {"finds_the_gpus_of_every_socket_in_pci_order",
           finds_the_gpus_of_every_socket_in_pci_order},
          {"reads_every_field_of_the_double", reads_every_field_of_the_double},
          {"reads_the_layouts_of_each_version",
           reads_the_layouts_of_each_version},
          {"maps_violations_and_throttle_status_to_reasons",
           maps_violations_and_throttle_status_to_reasons},
          {"missing_functions_degrade_the_readings",
           missing_functions_degrade_the_readings},
          {"a_missing_required_function_makes_it_unusable",
           a_missing_required_function_makes_it_unusable},
          {"a_failed_init_is_unusable_or_no_driver",
           a_failed_init_is_unusable_or_no_driver},
          {"a_lost_gpu_reads_as_missing", a_lost_gpu_reads_as_missing},
          {"leaves_no_amd_smi_state_behind", leaves_no_amd_smi_state_behind},
          {"maps_ranks_to_gpus", maps_ranks_to_gpus},
          {"the_backend_falls_back_to_amd_smi",
           the_backend_falls_back_to_amd_smi},
          {"maps_a_process_by_its_environment",
           maps_a_process_by_its_environment},
          {"gpus_command_lists_amd_gpus", gpus_command_lists_amd_gpus})
