/*
 * bench_aggregate.c - aggregation throughput and window memory, without
 * sockets or storage.
 *
 * Synthetic step records (ss_step_record: 4 phases, 1 sync point, RSS)
 * for R ranks go straight into ss_aggregator_add with a sink that does
 * nothing, so the figure is the cost of the watermark, the per-step order statistics and
 * the detectors on one core.  Two arrival patterns: lockstep (every rank
 * reports step s before any reports s+1) and staggered (each rank runs a
 * fixed 0-3 steps ahead of the slowest, so several steps are open at once).
 * Then it reports bytes_in_use for 4096 ranks, in lockstep and with one
 * rank a whole window behind (the worst case the window allows).
 *
 *   bench_aggregate [--ranks R] [--steps S] [--window W]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregator.h"

#define MS 1000000LL

static const char *const k_names[5] = {"data", "forward", "backward",
                                       "optimizer", "allreduce"};

typedef struct {
    ss_aggregator *agg;
    int ids[5];
    ss_step_record rec;
    uint64_t seed;
} bench;

static void on_step(void *ctx, const ss_step_view *v, const char *const *n)
{
    (void)ctx;
    (void)v;
    (void)n;
}

static void on_finding(void *ctx, const ss_finding *f)
{
    (void)ctx;
    (void)f;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t next_rand(bench *b)
{
    b->seed = b->seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(b->seed >> 33);
}

static int bench_open(bench *b, uint32_t ranks, uint32_t window)
{
    memset(b, 0, sizeof *b);
    b->seed = 42;
    ss_aggregator_config cfg;
    ss_aggregator_config_defaults(&cfg);
    if (window)
        cfg.window_steps = window;
    ss_sink sink = {NULL, on_step, on_finding};
    b->agg = ss_aggregator_create(&cfg, ranks, 0, &sink);
    if (!b->agg)
        return -1;
    for (int i = 0; i < 5; i++)
        b->ids[i] = ss_aggregator_intern(b->agg, k_names[i]);
    /* the record is reused: only the fields below change per record */
    b->rec.n_phases = 4;
    b->rec.n_syncs = 1;
    b->rec.device_bytes = SS_MISSING;
    for (int i = 0; i < 4; i++) {
        b->rec.phases[i].name = b->ids[i];
        b->rec.phases[i].count = 1;
        b->rec.phases[i].self_ns = SS_MISSING;
    }
    b->rec.syncs[0].name = b->ids[4];
    return 0;
}

/* Sends RANK's record for STEP: ~100 ms steps with a little noise. */
static void send(bench *b, uint32_t rank, uint64_t step)
{
    ss_step_record *r = &b->rec;
    int64_t noise = (int64_t)(next_rand(b) % 2000) * 1000; /* < 2 ms */
    r->step = step;
    r->begin_ns = (int64_t)step * 100 * MS;
    r->phases[0].total_ns = 2 * MS + noise / 4;
    r->phases[1].total_ns = 30 * MS + noise;
    r->phases[2].total_ns = 40 * MS + noise;
    r->phases[3].total_ns = 5 * MS;
    r->syncs[0].arrival_ns = r->begin_ns + 72 * MS + noise;
    r->end_ns = r->begin_ns + 95 * MS + noise / 8;
    r->rss_bytes = (1ll << 31) + (int64_t)(next_rand(b) % 4096) * 1024;
    ss_aggregator_add(b->agg, rank, r);
}

static void report(const char *what, uint32_t ranks, uint64_t steps,
                   double secs, const ss_aggregator *agg)
{
    ss_aggregator_stats st;
    ss_aggregator_get_stats(agg, &st);
    double n = (double)st.records;
    printf("%-10s %u ranks x %" PRIu64 " steps: %.0f records in %.2f s = "
           "%.2f M records/s (%.1f us per step; finalized %" PRIu64
           ", forced %" PRIu64 ", refused %" PRIu64 ")\n",
           what, ranks, steps, n, secs, n / secs / 1e6,
           secs / (double)steps * 1e6, st.finalized_steps, st.forced_steps,
           st.refused);
}

static int run_throughput(uint32_t ranks, uint64_t steps, uint32_t window)
{
    bench b;
    if (bench_open(&b, ranks, window) < 0)
        return -1;
    double t0 = now_s();
    for (uint64_t s = 0; s < steps; s++)
        for (uint32_t r = 0; r < ranks; r++)
            send(&b, r, s);
    ss_aggregator_finish(b.agg);
    report("lockstep", ranks, steps, now_s() - t0, b.agg);
    ss_aggregator_destroy(b.agg);

    if (bench_open(&b, ranks, window) < 0)
        return -1;
    uint8_t *lead = malloc(ranks);
    if (!lead) {
        ss_aggregator_destroy(b.agg);
        return -1;
    }
    for (uint32_t r = 0; r < ranks; r++)
        lead[r] = (uint8_t)(next_rand(&b) % 4);
    t0 = now_s();
    for (uint64_t t = 0; t < steps + 3; t++)
        for (uint32_t r = 0; r < ranks; r++) {
            /* rank r is lead[r] steps ahead of the slowest rank */
            uint64_t s = t + lead[r];
            if (s >= 3 && s - 3 < steps)
                send(&b, r, s - 3);
        }
    ss_aggregator_finish(b.agg);
    report("staggered", ranks, steps, now_s() - t0, b.agg);
    free(lead);
    ss_aggregator_destroy(b.agg);
    return 0;
}

static int run_memory(uint32_t ranks, uint32_t window)
{
    for (int laggard = 0; laggard < 2; laggard++) {
        bench b;
        if (bench_open(&b, ranks, window) < 0)
            return -1;
        ss_aggregator_stats st;
        ss_aggregator_get_stats(b.agg, &st);
        uint64_t peak = st.bytes_in_use;
        uint64_t steps = (uint64_t)window * 2;
        for (uint64_t s = 0; s < steps; s++) {
            for (uint32_t r = laggard ? 1 : 0; r < ranks; r++)
                send(&b, r, s);
            ss_aggregator_get_stats(b.agg, &st);
            if (st.bytes_in_use > peak)
                peak = st.bytes_in_use;
        }
        double per = (double)peak / ((double)ranks * (laggard ? window : 1));
        printf("memory     %u ranks, window %u, %s: peak bytes_in_use %.1f "
               "MiB (%.0f bytes per %s)\n",
               ranks, window,
               laggard ? "one rank a window behind" : "lockstep",
               (double)peak / (1024.0 * 1024.0), per,
               laggard ? "rank-step held" : "rank");
        ss_aggregator_destroy(b.agg);
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t ranks = 1024, window = 64;
    uint64_t steps = 1000;
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'r'},
        {"steps", required_argument, NULL, 's'},
        {"window", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "r:s:w:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': ranks = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 's': steps = strtoull(optarg, NULL, 10); break;
        case 'w': window = (uint32_t)strtoul(optarg, NULL, 10); break;
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: bench_aggregate [--ranks R] [--steps S] "
                    "[--window W]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (ranks == 0 || steps == 0 || window < 2) {
        fprintf(stderr, "bench_aggregate: ranks, steps > 0, window >= 2\n");
        return 2;
    }
    if (run_throughput(ranks, steps, window) < 0 ||
        run_memory(4096, window) < 0) {
        fprintf(stderr, "bench_aggregate: out of memory\n");
        return 1;
    }
    return 0;
}
