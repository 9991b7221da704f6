/*
 * model.h - the data the controller's parts hand to each other.
 *
 * The ingest stage decodes what ranks send and hands each finished step on
 * as an ss_step_record, the analysis stage's input; the aggregator
 * (aggregator.c) turns those per-rank step records into finalized
 * steps (ss_step_view) and, through the detectors (detectors.c), findings
 * (ss_finding).  The store (store.c) persists both, the report (report.c)
 * reads them back.  Durations and timestamps are nanoseconds; SS_MISSING
 * marks a value that was not measured: a missing value is never zero.
 */
#ifndef STEPSCOPE_MODEL_H
#define STEPSCOPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef int64_t ss_mono_ns; /* CLOCK_MONOTONIC, nanoseconds */
typedef int64_t ss_wall_ns; /* CLOCK_REALTIME, nanoseconds since the epoch */
typedef int64_t ss_dur_ns;  /* a duration, nanoseconds */

#define SS_MISSING INT64_MIN /* a duration / size that was not measured */
#define SS_NO_RANK (-1)

/* What holds a stopped rank's process (the host watch's stops). */
typedef enum {
    SS_STOP_SIGNAL = 0, /* SIGSTOP, a job control stop */
    SS_STOP_TRACER = 1, /* a debugger or tracer (ptrace) */
    SS_STOP_FREEZER = 2 /* its cgroup's freezer (a paused container) */
} ss_stop_kind;

/* Distinct phase, sync and metric names per run: as many as one process
 * may use (SS_MAX_NAMES in stepscope.h), so a single rank never runs out.
 * Ranks that together use more keep running: what they record under the
 * names beyond the limit is dropped and counted (ingest.h).  Name indexes
 * are kept in bytes (the aggregator's columns, the detectors' blame, where
 * 255 means "no name"), so the limit stays at most 255. */
#define SS_MAX_RUN_NAMES 255
/* The longest name, in bytes without the NUL (SS_MAX_NAME_LEN in
 * stepscope.h). */
#define SS_MAX_RUN_NAME_LEN 63

/* ---- one rank's record of one finished step ----
 *
 * What the analysis stage is fed (ss_aggregator_add): the step's times and
 * the phases, sync points and metrics of one rank, names already run-wide
 * indexes.  The ingest stage fills it from the protocol's step frame
 * (src/common/wire.h), with every time on the controller's CLOCK_MONOTONIC
 * (a remote rank's clock aligned) and only the items whose names the run
 * could keep. */
#define SS_MAX_STEP_ITEMS 64 /* phases, syncs or metrics in one record */

typedef struct {
    int name;                  /* index into the run's name table */
    uint32_t count;            /* times the phase ran in the step */
    ss_dur_ns total_ns;        /* summed duration (inclusive), >= 0 */
    /* Summed self (exclusive) time: total_ns less the time covered by
     * phases nested in it (docs/recorder.md); SS_MISSING when the rank's
     * recorder sends none. */
    ss_dur_ns self_ns;
    ss_mono_ns first_begin_ns; /* the earliest begin */
} ss_phase_record;

typedef struct {
    int name;              /* index into the run's name table */
    ss_mono_ns arrival_ns; /* when the rank arrived at the sync point */
} ss_sync_record;

typedef struct {
    int name; /* index into the run's name table */
    double value;
} ss_metric_record;

typedef struct {
    uint64_t step;
    ss_mono_ns begin_ns, end_ns; /* end_ns >= begin_ns */
    int64_t rss_bytes;    /* max in the step; SS_MISSING when not sampled */
    int64_t device_bytes; /* likewise, the device memory */
    uint32_t n_phases, n_syncs, n_metrics; /* each <= SS_MAX_STEP_ITEMS */
    ss_phase_record phases[SS_MAX_STEP_ITEMS];
    ss_sync_record syncs[SS_MAX_STEP_ITEMS];
    ss_metric_record metrics[SS_MAX_STEP_ITEMS];
} ss_step_record;

/* Order statistics of one quantity over the ranks present in a step.
 * When n == 0 every field is SS_MISSING and worst_rank is SS_NO_RANK. */
typedef struct {
    int64_t min, median, p90, max;
    int32_t worst_rank; /* rank holding max */
    uint32_t n;         /* ranks that reported it */
} ss_stat;

typedef struct {
    int name;     /* index into the run's name table */
    ss_stat stat; /* duration per rank */
} ss_phase_stat;

typedef struct {
    int name;          /* index into the run's name table */
    ss_dur_ns skew_ns; /* latest arrival - earliest arrival */
    ss_dur_ns late_ns; /* latest arrival - median arrival */
    int32_t worst_rank;/* the rank that arrived last */
    uint32_t n;        /* ranks that reported an arrival */
} ss_sync_stat;

/* What the rank's GPU did during one step, from NVML samples
 * (src/controller/host/nvml_timeline.h).  PRESENT is 0 when no GPU
 * evidence is known (no NVML on the host, or the rank uses no GPU that can
 * be told): the other fields then mean nothing.  Durations are the parts
 * of the step covered by samples that had their reasons; readings are
 * SS_MISSING where the GPU did not give them. */
typedef struct {
    int present;             /* 0: no GPU evidence */
    int32_t index;           /* NVML index of the rank's GPU */
    ss_dur_ns covered_ns;    /* the step's time covered by samples */
    ss_dur_ns slowed_ns;     /* clocks held down by any reason that slows
                                the work (nvml.h ss_gpu_reason_slows) */
    ss_dur_ns power_cap_ns;  /* ... by the software power cap */
    ss_dur_ns thermal_ns;    /* ... by a software or hardware thermal
                                slowdown */
    ss_dur_ns hw_slowdown_ns;/* ... by a hardware slowdown or power brake */
    int64_t sm_clock_mhz;    /* time-weighted mean SM clock */
    int64_t temperature_c;   /* the highest */
    int64_t ecc_new;         /* uncorrected ECC errors first seen */
    int64_t xid_new;         /* Xid errors first seen */
    int64_t last_xid;        /* the latest Xid code known (0: none) */
} ss_gpu_evidence;

/* What the host saw of one rank during one step (host evidence): how the
 * kernel's counters for the rank's process tree moved over the step's
 * interval, read from outside the rank (src/controller/host/).  Each field
 * is SS_MISSING where this host does not provide it. */
typedef struct {
    ss_dur_ns cpu_ns;       /* CPU time used by the rank's process tree */
    ss_dur_ns runq_ns;      /* runnable, but waiting for a CPU */
    ss_dur_ns stopped_ns;   /* stopped (SIGSTOP, a debugger, a freezer) */
    ss_dur_ns throttled_ns; /* its cgroup out of CPU quota */
    int64_t nr_throttled;   /* CFS periods throttled */
    int64_t vol_switches;   /* voluntary context switches (main threads) */
    int64_t invol_switches; /* involuntary: preempted */
    int64_t major_faults;   /* page faults that waited for I/O */
    ss_dur_ns psi_cpu_ns;   /* pressure stall ("some") time over the step: */
    ss_dur_ns psi_memory_ns;/* the cgroup's, or the machine's on cgroup v1 */
    ss_dur_ns psi_io_ns;
    ss_gpu_evidence gpu;    /* the rank's GPU (gpu.present 0: none) */
} ss_host_step;

/* One named vector of one rank in one step (ss_values): NaN and
 * infinities are kept as sent.  LABELS, when the rank declared them
 * (ss_values_labels), name the indices: N_LABELS of them, which may
 * differ from N (the labels describe the vector as declared; an index
 * without a label has none). */
typedef struct {
    int name;                    /* index into the run's name table */
    uint32_t n;                  /* elements in v */
    uint32_t truncated;          /* elements dropped by the cap (0 normally) */
    const double *v;             /* n values; NaN/Inf are kept as sent */
    uint32_t n_labels;           /* 0 when the rank declared none */
    const char *const *labels;   /* n_labels names of the indices, or NULL */
} ss_values_item;

/* One rank's measurements in one step, as seen by the aggregator. */
typedef struct {
    int present;          /* 0: the rank never reported this step */
    ss_dur_ns step_ns;
    int64_t rss_bytes;    /* SS_MISSING when not sampled */
    int64_t device_bytes; /* SS_MISSING when not sampled */
    /* Per-name values, indexed by name index, n_names entries each:
     * SS_MISSING (NaN for metrics) where the rank did not report that name
     * in this step. */
    const int64_t *phase_ns;
    /* Self (exclusive) time per phase: phase_ns less the time covered by
     * phases nested in it (docs/recorder.md).  SS_MISSING where the phase
     * is missing or the rank's recorder sends no self time; the array may
     * be NULL (nothing known). */
    const int64_t *phase_self_ns;
    const int64_t *sync_arrival_ns;
    const double *metric;       /* NaN when missing */
    /* Timeline detail, for traces.  BEGIN_NS is when the rank began the
     * step (CLOCK_MONOTONIC of its host; SS_MISSING when unknown); per
     * name index like phase_ns: PHASE_START_NS the earliest begin of the
     * phase in ns after BEGIN_NS (negative for a span measured from before
     * the step), PHASE_COUNT how many times it ran.  The arrays may be
     * NULL (nothing known). */
    ss_mono_ns begin_ns;
    const int64_t *phase_start_ns;
    const int64_t *phase_count;
    /* What the host saw of the rank's process tree during this step
     * (run-queue delay, stops, throttling...); NULL when no host evidence
     * is known for it. */
    const ss_host_step *host;
    /* This rank's vectors in this step, in the order they arrived, each
     * name at most once (NULL if none). */
    uint32_t n_values;
    const ss_values_item *values;
} ss_rank_step;

/* A finalized step: every live rank completed it (or was declared
 * missing).  Valid only during the callback that receives it. */
typedef struct {
    uint32_t attempt;
    uint64_t step;
    ss_wall_ns finalized_at;
    uint32_t world_size;
    uint32_t n_present;
    uint32_t n_missing;
    const uint32_t *missing_ranks; /* n_missing entries */
    ss_stat step_time;
    ss_stat rss;
    ss_stat device;
    uint32_t n_phases;
    const ss_phase_stat *phases;
    /* NULL, or n_phases entries parallel to phases: the statistics of the
     * ranks' self time in that phase (n == 0 when no rank reported it). */
    const ss_stat *phase_self;
    uint32_t n_syncs;
    const ss_sync_stat *syncs;
    uint32_t n_metrics;
    const int *metrics;            /* name indices of the metrics some
                                      rank reported in this step */
    uint32_t n_names;              /* size of the per-rank arrays */
    const ss_rank_step *ranks;     /* world_size entries */
} ss_step_view;

typedef enum { SS_WARNING = 1, SS_CRITICAL = 2 } ss_severity;

#define SS_FINDING_MAX_RANKS 16

/* A finding: a problem the detectors saw, with the evidence for it. */
typedef struct {
    uint32_t id;            /* stable within a run attempt; updates reuse it */
    uint32_t attempt;
    char kind[32];          /* "straggler", "data_stall", "jitter", ... */
    ss_severity severity;
    uint32_t n_ranks;
    int32_t ranks[SS_FINDING_MAX_RANKS];
    char phase[64];         /* "" when no phase is to blame */
    uint64_t first_step, last_step;
    char evidence_json[1024]; /* a JSON object of numbers and strings */
    char message[512];        /* one or two sentences for a person */
} ss_finding;

/* Receives the aggregator's output.  Callbacks run on the thread that drives
 * the aggregator and must not block for long (copy and hand off). */
typedef struct {
    void *ctx;
    void (*on_step)(void *ctx, const ss_step_view *step,
                    const char *const *names);
    void (*on_finding)(void *ctx, const ss_finding *finding);
} ss_sink;

#endif
