/*
 * agent.h - `stepscope run` on a node other than node 0 of a multi-node
 * run: the node agent.
 *
 * The agent connects to the controller (node 0) over TCP, both sides prove
 * they know the run's shared secret (link_auth.h), and the controller
 * admits it as node NODE_RANK.  It then estimates its clock's offset to
 * the controller's (clock_sync.h; again every SS_AGENT_CLOCK_PERIOD_MS),
 * launches and supervises its NPROC ranks (global ranks NODE_RANK × NPROC
 * + LOCAL_RANK, torchrun's environment), and carries their connections to
 * the controller over the link unchanged, each as a channel.  It reads the
 * host's evidence about each of its ranks (host_watch.h) and sends it per
 * rank step, reports rank starts and exits, and carries out the
 * controller's STOP.  Before its ranks start it runs the node's health
 * checks (health.h) and reports them (HEALTH); a failure starts no rank.
 * It carries out injected faults (INJECT) on its ranks' process groups.  When its ranks have all exited it says so and BYE,
 * and returns the node's job status.  When the controller is lost
 * (connection closed, no heartbeat within the timeout) it stops its ranks
 * and fails: no process is left behind on the node.
 *
 * With --max-restarts N > 0 the job may run again (docs/fault-tolerance.md):
 * after ALL_EXITED the agent stays and waits for the controller's word,
 * RESTART(attempt) to launch its ranks again as that attempt (stopping
 * them first if they still run), or STOP to say BYE and end with the
 * node's last status.  When it loses the controller and restarts remain
 * (its attempt < N), it stops its ranks and then joins again, retrying
 * (a refusal included) until the join timeout: the controller takes it
 * back for its next attempt.  Only when that fails does it end, with 1.
 */
#ifndef STEPSCOPE_AGENT_H
#define STEPSCOPE_AGENT_H

#include <stdint.h>

#include "health.h"
#include "link_auth.h"
#include "rank_env.h"

#define SS_AGENT_CLOCK_PERIOD_MS 10000

typedef struct {
    uint32_t node_rank;      /* 1..nnodes-1, or LINK_NODE_RANK_ANY: the
                                controller numbers it as it joins */
    uint32_t nnodes;
    uint32_t nproc;          /* ranks on this node */
    const char *master_addr; /* the controller's host (name or address) */
    uint16_t master_port;    /* the training's rendezvous (MASTER_PORT) */
    uint16_t controller_port;/* where the controller listens for agents */
    const link_secret *secret;
    const char *job_id;      /* all nodes of the run alike */
    char **argv;             /* the command, NULL-terminated */
    int auto_mode;
    const char *numerics;    /* --numerics for --auto ranks; NULL: light
                                (a replay's full mode is node 0's alone) */
    const ss_replica_opts *replica; /* --checksum-every, --checksum,
                                       --replica-groups; NULL: none */
    int quiet;
    const uint8_t *echo_mask; /* the streams of each local rank shown
                                 (launcher.h); NULL: all */
    const char *role;        /* ROLE_NAME; NULL: "default" */
    uint32_t grace_ms;
    uint32_t join_timeout_ms;      /* reach and join the controller */
    uint32_t heartbeat_ms;         /* 0: 1000 */
    uint32_t heartbeat_timeout_ms; /* 0: 10000 */
    uint32_t host_interval_ms;     /* 0: no host evidence */
    const char *log_dir;     /* NULL: beside the default store */
    uint32_t max_restarts;   /* --max-restarts, as on node 0 */
    const ss_health_config *health; /* checked before the ranks start;
                                       NULL: no check */
} ss_agent_config;

/* Runs the agent until its ranks have exited; returns the exit status for
 * `stepscope run`: the node's job status (launcher.h), or 1 when it could
 * not join or lost the controller (with the reason on stderr). */
int ss_agent_main(const ss_agent_config *cfg);

#endif
