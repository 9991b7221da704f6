/*
 * goodput_out.c - the goodput and reliability figures (goodput.h) as the
 * JSON objects of `report --json`, `goodput --json` and the HTTP API
 * (docs/report-json.md), and as Prometheus metrics (docs/api.md).
 */
#include "goodput_out.h"

#include <inttypes.h>

static void json_categories(ss_buf *b, const ss_dur_ns *ns)
{
    ss_buf_puts(b, "{");
    for (int c = 0; c < SS_GP_N; c++) {
        ss_buf_printf(b, "%s\"%s\": ", c ? ", " : "", ss_gp_category_name(c));
        ss_buf_json_ms(b, ns[c]);
    }
    ss_buf_puts(b, "}");
}

void ss_goodput_json(ss_buf *b, const ss_goodput *g)
{
    ss_buf_printf(b, "{\"run\": %" PRId64 ", \"running\": %s, \"wall_ms\": ",
                  g->run_id, g->running ? "true" : "false");
    ss_buf_json_ms(b, g->wall_ns);
    ss_buf_printf(b, ", \"goodput\": %.6f, \"ms\": ", g->goodput);
    json_categories(b, g->ns);
    ss_buf_puts(b, ", \"attempts\": [");
    for (size_t i = 0; i < g->n_attempts; i++) {
        const ss_gp_attempt *a = &g->attempts[i];
        ss_buf_printf(b, "%s{\"attempt\": %" PRId64 ", \"from\": ",
                      i ? ", " : "", a->attempt);
        ss_buf_json_time(b, a->from);
        ss_buf_puts(b, ", \"to\": ");
        ss_buf_json_time(b, a->to);
        ss_buf_puts(b, ", \"wall_ms\": ");
        ss_buf_json_ms(b, a->to - a->from);
        ss_buf_puts(b, ", \"cause\": ");
        if (a->cause[0])
            ss_buf_json_str(b, a->cause);
        else
            ss_buf_puts(b, "null");
        ss_buf_puts(b, ", \"first_step\": ");
        ss_buf_json_int(b, a->first_step);
        ss_buf_puts(b, ", \"last_step\": ");
        ss_buf_json_int(b, a->last_step);
        ss_buf_puts(b, ", \"resumed_from\": ");
        ss_buf_json_int(b, a->resumed_from);
        ss_buf_printf(b, ", \"steps\": %" PRId64 ", \"lost_steps\": %" PRId64
                         ", \"saves\": %" PRId64 ", \"ms\": ",
                      a->steps, a->lost_steps, a->saves);
        json_categories(b, a->ns);
        ss_buf_puts(b, "}");
    }
    ss_buf_puts(b, "]}");
}

static void json_number(ss_buf *b, double v)
{
    if (v < 0)
        ss_buf_puts(b, "null");
    else
        ss_buf_printf(b, "%.6g", v);
}

void ss_reliability_json(ss_buf *b, const ss_reliability *rel)
{
    ss_buf_printf(b, "{\"runs\": %" PRId64 ", \"failed_runs\": %" PRId64
                     ", \"up_ms\": ", rel->runs, rel->failed_runs);
    ss_buf_json_ms(b, rel->up_ns);
    ss_buf_printf(b, ", \"failures\": %" PRId64 ", \"by_cause\": {",
                  rel->failures);
    for (int c = 0; c < SS_GP_CAUSES; c++) {
        ss_buf_printf(b, "%s\"%s\": {\"failures\": %" PRId64
                         ", \"per_hour\": ",
                      c ? ", " : "", ss_gp_cause_name(c), rel->by_cause[c]);
        json_number(b, rel->per_hour[c]);
        ss_buf_puts(b, "}");
    }
    ss_buf_puts(b, "}, \"failures_per_hour\": ");
    json_number(b, rel->failures_per_hour);
    ss_buf_puts(b, ", \"mtbf_ms\": ");
    ss_buf_json_ms(b, rel->mtbf_ns);
    ss_buf_printf(b, ", \"recoveries\": %" PRId64 ", \"mttr_ms\": ",
                  rel->recoveries);
    ss_buf_json_ms(b, rel->mttr_ns);
    ss_buf_printf(b, ", \"saves\": %" PRId64 ", \"save_cost_ms\": ",
                  rel->saves);
    ss_buf_json_ms(b, rel->save_cost_ns);
    ss_buf_puts(b, ", \"interval_ms\": ");
    ss_buf_json_ms(b, rel->measured_interval_ns);
    ss_buf_puts(b, ", \"optimal_interval_ms\": ");
    ss_buf_json_ms(b, rel->optimal_interval_ns);
    ss_buf_puts(b, ", \"waste\": ");
    json_number(b, rel->waste_measured);
    ss_buf_puts(b, ", \"waste_optimal\": ");
    json_number(b, rel->waste_optimal);
    ss_buf_puts(b, ", \"gain\": ");
    json_number(b, rel->gain);
    ss_buf_puts(b, "}");
}

void ss_goodput_metrics(ss_buf *b, const ss_goodput *g)
{
    ss_buf_puts(b, "# HELP stepscope_goodput_ratio Productive time over "
                   "wall time of the run so far (docs/fault-tolerance.md).\n"
                   "# TYPE stepscope_goodput_ratio gauge\n");
    ss_buf_printf(b, "stepscope_goodput_ratio{run=\"%" PRId64 "\"} %.6f\n",
                  g->run_id, g->goodput);
    ss_buf_puts(b, "# HELP stepscope_goodput_seconds The run's wall time so "
                   "far by category: productive or a kind of badput.\n"
                   "# TYPE stepscope_goodput_seconds gauge\n");
    for (int c = 0; c < SS_GP_N; c++)
        ss_buf_printf(b, "stepscope_goodput_seconds{run=\"%" PRId64
                         "\",category=\"%s\"} %.3f\n",
                      g->run_id, ss_gp_category_name(c),
                      (double)g->ns[c] / 1e9);
    ss_buf_puts(b, "# HELP stepscope_attempts Attempts of the run so far.\n"
                   "# TYPE stepscope_attempts gauge\n");
    ss_buf_printf(b, "stepscope_attempts{run=\"%" PRId64 "\"} %zu\n",
                  g->run_id, g->n_attempts);
}
