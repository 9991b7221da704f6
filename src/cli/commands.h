/*
 * commands.h - the command front-ends of `stepscope` (one file each,
 * cmd_<name>.c): each parses its command line and calls its stage's
 * library.  ARGV[0] is the command word; each returns the process's exit
 * status.
 */
#ifndef STEPSCOPE_COMMANDS_H
#define STEPSCOPE_COMMANDS_H

#include "link_auth.h"
#include "run_opts.h"

/* `stepscope run` (cmd_run.c). */
int ss_cmd_run(int argc, char **argv);

/* `stepscope run` on a node other than node 0 (cmd_agent.c): the node
 * agent, with the options cmd_run.c parsed and the links' SECRET that
 * ss_run_prepare loaded.  No command word of its own. */
int ss_cmd_agent(const ss_run_opts *o, const link_secret *secret);

/* The internal commands the run starts (cmd_internal.c): a rank's exec
 * shim (`__rank-exec`) and the job's watchdog (`__job-watchdog`). */
int ss_cmd_rank_exec(int argc, char **argv);
int ss_cmd_job_watchdog(int argc, char **argv);

#endif
