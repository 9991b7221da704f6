/*
 * many_names.c - a rank that uses many distinct names, for the end-to-end
 * tests of the name limits (test_names.py).
 *
 *   many_names STEPS NAMES PER_STEP
 *
 * Each step records the phase "work", the metric "loss" (the step number)
 * and PER_STEP more metrics, rotating through NAMES names of this rank's
 * own ("r<rank>.m<i>", value the step number), so that over the run the
 * rank uses NAMES + 2 distinct names and the ranks together NAMES per rank
 * more.  Names beyond what the process may intern (SS_MAX_NAMES) come back
 * as id 0 and what is recorded under them is dropped by the recorder;
 * names beyond the run's limit are dropped by the controller.  Neither may
 * cost the rank its connection or its steps.  At the end the rank prints
 * "RESULT {json}" with its rank, the names it could not intern and its
 * drop counters.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "stepscope.h"

#define MAX_ROTATING 1000
#define MAX_PER_STEP 62 /* + "loss": within one record's 64 metrics */

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: many_names STEPS NAMES PER_STEP\n");
        return 2;
    }
    long steps = atol(argv[1]), n_names = atol(argv[2]);
    long per_step = atol(argv[3]);
    const char *rank_env = getenv("RANK");
    int rank = rank_env ? atoi(rank_env) : 0;
    if (steps < 1 || n_names < 1 || n_names > MAX_ROTATING || per_step < 1 ||
        per_step > MAX_PER_STEP || per_step > n_names) {
        fprintf(stderr, "many_names: STEPS >= 1, 1 <= PER_STEP <= %d, "
                "PER_STEP <= NAMES <= %d\n", MAX_PER_STEP, MAX_ROTATING);
        return 2;
    }
    ss_init();
    ss_name_id work = ss_name("work"), loss = ss_name("loss");
    static ss_name_id ids[MAX_ROTATING];
    int refused = 0;
    for (long i = 0; i < n_names; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%d.m%ld", rank, i);
        ids[i] = ss_name(name); /* 0 once the process's table is full */
        refused += ids[i] == 0;
    }
    for (long s = 0; s < steps; s++) {
        ss_step_begin((uint64_t)s);
        ss_phase_begin(work);
        ss_metric(loss, (double)s);
        for (long k = 0; k < per_step; k++)
            ss_metric(ids[(s * per_step + k) % n_names], (double)s);
        sleep_ms(2);
        ss_phase_end(work);
        ss_step_end();
    }
    ss_shutdown();
    ss_counters c;
    ss_get_counters(&c);
    printf("RESULT {\"rank\": %d, \"refused_names\": %d, \"dropped_events\": "
           "%" PRIu64 ", \"dropped_records\": %" PRIu64 "}\n",
           rank, refused, c.dropped_events, c.dropped_records);
    return 0;
}
