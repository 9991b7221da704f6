/*
 * wire.h - the stepscope wire protocol: frame layout, encoder and the one
 * decoder that the controller trusts.
 *
 * Every frame is an 8-byte header (u32 payload length, u8 type, u8 flags,
 * u16 reserved; all little-endian, flags and reserved zero) followed by the
 * payload.  The first frame on a connection must be HELLO carrying the
 * protocol version, run id, rank, host, pid and the run's random token.  The
 * full specification is docs/protocol.md; this header and wire.c implement
 * it and nothing else does.
 *
 * The decoder is a per-connection state machine (wire_decoder): it checks
 * framing, field ranges, the handshake (magic, version, run id, token), that
 * names are declared before use, and that step numbers increase.  On any
 * violation it returns an error with a human-readable reason and the caller
 * must close that connection; the decoder never reads past the bytes given.
 */
#ifndef STEPSCOPE_WIRE_H
#define STEPSCOPE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_VERSION 1
#define WIRE_MAGIC "SSCP"
#define WIRE_HEADER_SIZE 8
#define WIRE_MAX_PAYLOAD 16384
#define WIRE_TOKEN_SIZE 16 /* bytes; hex-encoded in STEPSCOPE_TOKEN */
#define WIRE_MAX_STR 255   /* bytes of a length-prefixed string */
#define WIRE_MAX_NAME_LEN 63
#define WIRE_MAX_NAME_ID 255
#define WIRE_MAX_ITEMS 64 /* phases, syncs or metrics in one step record */

typedef enum {
    WIRE_HELLO = 1,      /* rank -> controller, first frame */
    WIRE_WELCOME = 2,    /* controller -> rank, handshake accepted */
    WIRE_REJECT = 3,     /* controller -> rank, reason, then close */
    WIRE_NAME = 4,       /* rank -> controller, declares a name id */
    WIRE_STEP = 5,       /* rank -> controller, one finished step */
    WIRE_COUNTERS = 6,   /* rank -> controller, cumulative drop counters */
    WIRE_CHECKPOINT = 7, /* rank -> controller, a checkpoint was saved */
    WIRE_BYE = 8,        /* rank -> controller, clean end of this rank */
    WIRE_STATUS = 9,     /* rank -> controller, current step and phase */
    WIRE_RESUMED = 10,   /* rank -> controller, resumed from a checkpoint */
    WIRE_FEATURES = 11,  /* rank -> controller, commands it can carry out */
    WIRE_COMMAND = 12,   /* controller -> rank, a request (e.g. profile) */
    WIRE_PROFILE_DONE = 13, /* rank -> controller, a profile request ended */
    WIRE_VALUES = 14,    /* rank -> controller, one named vector of a step */
    WIRE_LABELS = 15     /* rank -> controller, names of a vector's indices */
} wire_type;

typedef struct {
    uint16_t version;
    uint32_t rank;
    uint32_t world_size;
    uint32_t local_rank;
    uint32_t pid;
    uint32_t attempt;
    uint8_t token[WIRE_TOKEN_SIZE];
    char run_id[WIRE_MAX_STR + 1];
    char host[WIRE_MAX_STR + 1];
} wire_hello;

typedef struct {
    uint16_t version;
} wire_welcome;

typedef struct {
    uint16_t code;
    char reason[WIRE_MAX_STR + 1];
} wire_reject;

typedef struct {
    uint32_t name_id; /* 1..WIRE_MAX_NAME_ID */
    char name[WIRE_MAX_NAME_LEN + 1];
} wire_name;

typedef struct {
    uint32_t name_id;
    uint32_t count;         /* how many times the phase ran in this step */
    uint64_t total_ns;      /* summed duration (inclusive) */
    int64_t first_begin_ns; /* CLOCK_MONOTONIC of its earliest begin, >= 0 */
    /* Summed self (exclusive) time: total_ns less the time covered by
     * phases nested in it (docs/recorder.md), <= total_ns.  Valid only
     * when the step's flags carry WIRE_STEP_HAS_SELF. */
    uint64_t self_ns;
} wire_phase;

typedef struct {
    uint32_t name_id;
    int64_t arrival_ns; /* CLOCK_MONOTONIC of this rank's host */
} wire_sync;

typedef struct {
    uint32_t name_id;
    double value;
} wire_metric;

#define WIRE_STEP_HAS_RSS 0x1u
#define WIRE_STEP_HAS_DEVICE 0x2u
/* Each phase item carries its self time (8 more bytes).  Recorders that
 * predate it never set the flag: their records are accepted, with self
 * time missing. */
#define WIRE_STEP_HAS_SELF 0x4u

typedef struct {
    uint64_t step;
    int64_t begin_ns; /* CLOCK_MONOTONIC */
    int64_t end_ns;   /* >= begin_ns */
    uint64_t rss_bytes;    /* valid with WIRE_STEP_HAS_RSS: max in step */
    uint64_t device_bytes; /* valid with WIRE_STEP_HAS_DEVICE: max in step */
    uint8_t flags;
    uint8_t n_phases, n_syncs, n_metrics; /* each <= WIRE_MAX_ITEMS */
    wire_phase phases[WIRE_MAX_ITEMS];
    wire_sync syncs[WIRE_MAX_ITEMS];
    wire_metric metrics[WIRE_MAX_ITEMS];
} wire_step;

/* COUNTERS: cumulative, never decreasing.  The vector counts are an
 * optional tail (a recorder that predates vectors sends 16 bytes; they
 * are then 0). */
typedef struct {
    uint64_t dropped_events;
    uint64_t dropped_records;
    uint64_t dropped_vectors;  /* whole vectors dropped (ring full, over
                                  the per-step budget, late) */
    uint64_t truncated_values; /* elements cut by the per-vector cap */
} wire_counters;

/* VALUES: one named vector of numbers for a step (ss_values).  The VALUES
 * frames of a step come just before its STEP frame: they name the step
 * that the next STEP on the connection carries, each name at most once.
 * Elements are f64 bit patterns, NaN and infinities included, passed on
 * unchanged. */
#define WIRE_MAX_VALUES 1024       /* elements in one vector */
#define WIRE_MAX_STEP_VALUES 65536 /* elements in all vectors of a step */
typedef struct {
    uint64_t step;
    uint32_t name_id;   /* a declared name */
    uint32_t n;         /* elements, <= WIRE_MAX_VALUES */
    uint32_t truncated; /* elements the recorder cut (its cap) */
    double v[WIRE_MAX_VALUES];
} wire_values;

/* LABELS: the names of a vector's indices, in chunks: labels FIRST ..
 * FIRST + COUNT - 1 of TOTAL.  A set's chunks come in order, without
 * another LABELS frame between them, starting at 0; a new set for the
 * same name replaces the old one once complete.  Decoded labels are
 * NUL-terminated strings at text + off[i], i < count. */
typedef struct {
    uint32_t name_id; /* a declared name */
    uint32_t total;   /* 1..WIRE_MAX_VALUES */
    uint32_t first;
    uint32_t count;   /* >= 1, first + count <= total */
    uint16_t off[WIRE_MAX_VALUES];
    char text[WIRE_MAX_PAYLOAD];
} wire_labels;

typedef struct {
    uint64_t step;
    int64_t t_ns;
} wire_checkpoint;

typedef struct {
    uint64_t last_step; /* UINT64_MAX when no step was recorded */
} wire_bye;

/* The rank loaded a checkpoint saved at STEP: its steps continue from
 * step + 1 (docs/fault-tolerance.md).  t_ns: CLOCK_MONOTONIC. */
typedef struct {
    uint64_t step;
    int64_t t_ns;
} wire_resumed;

/* What the rank is doing now (sent about once a second and when it
 * changes).  step is WIRE_NO_STEP between steps; name_id is the innermost
 * phase open on the thread that began the step, 0 when none (else a
 * declared name); since_ns is when that state began: the phase's begin,
 * else the step's begin, else the end of the last step (0: nothing yet). */
#define WIRE_NO_STEP UINT64_MAX
/* Optionally (coll_name_id != 0) the rank's latest collective: its kind
 * (a declared name, e.g. "all_reduce"), its sequence number (the rank's
 * collectives are numbered 1, 2, ... in the order it entered them) and
 * whether the rank is still inside it.  coll_name_id 0: the rank has not
 * entered a collective yet (or its recorder predates collective counts);
 * the other two fields are then 0. */
#define WIRE_STATUS_COLL_ACTIVE 0x1u
typedef struct {
    uint64_t step;
    uint32_t name_id;
    int64_t since_ns; /* CLOCK_MONOTONIC, >= 0 */
    uint32_t coll_name_id; /* 0: none; else a declared name */
    uint64_t coll_seq;     /* >= 1 with a collective, else 0 */
    uint8_t coll_flags;    /* WIRE_STATUS_COLL_ACTIVE; other bits 0 */
} wire_status;

/* FEATURES: what the rank can do on request (bits only ever added on a
 * connection).  The controller sends a COMMAND only to a rank that
 * announced its feature, so a recorder that predates COMMAND never gets
 * one. */
#define WIRE_FEATURE_PROFILE 0x1u /* COMMAND kind PROFILE */
typedef struct {
    uint32_t bits;
} wire_features;

/* COMMAND: the controller asks the rank to do something.  request_id
 * (>= 1) is echoed in the answer.  Kind PROFILE: run torch.profiler (or
 * whatever profiler the rank has) for duration_ms (1..WIRE_MAX_PROFILE_MS)
 * and write its trace into directory DIR (absolute, not empty). */
#define WIRE_COMMAND_PROFILE 1
#define WIRE_MAX_PROFILE_MS 600000u
typedef struct {
    uint32_t request_id;
    uint8_t kind;
    uint32_t duration_ms;
    char dir[WIRE_MAX_STR + 1];
} wire_command;

/* PROFILE_DONE: the answer to a PROFILE command.  Status OK: TEXT is the
 * trace file's path and marker_ns the rank's CLOCK_MONOTONIC at the
 * profiler event named WIRE_PROFILE_MARKER (the clock alignment, see
 * docs/debug.md#profiling); otherwise TEXT says why there is no trace and
 * marker_ns is 0. */
#define WIRE_PROFILE_OK 0
#define WIRE_PROFILE_FAILED 1
#define WIRE_PROFILE_MARKER "stepscope::clock"
typedef struct {
    uint32_t request_id;
    uint8_t status;
    int64_t marker_ns;
    char text[WIRE_MAX_STR + 1];
} wire_profile_done;

/* One decoded frame.  Which member is valid follows from TYPE; of a
 * STEP's arrays, only the first n_phases / n_syncs / n_metrics items are
 * (the decoder does not clear the rest). */
typedef struct {
    wire_type type;
    union {
        wire_hello hello;
        wire_welcome welcome;
        wire_reject reject;
        wire_name name;
        wire_step step;
        wire_counters counters;
        wire_checkpoint checkpoint;
        wire_bye bye;
        wire_status status;
        wire_resumed resumed;
        wire_features features;
        wire_command command;
        wire_profile_done profile_done;
        wire_values values;
        wire_labels labels;
    } u;
} wire_frame;

/* ---- encoding (used by the recorder, tests, benchmarks and the controller
 * for WELCOME/REJECT).  Each returns the number of bytes written into BUF,
 * or 0 when CAP is too small or a field is out of range. */
size_t wire_encode_hello(uint8_t *buf, size_t cap, const wire_hello *h);
size_t wire_encode_welcome(uint8_t *buf, size_t cap, const wire_welcome *w);
size_t wire_encode_reject(uint8_t *buf, size_t cap, const wire_reject *r);
size_t wire_encode_name(uint8_t *buf, size_t cap, const wire_name *n);
size_t wire_encode_step(uint8_t *buf, size_t cap, const wire_step *s);
/* Writes the 32-byte form when a vector count is not zero, else the
 * 16-byte form that every controller reads. */
size_t wire_encode_counters(uint8_t *buf, size_t cap, const wire_counters *c);
/* One VALUES frame: N (<= WIRE_MAX_VALUES) elements of V. */
size_t wire_encode_values(uint8_t *buf, size_t cap, uint64_t step,
                          uint32_t name_id, const double *v, uint32_t n,
                          uint32_t truncated);
/* One LABELS chunk: LABELS[0..COUNT) are the labels FIRST.. of TOTAL;
 * each at most WIRE_MAX_STR bytes without control characters.  Returns 0
 * when they do not fit in one frame (send fewer). */
size_t wire_encode_labels(uint8_t *buf, size_t cap, uint32_t name_id,
                          uint32_t total, uint32_t first,
                          const char *const *labels, uint32_t count);
size_t wire_encode_checkpoint(uint8_t *buf, size_t cap,
                              const wire_checkpoint *c);
size_t wire_encode_bye(uint8_t *buf, size_t cap, const wire_bye *b);
size_t wire_encode_status(uint8_t *buf, size_t cap, const wire_status *s);
size_t wire_encode_resumed(uint8_t *buf, size_t cap, const wire_resumed *r);
size_t wire_encode_features(uint8_t *buf, size_t cap, const wire_features *f);
size_t wire_encode_command(uint8_t *buf, size_t cap, const wire_command *c);
size_t wire_encode_profile_done(uint8_t *buf, size_t cap,
                                const wire_profile_done *p);

/* Size of an encoded STATUS frame without, and with, a collective. */
#define WIRE_STATUS_FRAME_SIZE (WIRE_HEADER_SIZE + 20)
#define WIRE_STATUS_COLL_FRAME_SIZE (WIRE_STATUS_FRAME_SIZE + 13)

/* Size of an encoded VALUES frame of N elements. */
#define WIRE_VALUES_FRAME_SIZE(n) (WIRE_HEADER_SIZE + 20 + 8 * (size_t)(n))

/* Upper bound of an encoded STEP frame. */
#define WIRE_STEP_FRAME_MAX                                                   \
    (WIRE_HEADER_SIZE + 48 + WIRE_MAX_ITEMS * (32 + 12 + 12))

/* ---- decoding ---- */

/* Which side of the connection a decoder reads. */
typedef enum {
    WIRE_FROM_RANK = 0,      /* controller side: expects HELLO first */
    WIRE_FROM_CONTROLLER = 1 /* recorder side: WELCOME, REJECT, COMMAND */
} wire_direction;

typedef struct {
    wire_direction direction;
    int handshaken;                  /* HELLO (or WELCOME) seen */
    uint8_t token[WIRE_TOKEN_SIZE];  /* expected token (controller side) */
    char run_id[WIRE_MAX_STR + 1];   /* expected run id (controller side) */
    uint8_t declared[(WIRE_MAX_NAME_ID + 8) / 8]; /* names declared */
    int have_step;
    uint64_t last_step;
    wire_counters last_counters;
    uint64_t frames;                 /* frames decoded so far */
    /* VALUES waiting for their STEP: their step, names, elements. */
    uint64_t values_step;
    uint32_t values_n, values_elems;
    uint8_t values_names[(WIRE_MAX_NAME_ID + 8) / 8];
    /* A LABELS set being received: its name (0: none), total, next. */
    uint32_t labels_name, labels_total, labels_next;
} wire_decoder;

/* Result of wire_decoder_next(). */
typedef enum {
    WIRE_OK = 1,        /* one frame decoded into *out */
    WIRE_NEED_MORE = 0, /* BUF holds no complete frame yet */
    WIRE_ERROR = -1     /* protocol violation: close the connection */
} wire_result;

/*
 * Prepares D for a new connection.  On the controller side (WIRE_FROM_RANK)
 * TOKEN and RUN_ID are what HELLO must carry; on the recorder side they are
 * ignored and may be NULL.
 */
void wire_decoder_init(wire_decoder *d, wire_direction dir,
                       const uint8_t token[WIRE_TOKEN_SIZE],
                       const char *run_id);

/*
 * Decodes the first complete frame of BUF[0..LEN).  On WIRE_OK fills *OUT
 * and sets *CONSUMED to the frame's size; on WIRE_NEED_MORE sets *CONSUMED
 * to 0; on WIRE_ERROR writes a one-line reason into ERR (always
 * NUL-terminated when ERRLEN > 0) and the decoder must not be used again.
 */
wire_result wire_decoder_next(wire_decoder *d, const uint8_t *buf, size_t len,
                              wire_frame *out, size_t *consumed, char *err,
                              size_t errlen);

/* Hex helpers for the token in the environment.  wire_token_parse returns 0
 * on success, -1 unless HEX is exactly 2*WIRE_TOKEN_SIZE hex digits. */
int wire_token_parse(const char *hex, uint8_t token[WIRE_TOKEN_SIZE]);
void wire_token_format(const uint8_t token[WIRE_TOKEN_SIZE],
                       char hex[2 * WIRE_TOKEN_SIZE + 1]);

/* Returns a static name for a frame type ("STEP"), or "UNKNOWN". */
const char *wire_type_name(unsigned type);

#endif
