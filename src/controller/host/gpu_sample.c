/*
 * gpu_sample.c - the reason mask both vendors share and the empty sample
 * (gpu_sample.h).
 */
#include "gpu_sample.h"

#include <stdio.h>
#include <string.h>

/* --- clock reasons ------------------------------------------------------ */

static const struct {
    uint64_t bit; /* nvmlClocksEventReason*; MEM_THERMAL beyond NVML's */
    const char *name;
    int slows;
} reasons[SS_GPU_N_REASONS] = {
    [SS_GPU_REASON_IDLE] = {0x1, "idle", 0},
    [SS_GPU_REASON_APP_CLOCKS] = {0x2, "app_clocks", 0},
    [SS_GPU_REASON_POWER_CAP] = {0x4, "power_cap", 1},
    [SS_GPU_REASON_HW_SLOWDOWN] = {0x8, "hw_slowdown", 1},
    [SS_GPU_REASON_SYNC_BOOST] = {0x10, "sync_boost", 1},
    [SS_GPU_REASON_SW_THERMAL] = {0x20, "sw_thermal", 1},
    [SS_GPU_REASON_HW_THERMAL] = {0x40, "hw_thermal", 1},
    [SS_GPU_REASON_HW_POWER_BRAKE] = {0x80, "hw_power_brake", 1},
    [SS_GPU_REASON_DISPLAY_CLOCKS] = {0x100, "display_clocks", 0},
    [SS_GPU_REASON_MEM_THERMAL] = {1ULL << 40, "mem_thermal", 1},
};

uint64_t ss_gpu_reason_bit(ss_gpu_reason reason)
{
    return (unsigned)reason < SS_GPU_N_REASONS ? reasons[reason].bit : 0;
}

const char *ss_gpu_reason_name(ss_gpu_reason reason)
{
    return (unsigned)reason < SS_GPU_N_REASONS ? reasons[reason].name : "?";
}

int ss_gpu_reason_slows(ss_gpu_reason reason)
{
    return (unsigned)reason < SS_GPU_N_REASONS && reasons[reason].slows;
}

char *ss_gpu_reasons_format(uint64_t mask, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    buf[0] = '\0';
    size_t used = 0;
    uint64_t named = 0;
    for (int r = 0; r < SS_GPU_N_REASONS; r++) {
        named |= reasons[r].bit;
        if (!(mask & reasons[r].bit))
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                         reasons[r].name);
        if (w < 0 || (size_t)w >= len - used)
            return buf; /* truncated, still terminated */
        used += (size_t)w;
    }
    if (mask & ~named)
        snprintf(buf + used, len - used, "%s0x%llx", used ? "," : "",
                 (unsigned long long)(mask & ~named));
    else if (mask == 0)
        snprintf(buf, len, "none");
    return buf;
}

void ss_gpu_sample_clear(ss_gpu_sample *out, uint32_t index, ss_mono_ns at)
{
    memset(out, 0, sizeof *out);
    out->at = at;
    out->index = index;
    int64_t *fields[] = {
        &out->sm_clock_mhz,    &out->mem_clock_mhz,  &out->temperature_c,
        &out->hotspot_c,       &out->mem_temperature_c, &out->power_mw,
        &out->power_avg_mw,    &out->power_limit_mw, &out->energy_mj,
        &out->mem_used_bytes,  &out->mem_total_bytes, &out->util_gpu_pct,
        &out->util_mem_pct,    &out->ecc_uncorrected, &out->ecc_corrected,
        &out->xid_count};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *fields[i] = SS_MISSING;
}
