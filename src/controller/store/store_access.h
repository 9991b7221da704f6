/*
 * store_access.h - why the store cannot be opened when permissions are
 * the reason: which path, which operation, "Permission denied", and who
 * owns it, instead of SQLite's "attempt to write a readonly database" or
 * "unable to open database file".
 */
#ifndef STEPSCOPE_STORE_ACCESS_H
#define STEPSCOPE_STORE_ACCESS_H

#include <stddef.h>

/*
 * When the file permissions keep this process from reading (WRITE 0) or
 * writing (WRITE 1) the store at PATH - the file itself, its write-ahead
 * log and shared-memory files (PATH-wal, PATH-shm), or the directory that
 * holds them or must receive them - writes one sentence to OUT naming the
 * path, the operation and "Permission denied", with the owner and mode of
 * what refused, e.g. "cannot write the store /data/s.db: Permission
 * denied (/data/s.db is owned by alice, mode 0644)", and returns 1;
 * returns 0 (OUT untouched) when permissions are not the reason.
 */
int ss_store_access_problem(const char *path, int write, char *out,
                            size_t outlen);

#endif
