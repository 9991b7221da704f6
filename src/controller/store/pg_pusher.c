/*
 * pg_pusher.c - a live run copied into a team database (pg_pusher.h).
 *
 * One thread, one server connection, one read-only connection to the
 * spool.  Each copy is ss_pg_push_run in replace mode: the server's rows
 * of the run are replaced in one transaction by the spool's as of one
 * moment, so a reader of the team database sees the run whole as of the
 * latest copy, and a copy that fails halfway leaves the previous one.
 * The state below is the thread's until ss_pg_pusher_finish has joined
 * it; stop is shared under mu.
 */
#include "pg_pusher.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"
#include "pg_conn.h"
#include "pg_copy.h"
#include "pg_schema.h"
#include "runlock.h"
#include "store_schema.h"

struct ss_pg_pusher {
    char uri[1024], spool[4096], uuid[40];
    unsigned interval_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop; /* under mu */

    ss_pg *conn;
    sqlite3 *src;
    int migrated;
    int down;              /* the last copy failed */
    unsigned copies, failed;
    int64_t server_id, rows;
    char first_error[512]; /* of the first failed copy */
    char last_error[512];
};

/* One copy of the run.  Returns 0 or -1 with ERR. */
static int copy_once(ss_pg_pusher *p, char *err, size_t errlen)
{
    if (!p->src) {
        int v = ss_schema_open_readonly(p->spool, &p->src, err, errlen);
        if (v < 0)
            return -1;
    }
    if (!p->conn) {
        p->conn = ss_pg_connect(p->uri, err, errlen);
        if (!p->conn)
            return -1;
        if (!p->migrated && ss_pg_schema_migrate(p->conn, err, errlen) < 0)
            goto lost;
        p->migrated = 1;
    }
    sqlite3_stmt *st = NULL;
    int64_t local_id = -1;
    char stored[32] = "";
    if (sqlite3_prepare_v2(p->src, "SELECT id, status FROM runs WHERE uuid "
                           "= ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, p->uuid, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            local_id = sqlite3_column_int64(st, 0);
            const unsigned char *s = sqlite3_column_text(st, 1);
            snprintf(stored, sizeof stored, "%s", s ? (const char *)s : "");
        }
    }
    sqlite3_finalize(st);
    if (local_id < 0) {
        snprintf(err, errlen, "run %s is not in %s", p->uuid, p->spool);
        return -1;
    }
    /* The status a reader of the spool sees: a run still `running` when
     * its controller has let go of it (the last copy, after a controller
     * that never ended the run) is `interrupted` (runlock.h). */
    const char *now = ss_run_status_now(p->spool, p->uuid, stored);
    ss_pg_push_result res;
    if (ss_pg_push_run(p->conn, p->src, local_id, 1,
                       strcmp(now, stored) != 0 ? now : NULL, &res, err,
                       errlen) != 0)
        goto lost;
    p->server_id = res.server_id;
    p->rows = res.rows;
    return 0;
lost:
    /* A failed copy may have lost the connection: the next one makes a
     * new one. */
    ss_pg_close(p->conn);
    p->conn = NULL;
    return -1;
}

/* Copies once and keeps the tallies; says on stderr when the server goes
 * away and when it is back. */
static void copy_counted(ss_pg_pusher *p)
{
    char err[512] = "";
    p->copies++;
    if (copy_once(p, err, sizeof err) == 0) {
        if (p->down)
            fprintf(stderr, "stepscope: the team database is back; the run "
                    "is copied to it again\n");
        p->down = 0;
        return;
    }
    p->failed++;
    snprintf(p->last_error, sizeof p->last_error, "%s", err);
    if (!p->first_error[0])
        snprintf(p->first_error, sizeof p->first_error, "%s", err);
    if (!p->down)
        fprintf(stderr, "stepscope: cannot copy the run to the team database "
                "(%s); the job goes on, the run stays in %s and is copied "
                "when the server is back\n", err, p->spool);
    p->down = 1;
}

static void *pusher_main(void *arg)
{
    ss_pg_pusher *p = arg;
    for (;;) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        copy_counted(p);
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int64_t took_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
                          (t1.tv_nsec - t0.tv_nsec) / 1000000;
        int64_t wait_ms = p->interval_ms;
        if (4 * took_ms > wait_ms)
            wait_ms = 4 * took_ms;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += wait_ms / 1000;
        until.tv_nsec += (wait_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&p->mu);
        while (!p->stop &&
               pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT)
            ;
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            return NULL;
    }
}

ss_pg_pusher *ss_pg_pusher_start(const char *uri, const char *spool,
                                 const char *uuid, char *err, size_t errlen)
{
    ss_pg_pusher *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(p->uri, sizeof p->uri, "%s", uri);
    snprintf(p->spool, sizeof p->spool, "%s", spool);
    snprintf(p->uuid, sizeof p->uuid, "%s", uuid);
    const char *ms = getenv("STEPSCOPE_PUSH_INTERVAL_MS");
    long v = ms ? strtol(ms, NULL, 10) : 0;
    p->interval_ms = v >= 100 && v <= 3600000 ? (unsigned)v
                                             : SS_PG_PUSH_INTERVAL_MS;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, pusher_main, p) != 0) {
        snprintf(err, errlen, "cannot start the thread that copies the run "
                 "to the team database");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return NULL;
    }
    return p;
}

int ss_pg_pusher_finish(ss_pg_pusher *p, FILE *out)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    /* The last copy: the spool holds the run's end now.  A server that is
     * restarting gets 10 s. */
    int ok = 0;
    for (int attempt = 0; attempt < 10 && !ok; attempt++) {
        if (attempt)
            sleep(1);
        unsigned failed = p->failed;
        copy_counted(p);
        ok = p->failed == failed;
    }
    if (ok && p->failed == 0)
        fprintf(out, "stepscope: the run is in the team database %s as run "
                "%" PRId64 " (%" PRId64 " rows)\n", p->uri, p->server_id,
                p->rows);
    else if (ok)
        fprintf(out, "stepscope: the run is in the team database %s as run "
                "%" PRId64 " (%" PRId64 " rows); %u of %u copies failed on "
                "the way (first: %s) and the server's copy lagged, nothing "
                "was lost\n", p->uri, p->server_id, p->rows, p->failed,
                p->copies, p->first_error);
    else
        fprintf(out, "stepscope: the run could not be copied to the team "
                "database %s (%u of %u copies failed; last: %s); it is kept "
                "in %s: `stepscope push --db %s --to %s` copies it\n",
                p->uri, p->failed, p->copies, p->last_error, p->spool,
                p->spool, p->uri);
    ss_pg_close(p->conn);
    sqlite3_close(p->src);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    return ok ? 0 : -1;
}
