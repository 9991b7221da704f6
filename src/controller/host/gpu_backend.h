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
 * Readings are per GPU, at an instant, in the one sample both libraries
 * give (gpu_sample.h), so the same step alignment (nvml_timeline.h) and
 * the same findings (gpu_throttled, gpu_error) serve both.
 *
 * Not thread-safe: one thread opens, samples and closes a backend.
 */
#ifndef STEPSCOPE_GPU_BACKEND_H
#define STEPSCOPE_GPU_BACKEND_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "gpu_sample.h"
#include "model.h"

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
