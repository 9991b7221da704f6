/*
 * run.h - `stepscope run`: the controller of one observed job.
 *
 * Wires the parts together on one libuv loop: the launcher starts the
 * ranks, the ingest socket receives their step records, the aggregator
 * finalizes steps and runs the detectors, and the store keeps everything.
 * Signals (Ctrl-C, SIGTERM, SIGHUP) stop the ranks with a grace period.
 */
#ifndef STEPSCOPE_RUN_H
#define STEPSCOPE_RUN_H

/* Entry point of `stepscope run`; ARGV[0] is "run".  Returns the job's exit
 * status (the first failing rank's), or 2 for a usage error and 1 when the
 * controller itself could not start. */
int ss_run_main(int argc, char **argv);

#endif
