/*
 * stack_memory.h - the ranks' Python stacks read from their memory, off
 * the loop (docs/debug.md, "Python stacks from memory").
 *
 * The collector (stack_collect.h) first reads each rank's Python stacks
 * from outside the process (host/py_remote.h): no signal, so a rank in a
 * C call that does not retry on EINTR is not disturbed, a stopped rank is
 * read as it stands, and a rank that never loaded stepscope is read too.
 * The reading opens the files the rank has mapped (to find the
 * interpreter), which may sit on a file system that hangs, so it runs on
 * a thread of its own, one per request, reading the ranks one after the
 * other; the loop looks at each rank's result on its poll timer and, for
 * a rank whose reading failed or takes too long, asks the rank itself
 * (the signal) instead.
 *
 * A reader stuck in a file system keeps its thread and memory until it
 * returns; at most SS_STACK_MEMORY_MAX_READERS are alive at once, beyond
 * which ss_stack_memory_start answers NULL (every rank is then asked by
 * the signal).
 *
 * Threading: ss_stack_memory_* on one thread (the loop's); the reader on
 * its own, detached, with every signal blocked.
 */
#ifndef STEPSCOPE_STACK_MEMORY_H
#define STEPSCOPE_STACK_MEMORY_H

#include <stddef.h>
#include <sys/types.h>

#define SS_STACK_MEMORY_MAX_READERS 2

typedef struct ss_stack_memory ss_stack_memory;

/* The innermost frame of one thread of a result: its source line goes at
 * offset AT of the threads text. */
typedef struct {
    const char *file;
    long line;
    size_t at;
} ss_stack_memory_leaf;

/* Starts reading the Python stacks of PIDS[i], i < N, on a new thread.
 * NULL when N is 0, memory runs out, no thread starts, or
 * SS_STACK_MEMORY_MAX_READERS readers are still alive. */
ss_stack_memory *ss_stack_memory_start(const pid_t *pids, size_t n);

/*
 * Target I's result: 0 while it is being read; 1 when read, with
 * *THREADS (*LEN bytes: the "threads" array's elements, stack_collect.h)
 * and its NLEAVES innermost frames in *LEAVES; -1 when it could not be
 * read, with a one-line reason in *WHY.  What it points to lives until
 * the release.
 */
int ss_stack_memory_result(const ss_stack_memory *m, size_t i,
                           const char **threads, size_t *len,
                           const ss_stack_memory_leaf **leaves,
                           size_t *nleaves, const char **why);

/* The caller's hold ends: M is freed now when its reader has finished,
 * else by the reader when it does.  NULL is a no-op. */
void ss_stack_memory_release(ss_stack_memory *m);

#endif
