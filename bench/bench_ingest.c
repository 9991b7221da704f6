/*
 * bench_ingest.c - controller ingest throughput and memory under load.
 *
 * A load generator (a forked child process, so the controller side has a
 * core of its own) opens one unix-socket connection per simulated rank,
 * handshakes, and streams STEP records (4 phases, 1 sync point, 1 metric).
 * The parent runs the real controller path - ss_ingest on a libuv loop, the
 * wire decoder, ss_aggregator with the detectors, and optionally the SQLite
 * store - and reports rank-step records per second through aggregation.
 *
 *   bench_ingest [--ranks R] [--steps S]            as fast as possible
 *   bench_ingest --ranks 1024 --rate 20 --seconds 60 [--store PATH]
 *                                                   paced; prints memory
 *   ... --no-step-reading
 *       connections are read as they deliver, with no lead limit (the
 *       ingest's max_lead_steps 0; by default 32 steps, as `stepscope run`
 *       reads them)
 *   ... --vectors 64 --vector-len 256
 *       every rank also sends, per step, that many vectors (VALUES frames,
 *       ss_values) of that many doubles; the controller path then carries
 *       them through the aggregator (its budget) to the store (its vector
 *       queue), and the report adds what each refused or dropped and the
 *       controller's CPU time.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "aggregator.h"
#include "ingest.h"
#include "store.h"
#include "wire.h"

typedef struct {
    uint32_t ranks;
    uint64_t steps;
    double rate;     /* steps per second per rank; 0 = unpaced */
    double seconds;  /* paced mode: duration */
    const char *store_path;
    uint32_t vectors;    /* vectors per rank per step */
    uint32_t vector_len; /* doubles per vector */
    int no_step_reading; /* connections read with no lead limit */
} options;

static const uint8_t k_token[WIRE_TOKEN_SIZE] = {42, 42, 42, 42, 42, 42, 42, 42,
                                                 42, 42, 42, 42, 42, 42, 42, 42};
static const char *k_run = "bench";
static const char *k_names[] = {"data", "forward", "backward", "optimizer",
                                "allreduce", "loss"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* CPU time (user + system) of this process so far, seconds. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ---- generator (child process) ---- */

static size_t encode_step(uint8_t *buf, uint32_t rank, uint64_t step)
{
    static wire_step s;
    memset(&s, 0, sizeof s);
    int64_t base = (int64_t)step * 50000000 + 1000000000;
    s.step = step;
    s.begin_ns = base;
    s.end_ns = base + 40000000 + (int64_t)(rank % 7) * 100000;
    s.flags = WIRE_STEP_HAS_RSS;
    s.rss_bytes = (uint64_t)(1u << 30) + rank * 4096u;
    s.n_phases = 4;
    for (uint32_t i = 0; i < 4; i++)
        s.phases[i] = (wire_phase){i + 1, 1, 9000000 + (rank % 5) * 10000,
                                   base + (int64_t)i * 9000000, 0};
    s.n_syncs = 1;
    s.syncs[0] = (wire_sync){5, base + 30000000 + (int64_t)(rank % 3) * 50000};
    s.n_metrics = 1;
    s.metrics[0] = (wire_metric){6, 1.0 / (double)(step + 1)};
    return wire_encode_step(buf, WIRE_STEP_FRAME_MAX, &s);
}

/* The VALUES frames of RANK's STEP (O->vectors of O->vector_len doubles,
 * names 7..), into BUF; returns their bytes. */
static size_t encode_values(uint8_t *buf, size_t cap, const options *o,
                            uint32_t rank, uint64_t step, double *v)
{
    size_t n = 0;
    for (uint32_t k = 0; k < o->vectors; k++) {
        for (uint32_t i = 0; i < o->vector_len; i++)
            v[i] = (double)(rank + i) * 1e-3 + (double)step + k;
        n += wire_encode_values(buf + n, cap - n, step, 7 + k, v,
                                o->vector_len, 0);
    }
    return n;
}

static int generate(const char *path, const options *o)
{
    int *fds = calloc(o->ranks, sizeof *fds);
    uint8_t buf[1024];
    size_t vbytes = (size_t)o->vectors * (64 + 8 * (size_t)o->vector_len);
    double *vec = calloc(o->vector_len + 1, sizeof *vec);
    for (uint32_t r = 0; r < o->ranks; r++) {
        fds[r] = socket(AF_UNIX, SOCK_STREAM, 0);
        /* Small socket buffers keep the simulated ranks in near lockstep,
         * as real synchronous ranks are: no rank can run far ahead. */
        int sndbuf = 16384;
        setsockopt(fds[r], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        if (connect(fds[r], (struct sockaddr *)&a, sizeof a) < 0) {
            perror("bench_ingest: connect");
            return 1;
        }
        wire_hello h;
        memset(&h, 0, sizeof h);
        h.version = WIRE_VERSION;
        h.rank = r;
        h.world_size = o->ranks;
        h.pid = (uint32_t)getpid();
        memcpy(h.token, k_token, sizeof k_token);
        snprintf(h.run_id, sizeof h.run_id, "%s", k_run);
        snprintf(h.host, sizeof h.host, "bench");
        size_t n = wire_encode_hello(buf, sizeof buf, &h);
        for (uint32_t i = 0; i < 6; i++) {
            wire_name nm = {i + 1, ""};
            snprintf(nm.name, sizeof nm.name, "%s", k_names[i]);
            n += wire_encode_name(buf + n, sizeof buf - n, &nm);
        }
        if (write_all(fds[r], buf, n) < 0)
            return 1;
        for (uint32_t k = 0; k < o->vectors; k++) {
            wire_name nm = {7 + k, ""};
            snprintf(nm.name, sizeof nm.name, "vec%u", k);
            n = wire_encode_name(buf, sizeof buf, &nm);
            if (write_all(fds[r], buf, n) < 0)
                return 1;
        }
    }
    /* Batches of steps per write keep the generator cheaper than the
     * controller it measures. */
    enum { BATCH = 32 };
    uint8_t *out = malloc(BATCH * (256 + vbytes));
    double t0 = now_s();
    uint64_t steps = o->rate > 0 ? (uint64_t)(o->rate * o->seconds) : o->steps;
    uint64_t batch = o->rate > 0 ? 1 : BATCH;
    for (uint64_t s = 0; s < steps; s += batch) {
        if (o->rate > 0) {
            double due = t0 + (double)s / o->rate;
            while (now_s() < due)
                usleep(1000);
        }
        for (uint32_t r = 0; r < o->ranks; r++) {
            size_t n = 0;
            for (uint64_t k = s; k < s + batch && k < steps; k++) {
                n += encode_values(out + n, vbytes, o, r, k, vec);
                n += encode_step(out + n, r, k);
            }
            if (write_all(fds[r], out, n) < 0)
                return 1;
        }
    }
    for (uint32_t r = 0; r < o->ranks; r++) {
        wire_bye b = {steps - 1};
        size_t n = wire_encode_bye(buf, sizeof buf, &b);
        write_all(fds[r], buf, n);
        close(fds[r]);
    }
    free(out);
    free(vec);
    free(fds);
    return 0;
}

/* ---- controller side (parent) ---- */

typedef struct {
    ss_aggregator *agg;
    ss_store *store;
    ss_ingest *ingest;
    uint32_t ranks, left;
    uint64_t records, steps_final;
    uint64_t vectors; /* vectors received with their steps */
    double first_record, last_final;
    uv_timer_t report;
    double t0;
} bench;

static int b_intern(void *ctx, const char *name)
{
    return ss_aggregator_intern(((bench *)ctx)->agg, name);
}

static void b_step(void *ctx, uint32_t rank, const ss_step_record *rec,
                   const ss_values_item *values, uint32_t n_values)
{
    bench *b = ctx;
    if (b->records++ == 0)
        b->first_record = now_s();
    b->vectors += n_values;
    ss_aggregator_add_values(b->agg, rank, rec, values, n_values);
}

static void b_disconnect(void *ctx, uint32_t rank, int said_bye)
{
    bench *b = ctx;
    ss_aggregator_rank_left(b->agg, rank, !said_bye);
    if (++b->left == b->ranks) {
        ss_aggregator_finish(b->agg);
        b->last_final = now_s();
        ss_ingest_close(b->ingest);
        uv_close((uv_handle_t *)&b->report, NULL);
    }
}

static void b_rejected(void *ctx, int32_t rank, const char *reason)
{
    fprintf(stderr, "bench_ingest: rejected: %s\n", reason);
}

static void sink_step(void *ctx, const ss_step_view *v, const char *const *names)
{
    bench *b = ctx;
    b->steps_final++;
    if (b->store)
        ss_store_put_step(b->store, 1, v, names);
}

static void sink_finding(void *ctx, const ss_finding *f) {}

static void on_report(uv_timer_t *t)
{
    bench *b = t->data;
    ss_aggregator_stats st;
    ss_aggregator_get_stats(b->agg, &st);
    printf("  t=%5.0fs finalized=%8" PRIu64 " records=%10" PRIu64
           " window=%6.1f MiB rss=%6.1f MiB cpu=%5.1f s",
           now_s() - b->t0, b->steps_final, b->records,
           (double)st.bytes_in_use / 1048576.0, (double)rss_kib() / 1024.0,
           cpu_s());
    if (b->vectors) {
        printf(" vectors=%" PRIu64 " agg_refused=%" PRIu64, b->vectors,
               st.vectors_refused);
        if (b->store) {
            ss_store_stats ss;
            ss_store_get_stats(b->store, &ss);
            printf(" store_queued=%" PRIu64 " store_dropped=%" PRIu64,
                   ss.vectors_queued, ss.dropped_vectors);
        }
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    options o = {256, 2000, 0, 0, NULL, 0, 256, 0};
    static const struct option opts[] = {
        {"ranks", required_argument, NULL, 'r'},
        {"steps", required_argument, NULL, 's'},
        {"rate", required_argument, NULL, 'R'},
        {"seconds", required_argument, NULL, 'S'},
        {"store", required_argument, NULL, 'd'},
        {"vectors", required_argument, NULL, 'v'},
        {"vector-len", required_argument, NULL, 'l'},
        {"no-step-reading", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': o.ranks = (uint32_t)atoi(optarg); break;
        case 's': o.steps = (uint64_t)atoll(optarg); break;
        case 'R': o.rate = atof(optarg); break;
        case 'S': o.seconds = atof(optarg); break;
        case 'd': o.store_path = optarg; break;
        case 'v': o.vectors = (uint32_t)atoi(optarg); break;
        case 'l': o.vector_len = (uint32_t)atoi(optarg); break;
        case 'n': o.no_step_reading = 1; break;
        default:
            fprintf(stderr, "usage: bench_ingest [--ranks R] [--steps S] "
                    "[--rate STEPS_PER_S --seconds T] [--store PATH] "
                    "[--vectors N --vector-len L] [--no-step-reading]\n");
            return 2;
        }
    }
    if (o.ranks == 0 || (o.rate > 0 && o.seconds <= 0) ||
        o.vectors > 1000 || o.vector_len == 0 ||
        o.vector_len > WIRE_MAX_VALUES) {
        fprintf(stderr, "bench_ingest: bad options\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char path[108];
    snprintf(path, sizeof path, "/tmp/stepscope-bench-%d.sock", (int)getpid());
    unlink(path);

    bench b;
    memset(&b, 0, sizeof b);
    b.ranks = o.ranks;
    uv_loop_t loop;
    uv_loop_init(&loop);
    ss_aggregator_config acfg;
    ss_aggregator_config_defaults(&acfg);
    /* Unpaced, the generator (one process) fills one connection's socket
     * buffer (~160 records) before the next, so records arrive up to that
     * many steps apart whether they are read in step or not (a rank with
     * nothing unread is behind); the default window, 1024 steps while
     * their rows fit its budget, covers it.  Real ranks send their records
     * as their steps end. */
    b.agg = ss_aggregator_create(&acfg, o.ranks, 0,
                                 &(ss_sink){&b, sink_step, sink_finding});
    char err[256];
    if (o.store_path) {
        ss_store_config scfg;
        ss_store_config_defaults(&scfg);
        b.store = ss_store_open(o.store_path, &scfg, 1, err, sizeof err);
        if (!b.store) {
            fprintf(stderr, "bench_ingest: %s\n", err);
            return 1;
        }
    }
    ss_ingest_config icfg = {.unix_path = path, .run_id = k_run};
    /* read in step as `stepscope run` reads (half the window); without,
     * with --no-step-reading */
    icfg.max_lead_steps =
        o.no_step_reading ? 0 : ss_aggregator_sure_window(&acfg) / 2;
    memcpy(icfg.token, k_token, sizeof k_token);
    ss_ingest_callbacks cb = {.ctx = &b, .intern = b_intern, .on_step = b_step,
                              .on_disconnect = b_disconnect,
                              .on_rejected = b_rejected};
    b.ingest = ss_ingest_start(&loop, &icfg, &cb, err, sizeof err);
    if (!b.ingest) {
        fprintf(stderr, "bench_ingest: %s\n", err);
        return 1;
    }
    pid_t child = fork();
    if (child == 0)
        _exit(generate(path, &o));
    b.t0 = now_s();
    uv_timer_init(&loop, &b.report);
    b.report.data = &b;
    if (o.rate > 0)
        uv_timer_start(&b.report, on_report, 5000, 5000);
    else
        uv_unref((uv_handle_t *)&b.report);
    printf("bench_ingest: %u ranks, %s\n", o.ranks,
           o.rate > 0 ? "paced" : "unpaced");
    uv_run(&loop, UV_RUN_DEFAULT);
    int status = 0;
    waitpid(child, &status, 0);
    double secs = b.last_final - b.first_record;
    ss_aggregator_stats st;
    ss_aggregator_get_stats(b.agg, &st);
    printf("records %" PRIu64 " (refused %" PRIu64 "), finalized steps %" PRIu64
           ", forced %" PRIu64 ", %.3f s: %.0f records/s "
           "through aggregation\n",
           b.records, st.refused, b.steps_final, st.forced_steps, secs,
           secs > 0 ? (double)b.records / secs : 0.0);
    printf("controller RSS %.1f MiB, window %.1f MiB, CPU %.1f s over "
           "%.1f s\n", (double)rss_kib() / 1024.0,
           (double)st.bytes_in_use / 1048576.0, cpu_s(), now_s() - b.t0);
    if (b.vectors)
        printf("vectors: %" PRIu64 " received, %" PRIu64 " refused by the "
               "aggregator (over its budget)\n", b.vectors,
               st.vectors_refused);
    if (b.store) {
        double t = now_s();
        ss_store_flush(b.store);
        ss_store_stats ss;
        ss_store_get_stats(b.store, &ss);
        printf("store: %" PRIu64 " items written, %" PRIu64
               " rank-steps dropped, final flush %.2f s\n",
               ss.written, ss.dropped_rank_steps, now_s() - t);
        if (b.vectors)
            printf("store vectors: %" PRIu64 " queued, %" PRIu64 " dropped "
                   "at the full vector queue\n", ss.vectors_queued,
                   ss.dropped_vectors);
        ss_store_close(b.store);
    }
    ss_aggregator_destroy(b.agg);
    uv_loop_close(&loop);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
