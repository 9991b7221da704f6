/*
 * http_gate.h - admission and request deadlines for the HTTP server's
 * connections (used by http.c; docs/api.md, "Limits and timeouts").
 *
 * The gate owns the listening socket and one thread.  The thread accepts
 * each new connection and either hands it to the server (the ADMIT
 * callback) or, over a connection limit, answers it 503 with a JSON body
 * itself and closes it.  It also enforces the request deadline, which
 * libmicrohttpd cannot: its timeout restarts on every byte, so a client
 * that trickles a header line every few seconds would keep a connection
 * forever.  The server tells the gate when a connection starts, when a
 * request has been read (no deadline while it is answered), when a
 * response is done (the next request is due within the timeout) and when
 * the connection ends; the gate shuts down the socket of a connection
 * whose request is overdue, which the server then sees as a closed
 * connection.
 */
#ifndef STEPSCOPE_HTTP_GATE_H
#define STEPSCOPE_HTTP_GATE_H

#include <stdint.h>
#include <sys/socket.h>

#include "model.h"

#define SS_HTTP_GATE_TICK_MS 100 /* deadlines checked this often */

typedef struct ss_http_gate ss_http_gate;
typedef struct ss_http_gate_conn ss_http_gate_conn;

typedef struct {
    unsigned max_connections;   /* open at once */
    unsigned max_per_address;   /* from one non-loopback address */
    ss_mono_ns request_timeout; /* a request read in full within this */
    /* Hands the admitted connection FD (peer SA, LEN bytes) to the server,
     * on the gate thread.  Returns 0, or -1 when the server refused it
     * (and closed FD). */
    int (*admit)(void *cls, int fd, const struct sockaddr *sa,
                 socklen_t len);
    /* Called on the gate thread every SS_HTTP_GATE_TICK_MS. */
    void (*tick)(void *cls);
    void *cls;
} ss_http_gate_config;

/*
 * Starts the gate thread on LISTEN_FD (a non-blocking listening socket,
 * owned by the gate from now on, also on failure).  *OUT is set before the
 * thread starts, so callbacks of connections it hands over already see it.
 * Returns 0; or -1 with *OUT NULL and a reason in ERR.  CFG is copied.
 */
int ss_http_gate_start(int listen_fd, const ss_http_gate_config *cfg,
                       ss_http_gate **out, char *err, size_t errlen);

/* Stops accepting: ends the thread and closes the listening socket and the
 * refused connections.  Connections already handed over stay the server's;
 * the gate still takes their announcements until ss_http_gate_free. */
void ss_http_gate_stop(ss_http_gate *g);

/* Frees G once stopped and once the server has announced the end of every
 * connection.  NULL is a no-op. */
void ss_http_gate_free(ss_http_gate *g);

/* The server announces the connection on FD (handed over by ADMIT); returns
 * its record for the calls below, or NULL when the gate does not know FD
 * (it is then not subject to the request deadline). */
ss_http_gate_conn *ss_http_gate_started(ss_http_gate *g, int fd);

/* A request of C has been read in full (no deadline while it is
 * answered). */
void ss_http_gate_request_read(ss_http_gate *g, ss_http_gate_conn *c);

/* The response to C's request is done: its next request is due within the
 * request timeout. */
void ss_http_gate_response_done(ss_http_gate *g, ss_http_gate_conn *c);

/* C has ended (its socket is still open); frees its record.  NULL is a
 * no-op. */
void ss_http_gate_closed(ss_http_gate *g, ss_http_gate_conn *c);

typedef struct {
    unsigned open;       /* connections open now */
    unsigned max;        /* the connection limit */
    uint64_t refused;    /* answered 503 at a limit */
    uint64_t timed_out;  /* closed at the request deadline */
} ss_http_gate_counts;

void ss_http_gate_get_counts(ss_http_gate *g, ss_http_gate_counts *out);

/*
 * The admission decision for a new connection.  OPEN: connections open now;
 * FROM_ADDRESS: how many of them come from the new one's address;
 * LOOPBACK: that address is loopback (local clients share it, so it has no
 * per-address limit).  Returns SS_HTTP_ADMIT, SS_HTTP_FULL (OPEN has reached
 * MAX) or SS_HTTP_ADDRESS_FULL (FROM_ADDRESS has reached MAX_PER_ADDRESS).
 */
enum { SS_HTTP_ADMIT, SS_HTTP_FULL, SS_HTTP_ADDRESS_FULL };
int ss_http_admission(unsigned open, unsigned max, unsigned from_address,
                      unsigned max_per_address, int loopback);

#endif
