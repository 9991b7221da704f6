/*
 * bench_agent_support.h - what the benchmarks that play agents against a
 * real controller (bench_agents.c, bench_stacks_agents.c) share: the
 * job's secret written to a token file and loaded as the link uses it,
 * a simulated node's hello,
 * the working directory, the controller started with its output in a
 * log, and a process's CPU time and memory as /proc and getrusage give
 * them.
 * Header-only: each benchmark is one executable of one file.
 */
#ifndef STEPSCOPE_BENCH_AGENT_SUPPORT_H
#define STEPSCOPE_BENCH_AGENT_SUPPORT_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link_auth.h"
#include "link_wire.h"

/* A fresh random secret written (hex, mode 0600) to the token file PATH
 * and loaded into *SECRET the way a controller loads --token-file.
 * Returns 0, or -1 after saying why on stderr, prefixed PROG. */
static inline int bench_token_file(const char *path, link_secret *secret,
                                   const char *prog)
{
    if (link_auth_init() != 0)
        return -1;
    uint8_t raw[24];
    char hex[64];
    link_random(raw, sizeof raw);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, hex, strlen(hex)) < 0 || close(fd) != 0) {
        fprintf(stderr, "%s: token file %s: %s\n", prog, path,
                strerror(errno));
        return -1;
    }
    char err[256];
    if (link_secret_load(path, NULL, secret, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return -1;
    }
    return 0;
}

/* The AGENT_HELLO of simulated node NODE ("simNODE") of a job JOB_ID of
 * NNODES nodes of NPROC ranks each, with a fresh nonce. */
static inline void bench_agent_hello(link_agent_hello *h, uint32_t node,
                                     uint32_t nnodes, uint32_t nproc,
                                     const char *job_id)
{
    h->version = LINK_VERSION;
    h->node_rank = node;
    h->nnodes = nnodes;
    h->nproc_per_node = nproc;
    link_random(h->nonce, sizeof h->nonce);
    snprintf(h->job_id, sizeof h->job_id, "%s", job_id);
    snprintf(h->host, sizeof h->host, "sim%u", node);
}

/* The benchmark's working directory into DIR: GIVEN (made 0700 when
 * missing), or a new one under TMPDIR or /tmp named after PROG.  Returns
 * 0, or -1 after saying why on stderr. */
static inline int bench_work_dir(char *dir, size_t len, const char *given,
                                 const char *prog)
{
    if (given) {
        snprintf(dir, len, "%s", given);
        mkdir(dir, 0700);
        return 0;
    }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, len, "%s/%s.XXXXXX", tmp, prog);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "%s: mkdtemp %s: %s\n", prog, dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Starts ARGV (ARGV[0] the program, NULL-terminated) with its standard
 * output and error in the file LOG.  Returns its pid, or -1 when fork
 * fails; a failed exec exits the child with 127, said in LOG. */
static inline pid_t bench_spawn_logged(const char *log,
                                       char *const argv[])
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    execv(argv[0], argv);
    perror(argv[0]);
    _exit(127);
}

/* User + system CPU seconds of process PID (/proc/PID/stat) into *S.
 * Returns 0, or -1 when it cannot be read (the process is gone). */
static inline int bench_proc_cpu_s(pid_t pid, double *s)
{
    char path[64], line[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *p = strrchr(line, ')');
    unsigned long long ut, st;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                     "%llu %llu", &ut, &st) != 2)
        return -1;
    *s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

/* A process's memory, MiB (/proc/PID/status); -1/1024 for a field not
 * read (the process is gone). */
typedef struct {
    double rss, hwm, anon, file, shmem; /* VmRSS, VmHWM, RssAnon/File/Shmem */
} bench_mem;

static inline bench_mem bench_proc_mem(pid_t pid)
{
    char path[64], line[256];
    long rss = -1, hwm = -1, anon = -1, file = -1, shmem = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", &rss);
        sscanf(line, "VmHWM: %ld", &hwm);
        sscanf(line, "RssAnon: %ld", &anon);
        sscanf(line, "RssFile: %ld", &file);
        sscanf(line, "RssShmem: %ld", &shmem);
    }
    if (f)
        fclose(f);
    return (bench_mem){rss / 1024.0, hwm / 1024.0, anon / 1024.0,
                       file / 1024.0, shmem / 1024.0};
}

/* User + system CPU seconds of this process (all its threads). */
static inline double bench_self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static inline int bench_remove_entry_(const char *path, const struct stat *st,
                                      int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the directory DIR and everything under it. */
static inline void bench_remove_tree(const char *dir)
{
    nftw(dir, bench_remove_entry_, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
