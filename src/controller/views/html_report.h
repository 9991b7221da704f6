/*
 * html_report.h - `stepscope report --html`: one run as one HTML file.
 *
 * The page is the dashboard itself (web/, compiled in: web_assets.h) with
 * its stylesheets and scripts inlined and the run's API documents
 * (query.h) embedded as JSON, so it draws the same charts with no server
 * and no network: it can be mailed, attached to a ticket or opened years
 * later.  Nothing in it refers to another file.
 *
 *   stepscope report --html [-o FILE] [--db PATH] [--attempt N] [RUN]
 *
 * The embedded object (<script id="ss-data" type="application/json">):
 *   {"format":"stepscope.html/1", "version", "generated_at", "db",
 *    "run": <GET /api/runs/{id}>, "step_pages": [<GET .../steps>, ...]
 *    (every finalized step, in pages of SS_QUERY_MAX_STEPS),
 *    "heatmap": <GET .../heatmap> (the latest kept rank-steps),
 *    "ranks", "findings", "events": <the matching documents>,
 *    "values": ss_query_values_embed's object (the vector names and, for
 *    the first SS_HTML_VALUES_NAMES, two heat maps each)}
 */
#ifndef STEPSCOPE_HTML_REPORT_H
#define STEPSCOPE_HTML_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "query.h"

/* Heat-map columns (steps) embedded in a report, at most. */
#define SS_HTML_HEAT_STEPS 2000
/* Vector names whose heat maps a page carries (the first by name). */
#define SS_HTML_VALUES_NAMES 8

/*
 * Appends the whole page for attempt ATTEMPT (-1: the latest) of run
 * RUN_ID in the store at DB_PATH to PAGE (caller-owned; free it with
 * ss_buf_free).  Returns 0; SS_QUERY_NOT_FOUND when the run or the attempt
 * does not exist; SS_QUERY_ERROR with a one-line reason in ERR when the
 * store cannot be read or memory runs out.  On error PAGE may hold a
 * partial page.
 */
int ss_html_report_build(ss_buf *page, const char *db_path, int64_t run_id,
                         int64_t attempt, char *err, size_t errlen);

/*
 * `stepscope report --html` once the run is chosen: builds the page and
 * writes it to OUT_PATH ("-": to OUT; NULL: "stepscope-run-<ID>.html" in
 * the current directory), through a temporary file renamed into place, so
 * a reader never sees half a page.  Says where it wrote on OUT (unless
 * writing the page there) and reports failures on ERR as one line starting
 * "stepscope report: ".  Returns the exit status: 0 or 1.
 */
int ss_html_report_cmd(const char *db_path, int64_t run_id, int64_t attempt,
                       const char *out_path, FILE *out, FILE *err);

#endif
