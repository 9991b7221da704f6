/*
 * run_wiring_test.c - unit tests for the wiring of `stepscope run` on
 * node 0 (run_ranks.c, run_ingest.c, run_summary.c and the attempts in
 * run.c), driven without a process or a loop.
 *
 * The parts under test are the real ones, set up by run_parts_init; what
 * they do outside (run_hooks.h) is faked: a fake launcher keeps the
 * launcher callbacks the run gives it and the test reports rank exits
 * through them as the real launcher would, with its exit status worked
 * out the same way (the first rank that failed before the stop, else the
 * first non-zero); the clock, the linger and backoff timers and the
 * loop's end are fakes the test reads and fires.  The ranks' telemetry
 * goes in through the ingest callbacks the run gives the ingest socket,
 * and everything lands in a real store in a scratch directory, read back
 * with the real reader.
 *
 * Covered: a clean exit of every rank ends the attempt and the run as a
 * success, with each finalized step counted and stored; a rank that exits
 * non-zero stops the others and ends the attempt as failed with that rank
 * named (event, rank row, stop reason, exit status); a rank killed by a
 * signal is reported with its signal (128 + signal); a failure with a
 * restart left runs the backoff and a second attempt through the real
 * attempt hooks (health checks, prepare, launch); the ranks' losses
 * (dropped events and records, refused names and values) reach the
 * summary's row and events.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "run_internal.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_tmp.h"

#define MS ((ss_mono_ns)1000000)
#define NPROCS 2

/* The fakes and the run under test. */
typedef struct {
    run_ctx r;
    ss_run_opts o;
    char path[512];
    /* the fake launcher */
    ss_launch_callbacks cb;   /* what the run gave it */
    uint32_t launches;
    uint32_t launched_nprocs;
    uint32_t launched_attempt;
    uint32_t stops;
    int stop_kill_now;
    char stop_reason[128];
    int stopping;             /* stop_ranks came */
    int exited[NPROCS];
    int first_failed, first_nonzero; /* ranks, -1: none */
    int status_of[NPROCS];
    int all_exited;
    /* the fake clock and timers */
    ss_mono_ns now;
    int lingering[NPROCS];
    int backoff_armed;
    uint32_t backoff_ms;
    uint32_t health_starts;
    uint32_t loop_ended;
} world;

static ss_mono_ns fk_now(void *ctx)
{
    return ((world *)ctx)->now;
}

static void fk_forget_exits(world *w)
{
    memset(w->exited, 0, sizeof w->exited);
    w->first_failed = w->first_nonzero = -1;
    w->all_exited = 0;
    w->stopping = 0;
}

static int fk_launch(void *ctx, const ss_launch_config *cfg,
                     const ss_launch_callbacks *cb, char *err, size_t errlen)
{
    world *w = ctx;
    (void)err;
    (void)errlen;
    w->cb = *cb;
    w->launches++;
    w->launched_nprocs = cfg->nprocs;
    w->launched_attempt = cfg->attempt;
    fk_forget_exits(w);
    return 0;
}

static void fk_release(void *ctx)
{
    fk_forget_exits(ctx);
}

static void fk_stop_ranks(void *ctx, int kill_now, const char *reason)
{
    world *w = ctx;
    w->stops++;
    w->stop_kill_now = kill_now;
    w->stopping = 1;
    snprintf(w->stop_reason, sizeof w->stop_reason, "%s", reason);
}

static int fk_rank_pid(void *ctx, uint32_t rank)
{
    world *w = ctx;
    return rank < NPROCS && w->launches && !w->exited[rank]
               ? 1000 + (int)rank
               : 0;
}

static int fk_exit_status(void *ctx)
{
    world *w = ctx;
    if (!w->all_exited)
        return -1;
    if (w->first_failed >= 0)
        return w->status_of[w->first_failed];
    if (w->first_nonzero >= 0)
        return w->status_of[w->first_nonzero];
    return 0;
}

static int fk_first_failed(void *ctx)
{
    world *w = ctx;
    return w->all_exited ? w->first_failed : -1;
}

static uint32_t fk_left_behind(void *ctx)
{
    (void)ctx;
    return 0;
}

static size_t fk_failure_summary(void *ctx, char *out, size_t outlen)
{
    (void)ctx;
    (void)out;
    (void)outlen;
    return 0; /* the run's own words are what is checked */
}

static int fk_health_start(void *ctx, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    ((world *)ctx)->health_starts++;
    return 0;
}

static void fk_linger(void *ctx, uint32_t rank, int start)
{
    ((world *)ctx)->lingering[rank] = start;
}

static void fk_backoff_start(void *ctx, uint32_t delay_ms)
{
    world *w = ctx;
    w->backoff_armed = 1;
    w->backoff_ms = delay_ms;
}

static void fk_backoff_stop(void *ctx)
{
    ((world *)ctx)->backoff_armed = 0;
}

static void fk_end_loop(void *ctx)
{
    ((world *)ctx)->loop_ended++;
}

/* A run of NPROCS ranks on one node with MAX_RESTARTS, in a fresh store;
 * attempt 0 begun (launched at once: the controller checks attempt 0
 * before anything listens). */
static world *world_new(const char *name, uint32_t max_restarts)
{
    world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    static char *argv[] = {"python", "train.py", NULL};
    ss_run_opts_defaults(&w->o);
    w->o.nprocs = w->o.nproc_local = NPROCS;
    w->o.nnodes = 1;
    w->o.argv = argv;
    w->o.quiet = 1;
    w->o.host_interval_ms = 0;
    w->o.restart_cfg.max_restarts = max_restarts;
    w->o.restart_cfg.backoff_ms = 250;
    w->now = 1000 * MS;
    testing_tmp_path(name, w->path, sizeof w->path);

    run_ctx *r = &w->r;
    r->o = &w->o;
    r->db_path = w->path;
    r->agg_cfg = w->o.agg_cfg;
    r->first_step = r->last_step = r->resumed_from = -1;
    r->first_failure_status = -1;
    r->hooks = (run_hooks){.ctx = w,
                           .now = fk_now,
                           .launch = fk_launch,
                           .release = fk_release,
                           .stop_ranks = fk_stop_ranks,
                           .rank_pid = fk_rank_pid,
                           .exit_status = fk_exit_status,
                           .left_behind = fk_left_behind,
                           .failure_summary = fk_failure_summary,
                           .first_failed = fk_first_failed,
                           .health_start = fk_health_start,
                           .linger = fk_linger,
                           .backoff_start = fk_backoff_start,
                           .backoff_stop = fk_backoff_stop,
                           .end_loop = fk_end_loop};
    run_faults_wire(r);
    ss_store_config scfg;
    ss_store_config_defaults(&scfg);
    char err[256];
    r->store = ss_store_open(w->path, &scfg, 1, err, sizeof err);
    if (!r->store) {
        fprintf(stderr, "store: %s\n", err);
        return NULL;
    }
    r->run_id = ss_fixture_add_run(r->store, "0123abcd-wire", name, NPROCS,
                                   SS_FIXTURE_T0);
    ss_store_put_attempt(r->store, r->run_id, 0, SS_FIXTURE_T0);
    r->started = w->now;
    if (r->run_id < 0 || run_parts_init(r, err, sizeof err) != 0 ||
        run_nodes_wire(r, err, sizeof err) != 0) {
        fprintf(stderr, "set-up: %s\n", err);
        return NULL;
    }
    if (ss_attempt_begin(&r->att, err, sizeof err) != 0) {
        fprintf(stderr, "begin: %s\n", err);
        return NULL;
    }
    return w;
}

/* The run's end as the controller does it after its loop, the store
 * closed (everything committed), then the parts freed. */
static void world_end(world *w)
{
    run_summary_end(&w->r, w->r.final_status);
    ss_store_close(w->r.store);
    w->r.store = NULL;
}

static void world_free(world *w)
{
    if (!w)
        return;
    ss_store_close(w->r.store);
    run_parts_free(&w->r);
    run_nodes_close(w->r.nodes);
    run_nodes_free(w->r.nodes);
    free(w);
}

/* ---- a rank's telemetry through the run's ingest callbacks ---- */

static void rank_hello(world *w, uint32_t rank)
{
    ss_ingest_callbacks icb;
    run_ingest_callbacks(&w->r, &icb);
    wire_hello h;
    memset(&h, 0, sizeof h);
    h.rank = rank;
    h.world_size = NPROCS;
    h.local_rank = rank;
    h.pid = 1000 + rank;
    h.attempt = w->r.att.attempt;
    snprintf(h.host, sizeof h.host, "node1");
    char reason[128] = "";
    CHECK_EQ_INT(icb.on_hello(icb.ctx, &h, reason, sizeof reason), 0);
}

/* RANK's steps FIRST..LAST, each 100 ms on the fake clock. */
static void rank_steps(world *w, uint32_t rank, uint64_t first, uint64_t last)
{
    ss_ingest_callbacks icb;
    run_ingest_callbacks(&w->r, &icb);
    for (uint64_t s = first; s <= last; s++) {
        ss_step_record rec;
        memset(&rec, 0, sizeof rec);
        rec.step = s;
        rec.begin_ns = (ss_mono_ns)(s + 1) * 1000 * MS;
        rec.end_ns = rec.begin_ns + 100 * MS;
        rec.rss_bytes = rec.device_bytes = SS_MISSING;
        icb.on_step(icb.ctx, rank, &rec, NULL, 0);
    }
}

/* RANK says goodbye (BYE, or not) and its connection closes. */
static void rank_leaves(world *w, uint32_t rank, int bye)
{
    ss_ingest_callbacks icb;
    run_ingest_callbacks(&w->r, &icb);
    if (bye) {
        wire_bye b;
        memset(&b, 0, sizeof b);
        icb.on_bye(icb.ctx, rank, &b);
    }
    icb.on_disconnect(icb.ctx, rank, bye);
}

/* Every rank connects and records steps FIRST to LAST. */
static void every_rank_runs(world *w, uint64_t first, uint64_t last)
{
    for (uint32_t i = 0; i < NPROCS; i++) {
        rank_hello(w, i);
        rank_steps(w, i, first, last);
    }
}

/* The fake launcher: RANK's process ended (as ss_launcher reports it). */
static void rank_exits(world *w, uint32_t rank, int64_t code, int sig)
{
    int status = sig ? 128 + sig : (int)(code & 0xff);
    w->status_of[rank] = status;
    w->exited[rank] = 1;
    if (status != 0 && w->first_nonzero < 0)
        w->first_nonzero = (int)rank;
    if (status != 0 && !w->stopping && w->first_failed < 0)
        w->first_failed = (int)rank;
    w->cb.on_rank_exit(w->cb.ctx, rank, code, sig);
}

static void all_exit(world *w)
{
    w->all_exited = 1;
    w->cb.on_all_exited(w->cb.ctx);
}

/* ---- reading the store back ---- */

/* The message of the first event of KIND for RANK (-1: any) in ATTEMPT,
 * into OUT; 0 when found. */
static int event_of(const char *path, int64_t run, int64_t attempt,
                    const char *kind, int64_t rank, char *out, size_t outlen)
{
    char err[256];
    ss_reader *rd = ss_reader_open(path, err, sizeof err);
    if (!rd)
        return -1;
    ss_event_row *rows = NULL;
    size_t n = 0;
    ss_event_query q = {.attempt = attempt, .after_id = -1};
    int found = -1;
    if (ss_reader_events(rd, run, &q, &rows, &n, NULL) == 0)
        for (size_t i = 0; i < n && found; i++)
            if (strcmp(rows[i].kind, kind) == 0 &&
                (rank < 0 || rows[i].rank == rank)) {
                snprintf(out, outlen, "%s", rows[i].message);
                found = 0;
            }
    ss_event_rows_free(rows, n);
    ss_reader_close(rd);
    return found;
}

static int read_run(const char *path, int64_t run, ss_run_row *row)
{
    char err[256];
    ss_reader *rd = ss_reader_open(path, err, sizeof err);
    if (!rd)
        return -1;
    int rc = ss_reader_run(rd, run, row);
    ss_reader_close(rd);
    return rc;
}

/* Rank RANK's row of ATTEMPT into *OUT (strings freed: state copied). */
static int read_rank(const char *path, int64_t run, int64_t attempt,
                     uint32_t rank, ss_rank_row *out, char *state,
                     size_t statelen)
{
    char err[256];
    ss_reader *rd = ss_reader_open(path, err, sizeof err);
    if (!rd)
        return -1;
    ss_rank_row *rows = NULL;
    size_t n = 0;
    int rc = ss_reader_ranks(rd, run, attempt, 0, SS_RANKS_NO_MEDIANS, &rows,
                             &n);
    if (rc == 0 && rank < n) {
        *out = rows[rank];
        snprintf(state, statelen, "%s", rows[rank].state ? rows[rank].state
                                                         : "");
    } else {
        rc = -1;
    }
    ss_rank_rows_free(rows, n);
    ss_reader_close(rd);
    return rc;
}

/* The cause of ATTEMPT in the store, into OUT. */
static int attempt_cause(const char *path, int64_t run, int64_t attempt,
                         char *out, size_t outlen)
{
    char err[256];
    ss_reader *rd = ss_reader_open(path, err, sizeof err);
    if (!rd)
        return -1;
    ss_attempt_row *rows = NULL;
    size_t n = 0;
    int rc = ss_reader_attempts(rd, run, &rows, &n);
    if (rc == 0 && (size_t)attempt < n)
        snprintf(out, outlen, "%s", rows[attempt].cause);
    else
        rc = -1;
    ss_attempt_rows_free(rows);
    ss_reader_close(rd);
    return rc;
}

/* ---- the tests ---- */

static void clean_exit_of_every_rank_is_a_success_with_its_steps_stored(void)
{
    world *w = world_new("clean.db", 0);
    REQUIRE(w);
    CHECK_EQ_INT(w->launches, 1);
    CHECK_EQ_INT(w->launched_nprocs, NPROCS);
    every_rank_runs(w, 0, 4);
    for (uint32_t i = 0; i < NPROCS; i++)
        rank_leaves(w, i, 1);
    CHECK_EQ_INT(w->loop_ended, 0); /* the processes still run */
    for (uint32_t i = 0; i < NPROCS; i++)
        rank_exits(w, i, 0, 0);
    CHECK_EQ_INT(w->loop_ended, 0); /* not before the launcher is done */
    all_exit(w);
    CHECK_EQ_INT(w->loop_ended, 1);
    CHECK_EQ_INT(w->stops, 0);
    CHECK_EQ_INT(w->r.final_status, 0);
    CHECK_EQ_INT(w->r.in.steps_finalized, 5);
    CHECK_EQ_INT(w->r.first_step, 0);
    CHECK_EQ_INT(w->r.last_step, 4);
    CHECK_EQ_INT(w->backoff_armed, 0);
    world_end(w);

    char cause[64] = "";
    CHECK_EQ_INT(attempt_cause(w->path, w->r.run_id, 0, cause, sizeof cause),
                 0);
    CHECK_STR(cause, "completed");
    ss_run_row run;
    memset(&run, 0, sizeof run);
    REQUIRE(read_run(w->path, w->r.run_id, &run) == 0);
    CHECK_STR(run.status, "succeeded");
    CHECK_EQ_INT(run.exit_code, 0);
    CHECK_EQ_INT(run.steps, 5);
    ss_run_row_clear(&run);
    for (uint32_t i = 0; i < NPROCS; i++) {
        ss_rank_row row;
        char state[32] = "";
        REQUIRE(read_rank(w->path, w->r.run_id, 0, i, &row, state,
                          sizeof state) == 0);
        CHECK_STR(state, "exited");
        CHECK_EQ_INT(row.exit_code, 0);
        CHECK_EQ_INT(row.last_step, 4);
    }
    world_free(w);
}

static void a_rank_exiting_non_zero_fails_the_attempt_naming_it(void)
{
    world *w = world_new("fail.db", 0);
    REQUIRE(w);
    every_rank_runs(w, 0, 2);
    /* rank 1 dies without a goodbye; rank 0 is stopped by the run */
    rank_exits(w, 1, 3, 0);
    CHECK_EQ_INT(w->stops, 1);
    CHECK_EQ_INT(w->stop_kill_now, 0);
    CHECK_STR(w->stop_reason, "rank 1 failed");
    CHECK_EQ_INT(w->r.first_failure_status, 3);
    rank_leaves(w, 1, 0);
    rank_leaves(w, 0, 0);
    rank_exits(w, 0, 0, SIGTERM);
    CHECK_EQ_INT(w->stops, 1); /* the first failure decides; once */
    all_exit(w);
    CHECK_EQ_INT(w->loop_ended, 1);
    CHECK_EQ_INT(w->r.final_status, 3);
    CHECK_EQ_INT(w->r.n_notes, 1);
    CHECK_STR(w->r.notes[0].cause, "rank_crash");
    world_end(w);

    char msg[512] = "";
    CHECK_EQ_INT(event_of(w->path, w->r.run_id, 0, "rank_failed", 1, msg,
                          sizeof msg), 0);
    CHECK_STR(msg, "rank 1 exited with status 3");
    char cause[64] = "";
    CHECK_EQ_INT(attempt_cause(w->path, w->r.run_id, 0, cause, sizeof cause),
                 0);
    CHECK_STR(cause, "rank_crash");
    ss_rank_row row;
    char state[32] = "";
    REQUIRE(read_rank(w->path, w->r.run_id, 0, 1, &row, state,
                      sizeof state) == 0);
    CHECK_STR(state, "failed");
    CHECK_EQ_INT(row.exit_code, 3);
    ss_run_row run;
    memset(&run, 0, sizeof run);
    REQUIRE(read_run(w->path, w->r.run_id, &run) == 0);
    CHECK_STR(run.status, "failed");
    CHECK_EQ_INT(run.exit_code, 3);
    ss_run_row_clear(&run);
    world_free(w);
}

/* The crashed rank's peer failed on its closed sockets and was reaped
 * first; the launcher names the crashed rank first once every rank's
 * lines are read, and its state agrees. */
static void the_rank_that_failed_first_reads_failed_whatever_the_reap_order(void)
{
    world *w = world_new("order.db", 0);
    REQUIRE(w);
    every_rank_runs(w, 0, 2);
    rank_exits(w, 0, 1, 0); /* "Connection closed by peer" */
    CHECK_STR(w->stop_reason, "rank 0 failed");
    rank_exits(w, 1, 1, 0); /* the crash itself, seen after the stop */
    w->first_failed = 1;    /* the launcher's reading of their lines */
    rank_leaves(w, 0, 0);
    rank_leaves(w, 1, 0);
    all_exit(w);
    world_end(w);

    for (uint32_t i = 0; i < NPROCS; i++) {
        ss_rank_row row;
        char state[32] = "";
        REQUIRE(read_rank(w->path, w->r.run_id, 0, i, &row, state,
                          sizeof state) == 0);
        CHECK_STR(state, "failed");
    }
    char msg[512] = "";
    CHECK_EQ_INT(event_of(w->path, w->r.run_id, 0, "rank_failed", 1, msg,
                          sizeof msg), 0);
    CHECK(strstr(msg, "rank 1 failed first, on its own") != NULL);
    world_free(w);
}

static void a_rank_killed_by_a_signal_is_reported_with_it(void)
{
    world *w = world_new("signal.db", 0);
    REQUIRE(w);
    every_rank_runs(w, 0, 1);
    rank_exits(w, 0, 0, SIGKILL);
    CHECK_STR(w->stop_reason, "rank 0 failed");
    CHECK_EQ_INT(w->r.first_failure_status, 128 + SIGKILL);
    rank_leaves(w, 0, 0);
    rank_leaves(w, 1, 0);
    rank_exits(w, 1, 0, SIGTERM);
    all_exit(w);
    CHECK_EQ_INT(w->r.final_status, 128 + SIGKILL);
    world_end(w);

    char msg[512] = "";
    CHECK_EQ_INT(event_of(w->path, w->r.run_id, 0, "rank_failed", 0, msg,
                          sizeof msg), 0);
    char want[128];
    snprintf(want, sizeof want, "rank 0 was killed by signal %d (%s)",
             SIGKILL, strsignal(SIGKILL));
    CHECK_STR(msg, want);
    ss_rank_row row;
    char state[32] = "";
    REQUIRE(read_rank(w->path, w->r.run_id, 0, 0, &row, state,
                      sizeof state) == 0);
    CHECK_EQ_INT(row.term_signal, SIGKILL);
    CHECK_EQ_INT(row.exit_code, SS_MISSING); /* no exit code: a signal */
    world_free(w);
}

static void a_failure_with_a_restart_left_runs_a_second_attempt(void)
{
    world *w = world_new("restart.db", 1);
    REQUIRE(w);
    every_rank_runs(w, 0, 3);
    rank_exits(w, 1, 1, 0);
    rank_leaves(w, 1, 0);
    rank_leaves(w, 0, 0);
    rank_exits(w, 0, 0, SIGTERM);
    w->now += 10 * MS;
    all_exit(w);
    /* attempt 0 over: a restart is scheduled, the loop goes on */
    CHECK_EQ_INT(w->loop_ended, 0);
    CHECK_EQ_INT(w->backoff_armed, 1);
    CHECK_EQ_INT(w->backoff_ms, 250);
    CHECK(w->r.att.restart_pending);
    CHECK_EQ_INT(w->launches, 1);
    /* the backoff fires: node 0's checks, then the launch of attempt 1 */
    w->backoff_armed = 0;
    w->now += 250 * MS;
    ss_attempt_backoff_over(&w->r.att);
    CHECK_EQ_INT(w->health_starts, 1);
    CHECK_EQ_INT(w->launches, 1);
    run_health_done(&w->r);
    CHECK_EQ_INT(w->launches, 2);
    CHECK_EQ_INT(w->launched_attempt, 1);
    CHECK_EQ_INT(w->r.att.attempt, 1);
    CHECK_EQ_INT(w->r.first_failure_status, -1); /* a fresh attempt */
    for (uint32_t i = 0; i < NPROCS; i++) {
        rank_hello(w, i);
        rank_steps(w, i, 4, 5);
        rank_leaves(w, i, 1);
        rank_exits(w, i, 0, 0);
    }
    all_exit(w);
    CHECK_EQ_INT(w->loop_ended, 1);
    CHECK_EQ_INT(w->r.final_status, 0);
    CHECK_EQ_INT(w->r.n_notes, 2);
    CHECK_STR(w->r.notes[0].cause, "rank_crash");
    CHECK_EQ_INT(w->r.notes[0].status, 1);
    CHECK_STR(w->r.notes[1].cause, "completed");
    CHECK_EQ_INT(w->r.in.steps_finalized, 4 + 2);
    world_end(w);

    char cause[64] = "";
    CHECK_EQ_INT(attempt_cause(w->path, w->r.run_id, 1, cause, sizeof cause),
                 0);
    CHECK_STR(cause, "completed");
    char msg[512] = "";
    CHECK_EQ_INT(event_of(w->path, w->r.run_id, 0, "restart_scheduled", -1,
                          msg, sizeof msg), 0);
    ss_run_row run;
    memset(&run, 0, sizeof run);
    REQUIRE(read_run(w->path, w->r.run_id, &run) == 0);
    CHECK_STR(run.status, "succeeded");
    CHECK_EQ_INT(run.steps, 6);
    ss_run_row_clear(&run);
    world_free(w);
}

/* What the store is told for small and large worlds in each mode:
 * nothing changes below SS_AGGREGATE_NODE_ABOVE ranks. */
static void the_store_settings_follow_the_world_and_the_mode(void)
{
    ss_run_opts o = {.nprocs = 8, .aggregate = SS_AGGREGATE_RANK};
    ss_store_config cfg;
    run_store_config(&o, &cfg);
    CHECK_EQ_INT(cfg.rank_rows_per_step, 0);
    CHECK_EQ_INT(cfg.totals_interval_ms, 0);
    CHECK_EQ_INT(cfg.queue_limit, 65536);
    o.aggregate = SS_AGGREGATE_NODE; /* a small world: every row anyway */
    run_store_config(&o, &cfg);
    CHECK_EQ_INT(cfg.rank_rows_per_step, SS_AGGREGATE_NODE_ROWS);
    CHECK_EQ_INT(cfg.totals_interval_ms, 0);
    o.nprocs = 131072;
    run_store_config(&o, &cfg);
    CHECK_EQ_INT(cfg.rank_rows_per_step, SS_AGGREGATE_NODE_ROWS);
    CHECK_EQ_INT(cfg.totals_interval_ms, SS_LARGE_WORLD_TOTALS_MS);
    CHECK_EQ_INT(cfg.queue_limit, SS_STORE_QUEUE_STEPS * (131072 + 1));
    o.aggregate = SS_AGGREGATE_RANK;
    run_store_config(&o, &cfg);
    CHECK_EQ_INT(cfg.rank_rows_per_step, 0);
    CHECK_EQ_INT(cfg.totals_interval_ms, SS_LARGE_WORLD_TOTALS_MS);
}

static void the_ranks_losses_reach_the_summary(void)
{
    world *w = world_new("losses.db", 0);
    REQUIRE(w);
    ss_ingest_callbacks icb;
    run_ingest_callbacks(&w->r, &icb);
    every_rank_runs(w, 0, 1);
    wire_counters c0 = {.dropped_events = 7, .dropped_records = 2};
    wire_counters c1 = {.dropped_events = 5, .dropped_records = 1};
    icb.on_counters(icb.ctx, 0, &c0);
    icb.on_counters(icb.ctx, 1, &c1);
    icb.on_name_refused(icb.ctx, 1, "extra_phase");
    icb.on_name_refused(icb.ctx, 1, "another_phase");
    icb.on_values_dropped(icb.ctx, 1, 9);
    for (uint32_t i = 0; i < NPROCS; i++)
        rank_leaves(w, i, 1);
    for (uint32_t i = 0; i < NPROCS; i++)
        rank_exits(w, i, 0, 0);
    all_exit(w);
    world_end(w);

    ss_run_row run;
    memset(&run, 0, sizeof run);
    REQUIRE(read_run(w->path, w->r.run_id, &run) == 0);
    CHECK_EQ_INT(run.dropped_events, 12);
    CHECK_EQ_INT(run.dropped_records, 3);
    ss_run_row_clear(&run);
    ss_rank_row row;
    char state[32] = "";
    REQUIRE(read_rank(w->path, w->r.run_id, 0, 1, &row, state,
                      sizeof state) == 0);
    CHECK_EQ_INT(row.dropped_events, 5);
    CHECK_EQ_INT(row.names_over_limit, 2);
    CHECK_EQ_INT(row.values_over_limit, 9);
    char msg[512] = "";
    CHECK_EQ_INT(event_of(w->path, w->r.run_id, 0, "names_over_limit", 1,
                          msg, sizeof msg), 0);
    CHECK(strstr(msg, "'extra_phase'") != NULL);
    world_free(w);
}

TEST_LIST(TEST(clean_exit_of_every_rank_is_a_success_with_its_steps_stored),
          TEST(a_rank_exiting_non_zero_fails_the_attempt_naming_it),
          TEST(the_rank_that_failed_first_reads_failed_whatever_the_reap_order),
          TEST(a_rank_killed_by_a_signal_is_reported_with_it),
          TEST(a_failure_with_a_restart_left_runs_a_second_attempt),
          TEST(the_ranks_losses_reach_the_summary),
          TEST(the_store_settings_follow_the_world_and_the_mode))
