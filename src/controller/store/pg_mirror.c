/*
 * pg_mirror.c - the readers' local copy of a team database (pg_mirror.h).
 *
 * The copy is a SQLite store in WAL mode, created with the store's own
 * schema (store_schema.c) and marked in its meta table with the URI it
 * copies ('team', URI), which tells the reader that a run's status comes
 * from the server, not from a local controller's lock.  A refresh brings
 * it up to date in one write transaction (pg_copy.c's ss_pg_load: only
 * the runs copied to the server since), so readers that have it open see
 * the old copy or the new one, never a mix.
 *
 * It is kept between commands in the user's cache,
 * $XDG_CACHE_HOME/stepscope/team/HASH.db (~/.cache/... without it; HASH
 * of the URI, its role included), private like a store (private_fs.h), so
 * a command takes only what changed since the last one.  With
 * STEPSCOPE_TEAM_CACHE=off, or without a home, it is a temporary copy
 * removed at exit.  Several processes may refresh one copy at once: SQLite
 * serialises their transactions.
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

#include "fnv1a.h"
#include "pg_conn.h"
#include "pg_copy.h"
#include "pg_schema.h"
#include "private_fs.h"
#include "store.h"
#include "store_schema.h"

#define MAX_MIRRORS 4

typedef struct {
    char uri[1024];
    char dir[PATH_MAX]; /* "" for a copy in the cache (kept at exit) */
    char path[PATH_MAX];
} mirror;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mirror mirrors[MAX_MIRRORS];
static int n_mirrors;

/* Removes the copy at PATH and SQLite's files beside it. */
static void remove_copy(const char *path)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t k = 0; k < sizeof suffix / sizeof suffix[0]; k++) {
        char f[PATH_MAX + 16];
        snprintf(f, sizeof f, "%s%s", path, suffix[k]);
        unlink(f);
    }
}

/* Removes every copy (atexit). */
static void remove_all(void)
{
    for (int i = 0; i < n_mirrors; i++) {
        if (!mirrors[i].dir[0])
            continue;
        remove_copy(mirrors[i].path);
        rmdir(mirrors[i].dir);
    }
}

/* Brings the SQLite store at PATH (created when missing) up to date with
 * the database URI.  Returns 0, -1 with ERR, or -2 with ERR when the local
 * copy itself cannot be opened or migrated (damaged, or of a newer
 * stepscope). */
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
        rc = -2;
        goto out;
    }
    /* another process may be refreshing the same cached copy */
    sqlite3_busy_timeout(db, 120000);
    if (sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = "
                     "OFF", NULL, NULL, NULL) != SQLITE_OK ||
        ss_schema_migrate(db, path, err, errlen) != 0) {
        if (!err[0])
            snprintf(err, errlen, "cannot create the local copy %s: %s",
                     path, sqlite3_errmsg(db));
        rc = -2;
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

/* The cached copy of URI into OUT (its directory made private): 1, or 0
 * when there is none to use (STEPSCOPE_TEAM_CACHE=off, no home, the
 * directory refused: then a temporary copy). */
static int cached_copy(const char *uri, char *out, size_t outlen)
{
    const char *off = getenv("STEPSCOPE_TEAM_CACHE");
    if (off && strcmp(off, "off") == 0)
        return 0;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[PATH_MAX];
    if (xdg && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/stepscope/team", xdg);
    else if (home && home[0] == '/')
        snprintf(dir, sizeof dir, "%s/.cache/stepscope/team", home);
    else
        return 0;
    char err[512];
    if (ss_mkdirs_private(dir, err, sizeof err) != 0) {
        fprintf(stderr, "stepscope: not keeping a copy of the team database "
                "in the cache: %s\n", err);
        return 0;
    }
    uint64_t h = ss_fnv1a(SS_FNV1A_BASIS, uri, strlen(uri));
    return snprintf(out, outlen, "%s/%016llx.db", dir,
                    (unsigned long long)h) < (int)outlen;
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
    if (cached_copy(uri, m->path, sizeof m->path)) {
        n_mirrors++;
        if (ss_store_file_check(m->path, err, errlen) != 0)
            goto out;
        int got = load(uri, m->path, err, errlen);
        if (got == -2) {
            /* damaged, or of another stepscope: taken anew, once */
            remove_copy(m->path);
            err[0] = '\0';
            got = ss_store_file_check(m->path, err, errlen) != 0
                      ? -1
                      : load(uri, m->path, err, errlen);
        }
        if (got != 0)
            goto out;
        snprintf(out, outlen, "%s", m->path);
        rc = 0;
        goto out;
    }
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
    static int removal_registered;
    if (!removal_registered)
        atexit(remove_all);
    removal_registered = 1;
    n_mirrors++;
    if (load(uri, m->path, err, errlen) < 0)
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
