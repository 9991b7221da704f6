/*
 * html_report_test.c - unit tests for `stepscope report --html`.
 *
 * Builds a store through the store API (one 3-rank run with findings and
 * events, one with more steps than a page of the steps query), makes the
 * page in memory and checks that it is one self-contained document: the
 * stylesheets and scripts are inlined, nothing refers to another file, the
 * embedded JSON is valid and holds every step, and text from the ranks
 * cannot end the data element early.  Also the command: -o FILE, "-" for
 * stdout, the errors for a missing run or an unwritable path, and the
 * options as `stepscope report` parses them.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "html_report.h"
#include "report.h"
#include "store.h"
#include "testing.h"
#include "testing_tmp.h"
#include "web_assets.h"

/* ---- helpers ---- */

/* SQL over the JSON text DOC: "SELECT <EXPR>" with ?1 bound to DOC, as
 * text into BUF ("<null>" for NULL, "<error>" when it fails). */
static const char *jsql(const char *doc, const char *expr, char *buf,
                        size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s", expr);
    snprintf(buf, n, "<error>");
    sqlite3_open(":memory:", &db);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, doc, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(q, 0);
            snprintf(buf, n, "%s", t ? (const char *)t : "<null>");
        }
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return buf;
}

#define CHECK_SQL(doc, expr, want)                                            \
    do {                                                                      \
        char jb_[256];                                                        \
        CHECK_STR(jsql((doc), (expr), jb_, sizeof jb_), (want));              \
    } while (0)

/* The embedded JSON of PAGE (malloc'd), or NULL. */
static char *embedded_json(const char *page)
{
    const char *open = "<script id=\"ss-data\" type=\"application/json\">";
    const char *a = strstr(page, open);
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = strstr(a, "</script>");
    return b ? strndup(a, (size_t)(b - a)) : NULL;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static const char *const names_[] = {"forward", "allreduce"};

/* Step STEP of a WORLD-rank run: rank r takes 100 + r ms. */
static void put_step(ss_store *s, int64_t run, uint64_t step, uint32_t world)
{
    ss_rank_step ranks[3];
    int64_t phase_ns[3][2], sync_ns[3][2];
    for (uint32_t r = 0; r < world; r++) {
        phase_ns[r][0] = (40 + (int64_t)r) * 1000000;
        phase_ns[r][1] = SS_MISSING;
        sync_ns[r][0] = SS_MISSING;
        sync_ns[r][1] = 1000000 + (int64_t)r * 1000;
        ranks[r] = (ss_rank_step){.present = 1,
                                  .step_ns = (100 + (int64_t)r) * 1000000,
                                  .rss_bytes = ((int64_t)1 << 30) + r,
                                  .device_bytes = SS_MISSING,
                                  .phase_ns = phase_ns[r],
                                  .sync_arrival_ns = sync_ns[r],
                                  .begin_ns = SS_MISSING};
    }
    int32_t worst = (int32_t)world - 1;
    ss_phase_stat phases[1] = {{0, {40000000, 41000000, 42000000, 42000000,
                                    worst, world}}};
    ss_sync_stat syncs[1] = {{1, 2000, 1000, worst, world}};
    ss_step_view v = {
        .step = step, .finalized_at = 1700000000000000000,
        .world_size = world, .n_present = world,
        .step_time = {100000000, 101000000, 102000000, 102000000, worst,
                      world},
        .rss = {(int64_t)1 << 30, ((int64_t)1 << 30) + 1,
                ((int64_t)1 << 30) + 2, ((int64_t)1 << 30) + 2, worst,
                world},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 1, .phases = phases, .n_syncs = 1, .syncs = syncs,
        .n_names = 2, .ranks = ranks};
    ss_store_put_step(s, run, &v, names_);
}

static int64_t add_run(ss_store *s, const char *name, uint32_t world)
{
    ss_run_info info = {.world_size = world,
                        .started_at = (ss_wall_ns)1700000000 * 1000000000};
    snprintf(info.uuid, sizeof info.uuid, "uuid-%s", name);
    snprintf(info.name, sizeof info.name, "%s", name);
    snprintf(info.command, sizeof info.command, "train.py --name %s", name);
    snprintf(info.host, sizeof info.host, "node1");
    int64_t id = -1;
    char err[256];
    if (ss_store_begin_run(s, &info, &id, err, sizeof err) != 0)
        fprintf(stderr, "  begin_run: %s\n", err);
    ss_store_put_attempt(s, id, 0, info.started_at);
    return id;
}

#define BIG_STEPS (SS_QUERY_MAX_STEPS + 37)

/* Run 1 "small": 3 ranks, 30 steps, a straggler finding whose message
 * tries to end the data element, events.  Run 2 "big": 1 rank, BIG_STEPS
 * steps. */
static const char *fixture(void)
{
    static char path[600];
    if (path[0])
        return path;
    testing_tmp_path("fixture.db", path, sizeof path);
    char err[512];
    ss_store *s = ss_store_open(path, NULL, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  fixture: %s\n", err);
        return path;
    }
    int64_t run = add_run(s, "small", 3);
    for (uint64_t step = 1; step <= 30; step++)
        put_step(s, run, step, 3);
    ss_finding f = {.id = 1, .severity = SS_CRITICAL, .n_ranks = 1,
                    .ranks = {2}, .first_step = 3, .last_step = 30};
    snprintf(f.kind, sizeof f.kind, "straggler");
    snprintf(f.phase, sizeof f.phase, "forward");
    snprintf(f.evidence_json, sizeof f.evidence_json, "{\"late_ms\":1.0}");
    snprintf(f.message, sizeof f.message,
             "rank 2 </script><script>alert(1)</script> <!-- is late");
    ss_store_put_finding(s, run, &f);
    ss_store_put_event(s, run, 0, (ss_wall_ns)1700000001 * 1000000000,
                       "rank_connected", 0, NULL);
    ss_store_end_run(s, run, (ss_wall_ns)1700000090 * 1000000000, 0,
                     "succeeded", 0, 0);
    run = add_run(s, "big", 1);
    for (uint64_t step = 0; step < BIG_STEPS; step++)
        put_step(s, run, step, 1);
    ss_store_end_run(s, run, (ss_wall_ns)1700000090 * 1000000000, 0,
                     "succeeded", 0, 0);
    ss_store_close(s);
    return path;
}

/* ---- tests ---- */

static void page_is_self_contained(void)
{
    ss_buf page = {0};
    char err[256] = "";
    int rc = ss_html_report_build(&page, fixture(), 1, -1, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "  build: %s\n", err);
    REQUIRE(rc == 0 && page.data);
    CHECK(strncmp(page.data, "<!doctype html>", 15) == 0);
    /* everything inlined: no file is referred to */
    CHECK(strstr(page.data, "<script src=") == NULL);
    CHECK(strstr(page.data, "<link rel=\"stylesheet\"") == NULL);
    CHECK(strstr(page.data, "stepscope:data") == NULL);
    CHECK(strstr(page.data, "http://") == NULL);
    CHECK(strstr(page.data, "https://") == NULL ||
          /* uPlot's banner comment names its home page, in a comment */
          count(page.data, "https://") == count(page.data, "/*! https://"));
    CHECK(strstr(page.data, "uPlot") != NULL);
    /* the data, and each script the page names (uPlot, web/'s scripts) */
    const ss_static_file *tmpl = NULL;
    for (size_t i = 0; i < ss_web_files_count; i++)
        if (strcmp(ss_web_files[i].path, "/") == 0)
            tmpl = &ss_web_files[i];
    REQUIRE(tmpl != NULL);
    size_t scripts = count((const char *)tmpl->data, "<script src=") + 1;
    CHECK(scripts >= 5);
    CHECK_EQ_INT(count(page.data, "<script"), scripts);
    CHECK_EQ_INT(count(page.data, "</script>"), scripts);
    CHECK_EQ_INT(count(page.data, "<style>"), 2);
    ss_buf_free(&page);
}

static void data_holds_the_run(void)
{
    ss_buf page = {0};
    char err[256] = "";
    REQUIRE(ss_html_report_build(&page, fixture(), 1, -1, err, sizeof err) ==
            0);
    char *json = embedded_json(page.data);
    REQUIRE(json != NULL);
    CHECK_SQL(json, "json_valid(?1)", "1");
    CHECK_SQL(json, "json_extract(?1, '$.format')", "stepscope.html/1");
    CHECK_SQL(json, "json_extract(?1, '$.run.run.name')", "small");
    CHECK_SQL(json, "json_extract(?1, '$.run.run.world_size')", "3");
    CHECK_SQL(json, "json_extract(?1, '$.run.summary.steps')", "30");
    CHECK_SQL(json, "json_array_length(?1, '$.step_pages')", "1");
    CHECK_SQL(json, "json_array_length(?1, '$.step_pages[0].steps')", "30");
    CHECK_SQL(json, "json_extract(?1, '$.step_pages[0].steps[29].step')",
              "30");
    CHECK_SQL(json, "json_array_length(?1, '$.heatmap.ranks')", "3");
    CHECK_SQL(json, "json_array_length(?1, '$.heatmap.steps')", "30");
    CHECK_SQL(json, "json_extract(?1, '$.heatmap.step_ms[2][0]')", "102.0");
    CHECK_SQL(json, "json_array_length(?1, '$.ranks.ranks')", "3");
    CHECK_SQL(json, "json_extract(?1, '$.findings.findings[0].kind')",
              "straggler");
    CHECK_SQL(json, "json_extract(?1, '$.findings.findings[0].ranks[0]')",
              "2");
    CHECK_SQL(json, "json_array_length(?1, '$.events.events')", "1");
    CHECK_SQL(json, "json_extract(?1, '$.goodput.goodput.run')", "1");
    CHECK_SQL(json, "json_type(?1, '$.goodput.goodput.ms.productive')",
              "real");
    /* no vectors in this run: an empty list and no maps */
    CHECK_SQL(json, "json_array_length(?1, '$.values.list.values')", "0");
    CHECK_SQL(json, "json_array_length(?1, '$.values.series')", "0");
    /* the rank's text comes back intact once parsed... */
    CHECK_SQL(json, "json_extract(?1, '$.findings.findings[0].message')",
              "rank 2 </script><script>alert(1)</script> <!-- is late");
    /* ...but never appears raw in the page */
    CHECK(strstr(json, "<") == NULL);
    CHECK(strstr(page.data, "<script>alert") == NULL);
    free(json);
    ss_buf_free(&page);
}

static void every_step_of_a_long_run(void)
{
    ss_buf page = {0};
    char err[256] = "";
    REQUIRE(ss_html_report_build(&page, fixture(), 2, -1, err, sizeof err) ==
            0);
    char *json = embedded_json(page.data);
    REQUIRE(json != NULL);
    CHECK_SQL(json, "json_valid(?1)", "1");
    CHECK_SQL(json, "json_array_length(?1, '$.step_pages')", "2");
    CHECK_SQL(json, "(SELECT sum(json_array_length(value, '$.steps')) FROM "
                    "json_each(?1, '$.step_pages'))", "10037");
    CHECK_SQL(json, "json_extract(?1, '$.step_pages[1].steps[0].step')",
              "10000");
    CHECK_SQL(json, "json_extract(?1, '$.step_pages[1].steps[36].step')",
              "10036");
    free(json);
    ss_buf_free(&page);
}

static void missing_run_or_attempt(void)
{
    ss_buf page = {0};
    char err[256] = "";
    CHECK_EQ_INT(ss_html_report_build(&page, fixture(), 99, -1, err,
                                      sizeof err), SS_QUERY_NOT_FOUND);
    ss_buf_reset(&page);
    CHECK_EQ_INT(ss_html_report_build(&page, fixture(), 1, 5, err,
                                      sizeof err), SS_QUERY_NOT_FOUND);
    ss_buf_free(&page);
    char nowhere[600];
    testing_tmp_path("no-such.db", nowhere, sizeof nowhere);
    CHECK_EQ_INT(ss_html_report_build(&page, nowhere, 1, -1, err,
                                      sizeof err), SS_QUERY_ERROR);
    CHECK(err[0] != '\0');
    ss_buf_free(&page);
}

static void command_writes_files_and_stdout(void)
{
    char path[600], *out = NULL, *errs = NULL;
    size_t out_len = 0, err_len = 0;
    testing_tmp_path("run1.html", path, sizeof path);
    FILE *o = open_memstream(&out, &out_len);
    FILE *e = open_memstream(&errs, &err_len);
    CHECK_EQ_INT(ss_html_report_cmd(fixture(), 1, -1, path, o, e), 0);
    fflush(o);
    CHECK(strstr(out, "wrote ") != NULL);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size > 50000);
    fclose(o);
    free(out);
    /* "-": the page itself on OUT */
    o = open_memstream(&out, &out_len);
    CHECK_EQ_INT(ss_html_report_cmd(fixture(), 1, -1, "-", o, e), 0);
    fflush(o);
    CHECK(out_len == (size_t)sb.st_size);
    CHECK(strncmp(out, "<!doctype html>", 15) == 0);
    fclose(o);
    free(out);
    /* errors: one line each, exit status 1, no file left behind */
    o = open_memstream(&out, &out_len);
    CHECK_EQ_INT(ss_html_report_cmd(fixture(), 42, -1, path, o, e), 1);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.html", testing_tmp_dir());
    CHECK_EQ_INT(ss_html_report_cmd(fixture(), 1, -1, bad, o, e), 1);
    fclose(o);
    fclose(e);
    CHECK(strstr(errs, "stepscope report: no run 42") != NULL);
    CHECK(strstr(errs, "no/such/dir/x.html") != NULL);
    CHECK_EQ_INT(count(errs, "\n"), 2);
    free(out);
    free(errs);
}

/* `stepscope report --html` as its front-end hands it over (the
 * option checks: src/cli/cmd_cli_test.c). */
static int report(const ss_report_opts *opts, char **out, char **errs)
{
    size_t on = 0, en = 0;
    FILE *o = open_memstream(out, &on);
    FILE *e = open_memstream(errs, &en);
    int rc = ss_report_cmd(opts, o, e);
    fclose(o);
    fclose(e);
    return rc;
}

static void report_command_routes_html(void)
{
    char path[600], *out, *errs;
    testing_tmp_path("by-name.html", path, sizeof path);
    /* RUN by name, as for the text report */
    ss_report_opts by_name = {.db = fixture(), .run = "small", .html = 1,
                              .output = path, .attempt = -1};
    CHECK_EQ_INT(report(&by_name, &out, &errs), 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size > 50000);
    free(out);
    free(errs);
    ss_report_opts attempt = {.db = fixture(), .run = "1", .html = 1,
                              .output = path, .attempt = 3};
    CHECK_EQ_INT(report(&attempt, &out, &errs), 1);
    CHECK(strstr(errs, "no attempt 3") != NULL);
    free(out);
    free(errs);
}

TEST_LIST(TEST(page_is_self_contained), TEST(data_holds_the_run),
          TEST(every_step_of_a_long_run), TEST(missing_run_or_attempt),
          TEST(command_writes_files_and_stdout),
          TEST(report_command_routes_html))
