/*
 * agent.c - the node agent of a multi-node run (agent.h).
 *
 * One libuv loop: the link to the controller (one link connection,
 * link_conn.h: its frames, MACs and bounded send queue), a unix socket
 * where the node's ranks connect (one channel per connection, bytes
 * forwarded both ways unchanged), the
 * launcher, the host watch, a heartbeat timer, a clock timer and the
 * signals.  Stages: connecting (retried until the join timeout), the
 * handshake, the first clock round, then running; the ranks start only
 * once the node has joined and its clock is known.
 *
 * Until JOIN_OK nothing the other end says is trusted: whoever answers
 * may be a process that took the controller's port, or a peer in the
 * middle.  So every failure of the join (no answer, a closed connection,
 * a bad proof, a JOIN_REJECT without a MAC, a protocol error) is retried,
 * backing off from RETRY_MS to RETRY_MAX_MS, and one deadline, the join
 * timeout, covers connecting and the handshake alike.  Only a JOIN_REJECT
 * that carries the session key's MAC is the controller's own word and
 * ends the agent at once (on a first join).  Text a peer sent is printed
 * with its control characters replaced (shown()).
 *
 * The ranks' connections travel as channels of the link
 * (agent_channels.h), which also tells each rank's HELLO and steps: each
 * STEP is the moment to sample the host and send that step's evidence
 * (LINK_HOST) before the record goes up.  STACKS_REQ is answered by
 * agent_stacks.h over this node's ranks; each attempt's health check and
 * launch go through attempt.h, the attempt's number being the
 * controller's (JOIN_OK, RESTART).  When JOIN_OK says the run aggregates
 * by node, each STEP is also folded into its step's node partial
 * (agent_fold.h, sent as NODE_PARTIAL), and once a second the ranks' held
 * STATUS frames go up in NODE_STATUS frames (agent_channels.h).  Each
 * STEP is also kept in its rank's latest rows (recent_rows.h), which
 * RECENT_REQ asks for.
 */
#include "agent.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "agent_channels.h"
#include "agent_fold.h"
#include "agent_stacks.h"
#include "attempt.h"
#include "clocks.h"
#include "clock_sync.h"
#include "health.h"
#include "host_watch.h"
#include "inject.h"
#include "launcher.h"
#include "link_conn.h"
#include "link_wire.h"
#include "private_fs.h"
#include "rank_env.h"
#include "recent_rows.h"
#include "sockdir.h"
#include "store.h"
#include "store_files.h"
#include "wire.h"

#define CLOCK_GAP_MS 5      /* between the exchanges of one round */
#define RETRY_MS 500        /* between attempts to reach the controller */
#define RETRY_MAX_MS 5000   /* the backoff after failed handshakes, at most */
#define BATCH_MS 1000       /* node mode: NODE_STATUS, and old partials out */
#define PARTIAL_MAX_AGE_MS 2000 /* a step's partial waits at most this */
/* A rank's failure goes to the controller this long after it was reaped,
 * with the ranks' exits seen meanwhile before it (see cb_rank_exit): past
 * the rest of the batch it was reaped in and its pipes' last bytes, short
 * of any other node's ranks failing on its loss (a rank's shutdown takes
 * longer), whose failures would otherwise reach the controller first. */
#define EXIT_HOLD_MS 10

enum { AG_CONNECTING, AG_HANDSHAKE, AG_SYNCING, AG_RUNNING, AG_ENDING };


typedef struct agent {
    const ss_agent_config *cfg;
    uv_loop_t loop;
    int stage;
    int status;        /* what ss_agent_main returns */
    char controller[300]; /* "host:port", for messages */
    struct sockaddr_storage ctl_addr;
    /* the link */
    ss_link_conn *conn;        /* NULL between connections */
    int keyed;                 /* the link's frames carry MACs */
    uv_connect_t connect_req;
    uv_timer_t retry, heartbeat, clock_timer, join_timer;
    uint64_t deadline_ms;      /* join deadline, loop time */
    uint64_t last_rx_ms;
    uint32_t retry_ms;         /* before the next attempt to join */
    uint32_t backoff_ms;       /* after the next failed handshake */
    char last_error[300];
    char said_error[300];      /* the join failure printed last */
    link_agent_hello hello;
    uint8_t key[LINK_KEY_SIZE];
    /* the run, from JOIN_OK */
    char uuid[LINK_MAX_STR + 1];
    uint8_t token[WIRE_TOKEN_SIZE];
    ss_attempt att;    /* the attempt the controller named, its checks */
    /* clocks */
    ss_clock_sync clock;
    uint32_t clock_sent; /* exchanges sent in this round */
    /* the ranks */
    uint32_t node;     /* this node's rank: the configured one, or the one
                          JOIN_OK gave (LINK_NODE_RANK_ANY until then) */
    uint32_t rank_base;
    char sock_dir[PATH_MAX];
    char sock_path[PATH_MAX];
    char log_dir[PATH_MAX];
    uv_pipe_t server;
    int server_open;
    ss_agent_channels *channels; /* the ranks' connections */
    ss_rank_env env;
    ss_launcher *launcher;
    ss_host_watch *host;
    int64_t *last_step;     /* per local rank, -1: none */
    uint8_t *stop_said;     /* per local rank, the LINK_STOP_* sent last */
    int ranks_done;
    int lost;               /* the controller was lost */
    int rejoining;          /* lost, ranks stopped: joining again */
    int relaunch;           /* RESTART came while the ranks still ran */
    int end_after;          /* END came while the ranks still ran */
    int node_status;        /* the node's status in the last attempt */
    uint32_t stop_requests;
    uv_signal_t sig_int, sig_term, sig_hup;
    /* injected stops: SIGCONT to a process group after a while */
    uv_timer_t cont[SS_INJECT_MAX];
    int cont_pid[SS_INJECT_MAX];
    ss_agent_stacks *stacks; /* created on the first STACKS_REQ */
    ss_recent_rows *recent;  /* the ranks' latest steps, made at the first
                                record or RECENT_REQ */
    /* --aggregate node (JOIN_OK): partials and batched STATUS */
    int node_mode;
    ss_agent_fold *fold;
    uv_timer_t batch_timer;
    /* rank exits held back with a failure among them (cb_rank_exit) */
    link_rank_exit *held_exits; /* cfg->nproc of them */
    uint32_t n_held;
    uv_timer_t exit_timer;
} agent;

static void say(const agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const agent *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (a->node == LINK_NODE_RANK_ANY)
        fprintf(stderr, "stepscope: agent: ");
    else
        fprintf(stderr, "stepscope: node %u: ", a->node);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void finish(agent *a);
static void lose_controller(agent *a, const char *why);

/* IN as it may be printed: every control character (C0, DEL, C1) and
 * every byte that is not UTF-8 becomes '?', so that a peer's text cannot
 * drive the terminal.  Returns OUT (N bytes, terminated). */
static const char *shown(const char *in, char *out, size_t n)
{
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)in;
    while (*p && o + 1 < n) {
        unsigned c = *p;
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f
                    : len == 3 ? c & 0x0f : c & 0x07;
        for (size_t i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80) {
                len = 0;
                break;
            }
            cp = cp << 6 | (p[i] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        int ok = len && cp >= least[len] && cp <= 0x10ffff &&
                 !(cp >= 0xd800 && cp <= 0xdfff) && cp >= 0x20 &&
                 !(cp >= 0x7f && cp <= 0x9f);
        if (!ok || o + len >= n) {
            out[o++] = '?';
            p += len ? len : 1;
            continue;
        }
        memcpy(out + o, p, len);
        o += len;
        p += len;
    }
    out[o] = '\0';
    return out;
}

/* ---- sending on the link ---- */

/* Queues F on the link.  Returns -1 when there is no link to send on, or
 * the link ends (a write failed, or the controller stopped reading and
 * the link's send queue is full): the loss is told through on_link_end,
 * on a later turn of the loop. */
static int send_frame(agent *a, const link_frame *f)
{
    if (!a->conn || a->lost)
        return -1;
    return ss_link_conn_send(a->conn, f);
}

/* ---- the ranks' connections (agent_channels.h) ---- */

static int send_channel_frame(void *ctx, const link_frame *f)
{
    return send_frame(ctx, f);
}

static void on_rank_hello(void *ctx, int64_t rank, uint32_t pid)
{
    agent *a = ctx;
    uint32_t local = (uint32_t)(rank - a->rank_base);
    if (a->host && local < a->cfg->nproc)
        ss_host_watch_rank_hello(a->host, local, (pid_t)pid);
}

/* Keeps RANK's record S among its latest rows (RECENT_REQ). */
static void keep_recent(agent *a, uint32_t rank, const wire_step *s,
                        const char *const *names)
{
    if (a->recent && !ss_recent_rows_holds(a->recent, rank)) {
        /* the node's ranks were renumbered (a rejoin) */
        ss_recent_rows_free(a->recent);
        a->recent = NULL;
    }
    if (!a->recent &&
        !(a->recent = ss_recent_rows_new(a->rank_base, a->cfg->nproc)))
        return;
    const char *pn[WIRE_MAX_ITEMS];
    int64_t durs[WIRE_MAX_ITEMS];
    for (uint32_t i = 0; i < s->n_phases; i++) {
        uint32_t id = s->phases[i].name_id;
        pn[i] = id <= WIRE_MAX_NAME_ID ? names[id] : NULL;
        durs[i] = s->phases[i].total_ns > INT64_MAX
                      ? INT64_MAX : (int64_t)s->phases[i].total_ns;
    }
    ss_recent_rows_add(a->recent, rank, a->att.attempt, s->step, s->begin_ns,
                       s->end_ns,
                       s->flags & WIRE_STEP_HAS_RSS ? (int64_t)s->rss_bytes
                                                    : SS_MISSING,
                       s->flags & WIRE_STEP_HAS_DEVICE
                           ? (int64_t)s->device_bytes : SS_MISSING,
                       s->n_phases, pn, durs);
}

/* What the host saw of the rank during the step it just reported; in
 * node mode the record is folded into its step's partial too. */
static void send_host_evidence(void *ctx, int64_t rank, const wire_step *s,
                               const char *const *names)
{
    agent *a = ctx;
    uint32_t local = (uint32_t)(rank - a->rank_base);
    if (local >= a->cfg->nproc)
        return;
    a->last_step[local] = (int64_t)s->step;
    keep_recent(a, (uint32_t)rank, s, names);
    if (a->fold)
        ss_agent_fold_add(a->fold, (uint32_t)rank, s, names,
                          uv_now(&a->loop));
    if (!a->host)
        return;
    ss_host_watch_step_done(a->host, local);
    link_frame f = {.type = LINK_HOST};
    if (ss_host_watch_window(a->host, local, s->begin_ns, s->end_ns,
                             &f.u.host.host) != 0)
        return;
    f.u.host.rank = (uint32_t)rank;
    f.u.host.step = s->step;
    send_frame(a, &f);
}

/* ---- node mode (--aggregate node) ---- */

static void send_partial(void *ctx, const ss_node_partial *p)
{
    link_frame f = {.type = LINK_NODE_PARTIAL};
    f.u.partial.p = p;
    send_frame(ctx, &f);
}

/* The ranks' held STATUS frames go up in NODE_STATUS frames. */
static void send_status_batch(agent *a)
{
    static uint8_t entries[LINK_MAX_PAYLOAD - 4];
    for (;;) {
        size_t len = 0;
        uint32_t n = ss_agent_channels_status_batch(a->channels, entries,
                                                    sizeof entries, &len);
        if (n == 0)
            return;
        link_frame f = {.type = LINK_NODE_STATUS};
        f.u.node_status = (link_node_status){n, (uint32_t)len, entries};
        if (send_frame(a, &f) != 0)
            return;
    }
}

static void on_batch_timer(uv_timer_t *t)
{
    agent *a = t->data;
    if (a->lost || a->stage != AG_RUNNING)
        return;
    send_status_batch(a);
    ss_agent_fold_expire(a->fold, uv_now(&a->loop), PARTIAL_MAX_AGE_MS);
}

/* JOIN_OK named node aggregation: from the first join on, the ranks'
 * records are folded here too.  Returns 0, or -1 out of memory. */
static int start_node_mode(agent *a)
{
    if (a->node_mode)
        return 0;
    a->fold = ss_agent_fold_new(a->rank_base, a->cfg->nproc, send_partial,
                                a);
    if (!a->fold)
        return -1;
    a->node_mode = 1;
    ss_agent_channels_node_mode(a->channels);
    uv_timer_start(&a->batch_timer, on_batch_timer, BATCH_MS, BATCH_MS);
    return 0;
}

/* A rank's connection closed after its last bytes: no step waits for it
 * (its exit may be seen before its last record is read). */
static void on_rank_gone(void *ctx, int64_t rank)
{
    agent *a = ctx;
    if (a->fold)
        ss_agent_fold_rank_gone(a->fold, (uint32_t)rank);
}

static void on_rank_connection(uv_stream_t *server, int status)
{
    agent *a = server->data;
    if (status >= 0)
        ss_agent_channels_accept(a->channels, server);
}

/* ---- the launcher ---- */

/* Sends the rank exits held back, in the order they were reaped, each
 * failure with the node's failure summary as it reads now. */
static void send_held_exits(agent *a)
{
    uv_timer_stop(&a->exit_timer);
    for (uint32_t i = 0; i < a->n_held; i++) {
        link_frame f = {.type = LINK_RANK_EXIT};
        f.u.rank_exit = a->held_exits[i];
        if (f.u.rank_exit.exit_code != 0 || f.u.rank_exit.term_signal != 0)
            ss_launcher_failure_summary(a->launcher, f.u.rank_exit.tail,
                                        sizeof f.u.rank_exit.tail);
        send_frame(a, &f);
    }
    a->n_held = 0;
}

static void on_exit_timer(uv_timer_t *t)
{
    send_held_exits(t->data);
}

/* A rank was reaped.  A failure is held back EXIT_HOLD_MS, and every exit
 * after it until then: ranks that died together are reaped in the order
 * they were started, and the rank that failed first is told only once the
 * others of the batch are seen (the launcher's first_failure); the
 * controller then stops the job. */
static void cb_rank_exit(void *ctx, uint32_t local, int64_t exit_code,
                         int term_signal)
{
    agent *a = ctx;
    ss_host_watch_rank_exited(a->host, local);
    int failed = exit_code != 0 || term_signal != 0;
    if (a->n_held < a->cfg->nproc && (failed || a->n_held > 0)) {
        a->held_exits[a->n_held++] = (link_rank_exit){
            .rank = a->rank_base + local, .exit_code = exit_code,
            .term_signal = term_signal};
        if (!uv_is_active((uv_handle_t *)&a->exit_timer))
            uv_timer_start(&a->exit_timer, on_exit_timer, EXIT_HOLD_MS, 0);
        return;
    }
    link_frame f = {.type = LINK_RANK_EXIT};
    f.u.rank_exit.rank = a->rank_base + local;
    f.u.rank_exit.exit_code = exit_code;
    f.u.rank_exit.term_signal = term_signal;
    send_frame(a, &f);
}

static void rejoin(agent *a);
static int launch_ranks(agent *a, char *err, size_t errlen);
static void check_then_start(agent *a);
static void relaunch(agent *a);

/* The job is over for this node: BYE, and the node's last status. */
static void say_bye(agent *a)
{
    link_frame bye = {.type = LINK_BYE};
    send_frame(a, &bye);
    a->status = a->node_status;
    finish(a);
}

/* Restarts are on and some remain: this agent outlives an attempt. */
static int restarts_remain(const agent *a)
{
    return a->att.attempt < a->cfg->max_restarts;
}

static void cb_all_exited(void *ctx)
{
    agent *a = ctx;
    send_held_exits(a);
    a->ranks_done = 1;
    int status = ss_launcher_exit_status(a->launcher);
    a->node_status = status;
    if (a->fold) { /* what waits goes before the node's end */
        ss_agent_fold_flush(a->fold);
        send_status_batch(a);
    }
    link_frame f = {.type = LINK_ALL_EXITED};
    f.u.all_exited.left_behind = ss_launcher_left_behind(a->launcher);
    f.u.all_exited.status = status;
    send_frame(a, &f);
    char why[4096];
    if (ss_launcher_failure_summary(a->launcher, why, sizeof why) > 0)
        say(a, "%s", why);
    if (a->lost && restarts_remain(a)) {
        rejoin(a);
        return;
    }
    if (a->cfg->max_restarts > 0 && !a->lost && !a->end_after) {
        /* The controller decides: RESTART or END. */
        if (a->relaunch)
            relaunch(a);
        return;
    }
    link_frame bye = {.type = LINK_BYE};
    send_frame(a, &bye);
    a->status = a->lost && status == 0 ? 1 : status;
    finish(a);
}

static int cb_last_step(void *ctx, uint32_t local, uint64_t *step)
{
    agent *a = ctx;
    if (local >= a->cfg->nproc || a->last_step[local] < 0)
        return 0;
    *step = (uint64_t)a->last_step[local];
    return 1;
}

/* ss_attempt_hooks.launch: joined, the clock known and the node checked:
 * the node is set up the first time, and its ranks start.  Returns 0, or
 * -1 with ERR. */
static int start_ranks(void *ctx, uint32_t attempt, char *err, size_t errlen)
{
    agent *a = ctx;
    (void)attempt;
    if (a->server_open) /* joined again: the node is set up */
        return launch_ranks(a, err, errlen);
    if (ss_sockdir_create(a->sock_dir, sizeof a->sock_dir, err, errlen) != 0)
        return -1;
    snprintf(a->sock_path, sizeof a->sock_path, "%s/" SS_SOCKDIR_SOCKET,
             a->sock_dir);
    uv_pipe_init(&a->loop, &a->server, 0);
    a->server.data = a;
    a->server_open = 1;
    int rc = uv_pipe_bind(&a->server, a->sock_path);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&a->server, 1024, on_rank_connection);
    if (rc < 0) {
        snprintf(err, errlen, "listen(%s): %s", a->sock_path,
                 uv_strerror(rc));
        return -1;
    }
    char exe[PATH_MAX];
    if (ss_rank_env_self_exe(exe, sizeof exe, err, errlen) != 0 ||
        ss_rank_env_build(&a->env, exe, a->sock_path, a->sock_dir, a->token,
                          a->uuid,
                          a->cfg->auto_mode, err, errlen) != 0)
        return -1;
    if (a->cfg->numerics)
        ss_rank_env_set_numerics(&a->env, a->cfg->numerics);
    if (ss_rank_env_set_replica(&a->env, a->cfg->replica) != 0) {
        snprintf(err, errlen, "--replica-groups is too long");
        return -1;
    }
    if (a->cfg->log_dir) {
        snprintf(a->log_dir, sizeof a->log_dir, "%s", a->cfg->log_dir);
    } else {
        char files[PATH_MAX];
        if (ss_store_files_dir(NULL, files, sizeof files) != 0) {
            snprintf(err, errlen, "no HOME or XDG_DATA_HOME for the "
                     "ranks' logs; pass --log-dir DIR");
            return -1;
        }
        snprintf(a->log_dir, sizeof a->log_dir, "%.*s/logs/run-%s-node%u",
                 PATH_MAX - 64, files, a->uuid, a->node);
    }
    if (a->cfg->host_interval_ms) {
        a->host = ss_host_watch_start(&a->loop, a->cfg->nproc,
                                      a->cfg->host_interval_ms, "/proc");
        if (!a->host) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return launch_ranks(a, err, errlen);
}

/* Launches the node's ranks as attempt a->att.attempt (the first time, or
 * again after RESTART or a new join). */
static int launch_ranks(agent *a, char *err, size_t errlen)
{
    char exe[PATH_MAX];
    if (ss_rank_env_self_exe(exe, sizeof exe, err, errlen) != 0)
        return -1;
    ss_launcher_destroy(a->launcher);
    a->launcher = NULL;
    a->ranks_done = a->relaunch = 0;
    for (uint32_t i = 0; i < a->cfg->nproc; i++) {
        a->last_step[i] = -1;
        a->stop_said[i] = LINK_STOP_RUNNING;
    }
    if (a->fold)
        ss_agent_fold_reset(a->fold);
    ss_launch_config lcfg;
    ss_launch_config_defaults(&lcfg);
    lcfg.nprocs = a->cfg->nproc;
    lcfg.rank_base = a->rank_base;
    lcfg.world_size = a->cfg->nnodes * a->cfg->nproc;
    lcfg.node_rank = a->node;
    lcfg.nnodes = a->cfg->nnodes;
    lcfg.master_addr = a->cfg->master_addr;
    lcfg.master_port = a->cfg->master_port;
    lcfg.argv = a->cfg->argv;
    lcfg.exec_shim = exe;
    lcfg.env = a->env.env;
    lcfg.run_id = a->uuid;
    lcfg.log_dir = a->log_dir;
    lcfg.grace_ms = a->cfg->grace_ms;
    lcfg.attempt = a->att.attempt;
    lcfg.max_restarts = a->cfg->max_restarts;
    lcfg.echo = !a->cfg->quiet;
    lcfg.echo_mask = a->cfg->echo_mask;
    lcfg.role = a->cfg->role;
    ss_launch_callbacks lcb = {a, cb_rank_exit, cb_all_exited, cb_last_step};
    a->launcher = ss_launcher_start(&a->loop, &lcfg, &lcb, err, errlen);
    if (!a->launcher)
        return -1;
    for (uint32_t i = 0; i < a->cfg->nproc; i++) {
        int pid = ss_launcher_rank_pid(a->launcher, i);
        ss_host_watch_rank(a->host, i, pid);
        link_frame f = {.type = LINK_RANK_STARTED};
        f.u.rank_started = (link_rank_started){a->rank_base + i,
                                               (uint32_t)pid};
        send_frame(a, &f);
    }
    a->stage = AG_RUNNING;
    if (!a->cfg->quiet)
        say(a, "ranks %u-%u started (run %s, attempt %u, logs %s)",
            a->rank_base, a->rank_base + a->cfg->nproc - 1, a->uuid,
            a->att.attempt, a->log_dir);
    return 0;
}

/* ss_attempt_hooks.start_failed: the node's ranks could not start. */
static void cannot_start(void *ctx, uint32_t attempt, const char *err)
{
    agent *a = ctx;
    (void)attempt;
    say(a, "cannot start this node's ranks: %s", err);
    a->status = 1;
    finish(a);
}

/* ---- health checks and injected faults ---- */

/* The node's health check is done: HEALTH to the controller, then the
 * ranks, or on a failure no rank (not_launched). */
static void on_health_done(void *ctx, const ss_health_result *res)
{
    agent *a = ctx;
    link_frame f = {.type = LINK_HEALTH};
    f.u.health.ok = (uint8_t)(res->ok != 0);
    snprintf(f.u.health.check, sizeof f.u.health.check, "%s", res->check);
    snprintf(f.u.health.output, sizeof f.u.health.output, "%s",
             res->ok ? res->notes : res->output);
    send_frame(a, &f);
    if (a->lost || a->stage < AG_SYNCING || a->stage == AG_ENDING) {
        /* stopped or lost meanwhile */
        ss_attempt_health_done(&a->att, SS_ATTEMPT_ABANDONED);
        return;
    }
    if (!res->ok)
        say(a, "the health check '%s' failed; no rank started:\n%s",
            res->check, res->output);
    ss_attempt_health_done(&a->att, res->ok ? SS_ATTEMPT_LAUNCH
                                            : SS_ATTEMPT_NO_LAUNCH);
}

/* ss_attempt_hooks.not_launched: the node failed its health check: no
 * rank, ALL_EXITED and BYE with status 1. */
static void health_failed(void *ctx, uint32_t attempt)
{
    agent *a = ctx;
    (void)attempt;
    link_frame all = {.type = LINK_ALL_EXITED};
    all.u.all_exited.status = 1;
    send_frame(a, &all);
    link_frame bye = {.type = LINK_BYE};
    send_frame(a, &bye);
    a->status = 1;
    finish(a);
}

/* ss_attempt_hooks.health_start: the node's check on the agent's loop; a
 * check that cannot start is a failed one. */
static int health_start(void *ctx, uint32_t attempt, char *err,
                        size_t errlen)
{
    agent *a = ctx;
    (void)attempt;
    if (ss_health_start(&a->loop, a->cfg->health, on_health_done, a, err,
                        errlen) != 0) {
        ss_health_result res;
        memset(&res, 0, sizeof res);
        snprintf(res.check, sizeof res.check, "command");
        snprintf(res.output, sizeof res.output, "%s", err);
        on_health_done(a, &res);
    }
    return 0;
}

/* Joined and the clock is known, or RESTART came and the ranks of the
 * attempt before have exited: the health check, then the ranks. */
static void check_then_start(agent *a)
{
    char err[512] = "";
    if (ss_attempt_begin(&a->att, err, sizeof err) != 0)
        cannot_start(a, a->att.attempt, err);
}

static void on_cont(uv_timer_t *t)
{
    agent *a = t->data;
    int i = (int)(t - a->cont);
    if (a->cont_pid[i] > 0)
        kill(-a->cont_pid[i], SIGCONT);
    a->cont_pid[i] = 0;
}

/* INJECT: the signal to one of this node's ranks' process group. */
static void on_inject(agent *a, const link_inject *x)
{
    if (!a->launcher || x->rank < a->rank_base ||
        x->rank - a->rank_base >= a->cfg->nproc)
        return;
    int pid = ss_launcher_rank_pid(a->launcher, x->rank - a->rank_base);
    if (pid <= 0 || kill(-pid, x->signal) != 0)
        return;
    if (!a->cfg->quiet)
        say(a, "injected %s into rank %u%s", x->signal == SIGKILL ? "SIGKILL"
            : "SIGSTOP", x->rank, x->duration_ms ? " for a while" : "");
    if (x->signal != SIGSTOP || !x->duration_ms)
        return;
    for (int i = 0; i < SS_INJECT_MAX; i++)
        if (!a->cont_pid[i]) {
            a->cont_pid[i] = pid;
            uv_timer_start(&a->cont[i], on_cont, x->duration_ms, 0);
            return;
        }
}

/* ---- stacks on request (agent_stacks.h) ---- */

static int send_stacks_frame(void *ctx, const link_frame *f)
{
    agent *a = ctx;
    if (a->stage == AG_ENDING)
        return -1;
    return send_frame(a, f);
}

static pid_t rank_pid(void *ctx, uint32_t local)
{
    agent *a = ctx;
    return ss_launcher_rank_pid(a->launcher, local);
}

/* STACKS_REQ: this node's ranks' stacks, collected within the deadline. */
static void on_stacks_req(agent *a, const link_stacks_req *q)
{
    if (!a->stacks) {
        ss_agent_stacks_config sc = {&a->loop, a->hello.host, a->rank_base,
                                     a->cfg->nproc, a->sock_dir, a,
                                     send_stacks_frame, rank_pid};
        a->stacks = ss_agent_stacks_new(&sc);
        if (!a->stacks)
            return; /* out of memory: the controller's deadline answers */
    }
    if (!a->launcher)
        ss_agent_stacks_refuse(a->stacks, q,
                               "the node's ranks have not started");
    else
        ss_agent_stacks_request(a->stacks, q);
}

/* RECENT_REQ: a rank's latest rows, or why there are none. */
static void on_recent_req(agent *a, const link_recent_req *q)
{
    ss_buf b = {0};
    if (!a->recent)
        a->recent = ss_recent_rows_new(a->rank_base, a->cfg->nproc);
    if (ss_recent_rows_json(a->recent, q->rank, q->steps, &b) != 0) {
        ss_buf_reset(&b);
        ss_buf_printf(&b, "{\"rank\":%u,\"error\":", q->rank);
        ss_buf_json_str(&b, a->recent ? "the rank is not one of this node's"
                                      : "out of memory");
        ss_buf_puts(&b, "}");
    }
    if (!b.oom)
        link_send_parts(LINK_RECENT_PART, q->request_id, q->rank, b.data, b.len,
                        send_stacks_frame, a);
    ss_buf_free(&b);
}

/* ---- clocks ---- */

static void on_clock_timer(uv_timer_t *t)
{
    agent *a = t->data;
    if (a->clock_sent >= SS_CLOCK_ROUND) {
        /* a new round */
        a->clock_sent = 0;
    }
    link_frame f = {.type = LINK_TIME_REQ};
    f.u.time_req.t1 = ss_mono_now();
    a->clock_sent++;
    send_frame(a, &f);
    if (a->clock_sent < SS_CLOCK_ROUND)
        uv_timer_start(&a->clock_timer, on_clock_timer, CLOCK_GAP_MS, 0);
}

static void on_time_resp(agent *a, const link_time_resp *r)
{
    int64_t t4 = ss_mono_now();
    if (ss_clock_sync_add(&a->clock, r->t1, r->t2, r->t3, t4) != 1)
        return;
    ss_clock_estimate e;
    if (ss_clock_sync_estimate(&a->clock, t4, &e) != 0)
        return;
    link_frame f = {.type = LINK_CLOCK};
    f.u.clock = (link_clock){e.offset_ns, e.bound_ns, e.rtt_ns, e.samples};
    send_frame(a, &f);
    uv_timer_start(&a->clock_timer, on_clock_timer, SS_AGENT_CLOCK_PERIOD_MS,
                   0);
    if (a->stage == AG_SYNCING) {
        if (!a->cfg->quiet)
            say(a, "joined %s; clock offset %+.3f ms (± %.3f ms)",
                a->controller, e.offset_ns / 1e6, e.bound_ns / 1e6);
        if (!a->att.health_pending)
            check_then_start(a);
    }
}

/* ---- the link ---- */

static void on_join_ok(agent *a, const link_join_ok *j)
{
    uint32_t want = a->cfg->nnodes * a->cfg->nproc;
    if (j->world_size != want) {
        say(a, "the controller runs %u ranks, this node expects %u "
            "(--nnodes %u × -n %u): use the same -n and --nnodes on every "
            "node", j->world_size, want, a->cfg->nnodes, a->cfg->nproc);
        a->status = 1;
        finish(a);
        return;
    }
    if (j->node_rank == 0 || j->node_rank >= a->cfg->nnodes ||
        (a->node != LINK_NODE_RANK_ANY && j->node_rank != a->node)) {
        say(a, "the controller numbered this node %u, which is not %s",
            j->node_rank, a->node != LINK_NODE_RANK_ANY
                              ? "the node rank it joined as"
                              : "one of its agents' (1 to nnodes - 1)");
        a->status = 1;
        finish(a);
        return;
    }
    if (a->node == LINK_NODE_RANK_ANY) {
        /* numbered as it joined (torchrun's c10d rendezvous): its ranks
         * are that node's from now on, and a join again says so */
        a->node = a->hello.node_rank = j->node_rank;
        a->rank_base = a->node * a->cfg->nproc;
        if (!a->cfg->quiet)
            say(a, "numbered by the controller as it joined");
    }
    uv_timer_stop(&a->join_timer);
    a->backoff_ms = RETRY_MS;
    if (a->rejoining && strcmp(a->uuid, j->run_uuid) != 0) {
        char uuid[LINK_MAX_STR + 1];
        say(a, "the controller at %s now runs another run (%s, not %s); "
            "this node does not join it", a->controller,
            shown(j->run_uuid, uuid, sizeof uuid), a->uuid);
        a->status = 1;
        finish(a);
        return;
    }
    if (j->aggregate == LINK_AGGREGATE_NODE && start_node_mode(a) != 0) {
        say(a, "out of memory");
        a->status = 1;
        finish(a);
        return;
    }
    a->rejoining = 0;
    snprintf(a->uuid, sizeof a->uuid, "%s", j->run_uuid);
    link_auth_seal_token(a->key, j->sealed_token, a->token);
    ss_attempt_set(&a->att, j->attempt);
    a->stage = AG_SYNCING;
    ss_clock_sync_init(&a->clock);
    a->clock_sent = 0;
    on_clock_timer(&a->clock_timer);
}

static void on_challenge(agent *a, const link_challenge *c)
{
    uint8_t want[LINK_PROOF_SIZE];
    link_auth_controller_proof(a->cfg->secret, &a->hello, c->nonce, want);
    if (!link_auth_proof_equal(want, c->proof)) {
        lose_controller(a, "it did not prove it knows the run's secret "
                        "(another --token-file or STEPSCOPE_TOKEN, or not "
                        "this run's controller)");
        return;
    }
    link_frame f = {.type = LINK_PROOF};
    link_auth_agent_proof(a->cfg->secret, &a->hello, c->nonce, f.u.proof.proof);
    send_frame(a, &f);
    link_auth_session_key(a->cfg->secret, &a->hello, c->nonce, a->key);
    ss_link_conn_keyed(a->conn, a->key);
    a->keyed = 1;
}

/* The ranks of the attempt before have all exited; RESTART came.  Their
 * launcher goes first: its SIGCHLD handler reaps every exited child
 * outside the ranks' groups, the health check's command among them, whose
 * exit the loop would then never see.  Then the check, then the ranks. */
static void relaunch(agent *a)
{
    ss_launcher_destroy(a->launcher);
    a->launcher = NULL;
    check_then_start(a);
}

/* RESTART: the ranks run again as ATTEMPT, once the ones running now
 * (if any) have been stopped. */
static void on_restart(agent *a, uint32_t attempt)
{
    if (attempt <= a->att.attempt || a->cfg->max_restarts == 0) {
        char why[160];
        snprintf(why, sizeof why, "RESTART to attempt %u after attempt %u "
                 "(--max-restarts %u here)", attempt, a->att.attempt,
                 a->cfg->max_restarts);
        lose_controller(a, why);
        return;
    }
    ss_attempt_set(&a->att, attempt);
    if (!a->cfg->quiet)
        say(a, "the job restarts: attempt %u", attempt);
    if (a->launcher && !a->ranks_done) {
        a->relaunch = 1;
        ss_launcher_terminate(a->launcher, "the job restarts");
        return;
    }
    relaunch(a);
}

static void on_link_frame(void *ctx, const link_frame *f)
{
    agent *a = ctx;
    if (a->stage < AG_HANDSHAKE || a->stage == AG_ENDING || a->lost)
        return;
    a->last_rx_ms = uv_now(&a->loop);
    switch (f->type) {
    case LINK_CHALLENGE:
        on_challenge(a, &f->u.challenge);
        return;
    case LINK_JOIN_OK:
        on_join_ok(a, &f->u.join_ok);
        return;
    case LINK_JOIN_REJECT: {
        char reason[LINK_MAX_STR + 1], why[LINK_MAX_STR + 64];
        shown(f->u.join_reject.reason, reason, sizeof reason);
        if (!a->keyed) {
            /* Before any proof: anyone could have sent it. */
            snprintf(why, sizeof why, "refused before proving it knows the "
                     "run's secret: %s", reason);
            lose_controller(a, why);
            return;
        }
        if (a->rejoining) {
            /* The controller may still be ending the attempt this node
             * was lost from: try again until the join timeout. */
            snprintf(why, sizeof why, "refused: %s", reason);
            lose_controller(a, why);
            return;
        }
        say(a, "the controller at %s refused this node: %s", a->controller,
            reason);
        a->status = 1;
        finish(a);
        return;
    }
    case LINK_DATA:
        ss_agent_channels_to_rank(a->channels, &f->u.data);
        return;
    case LINK_CLOSE:
        ss_agent_channels_closed(a->channels, f->u.channel.channel);
        return;
    case LINK_TIME_RESP:
        on_time_resp(a, &f->u.time_resp);
        return;
    case LINK_HEARTBEAT:
        return;
    case LINK_RESTART:
        on_restart(a, f->u.restart.attempt);
        return;
    case LINK_END:
        /* No attempt follows: the job is over. */
        if (a->launcher && !a->ranks_done) {
            a->end_after = 1;
            ss_launcher_terminate(a->launcher, "the job is over");
            return;
        }
        say_bye(a);
        return;
    case LINK_INJECT:
        on_inject(a, &f->u.inject);
        return;
    case LINK_STACKS_REQ:
        on_stacks_req(a, &f->u.stacks_req);
        return;
    case LINK_RECENT_REQ:
        on_recent_req(a, &f->u.recent_req);
        return;
    case LINK_STOP:
        if (a->ranks_done) {
            return; /* already stopped; RESTART or END follows */
        } else if (!a->launcher) {
            a->status = 1;
            finish(a);
        } else {
            char reason[LINK_MAX_STR + 1];
            shown(f->u.stop.reason, reason, sizeof reason);
            if (f->u.stop.kill_now)
                ss_launcher_kill_now(a->launcher, reason);
            else
                ss_launcher_terminate(a->launcher, reason);
        }
        return;
    default:
        return;
    }
}

/* The link ended on its own: closed, a protocol error, a failed write,
 * or the controller stopped reading what this node sends. */
static void on_link_end(void *ctx, ss_link_end end, const char *why)
{
    (void)end;
    lose_controller(ctx, why);
}

/* Tells the controller which of the node's ranks a stop signal, a tracer
 * or a freezer holds now, for each whose state changed since it was last told
 * (on every heartbeat): a remote rank gone silent is then said to be
 * stopped in a hang finding, as a rank of the controller's node is. */
static void say_rank_stops(agent *a)
{
    if (!a->host || a->stage != AG_RUNNING)
        return;
    ss_mono_ns now = ss_mono_now();
    for (uint32_t i = 0; i < a->cfg->nproc; i++) {
        ss_stop_kind kind;
        ss_dur_ns d = ss_host_watch_stopped_for(a->host, i, now, &kind);
        uint8_t state = !d                         ? LINK_STOP_RUNNING
                      : kind == SS_STOP_TRACER  ? LINK_STOP_TRACED
                      : kind == SS_STOP_FREEZER ? LINK_STOP_FROZEN
                                                : LINK_STOP_SIGNAL;
        if (state == a->stop_said[i])
            continue;
        uint64_t ms = state == LINK_STOP_RUNNING ? 0 : (uint64_t)d / 1000000;
        link_frame f = {.type = LINK_RANK_STOP};
        f.u.rank_stop = (link_rank_stop){
            a->rank_base + i, state,
            (uint32_t)(ms > UINT32_MAX ? UINT32_MAX : ms)};
        if (send_frame(a, &f) != 0)
            return;
        a->stop_said[i] = state;
    }
}

static void on_heartbeat(uv_timer_t *t)
{
    agent *a = t->data;
    if (a->lost || a->stage < AG_SYNCING)
        return;
    uint64_t silent = uv_now(&a->loop) - a->last_rx_ms;
    uint32_t limit = a->cfg->heartbeat_timeout_ms;
    if (silent >= limit) {
        char why[96];
        snprintf(why, sizeof why, "no heartbeat for %.1f s (timeout %.1f s)",
                 silent / 1000.0, limit / 1000.0);
        lose_controller(a, why);
        return;
    }
    link_frame f = {.type = LINK_HEARTBEAT};
    send_frame(a, &f);
    say_rank_stops(a);
}

static void try_connect(agent *a);

static void on_retry(uv_timer_t *t)
{
    try_connect(t->data);
}

/* The join deadline passed before JOIN_OK: whatever is under way (a
 * connection, a handshake, a wait to retry) ends with it. */
static void give_up_joining(agent *a)
{
    if (a->stage == AG_ENDING)
        return;
    say(a, "could not join the controller at %s within %.0f s: %s",
        a->controller, a->cfg->join_timeout_ms / 1000.0, a->last_error);
    a->status = 1;
    finish(a); /* the loop's handles, the link's too, are closed after */
}

static void on_join_timer(uv_timer_t *t)
{
    agent *a = t->data;
    if (a->stage < AG_SYNCING)
        give_up_joining(a);
}

/* No connection: the next attempt to join after retry_ms, or none past
 * the join deadline. */
static void schedule_retry(agent *a)
{
    if (a->stage == AG_ENDING)
        return;
    uint64_t now = uv_now(&a->loop);
    if (now >= a->deadline_ms) {
        give_up_joining(a);
        return;
    }
    uint64_t wait = a->retry_ms;
    if (wait > a->deadline_ms - now)
        wait = a->deadline_ms - now;
    uv_timer_start(&a->retry, on_retry, wait, 0);
}

/* The link's connection is closed and freed.  While joining, the next
 * attempt follows; a lost controller's connection is retried by rejoin()
 * once the ranks have stopped. */
static void on_link_closed(void *ctx)
{
    agent *a = ctx;
    a->conn = NULL;
    if (a->stage == AG_ENDING || a->lost)
        return;
    schedule_retry(a);
}

static void on_connected(uv_connect_t *req, int status)
{
    agent *a = req->data;
    if (status == UV_ECANCELED || a->stage == AG_ENDING)
        return; /* the handle is being closed */
    if (status < 0) {
        a->retry_ms = RETRY_MS;
        snprintf(a->last_error, sizeof a->last_error, "%s",
                 uv_strerror(status));
        ss_link_conn_close(a->conn, 0);
        return;
    }
    uv_tcp_nodelay(ss_link_conn_tcp(a->conn), 1);
    a->stage = AG_HANDSHAKE;
    a->last_rx_ms = uv_now(&a->loop);
    link_random(a->hello.nonce, sizeof a->hello.nonce);
    link_frame f = {.type = LINK_AGENT_HELLO};
    f.u.hello = a->hello;
    if (ss_link_conn_start(a->conn) == 0)
        send_frame(a, &f);
}

static void try_connect(agent *a)
{
    if (a->stage == AG_ENDING)
        return;
    ss_link_conn_config ccfg = {.sends = LINK_FROM_AGENT};
    ss_link_conn_callbacks ccb = {a, on_link_frame, on_link_end,
                                  on_link_closed};
    a->conn = ss_link_conn_new(&a->loop, &ccfg, &ccb);
    a->keyed = 0;
    a->retry_ms = RETRY_MS;
    if (!a->conn) {
        snprintf(a->last_error, sizeof a->last_error, "out of memory");
        schedule_retry(a);
        return;
    }
    a->connect_req.data = a;
    int rc = uv_tcp_connect(&a->connect_req, ss_link_conn_tcp(a->conn),
                            (struct sockaddr *)&a->ctl_addr, on_connected);
    if (rc < 0) {
        snprintf(a->last_error, sizeof a->last_error, "%s", uv_strerror(rc));
        ss_link_conn_close(a->conn, 0);
    }
}

/* The controller is gone: this node's ranks are stopped, then the agent
 * ends with a failure. */
static void lose_controller(agent *a, const char *why)
{
    if (a->lost || a->stage == AG_ENDING)
        return;
    if (a->stage < AG_SYNCING) {
        /* Still joining, and nothing authenticated said no: whoever
         * answered may not be the controller.  Retried, backing off,
         * until the join deadline; each new reason is said once. */
        snprintf(a->last_error, sizeof a->last_error, "%s", why);
        if (strcmp(a->said_error, why) != 0) {
            snprintf(a->said_error, sizeof a->said_error, "%s", why);
            uint64_t now = uv_now(&a->loop);
            say(a, "the controller at %s did not let this node join: %s; "
                "trying again for %.0f s more", a->controller, why,
                a->deadline_ms > now ? (a->deadline_ms - now) / 1000.0 : 0);
        }
        a->retry_ms = a->backoff_ms;
        a->backoff_ms = a->backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS
                                                         : a->backoff_ms * 2;
        a->stage = AG_CONNECTING;
        ss_link_conn_close(a->conn, 0); /* on_link_closed retries */
        return;
    }
    a->lost = 1;
    say(a, "lost the controller at %s: %s; stopping this node's ranks%s",
        a->controller, why,
        restarts_remain(a) ? ", then joining again" : "");
    /* The connection stays until rejoin() or the end; what arrives on it
     * meanwhile is dropped (on_link_frame), nothing more is sent. */
    if (a->launcher && !a->ranks_done) {
        char reason[256];
        snprintf(reason, sizeof reason, "the controller was lost (%s)", why);
        ss_launcher_terminate(a->launcher, reason);
    } else if (restarts_remain(a)) {
        rejoin(a);
    } else {
        a->status = 1;
        finish(a);
    }
}

/* The ranks have stopped after the controller was lost: join again, as
 * at the start, until the join timeout. */
static void rejoin(agent *a)
{
    a->lost = 0;
    a->rejoining = 1;
    a->stage = AG_CONNECTING;
    uv_timer_stop(&a->clock_timer);
    a->deadline_ms = uv_now(&a->loop) + a->cfg->join_timeout_ms;
    a->retry_ms = RETRY_MS;
    a->backoff_ms = RETRY_MS;
    a->said_error[0] = '\0';
    uv_timer_start(&a->join_timer, on_join_timer, a->cfg->join_timeout_ms, 0);
    if (!a->cfg->quiet)
        say(a, "joining the controller at %s again (for %.0f s)",
            a->controller, a->cfg->join_timeout_ms / 1000.0);
    if (a->conn)
        ss_link_conn_close(a->conn, 0); /* on_link_closed retries */
    else
        schedule_retry(a);
}

/* Ends the loop: everything still open is closed. */
static void finish(agent *a)
{
    if (a->stage == AG_ENDING)
        return;
    a->stage = AG_ENDING;
    uv_stop(&a->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
    agent *a = h->data;
    a->stop_requests++;
    char why[64];
    if (a->node == LINK_NODE_RANK_ANY)
        snprintf(why, sizeof why, "stopped by %s", strsignal(signum));
    else
        snprintf(why, sizeof why, "stopped by %s on node %u",
                 strsignal(signum), a->node);
    if (!a->launcher || a->ranks_done) {
        a->status = 128 + signum;
        finish(a);
    } else if (a->stop_requests == 1) {
        say(a, "%s: stopping this node's ranks (again to kill now)",
            strsignal(signum));
        ss_launcher_terminate(a->launcher, why);
    } else {
        ss_launcher_kill_now(a->launcher, why);
    }
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Resolves the controller's address (a host name from Slurm, say). */
static int resolve(agent *a)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)a->cfg->controller_port);
    int rc = getaddrinfo(a->cfg->master_addr, port, &hints, &res);
    if (rc != 0 || !res) {
        say(a, "cannot resolve the master address '%s': %s",
            a->cfg->master_addr, gai_strerror(rc));
        return -1;
    }
    memcpy(&a->ctl_addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int ss_agent_main(const ss_agent_config *cfg)
{
    agent *a = calloc(1, sizeof *a);
    int64_t *last = calloc(cfg->nproc ? cfg->nproc : 1, sizeof *last);
    link_rank_exit *held = calloc(cfg->nproc ? cfg->nproc : 1, sizeof *held);
    uint8_t *stop_said = calloc(cfg->nproc ? cfg->nproc : 1, 1);
    if (!a || !last || !held || !stop_said) {
        free(a);
        free(last);
        free(held);
        free(stop_said);
        fprintf(stderr, "stepscope: out of memory\n");
        return 1;
    }
    ss_agent_config c = *cfg;
    if (!c.heartbeat_ms)
        c.heartbeat_ms = 1000;
    if (!c.heartbeat_timeout_ms)
        c.heartbeat_timeout_ms = 10000;
    a->cfg = &c;
    a->status = 1;
    ss_attempt_hooks hooks = {.ctx = a,
                              .health_start = c.health ? health_start : NULL,
                              .launch = start_ranks,
                              .not_launched = health_failed,
                              .start_failed = cannot_start};
    /* every attempt's checks run here; the controller decides restarts */
    ss_attempt_init(&a->att, &hooks, 0, NULL);
    ss_agent_channels_config chc = {&a->loop, a->token, a->uuid, a,
                                    send_channel_frame, on_rank_hello,
                                    send_host_evidence, on_rank_gone};
    a->last_step = last;
    a->held_exits = held;
    a->stop_said = stop_said;
    for (uint32_t i = 0; i < c.nproc; i++)
        last[i] = -1;
    a->node = c.node_rank;
    a->rank_base = c.node_rank == LINK_NODE_RANK_ANY ? 0
                                                     : c.node_rank * c.nproc;
    snprintf(a->controller, sizeof a->controller, "%s:%u", c.master_addr,
             (unsigned)c.controller_port);
    a->hello.version = LINK_VERSION;
    a->hello.node_rank = c.node_rank;
    a->hello.nnodes = c.nnodes;
    a->hello.nproc_per_node = c.nproc;
    snprintf(a->hello.job_id, sizeof a->hello.job_id, "%s", c.job_id);
    gethostname(a->hello.host, sizeof a->hello.host - 1);
    snprintf(a->last_error, sizeof a->last_error, "no answer");
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&a->loop);
    a->loop.data = a;
    a->channels = ss_agent_channels_new(&chc);
    uv_signal_t *sigs[] = {&a->sig_int, &a->sig_term, &a->sig_hup};
    int signums[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&a->loop, sigs[i]);
        sigs[i]->data = a;
        uv_signal_start(sigs[i], on_signal, signums[i]);
    }
    uv_timer_init(&a->loop, &a->retry);
    uv_timer_init(&a->loop, &a->heartbeat);
    uv_timer_init(&a->loop, &a->clock_timer);
    uv_timer_init(&a->loop, &a->join_timer);
    uv_timer_init(&a->loop, &a->batch_timer);
    a->batch_timer.data = a;
    uv_timer_init(&a->loop, &a->exit_timer);
    a->exit_timer.data = a;
    for (int i = 0; i < SS_INJECT_MAX; i++) {
        uv_timer_init(&a->loop, &a->cont[i]);
        a->cont[i].data = a;
    }
    a->retry.data = a->heartbeat.data = a->clock_timer.data = a;
    a->join_timer.data = a;
    a->retry_ms = a->backoff_ms = RETRY_MS;
    if (!a->channels) {
        say(a, "out of memory");
    } else if (link_auth_init() != 0) {
        say(a, "the crypto library did not initialise");
    } else if (resolve(a) == 0) {
        if (!c.quiet && a->node == LINK_NODE_RANK_ANY)
            say(a, "joining the controller at %s, which numbers this node "
                "as it joins (this host is not the c10d endpoint's; "
                "--rdzv-conf is_host=true makes a node node 0)",
                a->controller);
        else if (!c.quiet)
            say(a, "joining the controller at %s", a->controller);
        a->deadline_ms = uv_now(&a->loop) + c.join_timeout_ms;
        uv_timer_start(&a->join_timer, on_join_timer, c.join_timeout_ms, 0);
        uv_timer_start(&a->heartbeat, on_heartbeat, c.heartbeat_ms,
                       c.heartbeat_ms);
        try_connect(a);
        uv_run(&a->loop, UV_RUN_DEFAULT);
    }
    int status = a->status;
    ss_agent_stacks_close(a->stacks); /* its answers are not sent */
    if (a->launcher)
        ss_launcher_destroy(a->launcher);
    ss_host_watch_close(a->host);
    if (a->server_open)
        unlink(a->sock_path);
    ss_link_conn_close(a->conn, 0); /* frees it, on the loop's last run */
    uv_walk(&a->loop, close_walk, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_loop_close(&a->loop);
    ss_host_watch_free(a->host);
    ss_sockdir_remove(a->sock_dir);
    ss_agent_stacks_free(a->stacks);
    ss_agent_channels_free(a->channels);
    ss_agent_fold_free(a->fold);
    ss_recent_rows_free(a->recent);
    free(a->last_step);
    free(a->stop_said);
    free(a->held_exits);
    free(a);
    return status;
}
