/*
 * runlock.h - is the controller of a run still alive?
 *
 * A run's row says `running` from the moment its controller registers it
 * until the controller ends it.  A controller that dies (SIGKILL, a crash,
 * its host going down) never ends it, and readers never write, so they
 * need another way to tell a live run from an interrupted one: the run
 * lock.  For its whole life the controller holds an open file description
 * lock (fcntl F_OFD_SETLK, write lock) on PATH.d/locks/UUID.lock
 * (store_files.h); the kernel drops the lock when the process dies, however
 * it dies.  A reader asks with F_OFD_GETLK, which takes nothing.
 *
 * The lock is taken before the run's row exists and released after its end
 * is committed, so a row whose status is `running` without a lock holder is
 * a run whose controller is gone: ss_run_status_now reports it as
 * `interrupted`, and the next controller that opens the store for writing
 * rewrites it so (ss_store_mark_interrupted in store.h).
 *
 * Limits: a store on a file system without working locks (some network or
 * FUSE file systems) falls back to the pid and host written in the lock
 * file: same host, pid gone: interrupted; another host: taken as alive.
 * A `running` row from a stepscope older than run locks has no lock file
 * and reads as interrupted.
 */
#ifndef STEPSCOPE_RUNLOCK_H
#define STEPSCOPE_RUNLOCK_H

#include <stddef.h>

/* The lock a controller holds; a zeroed one holds nothing. */
typedef struct {
    int held;
    int fd;
    char path[4096];
} ss_run_lock;

/*
 * Creates PATH.d/locks/UUID.lock for the store at DB_PATH (directories
 * 0700, file 0600), writes this process's pid and host into it and locks it
 * for as long as the process lives or until ss_run_lock_release.  The file
 * appears under its name only once locked, so a reader never sees it
 * unlocked while its controller lives.  Returns 0, or -1 with a one-line
 * reason in ERR.
 */
int ss_run_lock_take(ss_run_lock *lk, const char *db_path, const char *uuid,
                     char *err, size_t errlen);

/* Removes the lock file and releases the lock.  Call after the run's end
 * is committed.  A zeroed or released lock is a no-op. */
void ss_run_lock_release(ss_run_lock *lk);

/*
 * 1 while the controller of run UUID in the store DB_PATH (NULL: the
 * default store) holds its lock, 0 when it is gone (no lock file, or
 * nobody holds it).  When the answer cannot be known (the lock file is
 * unreadable, or locks do not work and the pid is on another host) the
 * controller is taken as alive: 1.  Never writes anything.
 */
int ss_run_controller_alive(const char *db_path, const char *uuid);

/*
 * The status to show for a run whose row says STORED_STATUS: "interrupted"
 * when STORED_STATUS is "running" and the run's controller is gone
 * (ss_run_controller_alive), else STORED_STATUS itself (NULL stays NULL).
 * Every reader (report, runs, the HTTP API) shows a run's status through
 * this function.  The result is a string constant or STORED_STATUS.
 */
const char *ss_run_status_now(const char *db_path, const char *uuid,
                              const char *stored_status);

/*
 * Removes the lock files of the store DB_PATH that no live controller
 * holds (left by controllers that died).  Returns how many were removed.
 */
int ss_run_locks_sweep(const char *db_path);

#endif
