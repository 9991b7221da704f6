/*
 * store_fixture.c - the standard test store (store_fixture.h), written
 * through the store's writer so that it holds exactly what a real run
 * would leave.
 */
#include "store_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_pusher.h"
#include "testing_tmp.h"

static const char *const names_[] = {"forward", "backward", "allreduce",
                                     "loss", "act_absmax"};

/* The host evidence of rank R in STEP (store_fixture.h). */
static ss_host_step fixture_host(int r, uint64_t step)
{
    const int64_t ms = 1000000;
    ss_host_step h = {
        .cpu_ns = (80 + r) * ms,
        .runq_ns = r == 2 ? 5 * ms : 1 * ms,
        .stopped_ns = r == 2 && step % 2 ? 30 * ms : 0,
        .throttled_ns = r == 3 ? 2 * ms : 0,
        .nr_throttled = r == 3,
        .vol_switches = 10,
        .invol_switches = 2 + r,
        .major_faults = r,
        .psi_cpu_ns = 4 * ms,
        .psi_memory_ns = 0,
        .psi_io_ns = SS_MISSING,
    };
    /* ranks 0-2 on GPUs 0-2 (made-up NVML evidence), rank 3 none: GPU 2
     * held by the power cap 20 ms in odd steps; GPU 1 reports Xid 79 in
     * step 5 */
    if (r < 3)
        h.gpu = (ss_gpu_evidence){
            .present = 1, .index = r, .covered_ns = 100 * ms,
            .slowed_ns = r == 2 && step % 2 ? 20 * ms : 0,
            .power_cap_ns = r == 2 && step % 2 ? 20 * ms : 0,
            .thermal_ns = 0, .hw_slowdown_ns = SS_MISSING,
            .sm_clock_mhz = 1400 + 10 * r, .temperature_c = 60 + r,
            .ecc_new = 0, .xid_new = r == 1 && step == 5,
            .last_xid = r == 1 && step >= 5 ? 79 : 0};
    return h;
}

void ss_fixture_put_step(ss_store *s, int64_t run, uint32_t attempt,
                         uint64_t step)
{
    ss_rank_step ranks[4];
    int64_t phase_ns[4][3], self_ns[4][3], sync_ns[4][3];
    double metric[4][4];
    int metrics[1] = {3};
    ss_host_step host[4];
    double vec[4][3];
    ss_values_item values[4];
    for (int r = 0; r < 4; r++)
        host[r] = fixture_host(r, step);
    for (int r = 0; r < 4; r++) {
        metric[r][0] = metric[r][1] = metric[r][2] = NAN;
        metric[r][3] = r == 2 && step == 19 ? NAN : (double)step + 0.5 * r;
        phase_ns[r][0] = (40 + (int64_t)r) * 1000000;
        phase_ns[r][1] = 60000000;
        phase_ns[r][2] = SS_MISSING;
        /* backward holds the all-reduce wait: rank 2 computes 50 ms of
         * its 60, the others 20 */
        self_ns[r][0] = phase_ns[r][0];
        self_ns[r][1] = r == 2 ? 50000000 : 20000000;
        self_ns[r][2] = SS_MISSING;
        sync_ns[r][0] = sync_ns[r][1] = SS_MISSING;
        sync_ns[r][2] = 1000000 + r * 1000;
        ranks[r] = (ss_rank_step){
            .present = 1,
            .step_ns = (100 + (int64_t)r) * 1000000,
            .rss_bytes = ((int64_t)1 << 30) + r,
            .device_bytes = SS_MISSING,
            .phase_ns = phase_ns[r],
            .phase_self_ns = self_ns[r],
            .sync_arrival_ns = sync_ns[r],
            .metric = metric[r],
            .begin_ns = (int64_t)step * 200000000,
            .host = attempt == 0 ? &host[r] : NULL};
        /* attempt 0: the vector "act_absmax" (store_fixture.h) */
        vec[r][0] = (double)step + r;
        vec[r][1] = 10.0 * r;
        vec[r][2] = r == 3 ? INFINITY : r == 1 && step == 19 ? NAN : 1.0;
        values[r] = (ss_values_item){
            .name = 4, .n = r == 2 && step == 19 ? 2 : 3,
            .truncated = r == 2 && step == 19 ? 7 : 0, .v = vec[r]};
        if (attempt == 0) {
            ranks[r].n_values = 1;
            ranks[r].values = &values[r];
        }
    }
    ss_phase_stat phases[2] = {
        {0, {40000000, 41000000, 43000000, 43000000, 3, 4}},
        {1, {60000000, 60000000, 60000000, 60000000, 0, 4}}};
    ss_stat phase_self[2] = {
        {40000000, 41000000, 43000000, 43000000, 3, 4},
        {20000000, 20000000, 50000000, 50000000, 2, 4}};
    ss_sync_stat syncs[1] = {{2, 3000, 2000, 3, 4}};
    ss_step_view v = {
        .attempt = attempt, .step = step,
        .finalized_at = 1700000000000000000, .world_size = 4, .n_present = 4,
        .step_time = {100000000, 101000000, 103000000, 103000000, 3, 4},
        .rss = {((int64_t)1 << 30), ((int64_t)1 << 30) + 1,
                ((int64_t)1 << 30) + 3, ((int64_t)1 << 30) + 3, 3, 4},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = 2, .phases = phases, .phase_self = phase_self,
        .n_syncs = 1, .syncs = syncs,
        .n_metrics = 1, .metrics = metrics, .n_names = 4, .ranks = ranks};
    ss_store_put_step(s, run, &v, names_);
}

int64_t ss_fixture_add_run(ss_store *s, const char *uuid, const char *name,
                           uint32_t world_size, ss_wall_ns started_at)
{
    ss_run_info info = {.world_size = world_size, .started_at = started_at};
    snprintf(info.uuid, sizeof info.uuid, "%s", uuid);
    snprintf(info.name, sizeof info.name, "%s", name);
    snprintf(info.command, sizeof info.command, "python %s.py --lr 0.1",
             name);
    snprintf(info.host, sizeof info.host, "node1");
    int64_t id = -1;
    char err[256];
    if (ss_store_begin_run(s, &info, &id, err, sizeof err) != 0) {
        fprintf(stderr, "  fixture: begin_run: %s\n", err);
        return -1;
    }
    return id;
}

void ss_fixture_put_finding(ss_store *s, int64_t run, uint32_t id,
                            ss_severity severity, const char *kind,
                            int32_t rank, const char *phase,
                            uint64_t first_step, uint64_t last_step,
                            const char *evidence, const char *message)
{
    ss_finding f = {.id = id, .severity = severity, .n_ranks = 1,
                    .ranks = {rank}, .first_step = first_step,
                    .last_step = last_step};
    snprintf(f.kind, sizeof f.kind, "%s", kind);
    snprintf(f.phase, sizeof f.phase, "%s", phase ? phase : "");
    snprintf(f.evidence_json, sizeof f.evidence_json, "%s", evidence);
    snprintf(f.message, sizeof f.message, "%s", message);
    ss_store_put_finding(s, run, &f);
}

int ss_fixture_build(const char *path, char *err, size_t errlen)
{
    ss_store *s = ss_store_open(path, NULL, 1, err, errlen);
    if (!s)
        return -1;
    const ss_wall_ns t0 = SS_FIXTURE_T0, sec = 1000000000;
    int64_t run = ss_fixture_add_run(s, "0123abcd-0000", "train", 4, t0);
    ss_store_put_attempt(s, run, 0, t0);
    for (uint32_t r = 0; r < 4; r++) {
        ss_rank_info ri = {.rank = r, .pid = 1000 + r, .exit_code = 0,
                           .term_signal = 0, .last_step = 19,
                           .dropped_events = r == 1 ? 5 : 0,
                           .dropped_records = 0};
        snprintf(ri.host, sizeof ri.host, "node1");
        snprintf(ri.state, sizeof ri.state, "exited");
        if (r == 2) {
            snprintf(ri.state, sizeof ri.state, "failed");
            ri.exit_code = -1;
            ri.term_signal = 9;
        }
        ss_store_put_rank(s, run, &ri);
    }
    for (uint64_t step = 0; step < 20; step++)
        ss_fixture_put_step(s, run, 0, step);
    ss_fixture_put_finding(s, run, 1, SS_WARNING, "data_stall", 1, NULL, 7,
                           7, "{\"wait_ms\":250}",
                           "rank 1 \"waited\"\tfor data\n\x01 \xe2\x9c\x93 "
                           "\xff");
    ss_fixture_put_finding(s, run, 2, SS_CRITICAL, "straggler", 3, "forward",
                           2, 19,
                           "{\"late_ms\":2.0,\"steps\":18,\"rule\":\"skew\"}",
                           "rank 3 is a persistent straggler in forward");
    ss_store_put_event(s, run, 0, t0 + sec, "rank_connected", 0, NULL);
    ss_store_put_event(s, run, 0, t0 + 2 * sec, "rank_failed", 2,
                       "rank 2 killed by signal 9 at step 19");
    static const char *const labels[3] = {"layer0", "layer1", "head"};
    ss_store_put_labels(s, run, 0, 1, "act_absmax", labels, 3);
    ss_store_add_dropped_vectors(s, run, 3);
    ss_store_end_run(s, run, t0 + 90 * sec, 137, "failed", 5, 0);
    run = ss_fixture_add_run(s, "4567ef00-0000", "other", 4, t0 + 100 * sec);
    ss_store_put_attempt(s, run, 0, t0 + 100 * sec);
    ss_store_put_attempt(s, run, 1, t0 + 200 * sec);
    for (uint64_t step = 5; step < 8; step++)
        ss_fixture_put_step(s, run, 1, step);
    ss_store_close(s);
    if (run != 2) {
        snprintf(err, errlen, "the fixture's runs could not be created");
        return -1;
    }
    return 0;
}

/* Uniform in [0, 1) from the xorshift state *RNG. */
static double fixture_uniform(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return (double)(*rng >> 11) / 9007199254740992.0;
}

int64_t ss_fixture_timed_run(ss_store *s, const char *name, uint32_t world,
                             uint64_t steps, double mean_ms, uint64_t *rng)
{
    static const char *const names[] = {"compute"};
    if (world == 0 || world > SS_FIXTURE_MAX_WORLD)
        return -1;
    ss_run_info info = {.world_size = world, .started_at = 1700000000};
    snprintf(info.name, sizeof info.name, "%s", name);
    snprintf(info.command, sizeof info.command, "./train");
    char fingerprint[128];
    snprintf(fingerprint, sizeof fingerprint,
             "{\"command\":\"./train\",\"world_size\":%u,"
             "\"cpu\":\"x\"}", world);
    info.fingerprint = fingerprint;
    int64_t id = -1;
    char err[256];
    if (ss_store_begin_run(s, &info, &id, err, sizeof err) != 0) {
        fprintf(stderr, "  begin_run: %s\n", err);
        return -1;
    }
    for (uint64_t step = 1; step <= steps; step++) {
        double noise = 0.95 + 0.1 * fixture_uniform(rng);
        int64_t ns = (int64_t)(mean_ms * 1e6 * noise);
        int64_t phase[SS_FIXTURE_MAX_WORLD][1];
        ss_rank_step ranks[SS_FIXTURE_MAX_WORLD];
        for (uint32_t r = 0; r < world; r++) {
            phase[r][0] = ns / 2;
            ranks[r] = (ss_rank_step){.present = 1, .step_ns = ns,
                                      .rss_bytes = SS_MISSING,
                                      .device_bytes = SS_MISSING,
                                      .phase_ns = phase[r],
                                      .begin_ns = SS_MISSING};
        }
        ss_phase_stat ph = {0, {ns / 2, ns / 2, ns / 2, ns / 2, 0, world}};
        ss_step_view v = {
            .attempt = 0, .step = step, .finalized_at = 1700000000,
            .world_size = world, .n_present = world,
            .step_time = {ns, ns, ns, ns, 0, world},
            .rss = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                    SS_NO_RANK, 0},
            .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                       SS_NO_RANK, 0},
            .n_phases = 1, .phases = &ph, .n_names = 1, .ranks = ranks};
        ss_store_put_step(s, id, &v, names);
    }
    ss_store_end_run(s, id, 1700000100, 0, "succeeded", 0, 0);
    return id;
}

int64_t ss_fixture_two_node_run(ss_store *s, ss_wall_ns t0)
{
    const ss_wall_ns sec = 1000000000;
    int64_t run = ss_fixture_add_run(s, "89abcdef-0000", "multi", 4, t0);
    if (run < 0)
        return -1;
    ss_store_put_attempt(s, run, 0, t0);
    for (uint32_t r = 0; r < 4; r++) {
        ss_rank_info ri = {.rank = r, .pid = 2000 + r, .exit_code = 0,
                           .term_signal = 0, .last_step = 3,
                           .dropped_events = 0, .dropped_records = 0,
                           .names_over_limit = -1, .values_over_limit = -1};
        snprintf(ri.host, sizeof ri.host, r < 2 ? "node1" : "node2");
        snprintf(ri.state, sizeof ri.state, r < 2 ? "exited" : "failed");
        if (r >= 2)
            ri.exit_code = -1;
        ss_store_put_rank(s, run, &ri);
    }
    for (uint64_t step = 0; step < 4; step++)
        ss_fixture_put_step(s, run, 0, step);
    ss_node_info n;
    ss_node_info_init(&n);
    snprintf(n.host, sizeof n.host, "node1");
    n.nranks = 2;
    snprintf(n.state, sizeof n.state, SS_NODE_DONE);
    n.joined_at = t0;
    n.ended_at = t0 + 60 * sec;
    n.clock_offset_ns = 0;
    n.clock_bound_ns = 0;
    ss_store_put_node(s, run, &n);
    ss_node_info_init(&n);
    n.node_rank = 1;
    snprintf(n.host, sizeof n.host, "node2");
    snprintf(n.addr, sizeof n.addr, "10.0.0.2:40112");
    n.first_rank = 2;
    n.nranks = 2;
    snprintf(n.state, sizeof n.state, SS_NODE_LOST);
    n.joined_at = t0 + sec;
    n.ended_at = t0 + 30 * sec;
    n.clock_offset_ns = -1200000;
    n.clock_bound_ns = 300000;
    snprintf(n.lost_reason, sizeof n.lost_reason, "lost its connection");
    n.lost_at_step = 3;
    ss_store_put_node(s, run, &n);
    ss_store_end_run(s, run, t0 + 60 * sec, 1, "failed", 0, 0);
    return run;
}

void ss_fixture_goodput_step(ss_store *s, int64_t run, uint32_t attempt,
                             uint64_t step, ss_wall_ns fin, int64_t dur_ns,
                             int64_t ckpt_ns, int64_t data_ns,
                             int64_t late_ns)
{
    static const char *const names[] = {"checkpoint", "data", "allreduce"};
    ss_phase_stat ph[2];
    uint32_t n_ph = 0;
    if (ckpt_ns)
        ph[n_ph++] = (ss_phase_stat){0, {0, ckpt_ns / 2, ckpt_ns, ckpt_ns,
                                         0, 2}};
    if (data_ns)
        ph[n_ph++] = (ss_phase_stat){1, {data_ns / 2, data_ns / 2, data_ns,
                                         data_ns, 0, 2}};
    ss_sync_stat sy = {2, late_ns, late_ns, 0, 2};
    ss_rank_step ranks[2];
    for (int r = 0; r < 2; r++)
        ranks[r] = (ss_rank_step){.present = 1,
                                  .step_ns = r == 0 ? dur_ns : dur_ns / 2,
                                  .rss_bytes = SS_MISSING,
                                  .device_bytes = SS_MISSING,
                                  .begin_ns = SS_MISSING};
    ss_step_view v = {
        .attempt = attempt, .step = step, .finalized_at = fin,
        .world_size = 2, .n_present = 2,
        .step_time = {dur_ns / 2, dur_ns / 2, dur_ns, dur_ns, 0, 2},
        .rss = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING, SS_NO_RANK,
                0},
        .device = {SS_MISSING, SS_MISSING, SS_MISSING, SS_MISSING,
                   SS_NO_RANK, 0},
        .n_phases = n_ph, .phases = ph, .n_syncs = late_ns ? 1 : 0,
        .syncs = &sy, .n_names = 0, .ranks = ranks};
    ss_store_put_step(s, run, &v, names);
}

int64_t ss_fixture_restart_run(ss_store *s, const char *name, ss_wall_ns t0)
{
    const ss_wall_ns sec = 1000000000, ms = 1000000;
    int64_t run = ss_fixture_add_run(s, "restart-0000", name, 2, t0);
    if (run < 0)
        return -1;
    ss_store_put_attempt(s, run, 0, t0);
    for (uint64_t i = 0; i <= 9; i++)
        ss_fixture_goodput_step(s, run, 0, i, t0 + (ss_wall_ns)(6 + i) * sec,
                                sec, i == 4 ? 500 * ms : 0, 0, 0);
    ss_store_put_event(s, run, 0, t0 + 15400 * ms, "rank_failed", 1,
                       "rank 1 exited with status 1");
    ss_attempt_facts f0 = {.attempt = 0, .ended_at = t0 + 16 * sec,
                           .cause = "rank_crash", .first_step = 0,
                           .last_step = 9, .resumed_from = -1};
    ss_store_put_attempt_facts(s, run, &f0);
    ss_store_put_attempt(s, run, 1, t0 + 20 * sec);
    for (uint64_t i = 5; i <= 14; i++)
        ss_fixture_goodput_step(s, run, 1, i,
                                t0 + (ss_wall_ns)(19 + i) * sec, sec, 0, 0,
                                0);
    ss_attempt_facts f1 = {.attempt = 1, .ended_at = t0 + 33500 * ms,
                           .cause = "completed", .first_step = 5,
                           .last_step = 14, .resumed_from = 4};
    ss_store_put_attempt_facts(s, run, &f1);
    ss_store_end_run(s, run, t0 + 34 * sec, 0, "succeeded", 0, 0);
    return run;
}

const char *ss_fixture_file(void)
{
    static char path[600];
    if (path[0])
        return path;
    testing_tmp_path("fixture.db", path, sizeof path);
    char err[512];
    if (ss_fixture_build(path, err, sizeof err) != 0)
        fprintf(stderr, "  fixture: %s\n", err);
    return path;
}

const char *ss_fixture_store(void)
{
    const char *file = ss_fixture_file();
    const char *uri = getenv("STEPSCOPE_TEST_PG");
    if (!uri || !*uri)
        return file;
    static int copied;
    if (copied)
        return uri;
    copied = 1;
    /* In order, each run whole before the next: the server's ids are then
     * the file's. */
    static const char *const uuids[] = {"0123abcd-0000", "4567ef00-0000"};
    for (size_t i = 0; i < sizeof uuids / sizeof uuids[0]; i++) {
        char err[512] = "";
        ss_pg_pusher *p = ss_pg_pusher_start(uri, file, uuids[i], err,
                                             sizeof err);
        if (!p || ss_pg_pusher_finish(p, stderr) != 0)
            fprintf(stderr, "  fixture: run %s not copied into %s%s%s\n",
                    uuids[i], uri, *err ? ": " : "", err);
    }
    return uri;
}
