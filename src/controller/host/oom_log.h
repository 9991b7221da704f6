/*
 * oom_log.h - the kernel's OOM kills during a job, to say why a rank that
 * died of SIGKILL nobody in the job sent was killed.
 *
 * When memory runs out, in a memory cgroup at its limit or on the whole
 * host, the kernel's OOM killer picks a process and sends it SIGKILL; the
 * rank's exit says no more than "signal 9".  The kernel's log says more:
 *
 *   oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/job,task_memcg=/job,task=python3,pid=9799,uid=0
 *   Memory cgroup out of memory: Killed process 9799 (python3) total-vm:2689740kB, anon-rss:1789772kB, ...
 *
 * (and "memory: usage 1035364kB, limit 1035364kB, failcnt 45" before them
 * for a cgroup; "Out of memory: Killed process ..." when the host ran
 * out).  The reader opens the log (/dev/kmsg) when the job starts, at its
 * end, so it reads only what the kernel logs from then on, and reads it
 * when asked, after a death: nothing is read while the job trains.  Where
 * the log cannot be read (a container without CAP_SYSLOG, dmesg_restrict),
 * the host's count of OOM kills (/proc/vmstat oom_kill) still tells that
 * the kernel killed something during the job, without naming it.
 *
 * Not thread-safe: one reader per launcher, on its loop.
 */
#ifndef STEPSCOPE_OOM_LOG_H
#define STEPSCOPE_OOM_LOG_H

#include <stddef.h>
#include <sys/types.h>

typedef struct ss_oom_log ss_oom_log;

/* What the kernel logged of one OOM kill. */
typedef struct {
    pid_t pid;
    char comm[32];       /* the process's name, as the kernel logged it */
    int memcg;           /* 1: a memory cgroup at its limit; 0: the host */
    char cgroup[128];    /* the cgroup that ran out ("" when not logged) */
    long long limit_kb;  /* that cgroup's limit, -1 when not logged */
    long long anon_kb;   /* the process's anonymous memory, -1 unknown */
    long long file_kb;   /* its file-backed resident memory, -1 unknown */
} ss_oom_kill;

/* Opens the kernel's log at KMSG_PATH (NULL: /dev/kmsg) at its end and
 * reads the host's count of OOM kills from VMSTAT_PATH (NULL:
 * /proc/vmstat).  Never fails for a log or count that cannot be read
 * (ss_oom_log_explain then says less); returns NULL only when memory runs
 * out.  A regular file may stand for the log (tests append lines to it).
 * Free with ss_oom_log_free (NULL is a no-op). */
ss_oom_log *ss_oom_log_open(const char *kmsg_path, const char *vmstat_path);
void ss_oom_log_free(ss_oom_log *o);

/* Reads what the kernel logged since the last call and tells whether the
 * OOM killer killed PID.  Returns 1 with KILL filled when the log names
 * PID; 2 when the log cannot be read but the host counted more OOM kills
 * since the open than the calls before have already answered 2 for (KILL
 * untouched; the kill is then counted as answered); 0 when there is no
 * sign of an OOM kill of PID. */
int ss_oom_log_explain(ss_oom_log *o, pid_t pid, ss_oom_kill *kill);

/* What ran out, for a person, as the failure summary prints it after
 * "the kernel's OOM killer ended it: ": "its memory cgroup /job reached
 * its limit of 1011 MiB (the process held 1.7 GiB anonymous and 125 MiB
 * file-backed memory)" or "the host ran out of memory (...)".  Always
 * NUL-terminated when LEN > 0. */
void ss_oom_kill_describe(const ss_oom_kill *kill, char *out, size_t len);

/* Reads what the kernel logged since the last call and tells whether
 * TEXT (a rank's last lines) names a process the OOM killer killed during
 * the job, as "pid 42", "pid(s) 42", "pid=42" or "pids 7, 42": 1 with
 * KILL filled (the latest such kill), else 0.  For a rank that failed
 * because a child of its own was killed (PyTorch's "DataLoader worker
 * (pid 42) is killed by signal: Killed."). */
int ss_oom_log_kill_named_in(ss_oom_log *o, const char *text,
                             ss_oom_kill *kill);

/* Why the log could not be read ("" when it can): for the line that
 * answer 2 prints. */
const char *ss_oom_log_unreadable(const ss_oom_log *o);

#endif
