/*
 * lifecycle_test.c - unit tests for the rank life-cycle policy and the
 * end-of-run summary (lifecycle.c).
 *
 * Every transition of lifecycle.h is driven here with plain calls and
 * timestamps: HELLO accepted and refused, BYE, disconnect before and after
 * the process exit, exits clean and failed, a connection that outlives its
 * process (linger), a rank that never connects (exit and connect timeout),
 * the end of the run and its safety net, and the summary's wording with
 * and without losses in the store.
 */
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "testing.h"

#define SEC ((ss_dur_ns)1000000000)

/* A 4-rank attempt 0 with a 2 s connect timeout, launched at t = 100 s. */
static void setup(ss_lifecycle *lc)
{
    CHECK_EQ_INT(ss_life_init(lc, 4, 0, 2 * SEC), 0);
    ss_life_launched(lc, 100 * SEC);
}

static int hello(ss_lifecycle *lc, uint32_t rank)
{
    char reason[128] = "";
    return ss_life_hello(lc, rank, 4, 0, reason, sizeof reason);
}

#define CHECK_DECISION(d, leave_, why_, linger_)                              \
    do {                                                                      \
        ss_life_decision d_ = (d);                                            \
        CHECK_EQ_INT(d_.leave, leave_);                                       \
        CHECK_STR(d_.why ? d_.why : "(none)", why_);                          \
        CHECK_EQ_INT(d_.linger, linger_);                                     \
    } while (0)

/* ---- joining ---- */

static void hello_accepts_a_rank_of_this_run_once(void)
{
    ss_lifecycle lc;
    setup(&lc);
    char reason[128];
    CHECK_EQ_INT(ss_life_hello(&lc, 1, 8, 0, reason, sizeof reason), -1);
    CHECK_STR(reason, "rank 1 says world size 8, the run has 4");
    CHECK_EQ_INT(ss_life_hello(&lc, 4, 4, 0, reason, sizeof reason), -1);
    CHECK_STR(reason, "rank 4 is out of range (world size 4)");
    CHECK_EQ_INT(ss_life_hello(&lc, 1, 4, 2, reason, sizeof reason), -1);
    CHECK_STR(reason, "rank 1 is from attempt 2, not 0");
    CHECK_EQ_INT(lc.ranks[1].connected, 0);

    CHECK_EQ_INT(ss_life_hello(&lc, 1, 4, 0, reason, sizeof reason), 0);
    CHECK_EQ_INT(lc.ranks[1].connected, 1);
    CHECK_EQ_INT(lc.ranks[1].ever_connected, 1);
    CHECK_STR(ss_life_rank_state(&lc, 1), "running");
    CHECK_EQ_INT(ss_life_hello(&lc, 1, 4, 0, reason, sizeof reason), -1);
    CHECK_STR(reason, "rank 1 is already connected");

    /* After it left, a new connection for it (a forked child) is refused. */
    ss_life_bye(&lc, 1);
    ss_life_disconnect(&lc, 1, 1);
    CHECK_EQ_INT(ss_life_hello(&lc, 1, 4, 0, reason, sizeof reason), -1);
    CHECK_STR(reason, "rank 1 has already left the run");
    ss_life_release(&lc);
}

/* ---- leaving ---- */

static void bye_leaves_clean_once(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 0) == 0);
    CHECK_DECISION(ss_life_bye(&lc, 0), SS_LEAVES_CLEAN, "said goodbye",
                   SS_LINGER_KEEP);
    CHECK_EQ_INT(lc.ranks[0].left, 1);
    CHECK_EQ_INT(lc.ranks[0].left_missing, 0);
    CHECK_DECISION(ss_life_disconnect(&lc, 0, 1), SS_STAYS, "(none)",
                   SS_LINGER_STOP);
    /* Even a failing exit after BYE changes nothing: it left clean. */
    CHECK_DECISION(ss_life_exit(&lc, 0, 1, 0), SS_STAYS, "(none)",
                   SS_LINGER_KEEP);
    CHECK_STR(ss_life_rank_state(&lc, 0), "failed");
    ss_life_release(&lc);
}

static void bye_seen_only_at_disconnect_is_clean(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 2) == 0);
    CHECK_DECISION(ss_life_disconnect(&lc, 2, 1), SS_LEAVES_CLEAN,
                   "said goodbye", SS_LINGER_STOP);
    CHECK_EQ_INT(lc.ranks[2].said_bye, 1);
    ss_life_release(&lc);
}

static void disconnect_then_exit_0_is_clean(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 1) == 0);
    /* Still running: its exit decides. */
    CHECK_DECISION(ss_life_disconnect(&lc, 1, 0), SS_STAYS, "(none)",
                   SS_LINGER_STOP);
    CHECK_EQ_INT(lc.ranks[1].left, 0);
    CHECK_STR(ss_life_rank_state(&lc, 1), "running");
    CHECK_DECISION(ss_life_exit(&lc, 1, 0, 0), SS_LEAVES_CLEAN,
                   "died without saying goodbye", SS_LINGER_KEEP);
    CHECK_STR(ss_life_rank_state(&lc, 1), "exited");
    ss_life_release(&lc);
}

static void disconnect_then_crash_is_missing(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 1) == 0);
    ss_life_disconnect(&lc, 1, 0);
    CHECK_DECISION(ss_life_exit(&lc, 1, 0, 11), SS_LEAVES_MISSING,
                   "died without saying goodbye", SS_LINGER_KEEP);
    CHECK_EQ_INT(lc.ranks[1].left_missing, 1);
    CHECK_STR(ss_life_rank_state(&lc, 1), "failed");
    CHECK_EQ_INT(lc.ranks[1].term_signal, 11);
    ss_life_release(&lc);
}

static void exit_while_connected_lingers_then_disconnect_decides(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 0) == 0);
    REQUIRE(hello(&lc, 3) == 0);
    /* Rank 0 exits 0 with its socket still open: wait for it to drain. */
    CHECK_DECISION(ss_life_exit(&lc, 0, 0, 0), SS_STAYS, "(none)",
                   SS_LINGER_START);
    CHECK_EQ_INT(ss_life_linger_over(&lc, 0), 1);
    CHECK_DECISION(ss_life_disconnect(&lc, 0, 0), SS_LEAVES_CLEAN,
                   "died without saying goodbye", SS_LINGER_STOP);
    CHECK_EQ_INT(ss_life_linger_over(&lc, 0), 0); /* closed meanwhile */
    /* Rank 3 exits 2 with its socket open: missing once it closes. */
    CHECK_DECISION(ss_life_exit(&lc, 3, 2, 0), SS_STAYS, "(none)",
                   SS_LINGER_START);
    CHECK_DECISION(ss_life_disconnect(&lc, 3, 0), SS_LEAVES_MISSING,
                   "died without saying goodbye", SS_LINGER_STOP);
    /* A linger timer of a rank still running never closes anything. */
    REQUIRE(hello(&lc, 1) == 0);
    CHECK_EQ_INT(ss_life_linger_over(&lc, 1), 0);
    CHECK_EQ_INT(ss_life_linger_over(&lc, 9), 0);
    ss_life_release(&lc);
}

static void exit_without_connecting_is_missing(void)
{
    ss_lifecycle lc;
    setup(&lc);
    ss_life_decision d = ss_life_exit(&lc, 2, 0, 0);
    CHECK_DECISION(d, SS_LEAVES_MISSING, "never sent telemetry",
                   SS_LINGER_KEEP);
    CHECK_EQ_INT(d.never_connected, 1);
    CHECK_STR(ss_life_rank_state(&lc, 2), "exited");
    ss_life_release(&lc);
}

static void connect_timeout_makes_a_silent_rank_missing(void)
{
    ss_lifecycle lc;
    CHECK_EQ_INT(ss_life_init(&lc, 4, 0, 2 * SEC), 0);
    /* Before the launch nothing times out. */
    CHECK_DECISION(ss_life_tick(&lc, 0, 1000 * SEC), SS_STAYS, "(none)",
                   SS_LINGER_KEEP);
    ss_life_launched(&lc, 100 * SEC);
    REQUIRE(hello(&lc, 0) == 0);
    ss_life_exit(&lc, 1, 0, 0); /* exited: left by its exit */
    CHECK_DECISION(ss_life_tick(&lc, 3, 101 * SEC), SS_STAYS, "(none)",
                   SS_LINGER_KEEP);
    CHECK_DECISION(ss_life_tick(&lc, 3, 102 * SEC), SS_STAYS, "(none)",
                   SS_LINGER_KEEP); /* exactly the timeout: not yet */
    ss_life_decision d = ss_life_tick(&lc, 3, 102 * SEC + 1);
    CHECK_DECISION(d, SS_LEAVES_MISSING, "never connected", SS_LINGER_KEEP);
    CHECK_EQ_INT(d.never_connected, 1);
    CHECK_STR(ss_life_rank_state(&lc, 3), "never_connected");
    /* Once only, and not for a connected or exited rank. */
    CHECK_EQ_INT(ss_life_tick(&lc, 3, 200 * SEC).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_tick(&lc, 0, 200 * SEC).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_tick(&lc, 1, 200 * SEC).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_tick(&lc, 4, 200 * SEC).leave, SS_STAYS);
    /* Its late exit is not a second "never connected". */
    d = ss_life_exit(&lc, 3, 0, 0);
    CHECK_EQ_INT(d.leave, SS_STAYS);
    CHECK_EQ_INT(d.never_connected, 0);
    CHECK_STR(ss_life_rank_state(&lc, 3), "exited");
    ss_life_release(&lc);
}

static void ranks_out_of_range_change_nothing(void)
{
    ss_lifecycle lc;
    setup(&lc);
    CHECK_EQ_INT(ss_life_bye(&lc, 4).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_disconnect(&lc, 7, 1).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_exit(&lc, 4, 1, 0).leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_finish_rank(&lc, 4).leave, SS_STAYS);
    CHECK_STR(ss_life_rank_state(&lc, 4), "");
    ss_life_release(&lc);
    ss_life_release(&lc); /* twice is harmless */
}

/* ---- the end of the run ---- */

static void run_ends_once_when_all_exited_and_drained(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 0) == 0);
    for (uint32_t i = 0; i < 4; i++)
        ss_life_exit(&lc, i, 0, 0);
    /* The launcher has not reported the last output drained yet. */
    CHECK_EQ_INT(ss_life_finish(&lc), 0);
    ss_life_all_exited(&lc);
    /* Rank 0's connection is still draining (linger). */
    CHECK_EQ_INT(ss_life_finish(&lc), 0);
    ss_life_disconnect(&lc, 0, 0);
    CHECK_EQ_INT(ss_life_finish(&lc), 1);
    CHECK_EQ_INT(lc.finished, 1);
    CHECK_EQ_INT(ss_life_finish(&lc), 0);
    ss_life_release(&lc);
}

static void finish_makes_ranks_still_in_missing(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 0) == 0);
    REQUIRE(hello(&lc, 1) == 0);
    ss_life_bye(&lc, 0);
    ss_life_disconnect(&lc, 0, 1);
    ss_life_disconnect(&lc, 1, 0); /* still running: stays in */
    ss_life_all_exited(&lc);
    REQUIRE(ss_life_finish(&lc) == 1);
    CHECK_EQ_INT(ss_life_finish_rank(&lc, 0).leave, SS_STAYS);
    CHECK_DECISION(ss_life_finish_rank(&lc, 1), SS_LEAVES_MISSING,
                   "never finished", SS_LINGER_KEEP);
    CHECK_EQ_INT(ss_life_finish_rank(&lc, 1).leave, SS_STAYS);
    ss_life_release(&lc);
}

/* A lost node's ranks leave at once, missing, whether they were connected
 * or never connected; they no longer hold the run open, and read "lost"
 * unless their exit was already known. */
static void lost_node_ranks_leave_missing(void)
{
    ss_lifecycle lc;
    setup(&lc);
    REQUIRE(hello(&lc, 2) == 0);
    CHECK_DECISION(ss_life_node_lost(&lc, 2, "its node was lost"),
                   SS_LEAVES_MISSING, "its node was lost", SS_LINGER_KEEP);
    CHECK_DECISION(ss_life_node_lost(&lc, 3, "its node was lost"),
                   SS_LEAVES_MISSING, "its node was lost", SS_LINGER_KEEP);
    CHECK_STR(ss_life_rank_state(&lc, 2), "lost");
    CHECK_STR(ss_life_rank_state(&lc, 3), "lost");
    /* once left, a later loss changes nothing */
    CHECK_EQ_INT(ss_life_node_lost(&lc, 2, "again").leave, SS_STAYS);
    CHECK_EQ_INT(ss_life_node_lost(&lc, 9, "out of range").leave, SS_STAYS);
    /* a rank whose exit came first keeps its exit state */
    ss_life_exit(&lc, 1, 3, 0);
    ss_life_node_lost(&lc, 1, "its node was lost");
    CHECK_STR(ss_life_rank_state(&lc, 1), "failed");
    for (uint32_t i = 0; i < 4; i++)
        ss_life_exit(&lc, i, 0, 0);
    ss_life_all_exited(&lc);
    /* rank 2's connection counts as gone: nothing holds the run open */
    CHECK_EQ_INT(ss_life_finish(&lc), 1);
    ss_life_release(&lc);
}

/* Ranks that end without success after stepscope began to stop the job
 * were stopped, not failed; one that failed before the stop, or that
 * exits cleanly, keeps its own state. */
static void ranks_ended_by_a_stop_are_stopped_not_failed(void)
{
    ss_lifecycle lc;
    CHECK_EQ_INT(ss_life_init(&lc, 3, 0, 1000), 0);
    ss_life_exit(&lc, 0, 1, 0); /* failed first: the cause of the stop */
    ss_life_stopping(&lc);
    ss_life_exit(&lc, 1, 0, 15);
    ss_life_exit(&lc, 2, 0, 0);
    CHECK_STR(ss_life_rank_state(&lc, 0), "failed");
    CHECK_STR(ss_life_rank_state(&lc, 1), "stopped_by_stepscope");
    CHECK_STR(ss_life_rank_state(&lc, 2), "exited");
    CHECK_EQ_INT(ss_life_rank_stopped(&lc, 0), 0);
    CHECK_EQ_INT(ss_life_rank_stopped(&lc, 1), 1);
    CHECK_EQ_INT(ss_life_rank_stopped(&lc, 2), 0);
    ss_life_release(&lc);
}

static void run_status_follows_the_job(void)
{
    CHECK_STR(ss_life_run_status(0, 0), "succeeded");
    CHECK_STR(ss_life_run_status(0, 1), "interrupted");
    CHECK_STR(ss_life_run_status(143, 1), "interrupted");
    CHECK_STR(ss_life_run_status(3, 0), "failed");
    CHECK_STR(ss_life_run_status(137, 0), "failed");
    CHECK_STR(ss_life_attempt_cause(0, 0), "completed");
    CHECK_STR(ss_life_attempt_cause(0, 1), "interrupted");
    CHECK_STR(ss_life_attempt_cause(1, 0), "rank_crash");
    CHECK_STR(ss_life_attempt_cause(130, 1), "interrupted");
    CHECK_EQ_INT(ss_life_exit_ok(0, 0), 1);
    CHECK_EQ_INT(ss_life_exit_ok(1, 0), 0);
    CHECK_EQ_INT(ss_life_exit_ok(0, 9), 0);
}

/* ---- the summary ---- */

/* Run 3 of a store given with --db s.db: 6000 steps, 15 findings, all of
 * it stored. */
static ss_run_summary all_stored(void)
{
    ss_run_summary s;
    memset(&s, 0, sizeof s);
    s.run_id = 3;
    s.db_path = "s.db";
    s.seconds = 12.34;
    s.steps_finalized = 6000;
    s.findings = 15;
    s.stored.steps_stored = 6000;
    s.stored.rank_steps_stored = 24000;
    s.stored.findings_stored = 15;
    s.stored.events_stored = 30;
    s.stored.ends_stored = 1;
    return s;
}

static void summary_text(const ss_run_summary *s, char *out, size_t outlen)
{
    ss_buf b = {0};
    ss_life_summary(s, &b);
    snprintf(out, outlen, "%s", b.data ? b.data : "<oom>");
    ss_buf_free(&b);
}

static void summary_when_everything_was_stored(void)
{
    ss_run_summary s = all_stored();
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 15 "
                    "findings. `stepscope report --db s.db 3` explains it.\n");
    s.db_path = NULL;
    s.job_status = 3;
    s.steps_finalized = s.stored.steps_stored = 1;
    s.findings = s.stored.findings_stored = 1;
    s.rank_dropped_events = 7;
    s.rank_dropped_records = 2;
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 failed in 12.3 s: 1 step finalized, 1 finding, "
                    "7 events and 2 step records dropped by ranks. "
                    "`stepscope report 3` explains it.\n");
    /* vectors: dropped by ranks, the controller and the store's queue,
     * and elements truncated, said where they were */
    s.rank_dropped_events = s.rank_dropped_records = 0;
    s.rank_dropped_vectors = 4;
    s.stored.vectors_dropped = 2;
    s.rank_truncated_values = 1;
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 failed in 12.3 s: 1 step finalized, 1 finding, "
                    "6 vectors dropped (4 by ranks, 2 at the store's full "
                    "queue), 1 vector element truncated by ranks. "
                    "`stepscope report 3` explains it.\n");
    s.refused_vectors = 1;
    s.rank_dropped_vectors = s.stored.vectors_dropped = 0;
    s.rank_truncated_values = 0;
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 failed in 12.3 s: 1 step finalized, 1 finding, "
                    "1 vector dropped (1 by the controller). "
                    "`stepscope report 3` explains it.\n");
}

static void summary_when_the_disk_filled_up(void)
{
    ss_run_summary s = all_stored();
    s.stored.steps_stored = 637;
    s.stored.steps_lost = 5363;
    s.stored.rank_steps_lost = 21452;
    s.stored.findings_stored = 0;
    s.stored.finding_writes_lost = 20;
    s.stored.events_lost = 1;
    s.stored.other_lost = 4;
    s.stored.ends_stored = 1;
    snprintf(s.stored.error, sizeof s.stored.error,
             "disk full: database or disk is full");
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 637 "
                    "stored (5363 lost: disk full: database or disk is "
                    "full), 15 findings, 0 stored (15 lost), 1 event lost, "
                    "4 rank records lost. `stepscope report --db s.db 3` "
                    "shows what was stored.\n");
    CHECK(strstr(text, "explains it") == NULL);

    /* Only findings lost: the reason goes with them. */
    s = all_stored();
    s.stored.findings_stored = 12;
    s.stored.finding_writes_lost = 3;
    snprintf(s.stored.error, sizeof s.stored.error, "I/O error: disk I/O "
             "error");
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 15 "
                    "findings, 12 stored (3 lost: I/O error: disk I/O "
                    "error). `stepscope report --db s.db 3` shows what was "
                    "stored.\n");

    /* Every finding stored, a later update of one not. */
    s = all_stored();
    s.stored.finding_writes_lost = 1;
    snprintf(s.stored.error, sizeof s.stored.error, "disk full: x");
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 15 "
                    "findings (1 later update of them not stored: disk "
                    "full: x). "
                    "`stepscope report --db s.db 3` shows what was "
                    "stored.\n");
}

static void summary_when_the_end_was_not_stored(void)
{
    ss_run_summary s = all_stored();
    s.job_status = 1;
    s.stored.steps_stored = 10;
    s.stored.steps_lost = 5990;
    s.stored.ends_stored = 0;
    s.stored.ends_lost = 1;
    snprintf(s.stored.error, sizeof s.stored.error,
             "disk full: database or disk is full");
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 failed in 12.3 s: 6000 steps finalized, 10 "
                    "stored (5990 lost: disk full: database or disk is "
                    "full), 15 findings. `stepscope report --db s.db 3` "
                    "shows what was stored.\n"
                    "the run's end (failed, exit status 1) was not stored "
                    "(disk full: database or disk is full): the store "
                    "still says run 3 is running; `stepscope "
                    "report --db s.db 3` shows it as interrupted.\n");
}

static void summary_counts_rows_dropped_at_the_queue(void)
{
    ss_run_summary s = all_stored();
    s.stored.rank_steps_dropped = 1;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 15 "
                    "findings, 1 per-rank row dropped (the store's queue "
                    "was full). `stepscope report --db s.db 3` explains "
                    "it.\n");
}

static void summary_counts_rows_kept_as_totals(void)
{
    ss_run_summary s = all_stored();
    s.stored.rank_steps_unpicked = 2;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 6000 steps finalized, 15 "
                    "findings, 2 per-rank rows kept as totals only (node "
                    "aggregation writes the rows of the ranks a step "
                    "singles out and a rotating share). `stepscope report "
                    "--db s.db 3` explains it.\n");
}

static void loss_note_says_what_the_store_lost(void)
{
    ss_run_summary s = all_stored();
    ss_buf b = {0};
    CHECK_EQ_INT(ss_life_loss_note(&s, &b), 0);
    CHECK(b.len == 0);
    s.stored.steps_stored = 637;
    s.stored.steps_lost = 5363;
    s.stored.findings_stored = 0;
    s.stored.events_lost = 12;
    s.stored.other_lost = 1;
    snprintf(s.stored.error, sizeof s.stored.error, "disk full: x");
    CHECK_EQ_INT(ss_life_loss_note(&s, &b), 1);
    CHECK_STR(b.data ? b.data : "", "the store lost 5363 of 6000 steps, 15 "
              "of 15 findings, 12 events and 1 rank record (disk full: x)");
    ss_buf_reset(&b);
    s = all_stored();
    s.stored.finding_writes_lost = 2;
    CHECK_EQ_INT(ss_life_loss_note(&s, &b), 1);
    CHECK_STR(b.data ? b.data : "", "the store lost 2 finding updates "
              "(reason unknown)");
    ss_buf_free(&b);
}

/* Ranks that never sent telemetry are said, not hidden behind
 * "finished": a warning line, and the same words for an event. */
static void summary_warns_of_silent_ranks(void)
{
    ss_run_summary s = all_stored();
    s.steps_finalized = s.stored.steps_stored = 0;
    s.findings = s.stored.findings_stored = 0;
    s.ranks = s.ranks_silent = 30;
    s.accepts_failed = 30;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK_STR(text, "run 3 finished in 12.3 s: 0 steps finalized, 0 "
                    "findings. `stepscope report --db s.db 3` explains it.\n"
                    "warning: 30 of 30 ranks never sent telemetry: the store "
                    "holds no step of this run (30 rank connections were "
                    "not accepted: see the accept_failed events).\n");
    s.ranks_silent = 1;
    s.accepts_failed = 0;
    ss_buf b = {0};
    CHECK_EQ_INT(ss_life_silent_note(&s, &b), 1);
    CHECK_STR(b.data, "1 of 30 ranks never sent telemetry: their steps are "
                      "missing from the store");
    ss_buf_free(&b);
    s.ranks_silent = 0;
    CHECK_EQ_INT(ss_life_silent_note(&s, &b), 0);
    CHECK(b.data == NULL);
}

/* Ranks that exited with success but whose last frames never arrived
 * (the controller could not read them in time) are said: a warning line,
 * and the same words for an event. */
static void summary_warns_of_ranks_cut_off(void)
{
    ss_run_summary s = all_stored();
    s.ranks = 4;
    s.ranks_cut_off = 4;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "\nwarning: 4 of 4 ranks exited without their last "
                       "frames reaching the controller (") != NULL);
    CHECK(strstr(text, "what they recorded after the last step received, "
                       "and their counts of dropped data, are missing.\n"));
    s.ranks_cut_off = 1;
    ss_buf b = {0};
    CHECK_EQ_INT(ss_life_cut_off_note(&s, &b), 1);
    CHECK(b.data && strncmp(b.data, "1 of 4 ranks exited without its last "
                            "frames", 41) == 0);
    CHECK(b.data && strstr(b.data, "what it recorded") != NULL);
    ss_buf_free(&b);
    s.ranks_cut_off = 0;
    CHECK_EQ_INT(ss_life_cut_off_note(&s, &b), 0);
    CHECK(b.data == NULL);
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "warning") == NULL);
}

/* Ranks that ended before the others' last step, in a job that
 * succeeded: a note says which first, where, and what that means. */
static void summary_notes_ranks_that_ended_early(void)
{
    ss_run_summary s = all_stored();
    s.ranks = 4;
    s.last_step = 199;
    s.ranks_ended_early = 1;
    s.early_rank = 2;
    s.early_last_step = 49;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "\nnote: rank 2 stopped stepping at step 49 while "
                 "the others went on to step 199: steps 50 to 199 are "
                 "finalized without it.\n") != NULL);
    s.ranks_ended_early = 3;
    ss_buf b = {0};
    CHECK_EQ_INT(ss_life_early_note(&s, &b), 1);
    CHECK(b.data && strcmp(b.data, "3 of 4 ranks stopped stepping before "
                           "the last step, 199 (rank 2 first, at step 49): "
                           "the steps after each one's last are finalized "
                           "without it") == 0);
    ss_buf_free(&b);
    s.ranks_ended_early = 0;
    CHECK_EQ_INT(ss_life_early_note(&s, &b), 0);
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "note:") == NULL);
}

/* A run that recorded nothing says why and what to do. */
static void summary_says_why_nothing_was_recorded(void)
{
    ss_run_summary s = all_stored();
    s.steps_finalized = s.stored.steps_stored = 0;
    s.findings = s.stored.findings_stored = 0;
    s.ranks = s.ranks_silent = 2;
    char text[2048];
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "the script does not call stepscope: add --auto") !=
          NULL);
    /* Ranks that failed may not have reached their first call (a failed
     * import): not said to lack one. */
    s.job_status = 1;
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "; the ranks failed before they called stepscope, or "
                 "the script does not call it: add --auto") != NULL);
    s.job_status = 0;
    s.ranks_silent = 0; /* they connected, but no step */
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "\nno step was recorded: the ranks connected but "
                 "marked no step; wrap each iteration in `with "
                 "stepscope.step():`, or add --auto") != NULL);
    s.auto_mode = 1;
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "no step was recorded: --auto counts one step per "
                 "optimizer step") != NULL);
    /* Under --auto, silent ranks of a failed job (a script that could not
     * start) are not sent to look at PYTHONPATH. */
    s.ranks_silent = 2;
    s.job_status = 2;
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "never sent telemetry: the store holds no step of "
                 "this run; the ranks failed before their first step (the "
                 "failure above says why)") != NULL);
    CHECK(strstr(text, "PYTHONPATH") == NULL);
    s.job_status = 0;
    summary_text(&s, text, sizeof text);
    CHECK(strstr(text, "; --auto loads stepscope into Python ranks only") !=
          NULL);
    s.ranks_silent = 0;
    s.interrupted = 1;
    s.job_status = 130;
    summary_text(&s, text, sizeof text);
    CHECK(strncmp(text, "run 3 was interrupted in 12.3 s", 31) == 0);
    s.steps_finalized = 1;
    ss_buf b = {0};
    CHECK_EQ_INT(ss_life_empty_note(&s, &b), 0);
    CHECK(b.data == NULL);
}

TEST_LIST(TEST(hello_accepts_a_rank_of_this_run_once),
          TEST(summary_says_why_nothing_was_recorded),
          TEST(summary_warns_of_silent_ranks),
          TEST(summary_warns_of_ranks_cut_off),
          TEST(summary_notes_ranks_that_ended_early),
          TEST(lost_node_ranks_leave_missing),
          TEST(bye_leaves_clean_once),
          TEST(bye_seen_only_at_disconnect_is_clean),
          TEST(disconnect_then_exit_0_is_clean),
          TEST(disconnect_then_crash_is_missing),
          TEST(exit_while_connected_lingers_then_disconnect_decides),
          TEST(exit_without_connecting_is_missing),
          TEST(connect_timeout_makes_a_silent_rank_missing),
          TEST(ranks_out_of_range_change_nothing),
          TEST(run_ends_once_when_all_exited_and_drained),
          TEST(finish_makes_ranks_still_in_missing),
          TEST(run_status_follows_the_job),
          TEST(ranks_ended_by_a_stop_are_stopped_not_failed),
          TEST(summary_when_everything_was_stored),
          TEST(summary_when_the_disk_filled_up),
          TEST(summary_when_the_end_was_not_stored),
          TEST(summary_counts_rows_dropped_at_the_queue),
          TEST(summary_counts_rows_kept_as_totals),
          TEST(loss_note_says_what_the_store_lost))
