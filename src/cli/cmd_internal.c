/*
 * cmd_internal.c - the internal commands `stepscope run` starts itself:
 * `__rank-exec`, the shim each rank runs in before its command (its
 * arguments are the launcher's own protocol, read by launcher.c), and
 * `__job-watchdog`, the process that ends what a job left behind
 * (containment.h).  Not for people to type.
 */
#include "commands.h"

#include "containment.h"
#include "launcher.h"

int ss_cmd_rank_exec(int argc, char **argv)
{
    return ss_launcher_rank_exec_main(argc, argv);
}

int ss_cmd_job_watchdog(int argc, char **argv)
{
    return ss_containment_watchdog_main(argc, argv);
}
