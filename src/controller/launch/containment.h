/*
 * containment.h - nothing the ranks start outlives a controller killed
 * with SIGKILL.
 *
 * PDEATHSIG ends each rank when the controller dies, but only the rank:
 * its children are re-parented to init and nobody is left to end them.  So
 * each launch has a watchdog, a small process of its own (`stepscope
 * __job-watchdog`, in a session of its own) that holds the read end of a
 * pipe whose only writer is the controller.  When the controller dies,
 * however it dies, the pipe reaches end of file and the watchdog SIGKILLs
 * what the job left:
 *
 *  - every rank's process group the controller told it about (a rank's
 *    DataLoader workers, a shell's background jobs);
 *  - where a cgroup v1 `pids` or `freezer` hierarchy is mounted and
 *    writable (root, or a delegated cgroup), every process in a cgroup
 *    made for the launch below the controller's own, which each rank joins
 *    before it runs its command: this also reaches processes that left
 *    their group (`setsid`, daemons).  A cgroup v2 hierarchy is not used:
 *    moving the ranks into a child would change the CPU throttling their
 *    host evidence reads.  Without a usable hierarchy only the process
 *    groups are covered, and ss_containment_start says why.
 *
 * A controller that ends normally closes the pipe after its own sweep has
 * ended everything: the watchdog finds nothing left, removes the cgroup
 * and exits, and ss_containment_end reaps it.
 */
#ifndef STEPSCOPE_CONTAINMENT_H
#define STEPSCOPE_CONTAINMENT_H

#include <stddef.h>
#include <sys/types.h>

#define SS_WATCHDOG_ARG "__job-watchdog"

typedef struct ss_containment ss_containment;

/*
 * Makes the launch's cgroup (when it can) and starts its watchdog, the
 * executable EXE run as `EXE __job-watchdog [CGROUP]`.  Returns the
 * handle (ss_containment_end frees it), or NULL when the watchdog could
 * not be started (then nothing is contained after a SIGKILL).  NOTE
 * (NOTELEN bytes) says what is not covered, or is "" when everything is.
 */
ss_containment *ss_containment_start(const char *exe, char *note,
                                     size_t notelen);

/* The launch's cgroup directory, which each rank joins (ss_containment_
 * join), or NULL without one (C may be NULL). */
const char *ss_containment_cgroup(const ss_containment *c);

/* The watchdog's pid (one of the controller's children, never a stray of
 * the ranks), or 0.  C may be NULL. */
pid_t ss_containment_pid(const ss_containment *c);

/* Tells the watchdog that process group PGID (a rank's) is the job's, or
 * no longer is (its members were ended).  C may be NULL.  Never blocks:
 * a full pipe (thousands of restarts without a read) drops the message. */
void ss_containment_add_group(ss_containment *c, pid_t pgid);
void ss_containment_drop_group(ss_containment *c, pid_t pgid);

/* Closes the pipe (the watchdog ends what is left, which is nothing after
 * the launcher's sweep), waits up to a second for the watchdog and frees
 * C.  NULL is a no-op. */
void ss_containment_end(ss_containment *c);

/* Moves the calling process into CGROUP (its cgroup.procs): the rank's
 * shim, before it runs the command.  Returns 0 or -1 with errno. */
int ss_containment_join(const char *cgroup);

/* `stepscope __job-watchdog [CGROUP]`: the watchdog's main (ARGV[0] is
 * the command word).  Reads "+PGID" / "-PGID" lines on standard input
 * until end of file, then ends what is left.  Returns 0. */
int ss_containment_watchdog_main(int argc, char **argv);

#endif
