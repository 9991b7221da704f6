/*
 * bench_store.c - how many rank-step rows per second the store keeps.
 *
 * Writes STEPS finalized steps of RANKS ranks (each with PHASES phases and
 * their first begins, one sync arrival, the step's begin, RSS and device
 * memory; with --host also the host evidence of each rank-step) through
 * the public store API into a new temporary
 * file, with the default retention tiers unless --keep-all, and reports
 * rows/s from the first put to the end of ss_store_flush, the controller-side
 * cost of one ss_store_put_step, rows kept and bytes on disk per kept row.
 * The producer waits while the queue is over half full, so the number is
 * the writer's sustained rate, not a count of drops (which it also prints).
 *
 *   bench_store [-r RANKS] [-s STEPS] [-p PHASES] [--keep-all] [--host]
 *               [--db PATH] [--pg URI [--writers N]]
 *
 * The target is >= 200,000 rows/s (docs/store.md).
 *
 * With --pg URI (a team database, docs/store.md "A team's store"; use a
 * scratch database: the copies stay there), the run just written is then
 * copied into PostgreSQL the way `stepscope push` and the copier of `run
 * --db postgresql://...` copy runs (pg_copy.c: COPY in 1 MiB chunks, one
 * transaction), first by one writer, then by N writers at once (default
 * 8), each copying its own copy of the run (the SQLite file duplicated,
 * its uuid changed): rank-step rows/s of each writer and of all together,
 * beside SQLite's figure above.  The goal is >= 100,000 rows/s from one
 * writer.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pg_conn.h"
#include "pg_copy.h"
#include "pg_schema.h"
#include "store.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

static long long count_rows(ss_store *s, const char *sql)
{
    sqlite3_stmt *q = NULL;
    long long n = -1;
    if (sqlite3_prepare_v2(ss_store_db(s), sql, -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return n;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_store [-r RANKS] [-s STEPS] [-p PHASES] "
                    "[--keep-all] [--host] [--db PATH] [--pg URI "
                    "[--writers N]]\n");
}

/* One writer of the PostgreSQL mode: copies the run of its own SQLite
 * file into the team database. */
typedef struct {
    const char *uri;
    char path[4200];
    double seconds, cpu; /* wall, and this writer's thread CPU time */
    double server_cpu;   /* its server process's CPU time (a local server
                          * whose /proc this user reads), or -1 */
    int64_t rows;
    int failed;
    char err[512];
} pg_writer;

/* The CPU time (user + system) of process PID, from /proc; -1 when it
 * cannot be read (a server on another host or of another user). */
static double proc_cpu_s(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The pid of C's server process. */
static long server_pid(ss_pg *c)
{
    return (long)ss_pg_backend_pid(c);
}

static void *pg_write(void *arg)
{
    pg_writer *w = arg;
    sqlite3 *src = NULL;
    ss_pg *c = ss_pg_connect(w->uri, w->err, sizeof w->err);
    w->failed = 1;
    long spid = c ? server_pid(c) : 0;
    double s0 = spid > 0 ? proc_cpu_s(spid) : -1;
    if (c && sqlite3_open_v2(w->path, &src, SQLITE_OPEN_READONLY, NULL) ==
                 SQLITE_OK) {
        ss_pg_push_result res;
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double t0 = now_s();
        if (ss_pg_push_run(c, src, 1, 0, NULL, &res, w->err,
                           sizeof w->err) == 0) {
            w->seconds = now_s() - t0;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            w->cpu = (double)(c1.tv_sec - c0.tv_sec) +
                     (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
            double s1 = s0 >= 0 ? proc_cpu_s(spid) : -1;
            w->server_cpu = s1 >= 0 ? s1 - s0 : -1;
            w->rows = res.rows;
            w->failed = 0;
        }
    }
    sqlite3_close(src);
    ss_pg_close(c);
    return NULL;
}

/* Writes a copy of the store FROM to TO (VACUUM INTO) and gives its run
 * the uuid UUID.  Returns 0 or -1. */
static int clone_store(const char *from, const char *to, const char *uuid)
{
    sqlite3 *db = NULL;
    char *sql = sqlite3_mprintf("VACUUM INTO %Q", to);
    int rc = sql && sqlite3_open(from, &db) == SQLITE_OK &&
                     sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK
                 ? 0
                 : -1;
    sqlite3_free(sql);
    sqlite3_close(db);
    db = NULL;
    sql = sqlite3_mprintf("UPDATE runs SET uuid = %Q", uuid);
    if (rc == 0 && (!sql || sqlite3_open(to, &db) != SQLITE_OK ||
                    sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK))
        rc = -1;
    sqlite3_free(sql);
    sqlite3_close(db);
    return rc;
}

/* Copies the run of the SQLite store PATH (KEPT rank-step rows) into URI
 * by 1 writer, then by WRITERS at once, and prints the rates. */
static int pg_bench(const char *path, const char *uri, int writers,
                    long long kept)
{
    char err[512];
    ss_pg *c = ss_pg_connect(uri, err, sizeof err);
    if (!c || ss_pg_schema_migrate(c, err, sizeof err) < 0) {
        fprintf(stderr, "bench_store: %s\n", err);
        ss_pg_close(c);
        return 1;
    }
    ss_pg_close(c);
    pg_writer *w = calloc((size_t)writers, sizeof *w);
    pthread_t *t = calloc((size_t)writers, sizeof *t);
    if (!w || !t)
        return 1;
    int status = 0;
    for (int round = 0; round < 2 && status == 0; round++) {
        int n = round == 0 ? 1 : writers;
        for (int i = 0; i < n; i++) {
            char uuid[96];
            snprintf(uuid, sizeof uuid, "bench-%ld-%d-%d-%d", (long)getpid(),
                     (int)time(NULL), round, i);
            w[i] = (pg_writer){.uri = uri};
            snprintf(w[i].path, sizeof w[i].path, "%s.w%d", path, i);
            if (clone_store(path, w[i].path, uuid) != 0) {
                fprintf(stderr, "bench_store: cannot copy %s\n", path);
                return 1;
            }
        }
        double t0 = now_s();
        for (int i = 0; i < n; i++)
            pthread_create(&t[i], NULL, pg_write, &w[i]);
        double slowest = 0, sum_rate = 0, cpu = 0, server_cpu = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            if (w[i].failed) {
                fprintf(stderr, "bench_store: writer %d: %s\n", i,
                        w[i].err);
                status = 1;
            } else {
                sum_rate += (double)kept / w[i].seconds;
                cpu += w[i].cpu;
                server_cpu = server_cpu < 0 || w[i].server_cpu < 0
                                 ? -1
                                 : server_cpu + w[i].server_cpu;
                if (w[i].seconds > slowest)
                    slowest = w[i].seconds;
            }
            unlink(w[i].path);
        }
        double wall = now_s() - t0;
        if (status == 0)
            printf("  PostgreSQL, %d writer%s at once: %lld rank-step rows "
                   "each (%" PRId64 " rows in all tables) in %.2f s "
                   "(slowest) = %.0f rank-step rows/s per writer (mean), "
                   "%.0f rows/s together; CPU per writer: %.2f s its "
                   "own, %.2f s its server process's (%.0f rows/s per "
                   "core of it)\n",
                   n, n == 1 ? "" : "s", kept, w[0].rows, slowest,
                   sum_rate / n, (double)kept * n / wall, cpu / n,
                   server_cpu / n,
                   server_cpu > 0 ? (double)kept * n / server_cpu : NAN);
    }
    free(w);
    free(t);
    return status;
}

int main(int argc, char **argv)
{
    uint32_t ranks = 256, steps = 2000, n_phases = 4;
    int keep_all = 0, with_host = 0;
    const char *db_arg = NULL, *pg_uri = NULL;
    int writers = 8;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            ranks = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            steps = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-p") == 0 && i + 1 < argc)
            n_phases = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--host") == 0)
            with_host = 1;
        else if (strcmp(argv[i], "--keep-all") == 0)
            keep_all = 1;
        else if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            db_arg = argv[++i];
        else if (strcmp(argv[i], "--pg") == 0 && i + 1 < argc)
            pg_uri = argv[++i];
        else if (strcmp(argv[i], "--writers") == 0 && i + 1 < argc)
            writers = atoi(argv[++i]);
        else {
            usage();
            return 2;
        }
    }
    if (ranks == 0 || steps == 0 || n_phases > 16 || writers < 1 ||
        writers > 64 || (pg_uri && !ss_pg_is_uri(pg_uri))) {
        usage();
        return 2;
    }

    char path[4096], dir[1024] = "";
    if (db_arg) {
        snprintf(path, sizeof path, "%s", db_arg);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/bench_store.XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(path, sizeof path, "%s/bench.db", dir);
    }

    ss_store_config cfg;
    ss_store_config_defaults(&cfg);
    if (keep_all)
        cfg.recent_steps = 0;
    char err[512];
    ss_store *s = ss_store_open(path, &cfg, 1, err, sizeof err);
    if (!s) {
        fprintf(stderr, "bench_store: %s\n", err);
        return 1;
    }
    ss_run_info info = {.world_size = ranks, .started_at = 1};
    snprintf(info.uuid, sizeof info.uuid, "bench");
    snprintf(info.name, sizeof info.name, "bench_store");
    int64_t run_id;
    if (ss_store_begin_run(s, &info, &run_id, err, sizeof err) != 0) {
        fprintf(stderr, "bench_store: %s\n", err);
        return 1;
    }

    static const char *const phase_names[] = {
        "data", "forward", "backward", "optimizer", "p4", "p5", "p6", "p7",
        "p8", "p9", "p10", "p11", "p12", "p13", "p14", "p15", "allreduce"};
    ss_rank_step *rs = calloc(ranks, sizeof *rs);
    int64_t *phase_ns = calloc((size_t)ranks * 16, sizeof *phase_ns);
    int64_t *start_ns = calloc((size_t)ranks * 16, sizeof *start_ns);
    int64_t *sync_ns = calloc((size_t)ranks * 17, sizeof *sync_ns);
    int64_t ones[16];
    ss_phase_stat phases[16];
    ss_sync_stat syncs[1] = {{16, 2000000, 1000000, 5, ranks}};
    for (int i = 0; i < 16; i++)
        ones[i] = 1;
    if (!rs || !phase_ns || !start_ns || !sync_ns) {
        fprintf(stderr, "bench_store: out of memory\n");
        return 1;
    }
    for (uint32_t p = 0; p < n_phases; p++) {
        phases[p].name = (int)p;
        phases[p].stat = (ss_stat){10000000, 11000000, 12000000, 13000000,
                                   0, ranks};
    }
    /* Names 0..15 are phases, 16 the all-reduce every rank reaches. */
    ss_step_view v = {.world_size = ranks, .n_present = ranks,
                      .n_phases = n_phases, .phases = phases, .n_syncs = 1,
                      .syncs = syncs, .n_names = 17, .ranks = rs};
    v.step_time = (ss_stat){90000000, 100000000, 110000000, 120000000, 3,
                            ranks};
    v.rss = v.step_time;
    v.device = v.step_time;

    /* What a busy rank's host evidence looks like (cgroup v1: no cgroup
     * pressure of its own, io unknown). */
    const ss_host_step host = {90000000, 1200000, 0, 0, 0, 2400, 130, 0,
                               4000000, 0, SS_MISSING, {0}};
    double put_s = 0;
    uint64_t waits = 0;
    double t0 = now_s();
    for (uint32_t step = 0; step < steps; step++) {
        for (uint32_t r = 0; r < ranks; r++) {
            int64_t *ph = phase_ns + (size_t)r * 16;
            int64_t *st = start_ns + (size_t)r * 16;
            int64_t *sy = sync_ns + (size_t)r * 17;
            int64_t begin = (int64_t)step * 120000000 + r * 1000;
            for (uint32_t p = 0; p < n_phases; p++) {
                ph[p] = 10000000 + (int64_t)((r * 7919 + step * 104729 +
                                              p * 31) % 5000000);
                st[p] = (int64_t)p * 15000000 + 1000;
            }
            for (int k = 0; k < 16; k++)
                sy[k] = SS_MISSING;
            sy[16] = begin + 80000000 + (int64_t)(r % 97) * 1000;
            rs[r] = (ss_rank_step){
                .present = 1,
                .step_ns = 95000000 + (int64_t)(r + step) % 20000000,
                .rss_bytes = (int64_t)2 << 30,
                .device_bytes = (int64_t)8 << 30,
                .phase_ns = ph,
                .sync_arrival_ns = sy,
                .begin_ns = begin,
                .phase_start_ns = st,
                .phase_count = ones,
                .host = with_host ? &host : NULL};
        }
        v.step = step;
        v.finalized_at = (ss_wall_ns)step * 100000000;
        for (;;) {
            ss_store_stats st;
            ss_store_get_stats(s, &st);
            if (st.queued - st.written < cfg.queue_limit / 2)
                break;
            waits++;
            usleep(1000);
        }
        double a = now_s();
        ss_store_put_step(s, run_id, &v, phase_names);
        put_s += now_s() - a;
    }
    ss_store_flush(s);
    double t1 = now_s();

    ss_store_stats st;
    ss_store_get_stats(s, &st);
    long long kept = count_rows(s, "SELECT count(*) FROM rank_steps");
    ss_store_close(s);
    long long bytes = file_size(path);
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    bytes += file_size(wal);

    uint64_t rows = (uint64_t)ranks * steps;
    printf("bench_store: %u ranks x %u steps, %u phases, retention %s%s\n",
           ranks, steps, n_phases,
           keep_all ? "off" : "on (recent 512, every 100th)",
           with_host ? ", host evidence" : "");
    printf("  %llu rank-steps in %.2f s = %.0f rows/s (%llu transactions, "
           "%llu producer waits, %llu dropped)\n",
           (unsigned long long)rows, t1 - t0, (double)rows / (t1 - t0),
           (unsigned long long)st.transactions, (unsigned long long)waits,
           (unsigned long long)st.dropped_rank_steps);
    printf("  put_step: %.1f us per step, %.0f ns per rank\n",
           put_s / steps * 1e6, put_s / (double)rows * 1e9);
    printf("  kept %lld rank-step rows; db %.1f MiB, %.0f bytes per kept "
           "row (all tables)\n",
           kept, (double)bytes / 1048576.0,
           kept > 0 ? (double)bytes / (double)kept : NAN);

    int status = pg_uri ? pg_bench(path, pg_uri, writers, kept) : 0;

    if (!db_arg) {
        unlink(path);
        unlink(wal);
        char shm[4200];
        snprintf(shm, sizeof shm, "%s-shm", path);
        unlink(shm);
        rmdir(dir);
    }
    free(rs);
    free(phase_ns);
    free(start_ns);
    free(sync_ns);
    return status;
}
