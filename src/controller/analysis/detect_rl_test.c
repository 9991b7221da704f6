/*
 * detect_rl_test.c - unit tests for the reinforcement-learning detector
 * (detect_rl.c) on synthetic step views carrying a GRPO batch (the rl.*
 * vectors and rl.group_size), the rollout phase and the kl and entropy
 * metrics: a rank whose rollout and longest completion run far beyond the
 * others' is a rollout_long_tail once it holds enough steps, with the
 * time the others waited, and the straggler's finding is told so; a
 * slow rollout without long completions, or long completions without a
 * slow rollout, is not; groups whose rewards
 * are all equal make reward_collapse only over most of a window, and a
 * constant reward is said; a KL jump and an entropy fall are kl_spike and
 * entropy_collapse, while a noisy clean run with a slowly rising KL and a
 * slowly falling entropy makes nothing; a job without RL data leaves the
 * detector idle.
 */
#include "detect_rl.h"
#include "detectors.h"

#include <math.h>
#include <stdlib.h>

#include "findings_capture.h"
#include "stats.h"
#include "testing.h"

#define W 4
#define G 8        /* group size */
#define NB 32      /* completions per rank */
#define NN 7

enum { ROLLOUT, REWARD, LENGTH, ADV, GROUP, KL, ENT };
static const char *const names[NN] = {"rollout", "rl.reward", "rl.length",
                                      "rl.advantage", "rl.group_size", "kl",
                                      "entropy"};

typedef struct {
    double reward[W][NB], length[W][NB], adv[W][NB];
    int64_t phase[W][NN];
    double metric[W][NN];
    ss_values_item items[W][3];
    ss_rank_step ranks[W];
    ss_step_view v;
    int no_batch;
} builder;

static uint32_t rnd_state = 12345;
static double rnd(void) /* uniform in [0, 1) */
{
    rnd_state = rnd_state * 1664525u + 1013904223u;
    return (rnd_state >> 8) / 16777216.0;
}

/* A healthy step: rollouts of about 10 ms, completions of 2 to 4 tokens,
 * rewards 0 or 1 at random (most groups mixed), kl about 0.05 and
 * entropy about 1 with noise. */
static void begin(builder *b, uint64_t step)
{
    memset(b, 0, sizeof *b);
    for (uint32_t r = 0; r < W; r++) {
        for (int i = 0; i < NN; i++) {
            b->phase[r][i] = SS_MISSING;
            b->metric[r][i] = NAN;
        }
        b->phase[r][ROLLOUT] = (int64_t)((9 + 2 * rnd()) * 1e6);
        b->metric[r][GROUP] = G;
        b->metric[r][KL] = 0.05 * (0.7 + 0.6 * rnd());
        b->metric[r][ENT] = 1.0 * (0.8 + 0.4 * rnd());
        for (int i = 0; i < NB; i++) {
            b->reward[r][i] = rnd() < 0.5;
            b->length[r][i] = 2 + (int)(3 * rnd());
            b->adv[r][i] = b->reward[r][i] - 0.5;
        }
    }
    b->v.step = step;
}

static void end(builder *b)
{
    ss_step_view *v = &b->v;
    v->world_size = W;
    v->n_names = NN;
    v->n_present = W;
    v->ranks = b->ranks;
    int64_t times[W];
    int32_t who[W];
    for (uint32_t r = 0; r < W; r++) {
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = times[r] = 100000000;
        who[r] = (int32_t)r;
        rs->rss_bytes = rs->device_bytes = rs->begin_ns = SS_MISSING;
        rs->phase_ns = b->phase[r];
        rs->metric = b->metric[r];
        const double *vec[3] = {b->reward[r], b->length[r], b->adv[r]};
        for (int k = 0; k < 3; k++) {
            ss_values_item *it = &b->items[r][k];
            it->name = REWARD + k;
            it->n = NB;
            it->v = vec[k];
        }
        rs->n_values = b->no_batch ? 0 : 3;
        rs->values = b->items[r];
    }
    ss_stat_compute(&v->step_time, times, who, W);
    ss_stat_compute(&v->rss, NULL, NULL, 0);
    ss_stat_compute(&v->device, NULL, NULL, 0);
}

static found fd;

/* Runs steps 0..LAST through new detectors with SET; returns them. */
static ss_detectors *run(uint64_t last, void (*set)(builder *, uint64_t))
{
    static builder b;
    ss_detectors *d = make(W, &fd);
    if (!d)
        return NULL;
    for (uint64_t s = 0; s <= last; s++) {
        begin(&b, s);
        if (set)
            set(&b, s);
        end(&b);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    return d;
}

static uint32_t rl_findings(void)
{
    return count_kind(&fd, "rollout_long_tail") +
           count_kind(&fd, "reward_collapse") + count_kind(&fd, "kl_spike") +
           count_kind(&fd, "entropy_collapse");
}

/* Rank 2 from step 10: 24-token completions, an 80 ms rollout. */
static void long_tail(builder *b, uint64_t s)
{
    if (s < 10)
        return;
    b->phase[2][ROLLOUT] = 80000000;
    for (int i = 0; i < NB; i++)
        b->length[2][i] = 24;
}

static void long_tail_named(void)
{
    ss_detectors *d = run(40, long_tail);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "rollout_long_tail"), 1);
    const ss_finding *f = first_kind(&fd, "rollout_long_tail");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 2);
    CHECK_EQ_INT((int)f->first_step, 10);
    CHECK_EQ_INT((int)f->last_step, 40);
    CHECK_STR(f->phase, "rollout");
    CHECK(json_get(f->evidence_json, "longest_tokens") == 24);
    CHECK(json_get(f->evidence_json, "others_longest_tokens") == 4);
    CHECK(json_get(f->evidence_json, "steps") == 31);
    CHECK(json_get(f->evidence_json, "ranks_waiting") == 3);
    /* 3 ranks x about 70 ms, 31 steps */
    double total = json_get(f->evidence_json, "waited_ms_total");
    CHECK(total > 31 * 3 * 65 && total < 31 * 3 * 75);
    CHECK(strstr(f->message, "Rank 2's generation sets the pace") != NULL);
    CHECK_EQ_INT(count_kind(&fd, "reward_collapse"), 0);
    ss_detectors_destroy(d);
}

/* The straggler's words: the clause for the long-tail rank over steps
 * that hold a long-tail step, nothing otherwise or when it would not
 * fit. */
static void straggler_words(void)
{
    ss_detectors *d = run(40, long_tail);
    REQUIRE(d);
    char buf[200] = "late";
    ss__rl_straggler_words(d, 2, 30, 40, buf, sizeof buf);
    CHECK_STR(buf, "late; its rollouts set the pace: its longest completion "
                   "reached 24 tokens (the other ranks' longest: 4)");
    char other[200] = "late";
    ss__rl_straggler_words(d, 1, 30, 40, other, sizeof other);
    CHECK_STR(other, "late");
    ss__rl_straggler_words(d, 2, 0, 9, other, sizeof other);
    CHECK_STR(other, "late");
    char small[40] = "late";
    ss__rl_straggler_words(d, 2, 30, 40, small, sizeof small);
    CHECK_STR(small, "late");
    ss_detectors_destroy(d);
}

/* Slow rollouts with ordinary completions (the host, say), and long
 * completions in an ordinary time: not a long tail. */
static void slow_short(builder *b, uint64_t s)
{
    b->phase[1][ROLLOUT] = 80000000;
    for (int i = 0; i < NB; i++)
        b->length[3][i] = 24;
}

static void slow_or_long_alone_nothing(void)
{
    ss_detectors *d = run(40, slow_short);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "rollout_long_tail"), 0);
    ss_detectors_destroy(d);
}

/* Three long-tail steps only: under the window's minimum. */
static void few_tails(builder *b, uint64_t s)
{
    if (s == 10 || s == 20 || s == 30)
        long_tail(b, s);
}

static void few_long_tail_steps_nothing(void)
{
    ss_detectors *d = run(40, few_tails);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "rollout_long_tail"), 0);
    ss_detectors_destroy(d);
}

/* From step 12 every reward is 1. */
static void constant(builder *b, uint64_t s)
{
    if (s >= 12)
        for (uint32_t r = 0; r < W; r++)
            for (int i = 0; i < NB; i++) {
                b->reward[r][i] = 1;
                b->adv[r][i] = 0;
            }
}

static void constant_reward_collapse(void)
{
    ss_detectors *d = run(40, constant);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "reward_collapse"), 1);
    const ss_finding *f = first_kind(&fd, "reward_collapse");
    REQUIRE(f);
    CHECK_EQ_INT(f->n_ranks, W);
    /* found once most of the window is equal; begun at step 12 */
    CHECK_EQ_INT((int)f->first_step, 12);
    CHECK(strstr(f->message, "from step 12") != NULL);
    CHECK_EQ_INT((int)f->last_step, 40);
    CHECK(json_get(f->evidence_json, "constant_reward") == 1);
    CHECK(json_get(f->evidence_json, "frac_reward_zero_std") == 1);
    CHECK(strstr(f->message, "a constant reward?") != NULL);
    ss_detectors_destroy(d);
}

/* Every reward 1 in steps 8-20 and 23-40, healthy in 21 and 22: the
 * share dips under the line, then crosses it again. */
static void constant_with_a_dip(builder *b, uint64_t s)
{
    if (s >= 8 && (s <= 20 || s >= 23))
        constant(b, 12);
}

/* A collapse that dips for two steps is one finding, from its first step
 * to the last. */
static void a_dip_is_one_collapse(void)
{
    ss_detectors *d = run(40, constant_with_a_dip);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "reward_collapse"), 1);
    const ss_finding *f = first_kind(&fd, "reward_collapse");
    REQUIRE(f);
    CHECK_EQ_INT((int)f->first_step, 8);
    CHECK_EQ_INT((int)f->last_step, 40);
    ss_detectors_destroy(d);
}

/* Groups all equal half the time (a solved half of the prompts): under
 * the share, nothing; all groups equal but with rewards 0 and 1 (some
 * prompts solved, the others never): a collapse, not a constant. */
static void half_equal(builder *b, uint64_t s)
{
    for (uint32_t r = 0; r < W; r++)
        for (int g = 0; g < NB / G; g += 2)
            for (int i = 0; i < G; i++)
                b->reward[r][g * G + i] = 1;
}

static void all_equal_mixed(builder *b, uint64_t s)
{
    for (uint32_t r = 0; r < W; r++)
        for (int g = 0; g < NB / G; g++)
            for (int i = 0; i < G; i++)
                b->reward[r][g * G + i] = g % 2;
}

static void collapse_share(void)
{
    ss_detectors *d = run(40, half_equal);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "reward_collapse"), 0);
    ss_detectors_destroy(d);
    d = run(40, all_equal_mixed);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "reward_collapse"), 1);
    const ss_finding *f = first_kind(&fd, "reward_collapse");
    REQUIRE(f);
    CHECK(strstr(f->message, "constant") == NULL);
    CHECK(isnan(json_get(f->evidence_json, "constant_reward")));
    ss_detectors_destroy(d);
}

/* From step 25 the KL is 40 times higher and the entropy 50 times lower
 * on every rank. */
static void blowup(builder *b, uint64_t s)
{
    if (s >= 25)
        for (uint32_t r = 0; r < W; r++) {
            b->metric[r][KL] *= 40;
            b->metric[r][ENT] /= 50;
        }
}

static void kl_and_entropy(void)
{
    ss_detectors *d = run(40, blowup);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "kl_spike"), 1);
    CHECK_EQ_INT(count_kind(&fd, "entropy_collapse"), 1);
    const ss_finding *f = first_kind(&fd, "kl_spike");
    REQUIRE(f);
    CHECK_EQ_INT((int)f->first_step, 25);
    CHECK_EQ_INT(f->n_ranks, W);
    CHECK(json_get(f->evidence_json, "ratio") > 20);
    f = first_kind(&fd, "entropy_collapse");
    REQUIRE(f);
    CHECK_EQ_INT((int)f->first_step, 25);
    CHECK(strstr(f->message, "entropy fell to") != NULL);
    ss_detectors_destroy(d);
}

/* Rank 1's entropy falls 50 times for one step (an odd batch), at step
 * 20; from step 30 rank 2's stays 50 times lower. */
static void one_rank_dips(builder *b, uint64_t s)
{
    if (s == 20)
        b->metric[1][ENT] /= 50;
    if (s >= 30)
        b->metric[2][ENT] /= 50;
}

static void one_rank_needs_steps_in_a_row(void)
{
    ss_detectors *d = run(40, one_rank_dips);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "entropy_collapse"), 1);
    const ss_finding *f = first_kind(&fd, "entropy_collapse");
    REQUIRE(f);
    CHECK_EQ_INT((int)f->first_step, 30);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 2);
    CHECK_EQ_INT(count_kind(&fd, "kl_spike"), 0);
    ss_detectors_destroy(d);
}

/* From step 25 the learning rate is too high: rank 0's KL is 10 times
 * its median, rank 3's 3 times, the others' as before (each rank's batch
 * differs); a KL spike from step 25 that names rank 0.  Rank 3's 3 times
 * alone, at step 15, is no spike. */
static void uneven_blowup(builder *b, uint64_t s)
{
    if (s == 15)
        b->metric[3][KL] *= 3;
    if (s == 25) {
        b->metric[0][KL] *= 10;
        b->metric[3][KL] *= 3;
    }
}

static void a_jump_leaning_on_half_the_ranks(void)
{
    ss_detectors *d = run(40, uneven_blowup);
    REQUIRE(d);
    CHECK_EQ_INT(count_kind(&fd, "kl_spike"), 1);
    const ss_finding *f = first_kind(&fd, "kl_spike");
    REQUIRE(f);
    CHECK_EQ_INT((int)f->first_step, 25);
    CHECK_EQ_INT((int)f->last_step, 25);
    CHECK_EQ_INT(f->n_ranks, 1);
    CHECK_EQ_INT(f->ranks[0], 0);
    ss_detectors_destroy(d);
}

/* A clean run: the KL rises slowly (x3 over 200 steps), the entropy falls
 * slowly (/3), with their noise; some groups equal now and then. */
static void drift(builder *b, uint64_t s)
{
    for (uint32_t r = 0; r < W; r++) {
        b->metric[r][KL] *= 1 + 2.0 * s / 200;
        b->metric[r][ENT] /= 1 + 2.0 * s / 200;
    }
}

static void clean_drift_nothing(void)
{
    ss_detectors *d = run(200, drift);
    REQUIRE(d);
    CHECK_EQ_INT(rl_findings(), 0);
    ss_detectors_destroy(d);
}

/* A job without RL data: the detector stays idle. */
static void no_rl_data_nothing(void)
{
    static const char *const other[NN] = {"forward", "a", "b", "c", "d",
                                          "loss", "e"};
    found mine;
    ss_detectors *d = make(W, &mine);
    REQUIRE(d);
    static builder b;
    for (uint64_t s = 0; s < 40; s++) {
        begin(&b, s);
        long_tail(&b, s);
        blowup(&b, s);
        end(&b);
        ss_detectors_step(d, &b.v, other);
    }
    CHECK_EQ_INT(count_kind(&mine, "rollout_long_tail"), 0);
    CHECK_EQ_INT(count_kind(&mine, "kl_spike"), 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(long_tail_named), TEST(straggler_words),
          TEST(slow_or_long_alone_nothing),
          TEST(few_long_tail_steps_nothing), TEST(constant_reward_collapse),
          TEST(a_dip_is_one_collapse),
          TEST(collapse_share), TEST(kl_and_entropy),
          TEST(one_rank_needs_steps_in_a_row),
          TEST(a_jump_leaning_on_half_the_ranks),
          TEST(clean_drift_nothing), TEST(no_rl_data_nothing))
