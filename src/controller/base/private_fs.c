/*
 * private_fs.c - creating directories 0700 and files 0600 whatever the
 * umask, and refusing what someone else could have planted
 * (private_fs.h).
 *
 * A new file is created with O_EXCL first, so the caller learns whether it
 * is new (a log that already has content gets a separator instead of being
 * truncated) and the mode is fixed with fchmod on the descriptor we
 * created, never on a path someone could have swapped.  An existing file
 * is opened with O_NOFOLLOW and O_NONBLOCK (a FIFO must not hang us) and
 * judged by fstat on that descriptor, so what is checked is what is used.
 */
#include "private_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "appendf.h"

/* Refuses PATH described by SB: sets errno EPERM and says why. */
static int refuse(const char *path, const struct stat *sb, const char *why,
                  char *err, size_t errlen)
{
    ss_set_err(err, errlen,
               "refusing %s: it %s (owner uid %ld, mode %04o); stepscope "
               "uses only files and directories of its own user (uid %ld) "
               "that nobody else can write",
               path, why, (long)sb->st_uid, (unsigned)(sb->st_mode & 07777),
               (long)geteuid());
    errno = EPERM;
    return -1;
}

/* Owned by the user, not writable by group or others: what a private file
 * or directory must be. */
static int check_private(const char *path, const struct stat *sb, char *err,
                         size_t errlen)
{
    if (sb->st_uid != geteuid())
        return refuse(path, sb, "belongs to another user", err, errlen);
    if (sb->st_mode & (S_IWGRP | S_IWOTH))
        return refuse(path, sb, "is writable by group or others", err,
                      errlen);
    return 0;
}

/* A directory above private files: owned by the user or root, not
 * writable by others unless sticky (then nobody else can swap entries). */
static int check_trusted_dir(const char *path, const struct stat *sb,
                             char *err, size_t errlen)
{
    if (sb->st_uid != geteuid() && sb->st_uid != 0)
        return refuse(path, sb, "belongs to another user", err, errlen);
    if ((sb->st_mode & S_IWOTH) && !(sb->st_mode & S_ISVTX))
        return refuse(path, sb, "is writable by others", err, errlen);
    return 0;
}

/* Checks the existing directory DIR: STRICT, a private directory (no
 * symlink, check_private); else a trusted one, through a symlink of the
 * user or root. */
static int check_existing_dir(const char *dir, int strict, char *err,
                              size_t errlen)
{
    struct stat sb;
    if (lstat(dir, &sb) != 0) {
        ss_set_err(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(sb.st_mode)) {
        if (strict)
            return refuse(dir, &sb, "is a symbolic link", err, errlen);
        if (sb.st_uid != geteuid() && sb.st_uid != 0)
            return refuse(dir, &sb, "is a symbolic link of another user",
                          err, errlen);
        if (stat(dir, &sb) != 0) {
            ss_set_err(err, errlen, "%s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (!S_ISDIR(sb.st_mode)) {
        ss_set_err(err, errlen, "%s: %s", dir, strerror(ENOTDIR));
        errno = ENOTDIR;
        return -1;
    }
    return strict ? check_private(dir, &sb, err, errlen)
                  : check_trusted_dir(dir, &sb, err, errlen);
}

/* Creates directory DIR with mode 0700, or checks the existing one. */
static int mkdir_private(const char *dir, int strict, char *err,
                         size_t errlen)
{
    if (mkdir(dir, SS_PRIVATE_DIR_MODE) == 0) {
        if (chmod(dir, SS_PRIVATE_DIR_MODE) == 0) /* the umask may cut it */
            return 0;
    } else if (errno == EEXIST) {
        return check_existing_dir(dir, strict, err, errlen);
    }
    ss_set_err(err, errlen, "cannot create %s: %s", dir, strerror(errno));
    return -1;
}

/* mkdir -p PATH; the last directory is checked as private when
 * STRICT_LAST, as trusted otherwise. */
static int mkdirs(const char *path, int strict_last, char *err,
                  size_t errlen)
{
    char buf[PATH_MAX];
    if (!path || !*path) {
        ss_set_err(err, errlen, "empty directory path");
        errno = EINVAL;
        return -1;
    }
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        ss_set_err(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }
    size_t end = strlen(buf);
    while (end > 1 && buf[end - 1] == '/')
        buf[--end] = '\0';
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (p[-1] != '/' &&
            mkdir_private(buf, saved == '\0' && strict_last, err, errlen) != 0)
            return -1;
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}

int ss_mkdirs_private(const char *path, char *err, size_t errlen)
{
    return mkdirs(path, 1, err, errlen);
}

int ss_mkdirs_private_parent(const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        ss_set_err(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    return mkdirs(buf, 0, err, errlen);
}

/* Judges the open descriptor FD of the existing file PATH. */
static int check_open_file(int fd, const char *path, char *err,
                           size_t errlen)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        ss_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode))
        return refuse(path, &sb, "is not a regular file", err, errlen);
    return check_private(path, &sb, err, errlen);
}

/* The reason of a failed open of an existing PATH. */
static void open_failed(const char *path, char *err, size_t errlen)
{
    int e = errno;
    if (e == ELOOP)
        ss_set_err(err, errlen,
                   "refusing %s: it is a symbolic link, and stepscope never "
                   "follows one to a private file", path);
    else
        ss_set_err(err, errlen, "cannot open %s: %s", path, strerror(e));
    errno = e;
}

int ss_open_private(const char *path, int flags, int *created, char *err,
                    size_t errlen)
{
    if (flags & O_TRUNC) {
        ss_set_err(err, errlen, "%s: O_TRUNC is not allowed", path);
        errno = EINVAL;
        return -1;
    }
    flags |= O_CLOEXEC | O_NOFOLLOW;
    int fd = open(path, flags | O_CREAT | O_EXCL, SS_PRIVATE_FILE_MODE);
    if (fd >= 0) {
        if (fchmod(fd, SS_PRIVATE_FILE_MODE) != 0) {
            int e = errno;
            ss_set_err(err, errlen, "cannot set the mode of %s: %s", path,
                       strerror(e));
            close(fd);
            errno = e;
            return -1;
        }
        if (created)
            *created = 1;
        return fd;
    }
    if (errno != EEXIST) {
        open_failed(path, err, errlen);
        return -1;
    }
    if (created)
        *created = 0;
    fd = open(path, flags | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        open_failed(path, err, errlen);
        return -1;
    }
    if (check_open_file(fd, path, err, errlen) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int ss_check_private_file(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT)
            return 0;
        ss_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(sb.st_mode))
        return refuse(path, &sb, "is a symbolic link", err, errlen);
    if (!S_ISREG(sb.st_mode))
        return refuse(path, &sb, "is not a regular file", err, errlen);
    return check_private(path, &sb, err, errlen);
}
