/*
 * agent_stacks.h - a node agent's answer to the controller's STACKS_REQ:
 * the stacks of the node's ranks, collected with the collector node 0
 * uses (stack_collect.h), each rank's JSON object sent back as
 * STACKS_PART chunks; a request that cannot be collected is answered at
 * once, every rank "no_answer" with why.
 */
#ifndef STEPSCOPE_AGENT_STACKS_H
#define STEPSCOPE_AGENT_STACKS_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "link_wire.h"

typedef struct {
    uv_loop_t *loop;
    const char *host;      /* the node's name, in each rank's object */
    uint32_t rank_base;    /* the node's first global rank */
    uint32_t nproc;        /* its ranks */
    const char *stack_dir; /* where its ranks write their stacks (read at
                              each request: set once the ranks start) */
    void *ctx;
    /* Sends F to the controller: 0, or -1 when nothing can be sent (the
     * rank's answer is given up). */
    int (*send)(void *ctx, const link_frame *f);
    /* The pid of local rank LOCAL now. */
    pid_t (*pid_of)(void *ctx, uint32_t local);
} ss_agent_stacks_config;

typedef struct ss_agent_stacks ss_agent_stacks;

/* A stacks service for one node; CFG is copied (its strings are not).
 * NULL when memory runs out. */
ss_agent_stacks *ss_agent_stacks_new(const ss_agent_stacks_config *cfg);

/* STACKS_REQ Q: collected within its deadline and sent, or refused at
 * once (a collector busy with other requests, memory). */
void ss_agent_stacks_request(ss_agent_stacks *s, const link_stacks_req *q);

/* Q is answered at once, every rank "no_answer" for WHY. */
void ss_agent_stacks_refuse(ss_agent_stacks *s, const link_stacks_req *q,
                            const char *why);

/* Ends what is being collected: the answers still due are handed to
 * send (which refuses them at the end), now or as the loop runs on.
 * NULL is a no-op. */
void ss_agent_stacks_close(ss_agent_stacks *s);

/* Frees S once the loop has run its last callbacks.  NULL is a no-op. */
void ss_agent_stacks_free(ss_agent_stacks *s);

#endif
