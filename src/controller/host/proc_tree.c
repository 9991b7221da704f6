/*
 * proc_tree.c - one rank's process tree, read from /proc (proc_tree.h).
 *
 * Membership (processes and their threads) is rebuilt once per rescan
 * period, and in a sample that finds a followed process's thread count
 * changed; in between, each sample is one pread per kept descriptor:
 * /proc/PID/stat and /proc/PID/status per process, and
 * /proc/PID/task/TID/schedstat per thread.  A member that disappears (its
 * read fails, or a rescan no longer finds it) is retired: its last values
 * move into the retired totals, so every counter stays cumulative.
 */
#include "proc_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int fd_stat, fd_status;
    int64_t ticks, major_faults, vol, invol; /* last values read */
    int64_t child_ticks;   /* of those ticks, its reaped children's */
    int64_t ended_run_ns;  /* CPU time of its threads that ended */
    int64_t num_threads;   /* the kernel's count at the last read */
    int64_t listed;        /* threads listed at the last membership scan */
    int seen;              /* found by the current scan */
} proc_member;

typedef struct {
    pid_t pid, tid;
    int fd_schedstat;
    int64_t run_ns, wait_ns; /* last values read */
    int seen;
} thread_member;

struct ss_proc_tree {
    char root_dir[PATH_MAX];
    pid_t root_pid;
    ss_mono_ns next_rescan;
    int have_schedstat; /* -1 unknown, 0 no, 1 yes */
    int root_gone;
    int ever_read;
    int64_t tick_ns;
    proc_member procs[SS_PROC_TREE_MAX_PROCS];
    uint32_t n_procs;
    thread_member threads[SS_PROC_TREE_MAX_THREADS];
    uint32_t n_threads;
    /* What ended members had counted at their last read: switches of
     * ended processes, run-queue time of ended threads. */
    int64_t retired_vol, retired_invol, retired_wait;
    /* CPU ticks and major faults of a process reaped inside the tree move
     * into its parent's c- fields; a drop of the sum (an orphan reaped
     * elsewhere, the root reaped by us) is carried instead. */
    int64_t carry_ticks, carry_major, last_ticks, last_major;
    /* With schedstat, a process's CPU time is its threads' (those that
     * ended too) plus its reaped children's ticks; the same carry keeps
     * the sum from dropping (a process reaped elsewhere, a thread id
     * reused before a rescan noticed its thread end). */
    int64_t carry_run, last_run;
};

/* Reads the whole small file behind FD from offset 0; returns the length,
 * or -1 (the process or thread is gone). */
static ssize_t read_fd(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return n;
}

static int open_at(const ss_proc_tree *t, const char *fmt, pid_t a, pid_t b)
{
    char path[PATH_MAX + 64];
    int n = snprintf(path, sizeof path, "%s/", t->root_dir);
    snprintf(path + n, sizeof path - (size_t)n, fmt, (int)a, (int)b);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* /proc/PID/stat: STATE after the last ')'; majflt and cmajflt are fields
 * 12 and 13, utime, stime, cutime and cstime fields 14 to 17, num_threads
 * field 20 (1-based, man 5 proc).  The c- fields hold what waited-for
 * children used, so a descendant that ends moves its counts into its
 * parent's.  A line that stops before field 20 leaves *THREADS at -1. */
static int parse_stat(const char *s, char *state, int64_t *major,
                      int64_t *ticks, int64_t *child_ticks, int64_t *threads)
{
    const char *p = strrchr(s, ')');
    if (!p || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p;
    unsigned long long v[6] = {0}; /* fields 12..17 */
    int field = 3;                 /* p points at field 3 (state) */
    *threads = -1;
    while (*p && field < 20) {
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        field++;
        if (field >= 12 && field <= 17)
            v[field - 12] = strtoull(p, NULL, 10);
        else if (field == 20)
            *threads = (int64_t)strtoll(p, NULL, 10);
    }
    if (field < 17)
        return -1;
    *major = (int64_t)(v[0] + v[1]);
    *ticks = (int64_t)(v[2] + v[3] + v[4] + v[5]);
    *child_ticks = (int64_t)(v[4] + v[5]);
    return 0;
}

static int64_t status_field(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    if (!p)
        return 0;
    return strtoll(p + strlen(key), NULL, 10);
}

ss_proc_tree *ss_proc_tree_new(const char *proc_root, pid_t root_pid)
{
    ss_proc_tree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->root_dir, sizeof t->root_dir, "%s", proc_root);
    t->root_pid = root_pid;
    t->have_schedstat = -1;
    long hz = sysconf(_SC_CLK_TCK);
    t->tick_ns = 1000000000LL / (hz > 0 ? hz : 100);
    t->next_rescan = INT64_MIN;
    return t;
}

static void retire_proc(ss_proc_tree *t, uint32_t i)
{
    proc_member *m = &t->procs[i];
    t->retired_vol += m->vol;
    t->retired_invol += m->invol;
    if (m->fd_stat >= 0)
        close(m->fd_stat);
    if (m->fd_status >= 0)
        close(m->fd_status);
    t->procs[i] = t->procs[--t->n_procs];
}

static void retire_thread(ss_proc_tree *t, uint32_t i)
{
    thread_member *m = &t->threads[i];
    t->retired_wait += m->wait_ns;
    /* an ended thread's CPU time stays its process's; a whole process's
     * moves into its parent's c- fields when reaped (its threads are
     * retired after it, and dropped) */
    for (uint32_t p = 0; p < t->n_procs; p++)
        if (t->procs[p].pid == m->pid)
            t->procs[p].ended_run_ns += m->run_ns;
    if (m->fd_schedstat >= 0)
        close(m->fd_schedstat);
    t->threads[i] = t->threads[--t->n_threads];
}

void ss_proc_tree_free(ss_proc_tree *t)
{
    if (!t)
        return;
    while (t->n_procs)
        retire_proc(t, t->n_procs - 1);
    while (t->n_threads)
        retire_thread(t, t->n_threads - 1);
    free(t);
}

uint32_t ss_proc_tree_open_files(const ss_proc_tree *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_procs; i++)
        n += (t->procs[i].fd_stat >= 0) + (t->procs[i].fd_status >= 0);
    for (uint32_t i = 0; i < t->n_threads; i++)
        n += t->threads[i].fd_schedstat >= 0;
    return n;
}

/* Marks PID a member found by this scan (added if new); returns its
 * entry, or NULL when it is not followed (gone, or too many). */
static proc_member *mark_proc(ss_proc_tree *t, pid_t pid)
{
    for (uint32_t i = 0; i < t->n_procs; i++)
        if (t->procs[i].pid == pid) {
            t->procs[i].seen = 1;
            return &t->procs[i];
        }
    if (t->n_procs == SS_PROC_TREE_MAX_PROCS)
        return NULL;
    proc_member *m = &t->procs[t->n_procs];
    memset(m, 0, sizeof *m);
    m->pid = pid;
    m->num_threads = -1;
    m->fd_stat = open_at(t, "%d/stat", pid, 0);
    if (m->fd_stat < 0)
        return NULL; /* gone already */
    m->fd_status = open_at(t, "%d/status", pid, 0);
    m->seen = 1;
    t->n_procs++;
    return m;
}

static void mark_thread(ss_proc_tree *t, pid_t pid, pid_t tid)
{
    for (uint32_t i = 0; i < t->n_threads; i++)
        if (t->threads[i].tid == tid && t->threads[i].pid == pid) {
            t->threads[i].seen = 1;
            return;
        }
    if (t->n_threads == SS_PROC_TREE_MAX_THREADS || t->have_schedstat == 0)
        return;
    thread_member *m = &t->threads[t->n_threads];
    memset(m, 0, sizeof *m);
    m->pid = pid;
    m->tid = tid;
    m->fd_schedstat = open_at(t, "%d/task/%d/schedstat", pid, tid);
    if (m->fd_schedstat < 0) {
        if (errno == ENOENT && t->have_schedstat < 0 && pid == t->root_pid)
            t->have_schedstat = 0; /* kernel without CONFIG_SCHEDSTATS */
        return;
    }
    t->have_schedstat = 1;
    m->seen = 1;
    t->n_threads++;
}

/* Adds the children listed in one task's children file to QUEUE. */
static void add_children(const ss_proc_tree *t, pid_t pid, pid_t tid,
                         pid_t *queue, uint32_t *n)
{
    int fd = open_at(t, "%d/task/%d/children", pid, tid);
    if (fd < 0)
        return;
    char buf[4096];
    if (read_fd(fd, buf, sizeof buf) > 0) {
        char *p = buf, *end;
        for (;;) {
            long c = strtol(p, &end, 10);
            if (end == p)
                break;
            if (c > 0 && *n < SS_PROC_TREE_MAX_PROCS)
                queue[(*n)++] = (pid_t)c;
            p = end;
        }
    }
    close(fd);
}

/* Rebuilds membership: breadth-first from the root over every thread's
 * children; members no longer found are retired. */
static void rescan(ss_proc_tree *t)
{
    for (uint32_t i = 0; i < t->n_procs; i++)
        t->procs[i].seen = 0;
    for (uint32_t i = 0; i < t->n_threads; i++)
        t->threads[i].seen = 0;
    pid_t queue[SS_PROC_TREE_MAX_PROCS];
    uint32_t n = 0;
    if (!t->root_gone)
        queue[n++] = t->root_pid;
    for (uint32_t q = 0; q < n; q++) {
        pid_t pid = queue[q];
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/%d/task", t->root_dir, (int)pid);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        proc_member *m = mark_proc(t, pid);
        int64_t listed = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            long tid = strtol(e->d_name, &end, 10);
            if (*end || tid <= 0)
                continue;
            listed++;
            mark_thread(t, pid, (pid_t)tid);
            add_children(t, pid, (pid_t)tid, queue, &n);
        }
        closedir(d);
        if (m)
            m->listed = listed;
    }
    for (uint32_t i = t->n_procs; i-- > 0;)
        if (!t->procs[i].seen)
            retire_proc(t, i);
    for (uint32_t i = t->n_threads; i-- > 0;)
        if (!t->threads[i].seen)
            retire_thread(t, i);
}

/* SUM plus the carry that keeps it from going below its last value. */
static int64_t monotone(int64_t sum, int64_t *carry, int64_t *last)
{
    if (sum + *carry < *last)
        *carry = *last - sum;
    *last = sum + *carry;
    return *last;
}

/* Whether a followed process's thread count, as the kernel gave it in this
 * sample, differs from the threads its last scan listed: a thread started
 * or ended since.  A thread found by the periodic rescan alone
 * would bring up to a second of its run-queue delay into one sample (a
 * DDP rank's autograd and communication threads start with its first
 * steps), and the ranks whose threads were found sooner would seem to
 * wait more meanwhile. */
static int threads_changed(const ss_proc_tree *t)
{
    for (uint32_t i = 0; i < t->n_procs; i++)
        if (t->procs[i].num_threads >= 0 &&
            t->procs[i].num_threads != t->procs[i].listed)
            return 1;
    return 0;
}

int ss_proc_tree_sample(ss_proc_tree *t, ss_mono_ns now, ss_proc_counters *out)
{
    if (now >= t->next_rescan) {
        rescan(t);
        t->next_rescan = now + SS_PROC_TREE_RESCAN_NS;
    }
    char buf[4096];
    int root_stopped = 0, root_read = 0;
    for (uint32_t i = t->n_procs; i-- > 0;) {
        proc_member *m = &t->procs[i];
        char state = '?';
        if (read_fd(m->fd_stat, buf, sizeof buf) < 0 ||
            parse_stat(buf, &state, &m->major_faults, &m->ticks,
                       &m->child_ticks, &m->num_threads) != 0) {
            if (m->pid == t->root_pid)
                t->root_gone = 1;
            retire_proc(t, i);
            continue;
        }
        if (m->pid == t->root_pid) {
            root_read = 1;
            root_stopped = state == 'T' || state == 't';
        }
        if (m->fd_status >= 0 && read_fd(m->fd_status, buf, sizeof buf) > 0) {
            m->vol = status_field(buf, "voluntary_ctxt_switches:");
            m->invol = status_field(buf, "nonvoluntary_ctxt_switches:");
        }
    }
    if (threads_changed(t))
        rescan(t); /* its threads are read below, in this sample */
    for (uint32_t i = t->n_threads; i-- > 0;) {
        thread_member *m = &t->threads[i];
        unsigned long long run = 0, wait = 0;
        if (read_fd(m->fd_schedstat, buf, sizeof buf) < 0 ||
            sscanf(buf, "%llu %llu", &run, &wait) != 2) {
            retire_thread(t, i);
            continue;
        }
        m->run_ns = (int64_t)run;
        m->wait_ns = (int64_t)wait;
    }
    if (!root_read && !t->ever_read)
        return -1;
    t->ever_read = 1;
    int64_t ticks = 0, major = 0;
    int64_t vol = t->retired_vol, invol = t->retired_invol;
    int64_t run = 0, wait = t->retired_wait;
    for (uint32_t i = 0; i < t->n_procs; i++) {
        ticks += t->procs[i].ticks;
        run += t->procs[i].ended_run_ns +
               t->procs[i].child_ticks * t->tick_ns;
        major += t->procs[i].major_faults;
        vol += t->procs[i].vol;
        invol += t->procs[i].invol;
    }
    for (uint32_t i = 0; i < t->n_threads; i++) {
        run += t->threads[i].run_ns;
        wait += t->threads[i].wait_ns;
    }
    ss_proc_counters c = {0};
    c.cpu_ns = t->have_schedstat == 1
                   ? monotone(run, &t->carry_run, &t->last_run)
                   : monotone(ticks, &t->carry_ticks, &t->last_ticks) *
                         t->tick_ns;
    c.major_faults = monotone(major, &t->carry_major, &t->last_major);
    c.vol_switches = vol;
    c.invol_switches = invol;
    c.runq_ns = t->have_schedstat == 1 ? wait : SS_MISSING;
    c.stopped = root_stopped;
    c.n_procs = t->n_procs;
    c.n_threads = t->n_threads;
    *out = c;
    return 0;
}
