/*
 * private_fs_test.c - directories 0700 and files 0600 whatever the umask,
 * existing ones left alone, and no truncation of an existing file.
 */
#include "private_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

static int mode_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

static void dirs_are_private_whatever_the_umask(void)
{
    char path[600], mid[600];
    mode_t old = umask(0); /* a umask that would leave them world-writable */
    testing_tmp_path("a/b/c", path, sizeof path);
    testing_tmp_path("a/b", mid, sizeof mid);
    CHECK_EQ_INT(ss_mkdirs_private(path), 0);
    CHECK_EQ_INT(mode_of(path), 0700);
    CHECK_EQ_INT(mode_of(mid), 0700);
    umask(0777); /* a umask that would leave them unusable */
    testing_tmp_path("a/b/c/d//e/", path, sizeof path);
    CHECK_EQ_INT(ss_mkdirs_private(path), 0);
    CHECK_EQ_INT(mode_of(path), 0700);
    umask(old);
    /* An existing directory keeps its mode. */
    CHECK_EQ_INT(chmod(mid, 0755), 0);
    CHECK_EQ_INT(ss_mkdirs_private(mid), 0);
    CHECK_EQ_INT(mode_of(mid), 0755);
    /* The parent of a file. */
    testing_tmp_path("p/q/store.db", path, sizeof path);
    CHECK_EQ_INT(ss_mkdirs_private_parent(path), 0);
    testing_tmp_path("p/q", mid, sizeof mid);
    CHECK_EQ_INT(mode_of(mid), 0700);
    CHECK_EQ_INT(ss_mkdirs_private_parent("no-slash.db"), 0);
}

static void a_file_in_the_way_is_an_error(void)
{
    char file[600], below[600];
    testing_tmp_path("plain", file, sizeof file);
    int fd = open(file, O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK_EQ_INT(ss_mkdirs_private(file), -1);
    CHECK_EQ_INT(errno, ENOTDIR);
    snprintf(below, sizeof below, "%s/x", file);
    CHECK_EQ_INT(ss_mkdirs_private(below), -1);
    CHECK_EQ_INT(ss_mkdirs_private(""), -1);
}

static void files_are_private_and_never_truncated(void)
{
    char path[600];
    testing_tmp_path("private.log", path, sizeof path);
    mode_t old = umask(0);
    int created = -1;
    int fd = ss_open_private(path, O_WRONLY | O_APPEND, &created);
    umask(old);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(created, 1);
    CHECK_EQ_INT(mode_of(path), 0600);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    CHECK_EQ_INT(write(fd, "first\n", 6), 6);
    close(fd);
    fd = ss_open_private(path, O_WRONLY | O_APPEND, &created);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(created, 0);
    CHECK_EQ_INT(write(fd, "second\n", 7), 7);
    close(fd);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 13);
    CHECK_EQ_INT(ss_open_private(path, O_WRONLY | O_TRUNC, NULL), -1);
    CHECK_EQ_INT(errno, EINVAL);
}

TEST_LIST(TEST(dirs_are_private_whatever_the_umask),
          TEST(a_file_in_the_way_is_an_error),
          TEST(files_are_private_and_never_truncated))
