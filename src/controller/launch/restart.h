/*
 * restart.h - the restart policy of `stepscope run` (docs/fault-tolerance.md,
 * "Restarts"): whether the job is launched again after an attempt ended,
 * and after how long.
 *
 * Pure: no clock, no I/O.  The controller (run.c) describes how an
 * attempt ended; the policy answers restart-or-stop with a delay and a
 * sentence for the person.  Its rules, in order:
 *   1. only failures restart: a rank that failed, a hang acted on with
 *      --on-hang restart, a lost node that may rejoin (not a completed
 *      job, a stop the user asked for, a failed health check);
 *   2. a job that failed before its first step twice in a row the same way
 *      (the same exit status and the same last output line of the rank
 *      that failed first) is deterministic: not retried again;
 *   3. at most --max-restarts restarts in all (torchrun's meaning);
 *   4. at most --max-restarts-per-hour restarts within any hour (0: no
 *      limit);
 *   5. the delay before restart n (0-based) is --restart-backoff x 2^n,
 *      at most SS_RESTART_BACKOFF_MAX_MS.
 */
#ifndef STEPSCOPE_RESTART_H
#define STEPSCOPE_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define SS_RESTART_MAX 1000               /* --max-restarts at most */
#define SS_RESTART_PER_HOUR_MAX 1000      /* --max-restarts-per-hour at most */
#define SS_RESTART_BACKOFF_MS_DEFAULT 1000
#define SS_RESTART_BACKOFF_MAX_MS 30000
#define SS_RESTART_SIG_MAX 320            /* bytes of a failure signature */

typedef struct {
    uint32_t max_restarts; /* --max-restarts (default 0) */
    uint32_t backoff_ms;   /* --restart-backoff, the first delay */
    uint32_t per_hour;     /* --max-restarts-per-hour; 0: no limit */
} ss_restart_config;

/* The policy's memory across attempts.  Caller-owned; members private. */
typedef struct {
    ss_restart_config cfg;
    uint32_t restarts;                       /* granted so far */
    ss_mono_ns granted_at[SS_RESTART_PER_HOUR_MAX]; /* ring, last per_hour */
    int early_failed;  /* the last attempt failed before its first step */
    char early_sig[SS_RESTART_SIG_MAX];
} ss_restart_policy;

/* How an attempt ended, as the controller saw it. */
typedef struct {
    uint32_t attempt;
    int restartable;     /* rule 1: a failure a restart may follow */
    const char *why_not; /* when not restartable: why, for the sentence */
    int made_progress;   /* a step of this attempt was finalized */
    /* the failure's signature (ss_restart_signature), "" when unknown */
    const char *signature;
    ss_mono_ns now;
} ss_attempt_end;

typedef struct {
    int restart;       /* 1: launch attempt + 1 after DELAY_MS */
    uint32_t delay_ms;
    char why[400];     /* one sentence: the delay, or why the job stops */
} ss_restart_verdict;

void ss_restart_init(ss_restart_policy *p, const ss_restart_config *cfg);

/* Decides after attempt END->attempt ended; a granted restart is counted
 * (rules 3 and 4) and its time kept. */
void ss_restart_decide(ss_restart_policy *p, const ss_attempt_end *end,
                       ss_restart_verdict *out);

/*
 * The signature of a failure for rule 2, into OUT (always NUL-terminated):
 * "status S: HOW | LAST LINE", from the job status S and the failure text
 * the launcher writes (ss_launcher_failure_summary, possibly prefixed
 * "node K: "): HOW is what follows "failed first: " up to " (pid", LAST
 * LINE the last line printed with that rank's "[rank R] " prefix.  Pids
 * and step numbers are left out: they differ between identical failures.
 */
void ss_restart_signature(int status, const char *failure_text, char *out,
                          size_t outlen);

#endif
