/*
 * store_files_test.c - the paths a store owns: one directory per store
 * (two stores in one directory never share one), the same directory
 * whatever name leads to the store, clear errors for what does not fit.
 */
#include "store_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "testing.h"
#include "testing_tmp.h"

static void two_stores_in_one_directory_get_their_own(void)
{
    char a[600], b[600], real[PATH_MAX], want[PATH_MAX + 64], got[PATH_MAX];
    testing_tmp_path("a.db", a, sizeof a);
    testing_tmp_path("b.db", b, sizeof b);
    REQUIRE(realpath(testing_tmp_dir(), real) != NULL);

    CHECK_EQ_INT(ss_store_log_dir(a, 1, got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/a.db.d/logs/run-1", real);
    CHECK_STR(got, want);
    CHECK_EQ_INT(ss_store_log_dir(b, 1, got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/b.db.d/logs/run-1", real);
    CHECK_STR(got, want);
    CHECK_EQ_INT(ss_store_live_file(a, 7, got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/a.db.d/live/run-7.json", real);
    CHECK_STR(got, want);
    CHECK_EQ_INT(ss_store_live_dir(b, got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/b.db.d/live", real);
    CHECK_STR(got, want);
    CHECK_EQ_INT(ss_store_lock_file(a, "1234-abcd", got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/a.db.d/locks/1234-abcd.lock", real);
    CHECK_STR(got, want);
}

static void every_name_of_a_store_leads_to_one_directory(void)
{
    char db[600], link[600], dotted[700], d1[PATH_MAX], d2[PATH_MAX],
        d3[PATH_MAX];
    testing_tmp_path("real.db", db, sizeof db);
    testing_tmp_path("alias.db", link, sizeof link);
    snprintf(dotted, sizeof dotted, "%s/./real.db", testing_tmp_dir());
    int fd = open(db, O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(symlink(db, link) == 0);
    CHECK_EQ_INT(ss_store_files_dir(db, d1, sizeof d1), 0);
    CHECK_EQ_INT(ss_store_files_dir(link, d2, sizeof d2), 0);
    CHECK_EQ_INT(ss_store_files_dir(dotted, d3, sizeof d3), 0);
    CHECK_STR(d2, d1);
    CHECK_STR(d3, d1);
}

static void default_store_and_errors(void)
{
    char got[PATH_MAX], want[PATH_MAX];
    const char *old = getenv("XDG_DATA_HOME");
    setenv("XDG_DATA_HOME", "/nonexistent-xdg", 1);
    CHECK_EQ_INT(ss_store_live_dir(NULL, got, sizeof got), 0);
    CHECK_STR(got, "/nonexistent-xdg/stepscope/stepscope.db.d/live");
    if (old)
        setenv("XDG_DATA_HOME", old, 1);
    else
        unsetenv("XDG_DATA_HOME");

    char small[16];
    CHECK_EQ_INT(ss_store_log_dir("/a/rather/long/store.db", 1, small,
                                  sizeof small), -1);
    CHECK_EQ_INT(errno, ENAMETOOLONG);
    CHECK_STR(small, "");
    const char *bad[] = {"", ".hidden", "a/b", NULL};
    for (int i = 0; bad[i]; i++) {
        CHECK_EQ_INT(ss_store_lock_file("/x.db", bad[i], want, sizeof want),
                     -1);
        CHECK_EQ_INT(errno, EINVAL);
    }
    CHECK_EQ_INT(ss_store_lock_file("/x.db", NULL, want, sizeof want), -1);
}

TEST_LIST(TEST(two_stores_in_one_directory_get_their_own),
          TEST(every_name_of_a_store_leads_to_one_directory),
          TEST(default_store_and_errors))
