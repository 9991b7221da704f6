/*
 * run_aggregate.c - node-level aggregation on node 0 (run_aggregate.h).
 */
#include "run_aggregate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddsketch.h"
#include "node_merge.h"

#define CHECK_RING 256   /* steps remembered for the agreement check */
#define CHECK_PHASES 16

/* What one side said of a step, for the agreement check. */
typedef struct {
    int valid;
    uint64_t step;
    uint32_t present;
    int64_t min, max, p90;
    int32_t worst;
    uint32_t n_phases;
    struct {
        char name[SS_NP_NAME_MAX + 1];
        int64_t min, max;
        int32_t worst;
    } ph[CHECK_PHASES];
} step_sum;

struct run_agg {
    uint32_t world, nproc_local;
    int node_mode;
    ss_node_merge *merge;
    ss_ddsketch final_latency_ns; /* the aggregator's */
    uint64_t steps_final;
    uint64_t checked, agreed;
    char first_disagreement[200];
    step_sum by_agg[CHECK_RING], by_merge[CHECK_RING];
};

static int near(int64_t got, int64_t want)
{
    return fabs((double)got - (double)want) <=
           SS_DDS_ALPHA * fabs((double)want) + 1;
}

/* Both sides of STEP are in: do they agree? */
static void compare(run_agg *ra, const step_sum *a, const step_sum *m)
{
    char why[160] = "";
    if (a->present != m->present)
        snprintf(why, sizeof why, "%u ranks present, %u merged", a->present,
                 m->present);
    else if (a->min != m->min || a->max != m->max || a->worst != m->worst)
        snprintf(why, sizeof why, "step time min/max/slowest %" PRId64 "/%"
                 PRId64 "/%d, merged %" PRId64 "/%" PRId64 "/%d", a->min,
                 a->max, a->worst, m->min, m->max, m->worst);
    else if (!near(m->p90, a->p90))
        snprintf(why, sizeof why, "step time p90 %" PRId64 ", merged %" PRId64,
                 a->p90, m->p90);
    for (uint32_t i = 0; !why[0] && i < a->n_phases; i++) {
        const char *name = a->ph[i].name;
        uint32_t j = 0;
        while (j < m->n_phases && strcmp(m->ph[j].name, name) != 0)
            j++;
        if (j == m->n_phases)
            snprintf(why, sizeof why, "phase %s not merged", name);
        else if (a->ph[i].min != m->ph[j].min ||
                 a->ph[i].max != m->ph[j].max ||
                 a->ph[i].worst != m->ph[j].worst)
            snprintf(why, sizeof why, "phase %s min/max/slowest differ", name);
    }
    ra->checked++;
    if (!why[0])
        ra->agreed++;
    else if (!ra->first_disagreement[0])
        snprintf(ra->first_disagreement, sizeof ra->first_disagreement,
                 "step %" PRIu64 ": %s", a->step, why);
}

/* SIDE's summary of its step is in: compared when the other side's is. */
static void arrived(run_agg *ra, step_sum *side, step_sum *other,
                    const step_sum *s)
{
    size_t k = s->step % CHECK_RING;
    side[k] = *s;
    if (other[k].valid && other[k].step == s->step) {
        if (side == ra->by_agg)
            compare(ra, &side[k], &other[k]);
        else
            compare(ra, &other[k], &side[k]);
        side[k].valid = other[k].valid = 0;
    }
}

static void on_merged(void *ctx, const ss_node_partial *p, int complete)
{
    run_agg *ra = ctx;
    if (!complete)
        return; /* compared only when every rank is accounted for */
    step_sum s = {.valid = 1, .step = p->step, .present = p->ranks_present};
    s.min = p->step_time.min_ns;
    s.max = p->step_time.max_ns;
    s.worst = p->step_time.n_slow ? (int32_t)p->step_time.slow[0].rank : -1;
    s.p90 = (int64_t)llround(ss_dds_quantile(&p->step_time.sketch, 0.9));
    for (uint32_t i = 0; i < p->n_phases && s.n_phases < CHECK_PHASES; i++) {
        const ss_np_stat *st = &p->phases[i].stat;
        snprintf(s.ph[s.n_phases].name, sizeof s.ph[0].name, "%s",
                 p->phases[i].name);
        s.ph[s.n_phases].min = st->min_ns;
        s.ph[s.n_phases].max = st->max_ns;
        s.ph[s.n_phases].worst = st->n_slow ? (int32_t)st->slow[0].rank : -1;
        s.n_phases++;
    }
    arrived(ra, ra->by_merge, ra->by_agg, &s);
}

run_agg *run_agg_new(uint32_t world_size, uint32_t nproc_local,
                     int node_mode)
{
    run_agg *ra = calloc(1, sizeof *ra);
    if (!ra)
        return NULL;
    ra->world = world_size;
    ra->nproc_local = nproc_local;
    ra->node_mode = node_mode;
    ss_dds_init(&ra->final_latency_ns);
    if (node_mode) {
        ra->merge = ss_node_merge_new(world_size, on_merged, ra);
        if (!ra->merge) {
            free(ra);
            return NULL;
        }
    }
    return ra;
}

void run_agg_partial(run_agg *ra, const ss_node_partial *p, int64_t now_ns)
{
    if (ra && ra->merge)
        ss_node_merge_partial(ra->merge, p, now_ns);
}

void run_agg_record(run_agg *ra, uint32_t rank, const ss_step_record *rec,
                    const char *const *names, int64_t now_ns)
{
    if (!ra || !ra->merge || rank >= ra->nproc_local)
        return;
    const char *pn[SS_MAX_STEP_ITEMS];
    int64_t durs[SS_MAX_STEP_ITEMS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < rec->n_phases; i++) {
        if (rec->phases[i].name < 0)
            continue;
        pn[n] = names[rec->phases[i].name];
        durs[n++] = rec->phases[i].total_ns;
    }
    ss_node_merge_rank(ra->merge, rec->step, rank, rec->begin_ns, rec->end_ns,
                       n, pn, durs, now_ns);
}

void run_agg_step(run_agg *ra, const ss_step_view *v,
                  const char *const *names, int64_t now_ns)
{
    if (!ra)
        return;
    ra->steps_final++;
    int64_t latest = INT64_MIN;
    for (uint32_t i = 0; i < v->world_size; i++) {
        const ss_rank_step *rs = &v->ranks[i];
        if (rs->present && rs->begin_ns != SS_MISSING &&
            rs->begin_ns + rs->step_ns > latest)
            latest = rs->begin_ns + rs->step_ns;
    }
    if (latest != INT64_MIN)
        ss_dds_add(&ra->final_latency_ns, (double)(now_ns - latest));
    if (!ra->merge || v->n_missing > 0)
        return;
    step_sum s = {.valid = 1, .step = v->step, .present = v->n_present};
    s.min = v->step_time.min;
    s.max = v->step_time.max;
    s.worst = v->step_time.worst_rank;
    s.p90 = v->step_time.p90;
    for (uint32_t i = 0; i < v->n_phases && s.n_phases < CHECK_PHASES; i++) {
        const ss_phase_stat *ph = &v->phases[i];
        if (ph->stat.n == 0)
            continue;
        snprintf(s.ph[s.n_phases].name, sizeof s.ph[0].name, "%s",
                 names[ph->name]);
        s.ph[s.n_phases].min = ph->stat.min;
        s.ph[s.n_phases].max = ph->stat.max;
        s.ph[s.n_phases].worst = ph->stat.worst_rank;
        s.n_phases++;
    }
    arrived(ra, ra->by_agg, ra->by_merge, &s);
}

void run_agg_attempt(run_agg *ra)
{
    if (!ra || !ra->merge)
        return;
    ss_node_merge *m = ss_node_merge_new(ra->world, on_merged, ra);
    if (!m)
        return; /* the old one goes on */
    ss_node_merge_free(ra->merge);
    ra->merge = m;
    memset(ra->by_agg, 0, sizeof ra->by_agg);
    memset(ra->by_merge, 0, sizeof ra->by_merge);
}

void run_agg_finish(run_agg *ra, int64_t now_ns, int quiet)
{
    if (!ra)
        return;
    if (ra->merge)
        ss_node_merge_flush(ra->merge, now_ns);
    if (quiet || ra->steps_final == 0)
        return; /* the run's summary says that no step was finalized */
    fprintf(stderr, "stepscope: aggregation by %s: %" PRIu64 " steps "
            "finalized, their latest record to finalization p50 %.1f ms, "
            "p99 %.1f ms\n", ra->node_mode ? "node" : "rank",
            ra->steps_final,
            ss_dds_quantile(&ra->final_latency_ns, 0.5) / 1e6,
            ss_dds_quantile(&ra->final_latency_ns, 0.99) / 1e6);
    if (!ra->merge)
        return;
    const ss_node_merge_stats *st = ss_node_merge_get_stats(ra->merge);
    fprintf(stderr, "stepscope: node partials: %" PRIu64 " merged (and %"
            PRIu64 " local records) into %" PRIu64 " steps complete, %"
            PRIu64 " incomplete, %" PRIu64 " late; latest record to merged "
            "p50 %.1f ms, p99 %.1f ms; agree with the per-rank aggregation "
            "on %" PRIu64 " of %" PRIu64 " steps compared%s%s\n",
            st->partials, st->local_records, st->steps_complete,
            st->steps_incomplete, st->late,
            ss_dds_quantile(&st->latency_ns, 0.5) / 1e6,
            ss_dds_quantile(&st->latency_ns, 0.99) / 1e6, ra->agreed,
            ra->checked, ra->first_disagreement[0] ? "; first difference: "
                                                   : "",
            ra->first_disagreement);
}

void run_agg_free(run_agg *ra)
{
    if (!ra)
        return;
    ss_node_merge_free(ra->merge);
    free(ra);
}
