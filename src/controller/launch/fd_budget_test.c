/*
 * fd_budget_test.c - unit tests for fd_budget.c: the plan raises the soft
 * open-file limit to the room the ranks and the HTTP server may take, no
 * further than the hard limit and never down; it is not enough when even
 * the hard limit is below the need; and applied, it refuses under a hard
 * limit that is too low, changing nothing.
 */
#include "fd_budget.h"

#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "testing.h"

static void plans(void)
{
    ss_fd_plan p;
    ss_fd_plan_for(30, 1024, 1048576, 1024, &p);
    CHECK(p.enough);
    CHECK_EQ_INT(p.need, 128 + 12 * 30);
    CHECK_EQ_INT(p.room, 128 + 64 * 30);
    CHECK_EQ_INT(p.soft, 128 + 64 * 30 + 1024);
    ss_fd_plan_for(30, 256, 1000, 1024, &p); /* up to the hard limit */
    CHECK(p.enough);
    CHECK_EQ_INT(p.soft, 1000);
    ss_fd_plan_for(30, 256, 256, 1024, &p); /* 488 needed */
    CHECK(!p.enough);
    ss_fd_plan_for(2, 65536, 1048576, 1024, &p); /* never lowered */
    CHECK_EQ_INT(p.soft, 65536);
    ss_fd_plan_for(4, 1024, UINT64_MAX, 1024, &p); /* unlimited hard */
    CHECK(p.enough);
    CHECK_EQ_INT(p.soft, 128 + 64 * 4 + 1024);
}

static void applied(void)
{
    struct rlimit saved, low;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    low.rlim_cur = 200;
    low.rlim_max = saved.rlim_max; /* to be given back below */
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    ss_fd_plan p;
    char err[512] = "";
    CHECK_EQ_INT(ss_fd_budget_apply(2, &p, err, sizeof err), 0);
    struct rlimit now;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
    CHECK(now.rlim_cur == p.soft && p.soft > 200);
    CHECK_EQ_INT(p.soft_before, 200);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    /* the refusal needs a hard limit this process could not raise again:
     * planned, not applied */
    ss_fd_plan_for(100000, 1024, 4096, 1024, &p);
    CHECK(!p.enough);
}

TEST_LIST(TEST(plans), TEST(applied))
