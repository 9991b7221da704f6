/*
 * inject.h - the fault injector's plan: `stepscope run --inject SPEC`
 * (docs/fault-tolerance.md, "Fault injection").
 *
 * A user tests their own resume path by asking stepscope to break the job
 * on purpose.  Each SPEC is one fault:
 *
 *   kill-rank:R@STEP     SIGKILL rank R when it reaches STEP
 *   kill-node:K@STEP     SIGKILL every rank of node K when any of them
 *                        reaches STEP (the node's processes all die at
 *                        once; its agent stays and reports the exits)
 *   hang-rank:R@STEP     SIGSTOP rank R at STEP and never continue it, so
 *                        that the hang detector sees a hang
 *   stop-rank:R:MS       SIGSTOP rank R for MS milliseconds, then SIGCONT,
 *                        once: when it connects (at its start), or
 *   stop-rank:R:MS@STEP  when it reaches STEP
 *
 * A rank "reaches" STEP at the first sign the controller has that it is at
 * STEP or later: a STATUS saying it is in that step or later, or its
 * record of the step before (the caller passes that record's step + 1).
 * Each fault fires once.  This module is pure: it parses, checks
 * against the job's shape and decides which fault is due; the wiring
 * (run_inject.c) sends the signals and records them.
 */
#ifndef STEPSCOPE_INJECT_H
#define STEPSCOPE_INJECT_H

#include <stddef.h>
#include <stdint.h>

#define SS_INJECT_MAX 16        /* --inject flags per run */
#define SS_INJECT_SPEC_MAX 40   /* "stop-rank:4095:3600000@1000000000" */
#define SS_INJECT_MAX_MS 3600000u /* the longest stop-rank: an hour */

typedef enum {
    SS_INJECT_KILL_RANK,
    SS_INJECT_KILL_NODE,
    SS_INJECT_HANG_RANK,
    SS_INJECT_STOP_RANK
} ss_inject_kind;

typedef struct {
    ss_inject_kind kind;
    uint32_t target;       /* the rank, or the node for kill-node */
    int64_t step;          /* the step it fires at; -1: at the start */
    uint32_t duration_ms;  /* stop-rank only */
    char spec[SS_INJECT_SPEC_MAX + 1]; /* as it was typed */
    int fired;
} ss_inject;

typedef struct {
    ss_inject items[SS_INJECT_MAX];
    uint32_t n;
} ss_inject_plan;

/* Parses SPEC into *OUT (not fired).  Returns 0, or -1 with a one-line
 * reason in ERR ("kill-rank:1: missing @STEP (kill-rank:R@STEP)"). */
int ss_inject_parse(const char *spec, ss_inject *out, char *err,
                    size_t errlen);

/* Parses SPEC and appends it to PLAN.  Returns 0, or -1 with ERR (a bad
 * spec, or more than SS_INJECT_MAX). */
int ss_inject_add(ss_inject_plan *plan, const char *spec, char *err,
                  size_t errlen);

/* Checks every fault against the job: ranks below WORLD, nodes below
 * NNODES.  Returns 0, or -1 with ERR naming the spec. */
int ss_inject_check(const ss_inject_plan *plan, uint32_t world,
                    uint32_t nnodes, char *err, size_t errlen);

/* The controller learned that RANK is at STEP (in it or done with it; -1:
 * it has just connected).  Returns the index of a fault now due and marks
 * it fired, or -1 when none is; call again until -1, since several may be
 * due at once.  NPROC_LOCAL (ranks per node) places RANK on its node. */
int ss_inject_due(ss_inject_plan *plan, uint32_t rank, int64_t step,
                  uint32_t nproc_local);

/* The ranks fault INJ signals: [*FIRST, *FIRST + *COUNT). */
void ss_inject_targets(const ss_inject *inj, uint32_t nproc_local,
                       uint32_t *first, uint32_t *count);

/* The signal fault INJ sends first (SIGKILL or SIGSTOP) and how long a
 * stop lasts (0: a kill, or stopped for good). */
int ss_inject_signal(const ss_inject *inj, uint32_t *duration_ms);

/* Whether INJ ends its ranks (kill-rank, kill-node, hang-rank), as
 * opposed to pausing them for a while (stop-rank). */
int ss_inject_is_fatal(const ss_inject *inj);

#endif
