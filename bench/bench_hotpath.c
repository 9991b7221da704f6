/*
 * bench_hotpath.c - what an instrumented phase costs the training thread.
 *
 * In one run it times, in batches of BATCH iterations:
 *   (a) a bare pair of clock_gettime(CLOCK_MONOTONIC) reads, the floor: a
 *       phase pair must read the clock twice anyway;
 *   (b) an ss_phase_begin/ss_phase_end pair with the recorder enabled and
 *       connected to an in-process controller that decodes every frame;
 *   (c) the same pair with the recorder disabled (after ss_shutdown(),
 *       which leaves exactly the path taken without STEPSCOPE_ADDR);
 *   (d) ss_values of 1,024 doubles, (e) ss_expert_load of 256 experts
 *       (32 layers a step), enabled.
 * Each batch of (b) is one step; after it the benchmark waits, untimed,
 * until the controller has received that step, so every timed event went
 * into a ring with room (no drop path) and the sender's work is real.
 * It prints ns per pair (minimum and median over repetitions), the ratios
 * to (a), and the command line that reproduces the run.  Target:
 * (b) <= 2 x (a).
 *
 *   bench_hotpath [--reps N] [--batches N]
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"
#include "wire.h"

#define BATCH 2048 /* pairs per batch: 4096 events, well inside one ring */
#define TOKEN_HEX "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
#define RUN_ID "bench"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- an in-process controller ---- */

typedef struct {
    int listen_fd;
    pthread_t thread;
    uint64_t last_step; /* atomic: highest STEP received, 0 before any */
    uint64_t steps;     /* atomic */
    int error;          /* atomic: a frame failed to decode */
    char err[256];
} sink_ctl;

static void *sink_main(void *arg)
{
    sink_ctl *c = arg;
    int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return NULL;
    uint8_t token[WIRE_TOKEN_SIZE];
    wire_token_parse(TOKEN_HEX, token);
    wire_decoder dec;
    wire_decoder_init(&dec, WIRE_FROM_RANK, token, RUN_ID);
    static uint8_t buf[1 << 16];
    static wire_frame f;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        size_t pos = 0, used;
        wire_result rc;
        while ((rc = wire_decoder_next(&dec, buf + pos, len - pos, &f, &used,
                                       c->err, sizeof c->err)) == WIRE_OK) {
            pos += used;
            if (f.type == WIRE_HELLO) {
                uint8_t out[64];
                wire_welcome w = {.version = WIRE_VERSION};
                size_t m = wire_encode_welcome(out, sizeof out, &w);
                if (write(fd, out, m) != (ssize_t)m)
                    break;
            } else if (f.type == WIRE_STEP) {
                __atomic_store_n(&c->last_step, f.u.step.step,
                                 __ATOMIC_RELEASE);
                __atomic_add_fetch(&c->steps, 1, __ATOMIC_RELAXED);
            }
        }
        if (rc == WIRE_ERROR) {
            __atomic_store_n(&c->error, 1, __ATOMIC_RELEASE);
            break;
        }
        memmove(buf, buf + pos, len - pos);
        len -= pos;
    }
    close(fd);
    return NULL;
}

static int sink_start(sink_ctl *c, const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path)
        return -1;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->listen_fd < 0 ||
        bind(c->listen_fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
        listen(c->listen_fd, 1) != 0)
        return -1;
    return pthread_create(&c->thread, NULL, sink_main, c) == 0 ? 0 : -1;
}

/* ---- the three cases ---- */

static volatile int64_t sink_value; /* keeps the bare clock loop honest */

static int64_t batch_clock(void)
{
    int64_t t0 = now_ns(), acc = 0;
    for (int i = 0; i < BATCH; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        acc += b.tv_nsec - a.tv_nsec;
    }
    int64_t d = now_ns() - t0;
    sink_value = acc;
    return d;
}

static int64_t batch_phase(ss_name_id id)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < BATCH; i++) {
        ss_phase_begin(id);
        ss_phase_end(id);
    }
    return now_ns() - t0;
}

/* (d) VALUES_PER_STEP calls of ss_values with 1,024 doubles, in one step
 * (256 KiB: the step's budget, so every vector is sent). */
#define VALUES_N 1024
#define VALUES_PER_STEP 32
static double values_buf[VALUES_N];

static int64_t batch_values(const ss_name_id *ids)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < VALUES_PER_STEP; i++)
        ss_values(ids[i], values_buf, VALUES_N);
    return now_ns() - t0;
}

/* (e) EXPERT_LAYERS calls of ss_expert_load with 256 experts, in one
 * step: one mixture-of-experts model's loads (docs/workloads.md). */
#define EXPERTS_N 256
#define EXPERT_LAYERS 32

static int64_t batch_experts(const ss_name_id *layers)
{
    int64_t t0 = now_ns();
    for (int i = 0; i < EXPERT_LAYERS; i++)
        ss_expert_load(layers[i], values_buf, EXPERTS_N);
    return now_ns() - t0;
}

/* Waits (untimed) until the controller has STEP; 0, or -1 after 2 s. */
static int wait_for_step(sink_ctl *c, uint64_t step)
{
    int64_t deadline = now_ns() + 2000000000LL;
    while (__atomic_load_n(&c->last_step, __ATOMIC_ACQUIRE) < step) {
        if (now_ns() > deadline || __atomic_load_n(&c->error, __ATOMIC_ACQUIRE))
            return -1;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double min, median;
} summary;

static summary summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    summary s = {v[0], n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2};
    return s;
}

static void clocksource(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/"
                    "current_clocksource", "r");
    if (!f)
        return;
    if (fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

int main(int argc, char **argv)
{
    int reps = 7, batches = 64;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc)
            batches = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--batches N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 100 || batches < 1 || batches > 100000) {
        fprintf(stderr, "bench_hotpath: --reps 1..100, --batches 1..100000\n");
        return 2;
    }

    const char *tmp = getenv("TMPDIR");
    char dir[128], path[160], addr[200];
    snprintf(dir, sizeof dir, "%s/ssbenchXXXXXX",
             tmp && *tmp && strlen(tmp) < 80 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench_hotpath: mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/ctl.sock", dir);
    snprintf(addr, sizeof addr, "unix:%s", path);
    sink_ctl ctl = {0};
    if (sink_start(&ctl, path) != 0) {
        perror("bench_hotpath: controller socket");
        return 1;
    }
    setenv("STEPSCOPE_ADDR", addr, 1);
    setenv("STEPSCOPE_TOKEN", TOKEN_HEX, 1);
    setenv("STEPSCOPE_RUN_ID", RUN_ID, 1);
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    if (ss_init() != 0 || !ss_enabled()) {
        fprintf(stderr, "bench_hotpath: the recorder did not start\n");
        return 1;
    }
    ss_name_id id = SS_NAME("bench");

    double *a = calloc((size_t)reps * 2, sizeof *a);
    double *b = calloc((size_t)reps, sizeof *b);
    double *c = calloc((size_t)reps, sizeof *c);
    if (!a || !b || !c)
        return 1;
    const double pairs = (double)batches * BATCH;
    uint64_t step = 0;
    /* warm-up: the ring's first touch, the connection, the caches */
    for (int k = 0; k < 4; k++) {
        batch_clock();
        ss_step_begin(++step);
        batch_phase(id);
        ss_step_end();
        if (wait_for_step(&ctl, step) < 0) {
            fprintf(stderr, "bench_hotpath: no record from the recorder (%s)\n",
                    ctl.err);
            return 1;
        }
    }
    /* (a) and (b) interleaved, one repetition each at a time */
    for (int r = 0; r < reps; r++) {
        int64_t ta = 0, tb = 0;
        for (int k = 0; k < batches; k++)
            ta += batch_clock();
        for (int k = 0; k < batches; k++) {
            ss_step_begin(++step);
            tb += batch_phase(id);
            ss_step_end();
            if (wait_for_step(&ctl, step) < 0) {
                fprintf(stderr, "bench_hotpath: the controller stopped "
                                "receiving at step %llu (%s)\n",
                        (unsigned long long)step, ctl.err);
                return 1;
            }
        }
        a[r] = (double)ta / pairs;
        b[r] = (double)tb / pairs;
    }
    /* (d) vectors: one step of VALUES_PER_STEP calls at a time, each step
     * received before the next, so the vector ring never fills */
    ss_name_id vids[VALUES_PER_STEP];
    for (int i = 0; i < VALUES_PER_STEP; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "vec%d", i);
        vids[i] = ss_name(nm);
        values_buf[i] = i;
    }
    double *d = calloc((size_t)reps, sizeof *d);
    if (!d)
        return 1;
    const int vsteps = 64;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        int64_t td = 0;
        for (int k = 0; k < vsteps; k++) {
            ss_step_begin(++step);
            td += batch_values(vids);
            ss_step_end();
            if (wait_for_step(&ctl, step) < 0) {
                fprintf(stderr, "bench_hotpath: no vectors' step %llu (%s)\n",
                        (unsigned long long)step, ctl.err);
                return 1;
            }
        }
        if (r >= 0)
            d[r] = (double)td / (vsteps * VALUES_PER_STEP);
    }
    /* (e) expert loads, as (d); the first step also sends the placements */
    ss_name_id lids[EXPERT_LAYERS];
    int32_t hosts[EXPERTS_N];
    for (int e = 0; e < EXPERTS_N; e++)
        hosts[e] = e / 64;
    for (int i = 0; i < EXPERT_LAYERS; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "%d", i);
        lids[i] = ss_expert_layer(nm);
        ss_expert_placement(nm, hosts, EXPERTS_N);
    }
    double *e = calloc((size_t)reps, sizeof *e);
    if (!e)
        return 1;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up, placements */
        int64_t te = 0;
        for (int k = 0; k < vsteps; k++) {
            ss_step_begin(++step);
            te += batch_experts(lids);
            ss_step_end();
            if (wait_for_step(&ctl, step) < 0) {
                fprintf(stderr, "bench_hotpath: no expert loads' step %llu "
                                "(%s)\n", (unsigned long long)step, ctl.err);
                return 1;
            }
        }
        if (r >= 0)
            e[r] = (double)te / (vsteps * EXPERT_LAYERS);
    }
    ss_counters drops;
    ss_get_counters(&drops);
    uint64_t received = __atomic_load_n(&ctl.steps, __ATOMIC_RELAXED);

    /* (c): ss_shutdown() leaves the recorder disabled for good */
    ss_shutdown();
    for (int r = 0; r < reps; r++) {
        int64_t ta = 0, tc = 0;
        for (int k = 0; k < batches; k++)
            ta += batch_clock();
        for (int k = 0; k < batches; k++)
            tc += batch_phase(id);
        a[reps + r] = (double)ta / pairs;
        c[r] = (double)tc / pairs;
    }
    pthread_join(ctl.thread, NULL);
    close(ctl.listen_fd);
    unlink(path);
    rmdir(dir);

    summary sa = summarize(a, 2 * reps), sb = summarize(b, reps),
            sc = summarize(c, reps), sd = summarize(d, reps),
            se = summarize(e, reps);
    char cs[64];
    clocksource(cs, sizeof cs);
    printf("stepscope hot-path benchmark: ns per pair, %d repetitions x %.0f "
           "pairs (clocksource %s)\n", reps, pairs, cs);
    printf("  %-34s %8s %8s %14s\n", "case", "min", "median", "median / (a)");
    printf("  %-34s %8.1f %8.1f %14.2f\n", "(a) 2 x clock_gettime(MONOTONIC)",
           sa.min, sa.median, 1.0);
    printf("  %-34s %8.1f %8.1f %14.2f\n", "(b) phase begin+end, enabled",
           sb.min, sb.median, sb.median / sa.median);
    printf("  %-34s %8.1f %8.1f %14.2f\n", "(c) phase begin+end, disabled",
           sc.min, sc.median, sc.median / sa.median);
    printf("  %-34s %8.1f %8.1f %14s\n", "(d) ss_values 1,024 doubles / call",
           sd.min, sd.median, "-");
    printf("  target (d) <= 2000 ns: %s\n", sd.median <= 2000 ? "met" : "NOT met");
    printf("  %-34s %8.1f %8.1f %14s\n", "(e) ss_expert_load 256 experts",
           se.min, se.median, "-");
    printf("  target (e) <= 1000 ns: %s\n", se.median <= 1000 ? "met" : "NOT met");
    printf("  controller received %llu step records; dropped events %llu, "
           "dropped records %llu\n", (unsigned long long)received,
           (unsigned long long)drops.dropped_events,
           (unsigned long long)drops.dropped_records);
    printf("  target (b) <= 2 x (a): %s (%.2f)\n",
           sb.median <= 2 * sa.median ? "met" : "MISSED",
           sb.median / sa.median);
    printf("  reproduce:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    if (argc == 1)
        printf(" --reps %d --batches %d", reps, batches);
    printf("\n");
    free(a);
    free(b);
    free(c);
    free(e);
    return 0;
}
