/*
 * fake_controller.h - a minimal controller for the recorder's tests.
 *
 * fc_start() listens on a unix socket (or on loopback TCP) and serves
 * connections one after the other on a thread: it decodes every frame with
 * the real wire_decoder (WIRE_FROM_RANK, so names must be declared before
 * use and steps must increase), answers HELLO with WELCOME or REJECT, and
 * keeps the frames it decoded.  fc_wait() joins it once the expected
 * number of connections has ended or its deadline passed (its deadline
 * counts from the start of the rank).  Ranks run in
 * forked children (see rank_spawn) so that each scenario gets a fresh
 * recorder.  Test-only code: every function is static.
 */
#ifndef STEPSCOPE_LIB_FAKE_CONTROLLER_H
#define STEPSCOPE_LIB_FAKE_CONTROLLER_H

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

#define FC_TOKEN_HEX "0123456789abcdef0123456789abcdef"
#define FC_RUN_ID "test-run"
#define FC_MAX_FRAMES 512

typedef struct {
    /* settings, before fc_start() */
    int reject;          /* answer REJECT instead of WELCOME */
    int listen_delay_ms; /* create the socket only after this long */
    int stall_fd;        /* > 0: after the handshake, stop reading until a
                            byte can be read on this descriptor (the rank
                            writes it when it wants the controller back) */
    int close_after;     /* close the first connection after this many STEPs */
    int tcp;             /* listen on 127.0.0.1 (a free port), not unix */
    int conns;           /* connections to serve before stopping (1) */
    int deadline_ms;     /* give up after this long (10000) */
    uint32_t command_ms; /* answer FEATURES with a PROFILE COMMAND (id 5,
                            this duration, directory "/tmp/fc") */
    /* results, after fc_wait() */
    int n_conns;
    int n_errors;
    char error[256];
    int count[WIRE_PROFILE_DONE + 1]; /* frames decoded, by type */
    wire_counters counters;     /* the last COUNTERS received */
    int n_frames;               /* frames kept (at most FC_MAX_FRAMES) */
    wire_frame *frames;
    int *frame_conn;            /* connection index of each kept frame */
    /* internals */
    int running;
    char dir[64];
    char path[108];
    char addr[160]; /* STEPSCOPE_ADDR for the ranks */
    int listen_fd;
    pthread_t thread;
} fake_ctl;

static int64_t fc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int fc_listen_tcp(fake_ctl *fc)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof in;
    if (fd < 0 || bind(fd, (struct sockaddr *)&in, sizeof in) != 0 ||
        listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&in, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(fc->addr, sizeof fc->addr, "tcp:127.0.0.1:%u",
             (unsigned)ntohs(in.sin_port));
    return fd;
}

static int fc_listen(fake_ctl *fc)
{
    if (fc->tcp)
        return fc_listen_tcp(fc);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", fc->path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
        listen(fd, 8) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void fc_keep(fake_ctl *fc, const wire_frame *f, int conn)
{
    if (f->type <= WIRE_PROFILE_DONE)
        fc->count[f->type]++;
    if (f->type == WIRE_COUNTERS)
        fc->counters = f->u.counters;
    if (fc->n_frames < FC_MAX_FRAMES) {
        fc->frames[fc->n_frames] = *f;
        fc->frame_conn[fc->n_frames] = conn;
        fc->n_frames++;
    }
}

static void fc_error(fake_ctl *fc, const char *what)
{
    fprintf(stderr, "fake controller: %s\n", what);
    if (!fc->n_errors++)
        snprintf(fc->error, sizeof fc->error, "%s", what);
}

/* Sends the M bytes of OUT to the rank on FD; a rank that has already gone
 * (its last frames may be read after its exit) is not an error. */
static void fc_send(fake_ctl *fc, int fd, const uint8_t *out, size_t m,
                    const char *what)
{
    if (send(fd, out, m, MSG_NOSIGNAL) != (ssize_t)m && errno != EPIPE &&
        errno != ECONNRESET)
        fc_error(fc, what);
}

/* Serves one connection until EOF, a protocol error or DEADLINE. */
static void fc_serve(fake_ctl *fc, int fd, int conn, int64_t deadline)
{
    uint8_t token[WIRE_TOKEN_SIZE];
    wire_token_parse(FC_TOKEN_HEX, token);
    wire_decoder dec;
    wire_decoder_init(&dec, WIRE_FROM_RANK, token, FC_RUN_ID);
    static uint8_t buf[1 << 16];
    static wire_frame frame;
    size_t len = 0;
    int stalled = 0;
    while (fc_now_ms() < deadline) {
        if (stalled) {
            struct pollfd s = {.fd = fc->stall_fd, .events = POLLIN};
            if (poll(&s, 1, 20) <= 0)
                continue;
            stalled = 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0)
            return; /* EOF (or error): the rank is gone */
        len += (size_t)n;
        size_t pos = 0, used;
        char err[256];
        wire_result rc;
        while ((rc = wire_decoder_next(&dec, buf + pos, len - pos, &frame,
                                       &used, err, sizeof err)) == WIRE_OK) {
            pos += used;
            fc_keep(fc, &frame, conn);
            if (frame.type == WIRE_STEP && conn == 0 && fc->close_after &&
                fc->count[WIRE_STEP] >= fc->close_after)
                return;
            uint8_t out[300];
            if (frame.type == WIRE_FEATURES && fc->command_ms) {
                wire_command cmd = {5, WIRE_COMMAND_PROFILE, fc->command_ms,
                                    "/tmp/fc"};
                size_t m = wire_encode_command(out, sizeof out, &cmd);
                fc_send(fc, fd, out, m, "cannot send COMMAND");
            }
            if (frame.type != WIRE_HELLO)
                continue;
            size_t m;
            if (fc->reject) {
                wire_reject rj = {.code = 1};
                snprintf(rj.reason, sizeof rj.reason, "test says no");
                m = wire_encode_reject(out, sizeof out, &rj);
            } else {
                wire_welcome w = {.version = WIRE_VERSION};
                m = wire_encode_welcome(out, sizeof out, &w);
            }
            fc_send(fc, fd, out, m, "cannot answer HELLO");
            if (fc->reject)
                return;
            stalled = fc->stall_fd > 0;
        }
        if (rc == WIRE_ERROR) {
            fc_error(fc, err);
            return;
        }
        memmove(buf, buf + pos, len - pos);
        len -= pos;
    }
}

static void *fc_main(void *arg)
{
    fake_ctl *fc = arg;
    int64_t deadline = fc_now_ms() + fc->deadline_ms;
    if (fc->listen_fd < 0) {
        fc_sleep_ms(fc->listen_delay_ms);
        fc->listen_fd = fc_listen(fc);
        if (fc->listen_fd < 0) {
            fc_error(fc, "cannot listen");
            return NULL;
        }
    }
    while (fc->n_conns < fc->conns && fc_now_ms() < deadline) {
        struct pollfd pfd = {.fd = fc->listen_fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        int fd = accept4(fc->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        fc_serve(fc, fd, fc->n_conns, deadline);
        close(fd);
        fc->n_conns++;
    }
    return NULL;
}

/* Prepares the controller: fill the settings of *FC (zeroed) first; the
 * socket path is fc->path.  The serving thread starts in rank_spawn(),
 * after the fork: a child forked while another thread is inside malloc
 * (as a thread starting up is, under the sanitizers) may inherit a held
 * allocator lock.  Returns 0 or -1. */
static int fc_start(fake_ctl *fc)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(fc->dir, sizeof fc->dir, "%s/ssrecXXXXXX",
             tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(fc->dir))
        return -1;
    snprintf(fc->path, sizeof fc->path, "%s/ctl.sock", fc->dir);
    snprintf(fc->addr, sizeof fc->addr, "unix:%s", fc->path);
    if (fc->tcp && fc->listen_delay_ms)
        return -1; /* the port is known only once listening */
    if (!fc->conns)
        fc->conns = 1;
    if (!fc->deadline_ms)
        fc->deadline_ms = 10000;
    fc->frames = calloc(FC_MAX_FRAMES, sizeof *fc->frames);
    fc->frame_conn = calloc(FC_MAX_FRAMES, sizeof *fc->frame_conn);
    if (!fc->frames || !fc->frame_conn)
        return -1;
    fc->listen_fd = -1;
    if (!fc->listen_delay_ms && (fc->listen_fd = fc_listen(fc)) < 0)
        return -1;
    return 0;
}

/* Joins the controller thread and removes its socket. */
static void fc_wait(fake_ctl *fc)
{
    if (fc->running)
        pthread_join(fc->thread, NULL);
    fc->running = 0;
    if (fc->listen_fd >= 0)
        close(fc->listen_fd);
    unlink(fc->path);
    rmdir(fc->dir);
}

static void fc_free(fake_ctl *fc)
{
    free(fc->frames);
    free(fc->frame_conn);
}

/* The I-th kept frame of TYPE, or NULL. */
static const wire_frame *fc_find(const fake_ctl *fc, wire_type type, int i)
{
    for (int k = 0; k < fc->n_frames; k++)
        if (fc->frames[k].type == type && i-- == 0)
            return &fc->frames[k];
    return NULL;
}

/* ---- rank processes ---- */

/* Sets the environment a controller gives a rank, pointing at FC (or at a
 * socket nobody listens on when FC is NULL). */
static void rank_env(const fake_ctl *fc, unsigned rank, unsigned world)
{
    char num[16];
    setenv("STEPSCOPE_ADDR",
           fc ? fc->addr : "unix:/nonexistent-stepscope-dir/none.sock", 1);
    setenv("STEPSCOPE_TOKEN", FC_TOKEN_HEX, 1);
    setenv("STEPSCOPE_RUN_ID", FC_RUN_ID, 1);
    snprintf(num, sizeof num, "%u", rank);
    setenv("RANK", num, 1);
    snprintf(num, sizeof num, "%u", world);
    setenv("WORLD_SIZE", num, 1);
    unsetenv("LOCAL_RANK");
    unsetenv("TORCHELASTIC_RESTART_COUNT");
}

/* Runs BODY in a child process whose stderr goes to STDERR_PATH (unless
 * NULL) and which exits with exit(BODY's result): the atexit handlers,
 * ss_shutdown among them, run as in a real program.  Then starts FC's
 * serving thread (unless FC is NULL).  Returns the pid, or -1. */
static pid_t rank_spawn(int (*body)(void *), void *arg, fake_ctl *fc,
                        const char *stderr_path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0 && fc && !fc->running &&
            pthread_create(&fc->thread, NULL, fc_main, fc) == 0)
            fc->running = 1;
        return pid;
    }
#ifdef STEPSCOPE_TESTING_H
    testing_failures_ = 0; /* the child reports only its own failures */
#endif
    if (fc && fc->listen_fd >= 0)
        close(fc->listen_fd); /* the rank must not hold the listener */
    if (stderr_path) {
        int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                      0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
    }
    exit(body(arg));
}

/* Waits for the rank; returns its exit status, or -1 when it did not exit
 * normally (a crash). */
static int rank_wait(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* Reads a small text file into BUF (NUL-terminated); returns its length. */
static size_t read_text(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    if (fd >= 0) {
        ssize_t n;
        while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
            len += (size_t)n;
        close(fd);
    }
    buf[len] = '\0';
    return len;
}

#endif
