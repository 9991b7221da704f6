/*
 * descendants.c - listing the process tree below this process from /proc
 * (descendants.h).
 *
 * One pass reads pid, parent and process group of every process in /proc;
 * the tree below us is then walked in memory, breadth first, over a table
 * sorted by parent pid: a scan costs one read of each /proc/PID/stat and
 * O(n log n) work, whatever the depth of the tree.
 */
#include "descendants.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int ss_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* Reads /proc/PID/stat.  Returns 0, or -1 when the process is gone. */
static int read_stat(pid_t pid, ss_proc *p)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) state ppid pgrp ...": comm may hold spaces and ')'. */
    char *close_paren = strrchr(buf, ')');
    int ppid, pgid;
    char state;
    if (!close_paren ||
        sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgid) != 3)
        return -1;
    p->pid = pid;
    p->ppid = ppid;
    p->pgid = pgid;
    p->state = state;
    return 0;
}

static int by_ppid(const void *a, const void *b)
{
    pid_t x = ((const ss_proc *)a)->ppid, y = ((const ss_proc *)b)->ppid;
    return (x > y) - (x < y);
}

/* Reads every process into a malloc'd array.  Returns the count or -1. */
static int read_all(ss_proc **out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0, cap = 256;
    ss_proc *v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (n == cap) {
            ss_proc *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
            cap *= 2;
        }
        if (read_stat((pid_t)atoi(e->d_name), &v[n]) == 0)
            n++;
    }
    closedir(d);
    if (!v) {
        errno = ENOMEM;
        return -1;
    }
    *out = v;
    return (int)n;
}

/* Index of the first entry of ALL (sorted by ppid) whose parent is PPID. */
static size_t first_child(const ss_proc *all, size_t n, pid_t ppid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (all[mid].ppid < ppid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ss_descendants(ss_proc **out)
{
    *out = NULL;
    ss_proc *all = NULL;
    int n_all = read_all(&all);
    if (n_all < 0)
        return -1;
    size_t n = (size_t)n_all;
    qsort(all, n, sizeof *all, by_ppid);
    ss_proc *found = malloc((n ? n : 1) * sizeof *found);
    if (!found) {
        free(all);
        errno = ENOMEM;
        return -1;
    }
    /* FOUND doubles as the queue: its entries are visited in order, and
     * each visit appends that process's children.  A pid is visited at
     * most once because /proc gives each process one parent; the bound on
     * K guards against a reparenting seen twice mid-scan. */
    size_t k = 0;
    pid_t self = getpid();
    for (size_t i = first_child(all, n, self); i < n && all[i].ppid == self;)
        found[k++] = all[i++];
    for (size_t q = 0; q < k; q++) {
        pid_t parent = found[q].pid;
        for (size_t i = first_child(all, n, parent);
             i < n && all[i].ppid == parent && k < n;)
            found[k++] = all[i++];
    }
    free(all);
    if (k == 0) {
        free(found);
        return 0;
    }
    *out = found;
    return (int)k;
}
