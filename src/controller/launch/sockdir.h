/*
 * sockdir.h - the private directory that holds a controller's ingest
 * socket, and the cleaning of those that dead controllers left behind.
 *
 * The directory is BASE/stepscope-PID-XXXXXX, mode 0700, where BASE is
 * $XDG_RUNTIME_DIR when it is writable, else /tmp, and PID the
 * controller's.  Only the user can reach the socket inside (ctl.sock).
 * A controller killed with SIGKILL cannot remove its directory; the next
 * controller does, when it creates its own.
 */
#ifndef STEPSCOPE_SOCKDIR_H
#define STEPSCOPE_SOCKDIR_H

#include <stddef.h>

/* The socket's name inside the directory. */
#define SS_SOCKDIR_SOCKET "ctl.sock"

/*
 * Removes the stale socket directories in BASE (ss_sockdir_sweep), then
 * creates a new private one and writes its path to DIR (DIRLEN bytes).
 * Returns 0, or -1 with a one-line reason in ERR.
 */
int ss_sockdir_create(char *dir, size_t dirlen, char *err, size_t errlen);

/*
 * Removes the socket directories in BASE that a dead controller left: a
 * directory named stepscope-*, owned by this user, whose socket accepts no
 * connection (refused; or missing in a directory older than a minute), and
 * whose owner pid, when its name holds one, is not alive.  Anything else is
 * left alone: another user's, a live controller's, or one just being set
 * up.  Returns how many it removed.
 */
int ss_sockdir_sweep(const char *base);

/* Removes DIR, made by ss_sockdir_create, and the socket in it.  "" is a
 * no-op. */
void ss_sockdir_remove(const char *dir);

#endif
