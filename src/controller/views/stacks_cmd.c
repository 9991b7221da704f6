/*
 * stacks_cmd.c - `stepscope stacks` (stacks_cmd.h): one POST to the live
 * controller, the merged text as the controller wrote it, and the details
 * a person needs next: which ranks gave no Python stack and why, and with
 * --native the native frames of each rank's threads.
 */
#include "stacks_cmd.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "httpget.h"
#include "live_find.h"

#define REQUEST_TIMEOUT_MS 40000 /* the controller's own deadline is less */
#define NATIVE_SHOWN 16          /* native frames printed per thread */

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static void print_native(const cJSON *rank, FILE *out)
{
    const cJSON *threads =
        cJSON_GetObjectItemCaseSensitive(rank, "native_threads");
    const char *nerr = jstr(rank, "native_error");
    fprintf(out, "rank %d (pid %d, %s):%s%s\n", (int)jnum(rank, "rank", -1),
            (int)jnum(rank, "pid", 0), jstr(rank, "state") ?: "?",
            nerr ? " native frames incomplete: " : "", nerr ? nerr : "");
    const cJSON *t;
    cJSON_ArrayForEach(t, threads) {
        fprintf(out, "  thread %d %s:", (int)jnum(t, "tid", 0),
                jstr(t, "name") ?: "");
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t, "native");
        int k = 0, n = cJSON_GetArraySize(frames);
        const cJSON *f;
        cJSON_ArrayForEach(f, frames) {
            if (k++ == NATIVE_SHOWN) {
                fprintf(out, " ← … (%d more)", n - NATIVE_SHOWN);
                break;
            }
            const char *sym = jstr(f, "symbol"), *mod = jstr(f, "module");
            if (sym)
                fprintf(out, "%s %s", k > 1 ? " ←" : "", sym);
            else
                fprintf(out, "%s %s@%s", k > 1 ? " ←" : "",
                        mod ? mod : "?", jstr(f, "pc") ?: "?");
        }
        fputs("\n", out);
    }
}

static int print_text(const cJSON *doc, int native, FILE *out)
{
    int total = (int)jnum(doc, "ranks_total", 0);
    int answered = (int)jnum(doc, "answered", 0);
    fprintf(out, "stacks of run %" PRId64 ": %d of %d rank%s answered in "
            "%.0f ms%s\n", (int64_t)jnum(doc, "run_id", 0), answered, total,
            total == 1 ? "" : "s", jnum(doc, "elapsed_ms", 0),
            answered < total ? " (partial: see below)" : "");
    fputs(jstr(doc, "merged_text") ?: "", out);
    /* The controller groups the other threads by call path; a document
     * of before that has only the ranks. */
    const char *other = jstr(doc, "other_threads_text");
    if (other && *other)
        fprintf(out, "\nother threads:\n%s", other);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(doc, "ranks");
    const cJSON *listed = other ? NULL : ranks, *r;
    int first = 1;
    cJSON_ArrayForEach(r, listed) {
        const cJSON *threads = cJSON_GetObjectItemCaseSensitive(r, "threads");
        int nt = cJSON_GetArraySize(threads);
        if (nt < 2)
            continue;
        if (first)
            fputs("\nother threads:\n", out);
        first = 0;
        /* The last thread is the main one, already in the groups. */
        for (int i = 0; i < nt - 1; i++) {
            const cJSON *t = cJSON_GetArrayItem(threads, i);
            const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t,
                                                                   "frames");
            fprintf(out, "  rank %d thread %s:", (int)jnum(r, "rank", -1),
                    jstr(t, "id") ?: "?");
            const cJSON *f;
            int k = 0;
            cJSON_ArrayForEach(f, frames)
                fprintf(out, "%s%s", k++ ? " → " : " ", jstr(f, "func") ?: "?");
            const cJSON *leaf = cJSON_GetArrayItem(frames,
                                                   cJSON_GetArraySize(frames) -
                                                       1);
            if (leaf && jstr(leaf, "code"))
                fprintf(out, ": %s", jstr(leaf, "code"));
            fputs("\n", out);
        }
    }
    if (native) {
        fputs("\nnative frames (innermost first):\n", out);
        cJSON_ArrayForEach(r, ranks)
            print_native(r, out);
    }
    return answered < total ? 3 : 0;
}

int ss_stacks_cmd(const ss_stacks_opts *o, FILE *out, FILE *err)
{
    int rc;
    ss_live_target t;
    char msg[1024];
    if (ss_live_find(o->live.db, o->live.run, o->live.url, o->live.token, &t, msg,
                     sizeof msg) != 0) {
        fprintf(err, "stepscope stacks: %s\n", msg);
        return 1;
    }
    int64_t run_id = t.run_id;
    if (!run_id && o->live.run && o->live.run[strspn(o->live.run, "0123456789")] == '\0')
        run_id = strtoll(o->live.run, NULL, 10);
    ss_httpget_reply rep;
    if (!run_id) { /* --url without RUN: the run it drives */
        if (ss_httpget(t.url, "/api/runs", t.token[0] ? t.token : NULL,
                       5000, &rep, msg, sizeof msg) != 0) {
            fprintf(err, "stepscope stacks: %s: %s\n", t.url, msg);
            return 1;
        }
        cJSON *runs = rep.status == 200 ? cJSON_Parse(rep.body) : NULL;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(runs, "runs");
        const cJSON *one;
        cJSON_ArrayForEach(one, list)
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(one, "live")))
                run_id = (int64_t)jnum(one, "id", 0);
        cJSON_Delete(runs);
        ss_httpget_free(&rep);
        if (!run_id) {
            fprintf(err, "stepscope stacks: %s drives no live run\n", t.url);
            return 1;
        }
    }
    char path[96];
    /* The text needs the ranks' objects only for their native frames:
     * without them the answer of thousands of ranks is kilobytes, not
     * megabytes. */
    snprintf(path, sizeof path, "/api/runs/%" PRId64 "/stacks%s", run_id,
             o->native ? "?native=1" : o->json ? "" : "?ranks=0");
    if (ss_httppost(t.url, path, t.token[0] ? t.token : NULL,
                    REQUEST_TIMEOUT_MS, &rep, msg, sizeof msg) != 0) {
        fprintf(err, "stepscope stacks: %s: %s\n", t.url, msg);
        return 1;
    }
    cJSON *doc = cJSON_Parse(rep.body);
    if (rep.status != 200 || !doc) {
        const char *why = doc ? jstr(doc, "error") : NULL;
        fprintf(err, "stepscope stacks: %s%s: HTTP %d: %s\n", t.url, path + 1,
                rep.status, why ? why : "not a JSON document");
        cJSON_Delete(doc);
        ss_httpget_free(&rep);
        return 1;
    }
    if (o->json) {
        fputs(rep.body, out);
        rc = jnum(doc, "answered", 0) < jnum(doc, "ranks_total", 0) ? 3 : 0;
    } else {
        rc = print_text(doc, o->native, out);
    }
    cJSON_Delete(doc);
    ss_httpget_free(&rep);
    if (fflush(out) != 0)
        return 1;
    return rc;
}
