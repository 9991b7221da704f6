/*
 * store_schema.c - the store's schema, in one place, as numbered migrations.
 *
 * migrations[i] takes a store from version i to version i + 1; the schema
 * version is PRAGMA user_version and the `meta` table carries the marker
 * that tells a stepscope store from any other SQLite file.  To change the
 * schema, append a migration (never edit a released one), bump
 * SS_SCHEMA_VERSION in store_schema.h and describe the change in
 * docs/store.md.  Conventions in every table: durations and timestamps are
 * integer nanoseconds (timestamps on the wall clock), NULL is a value that
 * was not measured (never 0), ranks are integers from 0.
 */
#include "store_schema.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const migrations[SS_SCHEMA_VERSION] = {
    /* 1: the initial schema. */
    "CREATE TABLE meta("
    "  key   TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL"
    ") WITHOUT ROWID;"
    "INSERT INTO meta(key, value) VALUES ('application', '" SS_STORE_MARKER "');"

    /* One row per `stepscope run`.  dropped_events / dropped_records are the
     * ranks' own totals, known when the run ends; dropped_rank_steps counts
     * rank_steps rows the store dropped because its queue was full. */
    "CREATE TABLE runs("
    "  id                 INTEGER PRIMARY KEY,"
    "  uuid               TEXT NOT NULL,"
    "  name               TEXT NOT NULL,"
    "  command            TEXT NOT NULL,"
    "  host               TEXT NOT NULL,"
    "  world_size         INTEGER NOT NULL,"
    "  started_at         INTEGER NOT NULL,"
    "  ended_at           INTEGER,"
    "  status             TEXT NOT NULL DEFAULT 'running',"
    "  exit_code          INTEGER,"
    "  dropped_events     INTEGER,"
    "  dropped_records    INTEGER,"
    "  dropped_rank_steps INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX runs_uuid ON runs(uuid);"
    "CREATE INDEX runs_name ON runs(name);"

    "CREATE TABLE attempts("
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  started_at INTEGER NOT NULL,"
    "  PRIMARY KEY (run_id, attempt)"
    ") WITHOUT ROWID;"

    /* What the launcher knows about each rank; NULL where not known. */
    "CREATE TABLE ranks("
    "  run_id          INTEGER NOT NULL,"
    "  attempt         INTEGER NOT NULL,"
    "  rank            INTEGER NOT NULL,"
    "  host            TEXT,"
    "  pid             INTEGER,"
    "  state           TEXT,"
    "  exit_code       INTEGER,"
    "  term_signal     INTEGER,"
    "  last_step       INTEGER,"
    "  dropped_events  INTEGER,"
    "  dropped_records INTEGER,"
    "  log_path        TEXT,"
    "  PRIMARY KEY (run_id, attempt, rank)"
    ") WITHOUT ROWID;"

    /* One row per finalized step: order statistics over the ranks present.
     * missing_ranks is a JSON array of ints, NULL when none is missing. */
    "CREATE TABLE steps("
    "  run_id            INTEGER NOT NULL,"
    "  attempt           INTEGER NOT NULL,"
    "  step              INTEGER NOT NULL,"
    "  finalized_at      INTEGER NOT NULL,"
    "  world_size        INTEGER NOT NULL,"
    "  n_present         INTEGER NOT NULL,"
    "  n_missing         INTEGER NOT NULL,"
    "  missing_ranks     TEXT,"
    "  step_n            INTEGER NOT NULL,"
    "  step_min          INTEGER,"
    "  step_median       INTEGER,"
    "  step_p90          INTEGER,"
    "  step_max          INTEGER,"
    "  step_worst_rank   INTEGER,"
    "  rss_median        INTEGER,"
    "  rss_max           INTEGER,"
    "  rss_worst_rank    INTEGER,"
    "  device_median     INTEGER,"
    "  device_max        INTEGER,"
    "  device_worst_rank INTEGER,"
    "  PRIMARY KEY (run_id, attempt, step)"
    ") WITHOUT ROWID;"

    "CREATE TABLE step_phases("
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  step       INTEGER NOT NULL,"
    "  phase      TEXT NOT NULL,"
    "  n          INTEGER NOT NULL,"
    "  min        INTEGER,"
    "  median     INTEGER,"
    "  p90        INTEGER,"
    "  max        INTEGER,"
    "  worst_rank INTEGER,"
    "  PRIMARY KEY (run_id, attempt, step, phase)"
    ") WITHOUT ROWID;"

    /* Arrival at a sync point: skew = last - first, late = last - median. */
    "CREATE TABLE step_syncs("
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  step       INTEGER NOT NULL,"
    "  sync       TEXT NOT NULL,"
    "  n          INTEGER NOT NULL,"
    "  skew_ns    INTEGER,"
    "  late_ns    INTEGER,"
    "  worst_rank INTEGER,"
    "  PRIMARY KEY (run_id, attempt, step, sync)"
    ") WITHOUT ROWID;"

    /* Per rank per step, under retention (docs/store.md).  phases is a JSON
     * object {"phase name": ns, ...} of the phases the rank reported in the
     * step, NULL when it reported none.  The key order (step before rank)
     * makes inserts appends and retention deletes contiguous ranges. */
    "CREATE TABLE rank_steps("
    "  run_id       INTEGER NOT NULL,"
    "  attempt      INTEGER NOT NULL,"
    "  step         INTEGER NOT NULL,"
    "  rank         INTEGER NOT NULL,"
    "  step_ns      INTEGER,"
    "  rss_bytes    INTEGER,"
    "  device_bytes INTEGER,"
    "  phases       TEXT,"
    "  PRIMARY KEY (run_id, attempt, step, rank)"
    ") WITHOUT ROWID;"

    /* Per-rank totals over every step written, retained or not. */
    "CREATE TABLE rank_totals("
    "  run_id           INTEGER NOT NULL,"
    "  attempt          INTEGER NOT NULL,"
    "  rank             INTEGER NOT NULL,"
    "  steps            INTEGER NOT NULL,"
    "  step_ns_n        INTEGER NOT NULL,"
    "  step_ns_sum      INTEGER NOT NULL,"
    "  step_ns_max      INTEGER,"
    "  max_rss_bytes    INTEGER,"
    "  max_device_bytes INTEGER,"
    "  last_step        INTEGER,"
    "  PRIMARY KEY (run_id, attempt, rank)"
    ") WITHOUT ROWID;"

    /* severity is 'warning' or 'critical'; ranks a JSON array of ints;
     * evidence the detector's JSON object; phase NULL when none. */
    "CREATE TABLE findings("
    "  run_id        INTEGER NOT NULL,"
    "  attempt       INTEGER NOT NULL,"
    "  finding_id    INTEGER NOT NULL,"
    "  kind          TEXT NOT NULL,"
    "  severity      TEXT NOT NULL,"
    "  ranks         TEXT NOT NULL,"
    "  phase         TEXT,"
    "  first_step    INTEGER NOT NULL,"
    "  last_step     INTEGER NOT NULL,"
    "  evidence      TEXT NOT NULL,"
    "  message       TEXT NOT NULL,"
    "  first_seen_at INTEGER NOT NULL,"
    "  updated_at    INTEGER NOT NULL,"
    "  PRIMARY KEY (run_id, attempt, finding_id)"
    ") WITHOUT ROWID;"

    "CREATE TABLE events("
    "  id      INTEGER PRIMARY KEY,"
    "  run_id  INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  at      INTEGER NOT NULL,"
    "  kind    TEXT NOT NULL,"
    "  rank    INTEGER,"
    "  message TEXT"
    ");"
    "CREATE INDEX events_run ON events(run_id, attempt, at);",

    /* 2: per rank-step timeline detail, for traces.  begin_ns is when the
     * rank began the step (CLOCK_MONOTONIC of its host, so comparable
     * across ranks of one host); end_ns is computed, never stored.  The
     * JSON objects are keyed by name, values in ns after begin_ns:
     * phase_starts the earliest begin of each phase (negative for a span
     * measured from before the step), syncs the arrival at each sync
     * point; phase_counts lists only the phases that ran more than once
     * (NULL when every phase ran once).  Rows written before version 2
     * have them NULL. */
    "ALTER TABLE rank_steps ADD COLUMN begin_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN end_ns INTEGER "
    "  GENERATED ALWAYS AS (begin_ns + step_ns) VIRTUAL;"
    "ALTER TABLE rank_steps ADD COLUMN phase_starts TEXT;"
    "ALTER TABLE rank_steps ADD COLUMN phase_counts TEXT;"
    "ALTER TABLE rank_steps ADD COLUMN syncs TEXT;",

    /* 3: the metrics a rank reported in a step (ss_metric), a JSON object
     * {"metric name": value, ...}, NULL when it reported none.  Rows written
     * before version 3 have it NULL. */
    "ALTER TABLE rank_steps ADD COLUMN metrics TEXT;",

    /* 4: names beyond the run's name table (SS_MAX_RUN_NAMES), per rank:
     * names_over_limit the names it declared that got no place there,
     * values_over_limit the phase, sync and metric values it recorded
     * under them, which were dropped (its steps and other values were
     * kept).  NULL in rows written before version 4. */
    "ALTER TABLE ranks ADD COLUMN names_over_limit INTEGER;"
    "ALTER TABLE ranks ADD COLUMN values_over_limit INTEGER;",

    /* 5: the run's fingerprint, what it ran on (docs/guard.md): a JSON
     * object written at launch, NULL for runs recorded before version 5. */
    "ALTER TABLE runs ADD COLUMN fingerprint TEXT;",
    /* 6: self time (a phase less the phases nested in it).  step_phases
     * gains its statistics over the ranks that reported it (self_n 0 when
     * none did: recorders without self time); rank_steps.phase_self is a
     * JSON object {"phase name": self ns} of the phases whose self time
     * differs from their time in `phases` (the others' equals it), "{}"
     * when none does, NULL when the rank reported no self time.  NULL in
     * rows written before this version. */
    "ALTER TABLE step_phases ADD COLUMN self_n INTEGER;"
    "ALTER TABLE step_phases ADD COLUMN self_min INTEGER;"
    "ALTER TABLE step_phases ADD COLUMN self_median INTEGER;"
    "ALTER TABLE step_phases ADD COLUMN self_p90 INTEGER;"
    "ALTER TABLE step_phases ADD COLUMN self_max INTEGER;"
    "ALTER TABLE step_phases ADD COLUMN self_worst_rank INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN phase_self TEXT;",

    /* 7: what the host saw of the rank's process tree during the step
     * (ss_host_step, read by the controller from /proc and the rank's
     * cgroup): CPU time, run-queue delay, stopped time, throttled time (ns),
     * CFS periods throttled, voluntary and involuntary context switches,
     * major page faults, and pressure stall time (ns; the cgroup's, or the
     * machine's on cgroup v1).  NULL where unknown, and in rows written
     * before this version or by a run without host evidence. */
    "ALTER TABLE rank_steps ADD COLUMN host_cpu_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_runq_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_stopped_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_throttled_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_nr_throttled INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_vol_switches INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_invol_switches INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_major_faults INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_psi_cpu_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_psi_memory_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN host_psi_io_ns INTEGER;",

    /* 8: what the rank's GPU did during the step (ss_gpu_evidence, read
     * by the controller through NVML): its NVML index, the step's time
     * covered by samples, held down by any slowing reason, by the power
     * cap, by a thermal slowdown, by a hardware slowdown or power brake
     * (ns), the mean SM clock (MHz), the highest temperature (C), new
     * uncorrected ECC errors, new Xid errors and the latest Xid code.  All
     * NULL where the rank had no GPU evidence, and in older rows. */
    "ALTER TABLE rank_steps ADD COLUMN gpu_index INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_covered_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_slowed_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_power_cap_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_thermal_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_hw_slowdown_ns INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_sm_clock_mhz INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_temperature_c INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_ecc_new INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_xid_new INTEGER;"
    "ALTER TABLE rank_steps ADD COLUMN gpu_last_xid INTEGER;",

    /* 9: the nodes of a multi-node run (docs/store.md, `nodes`), one row per
     * agent and attempt: its node rank, host, address ("" on node 0, the
     * controller's own), the global ranks it launches (first_rank ..
     * first_rank + nranks - 1), its state ('joining', 'running', 'done',
     * 'lost', 'never_joined'), when it joined and ended (wall ns; NULL
     * when it never did), its clock's offset to the controller's and the
     * bound on that estimate (ns; 0 on node 0, NULL when unknown), and,
     * for a lost node, why and the step it was lost at (NULL when
     * unknown).  Runs recorded before this version have no rows. */
    "CREATE TABLE nodes ("
    "  run_id          INTEGER NOT NULL,"
    "  attempt         INTEGER NOT NULL,"
    "  node_rank       INTEGER NOT NULL,"
    "  host            TEXT,"
    "  addr            TEXT,"
    "  first_rank      INTEGER NOT NULL,"
    "  nranks          INTEGER NOT NULL,"
    "  state           TEXT NOT NULL,"
    "  joined_at       INTEGER,"
    "  ended_at        INTEGER,"
    "  clock_offset_ns INTEGER,"
    "  clock_bound_ns  INTEGER,"
    "  lost_reason     TEXT,"
    "  lost_at_step    INTEGER,"
    "  PRIMARY KEY (run_id, attempt, node_rank)"
    ");",

    /* 10: every rank's stacks as captured while the job ran
     * (docs/debug.md): the stacks document (JSON: each rank's threads and
     * frames, and their merge) taken on request or on a hang, with the
     * hang finding it belongs to (findings.id of the run's attempt), NULL
     * for a request. */
    "CREATE TABLE stack_snapshots("
    "  id         INTEGER PRIMARY KEY,"
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  taken_at   INTEGER NOT NULL,"
    "  trigger    TEXT NOT NULL CHECK (trigger IN ('request', 'hang')),"
    "  finding_id INTEGER,"
    "  json       TEXT NOT NULL"
    ");"
    "CREATE INDEX stack_snapshots_run ON stack_snapshots(run_id, attempt,"
    " taken_at);",

    /* 11: what each attempt came to (docs/fault-tolerance.md): when it
     * ended (wall ns), why (cause: 'completed', 'interrupted',
     * 'rank_crash', 'hang', 'node_lost', 'health_check', or 'injected:...'
     * for a fault stepscope injected), its first and last finalized step,
     * and the step it resumed from (a checkpoint saved at that step was
     * loaded; its steps are numbered from resumed_from + 1).  NULL where
     * unknown, and in rows written before this version. */
    "ALTER TABLE attempts ADD COLUMN ended_at INTEGER;"
    "ALTER TABLE attempts ADD COLUMN cause TEXT;"
    "ALTER TABLE attempts ADD COLUMN first_step INTEGER;"
    "ALTER TABLE attempts ADD COLUMN last_step INTEGER;"
    "ALTER TABLE attempts ADD COLUMN resumed_from INTEGER;",

    /* 12: on-demand profiles (docs/debug.md#profiling, docs/store.md),
     * one row per request and rank: when it was asked for (wall ns), for
     * how long (ms), its status ('requested', 'done', 'failed',
     * 'unsupported', 'not_connected', 'timeout'), the trace file's path
     * and the host it lies on (NULL until done), why it failed (NULL
     * otherwise), and the controller-clock CLOCK_MONOTONIC ns of the
     * trace's "stepscope::clock" event, which aligns it with the steps
     * (NULL until done).  Runs recorded before this version have none. */
    "CREATE TABLE profiles ("
    "  run_id       INTEGER NOT NULL,"
    "  attempt      INTEGER NOT NULL,"
    "  request_id   INTEGER NOT NULL,"
    "  rank         INTEGER NOT NULL,"
    "  requested_at INTEGER NOT NULL,"
    "  duration_ms  INTEGER NOT NULL,"
    "  status       TEXT NOT NULL,"
    "  path         TEXT,"
    "  host         TEXT,"
    "  message      TEXT,"
    "  marker_ns    INTEGER,"
    "  PRIMARY KEY (run_id, attempt, request_id, rank)"
    ");",

    /* 13: vectors (ss_values, docs/store.md#vectors): one row per run,
     * attempt, name, step and rank, its N elements in DATA as N
     * little-endian IEEE-754 doubles (NaN and infinities as sent),
     * TRUNCATED the elements the recorder's cap cut; kept under a
     * retention of their own.  value_labels: a rank's labels of a
     * vector's indices, a JSON array of strings, the latest set.
     * runs.dropped_vectors: vectors the store refused at a full queue.
     * Runs recorded before this version have no vectors. */
    "CREATE TABLE rank_values ("
    "  run_id    INTEGER NOT NULL,"
    "  attempt   INTEGER NOT NULL,"
    "  name      TEXT NOT NULL,"
    "  step      INTEGER NOT NULL,"
    "  rank      INTEGER NOT NULL,"
    "  n         INTEGER NOT NULL,"
    "  truncated INTEGER NOT NULL,"
    "  data      BLOB NOT NULL"
    ");"
    "CREATE UNIQUE INDEX rank_values_key ON rank_values("
    "  run_id, attempt, name, step, rank);"
    "CREATE TABLE value_labels ("
    "  run_id  INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  name    TEXT NOT NULL,"
    "  rank    INTEGER NOT NULL,"
    "  labels  TEXT NOT NULL,"
    "  PRIMARY KEY (run_id, attempt, name, rank)"
    ") WITHOUT ROWID;"
    "ALTER TABLE runs ADD COLUMN dropped_vectors INTEGER NOT NULL "
    "DEFAULT 0;",

    /* 14: stacks are also taken on a non-finite value (trigger
     * 'nonfinite', with its finding; docs/numerics.md).  SQLite cannot
     * change a CHECK constraint in place: the table is rebuilt with its
     * rows. */
    "CREATE TABLE stack_snapshots_14("
    "  id         INTEGER PRIMARY KEY,"
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  taken_at   INTEGER NOT NULL,"
    "  trigger    TEXT NOT NULL"
    "             CHECK (trigger IN ('request', 'hang', 'nonfinite')),"
    "  finding_id INTEGER,"
    "  json       TEXT NOT NULL"
    ");"
    "INSERT INTO stack_snapshots_14 SELECT id, run_id, attempt, taken_at,"
    " trigger, finding_id, json FROM stack_snapshots;"
    "DROP TABLE stack_snapshots;"
    "ALTER TABLE stack_snapshots_14 RENAME TO stack_snapshots;"
    "CREATE INDEX stack_snapshots_run ON stack_snapshots(run_id, attempt,"
    " taken_at);",

    /* 15: stacks are also taken on a replica divergence (trigger
     * 'divergence', with its replica_divergence finding;
     * docs/consistency.md).  Rebuilt as for 14. */
    "CREATE TABLE stack_snapshots_15("
    "  id         INTEGER PRIMARY KEY,"
    "  run_id     INTEGER NOT NULL,"
    "  attempt    INTEGER NOT NULL,"
    "  taken_at   INTEGER NOT NULL,"
    "  trigger    TEXT NOT NULL CHECK (trigger IN"
    "             ('request', 'hang', 'nonfinite', 'divergence')),"
    "  finding_id INTEGER,"
    "  json       TEXT NOT NULL"
    ");"
    "INSERT INTO stack_snapshots_15 SELECT id, run_id, attempt, taken_at,"
    " trigger, finding_id, json FROM stack_snapshots;"
    "DROP TABLE stack_snapshots;"
    "ALTER TABLE stack_snapshots_15 RENAME TO stack_snapshots;"
    "CREATE INDEX stack_snapshots_run ON stack_snapshots(run_id, attempt,"
    " taken_at);",
};

/* Puts "PATH: WHAT (sqlite's words)" into ERR, choosing WHAT from RC. */
static void db_error(char *err, size_t errlen, const char *path,
                     sqlite3 *db, int rc)
{
    const char *what;
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
        what = "is not a stepscope store (not a SQLite database)";
        break;
    case SQLITE_CORRUPT:
        what = "is a corrupt database";
        break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        what = "is locked by another process";
        break;
    default:
        what = "cannot be read";
        break;
    }
    if ((rc & 0xff) == SQLITE_NOTADB)
        snprintf(err, errlen, "%s %s", path, what);
    else
        snprintf(err, errlen, "%s %s (%s)", path, what,
                 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* Runs the one-integer query SQL into *OUT.  Returns the SQLite code. */
static int query_int(sqlite3 *db, const char *sql, long long *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

int ss_schema_check(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    long long version = 0, tables = 0, has_meta = 0;
    int rc = query_int(db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = query_int(db, "SELECT count(*) FROM sqlite_master", &tables);
    if (rc == SQLITE_OK)
        rc = query_int(db,
                       "SELECT count(*) FROM sqlite_master "
                       "WHERE type = 'table' AND name = 'meta'",
                       &has_meta);
    if (rc != SQLITE_OK) {
        db_error(err, errlen, path, db, rc);
        return -1;
    }
    if (tables == 0 && version == 0)
        return 0; /* a new, empty database */
    if (!has_meta) {
        snprintf(err, errlen,
                 "%s is not a stepscope store (a SQLite database of "
                 "another application)", path);
        return -1;
    }
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db,
                            "SELECT value FROM meta WHERE key = 'application'",
                            -1, &st, NULL);
    int ours = 0;
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *v = sqlite3_column_text(st, 0);
            ours = v && strcmp((const char *)v, SS_STORE_MARKER) == 0;
            rc = SQLITE_DONE;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        db_error(err, errlen, path, db, rc);
        return -1;
    }
    if (!ours) {
        snprintf(err, errlen,
                 "%s is not a stepscope store (its meta table lacks the "
                 "stepscope marker)", path);
        return -1;
    }
    if (version > SS_SCHEMA_VERSION) {
        snprintf(err, errlen,
                 "%s was written by a newer stepscope (store schema version "
                 "%lld; this stepscope reads up to version %d): upgrade "
                 "stepscope or use another --db", path, version,
                 SS_SCHEMA_VERSION);
        return -1;
    }
    if (version < 1) {
        snprintf(err, errlen,
                 "%s is a damaged stepscope store (schema version %lld)",
                 path, version);
        return -1;
    }
    return (int)version;
}

int ss_schema_migrate(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "%s: cannot start the schema update: %s", path,
                 msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    /* Checked again inside the transaction: another process may have
     * migrated the file since the caller looked. */
    int version = ss_schema_check(db, path, err, errlen);
    if (version < 0) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    for (int v = version; v < SS_SCHEMA_VERSION; v++) {
        rc = sqlite3_exec(db, migrations[v], NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
            snprintf(err, errlen, "%s: schema migration %d failed: %s", path,
                     v + 1, msg ? msg : sqlite3_errstr(rc));
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", SS_SCHEMA_VERSION);
    rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "%s: schema update failed: %s", path,
                 msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

/* Opens PATH read-only through a URI (mode=ro; with IMMUTABLE also
 * immutable=1, which reads the file without locks or WAL index).  Returns
 * the SQLite code; *DB is set either way (sqlite3_close it). */
static int open_uri(const char *path, int immutable, sqlite3 **db)
{
    /* A path becomes a URI path: bytes outside the unreserved set and '/'
     * are percent-encoded, and a leading "//" (a URI authority) is
     * collapsed, which POSIX reads as the same file. */
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *uri = malloc(3 * n + 32);
    *db = NULL;
    if (!uri)
        return SQLITE_NOMEM;
    char *o = uri + sprintf(uri, "file:");
    while (path[0] == '/' && path[1] == '/')
        path++;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    sprintf(o, "?mode=ro%s", immutable ? "&immutable=1" : "");
    int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                             NULL);
    free(uri);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(*db, 5000);
        /* The first read is where a WAL store needs its -shm index. */
        rc = sqlite3_exec(*db, "SELECT count(*) FROM sqlite_master", NULL,
                          NULL, NULL);
    }
    return rc;
}

int ss_schema_open_readonly(const char *path, sqlite3 **db, char *err,
                            size_t errlen)
{
    *db = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            snprintf(err, errlen,
                     "no store at %s (nothing recorded yet: `stepscope run` "
                     "creates it; --db chooses another file)", path);
        else
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s is not a stepscope store (not a file)",
                 path);
        return -1;
    }
    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    sqlite3 *h = NULL;
    int rc = open_uri(path, 0, &h);
    int prim = rc & 0xff;
    if (prim == SQLITE_CANTOPEN || prim == SQLITE_READONLY) {
        /* A WAL store whose -shm index this user cannot create: the
         * directory is not writable (another user's store, a read-only
         * mount).  Without a -wal file every committed page is in the
         * store itself and no writer has it open, so it reads as an
         * immutable file.  With one, the log holds pages the store lacks
         * and only a connection that can index it may read them. */
        char wal[4200];
        struct stat wb;
        snprintf(wal, sizeof wal, "%s-wal", path);
        if (stat(wal, &wb) == 0) {
            snprintf(err, errlen,
                     "%s cannot be read: its write-ahead log %s is in use or "
                     "was not folded in, and this user cannot open it "
                     "read-only here (a writable directory is needed; the "
                     "store's owner can fold it in with `stepscope upgrade "
                     "--db %s`)", path, wal, path);
            sqlite3_close(h);
            return -1;
        }
        sqlite3_close(h);
        rc = open_uri(path, 1, &h);
    }
    if (rc != SQLITE_OK) {
        db_error(err, errlen, path, h, rc);
        sqlite3_close(h);
        return -1;
    }
    int version = ss_schema_check(h, path, err, errlen);
    if (version == 0) {
        snprintf(err, errlen, "%s is not a stepscope store (an empty file)",
                 path);
        version = -1;
    }
    if (version < 0) {
        sqlite3_close(h);
        return -1;
    }
    *db = h;
    return version;
}
