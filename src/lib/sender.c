/*
 * sender.c - the sender thread: drain, fold, encode, connect, write.
 *
 * All state lives in one static struct owned by the sender thread; other
 * threads read only the atomics (conn, the published drop counters) and
 * the fork hooks touch the socket under sender_fd_mu.  The loop sleeps in
 * ppoll() on the socket until the next 10 ms tick, so a step's record
 * leaves at most ~10 ms after ss_step_end() without the training thread
 * ever signalling anything.
 *
 * Outgoing data: frames are appended whole to `out` (bounded, OUT_CAP) or
 * not at all.  The end offset of every queued STEP frame is kept in `fifo`
 * so that, when a connection is lost with data still queued, exactly the
 * records that did not leave are counted as dropped.  Step records leave
 * OUT_CONTROL_RESERVE bytes free, so that COUNTERS, CHECKPOINT and BYE
 * still fit when a stalled controller has let the buffer fill up.  Names
 * are declared with a NAME frame once per connection, in the same append
 * as the first STEP that uses them.
 *
 * Live state: after each drain the fold's view of the current step and
 * phase (ss__fold_status) is compared with the last STATUS queued; a
 * changed state is queued at most every STATUS_MIN_GAP_NS, an unchanged
 * one every STATUS_EVERY_NS (a heartbeat).  STATUS frames obey the same
 * reserve as steps and are simply retried on the next tick when they do
 * not fit.
 *
 * Commands: once the process enabled profiling, FEATURES follows HELLO on
 * every connection.  A COMMAND from the controller is parked in `prof`
 * (under prof_mu) and flagged in prof_pending, which the training thread
 * polls with one load at step boundaries; its answers wait in the same
 * struct until the loop queues them as PROFILE_DONE.  An answer whose
 * connection is lost is dropped: the controller times the request out.
 */
#include "sender.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collective.h"
#include "fold.h"
#include "names.h"
#include "stepscope.h"
#include "threads.h"

#define TICK_NS (10 * SS__MS)
#define RETRY_NS (500 * SS__MS)
#define CONNECT_TIMEOUT_NS (2 * SS__SEC)
#define COUNTERS_EVERY_NS SS__SEC
#define STATUS_EVERY_NS SS__SEC
#define STATUS_MIN_GAP_NS (100 * SS__MS)
#define FLUSH_TIMEOUT_NS SS__SEC
#define OUT_CAP (2u << 20) /* room for several steps of full vectors */
#define OUT_CONTROL_RESERVE 4096u /* kept free of steps for COUNTERS, BYE... */
#define FIFO_CAP 16384u
#define IN_CAP (WIRE_HEADER_SIZE + WIRE_MAX_PAYLOAD)
#define NAME_FRAME_MAX (WIRE_HEADER_SIZE + 4 + 1 + WIRE_MAX_NAME_LEN)
#define SCRATCH_CAP                                                           \
    ((3 * WIRE_MAX_ITEMS + WIRE_MAX_NAME_ID) * NAME_FRAME_MAX +               \
     WIRE_STEP_FRAME_MAX)
#define LABELS_BUDGET (1u << 20) /* bytes of labels a process may hold */

typedef enum {
    C_IDLE = 0,       /* no socket; next attempt at next_connect */
    C_CONNECTING = 1, /* TCP connect in progress; HELLO queued */
    C_OPEN = 2,       /* connected, HELLO queued or sent, no WELCOME yet */
    C_READY = 3,      /* WELCOME received */
    C_REJECTED = 4    /* REJECT received: nothing is sent any more */
} conn_state;

static struct {
    ss__config cfg;
    pthread_t thread;
    int started;
    int stop; /* atomic: ss__sender_stop() asks the loop to finish */

    int fd;   /* the socket, -1 when none; changes under sender_fd_mu */
    int conn; /* atomic conn_state */
    ss__mono_ns next_connect, connect_deadline;

    wire_decoder dec;
    wire_frame frame;
    uint8_t in[IN_CAP];
    size_t in_len;

    uint8_t *out; /* OUT_CAP bytes; [out_off, out_len) not yet written */
    size_t out_off, out_len;
    uint64_t out_appended, out_written; /* bytes since the connection began */
    uint64_t fifo[FIFO_CAP];            /* end offsets of queued STEPs */
    size_t fifo_head, fifo_n;
    uint8_t declared[SS__NAME_SLOTS / 8 + 1]; /* names sent on this conn */

    ss__fold fold;
    wire_step rec; /* the record being encoded */
    uint8_t scratch[SCRATCH_CAP];
    uint8_t frame_buf[WIRE_HEADER_SIZE + WIRE_MAX_PAYLOAD]; /* one frame */
    uint32_t labels_sent[SS__NAME_SLOTS]; /* lab.gen sent on this conn */
    uint64_t own_dropped_events, own_dropped_records, own_dropped_vectors;
    uint64_t pub_dropped_events, pub_dropped_records; /* atomic */
    uint64_t pub_dropped_vectors;                     /* atomic */
    wire_status status;      /* the last STATUS queued on this connection */
    int have_status;         /* 0: none queued yet on this connection */
    ss__mono_ns status_at;   /* when it was queued */
    int said_unreachable, said_lost, said_bad_frame;
} S; /* zero-initialised (no .data copy of this large struct) */

#define SENDER_MAX_ANSWERS 8

/* Profiling requests and answers, shared with the application's threads
 * under prof_mu (rare, never on the hot path); pending and enabled are
 * also read without it. */
static struct {
    int enabled;       /* atomic: ss_profile_enable() was called */
    int pending;       /* atomic: `req` holds a request not yet taken */
    ss_profile_request req;
    wire_profile_done answers[SENDER_MAX_ANSWERS];
    unsigned n_answers;
    int features_sent; /* sender thread: FEATURES queued on this conn */
} prof;
static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;

/* Labels of vectors (ss_values_labels), shared with the application's
 * threads under lab_mu: per name id, its labels as consecutive
 * NUL-terminated strings, their count, and a generation bumped at each
 * change (0: none).  The sender sends a name's labels once per
 * connection and generation, with the first step that carries the
 * vector. */
static struct {
    char *text[SS__NAME_SLOTS];
    size_t bytes[SS__NAME_SLOTS];
    uint32_t n[SS__NAME_SLOTS];
    uint32_t gen[SS__NAME_SLOTS];
    uint32_t next_gen;
    size_t total;
} lab;
static pthread_mutex_t lab_mu = PTHREAD_MUTEX_INITIALIZER;

/* Held while S.fd changes, and across fork(). */
static pthread_mutex_t sender_fd_mu = PTHREAD_MUTEX_INITIALIZER;

static int accepting(void)
{
    int c = S.conn;
    return c == C_CONNECTING || c == C_OPEN || c == C_READY;
}

static void set_conn(conn_state c)
{
    __atomic_store_n(&S.conn, (int)c, __ATOMIC_RELEASE);
}

static uint64_t total_dropped_events(void)
{
    return ss__threads_dropped() + S.fold.dropped_events + S.own_dropped_events;
}

static uint64_t total_dropped_records(void)
{
    return S.fold.dropped_records + S.own_dropped_records;
}

static uint64_t total_dropped_vectors(void)
{
    return S.fold.dropped_vectors + S.own_dropped_vectors;
}

static void publish_counters(void)
{
    __atomic_store_n(&S.pub_dropped_vectors, total_dropped_vectors(),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&S.pub_dropped_events,
                     S.fold.dropped_events + S.own_dropped_events,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&S.pub_dropped_records, total_dropped_records(),
                     __ATOMIC_RELAXED);
}

/* ---- outgoing buffer ---- */

static size_t out_free(void)
{
    return OUT_CAP - (S.out_len - S.out_off);
}

/* Appends N bytes, which must fit (out_free() >= N). */
static void out_append(const uint8_t *p, size_t n)
{
    if (OUT_CAP - S.out_len < n) {
        memmove(S.out, S.out + S.out_off, S.out_len - S.out_off);
        S.out_len -= S.out_off;
        S.out_off = 0;
    }
    memcpy(S.out + S.out_len, p, n);
    S.out_len += n;
    S.out_appended += n;
}

/* Appends one frame that is not a step record, if it fits.  Returns 0 or
 * -1 when it was dropped. */
static int out_frame(const uint8_t *p, size_t n)
{
    if (n == 0 || out_free() < n)
        return -1;
    out_append(p, n);
    return 0;
}

/* Forgets everything queued; the records among it are lost. */
static void out_discard(void)
{
    S.own_dropped_records += S.fifo_n;
    S.fifo_n = S.fifo_head = 0;
    S.out_off = S.out_len = 0;
    S.out_appended = S.out_written = 0;
}

/* ---- connection ---- */

static void close_fd(void)
{
    pthread_mutex_lock(&sender_fd_mu);
    if (S.fd >= 0)
        close(S.fd);
    S.fd = -1;
    pthread_mutex_unlock(&sender_fd_mu);
}

static void lose_connection(const char *why)
{
    if (!S.said_lost) {
        S.said_lost = 1;
        fprintf(stderr,
                "stepscope: lost the connection to the controller at %s (%s); "
                "reconnecting, records are dropped meanwhile\n",
                S.cfg.addr_text, why);
    }
    out_discard();
    close_fd();
    set_conn(C_IDLE);
    S.next_connect = ss__now() + RETRY_NS;
}

static void connect_failed(ss__mono_ns now, int err)
{
    if (!S.said_unreachable) {
        S.said_unreachable = 1;
        fprintf(stderr,
                "stepscope: cannot reach the controller at %s (%s); "
                "retrying, records are dropped meanwhile\n",
                S.cfg.addr_text, strerror(err));
    }
    out_discard();
    close_fd();
    set_conn(C_IDLE);
    S.next_connect = now + RETRY_NS;
}

static void try_connect(ss__mono_ns now)
{
    int family = S.cfg.addr.ss_family;
    pthread_mutex_lock(&sender_fd_mu);
    S.fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    pthread_mutex_unlock(&sender_fd_mu);
    if (S.fd < 0) {
        connect_failed(now, errno);
        return;
    }
    if (family != AF_UNIX) {
        int one = 1;
        setsockopt(S.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(S.fd, (const struct sockaddr *)&S.cfg.addr,
                S.cfg.addr_len) == 0) {
        set_conn(C_OPEN);
    } else if (errno == EINPROGRESS) {
        set_conn(C_CONNECTING);
        S.connect_deadline = now + CONNECT_TIMEOUT_NS;
    } else {
        connect_failed(now, errno);
        return;
    }
    wire_decoder_init(&S.dec, WIRE_FROM_CONTROLLER, NULL, NULL);
    S.in_len = 0;
    memset(S.declared, 0, sizeof S.declared);
    memset(S.labels_sent, 0, sizeof S.labels_sent);
    S.have_status = 0;
    prof.features_sent = 0;
    out_discard();
    S.cfg.hello.pid = (uint32_t)getpid();
    size_t n = wire_encode_hello(S.scratch, sizeof S.scratch, &S.cfg.hello);
    out_frame(S.scratch, n);
}

static void finish_connect(ss__mono_ns now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(S.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err)
        connect_failed(now, err);
    else
        set_conn(C_OPEN);
}

static void rejected(const wire_reject *r)
{
    fprintf(stderr, "stepscope: the controller at %s rejected rank %u: %s\n",
            S.cfg.addr_text, (unsigned)S.cfg.hello.rank, r->reason);
    out_discard();
    close_fd();
    set_conn(C_REJECTED);
}

/* Decodes what the controller sent.  Returns -1 when the connection ended. */
static int handle_input(void)
{
    size_t pos = 0;
    for (;;) {
        size_t used = 0;
        char err[160];
        wire_result rc = wire_decoder_next(&S.dec, S.in + pos, S.in_len - pos,
                                           &S.frame, &used, err, sizeof err);
        if (rc == WIRE_NEED_MORE)
            break;
        if (rc == WIRE_ERROR) {
            if (!S.said_bad_frame) {
                S.said_bad_frame = 1;
                fprintf(stderr, "stepscope: bad frame from the controller: "
                                "%s\n", err);
            }
            lose_connection("bad frame");
            return -1;
        }
        pos += used;
        if (S.frame.type == WIRE_WELCOME) {
            set_conn(C_READY);
        } else if (S.frame.type == WIRE_REJECT) {
            rejected(&S.frame.u.reject);
            return -1;
        } else if (S.frame.type == WIRE_COMMAND) {
            const wire_command *c = &S.frame.u.command;
            pthread_mutex_lock(&prof_mu);
            prof.req.request_id = c->request_id;
            prof.req.duration_ms = c->duration_ms;
            snprintf(prof.req.dir, sizeof prof.req.dir, "%s", c->dir);
            __atomic_store_n(&prof.pending, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&prof_mu);
        }
    }
    memmove(S.in, S.in + pos, S.in_len - pos);
    S.in_len -= pos;
    return 0;
}

static void read_input(void)
{
    for (;;) {
        ssize_t n = recv(S.fd, S.in + S.in_len, sizeof S.in - S.in_len,
                         MSG_DONTWAIT);
        if (n > 0) {
            S.in_len += (size_t)n;
            if (handle_input() < 0)
                return;
            continue;
        }
        if (n == 0) {
            lose_connection("closed by the controller");
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            lose_connection(strerror(errno));
        return;
    }
}

static void write_output(void)
{
    while (S.out_len > S.out_off) {
        ssize_t n = send(S.fd, S.out + S.out_off, S.out_len - S.out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            S.out_off += (size_t)n;
            S.out_written += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        lose_connection(n < 0 ? strerror(errno) : "short write");
        return;
    }
    while (S.fifo_n && S.fifo[S.fifo_head] <= S.out_written) {
        S.fifo_head = (S.fifo_head + 1) % FIFO_CAP;
        S.fifo_n--;
    }
    if (S.out_off == S.out_len)
        S.out_off = S.out_len = 0;
}

/* Writes now if the socket is ready for it (a cheap, non-blocking try). */
static void try_write(void)
{
    int c = S.conn;
    if ((c == C_OPEN || c == C_READY) && S.out_len > S.out_off)
        write_output();
}

/* Waits for socket events or until DEADLINE and handles them. */
static void poll_once(ss__mono_ns now, ss__mono_ns deadline)
{
    struct pollfd pfd = {.fd = S.fd, .events = 0};
    int c = S.conn;
    if (S.fd >= 0) {
        pfd.events = POLLIN;
        if (c == C_CONNECTING || S.out_len > S.out_off)
            pfd.events |= POLLOUT;
    }
    ss__dur_ns wait = deadline > now ? deadline - now : 0;
    struct timespec ts = {wait / SS__SEC, wait % SS__SEC};
    int n = ppoll(&pfd, S.fd >= 0 ? 1 : 0, &ts, NULL);
    if (n <= 0 || S.fd < 0)
        return;
    if (c == C_CONNECTING) {
        if (pfd.revents & (POLLOUT | POLLERR | POLLHUP))
            finish_connect(ss__now());
        if (S.conn != C_OPEN)
            return;
    }
    if (pfd.revents & (POLLIN | POLLERR | POLLHUP))
        read_input();
    if (S.fd >= 0 && (pfd.revents & POLLOUT))
        write_output();
}

/* ---- folding sink ---- */

static int is_declared(unsigned id, const uint8_t *set)
{
    return set[id / 8] >> (id % 8) & 1;
}

/* Makes sure the name ID is declared: appends a NAME frame for it at *N in
 * scratch unless DECL says it is.  Returns -1 when the id has no name. */
static int declare(unsigned id, uint8_t *decl, size_t *n)
{
    if (is_declared(id, decl))
        return 0;
    wire_name nm = {.name_id = id};
    if (ss__name_copy(id, nm.name) < 0)
        return -1;
    size_t len = wire_encode_name(S.scratch + *n, sizeof S.scratch - *n, &nm);
    if (len == 0)
        return -1;
    *n += len;
    decl[id / 8] |= (uint8_t)(1u << (id % 8));
    return 0;
}

/* Keeps the items of a step array whose names can be declared. */
#define KEEP_DECLARED(arr, count, decl, n)                                    \
    do {                                                                      \
        unsigned kept_ = 0;                                                   \
        for (unsigned i_ = 0; i_ < (count); i_++) {                           \
            if (declare((arr)[i_].name_id, decl, n) < 0) {                    \
                S.own_dropped_events++;                                       \
                continue;                                                     \
            }                                                                 \
            (arr)[kept_++] = (arr)[i_];                                       \
        }                                                                     \
        (count) = (uint8_t)kept_;                                             \
    } while (0)

/* Bytes of the LABELS frames of name ID's labels (lab_mu held): chunks
 * of as many labels as fit in a frame. */
static size_t labels_size(unsigned id)
{
    size_t size = 0, payload = 0;
    const char *p = lab.text[id];
    for (uint32_t i = 0; i < lab.n[id]; i++) {
        size_t len = strlen(p);
        if (payload == 0 || payload + 1 + len > WIRE_MAX_PAYLOAD) {
            size += payload ? WIRE_HEADER_SIZE + payload : 0;
            payload = 12;
        }
        payload += 1 + len;
        p += len + 1;
    }
    return size + WIRE_HEADER_SIZE + payload;
}

/* Appends name ID's labels as LABELS frames (lab_mu held; room checked
 * with labels_size). */
static void append_labels(unsigned id)
{
    const char *ptrs[WIRE_MAX_VALUES];
    const char *p = lab.text[id];
    for (uint32_t i = 0; i < lab.n[id]; i++) {
        ptrs[i] = p;
        p += strlen(p) + 1;
    }
    uint32_t first = 0;
    while (first < lab.n[id]) {
        size_t payload = 12;
        uint32_t count = 0;
        while (first + count < lab.n[id] &&
               payload + 1 + strlen(ptrs[first + count]) <= WIRE_MAX_PAYLOAD)
            payload += 1 + strlen(ptrs[first + count++]);
        size_t len = wire_encode_labels(S.frame_buf, sizeof S.frame_buf, id,
                                        lab.n[id], first, ptrs + first,
                                        count);
        out_append(S.frame_buf, len);
        first += count;
    }
}

/* Queues a step record with its vectors, the NAME frames they need, and
 * the labels of its vectors not yet sent on this connection, all in one
 * append or not at all (the VALUES frames of a step come just before its
 * STEP, docs/protocol.md). */
static void on_step(void *ctx, const wire_step *rec, const ss__vec *vecs,
                    unsigned n_vecs)
{
    (void)ctx;
    if (!accepting() || S.fifo_n == FIFO_CAP) {
        S.own_dropped_records++;
        S.own_dropped_vectors += n_vecs;
        return;
    }
    wire_step *r = &S.rec;
    memcpy(r, rec, offsetof(wire_step, phases));
    memcpy(r->phases, rec->phases, rec->n_phases * sizeof rec->phases[0]);
    memcpy(r->syncs, rec->syncs, rec->n_syncs * sizeof rec->syncs[0]);
    memcpy(r->metrics, rec->metrics, rec->n_metrics * sizeof rec->metrics[0]);
    uint8_t decl[sizeof S.declared];
    memcpy(decl, S.declared, sizeof decl);
    size_t n = 0;
    KEEP_DECLARED(r->phases, r->n_phases, decl, &n);
    KEEP_DECLARED(r->syncs, r->n_syncs, decl, &n);
    KEEP_DECLARED(r->metrics, r->n_metrics, decl, &n);
    uint8_t keep[WIRE_MAX_NAME_ID];
    uint8_t send_labels[WIRE_MAX_NAME_ID];
    size_t extra = 0;
    pthread_mutex_lock(&lab_mu);
    for (unsigned i = 0; i < n_vecs; i++) {
        unsigned id = vecs[i].name_id;
        keep[i] = declare(id, decl, &n) == 0;
        send_labels[i] = 0;
        if (!keep[i]) {
            S.own_dropped_vectors++;
            continue;
        }
        extra += WIRE_VALUES_FRAME_SIZE(vecs[i].n);
        if (lab.gen[id] && S.labels_sent[id] != lab.gen[id]) {
            send_labels[i] = 1;
            extra += labels_size(id);
        }
    }
    size_t len = wire_encode_step(S.scratch + n, sizeof S.scratch - n, r);
    if (len == 0 || out_free() < n + extra + len + OUT_CONTROL_RESERVE) {
        pthread_mutex_unlock(&lab_mu);
        S.own_dropped_records++;
        S.own_dropped_vectors += n_vecs;
        return;
    }
    out_append(S.scratch, n); /* the NAME frames */
    for (unsigned i = 0; i < n_vecs; i++) {
        if (!send_labels[i])
            continue;
        append_labels(vecs[i].name_id);
        S.labels_sent[vecs[i].name_id] = lab.gen[vecs[i].name_id];
    }
    pthread_mutex_unlock(&lab_mu);
    for (unsigned i = 0; i < n_vecs; i++) {
        if (!keep[i])
            continue;
        size_t vlen = wire_encode_values(S.frame_buf, sizeof S.frame_buf,
                                         r->step, vecs[i].name_id, vecs[i].v,
                                         vecs[i].n, vecs[i].truncated);
        out_append(S.frame_buf, vlen);
    }
    out_append(S.scratch + n, len);
    memcpy(S.declared, decl, sizeof decl);
    S.fifo[(S.fifo_head + S.fifo_n) % FIFO_CAP] = S.out_appended;
    S.fifo_n++;
}

int ss__sender_labels(unsigned id, const char *const *labels, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!labels[i])
            return SS_EINVAL;
        size_t len = strlen(labels[i]);
        if (len > WIRE_MAX_STR)
            return SS_EINVAL;
        for (size_t k = 0; k < len; k++)
            if ((unsigned char)labels[i][k] < 0x20 || labels[i][k] == 0x7f)
                return SS_EINVAL;
        bytes += len + 1;
    }
    pthread_mutex_lock(&lab_mu);
    if (lab.text[id] && lab.n[id] == n && lab.bytes[id] == bytes) {
        const char *p = lab.text[id];
        size_t i = 0;
        for (; i < n && strcmp(p, labels[i]) == 0; i++)
            p += strlen(p) + 1;
        if (i == n) { /* unchanged: nothing to send again */
            pthread_mutex_unlock(&lab_mu);
            return 0;
        }
    }
    if (lab.total - lab.bytes[id] + bytes > LABELS_BUDGET) {
        pthread_mutex_unlock(&lab_mu);
        return SS_ENOMEM;
    }
    char *text = malloc(bytes);
    if (!text) {
        pthread_mutex_unlock(&lab_mu);
        return SS_ENOMEM;
    }
    char *p = text;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(labels[i]) + 1;
        memcpy(p, labels[i], len);
        p += len;
    }
    free(lab.text[id]);
    lab.total = lab.total - lab.bytes[id] + bytes;
    lab.text[id] = text;
    lab.bytes[id] = bytes;
    lab.n[id] = (uint32_t)n;
    lab.gen[id] = ++lab.next_gen;
    pthread_mutex_unlock(&lab_mu);
    return 0;
}

static void on_checkpoint(void *ctx, uint64_t step, ss__mono_ns t)
{
    (void)ctx;
    wire_checkpoint c = {.step = step, .t_ns = t};
    uint8_t buf[64];
    if (!accepting() ||
        out_frame(buf, wire_encode_checkpoint(buf, sizeof buf, &c)) < 0)
        S.own_dropped_records++;
}

static void on_resumed(void *ctx, uint64_t step, ss__mono_ns t)
{
    (void)ctx;
    wire_resumed rs = {.step = step, .t_ns = t};
    uint8_t buf[64];
    if (!accepting() ||
        out_frame(buf, wire_encode_resumed(buf, sizeof buf, &rs)) < 0)
        S.own_dropped_records++;
}

/* ---- the loop ---- */

/* Folds one drained event of thread T; a vector's elements are read from
 * T's vector ring and freed there. */
static void fold_one(ss__thread *t, const ss__event *ev)
{
    if ((ev->type & SS__EV_TYPE_MASK) != SS__EV_VALUES) {
        ss__fold_event(&S.fold, &t->track, ev);
        return;
    }
    ss__vring *vr = __atomic_load_n(&t->vring, __ATOMIC_ACQUIRE);
    uint64_t pos = (uint64_t)ev->t;
    uint32_t n = (uint32_t)ev->value;
    ss__fold_values(&S.fold, &t->track, ev, ss__vring_at(vr, pos));
    ss__vring_release(vr, pos + (uint64_t)n * sizeof(double));
}

static void drain_round(void)
{
    ss__thread *next;
    for (ss__thread *t = ss__threads_first(); t; t = next) {
        next = t->next;
        int dead = __atomic_load_n(&t->dead, __ATOMIC_ACQUIRE);
        const ss__event *a, *b;
        size_t na, nb;
        ss__ring_peek(&t->ring, &a, &na, &b, &nb);
        for (size_t i = 0; i < na; i++)
            fold_one(t, &a[i]);
        for (size_t i = 0; i < nb; i++)
            fold_one(t, &b[i]);
        ss__ring_consume(&t->ring, na + nb);
        if (dead) {
            ss__fold_forget_track(&S.fold, &t->track);
            ss__threads_retire(t);
        }
    }
    ss__fold_round(&S.fold);
    publish_counters();
}

/* Queues a STATUS (with the NAME it needs) when the live state changed,
 * or as a heartbeat; see the file comment. */
static void maybe_queue_status(ss__mono_ns now)
{
    if (!accepting())
        return;
    wire_status st;
    ss__fold_status(&S.fold, &st);
    int coll_active;
    ss__coll_get(&st.coll_name_id, &st.coll_seq, &coll_active);
    st.coll_flags = coll_active ? WIRE_STATUS_COLL_ACTIVE : 0;
    ss__dur_ns since_last = now - S.status_at;
    int changed = !S.have_status || st.step != S.status.step ||
                  st.name_id != S.status.name_id ||
                  st.since_ns != S.status.since_ns ||
                  st.coll_seq != S.status.coll_seq ||
                  st.coll_flags != S.status.coll_flags;
    if (S.have_status && !(changed && since_last >= STATUS_MIN_GAP_NS) &&
        since_last < STATUS_EVERY_NS)
        return;
    uint8_t decl[sizeof S.declared];
    memcpy(decl, S.declared, sizeof decl);
    size_t n = 0;
    if (st.name_id && declare(st.name_id, decl, &n) < 0)
        st.name_id = 0; /* a name that cannot be declared is not shown */
    if (st.coll_name_id && declare(st.coll_name_id, decl, &n) < 0)
        st.coll_name_id = 0, st.coll_seq = 0, st.coll_flags = 0;
    size_t len = wire_encode_status(S.scratch + n, sizeof S.scratch - n, &st);
    if (len == 0 || out_free() < n + len + OUT_CONTROL_RESERVE)
        return; /* retried on the next tick */
    out_append(S.scratch, n + len);
    memcpy(S.declared, decl, sizeof decl);
    S.status = st;
    S.have_status = 1;
    S.status_at = now;
}

/* Queues FEATURES once per connection after profiling was enabled, and
 * the answers waiting (those that do not fit wait for the next tick). */
static void queue_profile_frames(void)
{
    if (!accepting() || !__atomic_load_n(&prof.enabled, __ATOMIC_ACQUIRE))
        return;
    uint8_t buf[WIRE_HEADER_SIZE + 13 + 1 + WIRE_MAX_STR];
    if (!prof.features_sent) {
        wire_features f = {WIRE_FEATURE_PROFILE};
        if (out_frame(buf, wire_encode_features(buf, sizeof buf, &f)) < 0)
            return;
        prof.features_sent = 1;
    }
    pthread_mutex_lock(&prof_mu);
    unsigned sent = 0;
    while (sent < prof.n_answers &&
           out_frame(buf, wire_encode_profile_done(
                              buf, sizeof buf, &prof.answers[sent])) == 0)
        sent++;
    memmove(prof.answers, prof.answers + sent,
            (prof.n_answers - sent) * sizeof prof.answers[0]);
    prof.n_answers -= sent;
    pthread_mutex_unlock(&prof_mu);
}

void ss__sender_profile_enable(void)
{
    __atomic_store_n(&prof.enabled, 1, __ATOMIC_RELEASE);
}

int ss__sender_profile_take(ss_profile_request *out)
{
    if (!__atomic_load_n(&prof.pending, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&prof_mu);
    int got = prof.pending;
    if (got)
        *out = prof.req;
    __atomic_store_n(&prof.pending, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&prof_mu);
    return got;
}

int ss__sender_profile_answer(uint32_t request_id, int ok, int64_t marker_ns,
                              const char *text)
{
    wire_profile_done pd;
    memset(&pd, 0, sizeof pd);
    pd.request_id = request_id;
    pd.status = ok ? WIRE_PROFILE_OK : WIRE_PROFILE_FAILED;
    pd.marker_ns = ok ? marker_ns : 0;
    if (!text || strlen(text) > WIRE_MAX_STR)
        return SS_EINVAL;
    snprintf(pd.text, sizeof pd.text, "%s", text);
    uint8_t buf[WIRE_HEADER_SIZE + 13 + 1 + WIRE_MAX_STR];
    if (wire_encode_profile_done(buf, sizeof buf, &pd) == 0)
        return SS_EINVAL;
    int rc = SS_ESTATE;
    pthread_mutex_lock(&prof_mu);
    if (prof.n_answers < SENDER_MAX_ANSWERS) {
        prof.answers[prof.n_answers++] = pd;
        rc = 0;
    }
    pthread_mutex_unlock(&prof_mu);
    return rc;
}

static void queue_counters(void)
{
    if (!accepting())
        return;
    wire_counters c = {total_dropped_events(), total_dropped_records(), 0, 0};
    ss__threads_vector_drops(&c.dropped_vectors, &c.truncated_values);
    c.dropped_vectors += total_dropped_vectors();
    uint8_t buf[64];
    out_frame(buf, wire_encode_counters(buf, sizeof buf, &c));
}

static ss__mono_ns earliest(ss__mono_ns a, ss__mono_ns b)
{
    return a < b ? a : b;
}

static void run_loop(void)
{
    ss__mono_ns now = ss__now();
    ss__mono_ns next_tick = now, next_counters = now + COUNTERS_EVERY_NS;
    S.next_connect = now;
    for (;;) {
        /* Connect before looking at `stop`, so that even a process that
         * shuts down at once gets to deliver its records. */
        now = ss__now();
        if (S.conn == C_IDLE && now >= S.next_connect)
            try_connect(now);
        if (S.conn == C_CONNECTING && now >= S.connect_deadline)
            connect_failed(now, ETIMEDOUT);
        if (__atomic_load_n(&S.stop, __ATOMIC_ACQUIRE))
            return;
        if (now >= next_tick) {
            drain_round();
            maybe_queue_status(now);
            queue_profile_frames();
            next_tick = now + TICK_NS;
        }
        if (now >= next_counters) {
            queue_counters();
            next_counters = now + COUNTERS_EVERY_NS;
        }
        try_write();
        ss__mono_ns wake = earliest(next_tick, next_counters);
        if (S.conn == C_IDLE)
            wake = earliest(wake, S.next_connect);
        if (S.conn == C_CONNECTING)
            wake = earliest(wake, S.connect_deadline);
        poll_once(now, wake);
    }
}

/* Queues the last records, COUNTERS and BYE and gives the controller up to
 * FLUSH_TIMEOUT_NS to read them. */
static void finish(void)
{
    drain_round();
    if (accepting()) {
        queue_profile_frames();
        queue_counters();
        wire_bye bye = {.last_step = ss__fold_last_step(&S.fold)};
        uint8_t buf[64];
        out_frame(buf, wire_encode_bye(buf, sizeof buf, &bye));
    }
    ss__mono_ns now = ss__now(), deadline = now + FLUSH_TIMEOUT_NS;
    while (accepting() && now < deadline) {
        if (S.conn == C_CONNECTING && now >= S.connect_deadline)
            break;
        try_write();
        if (S.conn != C_CONNECTING && S.out_len == S.out_off && S.fd >= 0) {
            int unread = 0;
            if (ioctl(S.fd, SIOCOUTQ, &unread) != 0 || unread == 0)
                break; /* the controller has everything */
            poll_once(now, earliest(deadline, now + SS__MS));
        } else {
            poll_once(now, deadline);
        }
        now = ss__now();
    }
    out_discard();
    close_fd();
    publish_counters();
}

static void *sender_main(void *arg)
{
    (void)arg;
    run_loop();
    finish();
    return NULL;
}

int ss__sender_start(const ss__config *cfg, char *err, size_t errlen)
{
    S.cfg = *cfg;
    S.fd = -1;
    S.out = malloc(OUT_CAP);
    if (!S.out) {
        snprintf(err, errlen, "out of memory for the send buffer");
        return SS_ENOMEM;
    }
    ss__fold_sink sink = {NULL, on_step, on_checkpoint, on_resumed};
    ss__fold_init(&S.fold, &sink);
    set_conn(C_IDLE);
    __atomic_store_n(&S.stop, 0, __ATOMIC_RELAXED);
    /* The sender takes no signals: they belong to the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&S.thread, NULL, sender_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the sender thread: %s",
                 strerror(rc));
        free(S.out);
        S.out = NULL;
        return SS_ENOMEM;
    }
    S.started = 1;
    return 0;
}

void ss__sender_stop(void)
{
    if (!S.started)
        return;
    __atomic_store_n(&S.stop, 1, __ATOMIC_RELEASE);
    pthread_join(S.thread, NULL);
    S.started = 0;
    free(S.out);
    S.out = NULL;
    ss__fold_release(&S.fold);
}

int ss__sender_rejected(void)
{
    return __atomic_load_n(&S.conn, __ATOMIC_ACQUIRE) == C_REJECTED;
}

uint64_t ss__sender_dropped_events(void)
{
    return __atomic_load_n(&S.pub_dropped_events, __ATOMIC_RELAXED);
}

uint64_t ss__sender_dropped_records(void)
{
    return __atomic_load_n(&S.pub_dropped_records, __ATOMIC_RELAXED);
}

uint64_t ss__sender_dropped_vectors(void)
{
    return __atomic_load_n(&S.pub_dropped_vectors, __ATOMIC_RELAXED);
}

void ss__sender_atfork_prepare(void) { pthread_mutex_lock(&sender_fd_mu); }

void ss__sender_atfork_parent(void) { pthread_mutex_unlock(&sender_fd_mu); }

void ss__sender_atfork_child(void)
{
    if (S.started && S.fd >= 0)
        close(S.fd);
    S.fd = -1;
    S.started = 0;
    pthread_mutex_unlock(&sender_fd_mu);
}
