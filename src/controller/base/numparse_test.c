/*
 * numparse_test.c - unit tests for ss_parse_i64: what is a number, what is
 * not (white space, signs, trailing bytes, empty), range limits and
 * overflow at both ends of int64_t.
 */
#include "numparse.h"

#include "testing.h"

static int64_t parsed(const char *s, int64_t min, int64_t max, int *rc)
{
    int64_t v = 12345;
    *rc = ss_parse_i64(s, min, max, &v);
    return v;
}

static void accepts_plain_decimals(void)
{
    int rc;
    CHECK_EQ_INT(parsed("0", 0, 100, &rc), 0);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(parsed("10", 0, 100, &rc), 10);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(parsed("007", 0, 100, &rc), 7);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(parsed("-42", -100, 100, &rc), -42);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(parsed("-0", 0, 100, &rc), 0);
    CHECK_EQ_INT(rc, 0);
}

static void rejects_what_strtol_accepts(void)
{
    static const char *const bad[] = {
        "", " 10", "10 ", "\t10", "10\n", "+10", "10abc", "1e3", "0x10",
        "10.0", "-", "--1", "- 1", "1,000", "١٠", NULL};
    for (int i = 0; bad[i]; i++) {
        int rc;
        int64_t v = parsed(bad[i], INT64_MIN, INT64_MAX, &rc);
        if (rc != -1)
            fprintf(stderr, "  accepted '%s'\n", bad[i]);
        CHECK_EQ_INT(rc, -1);
        CHECK_EQ_INT(v, 12345); /* *OUT untouched */
    }
    int64_t v = 1;
    CHECK_EQ_INT(ss_parse_i64(NULL, 0, 10, &v), -1);
    CHECK_EQ_INT(v, 1);
}

static void enforces_the_range(void)
{
    int rc;
    parsed("10000", 1, 10000, &rc);
    CHECK_EQ_INT(rc, 0);
    parsed("10001", 1, 10000, &rc);
    CHECK_EQ_INT(rc, -1);
    parsed("0", 1, 10000, &rc);
    CHECK_EQ_INT(rc, -1);
    parsed("-1", 0, 10, &rc);
    CHECK_EQ_INT(rc, -1);
}

static void detects_overflow_at_both_ends(void)
{
    int rc;
    CHECK(parsed("9223372036854775807", INT64_MIN, INT64_MAX, &rc) ==
          INT64_MAX);
    CHECK_EQ_INT(rc, 0);
    parsed("9223372036854775808", INT64_MIN, INT64_MAX, &rc);
    CHECK_EQ_INT(rc, -1);
    CHECK(parsed("-9223372036854775808", INT64_MIN, INT64_MAX, &rc) ==
          INT64_MIN);
    CHECK_EQ_INT(rc, 0);
    parsed("-9223372036854775809", INT64_MIN, INT64_MAX, &rc);
    CHECK_EQ_INT(rc, -1);
    parsed("99999999999999999999999999", INT64_MIN, INT64_MAX, &rc);
    CHECK_EQ_INT(rc, -1);
    CHECK_EQ_INT(parsed("00000000000000000000000001", 0, 10, &rc), 1);
    CHECK_EQ_INT(rc, 0);
}

TEST_LIST(TEST(accepts_plain_decimals), TEST(rejects_what_strtol_accepts),
          TEST(enforces_the_range), TEST(detects_overflow_at_both_ends))
