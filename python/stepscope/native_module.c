/*
 * native_module.c - the CPython extension behind the `stepscope` package:
 * the module stepscope._native itself, its error type and the argument
 * helpers its other files share.
 *
 * A thin layer over libstepscope (include/stepscope.h), linked in
 * statically.  Its one design goal is a small per-call cost, so everything
 * on the hot path is C:
 *
 *  - `phase(name)` returns a phase object cached per name (a dict lookup on
 *    the str, whose hash is cached), so `with stepscope.phase("x"):` costs a
 *    lookup, two method calls and the two recorder calls.  Phase objects
 *    hold no per-use state, so one object serves every thread and nesting
 *    (native_phase.c).
 *  - `sync`, `metric` and `phase_begin/end` use the same cache for the id.
 *  - `step(n)` objects are context managers and decorators; the step number
 *    `None` means "the last step begun plus one" (the first is 0), and a
 *    number that does not increase is refused with a RuntimeWarning
 *    (native_step.c).
 *  - `_Outermost` wraps a function for auto mode (stepscope/auto.py): it
 *    records a phase around the call only when no other auto-mode wrapper is
 *    active on the calling thread, and runs optional Python callbacks at that
 *    outermost level.  Nested module calls thus cost one C check
 *    (native_outer.c); what auto mode does per step, at those outermost
 *    calls and in DDP's gradient hooks, is C too (native_auto.c).
 *
 * Every libstepscope error becomes `stepscope.StepscopeError` carrying the C
 * message (ss_strerror) and details; arguments of the wrong type raise
 * TypeError.  All state here is protected by the GIL, except the recorder
 * itself, which is thread-safe on its own.  Module state is kept in statics:
 * the recorder is process-wide, so is this module (single-phase init).  The
 * files of the extension and what they share: native_shared.h.
 */
#include "native_shared.h"

#include <stdarg.h>

PyObject *ss__py_error_type;

PyObject *ss__py_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    PyObject *detail = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!detail)
        return NULL;
    PyErr_Format(ss__py_error_type, "%s: %U", ss_strerror(code), detail);
    Py_DECREF(detail);
    return NULL;
}

int ss__py_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t min,
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

int ss__py_parse_ns(PyObject *o, int64_t *out)
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
        ss__py_error(SS_EINVAL, "a time must be from 0 to 2**63-1 ns, not %R",
                     o);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- the recorder's own state ---- */

static PyObject *m_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(ss_enabled());
}

static PyObject *m_now_ns(PyObject *m, PyObject *unused)
{
    return PyLong_FromLongLong(ss_now_ns());
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

static PyMethodDef module_methods[] = {
    {"enabled", m_enabled, METH_NOARGS,
     "enabled() -> bool: whether events are recorded and sent (a controller "
     "is connected)."},
    {"counters", m_counters, METH_NOARGS,
     "counters() -> dict: dropped_events, dropped_records, "
     "dropped_vectors and truncated_values so far."},
    {"now_ns", m_now_ns, METH_NOARGS,
     "now_ns() -> int: the recorder's clock, CLOCK_MONOTONIC in ns."},
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
    if (!ss__py_error_type)
        ss__py_error_type = PyErr_NewExceptionWithDoc(
            "stepscope.StepscopeError",
            "An error from libstepscope; the message is ss_strerror()'s "
            "followed by details.",
            PyExc_Exception, NULL);
    if (!ss__py_error_type)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "StepscopeError", ss__py_error_type) < 0 ||
        PyModule_AddStringConstant(m, "__version__", SS_VERSION_STRING) < 0 ||
        ss__py_phase_add(m) < 0 || ss__py_step_add(m) < 0 ||
        ss__py_outer_add(m) < 0 || ss__py_values_add(m) < 0 ||
        ss__py_checksum_add(m) < 0 || ss__py_process_add(m) < 0 ||
        ss__py_pipeline_add(m) < 0 || ss__py_auto_add(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
