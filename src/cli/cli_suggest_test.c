/*
 * cli_suggest_test.c - unit tests for cli_suggest.c: typos (a swap, a
 * letter missing, extra or wrong) find their word; words too far, empty
 * or too long find none; a long option is matched without its value.
 */
#include "cli_suggest.h"

#include "testing.h"

static const char *const words[] = {"run", "report", "runs", "top",
                                    "hang-timeout", "auto"};
#define N (sizeof words / sizeof words[0])

static void typos_find_their_word(void)
{
    CHECK_STR(ss_cli_suggest("atuo", words, N), "auto");       /* a swap */
    CHECK_STR(ss_cli_suggest("rnu", words, N), "run");
    CHECK_STR(ss_cli_suggest("reprot", words, N), "report");
    CHECK_STR(ss_cli_suggest("hang-timout", words, N), "hang-timeout");
    CHECK_STR(ss_cli_suggest("tpo", words, N), "top");
    CHECK_STR(ss_cli_suggest("runs", words, N), "runs");       /* exact */
}

static void far_or_odd_words_find_none(void)
{
    CHECK(ss_cli_suggest("xyzzy", words, N) == NULL);
    CHECK(ss_cli_suggest("", words, N) == NULL);
    CHECK(ss_cli_suggest(NULL, words, N) == NULL);
    char longword[100];
    memset(longword, 'a', sizeof longword - 1);
    longword[sizeof longword - 1] = '\0';
    CHECK(ss_cli_suggest(longword, words, N) == NULL);
}

static void options_without_their_value(void)
{
    static const struct option opts[] = {{"db", required_argument, NULL, 1},
                                         {"auto", no_argument, NULL, 2},
                                         {NULL, 0, NULL, 0}};
    CHECK_STR(ss_cli_suggest_option("--atuo", opts), "auto");
    CHECK_STR(ss_cli_suggest_option("--dv=x.db", opts), "db");
    CHECK(ss_cli_suggest_option("-x", opts) == NULL);
    CHECK(ss_cli_suggest_option("--", opts) == NULL);
}

TEST_LIST(TEST(typos_find_their_word), TEST(far_or_odd_words_find_none),
          TEST(options_without_their_value))
