/*
 * run.c - `stepscope run`: launch ranks, ingest, aggregate, store, explain.
 *
 * Life of a run:
 *   1. open the store (marking runs whose controller died interrupted),
 *      take the run lock (store/runlock.h), register the run (uuid,
 *      token), make a private directory for the ingest socket (removing
 *      those of dead controllers);
 *   2. start the ingest socket and the launcher on one libuv loop; signals
 *      and a 1 s housekeeping timer live on the same loop;
 *   3. each rank leaves the live set exactly once, as the life-cycle
 *      policy (lifecycle.h) decides from what the ingest socket, the
 *      launcher and the housekeeping timer report;
 *   4. when the policy says the run ends (every rank exited and what they
 *      left behind is ended by the launcher): finish the aggregator (final
 *      findings), record exit codes, end the run in the store, print a
 *      summary of what the store holds and return the job's exit status.
 *
 * This file is the wiring: libuv handles, callbacks, the store, the live
 * state; every decision about a rank's life is lifecycle.c's.
 */
#include "run.h"
#include "clocks.h"
#include "run_aggregate.h"
#include "run_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "aggregator.h"
#include "appendf.h"
#include "attempt.h"
#include "fd_budget.h"
#include "fingerprint.h"
#include "hang.h"
#include "host_watch.h"
#include "http.h"
#include "ingest.h"
#include "launcher.h"
#include "lifecycle.h"
#include "nodeconf.h"
#include "pg_conn.h"
#include "pg_pusher.h"
#include "profile.h"
#include "rank_env.h"
#include "live.h"
#include "runlock.h"
#include "sockdir.h"
#include "stack_service.h"
#include "store.h"
#include "store_files.h"

void run_event(run_ctx *r, const char *kind, int32_t rank, const char *fmt,
                  ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ss_store_put_event(r->store, r->run_id, r->att.attempt, ss_wall_now(), kind, rank,
                       msg);
}

/* ---- carrying out the life-cycle decisions ---- */

/* ---- finishing ---- */

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void attempt_over(run_ctx *r);
static void end_job(run_ctx *r);
static void publish_host_totals(run_ctx *r);

/* Ranks that died within a moment are reaped in the launcher's order, not
 * theirs: a rank whose collective failed on the crashed rank's closed
 * sockets may be seen first, and the crashed rank's exit, seen after the
 * stop began, was read as stopped.  Once node 0's ranks have all exited,
 * the launcher's first failure (decided from their last lines) reads
 * "failed", and an event says why its earlier one said otherwise. */
static void settle_first_failure(run_ctx *r)
{
    int rank = r->hooks.first_failed(r->hooks.ctx);
    if (rank < 0 || !ss_life_failed_first(&r->life, (uint32_t)rank))
        return;
    run_event(r, "rank_failed", rank, "rank %d failed first, on its own: "
              "its exit was seen after a peer's that it caused, which had "
              "begun stopping the job", rank);
}

void run_maybe_finish(run_ctx *r)
{
    if (r->att.restart_pending || r->ending || !ss_life_finish(&r->life))
        return;
    for (uint32_t i = 0; i < r->o->nprocs; i++)
        run_carry_out(r, i, ss_life_finish_rank(&r->life, i));
    ss_aggregator_finish(r->agg);
    run_agg_finish(r->aggregate, run_now(r), r->o->quiet);
    run_nodes_finish(r->nodes);
    publish_host_totals(r);
    settle_first_failure(r);
    for (uint32_t i = 0; i < r->o->nprocs; i++)
        run_put_rank(r, i, ss_life_rank_state(&r->life, i));
    attempt_over(r);
}

/* ---- signals and housekeeping ---- */

/* A signal that repeats the last one this soon is the same request
 * delivered twice: `timeout` sends its signal to its child and then to its
 * whole process group, a scheduler may signal the job's processes and its
 * group. Taken as a second request it would kill the ranks at once, with
 * none of the grace they were promised to save a checkpoint in. */
#define SIGNAL_ECHO_NS (300 * 1000000LL)

static void on_signal(uv_signal_t *h, int signum)
{
    run_ctx *r = h->data;
    ss_mono_ns now = run_now(r);
    if (r->stop_requests && signum == r->last_signal &&
        now - r->last_signal_at < SIGNAL_ECHO_NS)
        return;
    r->last_signal = signum;
    r->last_signal_at = now;
    r->stop_requests++;
    if (r->ending) {
        run_end_loop(r);
        return;
    }
    if (!r->stop_signal)
        r->stop_signal = signum;
    if (r->att.health_pending) {
        /* Nothing launched yet: the attempt ends when the checks do. */
        fprintf(stderr, "\nstepscope: %s: stopping once the health checks "
                "are done\n", strsignal(signum));
        return;
    }
    if (ss_attempt_cancel(&r->att)) {
        /* Between attempts: no rank runs; the restart is called off. */
        fprintf(stderr, "\nstepscope: %s: the restart is called off\n",
                strsignal(signum));
        run_event(r, "restart_cancelled", -1, "stopped by %s before "
                  "attempt %u", strsignal(signum), r->att.attempt + 1);
        r->final_status = 128 + r->stop_signal;
        end_job(r);
        return;
    }
    if (r->stop_requests == 1) {
        fprintf(stderr, "\nstepscope: %s: stopping the ranks (SIGTERM, then "
                "SIGKILL after %.1f s; again to kill now)\n",
                strsignal(signum), r->o->grace_ms / 1000.0);
        char why[64];
        snprintf(why, sizeof why, "stopped by %s", strsignal(signum));
        run_event(r, "stop_requested", -1, "%s", why);
        run_stop_job(r, 0, why);
        run_nodes_stop_waiting(r->nodes, why);
    } else {
        const char *what = signum == SIGINT    ? "Ctrl-C"
                           : signum == SIGTERM ? "SIGTERM"
                           : signum == SIGHUP  ? "SIGHUP"
                                               : strsignal(signum);
        char why[64];
        snprintf(why, sizeof why, "on a second %s", what);
        fprintf(stderr, "stepscope: second %s: killing the ranks now "
                "(SIGKILL)\n", what);
        run_event(r, "stop_requested", -1, "killed at once %s", why);
        run_stop_job(r, 1, why);
    }
}

/* The ranks' host totals, for the live metrics. */
static void publish_host_totals(run_ctx *r)
{
    ss_host_step totals;
    for (uint32_t i = 0; r->host && i < r->o->nproc_local; i++)
        if (ss_host_watch_totals(r->host, i, &totals) == 0)
            ss_live_rank_host(r->live, i, &totals);
}

/* A name of the run's table, "" for -1 or one out of range. */
static const char *run_name(run_ctx *r, int idx)
{
    uint32_t n = 0;
    const char *const *names = ss_aggregator_names(r->agg, &n);
    return idx >= 0 && (uint32_t)idx < n && names[idx] ? names[idx] : "";
}

/* The stacks captured for a hang are stored (or WHY they are not); then
 * --on-hang stop ends the job, --on-hang restart the attempt. */
static void on_hang_stacks(void *ctx, const char *doc, size_t len,
                           const char *why)
{
    run_ctx *r = ctx;
    if (!doc)
        fprintf(stderr, "stepscope: hang: no stacks: %s\n", why);
    else if (!r->o->quiet)
        fprintf(stderr, "stepscope: hang: every rank's stacks are stored "
                "(`stepscope report` shows them merged)\n");
    if (r->o->on_hang == SS_ON_HANG_DUMP)
        return;
    /* The attempt may have ended meanwhile (another began, or none
     * follows): nothing of it is left to stop. */
    if (!r->hang_stop_why[0] || r->att.restart_pending || r->att.health_pending ||
        r->ending)
        return;
    r->hang_acted = 1;
    if (r->o->on_hang == SS_ON_HANG_RESTART) {
        fprintf(stderr, "stepscope: hang: stopping attempt %u to restart it "
                "(--on-hang restart; SIGTERM, then SIGKILL after %.1f s)\n",
                r->att.attempt, r->o->grace_ms / 1000.0);
        run_event(r, "stop_requested", -1, "stopped on a hang to restart "
                  "(--on-hang restart)");
    } else {
        fprintf(stderr, "stepscope: hang: stopping the job (--on-hang stop; "
                "SIGTERM, then SIGKILL after %.1f s)\n", r->o->grace_ms / 1000.0);
        run_event(r, "stop_requested", -1, "stopped on a hang (--on-hang "
                  "stop)");
    }
    run_stop_job(r, 0, "stopped on a hang");
}

/* Hang detection on the housekeeping tick (hang.h): what each rank does
 * now, from its STATUS and the aggregator; on a hang, the finding, every
 * rank's stacks stored with it, and what --on-hang says. */
static void check_hang(run_ctx *r, ss_mono_ns now)
{
    if (r->o->hang_off || r->hang_stop_why[0])
        return;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        const rank_slot *s = &r->ranks[i];
        ss_hang_rank *h = &r->hang_ranks[i];
        ss_rank_state st;
        ss_aggregator_rank_state(r->agg, i, &st);
        memset(h, 0, sizeof *h);
        h->live = st.live && !st.crashed;
        h->last_step = st.last_step;
        h->cur_step = s->status_at ? s->cur_step : -1;
        snprintf(h->phase, sizeof h->phase, "%s", run_name(r, s->phase));
        snprintf(h->collective, sizeof h->collective, "%s",
                 run_name(r, s->collective));
        h->coll_seq = s->coll_seq;
        h->coll_active = s->coll_active;
        h->heard_at = s->status_at;
        h->stopped_for =
            i < r->o->nproc_local
                ? ss_host_watch_stopped_for(r->host, i, now, &h->stop_kind)
                : run_nodes_stopped_for(r->nodes, i, now, &h->stop_kind);
    }
    ss_finding f;
    if (!ss_hang_check(&r->hang, now, r->hang_ranks, r->o->nprocs, &f))
        return;
    uint32_t id = ss_aggregator_publish_finding(r->agg, &f);
    run_event(r, "hang", f.n_ranks == 1 ? f.ranks[0] : -1, "%s", f.message);
    if (r->o->on_hang != SS_ON_HANG_DUMP)
        snprintf(r->hang_stop_why, sizeof r->hang_stop_why, "%s", f.message);
    /* Every rank's stacks, stored with the finding; --on-hang stop and
     * restart wait for them, so the ranks are still there to answer. */
    if (!id || ss_stack_service_capture(r->stacks, 0, "hang", id,
                                        on_hang_stacks, r) != 0)
        on_hang_stacks(r, NULL, 0, "the stack service did not take the "
                       "request");
}

/* The housekeeping tick's period (on_tick). */
#define TICK_MS 1000
/* The loop did not run for this long between two ticks: the controller
 * was stopped or starved of CPU. */
#define LOOP_STALL_NS (5 * 1000000000LL)

/* Whether the loop ran its tick late by LOOP_STALL_NS or more (the
 * controller itself was stopped or starved of CPU): the ranks' records,
 * STATUS frames and connections of that time are still unread, so their
 * silence is not judged on this tick (the next comes after they were
 * read), and the hang stall is measured without it.  Says so once per
 * stall, on stderr and as a `controller_stalled` event. */
static int loop_stalled(run_ctx *r, ss_mono_ns now)
{
    ss_mono_ns gap = now - r->tick_at;
    r->tick_at = now;
    if (gap < LOOP_STALL_NS)
        return 0;
    ss_hang_pause(&r->hang, gap - (ss_mono_ns)TICK_MS * 1000000, now);
    fprintf(stderr, "stepscope: the controller could not run for %.1f s "
            "(stopped, or starved of CPU); what the ranks sent meanwhile "
            "is read now, and their silence over that time is not taken "
            "for a hang\n", (double)gap / 1e9);
    run_event(r, "controller_stalled", -1, "the controller could not run "
              "for %.1f s (stopped, or starved of CPU)", (double)gap / 1e9);
    return 1;
}

/* The store's file removed or replaced while the run records into it
 * (an `rm`, a clean-up job): said once, as it is found; the run goes on
 * recording into the file it holds open and saves it again at its end
 * (run_summary.c). */
static void check_store_file(run_ctx *r)
{
    if (r->store_moved || ss_store_file_moved(r->store) != 1)
        return;
    r->store_moved = 1;
    fprintf(stderr, "stepscope: warning: the store %s was removed or "
            "replaced while this run records into it; the run goes on "
            "recording, and saves what the store held there again when it "
            "ends (beside it if another file took its name)\n", r->db_path);
    run_event(r, "store_moved", -1, "the store's file was removed or "
              "replaced while the run recorded into it");
}

static void on_tick(uv_timer_t *t)
{
    run_ctx *r = t->data;
    ss_mono_ns now = run_now(r);
    if (loop_stalled(r, now))
        return;
    if (r->att.restart_pending || r->ending || r->att.health_pending)
        return; /* between attempts: no rank to watch */
    publish_host_totals(r);
    run_nodes_tick(r->nodes, now, r->att.started);
    check_hang(r, now);
    check_store_file(r);
    run_ingest_tick(r, now);
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        ss_life_decision d = ss_life_tick(&r->life, i, now);
        if (!d.never_connected)
            continue;
        fprintf(stderr, "stepscope: rank %u has not connected after %.0f s;"
                " its steps are recorded as missing\n", i,
                r->o->connect_timeout_ms / 1000.0);
        run_event(r, "rank_never_connected", (int32_t)i, "rank %u did not "
              "connect within %.0f s", i, r->o->connect_timeout_ms / 1000.0);
        run_carry_out(r, i, d);
        run_put_rank(r, i, ss_life_rank_state(&r->life, i));
    }
}

/* ---- set-up ---- */

static void random_bytes(uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(p + got, n - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) { /* no entropy source at all: weak but unique */
            for (; got < n; got++)
                p[got] = (uint8_t)(rand() ^ getpid() ^ ss_mono_now() >> (got % 8));
            return;
        }
        got += (size_t)k;
    }
}

static void make_uuid(char out[40])
{
    uint8_t b[16];
    random_bytes(b, sizeof b);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 40,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

/* Joins the command line into OUT, quoting words that need it. */
static void join_command(char **argv, char *out, size_t outlen)
{
    size_t len = 0;
    out[0] = '\0';
    for (char **a = argv; *a && len + 1 < outlen; a++) {
        int plain = strpbrk(*a, " \t\n'\"\\$`*?;&|<>()") == NULL && **a;
        len += (size_t)snprintf(out + len, outlen - len, plain ? "%s%s" : "%s'%s'",
                                a == argv ? "" : " ", *a);
        if (len >= outlen)
            len = outlen - 1;
    }
}

/* The profiler of `stepscope profile` (profile.h), writing into the
 * store's PATH.d/profiles/run-ID; NULL with a reason in ERR. */
static ss_profiler *run_profiler_start(run_ctx *r, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (ss_store_profile_dir(r->db_path, r->run_id, dir, sizeof dir) != 0) {
        snprintf(err, errlen, "no directory for profiles: %s",
                 strerror(errno));
        return NULL;
    }
    ss_profiler_config pc = {&r->loop, NULL, r->store, r->live, r->run_id,
                             r->att.attempt, r->o->nprocs, dir};
    return ss_profiler_start(&pc, err, errlen);
}

/* ss_recent_ask_fn: another node's agent, through the nodes' links. */
static int ask_recent(void *ctx, uint32_t node, const link_recent_req *req,
                      char *why, size_t whylen)
{
    run_ctx *r = ctx;
    return run_nodes_recent(r->nodes, node, req, why, whylen);
}

/* Creates the live state and, unless --no-http, starts the HTTP server
 * (docs/api.md) and writes the live-run file that `stepscope top` reads.
 * The default port falls back to a free one when busy; an explicit --http
 * port that is busy is an error. */
static int start_http(run_ctx *r, char *err, size_t errlen)
{
    r->live = ss_live_create(r->run_id, r->o->nprocs);
    if (!r->live) {
        snprintf(err, errlen, "out of memory for the live state");
        return -1;
    }
    if (r->o->no_http)
        return 0;
    char host[64] = "127.0.0.1", herr[256];
    uint16_t port = SS_HTTP_DEFAULT_PORT;
    if (r->o->http_addr && ss_http_parse_addr(r->o->http_addr, host, sizeof host,
                                           &port, herr, sizeof herr) != 0) {
        snprintf(err, errlen, "--http %s: %s", r->o->http_addr, herr);
        return -1;
    }
    char hex[2 * WIRE_TOKEN_SIZE + 1];
    wire_token_format(r->token, hex);
    r->profiler = run_profiler_start(r, herr, sizeof herr);
    if (!r->profiler)
        fprintf(stderr, "stepscope: note: %s (`stepscope profile` will not "
                "work for this run)\n", herr);
    ss_http_config hcfg = {host, port, r->o->http_addr == NULL, r->db_path,
                           r->live, hex,
                           r->stacks ? ss_stack_service_http : NULL,
                           r->stacks,
                           r->profiler ? ss_profiler_http : NULL,
                           r->profiler,
                           r->recent ? ss_recent_service_http : NULL,
                           r->recent};
    r->http = ss_http_start(&hcfg, herr, sizeof herr);
    if (!r->http) {
        snprintf(err, errlen, "HTTP server: %s", herr);
        return -1;
    }
    r->http_public = !ss_http_is_loopback(host);
    if (ss_http_live_file_write(r->db_path, r->run_id, r->http,
                                r->http_public ? hex : NULL,
                                r->live_file, sizeof r->live_file, herr,
                                sizeof herr) != 0)
        fprintf(stderr, "stepscope: note: %s (`stepscope top` will not find "
                "this run)\n", herr);
    return 0;
}

/* ss_stack_pid_fn: rank RANK's pid now, 0 before the launch or once it
 * exited. */
static pid_t rank_pid(void *ctx, uint32_t rank)
{
    run_ctx *r = ctx;
    return r->hooks.rank_pid(r->hooks.ctx, rank);
}

/* Tells the person where the dashboard is. */
static void print_dashboard(run_ctx *r)
{
    if (!r->http)
        return;
    if (ss_http_fell_back(r->http))
        fprintf(stderr, "stepscope: note: port %d is busy; the dashboard "
                "took port %u\n", SS_HTTP_DEFAULT_PORT,
                ss_http_port(r->http));
    char hex[2 * WIRE_TOKEN_SIZE + 1];
    wire_token_format(r->token, hex);
    fprintf(stderr, "stepscope: dashboard %s%s%s\n", ss_http_url(r->http),
            r->http_public ? "?token=" : "", r->http_public ? hex : "");
}

/* A run's name without --name: the program's, or the script's for
 * `python3 train.py` (the module's for `-m`, "python3 -c" for code given
 * inline), looking through `env [-OPTION...] [NAME=VALUE...]`; on one
 * line. */
static void default_run_name(char **argv, char *out, size_t outlen)
{
    char **a = argv;
    const char *base = strrchr(a[0], '/');
    if (strcmp(base ? base + 1 : a[0], "env") == 0 && a[1]) {
        a++;
        while (*a && ((*a)[0] == '-' || strchr(*a, '=')))
            a++;
        if (!*a)
            a = argv;
    }
    const char *prog = a[0], *suffix = "";
    for (char **b = a + 1; *b && strstr(a[0], "python"); b++) {
        if (strcmp(*b, "-c") == 0) { /* the code is no name */
            suffix = " -c";
            break;
        }
        if ((strcmp(*b, "-W") == 0 || strcmp(*b, "-X") == 0) && b[1]) {
            b++; /* an option's value */
            continue;
        }
        if ((*b)[0] != '-') {
            prog = *b;
            break;
        }
    }
    const char *slash = strrchr(prog, '/');
    snprintf(out, outlen, "%s%s", slash ? slash + 1 : prog, suffix);
    /* One line: a name is printed inside sentences and tables. */
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < ' ')
            *c = ' ';
}

static void end_job(run_ctx *r);

void run_health_done(run_ctx *r)
{
    ss_attempt_health_done(&r->att, r->health_failed || r->stop_requests
                                        ? SS_ATTEMPT_NO_LAUNCH
                                        : SS_ATTEMPT_LAUNCH);
}

/* ss_attempt_hooks.launch: launches the ranks of attempt r->att.attempt
 * (this node's, and after a restart the other nodes' through RESTART),
 * then re-arms the fault injector.  Returns 0, or -1 with ERR. */
static int launch_ranks(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    run_ctx *r = ctx;
    (void)attempt;
    if (r->att.attempt > 0)
        run_nodes_restart(r->nodes); /* the other nodes relaunch too */
    ss_life_launched(&r->life, run_now(r));
    ss_hang_init(&r->hang, &r->o->hang_cfg, run_now(r));
    ss_hang_set_wall_offset(&r->hang, ss_wall_now() - run_now(r));
    char exe[PATH_MAX];
    if (ss_rank_env_self_exe(exe, sizeof exe, err, errlen) != 0)
        return -1;
    ss_launch_config lcfg;
    ss_launch_config_defaults(&lcfg);
    lcfg.nprocs = r->o->nproc_local;
    lcfg.world_size = r->o->nprocs;
    lcfg.nnodes = r->o->nnodes;
    lcfg.master_addr = r->o->master_addr;
    lcfg.master_port = r->o->master_port;
    lcfg.argv = r->o->argv;
    lcfg.exec_shim = exe;
    lcfg.env = r->rank_env.env;
    lcfg.run_id = r->uuid;
    lcfg.log_dir = r->log_path;
    lcfg.grace_ms = r->o->grace_ms;
    lcfg.attempt = r->att.attempt;
    lcfg.max_restarts = r->o->restart_cfg.max_restarts;
    lcfg.echo = !r->o->quiet;
    lcfg.echo_mask = r->o->echo_mask;
    lcfg.role = r->o->role;
    ss_launch_callbacks lcb;
    run_launch_callbacks(r, &lcb);
    if (r->hooks.launch(r->hooks.ctx, &lcfg, &lcb, err, errlen) != 0)
        return -1;
    r->launched = 1;
    for (uint32_t i = 0; r->host && i < r->o->nproc_local; i++)
        ss_host_watch_rank(r->host, i, r->hooks.rank_pid(r->hooks.ctx, i));
    if (r->att.attempt > 0)
        run_event(r, "attempt_started", -1, "attempt %u launched", r->att.attempt);
    run_faults_arm(&r->faults); /* re-armed for each attempt */
    return 0;
}

static int job_status(const run_ctx *r);

/* The attempt's exit status: 128 + the signal after a stop was asked
 * for (130 for Ctrl-C, whatever the ranks' exit codes), 1 when nothing
 * was launched (node 0 failed its health check), 124 after a hang was
 * acted on, else the job's. */
static int attempt_status(const run_ctx *r)
{
    if (r->stop_signal)
        return 128 + r->stop_signal;
    if (!r->launched)
        return 1;
    if (r->hang_acted)
        return SS_HANG_EXIT_STATUS;
    if (r->num.nonfinite_acted && run_numerics_no_restart(r)[0])
        return SS_NONFINITE_EXIT_STATUS;
    if (run_replica_stopped(r))
        return SS_DIVERGENCE_EXIT_STATUS;
    return job_status(r);
}

void run_store_config(const ss_run_opts *o, ss_store_config *cfg)
{
    ss_store_config_defaults(cfg);
    ss_store_config_fit_world(cfg, o->nprocs);
    if (o->aggregate == SS_AGGREGATE_NODE)
        cfg->rank_rows_per_step = SS_AGGREGATE_NODE_ROWS;
    if (o->nprocs > SS_AGGREGATE_NODE_ABOVE)
        cfg->totals_interval_ms = SS_LARGE_WORLD_TOTALS_MS;
}

/* Why the attempt ended, for the store (store.h, ss_attempt_facts): a
 * failed health check or an injected fault (run_faults_cause, "injected:"
 * written into BUF), else what the attempt's end says. */
static const char *attempt_cause(run_ctx *r, int status, char *buf,
                                 size_t len)
{
    if (r->stop_signal)
        return "interrupted";
    if (r->health_failed)
        return "health_check";
    const char *fault = run_faults_cause(&r->faults, status,
                                         r->stop_requests > 0, buf, len);
    if (fault)
        return fault;
    if (status == 0)
        return "completed";
    if (r->hang_acted)
        return "hang";
    if (r->num.nonfinite_acted)
        return "nonfinite";
    if (r->rep.divergence_acted)
        return "divergence";
    if (r->node_lost_attempt)
        return "node_lost";
    return ss_life_attempt_cause(status, 0);
}

void run_end_loop(run_ctx *r)
{
    ss_live_finish(r->live);
    r->hooks.end_loop(r->hooks.ctx);
}

static void on_agents_slow(uv_timer_t *t)
{
    run_ctx *r = t->data;
    fprintf(stderr, "stepscope: not every agent said goodbye within %.0f s; "
            "ending anyway\n", SS_AGENTS_LEAVE_MS / 1000.0);
    run_end_loop(r);
}

/* No attempt follows.  With restarts on, the agents of the other nodes
 * wait after each attempt for RESTART or STOP: they are told STOP and the
 * run ends once they have all said goodbye (or after
 * SS_AGENTS_LEAVE_MS). */
static void end_job(run_ctx *r)
{
    r->ending = 1;
    if (r->o->nnodes == 1 || r->o->restart_cfg.max_restarts == 0 ||
        run_nodes_all_gone(r->nodes)) {
        run_end_loop(r);
        return;
    }
    run_nodes_end_all(r->nodes);
    uv_timer_start(&r->leave_timer, on_agents_slow, SS_AGENTS_LEAVE_MS, 0);
}

/* Takes one output line BODY (N bytes, the "[rank R] " prefix gone) of
 * faulthandler's dump into FATAL: the "Fatal Python error" line, then the
 * crashing thread's 3 innermost frames.  *FRAMES is -1 before the dump,
 * -2 in it before the crashing thread, then the frames taken.  Returns
 * whether the line belonged to the dump. */
static int take_fatal_line(const char *body, int n, char *fatal,
                           size_t fatal_size, size_t *fatal_len, int *frames)
{
    int indent = (int)strspn(body, " ");
    if (strncmp(body, "Fatal Python error: ", 20) == 0) {
        *fatal_len = 0;
        ss_appendf(fatal, fatal_size, fatal_len, "%.*s", n, body);
        *frames = -2;
    } else if (*frames == -2 && strncmp(body, "Current thread ", 15) == 0) {
        *frames = 0;
    } else if (*frames >= 0 && strncmp(body, "Thread ", 7) == 0) {
        *frames = 3; /* another thread's: the crashing one is done */
    } else if (*frames >= 0 && *frames < 3 && indent < n &&
               strncmp(body + indent, "File ", 5) == 0) {
        ss_appendf(fatal, fatal_size, fatal_len, "%s%.*s",
                   *frames ? " < " : "; ", n - indent, body + indent);
        ++*frames;
    } else {
        return 0;
    }
    return 1;
}

/* The failure's explanation as one stored event, for `report` after the
 * run: the summary's own lines (who failed first and how, what the
 * kernel's log or an early exit adds, how the others were stopped) and
 * the last output line of the rank that failed, joined by " | "; after a
 * "Fatal Python error" (faulthandler's dump) that line and the crashing
 * thread's 3 innermost frames instead.  The other output lines stay in
 * the rank's log. */
static void store_failure(run_ctx *r)
{
    char text[2048] = "", last[512] = "", fatal[1024] = "";
    size_t len = 0, fatal_len = 0;
    const char *sep = "";
    int frames = -1;
    for (const char *line = r->failure_text; *line;) {
        size_t n = strcspn(line, "\n");
        if (strncmp(line, "[rank ", 6) == 0) {
            const char *body = memchr(line, ']', n);
            body = body ? body + 1 + (body[1] == ' ') : line;
            int body_n = (int)(n - (size_t)(body - line));
            if (!take_fatal_line(body, body_n, fatal, sizeof fatal,
                                 &fatal_len, &frames) &&
                (int)strspn(body, " ") < body_n &&
                strncmp(body, "Extension modules:", 18) != 0)
                snprintf(last, sizeof last, "%.*s", body_n, body);
        } else if (n > 0 && strncmp(line, "last ", 5) != 0) {
            ss_appendf(text, sizeof text, &len, "%s%.*s", sep, (int)n, line);
            sep = " | ";
        }
        line += n + (line[n] == '\n');
    }
    if (fatal[0])
        ss_appendf(text, sizeof text, &len, "%s%s", sep, fatal);
    else if (last[0])
        ss_appendf(text, sizeof text, &len, "%slast line: %s", sep, last);
    if (text[0])
        run_event(r, "failure", -1, "%s", text);
}

/* The attempt's ranks have all ended (or a health check failed before
 * they were launched): its facts are stored, and the restart policy
 * (restart.h) decides whether another attempt follows. */
static void attempt_over(run_ctx *r)
{
    int status = attempt_status(r);
    char fault[48];
    const char *cause = attempt_cause(r, status, fault, sizeof fault);
    if (!r->failure_text[0] && !r->hang_acted && !r->num.nonfinite_acted &&
        !r->rep.divergence_acted && r->launched) {
        char why[8192];
        if (r->hooks.failure_summary(r->hooks.ctx, why, sizeof why) > 0)
            snprintf(r->failure_text, sizeof r->failure_text, "%s", why);
    }
    ss_attempt_facts facts = {.attempt = r->att.attempt,
                              .ended_at = ss_wall_now(),
                              .first_step = r->first_step,
                              .last_step = r->last_step,
                              .resumed_from = -1};
    snprintf(facts.cause, sizeof facts.cause, "%s", cause);
    ss_store_put_attempt_facts(r->store, r->run_id, &facts);
    if (status != 0)
        store_failure(r);
    if (r->n_notes <= r->o->restart_cfg.max_restarts) {
        attempt_note *n = &r->notes[r->n_notes++];
        snprintf(n->cause, sizeof n->cause, "%s", cause);
        n->status = status;
    }
    run_event(r, "attempt_ended", -1, "attempt %u ended: %s (exit status "
              "%d)", r->att.attempt, cause, status);
    r->final_status = status;

    int injected = strncmp(cause, "injected:", 9) == 0;
    ss_attempt_end end = {.attempt = r->att.attempt,
                          .made_progress = r->first_step >= 0,
                          .now = run_now(r)};
    char sig[SS_RESTART_SIG_MAX] = "";
    if (status == 0)
        end.why_not = "the job completed";
    else if (r->stop_requests)
        end.why_not = "the job was stopped on request";
    else if (r->health_failed)
        end.why_not = "a health check failed";
    else if (r->no_restart_why[0])
        end.why_not = r->no_restart_why;
    else if (r->hang_acted && r->o->on_hang != SS_ON_HANG_RESTART)
        end.why_not = "stopped on a hang (--on-hang stop)";
    else if (run_numerics_no_restart(r)[0])
        end.why_not = run_numerics_no_restart(r);
    else if (run_replica_no_restart(r)[0])
        end.why_not = run_replica_no_restart(r);
    else
        end.restartable = 1;
    if (end.restartable && !r->hang_acted && !r->num.nonfinite_acted &&
        !r->rep.divergence_acted && !r->node_lost_attempt) {
        ss_restart_signature(status, r->failure_text, sig, sizeof sig);
        end.signature = injected ? "" : sig;
    }
    ss_restart_verdict v;
    if (!ss_attempt_over(&r->att, &end, &v)) {
        /* Say it when a restart was possible at all. */
        if (status != 0 && !r->stop_requests &&
            r->o->restart_cfg.max_restarts > 0) {
            fprintf(stderr, "stepscope: attempt %u ended (%s, exit status "
                    "%d): %s\n", r->att.attempt, cause, status, v.why);
            run_event(r, "not_restarted", -1, "%s", v.why);
        }
        end_job(r);
        return;
    }
    if (r->failure_text[0])
        fprintf(stderr, "stepscope: %s%s", r->failure_text,
                r->failure_text[strlen(r->failure_text) - 1] == '\n' ? ""
                                                                      : "\n");
    fprintf(stderr, "stepscope: attempt %u ended (%s, exit status %d); %s\n",
            r->att.attempt, cause, status, v.why);
    run_event(r, "restart_scheduled", -1, "%s", v.why);
    run_numerics_before_restart(r);
    run_replica_before_restart(r);
}

/* ss_attempt_hooks.prepare, after the backoff: a new attempt with a new
 * life cycle, aggregator, hang state and step range; the ingest socket,
 * store, HTTP server, live state and run token stay.  Returns -1 with ERR
 * when memory for it ran out (the rest is set up all the same). */
static int prepare_attempt(void *ctx, uint32_t attempt, char *err,
                           size_t errlen)
{
    run_ctx *r = ctx;
    run_nodes_set_attempt(r->nodes, attempt);
    r->hooks.release(r->hooks.ctx);
    r->launched = 0;
    ss_aggregator_destroy(r->agg);
    r->agg = ss_aggregator_create(&r->agg_cfg, r->o->nprocs, r->att.attempt,
                                  &(ss_sink){r, run_sink_step, run_sink_finding});
    run_agg_attempt(r->aggregate);
    ss_life_release(&r->life);
    int ok = r->agg && ss_life_init(&r->life, r->o->nprocs, r->att.attempt,
                                    (ss_dur_ns)r->o->connect_timeout_ms *
                                        1000000) == 0;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        rank_slot *s = &r->ranks[i];
        r->hooks.linger(r->hooks.ctx, i, 0);
        s->pid = 0;
        s->status_at = 0;
        s->cur_step = -1;
        s->phase = s->collective = -1;
        s->coll_seq = 0;
        s->coll_active = 0;
        ss_live_rank_state(r->live, i, "starting");
    }
    r->first_step = r->last_step = r->resumed_from = -1;
    run_ingest_new_attempt(r);
    r->job_stopping = 0;
    r->local_all_exited = 0;
    r->first_failure_status = -1;
    r->failure_text[0] = r->hang_stop_why[0] = r->no_restart_why[0] = '\0';
    r->failure_said = 0;
    r->hang_acted = r->node_lost_attempt = r->health_failed = 0;
    run_numerics_new_attempt(r);
    run_replica_new_attempt(r);
    ss_live_attempt(r->live, r->att.attempt);
    ss_store_put_attempt(r->store, r->run_id, r->att.attempt, ss_wall_now());
    ss_stack_service_set_attempt(r->stacks, r->att.attempt);
    ss_profiler_set_attempt(r->profiler, r->att.attempt);
    if (!r->o->quiet)
        fprintf(stderr, "stepscope: attempt %u: launching %u ranks\n",
                r->att.attempt, r->o->nprocs);
    if (ok)
        return 0;
    snprintf(err, errlen, "out of memory for a new attempt");
    return -1;
}

/* ss_attempt_hooks.start_failed: a later attempt did not start (ERR);
 * the job ends with status 1. */
static void attempt_failed_to_start(void *ctx, uint32_t attempt,
                                    const char *err)
{
    run_ctx *r = ctx;
    fprintf(stderr, "stepscope run: attempt %u: %s\n", attempt, err);
    run_event(r, "attempt_failed_to_start", -1, "%s", err);
    r->final_status = 1;
    end_job(r);
}

/* ss_attempt_hooks.not_launched: the health checks failed or a stop came
 * during them: the attempt is over with nothing launched. */
static void attempt_not_launched(void *ctx, uint32_t attempt)
{
    (void)attempt;
    attempt_over(ctx);
}

/* The attempts' clock and backoff timer (ss_attempt_hooks), the run's
 * (run_hooks.h). */
static ss_mono_ns attempt_now(void *ctx)
{
    return run_now(ctx);
}

static void backoff_start(void *ctx, uint32_t delay_ms)
{
    run_ctx *r = ctx;
    r->hooks.backoff_start(r->hooks.ctx, delay_ms);
}

static void backoff_stop(void *ctx)
{
    run_ctx *r = ctx;
    r->hooks.backoff_stop(r->hooks.ctx);
}

/* Node 0's health check before the first attempt (run_inject.h): 0, or
 * -1 with ERR, after a failure was reported, or with the signal that
 * stopped it recorded. */
static int health_first(run_ctx *r, char *err, size_t errlen)
{
    int sig = 0;
    if (run_faults_health_first(&r->faults, &sig, err, errlen) == 0)
        return 0;
    if (sig) {
        r->stop_requests++;
        r->stopped_starting = sig;
        r->stop_signal = sig;
        run_event(r, "stop_requested", -1, "stopped by %s during node 0's "
                  "health check", strsignal(sig));
    }
    return -1;
}

/* ss_attempt_hooks.health_start: node 0's checks before a later attempt
 * (the other nodes check themselves when told RESTART, which they are
 * only once node 0's checks passed); run_health_done follows. */
static int health_start(void *ctx, uint32_t attempt, char *err,
                        size_t errlen)
{
    run_ctx *r = ctx;
    (void)attempt;
    return r->hooks.health_start(r->hooks.ctx, err, errlen);
}

/* The aggregator's host provider: node 0's ranks from the local watch,
 * the others from the evidence their agents sent (run_nodes.h). */
static int host_window(void *ctx, uint32_t rank, uint64_t step,
                       ss_mono_ns begin_ns, ss_mono_ns end_ns,
                       ss_host_step *out)
{
    run_ctx *r = ctx;
    if (rank < r->o->nproc_local)
        return r->host ? ss_host_watch_window(r->host, rank, begin_ns, end_ns,
                                              out)
                       : -1;
    return run_nodes_host(r->nodes, rank, step, out);
}

int run_parts_init(run_ctx *r, char *err, size_t errlen)
{
    r->agg = ss_aggregator_create(&r->agg_cfg, r->o->nprocs, r->att.attempt,
                                  &(ss_sink){r, run_sink_step, run_sink_finding});
    r->ranks = calloc(r->o->nprocs, sizeof *r->ranks);
    r->hang_ranks = calloc(r->o->nprocs, sizeof *r->hang_ranks);
    r->notes = calloc((size_t)r->o->restart_cfg.max_restarts + 1,
                      sizeof *r->notes);
    for (uint32_t i = 0; r->ranks && i < r->o->nprocs; i++)
        r->ranks[i].phase = r->ranks[i].collective = -1;
    if (r->o->nnodes > 1)
        r->aggregate = run_agg_new(r->o->nprocs, r->o->nproc_local,
                                   r->o->aggregate == SS_AGGREGATE_NODE);
    if (!r->agg || !r->ranks || !r->hang_ranks || !r->notes ||
        (r->o->nnodes > 1 && !r->aggregate) ||
        ss_life_init(&r->life, r->o->nprocs, r->att.attempt,
                     (ss_dur_ns)r->o->connect_timeout_ms * 1000000) != 0) {
        snprintf(err, errlen, "out of memory for %u ranks", r->o->nprocs);
        return -1;
    }
    ss_attempt_hooks hooks = {.ctx = r,
                              .health_start = health_start,
                              .launch = launch_ranks,
                              .not_launched = attempt_not_launched,
                              .start_failed = attempt_failed_to_start,
                              .prepare = prepare_attempt,
                              .now = attempt_now,
                              .timer_start = backoff_start,
                              .timer_stop = backoff_stop};
    /* attempt 0's health checks ran before (health_first) */
    ss_attempt_init(&r->att, &hooks, 1, &r->o->restart_cfg);
    return 0;
}

void run_parts_free(run_ctx *r)
{
    ss_aggregator_destroy(r->agg);
    r->agg = NULL;
    run_agg_free(r->aggregate);
    r->aggregate = NULL;
    free(r->ranks);
    free(r->hang_ranks);
    free(r->notes);
    r->ranks = NULL;
    r->hang_ranks = NULL;
    r->notes = NULL;
    ss_life_release(&r->life);
}

static int start(run_ctx *r, char *err, size_t errlen)
{
    if (ss_pg_is_uri(r->db_path)) {
        /* A team database: the run is recorded into the default store
         * (the spool) and copied there by its own thread (pg_pusher.h). */
        r->team_uri = r->db_path;
        r->db_path = NULL;
    }
    if (!r->db_path) {
        if (ss_store_default_path(r->default_db, sizeof r->default_db) < 0) {
            snprintf(err, errlen, "no HOME or XDG_DATA_HOME for the default "
                     "store; pass --db PATH");
            return -1;
        }
        r->db_path = r->default_db;
    }
    ss_store_config scfg;
    run_store_config(r->o, &scfg);
    char serr[256];
    r->store = ss_store_open(r->db_path, &scfg, 1, serr, sizeof serr);
    if (!r->store) {
        snprintf(err, errlen, "%s", serr);
        return -1;
    }
    int interrupted = ss_store_mark_interrupted(r->store);
    if (interrupted > 0)
        fprintf(stderr, "stepscope: note: %d earlier run%s of this store lost "
                "%s controller; marked interrupted\n", interrupted,
                interrupted == 1 ? "" : "s", interrupted == 1 ? "its" : "their");

    make_uuid(r->uuid);
    /* Before the run's row exists: a reader never sees it `running`
     * without a live lock holder. */
    if (ss_run_lock_take(&r->run_lock, r->db_path, r->uuid, err, errlen) != 0)
        return -1;
    random_bytes(r->token, sizeof r->token);
    ss_run_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.uuid, sizeof info.uuid, "%s", r->uuid);
    join_command(r->o->argv, info.command, sizeof info.command);
    if (r->o->name) {
        snprintf(info.name, sizeof info.name, "%s", r->o->name);
    } else {
        default_run_name(r->o->argv, info.name, sizeof info.name);
    }
    info.world_size = r->o->nprocs;
    info.started_at = ss_wall_now();
    gethostname(info.host, sizeof info.host - 1);
    ss_fingerprint_sources fsrc;
    ss_fingerprint_sources_default(&fsrc);
    ss_buf fingerprint = {0};
    ss_fingerprint_collect(&fingerprint, r->o->argv, info.command, r->o->nprocs, 1,
                           &fsrc);
    info.fingerprint = fingerprint.oom ? NULL : fingerprint.data;
    int begun = ss_store_begin_run(r->store, &info, &r->run_id, serr,
                                   sizeof serr);
    ss_buf_free(&fingerprint);
    if (begun != 0) {
        snprintf(err, errlen, "%s", serr);
        return -1;
    }
    ss_store_put_attempt(r->store, r->run_id, r->att.attempt, info.started_at);
    if (r->team_uri) {
        r->team = ss_pg_pusher_start(r->team_uri, r->db_path, r->uuid, err,
                                     errlen);
        if (!r->team)
            return -1;
        fprintf(stderr, "stepscope: recording into %s; the run is copied to "
                "the team database %s as it goes\n", r->db_path,
                r->team_uri);
    }
    if (health_first(r, err, errlen) != 0)
        return -1;
    if (start_http(r, err, errlen) != 0)
        return -1;

    if (r->o->log_dir) {
        snprintf(r->log_path, sizeof r->log_path, "%s", r->o->log_dir);
    } else if (ss_store_log_dir(r->db_path, r->run_id, r->log_path,
                                sizeof r->log_path) != 0) {
        snprintf(err, errlen, "no log directory for %s: %s", r->db_path,
                 strerror(errno));
        return -1;
    }

    if (ss_sockdir_create(r->sock_dir, sizeof r->sock_dir, err, errlen) != 0)
        return -1;
    snprintf(r->sock_path, sizeof r->sock_path, "%s/" SS_SOCKDIR_SOCKET,
             r->sock_dir);

    if (r->o->host_interval_ms) {
        r->host = ss_host_watch_start(&r->loop, r->o->nproc_local,
                                      r->o->host_interval_ms, "/proc");
        if (!r->host) {
            snprintf(err, errlen, "out of memory for %u ranks", r->o->nprocs);
            return -1;
        }
    }
    if (r->host || r->o->nnodes > 1)
        r->agg_cfg.host = (ss_host_provider){host_window, r};
    if (run_parts_init(r, err, errlen) != 0)
        return -1;
    for (uint32_t i = 0; i < r->o->nprocs; i++) {
        uv_timer_init(&r->loop, &r->ranks[i].linger);
        r->ranks[i].linger.data = (void *)(uintptr_t)i;
    }

    ss_ingest_config icfg;
    memset(&icfg, 0, sizeof icfg);
    icfg.unix_path = r->sock_path;
    memcpy(icfg.token, r->token, sizeof r->token);
    icfg.run_id = r->uuid;
    icfg.max_lead_steps = ss_aggregator_sure_window(&r->agg_cfg) / 2;
    ss_ingest_callbacks icb;
    run_ingest_callbacks(r, &icb);
    r->ingest = ss_ingest_start(&r->loop, &icfg, &icb, err, errlen);
    ss_profiler_set_ingest(r->profiler, r->ingest);
    if (!r->ingest || run_nodes_wire(r, err, errlen) != 0)
        return -1;

    char exe[PATH_MAX];
    if (ss_rank_env_self_exe(exe, sizeof exe, err, errlen) != 0 ||
        ss_rank_env_build(&r->rank_env, exe, r->sock_path, r->sock_dir,
                          r->token, r->uuid, r->o->auto_mode, err, errlen) != 0)
        return -1;
    if (r->o->numerics)
        ss_rank_env_set_numerics(&r->rank_env, r->o->numerics);
    ss_rank_env_set_replica(&r->rank_env, &r->o->replica); /* lengths checked */
    char host_name[256] = "localhost";
    gethostname(host_name, sizeof host_name - 1);
    ss_stack_service_config stcfg = {
        .exe = exe, .host = host_name, .stack_dir = r->sock_dir,
        .nprocs = r->o->nproc_local, .world = r->o->nprocs,
        .remote = run_nodes_stacks(r->nodes) ? ss_remote_stacks_fetch : NULL,
        .remote_ctx = run_nodes_stacks(r->nodes), .pid_of = rank_pid, .pid_ctx = r,
        .store = r->store, .run_id = r->run_id, .attempt = r->att.attempt};
    if (!r->stacks) {
        snprintf(err, errlen, "out of memory for the stack service");
        return -1;
    }
    if (ss_stack_service_start(r->stacks, &stcfg, err, errlen) != 0)
        return -1;

    run_faults_start(&r->faults);
    r->started = run_now(r);
    uv_timer_init(&r->loop, &r->restart_timer);
    r->restart_timer.data = r;
    uv_timer_init(&r->loop, &r->leave_timer);
    r->leave_timer.data = r;
    const char *ranks_word = r->o->nprocs == 1 ? "rank" : "ranks";
    run_event(r, "run_started", -1, "%u %s: %s", r->o->nprocs, ranks_word,
              info.command);
    if (run_faults_health_notes(&r->faults)[0])
        run_event(r, "health_check", -1, "node 0 passed: %s",
                  run_faults_health_notes(&r->faults));
    fprintf(stderr, "stepscope: run %" PRId64 " (%s): %u %s, store %s\n",
            r->run_id, info.name, r->o->nprocs, ranks_word, r->db_path);
    print_dashboard(r);
    return ss_attempt_begin(&r->att, err, errlen);
}

/* The job's exit status: node 0's launcher's on a single node; on
 * several, that of the first failure anywhere (a rank's, or 1 for a lost
 * node), else the first non-zero node status. */
static int job_status(const run_ctx *r)
{
    int local = r->hooks.exit_status(r->hooks.ctx);
    if (r->o->nnodes == 1)
        return local;
    if (r->first_failure_status >= 0)
        return r->first_failure_status;
    if (local != 0)
        return local;
    return run_nodes_status(r->nodes);
}

/* The shared secret of the agent links, on every node of a multi-node
 * run, before anything starts: without one node 0 opens no listener,
 * records no run and launches no rank, and every node says so the same
 * way.  Returns 0, 1 when the crypto library fails, or 2 (a usage error)
 * when there is no usable secret. */
static int load_secret(const ss_run_opts *o, link_secret *secret)
{
    if (link_auth_init() != 0) {
        fprintf(stderr, "stepscope run: the crypto library did not "
                "initialise\n");
        return 1;
    }
    char err[400];
    if (link_secret_load(o->token_file, getenv("STEPSCOPE_TOKEN"), secret,
                         err, sizeof err) != 0) {
        fprintf(stderr, "stepscope run: %s\n", err);
        return 2;
    }
    /* Out of core dumps while the secret is held (the whole run): it is
     * copied into the agent links, and it derives session keys, proofs
     * and hash states on stacks and heaps; a non-dumpable process keeps
     * all of them out of a core file, where marking each holder's pages
     * MADV_DONTDUMP would miss a copy.  The price: no core file from a
     * multi-node controller or agent, and a debugger of the same user
     * needs root to attach. */
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        fprintf(stderr, "stepscope run: prctl(PR_SET_DUMPABLE): %s; the "
                "shared secret may appear in a core dump\n", strerror(errno));
    return 0;
}

/* Sizes the open-file limit for this node's ranks before anything starts
 * (fd_budget.h): raises the soft limit, or refuses when even the hard one
 * is short of what the ranks need (their telemetry would be lost). */
static int check_open_files(const ss_run_opts *o)
{
    ss_fd_plan plan;
    char err[512];
    if (ss_fd_budget_apply(o->nproc_local, &plan, err, sizeof err) != 0) {
        fprintf(stderr, "stepscope run: %s\n", err);
        return -1;
    }
    if (plan.soft < plan.room)
        fprintf(stderr, "stepscope: note: the open-file limit is %" PRIu64
                " (the hard limit): enough for %" PRIu32 " rank%s, with "
                "little room for ranks with many threads or workers "
                "(about %" PRIu64 " would be comfortable)\n", plan.soft,
                plan.ranks, plan.ranks == 1 ? "" : "s", plan.room);
    return 0;
}

int ss_run_prepare(const ss_run_opts *o, link_secret *secret)
{
    int src = o->nnodes > 1 ? load_secret(o, secret) : 0;
    /* Nothing the run starts needs the shared secret: the ranks get their
     * own per-run token (rank_env.c), health checks nothing. */
    link_secret_env_scrub();
    if (src)
        return src;
    if (check_open_files(o) != 0)
        return 1;
    return 0;
}

/* ---- the real hooks (run_hooks.h): node 0's launcher, the loop's
 * timers and the monotonic clock ---- */

static ss_mono_ns real_now(void *ctx)
{
    (void)ctx;
    return ss_mono_now();
}

static int real_launch(void *ctx, const ss_launch_config *cfg,
                       const ss_launch_callbacks *cb, char *err,
                       size_t errlen)
{
    run_ctx *r = ctx;
    r->launcher = ss_launcher_start(&r->loop, cfg, cb, err, errlen);
    return r->launcher ? 0 : -1;
}

static void real_release(void *ctx)
{
    run_ctx *r = ctx;
    ss_launcher_destroy(r->launcher);
    r->launcher = NULL;
}

static void real_stop_ranks(void *ctx, int kill_now, const char *reason)
{
    run_ctx *r = ctx;
    if (kill_now)
        ss_launcher_kill_now(r->launcher, reason);
    else
        ss_launcher_terminate(r->launcher, reason);
}

static int real_rank_pid(void *ctx, uint32_t rank)
{
    run_ctx *r = ctx;
    return r->launcher ? ss_launcher_rank_pid(r->launcher, rank) : 0;
}

static void real_script_ended(void *ctx, uint32_t rank)
{
    ss_launcher_rank_script_ended(((run_ctx *)ctx)->launcher, rank);
}

static int real_exit_status(void *ctx)
{
    return ss_launcher_exit_status(((run_ctx *)ctx)->launcher);
}

static uint32_t real_left_behind(void *ctx)
{
    return ss_launcher_left_behind(((run_ctx *)ctx)->launcher);
}

static size_t real_failure_summary(void *ctx, char *out, size_t outlen)
{
    return ss_launcher_failure_summary(((run_ctx *)ctx)->launcher, out,
                                       outlen);
}

static int real_first_failed(void *ctx)
{
    ss_rank_failure f;
    if (!ss_launcher_first_failure(((run_ctx *)ctx)->launcher, &f))
        return -1;
    return (int)f.rank;
}

static void real_end_progress(void *ctx)
{
    ss_launcher_end_progress(((run_ctx *)ctx)->launcher);
}

static int real_oom_kill(void *ctx, uint32_t rank, char *out, size_t outlen)
{
    return ss_launcher_oom_kill(((run_ctx *)ctx)->launcher, rank, out,
                                outlen);
}

static int real_health_start(void *ctx, char *err, size_t errlen)
{
    run_ctx *r = ctx;
    return run_faults_health_start(&r->faults, err, errlen);
}

static void on_linger_timeout(uv_timer_t *t)
{
    run_linger_over(t->loop->data, (uint32_t)(uintptr_t)t->data);
}

static void real_linger(void *ctx, uint32_t rank, int start)
{
    run_ctx *r = ctx;
    if (start)
        uv_timer_start(&r->ranks[rank].linger, on_linger_timeout,
                       SS_LIFE_LINGER_MS, 0);
    else
        uv_timer_stop(&r->ranks[rank].linger);
}

static void on_backoff(uv_timer_t *t)
{
    run_ctx *r = t->data;
    ss_attempt_backoff_over(&r->att);
}

static void real_backoff_start(void *ctx, uint32_t delay_ms)
{
    run_ctx *r = ctx;
    /* The backoff counts from now, not from the loop's cached time of
     * this iteration (which may be older by the attempt's teardown). */
    uv_update_time(&r->loop);
    uv_timer_start(&r->restart_timer, on_backoff, delay_ms, 0);
}

static void real_backoff_stop(void *ctx)
{
    run_ctx *r = ctx;
    uv_timer_stop(&r->restart_timer);
}

static void real_end_loop(void *ctx)
{
    run_ctx *r = ctx;
    uv_timer_stop(&r->restart_timer);
    uv_timer_stop(&r->leave_timer);
    uv_stop(&r->loop);
}

int ss_run_controller(const ss_run_opts *o, const link_secret *secret)
{
    run_ctx *r = calloc(1, sizeof *r);
    if (!r)
        return 1;
    r->o = o;
    r->secret = secret;
    r->db_path = o->db_path;
    r->agg_cfg = o->agg_cfg;
    r->first_step = r->last_step = r->resumed_from = -1;
    r->first_failure_status = -1;
    r->hooks = (run_hooks){.ctx = r,
                           .now = real_now,
                           .launch = real_launch,
                           .release = real_release,
                           .stop_ranks = real_stop_ranks,
                           .rank_pid = real_rank_pid,
                           .script_ended = real_script_ended,
                           .exit_status = real_exit_status,
                           .left_behind = real_left_behind,
                           .failure_summary = real_failure_summary,
                           .first_failed = real_first_failed,
                           .oom_kill = real_oom_kill,
                           .end_progress = real_end_progress,
                           .health_start = real_health_start,
                           .linger = real_linger,
                           .backoff_start = real_backoff_start,
                           .backoff_stop = real_backoff_stop,
                           .end_loop = real_end_loop};
    run_faults_wire(r);
    uv_loop_init(&r->loop);
    r->loop.data = r;
    r->stacks = ss_stack_service_new(&r->loop);
    ss_recent_service_config rcfg = {r->o->nproc_local, r->o->nprocs,
                                     ask_recent, r, 0};
    r->recent = ss_recent_service_new(&r->loop, &rcfg);
    char err[512] = "";
    int status = 1;
    /* Signals first, so a Ctrl-C during start-up is not lost. */
    uv_signal_t *sigs[] = {&r->sig_int, &r->sig_term, &r->sig_hup};
    int signums[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&r->loop, sigs[i]);
        sigs[i]->data = r;
        uv_signal_start(sigs[i], on_signal, signums[i]);
    }
    signal(SIGPIPE, SIG_IGN);
    if (start(r, err, sizeof err) == 0) {
        uv_timer_init(&r->loop, &r->tick);
        r->tick.data = r;
        r->tick_at = run_now(r);
        uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
        uv_run(&r->loop, UV_RUN_DEFAULT);
        status = r->final_status;
        run_summary_end(r, status);
    } else {
        fprintf(stderr, "stepscope run: %s\n", err);
        int stopped = r->stopped_starting;
        if (r->store && r->run_id && (r->health_failed || stopped)) {
            ss_attempt_facts facts = {.attempt = r->att.attempt,
                                      .ended_at = ss_wall_now(),
                                      .first_step = -1, .last_step = -1,
                                      .resumed_from = -1};
            snprintf(facts.cause, sizeof facts.cause, "%s",
                     stopped ? "interrupted" : "health_check");
            ss_store_put_attempt_facts(r->store, r->run_id, &facts);
            store_failure(r);
        }
        if (stopped)
            status = 128 + stopped;
        if (r->store && r->run_id)
            ss_store_end_run(r->store, r->run_id, ss_wall_now(), status,
                             stopped ? "interrupted" : "failed_to_start", 0,
                             0);
    }
    /* Tear down: close everything on the loop, then let it finish. */
    if (r->launcher)
        ss_launcher_destroy(r->launcher);
    run_nodes_close(r->nodes);
    if (r->ingest)
        ss_ingest_close(r->ingest);
    ss_profiler_close(r->profiler);
    ss_host_watch_close(r->host);
    ss_stack_service_close(r->stacks);
    ss_recent_service_close(r->recent);
    uv_walk(&r->loop, close_walk, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    ss_http_live_file_remove(r->live_file);
    ss_http_stop(r->http);
    ss_profiler_free(r->profiler); /* no HTTP builder calls in any more */
    ss_live_destroy(r->live);
    ss_stack_service_free(r->stacks); /* the HTTP builders are gone */
    ss_recent_service_free(r->recent);
    run_parts_free(r);
    ss_host_watch_free(r->host); /* after the loop ran its close callbacks */
    ss_store_close(r->store);
    /* The last copy to the team database, with the run's end; the job's
     * exit status stays the job's, the line says where the run is. */
    ss_pg_pusher_finish(r->team, stderr);
    ss_run_lock_release(&r->run_lock); /* after the run's end is committed */
    ss_sockdir_remove(r->sock_dir);
    run_nodes_free(r->nodes);
    free(r);
    return status;
}
