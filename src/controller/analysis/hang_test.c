/*
 * hang_test.c - unit tests for hang.c: the timeout (start-up, fixed,
 * adaptive), one finding per stall, and who is named behind for each kind
 * of hang: a rank busy elsewhere while the others wait in a collective, a
 * silent (stopped) rank, a rank at another collective kind or number, a
 * rank that completed fewer steps, and every rank in the same state.
 */
#include "hang.h"

#include <stdio.h>
#include <string.h>

#include "testing.h"

#define S 1000000000LL

static ss_hang fresh(ss_dur_ns fixed)
{
    ss_hang_config cfg;
    ss_hang_config_defaults(&cfg);
    cfg.timeout = fixed;
    ss_hang h;
    ss_hang_init(&h, &cfg, 0);
    return h;
}

static ss_hang_rank waiting(int64_t step, const char *coll, uint64_t seq,
                            ss_mono_ns heard)
{
    ss_hang_rank r;
    memset(&r, 0, sizeof r);
    r.live = 1;
    r.last_step = step - 1;
    r.cur_step = step;
    snprintf(r.phase, sizeof r.phase, "backward");
    snprintf(r.collective, sizeof r.collective, "%s", coll);
    r.coll_seq = seq;
    r.coll_active = 1;
    r.heard_at = heard;
    return r;
}

static void timeouts(void)
{
    ss_hang h = fresh(0);
    CHECK_EQ_INT(ss_hang_timeout(&h), 600 * S); /* start-up */
    ss_hang_progress(&h, 0, S / 10, 1 * S);
    CHECK_EQ_INT(ss_hang_timeout(&h), 30 * S); /* the floor */
    for (int i = 1; i < 200; i++)
        ss_hang_progress(&h, (uint64_t)i, i == 150 ? 9 * S : 4 * S, 2 * S);
    /* p99 of the last 128: 9 s of one slow step lies in the top 1 %?  One
     * in 128 is below 1 %, so p99 is the 4 s of the rest: 40 s. */
    CHECK_EQ_INT(ss_hang_timeout(&h), 40 * S);
    ss_hang_progress(&h, 200, 9 * S, 3 * S);
    CHECK_EQ_INT(ss_hang_timeout(&h), 90 * S); /* two in 128: over 1 % */

    h = fresh(3 * S);
    CHECK_EQ_INT(ss_hang_timeout(&h), 600 * S); /* start-up: no work yet */
    ss_hang_progress(&h, 0, SS_MISSING, S);
    CHECK_EQ_INT(ss_hang_timeout(&h), 3 * S);
    h = fresh(900 * S);
    CHECK_EQ_INT(ss_hang_timeout(&h), 900 * S); /* longer than start-up */
}

/* A rank in a phase of the step while the others wait in the all-reduce
 * it has not reached: named, once per stall, again after progress. */
static void rank_elsewhere_named_once_per_stall(void)
{
    ss_hang h = fresh(3 * S);
    ss_hang_progress(&h, 411, S / 10, 10 * S);
    ss_hang_rank r[4];
    for (int i = 0; i < 4; i++)
        r[i] = waiting(412, "all_reduce", 1204, 13 * S);
    snprintf(r[2].phase, sizeof r[2].phase, "load_batch");
    r[2].coll_seq = 1203;
    r[2].coll_active = 0;
    ss_finding f;
    CHECK_EQ_INT(ss_hang_check(&h, 13 * S, r, 4, &f), 0); /* 3 s: not yet */
    REQUIRE(ss_hang_check(&h, 14 * S, r, 4, &f) == 1);
    CHECK_STR(f.kind, "hang");
    CHECK_EQ_INT(f.severity, SS_CRITICAL);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 2);
    CHECK_STR(f.phase, "load_batch");
    CHECK_EQ_INT(f.first_step, 412);
    CHECK_STR(f.message,
              "no progress for 4 s at step 412 (the ranks are at different "
              "collectives): rank 2 is in phase 'load_batch' of step 412 "
              "(after all_reduce #1203); ranks 0,1,3 are waiting in "
              "all_reduce #1204 of step 412");
    CHECK(strstr(f.evidence_json, "\"collective_mismatch\":true") != NULL);
    CHECK(strstr(f.evidence_json, "{\"rank\":2,\"behind\":true") != NULL);
    CHECK_EQ_INT(ss_hang_check(&h, 60 * S, r, 4, &f), 0); /* once */
    ss_hang_progress(&h, 412, S / 10, 61 * S);
    CHECK_EQ_INT(ss_hang_check(&h, 63 * S, r, 4, &f), 0);
    CHECK_EQ_INT(ss_hang_check(&h, 65 * S, r, 4, &f), 1); /* re-armed */
}

/* The controller itself could not run for 90 s (stopped, starved): that
 * time does not count toward the stall, and a stall after it still fires,
 * measured from where the pause put the last progress. */
static void a_pause_of_the_controller_is_not_a_stall(void)
{
    ss_hang h = fresh(10 * S);
    ss_hang_progress(&h, 100, S / 10, 5 * S);
    ss_hang_rank r[2];
    for (int i = 0; i < 2; i++)
        r[i] = waiting(101, "all_reduce", 300, 6 * S);
    ss_finding f;
    ss_hang_pause(&h, 90 * S, 96 * S); /* its loop ran last at 6 s */
    CHECK_EQ_INT(ss_hang_check(&h, 96 * S, r, 2, &f), 0);
    CHECK_EQ_INT(ss_hang_check(&h, 105 * S, r, 2, &f), 0); /* 10 s */
    CHECK_EQ_INT(ss_hang_check(&h, 106 * S, r, 2, &f), 1);
    CHECK(strstr(f.message, "no progress for 11 s") != NULL);
    /* progress within the pause: the stall starts at its end */
    h = fresh(10 * S);
    ss_hang_progress(&h, 100, S / 10, 50 * S);
    ss_hang_pause(&h, 90 * S, 96 * S);
    CHECK_EQ_INT(ss_hang_check(&h, 106 * S, r, 2, &f), 0);
    CHECK_EQ_INT(ss_hang_check(&h, 107 * S, r, 2, &f), 1);
    ss_hang_pause(&h, 0, 107 * S); /* nothing to do */
}

/* A stopped rank sends no STATUS: it is named, whatever it last said. */
static void silent_rank_named(void)
{
    ss_hang h = fresh(3 * S);
    ss_hang_progress(&h, 7, S / 10, 10 * S);
    ss_hang_rank r[3];
    for (int i = 0; i < 3; i++)
        r[i] = waiting(8, "allreduce", 30, 19 * S);
    r[1].heard_at = 10 * S; /* nothing since */
    snprintf(r[1].phase, sizeof r[1].phase, "forward");
    r[1].coll_seq = 29;
    r[1].coll_active = 0;
    ss_finding f;
    REQUIRE(ss_hang_check(&h, 20 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 1);
    CHECK(strstr(f.message, "rank 1 is silent for 10 s (stopped or frozen), "
                 "last seen in phase 'forward' of step 8") != NULL);
    CHECK(strstr(f.message, "ranks 0,2 are waiting in allreduce #30") !=
          NULL);
    /* The host saw its process stopped: the message says by what. */
    h = fresh(3 * S);
    ss_hang_progress(&h, 7, S / 10, 10 * S);
    r[1].stopped_for = 9 * S;
    REQUIRE(ss_hang_check(&h, 20 * S, r, 3, &f) == 1);
    CHECK(strstr(f.message, "rank 1 is stopped for 9 s (its process is in "
                 "state T: SIGSTOP or a job control stop), last seen in "
                 "phase 'forward' of step 8") != NULL);
    h = fresh(3 * S);
    ss_hang_progress(&h, 7, S / 10, 10 * S);
    r[1].stop_kind = SS_STOP_TRACER;
    REQUIRE(ss_hang_check(&h, 20 * S, r, 3, &f) == 1);
    CHECK(strstr(f.message, "(its process is in state T: a debugger or "
                 "tracer holds it)") != NULL);
    h = fresh(3 * S);
    ss_hang_progress(&h, 7, S / 10, 10 * S);
    r[1].stop_kind = SS_STOP_FREEZER;
    REQUIRE(ss_hang_check(&h, 20 * S, r, 3, &f) == 1);
    CHECK(strstr(f.message, "rank 1 is frozen for 9 s (its cgroup's freezer "
                 "holds it: a paused container, or a freeze from outside), "
                 "last seen in phase 'forward' of step 8") != NULL);
    CHECK(strstr(f.message, "different collectives") == NULL);
    CHECK(strstr(f.message, "a report from before it stopped") == NULL);
    /* Its last report is two collectives behind the others': it took
     * part in the one before theirs since, and that is said; its stale
     * number is no mismatch of the ranks. */
    h = fresh(3 * S);
    ss_hang_progress(&h, 7, S / 10, 10 * S);
    r[1].coll_seq = 28;
    REQUIRE(ss_hang_check(&h, 20 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 1);
    CHECK(strstr(f.message, "last seen in phase 'forward' of step 8 (after "
                 "allreduce #28), a report from before it stopped: the "
                 "others wait in allreduce #30, which they began only after "
                 "it had taken part in #29") != NULL);
    CHECK(strstr(f.message, "different collectives") == NULL);
}

/* A barrier where the others all-reduce, at the same number. */
static void other_collective_kind(void)
{
    ss_hang h = fresh(3 * S);
    ss_hang_progress(&h, 1, S / 10, 0);
    ss_hang_rank r[4];
    for (int i = 0; i < 4; i++)
        r[i] = waiting(2, "all_reduce", 1204, 9 * S);
    snprintf(r[3].collective, sizeof r[3].collective, "barrier");
    ss_finding f;
    REQUIRE(ss_hang_check(&h, 10 * S, r, 4, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 3);
    CHECK(strstr(f.message, "rank 3 is waiting in barrier #1204 of step 2; "
                 "ranks 0\xe2\x80\x93" "2 are waiting in all_reduce #1204")
          != NULL);
}

/* Without collectives: the rank that completed fewer steps, then the rank
 * in another phase; all alike: nobody is named; nobody live: nothing. */
static void steps_phases_and_alike(void)
{
    ss_hang h = fresh(3 * S);
    ss_hang_progress(&h, 4, S / 10, 0);
    ss_hang_rank r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = waiting(6, "", 0, 9 * S);
        r[i].coll_active = 0;
        r[i].last_step = 5;
    }
    r[0].last_step = 4;
    r[0].cur_step = 5;
    ss_finding f;
    REQUIRE(ss_hang_check(&h, 10 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 0);
    CHECK(strstr(f.message, "(the ranks are at") == NULL);

    h = fresh(3 * S);
    ss_hang_progress(&h, 4, S / 10, 0);
    r[0].last_step = 5;
    r[0].cur_step = 6;
    snprintf(r[1].phase, sizeof r[1].phase, "data");
    REQUIRE(ss_hang_check(&h, 10 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 1);

    h = fresh(3 * S);
    ss_hang_progress(&h, 4, S / 10, 0);
    snprintf(r[1].phase, sizeof r[1].phase, "backward");
    REQUIRE(ss_hang_check(&h, 10 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 0);
    CHECK(strstr(f.message, "no rank is behind the others: ranks 0\xe2\x80"
                 "\x93" "2 are in phase 'backward' of step 6") != NULL);

    /* a job of one rank (or one left alive): that rank */
    h = fresh(3 * S);
    ss_hang_progress(&h, 4, S / 10, 0);
    REQUIRE(ss_hang_check(&h, 10 * S, r, 1, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 0);
    CHECK(strstr(f.message, "no rank is behind") == NULL);
    CHECK(strstr(f.message, ": rank 0 is in phase 'backward' of step 6") !=
          NULL);
    h = fresh(3 * S);
    ss_hang_progress(&h, 4, S / 10, 0);
    r[0].live = r[2].live = 0;
    REQUIRE(ss_hang_check(&h, 10 * S, r, 3, &f) == 1);
    CHECK_EQ_INT(f.n_ranks, 1);
    CHECK_EQ_INT(f.ranks[0], 1);

    h = fresh(3 * S);
    for (int i = 0; i < 3; i++)
        r[i].live = 0;
    CHECK_EQ_INT(ss_hang_check(&h, 1000 * S, r, 3, &f), 0);
}

/* A fixed timeout applies before the first step once a rank shows work,
 * counted from the last change in what the ranks show; the start-up
 * before (imports, rendezvous) is not a hang.  The finding says when the
 * stall began (wall). */
static void fixed_timeout_before_the_first_step(void)
{
    ss_hang h = fresh(4 * S);
    ss_hang_set_wall_offset(&h, 1000 * S);
    ss_hang_rank r[1];
    memset(r, 0, sizeof r);
    r[0].live = 1;
    r[0].last_step = r[0].cur_step = -1;
    r[0].heard_at = 9 * S;
    ss_finding f;
    CHECK_EQ_INT(ss_hang_check(&h, 9 * S, r, 1, &f), 0); /* no work yet */
    CHECK_EQ_INT(ss_hang_timeout(&h), 600 * S);
    r[0] = waiting(0, "", 0, 10 * S);
    r[0].coll_active = 0;
    snprintf(r[0].phase, sizeof r[0].phase, "forward");
    CHECK_EQ_INT(ss_hang_check(&h, 10 * S, r, 1, &f), 0); /* work begins */
    CHECK_EQ_INT(ss_hang_timeout(&h), 4 * S);
    snprintf(r[0].phase, sizeof r[0].phase, "backward");
    CHECK_EQ_INT(ss_hang_check(&h, 12 * S, r, 1, &f), 0); /* a change */
    CHECK_EQ_INT(ss_hang_check(&h, 16 * S, r, 1, &f), 0); /* 4 s: not over */
    CHECK_EQ_INT(ss_hang_check(&h, 16 * S + 1, r, 1, &f), 1);
    CHECK(strstr(f.message, "at the first step") != NULL);
    CHECK(strstr(f.evidence_json, "\"last_progress_at\":1012000000000") !=
          NULL);
}

TEST_LIST(TEST(timeouts), TEST(fixed_timeout_before_the_first_step), TEST(rank_elsewhere_named_once_per_stall),
          TEST(silent_rank_named), TEST(other_collective_kind),
          TEST(steps_phases_and_alike),
          TEST(a_pause_of_the_controller_is_not_a_stall))
