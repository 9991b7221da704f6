/*
 * detect_rl.c - the reinforcement-learning detector: rollout_long_tail,
 * reward_collapse, kl_spike and entropy_collapse, for GRPO-style
 * post-training (docs/rl.md).
 *
 * Ranks send their batch through the vector channel
 * (python/stepscope/_rl.py): per step rl.reward, rl.length (tokens) and
 * optionally rl.advantage, one entry per completion in group order, and
 * the metric rl.group_size; the trainer's own statistics come as metrics
 * under TRL's names (kl, entropy, ...), and generation as the phase
 * "rollout".  From them, per step:
 *
 * - the batch statistics of each rank and of all ranks together
 *   (rl_stats): reward mean and std, the groups whose rewards are all
 *   equal, advantage mean and std, completion length mean and max and the
 *   share of the tokens in the longest LONG_SHARE of the completions;
 *
 * - rollout_long_tail: the rank whose rollout phase is the longest is a
 *   long tail in the step when it is LT_MIN_MS longer and LT_FACTOR times
 *   the median of the other ranks' rollout, and its longest completion is
 *   the longest of all and LT_LEN_FACTOR times the median of the others'
 *   longest; a warning finding per rank once it holds LT_MIN_STEPS such
 *   steps among the last LT_WINDOW, naming the rank, its longest
 *   completion, the others', and the time the other ranks waited (per
 *   step: the sum over them of the slow rank's rollout less theirs);
 *
 * - reward_collapse: over the last RC_WINDOW steps with a batch (at least
 *   RC_MIN_STEPS of them), at least RC_FRAC of all ranks' groups had
 *   rewards all equal: their advantage is zero and the policy learns
 *   nothing from them.  One finding per episode, which ends when the
 *   window's share falls below it; it begins at the first of the steps
 *   over the share in a row up to the one that opened it; a share back
 *   over the line within RC_MERGE steps of an episode's last step goes on
 *   with that episode's finding;
 *
 * - kl_spike and entropy_collapse: each rank's kl (entropy) judged against
 *   its last SP_WINDOW values, the robust rule of detect_spike.c on
 *   logarithms: more than SP_MAD_K robust sigmas (1.4826 x MAD; 1.2533 x
 *   the mean absolute deviation when the MAD is 0) above (below) the
 *   median, and at least KL_FACTOR times it (at most 1/ENT_FACTOR of it),
 *   with kl at least KL_MIN_NATS.  The policy is shared, so a real jump
 *   shows on at least half the ranks in one step, on some of them by less
 *   (leaning: out of line the same way by half the sigmas and half the
 *   factor); one rank's value out of line, the others in line (an odd
 *   batch), counts only after SP_PERSIST steps in a row, the finding
 *   beginning at the first of them.  Ranks in one step make one
 *   finding, extended by those within SP_MERGE steps.
 *
 * Memory: per rank, LT_WINDOW long-tail records' worth of counters and
 * SP_WINDOW floats per series; batch statistics are computed on the
 * step's vectors in place.  Nothing is allocated until a step carries
 * RL data.
 */
#include "detect_rl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "detectors_internal.h"
#include "stats.h"

#define LT_MIN_MS 5.0      /* a long tail's rollout exceeds the others' */
#define LT_FACTOR 1.5      /* median by this much and this factor of it */
#define LT_LEN_FACTOR 2.0  /* its longest completion vs the others' median */
#define LT_WINDOW 20       /* steps a rank's long-tail steps count over */
#define LT_MIN_STEPS 5     /* long-tail steps in the window for a finding */
#define RC_WINDOW 10       /* steps with a batch reward_collapse looks at */
#define RC_MIN_STEPS 5
#define RC_FRAC 0.9        /* share of zero-variance groups over the window */
#define RC_MERGE (2 * RC_WINDOW) /* steps after an episode's last that
                                     reopen it (the share needs most of a
                                     window to cross the line again) */
#define SP_WINDOW 20       /* kl / entropy values judged against */
#define SP_MIN_SAMPLES 8
#define SP_MAD_K 6.0
#define SP_MERGE 10        /* steps that merge spikes into one finding */
#define SP_PERSIST 3       /* steps in a row one rank alone needs */
#define SP_LEAN 2.0        /* a rank leans the same way: half the robust
                              sigmas and half the factor of a spike */
#define KL_FACTOR 5.0
#define KL_MIN_NATS 0.02
#define ENT_FACTOR 3.0
#define LONG_SHARE 0.1     /* the longest completions, a share of a batch */
#define MAX_BATCH 1024     /* a vector's entries (the recorder's cap) */

enum { V_REWARD, V_LENGTH, V_ADV, N_VEC };
static const char *const vec_names[N_VEC] = {"rl.reward", "rl.length",
                                             "rl.advantage"};
enum { S_KL, S_ENT, N_SERIES };
static const char *const series_names[N_SERIES] = {"kl", "entropy"};
static const char *const series_kinds[N_SERIES] = {"kl_spike",
                                                   "entropy_collapse"};

/* The batch statistics of one rank's step, or of all ranks' (docs/rl.md). */
typedef struct {
    uint32_t n;                 /* completions */
    uint32_t groups, zero_groups;
    double reward_mean, reward_std, reward_min, reward_max;
    double adv_mean, adv_std;   /* NaN without advantages */
    double len_mean, len_max;
    double long_share;          /* tokens in the longest LONG_SHARE */
} rl_stats;

/* A rank's long-tail steps among its last LT_WINDOW. */
typedef struct {
    uint64_t step[LT_WINDOW];   /* UINT64_MAX: no long tail there */
    uint32_t head;
    int32_t finding;            /* -1: none */
    uint64_t first, last;       /* the finding's long-tail steps */
    uint32_t steps;
    double longest, others_longest, late_ms, waited_ms, waited_total_ms;
    double mean_len, long_share; /* its batch in the latest step */
    uint32_t n_others;          /* ranks that waited, latest step */
} tail_state;

typedef struct {
    float ring[SP_WINDOW];
    uint32_t n, head;
    uint32_t run;        /* steps in a row judged out of line */
    uint64_t since;      /* the first of them */
    int hit;             /* this step's judgement, with its numbers: */
    int lean;            /* out of line the same way, by half as much */
    double x, med, z;
} series;

typedef struct {
    int32_t finding;
    uint64_t first, last, peak_step;
    uint32_t spikes;
    int32_t ranks[SS_FINDING_MAX_RANKS];
    uint32_t n_ranks;
    int32_t peak_rank;
    double value, median, ratio, z;
} spike_episode;

typedef struct {
    uint32_t world;
    int vec[N_VEC], met[N_SERIES], group, rollout;
    uint32_t n_classified;
    int started;
    tail_state *tail;           /* world */
    series *s[N_SERIES];        /* world each */
    spike_episode ep[N_SERIES];
    /* reward_collapse: the last RC_WINDOW steps with a batch */
    uint32_t rc_groups[RC_WINDOW], rc_zero[RC_WINDOW], rc_n, rc_head;
    double rc_min[RC_WINDOW], rc_max[RC_WINDOW];
    int32_t rc_finding;         /* the open episode's, -1 */
    int32_t rc_prev;            /* the last episode's finding, -1 */
    uint64_t rc_first, rc_last;
    uint64_t rc_streak;         /* first step of the latest run of steps
                                   each over RC_FRAC; UINT64_MAX: none */
    double rc_worst;
    double *scratch;            /* MAX_BATCH-sized, and world */
    double *roll, *lens;        /* world each */
    rl_stats *per;              /* world: this step's, n == 0 without */
} rl_state;

/* ---- batch statistics ---- */

static const ss_values_item *item(const rl_state *g, const ss_rank_step *rs,
                                  int v)
{
    for (uint32_t i = 0; g->vec[v] >= 0 && rs->values && i < rs->n_values;
         i++)
        if (rs->values[i].name == g->vec[v])
            return &rs->values[i];
    return NULL;
}

/* Running sums of one or more ranks' batches. */
typedef struct {
    double r_sum, r_sq, a_sum, a_sq, l_sum, l_max, r_min, r_max;
    uint32_t n, n_adv, groups, zero;
} stats_sums;

/* Adds one rank's batch (its reward, length and advantage vectors RW, LN,
 * AD, the last one optional; GROUP completions a group, whole groups
 * only) to S; stats_finish turns the sums into statistics. */
static void stats_add(stats_sums *s, const ss_values_item *rw,
                      const ss_values_item *ln, const ss_values_item *ad,
                      uint32_t group)
{
    uint32_t n = rw->n < ln->n ? rw->n : ln->n;
    if (group == 0)
        group = 1;
    n -= n % group;
    if (s->n == 0) {
        s->r_min = INFINITY;
        s->r_max = -INFINITY;
    }
    for (uint32_t i = 0; i < n; i++) {
        double r = rw->v[i], l = ln->v[i];
        s->r_sum += r;
        s->r_sq += r * r;
        s->l_sum += l;
        if (l > s->l_max)
            s->l_max = l;
        if (r < s->r_min)
            s->r_min = r;
        if (r > s->r_max)
            s->r_max = r;
    }
    for (uint32_t i = 0; ad && i < n && i < ad->n; i++) {
        s->a_sum += ad->v[i];
        s->a_sq += ad->v[i] * ad->v[i];
        s->n_adv++;
    }
    for (uint32_t g = 0; g < n; g += group) {
        uint32_t k = 1;
        while (k < group && rw->v[g + k] == rw->v[g])
            k++;
        s->zero += k == group;
        s->groups++;
    }
    s->n += n;
}

static void stats_finish(const stats_sums *s, rl_stats *o)
{
    memset(o, 0, sizeof *o);
    o->n = s->n;
    o->groups = s->groups;
    o->zero_groups = s->zero;
    if (!s->n)
        return;
    o->reward_mean = s->r_sum / s->n;
    o->reward_std = sqrt(fmax(0, s->r_sq / s->n - o->reward_mean *
                                                      o->reward_mean));
    o->reward_min = s->r_min;
    o->reward_max = s->r_max;
    o->adv_mean = s->n_adv ? s->a_sum / s->n_adv : NAN;
    o->adv_std = s->n_adv ? sqrt(fmax(0, s->a_sq / s->n_adv -
                                             o->adv_mean * o->adv_mean))
                          : NAN;
    o->len_mean = s->l_sum / s->n;
    o->len_max = s->l_max;
}

/* The share of LN's tokens in its longest LONG_SHARE completions. */
static double long_share(rl_state *g, const ss_values_item *ln)
{
    uint32_t n = ln->n < MAX_BATCH ? ln->n : MAX_BATCH;
    double total = 0;
    for (uint32_t i = 0; i < n; i++) {
        g->scratch[i] = ln->v[i];
        total += ln->v[i];
    }
    uint32_t k = (uint32_t)ceil(LONG_SHARE * n);
    if (!n || total <= 0)
        return NAN;
    double thr = ss_select_f64(g->scratch, n, n - k), top = 0;
    uint32_t above = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ln->v[i] > thr) {
            top += ln->v[i];
            above++;
        }
    return (top + (k - above) * thr) / total;
}

/* Rank RS's statistics in OUT; 0 when it sent no batch. */
static int rank_stats(rl_state *g, const ss_rank_step *rs, rl_stats *out,
                      stats_sums *all)
{
    const ss_values_item *rw = item(g, rs, V_REWARD),
                         *ln = item(g, rs, V_LENGTH),
                         *ad = item(g, rs, V_ADV);
    if (!rs->present || !rw || !ln)
        return 0;
    double gs = g->group >= 0 && rs->metric ? rs->metric[g->group] : NAN;
    uint32_t group = isfinite(gs) && gs >= 1 ? (uint32_t)gs : 1;
    stats_sums s = {0};
    stats_add(&s, rw, ln, ad, group);
    stats_add(all, rw, ln, ad, group);
    stats_finish(&s, out);
    out->long_share = long_share(g, ln);
    return out->n > 0;
}

/* ---- rollout_long_tail ---- */

static void tail_describe(ss_detectors *d, tail_state *t, uint32_t r,
                          uint32_t in_window)
{
    ss_finding *f = ss__finding(d, t->finding);
    int32_t rank = (int32_t)r;
    ss__set_ranks(f, &rank, 1);
    f->first_step = t->first;
    f->last_step = t->last;
    snprintf(f->phase, sizeof f->phase, "rollout");
    char a[32], b[32], c[32];
    char others[40];
    if (t->n_others == 1)
        snprintf(others, sizeof others, "the other rank");
    else
        snprintf(others, sizeof others, "the %u other ranks", t->n_others);
    int one = t->n_others == 1;
    snprintf(f->message, sizeof f->message,
             "Rank %u's generation sets the pace: its rollout ran %s ms "
             "longer than %s, with its longest completion at %.0f tokens "
             "against %.0f on %s; %s waited %s ms for it in the latest "
             "step%s (%s ms over its %u long-tail steps, %u of the last %u).",
             r, ss__fmt_ms(a, sizeof a, t->late_ms),
             one ? "the other rank's" : "the other ranks' median",
             t->longest, t->others_longest,
             one ? "the other rank" : "the others", others,
             ss__fmt_ms(b, sizeof b, t->waited_ms), one ? "" : ", together",
             ss__fmt_ms(c, sizeof c, t->waited_total_ms), t->steps,
             in_window, LT_WINDOW);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "rank", rank);
    ss__evidence_int(ev, "step", (int64_t)t->last);
    ss__evidence_num(ev, "longest_tokens", t->longest);
    ss__evidence_num(ev, "others_longest_tokens", t->others_longest);
    ss__evidence_num(ev, "mean_tokens", round(t->mean_len * 10) / 10);
    ss__evidence_num(ev, "long_share", round(t->long_share * 1000) / 1000);
    ss__evidence_num(ev, "late_ms", round(t->late_ms * 10) / 10);
    ss__evidence_num(ev, "waited_ms_step", round(t->waited_ms * 10) / 10);
    ss__evidence_int(ev, "ranks_waiting", t->n_others);
    ss__evidence_num(ev, "waited_ms_total",
                     round(t->waited_total_ms * 10) / 10);
    ss__evidence_int(ev, "steps", t->steps);
    ss__evidence_int(ev, "steps_in_window", in_window);
    ss__evidence_int(ev, "window", LT_WINDOW);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, t->finding);
}

static uint32_t tail_count(const tail_state *t, uint64_t now)
{
    uint32_t c = 0;
    for (uint32_t i = 0; i < LT_WINDOW; i++)
        c += t->step[i] != UINT64_MAX && now - t->step[i] < LT_WINDOW;
    return c;
}

static void long_tail_step(rl_state *g, ss_detectors *d,
                           const ss_step_view *v, uint32_t world)
{
    if (g->rollout < 0)
        return;
    uint32_t n = 0;
    int32_t slow = -1;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        const ss_values_item *ln = item(g, rs, V_LENGTH);
        g->roll[r] = g->lens[r] = NAN;
        if (!rs->present || !ln || !rs->phase_ns ||
            (uint32_t)g->rollout >= v->n_names ||
            rs->phase_ns[g->rollout] == SS_MISSING)
            continue;
        double mx = 0;
        for (uint32_t i = 0; i < ln->n; i++)
            mx = fmax(mx, ln->v[i]);
        g->roll[r] = (double)rs->phase_ns[g->rollout] / 1e6;
        g->lens[r] = mx;
        if (slow < 0 || g->roll[r] > g->roll[slow])
            slow = (int32_t)r;
        n++;
    }
    if (n < 2)
        return;
    uint32_t m = 0;
    double waited = 0, mylen = g->lens[slow];
    int longest = 1;
    for (uint32_t r = 0; r < world; r++)
        if (isfinite(g->roll[r]) && (int32_t)r != slow) {
            g->scratch[m++] = g->roll[r];
            waited += g->roll[slow] - g->roll[r];
            longest = longest && mylen > g->lens[r];
        }
    double med_roll = ss_median_f64(g->scratch, m);
    m = 0;
    for (uint32_t r = 0; r < world; r++)
        if (isfinite(g->roll[r]) && (int32_t)r != slow)
            g->scratch[m++] = g->lens[r];
    double med_len = ss_median_f64(g->scratch, m);
    double late = g->roll[slow] - med_roll;
    if (!(late >= LT_MIN_MS && g->roll[slow] >= LT_FACTOR * med_roll &&
          longest && mylen >= LT_LEN_FACTOR * med_len))
        return;
    tail_state *t = &g->tail[slow];
    if (t->steps && v->step - t->last > LT_WINDOW) {
        t->finding = -1; /* the old episode ended; its finding stays */
        t->steps = 0;
    }
    if (t->steps == 0) {
        t->first = v->step;
        t->waited_total_ms = 0;
        t->longest = 0;
    }
    t->step[t->head] = v->step;
    t->head = (t->head + 1) % LT_WINDOW;
    t->steps++;
    t->last = v->step;
    t->longest = fmax(t->longest, mylen);
    t->others_longest = med_len;
    t->late_ms = late;
    t->waited_ms = waited;
    t->waited_total_ms += waited;
    t->n_others = n - 1;
    t->mean_len = g->per[slow].len_mean;
    t->long_share = g->per[slow].long_share;
    uint32_t in_window = tail_count(t, v->step);
    if (t->finding < 0) {
        if (in_window < LT_MIN_STEPS)
            return;
        t->finding = ss__finding_open(d, "rollout_long_tail");
        if (t->finding < 0)
            return;
    }
    tail_describe(d, t, (uint32_t)slow, in_window);
}

void ss__rl_straggler_words(const ss_detectors *d, uint32_t r,
                            uint64_t first, uint64_t last, char *buf,
                            size_t len)
{
    const rl_state *g = ss__detector_state(d, &ss__rl_detector);
    if (!g || !g->tail || r >= g->world)
        return;
    const tail_state *t = &g->tail[r];
    int hit = 0;
    for (uint32_t i = 0; i < LT_WINDOW && !hit; i++)
        hit = t->step[i] != UINT64_MAX && t->step[i] >= first &&
              t->step[i] <= last;
    if (!hit || t->steps == 0)
        return;
    char clause[160];
    int k = snprintf(clause, sizeof clause,
                     "; its rollouts set the pace: its longest completion "
                     "reached %.0f tokens (the other ranks' longest: %.0f)",
                     t->longest, t->others_longest);
    size_t at = strlen(buf);
    if (k > 0 && at + (size_t)k < len)
        memcpy(buf + at, clause, (size_t)k + 1);
}

/* ---- reward_collapse ---- */

static void collapse_step(rl_state *g, ss_detectors *d, const rl_stats *all,
                          const int32_t *ranks, uint32_t n_ranks,
                          uint64_t step)
{
    g->rc_groups[g->rc_head] = all->groups;
    g->rc_zero[g->rc_head] = all->zero_groups;
    g->rc_min[g->rc_head] = all->reward_min;
    g->rc_max[g->rc_head] = all->reward_max;
    g->rc_head = (g->rc_head + 1) % RC_WINDOW;
    if (g->rc_n < RC_WINDOW)
        g->rc_n++;
    if (all->zero_groups < RC_FRAC * all->groups)
        g->rc_streak = UINT64_MAX;
    else if (g->rc_streak == UINT64_MAX)
        g->rc_streak = step;
    uint64_t groups = 0, zero = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < g->rc_n; i++) {
        groups += g->rc_groups[i];
        zero += g->rc_zero[i];
        lo = fmin(lo, g->rc_min[i]);
        hi = fmax(hi, g->rc_max[i]);
    }
    double frac = groups ? (double)zero / (double)groups : 0;
    if (g->rc_n < RC_MIN_STEPS || frac < RC_FRAC) {
        if (g->rc_finding >= 0)
            g->rc_prev = g->rc_finding; /* an episode ends */
        g->rc_finding = -1;
        return;
    }
    if (g->rc_finding < 0 && g->rc_prev >= 0 &&
        step - g->rc_last <= RC_MERGE) {
        /* the share dipped under the line for a few steps: the same
         * collapse, one finding from its first step on */
        g->rc_finding = g->rc_prev;
    } else if (g->rc_finding < 0) {
        g->rc_finding = ss__finding_open(d, "reward_collapse");
        if (g->rc_finding < 0)
            return;
        /* the collapse began where the steps over the share began */
        g->rc_first = g->rc_streak != UINT64_MAX ? g->rc_streak : step;
        g->rc_worst = 0;
    }
    g->rc_last = step;
    g->rc_worst = fmax(g->rc_worst, frac);
    ss_finding *f = ss__finding(d, g->rc_finding);
    ss__set_ranks(f, ranks, n_ranks);
    f->first_step = g->rc_first;
    f->last_step = step;
    char same[96] = "";
    if (lo == hi)
        snprintf(same, sizeof same, "; every reward was %.4g (a constant "
                 "reward?)", lo);
    snprintf(f->message, sizeof f->message,
             "Reward collapse from step %" PRIu64 ": over the last %u steps "
             "%.0f %% of the groups (%" PRIu64 " of %" PRIu64 ") had rewards "
             "all equal, so their advantage is zero and the policy learns "
             "nothing from them%s.",
             g->rc_first, g->rc_n, 100 * frac, zero, groups, same);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "step", (int64_t)step);
    ss__evidence_num(ev, "frac_reward_zero_std", round(frac * 1000) / 1000);
    ss__evidence_num(ev, "worst_frac", round(g->rc_worst * 1000) / 1000);
    ss__evidence_int(ev, "groups", (int64_t)groups);
    ss__evidence_int(ev, "zero_std_groups", (int64_t)zero);
    ss__evidence_int(ev, "window", g->rc_n);
    ss__evidence_num(ev, "reward_mean", all->reward_mean);
    ss__evidence_num(ev, "reward_std", all->reward_std);
    if (isfinite(all->adv_std))
        ss__evidence_num(ev, "advantage_std", all->adv_std);
    if (lo == hi)
        ss__evidence_num(ev, "constant_reward", lo);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, g->rc_finding);
}

/* ---- kl_spike, entropy_collapse ---- */

/* Judges V against S (logarithms; V and the window positive): returns 1
 * for a spike up (K = S_KL) or a fall (S_ENT), with the median and robust
 * z; then adds V to S. */
static int judge(rl_state *g, int k, series *s, double v, double *med,
                 double *z_out, int *lean)
{
    int hit = 0;
    *lean = 0;
    int logs = v > 0;
    for (uint32_t i = 0; i < s->n && logs; i++)
        logs = s->ring[i] > 0;
    if (s->n >= SP_MIN_SAMPLES && logs) {
        for (uint32_t i = 0; i < s->n; i++)
            g->scratch[i] = log(s->ring[i]);
        double lmed, sigma = 1.4826 * ss_mad_f64(g->scratch, s->n, &lmed);
        if (sigma == 0) {
            double sum = 0;
            for (uint32_t i = 0; i < s->n; i++)
                sum += fabs(log(s->ring[i]) - lmed);
            sigma = 1.2533 * sum / s->n;
        }
        double x = log(v);
        double z = sigma > 0 ? (x - lmed) / sigma
                             : x > lmed ? INFINITY : x < lmed ? -INFINITY : 0;
        *med = exp(lmed);
        *z_out = z;
        if (k == S_KL) {
            hit = z > SP_MAD_K && v >= KL_FACTOR * *med && v >= KL_MIN_NATS;
            *lean = z > SP_MAD_K / SP_LEAN &&
                    v >= KL_FACTOR / SP_LEAN * *med && v >= KL_MIN_NATS;
        } else {
            hit = z < -SP_MAD_K && v * ENT_FACTOR <= *med;
            *lean = z < -SP_MAD_K / SP_LEAN &&
                    v * ENT_FACTOR / SP_LEAN <= *med;
        }
    }
    s->ring[s->head] = (float)v;
    s->head = (s->head + 1) % SP_WINDOW;
    if (s->n < SP_WINDOW)
        s->n++;
    return hit;
}

static void spike_describe(ss_detectors *d, int k, spike_episode *e)
{
    ss_finding *f = ss__finding(d, e->finding);
    ss__set_ranks(f, e->ranks, e->n_ranks);
    f->first_step = e->first;
    f->last_step = e->last;
    char ranks[128], more[96] = "";
    ss__fmt_ranks(ranks, sizeof ranks, e->ranks, e->n_ranks, e->n_ranks);
    if (e->spikes > 1)
        snprintf(more, sizeof more, "; %u such steps from %" PRIu64
                 " to %" PRIu64, e->spikes, e->first, e->last);
    if (k == S_KL)
        snprintf(f->message, sizeof f->message,
                 "KL spike at step %" PRIu64 " on %s: the KL to the "
                 "reference reached %.4g on rank %d, %.3g times the median "
                 "(%.4g) of its last %u steps, %.0f robust sigmas above it: "
                 "the policy moved far from the reference at once (a "
                 "learning rate too high?)%s.",
                 e->peak_step, ranks, e->value, e->peak_rank, e->ratio,
                 e->median, SP_WINDOW, e->z, more);
    else
        snprintf(f->message, sizeof f->message,
                 "Entropy collapse at step %" PRIu64 " on %s: the policy's "
                 "entropy fell to %.4g on rank %d, 1/%.3g of the median "
                 "(%.4g) of its last %u steps, %.0f robust sigmas below it: "
                 "sampling became nearly deterministic, and exploration "
                 "stops%s.",
                 e->peak_step, ranks, e->value, e->peak_rank, e->ratio,
                 e->median, SP_WINDOW, -e->z, more);
    ss_buf *ev = &d->evidence;
    ss__evidence_begin(ev);
    ss__evidence_int(ev, "step", (int64_t)e->peak_step);
    ss__evidence_int(ev, "rank", e->peak_rank);
    ss__evidence_str(ev, "metric", series_names[k]);
    ss__evidence_num(ev, "value", e->value);
    ss__evidence_num(ev, "median", e->median);
    ss__evidence_num(ev, "ratio", round(e->ratio * 1000) / 1000);
    ss__evidence_num(ev, "robust_z", round(e->z * 10) / 10);
    ss__evidence_int(ev, "spikes", e->spikes);
    ss__evidence_int(ev, "window", SP_WINDOW);
    ss__evidence_end(ev, f);
    ss__finding_touch(d, e->finding);
}

static void series_step(rl_state *g, ss_detectors *d, int k,
                        const ss_step_view *v, uint32_t world)
{
    int idx = g->met[k];
    if (idx < 0 || (uint32_t)idx >= v->n_names)
        return;
    spike_episode *e = &g->ep[k];
    uint32_t leans = 0; /* a hit leans too */
    uint64_t since = v->step;
    for (uint32_t r = 0; r < world; r++) {
        const ss_rank_step *rs = &v->ranks[r];
        series *sr = &g->s[k][r];
        sr->hit = sr->lean = 0;
        if (!rs->present || !rs->metric || !isfinite(rs->metric[idx]))
            continue;
        sr->x = rs->metric[idx];
        sr->hit = judge(g, k, sr, sr->x, &sr->med, &sr->z, &sr->lean);
        leans += sr->lean;
        if (!sr->hit) {
            sr->run = 0;
            continue;
        }
        if (sr->run++ == 0)
            sr->since = v->step;
    }
    /* The policy is one for every rank: a real jump shows on half the
     * ranks at once, on some of them by less (each rank's batch differs);
     * one rank's value out of line, the others in line, counts once it
     * stays so for SP_PERSIST steps (one odd batch is not a collapse). */
    uint32_t quorum = (world + 1) / 2;
    int any = 0;
    for (uint32_t r = 0; r < world; r++) {
        series *sr = &g->s[k][r];
        if (!sr->hit || (leans < quorum && sr->run < SP_PERSIST))
            continue;
        if (sr->since < since)
            since = sr->since;
        double x = sr->x, med = sr->med, z = sr->z;
        if (!any) {
            if (e->finding < 0 || v->step - e->last > SP_MERGE) {
                int32_t f = ss__finding_open(d, series_kinds[k]);
                if (f < 0)
                    return;
                memset(e, 0, sizeof *e);
                e->finding = f;
                e->first = v->step;
                e->ratio = -1;
            }
            e->spikes++;
            e->last = v->step;
            any = 1;
        }
        uint32_t i = 0;
        while (i < e->n_ranks && e->ranks[i] != (int32_t)r)
            i++;
        if (i == e->n_ranks && e->n_ranks < SS_FINDING_MAX_RANKS)
            e->ranks[e->n_ranks++] = (int32_t)r;
        double ratio = k == S_KL ? x / med : med / x;
        if (ratio > e->ratio) {
            e->ratio = ratio;
            e->value = x;
            e->median = med;
            e->z = z;
            e->peak_rank = (int32_t)r;
            e->peak_step = v->step;
        }
    }
    if (any) {
        if (e->spikes == 1 && since < e->first)
            e->first = since;
        spike_describe(d, k, e);
    }
}

/* ---- the ss__detector hooks ---- */

static int start(rl_state *g)
{
    g->tail = ss__zalloc(g->world, sizeof *g->tail);
    g->scratch = ss__zalloc(MAX_BATCH + g->world, sizeof *g->scratch);
    g->roll = ss__zalloc(g->world, sizeof *g->roll);
    g->lens = ss__zalloc(g->world, sizeof *g->lens);
    g->per = ss__zalloc(g->world, sizeof *g->per);
    int ok = g->tail && g->scratch && g->roll && g->lens && g->per;
    for (int k = 0; k < N_SERIES; k++) {
        g->s[k] = ss__zalloc(g->world, sizeof *g->s[k]);
        ok = ok && g->s[k];
    }
    if (!ok)
        return -1;
    for (uint32_t r = 0; r < g->world; r++) {
        g->tail[r].finding = -1;
        for (uint32_t i = 0; i < LT_WINDOW; i++)
            g->tail[r].step[i] = UINT64_MAX;
    }
    g->started = 1;
    return 0;
}

static void rl_destroy(void *state)
{
    rl_state *g = state;
    free(g->tail);
    free(g->scratch);
    free(g->roll);
    free(g->lens);
    free(g->per);
    for (int k = 0; k < N_SERIES; k++)
        free(g->s[k]);
    free(g);
}

static void *rl_create(ss_detectors *d)
{
    rl_state *g = ss__zalloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->world = d->world;
    for (int v = 0; v < N_VEC; v++)
        g->vec[v] = -1;
    for (int k = 0; k < N_SERIES; k++) {
        g->met[k] = -1;
        g->ep[k].finding = -1;
    }
    g->group = g->rollout = -1;
    g->rc_finding = g->rc_prev = -1;
    g->rc_streak = UINT64_MAX;
    return g;
}

static void rl_names(void *state, ss_detectors *d, uint32_t n_names,
                     const char *const *names)
{
    rl_state *g = state;
    (void)d;
    for (uint32_t i = g->n_classified; names && i < n_names; i++) {
        if (!names[i])
            continue;
        for (int v = 0; v < N_VEC; v++)
            if (strcmp(names[i], vec_names[v]) == 0)
                g->vec[v] = (int)i;
        for (int k = 0; k < N_SERIES; k++)
            if (strcmp(names[i], series_names[k]) == 0)
                g->met[k] = (int)i;
        if (strcmp(names[i], "rl.group_size") == 0)
            g->group = (int)i;
        if (strcmp(names[i], "rollout") == 0)
            g->rollout = (int)i;
    }
    if (n_names > g->n_classified)
        g->n_classified = n_names;
}

static void rl_step(void *state, ss_detectors *d, const ss_step_view *v,
                    uint32_t world)
{
    rl_state *g = state;
    int have_batch = g->vec[V_REWARD] >= 0 && g->vec[V_LENGTH] >= 0;
    if (!have_batch && g->met[S_KL] < 0 && g->met[S_ENT] < 0)
        return;
    if (!g->started && start(g) < 0)
        return;
    if (world > g->world)
        world = g->world;
    if (have_batch) {
        stats_sums sums = {0};
        rl_stats all;
        int32_t ranks[SS_FINDING_MAX_RANKS];
        uint32_t n_ranks = 0;
        for (uint32_t r = 0; r < world; r++) {
            memset(&g->per[r], 0, sizeof g->per[r]);
            if (rank_stats(g, &v->ranks[r], &g->per[r], &sums) &&
                n_ranks < SS_FINDING_MAX_RANKS)
                ranks[n_ranks++] = (int32_t)r;
        }
        stats_finish(&sums, &all);
        if (all.groups)
            collapse_step(g, d, &all, ranks, n_ranks, v->step);
        long_tail_step(g, d, v, world);
    }
    for (int k = 0; k < N_SERIES; k++)
        series_step(g, d, k, v, world);
}

const ss__detector ss__rl_detector = {
    .name = "rl",
    .create = rl_create,
    .on_names = rl_names,
    .on_step = rl_step,
    .on_end = NULL,
    .destroy = rl_destroy,
};
