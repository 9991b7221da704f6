/*
 * report_live.c - `stepscope report --rank R` of a run that is still
 * running: the rank's latest steps, every one, as its node keeps them,
 * asked of the run's controller (GET /api/runs/{id}/recent, found through
 * the live-run file: live_find.h).  The store keeps every step of the
 * latest 512 for each rank in most runs, but a run aggregated by node
 * above 4,096 ranks writes a quiet rank's row every few steps only; its
 * node still has them all (docs/multinode.md, "A rank's recent steps").
 *
 * A run that is not running, or a controller that does not answer, adds
 * nothing: the report is what the store says, and says why in one line.
 */
#include "report_model.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpget.h"
#include "live_find.h"

#define LIVE_TIMEOUT_MS 6000 /* the controller waits 3 s for an agent */

void ss_report_rank_live_fetch(const char *db_path, int64_t run_id,
                               ss_report_rank *rk)
{
    ss_live_target t;
    char run[32], err[512], path[128];
    snprintf(run, sizeof run, "%" PRId64, run_id);
    if (ss_live_find(db_path, run, NULL, NULL, &t, err, sizeof err) != 0)
        return; /* not running: nothing to ask */
    snprintf(path, sizeof path, "/api/runs/%" PRId64 "/recent?rank=%" PRId64
             "&steps=%d", run_id, rk->rank, SS_REPORT_RANK_LIVE);
    ss_httpget_reply rep;
    if (ss_httpget(t.url, path, t.token[0] ? t.token : NULL, LIVE_TIMEOUT_MS,
                   &rep, err, sizeof err) != 0) {
        snprintf(rk->live_why, sizeof rk->live_why, "its controller at %s "
                 "did not answer: %s", t.url, err);
        return;
    }
    cJSON *doc = cJSON_ParseWithLength(rep.body, rep.len);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
    if (rep.status == 200 && cJSON_IsArray(rows)) {
        rk->live_recent = doc;
        doc = NULL;
    } else {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
        snprintf(rk->live_why, sizeof rk->live_why, "its controller answered "
                 "%d: %s", rep.status,
                 cJSON_IsString(e) ? e->valuestring : "not the rank's rows");
    }
    cJSON_Delete(doc);
    ss_httpget_free(&rep);
}

/* V (milliseconds, a number) as the report's cells write them. */
static const char *cell_ms(char *buf, size_t n, const cJSON *v)
{
    return ss__report_ms(buf, n, cJSON_IsNumber(v)
                                     ? (int64_t)(v->valuedouble * 1e6 + 0.5)
                                     : SS_MISSING);
}

void ss__report_rank_text_live(FILE *f, const ss_report *rp,
                               const ss_report_rank *rk)
{
    if (!rk->live_recent) {
        if (rk->live_why[0])
            fprintf(f, "LATEST STEPS FROM ITS NODE: none, %s\n\n", rk->live_why);
        return;
    }
    const cJSON *doc = rk->live_recent;
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(doc, "from");
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(doc, "node");
    const cJSON *recorded = cJSON_GetObjectItemCaseSensitive(doc, "recorded");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
    int agent = cJSON_IsString(from) && strcmp(from->valuestring, "agent") == 0;
    fprintf(f, "LATEST STEPS FROM ITS NODE (live, every step; ms; kept by %s",
            agent ? "node " : "the controller");
    if (agent)
        fprintf(f, "%d's agent", cJSON_IsNumber(node) ? node->valueint : -1);
    fprintf(f, "; %d of its %.0f records)\n", cJSON_GetArraySize(rows),
            cJSON_IsNumber(recorded) ? recorded->valuedouble : 0.0);
    size_t cols = rp->n_phases < 4 ? rp->n_phases : 4;
    fprintf(f, "  %8s %7s %10s", "step", "attempt", "time");
    for (size_t p = 0; p < cols; p++)
        fprintf(f, " %12.12s", rp->phases[p].name);
    fprintf(f, " %10s\n", "max RSS");
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) {
        const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
        const cJSON *att = cJSON_GetObjectItemCaseSensitive(row, "attempt");
        const cJSON *phases = cJSON_GetObjectItemCaseSensitive(row, "phases");
        const cJSON *rss = cJSON_GetObjectItemCaseSensitive(row, "rss_bytes");
        char a[32];
        fprintf(f, "  %8.0f %7.0f %10s",
                cJSON_IsNumber(step) ? step->valuedouble : -1.0,
                cJSON_IsNumber(att) ? att->valuedouble : -1.0,
                cell_ms(a, sizeof a,
                        cJSON_GetObjectItemCaseSensitive(row, "step_ms")));
        for (size_t p = 0; p < cols; p++)
            fprintf(f, " %12s",
                    cell_ms(a, sizeof a, cJSON_GetObjectItemCaseSensitive(
                                             phases, rp->phases[p].name)));
        fprintf(f, " %10s\n",
                ss__report_bytes(a, sizeof a, cJSON_IsNumber(rss)
                                                  ? (int64_t)rss->valuedouble
                                                  : SS_MISSING));
    }
    fputc('\n', f);
}

void ss__report_rank_json_live(ss_buf *b, const ss_report_rank *rk)
{
    char *text = rk->live_recent ? cJSON_PrintUnformatted(rk->live_recent)
                                 : NULL;
    if (text)
        ss_buf_puts(b, text);
    else
        ss_buf_puts(b, "null");
    free(text);
}
