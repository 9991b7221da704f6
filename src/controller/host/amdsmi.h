/*
 * amdsmi.h - AMD GPUs' own evidence, read through AMD SMI at run time.
 *
 * The AMD counterpart of nvml.h, behind the same interface
 * (gpu_backend.h).  stepscope loads AMD SMI (libamd_smi.so, which replaces
 * ROCm SMI in recent ROCm) with dlopen(3) when a handle is opened: the
 * path in STEPSCOPE_AMDSMI_LIB, else "libamd_smi.so", else
 * "/opt/rocm/lib/libamd_smi.so" (ROCm's own place, often not on the
 * loader's path).  Without it the handle is SS_GPU_ABSENT and reads
 * nothing; tests point the variable at a test double
 * (tests/support/fake_amdsmi.c).
 *
 * The handle initialises AMD SMI for AMD GPUs, walks its sockets and then
 * each socket's processors, keeps the AMD GPUs and numbers them in PCI bus
 * order (bus id: domain, bus, device, function), which is how a rank's
 * device is found (ss_amdsmi_gpu_for_rank).  The four functions without
 * which nothing can be read (amdsmi_init, amdsmi_shut_down,
 * amdsmi_get_socket_handles, amdsmi_get_processor_handles) make the handle
 * SS_GPU_UNUSABLE when missing; any other missing function leaves only its
 * own readings SS_MISSING.
 *
 * Per GPU and sample: VRAM used and total; graphics and memory-controller
 * activity; edge, hotspot and memory temperature (the unit is checked at
 * run time: some versions answer in millidegrees); current and average
 * power and the power cap; the violation flags (power, socket thermal,
 * processor hot, voltage regulator, HBM thermal) and, where the GPU has no
 * violation status, its throttle status; the graphics and memory clocks;
 * corrected and uncorrected ECC counts; the energy counter.  Two of the
 * structures AMD SMI fills changed their layout between versions; which
 * one the loaded library uses is told from amdsmi_get_lib_version
 * (docs/gpu.md lists the layouts).  Closing shuts AMD SMI down and unloads
 * it.
 *
 * Not thread-safe: one thread opens, samples and closes a handle.
 */
#ifndef STEPSCOPE_AMDSMI_H
#define STEPSCOPE_AMDSMI_H

#include <stdint.h>

#include "gpu_sample.h"
#include "model.h"

#define SS_AMDSMI_DEFAULT_LIB "libamd_smi.so"
#define SS_AMDSMI_ROCM_LIB "/opt/rocm/lib/libamd_smi.so"
#define SS_AMDSMI_LIB_ENV "STEPSCOPE_AMDSMI_LIB"

typedef struct ss_amdsmi ss_amdsmi;

/* Loads AMD SMI from LIB_PATH (NULL: $STEPSCOPE_AMDSMI_LIB, else the two
 * default names), initialises it for AMD GPUs and finds them.  Never fails
 * for a missing or broken library: the handle then has that state and no
 * GPUs.  Returns NULL only when memory runs out.  Close with
 * ss_amdsmi_close (NULL is a no-op): amdsmi_shut_down, then unloaded. */
ss_amdsmi *ss_amdsmi_open(const char *lib_path);
void ss_amdsmi_close(ss_amdsmi *a);

ss_gpu_state ss_amdsmi_state_of(const ss_amdsmi *a);

/* Why the handle is not READY, in words ("no AMD SMI: libamd_smi.so:
 * cannot open shared object file..."); "" when it is.  Owned by A. */
const char *ss_amdsmi_why(const ss_amdsmi *a);

/* The library's version as amdsmi_get_lib_version gives it ("24.7.1"),
 * "?" when it does not say.  Owned by A. */
const char *ss_amdsmi_version(const ss_amdsmi *a);

/* How many AMD GPUs the handle follows (0 unless READY). */
uint32_t ss_amdsmi_count(const ss_amdsmi *a);

/* GPU INDEX's identity (index in PCI bus order), or NULL when out of
 * range.  Owned by A. */
const ss_gpu_info *ss_amdsmi_gpu(const ss_amdsmi *a, uint32_t index);

/* Reads GPU INDEX now into OUT, with AT as its time.  Returns 0 when at
 * least one reading succeeded, -1 when none did, OUT then holding
 * SS_MISSING readings. */
int ss_amdsmi_sample(ss_amdsmi *a, uint32_t index, ss_mono_ns at,
                     ss_gpu_sample *out);

/*
 * Which GPU a rank uses, from its environment ENV (docs/gpu.md):
 *  - ROCR_VISIBLE_DEVICES, when set, keeps the GPUs whose indices (PCI bus
 *    order) it lists; then HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES
 *    (HIP honours both), keeps the listed positions of what is left; each
 *    list ends at the first entry that is not such a number;
 *  - the rank uses device ordinal LOCAL_RANK (0 when unset) of what is
 *    left, or the one GPU left, whatever LOCAL_RANK says.
 * Returns the index, or -1 when the rank uses no GPU that can be told.
 */
int ss_amdsmi_gpu_for_rank(const ss_amdsmi *a, const ss_gpu_env *env);

#endif
