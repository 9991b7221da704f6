/*
 * cmd_trace_test.c - `stepscope trace` on a synthetic store: the trace is
 * valid JSON with one named, sorted track per rank; steps and phases are
 * complete slices that nest without overlapping on each track (a phase
 * that ran twice or spills over its parent is clipped, and says so); sync
 * arrivals are instants with their skew against the median rank; findings
 * are global instants at their first step; --steps, --ranks and the
 * default window choose what is drawn; errors are reported.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "store_fixture.h"
#include "testing.h"
#include "testing_cmd.h"
#include "testing_tmp.h"

#define MS 1000000LL
#define W 3
#define STEPS 10

/* Names 0..5 are phases, 6 the sync point. */
static const char *const names_[] = {"data", "forward", "attn", "backward",
                                     "comm", "h2d", "allreduce"};
enum { N_PHASES = 6, N_NAMES = 7 };

/* Step S of rank R begins at 1 s + S * 100 ms + R * 10 us and lasts
 * 90 + R ms.  Phases (start, total, count): data (0, 5 ms), forward
 * (5, 30), attn inside forward (10, 5), backward (35, 40, ran twice), comm
 * (50, 40: spills out of backward, clipped at 75), h2d (-2, 4: began
 * before the step, clipped at 0).  Rank R reaches the all-reduce at
 * 80 + R ms: 1.01 ms behind the median rank for rank 2. */
static void put_steps(ss_store *s, int64_t run, int with_timeline)
{
    static const int64_t start[N_PHASES] = {0, 5 * MS, 10 * MS, 35 * MS,
                                            50 * MS, -2 * MS};
    static const int64_t total[N_PHASES] = {5 * MS, 30 * MS, 5 * MS, 40 * MS,
                                            40 * MS, 4 * MS};
    static const int64_t count[N_PHASES] = {1, 1, 1, 2, 1, 1};
    for (uint64_t step = 0; step < STEPS; step++) {
        ss_rank_step ranks[W];
        int64_t ph[W][N_NAMES], st[W][N_NAMES], co[W][N_NAMES], sy[W][N_NAMES];
        for (int r = 0; r < W; r++) {
            int64_t begin = 1000 * MS + (int64_t)step * 100 * MS + r * 10000;
            for (int n = 0; n < N_NAMES; n++) {
                ph[r][n] = n < N_PHASES ? total[n] : SS_MISSING;
                st[r][n] = n < N_PHASES ? start[n] : SS_MISSING;
                co[r][n] = n < N_PHASES ? count[n] : SS_MISSING;
                sy[r][n] = n == 6 ? begin + (80 + r) * MS : SS_MISSING;
            }
            ranks[r] = (ss_rank_step){
                .present = 1,
                .step_ns = (90 + r) * MS,
                .rss_bytes = SS_MISSING,
                .device_bytes = SS_MISSING,
                .phase_ns = ph[r],
                .sync_arrival_ns = sy[r],
                .begin_ns = with_timeline ? begin : SS_MISSING,
                .phase_start_ns = with_timeline ? st[r] : NULL,
                .phase_count = with_timeline ? co[r] : NULL};
        }
        ss_phase_stat phases[N_PHASES];
        for (int n = 0; n < N_PHASES; n++)
            phases[n] = (ss_phase_stat){n, {total[n], total[n], total[n],
                                            total[n], 0, W}};
        ss_sync_stat syncs[1] = {{6, 2 * MS, 1 * MS, 2, W}};
        ss_step_view v = {
            .step = step, .finalized_at = 1700000000000000000, .world_size = W,
            .n_present = W,
            .step_time = {90 * MS, 91 * MS, 92 * MS, 92 * MS, 2, W},
            .rss = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                    SS_NO_RANK, 0},
            .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                       SS_NO_RANK, 0},
            .n_phases = N_PHASES, .phases = phases, .n_syncs = 1,
            .syncs = syncs, .n_names = N_NAMES, .ranks = ranks};
        ss_store_put_step(s, run, &v, names_);
    }
}

/* A store holding run 1 (with timelines and a finding at steps 4-6) and,
 * when OLD_TOO, run 2 recorded without timelines. */
static int make_store(const char *path, int old_too)
{
    char err[512];
    ss_store *s = ss_store_open(path, NULL, 0, err, sizeof err);
    if (!s)
        return -1;
    for (int k = 0; k < 1 + old_too; k++) {
        char uuid[16], name[16];
        snprintf(uuid, sizeof uuid, "uuid-%d", k);
        snprintf(name, sizeof name, "train \"%d\"", k);
        int64_t run = ss_fixture_add_run(s, uuid, name, W, 0);
        if (run < 0) {
            ss_store_close(s);
            return -1;
        }
        ss_store_put_attempt(s, run, 0, 1);
        put_steps(s, run, k == 0);
        ss_fixture_put_finding(s, run, 1, SS_CRITICAL, "straggler", 2,
                               "forward", 4, 6, "{\"late_ms\":1}",
                               "rank 2 is late \xff \"x\"");
    }
    ss_store_close(s);
    return 0;
}

/* Runs `stepscope trace ARGS...`; the trace lands in OUT_PATH and stderr
 * in ERR_TEXT. */
static int trace(const char *db, const char *out_path, char *err_text,
                 size_t errlen, const char *a1, const char *a2,
                 const char *a3, const char *a4)
{
    char *argv[12] = {"trace", "--db", (char *)db, "-o", (char *)out_path};
    int argc = 5;
    const char *extra[4] = {a1, a2, a3, a4};
    for (int i = 0; i < 4 && extra[i]; i++)
        argv[argc++] = (char *)extra[i];
    FILE *err = tmpfile();
    FILE *out = tmpfile();
    int rc = testing_cmd_run(ss_cmd_trace, argc, argv, out, err);
    rewind(err);
    size_t n = fread(err_text, 1, errlen - 1, err);
    err_text[n] = '\0';
    fclose(err);
    fclose(out);
    return rc;
}

static cJSON *load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : -1e300;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : "";
}

/* The events of DOC with phase PH (and, unless NULL, name NAME). */
static int count(const cJSON *doc, const char *ph, const char *name)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
        n += strcmp(str(e, "ph"), ph) == 0 &&
             (!name || strcmp(str(e, "name"), name) == 0);
    return n;
}

/* The first event with phase PH, name NAME, tid TID and args.step STEP. */
static const cJSON *find(const cJSON *doc, const char *ph, const char *name,
                         int tid, int step)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
        if (strcmp(str(e, "ph"), ph) == 0 &&
            strcmp(str(e, "name"), name) == 0 && num(e, "tid") == tid &&
            num(cJSON_GetObjectItem(e, "args"), "step") == step)
            return e;
    return NULL;
}

typedef struct {
    double ts, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

/* 1 when the complete slices of every track nest without overlapping. */
static int tracks_nest(const cJSON *doc)
{
    static span sp[4096];
    for (int tid = 0; tid <= W + 1; tid++) {
        size_t n = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
            if (strcmp(str(e, "ph"), "X") == 0 && num(e, "tid") == tid &&
                n < 4096) {
                sp[n].ts = num(e, "ts");
                sp[n].end = sp[n].ts + num(e, "dur");
                n++;
            }
        qsort(sp, n, sizeof *sp, cmp_span);
        double stack[64];
        size_t depth = 0;
        for (size_t i = 0; i < n; i++) {
            while (depth && stack[depth - 1] <= sp[i].ts + 1e-9)
                depth--;
            if (depth && sp[i].end > stack[depth - 1] + 1e-9)
                return 0;
            if (depth == 64)
                return 0;
            stack[depth++] = sp[i].end;
        }
    }
    return 1;
}

static void draws_every_rank_with_nested_phases(void)
{
    char db[600], out[600], err[4096];
    testing_tmp_path("a.db", db, sizeof db);
    testing_tmp_path("a.json", out, sizeof out);
    REQUIRE(make_store(db, 0) == 0);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, NULL, NULL, NULL, NULL), 0);
    CHECK(strstr(err, "steps 0-9 (10 drawn)") != NULL);
    cJSON *doc = load(out);
    REQUIRE(doc != NULL);
    CHECK_EQ_INT(count(doc, "M", "thread_name"), W);
    CHECK_EQ_INT(count(doc, "M", "thread_sort_index"), W);
    CHECK_EQ_INT(count(doc, "M", "process_name"), 1);
    CHECK_EQ_INT(count(doc, "X", NULL), W * STEPS * (1 + N_PHASES));
    CHECK_EQ_INT(count(doc, "i", "allreduce"), W * STEPS);
    CHECK(tracks_nest(doc));

    /* Times: microseconds since the run's first step. */
    const cJSON *s3 = find(doc, "X", "step 3", 1, 3);
    REQUIRE(s3 != NULL);
    CHECK(num(s3, "ts") == 300000.0);
    CHECK(num(s3, "dur") == 90000.0);
    const cJSON *s3r2 = find(doc, "X", "step 3", 3, 3);
    REQUIRE(s3r2 != NULL);
    CHECK(num(s3r2, "ts") == 300020.0);

    /* A phase that ran twice says so; one that spills over is clipped. */
    const cJSON *bwd = find(doc, "X", "backward", 1, 3);
    REQUIRE(bwd != NULL);
    CHECK(num(bwd, "ts") == 335000.0 && num(bwd, "dur") == 40000.0);
    CHECK(num(cJSON_GetObjectItem(bwd, "args"), "count") == 2);
    const cJSON *comm = find(doc, "X", "comm", 1, 3);
    REQUIRE(comm != NULL);
    CHECK(num(comm, "ts") == 350000.0 && num(comm, "dur") == 25000.0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(comm, "args"),
                                           "clipped")));
    CHECK(num(cJSON_GetObjectItem(comm, "args"), "total_ms") == 40.0);
    const cJSON *h2d = find(doc, "X", "h2d", 1, 3);
    REQUIRE(h2d != NULL);
    CHECK(num(h2d, "ts") == 300000.0 && num(h2d, "dur") == 2000.0);
    const cJSON *fwd = find(doc, "X", "forward", 1, 3);
    REQUIRE(fwd != NULL);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(fwd, "args"), "count") ==
          NULL);

    /* Sync arrivals: thread instants, skew against the median rank. */
    const cJSON *ar = find(doc, "i", "allreduce", 3, 3);
    REQUIRE(ar != NULL);
    CHECK_STR(str(ar, "s"), "t");
    CHECK(num(ar, "ts") == 300020.0 + 82000.0);
    CHECK(num(cJSON_GetObjectItem(ar, "args"), "vs_median_ms") == 1.01);
    ar = find(doc, "i", "allreduce", 1, 3);
    REQUIRE(ar != NULL);
    CHECK(num(cJSON_GetObjectItem(ar, "args"), "vs_median_ms") == -1.01);

    /* The finding: a global instant at its first step. */
    const cJSON *e, *fnd = NULL;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
        if (strcmp(str(e, "cat"), "finding") == 0)
            fnd = e;
    REQUIRE(fnd != NULL);
    CHECK_STR(str(fnd, "name"), "straggler");
    CHECK_STR(str(fnd, "s"), "g");
    CHECK(num(fnd, "ts") == 400000.0);
    const cJSON *args = cJSON_GetObjectItem(fnd, "args");
    CHECK_STR(str(args, "message"), "rank 2 is late \xef\xbf\xbd \"x\"");
    CHECK_STR(str(args, "severity"), "critical");
    CHECK(num(cJSON_GetObjectItem(args, "evidence"), "late_ms") == 1);
    CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(args, "ranks"), 0)
              ->valuedouble == 2);

    const cJSON *other = cJSON_GetObjectItem(doc, "otherData");
    CHECK_STR(str(other, "run_name"), "train \"0\"");
    CHECK(num(other, "first_step") == 0 && num(other, "last_step") == 9);
    cJSON_Delete(doc);
}

static void chooses_steps_and_ranks(void)
{
    char db[600], out[600], err[4096];
    testing_tmp_path("b.db", db, sizeof db);
    testing_tmp_path("b.json", out, sizeof out);
    REQUIRE(make_store(db, 0) == 0);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--steps", "3:5", "--ranks",
                       "0,2"),
                 0);
    cJSON *doc = load(out);
    REQUIRE(doc != NULL);
    CHECK_EQ_INT(count(doc, "M", "thread_name"), 2);
    CHECK_EQ_INT(count(doc, "X", NULL), 2 * 3 * (1 + N_PHASES));
    CHECK(find(doc, "X", "step 3", 1, 3) && find(doc, "X", "step 5", 3, 5));
    CHECK(!find(doc, "X", "step 6", 1, 6) && !find(doc, "X", "step 3", 2, 3));
    CHECK(tracks_nest(doc));
    /* The median behind the skew counts every rank, drawn or not. */
    const cJSON *ar = find(doc, "i", "allreduce", 3, 4);
    REQUIRE(ar != NULL);
    CHECK(num(cJSON_GetObjectItem(ar, "args"), "vs_median_ms") == 1.01);
    cJSON_Delete(doc);

    /* One step; a range past the finding leaves it out. */
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--steps", "8", "1", NULL),
                 0);
    doc = load(out);
    REQUIRE(doc != NULL);
    CHECK_EQ_INT(count(doc, "X", NULL), W * (1 + N_PHASES));
    CHECK_EQ_INT(count(doc, "i", "straggler"), 0);
    cJSON_Delete(doc);

    /* Bad choices are usage errors. */
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--steps", "5:3", NULL, NULL),
                 2);
    CHECK(strstr(err, "--steps") != NULL);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--ranks", "7", NULL, NULL),
                 2);
    CHECK(strstr(err, "--ranks") != NULL);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--bogus", NULL, NULL, NULL),
                 2);
}

static void reports_what_it_cannot_draw(void)
{
    char db[600], out[600], err[4096];
    testing_tmp_path("c.db", db, sizeof db);
    testing_tmp_path("c.json", out, sizeof out);
    REQUIRE(make_store(db, 1) == 0);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "2", NULL, NULL, NULL), 1);
    CHECK(strstr(err, "no step timelines") != NULL);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "9", NULL, NULL, NULL), 1);
    CHECK(strstr(err, "no run '9'") != NULL);
    CHECK_EQ_INT(trace(db, out, err, sizeof err, "--attempt", "3", NULL,
                       NULL),
                 1);
    CHECK(strstr(err, "no attempt 3") != NULL);
    char missing[600];
    testing_tmp_path("none.db", missing, sizeof missing);
    CHECK_EQ_INT(trace(missing, out, err, sizeof err, NULL, NULL, NULL, NULL),
                 1);
    CHECK(strstr(err, "no store") != NULL);
    char *argv[] = {"trace", "--db", db};
    FILE *f = tmpfile();
    CHECK_EQ_INT(testing_cmd_run(ss_cmd_trace, 3, argv, f, f), 2); /* no -o */
    fclose(f);
    char bad_dir[700];
    snprintf(bad_dir, sizeof bad_dir, "%s/no/such/dir.json", testing_tmp_dir());
    CHECK_EQ_INT(trace(db, bad_dir, err, sizeof err, "1", NULL, NULL, NULL),
                 1);
    CHECK(strstr(err, "cannot write") != NULL);
}

TEST_LIST(TEST(draws_every_rank_with_nested_phases),
          TEST(chooses_steps_and_ranks), TEST(reports_what_it_cannot_draw))
