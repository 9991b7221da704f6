/*
 * gpu_backend.h - the GPUs of this machine, whatever their vendor.
 *
 * A rank can be slow because its GPU is: held below its clocks by a power
 * cap or a thermal limit, or failing (uncorrected ECC errors, Xid errors).
 * Each vendor reports it through its own management library: NVIDIA's NVML
 * (nvml.h) and AMD's AMD SMI (amdsmi.h).  The rest of stepscope asks this
 * interface instead, and gets the same sample (ss_gpu_sample) on either:
 * the GPU watch of `stepscope run`, the launcher's health check and
 * `stepscope gpus` never name a vendor.
 *
 * Both libraries are loaded with dlopen(3) when a backend opens, so nothing
 * of either vendor is needed to build or to run.  Opening tries NVML first,
 * then AMD SMI, and keeps the first that is ready and sees a GPU (or else
 * the first that is ready at all); a machine with neither library gets a
 * backend in the SS_GPU_ABSENT state that says why, once, in
 * ss_gpu_backend_why, and reads no GPU: never an error for the job.
 *
 * Readings are per GPU, at an instant.  A reading the library or the GPU
 * does not give is SS_MISSING, never zero.  Clock reasons use one mask for
 * both vendors (ss_gpu_reason: NVML's bits, and one more for AMD's HBM
 * thermal violation), so the same step alignment (nvml_timeline.h) and the
 * same findings (gpu_throttled, gpu_error) serve both.
 *
 * Not thread-safe: one thread opens, samples and closes a backend.
 */
#ifndef STEPSCOPE_GPU_BACKEND_H
#define STEPSCOPE_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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

/* A GPU library's name, for messages: "NVML", "AMD SMI". */
typedef enum { SS_GPU_VENDOR_NONE, SS_GPU_VENDOR_NVIDIA, SS_GPU_VENDOR_AMD }
    ss_gpu_vendor;

typedef struct ss_gpu_backend ss_gpu_backend;

/* Opens the GPU library of this machine: NVML from NVML_LIB (NULL:
 * $STEPSCOPE_NVML_LIB, else libnvidia-ml.so.1), then AMD SMI from
 * AMDSMI_LIB (NULL: $STEPSCOPE_AMDSMI_LIB, else libamd_smi.so, else
 * /opt/rocm/lib/libamd_smi.so), keeping the first ready one with a GPU
 * (nvml.h, amdsmi.h).  Never fails for missing or broken libraries: the
 * backend then has that state and no GPUs.  Returns NULL only when memory
 * runs out.  Close with ss_gpu_backend_close (NULL is a no-op), which shuts
 * the library down and unloads it. */
ss_gpu_backend *ss_gpu_backend_open(const char *nvml_lib,
                                    const char *amdsmi_lib);
void ss_gpu_backend_close(ss_gpu_backend *b);

ss_gpu_state ss_gpu_backend_state(const ss_gpu_backend *b);
ss_gpu_vendor ss_gpu_backend_vendor(const ss_gpu_backend *b);

/* "NVML", "AMD SMI", or "no GPU library". */
const char *ss_gpu_backend_name(const ss_gpu_backend *b);

/* Why the backend is not READY, in words, every library tried ("no NVML:
 * ...; no AMD SMI: ..."); "" when it is.  Owned by B. */
const char *ss_gpu_backend_why(const ss_gpu_backend *b);

/* How many GPUs the backend follows (0 unless READY). */
uint32_t ss_gpu_backend_count(const ss_gpu_backend *b);

/* GPU INDEX's identity, or NULL when INDEX is out of range.  Owned by B. */
const ss_gpu_info *ss_gpu_backend_gpu(const ss_gpu_backend *b,
                                      uint32_t index);

/* Whether Xid errors are watched (NVML with events; never on AMD). */
int ss_gpu_backend_watches_xid(const ss_gpu_backend *b);

/* Reads GPU INDEX now into OUT, with AT as its time.  Returns 0 when at
 * least one reading succeeded, -1 when none did (the GPU is lost, or INDEX
 * is out of range), OUT then holding SS_MISSING readings. */
int ss_gpu_backend_sample(ss_gpu_backend *b, uint32_t index, ss_mono_ns at,
                          ss_gpu_sample *out);

/* The variables of a rank's environment that say which GPU it uses (each
 * NULL when unset). */
typedef struct {
    const char *cuda_visible_devices;
    const char *hip_visible_devices;
    const char *rocr_visible_devices;
    const char *local_rank;
} ss_gpu_env;

/* The index of the GPU a rank with environment ENV uses, by the vendor's
 * rule (docs/gpu.md: ss_nvml_gpu_for_rank, ss_amdsmi_gpu_for_rank), or -1
 * when it uses none that can be told. */
int ss_gpu_backend_gpu_for_env(const ss_gpu_backend *b, const ss_gpu_env *env);

/* ss_gpu_backend_gpu_for_env with ENV read from PROC_ROOT/PID/environ (the
 * environment the process started with; a change the program makes later
 * to its own os.environ is not seen).  -1 also when it cannot be read. */
int ss_gpu_backend_gpu_for_pid(const ss_gpu_backend *b, const char *proc_root,
                               pid_t pid);

/* `stepscope gpus`'s options (src/cli/cmd_gpus.c checks them). */
typedef struct {
    long watch_s;     /* also sample for this long (1 to 3600); 0: no */
    long interval_ms; /* between samples, 20 to 60000 */
    int require;      /* no GPU library or no GPU is a failure too */
} ss_gpus_opts;

/* `stepscope gpus` (gpu_cmd.c, docs/gpu.md): every GPU's identity and
 * readings to OUT, and with O->watch_s a live sample and per-GPU summary;
 * problems to ERR.  Returns the exit status: 0 when every GPU was read or
 * there is no GPU library (1 then with O->require), 1 when a library is
 * there but unreadable. */
int ss_gpus_cmd(const ss_gpus_opts *o, FILE *out, FILE *err);

#endif
