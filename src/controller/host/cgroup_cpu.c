/*
 * cgroup_cpu.c - CPU throttling, pressure and freezing of a rank's cgroup
 * (cgroup_cpu.h).
 *
 * Resolution: /proc/PID/cgroup gives, per hierarchy, the cgroup path
 * ("0::/a/b" for v2, "4:cpu,cpuacct:/a/b" for v1); /proc/self/mountinfo
 * gives where each hierarchy is mounted and which part of it the mount
 * shows (its root field), so the directory is mount point + (path - root).
 * v2 is preferred when the rank's v2 cgroup has a cpu.stat with throttling
 * fields; else the v1 cpu controller is used.  Freezing: the v2 cgroup's
 * cgroup.events ("frozen 1") where it has one, and the v1 freezer
 * controller's freezer.state where it is mounted.
 */
#include "cgroup_cpu.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_COUNTERS = 5 }; /* the fields of ss_cgroup_counters, in order */

struct ss_cgroup_cpu {
    /* Heap strings (a controller holds one reader per rank: no PATH_MAX
     * arrays); "" where none. */
    char *proc_root;
    pid_t pid;
    int have_v2, have_v1, have_v1f;  /* the hierarchies are mounted */
    char *v2_mnt, *v2_root, *v1_mnt, *v1_root, *v1f_mnt, *v1f_root;
    char *v2_path, *v1_path, *v1f_path; /* as last resolved; v1f: the v1
                                           freezer controller's */
    int sources;
    int v1;             /* cpu.stat is v1's (throttled_time in ns) */
    int fd_cpu_stat;
    int fd_psi[3];      /* cpu, memory, io */
    int fd_events;      /* v2 cgroup.events ("frozen 1") */
    int fd_freezer;     /* v1 freezer.state */
    const char *path;   /* v2_path, v1_path or "": the one read */
    /* Added to what the current cgroup's files say, so that the counters
     * stay cumulative when the rank moves to another cgroup. */
    int64_t offset[N_COUNTERS];
};

static int read_all(int fd, char *buf, size_t cap)
{
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, cap - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static char *slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = read_all(fd, buf, cap);
    if (fd >= 0)
        close(fd);
    return rc == 0 ? buf : NULL;
}

/* The value after "KEY " at the start of a line of S; -1 when absent. */
static int64_t keyed(const char *s, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = s; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, key, k) == 0 && p[k] == ' ')
            return strtoll(p + k + 1, NULL, 10);
    return -1;
}

/* Does the comma-separated list LIST contain WORD? */
static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p;) {
        if (strncmp(p, word, n) == 0 && (p[n] == ',' || p[n] == '\0' ||
                                         p[n] == ' ' || p[n] == '\n'))
            return 1;
        p = strchr(p, ',');
        if (p)
            p++;
    }
    return 0;
}

/* Replaces *DST by a copy of SRC; -1 (and *DST unchanged) when memory
 * runs out. */
static int set_str(char **dst, const char *src)
{
    char *copy = strdup(src);
    if (!copy)
        return -1;
    free(*dst);
    *dst = copy;
    return 0;
}

/* Finds the mount of the v2 hierarchy (CONTROLLER NULL) or of the v1
 * controller CONTROLLER, writing its mount point and root (PATH_MAX bytes
 * each); 0 when found. */
static int find_mount(const char *proc_root, const char *controller,
                      char *mnt, char *root)
{
    int v2 = controller == NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/self/mountinfo", proc_root);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[4096];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        char r[PATH_MAX], m[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
            continue;
        const char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        char fstype[64], source[256], opts[1024] = "";
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) < 2)
            continue;
        if (v2 ? strcmp(fstype, "cgroup2") == 0
               : strcmp(fstype, "cgroup") == 0 &&
                     has_word(opts, controller)) {
            snprintf(mnt, PATH_MAX, "%s", m);
            snprintf(root, PATH_MAX, "%s", r);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* PID's cgroup path in the v2 hierarchy (CONTROLLER NULL) or the v1
 * controller CONTROLLER. */
static int cgroup_path(const char *proc_root, pid_t pid,
                       const char *controller, char *out)
{
    int v2 = controller == NULL;
    char path[PATH_MAX], buf[8192];
    snprintf(path, sizeof path, "%s/%d/cgroup", proc_root, (int)pid);
    if (!slurp(path, buf, sizeof buf))
        return -1;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0'; /* LINE: the hierarchy id, C1 + 1: controllers */
        int match = v2 ? strcmp(line, "0") == 0 && c1[1] == '\0'
                       : has_word(c1 + 1, controller);
        if (match) {
            snprintf(out, PATH_MAX, "%s", c2 + 1);
            return 0;
        }
    }
    return -1;
}

/* mount point + (PATH - mount root): the cgroup's directory. */
static void cgroup_dir(const char *mnt, const char *root, const char *path,
                       char *out, size_t cap)
{
    size_t rl = strlen(root);
    const char *rel = path;
    if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0)
        rel = path + rl;
    snprintf(out, cap, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
}

static int open_in(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, O_RDONLY | O_CLOEXEC);
}

static void close_files(ss_cgroup_cpu *c)
{
    if (c->fd_cpu_stat >= 0)
        close(c->fd_cpu_stat);
    for (int i = 0; i < 3; i++)
        if (c->fd_psi[i] >= 0)
            close(c->fd_psi[i]);
    if (c->fd_events >= 0)
        close(c->fd_events);
    if (c->fd_freezer >= 0)
        close(c->fd_freezer);
    c->fd_cpu_stat = c->fd_psi[0] = c->fd_psi[1] = c->fd_psi[2] = -1;
    c->fd_events = c->fd_freezer = -1;
    c->sources = c->v1 = 0;
    c->path = "";
}

/* Opens cpu.stat in DIR when it has the throttling fields; -1 if not. */
static int open_cpu_stat(const char *dir)
{
    char buf[1024];
    int fd = open_in(dir, "cpu.stat");
    if (read_all(fd, buf, sizeof buf) == 0 && keyed(buf, "nr_throttled") >= 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Resolves the cgroup of the rank's current paths (v2_path, v1_path) and
 * opens their files. */
static void attach(ss_cgroup_cpu *c)
{
    static const char *const psi[3] = {"cpu.pressure", "memory.pressure",
                                       "io.pressure"};
    char dir[PATH_MAX * 2];
    if (c->v2_path[0]) {
        cgroup_dir(c->v2_mnt, c->v2_root, c->v2_path, dir, sizeof dir);
        c->fd_cpu_stat = open_cpu_stat(dir);
        if (c->fd_cpu_stat >= 0) {
            c->sources |= SS_CGROUP_V2;
            c->path = c->v2_path;
        }
        for (int i = 0; i < 3; i++)
            c->fd_psi[i] = open_in(dir, psi[i]);
        c->fd_events = open_in(dir, "cgroup.events"); /* not in the root */
        /* The root cgroup's pressure is the whole machine's. */
        if (c->fd_psi[0] >= 0 && strcmp(c->v2_path, "/") == 0)
            c->sources |= SS_CGROUP_PSI_SYSTEM;
    }
    if (c->fd_cpu_stat < 0 && c->v1_path[0]) {
        cgroup_dir(c->v1_mnt, c->v1_root, c->v1_path, dir, sizeof dir);
        c->fd_cpu_stat = open_cpu_stat(dir);
        if (c->fd_cpu_stat >= 0) {
            c->v1 = 1;
            c->sources |= SS_CGROUP_V1;
            c->path = c->v1_path;
        }
    }
    /* A hybrid host may freeze through v1 while the rank sits in a v2
     * cgroup of its own (systemd's): both are read. */
    if (c->v1f_path[0]) {
        cgroup_dir(c->v1f_mnt, c->v1f_root, c->v1f_path, dir, sizeof dir);
        c->fd_freezer = open_in(dir, "freezer.state");
    }
    if (c->fd_psi[0] < 0) {
        char pdir[PATH_MAX];
        snprintf(pdir, sizeof pdir, "%s/pressure", c->proc_root);
        for (int i = 0; i < 3; i++) {
            static const char *const sys[3] = {"cpu", "memory", "io"};
            if (c->fd_psi[i] >= 0)
                close(c->fd_psi[i]);
            c->fd_psi[i] = open_in(pdir, sys[i]);
        }
        if (c->fd_psi[0] >= 0)
            c->sources |= SS_CGROUP_PSI_SYSTEM;
    }
}

/* Reads the rank's cgroup paths into V2, V1 (cpu) and V1F (freezer); ""
 * where none. */
static void resolve_paths(const ss_cgroup_cpu *c, char *v2, char *v1,
                          char *v1f)
{
    v2[0] = v1[0] = v1f[0] = '\0';
    if (c->have_v2 && cgroup_path(c->proc_root, c->pid, NULL, v2) != 0)
        v2[0] = '\0';
    if (c->have_v1 && cgroup_path(c->proc_root, c->pid, "cpu", v1) != 0)
        v1[0] = '\0';
    if (c->have_v1f &&
        cgroup_path(c->proc_root, c->pid, "freezer", v1f) != 0)
        v1f[0] = '\0';
}

ss_cgroup_cpu *ss_cgroup_cpu_open(const char *proc_root, pid_t pid)
{
    ss_cgroup_cpu *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd_cpu_stat = c->fd_psi[0] = c->fd_psi[1] = c->fd_psi[2] = -1;
    c->fd_events = c->fd_freezer = -1;
    c->path = "";
    c->pid = pid;
    char mnt[3][PATH_MAX] = {"", "", ""}, root[3][PATH_MAX] = {"", "", ""};
    char path[3][PATH_MAX];
    c->have_v2 = find_mount(proc_root, NULL, mnt[0], root[0]) == 0;
    c->have_v1 = find_mount(proc_root, "cpu", mnt[1], root[1]) == 0;
    c->have_v1f = find_mount(proc_root, "freezer", mnt[2], root[2]) == 0;
    if (set_str(&c->proc_root, proc_root) != 0) {
        free(c);
        return NULL;
    }
    resolve_paths(c, path[0], path[1], path[2]);
    if (set_str(&c->v2_mnt, mnt[0]) || set_str(&c->v2_root, root[0]) ||
        set_str(&c->v1_mnt, mnt[1]) || set_str(&c->v1_root, root[1]) ||
        set_str(&c->v1f_mnt, mnt[2]) || set_str(&c->v1f_root, root[2]) ||
        set_str(&c->v2_path, path[0]) || set_str(&c->v1_path, path[1]) ||
        set_str(&c->v1f_path, path[2])) {
        ss_cgroup_cpu_free(c);
        return NULL;
    }
    attach(c);
    return c;
}

/* The counters as the current cgroup's files say them (no offset). */
static void read_raw(ss_cgroup_cpu *c, int64_t *v);

int ss_cgroup_cpu_refresh(ss_cgroup_cpu *c)
{
    char v2[PATH_MAX], v1[PATH_MAX], v1f[PATH_MAX];
    resolve_paths(c, v2, v1, v1f);
    if ((!v2[0] && !v1[0] && !v1f[0]) ||
        (strcmp(v2, c->v2_path) == 0 && strcmp(v1, c->v1_path) == 0 &&
         strcmp(v1f, c->v1f_path) == 0))
        return 0; /* the same cgroup, or the rank is gone */
    char *new_v2 = strdup(v2), *new_v1 = strdup(v1), *new_v1f = strdup(v1f);
    if (!new_v2 || !new_v1 || !new_v1f) {
        free(new_v2);
        free(new_v1);
        free(new_v1f);
        return 0; /* out of memory: keep reading the old cgroup */
    }
    int64_t before[N_COUNTERS], after[N_COUNTERS];
    read_raw(c, before);
    close_files(c);
    free(c->v2_path);
    free(c->v1_path);
    free(c->v1f_path);
    c->v2_path = new_v2;
    c->v1_path = new_v1;
    c->v1f_path = new_v1f;
    attach(c);
    read_raw(c, after);
    for (int i = 0; i < N_COUNTERS; i++)
        if (before[i] != SS_MISSING && after[i] != SS_MISSING)
            c->offset[i] += before[i] - after[i];
    return 1;
}

void ss_cgroup_cpu_free(ss_cgroup_cpu *c)
{
    if (!c)
        return;
    close_files(c);
    free(c->proc_root);
    free(c->v2_mnt);
    free(c->v2_root);
    free(c->v1_mnt);
    free(c->v1_root);
    free(c->v1f_mnt);
    free(c->v1f_root);
    free(c->v2_path);
    free(c->v1_path);
    free(c->v1f_path);
    free(c);
}

int ss_cgroup_cpu_sources(const ss_cgroup_cpu *c) { return c->sources; }

const char *ss_cgroup_cpu_path(const ss_cgroup_cpu *c) { return c->path; }

/* "some avg10=0.00 avg60=0.00 avg300=0.00 total=N" (N in microseconds). */
static int64_t psi_some_ns(int fd)
{
    char buf[512];
    if (read_all(fd, buf, sizeof buf) != 0 || strncmp(buf, "some ", 5) != 0)
        return SS_MISSING;
    const char *t = strstr(buf, "total=");
    if (!t)
        return SS_MISSING;
    return strtoll(t + 6, NULL, 10) * 1000;
}

static void read_raw(ss_cgroup_cpu *c, int64_t *v)
{
    v[0] = v[1] = SS_MISSING;
    char buf[1024];
    if (read_all(c->fd_cpu_stat, buf, sizeof buf) == 0) {
        int64_t n = keyed(buf, "nr_throttled");
        int64_t t = c->v1 ? keyed(buf, "throttled_time")
                          : keyed(buf, "throttled_usec");
        if (n >= 0)
            v[0] = n;
        if (t >= 0)
            v[1] = c->v1 ? t : t * 1000;
    }
    for (int i = 0; i < 3; i++)
        v[2 + i] = psi_some_ns(c->fd_psi[i]);
}

void ss_cgroup_cpu_read(ss_cgroup_cpu *c, ss_cgroup_counters *out)
{
    int64_t v[N_COUNTERS];
    read_raw(c, v);
    for (int i = 0; i < N_COUNTERS; i++)
        if (v[i] != SS_MISSING)
            v[i] += c->offset[i];
    out->nr_throttled = v[0];
    out->throttled_ns = v[1];
    out->psi_cpu_ns = v[2];
    out->psi_memory_ns = v[3];
    out->psi_io_ns = v[4];
}

int ss_cgroup_cpu_frozen(ss_cgroup_cpu *c)
{
    char buf[512];
    if (read_all(c->fd_events, buf, sizeof buf) == 0 &&
        keyed(buf, "frozen") == 1)
        return 1;
    return read_all(c->fd_freezer, buf, sizeof buf) == 0 &&
           (strncmp(buf, "FROZEN", 6) == 0 ||
            strncmp(buf, "FREEZING", 8) == 0);
}
