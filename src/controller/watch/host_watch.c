/*
 * host_watch.c - the host's evidence about the ranks, gathered on the
 * controller's loop (host_watch.h).
 *
 * One slot per rank: its process tree, cgroup reader and timeline, the
 * first and newest counters read (for the totals) and its stop state.
 */
#include "host_watch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "clocks.h"
#include "cgroup_cpu.h"
#include "gpu_watch.h"
#include "host_timeline.h"
#include "proc_tree.h"

#define CGROUP_REFRESH_NS 1000000000LL

typedef struct {
    pid_t pid;              /* 0: not followed, or exited */
    ss_proc_tree *tree;
    ss_cgroup_cpu *cgroup;
    ss_host_timeline *timeline;
    ss_mono_ns last_sample;     /* 0: never */
    ss_mono_ns cgroup_checked;
    ss_proc_counters first_proc, last_proc;
    ss_cgroup_counters first_cg, last_cg;
    ss_mono_ns stopped_since;   /* 0: running */
    ss_stop_kind stop_kind;     /* what holds it (a tracer: CLD_TRAPPED) */
    ss_dur_ns stopped_total;    /* closed stops */
} watched_rank;

struct ss_host_watch {
    uv_timer_t timer;
    uv_signal_t sigchld;
    char proc_root[256];
    uint32_t nprocs;
    watched_rank *ranks;
    uint64_t samples;
    ss_gpu_watch *gpus; /* NULL when it could not start */
};

static void sample(ss_host_watch *hw, watched_rank *w, ss_mono_ns now)
{
    if (!w->tree)
        return;
    hw->samples++;
    if (w->pid && now - w->cgroup_checked >= CGROUP_REFRESH_NS) {
        ss_cgroup_cpu_refresh(w->cgroup);
        w->cgroup_checked = now;
    }
    ss_proc_counters p;
    if (ss_proc_tree_sample(w->tree, now, &p) != 0)
        return; /* gone before its first read */
    ss_cgroup_counters c;
    ss_cgroup_cpu_read(w->cgroup, &c);
    ss_host_timeline_add(w->timeline, now, &p, &c);
    /* A cgroup's freezer stops the rank without a signal: no SIGCHLD
     * says so, the sample does (from this sample to the one that sees
     * it thawed). */
    int frozen = ss_cgroup_cpu_frozen(w->cgroup);
    if (frozen && !w->stopped_since) {
        ss_host_timeline_stopped(w->timeline, now);
        w->stopped_since = now;
        w->stop_kind = SS_STOP_FREEZER;
    } else if (!frozen && w->stopped_since &&
               w->stop_kind == SS_STOP_FREEZER) {
        ss_host_timeline_continued(w->timeline, now);
        w->stopped_total += now - w->stopped_since;
        w->stopped_since = 0;
    }
    if (!w->last_sample) {
        w->first_proc = p;
        w->first_cg = c;
    }
    w->last_proc = p;
    w->last_cg = c;
    w->last_sample = now;
}

static void on_timer(uv_timer_t *t)
{
    ss_host_watch *hw = t->data;
    ss_mono_ns now = ss_mono_now();
    for (uint32_t i = 0; i < hw->nprocs; i++)
        if (hw->ranks[i].pid)
            sample(hw, &hw->ranks[i], now);
}

/* Stop and continue notifications of the ranks (never their exits). */
static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)signum;
    ss_host_watch *hw = h->data;
    for (uint32_t i = 0; i < hw->nprocs; i++) {
        watched_rank *w = &hw->ranks[i];
        for (int k = 0; w->pid && k < 4; k++) {
            siginfo_t info;
            memset(&info, 0, sizeof info);
            if (waitid(P_PID, (id_t)w->pid, &info,
                       WSTOPPED | WCONTINUED | WNOHANG) != 0 ||
                info.si_pid != w->pid)
                break;
            ss_mono_ns now = ss_mono_now();
            if (info.si_code == CLD_STOPPED || info.si_code == CLD_TRAPPED) {
                ss_host_timeline_stopped(w->timeline, now);
                if (!w->stopped_since)
                    w->stopped_since = now;
                w->stop_kind = info.si_code == CLD_TRAPPED ? SS_STOP_TRACER
                                                            : SS_STOP_SIGNAL;
            } else if (info.si_code == CLD_CONTINUED) {
                ss_host_timeline_continued(w->timeline, now);
                if (w->stopped_since)
                    w->stopped_total += now - w->stopped_since;
                w->stopped_since = 0;
            }
        }
    }
}

ss_host_watch *ss_host_watch_start(uv_loop_t *loop, uint32_t nprocs,
                                   uint32_t interval_ms,
                                   const char *proc_root)
{
    ss_host_watch *hw = calloc(1, sizeof *hw);
    if (!hw)
        return NULL;
    hw->ranks = calloc(nprocs ? nprocs : 1, sizeof *hw->ranks);
    if (!hw->ranks) {
        free(hw);
        return NULL;
    }
    hw->nprocs = nprocs;
    snprintf(hw->proc_root, sizeof hw->proc_root, "%s", proc_root);
    hw->gpus = ss_gpu_watch_start(nprocs, interval_ms, proc_root, NULL);
    uv_timer_init(loop, &hw->timer);
    hw->timer.data = hw;
    uv_timer_start(&hw->timer, on_timer, interval_ms, interval_ms);
    uv_unref((uv_handle_t *)&hw->timer);
    uv_signal_init(loop, &hw->sigchld);
    hw->sigchld.data = hw;
    uv_signal_start(&hw->sigchld, on_sigchld, SIGCHLD);
    uv_unref((uv_handle_t *)&hw->sigchld);
    return hw;
}

int ss_host_watch_rank(ss_host_watch *hw, uint32_t rank, pid_t pid)
{
    if (!hw || rank >= hw->nprocs || pid <= 0)
        return -1;
    watched_rank *w = &hw->ranks[rank];
    if (w->tree)
        return 0; /* already followed */
    w->tree = ss_proc_tree_new(hw->proc_root, pid);
    w->cgroup = ss_cgroup_cpu_open(hw->proc_root, pid);
    w->timeline = ss_host_timeline_new();
    if (!w->tree || !w->cgroup || !w->timeline) {
        ss_proc_tree_free(w->tree);
        ss_cgroup_cpu_free(w->cgroup);
        ss_host_timeline_free(w->timeline);
        memset(w, 0, sizeof *w);
        return -1;
    }
    w->pid = pid;
    ss_mono_ns now = ss_mono_now();
    w->cgroup_checked = now;
    sample(hw, w, now);
    return 0;
}

void ss_host_watch_rank_exited(ss_host_watch *hw, uint32_t rank)
{
    if (!hw || rank >= hw->nprocs)
        return;
    watched_rank *w = &hw->ranks[rank];
    if (!w->pid)
        return;
    ss_mono_ns now = ss_mono_now();
    sample(hw, w, now); /* its last counters (the tree keeps them) */
    if (w->stopped_since) {
        ss_host_timeline_continued(w->timeline, now);
        w->stopped_total += now - w->stopped_since;
        w->stopped_since = 0;
    }
    w->pid = 0;
}

void ss_host_watch_rank_hello(ss_host_watch *hw, uint32_t rank, pid_t pid)
{
    if (hw)
        ss_gpu_watch_rank(hw->gpus, rank, pid);
}

void ss_host_watch_step_done(ss_host_watch *hw, uint32_t rank)
{
    if (!hw || rank >= hw->nprocs)
        return;
    watched_rank *w = &hw->ranks[rank];
    ss_mono_ns now = ss_mono_now();
    if (w->pid && now - w->last_sample >= SS_HOST_WATCH_MIN_GAP_NS)
        sample(hw, w, now);
}

int ss_host_watch_window(void *ctx, uint32_t rank, ss_mono_ns begin_ns,
                         ss_mono_ns end_ns, ss_host_step *out)
{
    ss_host_watch *hw = ctx;
    if (!hw || rank >= hw->nprocs || !hw->ranks[rank].timeline)
        return -1;
    watched_rank *w = &hw->ranks[rank];
    if (end_ns > w->last_sample) {
        ss_mono_ns now = ss_mono_now();
        if (now >= end_ns)
            sample(hw, w, now);
    }
    int gpu_rc = ss_gpu_watch_window(hw->gpus, rank, begin_ns, end_ns,
                                     &out->gpu);
    ss_gpu_evidence gpu = out->gpu; /* the host timeline clears OUT */
    int rc = ss_host_timeline_window(w->timeline, begin_ns, end_ns, out);
    out->gpu = gpu;
    if (rc == 0 || gpu_rc == 0)
        return 0;
    return out->stopped_ns == SS_MISSING ? -1 : 0;
}

static int64_t moved(int64_t first, int64_t last)
{
    return first == SS_MISSING || last == SS_MISSING || last < first
               ? SS_MISSING
               : last - first;
}

int ss_host_watch_totals(const ss_host_watch *hw, uint32_t rank,
                         ss_host_step *out)
{
    if (!hw || rank >= hw->nprocs || !hw->ranks[rank].last_sample)
        return -1;
    const watched_rank *w = &hw->ranks[rank];
    out->cpu_ns = moved(w->first_proc.cpu_ns, w->last_proc.cpu_ns);
    out->runq_ns = moved(w->first_proc.runq_ns, w->last_proc.runq_ns);
    out->vol_switches = moved(w->first_proc.vol_switches,
                              w->last_proc.vol_switches);
    out->invol_switches = moved(w->first_proc.invol_switches,
                                w->last_proc.invol_switches);
    out->major_faults = moved(w->first_proc.major_faults,
                              w->last_proc.major_faults);
    out->throttled_ns = moved(w->first_cg.throttled_ns, w->last_cg.throttled_ns);
    out->nr_throttled = moved(w->first_cg.nr_throttled, w->last_cg.nr_throttled);
    out->psi_cpu_ns = moved(w->first_cg.psi_cpu_ns, w->last_cg.psi_cpu_ns);
    out->psi_memory_ns = moved(w->first_cg.psi_memory_ns,
                               w->last_cg.psi_memory_ns);
    out->psi_io_ns = moved(w->first_cg.psi_io_ns, w->last_cg.psi_io_ns);
    out->stopped_ns = w->stopped_total +
                      (w->stopped_since ? ss_mono_now() - w->stopped_since : 0);
    ss_gpu_watch_totals(hw->gpus, rank, &out->gpu);
    return 0;
}

ss_dur_ns ss_host_watch_stopped_for(const ss_host_watch *hw, uint32_t rank,
                                    ss_mono_ns now, ss_stop_kind *kind)
{
    if (kind)
        *kind = SS_STOP_SIGNAL;
    if (!hw || rank >= hw->nprocs || !hw->ranks[rank].pid ||
        !hw->ranks[rank].stopped_since)
        return 0;
    const watched_rank *w = &hw->ranks[rank];
    if (kind)
        *kind = w->stop_kind;
    return now > w->stopped_since ? now - w->stopped_since : 1;
}

uint64_t ss_host_watch_samples(const ss_host_watch *hw)
{
    return hw ? hw->samples : 0;
}

void ss_host_watch_close(ss_host_watch *hw)
{
    if (!hw)
        return;
    if (!uv_is_closing((uv_handle_t *)&hw->timer))
        uv_close((uv_handle_t *)&hw->timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&hw->sigchld))
        uv_close((uv_handle_t *)&hw->sigchld, NULL);
}

void ss_host_watch_free(ss_host_watch *hw)
{
    if (!hw)
        return;
    for (uint32_t i = 0; i < hw->nprocs; i++) {
        ss_proc_tree_free(hw->ranks[i].tree);
        ss_cgroup_cpu_free(hw->ranks[i].cgroup);
        ss_host_timeline_free(hw->ranks[i].timeline);
    }
    ss_gpu_watch_stop(hw->gpus);
    free(hw->ranks);
    free(hw);
}
