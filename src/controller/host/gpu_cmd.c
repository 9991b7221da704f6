/*
 * gpu_cmd.c - the work of `stepscope gpus` (gpu_backend.h; its command
 * line: src/cli/cmd_gpus.c): what the GPU library of this machine (NVML or
 * AMD SMI) says about its GPUs.
 *
 * The command is the check that the GPU readings work where they matter:
 * on a machine with NVIDIA or AMD GPUs it prints each GPU's identity,
 * clocks, the reasons the clocks are held down, temperatures, power,
 * memory, ECC and Xid errors as the controller reads them (through
 * gpu_backend.c), and with --watch it samples them for a while and sums
 * each GPU up over the watch through the same step-alignment code the
 * controller uses (nvml_timeline.c).  It exits 1 when a library is present
 * but cannot be read, which is what scripts/gpu_check.sh relies on
 * (docs/gpu.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clocks.h"
#include "gpu_backend.h"
#include "nvml_timeline.h"

/* "123" or "-" for a reading that is SS_MISSING, scaled down by DIV. */
static const char *num(char *buf, size_t len, int64_t v, double div,
                       const char *fmt)
{
    if (v == SS_MISSING)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, fmt, (double)v / div);
    return buf;
}

/* One GPU's identity and readings; AMD names its compute clock
 * "graphics", NVIDIA "SM". */
static void print_gpu(FILE *out, const ss_gpu_info *info,
                      const ss_gpu_sample *s, int amd)
{
    char a[32], b[32], c[32], d[32], reasons[256];
    fprintf(out, "GPU %u  %s  %s  %s\n", info->index,
            info->name[0] ? info->name : "(no name)",
            info->uuid[0] ? info->uuid : "(no UUID)",
            info->pci_bus_id[0] ? info->pci_bus_id : "(no PCI id)");
    fprintf(out, "  clocks        %s %s MHz, memory %s MHz\n",
            amd ? "graphics" : "SM",
            num(a, sizeof a, s->sm_clock_mhz, 1, "%.0f"),
            num(b, sizeof b, s->mem_clock_mhz, 1, "%.0f"));
    fprintf(out, "  held down by  %s\n",
            s->reasons_known
                ? ss_gpu_reasons_format(s->reasons, reasons, sizeof reasons)
                : "- (not reported)");
    fprintf(out, "  temperature   %s C\n",
            num(a, sizeof a, s->temperature_c, 1, "%.0f"));
    if (s->hotspot_c != SS_MISSING || s->mem_temperature_c != SS_MISSING)
        fprintf(out, "  hotspot       %s C, memory %s C\n",
                num(a, sizeof a, s->hotspot_c, 1, "%.0f"),
                num(b, sizeof b, s->mem_temperature_c, 1, "%.0f"));
    fprintf(out, "  power         %s W of a %s W limit\n",
            num(a, sizeof a, s->power_mw, 1000, "%.1f"),
            num(b, sizeof b, s->power_limit_mw, 1000, "%.1f"));
    if (s->power_avg_mw != SS_MISSING || s->energy_mj != SS_MISSING)
        fprintf(out, "  power avg     %s W, energy %s J\n",
                num(a, sizeof a, s->power_avg_mw, 1000, "%.1f"),
                num(b, sizeof b, s->energy_mj, 1000, "%.3f"));
    fprintf(out, "  memory        %s GiB used of %s GiB\n",
            num(a, sizeof a, s->mem_used_bytes, 1 << 30, "%.1f"),
            num(b, sizeof b, s->mem_total_bytes, 1 << 30, "%.1f"));
    fprintf(out, "  utilisation   GPU %s %%, memory %s %%\n",
            num(c, sizeof c, s->util_gpu_pct, 1, "%.0f"),
            num(d, sizeof d, s->util_mem_pct, 1, "%.0f"));
    if (s->ecc_corrected == SS_MISSING)
        fprintf(out, "  ECC           %s uncorrected (volatile)\n",
                num(a, sizeof a, s->ecc_uncorrected, 1, "%.0f"));
    else
        fprintf(out, "  ECC           %s uncorrected, %s corrected\n",
                num(a, sizeof a, s->ecc_uncorrected, 1, "%.0f"),
                num(b, sizeof b, s->ecc_corrected, 1, "%.0f"));
    if (s->xid_count == SS_MISSING)
        fprintf(out, "  Xid           - (not watched)\n");
    else
        fprintf(out, "  Xid           %lld seen, last %lld\n",
                (long long)s->xid_count, (long long)s->last_xid);
}

static void print_sample_line(FILE *out, double t_s, const ss_gpu_sample *s)
{
    char a[32], b[32], c[32], d[32], reasons[256];
    fprintf(out, "t=%.2fs gpu=%u sm_mhz=%s temp_c=%s power_w=%s util=%s "
                 "held=%s\n",
            t_s, s->index, num(a, sizeof a, s->sm_clock_mhz, 1, "%.0f"),
            num(b, sizeof b, s->temperature_c, 1, "%.0f"),
            num(c, sizeof c, s->power_mw, 1000, "%.1f"),
            num(d, sizeof d, s->util_gpu_pct, 1, "%.0f"),
            s->reasons_known
                ? ss_gpu_reasons_format(s->reasons, reasons, sizeof reasons)
                : "-");
}

/* One line per GPU over the watch, from its timeline: the shares of the
 * time each reason held the clocks down. */
static void print_summary(FILE *out, uint32_t index,
                          const ss_gpu_timeline *tl, ss_mono_ns begin,
                          ss_mono_ns end)
{
    ss_gpu_step st;
    char a[32], b[32], c[32], d[32], e[32], f[32];
    if (ss_gpu_timeline_window(tl, begin, end, &st) != 0) {
        fprintf(out, "summary gpu=%u no samples\n", index);
        return;
    }
    fprintf(out, "summary gpu=%u util=%s sm_mhz=%s power_w=%s max_temp_c=%s "
                 "new_ecc=%s new_xid=%s slowed=%.0f%%",
            index, num(a, sizeof a, st.util_gpu_pct, 1, "%.0f"),
            num(b, sizeof b, st.sm_clock_mhz, 1, "%.0f"),
            num(c, sizeof c, st.power_mw, 1000, "%.1f"),
            num(d, sizeof d, st.temperature_c, 1, "%.0f"),
            num(e, sizeof e, st.ecc_uncorrected_new, 1, "%.0f"),
            num(f, sizeof f, st.xid_new, 1, "%.0f"),
            st.covered_ns ? 100.0 * st.slowed_ns / st.covered_ns : 0.0);
    for (int r = 0; r < SS_GPU_N_REASONS; r++)
        if (st.reason_ns[r] > 0)
            fprintf(out, " %s=%.0f%%", ss_gpu_reason_name((ss_gpu_reason)r),
                    100.0 * st.reason_ns[r] / st.covered_ns);
    fputc('\n', out);
}

/* Samples every GPU every INTERVAL_MS for WATCH_S seconds. */
static int watch(ss_gpu_backend *n, const ss_gpus_opts *o, FILE *out, FILE *err)
{
    uint32_t count = ss_gpu_backend_count(n);
    ss_gpu_timeline *tl[SS_GPU_MAX] = {0};
    int failed = 0;
    for (uint32_t i = 0; i < count; i++)
        if (!(tl[i] = ss_gpu_timeline_new())) {
            fprintf(err, "stepscope gpus: out of memory\n");
            failed = 1;
            goto done;
        }
    ss_mono_ns begin = ss_mono_now(), stop = begin + o->watch_s * 1000000000LL;
    ss_mono_ns t = begin;
    while (t < stop) {
        for (uint32_t i = 0; i < count; i++) {
            ss_gpu_sample s;
            if (ss_gpu_backend_sample(n, i, t, &s) != 0) {
                fprintf(err, "stepscope gpus: GPU %u could not be read\n", i);
                failed = 1;
                continue;
            }
            ss_gpu_timeline_add(tl[i], &s);
            print_sample_line(out, (double)(t - begin) / 1e9, &s);
        }
        fflush(out);
        struct timespec pause = {o->interval_ms / 1000,
                                 (o->interval_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
        t = ss_mono_now();
    }
    for (uint32_t i = 0; i < count; i++)
        print_summary(out, i, tl[i], begin, t);
done:
    for (uint32_t i = 0; i < count; i++)
        ss_gpu_timeline_free(tl[i]);
    return failed;
}

/* The rank rule of the vendor with this shell's environment. */
static void print_rank_gpu(FILE *out, const ss_gpu_backend *n)
{
    const ss_gpu_env env = {
        .cuda_visible_devices = getenv("CUDA_VISIBLE_DEVICES"),
        .hip_visible_devices = getenv("HIP_VISIBLE_DEVICES"),
        .rocr_visible_devices = getenv("ROCR_VISIBLE_DEVICES"),
        .local_rank = getenv("LOCAL_RANK"),
    };
    int mine = ss_gpu_backend_gpu_for_env(n, &env);
    fprintf(out, "rank GPU: ");
    if (ss_gpu_backend_vendor(n) == SS_GPU_VENDOR_AMD)
        fprintf(out, "ROCR_VISIBLE_DEVICES=%s HIP_VISIBLE_DEVICES=%s ",
                env.rocr_visible_devices ? env.rocr_visible_devices
                                         : "(unset)",
                env.hip_visible_devices ? env.hip_visible_devices
                                        : "(unset)");
    fprintf(out, "CUDA_VISIBLE_DEVICES=%s LOCAL_RANK=%s -> ",
            env.cuda_visible_devices ? env.cuda_visible_devices : "(unset)",
            env.local_rank ? env.local_rank : "(unset)");
    if (mine >= 0)
        fprintf(out, "GPU %d\n", mine);
    else
        fprintf(out, "none\n");
}

int ss_gpus_cmd(const ss_gpus_opts *o, FILE *out, FILE *err)
{
    ss_gpu_backend *n = ss_gpu_backend_open(NULL, NULL);
    if (!n) {
        fprintf(err, "stepscope gpus: out of memory\n");
        return 1;
    }
    ss_gpu_state state = ss_gpu_backend_state(n);
    if (state != SS_GPU_READY) {
        fprintf(state == SS_GPU_ABSENT ? out : err, "%s\n",
                ss_gpu_backend_why(n));
        ss_gpu_backend_close(n);
        return state == SS_GPU_ABSENT && !o->require ? 0 : 1;
    }
    uint32_t count = ss_gpu_backend_count(n);
    if (ss_gpu_backend_vendor(n) == SS_GPU_VENDOR_AMD)
        fprintf(out, "AMD SMI: %u GPU%s, no Xid errors (NVIDIA only)\n",
                count, count == 1 ? "" : "s");
    else
        fprintf(out, "NVML: %u GPU%s, Xid errors %s\n", count,
                count == 1 ? "" : "s",
                ss_gpu_backend_watches_xid(n) ? "watched"
                                              : "not watched (no events)");
    int failed = count == 0 && o->require;
    for (uint32_t i = 0; i < count; i++) {
        ss_gpu_sample s;
        if (ss_gpu_backend_sample(n, i, ss_mono_now(), &s) != 0) {
            fprintf(err, "stepscope gpus: GPU %u could not be read\n", i);
            failed = 1;
        }
        print_gpu(out, ss_gpu_backend_gpu(n, i), &s,
                  ss_gpu_backend_vendor(n) == SS_GPU_VENDOR_AMD);
    }
    print_rank_gpu(out, n);
    if (o->watch_s > 0)
        failed |= watch(n, o, out, err);
    ss_gpu_backend_close(n);
    return failed ? 1 : 0;
}
