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
 * Readings are per GPU, at an instant (ss_gpu_sample, gpu_sample.h, the
 * sample both vendors give): clocks, the reasons the clocks are held down,
 * temperature, power, memory, utilisation, and the cumulative counts of
 * uncorrected ECC errors and of Xid errors seen since the handle was
 * opened.  The rest of stepscope reaches NVML through gpu_backend.h.
 * Which GPU a rank uses is read from its environment
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

#include "gpu_sample.h"
#include "model.h"

#define SS_NVML_DEFAULT_LIB "libnvidia-ml.so.1"
#define SS_NVML_LIB_ENV "STEPSCOPE_NVML_LIB"
#define SS_NVML_MAX_GPUS SS_GPU_MAX

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

#endif
