/*
 * sockdir.c - the ingest socket's private directory, and sweeping those
 * of dead controllers (sockdir.h).
 *
 * A directory is judged stale only on evidence that nothing uses it: the
 * pid in its name is gone *and* its socket refuses connections.  Either
 * alone is not enough: a pid means nothing to a controller in another pid
 * namespace sharing /tmp, and a missing socket is what a controller looks
 * like between creating its directory and binding.  Removal works on the
 * opened directory (O_NOFOLLOW, owner checked on the descriptor), so a
 * symlink or a swapped directory is never followed.
 */
#include "sockdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "private_fs.h"

#define PREFIX "stepscope-"

/* A directory without a socket is not judged before this age (seconds). */
#define SETUP_GRACE_S 60

/* $XDG_RUNTIME_DIR when writable, else /tmp. */
static const char *socket_base(void)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    return rt && *rt && access(rt, W_OK) == 0 ? rt : "/tmp";
}

/* Does the socket DIR/NAME refuse connections?  1 refused, 0 accepting
 * or unknown, -1 missing. */
static int socket_refuses(const char *dir, const char *name)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (snprintf(a.sun_path, sizeof a.sun_path, "%s/%s", dir, name) >=
        (int)sizeof a.sun_path)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return 0;
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    if (rc == 0)
        return 0;
    return e == ECONNREFUSED ? 1 : e == ENOENT ? -1 : 0;
}

/* The pid in a name "stepscope-PID-XXXXXX", or 0 (an older name). */
static long owner_pid(const char *name)
{
    const char *p = name + strlen(PREFIX);
    char *end;
    long pid = strtol(p, &end, 10);
    return end != p && *end == '-' && pid > 0 ? pid : 0;
}

/* Removes the entries of directory PATH (not its subdirectories) and the
 * directory, if it is ours. */
static int remove_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_uid != getuid()) {
        close(fd);
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    return rmdir(path);
}

int ss_sockdir_sweep(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, PREFIX, strlen(PREFIX)) != 0)
            continue;
        char path[PATH_MAX];
        struct stat sb;
        if (snprintf(path, sizeof path, "%s/%s", base, e->d_name) >=
                (int)sizeof path ||
            lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
            sb.st_uid != getuid())
            continue;
        long pid = owner_pid(e->d_name);
        if (pid && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue; /* its controller lives */
        int refuses = socket_refuses(path, SS_SOCKDIR_SOCKET);
        if (refuses == 0 ||
            (refuses < 0 && time(NULL) - sb.st_mtime < SETUP_GRACE_S))
            continue;
        if (remove_dir(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

int ss_sockdir_create(char *dir, size_t dirlen, char *err, size_t errlen)
{
    const char *base = socket_base();
    ss_sockdir_sweep(base);
    if (snprintf(dir, dirlen, "%s/" PREFIX "%ld-XXXXXX", base,
                 (long)getpid()) >= (int)dirlen) {
        snprintf(err, errlen, "socket directory name too long in %s", base);
        dir[0] = '\0';
        return -1;
    }
    if (!mkdtemp(dir) || chmod(dir, SS_PRIVATE_DIR_MODE) != 0) {
        snprintf(err, errlen, "mkdtemp(%s): %s", dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

void ss_sockdir_remove(const char *dir)
{
    if (dir && dir[0])
        remove_dir(dir);
}
