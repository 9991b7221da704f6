/*
 * proc_tree.h - one rank's process tree, read from /proc at no cost to it.
 *
 * The host's evidence about a rank comes from outside the rank: the
 * controller (or a node agent) reads the kernel's accounting for the rank's
 * process and all its descendants (data-loader workers, compilers, any
 * child it spawned): CPU time used, time spent runnable but waiting for a
 * CPU (run-queue delay, from schedstat), context switches, major page
 * faults, and whether the rank's main process is stopped right now.
 *
 * Reading is cheap by design: the membership of the tree (processes through
 * /proc/PID/task/TID/children, threads through /proc/PID/task) is rescanned
 * once per SS_PROC_TREE_RESCAN_NS and in a sample that finds a followed
 * process's thread count changed (so a new thread is counted from the first
 * sample after its start, with what it waited since), and between rescans
 * every file is read with pread(2) on a descriptor kept open, one system
 * call per file.  Counters are cumulative and never go down: when a process or
 * thread of the tree ends, what it had counted up to the last read is kept,
 * and a process reaped by its parent inside the tree is counted whole.
 * CPU time and run-queue delay come from schedstat, in nanoseconds, summed
 * over the followed threads, so a short step's CPU time is right, not only
 * its average over many steps (what children a process reaped used comes
 * from its c- fields, in ticks).  Without schedstat, CPU time comes from
 * the kernel's tick accounting alone (utime + stime, 1/HZ resolution:
 * exact on average, not per short step).
 *
 * PROC_ROOT is "/proc" in production; tests point it at a directory laid
 * out like /proc.
 */
#ifndef STEPSCOPE_PROC_TREE_H
#define STEPSCOPE_PROC_TREE_H

#include <stdint.h>
#include <sys/types.h>

#include "model.h"

#define SS_PROC_TREE_RESCAN_NS 1000000000LL /* membership rescan period */
#define SS_PROC_TREE_MAX_PROCS 64           /* processes followed per tree */
#define SS_PROC_TREE_MAX_THREADS 512        /* threads followed per tree */

/* Cumulative counters of a process tree at one instant.  A counter the
 * kernel does not provide here (no schedstat: CONFIG_SCHEDSTATS off) is
 * SS_MISSING. */
typedef struct {
    int64_t cpu_ns;         /* time on a CPU of every process (its
                               threads' schedstat, ended threads' up to
                               their last read; without schedstat, user
                               + system ticks), and of the children they
                               reaped (ticks) */
    int64_t runq_ns;        /* runnable, waiting for a CPU: every thread */
    int64_t vol_switches;   /* voluntary context switches, main threads */
    int64_t invol_switches; /* involuntary (preempted), main threads */
    int64_t major_faults;   /* page faults that needed I/O, every process */
    int stopped;            /* the root process is stopped (state T/t) */
    uint32_t n_procs, n_threads; /* what the sample covered */
} ss_proc_counters;

typedef struct ss_proc_tree ss_proc_tree;

/* Starts following ROOT_PID's tree under PROC_ROOT (copied).  Returns NULL
 * only when memory runs out.  Free with ss_proc_tree_free (NULL is a
 * no-op), which closes every descriptor it holds. */
ss_proc_tree *ss_proc_tree_new(const char *proc_root, pid_t root_pid);
void ss_proc_tree_free(ss_proc_tree *t);

/* Reads the tree's counters at monotonic time NOW (used only to decide when
 * to rescan membership) into OUT.  Returns 0; or -1 when the root process
 * is gone and nothing was ever read (OUT untouched).  Once the root has
 * ended, the last counters stay (cumulative) and 0 is returned. */
int ss_proc_tree_sample(ss_proc_tree *t, ss_mono_ns now, ss_proc_counters *out);

/* How many descriptors the tree holds open now (for tests and budgets). */
uint32_t ss_proc_tree_open_files(const ss_proc_tree *t);

#endif
