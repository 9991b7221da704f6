/*
 * detect_replica_test.c - unit tests for detect_replica.c on synthetic
 * step views carrying the checksum vectors and group metric that
 * stepscope/_checksum.py records: one rank off the majority is named with
 * its step and first parameter; several parameters count; two ranks that
 * disagree have no majority; groups are judged apart (different groups
 * holding different parameters is no finding); ranks that did not hash a
 * step are left out; clean steps give nothing.
 */
#include "detectors.h"

#include <math.h>
#include <string.h>

#include "findings_capture.h"
#include "testing.h"

#define W 6
#define P 4 /* parameters */
enum { HI, LO, GROUP, NN };
static const char *const names[NN] = {"checksum.hi", "checksum.lo",
                                      "checksum.group"};
static const char *const params[P] = {"embed.weight", "fc.weight",
                                      "fc.bias", "head.weight"};

typedef struct {
    double metric[W][NN];
    int64_t none[W][NN];
    double hi[W][P], lo[W][P];
    ss_values_item items[W][2];
    ss_rank_step ranks[W];
    ss_step_view v;
} builder;

/* Step STEP with every rank of WORLD holding the same parameters (a
 * function of the step), in group GROUP_OF[r] (NULL: all group 0). */
static void begin(builder *b, uint64_t step, uint32_t world,
                  const int *group_of)
{
    memset(b, 0, sizeof *b);
    b->v.step = step;
    b->v.world_size = world;
    b->v.n_present = world;
    b->v.n_names = NN;
    b->v.ranks = b->ranks;
    for (uint32_t r = 0; r < world; r++) {
        for (int i = 0; i < NN; i++)
            b->none[r][i] = SS_MISSING;
        b->metric[r][HI] = b->metric[r][LO] = NAN;
        b->metric[r][GROUP] = group_of ? group_of[r] : 0;
        for (int p = 0; p < P; p++) {
            b->hi[r][p] = (double)(step * 31 + (uint64_t)p * 7 + 1000);
            b->lo[r][p] = (double)(step * 17 + (uint64_t)p * 3 +
                                   (group_of ? (uint64_t)group_of[r] * 5 : 0));
        }
        b->items[r][0] = (ss_values_item){HI, P, 0, b->hi[r], P, params};
        b->items[r][1] = (ss_values_item){LO, P, 0, b->lo[r], P, params};
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = 10000000;
        rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->phase_ns = rs->phase_self_ns = rs->sync_arrival_ns = b->none[r];
        rs->metric = b->metric[r];
        rs->n_values = 2;
        rs->values = b->items[r];
    }
}

static void feed(ss_detectors *d, builder *b)
{
    ss_detectors_step(d, &b->v, names);
}

static const ss_finding *the_one(found *fd)
{
    CHECK_EQ_INT(count_kind(fd, "replica_divergence"), 1);
    return first_kind(fd, "replica_divergence");
}

static void one_rank_off_the_majority(void)
{
    found fd;
    ss_detectors *d = make(3, &fd);
    builder b;
    for (uint64_t s = 0; s < 12; s++) {
        begin(&b, s, 3, NULL);
        if (s >= 5)
            b.lo[2][2] += 1; /* fc.bias on rank 2 from step 5 */
        feed(d, &b);
    }
    /* a last step that only ranks 1 and 2 hashed (rank 0 already gone)
     * has no majority: it names nobody new */
    begin(&b, 12, 3, NULL);
    b.lo[2][2] += 1;
    b.ranks[0].n_values = 0;
    feed(d, &b);
    ss_detectors_finish(d, names);
    const ss_finding *f = the_one(&fd);
    REQUIRE(f != NULL);
    CHECK(f->severity == SS_CRITICAL);
    CHECK(f->first_step == 5 && f->last_step == 12);
    CHECK(f->n_ranks == 1 && f->ranks[0] == 2);
    CHECK(strstr(f->evidence_json, "\"first_param\":\"fc.bias\"") != NULL);
    CHECK(strstr(f->evidence_json, "\"params_differ\":1") != NULL);
    CHECK(strstr(f->evidence_json, "\"no_majority\":0") != NULL);
    CHECK(strstr(f->message, "rank 2") && strstr(f->message, "fc.bias"));
    ss_detectors_destroy(d);
}

static void lost_update_counts_every_parameter(void)
{
    found fd;
    ss_detectors *d = make(5, &fd);
    builder b;
    for (uint64_t s = 0; s < 6; s++) {
        begin(&b, s, 5, NULL);
        if (s >= 3)
            for (int p = 0; p < P; p++)
                b.hi[4][p] += 1;
        feed(d, &b);
    }
    const ss_finding *f = the_one(&fd);
    REQUIRE(f != NULL);
    CHECK(f->first_step == 3 && f->ranks[0] == 4);
    CHECK(strstr(f->evidence_json, "\"first_param\":\"embed.weight\""));
    CHECK(strstr(f->evidence_json, "\"params_differ\":4"));
    CHECK(strstr(f->evidence_json, "\"majority\":4"));
    ss_detectors_destroy(d);
}

static void two_ranks_have_no_majority(void)
{
    found fd;
    ss_detectors *d = make(2, &fd);
    builder b;
    for (uint64_t s = 0; s < 4; s++) {
        begin(&b, s, 2, NULL);
        if (s >= 1)
            b.lo[1][3] += 1;
        feed(d, &b);
    }
    const ss_finding *f = the_one(&fd);
    REQUIRE(f != NULL);
    CHECK(f->first_step == 1 && f->n_ranks == 2);
    CHECK(strstr(f->evidence_json, "\"no_majority\":1"));
    CHECK(strstr(f->evidence_json, "\"first_param\":\"head.weight\""));
    CHECK(strstr(f->message, "the 2 ranks hold different parameters at "
                 "step 1: of two there is no majority, so neither can be "
                 "named as the odd one: head.weight") != NULL);
    ss_detectors_destroy(d);
}

static void groups_are_judged_apart(void)
{
    static const int group_of[W] = {0, 0, 0, 3, 3, 3};
    found fd;
    ss_detectors *d = make(W, &fd);
    builder b;
    for (uint64_t s = 0; s < 8; s++) {
        begin(&b, s, W, group_of); /* the groups differ from each other */
        feed(d, &b);
    }
    CHECK_EQ_INT(count_kind(&fd, "replica_divergence"), 0);
    begin(&b, 8, W, group_of);
    b.hi[4][0] += 1;
    feed(d, &b);
    const ss_finding *f = the_one(&fd);
    REQUIRE(f != NULL);
    CHECK(f->first_step == 8 && f->n_ranks == 1 && f->ranks[0] == 4);
    CHECK(strstr(f->evidence_json, "\"group\":3"));
    CHECK(strstr(f->evidence_json, "\"ranks_compared\":3"));
    ss_detectors_destroy(d);
}

static void ranks_that_did_not_hash_are_left_out(void)
{
    found fd;
    ss_detectors *d = make(3, &fd);
    builder b;
    for (uint64_t s = 0; s < 10; s++) {
        begin(&b, s, 3, NULL);
        if (s % 4 != 0) /* rank 1 hashes every 4th step only */
            b.ranks[1].n_values = 0;
        feed(d, &b);
    }
    ss_detectors_finish(d, names);
    CHECK_EQ_INT(count_kind(&fd, "replica_divergence"), 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(one_rank_off_the_majority),
          TEST(lost_update_counts_every_parameter),
          TEST(two_ranks_have_no_majority),
          TEST(groups_are_judged_apart),
          TEST(ranks_that_did_not_hash_are_left_out))
