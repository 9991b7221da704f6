/*
 * cmd_gpus.c - the command line of `stepscope gpus` (commands.h): its
 * options, usage and checks; host/gpu_backend.h reads the GPUs.
 *
 *   stepscope gpus [--watch SECONDS] [--interval MS] [--require]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gpu_backend.h"

static const char usage[] =
    "usage: stepscope gpus [--watch SECONDS] [--interval MS] [--require]\n"
    "\n"
    "What the GPU library of this machine (NVIDIA's NVML, else AMD SMI)\n"
    "reports for every GPU: clocks, the reasons the clocks are held down,\n"
    "temperatures, power, memory, ECC (and, on NVIDIA, Xid) errors; and the\n"
    "GPU the rule of docs/gpu.md gives a rank with this shell's\n"
    "CUDA_VISIBLE_DEVICES (HIP_ and ROCR_VISIBLE_DEVICES on AMD) and\n"
    "LOCAL_RANK.  Both libraries are loaded at run time\n"
    "($STEPSCOPE_NVML_LIB, else libnvidia-ml.so.1; $STEPSCOPE_AMDSMI_LIB,\n"
    "else libamd_smi.so).\n"
    "\n"
    "  --watch S      also sample every GPU for S seconds (1 to 3600), one\n"
    "                 line per GPU and sample, then a summary per GPU\n"
    "  --interval MS  milliseconds between samples (20 to 60000; default\n"
    "                 500)\n"
    "  --require      exit 1 also when there is no GPU library or no GPU\n"
    "  -h, --help     print this help\n"
    "\n"
    "Exit status: 0 when every GPU was read (or there is no GPU library and\n"
    "no --require), 1 when a library is there but a GPU cannot be read, 2\n"
    "on bad usage.\n";

/* Parses a whole number in [LO, HI] from VAL into *OUT; 0 or -1. */
static int parse_long(const char *val, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(val, &end, 10);
    if (end == val || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* 0 to go on, 1 when help was printed, 2 on bad usage. */
static int parse_args(int argc, char **argv, ss_gpus_opts *o, FILE *out,
                      FILE *err)
{
    *o = (ss_gpus_opts){.watch_s = 0, .interval_ms = 500, .require = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, out);
            return 1;
        }
        if (strcmp(a, "--require") == 0) {
            o->require = 1;
            continue;
        }
        int watch = strcmp(a, "--watch") == 0;
        if (watch || strcmp(a, "--interval") == 0) {
            const char *val = i + 1 < argc ? argv[++i] : "";
            if (watch ? parse_long(val, 1, 3600, &o->watch_s)
                      : parse_long(val, 20, 60000, &o->interval_ms)) {
                fprintf(err, "stepscope gpus: %s wants %s, not '%s'\n", a,
                        watch ? "seconds from 1 to 3600"
                              : "milliseconds from 20 to 60000", val);
                return 2;
            }
            continue;
        }
        fprintf(err, "stepscope gpus: unknown argument '%s' (see `stepscope "
                     "gpus --help`)\n", a);
        return 2;
    }
    return 0;
}

int ss_cmd_gpus(int argc, char **argv)
{
    ss_gpus_opts o;
    int rc = parse_args(argc, argv, &o, stdout, stderr);
    if (rc)
        return rc == 1 ? 0 : rc;
    return ss_gpus_cmd(&o, stdout, stderr);
}
