/*
 * agent_channels.h - a node agent carries its ranks' connections to the
 * controller unchanged, each as a channel of the link (OPEN, DATA, CLOSE):
 * the bytes a rank writes go up as DATA, the controller's answers
 * (WELCOME, REJECT) come down to the rank.
 *
 * Each connection's bytes are also decoded here, passively, with the rank
 * protocol's own decoder: HELLO tells which rank it is, each STEP is
 * reported (on_step) before the step's record is sent on, so that the
 * agent can send the host's evidence of that step first.  A connection
 * the decoder fails on is still forwarded (the controller rejects it); it
 * just gets no evidence.
 */
#ifndef STEPSCOPE_AGENT_CHANNELS_H
#define STEPSCOPE_AGENT_CHANNELS_H

#include <stdint.h>
#include <uv.h>

#include "link_wire.h"
#include "wire.h"

typedef struct {
    uv_loop_t *loop;
    const uint8_t *token;  /* the run's token and uuid, for the decoder */
    const char *uuid;      /* (read at each new connection) */
    void *ctx;
    /* Sends F on the link: 0, or -1 when it cannot (the channel closes). */
    int (*send)(void *ctx, const link_frame *f);
    /* A connection said HELLO as global rank RANK, process PID. */
    void (*on_hello)(void *ctx, int64_t rank, uint32_t pid);
    /* Global rank RANK reported step S (before its bytes go up).  NAMES
     * is the connection's name table, indexed by name id (NULL where
     * undeclared; WIRE_MAX_NAME_ID + 1 entries). */
    void (*on_step)(void *ctx, int64_t rank, const wire_step *s,
                    const char *const *names);
    /* The connection of global rank RANK closed (after all its bytes were
     * read).  May be NULL. */
    void (*on_gone)(void *ctx, int64_t rank);
} ss_agent_channels_config;

typedef struct ss_agent_channels ss_agent_channels;

/* NULL when memory runs out; CFG is copied (its pointers are not). */
ss_agent_channels *ss_agent_channels_new(const ss_agent_channels_config *cfg);

/* The ranks' listening socket SERVER has a connection: accepted, OPEN. */
void ss_agent_channels_accept(ss_agent_channels *ch, uv_stream_t *server);

/* DATA from the controller for its channel: written to the rank. */
void ss_agent_channels_to_rank(ss_agent_channels *ch, const link_data *d);

/* CLOSE from the controller: the channel's connection closes (no CLOSE
 * goes back). */
void ss_agent_channels_closed(ss_agent_channels *ch, uint32_t channel);

/* From now on, node mode (see above): whole frames, STATUS held. */
void ss_agent_channels_node_mode(ss_agent_channels *ch);

/* Appends the held STATUS frame of every connection that has one to the
 * NODE_STATUS entries at BUF (*LEN bytes of CAP, link_node_status_put),
 * as many as fit; the ones appended are no longer held.  Returns how many
 * were appended. */
uint32_t ss_agent_channels_status_batch(ss_agent_channels *ch, uint8_t *buf,
                                        size_t cap, size_t *len);

/* Frees CH; its connections are closed with the loop's other handles.
 * NULL is a no-op. */
void ss_agent_channels_free(ss_agent_channels *ch);

#endif
