/*
 * detector_params.h - the detectors' tunables: one row per setting.
 *
 * Each row is X(enum id, name, default, unit, min, max, doc).  The enum ids
 * index ss_detectors.p[] (detectors_internal.h) and ss_detector_config's
 * values; detector_params.c turns the rows into the public table
 * ss_detector_params[] (what `stepscope run --set help` lists) and parses
 * `--set NAME=VALUE`.  A new tunable is one new row here, in the block of
 * its detector (the order is the order of `--set help` and of
 * docs/detectors.md), and a line in docs/detectors.md.  Internal to the
 * analysis stage.
 */
#ifndef STEPSCOPE_DETECTOR_PARAMS_H
#define STEPSCOPE_DETECTOR_PARAMS_H

#include "detector_config.h"

/* X(enum id, name, default, unit, min, max, doc) */
#define SS_DETECTOR_PARAMS(X)                                                 \
    X(P_WARMUP, "warmup_steps", 3, "steps", 0, 1e6,                           \
      "first finalized steps ignored by every detector")                      \
    X(P_UPDATE, "update_steps", 50, "steps", 1, 1e9,                          \
      "a changed finding is emitted again at most once per this many steps")  \
    X(P_S_ALPHA, "straggler.alpha", 1e-4, "probability", 1e-12, 0.5,          \
      "false alarms on a clean job: chance per window of steps that any "     \
      "rank is wrongly named (split over ranks and sub-windows)")             \
    X(P_S_MIN_LATE_FRAC, "straggler.min_late_frac", 0.05, "ratio", 0, 100,    \
      "a straggler's median lateness (lower confidence bound) is at least "   \
      "this fraction of the median step time...")                            \
    X(P_S_MIN_LATE_MS, "straggler.min_late_ms", 0.05, "ms", 0, 1e9,           \
      "...and at least this (timer slack: shorter gaps say nothing)")         \
    X(P_S_BOUND_ALPHA, "straggler.bound_alpha", 0.01, "probability", 1e-9,    \
      0.5, "one-sided error of the lower confidence bound on the median "     \
      "lateness")                                                             \
    X(P_S_BLAME_FRAC, "straggler.blame_frac", 0.25, "ratio", 0, 1e3,          \
      "a phase is blamed only when it explains this share of the lateness")   \
    X(P_S_WINDOW, "straggler.window", 100, "steps", 10, 1024,                 \
      "recent steps each rank is judged over")                                \
    X(P_S_MIN_STEPS, "straggler.min_steps", 20, "steps", 1, 1024,             \
      "steps a rank must have been seen in before it can be persistent")      \
    X(P_S_END_FRAC, "straggler.end_frac", 0.025, "ratio", 0, 100,             \
      "an episode ends when the median lateness over its window falls "       \
      "below this fraction of the median step time")                          \
    X(P_S_TRANSIENT, "straggler.transient_steps", 10, "steps", 5, 1024,       \
      "transient: significant over the newest this many steps, not over "     \
      "the whole window")                                                     \
    X(P_S_MIN_COST_MS, "straggler.min_cost_ms", 50, "ms", 0, 1e9,             \
      "an episode is reported once its lateness has cost the job this much "  \
      "in all (a burst: median lateness times late steps, twice this of "     \
      "two ranks; a persistent episode: its late steps' lateness from the "   \
      "window that opened it)")                                               \
    X(P_S_CRIT_FRAC, "straggler.critical_frac", 0.25, "ratio", 0, 100,        \
      "critical when the median lateness is this fraction of a median step")  \
    X(P_S_SYNC_RATIO, "straggler.sync_phase_ratio", 0.5, "ratio", 0, 1,       \
      "sync-phase rule only when the step-time spread is below this "         \
      "fraction of the shortest wait's gap to the median wait")               \
    X(P_S_NOISE_K, "straggler.noise_k", 1.5, "sigmas", 0, 1e3,                 \
      "a straggler's median lateness exceeds this many robust sigmas of its " \
      "peers' lateness (the run-to-run noise of arrival)")                   \
    X(P_H_WINDOW, "host.window", 100, "steps", 10, 1024,                      \
      "recent steps each rank's host evidence is judged over")                \
    X(P_H_MIN_STEPS, "host.min_steps", 20, "steps", 1, 1024,                  \
      "steps with host evidence a rank needs before it is judged")            \
    X(P_H_MIN_SHARE, "host.min_share", 0.05, "ratio", 0, 100,                 \
      "a rank loses this fraction of its step time more than the median "     \
      "rank to one cause (run-queue delay, stops, CPU quota)...")             \
    X(P_H_PEER_FACTOR, "host.peer_factor", 1.5, "ratio", 1, 1e6,              \
      "...and at least this multiple of the median rank's share")             \
    X(P_H_EXPLAIN_FRAC, "host.explain_frac", 0.5, "ratio", 0, 100,            \
      "a slow step is one rank's when the step ran over the window's median " \
      "step by this fraction of what that rank alone lost")                   \
    X(P_H_MIN_EVENTS, "host.min_events", 5, "steps", 1, 1024,                 \
      "slow steps one rank must explain in the window to be named for them")  \
    X(P_H_MIN_STOPS, "host.min_stops", 2, "steps", 1, 1024,                  \
      "steps in the window a rank alone was stopped in (none of the median " \
      "rank) for it to be named stopped when the stops cost host.min_share") \
    X(P_H_ONE_STOP_STEPS, "host.one_stop_steps", 10, "steps", 1, 1e6,        \
      "a rank alone stopped in one step only is named stopped when that "     \
      "stop lasted this many of the window's median steps")                   \
    X(P_H_SAMPLE_MS, "host.sample_ms", 10, "ms", 0, 1e6,                      \
      "for waits for a CPU, the tests of chance count a step shorter than "  \
      "this as that fraction of a sample (0: every step is one)")            \
    X(P_H_ALPHA, "host.alpha", 1e-4, "probability", 1e-12, 0.5,               \
      "false alarms: chance per window that a rank of a clean job is named "  \
      "for a cause (split over ranks and causes)")                            \
    X(P_H_MIN_COST_MS, "host.min_cost_ms", 50, "ms", 0, 1e9,                 \
      "a rank is named for waiting for a CPU once it has waited this much "   \
      "beyond the median rank since the rules held (from their window on)")  \
    X(P_H_CRIT_FRAC, "host.critical_frac", 0.25, "ratio", 0, 100,             \
      "critical when the lost time costs the job this fraction of a step")    \
    X(P_G_MIN_FRAC, "gpu.min_frac", 0.2, "ratio", 0.01, 1,                    \
      "a rank is named when its GPU was slowed in this fraction of the "      \
      "host.window steps with GPU evidence (at least host.min_steps)")        \
    X(P_G_STEP_SHARE, "gpu.step_share", 0.1, "ratio", 0, 1,                   \
      "a step is slowed when its GPU was held down (power cap, thermal, "     \
      "hardware slowdown...) for this fraction of the step's sampled time")  \
    X(P_D_MIN_MS, "data_stall.min_ms", 20, "ms", 0, 1e9,                      \
      "a data phase stalls when it exceeds the median rank's by this much...")\
    X(P_D_FACTOR, "data_stall.factor", 4, "ratio", 1, 1e6,                    \
      "...and is at least this multiple of the median rank's")                \
    X(P_D_MIN_COUNT, "data_stall.min_count", 3, "stalls", 1, 1e9,             \
      "stalls on one rank before it is reported")                             \
    X(P_D_PERIOD_FRAC, "data_stall.period_frac", 0.75, "ratio", 0.1, 1,       \
      "stalls are periodic when this fraction of the gaps match the median "  \
      "gap")                                                                  \
    X(P_D_CRIT_FRAC, "data_stall.critical_frac", 1.0, "ratio", 0, 1e6,        \
      "critical when the median stall is this fraction of a median step")     \
    X(P_J_WINDOW, "jitter.window", 200, "steps", 20, 4096,                    \
      "recent steps of median-rank step time kept")                           \
    X(P_J_MIN_STEPS, "jitter.min_steps", 30, "steps", 5, 4096,                \
      "steps needed before jitter is judged")                                 \
    X(P_J_MAD_K, "jitter.mad_k", 6, "sigmas", 0, 1e3,                         \
      "outlier: above median + this many robust sigmas (1.4826 MAD)...")      \
    X(P_J_REL_FLOOR, "jitter.rel_floor", 0.5, "ratio", 0, 1e3,                \
      "...and above median * (1 + this)...")                                  \
    X(P_J_ABS_FLOOR_MS, "jitter.abs_floor_ms", 20, "ms", 0, 1e9,               \
      "...and above median + this")                                           \
    X(P_J_MIN_OUTLIERS, "jitter.min_outliers", 8, "steps", 1, 1e6,            \
      "outlier steps in the window needed for a finding...")                  \
    X(P_J_MIN_FRAC, "jitter.min_outlier_frac", 0.05, "ratio", 0, 1,           \
      "...and fraction of the window's steps they must make up")              \
    X(P_J_MAX_CV, "jitter.max_cv", 1.0, "ratio", 0, 1e3,                     \
      "spread finding: robust sigma / median at least this...")               \
    X(P_J_MIN_SPREAD_MS, "jitter.min_spread_ms", 20, "ms", 0, 1e9,            \
      "...and robust sigma at least this")                                    \
    X(P_J_CRIT_FRAC, "jitter.critical_frac", 0.2, "ratio", 0, 1,              \
      "critical when outliers make up this fraction of the window")           \
    X(P_J_STALL_MS, "jitter.stall_ms", 1000, "ms", 0, 1e9,                    \
      "a stall: every rank's step ran this much over the median step "        \
      "(beyond what one rank made the others wait)...")                      \
    X(P_J_STALL_MEDIANS, "jitter.stall_medians", 50, "steps", 1, 1e9,         \
      "...and this many median steps, while most ranks used the CPU less "   \
      "than half of it")                                                      \
    X(P_M_BASELINE, "memory_spike.baseline_steps", 8, "steps", 2, 64,         \
      "previous steps whose median is a rank's memory baseline")              \
    X(P_M_MIN_MIB, "memory_spike.min_mib", 128, "MiB", 0, 1e9,                \
      "a spike rises this much above the baseline...")                        \
    X(P_M_MIN_FRAC, "memory_spike.min_frac", 0.2, "ratio", 0, 1e6,            \
      "...and this fraction of it")                                           \
    X(P_M_CRIT_FRAC, "memory_spike.critical_frac", 1.0, "ratio", 0, 1e6,      \
      "critical when the largest spike is this fraction of its baseline")     \
    X(P_C_MIN_BPS, "memory_creep.min_bytes_per_step", 65536, "bytes/step", 0, \
      1e15, "creep: Theil-Sen slope at least this")                           \
    X(P_C_MIN_GROWTH_MIB, "memory_creep.min_growth_mib", 64, "MiB", 0, 1e9,   \
      "...and slope * observed span at least this")                           \
    X(P_C_MIN_SPAN, "memory_creep.min_span_steps", 50, "steps", 2, 1e9,       \
      "steps the history must span before creep is judged")                   \
    X(P_C_POINTS, "memory_creep.points", 64, "samples", 16, 256,              \
      "samples kept per rank (decimated by 2 when full)")                     \
    X(P_C_EVAL_EVERY, "memory_creep.eval_every", 16, "steps", 1, 1e6,         \
      "steps between two creep evaluations")                                  \
    X(P_C_CRIT_MIB, "memory_creep.critical_mib_per_1000", 1024,               \
      "MiB/1000 steps", 0, 1e12, "critical at this growth rate")              \
    X(P_I_MIN_MIB, "memory_imbalance.min_mib", 256, "MiB", 0, 1e9,            \
      "a rank is above the median rank by this much...")                      \
    X(P_I_MIN_FRAC, "memory_imbalance.min_frac", 0.3, "ratio", 0, 1e6,        \
      "...and by this fraction of it...")                                     \
    X(P_I_MIN_STEPS, "memory_imbalance.min_steps", 20, "steps", 1, 1e9,       \
      "...for this many consecutive steps")                                   \
    X(P_I_CRIT_FRAC, "memory_imbalance.critical_frac", 1.0, "ratio", 0, 1e6,  \
      "critical when the excess is this fraction of the median rank's")       \
    X(P_SP_WINDOW, "spike.window", 50, "steps", 5, 1024,                      \
      "recent values of a rank's loss (gradient norm) a new one is judged "   \
      "against")                                                              \
    X(P_SP_MIN_SAMPLES, "spike.min_samples", 10, "steps", 3, 1024,            \
      "values a rank needs in its window before a spike is judged")           \
    X(P_LS_MAD_K, "loss_spike.mad_k", 6, "sigmas", 0, 1e3,                    \
      "loss spike: above the window's median + this many robust sigmas "      \
      "(1.4826 MAD)...")                                                      \
    X(P_LS_FACTOR, "loss_spike.factor", 2, "ratio", 1, 1e6,                   \
      "...and at least this multiple of the median")                          \
    X(P_GS_MAD_K, "grad_spike.mad_k", 6, "sigmas", 0, 1e3,                    \
      "gradient norm spike: above the window's median + this many robust "    \
      "sigmas...")                                                            \
    X(P_GS_FACTOR, "grad_spike.factor", 3, "ratio", 1, 1e6,                   \
      "...and at least this multiple of the median")                          \
    X(P_SP_MIN_RISE, "spike.min_rise", 0.1, "ratio", 0, 1e6,                   \
      "...and rise above it by at least this fraction of the highest median " \
      "the rank's window has had")                                            \
    X(P_SP_MAX_WARMUP, "spike.max_warmup", 100, "steps", 1, 1e9,              \
      "either kind is also a spike after this many values of the rank...")   \
    X(P_SP_MAX_RATIO, "spike.max_ratio", 10, "ratio", 1, 1e9,                 \
      "...when it is this multiple of the largest value seen before")         \
    X(P_SP_MERGE, "spike.merge_steps", 5, "steps", 0, 1e6,                    \
      "a spike within this many steps of a finding's last step extends it")  \
    X(P_SP_MAX_FINDINGS, "spike.max_findings", 20, "findings", 1, 1e4,        \
      "findings of each kind per attempt; later spikes extend the last one")   \
    X(P_F_SAT_FRAC, "fp8.saturation_frac", 0.001, "ratio", 0, 1,             \
      "a float8 cast saturates when it clips more than this fraction of "     \
      "the tensor's elements...")                                             \
    X(P_F_UNDER_FRAC, "fp8.underflow_frac", 0.01, "ratio", 0, 1,             \
      "...underflows when it flushes more than this fraction of its "         \
      "non-zero values to zero...")                                           \
    X(P_F_MIN_STEPS, "fp8.min_steps", 3, "steps", 1, 1e6,                     \
      "...in this many steps of one episode (an invalid scale: in one step)") \
    X(P_F_WINDOW, "fp8.window", 50, "steps", 1, 1e9,                          \
      "an episode ends after this many steps without a step over the "        \
      "threshold (without an invalid scale); the next one is a new finding")   \
    X(P_R_MAX_FINDINGS, "replica.max_findings", 64, "findings", 1, 4096,      \
      "replica_divergence findings per attempt, one per replica group")

enum {
#define X(id, name, def, unit, lo, hi, doc) id,
    SS_DETECTOR_PARAMS(X)
#undef X
        P_COUNT
};

_Static_assert(P_COUNT <= 128, "ss_detector_config holds 128 values");

/* Fills P with CFG's values (defaults when CFG is NULL), each one NaN
 * replaced by its default and clamped into its [min, max]; then lowers
 * straggler.min_steps, straggler.transient_steps, host.min_steps,
 * host.min_events, jitter.min_steps and spike.min_samples to their
 * windows.  Never fails. */
void ss__detector_params_resolve(const ss_detector_config *cfg,
                                 double p[P_COUNT]);

#endif
