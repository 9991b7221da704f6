/*
 * containment.c - the launch's watchdog and cgroup (containment.h).
 *
 * The pipe's write end is the controller's alone (O_CLOEXEC: no rank, no
 * health check inherits it), so end of file on the watchdog's standard
 * input means the controller is gone or done.  The cgroup is found like
 * the host evidence finds a rank's: /proc/self/cgroup names the
 * controller's cgroup in each v1 hierarchy, /proc/self/mountinfo where
 * that hierarchy is mounted.
 */
#include "containment.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define KILL_ROUNDS 200     /* of SIGKILL to a cgroup's processes */
#define KILL_ROUND_MS 10
#define END_WAIT_MS 1000    /* for the watchdog at a normal end */

struct ss_containment {
    pid_t pid;
    int fd; /* the pipe's write end, non-blocking */
    char cgroup[PATH_MAX];
};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The controller's cgroup path in the v1 hierarchy of CONTROLLER (from
 * /proc/self/cgroup) into PATH.  Returns 0 or -1. */
static int own_cgroup(const char *controller, char *path, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        char *list = strchr(line, ':'), *p;
        if (!list || !(p = strchr(++list, ':')))
            continue;
        *p++ = '\0';
        p[strcspn(p, "\n")] = '\0';
        for (char *save, *tok = strtok_r(list, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
            if (strcmp(tok, controller) == 0 &&
                snprintf(path, len, "%s", p) < (int)len)
                found = 0;
    }
    fclose(f);
    return found;
}

/* Where the v1 hierarchy of CONTROLLER shows cgroup PATH, into DIR.
 * Returns 0 or -1. */
static int cgroup_dir(const char *controller, const char *path, char *dir,
                      size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[2048];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        char root[PATH_MAX], mnt[PATH_MAX], fstype[64], super[512];
        const char *dash = strstr(line, " - ");
        if (!dash ||
            sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
            sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2 ||
            strcmp(fstype, "cgroup") != 0)
            continue;
        int has = 0;
        for (char *save, *tok = strtok_r(super, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
            has |= strcmp(tok, controller) == 0;
        size_t rl = strlen(root);
        if (!has || (strcmp(root, "/") != 0 &&
                     (strncmp(path, root, rl) != 0 ||
                      (path[rl] != '/' && path[rl] != '\0'))))
            continue;
        const char *rest = strcmp(root, "/") == 0 ? path : path + rl;
        if (snprintf(dir, len, "%s%s", mnt,
                     strcmp(rest, "/") == 0 ? "" : rest) < (int)len)
            found = 0;
    }
    fclose(f);
    return found;
}

/* Makes the launch's cgroup in the first usable hierarchy into OUT; else
 * says why into NOTE.  Returns 0 or -1. */
static int make_cgroup(char *out, size_t len, char *note, size_t notelen)
{
    static const char *const controllers[] = {"pids", "freezer"};
    static unsigned seq;
    const char *why = "no cgroup v1 pids or freezer hierarchy is mounted";
    char tried[PATH_MAX + 64] = "";
    for (size_t i = 0; i < sizeof controllers / sizeof controllers[0]; i++) {
        char path[PATH_MAX], dir[PATH_MAX];
        if (own_cgroup(controllers[i], path, sizeof path) != 0 ||
            cgroup_dir(controllers[i], path, dir, sizeof dir) != 0)
            continue;
        if (snprintf(out, len, "%s/stepscope-%ld-%u", dir, (long)getpid(),
                     ++seq) >= (int)len)
            continue;
        if (mkdir(out, 0700) == 0)
            return 0;
        snprintf(tried, sizeof tried, "cannot create %s: %s", out,
                 strerror(errno));
        why = tried;
    }
    out[0] = '\0';
    snprintf(note, notelen, "%s", why);
    return -1;
}

ss_containment *ss_containment_start(const char *exe, char *note,
                                     size_t notelen)
{
    if (notelen)
        note[0] = '\0';
    ss_containment *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(note, notelen, "out of memory");
        return NULL;
    }
    char why[PATH_MAX + 128] = "";
    int have_cg = make_cgroup(c->cgroup, sizeof c->cgroup, why, sizeof why)
                  == 0;
    int fds[2];
    posix_spawn_file_actions_t fa;
    char *argv[] = {(char *)exe, SS_WATCHDOG_ARG,
                    have_cg ? c->cgroup : NULL, NULL};
    int rc = -1;
    if (pipe2(fds, O_CLOEXEC) == 0) {
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        rc = posix_spawn(&c->pid, exe, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fds[0]);
        if (rc != 0)
            close(fds[1]);
    } else {
        rc = errno;
    }
    if (rc != 0) {
        snprintf(note, notelen, "cannot start the job's watchdog (%s %s): "
                 "%s", exe, SS_WATCHDOG_ARG, strerror(rc));
        if (have_cg)
            rmdir(c->cgroup);
        free(c);
        return NULL;
    }
    c->fd = fds[1];
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    if (!have_cg)
        snprintf(note, notelen, "no cgroup for the job (%s): after a SIGKILL "
                 "of the controller, processes that left their rank's "
                 "process group can outlive it", why);
    return c;
}

const char *ss_containment_cgroup(const ss_containment *c)
{
    return c && c->cgroup[0] ? c->cgroup : NULL;
}

pid_t ss_containment_pid(const ss_containment *c)
{
    return c ? c->pid : 0;
}

static void tell(ss_containment *c, char sign, pid_t pgid)
{
    if (!c || pgid <= 0)
        return;
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%c%ld\n", sign, (long)pgid);
    ssize_t w = write(c->fd, msg, (size_t)n);
    (void)w; /* a full pipe drops it: see containment.h */
}

void ss_containment_add_group(ss_containment *c, pid_t pgid)
{
    tell(c, '+', pgid);
}

void ss_containment_drop_group(ss_containment *c, pid_t pgid)
{
    tell(c, '-', pgid);
}

void ss_containment_end(ss_containment *c)
{
    if (!c)
        return;
    close(c->fd);
    for (int waited = 0; waited < END_WAIT_MS; waited += 5) {
        pid_t r = waitpid(c->pid, NULL, WNOHANG);
        if (r == c->pid || (r < 0 && errno == ECHILD))
            break;
        sleep_ms(5);
    }
    free(c);
}

int ss_containment_join(const char *cgroup)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/cgroup.procs", cgroup) >=
        (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = write(fd, "0\n", 2) == 2;
    int e = errno;
    close(fd);
    errno = e;
    return ok ? 0 : -1;
}

/* SIGKILLs every process in CGROUP until none is left, then removes it. */
static void empty_cgroup(const char *cgroup)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cgroup.procs", cgroup);
    for (int round = 0; round < KILL_ROUNDS; round++) {
        FILE *f = fopen(path, "re");
        if (!f)
            break;
        long pid;
        int any = 0;
        while (fscanf(f, "%ld", &pid) == 1) {
            any = 1;
            kill((pid_t)pid, SIGKILL);
        }
        fclose(f);
        if (!any)
            break;
        sleep_ms(KILL_ROUND_MS);
    }
    rmdir(cgroup);
}

int ss_containment_watchdog_main(int argc, char **argv)
{
    const char *cgroup = argc > 1 ? argv[1] : NULL;
    setsid(); /* no terminal's signals: it must outlive the controller */
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    pid_t *groups = NULL;
    size_t n = 0, cap = 0;
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(0, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            long pgid = strtol(line + 1, NULL, 10);
            if (line[0] == '+' && pgid > 0) {
                if (n == cap) {
                    size_t ncap = cap ? 2 * cap : 64;
                    pid_t *g = realloc(groups, ncap * sizeof *g);
                    if (g) {
                        groups = g;
                        cap = ncap;
                    }
                }
                if (n < cap)
                    groups[n++] = (pid_t)pgid;
            } else if (line[0] == '-') {
                for (size_t i = 0; i < n; i++)
                    if (groups[i] == (pid_t)pgid) {
                        groups[i] = groups[--n];
                        break;
                    }
            }
            line = nl + 1;
        }
        len = strlen(line);
        memmove(buf, line, len);
        if (len == sizeof buf - 1)
            len = 0; /* no line is that long: garbage */
    }
    for (size_t i = 0; i < n; i++)
        kill(-groups[i], SIGKILL);
    free(groups);
    if (cgroup)
        empty_cgroup(cgroup);
    return 0;
}
