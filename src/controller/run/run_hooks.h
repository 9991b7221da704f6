/*
 * run_hooks.h - what the parts of `stepscope run` (run_ranks.c,
 * run_ingest.c, run_summary.c and the attempts' wiring in run.c) do
 * outside their own memory: node 0's launcher (launcher.h), the timers of
 * the controller's loop and the clock.
 *
 * run.c gives the real ones (ss_launcher, libuv, ss_mono_now); the unit
 * tests give a fake launcher, fake timers and a fake clock
 * (run_wiring_test.c), so that the run's wiring is driven without a
 * process or a loop.  Every hook is called on the controller's one
 * thread.
 */
#ifndef STEPSCOPE_RUN_HOOKS_H
#define STEPSCOPE_RUN_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "clocks.h"
#include "launcher.h"

typedef struct {
    void *ctx;
    /* The monotonic clock. */
    ss_mono_ns (*now)(void *ctx);
    /* Launches node 0's ranks of one attempt as CFG says; what they do is
     * reported through CB (rank exits, then all exited once).  Returns
     * 0, or -1 with ERR. */
    int (*launch)(void *ctx, const ss_launch_config *cfg,
                  const ss_launch_callbacks *cb, char *err, size_t errlen);
    /* The launch of the attempt before is forgotten (its ranks are
     * gone); a new launch follows. */
    void (*release)(void *ctx);
    /* Ends the launched ranks for REASON: SIGTERM then SIGKILL after the
     * grace period, or (KILL_NOW) SIGKILL at once.  Nothing when none
     * was launched. */
    void (*stop_ranks)(void *ctx, int kill_now, const char *reason);
    /* Local rank RANK's pid, 0 before the launch or once it exited. */
    int (*rank_pid)(void *ctx, uint32_t rank);
    /* Node 0's exit status once all its ranks exited (launcher.h,
     * ss_launcher_exit_status), -1 before. */
    int (*exit_status)(void *ctx);
    /* Processes the ranks left behind that were ended. */
    uint32_t (*left_behind)(void *ctx);
    /* Why node 0's ranks failed, in the launcher's words, into OUT
     * (ss_launcher_failure_summary): its length, 0 when none failed. */
    size_t (*failure_summary)(void *ctx, char *out, size_t outlen);
    /* The local rank of node 0 that failed first once all its ranks
     * exited (ss_launcher_first_failure), -1 when none failed. */
    int (*first_failed)(void *ctx);
    /* Global rank RANK's script has ended, its recorder said goodbye
     * (ss_launcher_rank_script_ended).  May be NULL. */
    void (*script_ended)(void *ctx, uint32_t rank);
    /* A rank's progress bar on the terminal gets its newline before the
     * run prints a line of its own (ss_launcher_end_progress).  May be
     * NULL. */
    void (*end_progress)(void *ctx);
    /* Whether node 0's local rank RANK, just dead of SIGKILL, was killed
     * by the kernel's OOM killer (ss_launcher_oom_kill): 1 or 2 with a
     * sentence in OUT, else 0.  May be NULL (never). */
    int (*oom_kill)(void *ctx, uint32_t rank, char *out, size_t outlen);
    /* Starts node 0's health checks before a later attempt on the loop
     * (run_faults_health_start): 0, and run_health_done follows once they
     * are done, or -1 with ERR. */
    int (*health_start)(void *ctx, char *err, size_t errlen);
    /* Starts (START) or stops RANK's linger timer: SS_LIFE_LINGER_MS,
     * then run_linger_over. */
    void (*linger)(void *ctx, uint32_t rank, int start);
    /* Starts the backoff timer before the next attempt (DELAY_MS, then
     * ss_attempt_backoff_over), or stops it. */
    void (*backoff_start)(void *ctx, uint32_t delay_ms);
    void (*backoff_stop)(void *ctx);
    /* The run is over: the loop stops (its timers with it). */
    void (*end_loop)(void *ctx);
} run_hooks;

#endif
