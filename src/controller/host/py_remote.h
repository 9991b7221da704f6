/*
 * py_remote.h - the Python stacks of another process, read from its
 * memory (docs/debug.md, "Python stacks from memory").
 *
 * A CPython process keeps its state in the global `_PyRuntime`: its
 * interpreters, each with a list of thread states, each thread with its
 * chain of interpreter frames, each frame with its code object (file,
 * function, line table) and its last instruction.  This module finds
 * `_PyRuntime` through the target's /proc/PID/maps and the ELF dynamic
 * symbol table of the file that defines it (the python executable or
 * libpython), checks the target's version (`Py_Version`), and walks that
 * state with process_vm_readv(2): the target is neither signalled nor
 * paused, and a stopped (SIGSTOP) process is read like a running one.
 *
 * Supported: CPython 3.11 release builds (x86-64 and other 64-bit
 * little-endian Linux), whose structure offsets are the table in
 * py_remote.c (checked against the 3.11 internal headers by
 * py_remote_layout_test.c when they are installed).  Any other version,
 * a debug build, a process without `_PyRuntime`, memory that cannot be read
 * (permission: process_vm_readv needs ptrace's attach permission, which a
 * launcher has over its children; with kernel.yama.ptrace_scope >= 2, or
 * without CAP_SYS_PTRACE on a non-dumpable process, it is refused) is
 * answered -1 with why: the caller falls back to asking the process.
 *
 * A running target changes its frames while they are read: every object
 * read is checked (a code object's type is PyCode_Type, a string's
 * PyUnicode_Type, a thread state points back to its interpreter) and a
 * walk that meets something else is made again, up to three times.
 *
 * The answer is the "threads" array of stack_collect.h's rank object,
 * the shape faulthandler's dump parses into: threads newest first,
 * "id" the thread's pthread_t as 0x%016lx, "current" the thread that holds
 * the GIL, frames outermost first as {"func": co_name, "file":
 * co_filename, "line"}; at most SS_PY_MAX_THREADS threads and
 * SS_PY_MAX_FRAMES frames each (the innermost kept), as faulthandler.
 *
 * Threading: any thread; no global state.
 */
#ifndef STEPSCOPE_PY_REMOTE_H
#define STEPSCOPE_PY_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"

#define SS_PY_MAX_THREADS 100
#define SS_PY_MAX_FRAMES 100
#define SS_PY_MAX_STRING 500        /* bytes of a name kept */
#define SS_PY_MAX_LINETABLE 65536   /* bytes of a line table read */

/* Reads LEN bytes at ADDR of the target into BUF: 0, or -1 (partial
 * reads fail). */
typedef int (*ss_py_read_fn)(void *ctx, uint64_t addr, void *buf,
                             size_t len);

/* Told of each thread's innermost frame: FILE and LINE, and AT, the
 * offset in the output just after that frame's "line" member (where
 * stack_collect.c puts its "code"). */
typedef void (*ss_py_leaf_fn)(void *ctx, const char *file, long line,
                              size_t at);

/* The offsets (bytes) a walk needs in one CPython minor version. */
typedef struct ss_py_layout {
    unsigned major, minor;
    size_t rt_interp_main;      /* _PyRuntimeState.interpreters.main */
    size_t rt_tstate_current;   /* _PyRuntimeState.gilstate.tstate_current */
    size_t is_threads_head;     /* PyInterpreterState.threads.head */
    size_t ts_next;             /* PyThreadState.next */
    size_t ts_interp;           /* PyThreadState.interp */
    size_t ts_cframe;           /* PyThreadState.cframe */
    size_t ts_thread_id;        /* PyThreadState.thread_id */
    size_t cf_current_frame;    /* _PyCFrame.current_frame */
    size_t fr_code;             /* _PyInterpreterFrame.f_code */
    size_t fr_previous;         /* _PyInterpreterFrame.previous */
    size_t fr_prev_instr;       /* _PyInterpreterFrame.prev_instr */
    size_t fr_size;             /* bytes read of a frame (past the above) */
    size_t ob_type;             /* PyObject.ob_type */
    size_t ob_size;             /* PyVarObject.ob_size */
    size_t co_firstlineno;      /* PyCodeObject.co_firstlineno (int) */
    size_t co_filename;         /* PyCodeObject.co_filename */
    size_t co_name;             /* PyCodeObject.co_name */
    size_t co_linetable;        /* PyCodeObject.co_linetable (bytes) */
    size_t co_code_adaptive;    /* PyCodeObject.co_code_adaptive */
    size_t bytes_sval;          /* PyBytesObject.ob_sval */
    size_t str_length;          /* PyASCIIObject.length */
    size_t str_state;           /* PyASCIIObject.state (bit fields) */
    size_t str_ascii_size;      /* sizeof(PyASCIIObject): ASCII data */
    size_t str_compact_size;    /* sizeof(PyCompactUnicodeObject) */
} ss_py_layout;

/* Where a target's interpreter is, from ss_py_locate. */
typedef struct {
    uint64_t runtime;       /* &_PyRuntime */
    uint64_t code_type;     /* &PyCode_Type */
    uint64_t unicode_type;  /* &PyUnicode_Type */
    uint64_t bytes_type;    /* &PyBytes_Type */
    unsigned long version;  /* Py_Version (PY_VERSION_HEX) */
    const ss_py_layout *layout;
} ss_py_process;

/* What one ELF file says (its symbols, relative to its load address). */
typedef struct {
    char dev[16];             /* its device and inode, as /proc/PID/maps */
    unsigned long long inode; /*   names them: the key */
    int found;                /* 0: no _PyRuntime in it */
    uint64_t runtime, version, code_type, unicode_type, bytes_type;
    int debug;                /* _Py_RefTotal: a debug build */
    uint64_t first_vaddr;     /* of its first loadable segment */
    int is_dyn;               /* position-independent: add the bias */
} ss_py_elf;

/* The ELF files looked at for a batch of processes (ranks run the same
 * python, so its symbol table is read once): zero-initialise; nothing to
 * free. */
#define SS_PY_CACHE_FILES 8
typedef struct {
    ss_py_elf f[SS_PY_CACHE_FILES];
    unsigned n;
} ss_py_cache;

/*
 * Finds the interpreter of process PID: 0 with P filled, or -1 with a
 * one-line reason in WHY (not Python, an unsupported version, memory
 * not readable...).  Opens the target's mapped files (through
 * /proc/PID/root) and reads its memory: may block on a file system, so
 * never on an event loop.  CACHE (may be NULL) keeps what the files said
 * for the next process.
 */
int ss_py_locate(pid_t pid, ss_py_cache *cache, ss_py_process *p,
                 char *why, size_t whylen);

/*
 * Walks the thread states of P's main interpreter through READ and
 * appends the "threads" array's elements (without the brackets) to OUT;
 * ON_LEAF (may be NULL) is told of each thread's innermost frame.
 * Returns 0, or -1 with why (something read was not what it should be, or
 * could not be read); OUT then holds what it held before.
 */
int ss_py_walk(const ss_py_process *p, ss_py_read_fn read, void *rctx,
               ss_buf *out, ss_py_leaf_fn on_leaf, void *lctx, char *why,
               size_t whylen);

/*
 * ss_py_locate and ss_py_walk over process_vm_readv, the walk made again
 * (up to three times) when the running target changed under it.  0, or -1
 * with why.
 */
int ss_py_read_stacks(pid_t pid, ss_py_cache *cache, ss_buf *out,
                      ss_py_leaf_fn on_leaf, void *lctx, char *why,
                      size_t whylen);

/*
 * The source line of the instruction at byte offset ADDR of a code object
 * whose first line is FIRSTLINE, from its line table TABLE (LEN bytes,
 * 3.11's co_linetable format).  A negative ADDR (the frame has not
 * started) is FIRSTLINE; -1 when the table says the instruction has no
 * line or ends before ADDR.
 */
long ss_py_addr2line(const uint8_t *table, size_t len, long firstline,
                     long addr);

/* The offsets of CPython MAJOR.MINOR, or NULL when it is not supported.
 * Exposed for the unit test. */
const ss_py_layout *ss_py_layout_for(unsigned major, unsigned minor);

#endif
