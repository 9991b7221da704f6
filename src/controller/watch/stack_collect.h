/*
 * stack_collect.h - every rank's stacks, collected on the loop
 * (docs/debug.md).
 *
 * For each target rank at once:
 *  - Python, from memory first: a thread of stack_memory.h reads the
 *    rank's interpreter state from outside (host/py_remote.h,
 *    process_vm_readv): no signal, so nothing in the rank is interrupted,
 *    and a stopped rank or one that never loaded stepscope is read too.
 *    A rank it cannot read (not CPython 3.11, permission refused, a torn
 *    read three times) or that it has not read within SS_STACK_MEMORY_MS
 *    (SS_STACK_MEMORY_NATIVE_MS with native frames; at most a third of
 *    the deadline) is asked with the signal instead:
 *  - Python, by the signal: the rank registered a faulthandler dump for the stack signal
 *    (SS_STACK_SIGNAL, python/stepscope/_stacks.py) writing to its stack
 *    file, which exists only once that handler is in place; a rank is
 *    signalled only when the file exists and its process holds it open.  The collector
 *    empties the file, sends the signal, and reads the file on a 5 ms
 *    timer until the end marker arrives or the deadline passes.  The dump
 *    takes no GIL, so a rank blocked in a C call that holds it answers.
 *  - With NATIVE: `EXE __native-stack PID` (host/native_stack.h), a helper
 *    process that ptrace-attaches, unwinds every thread with libdw and
 *    detaches; its output is read through a pipe.
 * A rank that is stopped (state T in /proc/PID/stat) cannot run a signal
 * handler: it is "stopped", with native frames when asked, and with its
 * Python threads when they were read from memory.  A rank that
 * did not answer in time is "no_answer" with why; one whose process is
 * gone is "exited".  Nothing runs between requests: no thread, no timer.
 *
 * The result is one JSON object per rank (the exchange format, the same
 * text a node agent forwards later):
 *   {"rank":R,"host":"h","pid":P,"state":"ok"|"no_answer"|"stopped"|
 *    "exited","via":"memory"|"signal" (how its threads were had: when
 *    ok, or stopped and read from memory),"memory_error":"…" (by the
 *    signal: why not from memory),"why":"…"|null,
 *    "threads":[{"id":"0x…","current":bool,
 *    "frames":[{"func","file","line","code"?},…]}],
 *    "native_threads":[{"tid","name","native":[{"pc","symbol","module"}]}]?,
 *    "native_error":"…"?}
 * frames are outermost first (the call path); threads in faulthandler's
 * order, newest first, so the last is the oldest: the main thread unless
 * it ended; "current" marks the thread that ran the handler (read from
 * memory: the thread that holds the GIL, if any).  The
 * innermost frame carries "code", its source line, when the file is a
 * regular file readable here and a thread read it within
 * SS_STACK_SOURCE_MS of the answers (source_lines.h: never on the loop).
 *
 * Threading: the loop's thread only.
 */
#ifndef STEPSCOPE_STACK_COLLECT_H
#define STEPSCOPE_STACK_COLLECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

/* The stack signal: SIGRTMIN + this (44 with glibc).  The same offset is
 * in python/stepscope/native_process.c. */
#define SS_STACK_SIGNAL_OFFSET 10
#define SS_STACK_DEADLINE_MS_DEFAULT 1500
#define SS_STACK_MAX_TARGETS 65536
#define SS_STACK_MAX_DUMP (1u << 20)     /* bytes read of one stack file */
#define SS_STACK_MAX_NATIVE (8u << 20)   /* bytes read from one helper */
#define SS_STACK_MAX_PENDING 8           /* requests queued behind one */
#define SS_STACK_SOURCE_MS 250           /* for the source lines, after */
#define SS_STACK_MEMORY_MS 500           /* for the reading from memory */
#define SS_STACK_MEMORY_NATIVE_MS 2000   /* the same, with native frames */

typedef struct ss_stack_collector ss_stack_collector;

typedef struct {
    uint32_t rank;          /* global rank */
    pid_t pid;              /* 0: the rank's process has exited */
    const char *stack_file; /* its stack file (copied) */
} ss_stack_target;

typedef struct {
    int native;             /* also native frames, through ptrace */
    uint32_t deadline_ms;   /* 0: SS_STACK_DEADLINE_MS_DEFAULT */
} ss_stack_options;

/*
 * Called once per request on the loop's thread with N per-rank JSON
 * objects, in the order of the targets.  RANKS and its strings belong to
 * the collector and are freed when the callback returns.  ELAPSED_MS:
 * from the request's start to its answer.
 */
typedef void (*ss_stack_done_cb)(void *ctx, const char *const *ranks,
                                 size_t n, double elapsed_ms);

/* A collector on LOOP.  EXE: the stepscope executable (for --native);
 * HOST: the name written into each rank's object.  NULL when memory runs
 * out. */
ss_stack_collector *ss_stack_collector_new(uv_loop_t *loop, const char *exe,
                                           const char *host);

/*
 * Collects the stacks of N targets (1..SS_STACK_MAX_TARGETS) and calls CB
 * once.  A request made while another runs waits for it (at most
 * SS_STACK_MAX_PENDING wait).  Returns 0, or a negative errno (-EINVAL,
 * -EBUSY when too many wait, -ENOMEM), in which case CB is never called.
 */
int ss_stack_collect(ss_stack_collector *c, const ss_stack_target *targets,
                     size_t n, const ss_stack_options *opt,
                     ss_stack_done_cb cb, void *ctx);

/*
 * Ends pending and running requests (their callbacks are called with what
 * was collected, the rest "no_answer": "the controller is closing"), kills
 * the helpers, and frees C once its handles are closed (the loop must run
 * on).  NULL is a no-op.
 */
void ss_stack_collector_close(ss_stack_collector *c);

/* The stack signal's number in this process (SIGRTMIN + offset). */
int ss_stack_signal(void);

/* Called for the innermost frame of each thread: FILE and LINE as the
 * dump names them; AT, the offset in OUT just after the frame's "line"
 * member, where a "code" member would go. */
typedef void (*ss_stack_leaf_fn)(void *ctx, const char *file, long line,
                                 size_t at);

/*
 * Parses faulthandler's dump TEXT (LEN bytes, up to the end marker) into
 * the "threads" array's JSON, appended to OUT (a growable ss_buf), with no
 * source lines (no file is opened); ON_LEAF (may be NULL) is told of each
 * thread's innermost frame.  Lines that are not faulthandler's are
 * skipped.  Exposed for the unit test.
 */
struct ss_buf;
void ss_stack_parse_dump(const char *text, size_t len, struct ss_buf *out,
                         ss_stack_leaf_fn on_leaf, void *ctx);

#endif
