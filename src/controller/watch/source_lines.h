/*
 * source_lines.h - lines of source files read off the loop, with a
 * deadline (docs/debug.md).
 *
 * A stack names the source file of each frame, and the stacks document
 * shows the innermost frame's line.  The file is whatever a rank's frame
 * says: a FIFO opened for reading blocks until a writer comes, a file on a
 * hung network mount blocks in open() or read() for as long as the mount
 * hangs, /dev/zero never ends.  So the lines are read on a thread of their
 * own, and the loop only looks whether they are there: a caller waits as
 * long as it chooses and then goes on without them.
 *
 * Only regular files are read (opened with O_NONBLOCK, so that a FIFO's
 * open returns, then checked with fstat), at most SS_SOURCE_MAX_BYTES of
 * each, names ending in ".py", lines 1..SS_SOURCE_MAX_LINE.  A reader whose
 * file system never answers keeps its thread and its memory until it does;
 * at most SS_SOURCE_MAX_READERS readers exist at once, beyond which
 * ss_source_lines_start answers NULL (no lines) rather than start another.
 *
 * Threading: ss_source_lines_* are called on one thread (the loop's); the
 * reader runs on its own, detached, with every signal blocked.
 */
#ifndef STEPSCOPE_SOURCE_LINES_H
#define STEPSCOPE_SOURCE_LINES_H

#include <stddef.h>

#define SS_SOURCE_MAX_BYTES (8u << 20) /* of one file */
#define SS_SOURCE_MAX_LINE 100000
#define SS_SOURCE_MAX_TEXT 255         /* bytes kept of a line */
#define SS_SOURCE_MAX_READERS 2        /* reader threads alive at once */

typedef struct ss_source_lines ss_source_lines;

/*
 * Starts reading line LINES[i] (1-based) of FILES[i], for i < N, on a new
 * thread; the strings are copied.  Returns NULL when N is 0, memory runs
 * out, no thread can be started, or SS_SOURCE_MAX_READERS are still
 * running (a reader stuck in a file system): the caller then has no lines.
 */
ss_source_lines *ss_source_lines_start(const char *const *files,
                                       const long *lines, size_t n);

/* 1 once every line has been read (or found unreadable). */
int ss_source_lines_done(const ss_source_lines *s);

/*
 * Line I, its leading and trailing blanks removed, or NULL: not a regular
 * ".py" file, no such line, a blank line, unreadable, or not read yet (before
 * ss_source_lines_done says 1, always NULL).  Valid until the release.
 */
const char *ss_source_lines_get(const ss_source_lines *s, size_t i);

/*
 * The caller's hold ends: S is freed now when its reader has finished,
 * else by the reader when it does.  NULL is a no-op.
 */
void ss_source_lines_release(ss_source_lines *s);

#endif
