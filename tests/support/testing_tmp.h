/*
 * testing_tmp.h - a scratch directory for unit tests that write files.
 *
 * The first testing_tmp_path() call makes a fresh directory under $TMPDIR
 * (or /tmp) and registers its removal, contents and all, at exit; every
 * test of the binary then shares it.  Header-only, like testing.h.
 */
#ifndef STEPSCOPE_TESTING_TMP_H
#define STEPSCOPE_TESTING_TMP_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char testing_tmpdir_[512];

static inline int testing_rm_one_(const char *path, const struct stat *sb,
                                  int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void testing_tmp_cleanup_(void)
{
    if (testing_tmpdir_[0])
        nftw(testing_tmpdir_, testing_rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* The test binary's scratch directory ("" when it could not be made). */
static inline const char *testing_tmp_dir(void)
{
    if (!testing_tmpdir_[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(testing_tmpdir_, sizeof testing_tmpdir_,
                 "%s/stepscope_test.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(testing_tmpdir_))
            testing_tmpdir_[0] = '\0';
        else
            atexit(testing_tmp_cleanup_);
    }
    return testing_tmpdir_;
}

/* NAME inside the scratch directory, written to OUT (OUTLEN bytes), which
 * is returned. */
static inline const char *testing_tmp_path(const char *name, char *out,
                                           size_t outlen)
{
    snprintf(out, outlen, "%s/%s", testing_tmp_dir(), name);
    return out;
}

/* Writes TEXT to ROOT/REL, making ROOT and the folders of REL as needed
 * (for fake /proc and /sys trees).  Silently does nothing on failure: the
 * test's reads then fail visibly. */
static inline void testing_write_file(const char *root, const char *rel,
                                      const char *text)
{
    char path[1024];
    mkdir(root, 0700);
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

#endif
