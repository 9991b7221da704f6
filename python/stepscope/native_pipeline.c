/*
 * native_pipeline.c - pipeline microbatches in stepscope._native: the
 * Microbatch type (`with stepscope.microbatch(i, "F"):`) over
 * ss_microbatch_begin / ss_microbatch_end, and _pipeline over
 * ss_pipeline (stepscope/_pipeline.py checks its arguments and names the
 * schedules).
 *
 * microbatch(index, kind) checks its arguments and returns a small object
 * whose __enter__ and __exit__ are the two recorder calls, so that a
 * microbatch costs an allocation, two method calls and two timestamps on
 * the training thread (docs/workloads.md#pipelines measures it).
 */
#include "native_shared.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    uint32_t index;
    char kind;
} MicrobatchObject;

static PyTypeObject Microbatch_Type;

static PyObject *Microbatch_enter(MicrobatchObject *self, PyObject *unused)
{
    ss_microbatch_begin(self->index, self->kind);
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *Microbatch_exit(MicrobatchObject *self,
                                 PyObject *const *args, Py_ssize_t nargs)
{
    ss_microbatch_end();
    Py_RETURN_FALSE;
}

static PyObject *Microbatch_repr(MicrobatchObject *self)
{
    return PyUnicode_FromFormat("stepscope.microbatch(%u, '%c')",
                                (unsigned)self->index, self->kind);
}

static PyMethodDef Microbatch_methods[] = {
    {"__enter__", (PyCFunction)Microbatch_enter, METH_NOARGS,
     "Begins the microbatch span."},
    {"__exit__", (PyCFunction)(void (*)(void))Microbatch_exit, METH_FASTCALL,
     "Ends the microbatch span."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject Microbatch_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.Microbatch",
    .tp_basicsize = sizeof(MicrobatchObject),
    .tp_dealloc = (destructor)PyObject_Free,
    .tp_repr = (reprfunc)Microbatch_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One microbatch's F, B or W work: a context manager.  Get one "
              "from stepscope.microbatch(index, kind).",
    .tp_methods = Microbatch_methods,
};

/* microbatch(index, kind): INDEX an int from 0 to 2**32-1, KIND "F", "B"
 * or "W". */
static PyObject *m_microbatch(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (ss__py_check_nargs("microbatch", nargs, 2, 2) < 0)
        return NULL;
    if (!PyLong_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "a microbatch index must be an "
                            "int, not %.100s", Py_TYPE(args[0])->tp_name);
    unsigned long long i = PyLong_AsUnsignedLongLong(args[0]);
    if (i == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "a microbatch index is from 0 "
                            "to 2**32-1, not %R", args[0]);
    }
    if (i > UINT32_MAX)
        return PyErr_Format(PyExc_ValueError, "a microbatch index is from 0 "
                            "to 2**32-1, not %R", args[0]);
    const char *k = PyUnicode_Check(args[1]) ? PyUnicode_AsUTF8(args[1])
                                              : NULL;
    if (!k || (strcmp(k, "F") && strcmp(k, "B") && strcmp(k, "W"))) {
        PyErr_Clear();
        return PyErr_Format(PyExc_ValueError, "a microbatch kind is \"F\", "
                            "\"B\" or \"W\", not %R", args[1]);
    }
    MicrobatchObject *o = PyObject_New(MicrobatchObject, &Microbatch_Type);
    if (!o)
        return NULL;
    o->index = (uint32_t)i;
    o->kind = k[0];
    return (PyObject *)o;
}

/* _pipeline(stage, stages, schedule, microbatches, chunks): all ints,
 * SCHEDULE an ss_pipe_schedule code. */
static PyObject *m_pipeline(PyObject *m, PyObject *const *args,
                            Py_ssize_t nargs)
{
    if (ss__py_check_nargs("_pipeline", nargs, 5, 5) < 0)
        return NULL;
    unsigned long v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = PyLong_AsUnsignedLong(args[i]);
        if (v[i] == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (v[i] > UINT32_MAX)
            return ss__py_error(SS_EINVAL, "%R is too large", args[i]);
    }
    int rc = ss_pipeline((uint32_t)v[0], (uint32_t)v[1],
                         (ss_pipe_schedule)v[2], (uint32_t)v[3],
                         (uint32_t)v[4]);
    if (rc)
        return ss__py_error(rc, "pipeline(stage=%lu, stages=%lu, schedule "
                            "%lu, microbatches=%lu, chunks=%lu)", v[0], v[1],
                            v[2], v[3], v[4]);
    Py_RETURN_NONE;
}

static PyMethodDef pipeline_methods[] = {
    {"microbatch", (PyCFunction)(void (*)(void))m_microbatch, METH_FASTCALL,
     "microbatch(index, kind): a context manager around one microbatch's "
     "F (forward), B (backward) or W (weight-gradient) work."},
    {"_pipeline", (PyCFunction)(void (*)(void))m_pipeline, METH_FASTCALL,
     NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_pipeline_add(PyObject *m)
{
    if (PyType_Ready(&Microbatch_Type) < 0)
        return -1;
    if (PyModule_AddFunctions(m, pipeline_methods) < 0 ||
        PyModule_AddObjectRef(m, "Microbatch",
                              (PyObject *)&Microbatch_Type) < 0)
        return -1;
    return 0;
}
