/*
 * remote_stacks.h - the stacks of the ranks on the other nodes of a
 * multi-node run, as the controller gathers them through the node agents
 * (docs/debug.md, "Other nodes").
 *
 * A fetch sends STACKS_REQ (link_wire.h) to every node 1..nnodes-1 through
 * the caller's ASK hook and assembles the STACKS_PART chunks that come
 * back into one JSON object per rank (stack_collect.h's exchange format),
 * in rank order, from rank nproc (node 1's first) to the world's last.  A
 * rank whose node cannot be asked, is lost meanwhile, or has not answered
 * when the wait ends (the agents' deadline plus a slack for the way back)
 * gets a placeholder in the same format:
 *   {"rank":R,"host":"<its node's host>","pid":0,"state":"no_answer",
 *    "why":"node K did not answer within 2.0 s","threads":[]}
 * so partial data is said, never hidden.  What a rank sends is bounded
 * (SS_REMOTE_STACKS_MAX_RANK bytes; beyond, its answer is replaced by a
 * placeholder saying so), and so is a whole fetch
 * (SS_REMOTE_STACKS_MAX_TOTAL).  An answer that is not a JSON object of
 * the rank it claims to be is replaced too.  Chunks of a fetch that ended
 * are dropped.
 *
 * Threading: the loop's thread only.
 */
#ifndef STEPSCOPE_REMOTE_STACKS_H
#define STEPSCOPE_REMOTE_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "link_wire.h"
#include "stack_service.h"

#define SS_REMOTE_STACKS_MAX_RANK (8u << 20)   /* bytes kept of one rank */
#define SS_REMOTE_STACKS_MAX_TOTAL (64u << 20) /* bytes kept of one fetch */
#define SS_REMOTE_STACKS_MAX_FETCHES 16        /* fetches at once */
#define SS_REMOTE_STACKS_SLACK_MS 400 /* the wait beyond the agents' deadline */

typedef struct ss_remote_stacks ss_remote_stacks;

typedef struct {
    uint32_t nnodes;  /* >= 2; node 0 is the controller's own */
    uint32_t nproc;   /* ranks per node: rank R is on node R / nproc */
    void *ctx;
    /* Sends REQ to NODE.  Returns 0 when sent, or -1 with why the node
     * cannot be asked in WHY ("node 2 never joined"). */
    int (*ask)(void *ctx, uint32_t node, const link_stacks_req *req,
               char *why, size_t whylen);
    /* NODE's host name for the placeholders ("" when unknown). */
    const char *(*host_of)(void *ctx, uint32_t node);
    uint32_t slack_ms; /* 0: SS_REMOTE_STACKS_SLACK_MS */
} ss_remote_stacks_config;

/* Gathering for CFG (copied) on LOOP.  NULL when memory runs out. */
ss_remote_stacks *ss_remote_stacks_new(uv_loop_t *loop,
                                       const ss_remote_stacks_config *cfg);

/*
 * ss_stack_remote_fn (stack_service.h) with CTX the gatherer: asks every
 * other node for its ranks' stacks (with native frames when NATIVE)
 * within DEADLINE_MS (1 to LINK_MAX_STACKS_DEADLINE_MS), waits at most
 * DEADLINE_MS + slack, and calls DONE once with the objects of ranks
 * nproc..nnodes*nproc-1 in rank order (the strings are freed when DONE
 * returns).  DONE may be called before this returns (when no node can be
 * asked).  Returns 0, or -1 (too many fetches at once, a bad deadline,
 * closed, out of memory) with DONE never called.
 */
int ss_remote_stacks_fetch(void *ctx, int native, uint32_t deadline_ms,
                           ss_stack_remote_done_cb done, void *done_ctx);

/* A STACKS_PART from NODE.  Returns 0 when taken; -1 when dropped (no
 * such fetch any more, the rank is not NODE's or already answered). */
int ss_remote_stacks_part(ss_remote_stacks *g, uint32_t node,
                          const link_stacks_part *p);

/* NODE is gone (WHY: "node 1 was lost"): its ranks not yet answered in
 * every fetch get placeholders with WHY. */
void ss_remote_stacks_node_gone(ss_remote_stacks *g, uint32_t node,
                                const char *why);

/* Ends every fetch (the ranks not yet answered: "the controller is
 * closing") and frees G once its timers are closed (the loop must run
 * on).  NULL: no-op. */
void ss_remote_stacks_close(ss_remote_stacks *g);

#endif
