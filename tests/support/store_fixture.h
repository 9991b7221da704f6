/*
 * store_fixture.h - one store with known content for the controller's
 * tests, written through the real writer (store.h).
 *
 * ss_fixture_build() writes the standard store every reading test checks
 * against (the numbers below are what the tests expect):
 *
 *   run 1 "train" (uuid 0123abcd-0000, world 4, started at SS_FIXTURE_T0,
 *     ended 90 s later, status "failed", exit code 137, attempt 0):
 *     - ranks 0..3 on host node1, pid 1000 + rank, last step 19; rank 2
 *       "failed" by signal 9, the others "exited" 0; rank 1 dropped 5
 *       events;
 *     - steps 0..19: rank r takes 100 + r ms (forward 40 + r ms, backward
 *       60 ms), begins step s at s * 200 ms (no phase starts), arrives
 *       at the "allreduce" sync at 1 ms + r us (the same clock), has an
 *       RSS of 1 GiB + r bytes, and
 *       reports the metric "loss" = s + r / 2 (rank 2: none in step 19);
 *       host evidence (attempt 0 only): CPU 80 + r ms, run-queue delay
 *       1 ms (rank 2: 5 ms), stopped 0 (rank 2: 30 ms in odd steps),
 *       throttled 0 (rank 3: 2 ms, 1 period), 10 voluntary and 2 + r
 *       involuntary switches, r major faults, pressure cpu 4 ms, memory 0,
 *       io unknown;
 *     - findings: 1 "data_stall" (warning, rank 1, step 7, evidence
 *       {"wait_ms":250}, a message with control characters and invalid
 *       UTF-8) and 2 "straggler" (critical, rank 3, phase forward, steps
 *       2-19);
 *     - events: rank_connected (rank 0, T0 + 1 s), rank_failed (rank 2,
 *       T0 + 2 s);
 *     - the vector "act_absmax" in every step: rank r sends
 *       {s + r, 10 r, 1} (rank 3: {s + r, 30, +inf}; rank 1 in step 19:
 *       {20, 10, NaN}; rank 2 in step 19: {21, 20} with 7 elements
 *       truncated); labels ["layer0","layer1","head"] from rank 1; 3
 *       vectors dropped (runs.dropped_vectors).
 *   run 2 "other" (uuid 4567ef00-0000, world 4, still running): attempt 0
 *     without steps, attempt 1 with steps 5..7 as above.
 *
 * The building blocks are there for tests that need a store of another
 * shape.  Link with the ss_store_fixture library (controller tests only).
 */
#ifndef STEPSCOPE_STORE_FIXTURE_H
#define STEPSCOPE_STORE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* 2023-11-14T22:13:20Z, the start of run 1. */
#define SS_FIXTURE_T0 ((ss_wall_ns)1700000000 * 1000000000)

/* Writes the standard store (above) to PATH, which must not exist yet.
 * Returns 0, or -1 with a reason in ERR. */
int ss_fixture_build(const char *path, char *err, size_t errlen);

/*
 * The standard store of this test binary, built once in its temporary
 * directory (testing_tmp.h).  With STEPSCOPE_TEST_PG set to the URI of an
 * empty team database (tests/support/pg_server.py starts one), its two
 * runs are then copied there in order, by the copier of `run --db
 * postgresql://...` (pg_pusher.h), so that the server gives them ids 1
 * and 2 as in the file, and the URI is returned instead: the tests that
 * read the fixture through it read both backends.  On failure the reason
 * is printed and the path returned anyway (the tests then fail opening it).
 */
const char *ss_fixture_store(void);

/* The standard store's SQLite file (ss_fixture_store builds it). */
const char *ss_fixture_file(void);

/* Begins a run (command "python NAME.py --lr 0.1", host node1) and returns
 * its id, or -1 (the reason printed on stderr). */
int64_t ss_fixture_add_run(ss_store *s, const char *uuid, const char *name,
                           uint32_t world_size, ss_wall_ns started_at);

/* Writes step STEP of ATTEMPT of the standard run shape (4 ranks, above). */
void ss_fixture_put_step(ss_store *s, int64_t run, uint32_t attempt,
                         uint64_t step);

/* Writes a finding naming one RANK (PHASE NULL: none). */
void ss_fixture_put_finding(ss_store *s, int64_t run, uint32_t id,
                            ss_severity severity, const char *kind,
                            int32_t rank, const char *phase,
                            uint64_t first_step, uint64_t last_step,
                            const char *evidence, const char *message);

/*
 * Writes one succeeded run named NAME of WORLD ranks (at most
 * SS_FIXTURE_MAX_WORLD) and STEPS steps (1..STEPS) whose step takes about
 * MEAN_MS (uniform noise of +-5 %, drawn from the xorshift state *RNG),
 * half of it in phase "compute".  Its fingerprint names the command and
 * WORLD, so runs of one world size are comparable (stepscope guard).
 * Returns the run's id, or -1 (the reason on stderr).
 */
#define SS_FIXTURE_MAX_WORLD 16

/* Writes step STEP of ATTEMPT for 2 ranks, finalized at FIN: the slowest
 * rank took DUR_NS, the other half of it; phases "checkpoint" (slowest
 * rank CKPT_NS) and "data" (slowest rank DATA_NS, median DATA_NS / 2)
 * where not 0; the sync "allreduce" with late_ns LATE_NS where not 0. */
void ss_fixture_goodput_step(ss_store *s, int64_t run, uint32_t attempt,
                             uint64_t step, ss_wall_ns fin, int64_t dur_ns,
                             int64_t ckpt_ns, int64_t data_ns,
                             int64_t late_ns);

/*
 * Writes the one-restart run of docs/fault-tolerance.md named NAME,
 * started at T0 (seconds after T0 below): attempt 0 launched at 0, steps
 * 0..9 of 1 s finalized at 6..15 (step 4 saved a checkpoint in 0.5 s), a
 * rank failed at 15.4, ended at 16 (cause rank_crash); attempt 1 launched
 * at 20, resumed from step 4, steps 5..14 of 1 s finalized at 24..33,
 * ended at 33.5 (completed); the run ended at 34, status "succeeded".
 * Its goodput: start-up 8 s, productive 14.5 s, checkpoint 0.5 s, lost
 * work 5.4 s, restart 4.6 s, other 1 s.  Returns the run id or -1.
 */
int64_t ss_fixture_restart_run(ss_store *s, const char *name, ss_wall_ns t0);
int64_t ss_fixture_timed_run(ss_store *s, const char *name, uint32_t world,
                             uint64_t steps, double mean_ms, uint64_t *rng);

/*
 * Writes a run named "multi" of 4 ranks on two nodes, started at T0 and
 * failed 60 s later: node 0 "node1" (the controller's, ranks 0-1, clock
 * the reference), node 1 "node2" at 10.0.0.2:40112 (ranks 2-3, joined at
 * T0 + 1 s, clock offset -1.2 ms +- 0.3 ms) lost at T0 + 30 s: "lost its
 * connection" at step 3.  Ranks 0-1 "exited" on node1, 2-3 "failed" on
 * node2; steps 0..3 of the standard shape.  Returns the run's id, or -1.
 */
int64_t ss_fixture_two_node_run(ss_store *s, ss_wall_ns t0);

#endif
