/*
 * run.h - `stepscope run`: the controller of one observed job.
 *
 * Wires the parts together on one libuv loop: the launcher starts the
 * ranks, the ingest socket receives their step records, the aggregator
 * finalizes steps and runs the detectors, and the store keeps everything.
 * Signals (Ctrl-C, SIGTERM, SIGHUP) stop the ranks with a grace period.
 * The options come parsed and checked from the command's front-end
 * (run_opts.h); on a node other than node 0 the front-end starts an agent
 * (agent.h) instead of the controller.
 */
#ifndef STEPSCOPE_RUN_H
#define STEPSCOPE_RUN_H

#include "link_auth.h"
#include "run_opts.h"

/* What every node does before anything starts: loads the agent links'
 * shared secret into SECRET on a multi-node run (O->nnodes > 1), scrubs it
 * from the environment, and sizes the open-file limit for the node's
 * ranks.  Returns 0, or the exit status of `stepscope run` after saying
 * why on stderr (2: no usable secret, 1: the crypto library or the
 * open-file limit failed). */
int ss_run_prepare(const ss_run_opts *o, link_secret *secret);

/* Node 0: runs the controller until the job is over.  SECRET (from
 * ss_run_prepare) is read on a multi-node run.  Returns the job's exit
 * status (the last attempt's: the first failing rank's), or 1 when the
 * controller itself could not start (128 + the signal when one stopped
 * its start-up). */
int ss_run_controller(const ss_run_opts *o, const link_secret *secret);

#endif
