/*
 * link_conn.h - one agent link connection: a framed stream over a TCP
 * socket on a libuv loop, used alike by the controller's side
 * (ingest/node_links.c) and by the node agent (job/agent.c).
 *
 * A connection owns its TCP handle, its read buffer, its link decoder and
 * encoder (link_wire.h) and its send queue.  It reads: reassembles frames
 * from whatever pieces the socket gives, decodes each with link_wire.c
 * (the handshake's 1 KiB frame limit until the link is keyed, the MAC of
 * every frame after) and hands each to on_frame.  It sends: encodes a
 * frame, copies it into the send queue and writes it, and checks every
 * write's status.  What the frames mean, the handshake's stages, timers
 * and heartbeats are the owner's business.
 *
 * Memory is bounded at both ends of the pipe.  The read buffer is small
 * (one handshake frame) until the link is keyed, that is until the peer
 * has proved it knows the run's secret, and two maximal frames after.
 * The send queue holds at most max_queued bytes (SS_LINK_CONN_MAX_QUEUED
 * unless configured): a frame that would pass the cap is not queued and
 * the connection ends (SS_LINK_END_SEND, "it stopped reading: ...").  One
 * policy for every frame class, on both ends, because none may be lost
 * on its own: DATA carries the ranks' byte streams (a frame dropped would
 * corrupt one), the control frames must arrive, and the MAC's sequence
 * numbers make the link all or nothing anyway.  A peer that stops reading
 * for that long is treated as gone, as it is when its heartbeats stop.
 *
 * Runs on its loop's thread only; never blocks.
 */
#ifndef STEPSCOPE_LINK_CONN_H
#define STEPSCOPE_LINK_CONN_H

#include <stddef.h>
#include <uv.h>

#include "link_wire.h"

/* The send queue's cap, bytes: frames handed to the socket whose write
 * has not completed yet (each one a copy the connection holds). */
#define SS_LINK_CONN_MAX_QUEUED ((size_t)64 << 20)

typedef struct ss_link_conn ss_link_conn;

/* Why a connection ended on its own. */
typedef enum {
    SS_LINK_END_PEER,     /* the peer closed it, or reading failed */
    SS_LINK_END_PROTOCOL, /* the peer sent what link_wire.c refuses */
    SS_LINK_END_SEND,     /* a write failed, or the queue reached its cap */
} ss_link_end;

typedef struct {
    void *ctx;
    /* A frame F from the peer.  F, and the bytes DATA and STACKS_PART
     * point to, are valid during the call only.  The owner may send, key
     * or close the connection from here; after a close no further frame
     * of this read is delivered. */
    void (*on_frame)(void *ctx, const link_frame *f);
    /* The connection ended on its own for WHY, a one-line reason ("its
     * connection closed", "protocol error: bad MAC", "it stopped reading:
     * 64 MiB waiting"...).  Called at most once, never after the owner
     * called ss_link_conn_close, and right before on_closed.  NULL: not
     * told. */
    void (*on_end)(void *ctx, ss_link_end end, const char *why);
    /* The connection is closed and freed: the owner must forget its
     * pointer.  Called exactly once for every connection made, from the
     * loop (never from within another call on the connection). */
    void (*on_closed)(void *ctx);
} ss_link_conn_callbacks;

typedef struct {
    link_direction sends; /* LINK_FROM_AGENT on the agent */
    size_t max_queued;    /* 0: SS_LINK_CONN_MAX_QUEUED */
} ss_link_conn_config;

/* A connection on LOOP, not yet connected: connect or accept its stream
 * (ss_link_conn_stream), then ss_link_conn_start.  CFG and CB are copied.
 * Returns NULL when out of memory (no callback is then called). */
ss_link_conn *ss_link_conn_new(uv_loop_t *loop, const ss_link_conn_config *cfg,
                               const ss_link_conn_callbacks *cb);

/* The connection's TCP handle, for uv_accept, uv_tcp_connect, options
 * and names.  Its data pointer belongs to the connection; do not close it
 * except through ss_link_conn_close. */
uv_tcp_t *ss_link_conn_tcp(ss_link_conn *c);

/* The socket is connected: reading starts, and frames may be sent.
 * Returns 0, or -1 when reading cannot start (the connection then ends
 * on its own, SS_LINK_END_PEER). */
int ss_link_conn_start(ss_link_conn *c);

/* Both directions are MACed under KEY from the next frame on (the
 * session key, link_auth_session_key), and the read buffer grows to two
 * maximal frames.  Call it right after sending PROOF (agent) or right
 * after reading it (controller), as link_wire.h says. */
void ss_link_conn_keyed(ss_link_conn *c, const uint8_t key[LINK_KEY_SIZE]);

/* Encodes F and queues it.  Returns 0, or -1 when it was not sent: the
 * connection is not started or is closing (nothing else happens), or F
 * cannot be encoded, the queue would pass its cap or the write fails (the
 * connection then ends: on_end, SS_LINK_END_SEND, on the next loop
 * iteration, never from within this call).  The bytes F points to are
 * copied; the caller keeps ownership of F. */
int ss_link_conn_send(ss_link_conn *c, const link_frame *f);

/* The bytes the send queue holds now: frames whose write has not
 * completed (at most the configured cap). */
size_t ss_link_conn_queued(const ss_link_conn *c);

/* The owner closes C: reading stops and nothing more is sent.  FLUSH 0:
 * the handle closes now and queued frames are dropped; FLUSH 1: it closes
 * once the queued frames are written (meant for a last small frame, a
 * refusal, that the kernel takes at once; a later call with FLUSH 0 cuts
 * it short).  on_end is not called; on_closed follows on the loop.  A
 * second call, or one after the connection ended on its own, only cuts a
 * flush short.  NULL is a no-op. */
void ss_link_conn_close(ss_link_conn *c, int flush);

#endif
