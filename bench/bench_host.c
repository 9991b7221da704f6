/*
 * bench_host.c - what reading the host's evidence costs the controller.
 *
 * Starts RANKS real processes (children of this one, each with THREADS
 * threads, mostly asleep like ranks waiting in a collective) and follows
 * them with the controller's own host watch (job/host_watch.h) on a libuv
 * loop for SECONDS: the timer samples every rank every INTERVAL ms, and,
 * unless --no-steps, a second timer reports a finished step of every rank
 * every STEP ms (each such report samples the rank too, as a STEP record
 * does).  It prints the controller's CPU time (user + system, this
 * process) per rank-sample, per rank per second, and as a share of one
 * core for all ranks.
 *
 *   bench_host [-r RANKS] [-t THREADS] [-i INTERVAL_MS] [-s STEP_MS]
 *              [-d SECONDS] [--no-steps]
 *
 * Defaults: 64 ranks, 4 threads each, the default interval (100 ms),
 * 100 ms steps, 10 s.  docs/performance.md has the figures.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "host_watch.h"

typedef struct {
    ss_host_watch *hw;
    uint32_t ranks;
    uint64_t step_reports;
    uv_timer_t steps, end;
} bench;

static void *sleeper(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A rank stand-in: THREADS threads in all, asleep until killed. */
static pid_t start_rank(int threads)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    for (int i = 1; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, sleeper, NULL);
    }
    sleeper(NULL);
    _exit(0);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void on_step(uv_timer_t *t)
{
    bench *b = t->data;
    for (uint32_t r = 0; r < b->ranks; r++)
        ss_host_watch_step_done(b->hw, r);
    b->step_reports += b->ranks;
}

static void on_end(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_host [-r RANKS] [-t THREADS] "
                    "[-i INTERVAL_MS] [-s STEP_MS] [-d SECONDS] "
                    "[--no-steps]\n");
}

int main(int argc, char **argv)
{
    uint32_t ranks = 64, threads = 4, interval_ms = 100, step_ms = 100;
    double seconds = 10;
    int steps = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            ranks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            threads = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
            interval_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            step_ms = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--no-steps") == 0)
            steps = 0;
        else {
            usage();
            return 2;
        }
    }
    if (!ranks || !threads || !interval_ms || !step_ms || seconds <= 0) {
        usage();
        return 2;
    }
    pid_t *pids = calloc(ranks, sizeof *pids);
    if (!pids)
        return 1;
    for (uint32_t r = 0; r < ranks; r++)
        pids[r] = start_rank((int)threads);

    uv_loop_t loop;
    uv_loop_init(&loop);
    bench b = {.ranks = ranks};
    b.hw = ss_host_watch_start(&loop, ranks, interval_ms, "/proc");
    if (!b.hw)
        return 1;
    usleep(100000); /* let the children start their threads */
    double cpu0 = cpu_seconds();
    for (uint32_t r = 0; r < ranks; r++)
        ss_host_watch_rank(b.hw, r, pids[r]);
    uv_timer_init(&loop, &b.steps);
    uv_timer_init(&loop, &b.end);
    b.steps.data = &b;
    if (steps)
        uv_timer_start(&b.steps, on_step, step_ms / 2 + 1, step_ms); /* between
                                                          timer samples */
    uv_timer_start(&b.end, on_end, (uint64_t)(seconds * 1000), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    double cpu = cpu_seconds() - cpu0;

    ss_host_step totals;
    uint32_t followed = 0;
    for (uint32_t r = 0; r < ranks; r++)
        followed += ss_host_watch_totals(b.hw, r, &totals) == 0;
    double samples = (double)ss_host_watch_samples(b.hw);
    printf("bench_host: %u ranks x %u threads, followed %u, sampled every "
           "%u ms%s, %.0f s\n", ranks, threads, followed, interval_ms,
           steps ? " and at each step" : "", seconds);
    if (steps)
        printf("  steps every %u ms: %llu step reports\n", step_ms,
               (unsigned long long)b.step_reports);
    printf("  controller CPU %.3f s: %.1f us per rank-sample (%.0f samples),"
           " %.1f us per rank per second, %.2f %% of a core for %u ranks\n",
           cpu, cpu * 1e6 / samples, samples, cpu * 1e6 / seconds / ranks,
           cpu / seconds * 100.0, ranks);

    ss_host_watch_close(b.hw);
    uv_close((uv_handle_t *)&b.steps, NULL);
    uv_close((uv_handle_t *)&b.end, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    ss_host_watch_free(b.hw);
    for (uint32_t r = 0; r < ranks; r++)
        kill(pids[r], SIGKILL);
    for (uint32_t r = 0; r < ranks; r++)
        waitpid(pids[r], NULL, 0);
    free(pids);
    return 0;
}
