/*
 * store_files.c - the one derivation of the paths a store owns beside it
 * (store_files.h).  The uuid in a lock path comes from the store, so it is
 * checked to be one plain file name.  The default store path is derived
 * here too, so nothing here depends on the store itself.
 */
#include "store_files.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* snprintf that fails with ENAMETOOLONG instead of truncating. */
static int path_printf(char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int path_printf(char *out, size_t outlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outlen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outlen) {
        if (outlen)
            out[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int ss_store_default_path(char *out, size_t outlen)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(out, outlen, "%s/stepscope/stepscope.db", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return -1;
        n = snprintf(out, outlen, "%s/.local/share/stepscope/stepscope.db",
                     home);
    }
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int ss_store_files_dir(const char *db_path, char *out, size_t outlen)
{
    char fallback[PATH_MAX], real[PATH_MAX];
    if (!db_path) {
        if (ss_store_default_path(fallback, sizeof fallback) != 0) {
            errno = ENOENT;
            return -1;
        }
        db_path = fallback;
    }
    /* One store, one directory, whatever name led to it. */
    if (realpath(db_path, real))
        db_path = real;
    return path_printf(out, outlen, "%s.d", db_path);
}

int ss_store_log_dir(const char *db_path, int64_t run_id, char *out,
                     size_t outlen)
{
    char dir[PATH_MAX];
    if (ss_store_files_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/logs/run-%" PRId64, dir, run_id);
}

int ss_store_profile_dir(const char *db_path, int64_t run_id, char *out,
                         size_t outlen)
{
    char dir[PATH_MAX];
    if (ss_store_files_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/profiles/run-%" PRId64, dir, run_id);
}

int ss_store_live_dir(const char *db_path, char *out, size_t outlen)
{
    char dir[PATH_MAX];
    if (ss_store_files_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/live", dir);
}

int ss_store_live_file(const char *db_path, int64_t run_id, char *out,
                       size_t outlen)
{
    char dir[PATH_MAX];
    if (ss_store_live_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/run-%" PRId64 ".json", dir, run_id);
}

int ss_store_lock_dir(const char *db_path, char *out, size_t outlen)
{
    char dir[PATH_MAX];
    if (ss_store_files_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/locks", dir);
}

int ss_store_lock_file(const char *db_path, const char *uuid, char *out,
                       size_t outlen)
{
    char dir[PATH_MAX];
    if (!uuid || !*uuid || uuid[0] == '.' || strchr(uuid, '/')) {
        errno = EINVAL;
        return -1;
    }
    if (ss_store_lock_dir(db_path, dir, sizeof dir) != 0)
        return -1;
    return path_printf(out, outlen, "%s/%s.lock", dir, uuid);
}
