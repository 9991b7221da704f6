/*
 * reader_test.c - the store's read API on the standard test store
 * (store_fixture.h): opening (no file, not a store, nothing created),
 * choosing a run, and each loader's rows, windows and orders; a store of
 * an older schema read as it is, without being migrated; a query that
 * fails, before its first row or after some, as an error.  Run again
 * with the standard store's runs in a team database (STEPSCOPE_TEST_PG,
 * store_fixture.h: unit.reader_test.postgresql): the same answers.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pg_conn.h"
#include "reader.h"
#include "runlock.h"
#include "store_fixture.h"
#include "store_schema.h"
#include "testing.h"
#include "testing_tmp.h"

#define MS 1000000LL

/* The standard store, built once per test binary: its SQLite file, or
 * the team database it was copied into (STEPSCOPE_TEST_PG). */
static const char *fixture(void)
{
    return ss_fixture_store();
}

static ss_reader *open_fixture(void)
{
    char err[512];
    ss_reader *r = ss_reader_open(fixture(), err, sizeof err);
    if (!r)
        fprintf(stderr, "  open: %s\n", err);
    return r;
}

static void open_refuses_what_is_not_a_store(void)
{
    char path[600], err[512];
    testing_tmp_path("none.db", path, sizeof path);
    CHECK(ss_reader_open(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "no store at") != NULL);
    CHECK(access(path, F_OK) != 0); /* nothing created */

    testing_tmp_path("text.db", path, sizeof path);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("plain text, long enough to be read as a header by sqlite, which "
          "it is not, not at all\n", f);
    fclose(f);
    CHECK(ss_reader_open(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "is not a stepscope store") != NULL);

    ss_reader_close(NULL); /* harmless */
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    CHECK_STR(ss_reader_path(r), fixture());
    CHECK_EQ_INT(ss_reader_schema_version(r), SS_SCHEMA_VERSION);
    CHECK_STR(ss_reader_errmsg(r), "");
    ss_reader_close(r);
}

static void selects_runs_by_id_name_and_uuid(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    struct {
        const char *spec;
        int64_t want;
    } ok[] = {{NULL, 2}, {"1", 1}, {"2", 2}, {"train", 1}, {"other", 2},
              {"0123", 1}, {"4567ef00-0000", 2}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t id = -1;
        CHECK_EQ_INT(ss_reader_select_run(r, ok[i].spec, &id), 0);
        CHECK_EQ_INT(id, ok[i].want);
    }
    int64_t id = -1;
    CHECK_EQ_INT(ss_reader_select_run(r, "nope", &id), SS_READ_NOT_FOUND);
    char want[800];
    snprintf(want, sizeof want, "no run 'nope' in %s; `stepscope runs` lists "
             "them", fixture());
    CHECK_STR(ss_reader_errmsg(r), want);
    /* Both uuids start with a digit, so "0" or "4" pick one; "" matches
     * every run. */
    CHECK_EQ_INT(ss_reader_select_run(r, "", &id), SS_READ_NOT_FOUND);
    CHECK(strstr(ss_reader_errmsg(r), "ambiguous: 2 runs") != NULL);
    ss_reader_close(r);

    char path[600], err[512];
    testing_tmp_path("empty.db", path, sizeof path);
    ss_store *s = ss_store_open(path, NULL, 0, err, sizeof err);
    REQUIRE(s != NULL);
    ss_store_close(s);
    r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    CHECK_EQ_INT(ss_reader_select_run(r, NULL, &id), SS_READ_NOT_FOUND);
    CHECK(strstr(ss_reader_errmsg(r), "no runs in") != NULL);
    ss_run_row *runs;
    size_t n = 99;
    CHECK_EQ_INT(ss_reader_runs(r, &runs, &n), 0);
    CHECK_EQ_INT(n, 0);
    ss_run_rows_free(runs, n);
    ss_reader_close(r);
}

static void runs_and_attempts(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_run_row *runs;
    size_t n;
    REQUIRE(ss_reader_runs(r, &runs, &n) == 0);
    REQUIRE(n == 2);
    CHECK_EQ_INT(runs[0].id, 1);
    CHECK_STR(runs[0].name, "train");
    CHECK_STR(runs[0].status, "failed");
    CHECK_EQ_INT(runs[0].exit_code, 137);
    CHECK_EQ_INT(runs[0].steps, 20);
    CHECK_EQ_INT(runs[0].findings, 2);
    CHECK_EQ_INT(runs[0].dropped_events, 5);
    CHECK_EQ_INT(runs[0].ended_at - runs[0].started_at, 90000 * MS);
    /* stored as running, but no controller holds its lock */
    CHECK_STR(runs[1].status, "interrupted");
    CHECK_EQ_INT(runs[1].ended_at, SS_MISSING);
    CHECK_EQ_INT(runs[1].exit_code, SS_MISSING);
    /* A store file tells a live run by its controller's lock; a team
     * database by the run's copies (pg_mirror.h). */
    if (!ss_pg_is_uri(ss_reader_path(r))) {
        ss_run_lock lock = {0};
        char lerr[256];
        REQUIRE(ss_run_lock_take(&lock, ss_reader_path(r), runs[1].uuid,
                                 lerr, sizeof lerr) == 0);
        ss_run_rows_free(runs, n);
        REQUIRE(ss_reader_runs(r, &runs, &n) == 0);
        CHECK_STR(runs[1].status, "running"); /* its controller lives */
        ss_run_lock_release(&lock);
    }
    ss_run_rows_free(runs, n);

    ss_run_row run;
    CHECK_EQ_INT(ss_reader_run(r, 1, &run), 0);
    CHECK_STR(run.command, "python train.py --lr 0.1");
    CHECK_STR(run.host, "node1");
    ss_run_row_clear(&run);
    ss_run_row_clear(&run); /* twice is harmless */
    CHECK_EQ_INT(ss_reader_run(r, 7, &run), SS_READ_NOT_FOUND);

    int64_t attempt = -1, count = -1;
    CHECK_EQ_INT(ss_reader_attempt(r, 2, -1, &attempt, &count), 0);
    CHECK_EQ_INT(attempt, 1);
    CHECK_EQ_INT(count, 2);
    CHECK_EQ_INT(ss_reader_attempt(r, 2, 0, &attempt, NULL), 0);
    CHECK_EQ_INT(attempt, 0);
    CHECK_EQ_INT(ss_reader_attempt(r, 1, 3, &attempt, NULL),
                 SS_READ_NOT_FOUND);
    CHECK_STR(ss_reader_errmsg(r), "run 1 has no attempt 3 (attempts 0 to 0)");
    CHECK_EQ_INT(ss_reader_attempt(r, 9, -1, &attempt, NULL),
                 SS_READ_NOT_FOUND);
    ss_attempt_row *att;
    REQUIRE(ss_reader_attempts(r, 2, &att, &n) == 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(att[1].attempt, 1);
    CHECK_EQ_INT(att[1].started_at - att[0].started_at, 100000 * MS);
    ss_attempt_rows_free(att);
    ss_reader_close(r);
}

/* The facts of a restarted run's attempts. */
static void attempt_facts(void)
{
    char path[600], err[512];
    testing_tmp_path("restart.db", path, sizeof path);
    ss_store *s = ss_store_open(path, NULL, 1, err, sizeof err);
    REQUIRE(s);
    int64_t run = ss_fixture_restart_run(s, "train", SS_FIXTURE_T0);
    ss_store_close(s);
    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r);
    ss_attempt_row *att;
    size_t n;
    REQUIRE(ss_reader_attempts(r, run, &att, &n) == 0);
    REQUIRE(n == 2);
    CHECK_STR(att[0].cause, "rank_crash");
    CHECK_EQ_INT(att[0].ended_at, SS_FIXTURE_T0 + 16000 * MS);
    CHECK_EQ_INT(att[0].first_step, 0);
    CHECK_EQ_INT(att[0].last_step, 9);
    CHECK_EQ_INT(att[0].resumed_from, SS_MISSING);
    CHECK_STR(att[1].cause, "completed");
    CHECK_EQ_INT(att[1].started_at, SS_FIXTURE_T0 + 20000 * MS);
    CHECK_EQ_INT(att[1].resumed_from, 4);
    ss_attempt_rows_free(att);
    ss_reader_close(r);
}

static void ranks_with_medians(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_rank_row *k;
    size_t n;
    REQUIRE(ss_reader_ranks(r, 1, 0, 0, SS_RANKS_PHASE_MEDIANS, &k, &n) == 0);
    REQUIRE(n == 4);
    CHECK_EQ_INT(k[3].rank, 3);
    CHECK_STR(k[3].state, "exited");
    CHECK_STR(k[3].host, "node1");
    CHECK_EQ_INT(k[3].pid, 1003);
    CHECK_EQ_INT(k[3].last_step, 19);
    CHECK_EQ_INT(k[3].steps, 20);
    CHECK_EQ_INT(k[3].median_step_ns, 103 * MS);
    CHECK_EQ_INT(k[3].p90_step_ns, 103 * MS);
    CHECK_EQ_INT(k[3].samples, 20);
    CHECK_EQ_INT(k[3].max_rss_bytes, ((int64_t)1 << 30) + 3);
    CHECK_EQ_INT(k[3].max_device_bytes, SS_MISSING);
    REQUIRE(k[3].n_phase_medians == 2);
    CHECK_STR(k[3].phase_median_ns[0].name, "backward");
    CHECK_EQ_INT(k[3].phase_median_ns[0].value, 60 * MS);
    CHECK_STR(k[3].phase_median_ns[1].name, "forward");
    CHECK_EQ_INT(k[3].phase_median_ns[1].value, 43 * MS);
    /* Self time: backward holds the all-reduce wait. */
    REQUIRE(k[2].n_phase_self_medians == 2);
    CHECK_STR(k[2].phase_self_median_ns[0].name, "backward");
    CHECK_EQ_INT(k[2].phase_self_median_ns[0].value, 50 * MS);
    CHECK_STR(k[2].phase_self_median_ns[1].name, "forward");
    CHECK_EQ_INT(k[2].phase_self_median_ns[1].value, 42 * MS);
    REQUIRE(k[3].n_phase_self_medians == 2);
    CHECK_EQ_INT(k[3].phase_self_median_ns[0].value, 20 * MS);
    CHECK_STR(k[2].state, "failed");
    CHECK_EQ_INT(k[2].term_signal, 9);
    CHECK_EQ_INT(k[1].dropped_events, 5);
    ss_rank_rows_free(k, n);

    /* Medians over the latest steps only; phases only when asked. */
    REQUIRE(ss_reader_ranks(r, 1, 0, 15, 0, &k, &n) == 0);
    CHECK_EQ_INT(k[0].samples, 5);
    CHECK_EQ_INT(k[0].n_phase_medians, 0);
    ss_rank_rows_free(k, n);

    /* An attempt without data: every rank of the world, all missing. */
    REQUIRE(ss_reader_ranks(r, 2, 0, 0, 0, &k, &n) == 0);
    CHECK_EQ_INT(n, 4);
    CHECK(k[0].state == NULL);
    CHECK_EQ_INT(k[0].median_step_ns, SS_MISSING);
    CHECK_EQ_INT(k[0].last_step, SS_MISSING);
    ss_rank_rows_free(k, n);
    CHECK_EQ_INT(ss_reader_ranks(r, 5, 0, 0, 0, &k, &n), SS_READ_NOT_FOUND);
    ss_reader_close(r);
}

static void steps_with_phases_and_windows(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_steps s;
    REQUIRE(ss_reader_steps(r, 1, 0, NULL, SS_STEPS_PHASES | SS_STEPS_SYNCS,
                            &s) == 0);
    REQUIRE(s.n_steps == 20);
    CHECK_EQ_INT(s.steps[0].step, 0);
    CHECK_EQ_INT(s.steps[19].step, 19);
    const ss_step_row *x = &s.steps[7];
    CHECK_EQ_INT(x->step_median, 101 * MS);
    CHECK_EQ_INT(x->step_max, 103 * MS);
    CHECK_EQ_INT(x->step_worst_rank, 3);
    CHECK_EQ_INT(x->n_present, 4);
    CHECK_EQ_INT(x->n_missing_ranks, 0);
    CHECK_EQ_INT(x->device_median, SS_MISSING);
    REQUIRE(x->n_phases == 2);
    const ss_step_phase *p = &s.phases[x->phase0];
    CHECK_STR(s.names[p[0].name], "backward");
    CHECK_STR(s.names[p[1].name], "forward");
    CHECK_EQ_INT(p[1].median, 41 * MS);
    CHECK_EQ_INT(p[1].worst_rank, 3);
    CHECK_EQ_INT(p[0].median, 60 * MS);
    CHECK_EQ_INT(p[0].self_n, 4);
    CHECK_EQ_INT(p[0].self_median, 20 * MS);
    CHECK_EQ_INT(p[0].self_max, 50 * MS);
    CHECK_EQ_INT(p[0].self_worst_rank, 2);
    CHECK_EQ_INT(p[1].self_median, 41 * MS);
    REQUIRE(x->n_syncs == 1);
    CHECK_STR(s.names[s.syncs[x->sync0].name], "allreduce");
    CHECK_EQ_INT(s.syncs[x->sync0].skew_ns, 3000);
    CHECK_EQ_INT(s.syncs[x->sync0].late_ns, 2000);
    CHECK_EQ_INT(s.n_names, 3);
    ss_steps_free(&s);
    ss_steps_free(&s); /* twice is harmless */

    ss_step_window last5 = {-1, -1, 5};
    REQUIRE(ss_reader_steps(r, 1, 0, &last5, 0, &s) == 0);
    REQUIRE(s.n_steps == 5);
    CHECK_EQ_INT(s.steps[0].step, 15);
    CHECK_EQ_INT(s.steps[4].step, 19);
    CHECK_EQ_INT(s.n_phases, 0);
    ss_steps_free(&s);
    ss_step_window from3 = {3, -1, 2};
    REQUIRE(ss_reader_steps(r, 1, 0, &from3, SS_STEPS_PHASES, &s) == 0);
    REQUIRE(s.n_steps == 2);
    CHECK_EQ_INT(s.steps[0].step, 3);
    CHECK_EQ_INT(s.steps[1].step, 4);
    CHECK_EQ_INT(s.n_phases, 4);
    CHECK_EQ_INT(s.steps[1].phase0, 2);
    ss_steps_free(&s);
    ss_step_window upto6 = {-1, 6, 2};
    REQUIRE(ss_reader_steps(r, 1, 0, &upto6, 0, &s) == 0);
    REQUIRE(s.n_steps == 2);
    CHECK_EQ_INT(s.steps[0].step, 5);
    ss_steps_free(&s);

    ss_step_counts c;
    REQUIRE(ss_reader_step_counts(r, 2, 1, &c) == 0);
    CHECK_EQ_INT(c.steps, 3);
    CHECK_EQ_INT(c.first, 5);
    CHECK_EQ_INT(c.last, 7);
    CHECK_EQ_INT(c.with_missing_ranks, 0);
    REQUIRE(ss_reader_step_counts(r, 2, 0, &c) == 0);
    CHECK_EQ_INT(c.steps, 0);
    CHECK_EQ_INT(c.first, SS_MISSING);
    ss_reader_close(r);
}

static void rank_steps_cursor(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_rank_step_query q = {1, 0, 18, -1,
                            SS_RANK_STEPS_PHASES | SS_RANK_STEPS_SYNCS |
                                SS_RANK_STEPS_METRICS, 0};
    ss_rank_steps *cur;
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    const ss_rank_step_row *row;
    int n = 0, rc;
    while ((rc = ss_rank_steps_next(cur, &row)) == 1) {
        CHECK_EQ_INT(row->step, 18 + n / 4);
        CHECK_EQ_INT(row->rank, n % 4);
        CHECK_EQ_INT(row->step_ns, (100 + row->rank) * MS);
        CHECK_EQ_INT(row->begin_ns, row->step * 200 * MS);
        REQUIRE(row->n_phases == 2);
        CHECK_STR(ss_rank_steps_name(cur, row->phases[0].name), "forward");
        CHECK_EQ_INT(row->phases[0].total_ns, (40 + row->rank) * MS);
        CHECK_EQ_INT(row->phases[0].start_ns, SS_MISSING);
        CHECK_EQ_INT(row->phases[0].count, 1);
        /* forward has nothing nested: its self time is its time */
        CHECK_EQ_INT(row->phases[0].self_ns, row->phases[0].total_ns);
        CHECK_STR(ss_rank_steps_name(cur, row->phases[1].name), "backward");
        CHECK_EQ_INT(row->phases[1].total_ns, 60 * MS);
        CHECK_EQ_INT(row->phases[1].self_ns,
                     (row->rank == 2 ? 50 : 20) * MS);
        REQUIRE(row->n_syncs == 1);
        CHECK_STR(ss_rank_steps_name(cur, row->syncs[0].name), "allreduce");
        /* Stored after the step's begin. */
        CHECK_EQ_INT(row->syncs[0].at_ns,
                     MS + row->rank * 1000 - row->begin_ns);
        if (row->step == 19 && row->rank == 2) {
            CHECK_EQ_INT(row->n_metrics, 0);
        } else {
            REQUIRE(row->n_metrics == 1);
            CHECK_STR(ss_rank_steps_name(cur, row->metrics[0].name), "loss");
            CHECK(row->metrics[0].value == (double)row->step +
                                               0.5 * (double)row->rank);
        }
        n++;
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(n, 8);
    CHECK(ss_rank_steps_name(cur, 99) == NULL);
    ss_rank_steps_close(cur);
    ss_rank_steps_close(NULL);

    /* Without fields: the fixed columns alone. */
    q = (ss_rank_step_query){1, 0, -1, 0, 0, 0};
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    REQUIRE(ss_rank_steps_next(cur, &row) == 1);
    CHECK_EQ_INT(row->n_phases + row->n_syncs + row->n_metrics, 0);
    ss_rank_steps_close(cur);

    /* One rank's rows: rank 3 of steps 17..19, in step order. */
    q = (ss_rank_step_query){1, 0, 17, -1, SS_RANK_STEPS_ONE_RANK, 3};
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    n = 0;
    while ((rc = ss_rank_steps_next(cur, &row)) == 1) {
        CHECK_EQ_INT(row->rank, 3);
        CHECK_EQ_INT(row->step, 17 + n);
        n++;
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(n, 3);
    ss_rank_steps_close(cur);
    /* A rank the run has no rows of: none. */
    q.rank = 9;
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    CHECK_EQ_INT(ss_rank_steps_next(cur, &row), 0);
    ss_rank_steps_close(cur);

    ss_rank_step_summary sum;
    REQUIRE(ss_reader_rank_step_summary(r, 1, 0, 10, 12, &sum) == 0);
    CHECK_EQ_INT(sum.rows, 12);
    CHECK_EQ_INT(sum.timed_rows, 12);
    CHECK_EQ_INT(sum.first_step, 10);
    CHECK_EQ_INT(sum.last_step, 12);
    CHECK_EQ_INT(sum.t0_ns, 0);
    int64_t *steps;
    size_t ns;
    ss_step_window w = {-1, -1, 3};
    REQUIRE(ss_reader_rank_step_numbers(r, 1, 0, &w, &steps, &ns) == 0);
    REQUIRE(ns == 3);
    CHECK_EQ_INT(steps[0], 17);
    CHECK_EQ_INT(steps[2], 19);
    free(steps);
    ss_reader_close(r);
}

static void findings_events_and_metrics(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_finding_row *f;
    size_t n;
    REQUIRE(ss_reader_findings(r, 1, 0, -1, -1, &f, &n) == 0);
    REQUIRE(n == 2);
    CHECK_STR(f[0].kind, "straggler"); /* critical first */
    CHECK_STR(f[0].severity, "critical");
    CHECK_STR(f[0].phase, "forward");
    REQUIRE(f[0].n_ranks == 1);
    CHECK_EQ_INT(f[0].ranks[0], 3);
    CHECK_EQ_INT(f[0].first_step, 2);
    CHECK_EQ_INT(f[0].last_step, 19);
    CHECK_STR(f[0].evidence,
              "{\"late_ms\":2.0,\"steps\":18,\"rule\":\"skew\"}");
    CHECK_STR(f[1].kind, "data_stall");
    CHECK(f[1].phase == NULL);
    ss_finding_rows_free(f, n);
    /* Only those overlapping the steps asked for. */
    REQUIRE(ss_reader_findings(r, 1, 0, 8, 30, &f, &n) == 0);
    CHECK_EQ_INT(n, 1);
    ss_finding_rows_free(f, n);
    REQUIRE(ss_reader_findings(r, 2, 1, -1, -1, &f, &n) == 0);
    CHECK_EQ_INT(n, 0);
    ss_finding_rows_free(f, n);

    ss_event_row *e;
    int64_t total = 0;
    ss_event_query all = {0, -1, 0, 0};
    REQUIRE(ss_reader_events(r, 1, &all, &e, &n, &total) == 0);
    CHECK_EQ_INT(total, 2);
    REQUIRE(n == 2);
    CHECK_STR(e[0].kind, "rank_connected");
    CHECK_EQ_INT(e[0].rank, 0);
    CHECK(e[0].message == NULL);
    CHECK_STR(e[1].message, "rank 2 killed by signal 9 at step 19");
    int64_t first_id = e[0].id;
    ss_event_rows_free(e, n);
    ss_event_query after = {-1, first_id, 10, 0};
    REQUIRE(ss_reader_events(r, 1, &after, &e, &n, NULL) == 0);
    REQUIRE(n == 1);
    CHECK_STR(e[0].kind, "rank_failed");
    ss_event_rows_free(e, n);
    ss_event_query tail = {0, -1, 1, 1};
    REQUIRE(ss_reader_events(r, 1, &tail, &e, &n, &total) == 0);
    REQUIRE(n == 1);
    CHECK_STR(e[0].kind, "rank_failed");
    CHECK_EQ_INT(total, 2);
    ss_event_rows_free(e, n);

    ss_metric_row *m;
    REQUIRE(ss_reader_metrics(r, 1, 0, &m, &n) == 0);
    REQUIRE(n == 1);
    CHECK_STR(m[0].name, "loss");
    CHECK_EQ_INT(m[0].steps, 20);
    CHECK_EQ_INT(m[0].last_step, 19);
    REQUIRE(m[0].n == 3); /* rank 2 reported none at step 19 */
    CHECK(m[0].values[0] == 19.0 && m[0].ranks[0] == 0);
    CHECK(m[0].values[2] == 20.5 && m[0].ranks[2] == 3);
    ss_metric_rows_free(m, n);
    ss_reader_close(r);
}

/* A store from before schema version 2 (no timelines, no metrics) is read
 * as it is: the columns it lacks read as missing, and it stays at its
 * version, byte for byte. */
static void older_schema_is_read_without_migrating(void)
{
    char path[600], err[512];
    testing_tmp_path("old.db", path, sizeof path);
    REQUIRE(ss_fixture_build(path, err, sizeof err) == 0);
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db,
                              "DROP TABLE value_labels;"
                              "DROP TABLE rank_values;"
                              "ALTER TABLE runs DROP COLUMN "
                              "dropped_vectors;"
                              "DROP TABLE profiles;"
                              "DROP TABLE nodes;"
                              "ALTER TABLE attempts DROP COLUMN ended_at;"
                              "ALTER TABLE attempts DROP COLUMN cause;"
                              "ALTER TABLE attempts DROP COLUMN "
                              "first_step;"
                              "ALTER TABLE attempts DROP COLUMN last_step;"
                              "ALTER TABLE attempts DROP COLUMN "
                              "resumed_from;"
                              "DROP TABLE stack_snapshots;"
                              "ALTER TABLE runs DROP COLUMN fingerprint;"
                              "ALTER TABLE rank_steps DROP COLUMN "
                              "phase_self;"
                              "ALTER TABLE step_phases DROP COLUMN self_n;"
                              "ALTER TABLE step_phases DROP COLUMN "
                              "self_median;"
                              "ALTER TABLE rank_steps DROP COLUMN metrics;"
                              "ALTER TABLE rank_steps DROP COLUMN syncs;"
                              "ALTER TABLE rank_steps DROP COLUMN "
                              "phase_counts;"
                              "ALTER TABLE rank_steps DROP COLUMN "
                              "phase_starts;"
                              "ALTER TABLE rank_steps DROP COLUMN end_ns;"
                              "ALTER TABLE rank_steps DROP COLUMN begin_ns;"
                              "PRAGMA user_version = 1;"
                              "PRAGMA journal_mode = DELETE",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    struct stat before, after;
    REQUIRE(stat(path, &before) == 0);

    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    CHECK_EQ_INT(ss_reader_schema_version(r), 1);
    ss_rank_step_query q = {1, 0, 0, 0, SS_RANK_STEPS_PHASES |
                                            SS_RANK_STEPS_SYNCS |
                                            SS_RANK_STEPS_METRICS, 0};
    ss_rank_steps *cur;
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    const ss_rank_step_row *row;
    REQUIRE(ss_rank_steps_next(cur, &row) == 1);
    CHECK_EQ_INT(row->begin_ns, SS_MISSING);
    REQUIRE(row->n_phases == 2);
    CHECK_EQ_INT(row->phases[1].self_ns, SS_MISSING); /* never zero */
    CHECK_EQ_INT(row->n_syncs, 0);
    CHECK_EQ_INT(row->n_metrics, 0);
    ss_rank_steps_close(cur);
    ss_rank_step_summary sum;
    REQUIRE(ss_reader_rank_step_summary(r, 1, 0, -1, -1, &sum) == 0);
    CHECK_EQ_INT(sum.rows, 80);
    CHECK_EQ_INT(sum.timed_rows, 0);
    CHECK_EQ_INT(sum.t0_ns, SS_MISSING);
    ss_metric_row *m;
    size_t n = 9;
    CHECK_EQ_INT(ss_reader_metrics(r, 1, 0, &m, &n), 0);
    CHECK_EQ_INT(n, 0);
    ss_node_row *nodes = (ss_node_row *)1;
    n = 9;
    CHECK_EQ_INT(ss_reader_nodes(r, 1, 0, &nodes, &n), 0); /* no table */
    CHECK_EQ_INT(n, 0);
    CHECK(nodes == NULL);
    ss_attempt_row *att;
    REQUIRE(ss_reader_attempts(r, 1, &att, &n) == 0);
    REQUIRE(n == 1);
    CHECK_EQ_INT(att[0].started_at, SS_FIXTURE_T0);
    CHECK_EQ_INT(att[0].ended_at, SS_MISSING);
    CHECK_EQ_INT(att[0].resumed_from, SS_MISSING);
    CHECK_STR(att[0].cause, "");
    ss_attempt_rows_free(att);
    /* before schema 13: no vectors, no error */
    ss_run_row run;
    REQUIRE(ss_reader_run(r, 1, &run) == 0);
    CHECK_EQ_INT(run.dropped_vectors, SS_MISSING);
    ss_run_row_clear(&run);
    ss_values_name_row *vnames = (ss_values_name_row *)1;
    n = 9;
    CHECK_EQ_INT(ss_reader_value_names(r, 1, 0, &vnames, &n), 0);
    CHECK(vnames == NULL && n == 0);
    ss_values_query vq = {.run_id = 1, .name = "act_absmax", .rank = 0,
                          .index = -1, .from = -1, .to = -1};
    ss_values_rows v;
    CHECK_EQ_INT(ss_reader_values(r, &vq, &v), 0);
    CHECK_EQ_INT(v.n_rows, 0);
    ss_values_rows_free(&v);
    ss_reader_close(r);

    REQUIRE(stat(path, &after) == 0);
    CHECK_EQ_INT(after.st_size, before.st_size);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
          after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Vectors: the names with their ranks, steps, labels and truncation;
 * one rank's vectors over steps; one index over ranks and steps, NaN and
 * infinities as stored; the cell cap stops between steps. */
static void vectors_names_and_values(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_run_row run;
    REQUIRE(ss_reader_run(r, 1, &run) == 0);
    CHECK_EQ_INT(run.dropped_vectors, 3);
    ss_run_row_clear(&run);

    ss_values_name_row *names;
    size_t n;
    REQUIRE(ss_reader_value_names(r, 1, 0, &names, &n) == 0);
    REQUIRE(n == 1);
    CHECK_STR(names[0].name, "act_absmax");
    REQUIRE(names[0].n_ranks == 4);
    CHECK_EQ_INT(names[0].ranks[0], 0);
    CHECK_EQ_INT(names[0].ranks[3], 3);
    CHECK_EQ_INT(names[0].first_step, 0);
    CHECK_EQ_INT(names[0].last_step, 19);
    CHECK_EQ_INT(names[0].steps, 20);
    CHECK_EQ_INT(names[0].rows, 80);
    CHECK_EQ_INT(names[0].max_n, 3);
    CHECK_EQ_INT(names[0].truncated, 7);
    CHECK_STR(names[0].labels_json, "[\"layer0\",\"layer1\",\"head\"]");
    ss_values_name_rows_free(names, n);
    /* run 2 recorded none; no such run */
    REQUIRE(ss_reader_value_names(r, 2, 1, &names, &n) == 0);
    CHECK(names == NULL && n == 0);
    CHECK_EQ_INT(ss_reader_value_names(r, 9, 0, &names, &n),
                 SS_READ_NOT_FOUND);

    /* rank 1, steps 18..19: index x step */
    ss_values_query q = {.run_id = 1, .attempt = 0, .name = "act_absmax",
                         .rank = 1, .index = -1, .from = 18, .to = -1};
    ss_values_rows v;
    REQUIRE(ss_reader_values(r, &q, &v) == 0);
    REQUIRE(v.n_rows == 2);
    CHECK_EQ_INT(v.more, 0);
    CHECK_EQ_INT(v.rows[0].step, 18);
    CHECK_EQ_INT(v.rows[1].rank, 1);
    REQUIRE(v.rows[1].n == 3);
    CHECK(v.rows[1].v[0] == 20.0 && v.rows[1].v[1] == 10.0);
    CHECK(isnan(v.rows[1].v[2]));
    ss_values_rows_free(&v);

    /* index 2 over ranks, steps 19..19: rank 2's vector is shorter */
    q.rank = -1;
    q.index = 2;
    q.from = q.to = 19;
    REQUIRE(ss_reader_values(r, &q, &v) == 0);
    REQUIRE(v.n_rows == 4);
    CHECK(v.rows[0].n == 1 && v.rows[0].v[0] == 1.0);
    CHECK(isnan(v.rows[1].v[0]));
    CHECK_EQ_INT(v.rows[2].n, 0);
    CHECK_EQ_INT(v.rows[2].truncated, 7);
    CHECK(isinf(v.rows[3].v[0]) && v.rows[3].v[0] > 0);
    ss_values_rows_free(&v);

    /* a cap of 10 cells: two whole steps of four ranks, then more */
    q.from = 0;
    q.to = -1;
    q.max_cells = 10;
    REQUIRE(ss_reader_values(r, &q, &v) == 0);
    CHECK_EQ_INT(v.n_rows, 8);
    CHECK_EQ_INT(v.more, 1);
    CHECK_EQ_INT(v.next_step, 2);
    ss_values_rows_free(&v);
    /* a cap below one step still reads that step whole */
    q.max_cells = 1;
    REQUIRE(ss_reader_values(r, &q, &v) == 0);
    CHECK_EQ_INT(v.n_rows, 4);
    CHECK_EQ_INT(v.next_step, 1);
    ss_values_rows_free(&v);

    /* neither or both of rank and index: an error that says so */
    q.index = -1;
    CHECK_EQ_INT(ss_reader_values(r, &q, &v), SS_READ_ERROR);
    CHECK(strstr(ss_reader_errmsg(r), "neither") != NULL);
    q.name = "no_such";
    q.index = 0;
    REQUIRE(ss_reader_values(r, &q, &v) == 0);
    CHECK_EQ_INT(v.n_rows, 0);
    ss_values_rows_free(&v);
    ss_reader_close(r);
}

/* Host evidence: per rank-step with SS_RANK_STEPS_HOST, and per rank
 * over the attempt; none for an attempt written without it. */
static void rank_host_evidence(void)
{
    ss_reader *r = open_fixture();
    REQUIRE(r != NULL);
    ss_rank_step_query q = {1, 0, 3, 3, SS_RANK_STEPS_HOST, 0};
    ss_rank_steps *cur;
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    const ss_rank_step_row *row;
    int n = 0;
    while (ss_rank_steps_next(cur, &row) == 1) {
        REQUIRE(row->host != NULL);
        CHECK_EQ_INT(row->host->cpu_ns, (80 + row->rank) * MS);
        CHECK_EQ_INT(row->host->runq_ns, row->rank == 2 ? 5 * MS : MS);
        CHECK_EQ_INT(row->host->stopped_ns, row->rank == 2 ? 30 * MS : 0);
        CHECK_EQ_INT(row->host->invol_switches, 2 + row->rank);
        CHECK_EQ_INT(row->host->psi_io_ns, SS_MISSING);
        CHECK_EQ_INT(row->host->gpu.present, row->rank < 3);
        if (row->rank == 2) {
            CHECK_EQ_INT(row->host->gpu.index, 2);
            CHECK_EQ_INT(row->host->gpu.power_cap_ns, 20 * MS); /* step 3 */
            CHECK_EQ_INT(row->host->gpu.slowed_ns, 20 * MS);
            CHECK_EQ_INT(row->host->gpu.hw_slowdown_ns, SS_MISSING);
            CHECK_EQ_INT(row->host->gpu.sm_clock_mhz, 1420);
        }
        n++;
    }
    CHECK_EQ_INT(n, 4);
    ss_rank_steps_close(cur);
    q.fields = 0; /* not asked for */
    REQUIRE(ss_reader_rank_steps(r, &q, &cur) == 0);
    REQUIRE(ss_rank_steps_next(cur, &row) == 1);
    CHECK(row->host == NULL);
    ss_rank_steps_close(cur);

    ss_rank_host *hosts;
    size_t n_hosts;
    REQUIRE(ss_reader_rank_host(r, 1, 0, &hosts, &n_hosts) == 0);
    REQUIRE(n_hosts == 4);
    const ss_rank_host *h2 = &hosts[2], *h3 = &hosts[3];
    CHECK_EQ_INT(h2->rank, 2);
    CHECK_EQ_INT(h2->steps, 20);
    CHECK_EQ_INT(h2->stopped_steps, 10);
    CHECK_EQ_INT(h2->max.stopped_ns, 30 * MS);
    CHECK_EQ_INT(h2->sum.stopped_ns, 300 * MS);
    CHECK_EQ_INT(h2->median.runq_ns, 5 * MS);
    CHECK_EQ_INT(hosts[0].median.runq_ns, MS);
    CHECK_EQ_INT(hosts[0].stopped_steps, 0);
    CHECK_EQ_INT(h3->throttled_steps, 20);
    CHECK_EQ_INT(h3->median.throttled_ns, 2 * MS);
    CHECK_EQ_INT(h3->median.major_faults, 3);
    CHECK_EQ_INT(h3->median.psi_cpu_ns, 4 * MS);
    CHECK_EQ_INT(h3->median.psi_io_ns, SS_MISSING);
    /* the GPU columns (schema 8): ranks 0-2 on GPUs 0-2, rank 3 none */
    CHECK_EQ_INT(h3->gpu_steps, 0);
    CHECK_EQ_INT(h3->gpu_sum.present, 0);
    CHECK_EQ_INT(h2->gpu_steps, 20);
    CHECK_EQ_INT(h2->gpu_sum.index, 2);
    CHECK_EQ_INT(h2->gpu_slowed_steps, 10);
    CHECK_EQ_INT(h2->gpu_power_cap_steps, 10);
    CHECK_EQ_INT(h2->gpu_thermal_steps, 0);
    CHECK_EQ_INT(h2->gpu_hw_slowdown_steps, 0);
    CHECK_EQ_INT(h2->gpu_sum.power_cap_ns, 200 * MS);
    CHECK_EQ_INT(h2->gpu_sum.covered_ns, 2000 * MS);
    CHECK_EQ_INT(h2->gpu_sum.hw_slowdown_ns, SS_MISSING);
    CHECK_EQ_INT(h2->gpu_sum.sm_clock_mhz, 1420);
    CHECK_EQ_INT(h2->gpu_sum.temperature_c, 62);
    CHECK_EQ_INT(hosts[1].gpu_sum.xid_new, 1);
    CHECK_EQ_INT(hosts[1].gpu_sum.last_xid, 79);
    CHECK_EQ_INT(hosts[0].gpu_sum.last_xid, 0);
    free(hosts);
    /* run 2's attempt 1 was written without host evidence */
    REQUIRE(ss_reader_rank_host(r, 2, 1, &hosts, &n_hosts) == 0);
    CHECK(hosts == NULL && n_hosts == 0);
    ss_reader_close(r);
}

/* A query the store refuses is SS_READ_ERROR with SQLite's reason, and a
 * loader that fails after some rows (an error on the second event) gives
 * back nothing and frees what it had read (the sanitizer build checks). */
static void a_failing_query_is_an_error(void)
{
    char path[600], sql[800];
    testing_tmp_path("broken.db", path, sizeof path);
    unlink(path);
    sqlite3 *db;
    REQUIRE(sqlite3_open(ss_fixture_file(), &db) == SQLITE_OK);
    snprintf(sql, sizeof sql, "VACUUM INTO '%s'", path);
    REQUIRE(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
        "DROP TABLE nodes;"
        "ALTER TABLE events RENAME TO events_kept;"
        "CREATE VIEW events AS SELECT id, run_id, attempt, at, kind, rank, "
        "CASE WHEN id > (SELECT min(id) FROM events_kept) "
        "THEN json_extract('not json', '$') ELSE message END AS message "
        "FROM events_kept;",
        NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    char err[512];
    ss_reader *r = ss_reader_open(path, err, sizeof err);
    REQUIRE(r != NULL);
    ss_node_row *nodes = (ss_node_row *)1;
    size_t n = 9;
    CHECK_EQ_INT(ss_reader_nodes(r, 1, 0, &nodes, &n), SS_READ_ERROR);
    CHECK(nodes == NULL && n == 0);
    CHECK(strstr(ss_reader_errmsg(r), "cannot query the store") != NULL);
    CHECK(strstr(ss_reader_errmsg(r), "nodes") != NULL);

    ss_event_row *e = (ss_event_row *)1;
    ss_event_query all = {0, -1, 0, 0};
    CHECK_EQ_INT(ss_reader_events(r, 1, &all, &e, &n, NULL), SS_READ_ERROR);
    CHECK(e == NULL && n == 0);
    CHECK(strstr(ss_reader_errmsg(r), "cannot read the store") != NULL);
    CHECK(strstr(ss_reader_errmsg(r), "JSON") != NULL);

    /* the reader goes on after an error */
    ss_run_row run;
    CHECK_EQ_INT(ss_reader_run(r, 1, &run), 0);
    CHECK_STR(ss_reader_errmsg(r), "");
    ss_run_row_clear(&run);
    ss_reader_close(r);
}

TEST_LIST(TEST(open_refuses_what_is_not_a_store),
          TEST(selects_runs_by_id_name_and_uuid),
          TEST(runs_and_attempts), TEST(attempt_facts),
          TEST(ranks_with_medians),
          TEST(steps_with_phases_and_windows),
          TEST(rank_steps_cursor),
          TEST(rank_host_evidence),
          TEST(vectors_names_and_values),
          TEST(findings_events_and_metrics),
          TEST(older_schema_is_read_without_migrating),
          TEST(a_failing_query_is_an_error))
