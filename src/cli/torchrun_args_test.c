/*
 * torchrun_args_test.c - unit tests for torchrun_args.c: --redirects and
 * --tee in both of torchrun's forms, the ranks filter, the console mask
 * they make together, and --rdzv-conf's join_timeout; malformed values
 * are refused with the option named.
 */
#include "torchrun_args.h"

#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "testing.h"

static char err[256];

static void stream_specs_in_both_forms(void)
{
    const char *good[] = {"0", "3", "0:1", "0:1,1:2", "12:3,0:0", NULL};
    for (const char **g = good; *g; g++)
        CHECK_EQ_INT(ss_torchrun_streams_check("--tee", *g, err, sizeof err),
                     0);
    const char *bad[] = {"", "4", "-1", "1,2", "0:", ":1", "0:4", "0:1,",
                         "0:1;1:2", "x", "1:1:1", "0000000000", NULL};
    for (const char **b = bad; *b; b++) {
        err[0] = '\0';
        CHECK_EQ_INT(ss_torchrun_streams_check("--redirects", *b, err,
                                               sizeof err), -1);
        CHECK(strstr(err, "--redirects") != NULL);
    }
    CHECK_EQ_INT(ss_torchrun_filter_check("0,2,3", err, sizeof err), 0);
    CHECK_EQ_INT(ss_torchrun_filter_check("1", err, sizeof err), 0);
    const char *badf[] = {"", ",", "0,", "a", "0;1", "1-3", NULL};
    for (const char **b = badf; *b; b++)
        CHECK_EQ_INT(ss_torchrun_filter_check(*b, err, sizeof err), -1);
}

/* Redirected and not teed: hidden; outside the filter: hidden; nothing
 * given, or --tee alone: no mask (every stream shown). */
static void the_console_mask(void)
{
    ss_torchrun_flags tf = {0};
    CHECK(ss_torchrun_echo_mask(&tf, 4) == NULL);
    tf.tee = "3";
    CHECK(ss_torchrun_echo_mask(&tf, 4) == NULL);
    tf.redirects = "3";
    tf.tee = "0:1,1:3";
    uint8_t *m = ss_torchrun_echo_mask(&tf, 4);
    REQUIRE(m != NULL);
    CHECK_EQ_INT(m[0], SS_ECHO_STDOUT);
    CHECK_EQ_INT(m[1], SS_ECHO_STDOUT | SS_ECHO_STDERR);
    CHECK_EQ_INT(m[2], 0);
    CHECK_EQ_INT(m[3], 0);
    free(m);
    tf = (ss_torchrun_flags){.redirects = "2:1,0:2"};
    m = ss_torchrun_echo_mask(&tf, 3);
    REQUIRE(m != NULL);
    CHECK_EQ_INT(m[0], SS_ECHO_STDOUT);
    CHECK_EQ_INT(m[1], SS_ECHO_STDOUT | SS_ECHO_STDERR);
    CHECK_EQ_INT(m[2], SS_ECHO_STDERR);
    free(m);
    tf = (ss_torchrun_flags){.ranks_filter = "0,2"};
    m = ss_torchrun_echo_mask(&tf, 3);
    REQUIRE(m != NULL);
    CHECK_EQ_INT(m[0], SS_ECHO_STDOUT | SS_ECHO_STDERR);
    CHECK_EQ_INT(m[1], 0);
    CHECK_EQ_INT(m[2], SS_ECHO_STDOUT | SS_ECHO_STDERR);
    free(m);
}

static void rdzv_conf_join_timeout(void)
{
    uint32_t ms = 7;
    int host = -1;
    CHECK_EQ_INT(ss_torchrun_rdzv_conf("read_timeout=60,is_host=True", &ms,
                                       &host, err, sizeof err), 0);
    CHECK_EQ_INT(ms, 7);
    CHECK_EQ_INT(host, 1);
    CHECK_EQ_INT(ss_torchrun_rdzv_conf("join_timeout=900,is_host=0", &ms,
                                       &host, err, sizeof err), 0);
    CHECK_EQ_INT(ms, 900000);
    CHECK_EQ_INT(host, 0);
    const char *bad[] = {"join_timeout", "=5", "a=", "join_timeout=0",
                         "join_timeout=1.5", "x=1,,y=2", "is_host=maybe",
                         NULL};
    for (const char **b = bad; *b; b++) {
        err[0] = '\0';
        CHECK_EQ_INT(ss_torchrun_rdzv_conf(*b, &ms, &host, err, sizeof err),
                     -1);
        CHECK(strstr(err, "--rdzv-conf") != NULL);
    }
}

TEST_LIST(TEST(stream_specs_in_both_forms), TEST(the_console_mask),
          TEST(rdzv_conf_join_timeout))
