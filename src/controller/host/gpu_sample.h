/*
 * gpu_sample.h - what one GPU says at one instant, the same on every
 * vendor: the sample NVML (nvml.h) and AMD SMI (amdsmi.h) both fill, the
 * reasons a GPU's clocks are held down, and the rank environment both
 * vendors' rank rules read.  The interface over the two libraries is
 * gpu_backend.h.
 *
 * A reading the library or the GPU does not give is SS_MISSING, never
 * zero.  Clock reasons use one mask for both vendors (ss_gpu_reason:
 * NVML's bits, and one more for AMD's HBM thermal violation).
 */
#ifndef STEPSCOPE_GPU_SAMPLE_H
#define STEPSCOPE_GPU_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define SS_GPU_MAX 64 /* GPUs followed per host; more are ignored */

/* Why a GPU's clocks are held down: one index per reason; the bits are
 * NVML's clock event reasons (nvmlClocksEventReason*), which AMD SMI's
 * violation and throttle flags are mapped onto (docs/gpu.md). */
typedef enum {
    SS_GPU_REASON_IDLE,           /* nothing runs: clocks drop (benign) */
    SS_GPU_REASON_APP_CLOCKS,     /* application clocks setting */
    SS_GPU_REASON_POWER_CAP,      /* power cap (NVML: software power cap;
                                     AMD: package power tracking) */
    SS_GPU_REASON_HW_SLOWDOWN,    /* hardware slowdown, the cause unstated
                                     (AMD: voltage regulator, or a throttle
                                     status without a reason) */
    SS_GPU_REASON_SYNC_BOOST,     /* held to the slowest of a sync-boost
                                     group */
    SS_GPU_REASON_SW_THERMAL,     /* software thermal slowdown (AMD: socket
                                     thermal) */
    SS_GPU_REASON_HW_THERMAL,     /* hardware thermal slowdown (AMD:
                                     processor hot) */
    SS_GPU_REASON_HW_POWER_BRAKE, /* external power brake asserted */
    SS_GPU_REASON_DISPLAY_CLOCKS, /* display clock setting */
    SS_GPU_REASON_MEM_THERMAL,    /* memory (HBM) too hot: AMD only */
    SS_GPU_N_REASONS
} ss_gpu_reason;

/* The bit of REASON in a reason mask (ss_gpu_sample.reasons). */
uint64_t ss_gpu_reason_bit(ss_gpu_reason reason);

/* A short stable name for REASON: "idle", "app_clocks", "power_cap",
 * "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal",
 * "hw_power_brake", "display_clocks", "mem_thermal"; "?" for an
 * out-of-range value. */
const char *ss_gpu_reason_name(ss_gpu_reason reason);

/* Whether REASON slows the work on the GPU (every reason but idle,
 * application clocks and display clocks, which are settings or
 * consequences rather than causes of a slow step). */
int ss_gpu_reason_slows(ss_gpu_reason reason);

/* Writes the names of the reasons set in MASK, comma-separated, into BUF
 * (always NUL-terminated when LEN > 0): "none" for 0, and "0x..." for bits
 * beyond the ones named here.  Returns BUF. */
char *ss_gpu_reasons_format(uint64_t mask, char *buf, size_t len);

/* What stays the same about a GPU while a backend is open. */
typedef struct {
    uint32_t index;  /* the backend's index: PCI bus order on both vendors */
    char uuid[96];   /* "GPU-8e1c..." (NVML), the AMD SMI UUID; "" when
                        the library did not say */
    char name[96];   /* "NVIDIA H100 80GB HBM3"; "" when unknown */
    char pci_bus_id[32]; /* "00000000:3B:00.0"; "" when unknown */
} ss_gpu_info;

/* One GPU at one instant.  Every int64_t reading is SS_MISSING where the
 * library or the GPU does not provide it (or the function is missing). */
typedef struct {
    ss_mono_ns at;           /* when read (the caller's clock) */
    uint32_t index;          /* the backend's index */
    int64_t sm_clock_mhz;    /* compute clock (NVML: SM; AMD: graphics) */
    int64_t mem_clock_mhz;   /* memory clock */
    int reasons_known;       /* 0: REASONS could not be read */
    uint64_t reasons;        /* ss_gpu_reason bits: "held down by X now" */
    int64_t temperature_c;   /* the die (AMD: edge, else hotspot) */
    int64_t hotspot_c;       /* AMD: junction (hotspot) */
    int64_t mem_temperature_c; /* AMD: memory (VRAM/HBM) */
    int64_t power_mw;        /* drawn now, milliwatts */
    int64_t power_avg_mw;    /* AMD: averaged by the firmware */
    int64_t power_limit_mw;  /* the enforced limit (cap), milliwatts */
    int64_t energy_mj;       /* AMD: energy counter, millijoules;
                                cumulative */
    int64_t mem_used_bytes, mem_total_bytes;
    int64_t util_gpu_pct;    /* time a kernel ran (AMD: graphics
                                activity) */
    int64_t util_mem_pct;    /* memory (AMD: memory controller activity) */
    int64_t ecc_uncorrected; /* cumulative: a rise is a new error (NVML:
                                volatile, since the driver loaded) */
    int64_t ecc_corrected;   /* AMD: corrected, cumulative */
    int64_t xid_count;       /* NVML: Xid errors seen since the handle
                                opened; SS_MISSING when not watched */
    int64_t last_xid;        /* the latest Xid code seen (0: none) */
} ss_gpu_sample;

/* Clears OUT for GPU INDEX at AT: every reading SS_MISSING, reasons
 * unknown, no Xid.  Each backend starts a sample with it. */
void ss_gpu_sample_clear(ss_gpu_sample *out, uint32_t index, ss_mono_ns at);

typedef enum {
    SS_GPU_ABSENT,   /* no GPU library (or one without its driver) */
    SS_GPU_UNUSABLE, /* a library is there but cannot be used */
    SS_GPU_READY,
} ss_gpu_state;

/* The variables of a rank's environment that say which GPU it uses (each
 * NULL when unset). */
typedef struct {
    const char *cuda_visible_devices;
    const char *hip_visible_devices;
    const char *rocr_visible_devices;
    const char *local_rank;
} ss_gpu_env;

#endif
