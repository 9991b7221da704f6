/*
 * nvml.c - NVML loaded with dlopen: GPU clocks, clock event reasons,
 * temperature, power, memory, ECC and Xid errors (nvml.h).
 *
 * Nothing of NVIDIA's is needed to build this file: the few NVML types and
 * constants used are declared below, with the values of NVIDIA's public
 * nvml.h (they are part of NVML's stable ABI), and every function is found
 * with dlsym when a handle opens.  A function that is missing costs only
 * the readings it gives.
 */
#include "nvml.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- NVML's ABI, as far as it is used here --------------------------- */

typedef int nvml_return;          /* nvmlReturn_t */
typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t */
typedef struct nvml_event_set_st *nvml_event_set; /* nvmlEventSet_t */

enum {
    NVML_OK = 0,                   /* NVML_SUCCESS */
    NVML_ERR_DRIVER_NOT_LOADED = 9,
    NVML_ERR_TIMEOUT = 10,
};
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };          /* nvmlClockType_t */
enum { NVML_TEMPERATURE_GPU = 0 };          /* nvmlTemperatureSensors_t */
enum { NVML_MEMORY_ERROR_UNCORRECTED = 1 }; /* nvmlMemoryErrorType_t */
enum { NVML_VOLATILE_ECC = 0 };             /* nvmlEccCounterType_t */
#define NVML_EVENT_XID_CRITICAL 0x8ULL      /* nvmlEventTypeXidCriticalError */

typedef struct { /* nvmlPciInfo_t (for nvmlDeviceGetPciInfo_v2 and _v3) */
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nvml_pci_info;

typedef struct { /* nvmlMemory_t */
    unsigned long long total, free, used;
} nvml_memory;

typedef struct { /* nvmlUtilization_t */
    unsigned int gpu, memory;
} nvml_utilization;

typedef struct { /* nvmlEventData_t (v2; v1 is its first three fields) */
    nvml_device device;
    unsigned long long event_type;
    unsigned long long event_data;   /* the Xid code */
    unsigned int gpu_instance_id, compute_instance_id;
} nvml_event_data;

/* The functions, as looked up. */
typedef struct {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*get_count)(unsigned int *);
    nvml_return (*get_handle)(unsigned int, nvml_device *);
    const char *(*error_string)(nvml_return);
    nvml_return (*get_uuid)(nvml_device, char *, unsigned int);
    nvml_return (*get_name)(nvml_device, char *, unsigned int);
    nvml_return (*get_pci)(nvml_device, nvml_pci_info *);
    nvml_return (*get_clock)(nvml_device, int, unsigned int *);
    nvml_return (*get_reasons)(nvml_device, unsigned long long *);
    nvml_return (*get_temperature)(nvml_device, int, unsigned int *);
    nvml_return (*get_power)(nvml_device, unsigned int *);
    nvml_return (*get_power_limit)(nvml_device, unsigned int *);
    nvml_return (*get_ecc)(nvml_device, int, int, unsigned long long *);
    nvml_return (*get_memory)(nvml_device, nvml_memory *);
    nvml_return (*get_utilization)(nvml_device, nvml_utilization *);
    nvml_return (*event_set_create)(nvml_event_set *);
    nvml_return (*event_set_free)(nvml_event_set);
    nvml_return (*register_events)(nvml_device, unsigned long long,
                                   nvml_event_set);
    nvml_return (*event_set_wait)(nvml_event_set, nvml_event_data *,
                                  unsigned int);
} nvml_api;

/* --- the handle -------------------------------------------------------- */

typedef struct {
    ss_gpu_info info;
    nvml_device device; /* NULL: no handle for this index */
    int xid_watched;
    int64_t xid_count, last_xid;
} gpu_state;

struct ss_nvml {
    ss_nvml_state state;
    char why[512];
    void *lib;        /* dlopen handle; NULL when not loaded */
    int initialised;  /* nvmlInit_v2 succeeded: nvmlShutdown is owed */
    nvml_api api;
    nvml_event_set events; /* NULL: Xid errors are not watched */
    uint32_t n_gpus;
    gpu_state gpus[SS_NVML_MAX_GPUS];
};

static const char *error_text(const ss_nvml *n, nvml_return rc)
{
    const char *s = n->api.error_string ? n->api.error_string(rc) : NULL;
    return s ? s : "NVML error";
}

/* The function the loaded library exports as NEWER, or else as OLDER (an
 * earlier name of it; may be NULL); NULL when it has neither. */
static void *find_either(ss_nvml *n, const char *newer, const char *older)
{
    void *f = dlsym(n->lib, newer);
    return f || !older ? f : dlsym(n->lib, older);
}

/* Resolves every function; returns the name of a required one that is
 * missing, or NULL when all required ones are there. */
static const char *resolve(ss_nvml *n)
{
    nvml_api *a = &n->api;
#define LOOKUP(field, newer, older) \
    (a->field = (__typeof__(a->field))find_either(n, newer, older))
    LOOKUP(init, "nvmlInit_v2", NULL);
    LOOKUP(shutdown, "nvmlShutdown", NULL);
    LOOKUP(get_count, "nvmlDeviceGetCount_v2", NULL);
    LOOKUP(get_handle, "nvmlDeviceGetHandleByIndex_v2", NULL);
    LOOKUP(error_string, "nvmlErrorString", NULL);
    LOOKUP(get_uuid, "nvmlDeviceGetUUID", NULL);
    LOOKUP(get_name, "nvmlDeviceGetName", NULL);
    LOOKUP(get_pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    LOOKUP(get_clock, "nvmlDeviceGetClockInfo", NULL);
    LOOKUP(get_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
           "nvmlDeviceGetCurrentClocksThrottleReasons");
    LOOKUP(get_temperature, "nvmlDeviceGetTemperature", NULL);
    LOOKUP(get_power, "nvmlDeviceGetPowerUsage", NULL);
    LOOKUP(get_power_limit, "nvmlDeviceGetEnforcedPowerLimit", NULL);
    LOOKUP(get_ecc, "nvmlDeviceGetTotalEccErrors", NULL);
    LOOKUP(get_memory, "nvmlDeviceGetMemoryInfo", NULL);
    LOOKUP(get_utilization, "nvmlDeviceGetUtilizationRates", NULL);
    LOOKUP(event_set_create, "nvmlEventSetCreate", NULL);
    LOOKUP(event_set_free, "nvmlEventSetFree", NULL);
    LOOKUP(register_events, "nvmlDeviceRegisterEvents", NULL);
    LOOKUP(event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
#undef LOOKUP
    if (!a->init)
        return "nvmlInit_v2";
    if (!a->shutdown)
        return "nvmlShutdown";
    if (!a->get_count)
        return "nvmlDeviceGetCount_v2";
    if (!a->get_handle)
        return "nvmlDeviceGetHandleByIndex_v2";
    return NULL;
}

static void read_identity(ss_nvml *n, gpu_state *g)
{
    const nvml_api *a = &n->api;
    if (!g->device)
        return;
    if (a->get_uuid && a->get_uuid(g->device, g->info.uuid,
                                   sizeof g->info.uuid) != NVML_OK)
        g->info.uuid[0] = '\0';
    if (a->get_name && a->get_name(g->device, g->info.name,
                                   sizeof g->info.name) != NVML_OK)
        g->info.name[0] = '\0';
    nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    if (a->get_pci && a->get_pci(g->device, &pci) == NVML_OK) {
        pci.bus_id[sizeof pci.bus_id - 1] = '\0';
        snprintf(g->info.pci_bus_id, sizeof g->info.pci_bus_id, "%s",
                 pci.bus_id);
    }
}

/* Registers every GPU for Xid errors on one event set; a GPU (or driver)
 * that does not support events is simply not watched. */
static void watch_xid(ss_nvml *n)
{
    const nvml_api *a = &n->api;
    if (!a->event_set_create || !a->event_set_free || !a->register_events ||
        !a->event_set_wait)
        return;
    if (a->event_set_create(&n->events) != NVML_OK) {
        n->events = NULL;
        return;
    }
    int any = 0;
    for (uint32_t i = 0; i < n->n_gpus; i++) {
        gpu_state *g = &n->gpus[i];
        g->xid_watched = g->device &&
            a->register_events(g->device, NVML_EVENT_XID_CRITICAL,
                               n->events) == NVML_OK;
        any |= g->xid_watched;
    }
    if (!any) {
        a->event_set_free(n->events);
        n->events = NULL;
    }
}

/* Collects the events already waiting, without blocking (timeout 0). */
static void poll_events(ss_nvml *n)
{
    if (!n->events)
        return;
    for (int k = 0; k < 256; k++) { /* bounded: a storm is read next time */
        nvml_event_data ev;
        memset(&ev, 0, sizeof ev);
        if (n->api.event_set_wait(n->events, &ev, 0) != NVML_OK)
            return; /* NVML_ERR_TIMEOUT: nothing more */
        if (!(ev.event_type & NVML_EVENT_XID_CRITICAL))
            continue;
        for (uint32_t i = 0; i < n->n_gpus; i++)
            if (n->gpus[i].device == ev.device) {
                n->gpus[i].xid_count++;
                n->gpus[i].last_xid = (int64_t)ev.event_data;
                break;
            }
    }
}

static void unload(ss_nvml *n)
{
    if (n->events && n->api.event_set_free)
        n->api.event_set_free(n->events);
    n->events = NULL;
    if (n->initialised)
        n->api.shutdown();
    n->initialised = 0;
    if (n->lib)
        dlclose(n->lib);
    n->lib = NULL;
    n->n_gpus = 0;
}

ss_nvml *ss_nvml_open(const char *lib_path)
{
    ss_nvml *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    if (!lib_path || !*lib_path)
        lib_path = getenv(SS_NVML_LIB_ENV);
    if (!lib_path || !*lib_path)
        lib_path = SS_NVML_DEFAULT_LIB;
    n->state = SS_NVML_ABSENT;
    n->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *e = dlerror();
        snprintf(n->why, sizeof n->why, "no NVML: %s", e ? e : lib_path);
        return n;
    }
    n->state = SS_NVML_UNUSABLE;
    const char *missing = resolve(n);
    if (missing) {
        snprintf(n->why, sizeof n->why, "NVML unusable: %s has no %s",
                 lib_path, missing);
        unload(n);
        return n;
    }
    nvml_return rc = n->api.init();
    if (rc != NVML_OK) {
        /* A library without its driver (a CPU machine with NVIDIA's user
         * space installed) has no GPUs to read: no NVML, as for no
         * library at all. */
        if (rc == NVML_ERR_DRIVER_NOT_LOADED)
            n->state = SS_NVML_ABSENT;
        snprintf(n->why, sizeof n->why, "%s: nvmlInit_v2: %s (%d)",
                 rc == NVML_ERR_DRIVER_NOT_LOADED ? "no NVML"
                                                  : "NVML unusable",
                 error_text(n, rc), rc);
        unload(n);
        return n;
    }
    n->initialised = 1;
    unsigned int count = 0;
    rc = n->api.get_count(&count);
    if (rc != NVML_OK) {
        snprintf(n->why, sizeof n->why,
                 "NVML unusable: nvmlDeviceGetCount_v2: %s (%d)",
                 error_text(n, rc), rc);
        unload(n);
        return n;
    }
    n->n_gpus = count < SS_NVML_MAX_GPUS ? count : SS_NVML_MAX_GPUS;
    for (uint32_t i = 0; i < n->n_gpus; i++) {
        gpu_state *g = &n->gpus[i];
        g->info.index = i;
        if (n->api.get_handle(i, &g->device) != NVML_OK)
            g->device = NULL;
        read_identity(n, g);
    }
    watch_xid(n);
    n->state = SS_NVML_READY;
    return n;
}

void ss_nvml_close(ss_nvml *n)
{
    if (!n)
        return;
    unload(n);
    free(n);
}

ss_nvml_state ss_nvml_state_of(const ss_nvml *n)
{
    return n->state;
}

const char *ss_nvml_why(const ss_nvml *n)
{
    return n->state == SS_NVML_READY ? "" : n->why;
}

uint32_t ss_nvml_count(const ss_nvml *n)
{
    return n->n_gpus;
}

const ss_gpu_info *ss_nvml_gpu(const ss_nvml *n, uint32_t index)
{
    return index < n->n_gpus ? &n->gpus[index].info : NULL;
}

int ss_nvml_watches_xid(const ss_nvml *n)
{
    return n->events != NULL;
}

/* Stores VALUE into *OUT and counts the reading in *OK when RC says the
 * call succeeded (called after the call, so VALUE is what it wrote). */
static void take(nvml_return rc, unsigned long long value, int64_t *out,
                 int *ok)
{
    if (rc == NVML_OK) {
        *out = (int64_t)value;
        (*ok)++;
    }
}

int ss_nvml_sample(ss_nvml *n, uint32_t index, ss_mono_ns at,
                   ss_gpu_sample *out)
{
    ss_gpu_sample_clear(out, index, at);
    if (index >= n->n_gpus || !n->gpus[index].device)
        return -1;
    poll_events(n);
    const nvml_api *a = &n->api;
    gpu_state *g = &n->gpus[index];
    nvml_device d = g->device;
    int ok = 0;
    unsigned int u = 0;
    unsigned long long ull = 0;
    nvml_return rc;
    if (a->get_clock) {
        rc = a->get_clock(d, NVML_CLOCK_SM, &u);
        take(rc, u, &out->sm_clock_mhz, &ok);
        rc = a->get_clock(d, NVML_CLOCK_MEM, &u);
        take(rc, u, &out->mem_clock_mhz, &ok);
    }
    if (a->get_reasons && a->get_reasons(d, &ull) == NVML_OK) {
        out->reasons_known = 1;
        out->reasons = ull;
        ok++;
    }
    if (a->get_temperature) {
        rc = a->get_temperature(d, NVML_TEMPERATURE_GPU, &u);
        take(rc, u, &out->temperature_c, &ok);
    }
    if (a->get_power) {
        rc = a->get_power(d, &u);
        take(rc, u, &out->power_mw, &ok);
    }
    if (a->get_power_limit) {
        rc = a->get_power_limit(d, &u);
        take(rc, u, &out->power_limit_mw, &ok);
    }
    nvml_memory mem;
    if (a->get_memory && a->get_memory(d, &mem) == NVML_OK) {
        out->mem_used_bytes = (int64_t)mem.used;
        out->mem_total_bytes = (int64_t)mem.total;
        ok++;
    }
    nvml_utilization util;
    if (a->get_utilization && a->get_utilization(d, &util) == NVML_OK) {
        out->util_gpu_pct = util.gpu;
        out->util_mem_pct = util.memory;
        ok++;
    }
    if (a->get_ecc) {
        rc = a->get_ecc(d, NVML_MEMORY_ERROR_UNCORRECTED, NVML_VOLATILE_ECC,
                        &ull);
        take(rc, ull, &out->ecc_uncorrected, &ok);
    }
    if (g->xid_watched) {
        out->xid_count = g->xid_count;
        out->last_xid = g->last_xid;
    }
    return ok > 0 ? 0 : -1;
}

/* --- which GPU a rank uses ---------------------------------------------- */

/* The NVML index one CUDA_VISIBLE_DEVICES entry [S, S+LEN) names, or -1. */
static int entry_index(const ss_nvml *n, const char *s, size_t len)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0)
        return -1;
    if (isdigit((unsigned char)s[0])) {
        long v = 0;
        for (size_t i = 0; i < len; i++) {
            if (!isdigit((unsigned char)s[i]) || v > SS_NVML_MAX_GPUS)
                return -1;
            v = v * 10 + (s[i] - '0');
        }
        return v < (long)n->n_gpus ? (int)v : -1;
    }
    if (len > 4 && strncmp(s, "GPU-", 4) == 0) {
        int found = -1;
        for (uint32_t i = 0; i < n->n_gpus; i++)
            if (strncasecmp(n->gpus[i].info.uuid, s, len) == 0) {
                if (found >= 0)
                    return -1; /* ambiguous prefix */
                found = (int)i;
            }
        return found;
    }
    return -1; /* "MIG-...", "-1", anything else */
}

int ss_nvml_gpu_for_rank(const ss_nvml *n, const char *cuda_visible_devices,
                         const char *local_rank)
{
    long ordinal = 0;
    if (local_rank && *local_rank) {
        char *end;
        errno = 0;
        ordinal = strtol(local_rank, &end, 10);
        if (errno || *end || ordinal < 0)
            return -1;
    }
    if (!cuda_visible_devices)
        return ordinal < (long)n->n_gpus ? (int)ordinal : -1;
    int visible[SS_NVML_MAX_GPUS];
    int n_visible = 0;
    const char *s = cuda_visible_devices;
    while (n_visible < SS_NVML_MAX_GPUS) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        int idx = entry_index(n, s, len);
        if (idx < 0)
            break; /* CUDA ignores this entry and every one after it */
        visible[n_visible++] = idx;
        if (!comma)
            break;
        s = comma + 1;
    }
    if (n_visible == 1)
        return visible[0];
    return ordinal < n_visible ? visible[ordinal] : -1;
}
