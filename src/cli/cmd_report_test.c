/*
 * cmd_report_test.c - unit tests for `stepscope report` and `stepscope runs`.
 *
 * Reads the standard test store (store_fixture.h: two runs; the first has
 * a straggler on rank 3, a failed rank 2, findings, events), runs the
 * commands with their output captured in memory, and checks the JSON with
 * SQLite's JSON functions (json_valid, json_extract) and the text by
 * content and order.  Also: run selection by id, name and uuid prefix, and
 * the errors for an unknown run, a missing file, a file that is not a
 * store, an empty store and bad usage.  Run again with the standard
 * store's runs in a team database (STEPSCOPE_TEST_PG, store_fixture.h:
 * unit.cmd_report_test.postgresql): the same documents.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "report_model.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_cmd.h"
#include "testing_tmp.h"

/* ---- helpers ---- */

/* Output of one command run. */
typedef struct {
    int rc;
    char *out, *err;
    size_t out_len, err_len;
} result;

static result run_cmd(testing_cmd_fn cmd,
                      const char *const *args)
{
    char *argv[16];
    int argc = 0;
    while (args[argc] && argc < 15) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    result r = {0};
    FILE *out = open_memstream(&r.out, &r.out_len);
    FILE *err = open_memstream(&r.err, &r.err_len);
    r.rc = testing_cmd_run(cmd, argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
}

/* json_extract(JSON, PATH) as text ("<null>" for SQL NULL). */
static const char *jget(const char *json, const char *path, char *buf,
                        size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    snprintf(buf, n, "<error>");
    sqlite3_open(":memory:", &db);
    if (sqlite3_prepare_v2(db, "SELECT json_extract(?1, ?2)", -1, &q, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(q, 0);
            snprintf(buf, n, "%s", t ? (const char *)t : "<null>");
        }
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return buf;
}

static int json_ok(const char *json)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int ok = 0;
    sqlite3_open(":memory:", &db);
    if (sqlite3_prepare_v2(db, "SELECT json_valid(?1) AND json_type(?1) = "
                               "'object'", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
        ok = sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return ok;
}

#define CHECK_J(json, path, want)                                             \
    do {                                                                      \
        char jb_[512];                                                        \
        CHECK_STR(jget((json), (path), jb_, sizeof jb_), (want));             \
    } while (0)

/* The standard store (store_fixture.h): run 1 "train" (20 steps,
 * findings, a failed rank, events, ended) and run 2 "other" (still
 * running; attempt 0 has no steps, attempt 1 has 3). */
static const char *fixture(void)
{
    return ss_fixture_store();
}

/* ---- tests ---- */

static void json_report_has_documented_fields(void)
{
    const char *db = fixture();
    const char *args[] = {"report", "--db", db, "--json", "train", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(r.err_len, 0);
    REQUIRE(json_ok(r.out));
    const char *j = r.out;
    CHECK_J(j, "$.format", "stepscope.report/1");
    CHECK_J(j, "$.run.id", "1");
    CHECK_J(j, "$.run.uuid", "0123abcd-0000");
    CHECK_J(j, "$.run.name", "train");
    CHECK_J(j, "$.run.command", "python train.py --lr 0.1");
    CHECK_J(j, "$.run.world_size", "4");
    CHECK_J(j, "$.run.status", "failed");
    CHECK_J(j, "$.run.exit_code", "137");
    CHECK_J(j, "$.run.started_at", "2023-11-14T22:13:20.000Z");
    CHECK_J(j, "$.run.duration_s", "90.0");
    CHECK_J(j, "$.run.attempt", "0");

    /* Findings: critical first, each with the documented fields. */
    CHECK_J(j, "$.findings[2]", "<null>");
    CHECK_J(j, "$.findings[#-1].kind", "data_stall");
    CHECK_J(j, "$.findings[0].kind", "straggler");
    CHECK_J(j, "$.findings[0].severity", "critical");
    CHECK_J(j, "$.findings[0].ranks", "[3]");
    CHECK_J(j, "$.findings[0].phase", "forward");
    CHECK_J(j, "$.findings[0].first_step", "2");
    CHECK_J(j, "$.findings[0].last_step", "19");
    CHECK_J(j, "$.findings[0].evidence.late_ms", "2.0");
    CHECK_J(j, "$.findings[0].evidence.rule", "skew");
    CHECK_J(j, "$.findings[0].message",
            "rank 3 is a persistent straggler in forward");
    CHECK_J(j, "$.findings[1].severity", "warning");
    CHECK_J(j, "$.findings[1].phase", "<null>");
    CHECK_J(j, "$.findings[1].evidence.wait_ms", "250");
    /* Control characters escaped, valid UTF-8 kept, invalid replaced. */
    CHECK_J(j, "$.findings[1].message",
            "rank 1 \"waited\"\tfor data\n\x01 \xe2\x9c\x93 \xef\xbf\xbd");

    CHECK_J(j, "$.steps.count", "20");
    CHECK_J(j, "$.steps.first", "0");
    CHECK_J(j, "$.steps.last", "19");
    CHECK_J(j, "$.steps.step_time_ms.median_rank.p50", "101.0");
    CHECK_J(j, "$.steps.step_time_ms.worst_rank.p90", "103.0");
    CHECK_J(j, "$.steps.slowest_rank_most_often", "3");
    CHECK_J(j, "$.steps.phases[0].name", "backward"); /* longest first */
    CHECK_J(j, "$.steps.phases[1].name", "forward");
    CHECK_J(j, "$.steps.phases[1].median_rank_ms.p50", "41.0");
    CHECK_J(j, "$.steps.phases[1].worst_rank_ms.p50", "43.0");
    CHECK_J(j, "$.steps.phases[1].most_often_worst_rank", "3");
    CHECK_J(j, "$.steps.phases[1].most_often_worst_steps", "20");
    /* Self time: backward holds a nested wait, forward nothing. */
    CHECK_J(j, "$.steps.phases[0].self_median_rank_ms.p50", "20.0");
    CHECK_J(j, "$.steps.phases[0].nests", "1");
    CHECK_J(j, "$.steps.phases[1].self_median_rank_ms.p50", "41.0");
    CHECK_J(j, "$.steps.phases[1].nests", "0");
    CHECK_J(j, "$.steps.syncs[0].name", "allreduce");
    CHECK_J(j, "$.steps.syncs[0].skew_ms.p50", "0.003");
    CHECK_J(j, "$.steps.syncs[0].most_often_last_rank", "3");

    /* The metric at its last step, where rank 2 reported none. */
    CHECK_J(j, "$.metrics[0].name", "loss");
    CHECK_J(j, "$.metrics[1]", "<null>");
    CHECK_J(j, "$.metrics[0].steps", "20");
    CHECK_J(j, "$.metrics[0].last_step", "19");
    CHECK_J(j, "$.metrics[0].last.ranks", "3");
    CHECK_J(j, "$.metrics[0].last.median", "19.5");
    CHECK_J(j, "$.metrics[0].last.min", "19");
    CHECK_J(j, "$.metrics[0].last.min_rank", "0");
    CHECK_J(j, "$.metrics[0].last.max", "20.5");
    CHECK_J(j, "$.metrics[0].last.max_rank", "3");

    /* Vectors: the names in brief and the latest step's vectors of the
     * first ranks; NaN and infinities as strings; bounded. */
    CHECK_J(j, "$.values.ranks_shown", "8");
    CHECK_J(j, "$.values.names[1]", "<null>");
    CHECK_J(j, "$.values.names[0].name", "act_absmax");
    CHECK_J(j, "$.values.names[0].ranks", "[0,1,2,3]");
    CHECK_J(j, "$.values.names[0].first_step", "0");
    CHECK_J(j, "$.values.names[0].last_step", "19");
    CHECK_J(j, "$.values.names[0].steps", "20");
    CHECK_J(j, "$.values.names[0].max_n", "3");
    CHECK_J(j, "$.values.names[0].truncated", "7");
    CHECK_J(j, "$.values.names[0].labels[2]", "head");
    CHECK_J(j, "$.values.names[0].latest.step", "19");
    CHECK_J(j, "$.values.names[0].latest.ranks[1].values",
            "[20,10,\"nan\"]");
    CHECK_J(j, "$.values.names[0].latest.ranks[2].truncated", "7");
    CHECK_J(j, "$.values.names[0].latest.ranks[2].values", "[21,20]");
    CHECK_J(j, "$.values.names[0].latest.ranks[3].values",
            "[22,30,\"inf\"]");
    CHECK_J(j, "$.values.names[0].latest.ranks_not_shown", "0");
    CHECK_J(j, "$.dropped.vectors", "3");

    CHECK_J(j, "$.ranks[3].rank", "3");
    CHECK_J(j, "$.ranks[#-1].rank", "3");
    CHECK_J(j, "$.ranks[3].state", "exited");
    CHECK_J(j, "$.ranks[3].exit_code", "0");
    CHECK_J(j, "$.ranks[3].signal", "<null>");
    CHECK_J(j, "$.ranks[3].last_step", "19");
    CHECK_J(j, "$.ranks[3].steps", "20");
    CHECK_J(j, "$.ranks[3].median_step_ms", "103.0");
    CHECK_J(j, "$.ranks[3].p90_step_ms", "103.0");
    CHECK_J(j, "$.ranks[3].phase_median_ms.forward", "43.0");
    CHECK_J(j, "$.ranks[2].phase_median_ms.backward", "60.0");
    CHECK_J(j, "$.ranks[2].phase_self_median_ms.backward", "50.0");
    CHECK_J(j, "$.ranks[3].phase_self_median_ms.backward", "20.0");
    CHECK_J(j, "$.ranks[3].max_rss_bytes", "1073741827");
    CHECK_J(j, "$.ranks[3].max_device_bytes", "<null>");
    CHECK_J(j, "$.ranks[2].state", "failed");
    CHECK_J(j, "$.ranks[2].exit_code", "<null>");
    CHECK_J(j, "$.ranks[2].signal", "9");
    CHECK_J(j, "$.ranks[1].dropped_events", "5");
    CHECK_J(j, "$.ranks[1].dropped_records", "0");
    /* Host evidence: rank 2 stopped 30 ms in every other step. */
    CHECK_J(j, "$.ranks[2].host", "node1");
    CHECK_J(j, "$.ranks[2].host_evidence.steps", "20");
    CHECK_J(j, "$.ranks[2].host_evidence.stopped_steps", "10");
    CHECK_J(j, "$.ranks[2].host_evidence.median.runq_ms", "5.0");
    CHECK_J(j, "$.ranks[2].host_evidence.max.stopped_ms", "30.0");
    CHECK_J(j, "$.ranks[2].host_evidence.total.stopped_ms", "300.0");
    CHECK_J(j, "$.ranks[2].host_evidence.median.cpu_ms", "82.0");
    CHECK_J(j, "$.ranks[2].host_evidence.median.invol_switches", "4");
    CHECK_J(j, "$.ranks[2].host_evidence.median.psi_io_ms", "<null>");
    CHECK_J(j, "$.ranks[3].host_evidence.throttled_steps", "20");
    CHECK_J(j, "$.ranks[3].host_evidence.median.throttled_ms", "2.0");
    CHECK_J(j, "$.ranks[3].host_evidence.median.nr_throttled", "1");
    /* GPU evidence (made up in the fixture): GPU 2 power capped in every
     * other step, GPU 1's Xid 79, rank 3 without a GPU. */
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.steps", "20");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.slowed_steps", "10");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.power_cap_steps", "10");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.total.gpu", "2");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.total.power_cap_ms", "200.0");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.total.hw_slowdown_ms",
            "<null>");
    CHECK_J(j, "$.ranks[2].host_evidence.gpu.total.sm_clock_mhz", "1420");
    CHECK_J(j, "$.ranks[1].host_evidence.gpu.total.last_xid", "79");
    CHECK_J(j, "$.ranks[1].host_evidence.gpu.total.xid_new", "1");
    CHECK_J(j, "$.ranks[3].host_evidence.gpu", "<null>");

    CHECK_J(j, "$.dropped.events", "5");
    CHECK_J(j, "$.dropped.records", "0");
    CHECK_J(j, "$.dropped.rank_steps", "0");
    CHECK_J(j, "$.events[1].kind", "rank_failed");
    CHECK_J(j, "$.events[1].rank", "2");
    CHECK_J(j, "$.events_total", "2");
    result_free(&r);
}

static void text_report_puts_findings_first(void)
{
    const char *args[] = {"report", "--db", fixture(), "1", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(r.out != NULL);
    const char *findings = strstr(r.out, "FINDINGS (2)");
    const char *steps = strstr(r.out, "STEP TIME over 20 steps");
    const char *ranks = strstr(r.out, "RANKS");
    CHECK(strstr(r.out, "run 1  train") == r.out);
    CHECK(strstr(r.out, "failed (exit code 137)") != NULL);
    CHECK(findings && steps && ranks && findings < steps && steps < ranks);
    CHECK(strstr(r.out, "CRITICAL  straggler") != NULL);
    CHECK(strstr(r.out, "CRITICAL") < strstr(r.out, "WARNING"));
    CHECK(strstr(r.out, "signal 9") != NULL);
    CHECK(strstr(r.out, "rank 2 killed by signal 9") != NULL);
    CHECK(strstr(r.out, "rank_connected") == NULL); /* routine: not shown */
    CHECK(strstr(r.out, "by the ranks: 5 events") != NULL);
    const char *metrics = strstr(r.out, "METRICS");
    CHECK(metrics && steps < metrics && metrics < ranks);
    CHECK(strstr(r.out, "19 (rank 0)") != NULL);
    CHECK(strstr(r.out, "20.5 (rank 3)") != NULL);
    const char *values = strstr(r.out, "VALUES  1 vector name; 3 vectors "
                                       "dropped");
    CHECK(values && metrics < values && values < ranks);
    CHECK(strstr(r.out, "  act_absmax              3 elements (labelled), "
                        "4 ranks, steps 0-19 (20 kept), 7 elements "
                        "truncated\n") != NULL);
    /* Where phases nest, self time stands next to the inclusive time,
     * and the rank table shows it for the phase that nests. */
    CHECK(strstr(r.out, "self p50") != NULL);
    const char *bwd = strstr(r.out, "\n  backward ");
    double incl = 0, self = 0;
    CHECK(bwd && sscanf(bwd, " backward %lf %lf", &incl, &self) == 2);
    CHECK(incl == 60.0 && self == 20.0);
    CHECK(strstr(r.out, "  backward*") != NULL);
    CHECK(strstr(r.out, "* self time: the phase less the phases nested") !=
          NULL);
    const char *host = strstr(r.out, "HOST (per step");
    CHECK(host && ranks < host);
    if (host) {
        const char *rank2 = strstr(host, "\n      2 ");
        CHECK(rank2 && strstr(rank2, "5.0 [5.0]") &&
              strstr(rank2, "10/20"));
    }
    const char *gpus = host ? strstr(host, "  rank  GPU      slowed") : NULL;
    CHECK(gpus != NULL);
    if (gpus) {
        const char *gpu2 = strstr(gpus, "\n      2    2       10/20 ");
        CHECK(gpu2 != NULL && strstr(gpu2, "1420") != NULL);
        CHECK(strstr(gpus, "code 79") != NULL);
        CHECK(strstr(gpus, "\n      3 ") == NULL); /* no GPU */
    }
    CHECK(strstr(r.out, "pressure stalls per step (PSI some, median): cpu "
                        "4.0 ms, memory 0.000 ms, io - ms") != NULL);
    result_free(&r);
}

/* A run of two nodes: the text report lists them (ranks, clock bound,
 * why one was lost) and the ranks' hosts; the JSON carries them and the
 * number of agents.  A run of one host shows neither. */
/* The report leads with the headline (api/headline.h): the first
 * finding's ranks, phase and kind, before the findings; no table under it
 * names another rank as the slowest without saying how that fits. */
static void text_report_leads_with_the_headline(void)
{
    const char *args[] = {"report", "--db", fixture(), "1", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(r.out != NULL);
    const char *head = strstr(r.out, "\nHEADLINE  rank 3 \xc2\xb7 phase "
                                     "forward \xc2\xb7 critical straggler\n");
    const char *findings = strstr(r.out, "FINDINGS (2)");
    CHECK(head && findings && head < findings);
    /* the step-time table agrees with the headline here: it names rank 3 */
    CHECK(strstr(r.out, "slowest rank most often: rank 3 (20 of 20 steps)"));
    /* backward's worst rank is another: the phases table says how */
    CHECK(strstr(r.out, "(the headline blames phase forward of rank 3; "
                        "another phase's worst rank either waited for it "
                        "there or differs by little)") != NULL);
    result_free(&r);
}

static void multi_node_run_shows_its_nodes(void)
{
    char path[600], err[512];
    testing_tmp_path("multi.db", path, sizeof path);
    ss_store *s = ss_store_open(path, NULL, 1, err, sizeof err);
    REQUIRE(s != NULL);
    REQUIRE(ss_fixture_two_node_run(s, SS_FIXTURE_T0) > 0);
    ss_store_close(s);

    const char *args[] = {"report", "--db", path, "multi", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(r.out != NULL);
    const char *nodes = strstr(r.out, "\nNODES\n");
    const char *ranks = strstr(r.out, "\nRANKS");
    CHECK(nodes && ranks && nodes < ranks);
    CHECK(strstr(r.out, "     0  node1                (local)               "
                        "0\u20131         done         reference\n") != NULL);
    CHECK(strstr(r.out, "     1  node2                10.0.0.2:40112        "
                        "2\u20133         lost         \u00b10.300 ms (offset "
                        "-1.2 ms)  lost its connection at step 3\n") != NULL);
    CHECK(strstr(r.out, "   rank  host                 state") != NULL);
    CHECK(strstr(r.out, "      3  node2                failed") != NULL);
    result_free(&r);

    const char *jargs[] = {"report", "--db", path, "--json", "multi", NULL};
    r = run_cmd(ss_cmd_report, jargs);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(json_ok(r.out));
    CHECK_J(r.out, "$.agents", "2");
    CHECK_J(r.out, "$.nodes[0].addr", "");
    CHECK_J(r.out, "$.nodes[0].clock_bound_ms", "0.0");
    CHECK_J(r.out, "$.nodes[1].node", "1");
    CHECK_J(r.out, "$.nodes[1].host", "node2");
    CHECK_J(r.out, "$.nodes[1].addr", "10.0.0.2:40112");
    CHECK_J(r.out, "$.nodes[1].first_rank", "2");
    CHECK_J(r.out, "$.nodes[1].nranks", "2");
    CHECK_J(r.out, "$.nodes[1].state", "lost");
    CHECK_J(r.out, "$.nodes[1].joined_at", "2023-11-14T22:13:21.000Z");
    CHECK_J(r.out, "$.nodes[1].clock_offset_ms", "-1.2");
    CHECK_J(r.out, "$.nodes[1].clock_bound_ms", "0.3");
    CHECK_J(r.out, "$.nodes[1].lost_reason", "lost its connection");
    CHECK_J(r.out, "$.nodes[1].lost_at_step", "3");
    result_free(&r);

    const char *one[] = {"report", "--db", fixture(), "train", NULL};
    r = run_cmd(ss_cmd_report, one);
    CHECK(r.out && strstr(r.out, "NODES") == NULL);
    CHECK(r.out && strstr(r.out, "   rank  state") != NULL);
    result_free(&r);
    const char *onej[] = {"report", "--db", fixture(), "--json", "train",
                          NULL};
    r = run_cmd(ss_cmd_report, onej);
    CHECK_J(r.out, "$.agents", "0");
    CHECK_J(r.out, "$.nodes", "[]");
    result_free(&r);
}

static void selects_runs_by_id_name_and_uuid(void)
{
    char buf[64];
    struct {
        const char *spec, *want_id;
    } cases[] = {{NULL, "2"}, {"1", "1"}, {"2", "2"}, {"train", "1"},
                 {"other", "2"}, {"0123", "1"}, {"4567ef00-0000", "2"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"report", "--json", "--db", fixture(),
                              cases[i].spec, NULL};
        result r = run_cmd(ss_cmd_report, args);
        CHECK_EQ_INT(r.rc, 0);
        CHECK_STR(jget(r.out, "$.run.id", buf, sizeof buf), cases[i].want_id);
        result_free(&r);
    }
    /* The latest attempt by default; --attempt picks another. */
    const char *latest[] = {"report", "--json", "--db", fixture(), "other",
                            NULL};
    result r = run_cmd(ss_cmd_report, latest);
    CHECK_J(r.out, "$.run.attempt", "1");
    CHECK_J(r.out, "$.run.attempts", "2");
    CHECK_J(r.out, "$.steps.count", "3");
    CHECK_J(r.out, "$.steps.first", "5");
    result_free(&r);
    /* An attempt without steps reports empty sections, not zeros. */
    const char *args[] = {"report", "--json", "--db", fixture(), "other",
                          "--attempt=0", NULL};
    r = run_cmd(ss_cmd_report, args);
    CHECK(json_ok(r.out));
    CHECK_J(r.out, "$.run.attempt", "0");
    CHECK_J(r.out, "$.steps.count", "0");
    CHECK_J(r.out, "$.steps.step_time_ms.worst_rank.p50", "<null>");
    CHECK_J(r.out, "$.run.ended_at", "<null>");
    CHECK_J(r.out, "$.ranks[0].median_step_ms", "<null>");
    CHECK_J(r.out, "$.findings", "[]");
    result_free(&r);
}

static void unknown_run_is_a_clear_error(void)
{
    const char *db = fixture();
    const char *args[] = {"report", "--db", db, "xyz", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 1);
    CHECK_EQ_INT(r.out_len, 0);
    char want[700];
    snprintf(want, sizeof want,
             "stepscope report: no run 'xyz' in %s; `stepscope runs` lists "
             "them\n", db);
    CHECK_STR(r.err, want);
    result_free(&r);
    const char *args2[] = {"report", "--db", db, "--attempt", "3", "1", NULL};
    r = run_cmd(ss_cmd_report, args2);
    CHECK_EQ_INT(r.rc, 1);
    CHECK(strstr(r.err, "has no attempt 3") != NULL);
    result_free(&r);
}

static void missing_garbage_and_empty_files(void)
{
    char path[600];
    testing_tmp_path("missing.db", path, sizeof path);
    const char *args[] = {"report", "--db", path, NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 1);
    CHECK(strstr(r.err, "stepscope report: no store at") == r.err);
    CHECK(access(path, F_OK) != 0);
    result_free(&r);
    const char *rargs[] = {"runs", "--db", path, NULL};
    r = run_cmd(ss_cmd_runs, rargs);
    CHECK_EQ_INT(r.rc, 1);
    CHECK(strstr(r.err, "stepscope runs: no store at") == r.err);
    CHECK(access(path, F_OK) != 0);
    result_free(&r);

    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fputs("this is not a database, it is a text file long enough to be "
          "read as a header by sqlite, which it is not\n", f);
    fclose(f);
    r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 1);
    CHECK(strstr(r.err, "is not a stepscope store") != NULL);
    result_free(&r);

    testing_tmp_path("empty-store.db", path, sizeof path);
    char err[256];
    ss_store *s = ss_store_open(path, NULL, 0, err, sizeof err);
    REQUIRE(s != NULL);
    ss_store_close(s);
    r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 1);
    CHECK(strstr(r.err, "no runs in") != NULL);
    result_free(&r);
    r = run_cmd(ss_cmd_runs, rargs);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.out, "no runs in") != NULL);
    result_free(&r);
}

/* The status column is as wide as its widest status: "interrupted (143)"
 * does not push its row's steps out of their column. */
static void runs_columns_line_up(void)
{
    ss_run_row rows[2];
    memset(rows, 0, sizeof rows);
    rows[0].id = 1, rows[0].name = "a", rows[0].status = "succeeded";
    rows[0].exit_code = 0, rows[0].world_size = 2, rows[0].steps = 5;
    rows[1] = rows[0];
    rows[1].id = 2, rows[1].status = "interrupted", rows[1].exit_code = 143;
    rows[1].steps = 247;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f != NULL);
    ss_runs_print_text(f, rows, 2, "s.db");
    fclose(f);
    const char *line[3] = {buf, NULL, NULL};
    for (int i = 1; i < 3; i++) {
        const char *nl = strchr(line[i - 1], '\n');
        REQUIRE(nl != NULL);
        line[i] = nl + 1;
    }
    /* The steps column ends at the same place in each line. */
    const char *end0 = strstr(line[0], "steps") + strlen("steps");
    CHECK_EQ_INT((int)(strstr(line[1], " 5 ") + 2 - line[1]),
                 (int)(end0 - line[0]));
    CHECK_EQ_INT((int)(strstr(line[2], " 247 ") + 4 - line[2]),
                 (int)(end0 - line[0]));
    free(buf);
}

static void runs_lists_every_run(void)
{
    const char *args[] = {"runs", "--db", fixture(), NULL};
    result r = run_cmd(ss_cmd_runs, args);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(r.out != NULL);
    CHECK(strstr(r.out, "train") != NULL);
    CHECK(strstr(r.out, "other") != NULL);
    CHECK(strstr(r.out, "failed (137)") != NULL);
    CHECK(strstr(r.out, "train") < strstr(r.out, "other"));
    result_free(&r);
    const char *jargs[] = {"runs", "--json", "--db", fixture(), NULL};
    r = run_cmd(ss_cmd_runs, jargs);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(json_ok(r.out));
    CHECK_J(r.out, "$.runs[0].name", "train");
    CHECK_J(r.out, "$.runs[0].steps", "20");
    CHECK_J(r.out, "$.runs[0].findings", "2");
    CHECK_J(r.out, "$.runs[0].world_size", "4");
    CHECK_J(r.out, "$.runs[1].status", "interrupted"); /* no controller */
    CHECK_J(r.out, "$.runs[1].steps", "3");
    CHECK_J(r.out, "$.runs[1].ended_at", "<null>");
    result_free(&r);
}

static void usage_and_help(void)
{
    const char *help[] = {"report", "--help", NULL};
    result r = run_cmd(ss_cmd_report, help);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.out, "usage: stepscope report") == r.out);
    result_free(&r);
    const char *rhelp[] = {"runs", "-h", NULL};
    r = run_cmd(ss_cmd_runs, rhelp);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.out, "usage: stepscope runs") == r.out);
    result_free(&r);
    const char *bad[] = {"report", "--bogus", NULL};
    r = run_cmd(ss_cmd_report, bad);
    CHECK_EQ_INT(r.rc, 2);
    CHECK(strstr(r.err, "stepscope report: unknown option '--bogus'") ==
          r.err);
    result_free(&r);
    const char *two[] = {"report", "--db", "x.db", "a", "b", NULL};
    r = run_cmd(ss_cmd_report, two);
    CHECK_EQ_INT(r.rc, 2);
    result_free(&r);
    const char *att[] = {"report", "--attempt", "x", NULL};
    r = run_cmd(ss_cmd_report, att);
    CHECK_EQ_INT(r.rc, 2);
    result_free(&r);
    const char *nodb[] = {"runs", "--db", NULL};
    r = run_cmd(ss_cmd_runs, nodb);
    CHECK_EQ_INT(r.rc, 2);
    result_free(&r);
}

/* `report --rank R`: one rank beside the median rank.  In the standard
 * store rank 3 is the slowest rank of every step and of forward, the last
 * at allreduce and named by the straggler finding; rank 2 failed. */
static void rank_view_explains_one_rank(void)
{
    const char *args[] = {"report", "--db", fixture(), "--rank", "3",
                          "train", NULL};
    result r = run_cmd(ss_cmd_report, args);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_EQ_INT(r.err_len, 0);
    REQUIRE(r.out != NULL);
    CHECK(strstr(r.out, "run 1  train") == r.out);
    const char *rank = strstr(r.out, "RANK 3  host ");
    const char *findings = strstr(r.out, "FINDINGS naming rank 3");
    const char *phases = strstr(r.out, "PHASES (p50 over steps");
    const char *latest = strstr(r.out, "LATEST KEPT STEPS");
    CHECK(rank && findings && phases && latest && rank < findings &&
          findings < phases && phases < latest);
    CHECK(strstr(r.out, "in 20 of 20 finalized steps; the slowest rank by "
                        "step time in 20\n") != NULL);
    CHECK(strstr(r.out, "kept rows   20 of its 20 steps\n") != NULL);
    CHECK(strstr(r.out, "step time   p50 103.0 ms, p90 103.0 ms, mean "
                        "103.0 ms, max 103.0 ms\n") != NULL);
    CHECK(strstr(r.out, "the median rank's p50 101.0 ms: this rank 1.02x") !=
          NULL);
    CHECK(strstr(r.out, "rank 3 is a persistent straggler in forward") !=
          NULL);
    /* forward: 43 ms against the median rank's 41, slowest every step;
     * backward: the same 60 ms, never the slowest (rank 0 is). */
    CHECK(strstr(r.out, "  forward                          43.0         "
                        "41.0   1.05x       20 steps\n") != NULL);
    CHECK(strstr(r.out, "  backward                         60.0         "
                        "60.0   1.00x        0 steps\n") != NULL);
    CHECK(strstr(r.out, "  allreduce                20 of 20\n") != NULL);
    /* The latest ten kept steps, oldest first, beside the step's median. */
    const char *s10 = strstr(r.out, "\n        10      103.0      101.0   "
                                    "1.02x");
    const char *s19 = strstr(r.out, "\n        19      103.0      101.0   "
                                    "1.02x");
    CHECK(s10 && s19 && s10 < s19);
    CHECK(strstr(r.out, "\n         9 ") == NULL);
    result_free(&r);

    /* Rank 2: its failure among its events, no finding names it. */
    const char *two[] = {"report", "--db", fixture(), "--rank=2", "1", NULL};
    r = run_cmd(ss_cmd_report, two);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(strstr(r.out, "EVENTS of rank 2") != NULL);
    CHECK(strstr(r.out, "rank 2 killed by signal 9 at step 19") != NULL);
    CHECK(strstr(r.out, "FINDINGS naming rank 2\n  none (") != NULL);
    CHECK(strstr(r.out, "stopped 15.0 / 30.0 ms in 10 of 20 steps") != NULL);
    CHECK(strstr(r.out, "\n  GPU 2 held down in 10 of 20 steps\n") != NULL);
    result_free(&r);

    /* The same as JSON. */
    const char *json[] = {"report", "--db", fixture(), "--json", "--rank",
                          "3", "1", NULL};
    r = run_cmd(ss_cmd_report, json);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(json_ok(r.out));
    const char *j = r.out;
    CHECK_J(j, "$.format", "stepscope.report.rank/1");
    CHECK_J(j, "$.run.id", "1");
    CHECK_J(j, "$.rank.rank", "3");
    CHECK_J(j, "$.rank.median_step_ms", "103.0");
    CHECK_J(j, "$.rank.phase_median_ms.forward", "43.0");
    CHECK_J(j, "$.steps.finalized", "20");
    CHECK_J(j, "$.steps.missing", "0");
    CHECK_J(j, "$.steps.slowest", "20");
    CHECK_J(j, "$.steps.kept_rows", "20");
    CHECK_J(j, "$.steps.median_rank_p50_ms", "101.0");
    CHECK_J(j, "$.phases[0].name", "backward");
    CHECK_J(j, "$.phases[1].name", "forward");
    CHECK_J(j, "$.phases[1].slowest_steps", "20");
    CHECK_J(j, "$.phases[1].median_rank_p50_ms", "41.0");
    CHECK_J(j, "$.syncs[0].name", "allreduce");
    CHECK_J(j, "$.syncs[0].last_steps", "20");
    CHECK_J(j, "$.findings[0].kind", "straggler");
    CHECK_J(j, "$.findings[1]", "<null>");
    CHECK_J(j, "$.latest[0].step", "10");
    CHECK_J(j, "$.latest[9].step", "19");
    CHECK_J(j, "$.latest[9].median_rank_ms", "101.0");
    CHECK_J(j, "$.latest[9].phases_ms.forward", "43.0");
    CHECK_J(j, "$.latest[10]", "<null>");
    result_free(&r);
}

/* Under node aggregation of a large world the store writes a rank's row
 * on the steps that single it out and a rotating share: the view counts
 * every step and says over how many rows its percentiles are. */
static void rank_view_of_a_thinned_rank(void)
{
    char path[600], buf[64];
    testing_tmp_path("thinned.db", path, sizeof path);
    unlink(path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    cfg.rank_rows_per_step = 1; /* 16 ranks: every 16th in rotation */
    char err[256];
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    REQUIRE(s != NULL);
    uint64_t rng = 7;
    REQUIRE(ss_fixture_timed_run(s, "thin", 16, 40, 10.0, &rng) > 0);
    ss_store_close(s);
    const char *json[] = {"report", "--db", path, "--json", "--rank", "5",
                          NULL};
    result r = run_cmd(ss_cmd_report, json);
    CHECK_EQ_INT(r.rc, 0);
    REQUIRE(json_ok(r.out));
    CHECK_J(r.out, "$.steps.finalized", "40");
    CHECK_J(r.out, "$.rank.steps", "40");
    long kept = atol(jget(r.out, "$.steps.kept_rows", buf, sizeof buf));
    CHECK(kept >= 2 && kept < 40);
    result_free(&r);
    const char *text[] = {"report", "--db", path, "--rank", "5", NULL};
    r = run_cmd(ss_cmd_report, text);
    CHECK_EQ_INT(r.rc, 0);
    char want[96];
    snprintf(want, sizeof want, "kept rows   %ld of its 40 steps: its "
             "percentiles are over\n", kept);
    CHECK(strstr(r.out, want) != NULL);
    CHECK(strstr(r.out, "node aggregation\n") != NULL);
    result_free(&r);
}

/* --rank: a rank the run lacks and bad usage are clear errors. */
static void rank_view_errors(void)
{
    const char *none[] = {"report", "--db", fixture(), "--rank", "4",
                          "train", NULL};
    result r = run_cmd(ss_cmd_report, none);
    CHECK_EQ_INT(r.rc, 1);
    CHECK_EQ_INT(r.out_len, 0);
    CHECK(strstr(r.err, "stepscope report: run 1 has no rank 4 (its ranks "
                        "are 0-3)") == r.err);
    result_free(&r);
    const char *bad[][6] = {{"report", "--rank", "x", NULL},
                            {"report", "--rank", "-1", NULL},
                            {"report", "--rank", NULL},
                            {"report", "--html", "--rank", "1", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = run_cmd(ss_cmd_report, bad[i]);
        CHECK_EQ_INT(r.rc, 2);
        CHECK(r.err && strstr(r.err, "--rank") != NULL);
        result_free(&r);
    }
}

static void default_db_path_is_used(void)
{
    char dir[600], buf[64];
    testing_tmp_path("xdg", dir, sizeof dir);
    char *old = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME"))
                                        : NULL;
    setenv("XDG_DATA_HOME", dir, 1);
    const char *args[] = {"runs", NULL};
    result r = run_cmd(ss_cmd_runs, args);
    CHECK_EQ_INT(r.rc, 1); /* nothing there, and nothing created */
    CHECK(strstr(r.err, "xdg/stepscope/stepscope.db") != NULL);
    CHECK(access(dir, F_OK) != 0);
    result_free(&r);
    char path[700];
    snprintf(path, sizeof path, "%s/stepscope/stepscope.db", dir);
    char err[256];
    ss_store *s = ss_store_open(path, NULL, 0, err, sizeof err);
    REQUIRE(s != NULL);
    ss_fixture_add_run(s, "feed", "viaxdg", 4, 1);
    ss_store_close(s);
    const char *rargs[] = {"report", "--json", NULL};
    r = run_cmd(ss_cmd_report, rargs);
    CHECK_EQ_INT(r.rc, 0);
    CHECK_STR(jget(r.out, "$.run.name", buf, sizeof buf), "viaxdg");
    result_free(&r);
    if (old)
        setenv("XDG_DATA_HOME", old, 1);
    else
        unsetenv("XDG_DATA_HOME");
    free(old);
}

TEST_LIST(TEST(json_report_has_documented_fields),
          TEST(text_report_puts_findings_first),
          TEST(text_report_leads_with_the_headline),
          TEST(multi_node_run_shows_its_nodes),
          TEST(selects_runs_by_id_name_and_uuid),
          TEST(unknown_run_is_a_clear_error),
          TEST(missing_garbage_and_empty_files),
          TEST(runs_lists_every_run),
          TEST(runs_columns_line_up),
          TEST(usage_and_help),
          TEST(rank_view_explains_one_rank),
          TEST(rank_view_of_a_thinned_rank),
          TEST(rank_view_errors),
          TEST(default_db_path_is_used))
