/*
 * node_links.h - the controller's side of a multi-node run's agent links.
 *
 * Listens on TCP for the agents of the other nodes (job/agent.c), proves
 * itself and checks each agent's proof over the run's shared secret
 * (link_auth.h), and asks the controller whether the node may join.  A
 * joined node's rank connections arrive multiplexed on its link: each
 * becomes an ingest channel (ingest.h) whose records are moved onto the
 * controller's clock by the node's latest clock estimate.  The rest of
 * what an agent says (clock estimates, rank starts and exits, host
 * evidence, the end of its ranks, its health check) goes to callbacks;
 * STOP, INJECT and STACKS_REQ go the other way.  With node aggregation,
 * each agent's step partials go to on_partial and its batched STATUS
 * frames to their channels.  A link whose peer sends
 * anything malformed, fails authentication or stays silent past the
 * heartbeat timeout is closed; a joined node's link that ends without BYE
 * is reported lost, after its channels are reported gone.  Runs on the
 * controller's libuv loop; never blocks.
 *
 * What a stranger on the network can cost the controller is bounded
 * before it authenticates: the handshake must end within an absolute
 * deadline from the connection (however the bytes trickle in), a frame
 * before authentication is at most LINK_MAX_HANDSHAKE_PAYLOAD bytes, and
 * at most max_preauth links wait in the handshake at once, at most
 * max_preauth_per_addr of them from one address: a connection over a cap
 * closes the oldest waiting link under that cap, so a flood cannot hold
 * the slots a real agent needs.  Refusals are counted, not reported one
 * by one: the first of a quiet period goes to on_refused, the rest of the
 * period are summed into one on_refusals call at its end.
 */
#ifndef STEPSCOPE_NODE_LINKS_H
#define STEPSCOPE_NODE_LINKS_H

#include <stdint.h>
#include <uv.h>

#include "ingest.h"
#include "link_auth.h"
#include "link_wire.h"

typedef struct ss_node_links ss_node_links;

typedef struct {
    void *ctx;
    /* An agent proved it knows the secret and says it is node H->node_rank
     * from ADDR, or leaves its number to the run (LINK_NODE_RANK_ANY):
     * then a join sets H->node_rank, which JOIN_OK names and the link's
     * frames carry from then on.  Return 0 to let it join, or -1 with a
     * one-line reason in REASON (another node has that rank, a different
     * job...). */
    int (*on_join)(void *ctx, link_agent_hello *h, const char *addr,
                   char *reason, size_t reasonlen);
    /* NODE's clock estimate (its records are moved by OFFSET from now). */
    void (*on_clock)(void *ctx, uint32_t node, const link_clock *c);
    void (*on_rank_started)(void *ctx, uint32_t node,
                            const link_rank_started *s);
    void (*on_rank_exit)(void *ctx, uint32_t node, const link_rank_exit *e);
    void (*on_all_exited)(void *ctx, uint32_t node,
                          const link_all_exited *a);
    void (*on_host)(void *ctx, uint32_t node, const link_host *h);
    /* NODE's link ended: CLEAN after its BYE, else lost for WHY ("its
     * connection closed", "no heartbeat for 10 s"...).  Called once per
     * joined node. */
    void (*on_node_gone)(void *ctx, uint32_t node, int clean, const char *why);
    /* A connection that never joined was closed: ADDR, and why.  Called
     * for the first refusal after refusal_report_ms without one; the
     * refusals that follow within a period go to on_refusals. */
    void (*on_refused)(void *ctx, const char *addr, const char *why);
    /* NODE's health check before its ranks start (HEALTH). */
    void (*on_health)(void *ctx, uint32_t node, const link_health *h);
    /* A chunk of one of NODE's ranks' stacks (STACKS_PART); P's bytes are
     * valid during the call only. */
    void (*on_stacks_part)(void *ctx, uint32_t node,
                           const link_stacks_part *p);
    /* COUNT more connections were refused in the last SECONDS (the
     * period's, or less at close) than on_refused was told of; REASONS
     * counts them by cause ("12 no handshake within the deadline, 3
     * protocol error; the last from 10.0.0.9:41234").  Called at most
     * once per refusal_report_ms, and at close when some are untold. */
    void (*on_refusals)(void *ctx, uint64_t count, double seconds,
                        const char *reasons);
    /* NODE's partial of one step (--aggregate node), its latest-ending
     * times moved onto the controller's clock; valid during the call
     * only.  May be NULL. */
    void (*on_partial)(void *ctx, uint32_t node, const ss_node_partial *p);
    /* One of NODE's ranks was stopped or runs again (RANK_STOP).  May be
     * NULL. */
    void (*on_rank_stop)(void *ctx, uint32_t node, const link_rank_stop *s);
    /* A chunk of the answer to a RECENT_REQ (RECENT_PART); P's bytes are
     * valid during the call only. */
    void (*on_recent_part)(void *ctx, uint32_t node,
                           const link_recent_part *p);
} ss_node_links_callbacks;

typedef struct {
    const char *bind_addr;       /* NULL: every address ("0.0.0.0") */
    uint16_t port;
    const link_secret *secret;   /* copied */
    const char *run_uuid;
    uint32_t attempt;
    uint32_t world_size;
    const uint8_t *rank_token;   /* WIRE_TOKEN_SIZE bytes, sealed per link */
    uint32_t heartbeat_ms;       /* default 1000 when 0 */
    uint32_t heartbeat_timeout_ms; /* default 10000 when 0 */
    /* From the connection to JOIN_OK, however the bytes trickle in. */
    uint32_t handshake_timeout_ms; /* default 10000 when 0 */
    uint32_t max_preauth;          /* links in the handshake; 0: 128 */
    uint32_t max_preauth_per_addr; /* of them from one address; 0: 8 */
    uint32_t refusal_report_ms;    /* refusal summary period; 0: 10000 */
    /* LINK_AGGREGATE_RANK (0) or LINK_AGGREGATE_NODE, told in JOIN_OK:
     * with NODE each agent sends one NODE_PARTIAL per step and its ranks'
     * STATUS frames batched in NODE_STATUS (fed to their channels here). */
    uint8_t aggregate;
} ss_node_links_config;

#define SS_NODE_LINKS_MAX_PREAUTH 128
#define SS_NODE_LINKS_MAX_PREAUTH_PER_ADDR 8
#define SS_NODE_LINKS_REFUSAL_REPORT_MS 10000

/* Starts listening.  Returns NULL with a reason in ERR ("listen on
 * 0.0.0.0:29501: address already in use").  CFG and CB are copied. */
ss_node_links *ss_node_links_start(uv_loop_t *loop, ss_ingest *ingest,
                                   const ss_node_links_config *cfg,
                                   const ss_node_links_callbacks *cb,
                                   char *err, size_t errlen);

/* Sends STOP to every joined node (KILL_NOW: SIGKILL at once; REASON is
 * quoted in their summaries). */
void ss_node_links_stop_all(ss_node_links *nl, int kill_now,
                            const char *reason);

/* The job restarts as ATTEMPT (>= 1): RESTART to every joined node, and
 * nodes that join from now on are told ATTEMPT in their JOIN_OK. */
void ss_node_links_restart_all(ss_node_links *nl, uint32_t attempt);

/* END to every joined node: no attempt follows (they say BYE). */
void ss_node_links_end_all(ss_node_links *nl);

/* Sends INJECT X to joined node NODE (its agent signals the rank).
 * Returns 0, or -1 when the node is not joined or X is malformed. */
int ss_node_links_inject(ss_node_links *nl, uint32_t node,
                         const link_inject *x);

/* Sends STACKS_REQ REQ to joined node NODE (its agent answers with
 * STACKS_PART frames, to on_stacks_part).  Returns 0, or -1 when the node
 * is not joined or REQ is malformed. */
int ss_node_links_stacks(ss_node_links *nl, uint32_t node,
                         const link_stacks_req *req);

/* Sends RECENT_REQ REQ to joined node NODE (its agent answers with
 * RECENT_PART frames, to on_recent_part).  Returns 0, or -1 when the
 * node is not joined or REQ is malformed. */
int ss_node_links_recent(ss_node_links *nl, uint32_t node,
                         const link_recent_req *req);

/* Stops listening and closes every link (joined nodes are not reported
 * gone).  Handles finish closing on the next loop iterations.  NULL is a
 * no-op. */
void ss_node_links_close(ss_node_links *nl);

/* The port listened on (the one given, or the one the kernel chose). */
uint16_t ss_node_links_port(const ss_node_links *nl);

#endif
