/*
 * descendants.h - the processes below this one, found through /proc.
 *
 * The launcher ends every descendant of every rank at the end of a job,
 * also those that left the rank's process group (`setsid`, `setpgid`) and
 * so escape a signal to the group.  It makes the controller a child
 * subreaper (prctl PR_SET_CHILD_SUBREAPER), so a process whose parent dies
 * is re-parented to the controller instead of init and stays in its tree;
 * the tree is then read from the parent pids in /proc/PID/stat.
 *
 * Limits: a process that leaves the tree before the controller became a
 * subreaper, or after the controller died, is not found.  Reading /proc
 * races with processes that fork or exit meanwhile; callers scan again
 * until nothing is left.  A cgroup would hold every descendant without
 * these races but needs a delegated cgroup v2 subtree, which an ordinary
 * user does not have everywhere.
 */
#ifndef STEPSCOPE_DESCENDANTS_H
#define STEPSCOPE_DESCENDANTS_H

#include <stddef.h>
#include <sys/types.h>

/* One process, as /proc/PID/stat shows it. */
typedef struct {
    pid_t pid;
    pid_t ppid;
    pid_t pgid;
    char state;   /* 'R', 'S', 'Z' (exited, not yet reaped), ... */
} ss_proc;

/*
 * Makes this process a child subreaper: orphaned descendants are
 * re-parented to it, and it must reap them (waitpid).  Returns 0
 * or -1 with errno set.
 */
int ss_become_subreaper(void);

/*
 * The descendants of this process (children, their children, ...; not
 * this process itself) as a malloc'd array (the caller frees it) in *OUT,
 * in no particular order.  Returns the count (0 with *OUT NULL when none), or -1 with
 * errno set (no /proc, out of memory).
 */
int ss_descendants(ss_proc **out);

#endif
