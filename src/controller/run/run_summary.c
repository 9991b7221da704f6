/*
 * run_summary.c - the end of `stepscope run`: what the run lost on the
 * way (the ranks' dropped events, records and vectors, the controller's
 * refusals, the store's losses) recorded as events and in the run's row,
 * the run ended in the store with the job's status, and the summary on
 * stderr: why the job failed, its attempts, and what the store holds
 * (lifecycle.c's words), said only once the store committed what it
 * could, so that it claims nothing the store lost.
 */
#include "run_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "appendf.h"
#include "headline.h"

/* One line when some rank used more names than the run has room for. */
static void print_names_over_limit(const run_ctx *r)
{
    uint64_t names = 0, values = 0;
    uint32_t ranks = 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        names += r->ranks[i].names_over_limit;
        values += r->ranks[i].values_over_limit;
        ranks += r->ranks[i].names_over_limit > 0;
    }
    if (ranks)
        fprintf(stderr, "stepscope: %" PRIu32 " rank%s could not add %" PRIu64
                " name%s to the run's %d: %" PRIu64 " phase, sync and metric "
                "value%s under them dropped (their steps and other values "
                "were kept)\n", ranks, ranks == 1 ? "" : "s", names,
                names == 1 ? "" : "s", SS_MAX_RUN_NAMES, values,
                values == 1 ? "" : "s");
}

/* The facts of the end-of-run summary for the job's STATUS, with what the
 * store committed: waits until it has committed or lost everything
 * queued. */
static void summary_facts(run_ctx *r, int status, ss_run_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    sum->run_id = r->run_id;
    sum->db_path = r->db_path != r->default_db ? r->db_path : NULL;
    sum->job_status = status;
    sum->interrupted = r->stop_signal != 0;
    sum->auto_mode = r->o->auto_mode;
    sum->seconds = (double)(run_now(r) - r->started) / 1e9;
    sum->steps_finalized = r->in.steps_finalized;
    sum->findings = r->in.findings_seen;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        sum->rank_dropped_events += r->ranks[i].counters.dropped_events;
        sum->rank_dropped_records += r->ranks[i].counters.dropped_records;
        sum->rank_dropped_vectors += r->ranks[i].counters.dropped_vectors;
        sum->rank_truncated_values += r->ranks[i].counters.truncated_values;
    }
    sum->ranks = r->life.ranks ? r->life.nprocs : 0;
    sum->last_step = -1;
    for (uint32_t i = 0; i < sum->ranks; i++) {
        const ss_rank_life *l = &r->life.ranks[i];
        sum->ranks_silent += !l->ever_connected;
        sum->ranks_cut_off += l->ever_connected && l->exited &&
                              !l->said_bye &&
                              ss_life_exit_ok(l->exit_code, l->term_signal);
        ss_rank_state st;
        ss_aggregator_rank_state(r->agg, i, &st);
        if (st.last_step > sum->last_step)
            sum->last_step = st.last_step;
    }
    /* Ranks that ended cleanly before the others' last step, in a job
     * that succeeded (a failure's own summary says who left early). */
    for (uint32_t i = 0; status == 0 && i < sum->ranks; i++) {
        const ss_rank_life *l = &r->life.ranks[i];
        ss_rank_state st;
        ss_aggregator_rank_state(r->agg, i, &st);
        if (!l->said_bye || st.last_step < 0 || st.last_step >= sum->last_step)
            continue;
        if (!sum->ranks_ended_early++ || st.last_step < sum->early_last_step) {
            sum->early_rank = i;
            sum->early_last_step = st.last_step;
        }
    }
    sum->accepts_failed = r->in.accepts_failed;
    ss_aggregator_stats as;
    ss_aggregator_get_stats(r->agg, &as);
    sum->refused_vectors = as.vectors_refused;
    ss_store_flush(r->store);
    ss_store_get_outcome(r->store, &sum->stored);
}

/* The vectors lost before the store (the ranks' and the aggregator's)
 * are added to runs.dropped_vectors, and an event says where they and
 * the ranks' truncated elements were lost, for the report. */
static void record_vector_drops(run_ctx *r)
{
    uint64_t ranks = 0, truncated = 0;
    uint32_t n_ranks = 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        ranks += r->ranks[i].counters.dropped_vectors;
        truncated += r->ranks[i].counters.truncated_values;
        n_ranks += r->ranks[i].counters.dropped_vectors > 0;
    }
    ss_aggregator_stats as;
    ss_aggregator_get_stats(r->agg, &as);
    ss_store_add_dropped_vectors(r->store, r->run_id,
                                 ranks + as.vectors_refused);
    if (!ranks && !truncated && !as.vectors_refused)
        return;
    char msg[256];
    size_t len = 0;
    msg[0] = '\0';
    if (ranks)
        ss_appendf(msg, sizeof msg, &len, "%" PRIu64 " vectors dropped by "
                   "%" PRIu32 " rank%s (ring or memory full)", ranks,
                   n_ranks, n_ranks == 1 ? "" : "s");
    if (as.vectors_refused)
        ss_appendf(msg, sizeof msg, &len, "%s%" PRIu64 " refused by the "
                   "controller (its budget)", len ? ", " : "",
                   as.vectors_refused);
    if (truncated)
        ss_appendf(msg, sizeof msg, &len, "%s%" PRIu64 " elements truncated "
                   "by the ranks' per-vector cap", len ? ", " : "",
                   truncated);
    run_event(r, "vectors_dropped", -1, "%s", msg);
}

/* When ranks never sent telemetry, were cut off, or the store lost part of
 * the run, an event says so, so that the report tells it too (if the
 * store can still take that small write). */
static void record_store_losses(run_ctx *r, int status)
{
    ss_run_summary sum;
    summary_facts(r, status, &sum);
    ss_buf note = {0};
    if (ss_life_silent_note(&sum, &note) && note.data)
        run_event(r, "ranks_silent", -1, "%s", note.data);
    ss_buf_reset(&note);
    if (ss_life_cut_off_note(&sum, &note) && note.data)
        run_event(r, "ranks_cut_off", -1, "%s", note.data);
    ss_buf_reset(&note);
    if (ss_life_early_note(&sum, &note) && note.data)
        run_event(r, "ranks_ended_early",
                  sum.ranks_ended_early == 1 ? (int32_t)sum.early_rank : -1,
                  "%s", note.data);
    ss_buf_reset(&note);
    if (ss_life_empty_note(&sum, &note) && note.data)
        run_event(r, "no_steps", -1, "%s", note.data);
    ss_buf_reset(&note);
    if (ss_life_loss_note(&sum, &note) && note.data)
        run_event(r, "store_lost", -1, "%s", note.data);
    ss_buf_free(&note);
}

/* Prints why the job failed (the launcher's words) and the summary of
 * what the store holds (lifecycle.c's words), once the store has
 * committed everything it could, so that the summary claims nothing it
 * lost. */
static void print_summary(run_ctx *r, int status)
{
    char why[8192];
    if (r->hang_stop_why[0])
        fprintf(stderr, "stepscope: the job was stopped on a hang (exit "
                "status %d): %s\n", SS_HANG_EXIT_STATUS, r->hang_stop_why);
    else if (r->num.nonfinite_acted && run_numerics_no_restart(r)[0])
        fprintf(stderr, "stepscope: the job was stopped on a non-finite "
                "value (exit status %d): %s\n", SS_NONFINITE_EXIT_STATUS,
                r->num.nonfinite_stop_why);
    else if (r->failure_text[0]) {
        if (!r->failure_said) /* else printed when it happened */
            fprintf(stderr, "stepscope: %s\n", r->failure_text);
    } else if (r->hooks.failure_summary(r->hooks.ctx, why, sizeof why) > 0)
        fprintf(stderr, "stepscope: %s\n", why);
    if (r->n_notes > 1) {
        fprintf(stderr, "stepscope: %u attempts:", r->n_notes);
        for (uint32_t i = 0; i < r->n_notes; i++)
            fprintf(stderr, "%s attempt %u %s (exit status %d)",
                    i ? ";" : "", i, r->notes[i].cause, r->notes[i].status);
        fputc('\n', stderr);
    }
    print_names_over_limit(r);
    ss_run_summary sum;
    summary_facts(r, status, &sum);
    /* the run's answer first, in the words every view leads with */
    ss_buf head = {0};
    if (sum.findings && ss_headline_of_run(r->db_path, r->run_id, &head))
        fprintf(stderr, "stepscope: headline: %s\n", head.data);
    ss_buf_free(&head);
    ss_buf text = {0};
    ss_life_summary(&sum, &text);
    for (char *line = text.data, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        fprintf(stderr, "stepscope: %.*s\n", (int)(nl - line), line);
    }
    ss_buf_free(&text);
}

/* A store whose file left its path during the run (run.c,
 * check_store_file; looked at once more here) is written again from the
 * file the run still holds open, after its last write: nothing it held is
 * lost with the run's end.  Says where, or why it could not. */
static void save_moved_store(run_ctx *r)
{
    if (!r->store_moved && ss_store_file_moved(r->store) != 1)
        return;
    char where[PATH_MAX + 16], err[PATH_MAX + 256];
    if (ss_store_save_again(r->store, where, sizeof where, err,
                            sizeof err) == 0)
        fprintf(stderr, "stepscope: the store's file was removed or "
                "replaced during the run: everything it held, this run "
                "included, was saved again to %s\n", where);
    else
        fprintf(stderr, "stepscope: error: the store's file was removed or "
                "replaced during the run, and it could not be saved again "
                "(%s): this run's records are lost with the controller\n",
                err);
}

void run_summary_end(run_ctx *r, int status)
{
    uint64_t dropped_ev = 0, dropped_rec = 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        dropped_ev += r->ranks[i].counters.dropped_events;
        dropped_rec += r->ranks[i].counters.dropped_records;
    }
    if (r->in.refused_records)
        run_event(r, "refused_records", -1, "%" PRIu64 " step records arrived "
              "after their step was finalized and were not counted",
              r->in.refused_records);
    record_vector_drops(r);
    record_store_losses(r, status);
    ss_store_end_run(r->store, r->run_id, ss_wall_now(), status,
                     ss_life_run_status(status, r->stop_signal != 0),
                     (int64_t)dropped_ev,
                     (int64_t)dropped_rec);
    print_summary(r, status);
    save_moved_store(r);
}
