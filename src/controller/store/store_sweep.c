/*
 * store_sweep.c - the sweep of dead runs: runs stored as `running` whose
 * controller is gone are marked `interrupted` (store.h,
 * ss_store_mark_interrupted).
 *
 * A controller that dies (SIGKILL, a crash, its host going down) never
 * ends its run.  Whether it still lives is its run lock (runlock.h); the
 * next controller that opens the store sweeps once, synchronously, before
 * registering its own run: each dead run gets its status, its `running`
 * ranks, an ended_at (the last time anything was heard of it) and an
 * `interrupted` event in one transaction that changes nothing when
 * another process got there first.  Then the lock files nobody holds are
 * removed.
 */
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

#include "clocks.h"
#include "runlock.h"
#include "store_state.h"

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
