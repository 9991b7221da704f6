/*
 * report_json.c - the JSON report (docs/report-json.md) and the JSON list
 * of runs, written through base/json.h.
 *
 * The document is built in a buffer with the shared JSON writers (strings
 * escaped per RFC 8259, invalid UTF-8 replaced by U+FFFD, so the output is
 * valid whatever a rank sent; milliseconds with 3 decimals; missing values
 * null) and written out whenever the buffer passes FLUSH_AT bytes, so
 * memory stays small for a world of a million ranks.
 */
#include <inttypes.h>
#include <string.h>

#include "goodput_view.h"
#include "json.h"
#include "query.h"
#include "report_model.h"

#define FLUSH_AT (64 * 1024)

typedef struct {
    ss_buf b;
    FILE *f;
    int nomem; /* an append failed: the document is incomplete */
} out;

/* Writes what the buffer holds and empties it; after an out-of-memory
 * append nothing more is written (the caller reports it). */
static void flush(out *o)
{
    o->nomem |= o->b.oom;
    if (!o->nomem && o->b.len)
        fwrite(o->b.data, 1, o->b.len, o->f);
    ss_buf_reset(&o->b);
}

static void maybe_flush(out *o)
{
    if (o->b.len >= FLUSH_AT)
        flush(o);
}

static void json_pcts(ss_buf *b, const ss_report_vec *a)
{
    ss_buf_puts(b, "{\"p50\": ");
    ss_buf_json_ms(b, ss_report_pct(a, 500));
    ss_buf_puts(b, ", \"p90\": ");
    ss_buf_json_ms(b, ss_report_pct(a, 900));
    ss_buf_puts(b, ", \"p99\": ");
    ss_buf_json_ms(b, ss_report_pct(a, 990));
    ss_buf_puts(b, "}");
}

/* The object {phase name: ms} of the known values of V (one per phase of
 * RP, in its order). */
static void json_phase_values(ss_buf *b, const ss_report *rp,
                              const int64_t *v)
{
    ss_buf_puts(b, "{");
    int first = 1;
    for (size_t p = 0; p < rp->n_phases; p++) {
        if (v[p] == SS_MISSING)
            continue;
        ss_buf_puts(b, first ? "" : ", ");
        first = 0;
        ss_buf_json_str(b, rp->phases[p].name);
        ss_buf_puts(b, ": ");
        ss_buf_json_ms(b, v[p]);
    }
    ss_buf_puts(b, "}");
}

void ss__report_json_run(ss_buf *b, const ss_report *rp)
{
    const ss_run_row *r = &rp->run;
    ss_buf_printf(b, "  \"run\": {\"id\": %" PRId64 ", \"uuid\": ", r->id);
    ss_buf_json_str(b, r->uuid);
    ss_buf_puts(b, ", \"name\": ");
    ss_buf_json_str(b, r->name);
    ss_buf_puts(b, ", \"command\": ");
    ss_buf_json_str(b, r->command);
    ss_buf_puts(b, ", \"host\": ");
    ss_buf_json_str(b, r->host);
    ss_buf_puts(b, ", \"world_size\": ");
    ss_buf_json_int(b, r->world_size);
    ss_buf_puts(b, ", \"status\": ");
    ss_buf_json_str(b, r->status);
    ss_buf_puts(b, ", \"exit_code\": ");
    ss_buf_json_int(b, r->exit_code);
    ss_buf_puts(b, ", \"started_at\": ");
    ss_buf_json_time(b, r->started_at);
    ss_buf_puts(b, ", \"ended_at\": ");
    ss_buf_json_time(b, r->ended_at);
    ss_buf_puts(b, ", \"started_at_ns\": ");
    ss_buf_json_int(b, r->started_at);
    ss_buf_puts(b, ", \"ended_at_ns\": ");
    ss_buf_json_int(b, r->ended_at);
    ss_buf_puts(b, ", \"duration_s\": ");
    if (r->ended_at != SS_MISSING && r->started_at != SS_MISSING)
        ss_buf_printf(b, "%.3f", (double)(r->ended_at - r->started_at) / 1e9);
    else
        ss_buf_puts(b, "null");
    ss_buf_printf(b, ", \"attempt\": %" PRId64 ", \"attempts\": %" PRId64
                  "},\n", rp->attempt, rp->n_attempts);
}

static void json_findings(out *o, const ss_report *rp)
{
    ss_buf *b = &o->b;
    ss_buf_puts(b, "  \"findings\": [");
    for (size_t i = 0; i < rp->n_findings; i++) {
        const ss_finding_row *x = &rp->findings[i];
        ss_buf_printf(b, "%s\n    {\"id\": %" PRId64 ", \"kind\": ",
                      i ? "," : "", x->id);
        ss_buf_json_str(b, x->kind);
        ss_buf_puts(b, ", \"severity\": ");
        ss_buf_json_str(b, x->severity);
        ss_buf_puts(b, ", \"ranks\": [");
        for (size_t k = 0; k < x->n_ranks; k++)
            ss_buf_printf(b, k ? ",%" PRId64 : "%" PRId64, x->ranks[k]);
        ss_buf_puts(b, "], \"phase\": ");
        ss_buf_json_str(b, x->phase);
        ss_buf_puts(b, ", \"first_step\": ");
        ss_buf_json_int(b, x->first_step);
        ss_buf_puts(b, ", \"last_step\": ");
        ss_buf_json_int(b, x->last_step);
        ss_buf_printf(b, ", \"evidence\": %s, \"message\": ",
                      x->evidence ? x->evidence : "{}");
        ss_buf_json_str(b, x->message);
        ss_buf_puts(b, "}");
        maybe_flush(o);
    }
    ss_buf_puts(b, rp->n_findings ? "\n  ],\n" : "],\n");
}

static void json_steps(ss_buf *b, const ss_report *rp)
{
    ss_buf_printf(b, "  \"steps\": {\"count\": %zu, \"first\": ",
                  rp->step_max.n > rp->step_med.n ? rp->step_max.n
                                                  : rp->step_med.n);
    ss_buf_json_int(b, rp->first_step);
    ss_buf_puts(b, ", \"last\": ");
    ss_buf_json_int(b, rp->last_step);
    ss_buf_printf(b, ", \"with_missing_ranks\": %" PRId64 ",\n",
                  rp->incomplete_steps);
    ss_buf_puts(b, "    \"step_time_ms\": {\"median_rank\": ");
    json_pcts(b, &rp->step_med);
    ss_buf_puts(b, ", \"worst_rank\": ");
    json_pcts(b, &rp->step_max);
    ss_buf_puts(b, "},\n    \"slowest_rank_most_often\": ");
    ss_buf_json_int(b, rp->step_worst_rank);
    ss_buf_puts(b, ", \"slowest_rank_steps\": ");
    ss_buf_json_int(b, rp->step_worst_count);
    ss_buf_puts(b, ",\n    \"phases\": [");
    for (size_t i = 0; i < rp->n_phases; i++) {
        const ss_report_series *p = &rp->phases[i];
        ss_buf_printf(b, "%s\n      {\"name\": ", i ? "," : "");
        ss_buf_json_str(b, p->name);
        ss_buf_printf(b, ", \"steps\": %zu, \"median_rank_ms\": ", p->b.n);
        json_pcts(b, &p->a);
        ss_buf_puts(b, ", \"worst_rank_ms\": ");
        json_pcts(b, &p->b);
        ss_buf_puts(b, ", \"self_median_rank_ms\": ");
        if (p->self.n)
            json_pcts(b, &p->self);
        else
            ss_buf_puts(b, "null");
        ss_buf_printf(b, ", \"nests\": %s", p->nests ? "true" : "false");
        ss_buf_puts(b, ", \"most_often_worst_rank\": ");
        ss_buf_json_int(b, p->top_rank);
        ss_buf_puts(b, ", \"most_often_worst_steps\": ");
        ss_buf_json_int(b, p->top_count);
        ss_buf_puts(b, "}");
    }
    ss_buf_puts(b, rp->n_phases ? "\n    ],\n" : "],\n");
    ss_buf_puts(b, "    \"syncs\": [");
    for (size_t i = 0; i < rp->n_syncs; i++) {
        const ss_report_series *y = &rp->syncs[i];
        ss_buf_printf(b, "%s\n      {\"name\": ", i ? "," : "");
        ss_buf_json_str(b, y->name);
        ss_buf_printf(b, ", \"steps\": %zu, \"skew_ms\": ", y->a.n);
        json_pcts(b, &y->a);
        ss_buf_puts(b, ", \"late_ms\": ");
        json_pcts(b, &y->b);
        ss_buf_puts(b, ", \"most_often_last_rank\": ");
        ss_buf_json_int(b, y->top_rank);
        ss_buf_puts(b, ", \"most_often_last_steps\": ");
        ss_buf_json_int(b, y->top_count);
        ss_buf_puts(b, "}");
    }
    ss_buf_puts(b, rp->n_syncs ? "\n    ]\n  },\n" : "]\n  },\n");
}

static void json_metrics(ss_buf *b, const ss_report *rp)
{
    ss_buf_puts(b, "  \"metrics\": [");
    for (size_t i = 0; i < rp->n_metrics; i++) {
        const ss_report_metric *m = &rp->metrics[i];
        ss_buf_printf(b, "%s\n    {\"name\": ", i ? "," : "");
        ss_buf_json_str(b, m->name);
        ss_buf_printf(b, ", \"steps\": %" PRId64 ", \"last_step\": %" PRId64
                      ", \"last\": {\"ranks\": %" PRId64 ", \"median\": "
                      "%.17g, \"min\": %.17g, \"min_rank\": %" PRId64
                      ", \"max\": %.17g, \"max_rank\": %" PRId64 "}}",
                      m->steps, m->last_step, m->n, m->median, m->min,
                      m->min_rank, m->max, m->max_rank);
    }
    ss_buf_puts(b, rp->n_metrics ? "\n  ],\n" : "],\n");
}

/* ", "host_evidence": {...}" of RANK (null when the host saw nothing of
 * it): steps counted, and per step the median, worst and total of each
 * field (docs/report-json.md). */
static void json_rank_host(ss_buf *b, const ss_report *rp, size_t rank)
{
    const ss_rank_host *h = NULL;
    for (size_t i = 0; i < rp->n_hosts && !h; i++)
        if (rp->hosts[i].rank == (int64_t)rank)
            h = &rp->hosts[i];
    ss_buf_puts(b, ", \"host_evidence\": ");
    if (!h) {
        ss_buf_puts(b, "null");
        return;
    }
    ss_buf_printf(b, "{\"steps\": %" PRId64 ", \"stopped_steps\": %" PRId64
                     ", \"throttled_steps\": %" PRId64 ", \"median\": ",
                  h->steps, h->stopped_steps, h->throttled_steps);
    ss_buf_json_host_step(b, &h->median);
    ss_buf_puts(b, ", \"max\": ");
    ss_buf_json_host_step(b, &h->max);
    ss_buf_puts(b, ", \"total\": ");
    ss_buf_json_host_step(b, &h->sum);
    ss_buf_puts(b, ", \"gpu\": ");
    if (!h->gpu_steps) {
        ss_buf_puts(b, "null}");
        return;
    }
    ss_buf_printf(b, "{\"steps\": %" PRId64 ", \"slowed_steps\": %" PRId64
                     ", \"power_cap_steps\": %" PRId64
                     ", \"thermal_steps\": %" PRId64
                     ", \"hw_slowdown_steps\": %" PRId64 ", \"total\": ",
                  h->gpu_steps, h->gpu_slowed_steps, h->gpu_power_cap_steps,
                  h->gpu_thermal_steps, h->gpu_hw_slowdown_steps);
    ss_buf_json_gpu_evidence(b, &h->gpu_sum);
    ss_buf_puts(b, "}}");
}

void ss__report_json_rank(ss_buf *b, const ss_report *rp, size_t i)
{
    const ss_rank_row *k = &rp->ranks[i];
    ss_buf_printf(b, "{\"rank\": %zu, \"host\": ", i);
    ss_buf_json_str(b, k->host);
    ss_buf_puts(b, ", \"pid\": ");
    ss_buf_json_int(b, k->pid);
    ss_buf_puts(b, ", \"state\": ");
    ss_buf_json_str(b, k->state);
    ss_buf_puts(b, ", \"exit_code\": ");
    ss_buf_json_int(b, k->exit_code);
    ss_buf_puts(b, ", \"signal\": ");
    ss_buf_json_int(b, k->term_signal == 0 ? SS_MISSING : k->term_signal);
    ss_buf_puts(b, ", \"last_step\": ");
    ss_buf_json_int(b, k->last_step);
    ss_buf_printf(b, ", \"steps\": %" PRId64 ", \"median_step_ms\": ",
                  k->steps);
    ss_buf_json_ms(b, k->median_step_ns);
    ss_buf_puts(b, ", \"p90_step_ms\": ");
    ss_buf_json_ms(b, k->p90_step_ns);
    ss_buf_puts(b, ", \"mean_step_ms\": ");
    ss_buf_json_ms(b, k->step_ns_n ? k->step_ns_sum / k->step_ns_n
                                   : SS_MISSING);
    ss_buf_puts(b, ", \"max_step_ms\": ");
    ss_buf_json_ms(b, k->step_ns_max);
    ss_buf_puts(b, ", \"phase_median_ms\": ");
    json_phase_values(b, rp, rp->phase_med + i * rp->n_phases);
    ss_buf_puts(b, ", \"phase_self_median_ms\": ");
    json_phase_values(b, rp, rp->phase_self_med + i * rp->n_phases);
    ss_buf_puts(b, ", \"max_rss_bytes\": ");
    ss_buf_json_int(b, k->max_rss_bytes);
    ss_buf_puts(b, ", \"max_device_bytes\": ");
    ss_buf_json_int(b, k->max_device_bytes);
    ss_buf_puts(b, ", \"dropped_events\": ");
    ss_buf_json_int(b, k->dropped_events);
    ss_buf_puts(b, ", \"dropped_records\": ");
    ss_buf_json_int(b, k->dropped_records);
    ss_buf_puts(b, ", \"names_over_limit\": ");
    ss_buf_json_int(b, k->names_over_limit);
    ss_buf_puts(b, ", \"values_over_limit\": ");
    ss_buf_json_int(b, k->values_over_limit);
    json_rank_host(b, rp, i);
    ss_buf_puts(b, "}");
}

static void json_ranks(out *o, const ss_report *rp)
{
    ss_buf *b = &o->b;
    ss_buf_puts(b, "  \"ranks\": [");
    for (size_t i = 0; i < rp->n_ranks; i++) {
        ss_buf_puts(b, i ? ",\n    " : "\n    ");
        ss__report_json_rank(b, rp, i);
        maybe_flush(o);
    }
    ss_buf_puts(b, rp->n_ranks ? "\n  ],\n" : "],\n");
}

/* "agents" (how many nodes the run had; 0 when none was recorded) and
 * "nodes" (docs/report-json.md). */
static void json_nodes(ss_buf *b, const ss_report *rp)
{
    ss_buf_printf(b, "  \"agents\": %zu,\n  \"nodes\": [", rp->n_nodes);
    for (size_t i = 0; i < rp->n_nodes; i++) {
        ss_buf_puts(b, i ? ",\n    " : "\n    ");
        ss_query_node_object(b, &rp->nodes[i]);
    }
    ss_buf_puts(b, rp->n_nodes ? "\n  ],\n" : "],\n");
}

/* "values": the vector names of the attempt (docs/report-json.md), each
 * with the latest kept step's vectors of its first ranks: bounded by
 * SS_REPORT_VALUES_RANKS ranks of at most SS_MAX_VALUES elements per
 * name. */
static void json_values(out *o, const ss_report *rp)
{
    ss_buf *b = &o->b;
    ss_buf_printf(b, "  \"values\": {\"ranks_shown\": %d, \"names\": [",
                  SS_REPORT_VALUES_RANKS);
    for (size_t i = 0; i < rp->n_values; i++) {
        const ss_report_values *x = &rp->values[i];
        ss_buf_puts(b, i ? ",\n    {" : "\n    {");
        ss_query_values_name_fields(b, &x->name);
        ss_buf_puts(b, ", \"latest\": {\"step\": ");
        ss_buf_json_int(b, x->name.last_step);
        ss_buf_puts(b, ", \"ranks\": [");
        size_t shown = 0;
        for (size_t k = 0; k < x->n_latest; k++) {
            if (x->latest[k].n_rows == 0)
                continue;
            const ss_values_row *row = &x->latest[k].rows[0];
            ss_buf_printf(b, "%s{\"rank\": %" PRId64 ", \"truncated\": %"
                          PRId64 ", \"values\": [", shown ? ", " : "",
                          row->rank, row->truncated);
            for (int64_t e = 0; e < row->n; e++) {
                if (e)
                    ss_buf_puts(b, ",");
                ss_buf_json_value(b, row->v[e]);
            }
            ss_buf_puts(b, "]}");
            shown++;
            maybe_flush(o);
        }
        ss_buf_printf(b, "], \"ranks_not_shown\": %zu}}",
                      x->name.n_ranks - shown);
    }
    ss_buf_puts(b, rp->n_values ? "\n  ]},\n" : "]},\n");
}

static void json_tail(out *o, const ss_report *rp)
{
    ss_buf *b = &o->b;
    int64_t ev, rec;
    ss_report_dropped(rp, &ev, &rec);
    ss_buf_puts(b, "  \"dropped\": {\"events\": ");
    ss_buf_json_int(b, ev);
    ss_buf_puts(b, ", \"records\": ");
    ss_buf_json_int(b, rec);
    ss_buf_puts(b, ", \"rank_steps\": ");
    ss_buf_json_int(b, rp->run.dropped_rank_steps);
    int64_t names, values, ranks;
    ss_report_names_over_limit(rp, &names, &values, &ranks);
    ss_buf_puts(b, ", \"names_over_limit\": ");
    ss_buf_json_int(b, names);
    ss_buf_puts(b, ", \"values_over_limit\": ");
    ss_buf_json_int(b, values);
    ss_buf_puts(b, ", \"vectors\": ");
    ss_buf_json_int(b, rp->run.dropped_vectors);
    ss_buf_puts(b, "},\n  \"events\": [");
    for (size_t i = 0; i < rp->n_events; i++) {
        const ss_event_row *e = &rp->events[i];
        ss_buf_printf(b, "%s\n    {\"at\": ", i ? "," : "");
        ss_buf_json_time(b, e->at);
        ss_buf_puts(b, ", \"kind\": ");
        ss_buf_json_str(b, e->kind);
        ss_buf_puts(b, ", \"rank\": ");
        ss_buf_json_int(b, e->rank);
        ss_buf_puts(b, ", \"message\": ");
        ss_buf_json_str(b, e->message);
        ss_buf_puts(b, "}");
        maybe_flush(o);
    }
    ss_buf_puts(b, rp->n_events ? "\n  ],\n" : "],\n");
    ss_buf_printf(b, "  \"events_total\": %" PRId64 "\n", rp->events_total);
}

/* "stacks": the newest stored stacks snapshot (docs/debug.md) with its
 * document as stored, or null. */
static void json_stacks(ss_buf *b, const ss_report *rp)
{
    ss_buf_puts(b, "  \"stacks\": ");
    if (!rp->stacks.json) {
        ss_buf_puts(b, "null,\n");
        return;
    }
    ss_buf_puts(b, "{\"taken_at\": ");
    ss_buf_json_time(b, rp->stacks.taken_at);
    ss_buf_puts(b, ", \"trigger\": ");
    ss_buf_json_str(b, rp->stacks.trigger);
    ss_buf_puts(b, ", \"finding_id\": ");
    ss_buf_json_int(b, rp->stacks.finding_id);
    ss_buf_puts(b, ", \"document\": ");
    /* Written by the controller's own JSON writer; kept as it is. */
    ss_buf_puts(b, rp->stacks.json);
    ss_buf_puts(b, "},\n");
}

int ss_report_print_json(FILE *f, const ss_report *rp, const char *db_path)
{
    out o = {{0}, f, 0};
    ss_buf_puts(&o.b, "{\n  \"format\": \"stepscope.report/1\",\n  \"db\": ");
    ss_buf_json_str(&o.b, db_path);
    ss_buf_puts(&o.b, ",\n");
    ss__report_json_run(&o.b, rp);
    json_findings(&o, rp);
    json_stacks(&o.b, rp);
    json_steps(&o.b, rp);
    json_metrics(&o.b, rp);
    json_values(&o, rp);
    ss_buf_puts(&o.b, "  \"goodput\": ");
    ss_goodput_json(&o.b, &rp->goodput);
    ss_buf_puts(&o.b, ",\n  \"reliability\": ");
    if (rp->has_reliability)
        ss_reliability_json(&o.b, &rp->reliability);
    else
        ss_buf_puts(&o.b, "null");
    ss_buf_puts(&o.b, ",\n");
    json_ranks(&o, rp);
    json_nodes(&o.b, rp);
    json_tail(&o, rp);
    ss_buf_puts(&o.b, "}\n");
    flush(&o);
    ss_buf_free(&o.b);
    return o.nomem ? -1 : 0;
}

int ss_runs_print_json(FILE *f, const ss_run_row *runs, size_t n,
                       const char *db_path)
{
    out o = {{0}, f, 0};
    ss_buf *b = &o.b;
    ss_buf_puts(b, "{\"db\": ");
    ss_buf_json_str(b, db_path);
    ss_buf_puts(b, ", \"runs\": [");
    for (size_t i = 0; i < n; i++) {
        const ss_run_row *r = &runs[i];
        ss_buf_printf(b, "%s\n  {\"id\": %" PRId64 ", \"uuid\": ",
                      i ? "," : "", r->id);
        ss_buf_json_str(b, r->uuid);
        ss_buf_puts(b, ", \"name\": ");
        ss_buf_json_str(b, r->name);
        ss_buf_puts(b, ", \"command\": ");
        ss_buf_json_str(b, r->command);
        ss_buf_puts(b, ", \"started_at\": ");
        ss_buf_json_time(b, r->started_at);
        ss_buf_puts(b, ", \"ended_at\": ");
        ss_buf_json_time(b, r->ended_at);
        ss_buf_puts(b, ", \"world_size\": ");
        ss_buf_json_int(b, r->world_size);
        ss_buf_puts(b, ", \"status\": ");
        ss_buf_json_str(b, r->status);
        ss_buf_puts(b, ", \"exit_code\": ");
        ss_buf_json_int(b, r->exit_code);
        ss_buf_printf(b, ", \"steps\": %" PRId64 ", \"findings\": %" PRId64
                      "}", r->steps, r->findings);
        maybe_flush(&o);
    }
    ss_buf_puts(b, n ? "\n]}\n" : "]}\n");
    flush(&o);
    ss_buf_free(b);
    return o.nomem ? -1 : 0;
}
