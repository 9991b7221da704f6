/*
 * lifecycle.c - the rank life-cycle policy and the end-of-run summary of
 * `stepscope run` (lifecycle.h), as plain functions over plain structs.
 *
 * Every rule of lifecycle.h is one transition function here; run.c wires
 * them to libuv, the ingest socket and the launcher.  Keeping the policy
 * free of I/O lets lifecycle_test.c drive every transition, and the
 * summary's wording, without processes or sockets.
 */
#include "lifecycle.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ss_life_init(ss_lifecycle *lc, uint32_t nprocs, uint32_t attempt,
                 ss_dur_ns connect_timeout)
{
    memset(lc, 0, sizeof *lc);
    lc->ranks = calloc(nprocs ? nprocs : 1, sizeof *lc->ranks);
    if (!lc->ranks)
        return -1;
    lc->nprocs = nprocs;
    lc->attempt = attempt;
    lc->connect_timeout = connect_timeout;
    return 0;
}

void ss_life_release(ss_lifecycle *lc)
{
    free(lc->ranks);
    lc->ranks = NULL;
    lc->nprocs = 0;
}

void ss_life_launched(ss_lifecycle *lc, ss_mono_ns now)
{
    lc->launched = 1;
    lc->launched_at = now;
}

int ss_life_exit_ok(int64_t exit_code, int term_signal)
{
    return exit_code == 0 && term_signal == 0;
}

static const ss_life_decision stays = {SS_STAYS, NULL, SS_LINGER_KEEP, 0};

/* RANK leaves now (MISSING or clean) unless it has left before. */
static ss_life_decision leave(ss_lifecycle *lc, uint32_t rank, int missing,
                              const char *why)
{
    ss_rank_life *s = &lc->ranks[rank];
    if (s->left)
        return stays;
    s->left = 1;
    s->left_missing = missing;
    return (ss_life_decision){missing ? SS_LEAVES_MISSING : SS_LEAVES_CLEAN,
                              why, SS_LINGER_KEEP, 0};
}

int ss_life_hello(ss_lifecycle *lc, uint32_t rank, uint32_t world_size,
                  uint32_t attempt, char *reason, size_t reasonlen)
{
    if (world_size != lc->nprocs) {
        snprintf(reason, reasonlen, "rank %u says world size %u, the run has "
                 "%u", rank, world_size, lc->nprocs);
        return -1;
    }
    if (rank >= lc->nprocs) {
        snprintf(reason, reasonlen, "rank %u is out of range (world size %u)",
                 rank, lc->nprocs);
        return -1;
    }
    if (attempt != lc->attempt) {
        snprintf(reason, reasonlen, "rank %u is from attempt %u, not %u",
                 rank, attempt, lc->attempt);
        return -1;
    }
    ss_rank_life *s = &lc->ranks[rank];
    if (s->connected) {
        snprintf(reason, reasonlen, "rank %u is already connected", rank);
        return -1;
    }
    if (s->left) {
        snprintf(reason, reasonlen, "rank %u has already left the run", rank);
        return -1;
    }
    s->connected = 1;
    s->ever_connected = 1;
    return 0;
}

ss_life_decision ss_life_bye(ss_lifecycle *lc, uint32_t rank)
{
    if (rank >= lc->nprocs)
        return stays;
    lc->ranks[rank].said_bye = 1;
    return leave(lc, rank, 0, "said goodbye");
}

ss_life_decision ss_life_disconnect(ss_lifecycle *lc, uint32_t rank,
                                    int said_bye)
{
    if (rank >= lc->nprocs)
        return stays;
    ss_rank_life *s = &lc->ranks[rank];
    s->connected = 0;
    s->said_bye |= said_bye != 0;
    ss_life_decision d = stays;
    if (s->said_bye)
        d = leave(lc, rank, 0, "said goodbye");
    else if (s->exited)
        d = leave(lc, rank, !ss_life_exit_ok(s->exit_code, s->term_signal),
                  "died without saying goodbye");
    /* else its process still runs: its exit decides whether it crashed */
    d.linger = SS_LINGER_STOP;
    return d;
}

ss_life_decision ss_life_exit(ss_lifecycle *lc, uint32_t rank,
                              int64_t exit_code, int term_signal)
{
    if (rank >= lc->nprocs)
        return stays;
    ss_rank_life *s = &lc->ranks[rank];
    s->exited = 1;
    s->exit_code = exit_code;
    s->term_signal = term_signal;
    s->stopped = lc->stopping && !ss_life_exit_ok(exit_code, term_signal);
    if (s->connected) {
        /* Let the socket drain; its disconnect decides. */
        ss_life_decision d = stays;
        d.linger = SS_LINGER_START;
        return d;
    }
    if (s->ever_connected)
        return leave(lc, rank,
                     !ss_life_exit_ok(exit_code, term_signal) && !s->said_bye,
                     "died without saying goodbye");
    int was_in = !s->left;
    ss_life_decision d = leave(lc, rank, 1, "never sent telemetry");
    d.never_connected = was_in;
    return d;
}

int ss_life_linger_over(const ss_lifecycle *lc, uint32_t rank)
{
    return rank < lc->nprocs && lc->ranks[rank].connected &&
           lc->ranks[rank].exited;
}

ss_life_decision ss_life_tick(ss_lifecycle *lc, uint32_t rank,
                              ss_mono_ns now)
{
    if (rank >= lc->nprocs || !lc->launched)
        return stays;
    const ss_rank_life *s = &lc->ranks[rank];
    if (s->ever_connected || s->exited || s->left ||
        now - lc->launched_at <= lc->connect_timeout)
        return stays;
    ss_life_decision d = leave(lc, rank, 1, "never connected");
    d.never_connected = 1;
    return d;
}

void ss_life_all_exited(ss_lifecycle *lc)
{
    lc->all_exited = 1;
}

int ss_life_finish(ss_lifecycle *lc)
{
    if (lc->finished || !lc->all_exited)
        return 0;
    for (uint32_t i = 0; i < lc->nprocs; i++)
        if (lc->ranks[i].connected)
            return 0; /* still draining; the linger timer bounds the wait */
    lc->finished = 1;
    return 1;
}

ss_life_decision ss_life_finish_rank(ss_lifecycle *lc, uint32_t rank)
{
    if (rank >= lc->nprocs)
        return stays;
    return leave(lc, rank, 1, "never finished");
}

ss_life_decision ss_life_node_lost(ss_lifecycle *lc, uint32_t rank,
                                   const char *why)
{
    if (rank >= lc->nprocs)
        return stays;
    ss_rank_life *s = &lc->ranks[rank];
    s->lost = 1;
    s->connected = 0;
    return leave(lc, rank, 1, why);
}

void ss_life_stopping(ss_lifecycle *lc)
{
    lc->stopping = 1;
}

int ss_life_rank_stopped(const ss_lifecycle *lc, uint32_t rank)
{
    return rank < lc->nprocs && lc->ranks[rank].stopped;
}

int ss_life_failed_first(ss_lifecycle *lc, uint32_t rank)
{
    if (rank >= lc->nprocs || !lc->ranks[rank].stopped)
        return 0;
    lc->ranks[rank].stopped = 0;
    return 1;
}

const char *ss_life_rank_state(const ss_lifecycle *lc, uint32_t rank)
{
    if (rank >= lc->nprocs)
        return "";
    const ss_rank_life *s = &lc->ranks[rank];
    if (s->lost && !s->exited)
        return "lost";
    if (s->stopped)
        return "stopped_by_stepscope";
    if (s->exited)
        return ss_life_exit_ok(s->exit_code, s->term_signal) ? "exited"
                                                             : "failed";
    return s->ever_connected ? "running" : "never_connected";
}

const char *ss_life_run_status(int job_status, int interrupted)
{
    if (interrupted)
        return "interrupted";
    return job_status == 0 ? "succeeded" : "failed";
}

const char *ss_life_attempt_cause(int job_status, int stopped)
{
    if (stopped)
        return "interrupted";
    return job_status == 0 ? "completed" : "rank_crash";
}

/* ---- the end-of-run summary ---- */

static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

/* Appends "N lost: WHY" the first time (*WHY is then cleared), else
 * "N lost"; with a NOUN, "N NOUNs lost...". */
static void put_lost(ss_buf *out, uint64_t n, const char *noun,
                     const char **why)
{
    ss_buf_printf(out, "%" PRIu64, n);
    if (noun)
        ss_buf_printf(out, " %s%s", noun, plural(n));
    ss_buf_puts(out, " lost");
    if (*why) {
        ss_buf_printf(out, ": %s", *why);
        *why = NULL;
    }
}

/* ", N vectors dropped (R by ranks, C by the controller, S at the
 * store's full queue)", ", N vectors lost" and ", M vector elements
 * truncated by ranks", each when not 0. */
static void put_vector_drops(const ss_run_summary *s, ss_buf *out,
                             const char **why)
{
    const ss_store_outcome *o = &s->stored;
    uint64_t parts[3] = {s->rank_dropped_vectors, s->refused_vectors,
                         o->vectors_dropped};
    static const char *const where[3] = {"by ranks", "by the controller",
                                         "at the store's full queue"};
    uint64_t dropped = parts[0] + parts[1] + parts[2];
    if (dropped) {
        ss_buf_printf(out, ", %" PRIu64 " vector%s dropped (", dropped,
                      plural(dropped));
        const char *sep = "";
        for (int i = 0; i < 3; i++)
            if (parts[i]) {
                ss_buf_printf(out, "%s%" PRIu64 " %s", sep, parts[i],
                              where[i]);
                sep = ", ";
            }
        ss_buf_puts(out, ")");
    }
    if (o->vectors_lost) {
        ss_buf_puts(out, ", ");
        put_lost(out, o->vectors_lost, "vector", why);
    }
    if (s->rank_truncated_values)
        ss_buf_printf(out, ", %" PRIu64 " vector element%s truncated by "
                      "ranks", s->rank_truncated_values,
                      plural(s->rank_truncated_values));
}

void ss_life_summary(const ss_run_summary *s, ss_buf *out)
{
    const ss_store_outcome *o = &s->stored;
    const char *why = o->error[0] ? o->error : "reason unknown";
    uint64_t findings_lost = s->findings > o->findings_stored
                                 ? s->findings - o->findings_stored
                                 : 0;
    int end_lost = o->ends_stored == 0;
    int lost = o->steps_lost || o->rank_steps_lost || findings_lost ||
               o->finding_writes_lost || o->events_lost || o->other_lost ||
               o->vectors_lost || o->ends_lost || end_lost;

    ss_buf_printf(out, "run %" PRId64 " %s in %.1f s: %" PRIu64
                  " step%s finalized", s->run_id,
                  s->interrupted ? "was interrupted"
                  : s->job_status == 0 ? "finished" : "failed", s->seconds,
                  s->steps_finalized, plural(s->steps_finalized));
    if (o->steps_lost || o->steps_stored != s->steps_finalized) {
        ss_buf_printf(out, ", %" PRIu64 " stored", o->steps_stored);
        if (o->steps_lost) {
            ss_buf_puts(out, " (");
            put_lost(out, o->steps_lost, NULL, &why);
            ss_buf_puts(out, ")");
        }
    }
    ss_buf_printf(out, ", %" PRIu32 " finding%s", s->findings,
                  plural(s->findings));
    if (findings_lost) {
        ss_buf_printf(out, ", %" PRIu64 " stored (", o->findings_stored);
        put_lost(out, findings_lost, NULL, &why);
        ss_buf_puts(out, ")");
    } else if (o->finding_writes_lost) {
        ss_buf_printf(out, " (%" PRIu64 " later update%s of them not stored",
                      o->finding_writes_lost,
                      plural(o->finding_writes_lost));
        if (why)
            ss_buf_printf(out, ": %s", why);
        why = NULL;
        ss_buf_puts(out, ")");
    }
    if (o->events_lost) {
        ss_buf_puts(out, ", ");
        put_lost(out, o->events_lost, "event", &why);
    }
    if (o->other_lost) {
        ss_buf_puts(out, ", ");
        put_lost(out, o->other_lost, "rank record", &why);
    }
    if (o->rank_steps_dropped)
        ss_buf_printf(out, ", %" PRIu64 " per-rank row%s dropped (the "
                      "store's queue was full)", o->rank_steps_dropped,
                      plural(o->rank_steps_dropped));
    if (o->rank_steps_unpicked)
        ss_buf_printf(out, ", %" PRIu64 " per-rank row%s kept as totals only "
                      "(node aggregation writes the rows of the ranks a step "
                      "singles out and a rotating share)",
                      o->rank_steps_unpicked, plural(o->rank_steps_unpicked));
    if (s->rank_dropped_events || s->rank_dropped_records)
        ss_buf_printf(out, ", %" PRIu64 " events and %" PRIu64
                      " step records dropped by ranks",
                      s->rank_dropped_events, s->rank_dropped_records);
    put_vector_drops(s, out, &why);

    char report[64 + 4096];
    snprintf(report, sizeof report, "stepscope report %s%s%s%" PRId64,
             s->db_path ? "--db " : "", s->db_path ? s->db_path : "",
             s->db_path ? " " : "", s->run_id);
    ss_buf_printf(out, ". `%s` %s.\n", report,
                  lost ? "shows what was stored" : "explains it");
    if (s->ranks_silent) {
        ss_buf_puts(out, "warning: ");
        ss_life_silent_note(s, out);
        ss_buf_puts(out, ".\n");
    }
    if (s->ranks_cut_off) {
        ss_buf_puts(out, "warning: ");
        ss_life_cut_off_note(s, out);
        ss_buf_puts(out, ".\n");
    }
    if (s->ranks_ended_early) {
        ss_buf_puts(out, "note: ");
        ss_life_early_note(s, out);
        ss_buf_puts(out, ".\n");
    }
    if (ss_life_empty_note(s, out))
        ss_buf_puts(out, ".\n");
    if (end_lost)
        ss_buf_printf(out, "the run's end (%s, exit status %d) was not "
                      "stored (%s): the store still says run %" PRId64
                      " is running; `%s` shows it as interrupted.\n",
                      ss_life_run_status(s->job_status, s->interrupted),
                      s->job_status,
                      o->error[0] ? o->error : "reason unknown", s->run_id,
                      report);
}

int ss_life_cut_off_note(const ss_run_summary *s, ss_buf *out)
{
    if (!s->ranks_cut_off)
        return 0;
    ss_buf_printf(out, "%" PRIu32 " of %" PRIu32 " rank%s exited "
                  "without %s last frames reaching the controller (it could "
                  "not read them within the rank's second at exit, or the "
                  "rank ended without its exit handlers, as os._exit does): "
                  "what %s recorded after the last step received, and %s "
                  "counts of dropped data, are missing", s->ranks_cut_off,
                  s->ranks, plural(s->ranks),
                  s->ranks_cut_off > 1 ? "their" : "its",
                  s->ranks_cut_off > 1 ? "they" : "it",
                  s->ranks_cut_off > 1 ? "their" : "its");
    return 1;
}

int ss_life_early_note(const ss_run_summary *s, ss_buf *out)
{
    if (!s->ranks_ended_early)
        return 0;
    if (s->ranks_ended_early == 1)
        ss_buf_printf(out, "rank %" PRIu32 " stopped stepping at step "
                      "%" PRId64 " while the others went on to step %" PRId64
                      ": steps %" PRId64 " to %" PRId64 " are finalized "
                      "without it", s->early_rank, s->early_last_step,
                      s->last_step, s->early_last_step + 1, s->last_step);
    else
        ss_buf_printf(out, "%" PRIu32 " of %" PRIu32 " ranks stopped "
                      "stepping before the last step, %" PRId64 " (rank %"
                      PRIu32 " first, at step %" PRId64 "): the steps after "
                      "each one's last are finalized without it",
                      s->ranks_ended_early, s->ranks, s->last_step,
                      s->early_rank, s->early_last_step);
    return 1;
}

int ss_life_silent_note(const ss_run_summary *s, ss_buf *out)
{
    if (!s->ranks_silent)
        return 0;
    ss_buf_printf(out, "%" PRIu32 " of %" PRIu32 " rank%s never sent "
                  "telemetry: %s", s->ranks_silent, s->ranks,
                  plural(s->ranks), s->ranks_silent >= s->ranks
                  ? "the store holds no step of this run"
                  : "their steps are missing from the store");
    if (s->accepts_failed)
        ss_buf_printf(out, " (%" PRIu64 " rank connection%s %s not accepted: "
                      "see the accept_failed events)", s->accepts_failed,
                      plural(s->accepts_failed),
                      s->accepts_failed == 1 ? "was" : "were");
    else if (s->ranks_silent >= s->ranks && !s->auto_mode)
        /* Ranks that failed may have failed before they called it (an
         * import error): the failure above says which. */
        ss_buf_printf(out, "; %s: add --auto (`stepscope run --auto ...`) "
                      "to record an unmodified PyTorch script, or mark its "
                      "steps with stepscope.step() (docs/python.md)",
                      s->job_status != 0 && !s->interrupted
                      ? "the ranks failed before they called stepscope, or "
                        "the script does not call it"
                      : "the script does not call stepscope");
    else if (s->ranks_silent >= s->ranks && s->job_status != 0 &&
             !s->interrupted)
        /* Under --auto ranks of a failed job that sent nothing failed
         * before their first step (a script that could not start, a
         * failed import): PYTHONPATH is not the cause to suggest. */
        ss_buf_puts(out, "; the ranks failed before their first step "
                    "(the failure above says why)");
    else if (s->ranks_silent >= s->ranks)
        ss_buf_puts(out, "; --auto loads stepscope into Python ranks only "
                    "(through PYTHONPATH): another program, or a Python that "
                    "ignores PYTHONPATH, has to call stepscope itself "
                    "(docs/python.md)");
    return 1;
}

int ss_life_empty_note(const ss_run_summary *s, ss_buf *out)
{
    if (s->steps_finalized || s->ranks_silent >= s->ranks ||
        (s->job_status != 0 && !s->interrupted))
        return 0; /* a failure says why itself */
    if (s->auto_mode)
        ss_buf_puts(out, "no step was recorded: --auto counts one step per "
                    "optimizer step (torch.optim's Optimizer.step) and the "
                    "ranks made none (processes a rank starts itself, such "
                    "as torch.multiprocessing.spawn's workers, are not "
                    "recorded); mark the steps in the script with "
                    "`with stepscope.step():` around each iteration "
                    "(docs/python.md)");
    else
        ss_buf_puts(out, "no step was recorded: the ranks connected but "
                    "marked no step; wrap each iteration in `with "
                    "stepscope.step():`, or add --auto to record an "
                    "unmodified PyTorch script (docs/python.md)");
    return 1;
}

int ss_life_loss_note(const ss_run_summary *s, ss_buf *out)
{
    const ss_store_outcome *o = &s->stored;
    uint64_t findings_lost = s->findings > o->findings_stored
                                 ? s->findings - o->findings_stored
                                 : 0;
    char parts[5][96];
    int n = 0;
    if (o->steps_lost)
        snprintf(parts[n++], sizeof parts[0], "%" PRIu64 " of %" PRIu64
                 " steps", o->steps_lost, s->steps_finalized);
    if (findings_lost)
        snprintf(parts[n++], sizeof parts[0], "%" PRIu64 " of %" PRIu32
                 " findings", findings_lost, s->findings);
    else if (o->finding_writes_lost)
        snprintf(parts[n++], sizeof parts[0], "%" PRIu64 " finding "
                 "update%s", o->finding_writes_lost,
                 plural(o->finding_writes_lost));
    if (o->events_lost)
        snprintf(parts[n++], sizeof parts[0], "%" PRIu64 " event%s",
                 o->events_lost, plural(o->events_lost));
    if (o->other_lost)
        snprintf(parts[n++], sizeof parts[0], "%" PRIu64 " rank record%s",
                 o->other_lost, plural(o->other_lost));
    if (n == 0)
        return 0;
    ss_buf_puts(out, "the store lost ");
    for (int i = 0; i < n; i++)
        ss_buf_printf(out, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ",
                      parts[i]);
    ss_buf_printf(out, " (%s)", o->error[0] ? o->error : "reason unknown");
    return 1;
}
