/*
 * link_wire.h - the agent link: the one TCP connection between a node's
 * agent and the controller of a multi-node run (docs/protocol.md, "Agent
 * link").
 *
 * Frames have the rank protocol's 8-byte header (u32 payload length, u8
 * type, u8 flags, u16 reserved; little-endian; flags and reserved zero).
 * The first four frames authenticate both sides with a challenge-response
 * over a shared secret (link_auth.h): AGENT_HELLO (agent), CHALLENGE
 * (controller: its nonce and its proof), PROOF (agent), then JOIN_OK or
 * JOIN_REJECT (controller).  From JOIN_OK (or a JOIN_REJECT after PROOF)
 * on, every frame in either direction is followed by a 16-byte MAC over
 * (direction, sequence number, header, payload) under the session key, so
 * a refusal the controller sent after PROOF is told from one anyone could
 * send (a JOIN_REJECT that comes first has no MAC), and a frame cannot be
 * forged,
 * replayed, reordered or dropped on the way without the receiver closing
 * the link.  Nothing is encrypted except the rank token in JOIN_OK.
 *
 * After JOIN_OK the agent multiplexes its ranks' connections over the link:
 * OPEN(channel) when a rank connects to the agent's local socket, DATA
 * (channel, bytes) in both directions carrying the rank protocol's bytes
 * unchanged, CLOSE(channel) from either side.  The rest is the node's
 * business: clock exchanges, rank starts and exits, host evidence per rank
 * step, heartbeats, the node's health check (HEALTH), the controller's
 * STOP, RESTART, END and injected faults (INJECT), and its ranks' stacks on
 * request (STACKS_REQ, answered by STACKS_PART chunks).
 *
 * The decoder is a per-link state machine that checks framing, field
 * ranges, the order of the handshake, the direction of each type, every
 * MAC, and until it is keyed the handshake's smaller frame limit; any
 * violation is an error with a one-line reason and the caller closes the
 * link.  It never reads past the bytes given.
 */
#ifndef STEPSCOPE_LINK_WIRE_H
#define STEPSCOPE_LINK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "node_partial.h"

/* 2: JOIN_OK names the run's aggregation (rank or node); NODE_PARTIAL and
 * NODE_STATUS.  3: each frame's MAC is keyed BLAKE2b, no longer
 * HMAC-SHA256.  4: RANK_STOP.  5: an AGENT_HELLO may leave its node rank
 * to the controller (LINK_NODE_RANK_ANY), and JOIN_OK names it.  Agents
 * and controllers of different versions refuse each other at AGENT_HELLO
 * with both versions named. */
#define LINK_VERSION 6
#define LINK_MAGIC "SSAG"
#define LINK_HEADER_SIZE 8
#define LINK_MAX_PAYLOAD 65536
#define LINK_MAC_SIZE 16
#define LINK_NONCE_SIZE 32
#define LINK_PROOF_SIZE 32
#define LINK_TOKEN_SIZE 16     /* the ranks' token (WIRE_TOKEN_SIZE) */
#define LINK_KEY_SIZE 32
#define LINK_MAX_STR 255
#define LINK_MAX_TAIL 4096     /* bytes of a rank's last output lines */
#define LINK_MAX_DATA (LINK_MAX_PAYLOAD - 4)
#define LINK_STACKS_PART_FIXED 9 /* request id, rank, last */
#define LINK_MAX_STACKS_CHUNK (LINK_MAX_PAYLOAD - LINK_STACKS_PART_FIXED)
#define LINK_MAX_STACKS_DEADLINE_MS 60000
#define LINK_MAX_RECENT_STEPS 1024 /* rows one RECENT_REQ may ask for */
#define LINK_FRAME_MAX (LINK_HEADER_SIZE + LINK_MAX_PAYLOAD + LINK_MAC_SIZE)
/* Before the link is keyed (the handshake) a frame's payload is at most
 * this: the largest handshake frame, AGENT_HELLO, has 564 bytes. */
#define LINK_MAX_HANDSHAKE_PAYLOAD 1024

typedef enum {
    /* handshake */
    LINK_AGENT_HELLO = 1, /* agent -> controller, first frame */
    LINK_CHALLENGE = 2,   /* controller -> agent */
    LINK_PROOF = 3,       /* agent -> controller */
    LINK_JOIN_OK = 4,     /* controller -> agent; MACs start here */
    LINK_JOIN_REJECT = 5, /* controller -> agent, then close */
    /* rank connections, multiplexed */
    LINK_OPEN = 10,       /* agent -> controller */
    LINK_DATA = 11,       /* both directions */
    LINK_CLOSE = 12,      /* both directions */
    /* clocks and liveness */
    LINK_TIME_REQ = 20,   /* agent -> controller */
    LINK_TIME_RESP = 21,  /* controller -> agent */
    LINK_CLOCK = 22,      /* agent -> controller: its estimate */
    LINK_HEARTBEAT = 23,  /* both directions */
    /* the node's ranks */
    LINK_RANK_STARTED = 30, /* agent -> controller */
    LINK_RANK_EXIT = 31,    /* agent -> controller */
    LINK_ALL_EXITED = 32,   /* agent -> controller */
    LINK_HOST = 33,         /* agent -> controller: one rank step's evidence */
    LINK_RANK_STOP = 34,    /* agent -> controller: a rank stopped or runs */
    /* commands */
    LINK_STOP = 40,       /* controller -> agent */
    LINK_BYE = 41,        /* agent -> controller, last frame */
    LINK_RESTART = 42,    /* controller -> agent: launch the next attempt */
    LINK_END = 43,        /* controller -> agent: no attempt follows */
    /* health checks and fault injection */
    LINK_HEALTH = 44,     /* agent -> controller: a check's result */
    LINK_INJECT = 45,     /* controller -> agent: signal one of its ranks */
    /* every rank's stacks (docs/debug.md) */
    LINK_STACKS_REQ = 46, /* controller -> agent: collect your ranks' */
    LINK_STACKS_PART = 47, /* agent -> controller: a chunk of one rank's */
    /* node-level aggregation (--aggregate node, docs/multinode.md) */
    LINK_NODE_PARTIAL = 48, /* agent -> controller: a step's node partial */
    LINK_NODE_STATUS = 49,  /* agent -> controller: its ranks' STATUS */

    LINK_RECENT_REQ = 50,  /* controller -> agent: a rank's recent steps */
    LINK_RECENT_PART = 51  /* agent -> controller: a chunk of them */
} link_type;

/* How a run aggregates its ranks' records (JOIN_OK): every rank's record
 * is folded at the controller only, or each agent also folds its node's
 * into one NODE_PARTIAL per step and batches its ranks' STATUS frames. */
#define LINK_AGGREGATE_RANK 0
#define LINK_AGGREGATE_NODE 1

/* An AGENT_HELLO's node rank when the agent has none: the controller
 * gives it the lowest free one in JOIN_OK (torchrun's c10d rendezvous,
 * which numbers the nodes as they join). */
#define LINK_NODE_RANK_ANY UINT32_MAX

/* NODE_STATUS entries: at most this many bytes of one STATUS frame. */
#define LINK_MAX_STATUS_ENTRY 255

/* Which side a decoder reads (and an encoder writes for the other). */
typedef enum {
    LINK_FROM_AGENT = 0,      /* the controller's decoder */
    LINK_FROM_CONTROLLER = 1  /* the agent's decoder */
} link_direction;

typedef struct {
    uint16_t version;
    uint32_t node_rank;        /* < nnodes, or LINK_NODE_RANK_ANY */
    uint32_t nnodes;
    uint32_t nproc_per_node;
    uint8_t nonce[LINK_NONCE_SIZE];
    char job_id[LINK_MAX_STR + 1]; /* the run's job id, all nodes alike */
    char host[LINK_MAX_STR + 1];   /* the node's host name */
} link_agent_hello;

typedef struct {
    uint8_t nonce[LINK_NONCE_SIZE];
    uint8_t proof[LINK_PROOF_SIZE]; /* link_auth_controller_proof */
} link_challenge;

typedef struct {
    uint8_t proof[LINK_PROOF_SIZE]; /* link_auth_agent_proof */
} link_proof;

typedef struct {
    uint32_t attempt;
    uint32_t world_size;
    int64_t controller_mono_ns; /* the controller's clock when sent */
    uint8_t sealed_token[LINK_TOKEN_SIZE]; /* link_auth_seal_token */
    uint8_t aggregate;  /* LINK_AGGREGATE_RANK or LINK_AGGREGATE_NODE */
    uint32_t node_rank; /* the agent's: its HELLO's, or the one given */
    char run_uuid[LINK_MAX_STR + 1];
} link_join_ok;

typedef struct {
    char reason[LINK_MAX_STR + 1];
} link_join_reject;

typedef struct {
    uint32_t channel;
} link_channel; /* OPEN and CLOSE */

typedef struct {
    uint32_t channel;
    uint32_t len;            /* 1..LINK_MAX_DATA */
    const uint8_t *bytes;    /* decoder: points into the caller's buffer */
} link_data;

typedef struct {
    int64_t t1; /* agent clock when sent */
} link_time_req;

typedef struct {
    int64_t t1; /* echoed */
    int64_t t2; /* controller clock when the request arrived */
    int64_t t3; /* controller clock when the answer left */
} link_time_resp;

typedef struct {
    int64_t offset_ns; /* controller clock = agent clock + offset */
    int64_t bound_ns;  /* |error| <= bound, >= 0 */
    int64_t rtt_ns;    /* of the exchange the estimate comes from */
    uint32_t samples;
} link_clock;

typedef struct {
    uint32_t rank;
    uint32_t pid;
} link_rank_started;

typedef struct {
    uint32_t rank;
    int64_t exit_code;  /* when term_signal is 0 */
    int32_t term_signal;
    char tail[LINK_MAX_TAIL + 1]; /* its last output lines, may be "" */
} link_rank_exit;

typedef struct {
    uint32_t left_behind; /* processes the ranks left behind, ended */
    int32_t status;       /* the node's job status (launcher.h) */
} link_all_exited;

typedef struct {
    uint32_t rank;
    uint64_t step;
    ss_host_step host;    /* every field, SS_MISSING kept as is */
} link_host;

/* A rank's process was stopped (a stop signal: STATE 1; a tracer such as
 * a debugger: STATE 2; its cgroup's freezer: STATE 3) STOPPED_MS ago by
 * the agent's clock, or runs again (STATE 0, STOPPED_MS 0).  Sent when
 * the state changes, so the controller can say a remote rank that went
 * silent is stopped. */
#define LINK_STOP_RUNNING 0
#define LINK_STOP_SIGNAL 1
#define LINK_STOP_TRACED 2
#define LINK_STOP_FROZEN 3
typedef struct {
    uint32_t rank;
    uint8_t state;        /* LINK_STOP_RUNNING, _SIGNAL, _TRACED, _FROZEN */
    uint32_t stopped_ms;  /* 0 with LINK_STOP_RUNNING */
} link_rank_stop;

typedef struct {
    uint8_t kill_now;     /* 1: SIGKILL now; 0: SIGTERM, grace, SIGKILL */
    char reason[LINK_MAX_STR + 1];
} link_stop;

/* The job restarts: the agent stops its ranks if they still run, waits
 * for them, and launches them again as ATTEMPT (>= 1).  The controller
 * sends it only after the node's ALL_EXITED of the attempt before, so
 * every RANK_EXIT and ALL_EXITED the agent sends before reading it belongs
 * to the earlier attempt and every one after to ATTEMPT. */
typedef struct {
    uint32_t attempt;
} link_restart;

/* The node's health check (health.h) before its ranks start: OK 1 when
 * every check passed (CHECK names the last one run), 0 with the failing
 * check's name and its output (bounded, may be ""). */
typedef struct {
    uint8_t ok;           /* 0 or 1 */
    char check[LINK_MAX_STR + 1];
    char output[LINK_MAX_TAIL + 1]; /* lines; no NUL */
} link_health;

/* An injected fault (inject.h): send SIGNAL (SIGKILL or SIGSTOP only) to
 * RANK's process group; with SIGSTOP and DURATION_MS > 0, SIGCONT after
 * that long (0: stopped until it ends).  DURATION_MS is 0 with SIGKILL. */
typedef struct {
    uint32_t rank;        /* global rank, one of the agent's */
    uint8_t signal;
    uint32_t duration_ms;
} link_inject;

/* The controller asks for the stacks of every rank of the node: the agent
 * collects them (stack_collect.h) within DEADLINE_MS (1 to
 * LINK_MAX_STACKS_DEADLINE_MS) and answers with STACKS_PART frames of
 * REQUEST_ID. */
typedef struct {
    uint32_t request_id;
    uint8_t native;       /* 0 or 1: native frames too */
    uint32_t deadline_ms;
} link_stacks_req;

/* A chunk of RANK's stacks object (stack_collect.h's per-rank JSON) for
 * REQUEST_ID: the object is the concatenation of its chunks in order;
 * LAST is 1 on its final chunk.  Every chunk carries 1 to
 * LINK_MAX_STACKS_CHUNK bytes. */
typedef struct {
    uint32_t request_id;
    uint32_t rank;        /* global rank, one of the agent's */
    uint8_t last;         /* 0 or 1 */
    uint32_t len;
    const uint8_t *bytes; /* decoder: points into the caller's buffer */
} link_stacks_part;

/* The controller asks for the latest STEPS (1 to LINK_MAX_RECENT_STEPS)
 * rows the agent keeps of RANK (recent_rows.h): it answers with
 * RECENT_PART frames of REQUEST_ID, whatever it holds (an object that
 * says why when RANK is not one of its ranks). */
typedef struct {
    uint32_t request_id;
    uint32_t rank;        /* global rank */
    uint32_t steps;
} link_recent_req;

/* A chunk of the answer to a RECENT_REQ: RANK's rows object
 * (recent_rows.h), laid out and checked as STACKS_PART is. */
typedef link_stacks_part link_recent_part;

/* One step of the node's ranks folded (node_partial.h), on the agent's
 * clock.  The decoder points P at storage of its own thread, valid until
 * the next frame is decoded on that thread. */
typedef struct {
    const ss_node_partial *p;
} link_node_partial;

/* The latest STATUS frame of some of the node's ranks, each the rank
 * protocol's bytes of one whole STATUS frame for its channel, fed to the
 * channel between two of its DATA frames (the agent sends every channel's
 * frames whole in node mode).  ENTRIES: COUNT times (u32 channel, u8
 * length 1..LINK_MAX_STATUS_ENTRY, the bytes), LEN bytes in all; read
 * them with link_node_status_next. */
typedef struct {
    uint32_t count;       /* >= 1 */
    uint32_t len;
    const uint8_t *entries; /* decoder: points into the caller's buffer */
} link_node_status;

/* Appends one entry (CHANNEL, N bytes of FRAME) to the entries at BUF
 * (*LEN bytes of CAP).  Returns 0, or -1 when it does not fit or N is 0
 * or over LINK_MAX_STATUS_ENTRY. */
int link_node_status_put(uint8_t *buf, size_t cap, size_t *len,
                         uint32_t channel, const uint8_t *frame, size_t n);

/* The entry at *OFF of S (start with 0): fills CHANNEL, FRAME and N and
 * moves *OFF on.  Returns 1, or 0 after the last (the decoder has checked
 * every entry). */
int link_node_status_next(const link_node_status *s, size_t *off,
                          uint32_t *channel, const uint8_t **frame,
                          size_t *n);

/* A decoded frame; only the member of TYPE is valid.  HEARTBEAT, BYE and
 * END have no payload.  END tells an agent that waits after its ranks
 * exited (restarts on) that the job is over: it says BYE and ends. */
typedef struct {
    link_type type;
    union {
        link_agent_hello hello;
        link_challenge challenge;
        link_proof proof;
        link_join_ok join_ok;
        link_join_reject join_reject;
        link_channel channel;
        link_data data;
        link_time_req time_req;
        link_time_resp time_resp;
        link_clock clock;
        link_rank_started rank_started;
        link_rank_exit rank_exit;
        link_all_exited all_exited;
        link_host host;
        link_rank_stop rank_stop;
        link_stop stop;
        link_restart restart;
        link_health health;
        link_inject inject;
        link_stacks_req stacks_req;
        link_stacks_part stacks_part;
        link_recent_req recent_req;
        link_recent_part recent_part;
        link_node_partial partial;
        link_node_status node_status;
    } u;
} link_frame;

/* Hands the N (> 0) bytes of TEXT to SEND as frames of TYPE
 * (LINK_STACKS_PART or LINK_RECENT_PART) for REQUEST_ID and RANK, each
 * of at most LINK_MAX_STACKS_CHUNK bytes, LAST set on the final one.
 * Stops at SEND's first nonzero return and returns it; else 0. */
int link_send_parts(link_type type, uint32_t request_id, uint32_t rank,
                    const char *text, size_t n,
                    int (*send)(void *ctx, const link_frame *f), void *ctx);

/* ---- encoding ----
 * An encoder writes one direction of one link.  Until link_encoder_keyed
 * is called its frames carry no MAC (the handshake); afterwards each frame
 * gets the MAC and the next sequence number. */
typedef struct {
    link_direction direction; /* which side writes: LINK_FROM_AGENT on the
                                 agent */
    int keyed;
    uint8_t key[LINK_KEY_SIZE];
    uint64_t seq;
} link_encoder;

void link_encoder_init(link_encoder *e, link_direction writes);
/* From now on frames are MACed under KEY (link_auth_session_key). */
void link_encoder_keyed(link_encoder *e, const uint8_t key[LINK_KEY_SIZE]);

/* Encodes F into BUF.  Returns the bytes written, or 0 when CAP is too
 * small, a field is out of range, or TYPE is not one this side sends. */
size_t link_encode(link_encoder *e, uint8_t *buf, size_t cap,
                   const link_frame *f);

/* ---- decoding ---- */
typedef struct {
    link_direction direction; /* which side the bytes come from */
    int stage;                /* handshake progress; private */
    int keyed;
    uint8_t key[LINK_KEY_SIZE];
    uint64_t seq;
    uint64_t frames;
} link_decoder;

typedef enum {
    LINK_OK = 1,
    LINK_NEED_MORE = 0,
    LINK_ERROR = -1
} link_result;

void link_decoder_init(link_decoder *d, link_direction reads);
/* From the next frame on, frames must carry a valid MAC under KEY. */
void link_decoder_keyed(link_decoder *d, const uint8_t key[LINK_KEY_SIZE]);

/*
 * Decodes the first complete frame of BUF[0..LEN).  On LINK_OK fills *OUT
 * (the bytes of DATA, STACKS_PART and RECENT_PART point into BUF) and sets *CONSUMED; on LINK_NEED_MORE sets
 * *CONSUMED to 0; on LINK_ERROR writes a one-line reason into ERR and the
 * decoder must not be used again.  Checks the handshake order: from the
 * agent, AGENT_HELLO then PROOF then anything after JOIN_OK; from the
 * controller, CHALLENGE then JOIN_OK or JOIN_REJECT, then anything.  The
 * caller keys the decoder (link_decoder_keyed) right after it has decoded
 * PROOF (controller side) or CHALLENGE (agent side) and computed the
 * session key: JOIN_OK or JOIN_REJECT is the first MACed frame.
 */
link_result link_decoder_next(link_decoder *d, const uint8_t *buf, size_t len,
                              link_frame *out, size_t *consumed, char *err,
                              size_t errlen);

/* A static name for a frame type ("DATA"), or "UNKNOWN". */
const char *link_type_name(unsigned type);

#endif
