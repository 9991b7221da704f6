/*
 * private_fs.h - files and directories that only their owner can change.
 *
 * Everything stepscope writes beside a store (the store itself, rank logs,
 * live-run files, run locks, profile directories) holds a job's data: it is
 * private to the user by default.  Modes are set explicitly (fchmod / chmod
 * after creation), so they do not depend on the umask: a directory
 * stepscope creates is 0700, a file it creates is 0600.
 *
 * What already exists is used only when nobody else could have planted or
 * could change it: a private directory or file that exists must be owned by
 * the running user (the effective uid) and not writable by group or others,
 * and it is never reached through a symbolic link in its last component
 * (O_NOFOLLOW).  The directories above it must be owned by the user or by
 * root and not writable by others unless sticky (/tmp), and a symbolic link
 * among them must be owned by the user or by root.  Anything else is
 * refused with a message that names the path, its owner and its mode.  A
 * person who made an existing log readable by others keeps that mode.
 */
#ifndef STEPSCOPE_PRIVATE_FS_H
#define STEPSCOPE_PRIVATE_FS_H

#include <stddef.h>

#define SS_PRIVATE_DIR_MODE 0700
#define SS_PRIVATE_FILE_MODE 0600

/*
 * mkdir -p PATH: creates each missing directory of PATH with mode 0700 and
 * checks what existed (private_fs.h): PATH itself must then be a directory,
 * not a symbolic link, owned by the user and not writable by group or
 * others; the directories above it must be trusted.  Returns 0 (also when
 * everything existed), or -1 with errno set (EPERM: refused as not private;
 * ENAMETOOLONG, ENOTDIR, ...) and the reason, naming the path, in ERR
 * (ERRLEN bytes; ERR may be NULL).
 */
int ss_mkdirs_private(const char *path, char *err, size_t errlen);

/*
 * mkdir -p of the directory that holds the file PATH ("a/b/c.db": "a/b"):
 * missing directories are created 0700; every existing one, the last
 * included, must be trusted (owned by the user or by root, not writable by
 * others unless sticky), so a store may live in /tmp.  A PATH without a
 * slash needs nothing: returns 0.  Errors as ss_mkdirs_private.
 */
int ss_mkdirs_private_parent(const char *path, char *err, size_t errlen);

/*
 * Opens PATH with FLAGS (O_WRONLY, O_RDWR, O_APPEND, ...; O_CLOEXEC and
 * O_NOFOLLOW are added), creating it with mode 0600 when missing.  An
 * existing PATH must be a regular file (a FIFO or a device is refused
 * without blocking), owned by the user and not writable by group or
 * others.  *CREATED (may be NULL) tells whether this call created the file.
 * Never truncates: FLAGS must not hold O_TRUNC (EINVAL).  Returns the
 * descriptor (the caller closes it) or -1 with errno set (EPERM: refused as
 * not private; ELOOP: a symbolic link) and the reason in ERR (may be NULL).
 */
int ss_open_private(const char *path, int flags, int *created, char *err,
                    size_t errlen);

/*
 * Checks that an existing file PATH, if there is one, may be used as a
 * private file: not a symbolic link, a regular file, owned by the user,
 * not writable by group or others.  Returns 0 (also when PATH does not
 * exist) or -1 with errno set and the reason in ERR.  For files another
 * library opens by name (SQLite's -wal and -shm files).
 */
int ss_check_private_file(const char *path, char *err, size_t errlen);

#endif
