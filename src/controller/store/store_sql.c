/*
 * store_sql.c - the SQL text of the store's writer (store_sql.h), and
 * stepping a statement with the error kept for the outcome.
 *
 * Upserts use NULL parameters for "leave the column as it is"
 * (coalesce(excluded.x, x)); the prune statements say which rows a
 * retention tier keeps (docs/store.md).
 */
#include "store_sql.h"

#include <stdio.h>

/* The host evidence of a rank step (ss_host_step, in this order) binds to
 * HOST_PARAMS of SS__ST_RANK_STEP (from SS__HOST_FIRST_PARAM on). */
#define HOST_COLUMNS                                                          \
    "host_cpu_ns, host_runq_ns, host_stopped_ns, host_throttled_ns, "        \
    "host_nr_throttled, host_vol_switches, host_invol_switches, "             \
    "host_major_faults, host_psi_cpu_ns, host_psi_memory_ns, host_psi_io_ns"
#define HOST_PARAMS "?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25"
/* Its GPU evidence (ss_gpu_evidence, in this order, the index first)
 * binds to GPU_PARAMS (from SS__GPU_FIRST_PARAM on). */
#define GPU_COLUMNS                                                           \
    "gpu_index, gpu_covered_ns, gpu_slowed_ns, gpu_power_cap_ns, "            \
    "gpu_thermal_ns, gpu_hw_slowdown_ns, gpu_sm_clock_mhz, "                  \
    "gpu_temperature_c, gpu_ecc_new, gpu_xid_new, gpu_last_xid"
#define GPU_PARAMS "?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36"

static const char *const stmt_sql[SS__ST_COUNT] = {
    [SS__ST_ATTEMPT] = "INSERT INTO attempts(run_id, attempt, started_at) "
                   "VALUES (?1, ?2, ?3) ON CONFLICT (run_id, attempt) "
                   "DO UPDATE SET started_at = excluded.started_at",
    /* NULL parameters leave the column as it is. */
    [SS__ST_ATTEMPT_FACTS] = "UPDATE attempts SET "
                         "ended_at = coalesce(?3, ended_at), "
                         "cause = coalesce(?4, cause), "
                         "first_step = coalesce(?5, first_step), "
                         "last_step = coalesce(?6, last_step), "
                         "resumed_from = coalesce(?7, resumed_from) "
                         "WHERE run_id = ?1 AND attempt = ?2",
    /* NULL parameters leave the column as it is. */
    [SS__ST_RANK] = "INSERT INTO ranks(run_id, attempt, rank, host, pid, state, "
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
    [SS__ST_NODE] = "INSERT INTO nodes(run_id, attempt, node_rank, host, addr, "
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
    [SS__ST_PROFILE] = "INSERT INTO profiles(run_id, attempt, request_id, rank, "
                   "requested_at, duration_ms, status, path, host, message, "
                   "marker_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                   "?10, ?11) "
                   "ON CONFLICT (run_id, attempt, request_id, rank) DO "
                   "UPDATE SET status = excluded.status, "
                   "path = coalesce(excluded.path, path), "
                   "host = coalesce(excluded.host, host), "
                   "message = coalesce(excluded.message, message), "
                   "marker_ns = coalesce(excluded.marker_ns, marker_ns)",
    [SS__ST_STEP] = "INSERT OR REPLACE INTO steps(run_id, attempt, step, "
                "finalized_at, world_size, n_present, n_missing, "
                "missing_ranks, step_n, step_min, step_median, step_p90, "
                "step_max, step_worst_rank, rss_median, rss_max, "
                "rss_worst_rank, device_median, device_max, "
                "device_worst_rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    [SS__ST_PHASE] = "INSERT OR REPLACE INTO step_phases(run_id, attempt, step, "
                 "phase, n, min, median, p90, max, worst_rank, self_n, "
                 "self_min, self_median, self_p90, self_max, "
                 "self_worst_rank) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                 "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    [SS__ST_SYNC] = "INSERT OR REPLACE INTO step_syncs(run_id, attempt, step, "
                "sync, n, skew_ns, late_ns, worst_rank) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [SS__ST_RANK_STEP] = "INSERT OR REPLACE INTO rank_steps(run_id, attempt, "
                     "step, rank, step_ns, rss_bytes, device_bytes, phases, "
                     "begin_ns, phase_starts, phase_counts, syncs, metrics, "
                     "phase_self, " HOST_COLUMNS ", " GPU_COLUMNS ") "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                     "?12, ?13, ?14, " HOST_PARAMS ", " GPU_PARAMS ")",
    /* max(coalesce(a, b), coalesce(b, a)): the larger, ignoring NULLs. */
    [SS__ST_TOTALS] = "INSERT INTO rank_totals(run_id, attempt, rank, steps, "
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
    [SS__ST_FINDING] = "INSERT INTO findings(run_id, attempt, finding_id, kind, "
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
    [SS__ST_EVENT] = "INSERT INTO events(run_id, attempt, at, kind, rank, "
                 "message) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [SS__ST_STACKS] = "INSERT INTO stack_snapshots(run_id, attempt, taken_at, "
                  "trigger, finding_id, json) VALUES (?1, ?2, ?3, ?4, ?5, "
                  "?6)",
    [SS__ST_END_RUN] = "UPDATE runs SET ended_at = ?2, exit_code = ?3, "
                   "status = ?4, dropped_events = ?5, dropped_records = ?6 "
                   "WHERE id = ?1",
    [SS__ST_DROPPED] = "UPDATE runs SET dropped_rank_steps = dropped_rank_steps "
                   "+ ?2 WHERE id = ?1",
    /* Tier A rows that fell out of the recent window, except tier B
     * (every sample_every-th step) and the steps findings name. */
    [SS__ST_PRUNE] = "DELETE FROM rank_steps WHERE run_id = ?1 AND attempt = ?2 "
                 "AND step >= ?3 AND step < ?4 "
                 "AND (?5 = 0 OR step % ?5 != 0) "
                 "AND step NOT IN (SELECT first_step FROM findings "
                 "WHERE run_id = ?1 AND attempt = ?2 "
                 "UNION SELECT last_step FROM findings "
                 "WHERE run_id = ?1 AND attempt = ?2)",
    [SS__ST_VALUES] = "INSERT OR REPLACE INTO rank_values(run_id, attempt, name, "
                  "step, rank, n, truncated, data) VALUES (?1, ?2, ?3, ?4, "
                  "?5, ?6, ?7, ?8)",
    [SS__ST_LABELS] = "INSERT OR REPLACE INTO value_labels(run_id, attempt, name, "
                  "rank, labels) VALUES (?1, ?2, ?3, ?4, ?5)",
    /* rank_values' own recent window, with the same exceptions as
     * ST_PRUNE */
    [SS__ST_PRUNE_VALUES] = "DELETE FROM rank_values WHERE run_id = ?1 AND "
                        "attempt = ?2 AND step >= ?3 AND step < ?4 "
                        "AND (?5 = 0 OR step % ?5 != 0) "
                        "AND step NOT IN (SELECT first_step FROM findings "
                        "WHERE run_id = ?1 AND attempt = ?2 "
                        "UNION SELECT last_step FROM findings "
                        "WHERE run_id = ?1 AND attempt = ?2)",
    [SS__ST_DROPPED_VECTORS] = "UPDATE runs SET dropped_vectors = "
                           "dropped_vectors + ?2 WHERE id = ?1",
    [SS__ST_BEGIN] = "BEGIN IMMEDIATE",
    [SS__ST_COMMIT] = "COMMIT",
    [SS__ST_ROLLBACK] = "ROLLBACK",
};

int ss__store_sql_prepare(sqlite3 *db, const char *path,
                          sqlite3_stmt *st[SS__ST_COUNT], char *err,
                          size_t errlen)
{
    for (int i = 0; i < SS__ST_COUNT; i++) {
        int rc = sqlite3_prepare_v3(db, stmt_sql[i], -1,
                                    SQLITE_PREPARE_PERSISTENT, &st[i], NULL);
        if (rc != SQLITE_OK) {
            snprintf(err, errlen, "%s: cannot prepare a statement: %s", path,
                     sqlite3_errmsg(db));
            return -1;
        }
    }
    return 0;
}

void ss__store_sql_finalize(sqlite3_stmt *st[SS__ST_COUNT])
{
    for (int i = 0; i < SS__ST_COUNT; i++) {
        sqlite3_finalize(st[i]);
        st[i] = NULL;
    }
}

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

int ss__store_sql_step(sqlite3 *db, sqlite3_stmt *st, const char *path,
                       const char *what, int quiet, char *err, size_t errlen)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        return 0;
    if (!quiet)
        fprintf(stderr, "stepscope: store %s: %s: %s\n", path, what,
                sqlite3_errmsg(db));
    if (!err[0])
        snprintf(err, errlen, "%s: %s", loss_cause(sqlite3_errcode(db)),
                 sqlite3_errmsg(db));
    return -1;
}
