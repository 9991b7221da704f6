/*
 * store_test.c - unit tests for the SQLite store (store.h over the
 * store*.c files, store_schema.c).
 *
 * Each test works in its own temporary directory and reads what the store
 * wrote back with plain SQL: schema creation and reopening, refusal of
 * foreign, garbage, corrupt and newer files, every table's contents,
 * retention tiers, the queue-full policy (only rank-step rows drop, and are
 * counted), durability when the writing process is killed with SIGKILL,
 * and the outcome (stored vs lost) when the file cannot grow.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reader.h"
#include "store.h"
#include "store_schema.h"
#include "testing.h"
#include "testing_tmp.h"

/* ---- helpers ---- */

/* Runs a one-value query on the file PATH (its own connection). */
static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    long long v = -999;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW)
            v = sqlite3_column_type(q, 0) == SQLITE_NULL
                    ? -1000
                    : sqlite3_column_int64(q, 0);
        else
            fprintf(stderr, "  sql_int(%s): %s\n", sql, sqlite3_errmsg(db));
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return v;
}

static const char *sql_text(const char *path, const char *sql, char *out,
                            size_t outlen)
{
    sqlite3 *db = NULL;
    snprintf(out, outlen, "<error>");
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(q, 0);
            snprintf(out, outlen, "%s", t ? (const char *)t : "<null>");
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return out;
}

static int sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static const char *const names_[] = {"forward", "backward", "allreduce",
                                     "loss"};

/* A step of WORLD ranks: rank r takes 100 + r ms (forward 40 + r from 1 ms
 * into the step, backward 60 ms in two runs from 45 ms), begins at step *
 * 200 ms + r us and reaches the all-reduce 90 ms + r us into the step,
 * reports the metric loss = r + 0.25 (rank 2: none), RSS 1 GiB + r, no
 * device memory; ranks in MISSING_MASK are missing. */
typedef struct {
    ss_rank_step ranks[8];
    int64_t phase_ns[8][3];
    int64_t sync_ns[8][3];
    int64_t start_ns[8][3];
    int64_t count[8][3];
    double metric[8][4];
    int metrics[1];
    ss_phase_stat phases[2];
    ss_sync_stat syncs[1];
    uint32_t missing[8];
    ss_step_view v;
} step_fx;

static void fx_build(step_fx *fx, uint32_t world, uint64_t step,
                     unsigned missing_mask)
{
    memset(fx, 0, sizeof *fx);
    uint32_t n_missing = 0;
    for (uint32_t r = 0; r < world; r++) {
        int present = !(missing_mask & (1u << r));
        fx->phase_ns[r][0] = (40 + (int64_t)r) * 1000000;
        fx->phase_ns[r][1] = 60 * 1000000;
        fx->phase_ns[r][2] = SS_MISSING;
        int64_t begin = (int64_t)step * 200000000 + (int64_t)r * 1000;
        fx->sync_ns[r][0] = fx->sync_ns[r][1] = SS_MISSING;
        fx->sync_ns[r][2] = begin + 90000000 + (int64_t)r * 1000;
        fx->start_ns[r][0] = 1000000;
        fx->start_ns[r][1] = 45000000;
        fx->start_ns[r][2] = SS_MISSING;
        fx->count[r][0] = 1;
        fx->count[r][1] = 2;
        fx->count[r][2] = SS_MISSING;
        fx->metric[r][0] = fx->metric[r][1] = fx->metric[r][2] = NAN;
        fx->metric[r][3] = r == 2 ? NAN : r + 0.25;
        fx->ranks[r] = (ss_rank_step){
            .present = present,
            .step_ns = (100 + (int64_t)r) * 1000000,
            .rss_bytes = ((int64_t)1 << 30) + r,
            .device_bytes = SS_MISSING,
            .phase_ns = fx->phase_ns[r],
            .sync_arrival_ns = fx->sync_ns[r],
            .metric = fx->metric[r],
            .begin_ns = begin,
            .phase_start_ns = fx->start_ns[r],
            .phase_count = fx->count[r]};
        if (!present)
            fx->missing[n_missing++] = r;
    }
    uint32_t n = world - n_missing;
    int32_t last = (int32_t)world - 1;
    while (last >= 0 && (missing_mask & (1u << last)))
        last--;
    fx->phases[0] = (ss_phase_stat){0, {40000000, 41000000, 43000000,
                                        (40 + (int64_t)last) * 1000000, last,
                                        n}};
    fx->phases[1] = (ss_phase_stat){1, {60000000, 60000000, 60000000,
                                        60000000, 0, n}};
    fx->syncs[0] = (ss_sync_stat){2, 3000, 1500, last, n};
    fx->metrics[0] = 3;
    fx->v = (ss_step_view){
        .attempt = 0, .step = step, .finalized_at = 1700000000000000000,
        .world_size = world, .n_present = n, .n_missing = n_missing,
        .missing_ranks = fx->missing,
        .step_time = {100000000, 101000000, 103000000,
                      (100 + (int64_t)last) * 1000000, last, n},
        .rss = {((int64_t)1 << 30), ((int64_t)1 << 30) + 1,
                ((int64_t)1 << 30) + 3, ((int64_t)1 << 30) + last, last, n},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 2, .phases = fx->phases, .n_syncs = 1,
        .syncs = fx->syncs, .n_metrics = 1, .metrics = fx->metrics,
        .n_names = 4, .ranks = fx->ranks};
}

static ss_store *open_store(const char *path, const ss_store_config *cfg,
                            int writer)
{
    char err[512] = "";
    ss_store *s = ss_store_open(path, cfg, writer, err, sizeof err);
    if (!s)
        fprintf(stderr, "  ss_store_open: %s\n", err);
    return s;
}

static int64_t begin_run(ss_store *s, uint32_t world)
{
    ss_run_info info = {.world_size = world, .started_at = 1700000000};
    snprintf(info.uuid, sizeof info.uuid, "0123abcd-run");
    snprintf(info.name, sizeof info.name, "train");
    snprintf(info.command, sizeof info.command, "python train.py");
    snprintf(info.host, sizeof info.host, "node1");
    int64_t id = -1;
    char err[256];
    if (ss_store_begin_run(s, &info, &id, err, sizeof err) != 0)
        fprintf(stderr, "  begin_run: %s\n", err);
    return id;
}

/* ---- tests ---- */

static void creates_migrates_and_reopens(void)
{
    char path[600];
    testing_tmp_path("a/b/new.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "PRAGMA user_version"), SS_SCHEMA_VERSION);
    char buf[64];
    CHECK_STR(sql_text(path, "SELECT value FROM meta WHERE key = "
                             "'application'", buf, sizeof buf),
              "stepscope");
    CHECK_STR(sql_text(path, "PRAGMA journal_mode", buf, sizeof buf), "wal");
    s = open_store(path, NULL, 0);
    REQUIRE(s != NULL);
    CHECK(ss_store_db(s) != NULL);
    ss_store_close(s);
    ss_store_close(NULL);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM runs"), 0);
}

static void refuses_foreign_sqlite_file(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("foreign.db", path, sizeof path);
    CHECK_EQ_INT(sql_exec(path, "CREATE TABLE photos(id INTEGER)"), 0);
    CHECK(ss_store_open(path, NULL, 0, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a stepscope store") != NULL);
    CHECK(strstr(err, path) != NULL);

    testing_tmp_path("foreign_meta.db", path, sizeof path);
    CHECK_EQ_INT(sql_exec(path, "CREATE TABLE meta(key TEXT, value TEXT);"
                                "INSERT INTO meta VALUES ('application', "
                                "'other');"), 0);
    err[0] = '\0';
    CHECK(ss_store_open(path, NULL, 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a stepscope store") != NULL);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM sqlite_master"), 1);
}

static void refuses_garbage_file(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("garbage.db", path, sizeof path);
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    for (int i = 0; i < 8192; i++)
        fputc((i * 7919 + 13) & 0xff, f);
    fclose(f);
    CHECK(ss_store_open(path, NULL, 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a stepscope store") != NULL);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 8192); /* untouched */
    sqlite3 *db = (sqlite3 *)1;
    err[0] = '\0';
    CHECK_EQ_INT(ss_schema_open_readonly(path, &db, err, sizeof err), -1);
    CHECK(db == NULL);
    CHECK(strstr(err, "not a stepscope store") != NULL);
}

/* A version-1 store (rank_steps without the timeline, metrics and host
 * columns, ranks without the name-limit counts) is migrated on open; its
 * old rows keep NULL there. */
static void migrates_version_1(void)
{
    char path[600];
    testing_tmp_path("v1.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 0);
    REQUIRE(s != NULL);
    ss_store_close(s);
    static const char *const host_columns[] = {
        "host_cpu_ns", "host_runq_ns", "host_stopped_ns", "host_throttled_ns",
        "host_nr_throttled", "host_vol_switches", "host_invol_switches",
        "host_major_faults", "host_psi_cpu_ns", "host_psi_memory_ns",
        "host_psi_io_ns", "gpu_index", "gpu_covered_ns", "gpu_slowed_ns",
        "gpu_power_cap_ns", "gpu_thermal_ns", "gpu_hw_slowdown_ns",
        "gpu_sm_clock_mhz", "gpu_temperature_c", "gpu_ecc_new", "gpu_xid_new",
        "gpu_last_xid"};
    for (size_t i = 0; i < sizeof host_columns / sizeof *host_columns; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "ALTER TABLE rank_steps DROP COLUMN %s",
                 host_columns[i]);
        CHECK_EQ_INT(sql_exec(path, sql), 0);
    }
    CHECK_EQ_INT(sql_exec(path,
                          "DROP TABLE value_labels;"
                          "DROP TABLE rank_values;"
                          "ALTER TABLE runs DROP COLUMN dropped_vectors;"
                          "DROP TABLE profiles;"
                          "DROP TABLE nodes;"
                          "ALTER TABLE attempts DROP COLUMN ended_at;"
                          "ALTER TABLE attempts DROP COLUMN cause;"
                          "ALTER TABLE attempts DROP COLUMN first_step;"
                          "ALTER TABLE attempts DROP COLUMN last_step;"
                          "ALTER TABLE attempts DROP COLUMN resumed_from;"
                          "DROP TABLE stack_snapshots;"
                          "ALTER TABLE runs DROP COLUMN fingerprint;"
                          "ALTER TABLE rank_steps DROP COLUMN phase_self;"
                          "ALTER TABLE step_phases DROP COLUMN self_n;"
                          "ALTER TABLE step_phases DROP COLUMN self_min;"
                          "ALTER TABLE step_phases DROP COLUMN self_median;"
                          "ALTER TABLE step_phases DROP COLUMN self_p90;"
                          "ALTER TABLE step_phases DROP COLUMN self_max;"
                          "ALTER TABLE step_phases DROP COLUMN "
                          "self_worst_rank;"
                          "INSERT INTO step_phases(run_id, attempt, step,"
                          " phase, n) VALUES (1, 0, 0, 'forward', 1);"
                          "ALTER TABLE rank_steps DROP COLUMN metrics;"
                          "ALTER TABLE rank_steps DROP COLUMN syncs;"
                          "ALTER TABLE rank_steps DROP COLUMN phase_counts;"
                          "ALTER TABLE rank_steps DROP COLUMN phase_starts;"
                          "ALTER TABLE rank_steps DROP COLUMN end_ns;"
                          "ALTER TABLE rank_steps DROP COLUMN begin_ns;"
                          "ALTER TABLE ranks DROP COLUMN values_over_limit;"
                          "ALTER TABLE ranks DROP COLUMN names_over_limit;"
                          "INSERT INTO rank_steps(run_id, attempt, step, rank,"
                          " step_ns) VALUES (1, 0, 0, 0, 5);"
                          "INSERT INTO ranks(run_id, attempt, rank)"
                          " VALUES (1, 0, 0);"
                          "INSERT INTO attempts(run_id, attempt, started_at)"
                          " VALUES (1, 0, 5);"
                          "PRAGMA user_version = 1"),
                 0);
    s = open_store(path, NULL, 0);
    REQUIRE(s != NULL);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "PRAGMA user_version"), SS_SCHEMA_VERSION);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE "
                               "begin_ns IS NULL AND end_ns IS NULL AND "
                               "phase_starts IS NULL AND syncs IS NULL AND "
                               "metrics IS NULL AND phase_self IS NULL AND "
                               "host_cpu_ns IS NULL AND host_psi_io_ns IS NULL "
                               "AND gpu_index IS NULL AND gpu_last_xid IS NULL"),
                 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM step_phases WHERE "
                               "self_n IS NULL AND self_median IS NULL"),
                 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM nodes"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_values"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM value_labels"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM attempts WHERE "
                               "ended_at IS NULL AND cause IS NULL AND "
                               "first_step IS NULL AND last_step IS NULL "
                               "AND resumed_from IS NULL"),
                 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM ranks WHERE "
                               "names_over_limit IS NULL AND "
                               "values_over_limit IS NULL"),
                 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM stack_snapshots"), 0);
}

/* Stacks snapshots are written whole and read back newest first, one
 * taken for a hang before any taken on request; a store without the table
 * (older than version 10) has none. */
static void stack_snapshots_round_trip(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("stacks.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 2);
    ss_store_put_stacks(s, run, 0, 1700000001, "request", -1, "{\"n\":1}");
    ss_store_put_stacks(s, run, 0, 1700000002, "hang", 3, "{\"n\":2}");
    ss_store_put_stacks(s, run, 0, 1700000003, "request", -1, "{\"n\":3}");
    ss_store_flush(s);
    ss_store_close(s);

    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    ss_stack_snapshot_row row;
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, 0, &row), 1);
    CHECK_STR(row.trigger, "hang");
    CHECK_STR(row.json, "{\"n\":2}");
    CHECK(row.finding_id == 3 && row.taken_at == 1700000002);
    ss_stack_snapshot_row_clear(&row);
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, 1, &row), 0);
    CHECK(row.json == NULL);
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run + 5, -1, &row),
                 SS_READ_NOT_FOUND);
    ss_reader_close(r);

    CHECK_EQ_INT(sql_exec(path, "DELETE FROM stack_snapshots WHERE "
                                "trigger = 'hang'"), 0);
    r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, -1, &row), 1);
    CHECK_STR(row.json, "{\"n\":3}");
    CHECK(row.finding_id == SS_MISSING);
    ss_stack_snapshot_row_clear(&row);
    ss_reader_close(r);

    CHECK_EQ_INT(sql_exec(path, "DROP TABLE stack_snapshots;"
                                "PRAGMA user_version = 9"), 0);
    r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, -1, &row), 0);
    ss_reader_close(r);
}

/* A non-finite value's snapshot (version 14) is written, kept through the
 * migration of a version-13 store that already held snapshots, and read
 * before those taken on request. */
static void nonfinite_snapshot_after_migration(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("nonfinite-stacks.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 2);
    ss_store_put_stacks(s, run, 0, 1700000001, "request", -1, "{\"n\":1}");
    ss_store_flush(s);
    ss_store_close(s);
    /* back to version 13: the old CHECK, the row kept */
    CHECK_EQ_INT(sql_exec(path,
        "CREATE TABLE old(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL,"
        " attempt INTEGER NOT NULL, taken_at INTEGER NOT NULL, trigger TEXT"
        " NOT NULL CHECK (trigger IN ('request', 'hang')), finding_id"
        " INTEGER, json TEXT NOT NULL);"
        "INSERT INTO old SELECT * FROM stack_snapshots;"
        "DROP TABLE stack_snapshots;"
        "ALTER TABLE old RENAME TO stack_snapshots;"
        "PRAGMA user_version = 13"), 0);
    s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    ss_store_put_stacks(s, run, 0, 1700000002, "nonfinite", 4, "{\"n\":2}");
    ss_store_put_stacks(s, run, 0, 1700000003, "request", -1, "{\"n\":3}");
    ss_store_flush(s);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "PRAGMA user_version"), SS_SCHEMA_VERSION);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM stack_snapshots"), 3);

    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    ss_stack_snapshot_row row;
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, 0, &row), 1);
    CHECK_STR(row.trigger, "nonfinite");
    CHECK(row.finding_id == 4);
    ss_stack_snapshot_row_clear(&row);
    ss_reader_close(r);
}

/* A replica divergence's snapshot (version 15) is written and kept
 * through the migration of a version-14 store that held a non-finite
 * value's snapshot, and read before those taken on request. */
static void divergence_snapshot_after_migration(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("divergence-stacks.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 3);
    ss_store_put_stacks(s, run, 0, 1700000001, "nonfinite", 2, "{\"n\":1}");
    ss_store_flush(s);
    ss_store_close(s);
    /* back to version 14: its CHECK, the row kept */
    CHECK_EQ_INT(sql_exec(path,
        "CREATE TABLE old(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL,"
        " attempt INTEGER NOT NULL, taken_at INTEGER NOT NULL, trigger TEXT"
        " NOT NULL CHECK (trigger IN ('request', 'hang', 'nonfinite')),"
        " finding_id INTEGER, json TEXT NOT NULL);"
        "INSERT INTO old SELECT * FROM stack_snapshots;"
        "DROP TABLE stack_snapshots;"
        "ALTER TABLE old RENAME TO stack_snapshots;"
        "PRAGMA user_version = 14"), 0);
    s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    ss_store_put_stacks(s, run, 1, 1700000002, "divergence", 7,
                        "{\"n\":2}");
    ss_store_put_stacks(s, run, 1, 1700000003, "request", -1, "{\"n\":3}");
    ss_store_flush(s);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "PRAGMA user_version"),
                 SS_SCHEMA_DIVERGENCE_STACKS);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM stack_snapshots"), 3);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM stack_snapshots WHERE "
                               "trigger = 'nonfinite' AND finding_id = 2"),
                 1);

    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    ss_stack_snapshot_row row;
    CHECK_EQ_INT(ss_reader_stack_snapshot(r, run, 1, &row), 1);
    CHECK_STR(row.trigger, "divergence");
    CHECK(row.finding_id == 7);
    ss_stack_snapshot_row_clear(&row);
    ss_reader_close(r);
}

static void refuses_newer_version(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("newer.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 0);
    REQUIRE(s != NULL);
    ss_store_close(s);
    CHECK_EQ_INT(sql_exec(path, "PRAGMA user_version = 99"), 0);
    CHECK(ss_store_open(path, NULL, 1, err, sizeof err) == NULL);
    CHECK(strstr(err, "newer") != NULL);
    CHECK(strstr(err, "99") != NULL);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(ss_schema_open_readonly(path, &db, err, sizeof err), -1);
    CHECK(strstr(err, "newer") != NULL);
}

static void refuses_corrupt_file(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("corrupt.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 0);
    REQUIRE(s != NULL);
    begin_run(s, 2);
    ss_store_close(s);
    /* Scribble over the schema table on page 1 (after the 100-byte file
     * header): the file is still a SQLite file, but a broken one. */
    int fd = open(path, O_WRONLY);
    REQUIRE(fd >= 0);
    char junk[3000];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    CHECK(pwrite(fd, junk, sizeof junk, 100) == (ssize_t)sizeof junk);
    close(fd);
    CHECK(ss_store_open(path, NULL, 1, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    CHECK(strstr(err, path) != NULL);
    sqlite3 *db = NULL;
    err[0] = '\0';
    CHECK_EQ_INT(ss_schema_open_readonly(path, &db, err, sizeof err), -1);
    CHECK(err[0] != '\0');
}

static void readonly_open_refuses_missing_and_empty(void)
{
    char path[600], err[512] = "";
    sqlite3 *db = NULL;
    testing_tmp_path("does-not-exist.db", path, sizeof path);
    CHECK_EQ_INT(ss_schema_open_readonly(path, &db, err, sizeof err), -1);
    CHECK(strstr(err, "no store at") != NULL);
    CHECK(access(path, F_OK) != 0); /* not created */
    testing_tmp_path("empty.db", path, sizeof path);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fclose(f);
    CHECK_EQ_INT(ss_schema_open_readonly(path, &db, err, sizeof err), -1);
    CHECK(strstr(err, "empty") != NULL);
}

/* Names that need escaping (a quote, a backslash, UTF-8) are keys of valid
 * JSON in the rank-step rows, and read back as the names the step tables
 * hold. */
static void escapes_names_in_row_json(void)
{
    static const char *const names[] = {"fwd \"quoted\"", "back\\slash",
                                        "all\xc3\xa9reduce", "lo\xc3\x9f"};
    char path[600], buf[600];
    testing_tmp_path("names.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 2);
    step_fx fx;
    fx_build(&fx, 2, 0, 0);
    ss_store_put_step(s, run, &fx.v, names);
    ss_store_close(s);

    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE "
                               "json_valid(phases) AND json_valid(syncs) "
                               "AND json_valid(metrics) AND "
                               "json_valid(phase_starts)"), 2);
    CHECK_STR(sql_text(path, "SELECT phases FROM rank_steps WHERE rank = 1",
                       buf, sizeof buf),
              "{\"fwd \\\"quoted\\\"\":41000000,\"back\\\\slash\":60000000}");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps r, "
                               "json_each(r.phases) j JOIN step_phases p ON "
                               "p.phase = j.key AND p.step = r.step"), 4);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps r, "
                               "json_each(r.syncs) j JOIN step_syncs y ON "
                               "y.sync = j.key AND y.step = r.step"), 2);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps, "
                               "json_each(metrics) WHERE key = "
                               "'lo\xc3\x9f'"), 2);
}

/* The fingerprint given at launch is kept as it was given; a run begun
 * without one has NULL there. */
static void keeps_the_run_fingerprint(void)
{
    char path[600], buf[256];
    testing_tmp_path("fingerprint.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    ss_run_info info = {.world_size = 2, .started_at = 1700000000,
                        .fingerprint = "{\"world_size\":2,\"cpu\":\"x\"}"};
    snprintf(info.name, sizeof info.name, "train");
    int64_t with = -1;
    char err[256];
    REQUIRE(ss_store_begin_run(s, &info, &with, err, sizeof err) == 0);
    int64_t without = begin_run(s, 2);
    ss_store_close(s);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT fingerprint FROM runs WHERE id = %lld",
             (long long)with);
    CHECK_STR(sql_text(path, sql, buf, sizeof buf),
              "{\"world_size\":2,\"cpu\":\"x\"}");
    snprintf(sql, sizeof sql, "SELECT fingerprint IS NULL FROM runs WHERE "
             "id = %lld", (long long)without);
    CHECK_EQ_INT(sql_int(path, sql), 1);
}

/* Nodes are upserted by (run, attempt, node_rank): a later put changes
 * the state and keeps what it leaves unknown (joined_at, the clock), and
 * a node with an unknown state is refused and counted, not written. */
static void writes_and_upserts_nodes(void)
{
    char path[600], buf[256];
    testing_tmp_path("nodes.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    ss_node_info n0, n1;
    ss_node_info_init(&n0);
    snprintf(n0.host, sizeof n0.host, "gpu-a");
    n0.nranks = 2;
    snprintf(n0.state, sizeof n0.state, SS_NODE_RUNNING);
    n0.joined_at = 1700000001;
    n0.clock_offset_ns = 0;
    n0.clock_bound_ns = 0;
    ss_store_put_node(s, run, &n0);
    ss_node_info_init(&n1);
    n1.node_rank = 1;
    snprintf(n1.host, sizeof n1.host, "gpu-b");
    snprintf(n1.addr, sizeof n1.addr, "10.0.0.2:40112");
    n1.first_rank = 2;
    n1.nranks = 2;
    snprintf(n1.state, sizeof n1.state, SS_NODE_RUNNING);
    n1.joined_at = 1700000002;
    n1.clock_offset_ns = -1200000;
    n1.clock_bound_ns = 300000;
    ss_store_put_node(s, run, &n1);
    /* Lost: only what changed is known now. */
    ss_node_info lost;
    ss_node_info_init(&lost);
    lost.node_rank = 1;
    snprintf(lost.addr, sizeof lost.addr, "10.0.0.2:40112");
    lost.first_rank = 2;
    lost.nranks = 2;
    snprintf(lost.state, sizeof lost.state, SS_NODE_LOST);
    lost.ended_at = 1700000009;
    snprintf(lost.lost_reason, sizeof lost.lost_reason,
             "lost its connection");
    lost.lost_at_step = 412;
    ss_store_put_node(s, run, &lost);
    ss_node_info bad = n1;
    bad.node_rank = 2;
    snprintf(bad.state, sizeof bad.state, "sleeping");
    ss_store_put_node(s, run, &bad);
    ss_store_flush(s);
    ss_store_outcome o;
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.other_lost, 1);
    ss_store_close(s);

    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM nodes"), 2);
    CHECK_STR(sql_text(path, "SELECT host || ' ' || addr || ' ' || state || "
                             "' ' || first_rank || ' ' || nranks || ' ' || "
                             "joined_at || ' ' || ended_at || ' ' || "
                             "clock_offset_ns || ' ' || clock_bound_ns || "
                             "' ' || lost_reason || ' ' || lost_at_step "
                             "FROM nodes WHERE node_rank = 1",
                       buf, sizeof buf),
              "gpu-b 10.0.0.2:40112 lost 2 2 1700000002 1700000009 -1200000 "
              "300000 lost its connection 412");
    CHECK_STR(sql_text(path, "SELECT addr || '|' || state || '|' || "
                             "clock_bound_ns || '|' || "
                             "coalesce(ended_at, 'null') || '|' || "
                             "coalesce(lost_at_step, 'null') "
                             "FROM nodes WHERE node_rank = 0",
                       buf, sizeof buf),
              "|running|0|null|null");
}

/* An attempt's facts: updates that leave unknown fields as they are, and
 * a second put of the attempt (a relaunch) that keeps them. */
static void attempt_facts(void)
{
    char path[600], buf[256];
    testing_tmp_path("attempts.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 2);
    ss_store_put_attempt(s, run, 0, 100);
    ss_attempt_facts f = {.attempt = 0, .ended_at = -1, .first_step = -1,
                          .last_step = -1, .resumed_from = 7};
    ss_store_put_attempt_facts(s, run, &f);
    f = (ss_attempt_facts){.attempt = 0, .ended_at = 900,
                           .cause = "rank_crash", .first_step = 8,
                           .last_step = 12, .resumed_from = -1};
    ss_store_put_attempt_facts(s, run, &f);
    ss_store_put_attempt(s, run, 0, 150);
    ss_store_put_attempt(s, run, 1, 1000);
    ss_store_close(s);
    CHECK_STR(sql_text(path, "SELECT started_at || ' ' || ended_at || ' ' || "
                             "cause || ' ' || first_step || ' ' || last_step "
                             "|| ' ' || resumed_from FROM attempts WHERE "
                             "attempt = 0", buf, sizeof buf),
              "150 900 rank_crash 8 12 7");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM attempts WHERE "
                               "attempt = 1 AND cause IS NULL AND "
                               "resumed_from IS NULL"),
                 1);
}

/* Profiles are upserted by (run, attempt, request, rank): the answer
 * keeps the request's time and duration, and the reader gives them back
 * by request. */
static void writes_and_reads_profiles(void)
{
    char path[600], err[256];
    testing_tmp_path("profiles.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    ss_profile_info p;
    memset(&p, 0, sizeof p);
    p.request_id = 3;
    p.rank = 1;
    p.requested_at = 1700000001;
    p.duration_ms = 2000;
    p.marker_ns = SS_MISSING;
    snprintf(p.status, sizeof p.status, "requested");
    ss_store_put_profile(s, run, &p);
    p.rank = 2;
    snprintf(p.status, sizeof p.status, "unsupported");
    snprintf(p.message, sizeof p.message, "rank 2 does not run auto mode");
    ss_store_put_profile(s, run, &p);
    ss_profile_info done;
    memset(&done, 0, sizeof done);
    done.request_id = 3;
    done.rank = 1;
    done.requested_at = 1700000005;
    done.duration_ms = 2000;
    snprintf(done.status, sizeof done.status, "done");
    snprintf(done.path, sizeof done.path, "/data/p/rank1.json");
    snprintf(done.host, sizeof done.host, "gpu-a");
    done.marker_ns = 123456789;
    ss_store_put_profile(s, run, &done);
    ss_store_close(s);

    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    ss_profile_row *rows;
    size_t n;
    CHECK_EQ_INT(ss_reader_profiles(r, run, 0, 3, &rows, &n), 0);
    REQUIRE(n == 2);
    CHECK_EQ_INT(rows[0].rank, 1);
    CHECK_STR(rows[0].status, "done");
    CHECK_STR(rows[0].path, "/data/p/rank1.json");
    CHECK_STR(rows[0].host, "gpu-a");
    CHECK(rows[0].message == NULL);
    CHECK(rows[0].marker_ns == 123456789);
    CHECK(rows[0].requested_at == 1700000001); /* the request's */
    CHECK_STR(rows[1].status, "unsupported");
    CHECK(rows[1].path == NULL);
    CHECK(rows[1].marker_ns == SS_MISSING);
    ss_profile_rows_free(rows, n);
    CHECK_EQ_INT(ss_reader_profiles(r, run, 0, 4, &rows, &n), 0);
    CHECK(n == 0);
    ss_profile_rows_free(rows, n);
    ss_reader_close(r);
}

static void writes_everything_and_reads_back(void)
{
    char path[600], buf[1200];
    testing_tmp_path("full.db", path, sizeof path);
    ss_store *s = open_store(path, NULL, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    CHECK(run > 0);
    ss_store_put_attempt(s, run, 0, 1700000001);
    ss_rank_info ri = {.rank = 2, .attempt = 0, .pid = 4242,
                       .exit_code = -1, .term_signal = -1, .last_step = -1,
                       .dropped_events = 0, .dropped_records = 0,
                       .names_over_limit = 0, .values_over_limit = 0};
    snprintf(ri.host, sizeof ri.host, "node1");
    snprintf(ri.state, sizeof ri.state, "running");
    snprintf(ri.log_path, sizeof ri.log_path, "/logs/rank2.log");
    ss_store_put_rank(s, run, &ri);
    /* An update that leaves the unknown fields as they are. */
    ss_rank_info upd = {.rank = 2, .attempt = 0, .pid = -1, .exit_code = -1,
                        .term_signal = 9, .last_step = 7,
                        .dropped_events = 3, .dropped_records = -1,
                        .names_over_limit = 2, .values_over_limit = -1};
    snprintf(upd.state, sizeof upd.state, "failed");
    ss_store_put_rank(s, run, &upd);

    step_fx fx;
    for (uint64_t step = 0; step < 8; step++) {
        fx_build(&fx, 4, step, step == 7 ? 1u << 2 : 0);
        ss_store_put_step(s, run, &fx.v, names_);
    }
    ss_finding f = {.id = 1, .attempt = 0, .severity = SS_WARNING,
                    .n_ranks = 2, .ranks = {3, 1}, .first_step = 2,
                    .last_step = 5};
    snprintf(f.kind, sizeof f.kind, "straggler");
    snprintf(f.phase, sizeof f.phase, "forward");
    snprintf(f.evidence_json, sizeof f.evidence_json, "{\"late_ms\":3}");
    snprintf(f.message, sizeof f.message, "rank 3 is \"slow\"");
    ss_store_put_finding(s, run, &f);
    f.severity = SS_CRITICAL;
    f.last_step = 7;
    snprintf(f.evidence_json, sizeof f.evidence_json, "{\"late_ms\":4}");
    ss_store_put_finding(s, run, &f); /* same id: replaces */
    ss_finding g = {.id = 2, .attempt = 0, .severity = SS_WARNING,
                    .n_ranks = 0, .first_step = 1, .last_step = 1};
    snprintf(g.kind, sizeof g.kind, "jitter");
    ss_store_put_finding(s, run, &g);
    ss_store_put_event(s, run, 0, 1700000005, "rank_failed", 2,
                       "rank 2 killed by signal 9");
    ss_store_put_event(s, run, 0, 1700000006, "checkpoint", -1, NULL);
    ss_store_end_run(s, run, 1700000009, 1, "failed", 5, 6);
    ss_store_flush(s);
    ss_store_stats st;
    ss_store_get_stats(s, &st);
    CHECK_EQ_INT(st.queued, st.written);
    CHECK_EQ_INT(st.dropped_rank_steps, 0);
    CHECK(st.transactions >= 1);
    ss_store_close(s);

    CHECK_STR(sql_text(path, "SELECT uuid || '|' || name || '|' || command "
                             "|| '|' || host || '|' || world_size || '|' || "
                             "status || '|' || exit_code || '|' || ended_at "
                             "|| '|' || dropped_events || '|' || "
                             "dropped_records || '|' || dropped_rank_steps "
                             "FROM runs", buf, sizeof buf),
              "0123abcd-run|train|python train.py|node1|4|failed|1|"
              "1700000009|5|6|0");
    CHECK_EQ_INT(sql_int(path, "SELECT started_at FROM attempts"),
                 1700000001);
    CHECK_STR(sql_text(path, "SELECT host || '|' || pid || '|' || state || "
                             "'|' || coalesce(exit_code, 'null') || '|' || "
                             "term_signal || '|' || last_step || '|' || "
                             "dropped_events || '|' || dropped_records || "
                             "'|' || log_path || '|' || names_over_limit || "
                             "'|' || values_over_limit FROM ranks "
                             "WHERE rank = 2",
                       buf, sizeof buf),
              "node1|4242|failed|null|9|7|3|0|/logs/rank2.log|2|0");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 8);
    CHECK_EQ_INT(sql_int(path, "SELECT step_max FROM steps WHERE step = 0"),
                 103000000);
    CHECK_EQ_INT(sql_int(path, "SELECT step_worst_rank FROM steps "
                               "WHERE step = 0"), 3);
    CHECK_EQ_INT(sql_int(path, "SELECT device_max IS NULL FROM steps "
                               "WHERE step = 0"), 1);
    CHECK_STR(sql_text(path, "SELECT missing_ranks FROM steps WHERE step = 7",
                       buf, sizeof buf), "[2]");
    CHECK_EQ_INT(sql_int(path, "SELECT n_present FROM steps WHERE step = 7"),
                 3);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM step_phases"), 16);
    CHECK_EQ_INT(sql_int(path, "SELECT max FROM step_phases WHERE step = 3 "
                               "AND phase = 'forward'"), 43000000);
    CHECK_EQ_INT(sql_int(path, "SELECT skew_ns FROM step_syncs WHERE step = 3 "
                               "AND sync = 'allreduce'"), 3000);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"), 31);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps "
                               "WHERE step = 7 AND rank = 2"), 0);
    CHECK_STR(sql_text(path, "SELECT phases FROM rank_steps WHERE step = 4 "
                             "AND rank = 1", buf, sizeof buf),
              "{\"forward\":41000000,\"backward\":60000000}");
    CHECK_EQ_INT(sql_int(path, "SELECT phases ->> '$.forward' FROM rank_steps "
                               "WHERE step = 4 AND rank = 3"), 43000000);
    CHECK_EQ_INT(sql_int(path, "SELECT rss_bytes FROM rank_steps WHERE step = 1 "
                               "AND rank = 3"), ((int64_t)1 << 30) + 3);
    /* Timeline detail (schema version 2). */
    CHECK_EQ_INT(sql_int(path, "SELECT begin_ns FROM rank_steps WHERE step = 4 "
                               "AND rank = 1"), 800001000);
    CHECK_EQ_INT(sql_int(path, "SELECT end_ns FROM rank_steps WHERE step = 4 "
                               "AND rank = 1"), 800001000 + 101000000);
    CHECK_STR(sql_text(path, "SELECT phase_starts FROM rank_steps WHERE "
                             "step = 4 AND rank = 1", buf, sizeof buf),
              "{\"forward\":1000000,\"backward\":45000000}");
    CHECK_STR(sql_text(path, "SELECT phase_counts FROM rank_steps WHERE "
                             "step = 4 AND rank = 1", buf, sizeof buf),
              "{\"backward\":2}");
    CHECK_STR(sql_text(path, "SELECT syncs FROM rank_steps WHERE "
                             "step = 4 AND rank = 1", buf, sizeof buf),
              "{\"allreduce\":90001000}");
    /* Metrics (schema version 3): exact doubles, none where not reported. */
    CHECK_STR(sql_text(path, "SELECT metrics FROM rank_steps WHERE "
                             "step = 4 AND rank = 1", buf, sizeof buf),
              "{\"loss\":1.25}");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE "
                               "rank = 2 AND metrics IS NOT NULL"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE "
                               "metrics ->> '$.loss' = rank + 0.25"),
                 sql_int(path, "SELECT count(*) FROM rank_steps WHERE "
                               "rank != 2"));
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps "
                               "WHERE device_bytes IS NOT NULL"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT steps FROM rank_totals WHERE rank = 2"),
                 7);
    CHECK_EQ_INT(sql_int(path, "SELECT step_ns_sum FROM rank_totals "
                               "WHERE rank = 1"), 8 * 101000000LL);
    CHECK_EQ_INT(sql_int(path, "SELECT max_device_bytes IS NULL FROM "
                               "rank_totals WHERE rank = 1"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM findings"), 2);
    CHECK_STR(sql_text(path, "SELECT kind || '|' || severity || '|' || ranks "
                             "|| '|' || phase || '|' || first_step || '|' || "
                             "last_step || '|' || evidence || '|' || message "
                             "FROM findings WHERE finding_id = 1",
                       buf, sizeof buf),
              "straggler|critical|[3,1]|forward|2|7|{\"late_ms\":4}|"
              "rank 3 is \"slow\"");
    CHECK_STR(sql_text(path, "SELECT ranks || '|' || coalesce(phase, 'null') "
                             "|| '|' || evidence FROM findings "
                             "WHERE finding_id = 2", buf, sizeof buf),
              "[]|null|{}");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM events"), 2);
    CHECK_STR(sql_text(path, "SELECT kind || '|' || rank || '|' || message "
                             "FROM events ORDER BY id LIMIT 1",
                       buf, sizeof buf),
              "rank_failed|2|rank 2 killed by signal 9");
    CHECK_EQ_INT(sql_int(path, "SELECT rank IS NULL AND message IS NULL "
                               "FROM events WHERE kind = 'checkpoint'"), 1);
}

static void retention_keeps_recent_sampled_and_named_steps(void)
{
    char path[600];
    testing_tmp_path("retention.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.recent_steps = 10;
    cfg.sample_every = 7;
    ss_store *s = open_store(path, &cfg, 0);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 3);
    step_fx fx;
    for (uint64_t step = 0; step < 100; step++) {
        fx_build(&fx, 3, step, 0);
        ss_store_put_step(s, run, &fx.v, names_);
        if (step == 40) {
            ss_finding f = {.id = 9, .severity = SS_WARNING, .n_ranks = 1,
                            .ranks = {1}, .first_step = 33, .last_step = 38};
            snprintf(f.kind, sizeof f.kind, "data_stall");
            ss_store_put_finding(s, run, &f);
        }
        ss_store_flush(s); /* one batch per step: pruning runs each time */
    }
    ss_store_close(s);
    /* Expected: steps 90..99 (tier A), multiples of 7 (tier B), 33 and 38
     * (named by the finding), each with 3 ranks. */
    int want = 0;
    for (int step = 0; step < 100; step++)
        want += step >= 90 || step % 7 == 0 || step == 33 || step == 38;
    CHECK_EQ_INT(sql_int(path, "SELECT count(DISTINCT step) FROM rank_steps"),
                 want);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"), want * 3);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE step "
                               "IN (33, 38, 91, 98, 14)"), 15);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps WHERE step "
                               "IN (34, 39, 89, 50)"), 0);
    /* Aggregates and totals are never pruned. */
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 100);
    CHECK_EQ_INT(sql_int(path, "SELECT sum(steps) FROM rank_totals"), 300);
}

/* Vectors: one row per rank and name with its doubles bit for bit, their
 * own retention window, labels, and a full vector queue drops a step's
 * vectors whole and counts them in the run. */
static void vectors_are_stored_compactly_and_retained(void)
{
    char path[600];
    testing_tmp_path("vectors.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.values_recent_steps = 5;
    cfg.sample_every = 7;
    ss_store *s = open_store(path, &cfg, 0);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 3);
    double v[4] = {1.5, NAN, INFINITY, -INFINITY};
    ss_values_item items[3][1];
    step_fx fx;
    for (uint64_t step = 0; step < 20; step++) {
        fx_build(&fx, 3, step, step == 19 ? 1u << 2 : 0);
        for (uint32_t r = 0; r < 3; r++) {
            items[r][0] = (ss_values_item){.name = 0, .n = 4,
                                           .truncated = r, .v = v};
            fx.ranks[r].n_values = 1;
            fx.ranks[r].values = items[r];
        }
        ss_store_put_step(s, run, &fx.v, names_);
        ss_store_flush(s);
    }
    const char *labels[2] = {"a", "b\"c"};
    ss_store_put_labels(s, run, 0, 1, "forward", labels, 2);
    ss_store_flush(s);
    ss_store_outcome o;
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.vectors_stored, 3 * 19 + 2);
    ss_store_close(s);
    /* steps 15..19 (recent), 0, 7, 14 (sampled); step 19 lacks rank 2 */
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_values"),
                 3 * 7 + 2);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_values WHERE "
                               "step IN (1, 13)"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_values WHERE "
                               "name = 'forward' AND n = 4 AND "
                               "length(data) = 32 AND truncated = rank "
                               "AND hex(data) = '000000000000F83F"
                               "000000000000F87F000000000000F07F"
                               "000000000000F0FF'"), 3 * 7 + 2);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM value_labels WHERE "
                               "rank = 1 AND labels = '[\"a\",\"b\\\"c\"]'"),
                 1);

    /* a queue with room for no vector drops them and counts them */
    char path2[600];
    testing_tmp_path("vectors_full.db", path2, sizeof path2);
    cfg.values_queue_bytes = 16;
    s = open_store(path2, &cfg, 0);
    REQUIRE(s != NULL);
    run = begin_run(s, 3);
    fx_build(&fx, 3, 0, 0);
    for (uint32_t r = 0; r < 3; r++) {
        fx.ranks[r].n_values = 1;
        fx.ranks[r].values = items[r];
    }
    ss_store_put_step(s, run, &fx.v, names_);
    ss_store_flush(s);
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.vectors_dropped, 3);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path2, "SELECT count(*) FROM rank_values"), 0);
    CHECK_EQ_INT(sql_int(path2, "SELECT dropped_vectors FROM runs"), 3);
    CHECK_EQ_INT(sql_int(path2, "SELECT count(*) FROM steps"), 1);
}

static void full_queue_drops_only_rank_steps(void)
{
    char path[600];
    testing_tmp_path("queue.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.queue_limit = 10;
    ss_store *s = open_store(path, &cfg, 0); /* nothing drains until flush */
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    step_fx fx;
    for (uint64_t step = 0; step < 3; step++) {
        fx_build(&fx, 4, step, 0); /* 1 + 4 units each */
        ss_store_put_step(s, run, &fx.v, names_);
    }
    for (int i = 0; i < 20; i++)
        ss_store_put_event(s, run, 0, 1700000000 + i, "checkpoint", -1, "x");
    ss_finding f = {.id = 1, .severity = SS_CRITICAL, .first_step = 0,
                    .last_step = 2};
    snprintf(f.kind, sizeof f.kind, "jitter");
    ss_store_put_finding(s, run, &f);
    ss_store_end_run(s, run, 1700000100, 0, "ok", 0, 0);
    ss_store_stats st;
    ss_store_get_stats(s, &st);
    CHECK_EQ_INT(st.dropped_rank_steps, 4);
    CHECK_EQ_INT(st.written, 0);
    ss_store_flush(s);
    ss_store_get_stats(s, &st);
    CHECK_EQ_INT(st.written, st.queued);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 3);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"), 8);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps "
                               "WHERE step = 2"), 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM events"), 20);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM findings"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT dropped_rank_steps FROM runs"), 4);
    CHECK_EQ_INT(sql_int(path, "SELECT status = 'ok' FROM runs"), 1);
}

/* With rank_rows_per_step, a step writes the rows of the ranks it singles
 * out, a rotating share and every rank on tier B's steps; the other ranks
 * count into their totals only. */
static void writes_picked_rank_rows_and_every_total(void)
{
    char path[600];
    testing_tmp_path("picked.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.rank_rows_per_step = 2; /* 8 ranks: every 4th in rotation */
    ss_store *s = open_store(path, &cfg, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 8);
    step_fx fx;
    /* Step 5: rank 7 is the worst of everything and 7, 6, 5, 4 the
     * slowest; rank 0 the worst of the second phase; 3 and 7 in turn. */
    fx_build(&fx, 8, 5, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    /* Step 6: 2 and 6 in turn. */
    fx_build(&fx, 8, 6, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    /* Step 100: tier B, every rank. */
    fx_build(&fx, 8, 100, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    ss_store_end_run(s, run, 1700000100, 0, "ok", 0, 0);
    ss_store_flush(s);
    ss_store_outcome o;
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.rank_steps_unpicked, 4);
    CHECK_EQ_INT(o.rank_steps_dropped, 0);
    ss_store_close(s);
    char got[256];
    CHECK_STR(sql_text(path, "SELECT group_concat(rank) FROM (SELECT rank "
                             "FROM rank_steps WHERE step = 5 ORDER BY rank)",
                       got, sizeof got), "0,3,4,5,6,7");
    CHECK_STR(sql_text(path, "SELECT group_concat(rank) FROM (SELECT rank "
                             "FROM rank_steps WHERE step = 6 ORDER BY rank)",
                       got, sizeof got), "0,2,4,5,6,7");
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps "
                               "WHERE step = 100"), 8);
    /* Totals over every step, rows or not. */
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_totals "
                               "WHERE steps = 3"), 8);
    CHECK_EQ_INT(sql_int(path, "SELECT step_ns_sum FROM rank_totals "
                               "WHERE rank = 1"), 3 * 101000000LL);
    CHECK_EQ_INT(sql_int(path, "SELECT max_rss_bytes FROM rank_totals "
                               "WHERE rank = 1"), (1LL << 30) + 1);
    CHECK_EQ_INT(sql_int(path, "SELECT last_step FROM rank_totals "
                               "WHERE rank = 3"), 100);
}

/* With totals_interval_ms, the ranks' totals are written that often, at
 * a flush (even of an empty queue), at a run's end and at the close; a
 * batch in between leaves them owed, not lost. */
static void rank_totals_are_owed_between_writes(void)
{
    char path[600];
    testing_tmp_path("owed.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.flush_interval_ms = 10;
    cfg.totals_interval_ms = 60000;
    ss_store *s = open_store(path, &cfg, 1);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    step_fx fx;
    const char *steps0 = "SELECT coalesce(sum(steps), 0) FROM rank_totals "
                         "WHERE rank = 0";
    fx_build(&fx, 4, 0, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    ss_store_flush(s);
    CHECK_EQ_INT(sql_int(path, steps0), 1);
    fx_build(&fx, 4, 1, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    for (int i = 0; i < 200 && sql_int(path, "SELECT count(*) FROM steps") < 2;
         i++)
        usleep(10000); /* the writer's own batch, within the interval */
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 2);
    CHECK_EQ_INT(sql_int(path, steps0), 1); /* owed */
    ss_store_flush(s); /* an empty queue: the totals alone */
    CHECK_EQ_INT(sql_int(path, steps0), 2);
    fx_build(&fx, 4, 2, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    ss_store_end_run(s, run, 1700000100, 0, "ok", 0, 0);
    for (int i = 0; i < 200 && sql_int(path, steps0) < 3; i++)
        usleep(10000); /* the run's end writes them */
    CHECK_EQ_INT(sql_int(path, steps0), 3);
    fx_build(&fx, 4, 3, 0);
    ss_store_put_step(s, run, &fx.v, names_);
    for (int i = 0; i < 200 && sql_int(path, "SELECT count(*) FROM steps") < 4;
         i++)
        usleep(10000);
    ss_store_close(s); /* the close writes what is owed */
    CHECK_EQ_INT(sql_int(path, steps0), 4);
    CHECK_EQ_INT(sql_int(path, "SELECT sum(steps) FROM rank_totals"), 16);
}

/* A step's rank rows are kept or dropped whole: a queue smaller than one
 * step of the world dropped every row of every step, however idle the
 * writer.  Fitted to the world, an empty queue takes whole steps. */
static void queue_fits_the_world(void)
{
    char path[600];
    testing_tmp_path("fit.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.queue_limit = 5; /* stands for 65536 against a larger world */
    ss_store_config_fit_world(&cfg, 8);
    CHECK_EQ_INT(cfg.queue_limit, SS_STORE_QUEUE_STEPS * 9);
    ss_store_config big = cfg;
    ss_store_config_fit_world(&big, 2); /* never lowers it */
    CHECK_EQ_INT(big.queue_limit, cfg.queue_limit);
    ss_store *s = open_store(path, &cfg, 0); /* nothing drains until flush */
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 8);
    step_fx fx;
    for (uint64_t step = 0; step < SS_STORE_QUEUE_STEPS; step++) {
        fx_build(&fx, 8, step, 0); /* 1 + 8 units each */
        ss_store_put_step(s, run, &fx.v, names_);
    }
    ss_store_stats st;
    ss_store_get_stats(s, &st);
    CHECK_EQ_INT(st.dropped_rank_steps, 0);
    ss_store_end_run(s, run, 1700000100, 0, "ok", 0, 0);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"),
                 8 * SS_STORE_QUEUE_STEPS);
}

/* The child writes steps as fast as it can; the parent kills it with
 * SIGKILL once it has committed STEPS_BEFORE steps and a few flush
 * intervals of further steps have passed.  Those steps must be in the file,
 * each step with all its rank rows (one transaction), with no gap, and the
 * file must open. */
static void survives_sigkill(void)
{
    enum { WORLD = 4, STEPS_BEFORE = 200, INTERVAL_MS = 40 };
    char path[600];
    testing_tmp_path("killed.db", path, sizeof path);
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        ss_store_config cfg;
        ss_store_config_defaults(&cfg);
        cfg.flush_interval_ms = INTERVAL_MS;
        cfg.recent_steps = 0; /* keep every row: all are counted */
        char err[512];
        ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
        if (!s)
            _exit(3);
        int64_t run = begin_run(s, WORLD);
        step_fx fx;
        for (uint64_t step = 0;; step++) {
            fx_build(&fx, WORLD, step, 0);
            ss_store_put_step(s, run, &fx.v, names_);
            if (step + 1 == STEPS_BEFORE) {
                /* The first steps are committed before the parent is told:
                 * a writer slowed down (sanitizers, a loaded machine) must
                 * not make the kill land before anything was written. */
                ss_store_flush(s);
                char c = 'k';
                if (write(pfd[1], &c, 1) != 1)
                    _exit(4);
            }
            if (step >= STEPS_BEFORE)
                usleep(100);
        }
    }
    close(pfd[1]);
    char c = 0;
    CHECK_EQ_INT(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    usleep(4 * INTERVAL_MS * 1000);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    long long steps = sql_int(path, "SELECT count(*) FROM steps");
    CHECK(steps >= STEPS_BEFORE);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"),
                 steps * WORLD);
    CHECK_EQ_INT(sql_int(path, "SELECT max(step) + 1 FROM steps"), steps);
    char buf[64];
    CHECK_STR(sql_text(path, "PRAGMA integrity_check", buf, sizeof buf),
              "ok");
    ss_store *s = open_store(path, NULL, 1);
    CHECK(s != NULL);
    ss_store_close(s);
}

/* Size of the file at PATH, 0 when it does not exist. */
static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Puts steps FIRST..FIRST+N-1 of a 4-rank run. */
static void put_steps(ss_store *s, int64_t run, uint64_t first, uint64_t n)
{
    step_fx fx;
    for (uint64_t step = first; step < first + n; step++) {
        fx_build(&fx, 4, step, 0);
        ss_store_put_step(s, run, &fx.v, names_);
    }
}

static void put_finding(ss_store *s, int64_t run, uint32_t id,
                        uint64_t last_step)
{
    ss_finding f = {.id = id, .severity = SS_WARNING, .first_step = 0,
                    .last_step = last_step};
    snprintf(f.kind, sizeof f.kind, "jitter");
    ss_store_put_finding(s, run, &f);
}

/* The file may not grow past its size and MORE bytes (RLIMIT_FSIZE:
 * writes fail with EFBIG, which SQLite reports as an I/O error; a full
 * disk, ENOSPC, is tested end to end in tests/e2e/test_store_full.py).
 * Returns the limit to restore. */
static struct rlimit limit_file_growth(const char *path, off_t more)
{
    char wal[640];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    off_t big = file_size(path) > file_size(wal) ? file_size(path)
                                                 : file_size(wal);
    lim.rlim_cur = (rlim_t)(big + more);
    lim.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &lim);
    return old;
}

/* When the file cannot grow, the outcome says exactly what was committed
 * and what was lost, and why; the counts match the file. */
static void outcome_counts_what_a_full_disk_lost(void)
{
    char path[600];
    testing_tmp_path("disk_full.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.recent_steps = 0; /* keep every rank row: all are counted */
    ss_store *s = open_store(path, &cfg, 0);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    put_steps(s, run, 0, 10);
    put_finding(s, run, 1, 5);
    ss_store_put_event(s, run, 0, 1700000000, "checkpoint", -1, "x");
    ss_store_flush(s);
    ss_store_outcome o;
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.steps_stored, 10);
    CHECK_EQ_INT(o.rank_steps_stored, 40);
    CHECK_EQ_INT(o.findings_stored, 1);
    CHECK_EQ_INT(o.events_stored, 1);
    CHECK_EQ_INT(o.steps_lost + o.rank_steps_lost + o.finding_writes_lost +
                     o.events_lost + o.other_lost + o.ends_lost, 0);
    CHECK_STR(o.error, "");

    struct rlimit old = limit_file_growth(path, 0);
    put_steps(s, run, 10, 5);
    put_finding(s, run, 1, 12); /* an update of a stored finding */
    put_finding(s, run, 2, 14);
    for (int i = 0; i < 3; i++)
        ss_store_put_event(s, run, 0, 1700000001 + i, "checkpoint", -1, "y");
    ss_store_end_run(s, run, 1700000100, 0, "succeeded", 0, 0);
    ss_store_flush(s);
    setrlimit(RLIMIT_FSIZE, &old);
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.steps_stored, 10);
    CHECK_EQ_INT(o.steps_lost, 5);
    CHECK_EQ_INT(o.rank_steps_lost, 20);
    CHECK_EQ_INT(o.findings_stored, 1);
    CHECK_EQ_INT(o.finding_writes_lost, 2);
    CHECK_EQ_INT(o.events_lost, 3);
    CHECK_EQ_INT(o.ends_stored, 0);
    CHECK_EQ_INT(o.ends_lost, 1);
    CHECK(strncmp(o.error, "I/O error: ", 11) == 0);

    /* Room again: the end is written, the first error stays the reason. */
    ss_store_end_run(s, run, 1700000200, 0, "succeeded", 0, 0);
    ss_store_flush(s);
    ss_store_get_outcome(s, &o);
    CHECK_EQ_INT(o.ends_stored, 1);
    CHECK(strncmp(o.error, "I/O error: ", 11) == 0);
    ss_store_close(s);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 10);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM rank_steps"), 40);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM findings"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT last_step FROM findings"), 5);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM events"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT ended_at FROM runs"), 1700000200);
}

/* A batch whose steps do not fit is lost, but its small items (findings,
 * events, the run's end) are retried on their own and stored. */
static void small_items_survive_a_batch_too_big_for_the_disk(void)
{
    char path[600];
    testing_tmp_path("nearly_full.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.recent_steps = 0;
    ss_store *s = open_store(path, &cfg, 0);
    REQUIRE(s != NULL);
    int64_t run = begin_run(s, 4);
    put_steps(s, run, 0, 2);
    ss_store_flush(s);

    /* Room for a few pages, not for 2000 steps of 4 rank rows. */
    struct rlimit old = limit_file_growth(path, 8 * (16384 + 24));
    put_steps(s, run, 2, 2000);
    put_finding(s, run, 1, 100);
    ss_store_put_event(s, run, 0, 1700000001, "checkpoint", -1, "y");
    ss_store_end_run(s, run, 1700000100, 1, "failed", 0, 0);
    ss_store_flush(s);
    setrlimit(RLIMIT_FSIZE, &old);
    ss_store_outcome o;
    ss_store_get_outcome(s, &o);
    ss_store_close(s);
    CHECK_EQ_INT(o.steps_stored, 2);
    CHECK_EQ_INT(o.steps_lost, 2000);
    CHECK_EQ_INT(o.rank_steps_lost, 8000);
    CHECK_EQ_INT(o.findings_stored, 1);
    CHECK_EQ_INT(o.finding_writes_lost, 0);
    CHECK_EQ_INT(o.events_stored, 1);
    CHECK_EQ_INT(o.ends_stored, 1);
    CHECK_EQ_INT(o.ends_lost, 0);
    CHECK(strncmp(o.error, "I/O error: ", 11) == 0);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM steps"), 2);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM findings"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM events"), 1);
    CHECK_EQ_INT(sql_int(path, "SELECT exit_code FROM runs"), 1);
}

static void default_path_follows_xdg(void)
{
    char *old_xdg = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME"))
                                            : NULL;
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char out[512];
    setenv("XDG_DATA_HOME", "/data/x", 1);
    CHECK_EQ_INT(ss_store_default_path(out, sizeof out), 0);
    CHECK_STR(out, "/data/x/stepscope/stepscope.db");
    setenv("XDG_DATA_HOME", "relative/ignored", 1);
    setenv("HOME", "/home/u", 1);
    CHECK_EQ_INT(ss_store_default_path(out, sizeof out), 0);
    CHECK_STR(out, "/home/u/.local/share/stepscope/stepscope.db");
    unsetenv("XDG_DATA_HOME");
    CHECK_EQ_INT(ss_store_default_path(out, 10), -1);
    unsetenv("HOME");
    CHECK_EQ_INT(ss_store_default_path(out, sizeof out), -1);
    if (old_xdg)
        setenv("XDG_DATA_HOME", old_xdg, 1);
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_xdg);
    free(old_home);
}

TEST_LIST(TEST(creates_migrates_and_reopens),
          TEST(keeps_the_run_fingerprint),
          TEST(refuses_foreign_sqlite_file),
          TEST(refuses_garbage_file),
          TEST(refuses_newer_version), TEST(migrates_version_1),
          TEST(stack_snapshots_round_trip),
          TEST(nonfinite_snapshot_after_migration),
          TEST(divergence_snapshot_after_migration),
          TEST(refuses_corrupt_file),
          TEST(readonly_open_refuses_missing_and_empty),
          TEST(writes_everything_and_reads_back),
          TEST(writes_and_upserts_nodes), TEST(attempt_facts),
          TEST(writes_and_reads_profiles),
          TEST(escapes_names_in_row_json),
          TEST(retention_keeps_recent_sampled_and_named_steps),
          TEST(vectors_are_stored_compactly_and_retained),
          TEST(full_queue_drops_only_rank_steps),
          TEST(writes_picked_rank_rows_and_every_total),
          TEST(rank_totals_are_owed_between_writes),
          TEST(queue_fits_the_world),
          TEST(survives_sigkill),
          TEST(outcome_counts_what_a_full_disk_lost),
          TEST(small_items_survive_a_batch_too_big_for_the_disk),
          TEST(default_path_follows_xdg))
