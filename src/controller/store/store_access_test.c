/*
 * store_access_test.c - unit tests for store_access.c: a store file the
 * user may not write, a directory that refuses a new store, a file the
 * user may not read, each named with the operation, "Permission denied"
 * and the owner; nothing said when permissions are not the reason.  Root
 * passes every permission check, so as root the checks run in a child
 * that dropped to the user nobody (65534).
 */
#include "store_access.h"

#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

/* ss_store_access_problem(PATH, FOR_WRITE) in a child, as a user other
 * than the files' owner: its return value, its text in OUT. */
static int as_other_user(const char *path, int for_write, char *out,
                         size_t outlen)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (geteuid() == 0 &&
            (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
             setresuid(65534, 65534, 65534) != 0))
            _exit(99);
        char text[1024] = "";
        int rc = ss_store_access_problem(path, for_write, text, sizeof text);
        if (write(fds[1], text, strlen(text)) < 0)
            _exit(98);
        _exit(rc);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], out, outlen - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A file of MODE at PATH. */
static void make_file(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(chmod(path, mode) == 0);
}

static void permission_problems_are_named(void)
{
    /* Reachable by the other user; what is in it is not theirs. */
    REQUIRE(chmod(testing_tmp_dir(), 0755) == 0);
    char db[600], ro[600], in_ro[700], open_db[600], text[1024], want[1400];
    testing_tmp_path("theirs.db", db, sizeof db);
    make_file(db, 0444);
    snprintf(want, sizeof want, "cannot write the store %s: Permission "
             "denied (%s is owned by ", db, db);
    CHECK_EQ_INT(as_other_user(db, 1, text, sizeof text), 1);
    CHECK(strncmp(text, want, strlen(want)) == 0);
    CHECK(strstr(text, ", mode 0444)") != NULL);
    /* Reading it is allowed. */
    CHECK_EQ_INT(as_other_user(db, 0, text, sizeof text), 0);
    CHECK_STR(text, "");

    testing_tmp_path("ro", ro, sizeof ro);
    mkdir(ro, 0700);
    REQUIRE(chmod(ro, 0555) == 0);
    snprintf(in_ro, sizeof in_ro, "%s/new.db", ro);
    snprintf(want, sizeof want, "cannot create the store %s: Permission "
             "denied (its directory %s is owned by ", in_ro, ro);
    CHECK_EQ_INT(as_other_user(in_ro, 1, text, sizeof text), 1);
    CHECK(strncmp(text, want, strlen(want)) == 0);

    make_file(db, 0600); /* not even readable */
    snprintf(want, sizeof want, "cannot read the store %s: Permission "
             "denied", db);
    CHECK_EQ_INT(as_other_user(db, 0, text, sizeof text), 1);
    CHECK(strncmp(text, want, strlen(want)) == 0);

    /* Not permissions: a store that does not exist yet in a directory
     * anyone may write. */
    testing_tmp_path("open", open_db, sizeof open_db);
    mkdir(open_db, 0700);
    REQUIRE(chmod(open_db, 01777) == 0); /* not the umask's */
    strncat(open_db, "/s.db", sizeof open_db - strlen(open_db) - 1);
    CHECK_EQ_INT(as_other_user(open_db, 1, text, sizeof text), 0);
    CHECK_EQ_INT(as_other_user(open_db, 0, text, sizeof text), 0);
    chmod(ro, 0755); /* so that the clean-up may remove it */
}

TEST_LIST(TEST(permission_problems_are_named))
