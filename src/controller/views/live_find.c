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

/* Reads the live-run file PATH into T.  Returns 1 when it names a live
 * controller, 0 when it is stale or unreadable. */
static int read_live_file(const char *path, ss_live_target *t)
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
    }
    cJSON_Delete(o);
    return ok;
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
            !read_live_file(path, out)) {
            snprintf(err, errlen, "run %" PRId64 " is not running: no live "
                     "controller for it (%s)", id, path);
            return -1;
        }
    } else {
        DIR *d = opendir(path);
        int64_t best = -1;
        ss_live_target found;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            long long id;
            char tail[8];
            if (sscanf(e->d_name, "run-%lld.%7s", &id, tail) != 2 ||
                strcmp(tail, "json") != 0 || id <= best)
                continue;
            memset(&found, 0, sizeof found);
            char file[PATH_MAX + 320];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            if (read_live_file(file, &found)) {
                best = id;
                *out = found;
            }
        }
        if (d)
            closedir(d);
        if (best < 0) {
            snprintf(err, errlen, "no job is running: no live controller in "
                     "%s (start one with `stepscope run`, or give --url)",
                     path);
            return -1;
        }
    }
    if (token)
        copy(out->token, sizeof out->token, token);
    return 0;
}
