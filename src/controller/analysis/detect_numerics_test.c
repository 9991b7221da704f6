/*
 * detect_numerics_test.c - unit tests for detect_nonfinite.c and
 * detect_spike.c on synthetic step views carrying auto mode's numerics
 * metrics and vectors: the first rank, step, module or parameter and
 * direction of a non-finite value (in the warm-up too), the first of two
 * ranks by the aligned clock, light mode's words and command, the ranks it
 * spread to; loss and gradient-norm spikes on one rank by median and MAD
 * and by the ratio to the largest value; clean noisy runs give none.
 * The runs are the rows of one table (scenarios[]): the change to the
 * clean steps, the mode, and the findings expected, run by one loop that
 * names the failing row.
 */
#include "detectors.h"

#include <math.h>
#include <string.h>

#include "finding_want.h"
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
 * full-mode origin when DIR is not 0 (numerics.origin_dir); the others'
 * parameters only. */
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

static void forward_in_warmup(builder *b, uint64_t s)
{
    if (s == 1)
        poison(b, 2, 1, 2, 1500000);
    if (s == 2)
        for (int r = 0; r < W; r++)
            poison(b, r, 1, 1, 100000);
}

static void backward_two_ranks(builder *b, uint64_t s)
{
    if (s == 12) {
        /* rank 3 first by the aligned clock though rank 1 is lower */
        poison(b, 1, 2, 1, 9000000);
        poison(b, 3, 2, 1, 2000000);
    }
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

static void optimizer_made_it(builder *b, uint64_t s)
{
    if (s == 7)
        for (int r = 0; r < W; r++)
            b->metric[r][PARAM_NF] = 1;
}

/* Full mode: rank 0's model was handed a NaN (module 0, the root, took it
 * in); no module made one. */
static void input_on_rank_0(builder *b, uint64_t s)
{
    if (s == 5)
        poison(b, 0, 3, 0, 300000);
}

/* Full mode: rank 3's loss went NaN outside the modules (no index). */
static void loss_on_rank_3(builder *b, uint64_t s)
{
    if (s == 7) {
        poison(b, 3, 4, 0, 4200000);
        b->metric[3][INDEX] = NAN;
    }
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

/* A loss that converged near 0 (from 2, by factors per batch), rank 1
 * jumping 60x its median at step 300 (to about a fortieth of its first
 * level), and at step 340 to half that level. */
static void converged_then_jumps(builder *b, uint64_t s)
{
    for (int r = 0; r < W; r++)
        b->metric[r][LOSS] = (2.0 * exp(-(double)s / 25) + 0.001) *
                             exp(0.6 * (uniform() - 0.5));
    if (s == 300)
        b->metric[1][LOSS] = 0.06;
    if (s == 340)
        b->metric[1][LOSS] = 1.0;
}

/* ---- the table ---- */

typedef struct {
    const char *name;
    void (*edit)(builder *, uint64_t);
    uint64_t steps;
    int full;                /* --numerics full: the vectors too */
    const char *set, *value; /* a detector setting, or NULL */
    finding_want findings[3];
} scenario;

/* In the order they ran as functions: the noise draws go on from one to
 * the next. */
static const scenario scenarios[] = {
    {.name = "a non-finite forward in the warm-up",
     .edit = forward_in_warmup,
     .steps = 10,
     .full = 1,
     .findings = {{.kind = "nonfinite",
                   .count = WANT(1),
                   .severity = WANT(SS_CRITICAL),
                   .first_step = WANT(1),
                   .rank = WANT(2),
                   .n_ranks = WANT(W),
                   .phase = "forward",
                   .message = {"module blocks.0.fc1", "rank 2 produced",
                               "1.5 ms into the step"},
                   .has = {{"module", "blocks.0.fc1"}, {"mode", "full"}},
                   .num = {{"step", EV_EQUALS, 1, 0},
                           {"reached_by_step", EV_EQUALS, 1, 0}}},
                  {.kind = "loss_spike", .count = WANT(0)},
                  {.kind = "grad_spike", .count = WANT(0)}}},
    {.name = "a non-finite backward, first by the clock",
     .edit = backward_two_ranks,
     .steps = 20,
     .full = 1,
     .findings = {{.kind = "nonfinite",
                   .count = WANT(1),
                   .first_step = WANT(12),
                   .rank = WANT(3),
                   .phase = "backward",
                   .message = {"parameter blocks.0.fc1.bias (module "
                               "blocks.0.fc1)",
                               "first by the aligned clock"},
                   .has = {{"param", "blocks.0.fc1.bias"}},
                   .num = {{"same_step_ranks", EV_EQUALS, 2, 0}}}}},
    {.name = "light mode says what it knows",
     .edit = light_then_spread,
     .steps = 14,
     .findings = {{.kind = "nonfinite",
                   .count = WANT(1),
                   .first_step = WANT(9),
                   .rank = WANT(1),
                   .n_ranks = WANT(W),
                   .last_step = WANT(10),
                   .phase = "",
                   .message = {"loss and gradients went non-finite first, "
                               "at step 9",
                               "--numerics full", "--on-nonfinite restart"},
                   .has = {{"mode", "light"}},
                   .evidence = {"\"next\":\"stepscope run --auto "
                                "--numerics full"}}}},
    {.name = "a non-finite value from the update",
     .edit = optimizer_made_it,
     .steps = 10,
     .findings = {{.kind = "nonfinite",
                   .first_step = WANT(7),
                   .rank = WANT(0),
                   .message = {"optimizer step"}}}},
    {.name = "a loss and a gradient-norm spike on one rank",
     .edit = spikes_on_rank_2,
     .steps = 80,
     .findings = {{.kind = "nonfinite", .count = WANT(0)},
                  {.kind = "loss_spike",
                   .count = WANT(1),
                   .first_step = WANT(40),
                   .n_ranks = WANT(1),
                   .rank = WANT(2),
                   .has = {{"rule", "median_mad"}},
                   .num = {{"ratio", EV_OPEN, 15, INFINITY}}},
                  {.kind = "grad_spike",
                   .count = WANT(1),
                   .first_step = WANT(40),
                   .rank = WANT(2),
                   .message = {"Gradient norm spike at step 40 on rank 2"}}}},
    {.name = "a gradient-norm spike names the layer in full mode",
     .edit = layer_jumps_on_rank_2,
     .steps = 60,
     .full = 1,
     .findings = {{.kind = "grad_spike",
                   .first_step = WANT(40),
                   .rank = WANT(2),
                   .message = {"jumped most: blocks.0.fc1.bias (x"},
                   .evidence = {"\"layers\":\"blocks.0.fc1.bias (x"}}}},
    {.name = "a spike by its ratio to the largest",
     .edit = wild_then_huge,
     .steps = 160,
     .set = "loss_spike.mad_k",
     .value = "1000",
     .findings = {{.kind = "loss_spike",
                   .count = WANT(1),
                   .first_step = WANT(150),
                   .rank = WANT(0),
                   .has = {{"rule", "max_ratio"}}}}},
    {.name = "a converged loss's jump by a little of its level is none",
     .edit = converged_then_jumps,
     .steps = 380,
     .findings = {{.kind = "loss_spike",
                   .count = WANT(1),
                   .first_step = WANT(340),
                   .rank = WANT(1),
                   .has = {{"rule", "median_mad"}}}}},
    {.name = "a clean noisy run has none",
     .edit = noisy,
     .steps = 400,
     .full = 1,
     .findings = {{.kind = "nonfinite", .count = WANT(0)},
                  {.kind = "loss_spike", .count = WANT(0)},
                  {.kind = "grad_spike", .count = WANT(0)}}},
    {.name = "a non-finite input is the data's, not a module's",
     .edit = input_on_rank_0,
     .steps = 10,
     .full = 1,
     .findings = {{.kind = "nonfinite",
                   .count = WANT(1),
                   .first_step = WANT(5),
                   .rank = WANT(0),
                   .phase = "",
                   .message = {"rank 0 handed a non-finite value to "
                               "module (Net) at step 5 that no module had "
                               "made",
                               "0.3 ms into the step"},
                   .has = {{"direction", "input"}, {"module", "(Net)"},
                           {"mode", "full"}},
                   .num = {{"module_index", EV_EQUALS, 0, 0}}}}},
    {.name = "a non-finite loss made outside the modules",
     .edit = loss_on_rank_3,
     .steps = 10,
     .full = 1,
     .findings = {{.kind = "nonfinite",
                   .count = WANT(1),
                   .first_step = WANT(7),
                   .rank = WANT(3),
                   .phase = "",
                   .message = {"rank 3's loss went non-finite first, at "
                               "step 7, while every module's output was "
                               "finite",
                               "4.2 ms into the step"},
                   .has = {{"direction", "loss"}, {"mode", "full"}},
                   .evidence = {"\"direction\":\"loss\",\"origin_ms\""}}}},
};

static void every_scenario(void)
{
    size_t n = sizeof scenarios / sizeof scenarios[0];
    for (size_t i = 0; i < n; i++) {
        const scenario *sc = &scenarios[i];
        found fd;
        ss_detectors *d = run_with(&fd, sc->edit, sc->steps, sc->full,
                                   sc->set, sc->value);
        int failures = testing_failures_;
        for (int k = 0; k < 3; k++)
            check_finding_want(sc->name, &fd, &sc->findings[k]);
        if (testing_failures_ != failures)
            dump(&fd);
        ss_detectors_destroy(d);
    }
    printf("  %zu scenarios, %u expectations checked\n", n,
           finding_want_checked);
}

TEST_LIST(TEST(every_scenario))
