/*
 * ingest.h - the controller's listening socket for rank connections.
 *
 * Accepts connections on a unix-domain socket, decodes each connection's
 * byte stream with the wire decoder (src/common/wire.h), answers the
 * handshake with WELCOME or REJECT, translates each connection's name ids
 * into run-wide name indexes, and hands decoded frames to callbacks.  A
 * name that gets no run-wide index (the run's name table is full) is
 * refused and counted, and the phases, syncs and metrics recorded under it
 * are left out of the rank's records and counted; the connection and the
 * rest of its records are unaffected.  A
 * connection that sends anything malformed, the wrong token, an unknown
 * version, a rank already connected, or no HELLO within the handshake
 * timeout is rejected with a logged reason and closed; other connections
 * are unaffected.  Runs on the controller's libuv loop; never blocks.
 *
 * Connections are accepted by this module (not libuv, which closes waiting
 * connections when descriptors run out and says nothing): out of
 * descriptors, they wait in the listen backlog, listening pauses for
 * 100 ms, and on_accept_failed reports it.
 */
#ifndef STEPSCOPE_INGEST_H
#define STEPSCOPE_INGEST_H

#include <stdint.h>
#include <uv.h>

#include "model.h"
#include "wire.h"

typedef struct ss_ingest ss_ingest;

typedef struct {
    void *ctx;
    /* Returns the run-wide index of NAME (0..32767), or -1 when none can
     * be given: the name is then refused (on_name_refused). */
    int (*intern)(void *ctx, const char *name);
    /* A rank completed its handshake.  Return 0 to accept, or -1 and a
     * reason in REASON (REASONLEN bytes) to reject it. */
    int (*on_hello)(void *ctx, const wire_hello *h, char *reason,
                    size_t reasonlen);
    /* A rank's STEP frame as the analysis stage's record (model.h): its
     * names are run-wide indexes, items under refused names are left
     * out, its times are on the controller's clock.  VALUES: the N_VALUES
     * vectors the rank sent for this step (VALUES frames), names
     * run-wide, NaN and infinities as sent, without labels (on_labels);
     * NULL when none.  All valid during the call only. */
    void (*on_step)(void *ctx, uint32_t rank, const ss_step_record *rec,
                    const ss_values_item *values, uint32_t n_values);
    /* RANK declared the N labels of its vector NAME (a run-wide index;
     * LABELS frames, once complete), replacing earlier ones.  Valid
     * during the call only.  May be NULL. */
    void (*on_labels)(void *ctx, uint32_t rank, int name,
                      const char *const *labels, uint32_t n);
    void (*on_counters)(void *ctx, uint32_t rank, const wire_counters *c);
    void (*on_checkpoint)(void *ctx, uint32_t rank, const wire_checkpoint *c);
    void (*on_bye)(void *ctx, uint32_t rank, const wire_bye *b);
    /* A handshaken rank's connection closed; SAID_BYE tells whether BYE
     * came first.  Called once per accepted HELLO. */
    void (*on_disconnect)(void *ctx, uint32_t rank, int said_bye);
    /* A connection was rejected or dropped for a protocol violation.
     * RANK is -1 when the peer never identified itself. */
    void (*on_rejected)(void *ctx, int32_t rank, const char *reason);
    /* RANK's live state (STATUS).  PHASE is the run-wide index of the
     * innermost open phase, -1 when none (ST->name_id is the rank's own
     * id and should not be used).  COLLECTIVE likewise is the run-wide
     * index of its latest collective's kind (ST->coll_seq its number), -1
     * when none.  May be NULL. */
    void (*on_status)(void *ctx, uint32_t rank, const wire_status *st,
                      int phase, int collective);
    /* RANK declared NAME and intern() gave it no index: what RANK records
     * under it is dropped from now on.  Called once per declaration (a
     * rank declares each name once per connection).  May be NULL. */
    void (*on_name_refused)(void *ctx, uint32_t rank, const char *name);
    /* N phases, syncs, metrics and vectors of RANK's next step record were
     * left out because their names were refused; called just before its
     * on_step.
     * May be NULL. */
    void (*on_values_dropped)(void *ctx, uint32_t rank, uint32_t n);
    /* RANK resumed from a checkpoint saved at R->step (RESUMED).  May be
     * NULL. */
    void (*on_resumed)(void *ctx, uint32_t rank, const wire_resumed *r);
    /* RANK's first STEP on its connection, numbered STEP, is about to be
     * handed on.  Return 1 to hold it, and everything the rank sends
     * after it, unread until ss_ingest_release_held (the ranks that
     * resumed from a checkpoint may not have said so yet); CAN_HOLD is 0
     * where nothing can be held (a channel's bytes), and 1 is then taken
     * for 0.  Else return 0 and set *OFFSET, which is added to the step
     * numbers of this STEP and of every later STEP, STATUS and CHECKPOINT
     * of the connection (a rank that numbers its steps from 0 while the
     * others resumed from a checkpoint).  May be NULL (no hold, no
     * offset). */
    int (*on_first_step)(void *ctx, uint32_t rank, uint64_t step,
                         int can_hold, int64_t *offset);
    /* RANK answered a COMMAND (ss_ingest_send_command) of kind PROFILE.
     * PD->marker_ns is on the controller's clock (moved like records'
     * times on a channel).  May be NULL. */
    void (*on_profile_done)(void *ctx, uint32_t rank,
                            const wire_profile_done *pd);
    /* A connection could not be accepted: ERR is libuv's error (UV_EMFILE
     * or UV_ENFILE when the process or the system is out of descriptors;
     * libuv then closes the connections waiting, so those ranks lose
     * their telemetry).  Called once per failure.  May be NULL. */
    void (*on_accept_failed)(void *ctx, int err);
} ss_ingest_callbacks;

typedef struct {
    const char *unix_path;   /* where to listen; created, removed on close */
    uint8_t token[WIRE_TOKEN_SIZE];
    const char *run_id;
    uint32_t handshake_timeout_ms; /* default 10000 when 0 */
    /* A rank's connection more steps than this ahead of the slowest
     * connected rank waits while a slower rank's bytes are unread, so that
     * a backlog is read in step and not rank after rank (ingest.c, "Reading
     * in step"); below the aggregator's window.  0: never waits. */
    uint32_t max_lead_steps;
} ss_ingest_config;

/* Starts listening on LOOP.  Returns NULL with a reason in ERR (for example
 * "bind(/path): Address in use").  CB is copied. */
ss_ingest *ss_ingest_start(uv_loop_t *loop, const ss_ingest_config *cfg,
                           const ss_ingest_callbacks *cb, char *err,
                           size_t errlen);

/* Stops listening and closes every connection without further callbacks
 * except on_disconnect for handshaken ranks.  The handles finish closing on
 * the next loop iterations; the memory is freed then.  NULL is a no-op. */
void ss_ingest_close(ss_ingest *in);

/* Reads on from the first STEP of every connection held there by
 * on_first_step, which is asked again for each. */
void ss_ingest_release_held(ss_ingest *in);

/* Closes RANK's connection, if any (used when its process is gone). */
void ss_ingest_drop_rank(ss_ingest *in, uint32_t rank);

/*
 * Rank connections carried by another transport: an agent link multiplexes
 * the connections of a remote node's ranks (job/agent.c on that node,
 * node_links.h here).  A channel is a connection like any other (the same
 * handshake, decoder, callbacks and limits); only its bytes come and go
 * through the transport.
 */
typedef struct ss_ingest_channel ss_ingest_channel;

typedef struct {
    void *ctx;
    /* Sends LEN bytes (a WELCOME or REJECT frame) to the rank.  Returns 0,
     * or -1: the channel is then closed. */
    int (*write)(void *ctx, const uint8_t *bytes, size_t len);
    /* The controller closed the channel (a rejected rank, a dropped rank,
     * the ingest closing): tell the far end.  Called at most once; the
     * channel must not be fed or reported gone after it. */
    void (*closed)(void *ctx);
    /* The far end's CLOCK_MONOTONIC plus *CLOCK_OFFSET_NS is the
     * controller's: every time in the rank's records is moved by it as it
     * is when each record arrives.  NULL: the same clock. */
    const int64_t *clock_offset_ns;
    /* The ranks that may say HELLO on this channel: RANK_FIRST ..
     * RANK_FIRST + RANK_COUNT - 1 (a node's own); RANK_COUNT 0: any. */
    uint32_t rank_first, rank_count;
} ss_ingest_transport;

/* Opens a channel whose transport is T (T must outlive the channel: until
 * T->closed or ss_ingest_channel_gone).  Its handshake timer starts now.
 * Returns NULL when out of memory or the ingest is closing. */
ss_ingest_channel *ss_ingest_channel_open(ss_ingest *in,
                                          const ss_ingest_transport *t);

/* LEN bytes the rank sent, in order, split anywhere.  Decoded now; only a
 * frame split across calls is copied. */
void ss_ingest_channel_feed(ss_ingest_channel *ch, const uint8_t *bytes,
                            size_t len);

/* The far end closed the channel (the rank's socket closed, or the link
 * was lost): like the end of a socket's stream.  CH is invalid after the
 * call; T->closed is not called. */
void ss_ingest_channel_gone(ss_ingest_channel *ch);

/* Results of ss_ingest_send_command. */
#define SS_INGEST_NOT_CONNECTED (-1) /* no handshaken connection of RANK */
#define SS_INGEST_UNSUPPORTED (-2)   /* RANK never announced the feature */

/*
 * Sends CMD to RANK's connection (a socket or a channel: an agent carries
 * it to a remote rank unchanged).  Sent only when the rank announced the
 * command's feature (FEATURES), so that a recorder that does not know the
 * command never receives it.  Returns 0 when queued, or one of the codes
 * above.  The answer, if any, comes through the callbacks.
 */
int ss_ingest_send_command(ss_ingest *in, uint32_t rank,
                           const wire_command *cmd);

/* Number of open connections, handshaken or not. */
uint32_t ss_ingest_connections(const ss_ingest *in);

typedef struct {
    uint64_t frames, bytes, steps, rejected;
    uint64_t names_refused;  /* NAME declarations that got no index */
    uint64_t values_dropped; /* step items left out under refused names */
    uint64_t vectors;        /* vectors handed on with their steps */
    uint64_t lead_waits;     /* times a rank ahead waited for slower ones */
} ss_ingest_stats;
void ss_ingest_get_stats(const ss_ingest *in, ss_ingest_stats *out);

#endif
