/*
 * private_fs.c - creating directories 0700 and files 0600 whatever the
 * umask (private_fs.h).
 *
 * A new file is created with O_EXCL first, so the caller learns whether it
 * is new (a log that already has content gets a separator instead of being
 * truncated) and the mode is fixed with fchmod on the descriptor we
 * created, never on a path someone could have swapped.
 */
#include "private_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Creates directory DIR with mode 0700 unless it exists. */
static int mkdir_private(const char *dir)
{
    if (mkdir(dir, SS_PRIVATE_DIR_MODE) == 0)
        return chmod(dir, SS_PRIVATE_DIR_MODE); /* the umask may have cut it */
    if (errno != EEXIST)
        return -1;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int ss_mkdirs_private(const char *path)
{
    char buf[PATH_MAX];
    if (!path || !*path) {
        errno = EINVAL;
        return -1;
    }
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (p[-1] != '/' && mkdir_private(buf) != 0)
            return -1;
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}

int ss_mkdirs_private_parent(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    return ss_mkdirs_private(buf);
}

int ss_open_private(const char *path, int flags, int *created)
{
    if (flags & O_TRUNC) {
        errno = EINVAL;
        return -1;
    }
    flags |= O_CLOEXEC;
    int fd = open(path, flags | O_CREAT | O_EXCL, SS_PRIVATE_FILE_MODE);
    if (fd >= 0) {
        if (fchmod(fd, SS_PRIVATE_FILE_MODE) != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (created)
            *created = 1;
        return fd;
    }
    if (errno != EEXIST)
        return -1;
    if (created)
        *created = 0;
    return open(path, flags);
}
