/*
 * hang.h - hang detection: when the watermark stops advancing, which
 * ranks are behind and why (docs/detectors.md, "hang"; docs/debug.md,
 * "Hangs").
 *
 * A pure policy, without clocks, sockets or threads of its own: the
 * controller's loop tells it each finalized step (ss_hang_progress) and,
 * on its housekeeping tick, what every rank is doing now (ss_hang_check
 * with one ss_hang_rank per rank, from the ranks' STATUS frames and the
 * aggregator).  When no step was finalized for longer than the timeout,
 * ss_hang_check fills one critical finding of kind "hang" naming the ranks
 * that are behind; it fires once per stall and is re-armed by the next
 * finalized step.
 *
 * The timeout: --hang-timeout when given; otherwise adaptive,
 * max(floor, factor x p99 of the last SS_HANG_HISTORY finalized step
 * times (the slowest rank's)), and before the first finalized step the
 * longer start-up timeout (imports, data loading, compilation come first).
 */
#ifndef STEPSCOPE_HANG_H
#define STEPSCOPE_HANG_H

#include <stdint.h>

#include "model.h"

#define SS_HANG_HISTORY 128     /* recent step times the adaptive timeout uses */
#define SS_HANG_NAME_MAX 64

typedef struct {
    ss_dur_ns timeout;      /* > 0: fixed (--hang-timeout); 0: adaptive */
    ss_dur_ns floor;        /* adaptive: never below this (30 s) */
    double factor;          /* adaptive: this many times the p99 (10) */
    ss_dur_ns startup;      /* before the first finalized step (600 s, or
                               the fixed timeout when larger) until a rank
                               shows work: a fixed timeout applies from
                               then on (ss_hang_check) */
    ss_dur_ns silent_after; /* a rank with no STATUS this long is silent:
                               stopped or frozen (5 s, or the timeout when
                               shorter, at least 2 s; ranks send one a
                               second) */
} ss_hang_config;

/* The defaults above. */
void ss_hang_config_defaults(ss_hang_config *cfg);

/* What one rank is doing now. */
typedef struct {
    int live;              /* 0: it left the run; not considered */
    int64_t last_step;     /* last step it completed; -1 none */
    int64_t cur_step;      /* step open now (STATUS); -1 between steps */
    char phase[SS_HANG_NAME_MAX];      /* innermost open phase; "" none */
    char collective[SS_HANG_NAME_MAX]; /* latest collective's kind; "" none */
    uint64_t coll_seq;     /* its number (1, 2, ...); 0 none */
    int coll_active;       /* 1 while inside it */
    ss_mono_ns heard_at;   /* its latest STATUS; 0 never */
    ss_dur_ns stopped_for; /* its process has been stopped this long, as
                              the host sees it; 0 running or unknown */
    ss_stop_kind stop_kind; /* ... held by what */
} ss_hang_rank;

typedef struct {
    ss_hang_config cfg;
    ss_mono_ns progress_at;  /* the last progress (or the start) */
    int64_t watermark;       /* -1 before the first finalized step */
    int fired;               /* a finding was made for this stall */
    ss_wall_ns wall_offset;  /* wall clock - NOW's clock; 0: unknown */
    int working;             /* before the first step: a rank showed work
                                (an open step, a phase, a collective) */
    uint64_t before_first;   /* ... and what the ranks showed last (a
                                hash): a change is progress */
    uint32_t n_times, next_time;
    ss_dur_ns times[SS_HANG_HISTORY];
} ss_hang;

/* Starts watching at NOW (the launch). */
void ss_hang_init(ss_hang *h, const ss_hang_config *cfg, ss_mono_ns now);

/* The wall clock reads OFFSET more than the clock of the NOWs given
 * (ss_wall_now() - now): the finding's evidence then says when the stall
 * began, "last_progress_at" (wall ns), for goodput's hang time. */
void ss_hang_set_wall_offset(ss_hang *h, ss_wall_ns offset);

/* Step STEP was finalized at NOW; STEP_TIME is its slowest rank's step
 * time (SS_MISSING: unknown).  Progress: re-arms the detector. */
void ss_hang_progress(ss_hang *h, uint64_t step, ss_dur_ns step_time,
                      ss_mono_ns now);

/* The controller could not watch for GAP up to NOW (its loop did not run:
 * it was stopped, or starved of CPU): the stall is measured without that
 * time, so that the ranks' work it had not read yet is not taken for a
 * hang (the last progress moves GAP later, at most to NOW). */
void ss_hang_pause(ss_hang *h, ss_dur_ns gap, ss_mono_ns now);

/* The timeout that applies now: before the first finalized step the
 * start-up one (or the fixed one when larger) until a rank shows work,
 * then the fixed one when given; after it the fixed or adaptive one. */
ss_dur_ns ss_hang_timeout(const ss_hang *h);

/*
 * At NOW, with RANKS[0..N) what each rank is doing: returns 1 and fills
 * *OUT (kind "hang", critical, id 0: the caller numbers it) when no
 * progress was made for longer than the timeout and no finding was made
 * for this stall yet; else returns 0.  Before the first finalized step,
 * any change in what the ranks show (open step, phase, collective) is
 * progress, so that a fixed timeout applies to a job that works but has
 * not finished a step yet (a script with no optimizer step under --auto),
 * and not to its start-up (imports, rendezvous) before it shows any work.
 * Ranks left: nothing to wait for,
 * 0.  Example message: "no progress for 31 s at step 412: rank 2 is in
 * phase 'load_batch' of step 412 (after all_reduce #1203); ranks 0,1,3
 * wait in all_reduce #1204 of step 412".
 */
int ss_hang_check(ss_hang *h, ss_mono_ns now, const ss_hang_rank *ranks,
                  uint32_t n, ss_finding *out);

#endif
