/*
 * http_gate.c - admission and request deadlines for HTTP connections
 * (http_gate.h).
 *
 * Each connection has a record from accept to close, in one list under one
 * mutex: its peer address (for the per-address limit) and the time by
 * which its next request must have been read.  A record is created when
 * the gate admits the connection, bound to the server's connection when
 * the server announces it (ss_http_gate_started) and freed when the server
 * announces its end (ss_http_gate_closed), which libmicrohttpd does before
 * it closes the socket: so a record found under the mutex never names a
 * closed or reused descriptor, and shutting it down is safe.  A record the
 * server never announces (it failed to set the connection up) is dropped
 * after the request timeout and never shut down.
 *
 * A refused connection gets a canned 503 and is then read for up to
 * REFUSED_LINGER_MS before it is closed: closing a socket with unread
 * request bytes would reset the connection, and the client could lose the
 * answer.
 */
#include "http_gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "clocks.h"
#include "json.h"

#define ACCEPT_BATCH 64       /* connections accepted per wake-up at most */
#define REFUSED_MAX 64        /* refused connections read while closing */
#define REFUSED_LINGER_MS 2000

struct ss_http_gate_conn {
    ss_http_gate_conn *prev, *next;
    int fd;
    int started;              /* announced by the server */
    int loopback;             /* the peer's address is loopback */
    int shut;                 /* shut down for missing its deadline */
    unsigned char addr[16];   /* the peer's address; IPv4 as v4-mapped */
    ss_mono_ns accepted;
    ss_mono_ns request_due;   /* the next request read by then; 0 while one
                                 is being answered */
};

typedef struct {
    int fd;
    ss_mono_ns until;
} refused_conn;

struct ss_http_gate {
    ss_http_gate_config cfg;
    int listen_fd;
    int wake[2];              /* a byte here ends the thread */
    pthread_t thread;
    int running;
    refused_conn refused[REFUSED_MAX]; /* gate thread only */
    int n_refused;
    pthread_mutex_t mu;       /* guards the fields below */
    ss_http_gate_conn *conns;
    unsigned n_conns;
    uint64_t n_refused_total, n_timed_out;
};

int ss_http_admission(unsigned open, unsigned max, unsigned from_address,
                      unsigned max_per_address, int loopback)
{
    if (open >= max)
        return SS_HTTP_FULL;
    if (!loopback && from_address >= max_per_address)
        return SS_HTTP_ADDRESS_FULL;
    return SS_HTTP_ADMIT;
}

/* The peer address SA as 16 bytes (IPv4 v4-mapped) and whether it is
 * loopback. */
static void peer_key(const struct sockaddr *sa, unsigned char key[16],
                     int *loopback)
{
    memset(key, 0, 16);
    *loopback = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &s4->sin_addr, 4);
        *loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        memcpy(key, &s6->sin6_addr, 16);
        *loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
                    (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && key[12] == 127);
    }
}

static void unlink_locked(ss_http_gate *g, ss_http_gate_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g->n_conns--;
}

/* Decides on the connection FD from SA and, when it is admitted, records
 * it.  Returns 0, or -1 with the reason for the 503 in WHY. */
static int admit(ss_http_gate *g, int fd, const struct sockaddr *sa,
                 char *why, size_t whylen)
{
    unsigned char key[16];
    int loopback;
    peer_key(sa, key, &loopback);
    ss_http_gate_conn *c = calloc(1, sizeof *c);
    pthread_mutex_lock(&g->mu);
    unsigned from_address = 0;
    if (!loopback)
        for (const ss_http_gate_conn *o = g->conns; o; o = o->next)
            from_address += memcmp(o->addr, key, sizeof key) == 0;
    int verdict = ss_http_admission(g->n_conns, g->cfg.max_connections,
                                    from_address, g->cfg.max_per_address,
                                    loopback);
    if (verdict == SS_HTTP_ADMIT && c) {
        c->fd = fd;
        c->loopback = loopback;
        memcpy(c->addr, key, sizeof key);
        c->accepted = ss_mono_now();
        c->request_due = c->accepted + g->cfg.request_timeout;
        c->next = g->conns;
        if (c->next)
            c->next->prev = c;
        g->conns = c;
        g->n_conns++;
        c = NULL;
    } else {
        g->n_refused_total++;
    }
    pthread_mutex_unlock(&g->mu);
    if (!c)
        return 0;
    free(c);
    if (verdict == SS_HTTP_FULL)
        snprintf(why, whylen, "the server is busy: %u connections are open, "
                 "its limit; retry in a moment", g->cfg.max_connections);
    else if (verdict == SS_HTTP_ADDRESS_FULL)
        snprintf(why, whylen, "too many connections from your address (%u "
                 "open, the limit); close some and retry",
                 g->cfg.max_per_address);
    else
        snprintf(why, whylen, "out of memory");
    return -1;
}

/* Forgets the record of FD when the server refused the connection (it has
 * closed FD). */
static void forget_unstarted(ss_http_gate *g, int fd)
{
    pthread_mutex_lock(&g->mu);
    for (ss_http_gate_conn *c = g->conns; c; c = c->next)
        if (c->fd == fd && !c->started) {
            unlink_locked(g, c);
            free(c);
            break;
        }
    pthread_mutex_unlock(&g->mu);
}

/* Answers FD 503 with WHY and half-closes it; it is then read until the
 * client closes (or REFUSED_LINGER_MS) when there is room, else closed at
 * once. */
static void refuse(ss_http_gate *g, int fd, const char *why)
{
    ss_buf body = {0}, msg = {0};
    ss_buf_puts(&body, "{\"error\":");
    ss_buf_json_str(&body, why);
    ss_buf_puts(&body, "}\n");
    ss_buf_printf(&msg, "HTTP/1.1 503 Service Unavailable\r\n"
                  "Content-Type: application/json; charset=utf-8\r\n"
                  "Cache-Control: no-store\r\nRetry-After: 1\r\n"
                  "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                  body.len, body.data ? body.data : "");
    if (!msg.oom && msg.data &&
        send(fd, msg.data, msg.len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
        shutdown(fd, SHUT_WR);
    ss_buf_free(&body);
    ss_buf_free(&msg);
    if (g->n_refused < REFUSED_MAX) {
        g->refused[g->n_refused].fd = fd;
        g->refused[g->n_refused++].until =
            ss_mono_now() + REFUSED_LINGER_MS * 1000000LL;
    } else {
        close(fd);
    }
}

/* Accepts what is pending on the listening socket.  Returns 0, or -1 when
 * out of descriptors (the caller pauses accepting for a tick). */
static int accept_batch(ss_http_gate *g)
{
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(g->listen_fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        char why[200];
        if (admit(g, fd, (struct sockaddr *)&ss, why, sizeof why) != 0)
            refuse(g, fd, why);
        else if (g->cfg.admit(g->cfg.cls, fd, (struct sockaddr *)&ss, len))
            forget_unstarted(g, fd);
    }
    return 0;
}

/* Reads and discards what refused connections sent; closes those that the
 * client closed or whose time is up.  REVENTS: their poll results. */
static void drain_refused(ss_http_gate *g, const struct pollfd *revents,
                          ss_mono_ns now)
{
    for (int i = g->n_refused - 1; i >= 0; i--) {
        refused_conn *r = &g->refused[i];
        int gone = 0;
        if (revents[i].revents) {
            char scratch[4096];
            ssize_t got;
            while ((got = recv(r->fd, scratch, sizeof scratch,
                               MSG_DONTWAIT)) > 0)
                ;
            gone = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        }
        if (gone || now > r->until) {
            close(r->fd);
            *r = g->refused[--g->n_refused];
        }
    }
}

/* Shuts down connections whose request is overdue (the server then sees
 * them end and closes them) and drops records the server never
 * announced. */
static void reap(ss_http_gate *g, ss_mono_ns now)
{
    pthread_mutex_lock(&g->mu);
    ss_http_gate_conn *next;
    for (ss_http_gate_conn *c = g->conns; c; c = next) {
        next = c->next;
        if (!c->started) {
            if (now - c->accepted > g->cfg.request_timeout) {
                unlink_locked(g, c);
                free(c);
            }
        } else if (!c->shut && c->request_due && now > c->request_due) {
            /* Bytes the server has not read yet mean the server is behind
             * (its worker busy with a long answer), not the client: give
             * the request another period.  A trickling client's bytes are
             * read as they come, so nothing waits for it. */
            int unread = 0;
            if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0) {
                c->request_due = now + g->cfg.request_timeout;
                continue;
            }
            shutdown(c->fd, SHUT_RDWR);
            c->shut = 1;
            g->n_timed_out++;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

static void *gate_main(void *arg)
{
    ss_http_gate *g = arg;
    struct pollfd pfd[2 + REFUSED_MAX];
    ss_mono_ns tick = SS_HTTP_GATE_TICK_MS * 1000000LL;
    ss_mono_ns last_tick = ss_mono_now(), accept_paused_until = 0;
    for (;;) {
        ss_mono_ns now = ss_mono_now();
        int n = 0, n_refused = g->n_refused;
        pfd[n++] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){
            .fd = now >= accept_paused_until ? g->listen_fd : -1,
            .events = POLLIN};
        for (int i = 0; i < n_refused; i++)
            pfd[n++] = (struct pollfd){.fd = g->refused[i].fd,
                                       .events = POLLIN};
        if (poll(pfd, (nfds_t)n, SS_HTTP_GATE_TICK_MS) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents)
            break; /* ss_http_gate_stop */
        now = ss_mono_now();
        drain_refused(g, pfd + 2, now);
        if ((pfd[1].revents & POLLIN) && accept_batch(g) != 0)
            accept_paused_until = now + tick;
        if (now - last_tick >= tick) {
            last_tick = now;
            reap(g, now);
            if (g->cfg.tick)
                g->cfg.tick(g->cfg.cls);
        }
    }
    return NULL;
}

int ss_http_gate_start(int listen_fd, const ss_http_gate_config *cfg,
                       ss_http_gate **out, char *err, size_t errlen)
{
    *out = NULL;
    ss_http_gate *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        close(listen_fd);
        return -1;
    }
    g->cfg = *cfg;
    g->listen_fd = listen_fd;
    g->wake[0] = g->wake[1] = -1;
    pthread_mutex_init(&g->mu, NULL);
    if (pipe2(g->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "cannot start the HTTP accept thread: %s",
                 strerror(errno));
        ss_http_gate_free(g);
        return -1;
    }
    /* Published before the thread runs: the server announces the first
     * handed-over connection to *OUT from its own threads. */
    *out = g;
    g->running = 1;
    int rc = pthread_create(&g->thread, NULL, gate_main, g);
    if (rc != 0) {
        *out = NULL;
        g->running = 0;
        snprintf(err, errlen, "cannot start the HTTP accept thread: %s",
                 strerror(rc));
        ss_http_gate_free(g);
        return -1;
    }
    return 0;
}

void ss_http_gate_stop(ss_http_gate *g)
{
    if (!g)
        return;
    if (g->running) {
        while (write(g->wake[1], "x", 1) < 0 && errno == EINTR)
            ;
        pthread_join(g->thread, NULL);
        g->running = 0;
    }
    for (int i = 0; i < g->n_refused; i++)
        close(g->refused[i].fd);
    g->n_refused = 0;
    if (g->listen_fd >= 0)
        close(g->listen_fd);
    g->listen_fd = -1;
}

void ss_http_gate_free(ss_http_gate *g)
{
    if (!g)
        return;
    ss_http_gate_stop(g);
    while (g->conns) { /* only records the server never announced */
        ss_http_gate_conn *c = g->conns;
        unlink_locked(g, c);
        free(c);
    }
    for (int i = 0; i < 2; i++)
        if (g->wake[i] >= 0)
            close(g->wake[i]);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

ss_http_gate_conn *ss_http_gate_started(ss_http_gate *g, int fd)
{
    ss_http_gate_conn *found = NULL;
    pthread_mutex_lock(&g->mu);
    for (ss_http_gate_conn *c = g->conns; c && !found; c = c->next)
        if (c->fd == fd && !c->started) {
            c->started = 1;
            found = c;
        }
    pthread_mutex_unlock(&g->mu);
    return found;
}

static void set_due(ss_http_gate *g, ss_http_gate_conn *c, ss_mono_ns due)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    c->request_due = due;
    pthread_mutex_unlock(&g->mu);
}

void ss_http_gate_request_read(ss_http_gate *g, ss_http_gate_conn *c)
{
    set_due(g, c, 0);
}

void ss_http_gate_response_done(ss_http_gate *g, ss_http_gate_conn *c)
{
    set_due(g, c, ss_mono_now() + g->cfg.request_timeout);
}

void ss_http_gate_closed(ss_http_gate *g, ss_http_gate_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->mu);
    unlink_locked(g, c);
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void ss_http_gate_get_counts(ss_http_gate *g, ss_http_gate_counts *out)
{
    pthread_mutex_lock(&g->mu);
    out->open = g->n_conns;
    out->max = g->cfg.max_connections;
    out->refused = g->n_refused_total;
    out->timed_out = g->n_timed_out;
    pthread_mutex_unlock(&g->mu);
}
