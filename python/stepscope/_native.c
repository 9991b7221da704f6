/*
 * _native.c - the CPython extension behind the `stepscope` package.
 *
 * A thin layer over libstepscope (include/stepscope.h), linked in
 * statically.  Its one design goal is a small per-call cost, so everything
 * on the hot path is C:
 *
 *  - `phase(name)` returns a phase object cached per name (a dict lookup on
 *    the str, whose hash is cached), so `with stepscope.phase("x"):` costs a
 *    lookup, two method calls and the two recorder calls.  Phase objects
 *    hold no per-use state, so one object serves every thread and nesting.
 *  - `sync`, `metric` and `phase_begin/end` use the same cache for the id.
 *  - `step(n)` objects are context managers and decorators; the step number
 *    `None` means "the last step begun plus one" (the first is 0), and a
 *    number that does not increase is refused with a RuntimeWarning.
 *  - `_Outermost` wraps a function for auto mode (stepscope/auto.py): it
 *    records a phase around the call only when no other auto-mode wrapper is
 *    active on the calling thread, and runs optional Python callbacks at that
 *    outermost level.  Nested module calls thus cost one C check.
 *
 * Every libstepscope error becomes `stepscope.StepscopeError` carrying the C
 * message (ss_strerror) and details; arguments of the wrong type raise
 * TypeError.  All state here is protected by the GIL, except the recorder
 * itself, which is thread-safe on its own.  Module state is kept in statics:
 * the recorder is process-wide, so is this module (single-phase init).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "stepscope.h"

static PyObject *StepscopeError;
static PyObject *name_cache;  /* dict: str -> phase object (interned name) */
static PyObject *decorate_fn; /* stepscope._decorate(cm, func), from __init__ */
static PyObject *next_step_obj; /* the shared step(None) object */

/* Step bookkeeping (GIL): what the Python layer has begun. */
static int64_t step_next;     /* the last step begun + 1: step(None) */
static int64_t step_current = -1; /* the open step, -1 when none */
static int step_explicit;     /* the program itself used step() / step_begin */
static int step_begun;        /* some step was begun in this process */

/* Auto mode: wrappers pass straight through unless enabled (and never in a
 * forked child, see auto.py).  The depth is per thread. */
static int auto_on;
static _Thread_local int auto_depth;

/* ---- errors ---- */

/* Raises StepscopeError "<ss_strerror(CODE)>: <FMT...>" and returns NULL. */
static PyObject *ss_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!detail)
        return NULL;
    PyErr_Format(StepscopeError, "%s: %U", ss_strerror(code), detail);
    Py_DECREF(detail);
    return NULL;
}

/* Checks that NAME got MIN..MAX positional arguments; 0 or -1 with
 * TypeError set. */
static int check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t min,
                       Py_ssize_t max)
{
    if (nargs >= min && nargs <= max)
        return 0;
    if (min == max)
        PyErr_Format(PyExc_TypeError, "%s() takes %zd argument%s (%zd given)",
                     name, min, min == 1 ? "" : "s", nargs);
    else
        PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd arguments (%zd "
                     "given)", name, min, max, nargs);
    return -1;
}

/* ---- names and the phase type ---- */

typedef struct {
    PyObject_HEAD
    ss_name_id id;
    PyObject *name; /* str */
} PhaseObject;

static PyTypeObject Phase_Type;

/* Checks NAME against the recorder's rules and interns it.  Returns a new
 * phase object, or NULL with StepscopeError set. */
static PyObject *intern_new(PyObject *name)
{
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(name, &len);
    if (!s)
        return NULL;
    int bad = len == 0 || len > SS_MAX_NAME_LEN;
    for (Py_ssize_t i = 0; i < len && !bad; i++)
        bad = (unsigned char)s[i] < 0x20 || s[i] == 0x7f;
    if (bad)
        return ss_error(SS_EINVAL, "a name must be 1 to %d bytes of UTF-8 "
                        "without control characters, not %R (%zd bytes)",
                        SS_MAX_NAME_LEN, name, len);
    ss_name_id id = ss_name(s);
    if (!id)
        return ss_error(SS_ENAMES, "cannot add %R: a process may use at most "
                        "%d distinct names", name, SS_MAX_NAMES);
    PhaseObject *p = PyObject_New(PhaseObject, &Phase_Type);
    if (!p)
        return NULL;
    p->id = id;
    Py_INCREF(name);
    p->name = name;
    if (PyDict_SetItem(name_cache, name, (PyObject *)p) < 0) {
        Py_DECREF(p);
        return NULL;
    }
    return (PyObject *)p;
}

/* Returns the phase object for NAME (a new reference), interning the name
 * on first use; NULL with TypeError or StepscopeError set. */
static PyObject *lookup(PyObject *name)
{
    if (!PyUnicode_CheckExact(name)) {
        if (!PyUnicode_Check(name))
            return PyErr_Format(PyExc_TypeError, "a stepscope name must be "
                                "a str, not %.100s", Py_TYPE(name)->tp_name);
        PyObject *plain = PyUnicode_FromObject(name); /* str subclass */
        if (!plain)
            return NULL;
        PyObject *p = lookup(plain);
        Py_DECREF(plain);
        return p;
    }
    PyObject *p = PyDict_GetItemWithError(name_cache, name);
    if (p) {
        Py_INCREF(p);
        return p;
    }
    return PyErr_Occurred() ? NULL : intern_new(name);
}

/* The id for NAME, or 0 with an exception set. */
static ss_name_id name_id(PyObject *name)
{
    PyObject *p = lookup(name);
    if (!p)
        return 0;
    ss_name_id id = ((PhaseObject *)p)->id;
    Py_DECREF(p);
    return id;
}

static void Phase_dealloc(PhaseObject *self)
{
    Py_XDECREF(self->name);
    PyObject_Free(self);
}

static PyObject *Phase_repr(PhaseObject *self)
{
    return PyUnicode_FromFormat("stepscope.phase(%R)", self->name);
}

static PyObject *Phase_enter(PhaseObject *self, PyObject *unused)
{
    ss_phase_begin(self->id);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Phase_exit(PhaseObject *self, PyObject *const *args,
                            Py_ssize_t nargs)
{
    ss_phase_end(self->id);
    Py_RETURN_NONE;
}

/* Used as a decorator: returns a function that runs inside `with self`. */
static PyObject *decorate(PyObject *cm, PyObject *args, PyObject *kwargs)
{
    PyObject *func;
    if (kwargs && PyDict_GET_SIZE(kwargs))
        return PyErr_Format(PyExc_TypeError, "%R takes no keyword arguments",
                            cm);
    if (!PyArg_UnpackTuple(args, "decorator", 1, 1, &func))
        return NULL;
    if (!PyCallable_Check(func))
        return PyErr_Format(PyExc_TypeError, "%R decorates a callable, not "
                            "%.100s", cm, Py_TYPE(func)->tp_name);
    if (!decorate_fn)
        return PyErr_Format(PyExc_RuntimeError, "import stepscope, not "
                            "stepscope._native");
    return PyObject_CallFunctionObjArgs(decorate_fn, cm, func, NULL);
}

static PyMethodDef Phase_methods[] = {
    {"__enter__", (PyCFunction)Phase_enter, METH_NOARGS,
     "Begins the phase on this thread; returns the phase."},
    {"__exit__", (PyCFunction)(void (*)(void))Phase_exit, METH_FASTCALL,
     "Ends the phase; never suppresses an exception."},
    {NULL, NULL, 0, NULL}};

static PyObject *Phase_get_name(PhaseObject *self, void *closure)
{
    Py_INCREF(self->name);
    return self->name;
}

static PyGetSetDef Phase_getset[] = {
    {"name", (getter)Phase_get_name, NULL, "the phase's name", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject Phase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.Phase",
    .tp_basicsize = sizeof(PhaseObject),
    .tp_dealloc = (destructor)Phase_dealloc,
    .tp_repr = (reprfunc)Phase_repr,
    .tp_call = decorate,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A named phase: a context manager and a decorator.  Get one "
              "with stepscope.phase(name).",
    .tp_methods = Phase_methods,
    .tp_getset = Phase_getset,
};

/* ---- steps ---- */

typedef struct {
    PyObject_HEAD
    int64_t n; /* -1: the previous step plus one */
} StepObject;

static PyTypeObject Step_Type;

/* Parses a step number: None gives -1 when ALLOW_NONE.  Returns 0, or -1
 * with TypeError or StepscopeError set. */
static int parse_step(PyObject *o, int allow_none, int64_t *out)
{
    if (o == Py_None && allow_none) {
        *out = -1;
        return 0;
    }
    if (!PyIndex_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "a step must be an int%s, not %.100s",
                     allow_none ? " or None" : "", Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *num = PyNumber_Index(o);
    if (!num)
        return -1;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(num, &overflow);
    Py_DECREF(num);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 0 || v == INT64_MAX) {
        ss_error(SS_EINVAL, "a step must be from 0 to 2**63-2, not %R", o);
        return -1;
    }
    *out = v;
    return 0;
}

/* Vectors of device tensors wait for the end of their step
 * (stepscope.values): the Python layer queues them, sets values_pending,
 * and registered values_flush_fn, which copies them to the host at once.
 * It runs before the step ends, at every step boundary. */
static PyObject *values_flush_fn;
static int values_pending;

static void flush_values(void)
{
    if (!values_pending || !values_flush_fn)
        return;
    values_pending = 0;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb); /* keep a pending error */
    PyObject *r = PyObject_CallNoArgs(values_flush_fn);
    if (!r)
        PyErr_WriteUnraisable(values_flush_fn); /* the step still ends */
    Py_XDECREF(r);
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

static void end_step(void)
{
    if (step_current >= 0)
        flush_values();
    ss_step_end();
    step_current = -1;
}

/*
 * Begins step N (-1: the one after the last step begun) and returns its
 * number, or -1 with an exception set.  A number that does not increase
 * would be dropped by the recorder or not, depending on timing, so it is
 * refused here: the open step is ended, nothing begins, and a
 * RuntimeWarning says so (an exception only if warnings are errors).
 */
static int64_t begin_step(int64_t n)
{
    if (n < 0)
        n = step_next;
    if (step_current >= 0)
        flush_values(); /* ss_step_begin ends the open step */
    if (n < step_next) {
        end_step();
        if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "stepscope: step %lld "
                             "does not follow step %lld (steps must "
                             "increase), so it is not recorded",
                             (long long)n, (long long)(step_next - 1)) < 0)
            return -1;
        return n;
    }
    ss_step_begin((uint64_t)n);
    step_begun = 1;
    step_current = n;
    step_next = n + 1; /* n <= INT64_MAX - 1: parse_step */
    return n;
}

static void Step_dealloc(StepObject *self) { PyObject_Free(self); }

static PyObject *Step_repr(StepObject *self)
{
    if (self->n < 0)
        return PyUnicode_FromString("stepscope.step(None)");
    return PyUnicode_FromFormat("stepscope.step(%lld)", (long long)self->n);
}

static PyObject *Step_enter(StepObject *self, PyObject *unused)
{
    step_explicit = 1;
    int64_t n = begin_step(self->n);
    return n < 0 ? NULL : PyLong_FromLongLong(n);
}

static PyObject *Step_exit(StepObject *self, PyObject *const *args,
                           Py_ssize_t nargs)
{
    end_step();
    Py_RETURN_NONE;
}

static PyMethodDef Step_methods[] = {
    {"__enter__", (PyCFunction)Step_enter, METH_NOARGS,
     "Begins the step (ending an open one); returns its number."},
    {"__exit__", (PyCFunction)(void (*)(void))Step_exit, METH_FASTCALL,
     "Ends the step; never suppresses an exception."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject Step_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.Step",
    .tp_basicsize = sizeof(StepObject),
    .tp_dealloc = (destructor)Step_dealloc,
    .tp_repr = (reprfunc)Step_repr,
    .tp_call = decorate,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A training step: a context manager and a decorator.  Get one "
              "with stepscope.step(n=None).",
    .tp_methods = Step_methods,
};

/* ---- the auto-mode wrapper ---- */

typedef struct {
    PyObject_HEAD
    PyObject *func;  /* the wrapped callable */
    PyObject *enter; /* enter(first_arg) -> token, or None */
    PyObject *exit;  /* exit(token, failed), or None */
    ss_name_id id;   /* the phase recorded around the call, or 0 */
    vectorcallfunc vectorcall;
} OuterObject;

/* Runs CB(ARGS...) for its side effects; an exception from an auto-mode
 * callback is reported as unraisable and never reaches the program.
 * Returns the result (new reference) or NULL after reporting. */
static PyObject *call_hook(PyObject *cb, PyObject *a, PyObject *b)
{
    PyObject *r = b ? PyObject_CallFunctionObjArgs(cb, a, b, NULL)
                    : PyObject_CallOneArg(cb, a);
    if (!r)
        PyErr_WriteUnraisable(cb);
    return r;
}

static PyObject *Outer_vectorcall(PyObject *self_, PyObject *const *args,
                                  size_t nargsf, PyObject *kwnames)
{
    OuterObject *self = (OuterObject *)self_;
    if (!auto_on || auto_depth > 0)
        return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    auto_depth++;
    PyObject *token = NULL;
    if (self->enter != Py_None) {
        Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
        token = call_hook(self->enter, nargs > 0 ? args[0] : Py_None, NULL);
    }
    if (self->id)
        ss_phase_begin(self->id);
    PyObject *res = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if (self->id)
        ss_phase_end(self->id);
    if (self->exit != Py_None) {
        /* The call's exception (if any) is kept across the callback. */
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *exc = PyErr_GetRaisedException();
#else
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
#endif
        PyObject *r = call_hook(self->exit, token ? token : Py_None,
                                res ? Py_False : Py_True);
        Py_XDECREF(r);
#if PY_VERSION_HEX >= 0x030C0000
        PyErr_SetRaisedException(exc);
#else
        PyErr_Restore(type, value, tb);
#endif
    }
    Py_XDECREF(token);
    auto_depth--;
    return res;
}

static PyObject *Outer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"func", "name", "enter", "exit", NULL};
    PyObject *func, *name = Py_None, *enter = Py_None, *exit_cb = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:_Outermost", kwlist,
                                     &func, &name, &enter, &exit_cb))
        return NULL;
    if (!PyCallable_Check(func) ||
        (enter != Py_None && !PyCallable_Check(enter)) ||
        (exit_cb != Py_None && !PyCallable_Check(exit_cb)))
        return PyErr_Format(PyExc_TypeError, "_Outermost wants callables");
    ss_name_id id = 0;
    if (name != Py_None && !(id = name_id(name)))
        return NULL;
    OuterObject *self = (OuterObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    Py_INCREF(func);
    Py_INCREF(enter);
    Py_INCREF(exit_cb);
    self->func = func;
    self->enter = enter;
    self->exit = exit_cb;
    self->id = id;
    self->vectorcall = Outer_vectorcall;
    return (PyObject *)self;
}

static int Outer_traverse(OuterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->enter);
    Py_VISIT(self->exit);
    return 0;
}

static int Outer_clear(OuterObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->enter);
    Py_CLEAR(self->exit);
    return 0;
}

static void Outer_dealloc(OuterObject *self)
{
    PyObject_GC_UnTrack(self);
    Outer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Bound like a function when found on a class (Module.__call__, ...). */
static PyObject *Outer_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

/* Attributes the wrapper does not have come from the wrapped function, so
 * introspection (functools.wraps, inspect.signature, torch's own `hooked`
 * marks) sees the original; attribute writes go to it as well. */
static PyObject *Outer_getattro(PyObject *self, PyObject *attr)
{
    PyObject *r = PyObject_GenericGetAttr(self, attr);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(((OuterObject *)self)->func, attr);
}

static int Outer_setattro(PyObject *self, PyObject *attr, PyObject *value)
{
    return PyObject_SetAttr(((OuterObject *)self)->func, attr, value);
}

static PyObject *Outer_get_wrapped(OuterObject *self, void *closure)
{
    Py_INCREF(self->func);
    return self->func;
}

static PyObject *Outer_get_proxy(OuterObject *self, void *closure)
{
    return PyObject_GetAttrString(self->func, (const char *)closure);
}

static PyGetSetDef Outer_getset[] = {
    {"__wrapped__", (getter)Outer_get_wrapped, NULL, "the wrapped callable",
     NULL},
    {"__doc__", (getter)Outer_get_proxy, NULL, NULL, "__doc__"},
    {"__module__", (getter)Outer_get_proxy, NULL, NULL, "__module__"},
    {"__name__", (getter)Outer_get_proxy, NULL, NULL, "__name__"},
    {"__qualname__", (getter)Outer_get_proxy, NULL, NULL, "__qualname__"},
    {NULL, NULL, NULL, NULL, NULL}};

static PyObject *Outer_repr(OuterObject *self)
{
    return PyUnicode_FromFormat("<stepscope auto-mode wrapper of %R>",
                                self->func);
}

static PyTypeObject Outer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope._native._Outermost",
    .tp_basicsize = sizeof(OuterObject),
    .tp_dealloc = (destructor)Outer_dealloc,
    .tp_vectorcall_offset = offsetof(OuterObject, vectorcall),
    .tp_repr = (reprfunc)Outer_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = Outer_getattro,
    .tp_setattro = Outer_setattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "_Outermost(func, name=None, enter=None, exit=None): calls "
              "func; when auto mode is on and no other wrapper is active on "
              "this thread, also runs enter(first_arg) -> token, records "
              "phase NAME around the call and runs exit(token, failed).",
    .tp_traverse = (traverseproc)Outer_traverse,
    .tp_clear = (inquiry)Outer_clear,
    .tp_getset = Outer_getset,
    .tp_descr_get = Outer_descr_get,
    .tp_new = Outer_new,
};

/* ---- module functions ---- */

static PyObject *m_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(ss_enabled());
}

static PyObject *m_phase(PyObject *m, PyObject *name)
{
    return lookup(name);
}

static PyObject *m_step(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    PyObject *n = Py_None;
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        if (nargs || PyTuple_GET_SIZE(kwnames) != 1 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                             "n") != 0)
            return PyErr_Format(PyExc_TypeError, "step() takes one argument, "
                                "n");
        n = args[0];
    } else if (nargs > 1) {
        return PyErr_Format(PyExc_TypeError, "step() takes at most one "
                            "argument (%zd given)", nargs);
    } else if (nargs == 1) {
        n = args[0];
    }
    int64_t v;
    if (parse_step(n, 1, &v) < 0)
        return NULL;
    if (v < 0) {
        Py_INCREF(next_step_obj);
        return next_step_obj;
    }
    StepObject *s = PyObject_New(StepObject, &Step_Type);
    if (s)
        s->n = v;
    return (PyObject *)s;
}

static PyObject *m_step_begin(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    int64_t v;
    if (check_nargs("step_begin", nargs, 0, 1) < 0 ||
        parse_step(nargs ? args[0] : Py_None, 1, &v) < 0)
        return NULL;
    step_explicit = 1;
    int64_t n = begin_step(v);
    return n < 0 ? NULL : PyLong_FromLongLong(n);
}

static PyObject *m_step_end(PyObject *m, PyObject *unused)
{
    step_explicit = 1;
    end_step();
    Py_RETURN_NONE;
}

static PyObject *m_phase_begin(PyObject *m, PyObject *name)
{
    ss_name_id id = name_id(name);
    if (!id)
        return NULL;
    ss_phase_begin(id);
    Py_RETURN_NONE;
}

static PyObject *m_phase_end(PyObject *m, PyObject *name)
{
    ss_name_id id = name_id(name);
    if (!id)
        return NULL;
    ss_phase_end(id);
    Py_RETURN_NONE;
}

/* Parses a CLOCK_MONOTONIC nanosecond time. */
static int parse_ns(PyObject *o, int64_t *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "a time must be an int (ns), not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < 0) {
        ss_error(SS_EINVAL, "a time must be from 0 to 2**63-1 ns, not %R", o);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *m_phase_span(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    int64_t b, e;
    if (check_nargs("phase_span", nargs, 3, 3) < 0 ||
        parse_ns(args[1], &b) < 0 || parse_ns(args[2], &e) < 0)
        return NULL;
    if (e < b)
        return ss_error(SS_EINVAL, "a span cannot end (%lld) before it "
                        "begins (%lld)", (long long)e, (long long)b);
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    ss_phase_span(id, b, e);
    Py_RETURN_NONE;
}

static PyObject *m_now_ns(PyObject *m, PyObject *unused)
{
    return PyLong_FromLongLong(ss_now_ns());
}

/* ---- the exit watchdog (auto mode) ---- */

static double watchdog_seconds;
static int watchdog_status;

static void *watchdog_main(void *arg)
{
    (void)arg;
    struct timespec ts = {(time_t)watchdog_seconds,
                          (long)((watchdog_seconds - (double)(time_t)watchdog_seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
    char msg[256];
    int n = snprintf(msg, sizeof msg,
                     "stepscope: the interpreter was still shutting down %.0f s "
                     "after the script ended (torch's process-group teardown "
                     "can deadlock); ending the process with status %d\n",
                     watchdog_seconds, watchdog_status);
    if (n > 0 && write(2, msg, (size_t)n) < 0)
        n = 0;
    _exit(watchdog_status);
    return NULL;
}

/* An abort once the script has finished, while the interpreter tears torch
 * down (torch 1.13's gloo can std::terminate there: "terminate called
 * without an active exception"), is not the job's failure: said, and the
 * process ends with the script's own status.  Async-signal-safe. */
static void abort_after_script(int sig)
{
    (void)sig;
    static const char msg[] =
        "stepscope: the process aborted while the interpreter shut down, "
        "after the script had ended (torch's teardown); ending it with the "
        "script's own status\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(watchdog_status);
    _exit(watchdog_status);
}

/* _exit_watchdog(seconds, status): the script has finished (called from the
 * last atexit handler): flushes the recorder, ends the process with STATUS
 * if interpreter shutdown has not finished within SECONDS, and turns an
 * abort during that shutdown into STATUS (abort_after_script). */
static PyObject *m_exit_watchdog(PyObject *m, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_exit_watchdog(seconds, status)");
        return NULL;
    }
    double seconds = PyFloat_AsDouble(args[0]);
    long status = PyLong_AsLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    ss_shutdown();
    watchdog_seconds = seconds > 0 ? seconds : 0;
    watchdog_status = (int)(status & 0xff);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = abort_after_script;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGABRT, &sa, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, watchdog_main, NULL) == 0)
        pthread_detach(t);
    Py_RETURN_NONE;
}

static PyObject *m_sync(PyObject *m, PyObject *name)
{
    ss_name_id id = name_id(name);
    if (!id)
        return NULL;
    ss_sync(id);
    Py_RETURN_NONE;
}

static PyObject *m_sync_at(PyObject *m, PyObject *const *args,
                           Py_ssize_t nargs)
{
    int64_t at;
    if (check_nargs("_sync_at", nargs, 2, 2) < 0 || parse_ns(args[1], &at) < 0)
        return NULL;
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    ss_sync_at(id, at);
    Py_RETURN_NONE;
}

/* _collective_begin(name): the process enters its next collective of
 * kind NAME (ss_collective_begin). */
static PyObject *m_collective_begin(PyObject *m, PyObject *name)
{
    ss_name_id id = name_id(name);
    if (!id)
        return NULL;
    ss_collective_begin(id);
    Py_RETURN_NONE;
}

static PyObject *m_collective_end(PyObject *m, PyObject *unused)
{
    ss_collective_end();
    Py_RETURN_NONE;
}

/* ---- on-demand profiling (auto mode; stepscope.h ss_profile_*) ---- */

static PyObject *m_profile_enable(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(ss_profile_enable() == 0);
}

/* _profile_poll(): (request_id, duration_ms, dir) of the pending request,
 * taken, or None (one atomic load when there is none). */
static PyObject *m_profile_poll(PyObject *m, PyObject *unused)
{
    ss_profile_request req;
    if (!ss_profile_poll(&req))
        Py_RETURN_NONE;
    return Py_BuildValue("(kks)", (unsigned long)req.request_id,
                         (unsigned long)req.duration_ms, req.dir);
}

/* _profile_done(request_id, ok, marker_ns, text): the answer. */
static PyObject *m_profile_done(PyObject *m, PyObject *const *args,
                                Py_ssize_t nargs)
{
    int64_t marker;
    if (check_nargs("_profile_done", nargs, 4, 4) < 0 ||
        parse_ns(args[2], &marker) < 0)
        return NULL;
    unsigned long id = PyLong_AsUnsignedLong(args[0]);
    int ok = PyObject_IsTrue(args[1]);
    const char *text = PyUnicode_AsUTF8(args[3]);
    if (PyErr_Occurred() || ok < 0 || !text)
        return NULL;
    int rc = ss_profile_done((uint32_t)id, ok, marker, text);
    if (rc != 0)
        return ss_error(rc, "cannot answer profile request %lu", id);
    Py_RETURN_NONE;
}

static PyObject *m_metric(PyObject *m, PyObject *const *args,
                          Py_ssize_t nargs)
{
    if (check_nargs("metric", nargs, 2, 2) < 0)
        return NULL;
    double d = PyFloat_AsDouble(args[1]); /* TypeError for non-numbers */
    if (d == -1.0 && PyErr_Occurred())
        return NULL;
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    ss_metric(id, d);
    Py_RETURN_NONE;
}

/* Converts the numbers of X (a list, tuple or any sequence) into BUF
 * (CAP doubles) or, when more, into a PyMem buffer set in *HEAP.  Returns
 * the count, or -1 with TypeError. */
static Py_ssize_t seq_doubles(PyObject *x, double *buf, Py_ssize_t cap,
                              double **heap)
{
    PyObject *fast = PySequence_Fast(x, "values wants a sequence of numbers "
                                        "or a 1-D tensor");
    if (!fast)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    double *out = buf;
    *heap = NULL;
    if (n > cap && !(out = *heap = PyMem_Malloc((size_t)n * sizeof(double)))) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        double d = PyFloat_CheckExact(o) ? PyFloat_AS_DOUBLE(o)
                                          : PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            PyMem_Free(*heap);
            *heap = NULL;
            return -1;
        }
        out[i] = d;
    }
    Py_DECREF(fast);
    return n;
}

/* values(name, x): X a sequence of numbers, or an object with a
 * contiguous buffer of doubles (array('d'), a float64 numpy array). */
static PyObject *m_values(PyObject *m, PyObject *const *args,
                          Py_ssize_t nargs)
{
    if (check_nargs("values", nargs, 2, 2) < 0)
        return NULL;
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    PyObject *x = args[1];
    if (!PyList_CheckExact(x) && !PyTuple_CheckExact(x) &&
        PyObject_CheckBuffer(x)) {
        Py_buffer view;
        if (PyObject_GetBuffer(x, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) <
            0)
            return NULL;
        int ok = view.itemsize == 8 && view.format &&
                 (strcmp(view.format, "d") == 0 ||
                  strcmp(view.format, "<d") == 0 ||
                  strcmp(view.format, "=d") == 0) && view.ndim <= 1;
        if (ok)
            ss_values(id, view.buf, (size_t)(view.len / 8));
        PyBuffer_Release(&view);
        if (ok)
            Py_RETURN_NONE;
        /* another element type: converted one by one below */
    }
    double buf[SS_MAX_VALUES], *heap;
    Py_ssize_t n = seq_doubles(x, buf, SS_MAX_VALUES, &heap);
    if (n < 0)
        return NULL;
    ss_values(id, heap ? heap : buf, (size_t)n);
    PyMem_Free(heap);
    Py_RETURN_NONE;
}

/* _values_ptr(name, address, n, owner): N doubles at ADDRESS (a
 * contiguous float64 CPU tensor's data_ptr(); OWNER keeps it alive). */
static PyObject *m_values_ptr(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (check_nargs("_values_ptr", nargs, 4, 4) < 0)
        return NULL;
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    void *p = PyLong_AsVoidPtr(args[1]);
    Py_ssize_t n = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (PyErr_Occurred())
        return NULL;
    if (n > 0 && p)
        ss_values(id, p, (size_t)n);
    Py_RETURN_NONE;
}

/* ---- checksums of memory (stepscope/_checksum.py, docs/consistency.md) ----
 *
 * XXH3_64bits (libxxhash) over memory that lies where it lies: a CPU
 * tensor's storage is hashed through its data pointer, never copied.  The
 * GIL is released while hashing when the bytes are many, so other Python
 * threads (DDP's, the data loader's) keep running. */
#define HASH_NOGIL_BYTES (256 * 1024) /* below this the GIL round trip costs
                                         more than it frees */
#define HASH_MAX_PTRS 65536           /* memory regions in one call */

/* _hash_ptrs(addresses, sizes): the XXH3-64 of each of the memory regions
 * (ADDRESSES[i], SIZES[i] bytes), a list of int in [0, 2**64).  The caller
 * keeps the memory alive and unchanged during the call (the tensors'
 * owners hold it).  A zero-sized region hashes as empty memory. */
static PyObject *m_hash_ptrs(PyObject *m, PyObject *const *args,
                             Py_ssize_t nargs)
{
    if (check_nargs("_hash_ptrs", nargs, 2, 2) < 0)
        return NULL;
    PyObject *fa = PySequence_Fast(args[0], "addresses must be a sequence");
    if (!fa)
        return NULL;
    PyObject *fs = PySequence_Fast(args[1], "sizes must be a sequence");
    if (!fs) {
        Py_DECREF(fa);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fa);
    PyObject *out = NULL;
    const void **ptr = NULL;
    size_t *len = NULL;
    uint64_t *h = NULL;
    if (n != PySequence_Fast_GET_SIZE(fs) || n > HASH_MAX_PTRS) {
        PyErr_Format(PyExc_ValueError, "_hash_ptrs: %zd addresses and %zd "
                     "sizes (equal, at most %d)", n,
                     PySequence_Fast_GET_SIZE(fs), HASH_MAX_PTRS);
        goto done;
    }
    ptr = PyMem_Malloc(sizeof *ptr * (size_t)(n ? n : 1));
    len = PyMem_Malloc(sizeof *len * (size_t)(n ? n : 1));
    h = PyMem_Malloc(sizeof *h * (size_t)(n ? n : 1));
    if (!ptr || !len || !h) {
        PyErr_NoMemory();
        goto done;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        ptr[i] = PyLong_AsVoidPtr(PySequence_Fast_GET_ITEM(fa, i));
        Py_ssize_t b = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(fs, i),
                                          PyExc_OverflowError);
        if (PyErr_Occurred())
            goto done;
        if (b < 0 || (b > 0 && !ptr[i])) {
            PyErr_Format(PyExc_ValueError, "_hash_ptrs: region %zd: %zd "
                         "bytes at %p", i, b, ptr[i]);
            goto done;
        }
        len[i] = (size_t)b;
        total += len[i];
    }
    if (total >= HASH_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            h[i] = XXH3_64bits(ptr[i], len[i]);
        Py_END_ALLOW_THREADS
    } else {
        for (Py_ssize_t i = 0; i < n; i++)
            h[i] = XXH3_64bits(ptr[i], len[i]);
    }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(h[i]);
        if (!v) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, v);
    }
done:
    PyMem_Free(ptr);
    PyMem_Free(len);
    PyMem_Free(h);
    Py_DECREF(fa);
    Py_DECREF(fs);
    return out;
}

/* hash_buffer(obj): the XXH3-64 of the bytes of OBJ, any C-contiguous
 * object with the buffer protocol (bytes, memoryview, numpy array, a CPU
 * tensor's .numpy()), read in place; an int in [0, 2**64). */
static PyObject *m_hash_buffer(PyObject *m, PyObject *obj)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    uint64_t h;
    if (view.len >= HASH_NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        h = XXH3_64bits(view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        h = XXH3_64bits(view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(h);
}

/* values_labels(name, labels): a sequence of str, one per index. */
static PyObject *m_values_labels(PyObject *m, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    if (check_nargs("values_labels", nargs, 2, 2) < 0)
        return NULL;
    ss_name_id id = name_id(args[0]);
    if (!id)
        return NULL;
    PyObject *fast = PySequence_Fast(args[1], "labels must be a sequence of "
                                              "str");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n == 0 || n > SS_MAX_VALUES) {
        Py_DECREF(fast);
        return ss_error(SS_EINVAL, "a vector has 1 to %d labels, not %zd",
                        SS_MAX_VALUES, n);
    }
    const char **labels = PyMem_Malloc((size_t)n * sizeof *labels);
    if (!labels) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
        labels[i] = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
        if (!labels[i]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "labels must be str, not "
                             "%.100s", Py_TYPE(o)->tp_name);
            PyMem_Free(labels);
            Py_DECREF(fast);
            return NULL;
        }
    }
    int rc = ss_values_labels(id, labels, (size_t)n);
    PyMem_Free(labels);
    Py_DECREF(fast);
    if (rc != 0 && rc != SS_ESTATE) /* disabled: a no-op, as everywhere */
        return ss_error(rc, "cannot keep the labels of %R", args[0]);
    Py_RETURN_NONE;
}

static PyObject *m_set_values_flush(PyObject *m, PyObject *fn)
{
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "_set_values_flush wants a "
                            "callable");
    Py_INCREF(fn);
    Py_XSETREF(values_flush_fn, fn);
    Py_RETURN_NONE;
}

static PyObject *m_values_pending(PyObject *m, PyObject *unused)
{
    values_pending = 1;
    Py_RETURN_NONE;
}

static PyObject *m_memory_sample(PyObject *m, PyObject *unused)
{
    ss_memory_sample();
    Py_RETURN_NONE;
}

static PyObject *m_memory_record(PyObject *m, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    if (check_nargs("memory_record", nargs, 2, 2) < 0)
        return NULL;
    PyObject *kind = args[0], *nbytes = args[1];
    if (!PyUnicode_Check(kind))
        return PyErr_Format(PyExc_TypeError, "memory_record: kind must be a "
                            "str, not %.100s", Py_TYPE(kind)->tp_name);
    ss_mem_kind k;
    if (PyUnicode_CompareWithASCIIString(kind, "device_allocated") == 0)
        k = SS_MEM_DEVICE_ALLOCATED;
    else if (PyUnicode_CompareWithASCIIString(kind, "device_peak") == 0)
        k = SS_MEM_DEVICE_PEAK;
    else
        return ss_error(SS_EINVAL, "memory kind must be 'device_allocated' "
                        "or 'device_peak', not %R", kind);
    if (!PyIndex_Check(nbytes) || PyBool_Check(nbytes))
        return PyErr_Format(PyExc_TypeError, "memory_record: nbytes must be "
                            "an int, not %.100s", Py_TYPE(nbytes)->tp_name);
    PyObject *num = PyNumber_Index(nbytes);
    if (!num)
        return NULL;
    unsigned long long b = PyLong_AsUnsignedLongLong(num);
    Py_DECREF(num);
    if (b == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return ss_error(SS_EINVAL, "nbytes must be from 0 to 2**64-1, not %R",
                        nbytes);
    }
    ss_memory_record(k, b);
    Py_RETURN_NONE;
}

static PyObject *m_checkpoint_saved(PyObject *m, PyObject *step)
{
    int64_t v;
    if (parse_step(step, 0, &v) < 0)
        return NULL;
    ss_checkpoint_saved((uint64_t)v);
    Py_RETURN_NONE;
}

/* Before the first step only: a resume renumbers what follows, and steps
 * already recorded cannot be. */
static PyObject *m_resumed_from(PyObject *m, PyObject *step)
{
    int64_t v;
    if (parse_step(step, 0, &v) < 0)
        return NULL;
    if (step_begun)
        return ss_error(SS_ESTATE, "resumed_from(%lld) after a step was "
                        "begun: call it before the first step", (long long)v);
    ss_resumed_from((uint64_t)v);
    step_next = v + 1; /* v <= INT64_MAX - 2: parse_step */
    Py_RETURN_NONE;
}

static PyObject *m_counters(PyObject *m, PyObject *unused)
{
    ss_counters c;
    ss_get_counters(&c);
    return Py_BuildValue("{s:K,s:K,s:K,s:K}", "dropped_events",
                         (unsigned long long)c.dropped_events,
                         "dropped_records",
                         (unsigned long long)c.dropped_records,
                         "dropped_vectors",
                         (unsigned long long)c.dropped_vectors,
                         "truncated_values",
                         (unsigned long long)c.truncated_values);
}

/* ---- internals for stepscope/__init__.py and auto.py ---- */

static PyObject *m_set_decorate(PyObject *m, PyObject *fn)
{
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "_set_decorate wants a callable");
    Py_INCREF(fn);
    Py_XSETREF(decorate_fn, fn);
    Py_RETURN_NONE;
}

static PyObject *m_current_step(PyObject *m, PyObject *unused)
{
    if (step_current < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(step_current);
}

static PyObject *m_next_step(PyObject *m, PyObject *unused)
{
    return PyLong_FromLongLong(step_next);
}

static PyObject *m_explicit(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(step_explicit);
}

static PyObject *m_auto_begin(PyObject *m, PyObject *unused)
{
    if (step_explicit || step_current >= 0)
        Py_RETURN_FALSE;
    begin_step(-1);
    Py_RETURN_TRUE;
}

static PyObject *m_auto_next(PyObject *m, PyObject *unused)
{
    if (step_explicit)
        Py_RETURN_FALSE;
    begin_step(-1); /* ends the open step first */
    Py_RETURN_TRUE;
}

static PyObject *m_auto_enable(PyObject *m, PyObject *on)
{
    int v = PyObject_IsTrue(on);
    if (v < 0)
        return NULL;
    auto_on = v;
    Py_RETURN_NONE;
}

static PyObject *m_auto_on(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(auto_on);
}

/* ---- stack requests (stepscope/_stacks.py, docs/debug.md) ----
 *
 * The controller asks a rank for its Python stacks with a real-time signal,
 * SS_STACK_SIGNAL_OFFSET above SIGRTMIN.  _stacks.py registers faulthandler
 * for it without chaining, then this module puts its own handler in front:
 * it calls faulthandler's (which writes every thread's stack to the rank's
 * stack file without taking the GIL) and appends the end marker, so the
 * controller knows the dump is complete.
 *
 * Why not faulthandler's chain=True: a chaining faulthandler registers its
 * handler without SA_RESTART, and again after every dump, so each request
 * made a system call the rank was blocked in (a C read() on a pipe or a
 * socket) fail with EINTR.  This handler keeps faulthandler's flags and
 * adds SA_RESTART.  Calls the kernel never restarts still return early:
 * sleep() and nanosleep() with the time left, poll() and select() with
 * EINTR (signal(7)).  Only write(2) is used here: async-signal-safe. */
#define SS_STACK_SIGNAL_OFFSET 10
static const char stack_end_marker[] = "\n# stepscope: end of stacks\n";
static volatile sig_atomic_t stack_fd = -1;
static void (*stack_dump)(int); /* faulthandler's handler */

static void stack_handler(int sig)
{
    int saved = errno;
    if (stack_dump)
        stack_dump(sig);
    int fd = stack_fd;
    if (fd >= 0) {
        ssize_t rc = write(fd, stack_end_marker, sizeof stack_end_marker - 1);
        (void)rc; /* nothing to do about a failed write in a handler */
    }
    errno = saved;
}

/* _stack_handler_install(fd) -> int: puts the stack handler in front of
 * the one faulthandler registered for the stack signal (call right after
 * faulthandler.register(sig, file=fd, all_threads=True, chain=False)),
 * with SA_RESTART; the end marker goes to FD.  Returns the signal's
 * number; raises StepscopeError when faulthandler's handler is not there. */
static PyObject *m_stack_handler_install(PyObject *m, PyObject *arg)
{
    (void)m;
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "fd must be a file descriptor");
        return NULL;
    }
    int sig = SIGRTMIN + SS_STACK_SIGNAL_OFFSET;
    if (sig > SIGRTMAX) {
        PyErr_SetString(StepscopeError, "no real-time signal for stacks");
        return NULL;
    }
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler == SIG_DFL ||
        cur.sa_handler == SIG_IGN || cur.sa_handler == stack_handler) {
        PyErr_SetString(StepscopeError, "faulthandler's handler is not "
                        "registered for the stack signal");
        return NULL;
    }
    stack_dump = cur.sa_handler;
    stack_fd = (int)fd;
    struct sigaction sa = cur; /* its mask and flags (SA_ONSTACK) */
    sa.sa_handler = stack_handler;
    sa.sa_flags = (cur.sa_flags | SA_RESTART) & ~SA_RESETHAND;
    if (sigaction(sig, &sa, NULL) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(sig);
}

static PyMethodDef module_methods[] = {
    {"enabled", m_enabled, METH_NOARGS,
     "enabled() -> bool: whether events are recorded and sent (a controller "
     "is connected)."},
    {"step", (PyCFunction)(void (*)(void))m_step,
     METH_FASTCALL | METH_KEYWORDS,
     "step(n=None): a context manager and decorator marking one training "
     "step; None is the previous step plus one (the first is 0)."},
    {"phase", m_phase, METH_O,
     "phase(name): a context manager and decorator timing a named phase "
     "of the current step; phases nest."},
    {"sync", m_sync, METH_O,
     "sync(name): records this rank's arrival now at the collective NAME."},
    {"metric", (PyCFunction)(void (*)(void))m_metric, METH_FASTCALL,
     "metric(name, value): records VALUE for metric NAME in this step (the "
     "last value wins)."},
    {"values", (PyCFunction)(void (*)(void))m_values, METH_FASTCALL,
     "values(name, x): records the vector X (a sequence of numbers) under "
     "NAME in this step (the last one wins)."},
    {"values_labels", (PyCFunction)(void (*)(void))m_values_labels,
     METH_FASTCALL,
     "values_labels(name, labels): names the indices of vector NAME."},
    {"_values_ptr", (PyCFunction)(void (*)(void))m_values_ptr, METH_FASTCALL,
     NULL},
    {"_set_values_flush", m_set_values_flush, METH_O, NULL},
    {"_hash_ptrs", (PyCFunction)(void (*)(void))m_hash_ptrs, METH_FASTCALL,
     NULL},
    {"hash_buffer", m_hash_buffer, METH_O,
     "hash_buffer(obj) -> int: XXH3-64 of a contiguous buffer, in place."},
    {"_values_pending", m_values_pending, METH_NOARGS, NULL},
    {"memory_sample", m_memory_sample, METH_NOARGS,
     "memory_sample(): samples this process's RSS into the current step."},
    {"memory_record", (PyCFunction)(void (*)(void))m_memory_record,
     METH_FASTCALL,
     "memory_record(kind, nbytes): records device memory; kind is "
     "'device_allocated' or 'device_peak'."},
    {"checkpoint_saved", m_checkpoint_saved, METH_O,
     "checkpoint_saved(step): reports that a checkpoint for STEP was "
     "written."},
    {"resumed_from", m_resumed_from, METH_O,
     "resumed_from(step): reports that this process resumed from a "
     "checkpoint saved at STEP; step(None) then continues with STEP + 1.  "
     "Call it before the first step."},
    {"counters", m_counters, METH_NOARGS,
     "counters() -> dict: dropped_events, dropped_records, "
     "dropped_vectors and truncated_values so far."},
    {"step_begin", (PyCFunction)(void (*)(void))m_step_begin, METH_FASTCALL,
     "step_begin(n=None) -> int: begins step N (ending an open one); "
     "returns its number."},
    {"step_end", m_step_end, METH_NOARGS, "step_end(): ends the open step."},
    {"phase_begin", m_phase_begin, METH_O,
     "phase_begin(name): begins phase NAME on this thread."},
    {"phase_end", m_phase_end, METH_O,
     "phase_end(name): ends phase NAME on this thread."},
    {"phase_span", (PyCFunction)(void (*)(void))m_phase_span, METH_FASTCALL,
     "phase_span(name, begin_ns, end_ns): adds a phase measured elsewhere "
     "(times from now_ns()) to the current step."},
    {"now_ns", m_now_ns, METH_NOARGS,
     "now_ns() -> int: the recorder's clock, CLOCK_MONOTONIC in ns."},
    {"_set_decorate", m_set_decorate, METH_O, NULL},
    {"_current_step", m_current_step, METH_NOARGS, NULL},
    {"_next_step", m_next_step, METH_NOARGS, NULL},
    {"_sync_at", (PyCFunction)(void (*)(void))m_sync_at, METH_FASTCALL,
     NULL},
    {"_collective_begin", m_collective_begin, METH_O, NULL},
    {"_collective_end", m_collective_end, METH_NOARGS, NULL},
    {"_profile_enable", m_profile_enable, METH_NOARGS, NULL},
    {"_profile_poll", m_profile_poll, METH_NOARGS, NULL},
    {"_profile_done", (PyCFunction)(void (*)(void))m_profile_done,
     METH_FASTCALL, NULL},
    {"_explicit", m_explicit, METH_NOARGS, NULL},
    {"_auto_begin", m_auto_begin, METH_NOARGS, NULL},
    {"_auto_next", m_auto_next, METH_NOARGS, NULL},
    {"_auto_enable", m_auto_enable, METH_O, NULL},
    {"_auto_on", m_auto_on, METH_NOARGS, NULL},
    {"_exit_watchdog", (PyCFunction)(void (*)(void))m_exit_watchdog,
     METH_FASTCALL, NULL},
    {"_stack_handler_install", m_stack_handler_install, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "stepscope._native",
    .m_doc = "The C core of the stepscope package; import stepscope instead.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    if (PyType_Ready(&Phase_Type) < 0 || PyType_Ready(&Step_Type) < 0 ||
        PyType_Ready(&Outer_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    if (!StepscopeError)
        StepscopeError = PyErr_NewExceptionWithDoc(
            "stepscope.StepscopeError",
            "An error from libstepscope; the message is ss_strerror()'s "
            "followed by details.",
            PyExc_Exception, NULL);
    if (!name_cache)
        name_cache = PyDict_New();
    if (!next_step_obj) {
        StepObject *s = PyObject_New(StepObject, &Step_Type);
        if (s)
            s->n = -1;
        next_step_obj = (PyObject *)s;
    }
    if (!StepscopeError || !name_cache || !next_step_obj ||
        PyModule_AddObjectRef(m, "StepscopeError", StepscopeError) < 0 ||
        PyModule_AddObjectRef(m, "Phase", (PyObject *)&Phase_Type) < 0 ||
        PyModule_AddObjectRef(m, "Step", (PyObject *)&Step_Type) < 0 ||
        PyModule_AddObjectRef(m, "_Outermost", (PyObject *)&Outer_Type) < 0 ||
        PyModule_AddStringConstant(m, "__version__", SS_VERSION_STRING) < 0 ||
        PyModule_AddIntConstant(m, "_STACK_SIGNAL",
                                SIGRTMIN + SS_STACK_SIGNAL_OFFSET) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
