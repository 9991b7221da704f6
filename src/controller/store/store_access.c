/*
 * store_access.c - permission problems of the store's files, said in a
 * person's words (store_access.h): each file SQLite needs (the database,
 * PATH-wal, PATH-shm) and their directory are checked with access(2) for
 * the operation at hand, the first refusal named with its owner and mode.
 */
#include "store_access.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "owned by NAME, mode 0644" of P into OUT. */
static void owner_of(const char *p, const struct stat *st, char *out,
                     size_t outlen)
{
    struct passwd *pw = getpwuid(st->st_uid);
    if (pw)
        snprintf(out, outlen, "%s is owned by %s, mode %04o", p, pw->pw_name,
                 (unsigned)(st->st_mode & 07777));
    else
        snprintf(out, outlen, "%s is owned by uid %u, mode %04o", p,
                 (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
}

/* 1 when P exists and access(P, MODE) is refused for permissions. */
static int refused(const char *p, int mode, struct stat *st)
{
    if (stat(p, st) != 0)
        return 0;
    return access(p, mode) != 0 && (errno == EACCES || errno == EROFS);
}

int ss_store_access_problem(const char *path, int write, char *out,
                            size_t outlen)
{
    const char *op = write ? "write" : "read";
    char dir_buf[PATH_MAX];
    snprintf(dir_buf, sizeof dir_buf, "%s", path);
    const char *dir = dirname(dir_buf);
    char who[PATH_MAX + 64];
    struct stat st;
    /* The directory must let us reach the files. */
    if (refused(dir, X_OK, &st)) {
        owner_of(dir, &st, who, sizeof who);
        snprintf(out, outlen, "cannot %s the store %s: Permission denied "
                 "(its directory %s)", op, path, who);
        return 1;
    }
    const char *suffix[3] = {"", "-wal", "-shm"};
    int missing = 0;
    for (int i = 0; i < 3; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        struct stat fst;
        if (stat(p, &fst) != 0) {
            missing |= i == 0 || write;
            continue;
        }
        /* SQLite writes the shared-memory file even to read. */
        int mode = write || i == 2 ? R_OK | W_OK : R_OK;
        if (refused(p, mode, &st)) {
            owner_of(p, &st, who, sizeof who);
            snprintf(out, outlen, "cannot %s the store %s: Permission "
                     "denied (%s)", op, path, who);
            return 1;
        }
    }
    /* A file to create: the directory must take it. */
    if (missing && write && refused(dir, W_OK | X_OK, &st)) {
        owner_of(dir, &st, who, sizeof who);
        struct stat fst;
        if (stat(path, &fst) == 0)
            snprintf(out, outlen, "cannot write the store %s: Permission "
                     "denied creating its write-ahead log beside it (its "
                     "directory %s)", path, who);
        else
            snprintf(out, outlen, "cannot create the store %s: Permission "
                     "denied (its directory %s)", path, who);
        return 1;
    }
    return 0;
}
