/*
 * fake_amdsmi.c - A TEST DOUBLE of AMD's AMD SMI library (libamd_smi.so).
 * No GPU is read here.
 *
 * The machines the test suite runs on have no AMD GPU, so the AMD SMI
 * reader (src/controller/host/amdsmi.c) is tested against this shared
 * library instead: it exports the AMD SMI functions stepscope looks up,
 * with the documented signatures, status codes and structure layouts of
 * AMD's public amdsmi.h, and answers with values scripted by the
 * environment, read when amdsmi_init is called:
 *
 *   FAKE_AMDSMI_GPUS=N        how many GPUs (default 4), dealt over
 *                             FAKE_AMDSMI_SOCKETS sockets (default 2) and
 *                             enumerated in reverse PCI bus order, so the
 *                             reader must sort them; GPU k (PCI bus 0x20+k)
 *                             is index k once sorted
 *   FAKE_AMDSMI_CPU=1         an AMD CPU among socket 0's processors (to be
 *                             skipped)
 *   FAKE_AMDSMI_VERSION=Y     amdsmi_get_lib_version's first number (default
 *                             24): 23, 24 and 25 on fill amdsmi_power_info_t
 *                             and amdsmi_violation_status_t in the layout
 *                             of that version (23: no violation status)
 *   FAKE_AMDSMI_VIOLATION=G:MASK,...  active violation flags of GPU G: 0x1
 *                             processor hot, 0x2 package power, 0x4 socket
 *                             thermal, 0x8 voltage regulator, 0x10 HBM
 *   FAKE_AMDSMI_NO_VIOLATION=1  the violation status is not supported; the
 *                             GPU metrics' throttle status is given instead
 *   FAKE_AMDSMI_THROTTLE=G:STATUS,...  that throttle status of GPU G
 *   FAKE_AMDSMI_ECC=G:COUNT,... uncorrectable ECC errors of GPU G
 *   FAKE_AMDSMI_ECC_AFTER=N   ...counted only from GPU G's Nth ECC reading
 *                             on (0 before): errors that arrive mid-run
 *   FAKE_AMDSMI_MILLIDEGREES=1  temperatures in millidegrees (older
 *                             versions)
 *   FAKE_AMDSMI_NO_EDGE=1     no edge temperature sensor (as on MI300)
 *   FAKE_AMDSMI_LOST=G        GPU G answers every reading with an error
 *   FAKE_AMDSMI_INIT_RC=RC    amdsmi_init returns RC (34: driver not
 *                             loaded, 18: init error)
 *   FAKE_AMDSMI_LOG=PATH      one line appended per init and shutdown
 *
 * GPU k answers: VRAM (k+1) GiB used of 192 GiB; graphics activity 80+k %,
 * memory controller 30 %; edge 50+k C, hotspot 70+k C, memory 60+k C;
 * current power 500+k W, average 480+k W, a 750 W cap; energy counter
 * 1000000*(k+1) at 15.3 uJ; graphics clock 2100-10k MHz, memory 1300 MHz;
 * 7+k corrected ECC errors; UUID "fa4e000k-0000-1000-8000-00000000000k".
 *
 * Built three ways (CMakeLists.txt): complete (fake_amdsmi); with only the
 * four required functions and the VRAM usage (FAKE_AMDSMI_MINIMAL:
 * fake_amdsmi_minimal); and without amdsmi_get_processor_handles
 * (FAKE_AMDSMI_NO_PROCESSORS: fake_amdsmi_broken).  Linked into no product.
 * The check a real GPU machine runs is scripts/gpu_check.sh (docs/gpu.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    OK = 0,
    INVAL = 1,
    NOT_SUPPORTED = 2,
    NOT_YET_IMPLEMENTED = 3,
    NOT_INIT = 32,
    IO_ERROR = 12,
};
#define FAKE_MAX_GPUS 16
#define FAKE_MAX_SOCKETS 4

typedef struct {
    int is_gpu;
    unsigned k; /* GPU number (PCI bus 0x20+k) */
    unsigned violation, throttle;
    unsigned long long ecc;
    unsigned ecc_reads;
    int lost;
} fake_proc;

static int init_count;
static unsigned n_gpus, n_sockets, version = 24;
static int no_violation, millidegrees, no_edge;
static unsigned ecc_after;
static fake_proc procs[FAKE_MAX_GPUS + 1];
static unsigned n_procs;
static fake_proc *by_gpu[FAKE_MAX_GPUS];
static int sockets[FAKE_MAX_SOCKETS]; /* handles point here */

static void log_call(const char *what)
{
    const char *path = getenv("FAKE_AMDSMI_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s\n", what);
        fclose(f);
    }
}

static int flag(const char *name)
{
    const char *v = getenv(name);
    return v && atoi(v) != 0;
}

/* Calls FN(gpu, value) for each "G:VALUE" of the list in variable NAME. */
static void each_pair(const char *name,
                      void (*fn)(unsigned, unsigned long long))
{
    const char *s = getenv(name);
    while (s && *s) {
        char *end;
        unsigned long g = strtoul(s, &end, 10);
        if (*end != ':')
            return;
        unsigned long long v = strtoull(end + 1, &end, 0);
        if (g < n_gpus)
            fn((unsigned)g, v);
        s = *end == ',' ? end + 1 : NULL;
    }
}

static void set_violation(unsigned g, unsigned long long v)
{
    by_gpu[g]->violation = (unsigned)v;
}

static void set_throttle(unsigned g, unsigned long long v)
{
    by_gpu[g]->throttle = (unsigned)v;
}

static void set_ecc(unsigned g, unsigned long long v)
{
    by_gpu[g]->ecc = v;
}

EXPORT int amdsmi_init(uint64_t flags)
{
    const char *rc = getenv("FAKE_AMDSMI_INIT_RC");
    if (rc && atoi(rc) != OK)
        return atoi(rc);
    if (!(flags & (1u << 1)))
        return INVAL; /* stepscope asks for AMD GPUs */
    log_call("init");
    if (init_count++ > 0)
        return OK;
    const char *n = getenv("FAKE_AMDSMI_GPUS");
    n_gpus = n ? (unsigned)atoi(n) : 4;
    if (n_gpus > FAKE_MAX_GPUS)
        n_gpus = FAKE_MAX_GPUS;
    const char *s = getenv("FAKE_AMDSMI_SOCKETS");
    n_sockets = s ? (unsigned)atoi(s) : 2;
    if (n_sockets < 1)
        n_sockets = 1;
    if (n_sockets > FAKE_MAX_SOCKETS)
        n_sockets = FAKE_MAX_SOCKETS;
    const char *v = getenv("FAKE_AMDSMI_VERSION");
    version = v ? (unsigned)atoi(v) : 24;
    no_violation = flag("FAKE_AMDSMI_NO_VIOLATION");
    millidegrees = flag("FAKE_AMDSMI_MILLIDEGREES");
    no_edge = flag("FAKE_AMDSMI_NO_EDGE");
    const char *after = getenv("FAKE_AMDSMI_ECC_AFTER");
    ecc_after = after ? (unsigned)atoi(after) : 0;
    memset(procs, 0, sizeof procs);
    n_procs = 0;
    if (flag("FAKE_AMDSMI_CPU"))
        procs[n_procs++].is_gpu = 0;
    for (unsigned i = 0; i < n_gpus; i++) {
        fake_proc *p = &procs[n_procs++];
        p->is_gpu = 1;
        p->k = n_gpus - 1 - i; /* reverse PCI bus order */
        by_gpu[p->k] = p;
    }
    each_pair("FAKE_AMDSMI_VIOLATION", set_violation);
    each_pair("FAKE_AMDSMI_THROTTLE", set_throttle);
    each_pair("FAKE_AMDSMI_ECC", set_ecc);
    const char *lost = getenv("FAKE_AMDSMI_LOST");
    if (lost && (unsigned)atoi(lost) < n_gpus)
        by_gpu[atoi(lost)]->lost = 1;
    return OK;
}

EXPORT int amdsmi_shut_down(void)
{
    if (!init_count)
        return NOT_INIT;
    log_call("shutdown");
    init_count--;
    return OK;
}

EXPORT int amdsmi_get_socket_handles(uint32_t *count, void **handles)
{
    if (!init_count)
        return NOT_INIT;
    if (!handles) {
        *count = n_sockets;
        return OK;
    }
    uint32_t n = *count < n_sockets ? *count : n_sockets;
    for (uint32_t s = 0; s < n; s++)
        handles[s] = &sockets[s];
    *count = n;
    return OK;
}

/* The processors of socket S: processor i lives on socket i % sockets. */
#ifndef FAKE_AMDSMI_NO_PROCESSORS
EXPORT int amdsmi_get_processor_handles(void *socket, uint32_t *count,
                                        void **handles)
{
    int *sock = socket;
    if (!init_count)
        return NOT_INIT;
    if (sock < sockets || sock >= sockets + n_sockets)
        return INVAL;
    unsigned s = (unsigned)(sock - sockets);
    uint32_t n = 0;
    for (unsigned i = 0; i < n_procs; i++) {
        if (i % n_sockets != s)
            continue;
        if (handles && n < *count)
            handles[n] = &procs[i];
        n++;
    }
    if (handles && n > *count)
        n = *count;
    *count = n;
    return OK;
}
#endif

static fake_proc *proc_of(void *handle)
{
    fake_proc *p = handle;
    if (!init_count || p < procs || p >= procs + n_procs)
        return NULL;
    return p;
}

/* Every GPU reading: the GPU, or the error it answers with. */
#define READ_GPU(handle, p)                                                   \
    fake_proc *p = proc_of(handle);                                           \
    if (!p || !p->is_gpu)                                                     \
        return INVAL;                                                         \
    if (p->lost)                                                              \
        return IO_ERROR

EXPORT int amdsmi_get_gpu_memory_usage(void *h, int type, uint64_t *used)
{
    READ_GPU(h, p);
    if (type != 0)
        return NOT_SUPPORTED;
    *used = (uint64_t)(p->k + 1) << 30;
    return OK;
}

#ifndef FAKE_AMDSMI_MINIMAL
EXPORT int amdsmi_get_processor_type(void *h, int *type)
{
    fake_proc *p = proc_of(h);
    if (!p)
        return INVAL;
    *type = p->is_gpu ? 1 : 2; /* AMD GPU, AMD CPU */
    return OK;
}

EXPORT int amdsmi_status_code_to_string(int status, const char **text)
{
    *text = status == OK ? "AMDSMI_STATUS_SUCCESS" : "Fake AMD SMI error";
    return OK;
}

typedef struct {
    uint32_t year_or_major, major, minor, release;
    const char *build;
} fake_version;

/* Answers before amdsmi_init too, as AMD SMI's does. */
EXPORT int amdsmi_get_lib_version(fake_version *v)
{
    const char *y = getenv("FAKE_AMDSMI_VERSION");
    v->year_or_major = y ? (unsigned)atoi(y) : 24;
    v->major = 7;
    v->minor = 1;
    v->release = 0;
    v->build = "fake";
    return OK;
}

EXPORT int amdsmi_get_gpu_device_bdf(void *h, uint64_t *bdf)
{
    READ_GPU(h, p);
    /* function 3 bits, device 5, bus 8, domain 48 */
    *bdf = (uint64_t)(0x20 + p->k) << 8;
    return OK;
}

EXPORT int amdsmi_get_gpu_device_uuid(void *h, unsigned *len, char *uuid)
{
    READ_GPU(h, p);
    if (*len < 37)
        return INVAL;
    snprintf(uuid, *len, "fa4e%04x-0000-1000-8000-%012x", p->k, p->k);
    return OK;
}

EXPORT int amdsmi_get_gpu_asic_info(void *h, void *info)
{
    READ_GPU(h, p);
    /* amdsmi_asic_info_t opens with market_name[256]; the rest is left
     * zero. */
    memset(info, 0, 1024);
    snprintf(info, 256, "Fake AMD Instinct GPU %u (test double)", p->k);
    return OK;
}

EXPORT int amdsmi_get_gpu_memory_total(void *h, int type, uint64_t *total)
{
    READ_GPU(h, p);
    if (type != 0)
        return NOT_SUPPORTED;
    *total = 192ULL << 30;
    return OK;
}

typedef struct {
    uint32_t gfx_activity, umc_activity, mm_activity, reserved[13];
} fake_engine_usage;

EXPORT int amdsmi_get_gpu_activity(void *h, fake_engine_usage *u)
{
    READ_GPU(h, p);
    memset(u, 0, sizeof *u);
    u->gfx_activity = 80 + p->k;
    u->umc_activity = 30;
    u->mm_activity = UINT16_MAX; /* not supported */
    return OK;
}

EXPORT int amdsmi_get_temp_metric(void *h, int sensor, int metric,
                                  int64_t *t)
{
    READ_GPU(h, p);
    if (metric != 0 || sensor > 2 || (sensor == 0 && no_edge))
        return NOT_SUPPORTED;
    static const int64_t base[] = {50, 70, 60}; /* edge, hotspot, VRAM */
    *t = base[sensor] + p->k;
    if (millidegrees)
        *t *= 1000;
    return OK;
}

/* amdsmi_power_info_t in the layout of VERSION (see amdsmi.c). */
EXPORT int amdsmi_get_power_info(void *h, void *info)
{
    READ_GPU(h, p);
    uint32_t cur = 500 + p->k, avg = 480 + p->k;
    unsigned char *b = info;
    if (version <= 23) {
        memset(b, 0, 64); /* average, voltages, limit, reserved[11] */
        memcpy(b, &avg, 4);
    } else if (version == 24) {
        memset(b, 0, 68); /* current, average, ..., reserved[11] */
        memcpy(b, &cur, 4);
        memcpy(b + 4, &avg, 4);
    } else {
        memset(b, 0, 64); /* uint64 socket_power, current, average, ... */
        uint64_t socket = cur;
        memcpy(b, &socket, 8);
        memcpy(b + 8, &cur, 4);
        memcpy(b + 12, &avg, 4);
    }
    return OK;
}

typedef struct {
    uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap,
        max_power_cap, reserved[3];
} fake_power_cap;

EXPORT int amdsmi_get_power_cap_info(void *h, uint32_t sensor,
                                     fake_power_cap *cap)
{
    READ_GPU(h, p);
    memset(cap, 0, sizeof *cap);
    cap->power_cap = 750000000ULL; /* microwatts */
    cap->default_power_cap = cap->max_power_cap = cap->power_cap;
    return OK;
}

EXPORT int amdsmi_get_energy_count(void *h, uint64_t *acc, float *res,
                                   uint64_t *ts)
{
    READ_GPU(h, p);
    *acc = 1000000ULL * (p->k + 1);
    *res = 15.3f;
    *ts = 123456789;
    return OK;
}

/* amdsmi_violation_status_t: 13 (version 24) or 15 (25 on) uint64 fields,
 * then the active flags, one uint8 each: processor hot, package power,
 * socket thermal, voltage regulator, HBM thermal. */
EXPORT int amdsmi_get_violation_status(void *h, void *info)
{
    READ_GPU(h, p);
    if (version <= 23)
        return NOT_YET_IMPLEMENTED;
    if (no_violation)
        return NOT_SUPPORTED;
    int at = version == 24 ? 104 : 120;
    unsigned char *b = info;
    memset(b, 0, (size_t)at + 8);
    for (int f = 0; f < 5; f++)
        b[at + f] = (p->violation >> f) & 1;
    return OK;
}

/* amdsmi_gpu_metrics_t: the fields of the kernel's gpu_metrics v1 read by
 * stepscope, at their offsets; the clocks as on MI300 (current ones not
 * supported, averages given) unless the violation status is not. */
EXPORT int amdsmi_get_gpu_metrics_info(void *h, void *info)
{
    READ_GPU(h, p);
    unsigned char *b = info;
    memset(b, 0xff, 1024); /* unsupported fields read as all ones */
    uint16_t gfx = (uint16_t)(2100 - 10 * p->k), mem = 1300;
    memcpy(b + (no_violation ? 54 : 40), &gfx, 2);
    memcpy(b + (no_violation ? 58 : 44), &mem, 2);
    uint32_t throttle = no_violation ? p->throttle : UINT32_MAX;
    memcpy(b + 68, &throttle, 4);
    return OK;
}

typedef struct {
    uint64_t correctable, uncorrectable, deferred, reserved[5];
} fake_error_count;

EXPORT int amdsmi_get_gpu_total_ecc_count(void *h, fake_error_count *ec)
{
    READ_GPU(h, p);
    memset(ec, 0, sizeof *ec);
    ec->correctable = 7 + p->k;
    ec->uncorrectable = ++p->ecc_reads > ecc_after ? p->ecc : 0;
    return OK;
}
#endif
