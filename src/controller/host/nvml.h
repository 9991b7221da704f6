/*
 * nvml.h - the GPUs' own evidence, read through NVIDIA's NVML at run time.
 *
 * A rank can be slow because its GPU is: held below its clocks by a power
 * cap, a thermal slowdown or a power brake, or failing (uncorrected ECC
 * errors, Xid errors).  NVML reports all of it.  stepscope loads NVML with
 * dlopen(3) when a handle is opened, so the binary needs no GPU library to
 * build or to run: on a machine without NVIDIA's driver the handle is in
 * the "no NVML" state (SS_NVML_ABSENT) and every GPU reading is simply
 * absent, never an error for the job.
 *
 * The library is "libnvidia-ml.so.1" (the name the driver installs), or the
 * path in the environment variable STEPSCOPE_NVML_LIB (tests point it at a
 * test double, tests/support/fake_nvml.c).  The functions needed are
 * resolved one by one: the four without which nothing can be read
 * (nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2) make the handle SS_NVML_UNUSABLE when
 * missing; any other missing function (an older or newer driver) leaves
 * only its own readings SS_MISSING.
 *
 * Readings are per GPU, at an instant (ss_gpu_sample): clocks, the reasons
 * the clocks are held down, temperature, power, memory, utilisation, and
 * the cumulative counts of uncorrected ECC errors and of Xid errors seen
 * since the handle was opened.  nvml_timeline.h turns a GPU's samples into
 * per-step values ("throttled by the power cap in 3 of 4 samples of this
 * step").  Which GPU a rank uses is read from its environment
 * (ss_nvml_gpu_for_rank, docs/gpu.md).
 *
 * Not thread-safe: one thread opens, samples and closes a handle.
 */
#ifndef STEPSCOPE_NVML_H
#define STEPSCOPE_NVML_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "model.h"

#define SS_NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#define SS_NVML_LIB_ENV "STEPSCOPE_NVML_LIB"
#define SS_NVML_MAX_GPUS 64 /* GPUs followed per host; more are ignored */

/* Why a GPU's clocks are held down: one index per NVML clock event reason
 * (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*). */
typedef enum {
    SS_GPU_REASON_IDLE,           /* nothing runs: clocks drop (benign) */
    SS_GPU_REASON_APP_CLOCKS,     /* application clocks setting */
    SS_GPU_REASON_POWER_CAP,      /* software power cap */
    SS_GPU_REASON_HW_SLOWDOWN,    /* hardware slowdown (thermal, brake or
                                     power draw, the cause unstated) */
    SS_GPU_REASON_SYNC_BOOST,     /* held to the slowest of a sync-boost
                                     group */
    SS_GPU_REASON_SW_THERMAL,     /* software thermal slowdown */
    SS_GPU_REASON_HW_THERMAL,     /* hardware thermal slowdown */
    SS_GPU_REASON_HW_POWER_BRAKE, /* external power brake asserted */
    SS_GPU_REASON_DISPLAY_CLOCKS, /* display clock setting */
    SS_GPU_N_REASONS
} ss_gpu_reason;

/* The bit of REASON in NVML's reason mask (ss_gpu_sample.reasons). */
uint64_t ss_gpu_reason_bit(ss_gpu_reason reason);

/* A short stable name for REASON: "idle", "app_clocks", "power_cap",
 * "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal",
 * "hw_power_brake", "display_clocks"; "?" for an out-of-range value. */
const char *ss_gpu_reason_name(ss_gpu_reason reason);

/* Whether REASON slows the work on the GPU (every reason but idle,
 * application clocks and display clocks, which are settings or
 * consequences rather than causes of a slow step). */
int ss_gpu_reason_slows(ss_gpu_reason reason);

/* Writes the names of the reasons set in MASK, comma-separated, into BUF
 * (always NUL-terminated when LEN > 0): "none" for 0, and "0x..." for bits
 * NVML defines beyond the ones named here.  Returns BUF. */
char *ss_gpu_reasons_format(uint64_t mask, char *buf, size_t len);

/* What stays the same about a GPU while a handle is open. */
typedef struct {
    uint32_t index;  /* NVML index (PCI bus order) */
    char uuid[96];   /* "GPU-8e1c..."; "" when NVML did not say */
    char name[96];   /* "NVIDIA H100 80GB HBM3"; "" when unknown */
    char pci_bus_id[32]; /* "00000000:3B:00.0"; "" when unknown */
} ss_gpu_info;

/* One GPU at one instant.  Every int64_t reading is SS_MISSING where this
 * driver or GPU does not provide it (or the function is missing). */
typedef struct {
    ss_mono_ns at;           /* when read (the caller's clock) */
    uint32_t index;          /* NVML index */
    int64_t sm_clock_mhz;    /* streaming multiprocessor clock */
    int64_t mem_clock_mhz;   /* memory clock */
    int reasons_known;       /* 0: REASONS could not be read */
    uint64_t reasons;        /* NVML reason mask: "held down by X now" */
    int64_t temperature_c;   /* GPU die */
    int64_t power_mw;        /* drawn now, milliwatts */
    int64_t power_limit_mw;  /* the enforced limit, milliwatts */
    int64_t mem_used_bytes, mem_total_bytes;
    int64_t util_gpu_pct;    /* time a kernel ran, over NVML's last period */
    int64_t util_mem_pct;    /* time memory was read or written */
    int64_t ecc_uncorrected; /* volatile (since the driver loaded);
                                cumulative: a rise is a new error */
    int64_t xid_count;       /* Xid errors seen since the handle opened;
                                SS_MISSING when events cannot be watched */
    int64_t last_xid;        /* the latest Xid code seen (0: none) */
} ss_gpu_sample;

typedef enum {
    SS_NVML_ABSENT,   /* no library: no NVIDIA driver here */
    SS_NVML_UNUSABLE, /* the library is there but cannot be used (init
                         failed, a required function is missing) */
    SS_NVML_READY,
} ss_nvml_state;

typedef struct ss_nvml ss_nvml;

/* Loads NVML from LIB_PATH (NULL: $STEPSCOPE_NVML_LIB, else
 * "libnvidia-ml.so.1"), initialises it, finds the GPUs and starts watching
 * their Xid errors.  Never fails for a missing or broken NVML: the handle
 * then has that state (ss_nvml_state_of) and no GPUs.  Returns NULL only
 * when memory runs out.  Close with ss_nvml_close (NULL is a no-op), which
 * frees the event set, shuts NVML down and unloads it. */
ss_nvml *ss_nvml_open(const char *lib_path);
void ss_nvml_close(ss_nvml *n);

ss_nvml_state ss_nvml_state_of(const ss_nvml *n);

/* Why the handle is not READY, in words ("no NVML: libnvidia-ml.so.1:
 * cannot open shared object file..."); "" when it is.  Owned by N. */
const char *ss_nvml_why(const ss_nvml *n);

/* How many GPUs the handle follows (0 unless READY). */
uint32_t ss_nvml_count(const ss_nvml *n);

/* GPU INDEX's identity, or NULL when INDEX >= ss_nvml_count.  Owned by N. */
const ss_gpu_info *ss_nvml_gpu(const ss_nvml *n, uint32_t index);

/* Whether Xid errors are being watched (the driver supports events). */
int ss_nvml_watches_xid(const ss_nvml *n);

/* Reads GPU INDEX now into OUT, with AT as its time; first collects the
 * Xid events that arrived (without waiting).  Returns 0 when at least one
 * reading succeeded, -1 when none did (the GPU is lost, or INDEX is out of
 * range), OUT then holding SS_MISSING readings. */
int ss_nvml_sample(ss_nvml *n, uint32_t index, ss_mono_ns at,
                   ss_gpu_sample *out);

/*
 * Which GPU a rank uses, from two variables of its environment (either may
 * be NULL: unset).  The rule (docs/gpu.md):
 *  - the rank uses CUDA device ordinal LOCAL_RANK (0 when unset), as
 *    torchrun's workers do with torch.cuda.set_device(LOCAL_RANK); when it
 *    sees exactly one GPU, that one, whatever LOCAL_RANK says;
 *  - without CUDA_VISIBLE_DEVICES it sees every GPU, ordinal = NVML index;
 *  - with it, the ordinal picks an entry of the comma-separated list: a
 *    number is an NVML index (CUDA's order equals NVML's under
 *    CUDA_DEVICE_ORDER=PCI_BUS_ID or on GPUs of one model), "GPU-<uuid
 *    prefix>" the GPU whose UUID starts so; the list ends, as for CUDA, at
 *    the first entry that names no GPU, and a MIG instance ("MIG-...") is
 *    not resolved.
 * Returns the NVML index, or -1 when the rank uses no GPU that can be told.
 */
int ss_nvml_gpu_for_rank(const ss_nvml *n, const char *cuda_visible_devices,
                         const char *local_rank);

/* ss_nvml_gpu_for_rank with the two variables read from
 * PROC_ROOT/PID/environ (the environment the process started with; a
 * change the program makes later to its own os.environ is not seen).
 * Returns -1 also when the file cannot be read. */
int ss_nvml_gpu_for_pid(const ss_nvml *n, const char *proc_root, pid_t pid);

/* `stepscope gpus`'s options (src/cli/cmd_gpus.c checks them). */
typedef struct {
    long watch_s;     /* also sample for this long (1 to 3600); 0: no */
    long interval_ms; /* between samples, 20 to 60000 */
    int require;      /* no NVML or no GPU is a failure too */
} ss_gpus_opts;

/* `stepscope gpus` (nvml_cmd.c, docs/gpu.md): every GPU's identity and
 * readings to OUT, and with O->watch_s a live sample and per-GPU summary;
 * problems to ERR.  Returns the exit status: 0 when every GPU was read or
 * there is no NVML (1 then with O->require), 1 when NVML is there but
 * unreadable. */
int ss_gpus_cmd(const ss_gpus_opts *o, FILE *out, FILE *err);

#endif
