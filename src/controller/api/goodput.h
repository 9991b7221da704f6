/*
 * goodput.h - where a run's wall-clock time went: training progress
 * (productive time) and named badput, per attempt, adding up exactly to
 * the wall time; and the reliability figures over one run or many (MTBF,
 * MTTR, the Young/Daly checkpoint interval).
 *
 * A pure module over store data: it reads the attempts, steps, events and
 * findings through the reader (reader.h) and computes; it never writes.
 * Every category is defined in docs/fault-tolerance.md, and the
 * definitions there are the ones implemented here:
 *
 *   each attempt's window (its launch to the next attempt's launch, or to
 *   the run's end) is cut at four instants, launch <= B (its first step
 *   began) <= T (its last step was finalized) <= F (it failed) <= the
 *   window's end.  [launch, B] is start-up; [B, T] is cut into one slot
 *   per step (from the previous step's finalization to this one's), each
 *   slot into the step's time (lost work, checkpoint, data stall, waiting
 *   for stragglers, productive) and the gap after it (other); [T, F] is
 *   hang time and, when a later attempt restarted the job, lost work (the
 *   step in progress), else other; [F, end] is restart downtime when a
 *   later attempt followed, else other.
 *
 * The cuts are clamped into order, so the categories of an attempt add up
 * to its window and the attempts' to the run's wall time, exactly (in
 * integer nanoseconds), whatever the data.
 */
#ifndef STEPSCOPE_GOODPUT_H
#define STEPSCOPE_GOODPUT_H

#include <stddef.h>
#include <stdint.h>

#include "reader.h"

typedef enum {
    SS_GP_PRODUCTIVE,
    SS_GP_STARTUP,
    SS_GP_CHECKPOINT,
    SS_GP_LOST_WORK,
    SS_GP_RESTART,
    SS_GP_HANG,
    SS_GP_DATA_STALL,
    SS_GP_STRAGGLER,
    SS_GP_OTHER,
    SS_GP_N
} ss_gp_category;

/* The category's name in JSON, Prometheus and tables: "productive",
 * "startup", "checkpoint", "lost_work", "restart", "hang", "data_stall",
 * "straggler", "other". */
const char *ss_gp_category_name(ss_gp_category c);

/* The phase and sync names the accounting reads. */
#define SS_GP_PHASE_CHECKPOINT "checkpoint"
#define SS_GP_PHASE_DATA "data"

/* The failure causes MTBF counts, in ss_reliability.by_cause's order. */
enum { SS_GP_CAUSE_RANK_CRASH, SS_GP_CAUSE_HANG, SS_GP_CAUSE_NODE_LOST,
       SS_GP_CAUSE_HEALTH_CHECK, SS_GP_CAUSES };
const char *ss_gp_cause_name(int cause);

/* Which of the SS_GP_CAUSE_* CAUSE (attempts.cause) is, or -1 when it is
 * not a failure MTBF counts ("completed", "interrupted", "", an injected
 * fault "injected:..."). */
int ss_gp_failure_cause(const char *cause);

typedef struct {
    int64_t attempt;
    ss_wall_ns from, to;        /* its window; ns[] adds up to to - from */
    ss_dur_ns ns[SS_GP_N];
    char cause[48];             /* attempts.cause ("" when not recorded) */
    int64_t first_step, last_step, resumed_from; /* SS_MISSING: unknown */
    int64_t steps;              /* finalized steps */
    int64_t lost_steps;         /* of them, computed again by a later one */
    int64_t saves;              /* steps with a checkpoint phase */
    ss_wall_ns failed_at;       /* F; SS_MISSING unless it failed */
    ss_wall_ns first_step_at;   /* B; SS_MISSING without steps */
} ss_gp_attempt;

typedef struct {
    int64_t run_id;
    ss_wall_ns started_at, ended_at; /* ended_at: NOW for a running run */
    int running;
    ss_dur_ns wall_ns;               /* ended_at - started_at */
    ss_dur_ns ns[SS_GP_N];           /* adds up to wall_ns */
    double goodput;                  /* ns[PRODUCTIVE] / wall_ns; 0 if 0 */
    ss_gp_attempt *attempts;
    size_t n_attempts;
    /* Inputs of the reliability figures (ss_reliability_add). */
    ss_dur_ns up_ns;                 /* attempts' launch to failure/end */
    int64_t failures[SS_GP_CAUSES];
    int64_t recoveries;              /* failures followed by a first step */
    ss_dur_ns recover_ns;            /* summed: F to the next B */
    int64_t saves;                   /* over every attempt */
    ss_dur_ns save_ns;               /* summed checkpoint time of saves */
    int64_t intervals;               /* between saves of one attempt */
    ss_dur_ns interval_ns;           /* summed */
} ss_goodput;

/*
 * Computes the goodput of RUN_ID into *OUT (free with ss_goodput_free).
 * NOW is the wall time a running run is accounted up to.  Returns 0, or
 * the reader's SS_READ_NOT_FOUND / SS_READ_ERROR (ss_reader_errmsg says
 * why); on error *OUT is empty.  Memory: the run's attempts and events,
 * and 8 bytes per step of one attempt (steps are read in pages).
 */
int ss_goodput_load(ss_reader *r, int64_t run_id, ss_wall_ns now,
                    ss_goodput *out);
void ss_goodput_free(ss_goodput *g); /* zeroed or NULL: no-op */

/* MTBF, MTTR and the checkpoint interval over one run or every run of a
 * name (docs/fault-tolerance.md).  Zero it, ss_reliability_add each run,
 * then ss_reliability_finish. */
typedef struct {
    int64_t runs, failed_runs;      /* failed: at least one failure */
    ss_dur_ns up_ns;
    int64_t failures, by_cause[SS_GP_CAUSES];
    int64_t recoveries;
    ss_dur_ns recover_ns;
    int64_t saves, intervals;
    ss_dur_ns save_ns, interval_ns;
    /* by ss_reliability_finish; SS_MISSING / negative where unknown */
    double failures_per_hour;       /* failures / up hours */
    double per_hour[SS_GP_CAUSES];
    ss_dur_ns mtbf_ns;              /* up_ns / failures */
    ss_dur_ns mttr_ns;              /* recover_ns / recoveries */
    ss_dur_ns save_cost_ns;         /* mean checkpoint time C */
    ss_dur_ns measured_interval_ns; /* mean time between saves tau */
    ss_dur_ns optimal_interval_ns;  /* sqrt(2 C MTBF) */
    double waste_measured, waste_optimal; /* C/tau + tau/(2 MTBF) */
    double gain;                    /* waste_measured - waste_optimal */
} ss_reliability;

void ss_reliability_add(ss_reliability *rel, const ss_goodput *g);
void ss_reliability_finish(ss_reliability *rel);

#endif
