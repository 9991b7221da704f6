/*
 * run_ingest.c - the ranks' data path through `stepscope run`: what the
 * ingest socket reports of each rank (ingest.h: HELLO, steps, names and
 * labels, counters, STATUS, checkpoints, resumes, BYE, disconnects,
 * refusals) goes to the life cycle, the aggregator, the live state, the
 * store and the fault injector; the steps and findings the aggregator
 * finalizes (its sink) go to the store, the live state and the findings'
 * actions (run_numerics.c, run_replica.c).  Runs on the controller's loop.
 */
#include "run_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "profile.h"
#include "run_aggregate.h"

/* ---- the aggregator's sink ---- */

void run_sink_step(void *ctx, const ss_step_view *v,
                   const char *const *names)
{
    run_ctx *r = ctx;
    r->in.steps_finalized++;
    run_agg_step(r->aggregate, v, names, run_now(r));
    ss_hang_progress(&r->hang, v->step, v->step_time.max, run_now(r));
    int64_t step = (int64_t)v->step;
    if (r->first_step < 0 || step < r->first_step)
        r->first_step = step;
    if (step > r->last_step)
        r->last_step = step;
    ss_store_put_step(r->store, r->run_id, v, names);
    ss_live_step(r->live, v, names);
}

void run_sink_finding(void *ctx, const ss_finding *f)
{
    run_ctx *r = ctx;
    ss_store_put_finding(r->store, r->run_id, f);
    ss_live_finding(r->live, f);
    run_numerics_finding(r, f);
    run_replica_finding(r, f);
    if (f->id > r->in.findings_seen) {
        /* First sight of this finding: tell the person watching. */
        r->in.findings_seen = f->id;
        if (!r->o->quiet && r->hooks.end_progress)
            r->hooks.end_progress(r->hooks.ctx);
        if (!r->o->quiet)
            fprintf(stderr, "stepscope: %s %s: %s\n",
                    f->severity == SS_CRITICAL ? "critical" : "warning",
                    f->kind, f->message);
    }
}

/* ---- the ingest socket's callbacks ---- */

static int cb_intern(void *ctx, const char *name)
{
    run_ctx *r = ctx;
    return ss_aggregator_intern(r->agg, name);
}

static int cb_hello(void *ctx, const wire_hello *h, char *reason,
                    size_t reasonlen)
{
    run_ctx *r = ctx;
    if (ss_life_hello(&r->life, h->rank, h->world_size, h->attempt, reason,
                      reasonlen) != 0)
        return -1;
    rank_slot *s = &r->ranks[h->rank];
    s->pid = h->pid;
    snprintf(s->host, sizeof s->host, "%s", h->host);
    ss_live_rank_hello(r->live, h->rank, h->host, h->pid);
    if (h->rank < r->o->nproc_local)
        ss_host_watch_rank_hello(r->host, h->rank, (pid_t)h->pid);
    run_put_rank(r, h->rank, "running");
    run_event(r, "rank_connected", (int32_t)h->rank, "rank %u connected from %s "
          "pid %u", h->rank, h->host, h->pid);
    run_faults_observe(&r->faults, h->rank, -1);
    return 0;
}

static void cb_step(void *ctx, uint32_t rank, const ss_step_record *rec,
                    const ss_values_item *values, uint32_t n_values)
{
    run_ctx *r = ctx;
    ss_live_rank_step(r->live, rank, rec->step);
    uint32_t n_names;
    const char *const *names = ss_aggregator_names(r->agg, &n_names);
    if (rank < r->o->nproc_local) {
        ss_host_watch_step_done(r->host, rank); /* covers the step's end */
        ss_recent_service_record(r->recent, rank, r->att.attempt, rec, names);
    }
    if (r->aggregate)
        run_agg_record(r->aggregate, rank, rec, names, run_now(r));
    if (ss_aggregator_add_values(r->agg, rank, rec, values, n_values) != 0)
        r->in.refused_records++;
    /* A rank whose record of step S arrives has begun S + 1: a fault due
     * there fires now, a whole step before its record of S + 1 (a STATUS
     * naming S + 1 may come later than this, its rate being capped). */
    if (rec->step < INT64_MAX)
        run_faults_observe(&r->faults, rank, (int64_t)rec->step + 1);
}

/* The run's name table is full: RANK keeps running, what it records under
 * NAME is dropped and counted.  Said once per rank in the store, once per
 * run on stderr; the summary gives the totals. */
static void cb_name_refused(void *ctx, uint32_t rank, const char *name)
{
    run_ctx *r = ctx;
    rank_slot *s = &r->ranks[rank];
    if (s->names_over_limit++ > 0)
        return;
    run_event(r, "names_over_limit", (int32_t)rank, "rank %u declared '%s' "
          "when the run's %d names were taken: what it records under names "
          "beyond the limit is dropped and counted; its steps and other "
          "values are kept", rank, name, SS_MAX_RUN_NAMES);
    if (!r->o->quiet && !r->in.said_names_over_limit)
        fprintf(stderr, "stepscope: warning: the run's %d names are taken: "
                "what rank %u records under '%s' and other new names is "
                "dropped and counted\n", SS_MAX_RUN_NAMES, rank, name);
    r->in.said_names_over_limit = 1;
}

static void cb_labels(void *ctx, uint32_t rank, int name,
                      const char *const *labels, uint32_t n)
{
    run_ctx *r = ctx;
    if (ss_aggregator_set_labels(r->agg, rank, name, labels, n) != 0)
        return;
    uint32_t n_names = 0;
    const char *const *names = ss_aggregator_names(r->agg, &n_names);
    if (name >= 0 && (uint32_t)name < n_names)
        ss_store_put_labels(r->store, r->run_id, r->att.attempt, rank,
                            names[name], labels, n);
}

static void cb_values_dropped(void *ctx, uint32_t rank, uint32_t n)
{
    run_ctx *r = ctx;
    r->ranks[rank].values_over_limit += n;
}

static void cb_counters(void *ctx, uint32_t rank, const wire_counters *c)
{
    run_ctx *r = ctx;
    r->ranks[rank].counters = *c;
    ss_live_rank_counters(r->live, rank, c->dropped_events,
                          c->dropped_records);
}

/* What the rank is doing now (STATUS): for the live views only. */
static void cb_status(void *ctx, uint32_t rank, const wire_status *st,
                      int phase, int collective)
{
    run_ctx *r = ctx;
    rank_slot *s = &r->ranks[rank];
    s->status_at = run_now(r);
    s->cur_step = st->step == WIRE_NO_STEP || st->step > INT64_MAX
                      ? -1
                      : (int64_t)st->step;
    s->phase = phase;
    s->collective = collective;
    s->coll_seq = collective >= 0 ? st->coll_seq : 0;
    s->coll_active = collective >= 0 &&
                     (st->coll_flags & WIRE_STATUS_COLL_ACTIVE) != 0;
    uint32_t n_names = 0;
    const char *const *names = ss_aggregator_names(r->agg, &n_names);
    ss_live_rank_status(r->live, rank,
                        st->step == WIRE_NO_STEP || st->step > INT64_MAX
                            ? -1
                            : (int64_t)st->step,
                        phase >= 0 && (uint32_t)phase < n_names ? names[phase]
                                                                : NULL,
                        st->since_ns);
    if (s->cur_step >= 0)
        run_faults_observe(&r->faults, rank, s->cur_step);
}

static void cb_checkpoint(void *ctx, uint32_t rank, const wire_checkpoint *c)
{
    run_ctx *r = ctx;
    run_event(r, "checkpoint", (int32_t)rank, "rank %u saved a checkpoint at "
          "step %" PRIu64, rank, c->step);
}

/* ---- first steps ----
 *
 * A job may load its checkpoint on one rank and hand it to the others
 * (torch.load on rank 0, then a broadcast, or DDP's own broadcast of rank
 * 0's parameters): only that rank says it resumed from step k and numbers
 * its steps from k + 1, the others from 0, and no step would be completed
 * by all of them.  So in each attempt the first STEP of each of node 0's
 * ranks is held (its connection unread) until every one of them has sent
 * one, said it resumed, or gone, or for at most FIRST_HOLD_MAX_NS; then a
 * rank that did not resume itself and numbers its first step below k + 1
 * is moved up to it (its steps, STATUS and checkpoints), and said once.
 * The ranks of a synchronous job send their first steps together: the
 * hold costs them nothing.  Ranks on other nodes are not held (their
 * bytes arrive through the agents' links): they are moved up when the
 * resume is known by their first step. */

#define FIRST_HOLD_MAX_NS ((ss_mono_ns)2 * 1000000000)

enum { FIRST_NOT_YET = 0, FIRST_HELD, FIRST_PASSED, FIRST_GONE };

/* The offset of RANK's steps when its first one is numbered STEP. */
static int64_t offset_of(const run_ctx *r, uint32_t rank, uint64_t step)
{
    const rank_slot *s = &r->ranks[rank];
    if (r->resumed_from < 0 || s->resumed_itself ||
        step >= (uint64_t)r->resumed_from + 1)
        return 0;
    return r->resumed_from + 1 - (int64_t)step;
}

/* Every one of node 0's ranks has sent its first step, said it resumed or
 * gone. */
static int all_at_gate(const run_ctx *r)
{
    for (uint32_t i = 0; i < r->o->nproc_local && i < r->o->nprocs; i++)
        if (r->ranks[i].first_gate == FIRST_NOT_YET &&
            !r->ranks[i].resumed_itself)
            return 0;
    return 1;
}

/* The held first steps go on, with the ranks moved up said once. */
static void settle_first_steps(run_ctx *r)
{
    r->in.first_settled = 1;
    uint32_t moved = 0, first = 0, any_held = 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        const rank_slot *s = &r->ranks[i];
        if (s->first_gate != FIRST_HELD)
            continue;
        any_held = 1;
        if (offset_of(r, i, s->first_step) > 0 && moved++ == 0)
            first = i;
    }
    if (any_held)
        ss_ingest_release_held(r->ingest);
    if (!moved)
        return;
    uint32_t loaded = 0, loader = 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++)
        if (r->ranks[i].resumed_itself && loaded++ == 0)
            loader = i;
    char who[64], whose[96];
    if (moved == 1)
        snprintf(who, sizeof who, "rank %u", first);
    else
        snprintf(who, sizeof who, "%u ranks (rank %u first)", moved, first);
    if (loaded == 1)
        snprintf(whose, sizeof whose, "rank %u, which loaded the checkpoint,",
                 loader);
    else
        snprintf(whose, sizeof whose, "the %u ranks that loaded the "
                 "checkpoint", loaded);
    char text[480];
    snprintf(text, sizeof text, "%s numbered %s steps from %" PRIu64 " while "
             "%s resumed from step %" PRId64 ": %s steps are counted from %"
             PRId64 " (%s not load the checkpoint %s)", who,
             moved == 1 ? "its" : "their", r->ranks[first].first_step, whose,
             r->resumed_from, moved == 1 ? "its" : "their",
             r->resumed_from + 1, moved == 1 ? "it did" : "they did",
             moved == 1 ? "itself" : "themselves");
    if (!r->o->quiet)
        fprintf(stderr, "stepscope: %s\n", text);
    run_event(r, "steps_renumbered", moved == 1 ? (int32_t)first : -1, "%s",
              text);
}

/* The held first steps go on once every one of node 0's ranks is at the
 * gate (after a resume or a rank gone). */
static void settle_if_all_at_gate(run_ctx *r)
{
    if (!r->in.first_settled && r->in.first_held_at && all_at_gate(r))
        settle_first_steps(r);
}

static int cb_first_step(void *ctx, uint32_t rank, uint64_t step,
                         int can_hold, int64_t *offset)
{
    run_ctx *r = ctx;
    if (rank >= r->o->nprocs)
        return 0;
    rank_slot *s = &r->ranks[rank];
    if (s->first_gate == FIRST_PASSED) { /* a connection again: as before */
        *offset = s->step_offset;
        return 0;
    }
    s->first_step = step;
    if (!r->in.first_settled && can_hold && rank < r->o->nproc_local) {
        s->first_gate = FIRST_HELD;
        if (!r->in.first_held_at)
            r->in.first_held_at = run_now(r);
        if (!all_at_gate(r))
            return 1;
        settle_first_steps(r);
    }
    s->first_gate = FIRST_PASSED;
    *offset = s->step_offset = offset_of(r, rank, step);
    return 0;
}

void run_ingest_new_attempt(run_ctx *r)
{
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        rank_slot *s = &r->ranks[i];
        s->first_gate = FIRST_NOT_YET;
        s->first_step = 0;
        s->resumed_itself = 0;
        s->step_offset = 0;
    }
    r->in.first_settled = 0;
    r->in.first_held_at = 0;
}

void run_ingest_tick(run_ctx *r, ss_mono_ns now)
{
    if (!r->in.first_settled && r->in.first_held_at &&
        now - r->in.first_held_at >= FIRST_HOLD_MAX_NS)
        settle_first_steps(r);
}

/* Ranks report the step they resumed from; the first report stands for
 * the attempt, and a rank that disagrees is noted. */
static void cb_resumed(void *ctx, uint32_t rank, const wire_resumed *rs)
{
    run_ctx *r = ctx;
    int64_t step = (int64_t)rs->step;
    if (rank < r->o->nprocs)
        r->ranks[rank].resumed_itself = 1;
    settle_if_all_at_gate(r);
    if (r->resumed_from < 0) {
        r->resumed_from = step;
        ss_attempt_facts f = {.attempt = r->att.attempt, .ended_at = -1,
                              .first_step = -1, .last_step = -1,
                              .resumed_from = step};
        ss_store_put_attempt_facts(r->store, r->run_id, &f);
    }
    run_event(r, "resumed", (int32_t)rank, "rank %u resumed from the checkpoint "
          "of step %" PRId64 "%s", rank, step,
          step == r->resumed_from ? "" : " (another rank's differs)");
}

static void cb_bye(void *ctx, uint32_t rank, const wire_bye *b)
{
    run_ctx *r = ctx;
    if (r->hooks.script_ended)
        r->hooks.script_ended(r->hooks.ctx, rank);
    run_carry_out(r, rank, ss_life_bye(&r->life, rank));
}

static void cb_disconnect(void *ctx, uint32_t rank, int said_bye)
{
    run_ctx *r = ctx;
    if (rank < r->o->nprocs && r->ranks[rank].first_gate == FIRST_NOT_YET) {
        /* gone before its first step: nobody waits for it */
        r->ranks[rank].first_gate = FIRST_GONE;
        settle_if_all_at_gate(r);
    }
    run_carry_out(r, rank, ss_life_disconnect(&r->life, rank, said_bye));
    run_maybe_finish(r);
}

static void cb_rejected(void *ctx, int32_t rank, const char *reason)
{
    run_ctx *r = ctx;
    r->in.rejected_connections++;
    fprintf(stderr, "stepscope: rejected a connection%s: %s\n",
            rank >= 0 ? " from a rank" : "", reason);
    run_event(r, "rejected_connection", rank, "%s", reason);
}

static void cb_profile_done(void *ctx, uint32_t rank,
                            const wire_profile_done *pd)
{
    run_ctx *r = ctx;
    ss_profiler_on_done(r->profiler, rank, pd);
}

/* How often a failing accept() is said, at most. */
#define ACCEPT_SAID_EVERY_NS ((ss_mono_ns)10 * 1000000000)

/* A rank's connection could not be accepted: its telemetry is lost, which
 * is said at once on stderr and as an event, then at most every 10 s
 * with the count since (a full descriptor table fails every accept). */
static void cb_accept_failed(void *ctx, int err)
{
    run_ctx *r = ctx;
    r->in.accepts_failed++;
    r->in.accepts_unsaid++;
    ss_mono_ns now = run_now(r);
    if (r->in.accept_said_at && now - r->in.accept_said_at < ACCEPT_SAID_EVERY_NS)
        return;
    struct rlimit rl;
    char limit[64] = "";
    if ((err == UV_EMFILE || err == UV_ENFILE) &&
        getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(limit, sizeof limit, " (open-file limit %llu)",
                 (unsigned long long)rl.rlim_cur);
    char msg[400];
    snprintf(msg, sizeof msg, "%" PRIu64 " rank connection%s not accepted "
             "(%" PRIu64 " in all): %s%s%s; those ranks' telemetry is lost",
             r->in.accepts_unsaid, r->in.accepts_unsaid == 1 ? "" : "s",
             r->in.accepts_failed, uv_strerror(err), limit,
             err == UV_EMFILE ? ": the controller is out of file descriptors"
             : err == UV_ENFILE ? ": the system is out of file descriptors"
                                : "");
    fprintf(stderr, "stepscope: %s\n", msg);
    run_event(r, "accept_failed", -1, "%s", msg);
    r->in.accepts_unsaid = 0;
    r->in.accept_said_at = now;
}

void run_ingest_callbacks(run_ctx *r, ss_ingest_callbacks *cb)
{
    *cb = (ss_ingest_callbacks){.ctx = r,
                                .intern = cb_intern,
                                .on_hello = cb_hello,
                                .on_step = cb_step,
                                .on_labels = cb_labels,
                                .on_counters = cb_counters,
                                .on_checkpoint = cb_checkpoint,
                                .on_bye = cb_bye,
                                .on_disconnect = cb_disconnect,
                                .on_rejected = cb_rejected,
                                .on_status = cb_status,
                                .on_name_refused = cb_name_refused,
                                .on_values_dropped = cb_values_dropped,
                                .on_resumed = cb_resumed,
                                .on_first_step = cb_first_step,
                                .on_profile_done = cb_profile_done,
                                .on_accept_failed = cb_accept_failed};
}
