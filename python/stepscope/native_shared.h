/*
 * native_shared.h - what the C files of the stepscope._native extension
 * share with each other.
 *
 * The extension is one module, stepscope._native, built from several
 * files, one per concern: native_module.c (the module's creation, its
 * errors and argument helpers), native_phase.c (names, the Phase type,
 * phases, sync points and collectives), native_step.c (steps and the Step
 * type), native_outer.c (auto mode's _Outermost wrapper), native_values.c
 * (metrics, vectors and memory), native_checksum.c (XXH3 over memory) and
 * native_process.c (the exit watchdog, the stack signal, profile
 * requests), native_pipeline.c (pipeline microbatches) and native_auto.c
 * (auto mode's per-step work and DDP gradient clock).  Each file keeps its state and functions static and gives the
 * module its functions and types through one ss__py_*_add(module) call.
 *
 * Everything declared here is internal to the extension: the build hides
 * every symbol but PyInit__native (-fvisibility=hidden), and the ss__py_
 * prefix keeps these names apart from the recorder's ss_ and ss__ ones,
 * which are linked into the same shared object.  All of it runs with the
 * GIL held.
 */
#ifndef STEPSCOPE_NATIVE_SHARED_H
#define STEPSCOPE_NATIVE_SHARED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "stepscope.h"

/* ---- errors and arguments (native_module.c) ---- */

/* stepscope.StepscopeError, created by the module's init before any
 * ss__py_*_add runs; a borrowed reference that lives as long as the
 * process. */
extern PyObject *ss__py_error_type;

/* Raises StepscopeError "<ss_strerror(CODE)>: <FMT...>" (FMT as for
 * PyUnicode_FromFormat) and returns NULL, so that a method can
 * `return ss__py_error(SS_EINVAL, "...", ...);`. */
PyObject *ss__py_error(int code, const char *fmt, ...);

/* Checks that the function NAME got MIN..MAX positional arguments.
 * Returns 0, or -1 with TypeError set. */
int ss__py_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t min,
                       Py_ssize_t max);

/* Parses O, a CLOCK_MONOTONIC time in ns (an int from 0 to 2**63-1), into
 * *OUT.  Returns 0, or -1 with TypeError or StepscopeError set. */
int ss__py_parse_ns(PyObject *o, int64_t *out);

/* ---- names (native_phase.c) ---- */

/* The recorder's id for NAME (a str), interning the name on first use.
 * Returns the id, or 0 with TypeError (not a str) or StepscopeError (an
 * invalid name, or too many names) set. */
ss_name_id ss__py_name_id(PyObject *name);

/* tp_call of the Phase and Step types: `@cm` on a callable FUNC (the one
 * positional argument in ARGS, no keywords) returns
 * stepscope._decorate(cm, func), a function that runs inside `with cm`.
 * Returns a new reference, or NULL with an exception set. */
PyObject *ss__py_decorate(PyObject *cm, PyObject *args, PyObject *kwargs);

/* ---- the parts of the module ----
 *
 * Each readies its types and state and adds its functions, types and
 * constants to the module M.  Returns 0, or -1 with an exception set (the
 * module's init then fails).  Called from PyInit__native, in this order:
 * names first, as the others look names up.  State that outlives the
 * module object (caches, the shared step(None)) is created only once. */
int ss__py_phase_add(PyObject *m);    /* native_phase.c */
int ss__py_step_add(PyObject *m);     /* native_step.c */
int ss__py_outer_add(PyObject *m);    /* native_outer.c */
int ss__py_values_add(PyObject *m);   /* native_values.c */
int ss__py_checksum_add(PyObject *m); /* native_checksum.c */
int ss__py_process_add(PyObject *m);  /* native_process.c */
int ss__py_pipeline_add(PyObject *m); /* native_pipeline.c */
int ss__py_auto_add(PyObject *m);     /* native_auto.c */

/* ---- auto mode's steps (native_step.c) ----
 *
 * ss__py_auto_begin: begins the first auto step unless the program makes
 * its own steps or one is open; returns 1 when it began one.
 * ss__py_auto_next: ends the open step and begins the next unless the
 * program makes its own steps; returns 1 when it did. */
int ss__py_auto_begin(void);
int ss__py_auto_next(void);

/* The open step (auto or the program's own), -1 when none. */
int64_t ss__py_current_step(void);

/* ---- auto mode's outermost calls (native_auto.c) ----
 *
 * The kinds of _Outermost wrapper whose work at the outermost level is
 * done in C (a wrapper of kind 0 runs its Python callbacks instead). */
enum {
    SS__PY_AUTO_FORWARD = 1,  /* nn.Module.__call__ */
    SS__PY_AUTO_BACKWARD = 2, /* Tensor.backward, autograd.backward */
    SS__PY_AUTO_OPTIMIZER = 3, /* Optimizer.step, GradScaler.step */
    SS__PY_AUTO_ROLLOUT = 4,  /* a model's generate() */
    SS__PY_AUTO_DATA = 5,     /* DataLoader.__iter__, its __next__ */
    SS__PY_AUTO_KINDS = 6
};

/* What enter hands to exit: a time (-1: none) and a CUDA event token
 * (a new reference, or NULL). */
typedef struct {
    int64_t ns;
    PyObject *gpu;
} ss__py_auto_token;

/* At the outermost call of kind KIND whose first argument is OBJ
 * (Py_None when none): before the call (fills *T) and after it (FAILED:
 * it raised; releases *T).  Never raise: a Python callback's exception is
 * reported as unraisable.  The error indicator must be clear on entry. */
void ss__py_auto_enter(int kind, PyObject *obj, ss__py_auto_token *t);
void ss__py_auto_exit(int kind, PyObject *obj, ss__py_auto_token *t,
                      int failed);

/* Around a forward or backward pass (KIND) that the outermost optimizer
 * step runs itself (a closure: LBFGS, a sharpness-aware step): ENTERING 1
 * before the call, 0 after it.  A backward's phase nests in "optimizer"
 * and its all-reduce arrival is the step's next sync point, as at an
 * outermost backward; numerics, CUDA events and the first-call callback
 * stay with the outermost calls.  Never raises; the error indicator must
 * be clear on entry. */
void ss__py_auto_closure(int kind, int entering);

/* Whether this thread is inside auto mode's outermost optimizer step
 * (native_outer.c). */
int ss__py_auto_in_optimizer(void);

#endif
