/*
 * http_live_file.c - the live-run file (http.h): how other commands
 * (`stepscope top`) find a running controller's server, its URL and,
 * beyond loopback, its token.
 *
 * Written beside the store (store_files.h) in a private directory, through
 * a temporary file and a rename, so a reader sees the whole file or none.
 */
#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "http_state.h"
#include "private_fs.h"
#include "store_files.h"

int ss_http_live_file_write(const char *db_path, int64_t run_id,
                            const ss_http *h, const char *token, char *path,
                            size_t pathlen, char *err, size_t errlen)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 16];
    if (ss_store_live_dir(db_path, dir, sizeof dir) != 0 ||
        ss_store_live_file(db_path, run_id, path, pathlen) != 0) {
        snprintf(err, errlen, "no live-run file for %s: %s", db_path,
                 strerror(errno));
        path[0] = '\0';
        return -1;
    }
    if (ss_mkdirs_private(dir, err, errlen) != 0) {
        path[0] = '\0';
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* left by a controller that died while writing it */
    ss_buf b = {0};
    ss_buf_puts(&b, "{\"url\":");
    ss_buf_json_str(&b, h->url);
    ss_buf_printf(&b, ",\"pid\":%ld,\"run_id\":%" PRId64, (long)getpid(),
                  run_id);
    if (h->token && token) {
        ss_buf_puts(&b, ",\"token\":");
        ss_buf_json_str(&b, token);
    }
    ss_buf_puts(&b, "}\n");
    int fd = b.oom ? -1 : ss_open_private(tmp, O_WRONLY, NULL, err, errlen);
    if (fd < 0 && !b.oom) {
        ss_buf_free(&b);
        path[0] = '\0';
        return -1;
    }
    int ok = fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s: %s", path,
                 b.oom ? "out of memory" : strerror(errno));
        unlink(tmp);
        path[0] = '\0';
    }
    ss_buf_free(&b);
    return ok ? 0 : -1;
}

void ss_http_live_file_remove(const char *path)
{
    if (path && path[0])
        unlink(path);
}
