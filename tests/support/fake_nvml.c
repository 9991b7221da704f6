/*
 * fake_nvml.c - A TEST DOUBLE of NVIDIA's NVML library.  No GPU is read here.
 *
 * The machines the test suite runs on have no NVIDIA GPU, so the NVML
 * reader (src/controller/host/nvml.c) is tested against this shared
 * library instead: it exports the NVML functions stepscope looks up, with
 * NVML's calling conventions and constants, and answers with values
 * scripted by the environment, read when nvmlInit_v2 is called:
 *
 *   FAKE_NVML_GPUS=N          how many GPUs (default 4)
 *   FAKE_NVML_REASONS=G:MASK,...  clock event reason mask of GPU G
 *                             (e.g. "2:0x4": GPU 2 held by the power cap)
 *   FAKE_NVML_XID=G:CODE,...  Xid errors, each delivered once to every event
 *                             set GPU G is registered with
 *   FAKE_NVML_ECC=G:COUNT,... uncorrected volatile ECC errors of GPU G
 *   FAKE_NVML_LOST=G          GPU G answers every reading with GPU_IS_LOST
 *   FAKE_NVML_INIT_RC=RC      nvmlInit_v2 returns RC (e.g. 9: driver not
 *                             loaded, 999: unknown error)
 *   FAKE_NVML_LOG=PATH        one line appended per init, shutdown, event
 *                             set create and free, so a test can check
 *                             that nothing was left open
 *
 * GPU i answers: SM clock 1400+10i MHz, memory clock 1593 MHz, 60+i C,
 * 250+i W of a 300 W limit, (i+1) GiB used of 80 GiB, 90 % / 40 %
 * utilisation, UUID "GPU-0000000i-fake-...".
 *
 * Built three ways (CMakeLists.txt): complete (fake_nvml); with only the
 * required functions, the clocks and the older name of the reasons
 * function (FAKE_NVML_MINIMAL: fake_nvml_minimal); and without
 * nvmlDeviceGetCount_v2 (FAKE_NVML_NO_COUNT: fake_nvml_broken).  Linked into
 * no product.  The check a real GPU machine runs is scripts/gpu_check.sh
 * (docs/gpu.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    OK = 0,
    ERR_UNINITIALIZED = 1,
    ERR_INVALID_ARGUMENT = 2,
    ERR_TIMEOUT = 10,
    ERR_GPU_IS_LOST = 15,
};
#define FAKE_MAX_GPUS 16
#define FAKE_MAX_XIDS 16
#define EVENT_XID 0x8ULL

typedef struct fake_gpu {
    unsigned index;
    unsigned long long reasons, ecc;
    int lost;
} fake_gpu;

typedef struct {
    fake_gpu *device;
    unsigned long long event_type, event_data;
    unsigned gpu_instance_id, compute_instance_id;
} fake_event;

#define FAKE_MAX_SETS 8
typedef struct {
    int live;
    unsigned registered; /* bit per GPU */
} fake_event_set;

static int init_count;
static unsigned n_gpus;
static fake_gpu gpus[FAKE_MAX_GPUS];
static struct {
    unsigned gpu;
    unsigned long long code;
    unsigned delivered; /* bit per event set: each set gets each event */
} xids[FAKE_MAX_XIDS];
static unsigned n_xids;

static void log_call(const char *what)
{
    const char *path = getenv("FAKE_NVML_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s\n", what);
        fclose(f);
    }
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
        fn((unsigned)g, v);
        s = *end == ',' ? end + 1 : NULL;
    }
}

static void set_reasons(unsigned g, unsigned long long v)
{
    if (g < FAKE_MAX_GPUS)
        gpus[g].reasons = v;
}

static void set_ecc(unsigned g, unsigned long long v)
{
    if (g < FAKE_MAX_GPUS)
        gpus[g].ecc = v;
}

static void add_xid(unsigned g, unsigned long long code)
{
    if (n_xids < FAKE_MAX_XIDS) {
        xids[n_xids].gpu = g;
        xids[n_xids].code = code;
        xids[n_xids].delivered = 0;
        n_xids++;
    }
}

static fake_gpu *gpu_of(void *device)
{
    fake_gpu *g = device;
    if (!init_count || g < gpus || g >= gpus + n_gpus)
        return NULL;
    return g;
}

EXPORT int nvmlInit_v2(void)
{
    const char *rc = getenv("FAKE_NVML_INIT_RC");
    if (rc && atoi(rc) != OK)
        return atoi(rc);
    log_call("init");
    if (init_count++ > 0)
        return OK;
    memset(gpus, 0, sizeof gpus);
    const char *n = getenv("FAKE_NVML_GPUS");
    n_gpus = n ? (unsigned)atoi(n) : 4;
    if (n_gpus > FAKE_MAX_GPUS)
        n_gpus = FAKE_MAX_GPUS;
    for (unsigned i = 0; i < n_gpus; i++)
        gpus[i].index = i;
    each_pair("FAKE_NVML_REASONS", set_reasons);
    each_pair("FAKE_NVML_ECC", set_ecc);
    n_xids = 0;
    each_pair("FAKE_NVML_XID", add_xid);
    const char *lost = getenv("FAKE_NVML_LOST");
    if (lost && (unsigned)atoi(lost) < n_gpus)
        gpus[atoi(lost)].lost = 1;
    return OK;
}

EXPORT int nvmlShutdown(void)
{
    if (!init_count)
        return ERR_UNINITIALIZED;
    log_call("shutdown");
    init_count--;
    return OK;
}

EXPORT const char *nvmlErrorString(int rc)
{
    return rc == OK ? "Success" : "Fake NVML error";
}

#ifndef FAKE_NVML_NO_COUNT
EXPORT int nvmlDeviceGetCount_v2(unsigned *count)
{
    if (!init_count)
        return ERR_UNINITIALIZED;
    *count = n_gpus;
    return OK;
}
#endif

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device)
{
    if (!init_count)
        return ERR_UNINITIALIZED;
    if (index >= n_gpus)
        return ERR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return OK;
}

/* Every reading: the GPU, or the error it answers with. */
#define READ_GPU(device, g)                                                   \
    fake_gpu *g = gpu_of(device);                                             \
    if (!g)                                                                   \
        return ERR_INVALID_ARGUMENT;                                          \
    if (g->lost)                                                              \
        return ERR_GPU_IS_LOST

EXPORT int nvmlDeviceGetClockInfo(void *device, int type, unsigned *mhz)
{
    READ_GPU(device, g);
    *mhz = type == 1 ? 1400 + 10 * g->index : 1593;
    return OK;
}

#ifdef FAKE_NVML_MINIMAL
EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(void *device,
                                                     unsigned long long *r)
{
    READ_GPU(device, g);
    *r = g->reasons;
    return OK;
}
#else
EXPORT int nvmlDeviceGetCurrentClocksEventReasons(void *device,
                                                  unsigned long long *r)
{
    READ_GPU(device, g);
    *r = g->reasons;
    return OK;
}

EXPORT int nvmlDeviceGetUUID(void *device, char *uuid, unsigned length)
{
    READ_GPU(device, g);
    snprintf(uuid, length, "GPU-%08u-fake-4000-8000-%012u", g->index,
             g->index);
    return OK;
}

EXPORT int nvmlDeviceGetName(void *device, char *name, unsigned length)
{
    READ_GPU(device, g);
    snprintf(name, length, "Fake GPU %u (test double)", g->index);
    return OK;
}

typedef struct {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} fake_pci_info;

EXPORT int nvmlDeviceGetPciInfo_v3(void *device, fake_pci_info *pci)
{
    READ_GPU(device, g);
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x10 + g->index;
    snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02X:00.0", pci->bus);
    snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "0000:%02X:00.0",
             pci->bus);
    return OK;
}

EXPORT int nvmlDeviceGetTemperature(void *device, int sensor, unsigned *c)
{
    READ_GPU(device, g);
    *c = 60 + g->index;
    return OK;
}

EXPORT int nvmlDeviceGetPowerUsage(void *device, unsigned *mw)
{
    READ_GPU(device, g);
    *mw = 250000 + 1000 * g->index;
    return OK;
}

EXPORT int nvmlDeviceGetEnforcedPowerLimit(void *device, unsigned *mw)
{
    READ_GPU(device, g);
    *mw = 300000;
    return OK;
}

EXPORT int nvmlDeviceGetTotalEccErrors(void *device, int error_type,
                                       int counter_type,
                                       unsigned long long *count)
{
    READ_GPU(device, g);
    *count = error_type == 1 && counter_type == 0 ? g->ecc : 0;
    return OK;
}

typedef struct { unsigned long long total, free, used; } fake_memory;

EXPORT int nvmlDeviceGetMemoryInfo(void *device, fake_memory *m)
{
    READ_GPU(device, g);
    m->total = 80ULL << 30;
    m->used = (unsigned long long)(g->index + 1) << 30;
    m->free = m->total - m->used;
    return OK;
}

typedef struct { unsigned gpu, memory; } fake_utilization;

EXPORT int nvmlDeviceGetUtilizationRates(void *device, fake_utilization *u)
{
    READ_GPU(device, g);
    u->gpu = 90;
    u->memory = 40;
    return OK;
}

static fake_event_set sets[FAKE_MAX_SETS];

static fake_event_set *set_of(void *set)
{
    fake_event_set *e = set;
    if (e < sets || e >= sets + FAKE_MAX_SETS || !e->live)
        return NULL;
    return e;
}

EXPORT int nvmlEventSetCreate(void **set)
{
    if (!init_count)
        return ERR_UNINITIALIZED;
    for (int k = 0; k < FAKE_MAX_SETS; k++)
        if (!sets[k].live) {
            log_call("event_set_create");
            sets[k].live = 1;
            sets[k].registered = 0;
            *set = &sets[k];
            return OK;
        }
    return ERR_INVALID_ARGUMENT;
}

EXPORT int nvmlEventSetFree(void *set)
{
    fake_event_set *e = set_of(set);
    if (!e)
        return ERR_INVALID_ARGUMENT;
    log_call("event_set_free");
    e->live = 0;
    return OK;
}

EXPORT int nvmlDeviceRegisterEvents(void *device, unsigned long long types,
                                    void *set)
{
    READ_GPU(device, g);
    fake_event_set *e = set_of(set);
    if (!e || !(types & EVENT_XID))
        return ERR_INVALID_ARGUMENT;
    e->registered |= 1u << g->index;
    return OK;
}

/* Delivers the next scripted Xid of a GPU registered with SET; NVML's
 * timeout error when there is none (the fake never waits). */
EXPORT int nvmlEventSetWait_v2(void *set, fake_event *ev, unsigned timeout)
{
    fake_event_set *e = set_of(set);
    if (!e)
        return ERR_INVALID_ARGUMENT;
    unsigned me = 1u << (e - sets);
    for (unsigned k = 0; k < n_xids; k++) {
        unsigned g = xids[k].gpu;
        if ((xids[k].delivered & me) || g >= n_gpus ||
            !(e->registered & (1u << g)))
            continue;
        xids[k].delivered |= me;
        memset(ev, 0, sizeof *ev);
        ev->device = &gpus[g];
        ev->event_type = EVENT_XID;
        ev->event_data = xids[k].code;
        ev->gpu_instance_id = ev->compute_instance_id = 0xFFFFFFFFu;
        return OK;
    }
    return ERR_TIMEOUT;
}
#endif
