/*
 * commands.h - the front-ends of the `stepscope` commands, one file each
 * (src/cli/cmd_NAME.c), which main.c's dispatch table calls.
 *
 * A front-end owns its command line: it parses ARGV (ARGV[0] is the
 * command's name), prints the usage for -h/--help, checks the options and
 * reports a bad one on stderr as "stepscope NAME: ..." with exit status 2,
 * then hands an options structure to its stage's library, which does the
 * work.  Each returns the process exit status its --help describes.
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

/* The commands that read a store or a running controller. */
int ss_cmd_report(int argc, char **argv);       /* views/report.h */
int ss_cmd_runs(int argc, char **argv);         /* views/report.h */
int ss_cmd_upgrade(int argc, char **argv);      /* store/store.h */
int ss_cmd_push(int argc, char **argv);         /* store/pg_push.h */
int ss_cmd_serve(int argc, char **argv);        /* api/serve.h */
int ss_cmd_stacks(int argc, char **argv);       /* views/stacks_cmd.h */
int ss_cmd_top(int argc, char **argv);          /* views/top.h */
int ss_cmd_profile(int argc, char **argv);      /* views/profile_cmd.h */
int ss_cmd_guard(int argc, char **argv);        /* views/guard.h */
int ss_cmd_trace(int argc, char **argv);        /* views/trace.h */
int ss_cmd_goodput(int argc, char **argv);      /* views/goodput_view.h */
int ss_cmd_diff(int argc, char **argv);         /* views/diff.h */
int ss_cmd_gpus(int argc, char **argv);         /* host/gpu_backend.h */
int ss_cmd_native_stack(int argc, char **argv); /* host/native_stack.h */

#endif
