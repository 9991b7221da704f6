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
 * STOP, INJECT and STACKS_REQ go the other way.  A link whose peer sends anything malformed, fails authentication
 * or stays silent past the heartbeat timeout is closed; a joined node's
 * link that ends without BYE is reported lost, after its channels are
 * reported gone.  Runs on the controller's libuv loop; never blocks.
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
     * from ADDR.  Return 0 to let it join, or -1 with a one-line reason in
     * REASON (another node has that rank, a different job...). */
    int (*on_join)(void *ctx, const link_agent_hello *h, const char *addr,
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
    /* A connection that never joined was closed: ADDR, and why. */
    void (*on_refused)(void *ctx, const char *addr, const char *why);
    /* NODE's health check before its ranks start (HEALTH). */
    void (*on_health)(void *ctx, uint32_t node, const link_health *h);
    /* A chunk of one of NODE's ranks' stacks (STACKS_PART); P's bytes are
     * valid during the call only. */
    void (*on_stacks_part)(void *ctx, uint32_t node,
                           const link_stacks_part *p);
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
    uint32_t handshake_timeout_ms; /* default 10000 when 0 */
} ss_node_links_config;

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

/* Stops listening and closes every link (joined nodes are not reported
 * gone).  Handles finish closing on the next loop iterations.  NULL is a
 * no-op. */
void ss_node_links_close(ss_node_links *nl);

/* The port listened on (the one given, or the one the kernel chose). */
uint16_t ss_node_links_port(const ss_node_links *nl);

#endif
