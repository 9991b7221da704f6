/*
 * stack_doc.c - the stacks document (stack_doc.h): parses each rank's
 * object, picks its representative thread, merges, and writes it all.
 */
#include "stack_doc.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "stack_merge.h"

typedef struct {
    cJSON *obj;
    const char **funcs;
} parsed;

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ss_stack_doc(const ss_stack_doc_info *info, const char *const *ranks,
                 size_t n, ss_buf *out)
{
    parsed *p = calloc(n ? n : 1, sizeof *p);
    ss_stack_rank_in *in = calloc(n ? n : 1, sizeof *in);
    if (!p || !in) {
        free(p);
        free(in);
        return -1;
    }
    size_t answered = 0;
    for (size_t i = 0; i < n; i++) {
        ss_stack_rank_in *r = &in[i];
        p[i].obj = ranks[i] ? cJSON_Parse(ranks[i]) : NULL;
        const cJSON *o = p[i].obj;
        const cJSON *rank = cJSON_GetObjectItemCaseSensitive(o, "rank");
        r->rank = cJSON_IsNumber(rank) ? (uint32_t)rank->valuedouble
                                       : (uint32_t)i;
        r->state = o ? jstr(o, "state") : NULL;
        r->why = o ? jstr(o, "why") : "the rank's answer did not parse";
        if (!r->state)
            r->state = "no_answer";
        const cJSON *threads = cJSON_GetObjectItemCaseSensitive(o, "threads");
        int nt = cJSON_IsArray(threads) ? cJSON_GetArraySize(threads) : 0;
        /* answered: gave its Python stack (a stopped rank read from its
         * memory did, in state "stopped") */
        if (strcmp(r->state, "ok") == 0 || nt > 0)
            answered++;
        if (nt == 0)
            continue;
        const cJSON *main = cJSON_GetArrayItem(threads, nt - 1);
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(main, "frames");
        int nf = cJSON_IsArray(frames) ? cJSON_GetArraySize(frames) : 0;
        r->other_threads = (uint32_t)(nt - 1);
        if (nf == 0)
            continue;
        p[i].funcs = calloc((size_t)nf, sizeof *p[i].funcs);
        if (!p[i].funcs)
            continue;
        int k = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, frames) {
            const char *func = jstr(f, "func");
            p[i].funcs[k++] = func ? func : "?";
            if (k == nf)
                r->leaf_code = jstr(f, "code");
        }
        r->funcs = p[i].funcs;
        r->depth = (size_t)k;
    }

    ss_buf_printf(out, "{\"run_id\":%lld,\"attempt\":%u,\"taken_at\":",
                  (long long)info->run_id, info->attempt);
    ss_buf_json_time(out, info->taken_at);
    ss_buf_puts(out, ",\"trigger\":");
    ss_buf_json_str(out, info->trigger ? info->trigger : "request");
    ss_buf_printf(out, ",\"native\":%s,\"elapsed_ms\":%.1f,\"answered\":%zu,"
                  "\"ranks_total\":%zu,\"merged_text\":",
                  info->native ? "true" : "false", info->elapsed_ms, answered,
                  n);
    ss_buf text = {0}, merged = {0};
    int rc = ss_stack_merge(in, n, &text, &merged);
    ss_buf_json_str(out, text.data ? text.data : "");
    ss_buf_puts(out, ",\"merged\":");
    if (rc >= 0)
        ss_buf_add(out, merged.data, merged.len);
    else
        ss_buf_puts(out, "null");
    ss_buf_puts(out, ",\"ranks\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ss_buf_puts(out, ",");
        /* Our own collector's JSON; a foreign one is re-printed. */
        if (p[i].obj)
            ss_buf_puts(out, ranks[i]);
        else
            ss_buf_printf(out, "{\"rank\":%u,\"state\":\"no_answer\","
                          "\"why\":\"the rank's answer did not parse\","
                          "\"threads\":[]}", in[i].rank);
    }
    ss_buf_puts(out, "]}");
    ss_buf_free(&text);
    ss_buf_free(&merged);
    for (size_t i = 0; i < n; i++) {
        cJSON_Delete(p[i].obj);
        free(p[i].funcs);
    }
    free(p);
    free(in);
    return out->oom || rc < 0 ? -1 : 0;
}
