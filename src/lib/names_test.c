/*
 * names_test.c - interning: stable ids, refused names, and a full table
 * (checked in a child process, since the table lives for the process).
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "names.h"
#include "stepscope.h"
#include "testing.h"

static void same_name_same_id_and_copy_back(void)
{
    ss_name_id a = ss__name_intern("forward");
    ss_name_id b = ss__name_intern("backward");
    CHECK(a >= 1 && b >= 1 && a != b);
    CHECK_EQ_INT(ss__name_intern("forward"), a);
    char out[SS_MAX_NAME_LEN + 1];
    REQUIRE(ss__name_copy(b, out) == 0);
    CHECK_STR(out, "backward");
    CHECK_EQ_INT(ss__name_copy(0, out), -1);
    CHECK_EQ_INT(ss__name_copy(SS_MAX_NAMES, out), -1);
}

static void bad_names_are_refused(void)
{
    char longest[SS_MAX_NAME_LEN + 2];
    memset(longest, 'x', sizeof longest);
    longest[SS_MAX_NAME_LEN + 1] = '\0';
    CHECK_EQ_INT(ss__name_intern(longest), 0);
    longest[SS_MAX_NAME_LEN] = '\0';
    CHECK(ss__name_intern(longest) != 0);
    CHECK_EQ_INT(ss__name_intern(NULL), 0);
    CHECK_EQ_INT(ss__name_intern(""), 0);
    CHECK_EQ_INT(ss__name_intern("tab\there"), 0);
    CHECK_EQ_INT(ss__name_intern("del\x7f"), 0);
}

static void full_table_returns_zero(void)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        /* Names interned by earlier tests hold the lowest ids. */
        int bad = 0;
        char name[16];
        ss_name_id last = 0, id, first_new = 0;
        for (int i = 0; i <= SS_MAX_NAMES; i++) {
            snprintf(name, sizeof name, "n%d", i);
            if (!(id = ss__name_intern(name)))
                break;
            bad += last && id != last + 1;
            if (!first_new)
                first_new = id;
            last = id;
        }
        bad += last != SS_MAX_NAMES;
        bad += ss__name_intern("one-too-many") != 0;
        bad += ss__name_intern("n0") != first_new; /* old names resolve */
        /* A call site keeps answering: its name's id, or 0 when refused,
         * every time. */
        for (int i = 0; i < 3; i++) {
            bad += SS_NAME("n1") != first_new + 1;
            bad += SS_NAME("refused-at-its-call-site") != 0;
        }
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_LIST(TEST(same_name_same_id_and_copy_back),
          TEST(bad_names_are_refused),
          TEST(full_table_returns_zero))
