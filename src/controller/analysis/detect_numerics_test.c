/*
 * detect_numerics_test.c - unit tests for detect_nonfinite.c and
 * detect_spike.c on synthetic step views carrying auto mode's numerics
 * metrics and vectors: the first rank, step, module or parameter and
 * direction of a non-finite value (in the warm-up too), the first of two
 * ranks by the aligned clock, light mode's words and command, the ranks it
 * spread to; loss and gradient-norm spikes on one rank by median and MAD
 * and by the ratio to the largest value; clean noisy runs give none.
 */
#include "detectors.h"

#include <math.h>
#include <string.h>

#include "findings_capture.h"
#include "testing.h"

#define W 4
enum {
    LOSS, LOSS_NF, GRAD, GRAD_NF, PARAM_NF, DIR, INDEX, NS, VEC_MOD, VEC_PAR,
    VEC_NORM, NN
};
static const char *const names[NN] = {
    "numerics.loss",          "numerics.loss_nonfinite",
    "numerics.grad_norm",     "numerics.grad_nonfinite",
    "numerics.param_nonfinite", "numerics.origin_dir",
    "numerics.origin_index",  "numerics.origin_ns",
    "numerics.module_nonfinite", "numerics.param_grad_nonfinite",
    "numerics.param_grad_norm"};

static const char *const modules[3] = {"(Net)", "embed", "blocks.0.fc1"};
static const char *const params[2] = {"embed.weight", "blocks.0.fc1.bias"};
static const double zeros[3] = {0, 0, 0};

typedef struct {
    double metric[W][NN];
    int64_t none[W][NN];
    ss_values_item items[W][3];
    double norms[W][2];
    ss_rank_step ranks[W];
    ss_step_view v;
} builder;

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A clean step: every rank sends light metrics with a little noise, and
 * with FULL the two labelled vectors. */
static void begin(builder *b, uint64_t step, int full)
{
    memset(b, 0, sizeof *b);
    b->v.step = step;
    b->v.world_size = W;
    b->v.n_present = W;
    b->v.n_names = NN;
    b->v.ranks = b->ranks;
    for (int r = 0; r < W; r++) {
        for (int i = 0; i < NN; i++) {
            b->metric[r][i] = NAN;
            b->none[r][i] = SS_MISSING;
        }
        b->metric[r][LOSS] = 2.0 - 0.005 * (double)step + 0.1 * uniform();
        b->metric[r][LOSS_NF] = 0;
        b->metric[r][GRAD] = 1.0 + 0.2 * uniform();
        b->metric[r][GRAD_NF] = 0;
        b->metric[r][PARAM_NF] = 0;
        ss_rank_step *rs = &b->ranks[r];
        rs->present = 1;
        rs->step_ns = 10000000;
        rs->rss_bytes = rs->device_bytes = SS_MISSING;
        rs->phase_ns = rs->phase_self_ns = rs->sync_arrival_ns = b->none[r];
        rs->metric = b->metric[r];
        rs->begin_ns = (int64_t)step * 20000000 + r * 1000;
        if (full) {
            b->items[r][0] = (ss_values_item){VEC_MOD, 3, 0, zeros, 3,
                                              modules};
            b->items[r][1] = (ss_values_item){VEC_PAR, 2, 0, zeros, 2,
                                              params};
            b->norms[r][0] = 0.5 + 0.1 * uniform();
            b->norms[r][1] = 0.8 + 0.1 * uniform();
            b->items[r][2] = (ss_values_item){VEC_NORM, 2, 0, b->norms[r], 2,
                                              params};
            rs->n_values = 3;
            rs->values = b->items[r];
        }
    }
}

/* Rank R's own value went non-finite (its loss and gradients), with a
 * full-mode origin when DIR is 1 or 2; the others' parameters only. */
static void poison(builder *b, int r, int dir, int index, double ns)
{
    b->metric[r][LOSS] = b->metric[r][GRAD] = NAN;
    b->metric[r][LOSS_NF] = dir == 2 ? 0 : 1;
    b->metric[r][GRAD_NF] = 6;
    if (dir) {
        b->metric[r][DIR] = dir;
        b->metric[r][INDEX] = index;
        b->metric[r][NS] = ns;
    }
    for (int k = 0; k < W; k++)
        b->metric[k][PARAM_NF] = 6;
}

static ss_detectors *run_with(found *fd, void (*edit)(builder *, uint64_t),
                              uint64_t steps, int full, const char *set,
                              const char *value)
{
    ss_detectors *d = make(W, fd);
    if (set) {
        ss_detectors_destroy(d);
        ss_detector_config cfg;
        ss_detector_config_defaults(&cfg);
        char err[200];
        CHECK(ss_detector_config_set(&cfg, set, value, err,
                                     sizeof err) == 0);
        ss_sink sink = {fd, NULL, on_finding};
        d = ss_detectors_create(&cfg, W, 0, &sink);
    }
    builder b;
    for (uint64_t s = 0; s < steps; s++) {
        begin(&b, s, full);
        if (edit)
            edit(&b, s);
        ss_detectors_step(d, &b.v, names);
    }
    ss_detectors_finish(d, names);
    return d;
}

static ss_detectors *run(found *fd, void (*edit)(builder *, uint64_t),
                         uint64_t steps, int full)
{
    return run_with(fd, edit, steps, full, NULL, NULL);
}

static void forward_in_warmup(builder *b, uint64_t s)
{
    if (s == 1)
        poison(b, 2, 1, 2, 1500000);
    if (s == 2)
        for (int r = 0; r < W; r++)
            poison(b, r, 1, 1, 100000);
}

static void nonfinite_forward_in_the_warmup(void)
{
    found fd;
    ss_detectors *d = run(&fd, forward_in_warmup, 10, 1);
    REQUIRE(count_kind(&fd, "nonfinite") == 1);
    const ss_finding *f = first_kind(&fd, "nonfinite");
    CHECK(f->severity == SS_CRITICAL);
    CHECK(f->first_step == 1);
    CHECK(f->ranks[0] == 2 && f->n_ranks == W);
    CHECK_STR(f->phase, "forward");
    CHECK(strstr(f->message, "module blocks.0.fc1") != NULL);
    CHECK(strstr(f->message, "rank 2 produced") != NULL);
    CHECK(strstr(f->message, "1.5 ms into the step") != NULL);
    CHECK(json_has(f->evidence_json, "module", "blocks.0.fc1"));
    CHECK(json_get(f->evidence_json, "step") == 1);
    CHECK(json_get(f->evidence_json, "reached_by_step") == 1);
    CHECK(json_has(f->evidence_json, "mode", "full"));
    CHECK(count_kind(&fd, "loss_spike") + count_kind(&fd, "grad_spike") == 0);
    ss_detectors_destroy(d);
}

static void backward_two_ranks(builder *b, uint64_t s)
{
    if (s == 12) {
        /* rank 3 first by the aligned clock though rank 1 is lower */
        poison(b, 1, 2, 1, 9000000);
        poison(b, 3, 2, 1, 2000000);
    }
}

static void nonfinite_backward_first_by_the_clock(void)
{
    found fd;
    ss_detectors *d = run(&fd, backward_two_ranks, 20, 1);
    REQUIRE(count_kind(&fd, "nonfinite") == 1);
    const ss_finding *f = first_kind(&fd, "nonfinite");
    CHECK(f->first_step == 12 && f->ranks[0] == 3);
    CHECK_STR(f->phase, "backward");
    CHECK(strstr(f->message, "parameter blocks.0.fc1.bias (module "
                             "blocks.0.fc1)") != NULL);
    CHECK(strstr(f->message, "first by the aligned clock") != NULL);
    CHECK(json_has(f->evidence_json, "param", "blocks.0.fc1.bias"));
    CHECK(json_get(f->evidence_json, "same_step_ranks") == 2);
    ss_detectors_destroy(d);
}

static void light_then_spread(builder *b, uint64_t s)
{
    if (s == 9) {
        b->metric[1][LOSS] = NAN;
        b->metric[1][LOSS_NF] = 1;
        b->metric[1][GRAD_NF] = 3;
        b->metric[1][PARAM_NF] = 3;
        b->metric[0][PARAM_NF] = 3; /* reached through the all-reduce */
    }
    if (s >= 10)
        for (int r = 0; r < W; r++)
            poison(b, r, 0, 0, 0);
}

static void nonfinite_light_says_what_it_knows(void)
{
    found fd;
    ss_detectors *d = run(&fd, light_then_spread, 14, 0);
    REQUIRE(count_kind(&fd, "nonfinite") == 1);
    const ss_finding *f = first_kind(&fd, "nonfinite");
    CHECK(f->first_step == 9 && f->ranks[0] == 1);
    CHECK(f->n_ranks == W && f->last_step == 10);
    CHECK(strstr(f->message, "loss and gradients went non-finite first, at "
                             "step 9") != NULL);
    CHECK(strstr(f->message, "--numerics full") != NULL);
    CHECK(strstr(f->message, "--on-nonfinite restart") != NULL);
    CHECK(json_has(f->evidence_json, "mode", "light"));
    CHECK(strstr(f->evidence_json, "\"next\":\"stepscope run --auto "
                                   "--numerics full") != NULL);
    CHECK_STR(f->phase, "");
    ss_detectors_destroy(d);
}

static void optimizer_made_it(builder *b, uint64_t s)
{
    if (s == 7)
        for (int r = 0; r < W; r++)
            b->metric[r][PARAM_NF] = 1;
}

static void nonfinite_from_the_update(void)
{
    found fd;
    ss_detectors *d = run(&fd, optimizer_made_it, 10, 0);
    const ss_finding *f = first_kind(&fd, "nonfinite");
    REQUIRE(f != NULL);
    CHECK(f->first_step == 7 && f->ranks[0] == 0);
    CHECK(strstr(f->message, "optimizer step") != NULL);
    ss_detectors_destroy(d);
}

static void spikes_on_rank_2(builder *b, uint64_t s)
{
    if (s == 40) {
        b->metric[2][LOSS] *= 20;
        b->metric[2][GRAD] *= 30;
    }
}

static void layer_jumps_on_rank_2(builder *b, uint64_t s)
{
    spikes_on_rank_2(b, s);
    if (s == 40)
        b->norms[2][1] *= 40; /* blocks.0.fc1.bias jumped */
}

static void grad_spike_names_the_layer_in_full_mode(void)
{
    found fd;
    ss_detectors *d = run(&fd, layer_jumps_on_rank_2, 60, 1);
    const ss_finding *g = first_kind(&fd, "grad_spike");
    REQUIRE(g != NULL);
    CHECK(g->first_step == 40 && g->ranks[0] == 2);
    CHECK(strstr(g->message, "jumped most: blocks.0.fc1.bias (x") != NULL);
    CHECK(strstr(g->evidence_json, "\"layers\":\"blocks.0.fc1.bias (x") !=
          NULL);
    ss_detectors_destroy(d);
}

static void loss_and_grad_spike_one_rank(void)
{
    found fd;
    ss_detectors *d = run(&fd, spikes_on_rank_2, 80, 0);
    CHECK(count_kind(&fd, "nonfinite") == 0);
    REQUIRE(count_kind(&fd, "loss_spike") == 1);
    REQUIRE(count_kind(&fd, "grad_spike") == 1);
    const ss_finding *l = first_kind(&fd, "loss_spike");
    CHECK(l->first_step == 40 && l->n_ranks == 1 && l->ranks[0] == 2);
    CHECK(json_get(l->evidence_json, "ratio") > 15);
    CHECK(json_has(l->evidence_json, "rule", "median_mad"));
    const ss_finding *g = first_kind(&fd, "grad_spike");
    CHECK(g->first_step == 40 && g->ranks[0] == 2);
    CHECK(strstr(g->message, "Gradient norm spike at step 40 on rank 2") !=
          NULL);
    ss_detectors_destroy(d);
}

/* With the MAD rule set out of reach, a value 10x the largest seen
 * before, after 100 of them (and none earlier: max_warmup). */
static void wild_then_huge(builder *b, uint64_t s)
{
    for (int r = 0; r < W; r++)
        b->metric[r][LOSS] = s % 2 ? 4.0 : 1.0;
    if (s == 50)
        b->metric[1][LOSS] = 45.0;
    if (s == 150)
        b->metric[0][LOSS] = 45.0;
}

static void spike_by_ratio_to_the_largest(void)
{
    found fd;
    ss_detectors *d = run_with(&fd, wild_then_huge, 160, 0,
                               "loss_spike.mad_k", "1000");
    if (count_kind(&fd, "loss_spike") != 1)
        dump(&fd);
    REQUIRE(count_kind(&fd, "loss_spike") == 1);
    const ss_finding *l = first_kind(&fd, "loss_spike");
    CHECK(l->first_step == 150 && l->ranks[0] == 0);
    CHECK(json_has(l->evidence_json, "rule", "max_ratio"));
    ss_detectors_destroy(d);
}

/* Noisy, trending series (loss falling, then small and varying by
 * factors from batch to batch; gradient norm rising slowly, a few 1.5x
 * blips) make no numerics finding. */
static void noisy(builder *b, uint64_t s)
{
    for (int r = 0; r < W; r++) {
        b->metric[r][LOSS] = 3.0 * exp(-(double)s / 150) + 0.3 * uniform();
        if (s > 200) /* a small loss that varies by factors per batch */
            b->metric[r][LOSS] = 0.05 * exp(3.0 * (uniform() - 0.5));
        b->metric[r][GRAD] = 0.5 + (double)s / 200 + 0.3 * uniform();
        if (uniform() < 0.03)
            b->metric[r][GRAD] *= 1.5;
    }
}

static void clean_noisy_run_has_none(void)
{
    found fd;
    ss_detectors *d = run(&fd, noisy, 400, 1);
    CHECK(count_kind(&fd, "nonfinite") == 0);
    CHECK(count_kind(&fd, "loss_spike") == 0);
    CHECK(count_kind(&fd, "grad_spike") == 0);
    ss_detectors_destroy(d);
}

TEST_LIST(TEST(nonfinite_forward_in_the_warmup),
          TEST(nonfinite_backward_first_by_the_clock),
          TEST(nonfinite_light_says_what_it_knows),
          TEST(nonfinite_from_the_update),
          TEST(loss_and_grad_spike_one_rank),
          TEST(grad_spike_names_the_layer_in_full_mode),
          TEST(spike_by_ratio_to_the_largest),
          TEST(clean_noisy_run_has_none))
