/*
 * private_fs.h - files and directories that only their owner can read.
 *
 * Everything stepscope writes beside a store (the store itself, rank logs,
 * live-run files, run locks) holds a job's data: it is private to the user
 * by default.  Modes are set explicitly (fchmod / chmod after creation), so
 * they do not depend on the umask: a directory stepscope creates is 0700, a
 * file it creates is 0600.  What already exists is left as it is, so a
 * person who loosened a mode on purpose keeps it.
 */
#ifndef STEPSCOPE_PRIVATE_FS_H
#define STEPSCOPE_PRIVATE_FS_H

#define SS_PRIVATE_DIR_MODE 0700
#define SS_PRIVATE_FILE_MODE 0600

/*
 * mkdir -p PATH: creates each missing directory of PATH with mode 0700.
 * Returns 0 (also when everything existed), or -1 with errno set (PATH too
 * long: ENAMETOOLONG; a component that is not a directory: ENOTDIR; ...).
 */
int ss_mkdirs_private(const char *path);

/*
 * mkdir -p of the directory that holds the file PATH ("a/b/c.db": "a/b"),
 * as ss_mkdirs_private.  A PATH without a slash needs nothing: returns 0.
 */
int ss_mkdirs_private_parent(const char *path);

/*
 * Opens PATH with FLAGS (O_WRONLY, O_RDWR, O_APPEND, ...; O_CLOEXEC is
 * added), creating it with mode 0600 when missing.  *CREATED (may be NULL)
 * tells whether this call created the file.  Never truncates: FLAGS must
 * not hold O_TRUNC (EINVAL).  Returns the descriptor (the caller closes it)
 * or -1 with errno set.
 */
int ss_open_private(const char *path, int flags, int *created);

#endif
