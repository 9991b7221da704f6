/*
 * gpu_backend.c - one interface over NVML and AMD SMI (gpu_backend.h): the
 * choice of library, and the rank's environment read from /proc.
 */
#include "gpu_backend.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amdsmi.h"
#include "nvml.h"

/* --- the backend -------------------------------------------------------- */

struct ss_gpu_backend {
    ss_gpu_vendor vendor; /* NONE: neither library is ready */
    ss_gpu_state state;
    char why[1200];
    ss_nvml *nvml;
    ss_amdsmi *amd;
};

static ss_gpu_state nvml_state(const ss_nvml *n)
{
    switch (ss_nvml_state_of(n)) {
    case SS_NVML_READY:
        return SS_GPU_READY;
    case SS_NVML_UNUSABLE:
        return SS_GPU_UNUSABLE;
    default:
        return SS_GPU_ABSENT;
    }
}

ss_gpu_backend *ss_gpu_backend_open(const char *nvml_lib,
                                    const char *amdsmi_lib)
{
    ss_gpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->nvml = ss_nvml_open(nvml_lib);
    if (!b->nvml) {
        free(b);
        return NULL;
    }
    ss_gpu_state ns = nvml_state(b->nvml);
    if (ns == SS_GPU_READY && ss_nvml_count(b->nvml) > 0) {
        b->vendor = SS_GPU_VENDOR_NVIDIA;
        b->state = SS_GPU_READY;
        return b;
    }
    b->amd = ss_amdsmi_open(amdsmi_lib);
    if (!b->amd) {
        ss_gpu_backend_close(b);
        return NULL;
    }
    ss_gpu_state as = ss_amdsmi_state_of(b->amd);
    /* AMD's GPUs, or else a ready library without GPUs (NVML first). */
    int amd = as == SS_GPU_READY &&
              (ss_amdsmi_count(b->amd) > 0 || ns != SS_GPU_READY);
    if (amd || ns == SS_GPU_READY) {
        b->vendor = amd ? SS_GPU_VENDOR_AMD : SS_GPU_VENDOR_NVIDIA;
        b->state = SS_GPU_READY;
        if (amd) {
            ss_nvml_close(b->nvml);
            b->nvml = NULL;
        } else {
            ss_amdsmi_close(b->amd);
            b->amd = NULL;
        }
        return b;
    }
    b->state = ns == SS_GPU_UNUSABLE || as == SS_GPU_UNUSABLE
                   ? SS_GPU_UNUSABLE
                   : SS_GPU_ABSENT;
    snprintf(b->why, sizeof b->why, "%s; %s", ss_nvml_why(b->nvml),
             ss_amdsmi_why(b->amd));
    ss_nvml_close(b->nvml);
    ss_amdsmi_close(b->amd);
    b->nvml = NULL;
    b->amd = NULL;
    return b;
}

void ss_gpu_backend_close(ss_gpu_backend *b)
{
    if (!b)
        return;
    ss_nvml_close(b->nvml);
    ss_amdsmi_close(b->amd);
    free(b);
}

ss_gpu_state ss_gpu_backend_state(const ss_gpu_backend *b)
{
    return b->state;
}

ss_gpu_vendor ss_gpu_backend_vendor(const ss_gpu_backend *b)
{
    return b->vendor;
}

const char *ss_gpu_backend_name(const ss_gpu_backend *b)
{
    switch (b->vendor) {
    case SS_GPU_VENDOR_NVIDIA:
        return "NVML";
    case SS_GPU_VENDOR_AMD:
        return "AMD SMI";
    default:
        return "no GPU library";
    }
}

const char *ss_gpu_backend_why(const ss_gpu_backend *b)
{
    return b->state == SS_GPU_READY ? "" : b->why;
}

uint32_t ss_gpu_backend_count(const ss_gpu_backend *b)
{
    if (b->nvml)
        return ss_nvml_count(b->nvml);
    return b->amd ? ss_amdsmi_count(b->amd) : 0;
}

const ss_gpu_info *ss_gpu_backend_gpu(const ss_gpu_backend *b,
                                      uint32_t index)
{
    if (b->nvml)
        return ss_nvml_gpu(b->nvml, index);
    return b->amd ? ss_amdsmi_gpu(b->amd, index) : NULL;
}

int ss_gpu_backend_watches_xid(const ss_gpu_backend *b)
{
    return b->nvml && ss_nvml_watches_xid(b->nvml);
}

int ss_gpu_backend_sample(ss_gpu_backend *b, uint32_t index, ss_mono_ns at,
                          ss_gpu_sample *out)
{
    if (b->nvml)
        return ss_nvml_sample(b->nvml, index, at, out);
    if (b->amd)
        return ss_amdsmi_sample(b->amd, index, at, out);
    ss_gpu_sample_clear(out, index, at);
    return -1;
}

int ss_gpu_backend_gpu_for_env(const ss_gpu_backend *b, const ss_gpu_env *env)
{
    if (b->nvml)
        return ss_nvml_gpu_for_rank(b->nvml, env->cuda_visible_devices,
                                    env->local_rank);
    return b->amd ? ss_amdsmi_gpu_for_rank(b->amd, env) : -1;
}

int ss_gpu_backend_gpu_for_pid(const ss_gpu_backend *b, const char *proc_root,
                               pid_t pid)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%d/environ", proc_root, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t cap = 1 << 16, len = 0;
    char *env = malloc(cap + 1);
    while (env) {
        ssize_t r = read(fd, env + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap) {
            char *bigger = cap < (1 << 22) ? realloc(env, cap * 2 + 1) : NULL;
            if (!bigger)
                break; /* what was read is used */
            env = bigger;
            cap *= 2;
        }
    }
    close(fd);
    if (!env)
        return -1;
    env[len] = '\0';
    static const struct {
        const char *prefix;
        size_t offset;
    } vars[] = {
        {"CUDA_VISIBLE_DEVICES=", offsetof(ss_gpu_env, cuda_visible_devices)},
        {"HIP_VISIBLE_DEVICES=", offsetof(ss_gpu_env, hip_visible_devices)},
        {"ROCR_VISIBLE_DEVICES=", offsetof(ss_gpu_env, rocr_visible_devices)},
        {"LOCAL_RANK=", offsetof(ss_gpu_env, local_rank)},
    };
    ss_gpu_env e = {0};
    for (size_t off = 0; off < len; off += strlen(env + off) + 1) {
        const char *var = env + off;
        for (size_t v = 0; v < sizeof vars / sizeof vars[0]; v++) {
            size_t n = strlen(vars[v].prefix);
            if (strncmp(var, vars[v].prefix, n) == 0)
                *(const char **)((char *)&e + vars[v].offset) = var + n;
        }
    }
    int gpu = ss_gpu_backend_gpu_for_env(b, &e);
    free(env);
    return gpu;
}
