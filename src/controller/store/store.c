/*
 * store.c - the SQLite store: a bounded queue in front of a writer thread.
 *
 * The controller's loop calls ss_store_put_*, which copy their arguments
 * into one heap block each and append it to a queue under a mutex: no SQL,
 * no I/O on the caller's thread.  The writer thread takes the whole queue
 * once the oldest queued item is a flush interval old (or sooner when the
 * queue is half full or ss_store_flush asks), applies it with prepared
 * statements in one IMMEDIATE transaction, prunes rank_steps by retention
 * tier, and commits.  WAL with synchronous=NORMAL makes a commit an append
 * to the WAL without fsync: it survives the process being killed (SIGKILL),
 * though not the machine losing power before the next checkpoint.  A batch
 * that cannot be written (disk full, file locked by another process for
 * more than 5 s) is rolled back, reported on stderr and lost, so a broken
 * disk cannot grow the queue without bound; its small items (ranks,
 * findings, events, the run's end) are then tried once more in a
 * transaction of their own, which often fits where the steps did not.
 * What was committed and what was lost is counted (ss_store_outcome), so
 * the controller never claims more than the file holds.  New files get
 * 16 KiB pages:
 * rank_steps inserts are appends, and bigger pages halve the B-tree work
 * per row (docs/store.md has the measurements).
 *
 * Queue accounting is in "units": one per item plus one per rank-step row
 * the item carries.  ss_store_stats.queued / .written count units accepted
 * and units applied; .dropped_rank_steps counts rank-step rows refused
 * because they would have taken the queue past cfg.queue_limit units.
 * Only rank-step rows are ever refused: a step's aggregates, runs, ranks,
 * findings and events are queued whatever the queue holds (they are small
 * and rare).
 *
 * Without a writer thread (ss_store_open with WRITER == 0) the queue is
 * applied on the caller's thread by ss_store_flush and ss_store_close.
 *
 * Threads: `mu` guards the queue, the counters and the flags; `dbmu`
 * serializes the connection between the writer's batches and
 * ss_store_begin_run.  Writer-only state (statements, retention tracks,
 * the row buffers) is touched only while holding dbmu.  The connection is
 * in SQLite's serialized mode, so a reader may use ss_store_db() from
 * another thread without crashing anything, but while a writer runs it may
 * see a batch before its commit; a live reader should open its own
 * connection (WAL lets it read while the writer writes).
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"
#include "json.h"
#include "private_fs.h"
#include "runlock.h"
#include "store_schema.h"

/* The host evidence of a rank step (ss_host_step, in this order) binds to
 * HOST_PARAMS of ST_RANK_STEP, from parameter HOST_FIRST_PARAM on. */
#define HOST_COLUMNS                                                          \
    "host_cpu_ns, host_runq_ns, host_stopped_ns, host_throttled_ns, "        \
    "host_nr_throttled, host_vol_switches, host_invol_switches, "             \
    "host_major_faults, host_psi_cpu_ns, host_psi_memory_ns, host_psi_io_ns"
#define HOST_PARAMS "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25"
#define HOST_FIRST_PARAM 15
/* Its GPU evidence (ss_gpu_evidence, in this order, the index first)
 * binds to GPU_PARAMS, from parameter GPU_FIRST_PARAM on. */
#define GPU_COLUMNS                                                           \
    "gpu_index, gpu_covered_ns, gpu_slowed_ns, gpu_power_cap_ns, "            \
    "gpu_thermal_ns, gpu_hw_slowdown_ns, gpu_sm_clock_mhz, "                  \
    "gpu_temperature_c, gpu_ecc_new, gpu_xid_new, gpu_last_xid"
#define GPU_PARAMS "?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36"
#define GPU_FIRST_PARAM 26

/* ---- queued items ---- */

typedef enum {
    IT_ATTEMPT,
    IT_ATTEMPT_FACTS,
    IT_RANK,
    IT_NODE,
    IT_PROFILE,
    IT_STEP,
    IT_VALUES,
    IT_LABELS,
    IT_FINDING,
    IT_EVENT,
    IT_STACKS,
    IT_END_RUN,
    IT_DROPPED_VECTORS,
} item_kind;

/* A finalized step, deep-copied.  Rank rows are parallel arrays: row i is
 * rank row_rank[i] with row_vals[i * row_stride(step) ...] = step_ns, rss,
 * device, begin (ROW_FIXED values), then per phase in phases[] order the
 * durations, then the first begins (ns after begin), then the counts, then
 * per sync in syncs[] order the arrival (ns after begin), then per metric
 * in metric_names[] order the value (the bits of a double), then per phase
 * its self time; SS_MISSING (NaN for a metric) where the rank did not
 * report it.  phase_self[i] is the statistics of phases[i]'s self time
 * (n == 0 when no rank reported it). */
typedef struct {
    uint32_t attempt;
    uint64_t step;
    ss_wall_ns finalized_at;
    uint32_t world_size, n_present, n_missing;
    uint32_t *missing;
    ss_stat step_time, rss, device;
    uint32_t n_phases;
    ss_phase_stat *phases;
    ss_stat *phase_self;
    char **phase_names;
    uint32_t n_syncs;
    ss_sync_stat *syncs;
    char **sync_names;
    uint32_t n_metrics;
    char **metric_names;
    uint32_t n_rows;
    uint32_t *row_rank;
    int64_t *row_vals;
    uint64_t dropped_rows; /* rank rows refused at the queue */
    ss_host_step *row_host; /* n_rows entries (all SS_MISSING where a rank
                               has none), or NULL when no row has any */
} step_item;

enum { ROW_FIXED = 4 }; /* step_ns, rss, device, begin */

static size_t row_stride(const step_item *v)
{
    return ROW_FIXED + 4 * (size_t)v->n_phases + v->n_syncs + v->n_metrics;
}

/* One vector of a rank in a step, deep-copied. */
typedef struct {
    uint32_t rank, n, truncated;
    const char *name;
    double *v;
} value_row;

/* A step's vectors, every rank's. */
typedef struct {
    uint32_t attempt;
    uint64_t step;
    uint32_t world_size;
    uint32_t n;
    value_row *rows;
    uint64_t bytes; /* counted in pending_value_bytes */
} values_item;

typedef struct item {
    struct item *next;
    item_kind kind;
    int64_t run_id;
    uint64_t units;
    union {
        struct {
            uint32_t attempt;
            ss_wall_ns started_at;
        } attempt;
        ss_attempt_facts facts;
        ss_rank_info rank;
        ss_node_info node;
        ss_profile_info profile;
        step_item step;
        values_item values;
        struct {
            uint32_t attempt, rank;
            char *name, *json;
        } labels;
        struct {
            ss_finding f;
            ss_wall_ns at;
        } finding;
        struct {
            uint32_t attempt;
            ss_wall_ns at;
            int32_t rank;
            char *kind, *message;
        } event;
        struct {
            uint32_t attempt;
            ss_wall_ns taken_at;
            int64_t finding_id; /* < 0: none */
            char *trigger, *json;
        } stacks;
        struct {
            ss_wall_ns ended_at;
            int exit_code;
            char *status;
            int64_t dropped_events, dropped_records;
        } end;
        uint64_t dropped_vectors;
    } u;
} item;

/* ---- writer-side state ---- */

/* Per-rank totals accumulated over one batch, added to rank_totals at the
 * end of it.  Maxima are SS_MISSING until a value is seen. */
typedef struct {
    uint32_t steps, n_ns;
    int64_t sum_ns, max_ns, max_rss, max_dev, last_step;
} rank_delta;

/* Retention and totals state for one (run, attempt) being written. */
typedef struct {
    int64_t run_id;
    uint32_t attempt;
    int64_t max_step;  /* highest step written, -1 before the first */
    int64_t kept_from; /* tier-A rows below this step are already pruned */
    int64_t values_kept_from; /* the same for rank_values */
    uint32_t n_ranks;
    rank_delta *delta; /* n_ranks entries */
    int dirty;         /* delta holds something */
    uint8_t *committed_findings; /* bit i: finding id i has a committed
                                    version (for ss_store_outcome) */
    uint32_t committed_findings_bytes;
} track;

enum {
    ST_ATTEMPT,
    ST_ATTEMPT_FACTS,
    ST_RANK,
    ST_NODE,
    ST_PROFILE,
    ST_STEP,
    ST_PHASE,
    ST_SYNC,
    ST_RANK_STEP,
    ST_TOTALS,
    ST_FINDING,
    ST_EVENT,
    ST_STACKS,
    ST_END_RUN,
    ST_DROPPED,
    ST_PRUNE,
    ST_VALUES,
    ST_LABELS,
    ST_PRUNE_VALUES,
    ST_DROPPED_VECTORS,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_ATTEMPT] = "INSERT INTO attempts(run_id, attempt, started_at) "
                   "VALUES (?1, ?2, ?3) ON CONFLICT (run_id, attempt) "
                   "DO UPDATE SET started_at = excluded.started_at",
    /* NULL parameters leave the column as it is. */
    [ST_ATTEMPT_FACTS] = "UPDATE attempts SET "
                         "ended_at = coalesce(?3, ended_at), "
                         "cause = coalesce(?4, cause), "
                         "first_step = coalesce(?5, first_step), "
                         "last_step = coalesce(?6, last_step), "
                         "resumed_from = coalesce(?7, resumed_from) "
                         "WHERE run_id = ?1 AND attempt = ?2",
    /* NULL parameters leave the column as it is. */
    [ST_RANK] = "INSERT INTO ranks(run_id, attempt, rank, host, pid, state, "
                "exit_code, term_signal, last_step, dropped_events, "
                "dropped_records, log_path, names_over_limit, "
                "values_over_limit) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                "?13, ?14) "
                "ON CONFLICT (run_id, attempt, rank) DO UPDATE SET "
                "host = coalesce(excluded.host, host), "
                "pid = coalesce(excluded.pid, pid), "
                "state = coalesce(excluded.state, state), "
                "exit_code = coalesce(excluded.exit_code, exit_code), "
                "term_signal = coalesce(excluded.term_signal, term_signal), "
                "last_step = coalesce(excluded.last_step, last_step), "
                "dropped_events = coalesce(excluded.dropped_events, "
                "dropped_events), "
                "dropped_records = coalesce(excluded.dropped_records, "
                "dropped_records), "
                "log_path = coalesce(excluded.log_path, log_path), "
                "names_over_limit = coalesce(excluded.names_over_limit, "
                "names_over_limit), "
                "values_over_limit = coalesce(excluded.values_over_limit, "
                "values_over_limit)",
    /* NULL parameters leave the optional columns as they are. */
    [ST_NODE] = "INSERT INTO nodes(run_id, attempt, node_rank, host, addr, "
                "first_rank, nranks, state, joined_at, ended_at, "
                "clock_offset_ns, clock_bound_ns, lost_reason, lost_at_step) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                "?13, ?14) "
                "ON CONFLICT (run_id, attempt, node_rank) DO UPDATE SET "
                "host = coalesce(excluded.host, host), "
                "addr = excluded.addr, first_rank = excluded.first_rank, "
                "nranks = excluded.nranks, state = excluded.state, "
                "joined_at = coalesce(excluded.joined_at, joined_at), "
                "ended_at = coalesce(excluded.ended_at, ended_at), "
                "clock_offset_ns = coalesce(excluded.clock_offset_ns, "
                "clock_offset_ns), "
                "clock_bound_ns = coalesce(excluded.clock_bound_ns, "
                "clock_bound_ns), "
                "lost_reason = coalesce(excluded.lost_reason, lost_reason), "
                "lost_at_step = coalesce(excluded.lost_at_step, lost_at_step)",
    [ST_PROFILE] = "INSERT INTO profiles(run_id, attempt, request_id, rank, "
                   "requested_at, duration_ms, status, path, host, message, "
                   "marker_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                   "?10, ?11) "
                   "ON CONFLICT (run_id, attempt, request_id, rank) DO "
                   "UPDATE SET status = excluded.status, "
                   "path = coalesce(excluded.path, path), "
                   "host = coalesce(excluded.host, host), "
                   "message = coalesce(excluded.message, message), "
                   "marker_ns = coalesce(excluded.marker_ns, marker_ns)",
    [ST_STEP] = "INSERT OR REPLACE INTO steps(run_id, attempt, step, "
                "finalized_at, world_size, n_present, n_missing, "
                "missing_ranks, step_n, step_min, step_median, step_p90, "
                "step_max, step_worst_rank, rss_median, rss_max, "
                "rss_worst_rank, device_median, device_max, "
                "device_worst_rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    [ST_PHASE] = "INSERT OR REPLACE INTO step_phases(run_id, attempt, step, "
                 "phase, n, min, median, p90, max, worst_rank, self_n, "
                 "self_min, self_median, self_p90, self_max, "
                 "self_worst_rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                 "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    [ST_SYNC] = "INSERT OR REPLACE INTO step_syncs(run_id, attempt, step, "
                "sync, n, skew_ns, late_ns, worst_rank) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_RANK_STEP] = "INSERT OR REPLACE INTO rank_steps(run_id, attempt, "
                     "step, rank, step_ns, rss_bytes, device_bytes, phases, "
                     "begin_ns, phase_starts, phase_counts, syncs, metrics, "
                     "phase_self, " HOST_COLUMNS ", " GPU_COLUMNS ") "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                     "?12, ?13, ?14, " HOST_PARAMS ", " GPU_PARAMS ")",
    /* max(coalesce(a, b), coalesce(b, a)): the larger, ignoring NULLs. */
    [ST_TOTALS] = "INSERT INTO rank_totals(run_id, attempt, rank, steps, "
                  "step_ns_n, step_ns_sum, step_ns_max, max_rss_bytes, "
                  "max_device_bytes, last_step) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
                  "ON CONFLICT (run_id, attempt, rank) DO UPDATE SET "
                  "steps = steps + excluded.steps, "
                  "step_ns_n = step_ns_n + excluded.step_ns_n, "
                  "step_ns_sum = step_ns_sum + excluded.step_ns_sum, "
                  "step_ns_max = max(coalesce(step_ns_max, "
                  "excluded.step_ns_max), coalesce(excluded.step_ns_max, "
                  "step_ns_max)), "
                  "max_rss_bytes = max(coalesce(max_rss_bytes, "
                  "excluded.max_rss_bytes), coalesce(excluded.max_rss_bytes, "
                  "max_rss_bytes)), "
                  "max_device_bytes = max(coalesce(max_device_bytes, "
                  "excluded.max_device_bytes), "
                  "coalesce(excluded.max_device_bytes, max_device_bytes)), "
                  "last_step = max(coalesce(last_step, excluded.last_step), "
                  "coalesce(excluded.last_step, last_step))",
    [ST_FINDING] = "INSERT INTO findings(run_id, attempt, finding_id, kind, "
                   "severity, ranks, phase, first_step, last_step, evidence, "
                   "message, first_seen_at, updated_at) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                   "?12, ?12) "
                   "ON CONFLICT (run_id, attempt, finding_id) DO UPDATE SET "
                   "kind = excluded.kind, severity = excluded.severity, "
                   "ranks = excluded.ranks, phase = excluded.phase, "
                   "first_step = excluded.first_step, "
                   "last_step = excluded.last_step, "
                   "evidence = excluded.evidence, message = excluded.message, "
                   "updated_at = excluded.updated_at",
    [ST_EVENT] = "INSERT INTO events(run_id, attempt, at, kind, rank, "
                 "message) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_STACKS] = "INSERT INTO stack_snapshots(run_id, attempt, taken_at, "
                  "trigger, finding_id, json) VALUES (?1, ?2, ?3, ?4, ?5, "
                  "?6)",
    [ST_END_RUN] = "UPDATE runs SET ended_at = ?2, exit_code = ?3, "
                   "status = ?4, dropped_events = ?5, dropped_records = ?6 "
                   "WHERE id = ?1",
    [ST_DROPPED] = "UPDATE runs SET dropped_rank_steps = dropped_rank_steps "
                   "+ ?2 WHERE id = ?1",
    /* Tier A rows that fell out of the recent window, except tier B
     * (every sample_every-th step) and the steps findings name. */
    [ST_PRUNE] = "DELETE FROM rank_steps WHERE run_id = ?1 AND attempt = ?2 "
                 "AND step >= ?3 AND step < ?4 "
                 "AND (?5 = 0 OR step % ?5 != 0) "
                 "AND step NOT IN (SELECT first_step FROM findings "
                 "WHERE run_id = ?1 AND attempt = ?2 "
                 "UNION SELECT last_step FROM findings "
                 "WHERE run_id = ?1 AND attempt = ?2)",
    [ST_VALUES] = "INSERT OR REPLACE INTO rank_values(run_id, attempt, name, "
                  "step, rank, n, truncated, data) VALUES (?1, ?2, ?3, ?4, "
                  "?5, ?6, ?7, ?8)",
    [ST_LABELS] = "INSERT OR REPLACE INTO value_labels(run_id, attempt, name, "
                  "rank, labels) VALUES (?1, ?2, ?3, ?4, ?5)",
    /* rank_values' own recent window, with the same exceptions as
     * ST_PRUNE */
    [ST_PRUNE_VALUES] = "DELETE FROM rank_values WHERE run_id = ?1 AND "
                        "attempt = ?2 AND step >= ?3 AND step < ?4 "
                        "AND (?5 = 0 OR step % ?5 != 0) "
                        "AND step NOT IN (SELECT first_step FROM findings "
                        "WHERE run_id = ?1 AND attempt = ?2 "
                        "UNION SELECT last_step FROM findings "
                        "WHERE run_id = ?1 AND attempt = ?2)",
    [ST_DROPPED_VECTORS] = "UPDATE runs SET dropped_vectors = "
                           "dropped_vectors + ?2 WHERE id = ?1",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

struct ss_store {
    sqlite3 *db;
    char *path;
    ss_store_config cfg;

    pthread_mutex_t mu;     /* queue, counters, flags */
    pthread_cond_t wake;    /* writer: work, flush or stop */
    pthread_cond_t done;    /* flushers: a batch was applied */
    item *head, *tail;
    uint64_t pending_units;
    uint64_t pending_value_bytes; /* vectors' bytes in the queue */
    /* vectors refused at a full queue and not yet added to their run's
     * dropped_vectors: per run (the latest one seen) */
    int64_t dropped_vectors_run;
    uint64_t dropped_vectors_unsaved;
    struct timespec first_at; /* when the oldest queued item arrived */
    uint64_t enq_seq, done_seq; /* items queued / applied, ever */
    int flush_wanted, stop;
    ss_store_stats stats;
    ss_store_outcome outcome;
    int has_writer;
    pthread_t writer;

    pthread_mutex_t dbmu;   /* the connection and everything below */
    char batch_err[256];    /* the first error of the batch being applied */
    sqlite3_stmt *st[ST_COUNT];
    track *tracks;
    size_t n_tracks;
    ss_buf rowjson[6];      /* a rank row's JSON: phases, phase_starts,
                               phase_counts, syncs, metrics, phase_self */
    ss_buf keys;            /* the current step's escaped phase keys */
    size_t *key_off;        /* key_cap offsets into keys */
    size_t key_cap;
    ss_buf skeys;           /* the same for its sync names */
    size_t *skey_off;
    size_t skey_cap;
    ss_buf mkeys;           /* and for its metric names */
    size_t *mkey_off;
    size_t mkey_cap;
};

/* ---- small helpers ---- */

static void bind_opt_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v == SS_MISSING)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

/* Binds H (NULL: no host evidence, every column NULL). */
static void bind_host(sqlite3_stmt *st, const ss_host_step *h)
{
    static const ss_host_step none = {SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, SS_MISSING,
                                      SS_MISSING, SS_MISSING, {0}};
    if (!h)
        h = &none;
    const int64_t v[] = {h->cpu_ns, h->runq_ns, h->stopped_ns,
                         h->throttled_ns, h->nr_throttled, h->vol_switches,
                         h->invol_switches, h->major_faults, h->psi_cpu_ns,
                         h->psi_memory_ns, h->psi_io_ns};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); i++)
        bind_opt_int(st, HOST_FIRST_PARAM + i, v[i]);
    const ss_gpu_evidence *g = &h->gpu;
    const int64_t gv[] = {g->index, g->covered_ns, g->slowed_ns,
                          g->power_cap_ns, g->thermal_ns, g->hw_slowdown_ns,
                          g->sm_clock_mhz, g->temperature_c, g->ecc_new,
                          g->xid_new, g->last_xid};
    for (int i = 0; i < (int)(sizeof gv / sizeof gv[0]); i++)
        bind_opt_int(st, GPU_FIRST_PARAM + i,
                     g->present ? gv[i] : SS_MISSING);
}

static void bind_rank(sqlite3_stmt *st, int i, int32_t rank)
{
    if (rank < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int(st, i, rank);
}

/* Binds -1 (and "" for text) as NULL: "leave as it is". */
static void bind_known_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v == -1)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

static void bind_known_text(sqlite3_stmt *st, int i, const char *s)
{
    if (!s || !*s)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* ---- the queue ---- */

/* Appends IT to the queue and wakes the writer when it should act. */
static void enqueue(ss_store *s, item *it)
{
    pthread_mutex_lock(&s->mu);
    it->next = NULL;
    if (s->tail)
        s->tail->next = it;
    else {
        s->head = it;
        clock_gettime(CLOCK_MONOTONIC, &s->first_at);
    }
    s->tail = it;
    uint64_t before = s->pending_units;
    s->pending_units += it->units;
    s->enq_seq++;
    s->stats.queued += it->units;
    uint64_t half = s->cfg.queue_limit / 2;
    if (s->has_writer && (before == 0 || (before < half &&
                                          s->pending_units >= half)))
        pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

/* Allocates a zeroed item of KIND with EXTRA uninitialized bytes after it
 * (for the copies it carries).  NULL on out-of-memory. */
static item *item_new(item_kind kind, int64_t run_id, size_t extra)
{
    item *it = malloc(sizeof(item) + extra);
    if (!it)
        return NULL;
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->run_id = run_id;
    it->units = 1;
    return it;
}

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Carves N bytes aligned to 8 from *P (inside an item's extra space, which
 * the caller sized as the sum of round8() of every carve). */
static void *carve(char **p, size_t n)
{
    void *r = *p;
    *p += round8(n);
    return r;
}

static char *carve_str(char **p, const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s) + 1;
    char *r = carve(p, n);
    memcpy(r, s, n);
    return r;
}

static size_t str_space(const char *s)
{
    return round8((s ? strlen(s) : 0) + 1);
}

/* ---- the writer: applying items ---- */

/* A few words for what SQLite's primary result code RC means to a person
 * whose data it cost. */
static const char *loss_cause(int rc)
{
    switch (rc) {
    case SQLITE_FULL: return "disk full";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "store locked by another process";
    case SQLITE_IOERR: return "I/O error";
    case SQLITE_NOMEM: return "out of memory";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN: return "store not writable";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "store corrupt";
    default: return "SQLite error";
    }
}

/* Reports the connection's last error on stderr and keeps the batch's
 * first one (dbmu held) for ss_store_outcome.error. */
static void report_sql_error(ss_store *s, const char *what)
{
    fprintf(stderr, "stepscope: store %s: %s: %s\n", s->path, what,
            sqlite3_errmsg(s->db));
    if (!s->batch_err[0])
        snprintf(s->batch_err, sizeof s->batch_err, "%s: %s",
                 loss_cause(sqlite3_errcode(s->db)), sqlite3_errmsg(s->db));
}

/* Steps ST once and resets it.  Returns 0 or -1 (reported). */
static int run_stmt(ss_store *s, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        report_sql_error(s, what);
        return -1;
    }
    return 0;
}

static const rank_delta empty_delta = {0, 0, 0, SS_MISSING, SS_MISSING,
                                       SS_MISSING, SS_MISSING};

/* Forgets T's batch deltas (after they are written or lost). */
static void track_clear(track *t)
{
    if (!t->dirty)
        return;
    for (uint32_t r = 0; r < t->n_ranks; r++)
        t->delta[r] = empty_delta;
    t->dirty = 0;
}

static track *track_get(ss_store *s, int64_t run_id, uint32_t attempt,
                        uint32_t n_ranks)
{
    track *t = NULL;
    for (size_t i = 0; i < s->n_tracks; i++)
        if (s->tracks[i].run_id == run_id && s->tracks[i].attempt == attempt)
            t = &s->tracks[i];
    if (!t) {
        track *n = realloc(s->tracks, (s->n_tracks + 1) * sizeof *n);
        if (!n)
            return NULL;
        s->tracks = n;
        t = &n[s->n_tracks++];
        memset(t, 0, sizeof *t);
        t->run_id = run_id;
        t->attempt = attempt;
        t->max_step = -1;
    }
    if (n_ranks > t->n_ranks) {
        rank_delta *d = realloc(t->delta, n_ranks * sizeof *d);
        if (!d)
            return NULL;
        for (uint32_t r = t->n_ranks; r < n_ranks; r++)
            d[r] = empty_delta;
        t->delta = d;
        t->n_ranks = n_ranks;
    }
    return t;
}

static int64_t max_known(int64_t a, int64_t b)
{
    if (a == SS_MISSING)
        return b;
    if (b == SS_MISSING)
        return a;
    return a > b ? a : b;
}

/* Appends member I of a JSON object under construction in B: its
 * pre-escaped `,"name":` key (key i at KEYS->data[OFF[i] .. OFF[i + 1]))
 * with the comma, or after a '{' when it is the first member. */
static void add_key(ss_buf *b, const ss_buf *keys, const size_t *off,
                    uint32_t i)
{
    const char *key = keys->data + off[i];
    size_t len = off[i + 1] - off[i];
    if (b->len == 0) {
        ss_buf_add(b, "{", 1);
        key++;
        len--;
    }
    ss_buf_add(b, key, len);
}

/* Builds into B the JSON object {name: value} of the N values VALS that
 * are neither SS_MISSING nor OMIT, with the keys of build_keys.  B->len
 * is 0 when no value is left.  Returns 0, or -1 when out of memory. */
static int build_json_object(ss_buf *b, const int64_t *vals, uint32_t n,
                             const ss_buf *keys, const size_t *off,
                             int64_t omit)
{
    ss_buf_reset(b);
    for (uint32_t i = 0; i < n; i++) {
        if (vals[i] == SS_MISSING || vals[i] == omit)
            continue;
        add_key(b, keys, off, i);
        ss_buf_json_int(b, vals[i]);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    return b->oom ? -1 : 0;
}

/* Like build_json_object for N metric values stored as the bits of
 * doubles; NaN and infinities (not JSON) are left out. */
static int build_json_doubles(ss_buf *b, const int64_t *bits, uint32_t n,
                              const ss_buf *keys, const size_t *off)
{
    ss_buf_reset(b);
    for (uint32_t i = 0; i < n; i++) {
        double d;
        memcpy(&d, &bits[i], sizeof d);
        if (!isfinite(d))
            continue;
        add_key(b, keys, off, i);
        ss_buf_printf(b, "%.17g", d);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    return b->oom ? -1 : 0;
}

/* Builds into B a rank row's phase_self (docs/store.md): the JSON object
 * {name: self ns} of the N phases whose self time SELF differs from their
 * total TOTAL; "{}" when every reported self time equals its total; empty
 * (NULL) when no self time is known.  Returns 0, or -1 when out of
 * memory. */
static int build_self_json(ss_buf *b, const int64_t *total,
                           const int64_t *self, uint32_t n,
                           const ss_buf *keys, const size_t *off)
{
    ss_buf_reset(b);
    int known = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (self[i] == SS_MISSING)
            continue;
        known = 1;
        if (self[i] == total[i])
            continue;
        add_key(b, keys, off, i);
        ss_buf_json_int(b, self[i]);
    }
    if (b->len)
        ss_buf_add(b, "}", 1);
    else if (known)
        ss_buf_add(b, "{}", 2);
    return b->oom ? -1 : 0;
}

/* Escapes the N NAMES once per step into KEYS, as `,"name":`, with name i
 * at KEYS->data[(*OFF)[i] .. (*OFF)[i + 1]); *OFF has *CAP entries. */
static int build_keys(ss_buf *keys, size_t **off, size_t *cap,
                      char *const *names, uint32_t n)
{
    if (n + 1 > *cap) {
        size_t *o = realloc(*off, (n + 1) * sizeof *o);
        if (!o)
            return -1;
        *off = o;
        *cap = n + 1;
    }
    ss_buf_reset(keys);
    for (uint32_t i = 0; i < n; i++) {
        (*off)[i] = keys->len;
        ss_buf_add(keys, ",", 1);
        ss_buf_json_str(keys, names[i]);
        ss_buf_add(keys, ":", 1);
    }
    (*off)[n] = keys->len;
    return keys->oom ? -1 : 0;
}

/* Binds the JSON in B to parameter I of Q, NULL when empty. */
static void bind_json(sqlite3_stmt *q, int i, const ss_buf *b)
{
    if (b->len)
        sqlite3_bind_text(q, i, b->data, (int)b->len, SQLITE_STATIC);
    else
        sqlite3_bind_null(q, i);
}

static int apply_step(ss_store *s, int64_t run_id, const step_item *v)
{
    sqlite3_stmt *q = s->st[ST_STEP];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 3, (int64_t)v->step);
    sqlite3_bind_int64(q, 4, v->finalized_at);
    sqlite3_bind_int64(q, 5, v->world_size);
    sqlite3_bind_int64(q, 6, v->n_present);
    sqlite3_bind_int64(q, 7, v->n_missing);
    ss_buf miss = {0};
    if (v->n_missing) {
        for (uint32_t i = 0; i < v->n_missing; i++) {
            ss_buf_add(&miss, i ? "," : "[", 1);
            ss_buf_json_int(&miss, v->missing[i]);
        }
        ss_buf_add(&miss, "]", 1);
        if (miss.oom) {
            ss_buf_free(&miss);
            return -1;
        }
        sqlite3_bind_text(q, 8, miss.data, (int)miss.len, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(q, 8);
    }
    sqlite3_bind_int64(q, 9, v->step_time.n);
    bind_opt_int(q, 10, v->step_time.min);
    bind_opt_int(q, 11, v->step_time.median);
    bind_opt_int(q, 12, v->step_time.p90);
    bind_opt_int(q, 13, v->step_time.max);
    bind_rank(q, 14, v->step_time.worst_rank);
    bind_opt_int(q, 15, v->rss.median);
    bind_opt_int(q, 16, v->rss.max);
    bind_rank(q, 17, v->rss.worst_rank);
    bind_opt_int(q, 18, v->device.median);
    bind_opt_int(q, 19, v->device.max);
    bind_rank(q, 20, v->device.worst_rank);
    int rc = run_stmt(s, q, "writing a step");
    sqlite3_clear_bindings(q);
    ss_buf_free(&miss);
    if (rc != 0)
        return -1;

    q = s->st[ST_PHASE];
    for (uint32_t i = 0; i < v->n_phases; i++) {
        const ss_stat *ps = &v->phases[i].stat;
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, v->attempt);
        sqlite3_bind_int64(q, 3, (int64_t)v->step);
        sqlite3_bind_text(q, 4, v->phase_names[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, ps->n);
        bind_opt_int(q, 6, ps->min);
        bind_opt_int(q, 7, ps->median);
        bind_opt_int(q, 8, ps->p90);
        bind_opt_int(q, 9, ps->max);
        bind_rank(q, 10, ps->worst_rank);
        const ss_stat *self = &v->phase_self[i];
        sqlite3_bind_int64(q, 11, self->n);
        bind_opt_int(q, 12, self->min);
        bind_opt_int(q, 13, self->median);
        bind_opt_int(q, 14, self->p90);
        bind_opt_int(q, 15, self->max);
        bind_rank(q, 16, self->worst_rank);
        if (run_stmt(s, q, "writing a step phase") != 0)
            return -1;
    }
    q = s->st[ST_SYNC];
    for (uint32_t i = 0; i < v->n_syncs; i++) {
        const ss_sync_stat *ys = &v->syncs[i];
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, v->attempt);
        sqlite3_bind_int64(q, 3, (int64_t)v->step);
        sqlite3_bind_text(q, 4, v->sync_names[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, ys->n);
        bind_opt_int(q, 6, ys->skew_ns);
        bind_opt_int(q, 7, ys->late_ns);
        bind_rank(q, 8, ys->worst_rank);
        if (run_stmt(s, q, "writing a step sync") != 0)
            return -1;
    }

    if (v->dropped_rows) {
        q = s->st[ST_DROPPED];
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, (int64_t)v->dropped_rows);
        if (run_stmt(s, q, "counting dropped rank steps") != 0)
            return -1;
    }

    track *t = track_get(s, run_id, v->attempt, v->world_size);
    if (!t)
        return -1;
    if ((int64_t)v->step > t->max_step)
        t->max_step = (int64_t)v->step;
    if (v->n_rows == 0)
        return 0;

    if (build_keys(&s->keys, &s->key_off, &s->key_cap, v->phase_names,
                   v->n_phases) != 0 ||
        build_keys(&s->skeys, &s->skey_off, &s->skey_cap, v->sync_names,
                   v->n_syncs) != 0 ||
        build_keys(&s->mkeys, &s->mkey_off, &s->mkey_cap, v->metric_names,
                   v->n_metrics) != 0)
        return -1;
    q = s->st[ST_RANK_STEP];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 3, (int64_t)v->step);
    size_t stride = row_stride(v);
    uint32_t np = v->n_phases;
    for (uint32_t i = 0; i < v->n_rows; i++) {
        const int64_t *vals = v->row_vals + i * stride;
        const int64_t *ph = vals + ROW_FIXED;
        uint32_t rank = v->row_rank[i];
        if (build_json_object(&s->rowjson[0], ph, np, &s->keys, s->key_off,
                              SS_MISSING) != 0 ||
            build_json_object(&s->rowjson[1], ph + np, np, &s->keys,
                              s->key_off, SS_MISSING) != 0 ||
            build_json_object(&s->rowjson[2], ph + 2 * np, np, &s->keys,
                              s->key_off, 1) != 0 ||
            build_json_object(&s->rowjson[3], ph + 3 * np, v->n_syncs,
                              &s->skeys, s->skey_off, SS_MISSING) != 0 ||
            build_json_doubles(&s->rowjson[4], ph + 3 * np + v->n_syncs,
                               v->n_metrics, &s->mkeys, s->mkey_off) != 0 ||
            build_self_json(&s->rowjson[5], ph,
                            ph + 3 * np + v->n_syncs + v->n_metrics, np,
                            &s->keys, s->key_off) != 0)
            return -1;
        sqlite3_bind_int64(q, 4, rank);
        bind_opt_int(q, 5, vals[0]);
        bind_opt_int(q, 6, vals[1]);
        bind_opt_int(q, 7, vals[2]);
        bind_json(q, 8, &s->rowjson[0]);
        bind_opt_int(q, 9, vals[3]);
        bind_json(q, 10, &s->rowjson[1]);
        bind_json(q, 11, &s->rowjson[2]);
        bind_json(q, 12, &s->rowjson[3]);
        bind_json(q, 13, &s->rowjson[4]);
        bind_json(q, 14, &s->rowjson[5]);
        bind_host(q, v->row_host ? &v->row_host[i] : NULL);
        if (run_stmt(s, q, "writing a rank step") != 0)
            return -1;
        if (rank < t->n_ranks) {
            rank_delta *d = &t->delta[rank];
            d->steps++;
            if (vals[0] != SS_MISSING) {
                d->n_ns++;
                d->sum_ns += vals[0];
                d->max_ns = max_known(d->max_ns, vals[0]);
            }
            d->max_rss = max_known(d->max_rss, vals[1]);
            d->max_dev = max_known(d->max_dev, vals[2]);
            d->last_step = max_known(d->last_step, (int64_t)v->step);
            t->dirty = 1;
        }
    }
    return 0;
}

/* A step and its vectors are the bulk of a batch: when a batch fails, the
 * rest is tried again without them. */
static int is_bulk(item_kind kind)
{
    return kind == IT_STEP || kind == IT_VALUES;
}

/* Writes a step's vectors: one row per rank and name, the elements as a
 * blob of little-endian doubles. */
static int apply_values(ss_store *s, int64_t run_id, const values_item *v)
{
    track *t = track_get(s, run_id, v->attempt, v->world_size);
    if (!t)
        return -1;
    if ((int64_t)v->step > t->max_step)
        t->max_step = (int64_t)v->step;
    sqlite3_stmt *q = s->st[ST_VALUES];
    sqlite3_bind_int64(q, 1, run_id);
    sqlite3_bind_int64(q, 2, v->attempt);
    sqlite3_bind_int64(q, 4, (int64_t)v->step);
    for (uint32_t i = 0; i < v->n; i++) {
        const value_row *r = &v->rows[i];
        sqlite3_bind_text(q, 3, r->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, r->rank);
        sqlite3_bind_int64(q, 6, r->n);
        sqlite3_bind_int64(q, 7, r->truncated);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rank_values.data is little-endian: convert here"
#endif
        sqlite3_bind_blob(q, 8, r->n ? (const void *)r->v : "", 
                          (int)(r->n * sizeof(double)), SQLITE_STATIC);
        if (run_stmt(s, q, "writing a vector") != 0)
            return -1;
    }
    return 0;
}

static int apply_item(ss_store *s, const item *it)
{
    sqlite3_stmt *q;
    switch (it->kind) {
    case IT_ATTEMPT:
        q = s->st[ST_ATTEMPT];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.attempt.attempt);
        sqlite3_bind_int64(q, 3, it->u.attempt.started_at);
        return run_stmt(s, q, "writing an attempt");
    case IT_ATTEMPT_FACTS: {
        const ss_attempt_facts *f = &it->u.facts;
        q = s->st[ST_ATTEMPT_FACTS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, f->attempt);
        bind_known_int(q, 3, f->ended_at);
        bind_known_text(q, 4, f->cause);
        bind_known_int(q, 5, f->first_step);
        bind_known_int(q, 6, f->last_step);
        bind_known_int(q, 7, f->resumed_from);
        return run_stmt(s, q, "writing an attempt's facts");
    }
    case IT_RANK: {
        const ss_rank_info *r = &it->u.rank;
        q = s->st[ST_RANK];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, r->attempt);
        sqlite3_bind_int64(q, 3, r->rank);
        bind_known_text(q, 4, r->host);
        bind_known_int(q, 5, r->pid);
        bind_known_text(q, 6, r->state);
        bind_known_int(q, 7, r->exit_code);
        bind_known_int(q, 8, r->term_signal);
        bind_known_int(q, 9, r->last_step);
        bind_known_int(q, 10, r->dropped_events);
        bind_known_int(q, 11, r->dropped_records);
        bind_known_text(q, 12, r->log_path);
        bind_known_int(q, 13, r->names_over_limit);
        bind_known_int(q, 14, r->values_over_limit);
        return run_stmt(s, q, "writing a rank");
    }
    case IT_NODE: {
        const ss_node_info *n = &it->u.node;
        q = s->st[ST_NODE];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, n->attempt);
        sqlite3_bind_int64(q, 3, n->node_rank);
        bind_known_text(q, 4, n->host);
        sqlite3_bind_text(q, 5, n->addr, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 6, n->first_rank);
        sqlite3_bind_int64(q, 7, n->nranks);
        sqlite3_bind_text(q, 8, n->state, -1, SQLITE_STATIC);
        bind_opt_int(q, 9, n->joined_at);
        bind_opt_int(q, 10, n->ended_at);
        bind_opt_int(q, 11, n->clock_offset_ns);
        bind_opt_int(q, 12, n->clock_bound_ns);
        bind_known_text(q, 13, n->lost_reason);
        bind_opt_int(q, 14, n->lost_at_step);
        return run_stmt(s, q, "writing a node");
    }
    case IT_PROFILE: {
        const ss_profile_info *p = &it->u.profile;
        q = s->st[ST_PROFILE];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, p->attempt);
        sqlite3_bind_int64(q, 3, p->request_id);
        sqlite3_bind_int64(q, 4, p->rank);
        sqlite3_bind_int64(q, 5, p->requested_at);
        sqlite3_bind_int64(q, 6, p->duration_ms);
        sqlite3_bind_text(q, 7, p->status, -1, SQLITE_STATIC);
        bind_known_text(q, 8, p->path);
        bind_known_text(q, 9, p->host);
        bind_known_text(q, 10, p->message);
        bind_opt_int(q, 11, p->marker_ns);
        return run_stmt(s, q, "writing a profile");
    }
    case IT_STEP:
        return apply_step(s, it->run_id, &it->u.step);
    case IT_VALUES:
        return apply_values(s, it->run_id, &it->u.values);
    case IT_LABELS:
        q = s->st[ST_LABELS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.labels.attempt);
        sqlite3_bind_text(q, 3, it->u.labels.name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 4, it->u.labels.rank);
        sqlite3_bind_text(q, 5, it->u.labels.json, -1, SQLITE_STATIC);
        return run_stmt(s, q, "writing a vector's labels");
    case IT_FINDING: {
        const ss_finding *f = &it->u.finding.f;
        ss_buf ranks = {0};
        ss_buf_add(&ranks, "[", 1);
        for (uint32_t i = 0; i < f->n_ranks && i < SS_FINDING_MAX_RANKS; i++) {
            if (i)
                ss_buf_add(&ranks, ",", 1);
            ss_buf_json_int(&ranks, f->ranks[i]);
        }
        ss_buf_add(&ranks, "]", 1);
        if (ranks.oom) {
            ss_buf_free(&ranks);
            return -1;
        }
        q = s->st[ST_FINDING];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, f->attempt);
        sqlite3_bind_int64(q, 3, f->id);
        sqlite3_bind_text(q, 4, f->kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 5, f->severity == SS_CRITICAL ? "critical"
                                                           : "warning",
                          -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 6, ranks.data, (int)ranks.len, SQLITE_STATIC);
        bind_known_text(q, 7, f->phase);
        sqlite3_bind_int64(q, 8, (int64_t)f->first_step);
        sqlite3_bind_int64(q, 9, (int64_t)f->last_step);
        sqlite3_bind_text(q, 10, f->evidence_json[0] ? f->evidence_json : "{}",
                          -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 11, f->message, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 12, it->u.finding.at);
        int rc = run_stmt(s, q, "writing a finding");
        sqlite3_clear_bindings(q);
        ss_buf_free(&ranks);
        return rc;
    }
    case IT_EVENT:
        q = s->st[ST_EVENT];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.event.attempt);
        sqlite3_bind_int64(q, 3, it->u.event.at);
        sqlite3_bind_text(q, 4, it->u.event.kind, -1, SQLITE_STATIC);
        bind_rank(q, 5, it->u.event.rank);
        bind_known_text(q, 6, it->u.event.message);
        return run_stmt(s, q, "writing an event");
    case IT_STACKS:
        q = s->st[ST_STACKS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.stacks.attempt);
        sqlite3_bind_int64(q, 3, it->u.stacks.taken_at);
        sqlite3_bind_text(q, 4, it->u.stacks.trigger, -1, SQLITE_STATIC);
        if (it->u.stacks.finding_id >= 0)
            sqlite3_bind_int64(q, 5, it->u.stacks.finding_id);
        else
            sqlite3_bind_null(q, 5);
        sqlite3_bind_text(q, 6, it->u.stacks.json, -1, SQLITE_STATIC);
        return run_stmt(s, q, "writing a stacks snapshot");
    case IT_END_RUN:
        q = s->st[ST_END_RUN];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, it->u.end.ended_at);
        sqlite3_bind_int64(q, 3, it->u.end.exit_code);
        sqlite3_bind_text(q, 4, it->u.end.status, -1, SQLITE_STATIC);
        bind_known_int(q, 5, it->u.end.dropped_events);
        bind_known_int(q, 6, it->u.end.dropped_records);
        return run_stmt(s, q, "ending a run");
    case IT_DROPPED_VECTORS:
        q = s->st[ST_DROPPED_VECTORS];
        sqlite3_bind_int64(q, 1, it->run_id);
        sqlite3_bind_int64(q, 2, (int64_t)it->u.dropped_vectors);
        return run_stmt(s, q, "counting dropped vectors");
    }
    return -1;
}

/* After a batch: prunes rank_values rows that left their recent window,
 * and adds the vectors refused at the queue to their run's count. */
static int prune_values(ss_store *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t run = s->dropped_vectors_run;
    uint64_t dropped = s->dropped_vectors_unsaved;
    s->dropped_vectors_unsaved = 0;
    pthread_mutex_unlock(&s->mu);
    if (dropped) {
        sqlite3_stmt *q = s->st[ST_DROPPED_VECTORS];
        sqlite3_bind_int64(q, 1, run);
        sqlite3_bind_int64(q, 2, (int64_t)dropped);
        if (run_stmt(s, q, "counting dropped vectors") != 0)
            return -1;
    }
    uint32_t recent = s->cfg.values_recent_steps;
    for (size_t i = 0; recent && i < s->n_tracks; i++) {
        track *t = &s->tracks[i];
        if (t->max_step + 1 <= (int64_t)recent)
            continue;
        int64_t cutoff = t->max_step + 1 - (int64_t)recent;
        if (cutoff <= t->values_kept_from)
            continue;
        sqlite3_stmt *q = s->st[ST_PRUNE_VALUES];
        sqlite3_bind_int64(q, 1, t->run_id);
        sqlite3_bind_int64(q, 2, t->attempt);
        sqlite3_bind_int64(q, 3, t->values_kept_from);
        sqlite3_bind_int64(q, 4, cutoff);
        sqlite3_bind_int64(q, 5, s->cfg.sample_every);
        if (run_stmt(s, q, "pruning vectors") != 0)
            return -1;
        t->values_kept_from = cutoff;
    }
    return 0;
}

/* After a batch: adds per-rank deltas to rank_totals and prunes tier-A
 * rank_steps rows that left the recent window. */
static int finish_tracks(ss_store *s)
{
    for (size_t i = 0; i < s->n_tracks; i++) {
        track *t = &s->tracks[i];
        if (t->dirty) {
            sqlite3_stmt *q = s->st[ST_TOTALS];
            for (uint32_t r = 0; r < t->n_ranks; r++) {
                rank_delta *d = &t->delta[r];
                if (!d->steps)
                    continue;
                sqlite3_bind_int64(q, 1, t->run_id);
                sqlite3_bind_int64(q, 2, t->attempt);
                sqlite3_bind_int64(q, 3, r);
                sqlite3_bind_int64(q, 4, d->steps);
                sqlite3_bind_int64(q, 5, d->n_ns);
                sqlite3_bind_int64(q, 6, d->sum_ns);
                bind_opt_int(q, 7, d->max_ns);
                bind_opt_int(q, 8, d->max_rss);
                bind_opt_int(q, 9, d->max_dev);
                bind_opt_int(q, 10, d->last_step);
                if (run_stmt(s, q, "writing rank totals") != 0)
                    return -1;
            }
            track_clear(t);
        }
        if (s->cfg.recent_steps == 0 ||
            t->max_step + 1 <= (int64_t)s->cfg.recent_steps)
            continue;
        int64_t cutoff = t->max_step + 1 - (int64_t)s->cfg.recent_steps;
        if (cutoff <= t->kept_from)
            continue;
        sqlite3_stmt *q = s->st[ST_PRUNE];
        sqlite3_bind_int64(q, 1, t->run_id);
        sqlite3_bind_int64(q, 2, t->attempt);
        sqlite3_bind_int64(q, 3, t->kept_from);
        sqlite3_bind_int64(q, 4, cutoff);
        sqlite3_bind_int64(q, 5, s->cfg.sample_every);
        if (run_stmt(s, q, "pruning rank steps") != 0)
            return -1;
        t->kept_from = cutoff;
    }
    return prune_values(s);
}

/* Applies the items of BATCH (without its steps when SMALL_ONLY) in one
 * transaction, then the batch's rank totals and pruning (not when
 * SMALL_ONLY).  Returns 0 when committed; -1 after rolling back (dbmu
 * held). */
static int run_batch(ss_store *s, const item *batch, int small_only)
{
    int rc = run_stmt(s, s->st[ST_BEGIN], "starting a transaction");
    for (const item *it = batch; it && rc == 0; it = it->next)
        if (!small_only || !is_bulk(it->kind))
            rc = apply_item(s, it);
    if (rc == 0 && !small_only)
        rc = finish_tracks(s);
    if (rc == 0)
        rc = run_stmt(s, s->st[ST_COMMIT], "committing");
    if (rc != 0) {
        if (!sqlite3_get_autocommit(s->db))
            run_stmt(s, s->st[ST_ROLLBACK], "rolling back");
        for (size_t i = 0; i < s->n_tracks; i++)
            track_clear(&s->tracks[i]);
    }
    return rc;
}

/* Marks finding ID of RUN_ID/ATTEMPT committed (dbmu held).  Returns 1
 * the first time, else 0 (also when out of memory: never over-claim). */
static int first_commit_of_finding(ss_store *s, int64_t run_id,
                                   uint32_t attempt, uint32_t id)
{
    track *t = track_get(s, run_id, attempt, 0);
    if (!t)
        return 0;
    uint32_t byte = id / 8;
    if (byte >= t->committed_findings_bytes) {
        uint32_t n = byte + 64;
        uint8_t *bits = realloc(t->committed_findings, n);
        if (!bits)
            return 0;
        memset(bits + t->committed_findings_bytes, 0,
               n - t->committed_findings_bytes);
        t->committed_findings = bits;
        t->committed_findings_bytes = n;
    }
    uint8_t bit = (uint8_t)(1u << (id % 8));
    if (t->committed_findings[byte] & bit)
        return 0;
    t->committed_findings[byte] |= bit;
    return 1;
}

/* Adds the fate of IT (committed when STORED) to *O.  With STORED, dbmu
 * must be held (the committed-findings bits are writer state). */
static void tally_item(ss_store *s, const item *it, int stored,
                       ss_store_outcome *o)
{
    switch (it->kind) {
    case IT_STEP:
        if (stored) {
            o->steps_stored++;
            o->rank_steps_stored += it->u.step.n_rows;
        } else {
            o->steps_lost++;
            o->rank_steps_lost += it->u.step.n_rows;
        }
        break;
    case IT_VALUES:
        if (stored)
            o->vectors_stored += it->u.values.n;
        else
            o->vectors_lost += it->u.values.n;
        break;
    case IT_FINDING:
        if (!stored)
            o->finding_writes_lost++;
        else if (first_commit_of_finding(s, it->run_id,
                                         it->u.finding.f.attempt,
                                         it->u.finding.f.id))
            o->findings_stored++;
        break;
    case IT_EVENT:
        stored ? o->events_stored++ : o->events_lost++;
        break;
    case IT_END_RUN:
        stored ? o->ends_stored++ : o->ends_lost++;
        break;
    case IT_ATTEMPT:
    case IT_ATTEMPT_FACTS:
    case IT_LABELS:
    case IT_DROPPED_VECTORS:
    case IT_RANK:
    case IT_NODE:
    case IT_STACKS:
    case IT_PROFILE:
        if (!stored)
            o->other_lost++;
        break;
    }
}

/* Adds batch tallies D to the store's outcome (mu held); WHY names the
 * first loss. */
static void add_outcome(ss_store *s, const ss_store_outcome *d,
                        const char *why)
{
    ss_store_outcome *o = &s->outcome;
    o->steps_stored += d->steps_stored;
    o->steps_lost += d->steps_lost;
    o->rank_steps_stored += d->rank_steps_stored;
    o->rank_steps_lost += d->rank_steps_lost;
    o->findings_stored += d->findings_stored;
    o->finding_writes_lost += d->finding_writes_lost;
    o->events_stored += d->events_stored;
    o->events_lost += d->events_lost;
    o->other_lost += d->other_lost;
    o->ends_stored += d->ends_stored;
    o->ends_lost += d->ends_lost;
    o->vectors_stored += d->vectors_stored;
    o->vectors_lost += d->vectors_lost;
    int lost = d->steps_lost || d->rank_steps_lost || d->vectors_lost ||
               d->finding_writes_lost || d->events_lost || d->other_lost ||
               d->ends_lost;
    if (lost && !o->error[0])
        snprintf(o->error, sizeof o->error, "%s", why && *why ? why
                                                              : "unknown");
}

/* Applies BATCH in one transaction and frees it.  On a failure the
 * transaction is rolled back and the batch is lost (reported on stderr):
 * a store that cannot be written must not grow the queue without bound.
 * Its small items then get one more try of their own. */
static void apply_batch(ss_store *s, item *batch)
{
    pthread_mutex_lock(&s->dbmu);
    s->batch_err[0] = '\0';
    size_t n = 0, n_small = 0;
    for (const item *it = batch; it; it = it->next, n++)
        n_small += !is_bulk(it->kind);
    int rc = run_batch(s, batch, 0), small_rc = -1;
    if (rc != 0) {
        fprintf(stderr, "stepscope: store %s: a batch of %zu items was "
                "not written\n", s->path, n);
        if (n_small > 0 && n_small < n) {
            small_rc = run_batch(s, batch, 1);
            if (small_rc == 0)
                fprintf(stderr, "stepscope: store %s: its %zu other item%s "
                        "(ranks, findings, events) were written without its "
                        "steps\n", s->path, n_small, n_small == 1 ? "" : "s");
        }
    }
    ss_store_outcome d;
    memset(&d, 0, sizeof d);
    for (const item *it = batch; it; it = it->next)
        tally_item(s, it, rc == 0 || (small_rc == 0 && !is_bulk(it->kind)),
                   &d);
    char why[sizeof s->batch_err];
    snprintf(why, sizeof why, "%s",
             s->batch_err[0] ? s->batch_err : "out of memory while writing");
    pthread_mutex_unlock(&s->dbmu);
    pthread_mutex_lock(&s->mu);
    add_outcome(s, &d, why);
    pthread_mutex_unlock(&s->mu);
    while (batch) {
        item *next = batch->next;
        free(batch);
        batch = next;
    }
}

/* Takes the whole queue (mu held) and applies it (mu released meanwhile). */
static void drain_locked(ss_store *s)
{
    item *batch = s->head;
    uint64_t units = s->pending_units, seq = s->enq_seq;
    s->head = s->tail = NULL;
    s->pending_units = 0;
    s->pending_value_bytes = 0;
    s->flush_wanted = 0;
    pthread_mutex_unlock(&s->mu);
    if (batch)
        apply_batch(s, batch);
    pthread_mutex_lock(&s->mu);
    s->stats.written += units;
    if (batch)
        s->stats.transactions++;
    if (seq > s->done_seq)
        s->done_seq = seq;
    pthread_cond_broadcast(&s->done);
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *writer_main(void *arg)
{
    ss_store *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->stop && !s->head)
            pthread_cond_wait(&s->wake, &s->mu);
        if (s->head && !s->stop && !s->flush_wanted &&
            s->pending_units < s->cfg.queue_limit / 2) {
            struct timespec due = s->first_at, now;
            due.tv_sec += s->cfg.flush_interval_ms / 1000;
            due.tv_nsec += (long)(s->cfg.flush_interval_ms % 1000) * 1000000;
            if (due.tv_nsec >= 1000000000) {
                due.tv_sec++;
                due.tv_nsec -= 1000000000;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (ts_before(&now, &due)) {
                pthread_cond_timedwait(&s->wake, &s->mu, &due);
                continue; /* re-evaluate: woken early or due */
            }
        }
        if (s->head)
            drain_locked(s);
        else if (s->stop)
            break;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- public API ---- */

void ss_store_config_defaults(ss_store_config *cfg)
{
    cfg->flush_interval_ms = 250;
    cfg->queue_limit = 65536;
    cfg->recent_steps = 512;
    cfg->sample_every = 100;
    cfg->values_recent_steps = 64;
    cfg->values_queue_bytes = (uint64_t)64 << 20;
}

void ss_store_config_fit_world(ss_store_config *cfg, uint32_t world)
{
    uint64_t want = (uint64_t)SS_STORE_QUEUE_STEPS * ((uint64_t)world + 1);
    if (want > UINT32_MAX)
        want = UINT32_MAX;
    if (cfg->queue_limit < want)
        cfg->queue_limit = (uint32_t)want;
}

static void store_free(ss_store *s)
{
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    for (size_t i = 0; i < s->n_tracks; i++) {
        free(s->tracks[i].delta);
        free(s->tracks[i].committed_findings);
    }
    free(s->tracks);
    for (size_t i = 0; i < sizeof s->rowjson / sizeof s->rowjson[0]; i++)
        ss_buf_free(&s->rowjson[i]);
    ss_buf_free(&s->keys);
    free(s->key_off);
    ss_buf_free(&s->skeys);
    free(s->skey_off);
    ss_buf_free(&s->mkeys);
    free(s->mkey_off);
    free(s->path);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->dbmu);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->done);
    free(s);
}

/*
 * Creates the store file PATH 0600 if it is missing, or checks that the
 * existing one, and the -wal, -shm and -journal files SQLite keeps beside
 * it, are private (private_fs.h): another user's store, or one they can
 * write, would let them read and change every run.  PATH itself may be a
 * symbolic link of the user or root (store_files.h: it names the same
 * store); what it leads to is checked.  Returns 0/-1 with ERR.
 */
static int store_file_check(const char *path, char *err, size_t errlen)
{
    char real[PATH_MAX];
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        if (sb.st_uid != geteuid() && sb.st_uid != 0) {
            snprintf(err, errlen, "refusing %s: it is a symbolic link of "
                     "another user (uid %ld)", path, (long)sb.st_uid);
            return -1;
        }
        if (realpath(path, real))
            path = real;
    }
    if (ss_mkdirs_private_parent(path, err, errlen) != 0)
        return -1;
    /* A new store is created 0600 here, before SQLite opens it: SQLite
     * would create it 0644, and it gives the -wal and -shm files the mode
     * of the database file. */
    int fd = ss_open_private(path, O_RDWR, NULL, err, errlen);
    if (fd < 0)
        return errno == EPERM || errno == ELOOP ? -1 : 0; /* else SQLite
                                                    says what is wrong */
    close(fd);
    static const char *const sidecar[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sidecar / sizeof sidecar[0]; i++) {
        char side[PATH_MAX + 16];
        snprintf(side, sizeof side, "%s%s", path, sidecar[i]);
        if (ss_check_private_file(side, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Opens, checks, configures and migrates the database.  Returns 0/-1. */
static int store_setup(ss_store *s, const char *path, char *err,
                       size_t errlen)
{
    if (store_file_check(path, err, errlen) != 0)
        return -1;
    int rc = sqlite3_open_v2(path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                 SQLITE_OPEN_FULLMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path,
                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_busy_timeout(s->db, 5000);
    if (ss_schema_check(s->db, path, err, errlen) < 0)
        return -1;
    char *msg = NULL;
    rc = sqlite3_exec(s->db,
                      "PRAGMA page_size = 16384;"
                      "PRAGMA journal_mode = WAL;"
                      "PRAGMA synchronous = NORMAL;"
                      "PRAGMA cache_size = -16384;",
                      NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cannot set up %s: %s", path,
                 msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    if (ss_schema_migrate(s->db, path, err, errlen) != 0)
        return -1;
    for (int i = 0; i < ST_COUNT; i++) {
        rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
        if (rc != SQLITE_OK) {
            snprintf(err, errlen, "%s: cannot prepare a statement: %s", path,
                     sqlite3_errmsg(s->db));
            return -1;
        }
    }
    return 0;
}

ss_store *ss_store_open(const char *path, const ss_store_config *cfg,
                        int writer, char *err, size_t errlen)
{
    ss_store *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (cfg)
        s->cfg = *cfg;
    else
        ss_store_config_defaults(&s->cfg);
    if (s->cfg.flush_interval_ms == 0)
        s->cfg.flush_interval_ms = 1; /* as soon as possible */
    if (s->cfg.queue_limit == 0)
        s->cfg.queue_limit = 65536;
    if (s->cfg.values_queue_bytes == 0)
        s->cfg.values_queue_bytes = (uint64_t)64 << 20;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->dbmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->done, NULL);
    s->path = strdup(path);
    if (!s->path) {
        snprintf(err, errlen, "out of memory");
        store_free(s);
        return NULL;
    }
    if (store_setup(s, path, err, errlen) != 0) {
        store_free(s);
        return NULL;
    }
    if (writer) {
        /* The writer blocks every signal, so signals meant for the
         * controller's loop are never delivered to it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&s->writer, NULL, writer_main, s);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (rc != 0) {
            snprintf(err, errlen, "cannot start the store writer: %s",
                     strerror(rc));
            store_free(s);
            return NULL;
        }
        s->has_writer = 1;
    }
    return s;
}

void ss_store_flush(ss_store *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->has_writer) {
        uint64_t target = s->enq_seq;
        if (s->done_seq < target) {
            s->flush_wanted = 1;
            pthread_cond_signal(&s->wake);
        }
        while (s->done_seq < target)
            pthread_cond_wait(&s->done, &s->mu);
    } else if (s->head) {
        drain_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
}

void ss_store_close(ss_store *s)
{
    if (!s)
        return;
    if (s->has_writer) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->writer, NULL);
    } else {
        ss_store_flush(s);
    }
    store_free(s);
}

int ss_store_begin_run(ss_store *s, const ss_run_info *info, int64_t *run_id,
                       char *err, size_t errlen)
{
    static const char sql[] =
        "INSERT INTO runs(uuid, name, command, host, world_size, started_at, "
        "fingerprint) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    pthread_mutex_lock(&s->dbmu);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(q, 1, info->uuid, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, info->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, info->command, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 4, info->host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 5, info->world_size);
        sqlite3_bind_int64(q, 6, info->started_at);
        if (info->fingerprint)
            sqlite3_bind_text(q, 7, info->fingerprint, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
    }
    if (rc == SQLITE_DONE) {
        *run_id = sqlite3_last_insert_rowid(s->db);
    } else {
        snprintf(err, errlen, "%s: cannot record the run: %s", s->path,
                 sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&s->dbmu);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Out of memory in a put: the item is lost, as the store would lose it on a
 * crash, and counted; the controller goes on.  ROWS: the rank-step rows a
 * lost step carried. */
static void put_failed(ss_store *s, item_kind kind, uint32_t rows,
                       const char *what)
{
    fprintf(stderr, "stepscope: store %s: out of memory, %s not written\n",
            s->path, what);
    item lost;
    memset(&lost, 0, sizeof lost);
    lost.kind = kind;
    lost.u.step.n_rows = kind == IT_STEP ? rows : 0;
    if (kind == IT_VALUES)
        lost.u.values.n = rows;
    ss_store_outcome d;
    memset(&d, 0, sizeof d);
    tally_item(s, &lost, 0, &d);
    pthread_mutex_lock(&s->mu);
    add_outcome(s, &d, "out of memory");
    pthread_mutex_unlock(&s->mu);
}

void ss_store_put_attempt(ss_store *s, int64_t run_id, uint32_t attempt,
                          ss_wall_ns started_at)
{
    item *it = item_new(IT_ATTEMPT, run_id, 0);
    if (!it) {
        put_failed(s, IT_ATTEMPT, 0, "an attempt");
        return;
    }
    it->u.attempt.attempt = attempt;
    it->u.attempt.started_at = started_at;
    enqueue(s, it);
}

void ss_store_put_attempt_facts(ss_store *s, int64_t run_id,
                                const ss_attempt_facts *f)
{
    item *it = item_new(IT_ATTEMPT_FACTS, run_id, 0);
    if (!it) {
        put_failed(s, IT_ATTEMPT_FACTS, 0, "an attempt's facts");
        return;
    }
    it->u.facts = *f;
    it->u.facts.cause[sizeof f->cause - 1] = '\0';
    enqueue(s, it);
}

void ss_store_put_rank(ss_store *s, int64_t run_id, const ss_rank_info *r)
{
    item *it = item_new(IT_RANK, run_id, 0);
    if (!it) {
        put_failed(s, IT_RANK, 0, "a rank");
        return;
    }
    it->u.rank = *r;
    it->u.rank.host[sizeof r->host - 1] = '\0';
    it->u.rank.state[sizeof r->state - 1] = '\0';
    it->u.rank.log_path[sizeof r->log_path - 1] = '\0';
    enqueue(s, it);
}

void ss_node_info_init(ss_node_info *n)
{
    memset(n, 0, sizeof *n);
    n->joined_at = SS_MISSING;
    n->ended_at = SS_MISSING;
    n->clock_offset_ns = SS_MISSING;
    n->clock_bound_ns = SS_MISSING;
    n->lost_at_step = SS_MISSING;
}

static int node_state_known(const char *state)
{
    static const char *const known[] = {SS_NODE_JOINING, SS_NODE_RUNNING,
                                        SS_NODE_DONE, SS_NODE_LOST,
                                        SS_NODE_NEVER_JOINED};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(state, known[i]) == 0)
            return 1;
    return 0;
}

void ss_store_put_node(ss_store *s, int64_t run_id, const ss_node_info *n)
{
    char state[sizeof n->state];
    snprintf(state, sizeof state, "%.*s", (int)sizeof state - 1, n->state);
    if (!node_state_known(state)) {
        fprintf(stderr, "stepscope: store %s: node %u has an unknown state "
                "'%s', not written\n", s->path, n->node_rank, state);
        item lost;
        memset(&lost, 0, sizeof lost);
        lost.kind = IT_NODE;
        ss_store_outcome d;
        memset(&d, 0, sizeof d);
        tally_item(s, &lost, 0, &d);
        pthread_mutex_lock(&s->mu);
        add_outcome(s, &d, "a node with an unknown state");
        pthread_mutex_unlock(&s->mu);
        return;
    }
    item *it = item_new(IT_NODE, run_id, 0);
    if (!it) {
        put_failed(s, IT_NODE, 0, "a node");
        return;
    }
    it->u.node = *n;
    it->u.node.host[sizeof n->host - 1] = '\0';
    it->u.node.addr[sizeof n->addr - 1] = '\0';
    it->u.node.state[sizeof n->state - 1] = '\0';
    it->u.node.lost_reason[sizeof n->lost_reason - 1] = '\0';
    enqueue(s, it);
}

void ss_store_put_profile(ss_store *s, int64_t run_id,
                          const ss_profile_info *p)
{
    item *it = item_new(IT_PROFILE, run_id, 0);
    if (!it) {
        put_failed(s, IT_PROFILE, 0, "a profile");
        return;
    }
    it->u.profile = *p;
    it->u.profile.status[sizeof p->status - 1] = '\0';
    it->u.profile.path[sizeof p->path - 1] = '\0';
    it->u.profile.host[sizeof p->host - 1] = '\0';
    it->u.profile.message[sizeof p->message - 1] = '\0';
    enqueue(s, it);
}

/* ARR[IDX] of a per-name array that may be NULL (nothing known). */
static int64_t name_value(const int64_t *arr, int idx)
{
    return arr ? arr[idx] : SS_MISSING;
}

static const char *name_of(const char *const *names, int idx)
{
    return names && idx >= 0 && names[idx] ? names[idx] : "?";
}

/* Does some present rank of V carry host evidence? */
static int has_host(const ss_step_view *v)
{
    for (uint32_t r = 0; v->ranks && r < v->world_size; r++)
        if (v->ranks[r].present && v->ranks[r].host)
            return 1;
    return 0;
}

/* The host evidence of V's first ROWS present ranks into OUT, in row
 * order (all SS_MISSING for a rank without any). */
static void copy_host_rows(const ss_step_view *v, uint32_t rows,
                           ss_host_step *out)
{
    uint32_t i = 0;
    for (uint32_t r = 0; r < v->world_size && i < rows; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        if (rs->host)
            out[i] = *rs->host;
        else
            for (size_t k = 0; k < sizeof out[i] / sizeof(int64_t); k++)
                ((int64_t *)&out[i])[k] = SS_MISSING;
        i++;
    }
}

/* Queues the vectors of step V, all of them or none (over
 * values_queue_bytes: counted). */
static void put_values(ss_store *s, int64_t run_id, const ss_step_view *v,
                       const char *const *names)
{
    uint32_t n = 0;
    size_t extra = 0;
    for (uint32_t r = 0; v->ranks && r < v->world_size; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        for (uint32_t i = 0; i < rs->n_values; i++) {
            n++;
            extra += round8(rs->values[i].n * sizeof(double)) +
                     str_space(name_of(names, rs->values[i].name));
        }
    }
    if (n == 0)
        return;
    extra += round8(n * sizeof(value_row));
    pthread_mutex_lock(&s->mu);
    int keep = s->pending_value_bytes + extra <= s->cfg.values_queue_bytes;
    if (keep) {
        s->pending_value_bytes += extra;
        s->stats.vectors_queued += n;
    } else {
        s->stats.dropped_vectors += n;
        if (s->dropped_vectors_run != run_id)
            s->dropped_vectors_unsaved = 0; /* a new run: counted anew */
        s->dropped_vectors_run = run_id;
        s->dropped_vectors_unsaved += n;
    }
    pthread_mutex_unlock(&s->mu);
    if (!keep)
        return;
    item *it = item_new(IT_VALUES, run_id, extra);
    if (!it) {
        put_failed(s, IT_VALUES, n, "a step's vectors");
        return;
    }
    values_item *vi = &it->u.values;
    char *p = (char *)(it + 1);
    vi->attempt = v->attempt;
    vi->step = v->step;
    vi->world_size = v->world_size;
    vi->n = n;
    vi->bytes = extra;
    vi->rows = carve(&p, n * sizeof(value_row));
    uint32_t k = 0;
    for (uint32_t r = 0; r < v->world_size; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        for (uint32_t i = 0; i < rs->n_values; i++, k++) {
            const ss_values_item *x = &rs->values[i];
            value_row *row = &vi->rows[k];
            row->rank = r;
            row->n = x->n;
            row->truncated = x->truncated;
            row->name = carve_str(&p, name_of(names, x->name));
            row->v = carve(&p, x->n * sizeof(double));
            if (x->n)
                memcpy(row->v, x->v, x->n * sizeof(double));
        }
    }
    enqueue(s, it);
}

void ss_store_put_labels(ss_store *s, int64_t run_id, uint32_t attempt,
                         uint32_t rank, const char *name,
                         const char *const *labels, uint32_t n)
{
    ss_buf json = {0};
    ss_buf_add(&json, "[", 1);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            ss_buf_add(&json, ",", 1);
        ss_buf_json_str(&json, labels[i]);
    }
    ss_buf_add(&json, "]", 1);
    item *it = json.oom ? NULL
                        : item_new(IT_LABELS, run_id,
                                   str_space(name) + json.len + 1);
    if (!it) {
        ss_buf_free(&json);
        put_failed(s, IT_LABELS, 0, "a vector's labels");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.labels.attempt = attempt;
    it->u.labels.rank = rank;
    it->u.labels.name = carve_str(&p, name);
    it->u.labels.json = p;
    memcpy(p, json.data, json.len);
    p[json.len] = '\0';
    ss_buf_free(&json);
    enqueue(s, it);
}

void ss_store_put_step(ss_store *s, int64_t run_id, const ss_step_view *v,
                       const char *const *names)
{
    uint32_t n_rows = 0;
    if (v->ranks)
        for (uint32_t r = 0; r < v->world_size; r++)
            n_rows += v->ranks[r].present != 0;

    /* Rank rows go only when the queue has room for them; the rest of the
     * step always goes. */
    pthread_mutex_lock(&s->mu);
    int keep_rows = s->pending_units + 1 + n_rows <= s->cfg.queue_limit;
    if (!keep_rows)
        s->stats.dropped_rank_steps += n_rows;
    pthread_mutex_unlock(&s->mu);
    uint32_t rows = keep_rows ? n_rows : 0;
    int with_host = rows && has_host(v);

    size_t stride = ROW_FIXED + 4 * (size_t)v->n_phases + v->n_syncs +
                    v->n_metrics;
    size_t extra = round8((size_t)v->n_missing * sizeof(uint32_t)) +
                   round8((size_t)v->n_phases * sizeof(ss_phase_stat)) +
                   round8((size_t)v->n_phases * sizeof(ss_stat)) +
                   round8((size_t)v->n_phases * sizeof(char *)) +
                   round8((size_t)v->n_syncs * sizeof(ss_sync_stat)) +
                   round8((size_t)v->n_syncs * sizeof(char *)) +
                   round8((size_t)v->n_metrics * sizeof(char *)) +
                   round8((size_t)rows * sizeof(uint32_t)) +
                   (size_t)rows * stride * sizeof(int64_t) +
                   (with_host ? (size_t)rows * sizeof(ss_host_step) : 0);
    for (uint32_t i = 0; i < v->n_phases; i++)
        extra += str_space(name_of(names, v->phases[i].name));
    for (uint32_t i = 0; i < v->n_syncs; i++)
        extra += str_space(name_of(names, v->syncs[i].name));
    for (uint32_t i = 0; i < v->n_metrics; i++)
        extra += str_space(name_of(names, v->metrics[i]));
    item *it = item_new(IT_STEP, run_id, extra);
    if (!it) {
        put_failed(s, IT_STEP, rows, "a step");
        return;
    }
    step_item *st = &it->u.step;
    char *p = (char *)(it + 1);
    st->attempt = v->attempt;
    st->step = v->step;
    st->finalized_at = v->finalized_at;
    st->world_size = v->world_size;
    st->n_present = v->n_present;
    st->n_missing = v->n_missing;
    st->missing = carve(&p, (size_t)v->n_missing * sizeof(uint32_t));
    if (v->n_missing)
        memcpy(st->missing, v->missing_ranks,
               (size_t)v->n_missing * sizeof(uint32_t));
    st->step_time = v->step_time;
    st->rss = v->rss;
    st->device = v->device;
    st->n_phases = v->n_phases;
    st->phases = carve(&p, (size_t)v->n_phases * sizeof(ss_phase_stat));
    st->phase_self = carve(&p, (size_t)v->n_phases * sizeof(ss_stat));
    st->phase_names = carve(&p, (size_t)v->n_phases * sizeof(char *));
    for (uint32_t i = 0; i < v->n_phases; i++) {
        st->phases[i] = v->phases[i];
        if (v->phase_self)
            st->phase_self[i] = v->phase_self[i];
        else
            st->phase_self[i] = (ss_stat){SS_MISSING, SS_MISSING, SS_MISSING,
                                          SS_MISSING, SS_NO_RANK, 0};
        st->phase_names[i] = carve_str(&p, name_of(names, v->phases[i].name));
    }
    st->n_syncs = v->n_syncs;
    st->syncs = carve(&p, (size_t)v->n_syncs * sizeof(ss_sync_stat));
    st->sync_names = carve(&p, (size_t)v->n_syncs * sizeof(char *));
    for (uint32_t i = 0; i < v->n_syncs; i++) {
        st->syncs[i] = v->syncs[i];
        st->sync_names[i] = carve_str(&p, name_of(names, v->syncs[i].name));
    }
    st->n_metrics = v->n_metrics;
    st->metric_names = carve(&p, (size_t)v->n_metrics * sizeof(char *));
    for (uint32_t i = 0; i < v->n_metrics; i++)
        st->metric_names[i] = carve_str(&p, name_of(names, v->metrics[i]));
    st->n_rows = rows;
    st->row_rank = carve(&p, (size_t)rows * sizeof(uint32_t));
    st->row_vals = carve(&p, (size_t)rows * stride * sizeof(int64_t));
    uint32_t i = 0;
    for (uint32_t r = 0; r < v->world_size && i < rows; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        if (!rs->present)
            continue;
        int64_t *vals = st->row_vals + (size_t)i * stride;
        st->row_rank[i] = r;
        vals[0] = rs->step_ns;
        vals[1] = rs->rss_bytes;
        vals[2] = rs->device_bytes;
        vals[3] = rs->begin_ns;
        int64_t *ph = vals + ROW_FIXED;
        uint32_t np = v->n_phases;
        for (uint32_t k = 0; k < v->n_phases; k++) {
            int idx = v->phases[k].name;
            int ok = idx >= 0 && (uint32_t)idx < v->n_names;
            ph[k] = ok ? name_value(rs->phase_ns, idx) : SS_MISSING;
            ph[np + k] = ok ? name_value(rs->phase_start_ns, idx) : SS_MISSING;
            ph[2 * np + k] = ok ? name_value(rs->phase_count, idx)
                                : SS_MISSING;
        }
        for (uint32_t k = 0; k < v->n_syncs; k++) {
            int idx = v->syncs[k].name;
            int64_t t = idx >= 0 && (uint32_t)idx < v->n_names
                            ? name_value(rs->sync_arrival_ns, idx)
                            : SS_MISSING;
            ph[3 * np + k] = t == SS_MISSING || rs->begin_ns == SS_MISSING
                                 ? SS_MISSING
                                 : t - rs->begin_ns;
        }
        int64_t *me = ph + 3 * np + v->n_syncs;
        for (uint32_t k = 0; k < v->n_metrics; k++) {
            int idx = v->metrics[k];
            double d = idx >= 0 && (uint32_t)idx < v->n_names && rs->metric
                           ? rs->metric[idx]
                           : NAN;
            memcpy(&me[k], &d, sizeof d);
        }
        int64_t *self = me + v->n_metrics;
        for (uint32_t k = 0; k < np; k++) {
            int idx = v->phases[k].name;
            self[k] = idx >= 0 && (uint32_t)idx < v->n_names
                          ? name_value(rs->phase_self_ns, idx)
                          : SS_MISSING;
        }
        i++;
    }
    st->row_host = with_host ? carve(&p, (size_t)rows * sizeof(ss_host_step))
                             : NULL;
    if (with_host)
        copy_host_rows(v, rows, st->row_host);
    st->dropped_rows = keep_rows ? 0 : n_rows;
    it->units = 1 + rows;
    enqueue(s, it);
    put_values(s, run_id, v, names);
}

void ss_store_put_finding(ss_store *s, int64_t run_id, const ss_finding *f)
{
    item *it = item_new(IT_FINDING, run_id, 0);
    if (!it) {
        put_failed(s, IT_FINDING, 0, "a finding");
        return;
    }
    ss_finding *c = &it->u.finding.f;
    *c = *f;
    c->kind[sizeof c->kind - 1] = '\0';
    c->phase[sizeof c->phase - 1] = '\0';
    c->evidence_json[sizeof c->evidence_json - 1] = '\0';
    c->message[sizeof c->message - 1] = '\0';
    if (c->n_ranks > SS_FINDING_MAX_RANKS)
        c->n_ranks = SS_FINDING_MAX_RANKS;
    it->u.finding.at = ss_wall_now();
    enqueue(s, it);
}

void ss_store_put_event(ss_store *s, int64_t run_id, uint32_t attempt,
                        ss_wall_ns at, const char *kind, int32_t rank,
                        const char *message)
{
    item *it = item_new(IT_EVENT, run_id,
                        str_space(kind) + str_space(message));
    if (!it) {
        put_failed(s, IT_EVENT, 0, "an event");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.event.attempt = attempt;
    it->u.event.at = at;
    it->u.event.rank = rank;
    it->u.event.kind = carve_str(&p, kind);
    it->u.event.message = carve_str(&p, message);
    enqueue(s, it);
}

void ss_store_put_stacks(ss_store *s, int64_t run_id, uint32_t attempt,
                         ss_wall_ns taken_at, const char *trigger,
                         int64_t finding_id, const char *json)
{
    item *it = item_new(IT_STACKS, run_id,
                        str_space(trigger) + str_space(json));
    if (!it) {
        put_failed(s, IT_STACKS, 0, "a stacks snapshot");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.stacks.attempt = attempt;
    it->u.stacks.taken_at = taken_at;
    it->u.stacks.finding_id = finding_id;
    it->u.stacks.trigger = carve_str(&p, trigger);
    it->u.stacks.json = carve_str(&p, json);
    enqueue(s, it);
}

void ss_store_end_run(ss_store *s, int64_t run_id, ss_wall_ns ended_at,
                      int exit_code, const char *status,
                      int64_t dropped_events, int64_t dropped_records)
{
    item *it = item_new(IT_END_RUN, run_id, str_space(status));
    if (!it) {
        put_failed(s, IT_END_RUN, 0, "the end of the run");
        return;
    }
    char *p = (char *)(it + 1);
    it->u.end.ended_at = ended_at;
    it->u.end.exit_code = exit_code;
    it->u.end.status = carve_str(&p, status && *status ? status : "ended");
    it->u.end.dropped_events = dropped_events;
    it->u.end.dropped_records = dropped_records;
    enqueue(s, it);
}

void ss_store_add_dropped_vectors(ss_store *s, int64_t run_id, uint64_t n)
{
    if (n == 0)
        return;
    item *it = item_new(IT_DROPPED_VECTORS, run_id, 0);
    if (!it) {
        put_failed(s, IT_DROPPED_VECTORS, 0, "a count of dropped vectors");
        return;
    }
    it->u.dropped_vectors = n;
    enqueue(s, it);
}

void ss_store_get_stats(ss_store *s, ss_store_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void ss_store_get_outcome(ss_store *s, ss_store_outcome *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->outcome;
    out->rank_steps_dropped = s->stats.dropped_rank_steps;
    out->vectors_dropped = s->stats.dropped_vectors;
    pthread_mutex_unlock(&s->mu);
}

struct sqlite3 *ss_store_db(ss_store *s)
{
    return s->db;
}

/* Collects the ids and uuids of the runs whose row says `running`. */
typedef struct {
    int64_t id;
    char uuid[64];
} running_run;

static size_t list_running(ss_store *s, running_run **out)
{
    sqlite3_stmt *q = NULL;
    size_t n = 0, cap = 0;
    running_run *v = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT id, uuid FROM runs WHERE status = "
                           "'running'", -1, &q, NULL) != SQLITE_OK)
        return 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 8;
            running_run *nv = realloc(v, ncap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = ncap;
        }
        v[n].id = sqlite3_column_int64(q, 0);
        const unsigned char *u = sqlite3_column_text(q, 1);
        snprintf(v[n].uuid, sizeof v[n].uuid, "%s", u ? (const char *)u : "");
        n++;
    }
    sqlite3_finalize(q);
    *out = v;
    return n;
}

/* Marks run ID interrupted (and its ranks still `running`), with an
 * event, unless another process did it first.  Returns 1 when this call changed the row, 0 or -1 (error). */
static int mark_one_interrupted(ss_store *s, int64_t id)
{
    /* ended_at: the last time anything was heard of the run. */
    static const char update[] =
        "UPDATE runs SET status = 'interrupted', ended_at = max(started_at,"
        " coalesce((SELECT max(at) FROM events WHERE run_id = ?1), 0),"
        " coalesce((SELECT max(finalized_at) FROM steps WHERE run_id = ?1),"
        " 0)) WHERE id = ?1 AND status = 'running'";
    static const char ranks[] =
        "UPDATE ranks SET state = 'interrupted' WHERE run_id = ?1 AND "
        "state = 'running'";
    static const char event[] =
        "INSERT INTO events(run_id, attempt, at, kind, rank, message) "
        "VALUES (?1, (SELECT coalesce(max(attempt), 0) FROM attempts "
        "WHERE run_id = ?1), ?2, 'interrupted', NULL, 'the controller "
        "stopped without ending the run (killed, crashed or its host went "
        "down); a later stepscope run marked it interrupted')";
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    int changed = 0, rc;
    sqlite3_stmt *q = NULL;
    rc = sqlite3_prepare_v2(s->db, update, -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(q, 1, id);
        rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        changed = sqlite3_changes(s->db) == 1;
    }
    sqlite3_finalize(q);
    q = NULL;
    for (int i = 0; i < 2 && rc == SQLITE_OK && changed; i++) {
        rc = sqlite3_prepare_v2(s->db, i == 0 ? ranks : event, -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(q, 1, id);
            if (i == 1)
                sqlite3_bind_int64(q, 2, ss_wall_now());
            rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(q);
        q = NULL;
    }
    if (rc != SQLITE_OK ||
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return changed;
}

int ss_store_mark_interrupted(ss_store *s)
{
    pthread_mutex_lock(&s->dbmu);
    running_run *runs = NULL;
    size_t n = list_running(s, &runs);
    int marked = 0;
    for (size_t i = 0; i < n; i++)
        if (!ss_run_controller_alive(s->path, runs[i].uuid) &&
            mark_one_interrupted(s, runs[i].id) == 1)
            marked++;
    pthread_mutex_unlock(&s->dbmu);
    free(runs);
    ss_run_locks_sweep(s->path);
    return marked;
}
