/*
 * launcher.h - starts the ranks of one attempt and supervises them.
 *
 * The launcher spawns the N ranks of one node on the controller's libuv
 * loop with the environment torchrun gives its workers (RANK, LOCAL_RANK,
 * WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
 * TORCHELASTIC_RESTART_COUNT, ...) plus the controller's STEPSCOPE_*
 * entries.  Each rank's stdout and stderr come back through pipes and are
 * forwarded line by line with a "[rank R] " prefix, appended to
 * LOG_DIR/rank-R.log and kept (the last lines) in memory for the failure
 * message.
 *
 * Local and global ranks: on a node of a multi-node job, the launcher's
 * ranks are the local ranks 0..nprocs-1 (LOCAL_RANK), whose global ranks
 * (RANK) are rank_base + LOCAL_RANK.  Whatever people read uses the global
 * rank: the "[rank R]" prefix, the log file name rank-R.log and the
 * failure summary.  The API uses the LOCAL rank: the callbacks'
 * RANK arguments, ss_launcher_rank_pid and ss_rank_failure.rank;
 * ss_launcher_global_rank maps one to the other.  On a single node
 * (rank_base 0) the two are the same.
 *
 * Supervision follows torchrun: when a rank fails (non-zero exit or signal)
 * the others are stopped with SIGTERM and, after a grace period, SIGKILL.
 * The job's exit status is that of the rank that failed first.
 *
 * No orphans: every rank is started through an exec shim (`stepscope
 * __rank-exec -- CMD ARGS...`, see ss_launcher_rank_exec_main) that puts the
 * rank in its own process group and asks the kernel to SIGKILL it when the
 * controller dies, even by SIGKILL.  Signals from the launcher go to the
 * whole process group, so the rank's own children are reached as well.
 * Processes that leave the group (`setsid`) are found too: the launcher
 * makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER), so
 * orphans are re-parented to it, and treats every descendant of the calling
 * process outside the ranks' groups as left behind by a rank (the calling
 * process must not run children of its own beside the launcher).  These
 * get the same signals as the ranks when the job is stopped, and when the
 * last rank has exited they get SIGTERM, then SIGKILL after the grace
 * period, and are reaped before on_all_exited (descendants.h says how they
 * are found, and the limits).
 *
 * Threading: every function must be called on the thread that runs the loop
 * given to ss_launcher_start (PR_SET_PDEATHSIG is tied to the thread that
 * spawned the rank, so that thread must live as long as the ranks).  The
 * launcher installs no signal handlers: the controller owns SIGINT/SIGTERM
 * and calls ss_launcher_terminate / ss_launcher_kill_now.  The controller
 * should ignore SIGPIPE: when the echo descriptor is a closed pipe, echoing
 * then stops instead of killing the controller.  Echo and log writes are
 * blocking writes on the loop thread (as torchrun's are).
 */
#ifndef STEPSCOPE_LAUNCHER_H
#define STEPSCOPE_LAUNCHER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct ss_launcher ss_launcher;

/* The argument that routes the stepscope executable to the exec shim. */
#define SS_RANK_EXEC_ARG "__rank-exec"

/* The launcher's pid as the shim sees it in its environment. */
#define SS_PARENT_PID_ENV "STEPSCOPE_PARENT_PID"

#define SS_LAUNCH_GRACE_MS_DEFAULT 5000
#define SS_LAUNCH_MAX_RANKS 65536
#define SS_LAUNCH_TAIL_LINES 20     /* lines of each rank kept in memory */
#define SS_LAUNCH_LINE_MAX 4096     /* longer output lines are split */

/* The streams of a rank that ss_launch_config's echo_mask forwards. */
#define SS_ECHO_STDOUT 1
#define SS_ECHO_STDERR 2

typedef struct {
    uint32_t nprocs;         /* ranks to start on this node,
                                1..SS_LAUNCH_MAX_RANKS (LOCAL_WORLD_SIZE) */
    char *const *argv;       /* the command, NULL-terminated; argv[0] is
                                looked up in PATH by the shim */
    const char *exec_shim;   /* the stepscope executable: each rank runs as
                                `exec_shim __rank-exec -- argv...` */
    char *const *env;        /* extra "NAME=value" entries (STEPSCOPE_ADDR,
                                STEPSCOPE_TOKEN, STEPSCOPE_RUN_ID...),
                                NULL-terminated, or NULL; they override the
                                inherited environment */
    const char *run_id;      /* TORCHELASTIC_RUN_ID; NULL gives "none" */
    const char *log_dir;     /* created (0700) if missing; logs are 0600;
                                NULL: no log files */
    uint32_t grace_ms;       /* SIGTERM -> SIGKILL delay; default 5000 */
    uint32_t attempt;        /* TORCHELASTIC_RESTART_COUNT; logs are never
                                truncated: an existing log gets a separator
                                line ("---- stepscope: attempt K ----", or
                                "---- stepscope: run RUN_ID ----" for
                                attempt 0) and is appended to */
    uint32_t max_restarts;   /* TORCHELASTIC_MAX_RESTARTS (--max-restarts) */
    uint16_t master_port;    /* MASTER_PORT; 0 picks a free loopback port,
                                which only a single node on a loopback
                                master may do (an error otherwise: every
                                node must be given the same port) */
    const char *master_addr; /* MASTER_ADDR; NULL gives "127.0.0.1" */
    uint32_t rank_base;      /* RANK of local rank 0 (default 0): RANK =
                                rank_base + LOCAL_RANK */
    uint32_t world_size;     /* WORLD_SIZE = ROLE_WORLD_SIZE, all nodes'
                                ranks; 0 gives nprocs.  rank_base + nprocs
                                must not exceed it */
    uint32_t node_rank;      /* GROUP_RANK = NODE_RANK, < nnodes */
    uint32_t nnodes;         /* GROUP_WORLD_SIZE; 0 gives 1 */
    int echo;                /* non-zero: forward rank output (default 1) */
    const uint8_t *echo_mask; /* per local rank (nprocs of them), the
                                streams forwarded when ECHO is on:
                                SS_ECHO_STDOUT | SS_ECHO_STDERR; NULL:
                                both of every rank (torchrun's --redirects,
                                --tee and --local-ranks-filter); logs
                                always hold both */
    const char *role;        /* ROLE_NAME (torchrun's --role); NULL gives
                                "default" */
    int echo_out_fd;         /* where rank stdout lines go (default 1) */
    int echo_err_fd;         /* where rank stderr lines go (default 2) */
    const char *kernel_log;  /* where the kernel's OOM kills are read
                                (oom_log.h); NULL gives /dev/kmsg, tests
                                give a file */
} ss_launch_config;

/* Fills CFG with the documented defaults (everything else zero / NULL). */
void ss_launch_config_defaults(ss_launch_config *cfg);

/*
 * What the launcher tells the controller.  Every member may be NULL.
 * Callbacks run on the loop thread; they may call ss_launcher_terminate,
 * ss_launcher_kill_now and ss_launcher_destroy.  RANK is always the LOCAL
 * rank (0..nprocs-1); ss_launcher_global_rank gives the global one.
 */
typedef struct {
    void *ctx;
    /* RANK's main process ended: EXIT_CODE when TERM_SIGNAL is 0, else the
     * signal that killed it.  Its last output may still be in flight (it is
     * drained before on_all_exited). */
    void (*on_rank_exit)(void *ctx, uint32_t rank, int64_t exit_code,
                         int term_signal);
    /* Every rank has exited and all output is forwarded and logged.  Called
     * once. */
    void (*on_all_exited)(void *ctx);
    /* Used by ss_launcher_failure_summary: stores RANK's last completed step
     * in *STEP and returns 1, or returns 0 when it is not known. */
    int (*last_step)(void *ctx, uint32_t rank, uint64_t *step);
} ss_launch_callbacks;

/*
 * Starts CFG->nprocs ranks on LOOP.  CFG (and what it points to) and CB are
 * only read during the call.  Returns the launcher, or NULL with a one-line
 * reason in ERR (bad config, log directory, port, or a rank that could not
 * be spawned; ranks already started are killed and no callback is ever
 * called).  The caller runs LOOP; the launcher keeps it alive until
 * ss_launcher_destroy.
 */
ss_launcher *ss_launcher_start(uv_loop_t *loop, const ss_launch_config *cfg,
                               const ss_launch_callbacks *cb, char *err,
                               size_t errlen);

/*
 * Stops the job: SIGTERM to the process group of every running rank, then,
 * after the grace period, SIGKILL to those still running.  REASON (copied;
 * may be NULL) appears in the failure summary.  Idempotent: later calls do
 * nothing.  The launcher calls it itself when a rank fails.
 */
void ss_launcher_terminate(ss_launcher *l, const char *reason);

/* SIGKILL to every running rank's process group now, without waiting for
 * the grace period (a second Ctrl-C).  REASON (copied; may be NULL) says
 * why, as the failure summary quotes it: "3 were killed at once with
 * SIGKILL <REASON>", e.g. "on a second Ctrl-C"; it is also the job's stop
 * reason if the job was not already being stopped. */
void ss_launcher_kill_now(ss_launcher *l, const char *reason);

/* 1 when the stop passed local rank RANK over: it had printed a Python
 * traceback in the DYING_MS before and no word of a lost peer, so it was
 * left to end of its own exception until DYING_MS after that traceback
 * (then, still running, it gets its SIGTERM; SIGKILL after the grace
 * period bounds it as any other); 0 otherwise. */
int ss_launcher_rank_spared(const ss_launcher *l, uint32_t rank);

/* Global rank GLOBAL_RANK's script has ended (its recorder said goodbye:
 * the script returned, called exit or raised) while its process may still
 * be exiting: the interpreter tearing down what it holds, its sockets
 * closed first.  A rank of another node, or one already reaped, is
 * ignored; so is a second call.  The failure summary then names it as
 * having left before a rank that failed on a lost peer, even when it was
 * still exiting then (ss_launcher_failure_summary). */
void ss_launcher_rank_script_ended(ss_launcher *l, uint32_t global_rank);

/* The pid of local rank RANK's process while it runs, 0 once it has
 * exited or when RANK is out of range. */
int ss_launcher_rank_pid(const ss_launcher *l, uint32_t rank);

/* How many processes the ranks left behind when the last of them exited
 * (daemons, `setsid` children, orphans), all of which were then ended
 * (see ss_launcher_start); 0 before that. */
uint32_t ss_launcher_left_behind(const ss_launcher *l);

/* The port given to the ranks as MASTER_PORT. */
uint16_t ss_launcher_master_port(const ss_launcher *l);

/* The global rank (RANK) of local rank LOCAL_RANK: rank_base +
 * LOCAL_RANK; LOCAL_RANK itself when L is NULL. */
uint32_t ss_launcher_global_rank(const ss_launcher *l, uint32_t local_rank);

/*
 * The job's exit status once on_all_exited has been called, that is every
 * rank has exited and its output is drained (-1 before): 0 when all ranks
 * exited 0, else the status of the rank that failed first: its exit code,
 * or 128 + signal number when a signal killed it.  When no rank failed
 * first (the job was stopped from outside), the status of the first rank
 * that ended non-zero.
 */
int ss_launcher_exit_status(const ss_launcher *l);

/* How the first failing rank ended. */
typedef struct {
    uint32_t rank;         /* local rank */
    uint32_t global_rank;  /* RANK */
    int pid;
    int64_t exit_code;   /* meaningful when term_signal == 0 */
    int term_signal;     /* 0 when the rank exited by itself */
} ss_rank_failure;

/*
 * Fills OUT and returns 1 when a rank failed (non-zero exit or signal)
 * before any termination was requested, else returns 0.  Ranks that die
 * because the job is being stopped are not failures of their own.
 */
int ss_launcher_first_failure(const ss_launcher *l, ss_rank_failure *out);

/*
 * Ends, with its newline, a rank's progress update that is on the
 * terminal without one (a tqdm bar: launcher.c, emit_progress), so that
 * what the caller prints next starts a line of its own.  NULL is a no-op.
 */
void ss_launcher_end_progress(ss_launcher *l);

/*
 * When local rank RANK died of a SIGKILL that the launcher did not send
 * and the kernel's OOM killer sent it (oom_log.h): a sentence saying so
 * into OUT (always NUL-terminated when LEN > 0) and 1 when the kernel's
 * log names the rank's process, 2 when the log cannot be read but the
 * host counted an OOM kill during the job.  Otherwise "" and 0.
 */
int ss_launcher_oom_kill(const ss_launcher *l, uint32_t rank, char *out,
                         size_t len);

/*
 * Writes a few lines for a person into BUF (always NUL-terminated when
 * BUFLEN > 0) explaining why the job failed: the rank that failed first
 * (named by its global rank), how (exit code N / killed by signal SIGSEGV
 * / killed by the kernel's OOM killer, with what its log says on the next
 * line), its last step (from the
 * last_step callback, else "unknown"), its last output lines and how the
 * other ranks were stopped; or, when no rank failed but the job was
 * terminated, the reason.  Writes "" when nothing went wrong.  Returns the
 * length the full text needs (like snprintf), 0 when there is nothing to
 * say.  Complete once on_all_exited has been called.
 */
size_t ss_launcher_failure_summary(const ss_launcher *l, char *buf,
                                   size_t buflen);

/*
 * Releases the launcher.  Ranks still running are killed with SIGKILL (their
 * process groups) without further callbacks.  Handles close asynchronously:
 * the memory is freed as LOOP runs its close callbacks, so keep running the
 * loop (uv_run) afterwards.  Safe inside a launcher callback; NULL is a
 * no-op.
 */
void ss_launcher_destroy(ss_launcher *l);

/*
 * The exec shim, run by the stepscope executable when its first argument is
 * SS_RANK_EXEC_ARG: ARGV is main's argument vector and the command is what
 * follows the first "--".  Puts the process in its own process group,
 * arranges SIGKILL on the parent's death, checks that the parent named by
 * STEPSCOPE_PARENT_PID is still its parent, then execs the command.
 * Returns (an exit status for main) only on failure: 127 after printing
 * "stepscope: cannot run 'CMD': <reason>" to stderr.
 */
int ss_launcher_rank_exec_main(int argc, char **argv);

#endif
