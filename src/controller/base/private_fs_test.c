/*
 * private_fs_test.c - directories 0700 and files 0600 whatever the umask,
 * existing private ones left alone, no truncation of an existing file, and
 * what someone else could have planted refused: a symbolic link, a FIFO, a
 * file or directory writable by group or others, and (as root, where the
 * test can chown to another uid) another user's file or directory.
 */
#include "private_fs.h"

#include <errno.h>
#include <string.h>
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
    CHECK_EQ_INT(ss_mkdirs_private(path, NULL, 0), 0);
    CHECK_EQ_INT(mode_of(path), 0700);
    CHECK_EQ_INT(mode_of(mid), 0700);
    umask(0777); /* a umask that would leave them unusable */
    testing_tmp_path("a/b/c/d//e/", path, sizeof path);
    CHECK_EQ_INT(ss_mkdirs_private(path, NULL, 0), 0);
    CHECK_EQ_INT(mode_of(path), 0700);
    umask(old);
    /* An existing directory keeps its mode. */
    CHECK_EQ_INT(chmod(mid, 0755), 0);
    CHECK_EQ_INT(ss_mkdirs_private(mid, NULL, 0), 0);
    CHECK_EQ_INT(mode_of(mid), 0755);
    /* The parent of a file. */
    testing_tmp_path("p/q/store.db", path, sizeof path);
    CHECK_EQ_INT(ss_mkdirs_private_parent(path, NULL, 0), 0);
    testing_tmp_path("p/q", mid, sizeof mid);
    CHECK_EQ_INT(mode_of(mid), 0700);
    CHECK_EQ_INT(ss_mkdirs_private_parent("no-slash.db", NULL, 0), 0);
}

static void a_file_in_the_way_is_an_error(void)
{
    char file[600], below[600];
    testing_tmp_path("plain", file, sizeof file);
    int fd = open(file, O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK_EQ_INT(ss_mkdirs_private(file, NULL, 0), -1);
    CHECK_EQ_INT(errno, ENOTDIR);
    snprintf(below, sizeof below, "%s/x", file);
    CHECK_EQ_INT(ss_mkdirs_private(below, NULL, 0), -1);
    CHECK_EQ_INT(ss_mkdirs_private("", NULL, 0), -1);
}

static void files_are_private_and_never_truncated(void)
{
    char path[600];
    testing_tmp_path("private.log", path, sizeof path);
    mode_t old = umask(0);
    int created = -1;
    int fd = ss_open_private(path, O_WRONLY | O_APPEND, &created, NULL, 0);
    umask(old);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(created, 1);
    CHECK_EQ_INT(mode_of(path), 0600);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    CHECK_EQ_INT(write(fd, "first\n", 6), 6);
    close(fd);
    fd = ss_open_private(path, O_WRONLY | O_APPEND, &created, NULL, 0);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(created, 0);
    CHECK_EQ_INT(write(fd, "second\n", 7), 7);
    close(fd);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 13);
    CHECK_EQ_INT(ss_open_private(path, O_WRONLY | O_TRUNC, NULL, NULL, 0), -1);
    CHECK_EQ_INT(errno, EINVAL);
}

/* An uid that is not ours: nobody's. */
#define OTHER_UID 65534

static void write_file(const char *path, const char *text, int mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    CHECK_EQ_INT(write(fd, text, strlen(text)), (int)strlen(text));
    CHECK_EQ_INT(fchmod(fd, mode), 0);
    close(fd);
}

static long size_of(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* A log planted as a symbolic link to a file of ours is refused, and the
 * file it names is not touched. */
static void a_symlinked_file_is_refused(void)
{
    char victim[600], link[600], msg[512] = "";
    testing_tmp_path("victim.txt", victim, sizeof victim);
    testing_tmp_path("planted.log", link, sizeof link);
    write_file(victim, "mine\n", 0600);
    REQUIRE(symlink(victim, link) == 0);
    CHECK_EQ_INT(ss_open_private(link, O_WRONLY | O_APPEND, NULL, msg,
                                 sizeof msg), -1);
    CHECK_EQ_INT(errno, ELOOP);
    CHECK(strstr(msg, link) && strstr(msg, "symbolic link"));
    CHECK_EQ_INT(size_of(victim), 5);
    /* A dangling one is not followed to create its target either. */
    char dangling[600], target[600];
    testing_tmp_path("dangling.log", dangling, sizeof dangling);
    testing_tmp_path("would-be-created", target, sizeof target);
    REQUIRE(symlink(target, dangling) == 0);
    CHECK_EQ_INT(ss_open_private(dangling, O_WRONLY, NULL, NULL, 0), -1);
    CHECK_EQ_INT(access(target, F_OK), -1);
}

/* A FIFO is refused at once (no open that waits for a writer), and a file
 * of ours that group or others may write is refused with its mode. */
static void fifos_and_loose_files_are_refused(void)
{
    char fifo[600], loose[600], msg[512] = "";
    testing_tmp_path("fifo.log", fifo, sizeof fifo);
    REQUIRE(mkfifo(fifo, 0600) == 0);
    CHECK_EQ_INT(ss_open_private(fifo, O_RDWR, NULL, msg, sizeof msg), -1);
    CHECK(strstr(msg, "not a regular file"));
    CHECK_EQ_INT(ss_open_private(fifo, O_WRONLY, NULL, NULL, 0), -1);
    testing_tmp_path("loose.log", loose, sizeof loose);
    write_file(loose, "x", 0666);
    CHECK_EQ_INT(ss_open_private(loose, O_WRONLY | O_APPEND, NULL, msg,
                                 sizeof msg), -1);
    CHECK_EQ_INT(errno, EPERM);
    CHECK(strstr(msg, loose) && strstr(msg, "mode 0666") &&
          strstr(msg, "writable by group or others"));
    CHECK_EQ_INT(ss_check_private_file(loose, NULL, 0), -1);
    /* Readable by others is the owner's choice; missing is fine. */
    CHECK_EQ_INT(chmod(loose, 0644), 0);
    int fd = ss_open_private(loose, O_WRONLY | O_APPEND, NULL, NULL, 0);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(ss_check_private_file(loose, NULL, 0), 0);
    testing_tmp_path("missing.db-wal", loose, sizeof loose);
    CHECK_EQ_INT(ss_check_private_file(loose, NULL, 0), 0);
}

/* A directory that others may write, or a symbolic link where a private
 * directory should be, is refused; a sticky world-writable one (/tmp) may
 * hold a store. */
static void loose_and_symlinked_dirs_are_refused(void)
{
    char dir[600], below[600], link[600], msg[512] = "";
    testing_tmp_path("open-dir", dir, sizeof dir);
    REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
    CHECK_EQ_INT(ss_mkdirs_private(dir, msg, sizeof msg), -1);
    CHECK_EQ_INT(errno, EPERM);
    CHECK(strstr(msg, dir) && strstr(msg, "mode 0777"));
    /* Below it: anyone could swap what we create. */
    testing_tmp_path("open-dir/logs/run-1", below, sizeof below);
    CHECK_EQ_INT(ss_mkdirs_private(below, msg, sizeof msg), -1);
    CHECK(strstr(msg, "writable by others"));
    CHECK_EQ_INT(access(below, F_OK), -1);
    testing_tmp_path("open-dir/store.db", below, sizeof below);
    CHECK_EQ_INT(ss_mkdirs_private_parent(below, NULL, 0), -1);
    /* Sticky: others cannot swap our entries. */
    CHECK_EQ_INT(chmod(dir, 01777), 0);
    CHECK_EQ_INT(ss_mkdirs_private_parent(below, NULL, 0), 0);
    testing_tmp_path("open-dir/store.db.d/logs", below, sizeof below);
    CHECK_EQ_INT(ss_mkdirs_private(below, NULL, 0), 0);
    CHECK_EQ_INT(mode_of(below), 0700);
    /* Group-writable, ours: refused as a private directory. */
    testing_tmp_path("group-dir", dir, sizeof dir);
    REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0770) == 0);
    CHECK_EQ_INT(ss_mkdirs_private(dir, NULL, 0), -1);
    /* A symbolic link to a private directory of ours. */
    testing_tmp_path("real-dir", dir, sizeof dir);
    testing_tmp_path("link-dir", link, sizeof link);
    REQUIRE(mkdir(dir, 0700) == 0 && symlink(dir, link) == 0);
    CHECK_EQ_INT(ss_mkdirs_private(link, msg, sizeof msg), -1);
    CHECK(strstr(msg, "symbolic link"));
}

/* As root: a file, a directory and a parent directory of another user are
 * refused, with the owner named; the planted file is not written. */
static void another_users_files_are_refused(void)
{
    if (geteuid() != 0) {
        printf("  (skipped: needs root to chown to another uid)\n");
        return;
    }
    char path[600], dir[600], below[600], msg[512] = "";
    testing_tmp_path("theirs.db", path, sizeof path);
    write_file(path, "", 0600);
    REQUIRE(chown(path, OTHER_UID, OTHER_UID) == 0);
    CHECK_EQ_INT(ss_open_private(path, O_RDWR, NULL, msg, sizeof msg), -1);
    CHECK_EQ_INT(errno, EPERM);
    CHECK(strstr(msg, path) && strstr(msg, "another user") &&
          strstr(msg, "uid 65534"));
    CHECK_EQ_INT(ss_check_private_file(path, NULL, 0), -1);
    testing_tmp_path("their-dir", dir, sizeof dir);
    REQUIRE(mkdir(dir, 0700) == 0 && chown(dir, OTHER_UID, OTHER_UID) == 0);
    CHECK_EQ_INT(ss_mkdirs_private(dir, msg, sizeof msg), -1);
    CHECK(strstr(msg, "another user"));
    testing_tmp_path("their-dir/logs", below, sizeof below);
    CHECK_EQ_INT(ss_mkdirs_private(below, NULL, 0), -1);
    CHECK_EQ_INT(access(below, F_OK), -1);
    testing_tmp_path("their-dir/x.db", below, sizeof below);
    CHECK_EQ_INT(ss_mkdirs_private_parent(below, NULL, 0), -1);
}

TEST_LIST(TEST(dirs_are_private_whatever_the_umask),
          TEST(a_file_in_the_way_is_an_error),
          TEST(files_are_private_and_never_truncated),
          TEST(a_symlinked_file_is_refused),
          TEST(fifos_and_loose_files_are_refused),
          TEST(loose_and_symlinked_dirs_are_refused),
          TEST(another_users_files_are_refused))
