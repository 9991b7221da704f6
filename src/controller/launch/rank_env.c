/*
 * rank_env.c - builds the STEPSCOPE_* entries of a rank's environment
 * (rank_env.h), and finds the Python package it puts on PYTHONPATH.
 */
#include "rank_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Finds the stepscope Python package beside the executable EXE: in
 * <exe dir>/python (a build directory's own copy, build-asan/python),
 * <exe dir>/../python (the source tree's, for build/stepscope) or
 * <exe dir>/../lib/stepscope/python (`make install`'s), the first that
 * holds PROBE (a path under the package's directory). Writes the
 * directory that holds the package into PY (resolved) and returns 0, or
 * -1 with the places looked at in TRIED.
 */
static int find_package(const char *exe, const char *probe, char *py,
                        size_t pylen, char *tried, size_t triedlen)
{
    char dir[PATH_MAX], at[3][PATH_MAX + 32], path[PATH_MAX + 96];
    char real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    snprintf(at[0], sizeof at[0], "%s/python", dir);
    snprintf(at[1], sizeof at[1], "%s/../python", dir);
    snprintf(at[2], sizeof at[2], "%s/../lib/stepscope/python", dir);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", at[i], probe);
        if (access(path, R_OK) == 0 && realpath(at[i], real)) {
            snprintf(py, pylen, "%s", real);
            return 0;
        }
    }
    snprintf(tried, triedlen, "%s, %s or %s", at[0], at[1], at[2]);
    return -1;
}

/*
 * The PYTHONPATH entry of a rank's environment into OUT. For --auto:
 * "PYTHONPATH=<py>/stepscope/_autoload:<py>[:inherited]", the _autoload
 * directory holding the sitecustomize.py that installs the hooks; it needs
 * the package (-1 with a reason in ERR without it). Otherwise the package
 * goes after what the user's PYTHONPATH holds ("PYTHONPATH=[inherited:]
 * <py>"), so that a script that imports stepscope finds the one that
 * matches this controller unless the user put another first; without the
 * package OUT is "" (no entry). Returns 0 or -1.
 */
static int rank_pythonpath(const char *exe, int auto_mode, char *out,
                           size_t outlen, char *err, size_t errlen)
{
    char py[PATH_MAX], tried[4 * PATH_MAX];
    out[0] = '\0';
    const char *old = getenv("PYTHONPATH");
    int has_old = old && *old;
    if (find_package(exe, auto_mode ? "stepscope/_autoload/sitecustomize.py"
                                    : "stepscope/__init__.py",
                     py, sizeof py, tried, sizeof tried) != 0) {
        if (!auto_mode)
            return 0;
        snprintf(err, errlen, "--auto needs the stepscope Python package, "
                 "but there is no stepscope/_autoload/sitecustomize.py in %s",
                 tried);
        return -1;
    }
    size_t n;
    if (auto_mode)
        n = (size_t)snprintf(out, outlen,
                             "PYTHONPATH=%s/stepscope/_autoload:%s%s%s", py,
                             py, has_old ? ":" : "", has_old ? old : "");
    else
        n = (size_t)snprintf(out, outlen, "PYTHONPATH=%s%s%s",
                             has_old ? old : "", has_old ? ":" : "", py);
    if (n >= outlen) {
        out[0] = '\0';
        if (!auto_mode)
            return 0;
        snprintf(err, errlen, "--auto: PYTHONPATH would be too long");
        return -1;
    }
    return 0;
}

/* Lists E's entries in E->env: the connection's, --auto's when on, then
 * the options that are set. */
static void relist(ss_rank_env *e)
{
    size_t n = 0;
    e->env[n++] = e->addr;
    e->env[n++] = e->token;
    e->env[n++] = e->run;
    e->env[n++] = e->stack_dir;
    if (e->pythonpath[0])
        e->env[n++] = e->pythonpath;
    if (e->auto_mode) {
        e->env[n++] = e->auto_on;
        e->env[n++] = e->auto_pid;
        e->env[n++] = e->numerics;
    }
    char *opt[] = {e->checksum_every, e->checksum, e->replica_groups,
                   e->diverged_at};
    for (size_t i = 0; i < sizeof opt / sizeof *opt; i++)
        if (opt[i][0])
            e->env[n++] = opt[i];
    e->env[n] = NULL;
}

/* Writes "NAME=VALUE" into OUT, or "" when VALUE is NULL.  Returns 0, or
 * -1 (OUT "") when it does not fit. */
static int entry(char *out, size_t outlen, const char *name,
                 const char *value)
{
    out[0] = '\0';
    if (!value)
        return 0;
    int n = snprintf(out, outlen, "%s=%s", name, value);
    if (n < 0 || (size_t)n >= outlen) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

int ss_rank_env_build(ss_rank_env *e, const char *exe, const char *sock_path,
                      const char *stack_dir,
                      const uint8_t token[WIRE_TOKEN_SIZE],
                      const char *run_uuid, int auto_mode, char *err,
                      size_t errlen)
{
    memset(e, 0, sizeof *e);
    char hex[2 * WIRE_TOKEN_SIZE + 1];
    wire_token_format(token, hex);
    snprintf(e->addr, sizeof e->addr, "STEPSCOPE_ADDR=unix:%s", sock_path);
    snprintf(e->token, sizeof e->token, "STEPSCOPE_TOKEN=%s", hex);
    snprintf(e->run, sizeof e->run, "STEPSCOPE_RUN_ID=%s", run_uuid);
    snprintf(e->auto_on, sizeof e->auto_on, "STEPSCOPE_AUTO=1");
    snprintf(e->auto_pid, sizeof e->auto_pid, "STEPSCOPE_AUTO_PID=");
    snprintf(e->stack_dir, sizeof e->stack_dir, "STEPSCOPE_STACK_DIR=%s",
             stack_dir);
    ss_rank_env_set_numerics(e, "light");
    e->auto_mode = auto_mode;
    if (rank_pythonpath(exe, auto_mode, e->pythonpath, sizeof e->pythonpath,
                        err, errlen) < 0)
        return -1;
    relist(e);
    return 0;
}

void ss_rank_env_set_numerics(ss_rank_env *e, const char *mode)
{
    snprintf(e->numerics, sizeof e->numerics, "STEPSCOPE_NUMERICS=%s", mode);
}

int ss_rank_env_set_replica(ss_rank_env *e, const ss_replica_opts *o)
{
    static const ss_replica_opts none = {0};
    if (!o)
        o = &none;
    int rc = entry(e->checksum_every, sizeof e->checksum_every,
                   "STEPSCOPE_CHECKSUM_EVERY", o->checksum_every) |
             entry(e->checksum, sizeof e->checksum, "STEPSCOPE_CHECKSUM",
                   o->checksum) |
             entry(e->replica_groups, sizeof e->replica_groups,
                   "STEPSCOPE_REPLICA_GROUPS", o->replica_groups);
    relist(e);
    return rc ? -1 : 0;
}

void ss_rank_env_set_diverged_at(ss_rank_env *e, int64_t step)
{
    e->diverged_at[0] = '\0';
    if (step >= 0)
        snprintf(e->diverged_at, sizeof e->diverged_at,
                 "STEPSCOPE_DIVERGED_AT=%lld", (long long)step);
    relist(e);
}

int ss_rank_env_self_exe(char *out, size_t outlen, char *err, size_t errlen)
{
    ssize_t n = readlink("/proc/self/exe", out, outlen - 1);
    if (n <= 0) {
        snprintf(err, errlen, "cannot find the stepscope executable: %s",
                 strerror(errno));
        return -1;
    }
    out[n] = '\0';
    return 0;
}
