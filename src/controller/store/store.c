/*
 * store.c - the store handle's life: opening (file checks, pragmas,
 * migrations, the writer's statements and thread), flushing, closing, and
 * the one synchronous write, a run's registration.
 *
 * WAL with synchronous=NORMAL makes a commit an append to the WAL without
 * fsync: it survives the process being killed (SIGKILL), though not the
 * machine losing power before the next checkpoint.  New files get 16 KiB
 * pages: rank_steps inserts are appends, and bigger pages halve the B-tree
 * work per row (docs/store.md has the measurements).  How a put reaches
 * the file is store_state.h's tour (store_put.c, store_writer.c, ...).
 *
 * Without a writer thread (ss_store_open with WRITER == 0) the queue is
 * applied on the caller's thread by ss_store_flush and ss_store_close.
 *
 * Threads: `mu` guards the queue, the counters and the flags; `dbmu`
 * serializes the connection between the writer's batches,
 * ss_store_begin_run and ss_store_mark_interrupted.  Writer-only state
 * (statements, retention tracks, the row buffers) is touched only while
 * holding dbmu.  The connection is in SQLite's serialized mode, so a
 * reader may use ss_store_db() from another thread without crashing
 * anything, but while a writer runs it may see a batch before its commit;
 * a live reader should open its own connection (WAL lets it read while
 * the writer writes).
 */
#include "store.h"
#include "store_access.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "private_fs.h"
#include "store_state.h"
#include "store_retention.h"
#include "store_schema.h"
#include "store_writer.h"

void ss_store_config_defaults(ss_store_config *cfg)
{
    cfg->flush_interval_ms = 250;
    cfg->queue_limit = 65536;
    cfg->recent_steps = 512;
    cfg->sample_every = 100;
    cfg->values_recent_steps = 64;
    cfg->values_queue_bytes = (uint64_t)64 << 20;
    cfg->rank_rows_per_step = 0; /* every rank's row */
    cfg->totals_interval_ms = 0; /* the totals with every batch */
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
    ss__store_sql_finalize(s->st);
    sqlite3_close(s->db);
    ss__tracks_free(s);
    for (size_t i = 0; i < sizeof s->rowjson / sizeof s->rowjson[0]; i++)
        ss_buf_free(&s->rowjson[i]);
    ss__json_keys_free(&s->keys);
    ss__json_keys_free(&s->skeys);
    ss__json_keys_free(&s->mkeys);
    free(s->path);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->dbmu);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->done);
    free(s);
}

int ss_store_file_check(const char *path, char *err, size_t errlen)
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
    if (ss_store_file_check(path, err, errlen) != 0)
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
    return ss__store_sql_prepare(s->db, path, s->st, err, errlen);
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
        ss_store_access_problem(path, 1, err, errlen); /* the likely cause */
        store_free(s);
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) == 0) {
        s->file_known = 1;
        s->file_dev = st.st_dev;
        s->file_ino = st.st_ino;
    }
    if (writer) {
        /* The writer blocks every signal, so signals meant for the
         * controller's loop are never delivered to it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        int rc = pthread_create(&s->writer, NULL, ss__store_writer_main, s);
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

int ss_store_file_moved(const ss_store *s)
{
    if (!s || !s->file_known || strcmp(s->path, ":memory:") == 0)
        return -1;
    struct stat st;
    if (stat(s->path, &st) != 0)
        return errno == ENOENT ? 1 : -1;
    return st.st_dev != s->file_dev || st.st_ino != s->file_ino;
}

int ss_store_save_again(ss_store *s, char *where, size_t wherelen, char *err,
                        size_t errlen)
{
    ss_store_flush(s);
    /* The path itself when it is free; else beside it, never over the
     * file that took it. */
    snprintf(where, wherelen, "%s", s->path);
    struct stat st;
    for (int n = 1; stat(where, &st) == 0 && n < 100; n++)
        snprintf(where, wherelen, "%s.saved-%d", s->path, n);
    if (stat(where, &st) == 0) {
        snprintf(err, errlen, "%s and the 99 names beside it (%s.saved-1 "
                 "to .saved-99) are taken", s->path, s->path);
        return -1;
    }
    pthread_mutex_lock(&s->dbmu);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?1", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(q, 1, where, -1, SQLITE_STATIC);
        rc = sqlite3_step(q);
    }
    if (rc != SQLITE_DONE)
        snprintf(err, errlen, "cannot write %s: %s", where,
                 sqlite3_errmsg(s->db));
    sqlite3_finalize(q);
    pthread_mutex_unlock(&s->dbmu);
    if (rc == SQLITE_DONE)
        chmod(where, 0600); /* a store is private, as when it was made */
    return rc == SQLITE_DONE ? 0 : -1;
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
        /* A batch that was already being written when asked may have left
         * the rank totals owed. */
        if (s->totals_owed) {
            s->totals_wanted = 1;
            pthread_cond_signal(&s->wake);
            while (s->totals_wanted)
                pthread_cond_wait(&s->done, &s->mu);
        }
    } else if (s->head || s->totals_owed) {
        ss__store_drain_locked(s);
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
    out->rank_steps_unpicked = s->stats.unpicked_rank_steps;
    out->vectors_dropped = s->stats.dropped_vectors;
    pthread_mutex_unlock(&s->mu);
}

struct sqlite3 *ss_store_db(ss_store *s)
{
    return s->db;
}
