/*
 * query_test.c - unit tests for the API documents (query.c).
 *
 * Builds a store with known contents through store.h (one 3-rank run, three
 * steps, rank 1 missing from step 2, two findings, two events), then reads
 * every document and compares it byte for byte with the JSON docs/api.md
 * promises.  Also: the stream's objects built from memory equal the stored
 * ones, windows and limits, unknown runs and attempts, live-only fields
 * from ss_live, JSON escaping, and the cost of a 10,000-step window.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "objects.h"
#include "query.h"
#include "store.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_tmp.h"

/* ---- fixture ---- */

#define MS 1000000LL
#define T0 1700000000000000000LL /* 2023-11-14T22:13:20.000Z */

static const char *const names_[] = {"forward", "backward", "allreduce"};

/* One step of 3 ranks: rank r takes 10 + r + STEP ms, forward 4 + r ms,
 * backward 5 ms (its self time 2 ms: a wait nests in it), RSS 1000 + r
 * bytes; rank 1 is missing when MISSING1. */
typedef struct {
    ss_rank_step ranks[3];
    int64_t phase_ns[3][3], self_ns[3][3];
    ss_stat phase_self[2];
    ss_host_step host0; /* rank 0's host evidence; the others have none */
    int64_t sync_ns[3][3];
    ss_phase_stat phases[2];
    ss_sync_stat syncs[1];
    uint32_t missing[3];
    ss_step_view v;
} step_fx;

static void fx_build(step_fx *fx, uint64_t step, int missing1)
{
    memset(fx, 0, sizeof *fx);
    for (uint32_t r = 0; r < 3; r++) {
        fx->phase_ns[r][0] = (4 + (int64_t)r) * MS;
        fx->phase_ns[r][1] = 5 * MS;
        fx->phase_ns[r][2] = SS_MISSING;
        fx->self_ns[r][0] = fx->phase_ns[r][0];
        fx->self_ns[r][1] = 2 * MS;
        fx->self_ns[r][2] = SS_MISSING;
        fx->sync_ns[r][0] = fx->sync_ns[r][1] = SS_MISSING;
        fx->sync_ns[r][2] = (int64_t)r * 1000;
        fx->ranks[r] = (ss_rank_step){
            .present = !(missing1 && r == 1),
            .step_ns = (10 + (int64_t)r + (int64_t)step) * MS,
            .rss_bytes = 1000 + r, .device_bytes = SS_MISSING,
            .phase_ns = fx->phase_ns[r], .phase_self_ns = fx->self_ns[r],
            .sync_arrival_ns = fx->sync_ns[r],
            .begin_ns = SS_MISSING};
    }
    fx->host0 = (ss_host_step){
        .cpu_ns = 9 * MS, .runq_ns = (int64_t)step * MS,
        .stopped_ns = step == 2 ? 3 * MS : 0, .throttled_ns = SS_MISSING,
        .nr_throttled = SS_MISSING, .vol_switches = 1, .invol_switches = 2,
        .major_faults = 0, .psi_cpu_ns = SS_MISSING,
        .psi_memory_ns = SS_MISSING, .psi_io_ns = SS_MISSING};
    fx->ranks[0].host = &fx->host0;
    int64_t s = (int64_t)step;
    fx->phases[0] = (ss_phase_stat){0, {4 * MS, 5 * MS, 6 * MS, 6 * MS, 2,
                                        missing1 ? 2 : 3}};
    fx->phases[1] = (ss_phase_stat){1, {5 * MS, 5 * MS, 5 * MS, 5 * MS, 0,
                                        missing1 ? 2 : 3}};
    fx->phase_self[0] = fx->phases[0].stat;
    fx->phase_self[1] = (ss_stat){2 * MS, 2 * MS, 2 * MS, 2 * MS, 0,
                                  missing1 ? 2 : 3};
    fx->syncs[0] = (ss_sync_stat){2, 2000, 1000, 2, missing1 ? 2 : 3};
    fx->missing[0] = 1;
    ss_stat st = missing1
        ? (ss_stat){12 * MS, 12 * MS, 14 * MS, 14 * MS, 2, 2}
        : (ss_stat){(10 + s) * MS, (11 + s) * MS, (12 + s) * MS,
                    (12 + s) * MS, 2, 3};
    fx->v = (ss_step_view){
        .attempt = 0, .step = step, .finalized_at = T0 + s * 1000 * MS,
        .world_size = 3, .n_present = missing1 ? 2 : 3,
        .n_missing = missing1 ? 1 : 0, .missing_ranks = fx->missing,
        .step_time = st,
        .rss = {1000, 1000, 1002, 1002, 2, 3},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 2, .phases = fx->phases, .phase_self = fx->phase_self,
        .n_syncs = 1,
        .syncs = fx->syncs, .n_names = 3, .ranks = fx->ranks};
}

static ss_finding finding_(uint32_t id, const char *kind, ss_severity sev,
                           int32_t rank, const char *phase,
                           const char *evidence, const char *message)
{
    ss_finding f;
    memset(&f, 0, sizeof f);
    f.id = id;
    snprintf(f.kind, sizeof f.kind, "%s", kind);
    f.severity = sev;
    f.n_ranks = 1;
    f.ranks[0] = rank;
    snprintf(f.phase, sizeof f.phase, "%s", phase);
    f.first_step = 1;
    f.last_step = 3;
    snprintf(f.evidence_json, sizeof f.evidence_json, "%s", evidence);
    snprintf(f.message, sizeof f.message, "%s", message);
    return f;
}

static ss_finding f1_, f2_;

/* The fixture store, written once per process. */
static const char *fixture(void)
{
    static char path[600];
    if (path[0])
        return path;
    testing_tmp_path("fx.db", path, sizeof path);
    char err[512] = "";
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "  ss_store_open: %s\n", err);
        return path;
    }
    ss_run_info info = {.world_size = 3, .started_at = T0};
    snprintf(info.uuid, sizeof info.uuid, "0123abcd-run");
    snprintf(info.name, sizeof info.name, "train");
    snprintf(info.command, sizeof info.command, "python train.py --lr 0.1");
    snprintf(info.host, sizeof info.host, "node1");
    int64_t id = -1;
    if (ss_store_begin_run(s, &info, &id, err, sizeof err) != 0)
        fprintf(stderr, "  begin_run: %s\n", err);
    ss_store_put_attempt(s, id, 0, T0);
    for (uint32_t r = 0; r < 3; r++) {
        ss_rank_info ri = {.rank = r, .attempt = 0, .pid = 100 + r,
                           .exit_code = r == 2 ? -1 : 0,
                           .term_signal = r == 2 ? 9 : 0, .last_step = 3,
                           .dropped_events = r == 2 ? 5 : 0,
                           .dropped_records = r == 2 ? 1 : 0};
        snprintf(ri.host, sizeof ri.host, "node1");
        snprintf(ri.state, sizeof ri.state, r == 2 ? "failed" : "exited");
        ss_store_put_rank(s, id, &ri);
    }
    for (uint64_t step = 1; step <= 3; step++) {
        step_fx fx;
        fx_build(&fx, step, step == 2);
        ss_store_put_step(s, id, &fx.v, names_);
    }
    f1_ = finding_(1, "straggler", SS_CRITICAL, 2, "forward",
                   "{\"late_ms\":2,\"steps\":3}", "rank 2 is slow");
    f2_ = finding_(2, "data_stall", SS_WARNING, 0, "", "",
                   "rank 0 \"waited\"\tfor data");
    ss_store_put_finding(s, id, &f2_);
    ss_store_put_finding(s, id, &f1_);
    ss_store_put_event(s, id, 0, T0, "run_started", -1, "3 ranks");
    ss_store_put_event(s, id, 0, T0 + 1500 * MS, "rank_failed", 2,
                       "rank 2 was killed by signal 9");
    ss_store_end_run(s, id, T0 + 90000 * MS, 137, "failed", 5, 1);
    ss_store_close(s);
    return path;
}

static ss_query *open_fixture(void)
{
    char err[512] = "";
    ss_query *q = ss_query_open(fixture(), err, sizeof err);
    if (!q)
        fprintf(stderr, "  ss_query_open: %s\n", err);
    return q;
}

/* ---- the documents ---- */

static const char step1_[] =
    "{\"step\":1,\"n_present\":3,\"missing_ranks\":[],"
    "\"step_ms\":{\"min\":11.000,\"median\":12.000,\"p90\":13.000,"
    "\"max\":13.000,\"worst_rank\":2},"
    "\"phases\":{\"backward\":{\"min\":5.000,\"median\":5.000,\"p90\":5.000,"
    "\"max\":5.000,\"worst_rank\":0,\"self\":{\"median\":2.000,"
    "\"max\":2.000,\"worst_rank\":0}},"
    "\"forward\":{\"min\":4.000,"
    "\"median\":5.000,\"p90\":6.000,\"max\":6.000,\"worst_rank\":2,"
    "\"self\":{\"median\":5.000,\"max\":6.000,\"worst_rank\":2}}},"
    "\"syncs\":{\"allreduce\":{\"skew_ms\":0.002,\"late_ms\":0.001,"
    "\"worst_rank\":2}},"
    "\"rss_bytes\":{\"median\":1000,\"max\":1002,\"worst_rank\":2},"
    "\"device_bytes\":{\"median\":null,\"max\":null,\"worst_rank\":null}}";

static void runs_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_runs(q, NULL, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"runs\":[{\"id\":1,\"uuid\":\"0123abcd-run\",\"name\":"
              "\"train\",\"status\":\"failed\",\"world_size\":3,"
              "\"started_at\":\"2023-11-14T22:13:20.000Z\",\"ended_at\":"
              "\"2023-11-14T22:14:50.000Z\",\"started_at_ns\":"
              "1700000000000000000,\"ended_at_ns\":1700000090000000000,"
              "\"steps\":3,\"findings\":2,\"live\":false}]}");
    ss_buf_free(&b);
    ss_query_close(q);
}

static void run_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_run(q, 1, -1, NULL, &b, err, sizeof err), 0);
    /* median-rank step times 12, 12, 14 ms; worst-rank 13, 14, 15 ms */
    CHECK_STR(b.data,
              "{\"run\":{\"id\":1,\"uuid\":\"0123abcd-run\",\"name\":"
              "\"train\",\"status\":\"failed\",\"world_size\":3,"
              "\"started_at\":\"2023-11-14T22:13:20.000Z\",\"ended_at\":"
              "\"2023-11-14T22:14:50.000Z\",\"started_at_ns\":"
              "1700000000000000000,\"ended_at_ns\":1700000090000000000,"
              "\"steps\":3,\"findings\":2,\"live\":false,\"command\":"
              "\"python train.py --lr 0.1\",\"exit_code\":137,\"host\":"
              "\"node1\",\"attempt\":0,\"attempts\":1},"
              "\"summary\":{\"attempt\":0,\"steps\":3,\"first_step\":1,"
              "\"last_step\":3,\"with_missing_ranks\":1,\"step_ms\":"
              "{\"median_rank\":{\"p50\":12.000,\"p90\":14.000,"
              "\"p99\":14.000},\"worst_rank\":{\"p50\":14.000,"
              "\"p90\":15.000,\"p99\":15.000}}}}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_run(q, 2, -1, NULL, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_run(q, 1, 1, NULL, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

static void steps_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    ss_query_range rg = {-1, 1, 1, 10};
    CHECK_EQ_INT(ss_query_steps(q, 1, &rg, &b, err, sizeof err), 0);
    char want[4096];
    snprintf(want, sizeof want, "{\"steps\":[%s]}", step1_);
    CHECK_STR(b.data, want);

    /* step 2: rank 1 missing */
    ss_buf_reset(&b);
    rg = (ss_query_range){-1, 2, -1, 1};
    CHECK_EQ_INT(ss_query_steps(q, 1, &rg, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "{\"steps\":[{\"step\":2,\"n_present\":2,"
                         "\"missing_ranks\":[1],\"step_ms\":{\"min\":12.000,"
                         "\"median\":12.000,\"p90\":14.000,\"max\":14.000,"
                         "\"worst_rank\":2},") == b.data);
    CHECK(strstr(b.data, "\"step\":3") == NULL);
    ss_buf_free(&b);
    ss_query_close(q);
}

/* Steps of WANT (ascending), as listed by the document in B. */
static void check_step_list(const char *doc, const char *want)
{
    char got[256] = "";
    size_t len = 0;
    for (const char *p = doc; (p = strstr(p, "{\"step\":")) != NULL; p++)
        len += (size_t)snprintf(got + len, sizeof got - len, "%s%ld",
                                len ? "," : "", strtol(p + 8, NULL, 10));
    CHECK_STR(got, want);
}

static void steps_windows(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    struct {
        ss_query_range rg;
        const char *want;
    } cases[] = {
        {{-1, -1, -1, 500}, "1,2,3"}, /* the latest 500 */
        {{-1, -1, -1, 2}, "2,3"},     /* the latest 2 */
        {{-1, 2, -1, 500}, "2,3"},    /* from 2 */
        {{-1, 1, -1, 2}, "1,2"},      /* the first 2 from 1 */
        {{-1, -1, 2, 1}, "2"},        /* the last one up to 2 */
        {{-1, 2, 2, 10}, "2"},
        {{-1, 4, -1, 10}, ""},        /* nothing yet: polling past the end */
        {{0, -1, -1, 10}, "1,2,3"},   /* attempt 0 given */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ss_buf_reset(&b);
        CHECK_EQ_INT(ss_query_steps(q, 1, &cases[i].rg, &b, err, sizeof err),
                     0);
        check_step_list(b.data, cases[i].want);
    }
    ss_buf_reset(&b);
    ss_query_range rg = {-1, -1, -1, 10};
    CHECK_EQ_INT(ss_query_steps(q, 7, &rg, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

/* The pages of a window, concatenated with page size PAGE, into OUT. */
static int steps_in_pages(ss_query *q, int64_t run_id,
                          const ss_query_range *rg, int64_t page, ss_buf *out)
{
    char err[256];
    ss_query_steps_cursor cur;
    int rc = ss_query_steps_start(q, run_id, rg, &cur, err, sizeof err);
    if (rc != 0)
        return rc;
    ss_buf_puts(out, "{\"steps\":[");
    while ((rc = ss_query_steps_page(q, &cur, page, out, err, sizeof err)) > 0)
        ;
    ss_buf_puts(out, "]}");
    return rc;
}

static void steps_in_pages_match_the_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    static const ss_query_range windows[] = {
        {-1, -1, -1, 500}, {-1, -1, -1, 2}, {-1, 2, -1, 500},
        {-1, 1, -1, 2},    {-1, -1, 2, 1},  {-1, 2, 2, 10},
        {-1, 4, -1, 10},   {0, -1, -1, 10}, {-1, 0, -1, 3}};
    char err[256];
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++)
        for (int64_t page = 1; page <= 4; page++) {
            ss_buf whole = {0}, paged = {0};
            CHECK_EQ_INT(ss_query_steps(q, 1, &windows[i], &whole, err,
                                        sizeof err), 0);
            CHECK_EQ_INT(steps_in_pages(q, 1, &windows[i], page, &paged), 0);
            CHECK_STR(paged.data, whole.data);
            ss_buf_free(&whole);
            ss_buf_free(&paged);
        }
    ss_query_steps_cursor cur;
    CHECK_EQ_INT(ss_query_steps_start(q, 7, &windows[0], &cur, err,
                                      sizeof err), SS_QUERY_NOT_FOUND);
    ss_query_close(q);
}

/* Every step as pages: here one page, the window document itself. */
static void step_pages(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf pages = {0}, doc = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_step_pages(q, 1, -1, &pages, err, sizeof err), 0);
    ss_query_range rg = {-1, 0, -1, SS_QUERY_MAX_STEPS};
    ss_buf_puts(&doc, "[");
    CHECK_EQ_INT(ss_query_steps(q, 1, &rg, &doc, err, sizeof err), 0);
    ss_buf_puts(&doc, "]");
    CHECK_STR(pages.data, doc.data);
    check_step_list(pages.data, "1,2,3");
    ss_buf_reset(&pages);
    CHECK_EQ_INT(ss_query_step_pages(q, 7, -1, &pages, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_reset(&pages);
    CHECK_EQ_INT(ss_query_step_pages(q, 1, 1, &pages, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&pages);
    ss_buf_free(&doc);
    ss_query_close(q);
}

static void step_object_matches_store(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    char err[256];
    for (uint64_t step = 1; step <= 3; step++) {
        step_fx fx;
        fx_build(&fx, step, step == 2);
        ss_buf mem = {0}, doc = {0};
        ss_obj_step(&mem, &fx.v, names_);
        ss_query_range rg = {-1, (int64_t)step, (int64_t)step, 1};
        CHECK_EQ_INT(ss_query_steps(q, 1, &rg, &doc, err, sizeof err), 0);
        char want[4096];
        snprintf(want, sizeof want, "{\"steps\":[%s]}", mem.data);
        CHECK_STR(doc.data, want);
        if (step == 1)
            CHECK_STR(mem.data, step1_);
        ss_buf_free(&mem);
        ss_buf_free(&doc);
    }
    ss_query_close(q);
}

static void heatmap_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    ss_query_range rg = {-1, -1, -1, 500};
    CHECK_EQ_INT(ss_query_heatmap(q, 1, &rg, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"ranks\":[0,1,2],\"steps\":[1,2,3],\"step_ms\":["
              "[11.000,12.000,13.000],[12.000,null,14.000],"
              "[13.000,14.000,15.000]],"
              /* no sync points in the fixture: no lateness */
              "\"late_ms\":[[null,null,null],[null,null,null],"
              "[null,null,null]],"
              "\"phase_self_ms\":{\"forward\":[[4.000,4.000,4.000],"
              "[5.000,null,5.000],[6.000,6.000,6.000]],\"backward\":["
              "[2.000,2.000,2.000],[2.000,null,2.000],[2.000,2.000,2.000]]}}");
    ss_buf_reset(&b);
    rg = (ss_query_range){-1, 2, -1, 1};
    CHECK_EQ_INT(ss_query_heatmap(q, 1, &rg, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "{\"ranks\":[0,1,2],\"steps\":[2],\"step_ms\":["
                      "[12.000],[null],[14.000]],\"late_ms\":[[null],[null],"
                      "[null]],\"phase_self_ms\":{\"forward\":[[4.000],"
                      "[null],[6.000]],\"backward\":[[2.000],[null],"
                      "[2.000]]}}");
    ss_buf_free(&b);
    ss_query_close(q);
}

/* Rank 0's host evidence per step, null for the ranks without any. */
static void host_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    ss_query_range rg = {-1, 2, -1, 500};
    CHECK_EQ_INT(ss_query_host(q, 1, &rg, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"ranks\":[0,1,2],\"steps\":[2,3],"
              "\"runq_ms\":[[2.000,3.000],[null,null],[null,null]],"
              "\"stopped_ms\":[[3.000,0.000],[null,null],[null,null]],"
              "\"cpu_ms\":[[9.000,9.000],[null,null],[null,null]],"
              "\"throttled_ms\":[[null,null],[null,null],[null,null]],"
              "\"gpu_slowed_ms\":[[null,null],[null,null],[null,null]]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_host(q, 99, &rg, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

static const char ranks_stored_[] =
    "{\"ranks\":["
    "{\"rank\":0,\"state\":\"exited\",\"host\":\"node1\",\"pid\":100,"
    "\"last_step\":3,\"current_step\":null,\"phase\":null,\"phase_s\":null,"
    "\"last_heard_s\":null,\"exit_code\":0,\"signal\":null,"
    "\"median_step_ms\":12.000,\"max_rss_bytes\":1000,\"dropped_events\":0,"
    "\"dropped_records\":0},"
    "{\"rank\":1,\"state\":\"exited\",\"host\":\"node1\",\"pid\":101,"
    "\"last_step\":3,\"current_step\":null,\"phase\":null,\"phase_s\":null,"
    "\"last_heard_s\":null,\"exit_code\":0,\"signal\":null,"
    "\"median_step_ms\":12.000,\"max_rss_bytes\":1001,\"dropped_events\":0,"
    "\"dropped_records\":0},"
    "{\"rank\":2,\"state\":\"failed\",\"host\":\"node1\",\"pid\":102,"
    "\"last_step\":3,\"current_step\":null,\"phase\":null,\"phase_s\":null,"
    "\"last_heard_s\":null,\"exit_code\":null,\"signal\":9,"
    "\"median_step_ms\":14.000,\"max_rss_bytes\":1002,\"dropped_events\":5,"
    "\"dropped_records\":1}]}";

static void ranks_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_ranks(q, 1, -1, NULL, &b, err, sizeof err), 0);
    CHECK_STR(b.data, ranks_stored_);
    ss_buf_free(&b);
    ss_query_close(q);
}

static void live_fields(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_live *l = ss_live_create(1, 3);
    REQUIRE(l);
    ss_live_rank_hello(l, 0, "node7", 4242);
    ss_live_rank_step(l, 0, 9);
    ss_live_rank_status(l, 0, 10, "forward", 0);
    ss_live_rank_counters(l, 0, 3, 2);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_ranks(q, 1, -1, l, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "{\"rank\":0,\"state\":\"running\",\"host\":"
                         "\"node7\",\"pid\":4242,\"last_step\":9,"
                         "\"current_step\":10,\"phase\":\"forward\","
                         "\"phase_s\":0.0") != NULL);
    CHECK(strstr(b.data, "\"last_heard_s\":0.0") != NULL);
    CHECK(strstr(b.data, "\"dropped_events\":3,\"dropped_records\":2}") !=
          NULL);
    /* rank 1 never spoke: the stored facts stay */
    CHECK(strstr(b.data, "{\"rank\":1,\"state\":\"exited\",\"host\":"
                         "\"node1\",\"pid\":101,") != NULL);

    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_runs(q, l, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "\"live\":true") != NULL);
    ss_live_rank_exit(l, 0, 0, 0);
    ss_live_finish(l);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_runs(q, l, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "\"live\":false") != NULL);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_ranks(q, 1, -1, l, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "{\"rank\":0,\"state\":\"exited\",\"host\":"
                         "\"node7\",\"pid\":4242,\"last_step\":9,"
                         "\"current_step\":null,\"phase\":null,") != NULL);
    ss_buf_free(&b);
    ss_live_destroy(l);
    ss_query_close(q);
}

/* /api/runs/{id}/nodes: a run's nodes and their number; none for a run
 * recorded without them. */
static void nodes_document(void)
{
    char path[600], err[256];
    testing_tmp_path("nodes.db", path, sizeof path);
    ss_store *s = ss_store_open(path, NULL, 1, err, sizeof err);
    REQUIRE(s != NULL);
    int64_t multi = ss_fixture_two_node_run(s, SS_FIXTURE_T0);
    int64_t single = ss_fixture_add_run(s, "0000-one", "one", 1,
                                        SS_FIXTURE_T0);
    ss_store_close(s);
    ss_query *q = ss_query_open(path, err, sizeof err);
    REQUIRE(q);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_query_nodes(q, multi, -1, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"agents\":2,\"nodes\":[{\"node\":0,\"host\":\"node1\","
              "\"addr\":\"\",\"first_rank\":0,\"nranks\":2,\"state\":"
              "\"done\",\"joined_at\":\"2023-11-14T22:13:20.000Z\","
              "\"ended_at\":\"2023-11-14T22:14:20.000Z\","
              "\"clock_offset_ms\":0.000,\"clock_bound_ms\":0.000,"
              "\"lost_reason\":null,\"lost_at_step\":null},"
              "{\"node\":1,\"host\":\"node2\",\"addr\":"
              "\"10.0.0.2:40112\",\"first_rank\":2,\"nranks\":2,"
              "\"state\":\"lost\",\"joined_at\":"
              "\"2023-11-14T22:13:21.000Z\",\"ended_at\":"
              "\"2023-11-14T22:13:50.000Z\",\"clock_offset_ms\":-1.200,"
              "\"clock_bound_ms\":0.300,\"lost_reason\":"
              "\"lost its connection\",\"lost_at_step\":3}]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_nodes(q, single, -1, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "{\"agents\":0,\"nodes\":[]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_nodes(q, 99, -1, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

static void findings_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_findings(q, 1, -1, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"findings\":[{\"id\":1,\"kind\":\"straggler\",\"severity\":"
              "\"critical\",\"ranks\":[2],\"phase\":\"forward\","
              "\"first_step\":1,\"last_step\":3,\"evidence\":{\"late_ms\":2,"
              "\"steps\":3},\"message\":\"rank 2 is slow\"},{\"id\":2,"
              "\"kind\":\"data_stall\",\"severity\":\"warning\",\"ranks\":"
              "[0],\"phase\":null,\"first_step\":1,\"last_step\":3,"
              "\"evidence\":{},\"message\":\"rank 0 \\\"waited\\\"\\tfor "
              "data\"}],\"stacks\":null}");
    /* the stream's objects are the stored ones */
    ss_buf m = {0};
    ss_buf_puts(&m, "{\"findings\":[");
    ss_obj_finding(&m, &f1_);
    ss_buf_puts(&m, ",");
    ss_obj_finding(&m, &f2_);
    ss_buf_puts(&m, "],\"stacks\":null}");
    CHECK_STR(m.data, b.data);
    ss_buf_free(&m);
    ss_buf_free(&b);
    ss_query_close(q);
}

static void events_document(void)
{
    ss_query *q = open_fixture();
    REQUIRE(q);
    ss_buf b = {0};
    char err[256];
    CHECK_EQ_INT(ss_query_events(q, 1, 0, 1000, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"events\":[{\"id\":1,\"at\":\"2023-11-14T22:13:20.000Z\","
              "\"kind\":\"run_started\",\"rank\":null,\"message\":"
              "\"3 ranks\"},{\"id\":2,\"at\":\"2023-11-14T22:13:21.500Z\","
              "\"kind\":\"rank_failed\",\"rank\":2,\"message\":\"rank 2 was "
              "killed by signal 9\"}]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_events(q, 1, 1, 1000, &b, err, sizeof err), 0);
    CHECK(strncmp(b.data, "{\"events\":[{\"id\":2,", 19) == 0);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_events(q, 1, 0, 1, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "\"id\":2") == NULL);
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_events(q, 1, 2, 10, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "{\"events\":[]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_events(q, 3, 0, 10, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);
    ss_buf_free(&b);
    ss_query_close(q);
}

static void open_refuses_non_stores(void)
{
    char path[600], err[512] = "";
    CHECK(ss_query_open(testing_tmp_path("absent.db", path, sizeof path), err,
                        sizeof err) == NULL);
    CHECK(strstr(err, "no store at") != NULL);
    FILE *f = fopen(testing_tmp_path("text.db", path, sizeof path), "w");
    REQUIRE(f);
    fputs("this is not a database, just some text to make the file long "
          "enough that SQLite reads a header from it......................",
          f);
    fclose(f);
    err[0] = '\0';
    CHECK(ss_query_open(path, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a stepscope store") != NULL);
    ss_query_close(NULL);
}

static void json_escaping(void)
{
    ss_buf b = {0};
    ss_buf_json_str(&b, "a\"b\\c\n\x01 \xc3\xa9 \xff end");
    CHECK_STR(b.data, "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9 \\ufffd end\"");
    ss_buf_reset(&b);
    ss_buf_json_str(&b, NULL);
    ss_buf_json_ms(&b, SS_MISSING);
    ss_buf_json_int(&b, SS_MISSING);
    ss_buf_json_time(&b, SS_MISSING);
    CHECK_STR(b.data, "nullnullnullnull");
    ss_buf_reset(&b);
    ss_buf_json_ms(&b, 1234567);
    ss_buf_puts(&b, " ");
    ss_buf_json_time(&b, T0 + 123 * MS);
    CHECK_STR(b.data, "1.235 \"2023-11-14T22:13:20.123Z\"");
    /* a long printf goes through the slow path */
    ss_buf_reset(&b);
    ss_buf_printf(&b, "%0300d", 7);
    CHECK_EQ_INT(b.len, 300);
    CHECK_EQ_INT(b.data[299], '7');
    ss_buf_free(&b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A 10,000-step run: the whole window in one document, and its cost. */
static void steps_10k(void)
{
    char path[600], err[512] = "";
    testing_tmp_path("big.db", path, sizeof path);
    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    REQUIRE(s);
    ss_run_info info = {.world_size = 3, .started_at = T0};
    snprintf(info.uuid, sizeof info.uuid, "big");
    snprintf(info.name, sizeof info.name, "big");
    int64_t id = -1;
    REQUIRE(ss_store_begin_run(s, &info, &id, err, sizeof err) == 0);
    for (uint64_t step = 0; step < 10000; step++) {
        step_fx fx;
        fx_build(&fx, step, 0);
        ss_store_put_step(s, id, &fx.v, names_);
    }
    ss_store_close(s);
    ss_query *q = ss_query_open(path, err, sizeof err);
    REQUIRE(q);
    ss_buf b = {0};
    ss_query_range rg = {-1, 0, -1, SS_QUERY_MAX_STEPS};
    double t0 = now_s();
    CHECK_EQ_INT(ss_query_steps(q, id, &rg, &b, err, sizeof err), 0);
    double t1 = now_s();
    check_step_list(b.data + b.len - 900, "9999");
    size_t bytes = b.len;
    ss_buf paged = {0};
    CHECK_EQ_INT(steps_in_pages(q, id, &rg, 256, &paged), 0);
    CHECK(paged.len == b.len && memcmp(paged.data, b.data, b.len) == 0);
    ss_buf_free(&paged);
    ss_buf_reset(&b);
    rg = (ss_query_range){-1, -1, -1, SS_QUERY_DEFAULT_STEPS};
    double t2 = now_s();
    CHECK_EQ_INT(ss_query_steps(q, id, &rg, &b, err, sizeof err), 0);
    double t3 = now_s();
    ss_buf_reset(&b);
    double t4 = now_s();
    CHECK_EQ_INT(ss_query_run(q, id, -1, NULL, &b, err, sizeof err), 0);
    double t5 = now_s();
    CHECK(strstr(b.data, "\"steps\":10000,") != NULL);
    printf("  steps 10000: %.1f ms (%zu bytes); latest 500: %.1f ms; "
           "run summary: %.1f ms\n", (t1 - t0) * 1e3, bytes,
           (t3 - t2) * 1e3, (t5 - t4) * 1e3);
    ss_buf_free(&b);
    ss_query_close(q);
}

/* The vector documents on the standard store (store_fixture.h): the list
 * of names, one rank's vectors by step, one index over ranks, NaN and
 * infinities as strings, the cell cap and its next_from, and a run with
 * none. */
static void values_documents(void)
{
    char path[600], err[512];
    testing_tmp_path("values.db", path, sizeof path);
    REQUIRE(ss_fixture_build(path, err, sizeof err) == 0);
    ss_query *q = ss_query_open(path, err, sizeof err);
    REQUIRE(q != NULL);
    ss_buf b = {0};
    CHECK_EQ_INT(ss_query_values(q, 1, -1, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"attempt\":0,\"dropped_vectors\":3,\"values\":["
              "{\"name\":\"act_absmax\",\"ranks\":[0,1,2,3],"
              "\"first_step\":0,\"last_step\":19,\"steps\":20,"
              "\"rows\":80,\"max_n\":3,\"truncated\":7,"
              "\"labels\":[\"layer0\",\"layer1\",\"head\"]}]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_values(q, 2, -1, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "{\"attempt\":1,\"dropped_vectors\":0,"
                      "\"values\":[]}");
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_values(q, 9, -1, &b, err, sizeof err),
                 SS_QUERY_NOT_FOUND);

    ss_query_values_args a = {-1, "act_absmax", 1, -1, 18, -1, 0};
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_value_series(q, 1, &a, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"name\":\"act_absmax\",\"attempt\":0,\"rank\":1,"
              "\"cells\":6,\"more\":false,\"next_from\":null,\"steps\":["
              "{\"step\":18,\"truncated\":0,\"values\":[19,10,1]},"
              "{\"step\":19,\"truncated\":0,\"values\":[20,10,\"nan\"]}]}");
    a.rank = -1;
    a.index = 2;
    a.from = 17;
    a.to = 19;
    a.limit = 5; /* one step of 4 ranks, then more */
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_value_series(q, 1, &a, &b, err, sizeof err), 0);
    CHECK_STR(b.data,
              "{\"name\":\"act_absmax\",\"attempt\":0,\"index\":2,"
              "\"cells\":4,\"more\":true,\"next_from\":18,\"steps\":["
              "{\"step\":17,\"ranks\":[0,1,2,3],"
              "\"values\":[1,1,1,\"inf\"]}]}");
    a.from = 19;
    a.limit = 0;
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_value_series(q, 1, &a, &b, err, sizeof err), 0);
    CHECK(strstr(b.data, "\"values\":[1,\"nan\",null,\"inf\"]") != NULL);
    a.rank = 0; /* both */
    ss_buf_reset(&b);
    CHECK_EQ_INT(ss_query_value_series(q, 1, &a, &b, err, sizeof err),
                 SS_QUERY_ERROR);
    CHECK(strstr(err, "not both") != NULL);
    ss_buf_free(&b);
    ss_query_close(q);
}

TEST_LIST(TEST(runs_document), TEST(run_document), TEST(steps_document),
          TEST(steps_windows), TEST(steps_in_pages_match_the_document),
          TEST(step_pages),
          TEST(step_object_matches_store),
          TEST(heatmap_document), TEST(host_document), TEST(ranks_document), TEST(live_fields),
          TEST(findings_document), TEST(nodes_document), TEST(events_document),
          TEST(open_refuses_non_stores), TEST(json_escaping),
          TEST(values_documents), TEST(steps_10k))
