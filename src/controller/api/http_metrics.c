/*
 * http_metrics.c - the Prometheus /metrics text (http_state.h,
 * docs/api.md): the server's own connection counters (http_gate.h), and
 * in a live controller the live run's metrics (live.h) and its goodput
 * (query.h), the latter recomputed from the store at most every
 * GOODPUT_METRICS_EVERY_NS and kept in the server handle between.
 */
#include "http_state.h"

#include <inttypes.h>
#include <pthread.h>

#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The live run's goodput lines in /metrics are recomputed from the store
 * at most this often (it reads every step of the run). */
#define GOODPUT_METRICS_EVERY_NS ((ss_mono_ns)15 * 1000000000)

/* Appends the live run's goodput lines, recomputed from the store when
 * older than GOODPUT_METRICS_EVERY_NS; nothing when the store cannot say
 * (the run's first rows are not committed yet). */
static void goodput_metrics(ss_http *h, ss_buf *b)
{
    ss_mono_ns now = ss_mono_now();
    pthread_mutex_lock(&h->mu);
    int fresh = h->goodput_at && now - h->goodput_at < GOODPUT_METRICS_EVERY_NS;
    pthread_mutex_unlock(&h->mu);
    if (!fresh) {
        char err[512];
        ss_buf lines = {0};
        ss_query *q = ss__http_pool_get(h, err, sizeof err);
        int rc = q ? ss_query_goodput(q, ss_live_run_id(h->live), ss_wall_now(),
                                      1, &lines, err, sizeof err)
                   : SS_QUERY_ERROR;
        if (q)
            ss__http_pool_put(h, q);
        pthread_mutex_lock(&h->mu);
        if (rc == 0 && !lines.oom) {
            ss_buf_free(&h->goodput_metrics);
            h->goodput_metrics = lines;
            h->goodput_at = now;
        } else {
            ss_buf_free(&lines);
        }
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_lock(&h->mu);
    if (h->goodput_metrics.data)
        ss_buf_add(b, h->goodput_metrics.data, h->goodput_metrics.len);
    pthread_mutex_unlock(&h->mu);
}

enum MHD_Result ss__http_serve_metrics(ss_http *h, struct MHD_Connection *c)
{
    ss_buf b = {0};
    ss_buf_puts(&b, "# HELP stepscope_info The stepscope serving these "
                    "metrics (value 1).\n# TYPE stepscope_info gauge\n");
    ss_buf_printf(&b, "stepscope_info{mode=\"%s\"} 1\n",
                  h->live ? "run" : "serve");
    ss_http_gate_counts n;
    ss_http_gate_get_counts(h->gate, &n);
    ss_buf_printf(&b, "# HELP stepscope_http_connections Open HTTP "
                  "connections (limit %u).\n# TYPE stepscope_http_connections "
                  "gauge\nstepscope_http_connections %u\n", n.max, n.open);
    ss_buf_printf(&b, "# HELP stepscope_http_refused_total Connections "
                  "answered 503 at the connection limits.\n# TYPE "
                  "stepscope_http_refused_total counter\n"
                  "stepscope_http_refused_total %" PRIu64 "\n", n.refused);
    ss_buf_printf(&b, "# HELP stepscope_http_request_timeouts_total "
                  "Connections closed because a request did not arrive in "
                  "full in time.\n# TYPE stepscope_http_request_timeouts_total "
                  "counter\nstepscope_http_request_timeouts_total %" PRIu64
                  "\n", n.timed_out);
    if (h->live && ss_live_metrics(h->live, &b) != 0)
        b.oom = 1;
    if (h->live)
        goodput_metrics(h, &b);
    if (b.oom) {
        ss_buf_free(&b);
        return ss__http_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                    "out of memory");
    }
    return ss__http_reply(c, MHD_HTTP_OK, METRICS_TYPE, &b);
}
