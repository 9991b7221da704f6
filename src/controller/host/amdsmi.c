/*
 * amdsmi.c - AMD SMI loaded with dlopen: VRAM, activity, temperatures,
 * power, power cap, violation and throttle flags, clocks, ECC and energy
 * of AMD GPUs (amdsmi.h).
 *
 * Nothing of AMD's is needed to build this file: the few types, constants
 * and structure layouts used are declared below from the documented
 * amdsmi.h of AMD's public source, and every function is found with dlsym
 * when a handle opens.  Where a structure changed between versions, the
 * call fills a zeroed scratch buffer larger than any layout and the fields
 * are read at the offsets of the layout the library's version uses.
 */
#include "amdsmi.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- AMD SMI's ABI, as far as it is used here ------------------------- */

typedef int amd_status;            /* amdsmi_status_t */
typedef void *amd_handle;          /* amdsmi_socket_handle, ..._processor_ */

enum {
    AMD_OK = 0,                    /* AMDSMI_STATUS_SUCCESS */
    AMD_DRIVER_NOT_LOADED = 34,    /* AMDSMI_STATUS_DRIVER_NOT_LOADED */
};
#define AMD_INIT_AMD_GPUS (1ULL << 1) /* AMDSMI_INIT_AMD_GPUS */
enum { AMD_PROCESSOR_AMD_GPU = 1 };   /* AMDSMI_PROCESSOR_TYPE_AMD_GPU */
enum { AMD_MEM_VRAM = 0 };            /* AMDSMI_MEM_TYPE_VRAM */
enum { AMD_TEMP_EDGE = 0, AMD_TEMP_HOTSPOT = 1, AMD_TEMP_VRAM = 2 };
enum { AMD_TEMP_CURRENT = 0 };        /* AMDSMI_TEMP_CURRENT */

typedef struct { /* amdsmi_engine_usage_t */
    uint32_t gfx_activity, umc_activity, mm_activity, reserved[13];
} amd_engine_usage;

typedef struct { /* amdsmi_power_cap_info_t (microwatts) */
    uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap,
        max_power_cap, reserved[3];
} amd_power_cap_info;

typedef struct { /* amdsmi_error_count_t */
    uint64_t correctable, uncorrectable, deferred, reserved[5];
} amd_error_count;

typedef struct { /* amdsmi_version_t: the first number is the year (23,
                    24, 25) in the versions that have one, the major
                    version where the year was dropped */
    uint32_t first, second, third, fourth;
    const char *build;
} amd_version;

/* Offsets of the fields read from structures whose layout changed, per
 * layout generation (told from amd_version.first, see layout_of). */
typedef struct {
    int power_current; /* amdsmi_power_info_t: current_socket_power (W,
                          uint32), -1: absent */
    int power_average; /* ...: average_socket_power (W, uint32) */
    int violation_active; /* amdsmi_violation_status_t: active_prochot_thrm,
                             then ppt, socket, vr, hbm (uint8 each); -1:
                             the function did not exist yet */
} amd_layout;

static const amd_layout layout_2023 = {-1, 0, -1}; /* up to 23.x */
static const amd_layout layout_2024 = {0, 4, 104}; /* 24.x (ROCm 6.1-6.3) */
static const amd_layout layout_2025 = {8, 12, 120}; /* 25.x on (6.4, 7.x) */

/* amdsmi_gpu_metrics_t begins with the kernel's gpu_metrics v1 fields at
 * fixed offsets (after a 4-byte header): */
enum {
    METRICS_AVG_GFXCLK = 40, /* average_gfxclk_frequency, uint16 MHz */
    METRICS_AVG_UCLK = 44,   /* average_uclk_frequency */
    METRICS_CUR_GFXCLK = 54, /* current_gfxclk (UINT16_MAX from v1.4) */
    METRICS_CUR_UCLK = 58,   /* current_uclk */
    METRICS_THROTTLE = 68,   /* throttle_status, uint32 */
};

#define SCRATCH_BYTES 65536 /* more than any layout of the structures */

typedef struct {
    amd_status (*init)(uint64_t);
    amd_status (*shut_down)(void);
    amd_status (*get_sockets)(uint32_t *, amd_handle *);
    amd_status (*get_processors)(amd_handle, uint32_t *, amd_handle *);
    amd_status (*get_type)(amd_handle, int *);
    amd_status (*status_string)(amd_status, const char **);
    amd_status (*lib_version)(amd_version *);
    amd_status (*get_bdf)(amd_handle, uint64_t *);
    amd_status (*get_uuid)(amd_handle, unsigned int *, char *);
    amd_status (*get_asic_info)(amd_handle, void *);
    amd_status (*mem_total)(amd_handle, int, uint64_t *);
    amd_status (*mem_usage)(amd_handle, int, uint64_t *);
    amd_status (*activity)(amd_handle, amd_engine_usage *);
    amd_status (*temp_metric)(amd_handle, int, int, int64_t *);
    amd_status (*power_info)(amd_handle, void *);
    amd_status (*power_cap_info)(amd_handle, uint32_t, amd_power_cap_info *);
    amd_status (*violation)(amd_handle, void *);
    amd_status (*metrics)(amd_handle, void *);
    amd_status (*ecc_total)(amd_handle, amd_error_count *);
    amd_status (*energy)(amd_handle, uint64_t *, float *, uint64_t *);
} amd_api;

/* --- the handle -------------------------------------------------------- */

typedef struct {
    ss_gpu_info info;
    amd_handle processor;
    uint64_t bdf; /* amdsmi_bdf_t as a number: sorts in PCI bus order */
} amd_gpu;

struct ss_amdsmi {
    ss_gpu_state state;
    char why[512];
    char version[64];
    void *lib;
    int initialised;
    amd_api api;
    const amd_layout *layout; /* NULL: version unknown, layouts not read */
    unsigned char *scratch;   /* SCRATCH_BYTES */
    uint32_t n_gpus;
    amd_gpu gpus[SS_GPU_MAX];
};

static const char *status_text(const ss_amdsmi *a, amd_status rc)
{
    const char *s = NULL;
    if (a->api.status_string && a->api.status_string(rc, &s) != AMD_OK)
        s = NULL;
    return s ? s : "AMD SMI error";
}

static const char *resolve(ss_amdsmi *a)
{
    amd_api *p = &a->api;
#define LOOKUP(field, name) \
    (p->field = (__typeof__(p->field))dlsym(a->lib, name))
    LOOKUP(init, "amdsmi_init");
    LOOKUP(shut_down, "amdsmi_shut_down");
    LOOKUP(get_sockets, "amdsmi_get_socket_handles");
    LOOKUP(get_processors, "amdsmi_get_processor_handles");
    LOOKUP(get_type, "amdsmi_get_processor_type");
    LOOKUP(status_string, "amdsmi_status_code_to_string");
    LOOKUP(lib_version, "amdsmi_get_lib_version");
    LOOKUP(get_bdf, "amdsmi_get_gpu_device_bdf");
    LOOKUP(get_uuid, "amdsmi_get_gpu_device_uuid");
    LOOKUP(get_asic_info, "amdsmi_get_gpu_asic_info");
    LOOKUP(mem_total, "amdsmi_get_gpu_memory_total");
    LOOKUP(mem_usage, "amdsmi_get_gpu_memory_usage");
    LOOKUP(activity, "amdsmi_get_gpu_activity");
    LOOKUP(temp_metric, "amdsmi_get_temp_metric");
    LOOKUP(power_info, "amdsmi_get_power_info");
    LOOKUP(power_cap_info, "amdsmi_get_power_cap_info");
    LOOKUP(violation, "amdsmi_get_violation_status");
    LOOKUP(metrics, "amdsmi_get_gpu_metrics_info");
    LOOKUP(ecc_total, "amdsmi_get_gpu_total_ecc_count");
    LOOKUP(energy, "amdsmi_get_energy_count");
#undef LOOKUP
    if (!p->init)
        return "amdsmi_init";
    if (!p->shut_down)
        return "amdsmi_shut_down";
    if (!p->get_sockets)
        return "amdsmi_get_socket_handles";
    if (!p->get_processors)
        return "amdsmi_get_processor_handles";
    return NULL;
}

/* The layouts of the library's version: its first number is the year up
 * to 25.x (23, 24, 25), then the major version (26 on; a plain ROCm-style
 * major below 20 is taken as recent too). */
static void read_version(ss_amdsmi *a)
{
    amd_version v;
    memset(&v, 0, sizeof v);
    snprintf(a->version, sizeof a->version, "?");
    if (!a->api.lib_version || a->api.lib_version(&v) != AMD_OK ||
        v.first == 0)
        return;
    snprintf(a->version, sizeof a->version, "%u.%u.%u", v.first, v.second,
             v.third);
    if (v.first >= 20 && v.first <= 23)
        a->layout = &layout_2023;
    else if (v.first == 24)
        a->layout = &layout_2024;
    else
        a->layout = &layout_2025;
}

static void read_identity(ss_amdsmi *a, amd_gpu *g)
{
    const amd_api *p = &a->api;
    if (p->get_bdf && p->get_bdf(g->processor, &g->bdf) == AMD_OK) {
        /* function 3 bits, device 5, bus 8, domain 48 */
        snprintf(g->info.pci_bus_id, sizeof g->info.pci_bus_id,
                 "%08llX:%02X:%02X.%X",
                 (unsigned long long)(g->bdf >> 16),
                 (unsigned)(g->bdf >> 8) & 0xff,
                 (unsigned)(g->bdf >> 3) & 0x1f, (unsigned)g->bdf & 0x7);
    } else {
        g->bdf = UINT64_MAX; /* unknown: after every known one */
    }
    unsigned int len = sizeof g->info.uuid;
    if (!p->get_uuid || p->get_uuid(g->processor, &len, g->info.uuid) !=
                            AMD_OK)
        g->info.uuid[0] = '\0';
    g->info.uuid[sizeof g->info.uuid - 1] = '\0';
    memset(a->scratch, 0, SCRATCH_BYTES);
    if (p->get_asic_info &&
        p->get_asic_info(g->processor, a->scratch) == AMD_OK) {
        /* market_name, char[256], opens amdsmi_asic_info_t */
        snprintf(g->info.name, sizeof g->info.name, "%.*s",
                 (int)sizeof g->info.name - 1, (const char *)a->scratch);
    }
}

static int by_bdf(const void *x, const void *y)
{
    const amd_gpu *a = x, *b = y;
    return a->bdf < b->bdf ? -1 : a->bdf > b->bdf;
}

/* Collects every AMD GPU of every socket; returns 0 or a status. */
static amd_status find_gpus(ss_amdsmi *a, const char **what)
{
    const amd_api *p = &a->api;
    uint32_t n_sockets = 0;
    *what = "amdsmi_get_socket_handles";
    amd_status rc = p->get_sockets(&n_sockets, NULL);
    if (rc != AMD_OK)
        return rc;
    amd_handle sockets[SS_GPU_MAX];
    if (n_sockets > SS_GPU_MAX)
        n_sockets = SS_GPU_MAX;
    if (n_sockets && (rc = p->get_sockets(&n_sockets, sockets)) != AMD_OK)
        return rc;
    *what = "amdsmi_get_processor_handles";
    for (uint32_t s = 0; s < n_sockets && a->n_gpus < SS_GPU_MAX; s++) {
        amd_handle procs[SS_GPU_MAX];
        uint32_t n = 0;
        if ((rc = p->get_processors(sockets[s], &n, NULL)) != AMD_OK)
            return rc;
        if (n > SS_GPU_MAX)
            n = SS_GPU_MAX;
        if (n && (rc = p->get_processors(sockets[s], &n, procs)) != AMD_OK)
            return rc;
        for (uint32_t i = 0; i < n && a->n_gpus < SS_GPU_MAX; i++) {
            int type = AMD_PROCESSOR_AMD_GPU;
            if (p->get_type && (p->get_type(procs[i], &type) != AMD_OK ||
                                type != AMD_PROCESSOR_AMD_GPU))
                continue;
            amd_gpu *g = &a->gpus[a->n_gpus++];
            g->processor = procs[i];
            read_identity(a, g);
        }
    }
    qsort(a->gpus, a->n_gpus, sizeof a->gpus[0], by_bdf);
    for (uint32_t i = 0; i < a->n_gpus; i++)
        a->gpus[i].info.index = i;
    return AMD_OK;
}

static void unload(ss_amdsmi *a)
{
    if (a->initialised)
        a->api.shut_down();
    a->initialised = 0;
    if (a->lib)
        dlclose(a->lib);
    a->lib = NULL;
    a->n_gpus = 0;
}

ss_amdsmi *ss_amdsmi_open(const char *lib_path)
{
    ss_amdsmi *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->scratch = malloc(SCRATCH_BYTES);
    if (!a->scratch) {
        free(a);
        return NULL;
    }
    if (!lib_path || !*lib_path)
        lib_path = getenv(SS_AMDSMI_LIB_ENV);
    a->state = SS_GPU_ABSENT;
    snprintf(a->version, sizeof a->version, "?");
    if (lib_path && *lib_path) {
        a->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    } else {
        lib_path = SS_AMDSMI_DEFAULT_LIB;
        a->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
        if (!a->lib) {
            const char *e = dlerror();
            snprintf(a->why, sizeof a->why, "%s; ", e ? e : lib_path);
            lib_path = SS_AMDSMI_ROCM_LIB;
            a->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    if (!a->lib) {
        const char *e = dlerror();
        char first[256];
        snprintf(first, sizeof first, "%s", a->why);
        snprintf(a->why, sizeof a->why, "no AMD SMI: %s%s", first,
                 e ? e : lib_path);
        return a;
    }
    a->state = SS_GPU_UNUSABLE;
    const char *missing = resolve(a);
    if (missing) {
        snprintf(a->why, sizeof a->why, "AMD SMI unusable: %s has no %s",
                 lib_path, missing);
        unload(a);
        return a;
    }
    read_version(a);
    amd_status rc = a->api.init(AMD_INIT_AMD_GPUS);
    if (rc != AMD_OK) {
        /* The library without the amdgpu driver: no AMD GPUs to read. */
        if (rc == AMD_DRIVER_NOT_LOADED)
            a->state = SS_GPU_ABSENT;
        snprintf(a->why, sizeof a->why, "%s: amdsmi_init: %s (%d)",
                 rc == AMD_DRIVER_NOT_LOADED ? "no AMD SMI"
                                             : "AMD SMI unusable",
                 status_text(a, rc), rc);
        unload(a);
        return a;
    }
    a->initialised = 1;
    const char *what = "";
    rc = find_gpus(a, &what);
    if (rc != AMD_OK) {
        snprintf(a->why, sizeof a->why, "AMD SMI unusable: %s: %s (%d)",
                 what, status_text(a, rc), rc);
        unload(a);
        return a;
    }
    a->state = SS_GPU_READY;
    return a;
}

void ss_amdsmi_close(ss_amdsmi *a)
{
    if (!a)
        return;
    unload(a);
    free(a->scratch);
    free(a);
}

ss_gpu_state ss_amdsmi_state_of(const ss_amdsmi *a)
{
    return a->state;
}

const char *ss_amdsmi_why(const ss_amdsmi *a)
{
    return a->state == SS_GPU_READY ? "" : a->why;
}

const char *ss_amdsmi_version(const ss_amdsmi *a)
{
    return a->version;
}

uint32_t ss_amdsmi_count(const ss_amdsmi *a)
{
    return a->n_gpus;
}

const ss_gpu_info *ss_amdsmi_gpu(const ss_amdsmi *a, uint32_t index)
{
    return index < a->n_gpus ? &a->gpus[index].info : NULL;
}

/* --- sampling ----------------------------------------------------------- */

static uint32_t u32_at(const unsigned char *p, int off)
{
    uint32_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

static uint16_t u16_at(const unsigned char *p, int off)
{
    uint16_t v;
    memcpy(&v, p + off, sizeof v);
    return v;
}

/* A temperature in degrees Celsius: versions answer in degrees or in
 * millidegrees, and no GPU runs at 1000 C or below -1000 C. */
static int64_t celsius(int64_t v)
{
    return v >= 1000 || v <= -1000 ? v / 1000 : v;
}

/* A percentage, or SS_MISSING for AMD SMI's "not supported" values
 * (UINT16_MAX, UINT32_MAX: anything above 100). */
static int64_t percent(uint32_t v)
{
    return v <= 100 ? (int64_t)v : SS_MISSING;
}

/* Watts (AMD SMI's unit for power) as milliwatts; SS_MISSING for 0 (not
 * measured) and the "not supported" values. */
static int64_t watts_mw(uint32_t w)
{
    return w == 0 || w >= 0xFFFF ? SS_MISSING : (int64_t)w * 1000;
}

static void read_temperatures(ss_amdsmi *a, amd_handle h, ss_gpu_sample *out,
                              int *ok)
{
    if (!a->api.temp_metric)
        return;
    int64_t t;
    int64_t *to[] = {&out->temperature_c, &out->hotspot_c,
                     &out->mem_temperature_c};
    const int sensors[] = {AMD_TEMP_EDGE, AMD_TEMP_HOTSPOT, AMD_TEMP_VRAM};
    for (int i = 0; i < 3; i++)
        if (a->api.temp_metric(h, sensors[i], AMD_TEMP_CURRENT, &t) ==
            AMD_OK) {
            *to[i] = celsius(t);
            (*ok)++;
        }
    /* MI300 GPUs have no edge sensor: the die is the hotspot. */
    if (out->temperature_c == SS_MISSING)
        out->temperature_c = out->hotspot_c;
}

static void read_power(ss_amdsmi *a, amd_handle h, ss_gpu_sample *out,
                       int *ok)
{
    const amd_api *p = &a->api;
    memset(a->scratch, 0, SCRATCH_BYTES);
    if (a->layout && p->power_info &&
        p->power_info(h, a->scratch) == AMD_OK) {
        if (a->layout->power_current >= 0)
            out->power_mw = watts_mw(u32_at(a->scratch,
                                            a->layout->power_current));
        out->power_avg_mw = watts_mw(u32_at(a->scratch,
                                            a->layout->power_average));
        if (out->power_mw == SS_MISSING)
            out->power_mw = out->power_avg_mw;
        (*ok)++;
    }
    amd_power_cap_info cap;
    memset(&cap, 0, sizeof cap);
    if (p->power_cap_info && p->power_cap_info(h, 0, &cap) == AMD_OK &&
        cap.power_cap > 0 && cap.power_cap != UINT64_MAX) {
        out->power_limit_mw = (int64_t)(cap.power_cap / 1000); /* uW */
        (*ok)++;
    }
    uint64_t acc = 0, ts = 0;
    float resolution = 0;
    if (p->energy && p->energy(h, &acc, &resolution, &ts) == AMD_OK &&
        resolution > 0) {
        out->energy_mj = (int64_t)((double)acc * resolution / 1000.0);
        (*ok)++;
    }
}

/* The violation flags (MI300 on), else the throttle status of the GPU
 * metrics (older GPUs): which reasons hold the GPU down now. */
static void read_reasons(ss_amdsmi *a, amd_handle h, ss_gpu_sample *out,
                         int *ok)
{
    const amd_api *p = &a->api;
    memset(a->scratch, 0, SCRATCH_BYTES);
    if (a->layout && a->layout->violation_active >= 0 && p->violation &&
        p->violation(h, a->scratch) == AMD_OK) {
        static const ss_gpu_reason flag_reason[5] = {
            SS_GPU_REASON_HW_THERMAL,  /* processor hot */
            SS_GPU_REASON_POWER_CAP,   /* package power tracking */
            SS_GPU_REASON_SW_THERMAL,  /* socket thermal */
            SS_GPU_REASON_HW_SLOWDOWN, /* voltage regulator */
            SS_GPU_REASON_MEM_THERMAL, /* HBM thermal */
        };
        int known = 0;
        for (int f = 0; f < 5; f++) {
            uint8_t v = a->scratch[a->layout->violation_active + f];
            if (v == UINT8_MAX)
                continue; /* not supported */
            known = 1;
            if (v == 1)
                out->reasons |= ss_gpu_reason_bit(flag_reason[f]);
        }
        if (known) {
            out->reasons_known = 1;
            (*ok)++;
        }
    }
    memset(a->scratch, 0, SCRATCH_BYTES);
    if (!p->metrics || p->metrics(h, a->scratch) != AMD_OK)
        return;
    uint16_t gfx = u16_at(a->scratch, METRICS_CUR_GFXCLK);
    uint16_t mem = u16_at(a->scratch, METRICS_CUR_UCLK);
    if (gfx == 0 || gfx == UINT16_MAX)
        gfx = u16_at(a->scratch, METRICS_AVG_GFXCLK);
    if (mem == 0 || mem == UINT16_MAX)
        mem = u16_at(a->scratch, METRICS_AVG_UCLK);
    if (gfx && gfx != UINT16_MAX)
        out->sm_clock_mhz = gfx;
    if (mem && mem != UINT16_MAX)
        out->mem_clock_mhz = mem;
    uint32_t throttle = u32_at(a->scratch, METRICS_THROTTLE);
    if (!out->reasons_known && throttle != UINT32_MAX) {
        /* A bit mask whose meaning depends on the GPU: throttled or not. */
        out->reasons_known = 1;
        if (throttle)
            out->reasons |= ss_gpu_reason_bit(SS_GPU_REASON_HW_SLOWDOWN);
    }
    (*ok)++;
}

int ss_amdsmi_sample(ss_amdsmi *a, uint32_t index, ss_mono_ns at,
                     ss_gpu_sample *out)
{
    ss_gpu_sample_clear(out, index, at);
    if (index >= a->n_gpus)
        return -1;
    const amd_api *p = &a->api;
    amd_handle h = a->gpus[index].processor;
    int ok = 0;
    uint64_t used = 0, total = 0;
    if (p->mem_usage && p->mem_usage(h, AMD_MEM_VRAM, &used) == AMD_OK) {
        out->mem_used_bytes = (int64_t)used;
        ok++;
    }
    if (p->mem_total && p->mem_total(h, AMD_MEM_VRAM, &total) == AMD_OK) {
        out->mem_total_bytes = (int64_t)total;
        ok++;
    }
    amd_engine_usage use;
    memset(&use, 0, sizeof use);
    if (p->activity && p->activity(h, &use) == AMD_OK) {
        out->util_gpu_pct = percent(use.gfx_activity);
        out->util_mem_pct = percent(use.umc_activity);
        ok++;
    }
    read_temperatures(a, h, out, &ok);
    read_power(a, h, out, &ok);
    read_reasons(a, h, out, &ok);
    amd_error_count ec;
    memset(&ec, 0, sizeof ec);
    if (p->ecc_total && p->ecc_total(h, &ec) == AMD_OK) {
        out->ecc_uncorrected = (int64_t)ec.uncorrectable;
        out->ecc_corrected = (int64_t)ec.correctable;
        ok++;
    }
    return ok > 0 ? 0 : -1;
}

/* --- which GPU a rank uses ---------------------------------------------- */

/* Keeps the entries of LIST (N of them) at the positions SPEC names
 * (comma-separated numbers; the list ends at the first entry that is not
 * one or is out of range); SPEC NULL keeps all.  Returns the new count. */
static int narrow(int *list, int n, const char *spec)
{
    if (!spec)
        return n;
    int kept[SS_GPU_MAX];
    int k = 0;
    const char *s = spec;
    while (k < SS_GPU_MAX) {
        while (isspace((unsigned char)*s))
            s++;
        char *end;
        errno = 0;
        long pos = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : -1;
        if (pos < 0 || errno || pos >= n)
            break;
        while (isspace((unsigned char)*end))
            end++;
        if (*end != ',' && *end != '\0')
            break;
        kept[k++] = list[pos];
        if (*end == '\0')
            break;
        s = end + 1;
    }
    memcpy(list, kept, (size_t)k * sizeof kept[0]);
    return k;
}

int ss_amdsmi_gpu_for_rank(const ss_amdsmi *a, const ss_gpu_env *env)
{
    long ordinal = 0;
    if (env->local_rank && *env->local_rank) {
        char *end;
        errno = 0;
        ordinal = strtol(env->local_rank, &end, 10);
        if (errno || *end || ordinal < 0)
            return -1;
    }
    int list[SS_GPU_MAX];
    int n = (int)a->n_gpus;
    for (int i = 0; i < n; i++)
        list[i] = i;
    n = narrow(list, n, env->rocr_visible_devices);
    n = narrow(list, n, env->hip_visible_devices
                            ? env->hip_visible_devices
                            : env->cuda_visible_devices);
    if (n == 1)
        return list[0];
    return ordinal < n ? list[ordinal] : -1;
}
