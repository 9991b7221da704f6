/*
 * launcher.c - spawns the ranks of one attempt, forwards their output and
 * stops the job the way torchrun does when one of them fails.
 *
 * Each rank owns four libuv handles: its process, a pipe for stdout, one for
 * stderr and a drain timer.  A rank is finished when its main process has
 * been reaped and both pipes reached end of file (or the drain timer gave up
 * on them); when every rank is finished, on_all_exited is called.  The
 * launcher itself owns one more handle, the grace timer that turns SIGTERM
 * into SIGKILL.  The memory is freed by the close callback of the last open
 * handle after ss_launcher_destroy, so destroying from inside a callback is
 * safe.
 *
 * Output goes through a fixed per-stream line buffer that libuv reads into
 * directly: complete lines are forwarded, a line that fills the buffer is
 * split (at a UTF-8 character boundary), and a partial last line is flushed
 * when the pipe closes.
 */
#include "launcher.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "appendf.h"
#include "containment.h"
#include "descendants.h"
#include "oom_log.h"
#include "private_fs.h"

extern char **environ;

/* After a rank's main process ended, how long its pipes may stay open
 * (held by a process that left its group) before they are closed. */
#define DRAIN_TIMEOUT_MS 1000

/* While processes left behind by the ranks are being ended, how often the
 * launcher looks for them and reaps them. */
#define SWEEP_POLL_MS 20

/* Failures reaped within this long of the first may have happened in the
 * other order (see first_failure). */
#define SAME_FAILURE_MS 250
/* A rank that printed a traceback this recently when the stop comes is
 * ending of its own exception: the stop's SIGTERM passes it over until
 * DYING_MS after that traceback (a rank still running then caught the
 * exception, or is stuck in its shutdown, and gets its SIGTERM; the grace
 * period's SIGKILL bounds it as any other), so that it ends with its own
 * exit code, and a peer that ended first on its closed sockets is not
 * taken for the failure (first_failure). */
#define DYING_MS 3000
#define TRACEBACK_LINE "Traceback (most recent call last):"

#define TAIL_LINE_MAX 256 /* bytes of a line kept for the failure summary */
#define REASON_MAX 256

typedef struct ss_rank ss_rank;

typedef struct {
    uv_pipe_t pipe;
    ss_rank *rank;
    int is_err;       /* stderr (1) or stdout (0) */
    int open;         /* not yet at end of file / closed */
    size_t len;       /* bytes of an unfinished line in buf */
    int shown;        /* a progress update (text ended by '\r') is on the
                         terminal without its newline */
    int after_cr;     /* the last line end was a '\r': the text after it
                         is the next progress update, shown as it comes */
    size_t pending_len;              /* the latest progress update: the */
    char pending[TAIL_LINE_MAX];     /* line's text if '\n' ends it bare */
    char buf[SS_LAUNCH_LINE_MAX];
} ss_stream;

struct ss_rank {
    ss_launcher *l;
    uint32_t rank;    /* local rank: the index in l->ranks */
    uint32_t global;  /* RANK: l->rank_base + rank */
    uv_process_t proc;
    uv_timer_t drain;
    ss_stream out, err;
    int handles_init; /* pipes and drain timer initialised */
    int proc_init;    /* uv_spawn was called (the handle needs closing) */
    int pid;
    int running;      /* spawned and not yet reaped */
    int exited;       /* reaped: exit_code / term_signal valid */
    int64_t exit_code;
    int term_signal;
    int sigkill_after_grace; /* the grace period ended while it ran */
    int sigkill_at_once;     /* ss_launcher_kill_now hit it running */
    uint32_t exit_seq;       /* 1 for the first rank reaped, 2 ... */
    uint64_t exited_ms;      /* the loop's clock when it was reaped */
    uint32_t left_running;   /* other ranks still running then */
    uint64_t script_ended_ms;    /* the loop's clock when its recorder said
                                    goodbye while it ran
                                    (ss_launcher_rank_script_ended), 0
                                    not yet */
    uint32_t script_ended_seq;   /* ranks reaped before then */
    uint32_t script_ended_left;  /* other ranks then running whose
                                    scripts had not ended */
    uint64_t traceback_ms;   /* the loop's clock when its first line
                                "Traceback (most recent call last):" was
                                read (Python's report of an uncaught
                                exception begins so), 0 none */
    int spared;              /* the stop's SIGTERM passed it over: it was
                                ending of its own exception (DYING_MS) */
    int spare_over;          /* spared, and still running DYING_MS after its
                                traceback: SIGTERMed then */
    int oom_killed;          /* ss_oom_log_explain's answer for a SIGKILL
                                nobody in the job sent: 1 the kernel's log
                                names it, 2 probably, 0 not seen */
    char oom_why[288];       /* what the log says of it (answer 1) */
    int log_fd;       /* -1 without a log directory */
    char prefix[24];  /* "[rank R] ", R the global rank */
    size_t prefix_len;
    /* Ring of the last SS_LAUNCH_TAIL_LINES lines (stdout and stderr). */
    char tail[SS_LAUNCH_TAIL_LINES][TAIL_LINE_MAX];
    uint32_t tail_next, tail_count;
};

struct ss_launcher {
    uv_loop_t *loop;
    ss_launch_callbacks cb;
    uint32_t nprocs;
    uint32_t rank_base, world_size, node_rank, nnodes;
    uint32_t grace_ms;
    uint16_t master_port;
    char *master_addr;
    int echo, echo_out_fd, echo_err_fd;
    int echo_out_broken, echo_err_broken; /* a write failed: stop echoing */
    uint8_t *echo_mask;  /* per local rank, SS_ECHO_*; NULL: all */
    char *role;          /* ROLE_NAME */
    char *log_dir;
    ss_rank *ranks;
    uv_timer_t grace;
    uv_timer_t sweep;   /* polls for left-behind processes at job end */
    uv_timer_t spare;   /* the spared ranks' SIGTERM, DYING_MS after their
                           traceback */
    uv_signal_t sigchld; /* reaps orphans re-parented to us */
    ss_oom_log *oom;     /* the kernel's OOM kills since the launch */
    ss_stream *shown;    /* whose progress update is on the terminal */
    uint32_t open_handles;
    uint32_t running;   /* ranks spawned and not reaped */
    uint32_t finished;  /* ranks reaped with both pipes closed */
    int started;        /* every rank was spawned */
    int terminating;    /* terminate or kill_now was called */
    int killing;        /* SIGKILL time: grace over or kill_now */
    int sweeping;       /* every rank reaped: ending what they left */
    int swept;          /* nothing the ranks started is left */
    uint32_t left_behind; /* processes found when the sweep began */
    int all_exited_called;
    int destroyed;
    int64_t first_failed;  /* rank that failed on its own first, or -1 */
    int64_t first_nonzero; /* first rank reaped with a non-zero status */
    uint32_t reaped;       /* ranks reaped so far (their exit_seq) */
    char reason[REASON_MAX];
    char kill_reason[REASON_MAX]; /* why ss_launcher_kill_now was called */
    ss_containment *contain; /* the launch's watchdog (containment.h) */
};

/* ---- small helpers ---- */


/* Writes every byte of IOV to FD, waiting when FD is non-blocking.  Returns
 * 0 or -1 (errno set). */
static int write_all(int fd, struct iovec *iov, int iovcnt)
{
    while (iovcnt > 0) {
        ssize_t n = writev(fd, iov, iovcnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                    return -1;
                continue;
            }
            return -1;
        }
        while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* The "SIGSEGV" style name of SIG, or "signal N" in BUF. */
static const char *signal_name(int sig, char *buf, size_t buflen)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, buflen, "SIG%s", abbrev);
    else
        snprintf(buf, buflen, "signal %d", sig);
    return buf;
}

static int rank_failed(const ss_rank *r)
{
    return r->exited && (r->term_signal != 0 || r->exit_code != 0);
}

static int rank_status(const ss_rank *r)
{
    return r->term_signal ? 128 + r->term_signal : (int)r->exit_code;
}

/* What a collective library prints when a peer went away (gloo's
 * "Connection closed by peer", "Connection reset by peer" and "Broken
 * pipe", NCCL's "remote process exited or there was a network error",
 * PyTorch's "NCCL communicator was aborted"): a rank whose last lines
 * hold one failed because another rank did. */
static const char *const peer_lost_marks[] = {
    "closed by peer", "reset by peer", "Broken pipe",
    "remote process exited", "communicator was aborted"};

/* Do R's last lines say that a peer went away? */
static int names_a_lost_peer(const ss_rank *r)
{
    for (uint32_t i = 0; i < r->tail_count; i++)
        for (size_t m = 0;
             m < sizeof peer_lost_marks / sizeof peer_lost_marks[0]; m++)
            if (strstr(r->tail[i], peer_lost_marks[m]))
                return 1;
    return 0;
}

/* Did R end of the launcher's stop: SIGTERM, or SIGKILL after the grace
 * period or at once (a second Ctrl-C)? */
static int ended_by_the_stop(const ss_rank *r)
{
    return r->term_signal == SIGTERM ||
           (r->term_signal == SIGKILL &&
            (r->sigkill_after_grace || r->sigkill_at_once));
}

/* Sends SIG to the process group of rank R.  Before the shim has called
 * setpgid the group does not exist yet: then the process itself is hit. */
static void signal_rank(ss_rank *r, int sig)
{
    if (!r->running)
        return;
    if (kill(-r->pid, sig) < 0 && errno == ESRCH)
        kill(r->pid, sig);
}

/* Is P a running rank or inside its process group (reached by
 * signal_rank)?  A rank's main process is left to libuv, which reaps it. */
static int in_rank_group(const ss_launcher *l, const ss_proc *p)
{
    for (uint32_t i = 0; i < l->nprocs; i++)
        if (l->ranks[i].running &&
            (p->pgid == l->ranks[i].pid || p->pid == l->ranks[i].pid))
            return 1;
    return 0;
}

/*
 * The processes the ranks left behind or that left their rank's group:
 * every descendant of this process outside the running ranks' groups.
 * Reaps those that are our children and have exited (orphans re-parented
 * to us as subreaper), sends SIG (0: none) to the others and returns how
 * many are still alive.
 */
static uint32_t handle_strays(ss_launcher *l, int sig)
{
    ss_proc *procs = NULL;
    int n = ss_descendants(&procs);
    uint32_t alive = 0;
    pid_t self = getpid();
    for (int i = 0; i < n; i++) {
        const ss_proc *p = &procs[i];
        if (in_rank_group(l, p) || p->pid == ss_containment_pid(l->contain))
            continue;
        if (p->state == 'Z') {
            /* Exited: ours to reap (never a running rank: those are in
             * their group, and libuv reaps them), or its parent's, a
             * descendant we are ending, after which it comes to us. */
            if (p->ppid == self)
                waitpid(p->pid, NULL, WNOHANG);
            continue;
        }
        alive++;
        if (sig)
            kill(p->pid, sig);
    }
    free(procs);
    return alive;
}

static void signal_all(ss_launcher *l, int sig)
{
    for (uint32_t i = 0; i < l->nprocs; i++)
        signal_rank(&l->ranks[i], sig);
    handle_strays(l, sig);
}

/* Does R end of its own exception: a traceback read in the last
 * DYING_MS, and no word of a lost peer (a rank failing on the sockets the
 * first failure closed dies of that, and is stopped as any other)? */
static int dying_of_its_own(const ss_launcher *l, const ss_rank *r)
{
    return r->running && r->traceback_ms &&
           uv_now(l->loop) - r->traceback_ms <= DYING_MS &&
           !names_a_lost_peer(r);
}

/* ---- handle lifetime ---- */

static void on_handle_closed(uv_handle_t *h)
{
    ss_launcher *l = h->data;
    if (--l->open_handles == 0 && l->destroyed) {
        ss_oom_log_free(l->oom);
        free(l->ranks);
        free(l->log_dir);
        free(l->master_addr);
        free(l->echo_mask);
        free(l->role);
        free(l);
    }
}

/* Closes H (if open); its data is repointed at L for on_handle_closed. */
static void close_handle(ss_launcher *l, uv_handle_t *h)
{
    if (uv_is_closing(h))
        return;
    h->data = l;
    uv_close(h, on_handle_closed);
}

/* ---- output ---- */

static void keep_tail(ss_rank *r, const char *line, size_t n)
{
    if (n >= TAIL_LINE_MAX)
        n = TAIL_LINE_MAX - 1;
    memcpy(r->tail[r->tail_next], line, n);
    r->tail[r->tail_next][n] = '\0';
    r->tail_next = (r->tail_next + 1) % SS_LAUNCH_TAIL_LINES;
    if (r->tail_count < SS_LAUNCH_TAIL_LINES)
        r->tail_count++;
}

void ss_launcher_end_progress(ss_launcher *l)
{
    if (!l || !l->shown)
        return;
    ss_stream *st = l->shown;
    int *broken = st->is_err ? &l->echo_err_broken : &l->echo_out_broken;
    struct iovec nl = {"\n", 1};
    if (l->echo && !*broken &&
        write_all(st->is_err ? l->echo_err_fd : l->echo_out_fd, &nl, 1) < 0)
        *broken = 1;
    st->shown = 0;
    l->shown = NULL;
}

/* Whether stream ST goes to the terminal: output forwarded, its rank's
 * stream among those forwarded, and its side not broken. */
static int echoes(const ss_stream *st)
{
    const ss_launcher *l = st->rank->l;
    return l->echo && !(st->is_err ? l->echo_err_broken : l->echo_out_broken) &&
           (!l->echo_mask || (l->echo_mask[st->rank->rank] &
                              (st->is_err ? SS_ECHO_STDERR : SS_ECHO_STDOUT)));
}

/* Writes IOV (N parts) to the terminal side of stream ST, if it echoes;
 * ends first a progress update that another stream left on the terminal
 * without its newline, so that ST's text starts a line. */
static void echo(ss_stream *st, struct iovec *iov, int n)
{
    ss_launcher *l = st->rank->l;
    int *broken = st->is_err ? &l->echo_err_broken : &l->echo_out_broken;
    if (!echoes(st))
        return;
    if (l->shown != st)
        ss_launcher_end_progress(l);
    if (write_all(st->is_err ? l->echo_err_fd : l->echo_out_fd, iov, n) < 0)
        *broken = 1;
}

/* One line of output (without its newline) from stream ST.  A line that
 * progress updates ended ("\rtraining 3/30\rtraining 4/30\n": tqdm's
 * bars) is the last update's text when nothing follows it; on the
 * terminal the update shown is then completed with its newline. */
static void emit_line(ss_stream *st, const char *line, size_t n)
{
    ss_rank *r = st->rank;
    ss_launcher *l = r->l;
    static char newline[] = "\n", cr[] = "\r";

    int bare = n == 0 && st->pending_len > 0;
    if (bare) {
        line = st->pending;
        n = st->pending_len;
    }
    st->pending_len = 0;
    keep_tail(r, line, n);
    if (!r->traceback_ms && n >= sizeof TRACEBACK_LINE - 1 &&
        memcmp(line, TRACEBACK_LINE, sizeof TRACEBACK_LINE - 1) == 0)
        r->traceback_ms = uv_now(l->loop);
    if (r->log_fd >= 0) {
        struct iovec iov[2] = {{(void *)line, n}, {newline, 1}};
        if (write_all(r->log_fd, iov, 2) < 0) {
            close(r->log_fd); /* disk full or similar: keep forwarding */
            r->log_fd = -1;
        }
    }
    if (st->shown && bare) {
        struct iovec iov[1] = {{newline, 1}};
        echo(st, iov, 1);
    } else if (st->shown) {
        struct iovec iov[4] = {{cr, 1}, {r->prefix, r->prefix_len},
                               {(void *)line, n}, {newline, 1}};
        echo(st, iov, 4);
    } else {
        struct iovec iov[3] = {
            {r->prefix, r->prefix_len}, {(void *)line, n}, {newline, 1}};
        echo(st, iov, 3);
    }
    st->shown = 0;
    if (l->shown == st)
        l->shown = NULL;
}

/* A progress update from stream ST: text that '\r' ended.  It is shown at
 * once, over the update before it ("\r[rank 0] training 4/30"), without a
 * newline; the log and the failure summary keep only the last update of
 * a line (emit_line), not each of them. */
static void emit_progress(ss_stream *st, const char *text, size_t n)
{
    ss_rank *r = st->rank;
    static char cr[] = "\r";
    if (n == 0)
        return;
    if (n == st->pending_len && memcmp(text, st->pending, n) == 0)
        return; /* shown already, as it came (scan_lines) */
    st->pending_len = n < sizeof st->pending ? n : sizeof st->pending - 1;
    memcpy(st->pending, text, st->pending_len);
    if (!echoes(st))
        return;
    struct iovec iov[3] = {{cr, 1}, {r->prefix, r->prefix_len},
                           {(void *)text, n}};
    echo(st, st->shown ? iov : iov + 1, st->shown ? 3 : 2);
    st->shown = 1;
    r->l->shown = st;
}

/* Length of the longest prefix of BUF[0..N) that does not cut a UTF-8
 * character in two (N when no character is cut or BUF is not UTF-8). */
static size_t utf8_cut(const char *buf, size_t n)
{
    size_t cut = n;
    for (int back = 0; back < 4 && cut > 0; back++) {
        unsigned char c = (unsigned char)buf[cut - 1];
        if ((c & 0x80) == 0)
            return n; /* ASCII: nothing cut */
        if ((c & 0xC0) == 0xC0) {
            /* lead byte at cut-1: its sequence needs `need` bytes */
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            return n - (cut - 1) >= need ? n : cut - 1;
        }
        cut--; /* continuation byte */
    }
    return n;
}

/* Forwards the complete lines in ST->buf, and the progress updates ('\r'
 * ends them, or begins them: the text after a '\r' is shown as it
 * comes); bytes [0, scan_from) are known to hold neither. */
static void scan_lines(ss_stream *st, size_t scan_from)
{
    size_t start = 0;
    for (size_t i = scan_from; i < st->len; i++) {
        if (st->buf[i] == '\n')
            emit_line(st, st->buf + start, i - start);
        else if (st->buf[i] == '\r')
            emit_progress(st, st->buf + start, i - start);
        else
            continue;
        st->after_cr = st->buf[i] == '\r';
        start = i + 1;
    }
    if (start > 0) {
        memmove(st->buf, st->buf + start, st->len - start);
        st->len -= start;
    }
    /* tqdm writes "\r" and then the update: show it now, not when the
     * next one ends it (its bytes stay for what ends it) */
    if (st->after_cr && st->len > 0 && st->len < sizeof st->buf)
        emit_progress(st, st->buf, st->len);
    if (st->len == sizeof st->buf) { /* a line too long: split it */
        size_t cut = utf8_cut(st->buf, st->len);
        if (cut == 0)
            cut = st->len;
        emit_line(st, st->buf, cut);
        memmove(st->buf, st->buf + cut, st->len - cut);
        st->len -= cut;
    }
}

static void check_all_exited(ss_launcher *l)
{
    if (l->destroyed || l->all_exited_called || !l->started ||
        l->finished < l->nprocs || !l->swept)
        return;
    l->all_exited_called = 1;
    uv_timer_stop(&l->grace);
    uv_timer_stop(&l->sweep);
    uv_timer_stop(&l->spare);
    if (l->cb.on_all_exited)
        l->cb.on_all_exited(l->cb.ctx);
}

static void check_rank_finished(ss_rank *r)
{
    if (!r->exited || r->out.open || r->err.open)
        return;
    uv_timer_stop(&r->drain);
    r->l->finished++;
    check_all_exited(r->l);
}

/* Flushes a partial last line and closes the stream's pipe. */
static void close_stream(ss_stream *st)
{
    if (!st->open)
        return;
    st->open = 0;
    if (st->len > 0 || st->shown) {
        emit_line(st, st->buf, st->len);
        st->len = 0;
    }
    uv_read_stop((uv_stream_t *)&st->pipe);
    close_handle(st->rank->l, (uv_handle_t *)&st->pipe);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    ss_stream *st = h->data;
    (void)suggested;
    /* scan_lines never leaves the buffer full, so there is always room */
    *buf = uv_buf_init(st->buf + st->len, (unsigned)(sizeof st->buf - st->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    ss_stream *st = s->data;
    (void)buf; /* it points into st->buf (see on_alloc) */
    if (nread > 0) {
        size_t old = st->len;
        st->len += (size_t)nread;
        scan_lines(st, old);
    } else if (nread < 0) { /* UV_EOF or a read error: either way, done */
        ss_rank *r = st->rank;
        close_stream(st);
        check_rank_finished(r);
    }
}

static void on_drain_timeout(uv_timer_t *t)
{
    ss_rank *r = t->data;
    close_stream(&r->out);
    close_stream(&r->err);
    check_rank_finished(r);
}

/* ---- process lifetime ---- */

static void on_grace_over(uv_timer_t *t)
{
    ss_launcher *l = t->data;
    for (uint32_t i = 0; i < l->nprocs; i++)
        l->ranks[i].sigkill_after_grace |= l->ranks[i].running;
    l->killing = 1;
    signal_all(l, SIGKILL);
}

/* At job end: reaps what exited, SIGKILLs what appeared once killing, and
 * ends the sweep when nothing is left. */
static void on_sweep_poll(uv_timer_t *t)
{
    ss_launcher *l = t->data;
    if (handle_strays(l, l->killing ? SIGKILL : 0) > 0)
        return;
    uv_timer_stop(&l->sweep);
    uv_timer_stop(&l->grace);
    l->swept = 1;
    check_all_exited(l);
}

/*
 * Every rank's main process is reaped: whatever they started and left
 * behind (a daemon, a `setsid` child, an orphaned worker) is ended with the
 * same policy as the ranks: SIGTERM, SIGKILL after the grace period (at
 * once when the grace period is already over), reaped before
 * on_all_exited.
 */
static void start_sweep(ss_launcher *l)
{
    l->sweeping = 1;
    l->left_behind = handle_strays(l, l->killing ? SIGKILL : SIGTERM);
    if (l->left_behind == 0) {
        l->swept = 1;
        return;
    }
    if (!l->killing && !uv_is_active((uv_handle_t *)&l->grace))
        uv_timer_start(&l->grace, on_grace_over, l->grace_ms, 0);
    uv_timer_start(&l->sweep, on_sweep_poll, SWEEP_POLL_MS, SWEEP_POLL_MS);
}

/* SIGCHLD: reaps orphans re-parented to us as they exit, so none stays a
 * zombie for the rest of the job.  libuv reaps the ranks themselves. */
static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)signum;
    handle_strays(h->data, 0);
}

/* A SIGKILL that the launcher did not send: was it the kernel's OOM
 * killer?  Read right after the death, while the log still holds it. */
static void explain_sigkill(ss_launcher *l, ss_rank *r)
{
    ss_oom_kill kill;
    r->oom_killed = ss_oom_log_explain(l->oom, r->pid, &kill);
    if (r->oom_killed == 1) {
        char cause[256];
        ss_oom_kill_describe(&kill, cause, sizeof cause);
        snprintf(r->oom_why, sizeof r->oom_why, "the kernel's OOM killer "
                 "ended it: %s", cause);
    }
}

/* For a rank that failed otherwise: a process its last lines name (a
 * DataLoader worker, say) that the OOM killer killed, as a line of the
 * failure summary into BUF. */
static void append_child_oom(const ss_launcher *l, const ss_rank *r,
                             char *buf, size_t buflen, size_t *len)
{
    char text[SS_LAUNCH_TAIL_LINES * (TAIL_LINE_MAX + 1)];
    size_t n = 0;
    text[0] = '\0';
    for (uint32_t i = 0; i < r->tail_count; i++)
        ss_appendf(text, sizeof text, &n, "%s\n", r->tail[i]);
    ss_oom_kill kill;
    if (r->oom_killed || !ss_oom_log_kill_named_in(l->oom, text, &kill))
        return;
    char cause[256];
    ss_oom_kill_describe(&kill, cause, sizeof cause);
    ss_appendf(buf, buflen, len, "the kernel's OOM killer ended process %d "
               "(%s), which its last lines name: %s\n", (int)kill.pid,
               kill.comm, cause);
}

static void on_proc_exit(uv_process_t *p, int64_t exit_status, int term_signal)
{
    ss_rank *r = p->data;
    ss_launcher *l = r->l;

    r->running = 0;
    r->exited = 1;
    r->exit_code = exit_status;
    r->term_signal = term_signal;
    l->running--;
    r->exit_seq = ++l->reaped;
    r->exited_ms = uv_now(l->loop);
    r->left_running = l->running;
    if (term_signal == SIGKILL && !r->sigkill_after_grace &&
        !r->sigkill_at_once)
        explain_sigkill(l, r);
    /* Whatever the rank left in its group dies with it (torchrun does the
     * same); the group id cannot be reused while a member lives. */
    kill(-r->pid, SIGKILL);
    ss_containment_drop_group(l->contain, r->pid);
    close_handle(l, (uv_handle_t *)&r->proc);

    int first = 0;
    if (rank_failed(r)) {
        if (l->first_nonzero < 0)
            l->first_nonzero = r->rank;
        if (!l->terminating && l->first_failed < 0) {
            l->first_failed = r->rank;
            first = 1;
        }
    }
    if (r->out.open || r->err.open)
        uv_timer_start(&r->drain, on_drain_timeout, DRAIN_TIMEOUT_MS, 0);

    if (l->cb.on_rank_exit)
        l->cb.on_rank_exit(l->cb.ctx, r->rank, exit_status, term_signal);
    if (l->destroyed)
        return;
    if (first) {
        char reason[64];
        snprintf(reason, sizeof reason, "rank %" PRIu32 " failed", r->global);
        ss_launcher_terminate(l, reason);
    }
    if (l->running == 0 && l->started && !l->sweeping)
        start_sweep(l);
    check_rank_finished(r);
}

/* ---- environment ---- */

/* The variables the launcher sets for every rank, in this order. */
static const char *const launcher_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", SS_PARENT_PID_ENV,
    "NODE_RANK"};
#define N_LAUNCHER_VARS (sizeof launcher_vars / sizeof launcher_vars[0])

/* Does "NAME=value" ENTRY set the variable NAME? */
static int entry_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* Does ENTRY set a variable that one of the NULL-terminated LIST sets? */
static int entry_in(const char *entry, char *const *list)
{
    size_t n = strcspn(entry, "=");
    for (; list && *list; list++)
        if (strncmp(entry, *list, n) == 0 && (*list)[n] == '=')
            return 1;
    return 0;
}

static int entry_is_launcher_var(const char *entry)
{
    for (size_t i = 0; i < N_LAUNCHER_VARS; i++)
        if (entry_is(entry, launcher_vars[i]))
            return 1;
    return 0;
}

static void free_env(char **env)
{
    if (!env)
        return;
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
}

/* Builds rank RANK's environment: the inherited one minus what we set,
 * then CFG->env, then the torchrun variables.  Returns NULL on OOM. */
static char **build_env(const ss_launcher *l, const ss_launch_config *cfg,
                        uint32_t rank)
{
    size_t n_inherited = 0, n_extra = 0;
    int has_omp = 0, has_faulthandler = 0;
    for (char **e = environ; *e; e++)
        n_inherited++;
    for (char *const *e = cfg->env; e && *e; e++)
        n_extra++;

    char **env = calloc(n_inherited + n_extra + N_LAUNCHER_VARS + 3,
                        sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (char **e = environ; *e; e++) {
        if (entry_is_launcher_var(*e) || entry_in(*e, cfg->env))
            continue;
        has_omp |= entry_is(*e, "OMP_NUM_THREADS");
        has_faulthandler |= entry_is(*e, "PYTHONFAULTHANDLER");
        if (!(env[k++] = strdup(*e)))
            goto oom;
    }
    for (char *const *e = cfg->env; e && *e; e++) {
        if (entry_is_launcher_var(*e))
            continue;
        has_omp |= entry_is(*e, "OMP_NUM_THREADS");
        has_faulthandler |= entry_is(*e, "PYTHONFAULTHANDLER");
        if (!(env[k++] = strdup(*e)))
            goto oom;
    }
    const char *values[N_LAUNCHER_VARS];
    char num[10][24];
    snprintf(num[0], sizeof num[0], "%" PRIu32, l->rank_base + rank);
    snprintf(num[1], sizeof num[1], "%" PRIu32, l->world_size);
    snprintf(num[2], sizeof num[2], "%" PRIu16, l->master_port);
    snprintf(num[3], sizeof num[3], "%" PRIu32, cfg->attempt);
    snprintf(num[4], sizeof num[4], "%ld", (long)getpid());
    snprintf(num[5], sizeof num[5], "%" PRIu32, rank);
    snprintf(num[6], sizeof num[6], "%" PRIu32, l->nprocs);
    snprintf(num[7], sizeof num[7], "%" PRIu32, l->node_rank);
    snprintf(num[8], sizeof num[8], "%" PRIu32, l->nnodes);
    snprintf(num[9], sizeof num[9], "%" PRIu32, cfg->max_restarts);
    values[0] = num[0];              /* RANK: global */
    values[1] = num[5];              /* LOCAL_RANK */
    values[2] = num[1];              /* WORLD_SIZE: every node's ranks */
    values[3] = num[6];              /* LOCAL_WORLD_SIZE: this node's */
    values[4] = num[7];              /* GROUP_RANK: the node rank */
    values[5] = num[8];              /* GROUP_WORLD_SIZE: the nodes */
    values[6] = num[0];              /* ROLE_RANK: one role, = RANK */
    values[7] = num[1];              /* ROLE_WORLD_SIZE */
    values[8] = l->role;             /* ROLE_NAME */
    values[9] = l->master_addr;      /* MASTER_ADDR */
    values[10] = num[2];             /* MASTER_PORT */
    values[11] = num[3];             /* TORCHELASTIC_RESTART_COUNT */
    values[12] = num[9];             /* TORCHELASTIC_MAX_RESTARTS */
    values[13] = cfg->run_id ? cfg->run_id : "none";
    values[14] = num[4];             /* STEPSCOPE_PARENT_PID */
    values[15] = num[7];             /* NODE_RANK: not torchrun's, but
                                        what many scripts read */
    for (size_t i = 0; i < N_LAUNCHER_VARS; i++)
        if (asprintf(&env[k++], "%s=%s", launcher_vars[i], values[i]) < 0) {
            env[--k] = NULL;
            goto oom;
        }
    /* torchrun sets OMP_NUM_THREADS=1 for more than one worker per node
     * unless the user chose a value. */
    if (!has_omp && l->nprocs > 1 && !(env[k++] = strdup("OMP_NUM_THREADS=1")))
        goto oom;
    /* A Python rank that dies of SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT
     * prints its threads' Python stacks, which the failure summary then
     * quotes, where it would print nothing; a value the user set (an
     * empty one turns it off) is kept. */
    if (!has_faulthandler && !(env[k++] = strdup("PYTHONFAULTHANDLER=1")))
        goto oom;
    return env;
oom:
    free_env(env);
    return NULL;
}

/* ---- setup ---- */

/* The lowest of the kernel's ephemeral ports (ip_local_port_range); its
 * default where it cannot be read. */
static unsigned ephemeral_low(void)
{
    unsigned lo = 32768, a, b;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    if (!f)
        return lo;
    if (fscanf(f, "%u %u", &a, &b) == 2 && a <= b && b <= 65535)
        lo = a;
    fclose(f);
    return lo;
}

/* Whether a listener could bind TCP port PORT on every IPv4 address now
 * (as rank 0's rendezvous store does, with SO_REUSEADDR). */
static int port_is_free(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_ANY),
                            .sin_port = htons(port)};
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Picks a free TCP port for MASTER_PORT.  Rank 0 binds it only once it
 * has started, so a port that some other process may take in between is
 * a failed job: a port from bind(port 0) is one of the kernel's
 * ephemeral ports, which any process's next outgoing connection or
 * bind(port 0) may be handed (a busy machine makes many: gloo's own
 * pairs, other jobs' rendezvous).  So a free port below that range is
 * taken, picked at random among up to 10,000, which only a bind that
 * names it can take; bind(port 0) is the fallback. */
static int pick_free_port(uint16_t *port, char *err, size_t errlen)
{
    unsigned lo = ephemeral_low();
    unsigned base = lo > 11024 ? lo - 10000 : 1024;
    uint32_t x = (uint32_t)getpid() * 2654435761u ^ (uint32_t)time(NULL) ^
                 (uint32_t)clock();
    for (int i = 0; i < 64 && lo > base; i++) {
        x = x * 1664525u + 1013904223u;
        uint16_t p = (uint16_t)(base + (x >> 8) % (lo - base));
        if (port_is_free(p)) {
            *port = p;
            return 0;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ss_set_err(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        ss_set_err(err, errlen, "choosing MASTER_PORT: bind(127.0.0.1:0): %s",
                strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(a.sin_port);
    return 0;
}

/* Opens rank R's log for appending.  An existing log is never truncated:
 * a later attempt, or a new run that reuses --log-dir, starts after a
 * separator line. */
static int open_log(ss_launcher *l, ss_rank *r, const ss_launch_config *cfg,
                    char *err, size_t errlen)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/rank-%" PRIu32 ".log", l->log_dir,
             r->global);
    int created = 0;
    r->log_fd = ss_open_private(path, O_WRONLY | O_APPEND, &created, err,
                                errlen);
    if (r->log_fd < 0)
        return -1;
    struct stat sb;
    if (cfg->attempt > 0)
        dprintf(r->log_fd, "---- stepscope: attempt %" PRIu32 " ----\n",
                cfg->attempt);
    else if (!created && fstat(r->log_fd, &sb) == 0 && sb.st_size > 0)
        dprintf(r->log_fd, "---- stepscope: run %s ----\n",
                cfg->run_id ? cfg->run_id : "none");
    return 0;
}

static void init_rank_handles(ss_launcher *l, ss_rank *r)
{
    r->out.rank = r->err.rank = r;
    r->err.is_err = 1;
    uv_pipe_init(l->loop, &r->out.pipe, 0);
    uv_pipe_init(l->loop, &r->err.pipe, 0);
    uv_timer_init(l->loop, &r->drain);
    r->out.pipe.data = &r->out;
    r->err.pipe.data = &r->err;
    r->drain.data = r;
    r->handles_init = 1;
    l->open_handles += 3;
}

static int spawn_rank(ss_launcher *l, const ss_launch_config *cfg, ss_rank *r,
                      char **argv, char *err, size_t errlen)
{
    char **env = build_env(l, cfg, r->rank);
    if (!env) {
        ss_set_err(err, errlen, "out of memory");
        return -1;
    }
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE; /* /dev/null: ranks never read the terminal */
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&r->out.pipe;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&r->err.pipe;
    uv_process_options_t opt = {
        .exit_cb = on_proc_exit,
        .file = argv[0],
        .args = argv,
        .env = env,
        .stdio_count = 3,
        .stdio = stdio,
    };
    r->proc.data = r;
    r->proc_init = 1;
    l->open_handles++;
    int rc = uv_spawn(l->loop, &r->proc, &opt);
    free_env(env);
    if (rc < 0) {
        ss_set_err(err, errlen, "cannot start rank %" PRIu32 ": %s: %s",
                r->global, argv[0], uv_strerror(rc));
        return -1;
    }
    r->pid = r->proc.pid;
    ss_containment_add_group(l->contain, r->pid);
    r->running = 1;
    l->running++;
    r->out.open = r->err.open = 1;
    uv_read_start((uv_stream_t *)&r->out.pipe, on_alloc, on_read);
    uv_read_start((uv_stream_t *)&r->err.pipe, on_alloc, on_read);
    return 0;
}

/* The shim's argument vector: SHIM __rank-exec [--cgroup DIR] -- CMD
 * ARGS...  (CGROUP NULL: none). */
static char **shim_argv(const ss_launch_config *cfg, const char *cgroup)
{
    size_t n = 0, k = 0;
    while (cfg->argv[n])
        n++;
    char **argv = calloc(n + 6, sizeof *argv);
    if (!argv)
        return NULL;
    argv[k++] = (char *)cfg->exec_shim;
    argv[k++] = SS_RANK_EXEC_ARG;
    if (cgroup) {
        argv[k++] = "--cgroup";
        argv[k++] = (char *)cgroup;
    }
    argv[k++] = "--";
    memcpy(argv + k, cfg->argv, n * sizeof *argv);
    return argv;
}

/* Is ADDR this host's loopback, where a port picked here is valid? */
static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "localhost") == 0 ||
           strcmp(addr, "::1") == 0;
}

static int check_config(const ss_launch_config *cfg, char *err, size_t errlen)
{
    if (cfg->nprocs < 1 || cfg->nprocs > SS_LAUNCH_MAX_RANKS) {
        ss_set_err(err, errlen, "number of ranks must be 1..%d, not %" PRIu32,
                SS_LAUNCH_MAX_RANKS, cfg->nprocs);
        return -1;
    }
    if (!cfg->argv || !cfg->argv[0] || !cfg->argv[0][0]) {
        ss_set_err(err, errlen, "no command to run");
        return -1;
    }
    if (!cfg->exec_shim || !cfg->exec_shim[0]) {
        ss_set_err(err, errlen, "no path to the stepscope executable (exec shim)");
        return -1;
    }
    for (char *const *e = cfg->env; e && *e; e++)
        if (!strchr(*e, '=') || **e == '=') {
            ss_set_err(err, errlen, "bad environment entry '%s' (NAME=value)", *e);
            return -1;
        }
    uint32_t nnodes = cfg->nnodes ? cfg->nnodes : 1;
    uint64_t world = cfg->world_size ? cfg->world_size : cfg->nprocs;
    if (cfg->node_rank >= nnodes) {
        ss_set_err(err, errlen, "node rank %" PRIu32 " is not below the number "
                "of nodes (%" PRIu32 ")", cfg->node_rank, nnodes);
        return -1;
    }
    if ((uint64_t)cfg->rank_base + cfg->nprocs > world) {
        ss_set_err(err, errlen, "ranks %" PRIu32 "..%" PRIu64 " do not fit in a "
                "world of %" PRIu64 " ranks", cfg->rank_base,
                (uint64_t)cfg->rank_base + cfg->nprocs - 1, world);
        return -1;
    }
    const char *addr = cfg->master_addr;
    if (addr) {
        if (!*addr) {
            ss_set_err(err, errlen, "empty master address");
            return -1;
        }
        for (const char *c = addr; *c; c++)
            if (!isgraph((unsigned char)*c)) {
                ss_set_err(err, errlen, "bad master address '%s'", addr);
                return -1;
            }
    }
    if (!cfg->master_port && (nnodes > 1 || (addr && !is_loopback(addr)))) {
        ss_set_err(err, errlen, "no master port for %s%s: every node must be "
                "given the same MASTER_PORT, none can be picked at random",
                nnodes > 1 ? "a multi-node job with master " : "master ",
                addr ? addr : "127.0.0.1");
        return -1;
    }
    return 0;
}

/* ---- public API ---- */

void ss_launch_config_defaults(ss_launch_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->grace_ms = SS_LAUNCH_GRACE_MS_DEFAULT;
    cfg->echo = 1;
    cfg->echo_out_fd = STDOUT_FILENO;
    cfg->echo_err_fd = STDERR_FILENO;
}

ss_launcher *ss_launcher_start(uv_loop_t *loop, const ss_launch_config *cfg,
                               const ss_launch_callbacks *cb, char *err,
                               size_t errlen)
{
    if (!loop || !cfg) {
        ss_set_err(err, errlen, "no loop or no configuration");
        return NULL;
    }
    if (check_config(cfg, err, errlen) < 0)
        return NULL;

    ss_launcher *l = calloc(1, sizeof *l);
    if (!l || !(l->ranks = calloc(cfg->nprocs, sizeof *l->ranks))) {
        free(l);
        ss_set_err(err, errlen, "out of memory for %" PRIu32 " ranks", cfg->nprocs);
        return NULL;
    }
    l->loop = loop;
    if (cb)
        l->cb = *cb;
    l->nprocs = cfg->nprocs;
    l->rank_base = cfg->rank_base;
    l->world_size = cfg->world_size ? cfg->world_size : cfg->nprocs;
    l->node_rank = cfg->node_rank;
    l->nnodes = cfg->nnodes ? cfg->nnodes : 1;
    l->grace_ms = cfg->grace_ms;
    l->echo = cfg->echo;
    l->echo_out_fd = cfg->echo_out_fd;
    l->echo_err_fd = cfg->echo_err_fd;
    l->first_failed = l->first_nonzero = -1;
    for (uint32_t i = 0; i < cfg->nprocs; i++) {
        ss_rank *r = &l->ranks[i];
        r->l = l;
        r->rank = i;
        r->global = cfg->rank_base + i;
        r->log_fd = -1;
        r->prefix_len = (size_t)snprintf(r->prefix, sizeof r->prefix,
                                         "[rank %" PRIu32 "] ", r->global);
    }
    uv_timer_init(loop, &l->grace);
    uv_timer_init(loop, &l->sweep);
    uv_timer_init(loop, &l->spare);
    uv_signal_init(loop, &l->sigchld);
    l->grace.data = l->sweep.data = l->spare.data = l->sigchld.data = l;
    l->open_handles = 4;
    /* Orphans of the ranks come to us, so the sweep at job end finds
     * them.  Without it (an old kernel) the sweep still ends every
     * descendant that keeps its parent. */
    ss_become_subreaper();
    uv_signal_start(&l->sigchld, on_sigchld, SIGCHLD);
    uv_unref((uv_handle_t *)&l->sigchld);

    char **argv = NULL;
    if (cfg->echo_mask && (l->echo_mask = malloc(cfg->nprocs)))
        memcpy(l->echo_mask, cfg->echo_mask, cfg->nprocs);
    if (!(l->master_addr = strdup(cfg->master_addr ? cfg->master_addr
                                                   : "127.0.0.1")) ||
        !(l->role = strdup(cfg->role ? cfg->role : "default")) ||
        (cfg->echo_mask && !l->echo_mask) ||
        (cfg->log_dir && !(l->log_dir = strdup(cfg->log_dir)))) {
        ss_set_err(err, errlen, "out of memory");
        goto fail;
    }
    if (l->log_dir && ss_mkdirs_private(l->log_dir, err, errlen) < 0)
        goto fail;
    l->master_port = cfg->master_port;
    if (!l->master_port && pick_free_port(&l->master_port, err, errlen) < 0)
        goto fail;
    /* What the ranks start is ended even if we are killed with SIGKILL
     * (containment.h); where only process groups are covered, that is
     * said once. */
    char note[PATH_MAX + 256];
    static int noted;
    l->contain = ss_containment_start(cfg->exec_shim, note, sizeof note);
    if (note[0] && !noted++)
        fprintf(stderr, "stepscope: note: %s\n", note);
    /* Opened before the ranks start: their OOM kills come after. */
    l->oom = ss_oom_log_open(cfg->kernel_log, NULL);
    if (!(argv = shim_argv(cfg, ss_containment_cgroup(l->contain)))) {
        ss_set_err(err, errlen, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < cfg->nprocs; i++) {
        ss_rank *r = &l->ranks[i];
        if (l->log_dir && open_log(l, r, cfg, err, errlen) < 0)
            goto fail;
        init_rank_handles(l, r);
        if (spawn_rank(l, cfg, r, argv, err, errlen) < 0)
            goto fail;
    }
    free(argv);
    l->started = 1;
    return l;
fail:
    free(argv);
    ss_launcher_destroy(l);
    return NULL;
}

/* Sends SIGTERM to each spared rank still running DYING_MS after its
 * traceback (its exception was caught, or its shutdown is stuck), and
 * arms the timer for the next one due. */
static void on_spare_over(uv_timer_t *t)
{
    ss_launcher *l = t->data;
    uint64_t now = uv_now(l->loop), next = 0;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        ss_rank *r = &l->ranks[i];
        if (!r->spared || !r->running || r->spare_over)
            continue;
        uint64_t due = r->traceback_ms + DYING_MS;
        if (due <= now) {
            r->spare_over = 1;
            signal_rank(r, SIGTERM);
        } else if (!next || due < next) {
            next = due;
        }
    }
    if (next && !l->killing)
        uv_timer_start(&l->spare, on_spare_over, next - now, 0);
}

void ss_launcher_terminate(ss_launcher *l, const char *reason)
{
    if (!l || l->destroyed || l->terminating)
        return;
    l->terminating = 1;
    snprintf(l->reason, sizeof l->reason, "%s", reason ? reason : "terminated");
    for (uint32_t i = 0; i < l->nprocs; i++) {
        ss_rank *r = &l->ranks[i];
        r->spared = dying_of_its_own(l, r);
        if (!r->spared)
            signal_rank(r, SIGTERM);
    }
    on_spare_over(&l->spare);
    handle_strays(l, SIGTERM);
    if ((l->running > 0 || (l->sweeping && !l->swept)) &&
        !uv_is_active((uv_handle_t *)&l->grace))
        uv_timer_start(&l->grace, on_grace_over, l->grace_ms, 0);
}

void ss_launcher_kill_now(ss_launcher *l, const char *reason)
{
    if (!l || l->destroyed)
        return;
    if (!l->terminating) {
        l->terminating = 1;
        snprintf(l->reason, sizeof l->reason, "%s", reason ? reason : "killed");
    }
    if (!l->kill_reason[0])
        snprintf(l->kill_reason, sizeof l->kill_reason, "%s",
                 reason ? reason : "");
    l->killing = 1;
    uv_timer_stop(&l->grace);
    for (uint32_t i = 0; i < l->nprocs; i++)
        l->ranks[i].sigkill_at_once |= l->ranks[i].running;
    signal_all(l, SIGKILL);
}

int ss_launcher_rank_spared(const ss_launcher *l, uint32_t rank)
{
    return l && rank < l->nprocs && l->ranks[rank].spared;
}

int ss_launcher_rank_pid(const ss_launcher *l, uint32_t rank)
{
    if (!l || rank >= l->nprocs || !l->ranks[rank].running)
        return 0;
    return l->ranks[rank].pid;
}

uint32_t ss_launcher_left_behind(const ss_launcher *l)
{
    return l ? l->left_behind : 0;
}

uint16_t ss_launcher_master_port(const ss_launcher *l)
{
    return l ? l->master_port : 0;
}

void ss_launcher_rank_script_ended(ss_launcher *l, uint32_t global_rank)
{
    if (!l || global_rank < l->rank_base ||
        global_rank - l->rank_base >= l->nprocs)
        return;
    ss_rank *r = &l->ranks[global_rank - l->rank_base];
    if (!r->running || r->script_ended_ms)
        return;
    r->script_ended_ms = uv_now(l->loop);
    r->script_ended_seq = l->reaped;
    r->script_ended_left = 0;
    for (uint32_t i = 0; i < l->nprocs; i++)
        r->script_ended_left += &l->ranks[i] != r && l->ranks[i].running &&
                                !l->ranks[i].script_ended_ms;
}

uint32_t ss_launcher_global_rank(const ss_launcher *l, uint32_t local_rank)
{
    return l ? l->rank_base + local_rank : local_rank;
}

/*
 * The rank that failed first, or NULL.  The first reaped is not always it:
 * ranks that died while the loop was busy are reaped together in the order
 * they were started, and a rank whose collective failed on the crashed
 * rank's closed sockets may end before the crashed rank's own shutdown
 * does.  So among the failures reaped within SAME_FAILURE_MS of the first,
 * or later when the stop spared them (they were ending of their own
 * exception, DYING_MS), none of them killed by the stop, one whose last
 * lines do not say that a peer went away is preferred to a first whose
 * lines do.  Decided from the ranks' whole output, once it is read (the
 * summary comes after it).
 */
static const ss_rank *first_failure(const ss_launcher *l)
{
    if (l->first_failed < 0)
        return NULL;
    const ss_rank *first = &l->ranks[l->first_failed];
    if (!names_a_lost_peer(first))
        return first;
    const ss_rank *best = NULL;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        const ss_rank *r = &l->ranks[i];
        if (r == first || !rank_failed(r) || ended_by_the_stop(r) ||
            (r->exited_ms > first->exited_ms + SAME_FAILURE_MS &&
             !r->spared) ||
            names_a_lost_peer(r))
            continue;
        if (!best || r->exit_seq < best->exit_seq)
            best = r;
    }
    return best ? best : first;
}

int ss_launcher_exit_status(const ss_launcher *l)
{
    if (!l || !l->all_exited_called)
        return -1;
    if (l->first_failed >= 0)
        return rank_status(first_failure(l));
    if (l->first_nonzero >= 0)
        return rank_status(&l->ranks[l->first_nonzero]);
    return 0;
}

int ss_launcher_first_failure(const ss_launcher *l, ss_rank_failure *out)
{
    if (!l || l->first_failed < 0)
        return 0;
    const ss_rank *r = first_failure(l);
    out->rank = r->rank;
    out->global_rank = r->global;
    out->pid = r->pid;
    out->exit_code = r->exit_code;
    out->term_signal = r->term_signal;
    return 1;
}


/* R's last line of output, "" if it printed none. */
static const char *last_line(const ss_rank *r)
{
    if (r->tail_count == 0)
        return "";
    return r->tail[(r->tail_next + SS_LAUNCH_TAIL_LINES - 1) %
                   SS_LAUNCH_TAIL_LINES];
}

/* Whether R failed on its own the way FIRST did: the same exit code and
 * the same last line (every rank hit the script's error), rather than
 * because of the stop. */
static int failed_the_same_way(const ss_rank *r, const ss_rank *first)
{
    return first && r->term_signal == 0 && first->term_signal == 0 &&
           r->exit_code == first->exit_code && r->tail_count > 0 &&
           strcmp(last_line(r), last_line(first)) == 0;
}

/* How the other ranks ended, e.g. "2 ended on SIGTERM, 1 needed SIGKILL
 * after the 5000 ms grace period", "3 were killed at once with SIGKILL
 * on a second Ctrl-C" or "1 failed the same way". */
static void append_others(const ss_launcher *l, int64_t skip, char *buf,
                          size_t buflen, size_t *len)
{
    uint32_t by_term = 0, by_kill = 0, at_once = 0, same = 0, peer = 0,
             other = 0;
    const ss_rank *first = skip >= 0 ? &l->ranks[skip] : NULL;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        const ss_rank *r = &l->ranks[i];
        if ((int64_t)i == skip || !r->exited || !rank_failed(r))
            continue;
        if (r->term_signal == SIGTERM)
            by_term++;
        else if (r->term_signal == SIGKILL && r->sigkill_after_grace)
            by_kill++;
        else if (r->term_signal == SIGKILL && r->sigkill_at_once)
            at_once++;
        else if (failed_the_same_way(r, first))
            same++;
        else if (first && names_a_lost_peer(r))
            peer++;
        else
            other++;
    }
    if (by_term + by_kill + at_once + same + peer + other == 0)
        return;
    ss_appendf(buf, buflen, len, "%s ranks were stopped:",
           skip >= 0 ? "the other" : "the");
    const char *sep = "";
    if (same) {
        ss_appendf(buf, buflen, len, " %" PRIu32 " failed the same way (the "
                   "same exit code and last line)", same);
        sep = ",";
    }
    if (peer) {
        ss_appendf(buf, buflen, len, "%s %" PRIu32 " failed because a peer "
                   "went away (%s last lines say so)", sep, peer,
                   peer == 1 ? "its" : "their");
        sep = ",";
    }
    if (by_term) {
        ss_appendf(buf, buflen, len, "%s %" PRIu32 " ended on SIGTERM", sep,
                   by_term);
        sep = ",";
    }
    if (by_kill) {
        ss_appendf(buf, buflen, len, "%s %" PRIu32 " needed SIGKILL after the %" PRIu32
               " ms grace period", sep, by_kill, l->grace_ms);
        sep = ",";
    }
    if (at_once) {
        ss_appendf(buf, buflen, len, "%s %" PRIu32 " %s killed at once with "
               "SIGKILL%s%s", sep, at_once, at_once == 1 ? "was" : "were",
               l->kill_reason[0] ? " " : "", l->kill_reason);
        sep = ",";
    }
    if (other)
        ss_appendf(buf, buflen, len, "%s %" PRIu32 " failed while stopping", sep,
               other);
    ss_appendf(buf, buflen, len, "\n");
}

/* Whether R exited with success before FIRST failed, while others still
 * ran. */
static int exited_before(const ss_rank *r, const ss_rank *first)
{
    return r->exited && !rank_failed(r) && r->exit_seq < first->exit_seq &&
           r->left_running > 0;
}

/* Whether R's script had ended before FIRST failed, while other ranks'
 * scripts still ran, and R then ended with success or by the stop, not of
 * a failure of its own, with no traceback and no word of a lost peer
 * (a script that raised says goodbye too): a rank still exiting when the
 * rank that lost it failed (its interpreter had closed its sockets and
 * went on tearing down what it holds). */
static int ended_before(const ss_rank *r, const ss_rank *first)
{
    return r != first && r->script_ended_ms &&
           r->script_ended_seq < first->exit_seq &&
           r->script_ended_left > 0 && r->exited &&
           (!rank_failed(r) || ended_by_the_stop(r)) &&
           !r->traceback_ms && !names_a_lost_peer(r);
}

/* The first rank that exited with success before FIRST failed, while
 * others still ran; else, where FIRST's last lines say a peer went away
 * (LOST_PEER), the first whose script had ended before then
 * (ended_before); NULL when none did: in synchronous training the others'
 * next collective then fails (or waits) for it, so the rank that failed
 * first is often not the cause. */
static const ss_rank *early_exit(const ss_launcher *l, const ss_rank *first,
                                 int lost_peer)
{
    const ss_rank *early = NULL;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        const ss_rank *r = &l->ranks[i];
        if (exited_before(r, first) &&
            (!early || r->exit_seq < early->exit_seq))
            early = r;
    }
    if (early || !lost_peer)
        return early;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        const ss_rank *r = &l->ranks[i];
        if (ended_before(r, first) &&
            (!early || r->script_ended_ms < early->script_ended_ms))
            early = r;
    }
    return early;
}

/* The line of EARLY, a rank that left before FIRST failed (early_exit):
 * LEADS when FIRST's last lines say a peer went away (then it is the
 * likely cause, and the summary begins with it), else told after FIRST's
 * failure. */
static void append_early_exit(const ss_launcher *l, const ss_rank *early,
                              const ss_rank *first, int leads, char *buf,
                              size_t buflen, size_t *len)
{
    char step[32] = "unknown";
    uint64_t last;
    if (l->cb.last_step && l->cb.last_step(l->cb.ctx, early->rank, &last))
        snprintf(step, sizeof step, "%" PRIu64, last);
    int exited = exited_before(early, first);
    double before_s = (double)(first->exited_ms -
                               (exited ? early->exited_ms
                                       : early->script_ended_ms)) /
                      1000.0;
    uint32_t others = exited ? early->left_running : early->script_ended_left;
    if (!exited) /* leads: ended_before is asked only then */
        ss_appendf(buf, buflen, len, "rank %" PRIu32 " left the job early: "
                   "its script had ended %.1f s before rank %" PRIu32
                   " failed, its process still exiting", early->global,
                   before_s, first->global);
    else if (leads)
        ss_appendf(buf, buflen, len, "rank %" PRIu32 " left the job early: "
                   "it had exited with status 0 %.1f s before rank %" PRIu32
                   " failed", early->global, before_s, first->global);
    else
        ss_appendf(buf, buflen, len, "rank %" PRIu32 " had exited with "
                   "status 0 %.1f s before", early->global, before_s);
    ss_appendf(buf, buflen, len, " (last step: %s) while %" PRIu32
               " other rank%s still ran", step, others,
               others == 1 ? "" : "s");
    if (leads)
        ss_appendf(buf, buflen, len, ", and rank %" PRIu32 "'s last lines "
                   "say a peer went away", first->global);
    ss_appendf(buf, buflen, len, ": in synchronous training a rank that "
               "leaves early makes the others' collectives fail or wait\n");
}

int ss_launcher_oom_kill(const ss_launcher *l, uint32_t rank, char *out,
                         size_t len)
{
    if (len)
        out[0] = '\0';
    if (!l || rank >= l->nprocs || !l->ranks[rank].oom_killed)
        return 0;
    const ss_rank *r = &l->ranks[rank];
    if (r->oom_killed == 1)
        snprintf(out, len, "%s", r->oom_why);
    else
        snprintf(out, len, "the host counted an OOM kill while the job ran; "
                 "the kernel's log, which names the process, cannot be read "
                 "(%s)", ss_oom_log_unreadable(l->oom));
    return r->oom_killed;
}

size_t ss_launcher_failure_summary(const ss_launcher *l, char *buf,
                                   size_t buflen)
{
    size_t len = 0;
    if (buflen > 0)
        buf[0] = '\0';
    if (!l)
        return 0;
    if (l->first_failed < 0) {
        if (!l->terminating)
            return 0;
        ss_appendf(buf, buflen, &len, "the job was stopped: %s\n", l->reason);
        append_others(l, -1, buf, buflen, &len);
        return len;
    }
    const ss_rank *r = first_failure(l);
    char how[96], sig[32];
    if (r->oom_killed == 1)
        snprintf(how, sizeof how, "killed by the kernel's OOM killer "
                 "(SIGKILL)");
    else if (r->oom_killed == 2)
        snprintf(how, sizeof how, "killed by signal SIGKILL, probably by "
                 "the kernel's OOM killer");
    else if (r->term_signal)
        snprintf(how, sizeof how, "killed by signal %s",
                 signal_name(r->term_signal, sig, sizeof sig));
    else
        snprintf(how, sizeof how, "exited with code %" PRId64, r->exit_code);
    char step[32] = "unknown";
    uint64_t last;
    if (l->cb.last_step && l->cb.last_step(l->cb.ctx, r->rank, &last))
        snprintf(step, sizeof step, "%" PRIu64, last);
    int lost_peer = names_a_lost_peer(r);
    const ss_rank *early = early_exit(l, r, lost_peer);
    int early_leads = early && lost_peer;
    if (early_leads)
        append_early_exit(l, early, r, 1, buf, buflen, &len);
    ss_appendf(buf, buflen, &len,
           "rank %" PRIu32 " failed first: %s (pid %d, last step: %s)\n",
           r->global, how, r->pid, step);
    char oom[sizeof r->oom_why + 160];
    if (ss_launcher_oom_kill(l, r->rank, oom, sizeof oom))
        ss_appendf(buf, buflen, &len, "%s\n", oom);
    append_child_oom(l, r, buf, buflen, &len);
    if (early && !early_leads)
        append_early_exit(l, early, r, 0, buf, buflen, &len);
    if (r->tail_count == 0) {
        ss_appendf(buf, buflen, &len, "rank %" PRIu32 " printed nothing\n",
               r->global);
    } else {
        if (r->tail_count == 1)
            ss_appendf(buf, buflen, &len, "last line of rank %" PRIu32, r->global);
        else
            ss_appendf(buf, buflen, &len, "last %" PRIu32 " lines of rank %" PRIu32,
                   r->tail_count, r->global);
        if (l->log_dir)
            ss_appendf(buf, buflen, &len, " (all of them in %s/rank-%" PRIu32 ".log)",
                   l->log_dir, r->global);
        ss_appendf(buf, buflen, &len, ":\n");
        uint32_t first = (r->tail_next + SS_LAUNCH_TAIL_LINES - r->tail_count) %
                         SS_LAUNCH_TAIL_LINES;
        for (uint32_t i = 0; i < r->tail_count; i++)
            ss_appendf(buf, buflen, &len, "%s%s\n", r->prefix,
                   r->tail[(first + i) % SS_LAUNCH_TAIL_LINES]);
    }
    append_others(l, (int64_t)r->rank, buf, buflen, &len);
    return len;
}

void ss_launcher_destroy(ss_launcher *l)
{
    if (!l || l->destroyed)
        return;
    l->destroyed = 1;
    signal_all(l, SIGKILL);
    ss_containment_end(l->contain);
    l->contain = NULL;
    for (uint32_t i = 0; i < l->nprocs; i++) {
        ss_rank *r = &l->ranks[i];
        if (r->proc_init)
            close_handle(l, (uv_handle_t *)&r->proc);
        if (r->handles_init) {
            r->out.open = r->err.open = 0;
            close_handle(l, (uv_handle_t *)&r->out.pipe);
            close_handle(l, (uv_handle_t *)&r->err.pipe);
            close_handle(l, (uv_handle_t *)&r->drain);
        }
        if (r->log_fd >= 0)
            close(r->log_fd);
        r->log_fd = -1;
    }
    close_handle(l, (uv_handle_t *)&l->grace);
    close_handle(l, (uv_handle_t *)&l->sweep);
    close_handle(l, (uv_handle_t *)&l->spare);
    close_handle(l, (uv_handle_t *)&l->sigchld);
}

/* ---- the exec shim ---- */

int ss_launcher_rank_exec_main(int argc, char **argv)
{
    int cmd = 1;
    const char *cgroup = NULL;
    while (cmd < argc && strcmp(argv[cmd], "--") != 0) {
        if (strcmp(argv[cmd], "--cgroup") == 0 && cmd + 1 < argc)
            cgroup = argv[++cmd];
        cmd++;
    }
    cmd++;
    if (cmd >= argc) {
        fprintf(stderr, "stepscope: usage: stepscope " SS_RANK_EXEC_ARG
                        " -- COMMAND [ARGS...] (used by stepscope run)\n");
        return 127;
    }
    /* Own process group: the terminal's Ctrl-C reaches only the controller,
     * and the launcher can signal the rank together with its children. */
    if (setpgid(0, 0) < 0)
        fprintf(stderr, "stepscope: setpgid: %s\n", strerror(errno));
    /* The launch's cgroup: whatever the command starts stays in it, even
     * a process that leaves the group, for the watchdog to end. */
    if (cgroup && ss_containment_join(cgroup) != 0)
        fprintf(stderr, "stepscope: cannot join the job's cgroup %s: %s\n",
                cgroup, strerror(errno));
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        fprintf(stderr, "stepscope: prctl(PR_SET_PDEATHSIG): %s\n",
                strerror(errno));
    /* The launcher may have died before prctl: then we were reparented. */
    const char *parent = getenv(SS_PARENT_PID_ENV);
    if (parent) {
        long expected = strtol(parent, NULL, 10);
        unsetenv(SS_PARENT_PID_ENV);
        if ((long)getppid() != expected) {
            fprintf(stderr, "stepscope: the launcher (pid %ld) is gone; not "
                            "starting '%s'\n", expected, argv[cmd]);
            return 127;
        }
    }
    execvp(argv[cmd], argv + cmd);
    fprintf(stderr, "stepscope: cannot run '%s': %s\n", argv[cmd],
            strerror(errno));
    return 127;
}
