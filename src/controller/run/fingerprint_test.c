/*
 * fingerprint_test.c - unit tests for fingerprint.c: the CPU model, GPU
 * models and driver read from files laid out as /proc shows them, the
 * environment knobs, and the Python probe against a stand-in interpreter
 * (a shell script), including one that never answers.
 */
#include "fingerprint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "testing.h"
#include "testing_tmp.h"

static void write_file(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

/* Lays out fake /proc files and fills SRC with their paths. */
static void fake_proc(ss_fingerprint_sources *src, char *cpu, char *drv,
                      char *gpus, size_t len)
{
    testing_tmp_path("cpuinfo", cpu, len);
    write_file(cpu,
               "processor\t: 0\nvendor_id\t: GenuineIntel\n"
               "model name\t: Intel(R) Xeon(R) Platinum 8480C\n"
               "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n",
               0644);
    testing_tmp_path("nvversion", drv, len);
    write_file(drv,
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  "
               "Thu Feb 22 01:44:30 UTC 2024\nGCC version: gcc 12\n",
               0644);
    testing_tmp_path("gpus", gpus, len);
    mkdir(gpus, 0755);
    char dir[600], info[700];
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/0000:%02d:00.0", gpus, i);
        mkdir(dir, 0755);
        snprintf(info, sizeof info, "%s/information", dir);
        write_file(info, "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 1\n", 0644);
    }
    src->cpuinfo = cpu;
    src->nvidia_driver = drv;
    src->nvidia_gpus = gpus;
}

static void reads_cpu_gpu_driver_and_knobs(void)
{
    ss_fingerprint_sources src;
    char cpu[512], drv[512], gpus[512];
    fake_proc(&src, cpu, drv, gpus, sizeof cpu);
    setenv("OMP_NUM_THREADS", "4", 1);
    setenv("NCCL_ALGO", "Ring", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    char *argv[] = {"./train", "--steps", "3", NULL};
    ss_buf b = {0};
    ss_fingerprint_collect(&b, argv, "./train --steps 3", 4, 1, &src);
    REQUIRE(b.data && !b.oom);
    CHECK(strncmp(b.data, "{\"command\":\"./train --steps 3\",\"world_size\":4,"
                          "\"nodes\":1", 55) == 0);
    CHECK(strstr(b.data, "\"cpu\":\"Intel(R) Xeon(R) Platinum 8480C\""));
    /* Two GPUs of one model are named once. */
    CHECK(strstr(b.data, "\"gpu\":\"NVIDIA H100 80GB HBM3\","));
    CHECK(strstr(b.data, "\"gpu_driver\":\"550.54.14\""));
    CHECK(strstr(b.data, "\"stepscope\":\""));
    CHECK(strstr(b.data, "\"OMP_NUM_THREADS\":\"4\""));
    CHECK(strstr(b.data, "\"NCCL_ALGO\":\"Ring\""));
    CHECK(!strstr(b.data, "CUDA_VISIBLE_DEVICES"));
    CHECK(!strstr(b.data, "\"python\"")); /* not a Python command */
    CHECK(b.data[b.len - 1] == '}');
    ss_buf_free(&b);
    unsetenv("NCCL_ALGO");
}

static void missing_sources_are_left_out(void)
{
    ss_fingerprint_sources src = {"/nonexistent/cpuinfo", "/nonexistent/v",
                                  "/nonexistent/gpus"};
    char *argv[] = {"job", NULL};
    ss_buf b = {0};
    ss_fingerprint_collect(&b, argv, "job", 2, 1, &src);
    REQUIRE(b.data);
    CHECK(!strstr(b.data, "\"cpu\""));
    CHECK(!strstr(b.data, "\"gpu\""));
    CHECK(!strstr(b.data, "\"gpu_driver\""));
    CHECK(strstr(b.data, "\"world_size\":2"));
    ss_buf_free(&b);
}

static void python_versions_come_from_the_interpreter(void)
{
    char py[512];
    testing_tmp_path("python3", py, sizeof py);
    write_file(py, "#!/bin/sh\nprintf '3.11.7\\n2.3.1+cu121\\n'\n", 0755);
    ss_fingerprint_sources src = {"/nonexistent", "/nonexistent",
                                  "/nonexistent"};
    char *argv[] = {py, "train.py", NULL};
    ss_buf b = {0};
    ss_fingerprint_collect(&b, argv, "python3 train.py", 2, 1, &src);
    REQUIRE(b.data);
    CHECK(strstr(b.data, "\"python\":\"3.11.7\""));
    CHECK(strstr(b.data, "\"torch\":\"2.3.1+cu121\""));
    ss_buf_free(&b);
    CHECK(ss_fingerprint_is_python("/usr/bin/python3.11"));
    CHECK(ss_fingerprint_is_python("python"));
    CHECK(!ss_fingerprint_is_python("/opt/pythonic/bin/train"));
}

/* An interpreter that hangs is killed after the probe's limit and its
 * versions are left out. */
static void a_hanging_interpreter_is_killed(void)
{
    char py[512];
    testing_tmp_path("python-hangs", py, sizeof py);
    write_file(py, "#!/bin/sh\nexec sleep 30\n", 0755);
    ss_fingerprint_sources src = {"/nonexistent", "/nonexistent",
                                  "/nonexistent"};
    char *argv[] = {py, NULL};
    ss_buf b = {0};
    time_t t0 = time(NULL);
    ss_fingerprint_collect(&b, argv, "python-hangs", 1, 1, &src);
    CHECK(time(NULL) - t0 <= SS_FINGERPRINT_PROBE_MS / 1000 + 2);
    REQUIRE(b.data);
    CHECK(!strstr(b.data, "\"python\""));
    ss_buf_free(&b);
}

TEST_LIST({"reads_cpu_gpu_driver_and_knobs", reads_cpu_gpu_driver_and_knobs},
          {"missing_sources_are_left_out", missing_sources_are_left_out},
          {"python_versions_come_from_the_interpreter",
           python_versions_come_from_the_interpreter},
          {"a_hanging_interpreter_is_killed", a_hanging_interpreter_is_killed})
