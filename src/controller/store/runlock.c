/*
 * runlock.c - the run lock: a controller holds it while it lives, readers
 * test it without taking it (runlock.h).
 *
 * Open file description locks (F_OFD_*) rather than classic POSIX locks:
 * they belong to the open file, not to the process, so closing some other
 * descriptor of the same file cannot drop them, and a test from the same
 * process (the controller's own HTTP API asking about its own run) sees the
 * lock as held.  The descriptor is O_CLOEXEC, so ranks never inherit it.
 */
#include "runlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private_fs.h"
#include "store_files.h"

#define LOCK_SUFFIX ".lock"

/* A write lock over the whole file. */
static struct flock whole_file(short type)
{
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    return fl;
}

/* Does this errno say the file system has no working locks? */
static int locks_unsupported(int e)
{
    return e == EINVAL || e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS;
}

int ss_run_lock_take(ss_run_lock *lk, const char *db_path, const char *uuid,
                     char *err, size_t errlen)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 64];
    memset(lk, 0, sizeof *lk);
    lk->fd = -1;
    if (ss_store_lock_dir(db_path, dir, sizeof dir) != 0 ||
        ss_store_lock_file(db_path, uuid, lk->path, sizeof lk->path) != 0) {
        snprintf(err, errlen, "run lock for %s: %s", db_path, strerror(errno));
        return -1;
    }
    if (ss_mkdirs_private(dir, err, errlen) != 0)
        return -1;
    /* Built under a hidden name and renamed once locked: a lock file under
     * its real name is never unlocked while its controller lives. */
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, uuid);
    int fd = ss_open_private(tmp, O_RDWR, NULL, err, errlen);
    if (fd < 0)
        return -1;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    dprintf(fd, "pid %ld\nhost %s\n", (long)getpid(), host);
    struct flock fl = whole_file(F_WRLCK);
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0 && !locks_unsupported(errno)) {
        snprintf(err, errlen, "cannot lock %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, lk->path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, lk->path,
                 strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    lk->fd = fd;
    lk->held = 1;
    return 0;
}

void ss_run_lock_release(ss_run_lock *lk)
{
    if (!lk || !lk->held)
        return;
    unlink(lk->path); /* first: a reader never finds it unlocked */
    close(lk->fd);
    lk->held = 0;
    lk->fd = -1;
}

/* The fallback without locks: the pid and host written in the lock file
 * FD.  1 unless the pid is on this host and gone. */
static int alive_by_pid(int fd)
{
    char buf[512], host[256] = "", mine[256] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    long pid = 0;
    if (sscanf(buf, "pid %ld\nhost %255s", &pid, host) != 2 || pid <= 0)
        return 1;
    gethostname(mine, sizeof mine - 1);
    if (strcmp(host, mine) != 0)
        return 1;
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

int ss_run_controller_alive(const char *db_path, const char *uuid)
{
    char path[PATH_MAX];
    if (ss_store_lock_file(db_path, uuid, path, sizeof path) != 0)
        return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : 1;
    struct flock fl = whole_file(F_WRLCK);
    int alive;
    if (fcntl(fd, F_OFD_GETLK, &fl) == 0)
        alive = fl.l_type != F_UNLCK;
    else
        alive = alive_by_pid(fd);
    close(fd);
    return alive;
}

const char *ss_run_status_now(const char *db_path, const char *uuid,
                              const char *stored_status)
{
    if (stored_status && strcmp(stored_status, "running") == 0 &&
        !ss_run_controller_alive(db_path, uuid))
        return "interrupted";
    return stored_status;
}

int ss_run_locks_sweep(const char *db_path)
{
    char dir[PATH_MAX];
    if (ss_store_lock_dir(db_path, dir, sizeof dir) != 0)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), k = strlen(LOCK_SUFFIX);
        if (e->d_name[0] == '.' || n <= k ||
            strcmp(e->d_name + n - k, LOCK_SUFFIX) != 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        /* Taking the lock proves nobody holds it; nobody can take it
         * after us, since its run's controller is gone. */
        struct flock fl = whole_file(F_WRLCK);
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0 &&
            unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}
