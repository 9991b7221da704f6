/*
 * store_files.h - where the files that belong to a store live.
 *
 * A store PATH keeps everything else it owns in one private directory
 * beside it, PATH.d (for the default store,
 * ~/.local/share/stepscope/stepscope.db.d):
 *
 *   PATH.d/logs/run-ID/rank-N.log   the ranks' output (`stepscope run`)
 *   PATH.d/live/run-ID.json         how to reach a running controller
 *   PATH.d/locks/UUID.lock          held by the controller of run UUID
 *
 * Two stores in one directory therefore never share a log, a live file or
 * a lock.  Every path is derived here and nowhere else: the controller
 * that writes them and the commands that read them (`top`, `report`, the
 * HTTP API) call these functions with the store path they were given.
 * PATH is made canonical (realpath) when the file exists, so `--db a.db`,
 * `--db ./a.db` and a symlink to it name the same directory.
 */
#ifndef STEPSCOPE_STORE_FILES_H
#define STEPSCOPE_STORE_FILES_H

#include <stddef.h>
#include <stdint.h>

/* The default store path: $XDG_DATA_HOME/stepscope/stepscope.db, else
 * $HOME/.local/share/stepscope/stepscope.db.  Returns 0 or -1 (no HOME).
 * (Declared here, beside the paths derived from it; store.h includes
 * this header, so callers of the store see it as before.) */
int ss_store_default_path(char *out, size_t outlen);

/*
 * Each function writes a path into OUT (OUTLEN bytes) and returns 0, or
 * returns -1 with errno set: ENAMETOOLONG when it does not fit, ENOENT when
 * DB_PATH is NULL and there is no default store path (no HOME).  DB_PATH
 * NULL means the default store (ss_store_default_path).  Nothing is
 * created.
 */

/* PATH.d: the directory of everything the store owns. */
int ss_store_files_dir(const char *db_path, char *out, size_t outlen);

/* PATH.d/logs/run-RUN_ID: the default log directory of run RUN_ID. */
int ss_store_log_dir(const char *db_path, int64_t run_id, char *out,
                     size_t outlen);

/* PATH.d/profiles/run-RUN_ID: where the ranks of run RUN_ID write the
 * traces `stepscope profile` asks for. */
int ss_store_profile_dir(const char *db_path, int64_t run_id, char *out,
                         size_t outlen);

/* PATH.d/live: where live-run files are. */
int ss_store_live_dir(const char *db_path, char *out, size_t outlen);

/* PATH.d/live/run-RUN_ID.json: the live-run file of run RUN_ID. */
int ss_store_live_file(const char *db_path, int64_t run_id, char *out,
                       size_t outlen);

/* PATH.d/locks: where run locks are (store/runlock.h). */
int ss_store_lock_dir(const char *db_path, char *out, size_t outlen);

/* PATH.d/locks/UUID.lock: the lock of the run whose uuid is UUID; -1 with
 * EINVAL when UUID is empty, starts with '.' or holds a '/'. */
int ss_store_lock_file(const char *db_path, const char *uuid, char *out,
                       size_t outlen);

#endif
