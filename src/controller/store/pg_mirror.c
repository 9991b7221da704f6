/*
 * pg_mirror.c - the readers' local copy of a team database (pg_mirror.h).
 *
 * The copy is a SQLite store in WAL mode, created with the store's own
 * schema (store_schema.c) and marked in its meta table with the URI it
 * copies ('team', URI), which tells the reader that a run's status comes
 * from the server, not from a local controller's lock.  A refresh rewrites
 * it in one write transaction (pg_copy.c's ss_pg_load), so readers that
 * have it open see the old copy or the new one, never a mix.
 */
#include "pg_mirror.h"

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pg_conn.h"
#include "pg_copy.h"
#include "pg_schema.h"
#include "store_schema.h"

#define MAX_MIRRORS 4

typedef struct {
    char uri[1024];
    char dir[PATH_MAX];
    char path[PATH_MAX];
} mirror;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mirror mirrors[MAX_MIRRORS];
static int n_mirrors;

/* Removes every copy (atexit). */
static void remove_all(void)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < n_mirrors; i++) {
        char f[PATH_MAX + 16];
        for (size_t k = 0; k < sizeof suffix / sizeof suffix[0]; k++) {
            snprintf(f, sizeof f, "%s%s", mirrors[i].path, suffix[k]);
            unlink(f);
        }
        rmdir(mirrors[i].dir);
    }
}

/* Copies the database URI into the SQLite store at PATH (created when
 * missing).  Returns 0 or -1 with ERR. */
static int load(const char *uri, const char *path, char *err, size_t errlen)
{
    ss_pg *c = ss_pg_connect(uri, err, errlen);
    if (!c)
        return -1;
    int rc = -1;
    sqlite3 *db = NULL;
    if (ss_pg_schema_check(c, err, errlen) != 0)
        goto out;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot create the local copy %s: %s", path,
                 db ? sqlite3_errmsg(db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = "
                     "OFF", NULL, NULL, NULL) != SQLITE_OK ||
        ss_schema_migrate(db, path, err, errlen) != 0) {
        if (!err[0])
            snprintf(err, errlen, "cannot create the local copy %s: %s",
                     path, sqlite3_errmsg(db));
        goto out;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) "
                           "VALUES ('team', ?)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, uri, -1, SQLITE_STATIC);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (ss_pg_load(c, db, SS_PG_STALE_NS, err, errlen) < 0)
        goto out;
    rc = 0;
out:
    sqlite3_close(db);
    ss_pg_close(c);
    return rc;
}

int ss_pg_mirror_path(const char *uri, char *out, size_t outlen, char *err,
                      size_t errlen)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_mirrors; i++) {
        if (strcmp(mirrors[i].uri, uri) == 0) {
            snprintf(out, outlen, "%s", mirrors[i].path);
            pthread_mutex_unlock(&mu);
            return 0;
        }
    }
    int rc = -1;
    mirror *m = NULL;
    if (n_mirrors == MAX_MIRRORS) {
        snprintf(err, errlen, "more than %d team databases at once",
                 MAX_MIRRORS);
        goto out;
    }
    m = &mirrors[n_mirrors];
    memset(m, 0, sizeof *m);
    snprintf(m->uri, sizeof m->uri, "%s", uri);
    const char *tmp = getenv("TMPDIR");
    snprintf(m->dir, sizeof m->dir, "%s/stepscope-team-XXXXXX",
             tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(m->dir)) { /* mkdtemp makes it 0700 */
        snprintf(err, errlen, "cannot make a private directory for the "
                 "copy of %s: %s", uri, m->dir);
        goto out;
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/team.db", m->dir);
    snprintf(m->path, sizeof m->path, "%s", path);
    if (n_mirrors == 0)
        atexit(remove_all);
    n_mirrors++;
    if (load(uri, m->path, err, errlen) != 0)
        goto out;
    snprintf(out, outlen, "%s", m->path);
    rc = 0;
out:
    if (rc != 0 && m)
        m->uri[0] = '\0'; /* never found again; its files go at exit */
    pthread_mutex_unlock(&mu);
    return rc;
}

typedef struct {
    char uri[1024];
    char path[PATH_MAX];
    unsigned interval_s;
} follow_arg;

static void *follow_main(void *p)
{
    follow_arg *a = p;
    int down = 0;
    for (;;) {
        sleep(a->interval_s);
        char err[1024] = "";
        if (load(a->uri, a->path, err, sizeof err) != 0) {
            if (!down)
                fprintf(stderr, "stepscope: the team database cannot be "
                        "read now (%s); serving the last copy until it "
                        "can\n", err);
            down = 1;
        } else if (down) {
            fprintf(stderr, "stepscope: the team database can be read "
                    "again; serving its runs as of now\n");
            down = 0;
        }
    }
    return NULL;
}

int ss_pg_mirror_follow(const char *uri, unsigned interval_s, char *err,
                        size_t errlen)
{
    follow_arg *a = calloc(1, sizeof *a);
    if (!a || ss_pg_mirror_path(uri, a->path, sizeof a->path, err,
                                errlen) != 0) {
        if (!a)
            snprintf(err, errlen, "out of memory");
        free(a);
        return -1;
    }
    snprintf(a->uri, sizeof a->uri, "%s", uri);
    a->interval_s = interval_s ? interval_s : 1;
    pthread_t t;
    if (pthread_create(&t, NULL, follow_main, a) != 0) {
        snprintf(err, errlen, "cannot start the thread that refreshes the "
                 "copy of %s", uri);
        free(a);
        return -1;
    }
    pthread_detach(t);
    return 0;
}
