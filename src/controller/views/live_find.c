/*
 * live_find.c - a running controller's API, from its live-run file or a
 * URL (live_find.h).
 */
#include "live_find.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "store_files.h"

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static int pid_alive(long pid)
{
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Reads the live-run file PATH into T (and its controller's pid into
 * *PID_OUT when not NULL).  Returns 1 when it names a live controller, 0
 * when it is stale or unreadable. */
static int read_live_file(const char *path, ss_live_target *t,
                          long *pid_out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *o = cJSON_Parse(buf);
    if (!o)
        return 0;
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(o, "url");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(o, "token");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid");
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run_id");
    int ok = cJSON_IsString(url) && cJSON_IsNumber(run) &&
             run->valuedouble > 0 && cJSON_IsNumber(pid) &&
             pid_alive((long)pid->valuedouble);
    if (ok) {
        copy(t->url, sizeof t->url, url->valuestring);
        copy(t->token, sizeof t->token,
             cJSON_IsString(tok) ? tok->valuestring : "");
        t->run_id = (int64_t)run->valuedouble;
        if (pid_out)
            *pid_out = (long)pid->valuedouble;
    }
    cJSON_Delete(o);
    return ok;
}

#define LIVE_LISTED 8 /* live runs named when more than one runs */

/* "run 4 (NAME, pid 123)" of the live run T into OUT, its name from the
 * store R when it can tell. */
static void describe(ss_reader *r, const ss_live_target *t, long pid,
                     char *out, size_t outlen)
{
    ss_run_row row;
    if (r && ss_reader_run(r, t->run_id, &row) == 0) {
        snprintf(out, outlen, "run %" PRId64 " (%s, pid %ld)", t->run_id,
                 row.name ? row.name : "?", pid);
        ss_run_row_clear(&row);
    } else {
        snprintf(out, outlen, "run %" PRId64 " (pid %ld)", t->run_id, pid);
    }
}

/* The one live run among the live-run files in DIR into *OUT.  Returns 0;
 * -1 with ERR when none runs, or when several do: then they are listed
 * (the newest first) and the caller is asked to name one. */
static int newest_live(const char *db, const char *dir, ss_live_target *out,
                       char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    ss_live_target live[LIVE_LISTED];
    long pids[LIVE_LISTED];
    size_t n = 0, kept = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        long long id;
        char tail[8];
        if (sscanf(e->d_name, "run-%lld.%7s", &id, tail) != 2 ||
            strcmp(tail, "json") != 0)
            continue;
        ss_live_target found;
        memset(&found, 0, sizeof found);
        char file[PATH_MAX + 320];
        snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
        long pid = 0;
        if (!read_live_file(file, &found, &pid))
            continue;
        n++;
        /* Keep the newest LIVE_LISTED, newest first. */
        size_t at = 0;
        while (at < kept && live[at].run_id > found.run_id)
            at++;
        if (at >= LIVE_LISTED)
            continue;
        size_t move = kept - at - (kept == LIVE_LISTED);
        memmove(&live[at + 1], &live[at], move * sizeof live[0]);
        memmove(&pids[at + 1], &pids[at], move * sizeof pids[0]);
        live[at] = found;
        pids[at] = pid;
        kept += kept < LIVE_LISTED;
    }
    if (d)
        closedir(d);
    if (n == 0) {
        snprintf(err, errlen, "no job is running: no live controller in %s "
                 "(start one with `stepscope run`, or give --url)", dir);
        return -1;
    }
    if (n == 1) {
        *out = live[0];
        return 0;
    }
    char rerr[256];
    ss_reader *r = ss_reader_open(db, rerr, sizeof rerr);
    size_t len = (size_t)snprintf(err, errlen, "%zu jobs are running: ", n);
    for (size_t i = 0; i < kept && len < errlen; i++) {
        char one[400];
        describe(r, &live[i], pids[i], one, sizeof one);
        len += (size_t)snprintf(err + len, errlen - len, "%s%s",
                                i ? ", " : "", one);
    }
    if (len < errlen && n > kept)
        len += (size_t)snprintf(err + len, errlen - len, " and %zu more",
                                n - kept);
    if (len < errlen)
        snprintf(err + len, errlen - len, "; say which with its id or name "
                 "(RUN), e.g. %" PRId64, live[0].run_id);
    ss_reader_close(r);
    return -1;
}

int ss_live_find(const char *db, const char *run, const char *url,
                 const char *token, ss_live_target *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (url) {
        copy(out->url, sizeof out->url, url);
        copy(out->token, sizeof out->token, token);
        return 0;
    }
    char path[PATH_MAX];
    if (ss_store_live_dir(db, path, sizeof path) != 0) {
        if (!db && errno == ENOENT)
            snprintf(err, errlen, "neither XDG_DATA_HOME nor HOME is set: "
                                  "use --db PATH or --url URL");
        else
            snprintf(err, errlen, "no live-run files for %s: %s",
                     db ? db : "the default store", strerror(errno));
        return -1;
    }
    if (run) {
        int64_t id = 0;
        if (run[strspn(run, "0123456789")] == '\0' && strlen(run) < 19) {
            id = strtoll(run, NULL, 10);
        } else {
            ss_reader *r = ss_reader_open(db, err, errlen);
            if (!r)
                return -1;
            int rc = ss_reader_select_run(r, run, &id);
            if (rc != 0)
                snprintf(err, errlen, "%s", ss_reader_errmsg(r));
            ss_reader_close(r);
            if (rc != 0)
                return -1;
        }
        if (ss_store_live_file(db, id, path, sizeof path) != 0 ||
            !read_live_file(path, out, NULL)) {
            snprintf(err, errlen, "run %" PRId64 " is not running: no live "
                     "controller for it (%s)", id, path);
            return -1;
        }
    } else if (newest_live(db, path, out, err, errlen) != 0) {
        return -1;
    }
    if (token)
        copy(out->token, sizeof out->token, token);
    return 0;
}
