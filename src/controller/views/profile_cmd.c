/*
 * profile_cmd.c - `stepscope profile` (profile_cmd.h).
 *
 * A thin client of the live controller's API: one POST that starts the
 * request, then a GET of its state every POLL_MS until it is finished or
 * the controller stops answering.  The controller decides when a rank has
 * timed out (the duration plus a grace, job/profile.h); this command only
 * waits a little longer than that.
 */
#include "profile_cmd.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "httpget.h"
#include "live_find.h"

#define POLL_MS 500
#define HTTP_TIMEOUT_MS 5000
#define GRACE_S 30 /* the controller's SS_PROFILE_GRACE_MS, in seconds */
#define EXTRA_WAIT_S 15

/* The document of a reply, or NULL with the reason in ERR. */
static cJSON *reply_json(const ss_httpget_reply *r, int want, char *err,
                         size_t errlen)
{
    cJSON *doc = r->body ? cJSON_Parse(r->body) : NULL;
    if (r->status == want && doc)
        return doc;
    const cJSON *e = doc ? cJSON_GetObjectItem(doc, "error") : NULL;
    snprintf(err, errlen, "the controller answered %d: %s", r->status,
             cJSON_IsString(e) ? e->valuestring
                               : r->body ? r->body : "(no body)");
    cJSON_Delete(doc);
    return NULL;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The live run's id through /api/live (for --url without a numeric RUN). */
static int live_run_id(const char *url, const char *token, int64_t *id,
                       char *err, size_t errlen)
{
    ss_httpget_reply r;
    if (ss_httpget(url, "/api/live", token, HTTP_TIMEOUT_MS, &r, err,
                   errlen) != 0)
        return -1;
    cJSON *doc = reply_json(&r, 200, err, errlen);
    ss_httpget_free(&r);
    if (!doc)
        return -1;
    const cJSON *v = cJSON_GetObjectItem(doc, "run_id");
    *id = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
    cJSON_Delete(doc);
    return *id > 0 ? 0 : -1;
}

/* Counts the ranks of DOC that answered. */
static int count_answered(const cJSON *doc, int *total)
{
    const cJSON *ranks = cJSON_GetObjectItem(doc, "ranks"), *r;
    int n = 0;
    *total = 0;
    cJSON_ArrayForEach(r, ranks) {
        const char *st = jstr(r, "status");
        (*total)++;
        n += st && strcmp(st, "requested") != 0 && strcmp(st, "pending") != 0;
    }
    return n;
}

/* Prints the outcome of DOC; returns 0 when every rank wrote a trace. */
static int print_outcome(const cJSON *doc, int64_t run_id, FILE *out)
{
    const cJSON *ranks = cJSON_GetObjectItem(doc, "ranks"), *r;
    int bad = 0, good = 0;
    cJSON_ArrayForEach(r, ranks) {
        const cJSON *rk = cJSON_GetObjectItem(r, "rank");
        const char *st = jstr(r, "status"), *path = jstr(r, "path"),
                   *host = jstr(r, "host"), *msg = jstr(r, "message");
        int rank = cJSON_IsNumber(rk) ? rk->valueint : -1;
        if (st && strcmp(st, "done") == 0) {
            good++;
            fprintf(out, "rank %d: %s%s%s%s\n", rank, path ? path : "?",
                    host ? " (on " : "", host ? host : "", host ? ")" : "");
        } else {
            bad++;
            fprintf(out, "rank %d: %s: %s\n", rank, st ? st : "?",
                    msg ? msg : "no trace");
        }
    }
    if (good)
        fprintf(out, "`stepscope trace %" PRId64 " -o FILE` merges %s with "
                     "the steps.\n", run_id, good == 1 ? "it" : "them");
    return bad ? 1 : 0;
}

int ss_profile_cmd(const ss_profile_opts *o, FILE *out, FILE *err)
{
    int rc;
    char msg[512];
    ss_live_target t;
    if (ss_live_find(o->live.db, o->live.url ? NULL : o->live.run, o->live.url,
                     o->live.token, &t, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope profile: %s\n", msg);
        return 1;
    }
    const char *url = t.url;
    const char *token = t.token;
    int64_t run_id = t.run_id;
    const char *tok = token[0] ? token : NULL;
    if (!run_id && o->live.run &&
        o->live.run[strspn(o->live.run, "0123456789")] == '\0')
        run_id = strtoll(o->live.run, NULL, 10);
    if (!run_id && live_run_id(url, tok, &run_id, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope profile: no live run at %s: %s\n", url, msg);
        return 1;
    }
    char path[256];
    snprintf(path, sizeof path, "/api/runs/%" PRId64 "/profile?ranks=%s"
             "&seconds=%s", run_id, o->ranks, o->seconds);
    ss_httpget_reply r;
    if (ss_httppost(url, path, tok, HTTP_TIMEOUT_MS, &r, msg, sizeof msg)) {
        fprintf(err, "stepscope profile: %s: %s\n", url, msg);
        return 1;
    }
    cJSON *doc = reply_json(&r, 202, msg, sizeof msg);
    ss_httpget_free(&r);
    if (!doc) {
        fprintf(err, "stepscope profile: %s\n", msg);
        return 1;
    }
    const cJSON *rq = cJSON_GetObjectItem(doc, "request");
    int64_t request = cJSON_IsNumber(rq) ? (int64_t)rq->valuedouble : 0;
    double seconds = strtod(o->seconds, NULL);
    time_t give_up = time(NULL) + (time_t)seconds + GRACE_S + EXTRA_WAIT_S;
    int tty = isatty(fileno(err));
    int total, answered = count_answered(doc, &total);
    while (answered < total && time(NULL) < give_up) {
        if (tty)
            fprintf(err, "\rstepscope profile: request %" PRId64 ", %.3g s: "
                         "%d of %d ranks answered", request, seconds,
                    answered, total);
        usleep(POLL_MS * 1000);
        snprintf(path, sizeof path, "/api/runs/%" PRId64 "/profile?request="
                 "%" PRId64, run_id, request);
        if (ss_httpget(url, path, tok, HTTP_TIMEOUT_MS, &r, msg,
                       sizeof msg) != 0) {
            if (tty)
                fputc('\n', err);
            fprintf(err, "stepscope profile: the controller stopped "
                         "answering: %s\n", msg);
            cJSON_Delete(doc);
            return 1;
        }
        cJSON *next = reply_json(&r, 200, msg, sizeof msg);
        ss_httpget_free(&r);
        if (!next) {
            if (tty)
                fputc('\n', err);
            fprintf(err, "stepscope profile: %s\n", msg);
            cJSON_Delete(doc);
            return 1;
        }
        cJSON_Delete(doc);
        doc = next;
        answered = count_answered(doc, &total);
    }
    if (tty)
        fprintf(err, "\rstepscope profile: request %" PRId64 ": %d of %d "
                     "ranks answered\n", request, answered, total);
    rc = print_outcome(doc, run_id, out);
    cJSON_Delete(doc);
    return rc;
}
