/*
 * native_stack.h - the native (machine) stack of every thread of a
 * process, read from outside it with ptrace and elfutils' libdw, the way
 * `eu-stack` does (docs/debug.md).
 *
 * The process is stopped only while it is unwound: libdw attaches to every
 * thread (PTRACE_ATTACH), unwinds each one from its registers with the
 * CFI of the loaded modules, names each frame's symbol from the modules'
 * symbol tables (C++ names demangled when libstdc++ can be loaded), and
 * detaches; a process that was stopped (SIGSTOP) before stays stopped.
 *
 * ptrace and waitpid do not mix with a process that also waits for the
 * same children (libuv's SIGCHLD handling would take a ptrace stop for an
 * exit), so the controller never calls this in its own process: it runs
 * `stepscope __native-stack PID` (ss_native_stack_print, behind src/cli/
 * cmd_native_stack.c), a helper process of its own, and reads its output.
 */
#ifndef STEPSCOPE_NATIVE_STACK_H
#define STEPSCOPE_NATIVE_STACK_H

#include <stdio.h>
#include <sys/types.h>

#include "json.h"

#define SS_NATIVE_MAX_THREADS 512 /* threads unwound per process */
#define SS_NATIVE_MAX_FRAMES 128  /* frames per thread */

/* The hidden subcommand that the controller runs for --native. */
#define SS_NATIVE_STACK_ARG "__native-stack"

/*
 * Appends to OUT one JSON object for PID:
 *   {"pid":N,"error":"…"?,"threads":[{"tid":T,"name":"comm","native":[
 *    {"pc":"0x…","symbol":"name+0x12"|null,"module":"libc.so.6"|null},…],
 *    "truncated":true?},…]}
 * ("threads" comes last, so a reader can take it as it is).
 * "error" says why the threads are missing or incomplete (attach refused,
 * the process is gone); threads unwound before an error are kept.  Returns
 * 0 when every thread was unwound, -1 otherwise (OUT still holds the
 * object).
 */
int ss_native_stack_json(pid_t pid, ss_buf *out);

/* `stepscope __native-stack PID...`: one ss_native_stack_json object per
 * PID of PIDS (N of them), one per line, on OUT, flushed after each. */
void ss_native_stack_print(const pid_t *pids, size_t n, FILE *out);

#endif
