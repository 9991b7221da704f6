/*
 * health.c - a node's health checks before an attempt (health.h): free
 * disk space, the GPUs through NVML, the master port, and the site's
 * command as a child process on the loop with a timeout and a bounded
 * capture of its output.
 *
 * The command's output is read until the deadline at most: at the
 * deadline its process group is killed and the pipe closed, whoever holds
 * it open.  When the command's own process exits first, a child it left
 * in the background may still hold the pipe: the rest of the output is
 * read for SS_HEALTH_DRAIN_MS more (not past the deadline), then the
 * pipe is closed and the group, whatever is left of it, killed.
 */
#include "health.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "model.h"
#include "gpu_backend.h"

#define SS_HEALTH_DRAIN_MS 500

void ss_health_config_defaults(ss_health_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->min_free_gb = SS_HEALTH_MIN_FREE_GB_DEFAULT;
    cfg->gpus = 1;
    cfg->timeout_ms = SS_HEALTH_TIMEOUT_MS_DEFAULT;
}

static void note(ss_health_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(ss_health_result *out, const char *fmt, ...)
{
    size_t len = strlen(out->notes);
    if (len + 3 >= sizeof out->notes)
        return;
    if (len)
        len += (size_t)snprintf(out->notes + len, sizeof out->notes - len,
                                "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->notes + len, sizeof out->notes - len, fmt, ap);
    va_end(ap);
}

static int failed(ss_health_result *out, const char *check, const char *fmt,
                  ...) __attribute__((format(printf, 3, 4)));

static int failed(ss_health_result *out, const char *check, const char *fmt,
                  ...)
{
    out->ok = 0;
    snprintf(out->check, sizeof out->check, "%s", check);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->output, sizeof out->output, fmt, ap);
    va_end(ap);
    return -1;
}

int ss_health_check_disk(const char *dir, double min_free_gb,
                         ss_health_result *out)
{
    if (!dir)
        dir = ".";
    if (min_free_gb <= 0)
        return 0;
    struct statvfs st;
    if (statvfs(dir, &st) != 0)
        return failed(out, "disk", "cannot read the free space of %s: %s",
                      dir, strerror(errno));
    double free_gb = (double)st.f_bavail * (double)st.f_frsize / 1e9;
    if (free_gb < min_free_gb)
        return failed(out, "disk", "%s has %.2f GB free, less than the "
                      "%.2f GB required (--min-free-gb)", dir, free_gb,
                      min_free_gb);
    note(out, "disk: %.1f GB free in %s", free_gb, dir);
    return 0;
}

int ss_health_check_gpus(const char *nvml_lib, ss_health_result *out)
{
    ss_gpu_backend *n = ss_gpu_backend_open(nvml_lib, NULL);
    if (!n)
        return failed(out, "gpu", "out of memory opening the GPU library");
    int rc = 0;
    ss_gpu_state state = ss_gpu_backend_state(n);
    if (state == SS_GPU_ABSENT) {
        note(out, "gpu: skipped (%s)", ss_gpu_backend_why(n));
    } else if (state == SS_GPU_UNUSABLE) {
        rc = failed(out, "gpu", "a GPU library is installed but cannot be "
                    "used: %s", ss_gpu_backend_why(n));
    } else {
        uint32_t count = ss_gpu_backend_count(n);
        char bad[SS_HEALTH_OUTPUT_MAX] = "";
        size_t len = 0;
        for (uint32_t i = 0; i < count; i++) {
            ss_gpu_sample s;
            const ss_gpu_info *g = ss_gpu_backend_gpu(n, i);
            const char *uuid = g && g->uuid[0] ? g->uuid : "?";
            char what[256] = "";
            if (ss_gpu_backend_sample(n, i, 0, &s) != 0)
                snprintf(what, sizeof what, "cannot be read (lost?)");
            else if (s.ecc_uncorrected != SS_MISSING && s.ecc_uncorrected > 0)
                snprintf(what, sizeof what, "%" PRId64 " uncorrected ECC "
                         "error%s", s.ecc_uncorrected,
                         s.ecc_uncorrected == 1 ? "" : "s");
            else if (s.xid_count != SS_MISSING && s.xid_count > 0)
                snprintf(what, sizeof what, "%" PRId64 " Xid error%s (last "
                         "Xid %" PRId64 ")", s.xid_count,
                         s.xid_count == 1 ? "" : "s", s.last_xid);
            if (what[0] && len < sizeof bad)
                len += (size_t)snprintf(bad + len, sizeof bad - len,
                                        "GPU %u (%s): %s\n", i, uuid, what);
        }
        if (bad[0])
            rc = failed(out, "gpu", "%s", bad);
        else if (count == 0)
            rc = failed(out, "gpu", "%s sees no GPU",
                        ss_gpu_backend_name(n));
        else
            note(out, "gpu: %u GPU%s without ECC or Xid errors", count,
                 count == 1 ? "" : "s");
    }
    ss_gpu_backend_close(n);
    return rc;
}

int ss_health_check_port(uint16_t port, ss_health_result *out)
{
    if (port == 0)
        return 0;
    /* What the rendezvous store will do: bind every address of the port,
     * reusing one in TIME_WAIT. */
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int v6 = fd >= 0;
    if (fd < 0)
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return failed(out, "master_port", "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6,
                                 .sin6_port = htons(port),
                                 .sin6_addr = in6addr_any};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    }
    int saved = errno;
    close(fd);
    if (rc != 0)
        return failed(out, "master_port", "the master port %u cannot be "
                      "bound: %s (another job or a process left over holds "
                      "it)", (unsigned)port, strerror(saved));
    note(out, "master_port: %u free", (unsigned)port);
    return 0;
}

/* ---- the whole run, with the command as a child on the loop ---- */

typedef struct {
    uv_process_t proc; /* first */
    uv_pipe_t out;
    uv_timer_t timer;
    ss_health_config cfg;
    ss_health_done done;
    void *ctx;
    ss_health_result res;
    int open_handles;
    int exited, timed_out, out_closed;
    int interrupted;      /* the signal that stopped it, 0: none */
    uint64_t deadline_ms; /* loop time */
    int64_t exit_status;
    int term_signal;
    /* the output, a ring of its last bytes */
    char ring[SS_HEALTH_OUTPUT_MAX];
    size_t ring_len, ring_pos;
    uint64_t total;
    char readbuf[4096];
} health_run;

static void keep_output(health_run *h, const char *p, size_t n)
{
    h->total += n;
    for (size_t i = 0; i < n; i++) {
        h->ring[h->ring_pos] = p[i] ? p[i] : ' ';
        h->ring_pos = (h->ring_pos + 1) % sizeof h->ring;
        if (h->ring_len < sizeof h->ring)
            h->ring_len++;
    }
}

static void finish(health_run *h)
{
    if (h->open_handles > 0)
        return;
    if (h->res.ok == 1 && h->cfg.command) {
        char tail[SS_HEALTH_OUTPUT_MAX + 1];
        size_t start = (h->ring_pos + sizeof h->ring - h->ring_len) %
                       sizeof h->ring;
        for (size_t i = 0; i < h->ring_len; i++)
            tail[i] = h->ring[(start + i) % sizeof h->ring];
        tail[h->ring_len] = '\0';
        int failed_cmd = h->timed_out || h->term_signal ||
                         h->exit_status != 0;
        if (h->interrupted) {
            h->res.ok = 0;
            h->res.interrupted = h->interrupted;
            snprintf(h->res.check, sizeof h->res.check, "command");
            snprintf(h->res.output, sizeof h->res.output, "'%.60s' was "
                     "stopped by %s", h->cfg.command,
                     strsignal(h->interrupted));
        } else if (failed_cmd) {
            h->res.ok = 0;
            snprintf(h->res.check, sizeof h->res.check, "command");
            char head[200];
            if (h->timed_out)
                snprintf(head, sizeof head, "timed out after %.1f s",
                         h->cfg.timeout_ms / 1000.0);
            else if (h->term_signal)
                snprintf(head, sizeof head, "killed by signal %d",
                         h->term_signal);
            else
                snprintf(head, sizeof head, "exited with status %" PRId64,
                         h->exit_status);
            /* The status line first, then as much of the tail as fits. */
            size_t hl = (size_t)snprintf(h->res.output, sizeof h->res.output,
                                         "'%.60s' %s%s\n", h->cfg.command,
                                         head,
                                         h->total > h->ring_len
                                             ? " (the output's end)"
                                             : "");
            if (hl < sizeof h->res.output) {
                size_t room = sizeof h->res.output - 1 - hl;
                const char *t = tail;
                if (strlen(t) > room)
                    t += strlen(t) - room;
                memcpy(h->res.output + hl, t, strlen(t) + 1);
            }
        } else {
            note(&h->res, "command: '%.60s' passed", h->cfg.command);
        }
    }
    if (h->done)
        h->done(h->ctx, &h->res);
    free(h);
}

static void on_closed(uv_handle_t *handle)
{
    health_run *h = handle->data;
    h->open_handles--;
    finish(h);
}

static void close_handle(health_run *h, uv_handle_t *handle)
{
    if (!uv_is_closing(handle))
        uv_close(handle, on_closed);
}

/* No more of the output is read. */
static void close_output(health_run *h)
{
    h->out_closed = 1;
    close_handle(h, (uv_handle_t *)&h->out);
    if (h->exited)
        close_handle(h, (uv_handle_t *)&h->timer);
}

/* The command's process group, the children it left behind included
 * (it leads a session of its own). */
static void kill_group(health_run *h)
{
    if (h->proc.pid > 0)
        kill(-h->proc.pid, SIGKILL);
}

/* After the command exited, the pipe is still open past the drain: a
 * child it left holds it. */
static void on_drained(uv_timer_t *t)
{
    health_run *h = t->data;
    kill_group(h);
    close_output(h);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
    health_run *h = p->data;
    h->exited = 1;
    h->exit_status = status;
    h->term_signal = term_signal;
    close_handle(h, (uv_handle_t *)&h->proc);
    if (h->out_closed) {
        uv_timer_stop(&h->timer);
        close_handle(h, (uv_handle_t *)&h->timer);
        return;
    }
    uint64_t now = uv_now(h->timer.loop);
    uint64_t left = h->deadline_ms > now ? h->deadline_ms - now : 0;
    uv_timer_start(&h->timer, on_drained,
                   left < SS_HEALTH_DRAIN_MS ? left : SS_HEALTH_DRAIN_MS, 0);
}

static void on_timeout(uv_timer_t *t)
{
    health_run *h = t->data;
    h->timed_out = 1;
    kill_group(h);
    uv_process_kill(&h->proc, SIGKILL);
    close_output(h);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *b)
{
    health_run *h = handle->data;
    (void)suggested;
    b->base = h->readbuf;
    b->len = sizeof h->readbuf;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    health_run *h = s->data;
    if (n > 0)
        keep_output(h, b->base, (size_t)n);
    else if (n < 0)
        close_output(h);
}

/* ss_health_start, and the run it started when that is the command's
 * (NULL when it answered at once or failed). */
static int health_begin(uv_loop_t *loop, const ss_health_config *cfg,
                        ss_health_done done, void *ctx, health_run **run,
                        char *err, size_t errlen)
{
    *run = NULL;
    health_run *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->cfg = *cfg;
    if (!h->cfg.timeout_ms)
        h->cfg.timeout_ms = SS_HEALTH_TIMEOUT_MS_DEFAULT;
    h->done = done;
    h->ctx = ctx;
    h->res.ok = 1;
    if (ss_health_check_disk(cfg->checkpoint_dir, cfg->min_free_gb,
                             &h->res) != 0 ||
        (cfg->gpus && ss_health_check_gpus(cfg->nvml_lib, &h->res) != 0) ||
        ss_health_check_port(cfg->master_port, &h->res) != 0 ||
        !cfg->command) {
        /* Answer on the loop, as for the command. */
        uv_timer_init(loop, &h->timer);
        h->timer.data = h;
        h->open_handles = 1;
        uv_close((uv_handle_t *)&h->timer, on_closed);
        return 0;
    }
    uv_pipe_init(loop, &h->out, 0);
    h->out.data = h;
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->proc.data = h;
    /* Its stderr joins its stdout: one capture, in order. */
    char *args[] = {"/bin/sh", "-c", "exec 2>&1; eval \"$1\"", "sh",
                    (char *)cfg->command, NULL};
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&h->out;
    stdio[2].flags = UV_IGNORE;
    uv_process_options_t opt;
    memset(&opt, 0, sizeof opt);
    opt.file = args[0];
    opt.args = args;
    opt.stdio = stdio;
    opt.stdio_count = 3;
    opt.exit_cb = on_exit_cb;
    opt.flags = UV_PROCESS_DETACHED; /* its own process group */
    h->open_handles = 3;
    int rc = uv_spawn(loop, &h->proc, &opt);
    if (rc < 0) {
        snprintf(err, errlen, "cannot run --health-check '%s': %s",
                 cfg->command, uv_strerror(rc));
        h->done = NULL; /* freed once its handles have closed */
        close_handle(h, (uv_handle_t *)&h->proc);
        close_handle(h, (uv_handle_t *)&h->out);
        close_handle(h, (uv_handle_t *)&h->timer);
        return -1;
    }
    uv_read_start((uv_stream_t *)&h->out, on_alloc, on_read);
    h->deadline_ms = uv_now(loop) + h->cfg.timeout_ms;
    uv_timer_start(&h->timer, on_timeout, h->cfg.timeout_ms, 0);
    *run = h;
    return 0;
}

int ss_health_start(uv_loop_t *loop, const ss_health_config *cfg,
                    ss_health_done done, void *ctx, char *err, size_t errlen)
{
    health_run *h;
    return health_begin(loop, cfg, done, ctx, &h, err, errlen);
}

/* ss_health_run's private loop: the result, and the signals that stop
 * the command while the run's own loop cannot hear them. */
typedef struct {
    ss_health_result *out;
    health_run *run;  /* NULL once it answered */
    uv_signal_t sigs[3];
} sync_run;

static void sync_done(void *ctx, const ss_health_result *res)
{
    sync_run *sr = ctx;
    *sr->out = *res;
    sr->run = NULL;
    for (int i = 0; i < 3; i++)
        uv_close((uv_handle_t *)&sr->sigs[i], NULL);
}

static void on_sync_signal(uv_signal_t *sig, int signum)
{
    sync_run *sr = sig->data;
    health_run *h = sr->run;
    if (!h || h->interrupted || h->exited)
        return;
    h->interrupted = signum;
    kill_group(h);
    uv_process_kill(&h->proc, SIGKILL);
    close_output(h);
}

int ss_health_run(const ss_health_config *cfg, ss_health_result *out)
{
    memset(out, 0, sizeof *out);
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        snprintf(out->check, sizeof out->check, "command");
        snprintf(out->output, sizeof out->output, "cannot start a loop");
        return -1;
    }
    sync_run sr = {.out = out};
    static const int signums[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&loop, &sr.sigs[i]);
        sr.sigs[i].data = &sr;
        uv_signal_start(&sr.sigs[i], on_sync_signal, signums[i]);
    }
    char err[300];
    if (health_begin(&loop, cfg, sync_done, &sr, &sr.run, err,
                     sizeof err) != 0) {
        out->ok = 0;
        snprintf(out->check, sizeof out->check, "command");
        snprintf(out->output, sizeof out->output, "%s", err);
        for (int i = 0; i < 3; i++)
            uv_close((uv_handle_t *)&sr.sigs[i], NULL);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return out->ok ? 0 : -1;
}
