/*
 * sockdir_test.c - the ingest socket's directory is private and named for
 * its controller; the sweep removes what dead controllers left (a socket
 * that refuses connections) and nothing else: a live controller's
 * directory, one whose socket still accepts, one being set up, or
 * anything not named like ours.
 */
#include "sockdir.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Binds a socket at DIR/ctl.sock; with LISTEN it keeps accepting (the
 * descriptor is returned), else it is closed: a dead controller's socket. */
static int make_socket(const char *dir, int listening)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s/" SS_SOCKDIR_SOCKET, dir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (listening && listen(fd, 4) != 0))
        return -1;
    if (!listening) {
        close(fd);
        return 0;
    }
    return fd;
}

/* A pid that is certainly gone: a child that exited and was reaped. */
static long dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return (long)pid;
}

static void makes_a_private_directory_named_for_its_controller(void)
{
    char base[600], dir[PATH_MAX], err[256] = "", want[700];
    testing_tmp_path("runtime", base, sizeof base);
    REQUIRE(mkdir(base, 0700) == 0);
    setenv("XDG_RUNTIME_DIR", base, 1);
    mode_t old = umask(0);
    CHECK_EQ_INT(ss_sockdir_create(dir, sizeof dir, err, sizeof err), 0);
    umask(old);
    snprintf(want, sizeof want, "%s/stepscope-%ld-", base, (long)getpid());
    CHECK(strncmp(dir, want, strlen(want)) == 0);
    struct stat sb;
    REQUIRE(stat(dir, &sb) == 0);
    CHECK_EQ_INT(sb.st_mode & 07777, 0700);
    /* Our own live directory, with its socket, survives the next sweep. */
    int fd = make_socket(dir, 1);
    CHECK(fd >= 0);
    CHECK_EQ_INT(ss_sockdir_sweep(base), 0);
    CHECK(exists(dir));
    close(fd);
    ss_sockdir_remove(dir);
    CHECK(!exists(dir));
    ss_sockdir_remove("");
    char tiny[8];
    CHECK_EQ_INT(ss_sockdir_create(tiny, sizeof tiny, err, sizeof err), -1);
    CHECK(strstr(err, "too long") != NULL);
    unsetenv("XDG_RUNTIME_DIR");
}

static void sweeps_only_what_dead_controllers_left(void)
{
    char base[600], path[8][PATH_MAX];
    testing_tmp_path("sweep", base, sizeof base);
    REQUIRE(mkdir(base, 0700) == 0);
    long dead = dead_pid();
    /* 0: a dead controller's, its socket refusing: removed */
    snprintf(path[0], sizeof path[0], "%s/stepscope-%ld-aaaaaa", base, dead);
    /* 1: a dead pid but an accepting socket (another pid namespace): kept */
    snprintf(path[1], sizeof path[1], "%s/stepscope-%ld-bbbbbb", base, dead);
    /* 2: a live pid (ours) with a dead socket: kept */
    snprintf(path[2], sizeof path[2], "%s/stepscope-%ld-cccccc", base,
             (long)getpid());
    /* 3: a dead pid, no socket yet, just made (being set up): kept */
    snprintf(path[3], sizeof path[3], "%s/stepscope-%ld-dddddd", base, dead);
    /* 4: an older name without a pid, socket refusing: removed */
    snprintf(path[4], sizeof path[4], "%s/stepscope-eeeeee", base);
    /* 5: not ours by name: kept */
    snprintf(path[5], sizeof path[5], "%s/other-%ld-ffffff", base, dead);
    for (int i = 0; i < 6; i++)
        REQUIRE(mkdir(path[i], 0700) == 0);
    int listening = make_socket(path[1], 1);
    CHECK(listening >= 0);
    CHECK_EQ_INT(make_socket(path[0], 0), 0);
    CHECK_EQ_INT(make_socket(path[2], 0), 0);
    CHECK_EQ_INT(make_socket(path[4], 0), 0);
    CHECK_EQ_INT(make_socket(path[5], 0), 0);
    /* 6: a symlink named like ours, to a dead controller's directory: the
     * link is no directory of ours, and nothing is followed */
    snprintf(path[6], sizeof path[6], "%s/stepscope-%ld-gggggg", base, dead);
    REQUIRE(symlink(path[5], path[6]) == 0);

    CHECK_EQ_INT(ss_sockdir_sweep(base), 2);
    CHECK(!exists(path[0]));
    CHECK(exists(path[1]));
    CHECK(exists(path[2]));
    CHECK(exists(path[3]));
    CHECK(!exists(path[4]));
    CHECK(exists(path[5]));
    CHECK(exists(path[6]));
    close(listening);
    CHECK_EQ_INT(ss_sockdir_sweep("/nonexistent-base"), 0);
}

TEST_LIST(TEST(makes_a_private_directory_named_for_its_controller),
          TEST(sweeps_only_what_dead_controllers_left))
