/*
 * detect_workload_test.c - unit tests for the mixture-of-experts and
 * sharded-embedding detectors (detect_moe.c, detect_embedding.c, over
 * detect_workload.c) on synthetic steps of 4 ranks carrying moe.load.2,
 * moe.placement.2 (sent in step 0 only, as stepscope.expert_placement
 * does) and emb.load.items: balanced noisy loads make no finding; hot
 * experts are named with their layer, MaxVio and host rank, joined with
 * that rank's lateness; a dead expert is named; a straggler that hosts the
 * hot experts, or serves the hot shard, is explained by them; a hot shard
 * is named with its rank and share; a skew that ends closes the episode.
 * The runs are the rows of one table (cases[]), run by one loop that names
 * the failing row.
 */
#include "detectors.h"

#include <math.h>
#include <stdlib.h>

#include "detect_workload.h"
#include "findings_capture.h"
#include "stats.h"
#include "testing.h"

#define W 4
#define NE 8 /* experts, 2 per rank: expert e on rank e / 2 */
#define NS 4 /* shards, shard i on rank i */
#define MS 1000000LL

enum { MOE, EXCHANGE, LOAD, PLACE, EMB, NN };
static const char *const names[NN] = {"moe", "exchange", "moe.load.2",
                                      "moe.placement.2", "emb.load.items"};

typedef struct {
    double load[W][NE], place[NE], shard[W][NS];
    int64_t phase[W][NN], sync[W][NN];
    double metric[W][NN];
    ss_values_item items[W][3];
    ss_rank_step ranks[W];
    ss_phase_stat phases[2];
    ss_sync_stat syncs[1];
    ss_step_view v;
} builder;

/* What a case does to the job, per step. */
typedef struct {
    double expert_mult[NE]; /* an expert's tokens times this */
    double shard_mult[NS];
    int slow_rank;          /* its moe phase scales with its load; -1 */
    uint64_t skew_until;    /* the skew ends after this step (0: never) */
} job;

static uint64_t rng = 88172645463325252ull;
static double noise(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static void build(builder *b, const job *j, uint64_t step)
{
    memset(b, 0, sizeof *b);
    int skewed = !j->skew_until || step <= j->skew_until;
    double rank_tokens[W] = {0};
    for (uint32_t r = 0; r < W; r++) {
        for (int e = 0; e < NE; e++) {
            double m = skewed ? j->expert_mult[e] : 1;
            b->load[r][e] = round((64 + 8 * noise()) * m);
            rank_tokens[e / 2] += b->load[r][e];
        }
        for (int s = 0; s < NS; s++)
            b->shard[r][s] = round((500 + 40 * noise()) *
                                   (skewed ? j->shard_mult[s] : 1));
    }
    for (int e = 0; e < NE; e++)
        b->place[e] = e / 2;
    double shard_total[NS] = {0};
    for (uint32_t r = 0; r < W; r++)
        for (int s = 0; s < NS; s++)
            shard_total[s] += b->shard[r][s];
    int64_t steps[W], last = 0;
    for (uint32_t r = 0; r < W; r++) {
        /* compute proportional to the load the rank serves */
        double ms = 20 + 2 * noise();
        if ((int)r == j->slow_rank)
            ms *= rank_tokens[r] / 1024.0 > shard_total[r] / 2000.0
                      ? rank_tokens[r] / 1024.0
                      : shard_total[r] / 2000.0;
        int64_t c = (int64_t)(ms * MS);
        b->phase[r][MOE] = c;
        if (c > last)
            last = c;
    }
    for (uint32_t r = 0; r < W; r++) {
        ss_rank_step *rs = &b->ranks[r];
        for (int i = 0; i < NN; i++) {
            if (i != MOE)
                b->phase[r][i] = SS_MISSING;
            b->sync[r][i] = SS_MISSING;
            b->metric[r][i] = NAN;
        }
        b->phase[r][EXCHANGE] = last + MS - b->phase[r][MOE];
        b->sync[r][EXCHANGE] = (int64_t)step * 1000 * MS + b->phase[r][MOE];
        rs->present = 1;
        rs->step_ns = steps[r] = last + MS;
        rs->rss_bytes = rs->device_bytes = rs->begin_ns = SS_MISSING;
        rs->phase_ns = b->phase[r];
        rs->sync_arrival_ns = b->sync[r];
        rs->metric = b->metric[r];
        uint32_t n = 0;
        b->items[r][n++] = (ss_values_item){LOAD, NE, 0, b->load[r], 0, NULL};
        b->items[r][n++] = (ss_values_item){EMB, NS, 0, b->shard[r], 0, NULL};
        if (step == 0)
            b->items[r][n++] =
                (ss_values_item){PLACE, NE, 0, b->place, 0, NULL};
        rs->n_values = n;
        rs->values = b->items[r];
    }
    ss_step_view *v = &b->v;
    v->step = step;
    v->world_size = W;
    v->n_present = W;
    v->n_names = NN;
    v->ranks = b->ranks;
    ss_stat_compute(&v->step_time, steps, NULL, W);
    int64_t vals[W], first = 0, latest = 0;
    for (int p = 0; p < 2; p++) {
        for (uint32_t r = 0; r < W; r++)
            vals[r] = b->phase[r][p];
        b->phases[p].name = p;
        ss_stat_compute(&b->phases[p].stat, vals, NULL, W);
    }
    for (uint32_t r = 0; r < W; r++) {
        vals[r] = b->sync[r][EXCHANGE];
        if (r == 0 || vals[r] < first)
            first = vals[r];
        if (r == 0 || vals[r] > latest) {
            latest = vals[r];
            b->syncs[0].worst_rank = (int32_t)r;
        }
    }
    b->syncs[0].name = EXCHANGE;
    b->syncs[0].n = W;
    b->syncs[0].skew_ns = latest - first;
    b->syncs[0].late_ns = latest - ss_median_i64(vals, W);
    v->n_phases = 2;
    v->phases = b->phases;
    v->n_syncs = 1;
    v->syncs = b->syncs;
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
}

typedef struct {
    const char *name;
    job j;
    uint64_t steps;
    /* expected */
    int moe_findings, emb_findings;
    const char *hot_experts; /* evidence, NULL: not checked */
    int moe_rank, emb_rank;  /* ranks[0]; -1 not checked */
    int dead;                /* dead_experts */
    const char *late_phase;  /* in the moe or embedding finding */
    const char *straggler_words; /* in a straggler finding; NULL: none
                                    explained by load */
} test_case;

#define ONES8 {1, 1, 1, 1, 1, 1, 1, 1}
#define ONES4 {1, 1, 1, 1}

static const test_case cases[] = {
    {"balanced", {ONES8, ONES4, -1, 0}, 60, 0, 0, NULL, -1, -1, 0, NULL,
     NULL},
    {"experts 6 and 7 hot on slow rank 3",
     {{1, 1, 1, 1, 1, 1, 2.6, 2.4}, ONES4, 3, 0}, 60, 1, 0, "6,7", 3, -1, 0,
     "moe", "hosts experts 6 and 7, which received"},
    {"expert 1 hot, rank 0 not slow",
     {{1, 3, 1, 1, 1, 1, 1, 1}, ONES4, -1, 0}, 60, 1, 0, "1", 0, -1, 0,
     NULL, NULL},
    {"expert 5 dead", {{1, 1, 1, 1, 1, 0, 1, 1}, ONES4, -1, 0}, 40, 1, 0,
     "", 2, -1, 1, NULL, NULL},
    {"shard 2 hot on slow rank 2", {ONES8, {1, 1, 3, 1}, 2, 0}, 60, 0, 1,
     NULL, -1, 2, 0, "moe", "serves shard 2 of table items"},
    {"skew ends at step 30", {{2.5, 1, 1, 1, 1, 1, 1, 1}, ONES4, -1, 30},
     80, 1, 0, "0", 0, -1, 0, NULL, NULL},
};

static int run_case(const test_case *c)
{
    found fd;
    ss_detectors *d = make(W, &fd);
    if (!d)
        return 0;
    static builder b;
    for (uint64_t s = 0; s < c->steps; s++) {
        build(&b, &c->j, s);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    int ok = 1;
#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "  case '%s': %s\n", c->name, #cond);           \
            ok = 0;                                                          \
        }                                                                    \
    } while (0)
    EXPECT(count_kind(&fd, "expert_imbalance") == (uint32_t)c->moe_findings);
    EXPECT(count_kind(&fd, "embedding_imbalance") ==
           (uint32_t)c->emb_findings);
    const ss_finding *m = first_kind(&fd, "expert_imbalance");
    if (m && c->moe_findings) {
        EXPECT(json_has(m->evidence_json, "layer", "2"));
        if (c->hot_experts)
            EXPECT(json_has(m->evidence_json, "hot_experts", c->hot_experts));
        if (c->moe_rank >= 0)
            EXPECT(m->n_ranks >= 1 && m->ranks[0] == c->moe_rank);
        EXPECT(json_get(m->evidence_json, "dead_experts") == c->dead);
        if (c->hot_experts && c->hot_experts[0])
            EXPECT(json_get(m->evidence_json, "maxvio") > 0.5);
        if (c->late_phase)
            EXPECT(json_has(m->evidence_json, "late_phase", c->late_phase));
        else
            EXPECT(!strstr(m->evidence_json, "late_phase"));
        EXPECT(strstr(m->message, "layer 2's experts") != NULL);
        /* the tokens each rank received per step, by rank */
        EXPECT(strstr(m->evidence_json, "\"rank_tokens_per_step\":\"") != NULL);
    }
    const ss_finding *e = first_kind(&fd, "embedding_imbalance");
    if (e && c->emb_findings) {
        EXPECT(json_has(e->evidence_json, "table", "items"));
        EXPECT(e->n_ranks == 1 && e->ranks[0] == c->emb_rank);
        EXPECT(json_get(e->evidence_json, "hot_shard") == c->emb_rank);
        /* 3 x 500 of 6 x 500 lookups */
        EXPECT(fabs(json_get(e->evidence_json, "share_pct") - 50) < 3);
        if (c->late_phase)
            EXPECT(json_has(e->evidence_json, "late_phase", c->late_phase));
    }
    const ss_finding *s = first_kind(&fd, "straggler");
    if (c->straggler_words) {
        EXPECT(s != NULL);
        if (s)
            EXPECT(strstr(s->message, c->straggler_words) != NULL);
    } else if (s) {
        EXPECT(!strstr(s->message, "it is late because"));
    }
    if (c->j.skew_until && m)
        EXPECT(m->last_step <= c->j.skew_until + 20);
    if (!ok || getenv("DUMP"))
        dump(&fd);
    ss_detectors_destroy(d);
    return ok;
}

static void every_case(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(run_case(&cases[i]));
}

/* The chi-square tail against known values (df 3: 7.815 at 0.05, 11.345
 * at 0.01; df 10: 18.307 at 0.05). */
static void chi2_tail(void)
{
    CHECK(fabs(ss__chi2_upper(7.815, 3) - 0.05) < 0.003);
    CHECK(fabs(ss__chi2_upper(11.345, 3) - 0.01) < 0.001);
    CHECK(fabs(ss__chi2_upper(18.307, 10) - 0.05) < 0.002);
    CHECK(ss__chi2_upper(0, 3) == 1);
    CHECK(ss__chi2_upper(1e6, 3) < 1e-100);
}

TEST_LIST(TEST(chi2_tail), TEST(every_case))
