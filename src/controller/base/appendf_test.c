/*
 * appendf_test.c - ss_appendf keeps snprintf's contract across pieces: the
 * buffer stays terminated and the length counts the whole text.
 */
#include "appendf.h"
#include "testing.h"

#include <string.h>

static void pieces_join_and_count(void)
{
    char buf[16];
    size_t len = 0;
    ss_appendf(buf, sizeof buf, &len, "rank %d", 3);
    ss_appendf(buf, sizeof buf, &len, ", step %d", 12);
    CHECK_STR(buf, "rank 3, step 12");
    CHECK_EQ_INT(len, 15);
}

static void a_cut_text_still_counts(void)
{
    char buf[8];
    size_t len = 0;
    ss_appendf(buf, sizeof buf, &len, "%s", "abcdef");
    ss_appendf(buf, sizeof buf, &len, "%s", "ghijkl");
    CHECK_STR(buf, "abcdefg");
    CHECK_EQ_INT(len, 12);
    ss_appendf(buf, sizeof buf, &len, "%s", "more");
    CHECK_STR(buf, "abcdefg"); /* nothing written past the end */
    CHECK_EQ_INT(len, 16);
}

static void a_reason_goes_where_asked(void)
{
    char err[16] = "untouched";
    ss_set_err(NULL, 8, "x %d", 1);
    ss_set_err(err, 0, "x %d", 1);
    CHECK_STR(err, "untouched");
    ss_set_err(err, sizeof err, "bad port %d", 70000);
    CHECK_STR(err, "bad port 70000");
}

TEST_LIST(TEST(pieces_join_and_count), TEST(a_cut_text_still_counts),
          TEST(a_reason_goes_where_asked))
