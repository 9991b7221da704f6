/*
 * cgroup_cpu.h - CPU throttling, pressure and freezing of the cgroup a
 * rank runs in.
 *
 * A rank can be slow because its container's CPU quota runs out (the CFS
 * bandwidth controller throttles it until the next period) or because the
 * machine is short of CPU, memory or I/O (pressure stall information).
 * Clusters run both cgroup versions, so both are read:
 *  - v2: <mount>/<path>/cpu.stat (nr_throttled, throttled_usec) and the
 *    cgroup's cpu.pressure, memory.pressure, io.pressure;
 *  - v1: the cpu controller's <mount>/<path>/cpu.stat (nr_throttled,
 *    throttled_time in ns); pressure then comes from /proc/pressure/{cpu,memory,io},
 *    which is the whole machine's (SS_CGROUP_PSI_SYSTEM says so).
 * A cgroup's freezer (a paused container, an operator's freeze) stops
 * every process in it without a signal: v2's cgroup.events says "frozen
 * 1", v1's freezer controller freezer.state "FROZEN".
 * The cgroup is found from /proc/PID/cgroup and the mount table
 * (/proc/self/mountinfo, read once); the files are kept open and read with
 * pread.  A rank can be moved to another cgroup while it runs (a container
 * runtime, an operator, a test): ss_cgroup_cpu_refresh finds the new one,
 * and the counters carry on from where the old one left them.
 *
 * PROC_ROOT is "/proc" in production; tests lay out a fake /proc whose
 * self/mountinfo points into a fake cgroup tree.
 */
#ifndef STEPSCOPE_CGROUP_CPU_H
#define STEPSCOPE_CGROUP_CPU_H

#include <stdint.h>
#include <sys/types.h>

#include "model.h"

/* Cumulative counters; SS_MISSING where this host does not provide one. */
typedef struct {
    int64_t nr_throttled;    /* CFS periods in which the cgroup was throttled */
    int64_t throttled_ns;    /* time throttled */
    int64_t psi_cpu_ns;      /* "some" stall totals: time at least one task */
    int64_t psi_memory_ns;   /* waited for CPU / memory / I/O */
    int64_t psi_io_ns;
} ss_cgroup_counters;

enum {
    SS_CGROUP_V1 = 1,         /* throttling read from the v1 cpu controller */
    SS_CGROUP_V2 = 2,         /* throttling read from the v2 hierarchy */
    SS_CGROUP_PSI_SYSTEM = 4, /* pressure is the machine's, not the cgroup's */
};

typedef struct ss_cgroup_cpu ss_cgroup_cpu;

/* Finds PID's cgroup under PROC_ROOT and opens its counters.  Never fails
 * for a missing cgroup feature (those counters read SS_MISSING); returns
 * NULL only when memory runs out.  Free with ss_cgroup_cpu_free (NULL is a
 * no-op). */
ss_cgroup_cpu *ss_cgroup_cpu_open(const char *proc_root, pid_t pid);
void ss_cgroup_cpu_free(ss_cgroup_cpu *c);

/* SS_CGROUP_* flags saying where the counters come from (0: nothing). */
int ss_cgroup_cpu_sources(const ss_cgroup_cpu *c);

/* The cgroup's path as /proc/PID/cgroup names it for the controller read
 * ("" when none was found). */
const char *ss_cgroup_cpu_path(const ss_cgroup_cpu *c);

/* Looks up PID's cgroup again; when it moved, reopens the files of the
 * new one so that the counters continue from their values at the move
 * (they stay cumulative; what they count from then on is the new
 * cgroup's).  Returns 1 when it moved, else 0 (also when the process is
 * gone).  Costs one read of /proc/PID/cgroup: call it seldom (the
 * controller does once a second). */
int ss_cgroup_cpu_refresh(ss_cgroup_cpu *c);

/* Reads the counters now. */
void ss_cgroup_cpu_read(ss_cgroup_cpu *c, ss_cgroup_counters *out);

/* Whether the cgroup's freezer holds the rank now (frozen, or being
 * frozen); 0 when it does not or this host has no freezer. */
int ss_cgroup_cpu_frozen(ss_cgroup_cpu *c);

#endif
