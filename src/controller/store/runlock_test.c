/*
 * runlock_test.c - the run lock and what readers make of it: a live
 * controller (this process, or a child) holds it; a controller killed with
 * SIGKILL leaves a `running` row that reads as `interrupted`, that the next
 * writer rewrites with an event, and whose lock file it removes.  Also: a
 * new store and its -wal/-shm files are private (0600) whatever the umask.
 */
#include "runlock.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"
#include "store_files.h"
#include "testing.h"
#include "testing_tmp.h"

static int mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

/* A child takes the lock of UUID in DB, then is killed with SIGKILL. */
static void lock_in_doomed_child(const char *db, const char *uuid)
{
    int fds[2];
    if (pipe(fds) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        ss_run_lock lk;
        char err[256];
        char ok = ss_run_lock_take(&lk, db, uuid, err, sizeof err) == 0;
        if (write(fds[1], &ok, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char ok = 0;
    CHECK_EQ_INT(read(fds[0], &ok, 1), 1);
    CHECK(ok);
    CHECK(ss_run_controller_alive(db, uuid)); /* held by the child */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fds[0]);
    close(fds[1]);
}

static void a_held_lock_says_alive_a_dead_one_interrupted(void)
{
    char db[600], file[PATH_MAX], err[256];
    testing_tmp_path("lock.db", db, sizeof db);
    ss_run_lock lk;
    REQUIRE(ss_run_lock_take(&lk, db, "run-a", err, sizeof err) == 0);
    CHECK(lk.held);
    CHECK_EQ_INT(ss_store_lock_file(db, "run-a", file, sizeof file), 0);
    CHECK_EQ_INT(mode_of(file), 0600);
    CHECK(fcntl(lk.fd, F_GETFD) & FD_CLOEXEC); /* ranks never inherit it */
    /* Asked from this very process, as the controller's own API does. */
    CHECK_EQ_INT(ss_run_controller_alive(db, "run-a"), 1);
    CHECK_STR(ss_run_status_now(db, "run-a", "running"), "running");
    ss_run_lock_release(&lk);
    ss_run_lock_release(&lk); /* twice is harmless */
    CHECK_EQ_INT(ss_run_controller_alive(db, "run-a"), 0);
    CHECK_STR(ss_run_status_now(db, "run-a", "running"), "interrupted");
    CHECK_STR(ss_run_status_now(db, "run-a", "succeeded"), "succeeded");
    CHECK(ss_run_status_now(db, "run-a", NULL) == NULL);
    CHECK_EQ_INT(ss_run_controller_alive(db, "never-locked"), 0);

    lock_in_doomed_child(db, "run-b");
    CHECK_EQ_INT(ss_run_controller_alive(db, "run-b"), 0);
    CHECK_STR(ss_run_status_now(db, "run-b", "running"), "interrupted");
    /* The sweep removes the dead lock and keeps a held one. */
    REQUIRE(ss_run_lock_take(&lk, db, "run-c", err, sizeof err) == 0);
    CHECK_EQ_INT(ss_run_locks_sweep(db), 1);
    CHECK_EQ_INT(ss_store_lock_file(db, "run-b", file, sizeof file), 0);
    CHECK(access(file, F_OK) != 0);
    CHECK_EQ_INT(ss_run_controller_alive(db, "run-c"), 1);
    ss_run_lock_release(&lk);
}

static void lock_errors_are_reported(void)
{
    char db[600], err[256] = "";
    ss_run_lock lk;
    CHECK_EQ_INT(ss_run_lock_take(&lk, "/proc/no/such.db", "x", err,
                                  sizeof err), -1);
    CHECK(strstr(err, "cannot create") != NULL);
    CHECK(!lk.held);
    testing_tmp_path("err.db", db, sizeof db);
    CHECK_EQ_INT(ss_run_lock_take(&lk, db, "a/b", err, sizeof err), -1);
    CHECK(strstr(err, "run lock") != NULL);
}

static int64_t add_run(ss_store *s, const char *uuid)
{
    ss_run_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.uuid, sizeof info.uuid, "%s", uuid);
    snprintf(info.name, sizeof info.name, "job");
    info.started_at = 1000;
    int64_t id = -1;
    char err[256];
    CHECK_EQ_INT(ss_store_begin_run(s, &info, &id, err, sizeof err), 0);
    return id;
}

static char *query_text(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    char *out = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *q = NULL;
        if (sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK &&
            sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
            out = strdup((const char *)sqlite3_column_text(q, 0));
        sqlite3_finalize(q);
    }
    sqlite3_close(h);
    return out ? out : strdup("(none)");
}

static void the_next_writer_marks_dead_runs_interrupted(void)
{
    char db[600], err[256];
    testing_tmp_path("marks.db", db, sizeof db);
    ss_store *s = ss_store_open(db, NULL, 0, err, sizeof err);
    REQUIRE(s != NULL);
    ss_run_lock live;
    REQUIRE(ss_run_lock_take(&live, db, "live-run", err, sizeof err) == 0);
    add_run(s, "live-run");
    lock_in_doomed_child(db, "killed-run");
    int64_t killed = add_run(s, "killed-run");
    add_run(s, "no-lock-run");
    int64_t done = add_run(s, "done-run");
    ss_store_put_event(s, killed, 0, 5000, "rank_connected", 0, "hello");
    ss_rank_info rank;
    memset(&rank, 0, sizeof rank);
    rank.pid = rank.exit_code = rank.term_signal = rank.last_step = -1;
    snprintf(rank.state, sizeof rank.state, "running");
    ss_store_put_rank(s, killed, &rank);
    ss_store_end_run(s, done, 2000, 0, "succeeded", 0, 0);
    ss_store_flush(s);

    CHECK_EQ_INT(ss_store_mark_interrupted(s), 2);
    CHECK_EQ_INT(ss_store_mark_interrupted(s), 0); /* once */
    ss_store_close(s);
    char *st = query_text(db, "SELECT group_concat(uuid || '=' || status, ' ')"
                              " FROM (SELECT * FROM runs ORDER BY id)");
    CHECK_STR(st, "live-run=running killed-run=interrupted "
                  "no-lock-run=interrupted done-run=succeeded");
    free(st);
    char *rank_state = query_text(db, "SELECT state FROM ranks");
    CHECK_STR(rank_state, "interrupted");
    free(rank_state);
    /* ended_at: the last thing heard of the run. */
    char *ended = query_text(db, "SELECT ended_at FROM runs WHERE uuid = "
                                 "'killed-run'");
    CHECK_STR(ended, "5000");
    free(ended);
    char *ev = query_text(db, "SELECT count(*) || ' ' || min(message) FROM "
                              "events WHERE kind = 'interrupted'");
    CHECK(strncmp(ev, "2 the controller stopped without ending", 39) == 0);
    free(ev);
    char file[PATH_MAX];
    CHECK_EQ_INT(ss_store_lock_file(db, "killed-run", file, sizeof file), 0);
    CHECK(access(file, F_OK) != 0); /* its lock file is swept */
    ss_run_lock_release(&live);
}

static void a_new_store_is_private(void)
{
    char db[600], side[700], dir[600], err[256];
    testing_tmp_path("open/to/all", dir, sizeof dir);
    testing_tmp_path("open/to/all/private.db", db, sizeof db);
    mode_t old = umask(0);
    ss_store *s = ss_store_open(db, NULL, 1, err, sizeof err);
    REQUIRE(s != NULL);
    add_run(s, "u");
    ss_store_flush(s);
    CHECK_EQ_INT(mode_of(db), 0600);
    snprintf(side, sizeof side, "%s-wal", db);
    CHECK_EQ_INT(mode_of(side), 0600);
    snprintf(side, sizeof side, "%s-shm", db);
    CHECK_EQ_INT(mode_of(side), 0600);
    CHECK_EQ_INT(mode_of(dir), 0700);
    ss_store_close(s);
    umask(old);
}

TEST_LIST(TEST(a_held_lock_says_alive_a_dead_one_interrupted),
          TEST(lock_errors_are_reported),
          TEST(the_next_writer_marks_dead_runs_interrupted),
          TEST(a_new_store_is_private))
