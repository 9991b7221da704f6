/*
 * ss_allreduce.c - a small data-parallel "training" job in C, instrumented
 * with libstepscope, whose ranks do real work and really synchronize.
 *
 *   stepscope run -n 4 -- build/examples/ss_allreduce --steps 200
 *
 * Every rank fits the same toy model (a weight vector pulled towards noisy
 * samples of a fixed target).  One step is four phases:
 *   data       produce a batch: fill a vector from a cheap PRNG
 *   compute    real floating-point work (matrix multiplies, about
 *              --compute-ms, calibrated once by rank 0) and the local
 *              gradient
 *   allreduce  ss_sync() at arrival, write the gradient into this rank's
 *              slot of a shared-memory segment, barrier, sum every slot,
 *              barrier: a real all-reduce, so a slow rank makes every other
 *              rank wait here, as in NCCL/Gloo data parallel training
 *   optimizer  apply the mean gradient
 * then ss_memory_sample() and ss_metric("loss").  Faults can be injected per
 * rank (stragglers, data stalls, memory creep and spikes, crashes, a rank
 * without telemetry) to see what stepscope says about them; see
 * examples/README.md.
 *
 * The ranks find each other through a POSIX shared-memory segment named from
 * MASTER_PORT and the user id; rank 0 listens on MASTER_PORT while it runs,
 * as torch's rendezvous store does, so that no other job on this host is
 * given the same port (and segment) meanwhile.  The barrier is a process-shared
 * counter + generation on a futex with a timeout, so when a peer dies the
 * others exit with a clear message instead of hanging forever.
 *
 * Exit status: 0 done, 1 setup error, 2 bad usage, 3 injected crash,
 * 4 a peer stopped answering (barrier timeout).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stepscope.h"

#define PROG "ss_allreduce"
#define MAX_FAULTS 16
#define MAX_WORLD 4096
#define MAT 48                 /* the compute phase multiplies MAT x MAT */
#define SHM_MAGIC 0x53534152u  /* "SSAR": the segment is initialised */
#define LEARNING_RATE 0.2
#define MAX(a, b) ((a) > (b) ? (a) : (b))

enum { EXIT_SETUP = 1, EXIT_USAGE = 2, EXIT_CRASH = 3, EXIT_PEER_LOST = 4 };

/* ---- options ---- */

typedef struct { int rank; double ms; int in_data; } straggler_opt;
typedef struct { int rank; uint64_t every; double ms; } stall_opt;
typedef struct { int rank; uint64_t bytes; } creep_opt;
typedef struct { int rank; uint64_t step, bytes; } spike_opt;
typedef struct { int rank; uint64_t step; } step_fault_opt; /* crash, stop */

typedef struct {
    uint64_t steps;
    double compute_ms;
    uint64_t vector;
    uint64_t seed;
    uint64_t checkpoint_every;
    double timeout_s;
    int crash_signal; /* 0: a crash is exit(3) */
    straggler_opt straggler[MAX_FAULTS];
    stall_opt stall[MAX_FAULTS];
    creep_opt creep[MAX_FAULTS];
    spike_opt spike[MAX_FAULTS];
    step_fault_opt crash[MAX_FAULTS], stop[MAX_FAULTS];
    int no_telemetry[MAX_FAULTS];
    int n_straggler, n_stall, n_creep, n_spike, n_crash, n_stop,
        n_no_telemetry;
} options;

static void usage(FILE *to)
{
    fprintf(to,
"usage: " PROG " [OPTIONS]\n"
"\n"
"A data-parallel toy training job whose ranks compute and all-reduce a\n"
"gradient through shared memory every step, instrumented with stepscope.\n"
"Run it under a launcher that sets RANK, WORLD_SIZE and MASTER_PORT:\n"
"  stepscope run -n 4 -- " PROG " --steps 200\n"
"Without RANK and WORLD_SIZE it runs as a single rank.\n"
"\n"
"Workload:\n"
"  --steps N              steps to run (default 100; steps count from 1)\n"
"  --compute-ms MS        compute time per step, calibrated (default 10)\n"
"  --vector N             gradient length in doubles (default 4096)\n"
"  --seed N               PRNG seed (default 1)\n"
"  --checkpoint-every K   record a checkpoint after every K-th step\n"
"  --timeout SEC          give up when peers do not arrive (default 30)\n"
"\n"
"Faults (RANK is a rank number; each option may be repeated):\n"
"  --straggler RANK:MS[:PHASE]   MS extra busy work per step in PHASE\n"
"                                (compute, the default, or data)\n"
"  --data-stall RANK:EVERY:MS    sleep MS in the data phase of every\n"
"                                EVERY-th step\n"
"  --memory-creep RANK:BYTES     allocate and keep BYTES more every step\n"
"  --memory-spike RANK:STEP:BYTES  allocate BYTES at STEP, free them at\n"
"                                the next step\n"
"  --crash RANK:STEP             exit with status 3 during STEP\n"
"  --crash-signal[=SIG]          crash by a signal instead: ABRT (the\n"
"                                default, via abort()), SEGV, BUS, FPE,\n"
"                                ILL or KILL\n"
"  --stop RANK:STEP              stop itself (SIGSTOP) past STEP's\n"
"                                all-reduce, until continued (SIGCONT):\n"
"                                frozen from outside, its peers gone on\n"
"  --no-telemetry RANK           that rank never starts stepscope\n"
"BYTES takes a K, M or G suffix (powers of 1024).\n"
"  -h, --help                    this text\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(" PROG " --help lists the options)\n");
    exit(EXIT_USAGE);
}

/* Parses a whole unsigned decimal number; 0 on success. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_ms(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0) || v > 3600e3)
        return -1;
    *out = v;
    return 0;
}

static int parse_bytes(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    }
    if (errno || *end || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Splits a copy of SPEC at ':' into at most MAX fields; returns the count. */
static int split(const char *spec, char *copy, size_t copylen, char **field,
                 int max)
{
    snprintf(copy, copylen, "%s", spec);
    int n = 0;
    char *p = copy;
    while (n < max) {
        field[n++] = p;
        p = strchr(p, ':');
        if (!p)
            return n;
        *p++ = '\0';
    }
    return n + 1; /* too many fields */
}

static int parse_rank(const char *s, int *rank)
{
    uint64_t v;
    if (parse_u64(s, &v) < 0 || v >= MAX_WORLD)
        return -1;
    *rank = (int)v;
    return 0;
}

static int parse_signal(const char *s)
{
    static const struct { const char *name; int sig; } sigs[] = {
        {"ABRT", SIGABRT}, {"SEGV", SIGSEGV}, {"BUS", SIGBUS},
        {"FPE", SIGFPE}, {"ILL", SIGILL}, {"KILL", SIGKILL}};
    if (!s)
        return SIGABRT;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (strcmp(s, sigs[i].name) == 0)
            return sigs[i].sig;
    die_usage("--crash-signal: unknown signal '%s' (ABRT, SEGV, BUS, FPE, "
              "ILL, KILL)", s);
}

/* Parses one fault option NAME=SPEC into O. */
static void parse_fault(options *o, const char *name, const char *spec)
{
    char copy[256], *f[4] = {0};
    int n = split(spec, copy, sizeof copy, f, 3);
    if (strcmp(name, "straggler") == 0) {
        straggler_opt *s = &o->straggler[o->n_straggler];
        if (o->n_straggler >= MAX_FAULTS || n < 2 || n > 3 ||
            parse_rank(f[0], &s->rank) < 0 || parse_ms(f[1], &s->ms) < 0 ||
            (n == 3 && strcmp(f[2], "compute") && strcmp(f[2], "data")))
            die_usage("--straggler: expected RANK:MS[:compute|data], got '%s'",
                      spec);
        s->in_data = n == 3 && strcmp(f[2], "data") == 0;
        o->n_straggler++;
    } else if (strcmp(name, "data-stall") == 0) {
        stall_opt *s = &o->stall[o->n_stall];
        if (o->n_stall >= MAX_FAULTS || n != 3 ||
            parse_rank(f[0], &s->rank) < 0 || parse_u64(f[1], &s->every) < 0 ||
            s->every == 0 || parse_ms(f[2], &s->ms) < 0)
            die_usage("--data-stall: expected RANK:EVERY:MS (EVERY >= 1), "
                      "got '%s'", spec);
        o->n_stall++;
    } else if (strcmp(name, "memory-creep") == 0) {
        creep_opt *c = &o->creep[o->n_creep];
        if (o->n_creep >= MAX_FAULTS || n != 2 ||
            parse_rank(f[0], &c->rank) < 0 || parse_bytes(f[1], &c->bytes) < 0)
            die_usage("--memory-creep: expected RANK:BYTES, got '%s'", spec);
        o->n_creep++;
    } else if (strcmp(name, "memory-spike") == 0) {
        spike_opt *s = &o->spike[o->n_spike];
        if (o->n_spike >= MAX_FAULTS || n != 3 ||
            parse_rank(f[0], &s->rank) < 0 || parse_u64(f[1], &s->step) < 0 ||
            parse_bytes(f[2], &s->bytes) < 0)
            die_usage("--memory-spike: expected RANK:STEP:BYTES, got '%s'",
                      spec);
        o->n_spike++;
    } else if (strcmp(name, "crash") == 0 || strcmp(name, "stop") == 0) {
        int crash = strcmp(name, "crash") == 0;
        int *count = crash ? &o->n_crash : &o->n_stop;
        step_fault_opt *c = crash ? &o->crash[*count] : &o->stop[*count];
        if (*count >= MAX_FAULTS || n != 2 ||
            parse_rank(f[0], &c->rank) < 0 || parse_u64(f[1], &c->step) < 0)
            die_usage("--%s: expected RANK:STEP, got '%s'", name, spec);
        (*count)++;
    } else { /* no-telemetry */
        if (o->n_no_telemetry >= MAX_FAULTS ||
            parse_rank(spec, &o->no_telemetry[o->n_no_telemetry]) < 0)
            die_usage("--no-telemetry: expected RANK, got '%s'", spec);
        o->n_no_telemetry++;
    }
}

static void parse_options(options *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"steps", required_argument, NULL, 's'},
        {"compute-ms", required_argument, NULL, 'c'},
        {"vector", required_argument, NULL, 'v'},
        {"seed", required_argument, NULL, 'S'},
        {"checkpoint-every", required_argument, NULL, 'k'},
        {"timeout", required_argument, NULL, 't'},
        {"straggler", required_argument, NULL, 'F'},
        {"data-stall", required_argument, NULL, 'F'},
        {"memory-creep", required_argument, NULL, 'F'},
        {"memory-spike", required_argument, NULL, 'F'},
        {"crash", required_argument, NULL, 'F'},
        {"stop", required_argument, NULL, 'F'},
        {"no-telemetry", required_argument, NULL, 'F'},
        {"crash-signal", optional_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->steps = 100;
    o->compute_ms = 10;
    o->vector = 4096;
    o->seed = 1;
    o->timeout_s = 30;
    opterr = 0;
    int c, idx;
    while ((c = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        switch (c) {
        case 's':
            if (parse_u64(optarg, &o->steps) < 0 || o->steps == 0)
                die_usage("--steps: expected a number >= 1, got '%s'", optarg);
            break;
        case 'c':
            if (parse_ms(optarg, &o->compute_ms) < 0)
                die_usage("--compute-ms: expected milliseconds >= 0, got '%s'",
                          optarg);
            break;
        case 'v':
            if (parse_u64(optarg, &o->vector) < 0 || o->vector == 0 ||
                o->vector > (1u << 24))
                die_usage("--vector: expected 1..16777216, got '%s'", optarg);
            break;
        case 'S':
            if (parse_u64(optarg, &o->seed) < 0)
                die_usage("--seed: expected a number, got '%s'", optarg);
            break;
        case 'k':
            if (parse_u64(optarg, &o->checkpoint_every) < 0 ||
                o->checkpoint_every == 0)
                die_usage("--checkpoint-every: expected a number >= 1, got '%s'",
                          optarg);
            break;
        case 't': {
            double ms;
            if (parse_ms(optarg, &ms) < 0 || ms <= 0)
                die_usage("--timeout: expected seconds > 0, got '%s'", optarg);
            o->timeout_s = ms;
            break;
        }
        case 'F':
            parse_fault(o, longopts[idx].name, optarg);
            break;
        case 'x':
            o->crash_signal = parse_signal(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case ':':
            die_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt == 'h') /* the only option without a value */
                die_usage("option '%s' takes no value", argv[optind - 1]);
            die_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument '%s'", argv[optind]);
}

/* ---- time and busy work ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1e3),
                          (long)(fmod(ms, 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The compute kernel: C += A * B for MAT x MAT matrices. */
typedef struct {
    double a[MAT * MAT], b[MAT * MAT], c[MAT * MAT];
} matrices;

static volatile double work_sink; /* keeps the results observable */

static void matmul(matrices *m)
{
    for (int i = 0; i < MAT; i++)
        for (int k = 0; k < MAT; k++) {
            double aik = m->a[i * MAT + k];
            for (int j = 0; j < MAT; j++)
                m->c[i * MAT + j] += aik * m->b[k * MAT + j];
        }
    work_sink += m->c[(int)(m->c[0] != 0) * (MAT + 1)];
}

/* Real work (not a sleep) until MS milliseconds have passed. */
static void busy_for(matrices *m, double ms)
{
    double until = now_ms() + ms;
    while (now_ms() < until)
        matmul(m);
}

/* Matrix multiplies per step for about COMPUTE_MS: after a warm-up, the
 * fastest of three ~20 ms measurements (the others were disturbed). */
static uint64_t calibrate(matrices *m, double compute_ms)
{
    if (compute_ms <= 0)
        return 0;
    busy_for(m, 20);
    double per = INFINITY;
    for (int round = 0; round < 3; round++) {
        uint64_t n = 0;
        double t0 = now_ms(), t;
        do {
            matmul(m);
            n++;
        } while ((t = now_ms() - t0) < 20);
        per = fmin(per, t / (double)n);
    }
    uint64_t reps = (uint64_t)(compute_ms / per + 0.5);
    return reps ? reps : 1;
}

/* ---- PRNG (splitmix64) ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-0.5, 0.5). */
static double noise(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1.0p-53 - 0.5;
}

/* ---- shared memory and the barrier ---- */

typedef struct {
    uint32_t magic;       /* SHM_MAGIC once rank 0 initialised the rest */
    uint32_t world;
    uint64_t vector;
    int32_t creator;      /* rank 0's pid */
    uint64_t reps;        /* matrix multiplies per step (rank 0 calibrated) */
    /* the barrier: arrivals in this generation, and the generation, which
     * is the futex word */
    uint32_t waiting;
    uint32_t generation;
    uint32_t broken;      /* 1 + the rank that timed out, 0 while healthy */
    double slots[];       /* world x vector: each rank's gradient */
} shm_seg;

typedef struct {
    shm_seg *seg;
    size_t size;
    char name[64];
    int rank;
    double timeout_s;
} shm_job;

static size_t seg_size(uint32_t world, uint64_t vector)
{
    return sizeof(shm_seg) + (size_t)world * vector * sizeof(double);
}

static long futex(uint32_t *word, int op, uint32_t val,
                  const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

/*
 * Waits until every rank has arrived.  Returns 0, or -1 when a rank waited
 * TIMEOUT_S without the others arriving (or another rank gave up): then the
 * barrier is broken for everyone and *WHO is the rank that timed out.
 */
static int barrier_wait(shm_job *j, int *who)
{
    shm_seg *s = j->seg;
    uint32_t gen = __atomic_load_n(&s->generation, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&s->waiting, 1, __ATOMIC_ACQ_REL) == s->world) {
        __atomic_store_n(&s->waiting, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->generation, 1, __ATOMIC_RELEASE);
        futex(&s->generation, FUTEX_WAKE, INT_MAX, NULL);
        return 0;
    }
    double deadline = now_ms() + j->timeout_s * 1e3;
    while (__atomic_load_n(&s->generation, __ATOMIC_ACQUIRE) == gen) {
        uint32_t broken = __atomic_load_n(&s->broken, __ATOMIC_ACQUIRE);
        if (broken) {
            *who = (int)broken - 1;
            return -1;
        }
        double left = deadline - now_ms();
        if (left <= 0) {
            uint32_t mine = (uint32_t)j->rank + 1, none = 0;
            __atomic_compare_exchange_n(&s->broken, &none, mine, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            futex(&s->generation, FUTEX_WAKE, INT_MAX, NULL);
            *who = (int)__atomic_load_n(&s->broken, __ATOMIC_ACQUIRE) - 1;
            return -1;
        }
        struct timespec ts = {(time_t)(left / 1e3),
                              (long)(fmod(left, 1e3) * 1e6)};
        futex(&s->generation, FUTEX_WAIT, gen, &ts);
    }
    return 0;
}

/* Exits with EXIT_PEER_LOST after a broken barrier, saying why. */
static void peer_lost(const shm_job *j, int who, const char *where)
    __attribute__((noreturn));

static void peer_lost(const shm_job *j, int who, const char *where)
{
    uint32_t arrived = __atomic_load_n(&j->seg->waiting, __ATOMIC_ACQUIRE);
    if (who == j->rank)
        fprintf(stderr, PROG ": rank %d: gave up %s after %.0f s: only %u of "
                "%u ranks arrived; a peer probably died or hangs\n",
                j->rank, where, j->timeout_s, arrived, j->seg->world);
    else
        fprintf(stderr, PROG ": rank %d: rank %d gave up waiting for its peers "
                "%s; stopping too\n", j->rank, who, where);
    if (j->rank == 0)
        shm_unlink(j->name);
    exit(EXIT_PEER_LOST);
}

static int pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Rank 0: creates and initialises the segment, replacing a stale one. */
static int shm_create(shm_job *j, uint32_t world, uint64_t vector,
                      uint64_t reps)
{
    int fd = shm_open(j->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) { /* left over by a dead run */
        shm_unlink(j->name);
        fd = shm_open(j->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0) {
        fprintf(stderr, PROG ": rank 0: shm_open(%s): %s\n", j->name,
                strerror(errno));
        return -1;
    }
    if (ftruncate(fd, (off_t)j->size) < 0) {
        fprintf(stderr, PROG ": rank 0: ftruncate(%s, %zu): %s\n", j->name,
                j->size, strerror(errno));
        close(fd);
        shm_unlink(j->name);
        return -1;
    }
    j->seg = mmap(NULL, j->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (j->seg == MAP_FAILED) {
        fprintf(stderr, PROG ": rank 0: mmap(%s): %s\n", j->name,
                strerror(errno));
        shm_unlink(j->name);
        return -1;
    }
    j->seg->world = world;
    j->seg->vector = vector;
    j->seg->creator = (int32_t)getpid();
    j->seg->reps = reps;
    __atomic_store_n(&j->seg->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

/* Other ranks: wait (up to the timeout) for rank 0's segment and map it. */
static int shm_attach(shm_job *j, uint32_t world, uint64_t vector)
{
    double deadline = now_ms() + j->timeout_s * 1e3;
    const char *waiting_for = "to create it";
    for (; now_ms() < deadline; sleep_ms(5)) {
        int fd = shm_open(j->name, O_RDWR, 0);
        if (fd < 0) {
            if (errno == ENOENT)
                continue;
            fprintf(stderr, PROG ": rank %d: shm_open(%s): %s\n", j->rank,
                    j->name, strerror(errno));
            return -1;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(shm_seg)) {
            close(fd); /* rank 0 has not sized it yet */
            waiting_for = "to size it";
            continue;
        }
        shm_seg *seg = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
        close(fd);
        if (seg == MAP_FAILED) {
            fprintf(stderr, PROG ": rank %d: mmap(%s): %s\n", j->rank, j->name,
                    strerror(errno));
            return -1;
        }
        if (__atomic_load_n(&seg->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC) {
            munmap(seg, (size_t)st.st_size);
            waiting_for = "to initialise it";
            continue;
        }
        if (!pid_alive(seg->creator)) { /* a stale segment: rank 0 replaces it */
            munmap(seg, (size_t)st.st_size);
            waiting_for = "to replace a stale one";
            continue;
        }
        if (seg->world != world || seg->vector != vector ||
            (size_t)st.st_size != j->size) {
            fprintf(stderr, PROG ": rank %d: rank 0 uses WORLD_SIZE %u and "
                    "--vector %" PRIu64 ", this rank %u and %" PRIu64
                    ": give every rank the same options\n", j->rank,
                    seg->world, seg->vector, world, vector);
            munmap(seg, (size_t)st.st_size);
            return -1;
        }
        j->seg = seg;
        return 0;
    }
    fprintf(stderr, PROG ": rank %d: waited %.0f s for rank 0 %s (shared "
            "memory /dev/shm%s); is rank 0 running with the same MASTER_PORT?\n",
            j->rank, j->timeout_s, waiting_for, j->name);
    return -1;
}

/* Rank 0: listens on MASTER_PORT PORT on every address until the process
 * exits (the descriptor stays open; nobody connects), as torch's rendezvous
 * store does: a launcher that picks a free port for another job skips it,
 * so two jobs never meet in one segment.  Returns -1, said, when another
 * process holds the port. */
static int hold_master_port(const char *port)
{
    char *end;
    long n = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || n < 1 || n > 65535)
        return 0; /* no port: a single rank named by its pid */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0; /* nothing to hold it with: the segment's name still works */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)n),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    /* listening: a port merely bound with SO_REUSEADDR is bound again by
     * whoever sets it too */
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1) < 0) {
        int e = errno;
        close(fd);
        if (e != EADDRINUSE)
            return 0;
        fprintf(stderr, PROG ": rank 0: MASTER_PORT %ld is in use by another "
                "process (another job's ranks would meet this job's); give "
                "the launcher another port\n", n);
        return -1;
    }
    return 0;
}

/* Sets up the job's segment; every rank returns with all ranks attached. */
static int shm_setup(shm_job *j, uint32_t world, uint64_t vector,
                     const char *port, uint64_t *reps)
{
    snprintf(j->name, sizeof j->name, "/ss_allreduce-%u-%s",
             (unsigned)getuid(), port);
    j->size = seg_size(world, vector);
    if (j->rank == 0 && hold_master_port(port) < 0)
        return -1;
    if (j->rank == 0 ? shm_create(j, world, vector, *reps)
                     : shm_attach(j, world, vector))
        return -1;
    *reps = j->seg->reps;
    int who;
    if (barrier_wait(j, &who) < 0) /* every rank has mapped it */
        peer_lost(j, who, "while the ranks were starting");
    if (j->rank == 0) /* everyone has it mapped: the name can go */
        shm_unlink(j->name);
    return 0;
}

/* ---- faults ---- */

typedef struct block {
    struct block *next;
} block;

/* Allocates BYTES and touches every page so they count in RSS. */
static block *alloc_touched(uint64_t bytes)
{
    if (bytes < sizeof(block))
        bytes = sizeof(block);
    block *b = malloc(bytes);
    if (!b) {
        fprintf(stderr, PROG ": out of memory allocating %" PRIu64 " bytes\n",
                bytes);
        exit(EXIT_SETUP);
    }
    memset(b, 0xA5, bytes);
    return b;
}

static void crash_now(int rank, uint64_t step, int sig)
{
    fprintf(stderr, PROG ": rank %d: injected crash at step %" PRIu64 "\n",
            rank, step);
    fflush(NULL);
    if (!sig)
        exit(EXIT_CRASH);
    if (sig == SIGABRT)
        abort();
    signal(sig, SIG_DFL);
    raise(sig);
    exit(EXIT_CRASH); /* a signal that did not kill us */
}

/* ---- main ---- */

static int env_int(const char *name, long min, long max, long *out)
{
    const char *s = getenv(name);
    uint64_t v;
    if (!s)
        return 0;
    if (parse_u64(s, &v) < 0 || (long)v < min || (long)v > max) {
        fprintf(stderr, PROG ": bad %s='%s' (expected %ld..%ld)\n", name, s,
                min, max);
        exit(EXIT_SETUP);
    }
    *out = (long)v;
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    parse_options(&o, argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a launcher's pipe now */

    long rank = 0, world = 1, port_num = 0;
    int has_rank = env_int("RANK", 0, MAX_WORLD - 1, &rank);
    int has_world = env_int("WORLD_SIZE", 1, MAX_WORLD, &world);
    if (has_rank != has_world) {
        fprintf(stderr, PROG ": RANK and WORLD_SIZE must be set together\n");
        return EXIT_SETUP;
    }
    if (rank >= world) {
        fprintf(stderr, PROG ": RANK=%ld but WORLD_SIZE=%ld\n", rank, world);
        return EXIT_SETUP;
    }
    char port[16];
    if (env_int("MASTER_PORT", 1, 65535, &port_num))
        snprintf(port, sizeof port, "%ld", port_num);
    else if (world == 1)
        snprintf(port, sizeof port, "pid%ld", (long)getpid());
    else {
        fprintf(stderr, PROG ": MASTER_PORT is not set; the ranks use it to "
                "find each other (run under stepscope run or torchrun)\n");
        return EXIT_SETUP;
    }
    if (!has_rank)
        fprintf(stderr, PROG ": RANK and WORLD_SIZE are not set: running a "
                "single rank\n");
    int fault_rank = -1;
    for (int i = 0; i < o.n_straggler; i++)
        fault_rank = MAX(fault_rank, o.straggler[i].rank);
    for (int i = 0; i < o.n_stall; i++)
        fault_rank = MAX(fault_rank, o.stall[i].rank);
    for (int i = 0; i < o.n_creep; i++)
        fault_rank = MAX(fault_rank, o.creep[i].rank);
    for (int i = 0; i < o.n_spike; i++)
        fault_rank = MAX(fault_rank, o.spike[i].rank);
    for (int i = 0; i < o.n_crash; i++)
        fault_rank = MAX(fault_rank, o.crash[i].rank);
    for (int i = 0; i < o.n_stop; i++)
        fault_rank = MAX(fault_rank, o.stop[i].rank);
    for (int i = 0; i < o.n_no_telemetry; i++)
        fault_rank = MAX(fault_rank, o.no_telemetry[i]);
    if (fault_rank >= world)
        die_usage("a fault names rank %d but WORLD_SIZE is %ld", fault_rank,
                  world);

    /* --no-telemetry: the recorder must not see the controller at all */
    for (int i = 0; i < o.n_no_telemetry; i++)
        if (o.no_telemetry[i] == rank)
            unsetenv("STEPSCOPE_ADDR");
    int rc = ss_init();
    if (rc < 0)
        fprintf(stderr, PROG ": rank %ld: telemetry disabled: %s\n", rank,
                ss_strerror(rc));

    /* This rank's faults, folded. */
    double straggle_compute = 0, straggle_data = 0;
    for (int i = 0; i < o.n_straggler; i++)
        if (o.straggler[i].rank == rank)
            *(o.straggler[i].in_data ? &straggle_data : &straggle_compute) +=
                o.straggler[i].ms;
    uint64_t creep_bytes = 0;
    for (int i = 0; i < o.n_creep; i++)
        if (o.creep[i].rank == rank)
            creep_bytes += o.creep[i].bytes;

    matrices *m = calloc(1, sizeof *m);
    double *x = malloc(o.vector * sizeof *x);      /* the batch */
    double *w = calloc(o.vector, sizeof *w);       /* the weights */
    double *grad = malloc(o.vector * sizeof *grad);
    double *ckpt = malloc(o.vector * sizeof *ckpt);
    if (!m || !x || !w || !grad || !ckpt) {
        fprintf(stderr, PROG ": out of memory\n");
        return EXIT_SETUP;
    }
    uint64_t seed = o.seed ^ 0x5EEDull;
    for (int i = 0; i < MAT * MAT; i++) {
        m->a[i] = noise(&seed) / MAT;
        m->b[i] = noise(&seed);
    }
    uint64_t reps = rank == 0 ? calibrate(m, o.compute_ms) : 0;

    shm_job job = {.rank = (int)rank, .timeout_s = o.timeout_s};
    if (shm_setup(&job, (uint32_t)world, o.vector, port, &reps) < 0)
        return EXIT_SETUP;
    if (rank == 0)
        printf("world size %ld, %" PRIu64 " steps, %" PRIu64 " matrix multiplies "
               "(%dx%d) per step for ~%.1f ms of compute, vector %" PRIu64 "\n",
               world, o.steps, reps, MAT, MAT, o.compute_ms, o.vector);

    const ss_name_id ph_data = SS_NAME("data"), ph_compute = SS_NAME("compute"),
                     ph_allreduce = SS_NAME("allreduce"),
                     ph_optimizer = SS_NAME("optimizer"),
                     ph_checkpoint = SS_NAME("checkpoint"),
                     sync_allreduce = SS_NAME("allreduce"),
                     metric_loss = SS_NAME("loss");
    block *kept = NULL, *spiked = NULL;
    uint64_t report_every = o.steps >= 10 ? o.steps / 10 : 1, reported = 0;
    double t_start = now_ms(), t_report = t_start, loss = 0;

    for (uint64_t step = 1; step <= o.steps; step++) {
        ss_step_begin(step);

        ss_phase_begin(ph_data);
        uint64_t s = o.seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank << 40) ^
                     step;
        for (uint64_t i = 0; i < o.vector; i++)
            x[i] = sin((double)i * 0.01) + noise(&s);
        for (int i = 0; i < o.n_stall; i++)
            if (o.stall[i].rank == rank && step % o.stall[i].every == 0)
                sleep_ms(o.stall[i].ms);
        if (straggle_data > 0)
            busy_for(m, straggle_data);
        ss_phase_end(ph_data);

        ss_phase_begin(ph_compute);
        for (int i = 0; i < o.n_crash; i++)
            if (o.crash[i].rank == rank && o.crash[i].step == step)
                crash_now((int)rank, step, o.crash_signal);
        for (int i = 0; i < MAT * MAT; i++)
            m->b[i] = x[(uint64_t)i % o.vector];
        for (uint64_t r = 0; r < reps; r++)
            matmul(m);
        if (straggle_compute > 0)
            busy_for(m, straggle_compute);
        double sq = 0;
        for (uint64_t i = 0; i < o.vector; i++) {
            grad[i] = w[i] - x[i];
            sq += grad[i] * grad[i];
        }
        loss = 0.5 * sq / (double)o.vector;
        ss_phase_end(ph_compute);

        ss_phase_begin(ph_allreduce);
        ss_sync(sync_allreduce);
        memcpy(job.seg->slots + (uint64_t)rank * o.vector, grad,
               o.vector * sizeof *grad);
        int who;
        char where[64];
        snprintf(where, sizeof where, "at the all-reduce of step %" PRIu64,
                 step);
        if (barrier_wait(&job, &who) < 0)
            peer_lost(&job, who, where);
        for (uint64_t i = 0; i < o.vector; i++) {
            double sum = 0;
            for (long r = 0; r < world; r++)
                sum += job.seg->slots[(uint64_t)r * o.vector + i];
            grad[i] = sum / (double)world;
        }
        if (barrier_wait(&job, &who) < 0) /* before slots are reused */
            peer_lost(&job, who, where);
        ss_phase_end(ph_allreduce);

        ss_phase_begin(ph_optimizer);
        for (int i = 0; i < o.n_stop; i++)
            if (o.stop[i].rank == rank && o.stop[i].step == step)
                raise(SIGSTOP);
        for (uint64_t i = 0; i < o.vector; i++)
            w[i] -= LEARNING_RATE * grad[i];
        ss_phase_end(ph_optimizer);

        if (spiked) {
            free(spiked);
            spiked = NULL;
        }
        for (int i = 0; i < o.n_spike; i++)
            if (o.spike[i].rank == rank && o.spike[i].step == step && !spiked)
                spiked = alloc_touched(o.spike[i].bytes);
        if (creep_bytes > 0) {
            block *b = alloc_touched(creep_bytes);
            b->next = kept;
            kept = b;
        }
        ss_memory_sample();
        ss_metric(metric_loss, loss);

        if (o.checkpoint_every && step % o.checkpoint_every == 0) {
            ss_phase_begin(ph_checkpoint);
            memcpy(ckpt, w, o.vector * sizeof *w);
            ss_checkpoint_saved(step);
            ss_phase_end(ph_checkpoint);
        }
        ss_step_end();

        if (rank == 0 && (step % report_every == 0 || step == o.steps)) {
            double t = now_ms();
            printf("step %" PRIu64 "/%" PRIu64 ": loss %.5f, %.1f ms/step\n",
                   step, o.steps, loss,
                   (t - t_report) / (double)(step - reported));
            t_report = t;
            reported = step;
        }
    }
    double total = now_ms() - t_start;
    printf("rank %ld: done: %" PRIu64 " steps in %.2f s (%.2f ms/step), final "
           "loss %.5f\n", rank, o.steps, total / 1e3, total / (double)o.steps,
           loss);

    while (kept) {
        block *next = kept->next;
        free(kept);
        kept = next;
    }
    free(spiked);
    munmap(job.seg, job.size);
    free(m);
    free(x);
    free(w);
    free(grad);
    free(ckpt);
    return 0;
}
