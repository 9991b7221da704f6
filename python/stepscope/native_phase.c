/*
 * native_phase.c - names and phases in stepscope._native: the name cache,
 * the Phase type (a context manager and a decorator), and the functions
 * that record under a name at a point of time: phase(), phase_begin/end,
 * phase_span, sync, _sync_at and the collectives.
 *
 * Every name the program gives is checked against the recorder's rules and
 * interned (ss_name) once; the str -> Phase dict then answers every later
 * use with one lookup on the str's cached hash.  A Phase object holds no
 * per-use state, so one object serves every thread and nesting.  The
 * decorator form of Phase and Step (ss__py_decorate) calls back into the
 * Python layer, which registers its helper with _set_decorate.
 */
#include "native_shared.h"

static PyObject *name_cache;  /* dict: str -> phase object (interned name) */
static PyObject *decorate_fn; /* stepscope._decorate(cm, func), from __init__ */

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
        return ss__py_error(SS_EINVAL, "a name must be 1 to %d bytes of "
                            "UTF-8 without control characters, not %R (%zd "
                            "bytes)", SS_MAX_NAME_LEN, name, len);
    ss_name_id id = ss_name(s);
    if (!id)
        return ss__py_error(SS_ENAMES, "cannot add %R: a process may use at "
                            "most %d distinct names", name, SS_MAX_NAMES);
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

ss_name_id ss__py_name_id(PyObject *name)
{
    PyObject *p = lookup(name);
    if (!p)
        return 0;
    ss_name_id id = ((PhaseObject *)p)->id;
    Py_DECREF(p);
    return id;
}

PyObject *ss__py_decorate(PyObject *cm, PyObject *args, PyObject *kwargs)
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

/* ---- the Phase type ---- */

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
    .tp_call = ss__py_decorate,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A named phase: a context manager and a decorator.  Get one "
              "with stepscope.phase(name).",
    .tp_methods = Phase_methods,
    .tp_getset = Phase_getset,
};

/* ---- module functions ---- */

static PyObject *m_phase(PyObject *m, PyObject *name)
{
    return lookup(name);
}

static PyObject *m_phase_begin(PyObject *m, PyObject *name)
{
    ss_name_id id = ss__py_name_id(name);
    if (!id)
        return NULL;
    ss_phase_begin(id);
    Py_RETURN_NONE;
}

static PyObject *m_phase_end(PyObject *m, PyObject *name)
{
    ss_name_id id = ss__py_name_id(name);
    if (!id)
        return NULL;
    ss_phase_end(id);
    Py_RETURN_NONE;
}

static PyObject *m_phase_span(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    int64_t b, e;
    if (ss__py_check_nargs("phase_span", nargs, 3, 3) < 0 ||
        ss__py_parse_ns(args[1], &b) < 0 || ss__py_parse_ns(args[2], &e) < 0)
        return NULL;
    if (e < b)
        return ss__py_error(SS_EINVAL, "a span cannot end (%lld) before it "
                            "begins (%lld)", (long long)e, (long long)b);
    ss_name_id id = ss__py_name_id(args[0]);
    if (!id)
        return NULL;
    ss_phase_span(id, b, e);
    Py_RETURN_NONE;
}

static PyObject *m_sync(PyObject *m, PyObject *name)
{
    ss_name_id id = ss__py_name_id(name);
    if (!id)
        return NULL;
    ss_sync(id);
    Py_RETURN_NONE;
}

static PyObject *m_sync_at(PyObject *m, PyObject *const *args,
                           Py_ssize_t nargs)
{
    int64_t at;
    if (ss__py_check_nargs("_sync_at", nargs, 2, 2) < 0 ||
        ss__py_parse_ns(args[1], &at) < 0)
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
    if (!id)
        return NULL;
    ss_sync_at(id, at);
    Py_RETURN_NONE;
}

/* The collectives auto mode's wrapper is inside on this thread, innermost
 * last (all_gather_object calls all_gather): the phases to end. */
#define COLLECTIVE_DEPTH 8
static _Thread_local ss_name_id collective_phase[COLLECTIVE_DEPTH];
static _Thread_local unsigned collective_depth;

/* _collective_begin(name, timed): the process enters its next collective
 * of kind NAME (ss_collective_begin), and when TIMED (not an async_op
 * call, which only launches it) a phase of that name begins: a script's
 * own collectives (a loop that all-reduces its gradients itself) are where
 * its ranks wait for each other, which the straggler detector finds as
 * the phase holding the synchronization.  No arrival is recorded (DDP's
 * all-reduce has its own, and a collective after it, a loss averaged for
 * logging, would be reached by every rank at once) but inside auto mode's
 * optimizer step: a sharded optimizer's (ZeroRedundancyOptimizer's
 * broadcast of the parameters each rank updated, async or not) is
 * reached by each rank after its own update, and its first call of the
 * step is an arrival of the kind's name (ss_sync_at keeps a step's
 * first). */
static PyObject *m_collective_begin(PyObject *m, PyObject *const *args,
                                    Py_ssize_t nargs)
{
    if (ss__py_check_nargs("_collective_begin", nargs, 2, 2) < 0)
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
    if (!id)
        return NULL;
    int timed = PyObject_IsTrue(args[1]);
    if (timed < 0)
        return NULL;
    if (ss__py_auto_in_optimizer())
        ss_sync_at(id, ss_now_ns());
    ss_collective_begin(id);
    if (collective_depth < COLLECTIVE_DEPTH) {
        if (timed)
            ss_phase_begin(id);
        collective_phase[collective_depth] = timed ? id : 0;
    }
    collective_depth++;
    Py_RETURN_NONE;
}

/* _collective_end(): the collective _collective_begin entered is over. */
static PyObject *m_collective_end(PyObject *m, PyObject *unused)
{
    if (collective_depth > 0 && --collective_depth < COLLECTIVE_DEPTH &&
        collective_phase[collective_depth])
        ss_phase_end(collective_phase[collective_depth]);
    ss_collective_end();
    Py_RETURN_NONE;
}

/* _set_decorate(fn): stepscope/__init__.py's _decorate, which
 * ss__py_decorate calls. */
static PyObject *m_set_decorate(PyObject *m, PyObject *fn)
{
    if (!PyCallable_Check(fn))
        return PyErr_Format(PyExc_TypeError, "_set_decorate wants a callable");
    Py_INCREF(fn);
    Py_XSETREF(decorate_fn, fn);
    Py_RETURN_NONE;
}

static PyMethodDef phase_methods[] = {
    {"phase", m_phase, METH_O,
     "phase(name): a context manager and decorator timing a named phase "
     "of the current step; phases nest."},
    {"sync", m_sync, METH_O,
     "sync(name): records this rank's arrival now at the collective NAME."},
    {"phase_begin", m_phase_begin, METH_O,
     "phase_begin(name): begins phase NAME on this thread."},
    {"phase_end", m_phase_end, METH_O,
     "phase_end(name): ends phase NAME on this thread."},
    {"phase_span", (PyCFunction)(void (*)(void))m_phase_span, METH_FASTCALL,
     "phase_span(name, begin_ns, end_ns): adds a phase measured elsewhere "
     "(times from now_ns()) to the current step."},
    {"_set_decorate", m_set_decorate, METH_O, NULL},
    {"_sync_at", (PyCFunction)(void (*)(void))m_sync_at, METH_FASTCALL,
     NULL},
    {"_collective_begin", (PyCFunction)(void (*)(void))m_collective_begin,
     METH_FASTCALL, NULL},
    {"_collective_end", m_collective_end, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_phase_add(PyObject *m)
{
    if (PyType_Ready(&Phase_Type) < 0)
        return -1;
    if (!name_cache && !(name_cache = PyDict_New()))
        return -1;
    if (PyModule_AddFunctions(m, phase_methods) < 0 ||
        PyModule_AddObjectRef(m, "Phase", (PyObject *)&Phase_Type) < 0)
        return -1;
    return 0;
}
