/*
 * cmd_agent.c - the node agent's front-end: `stepscope run` on a node
 * other than node 0 of a multi-node run.  Hands the options cmd_run.c
 * parsed, as the agent's configuration, to the agent (agent.h).
 */
#include "commands.h"

#include "agent.h"

int ss_cmd_agent(const ss_run_opts *o, const link_secret *secret)
{
    const ss_agent_config cfg = {
        .node_rank = o->conf.node_rank == SS_NODECONF_RANK_AT_JOIN
                         ? LINK_NODE_RANK_ANY
                         : o->conf.node_rank,
        .nnodes = o->nnodes,
        .nproc = o->nproc_local,
        .master_addr = o->conf.master_addr,
        .master_port = o->master_port,
        .controller_port = o->controller_port,
        .secret = secret,
        .job_id = o->job_id,
        .argv = o->argv,
        .auto_mode = o->auto_mode,
        .numerics = o->numerics,
        .replica = &o->replica,
        .quiet = o->quiet,
        .echo_mask = o->echo_mask,
        .role = o->role,
        .grace_ms = o->grace_ms,
        .join_timeout_ms = o->join_timeout_ms,
        .heartbeat_timeout_ms = o->heartbeat_timeout_ms,
        .host_interval_ms = o->host_interval_ms,
        .log_dir = o->log_dir,
        .max_restarts = o->restart_cfg.max_restarts,
        .health = &o->health_cfg,
    };
    return ss_agent_main(&cfg);
}
