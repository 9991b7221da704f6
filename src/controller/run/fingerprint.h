/*
 * fingerprint.h - what a run ran on, recorded at launch, so that
 * `stepscope guard` compares a run only with runs made the same way.
 *
 * The fingerprint is one JSON object (docs/guard.md lists its keys):
 * the command line, world size and nodes, the host's name, CPU model and
 * kernel, the GPU model and driver when the NVIDIA driver is loaded, the
 * stepscope version, the environment knobs that change speed
 * (OMP_NUM_THREADS, MKL_NUM_THREADS, CUDA_VISIBLE_DEVICES, NCCL_*), and for
 * a Python command the interpreter's and torch's versions.  Everything is
 * read from files (/proc) and the environment, except the Python versions:
 * those come from one short run of the command's interpreter (`python -c`,
 * at most SS_FINGERPRINT_PROBE_MS), which finds torch's version file
 * without importing torch.  A value that cannot be learned is left out.
 */
#ifndef STEPSCOPE_FINGERPRINT_H
#define STEPSCOPE_FINGERPRINT_H

#include <stdint.h>

#include "json.h"

/* The longest the Python version probe may take before it is killed. */
#define SS_FINGERPRINT_PROBE_MS 3000

/* Where the facts come from; ss_fingerprint_sources_default fills the
 * real ones, tests point them at files of their own. */
typedef struct {
    const char *cpuinfo;       /* /proc/cpuinfo */
    const char *nvidia_driver; /* /proc/driver/nvidia/version */
    const char *nvidia_gpus;   /* /proc/driver/nvidia/gpus (a directory) */
} ss_fingerprint_sources;

void ss_fingerprint_sources_default(ss_fingerprint_sources *src);

/*
 * Appends the fingerprint of a run of ARGV (NULL-terminated; COMMAND is its
 * joined form) with WORLD_SIZE ranks on NODES nodes to OUT as one JSON
 * object.  Never fails: what cannot be read is omitted; an allocation
 * failure shows as OUT->oom.
 */
void ss_fingerprint_collect(ss_buf *out, char *const *argv,
                            const char *command, uint32_t world_size,
                            uint32_t nodes, const ss_fingerprint_sources *src);

/* True when ARGV[0]'s base name starts with "python" (python, python3,
 * python3.11): the command whose versions the probe asks. */
int ss_fingerprint_is_python(const char *argv0);

#endif
