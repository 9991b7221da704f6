/*
 * runsel_test.c - choosing a run (latest, id, name, uuid prefix,
 * ambiguous, unknown) and opening a store for reading (missing file,
 * an older schema migrated first).
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include "runsel.h"
#include "store_schema.h"
#include "testing.h"

static char path_[512];

static void cleanup(void)
{
    char p[600];
    unlink(path_);
    snprintf(p, sizeof p, "%s-wal", path_);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path_);
    unlink(p);
}

static int64_t add_run(ss_store *s, const char *uuid, const char *name)
{
    ss_run_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.uuid, sizeof info.uuid, "%s", uuid);
    snprintf(info.name, sizeof info.name, "%s", name);
    int64_t id = -1;
    char err[256];
    ss_store_begin_run(s, &info, &id, err, sizeof err);
    return id;
}

static void selects_runs(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(path_, sizeof path_, "%s/runsel_test.%d.db", t && *t ? t : "/tmp",
             (int)getpid());
    atexit(cleanup);
    char err[512];
    ss_store_reader r;
    CHECK_EQ_INT(ss_store_reader_open(&r, path_, err, sizeof err), -1);
    CHECK(strstr(err, "no store") != NULL);
    ss_store_reader_close(&r);

    ss_store *s = ss_store_open(path_, NULL, 0, err, sizeof err);
    REQUIRE(s != NULL);
    REQUIRE(ss_store_reader_open(&r, path_, err, sizeof err) == 0);
    int64_t id = 0;
    CHECK_EQ_INT(ss_run_select(r.db, NULL, &id, err, sizeof err), -1);
    CHECK(strstr(err, "no runs") != NULL);
    add_run(s, "abc-111", "train");
    add_run(s, "abd-222", "eval");
    add_run(s, "xyz-333", "train");
    CHECK_EQ_INT(ss_run_select(r.db, NULL, &id, err, sizeof err), 0);
    CHECK_EQ_INT(id, 3);
    CHECK_EQ_INT(ss_run_select(r.db, "2", &id, err, sizeof err), 0);
    CHECK_EQ_INT(id, 2);
    CHECK_EQ_INT(ss_run_select(r.db, "train", &id, err, sizeof err), 0);
    CHECK_EQ_INT(id, 3);
    CHECK_EQ_INT(ss_run_select(r.db, "abd", &id, err, sizeof err), 0);
    CHECK_EQ_INT(id, 2);
    CHECK_EQ_INT(ss_run_select(r.db, "ab", &id, err, sizeof err), -1);
    CHECK(strstr(err, "ambiguous") != NULL);
    CHECK_EQ_INT(ss_run_select(r.db, "nope", &id, err, sizeof err), -1);
    CHECK(strstr(err, "no run 'nope'") != NULL);
    ss_store_reader_close(&r);
    ss_store_close(s);

    /* An older store is migrated before it is read. */
    sqlite3 *db;
    REQUIRE(sqlite3_open(path_, &db) == SQLITE_OK);
    sqlite3_exec(db,
                 "ALTER TABLE rank_steps DROP COLUMN metrics;"
                 "ALTER TABLE rank_steps DROP COLUMN syncs;"
                 "ALTER TABLE rank_steps DROP COLUMN phase_counts;"
                 "ALTER TABLE rank_steps DROP COLUMN phase_starts;"
                 "ALTER TABLE rank_steps DROP COLUMN end_ns;"
                 "ALTER TABLE rank_steps DROP COLUMN begin_ns;"
                 "ALTER TABLE ranks DROP COLUMN values_over_limit;"
                 "ALTER TABLE ranks DROP COLUMN names_over_limit;"
                 "PRAGMA user_version = 1",
                 NULL, NULL, NULL);
    sqlite3_close(db);
    REQUIRE(ss_store_reader_open(&r, path_, err, sizeof err) == 0);
    CHECK(r.store != NULL);
    sqlite3_stmt *st = NULL;
    CHECK_EQ_INT(sqlite3_prepare_v2(r.db, "SELECT begin_ns FROM rank_steps",
                                    -1, &st, NULL),
                 SQLITE_OK);
    sqlite3_finalize(st);
    ss_store_reader_close(&r);
    ss_store_reader_close(&r); /* twice is harmless */
}

TEST_LIST(TEST(selects_runs))
