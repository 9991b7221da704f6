/*
 * fd_budget.h - the open-file limit a run needs, sized before any rank
 * starts (docs/launcher.md#open-files).
 *
 * The controller (and a node's agent) holds descriptors for each of its
 * ranks for as long as the rank lives: the rank's stdout and stderr, its
 * log, its telemetry connection, and the host evidence read from /proc and
 * the cgroup (the rank's stat and status, one schedstat per thread, the
 * cgroup's CPU and pressure files).  Measured: 13 for a Python rank with
 * two threads; every more thread or worker process of a rank takes more.
 * When they run out, accept() fails and ranks lose all their telemetry,
 * so the need is sized up front: SS_FD_FIXED for the controller itself
 * plus SS_FD_PER_RANK for each local rank is what a run cannot do
 * without, and SS_FD_PER_RANK_ROOM per rank (plus the HTTP server's
 * connections) what it is given when the hard limit allows.
 *
 * The soft limit is raised (never lowered) toward the hard one, no further
 * than that room; the ranks inherit it.
 */
#ifndef STEPSCOPE_FD_BUDGET_H
#define STEPSCOPE_FD_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#define SS_FD_FIXED 128         /* the store, the loop, listeners, HTTP
                                   workers, NVML, health checks */
#define SS_FD_PER_RANK 12       /* held for every rank at least */
#define SS_FD_PER_RANK_ROOM 64  /* given per rank when the hard limit
                                   allows: threads and workers */

/* The limits and what a run of RANKS local ranks needs of them; a limit
 * of RLIM_INFINITY is UINT64_MAX. */
typedef struct {
    uint32_t ranks;
    uint64_t soft_before, hard;
    uint64_t need;   /* SS_FD_FIXED + SS_FD_PER_RANK x RANKS */
    uint64_t room;   /* SS_FD_FIXED + SS_FD_PER_RANK_ROOM x RANKS */
    uint64_t soft;   /* the soft limit to run with */
    int enough;      /* HARD >= NEED: the run can start */
} ss_fd_plan;

/*
 * Plans for RANKS local ranks under the limits SOFT and HARD (pure):
 * SOFT is raised to ROOM plus HTTP_CONNS (what the HTTP server may take),
 * at most to HARD, never lowered.
 */
void ss_fd_plan_for(uint32_t ranks, uint64_t soft, uint64_t hard,
                    unsigned http_conns, ss_fd_plan *out);

/*
 * Reads RLIMIT_NOFILE, plans for RANKS local ranks and raises the soft
 * limit as planned.  Returns 0 (the plan in *OUT), or -1 with a one-line
 * reason in ERR when the hard limit is below the need: then nothing was
 * changed and the run must not start.
 */
int ss_fd_budget_apply(uint32_t ranks, ss_fd_plan *out, char *err,
                       size_t errlen);

#endif
