/*
 * native_step.c - steps in stepscope._native: the Step type (a context
 * manager and a decorator), step(), step_begin/end, checkpoints and
 * resumes, and what auto mode asks about steps.
 *
 * The Python layer's step bookkeeping lives here, under the GIL: the last
 * step begun, the open one, whether the program marks steps itself (auto
 * mode then leaves them alone).  step(None) means "the last step begun plus
 * one" (the first is 0); a number that does not increase is refused with a
 * RuntimeWarning rather than handed to the recorder, which would drop it or
 * not depending on timing.  Vectors of device tensors queued by
 * stepscope.values are flushed here, before the step they belong to ends.
 */
#include "native_shared.h"

static PyObject *next_step_obj; /* the shared step(None) object */

/* Step bookkeeping (GIL): what the Python layer has begun. */
static int64_t step_next;     /* the last step begun + 1: step(None) */
static int64_t step_current = -1; /* the open step, -1 when none */
static int step_explicit;     /* the program itself used step() / step_begin */
static int step_begun;        /* some step was begun in this process */

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
        ss__py_error(SS_EINVAL, "a step must be from 0 to 2**63-2, not %R", o);
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

/* ---- the Step type ---- */

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
    .tp_call = ss__py_decorate,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A training step: a context manager and a decorator.  Get one "
              "with stepscope.step(n=None).",
    .tp_methods = Step_methods,
};

/* ---- module functions ---- */

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
    if (ss__py_check_nargs("step_begin", nargs, 0, 1) < 0 ||
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
        return ss__py_error(SS_ESTATE, "resumed_from(%lld) after a step was "
                            "begun: call it before the first step",
                            (long long)v);
    ss_resumed_from((uint64_t)v);
    step_next = v + 1; /* v <= INT64_MAX - 2: parse_step */
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

/* ---- internals for stepscope/__init__.py and auto.py ---- */

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

int ss__py_auto_begin(void)
{
    if (step_explicit || step_current >= 0)
        return 0;
    begin_step(-1);
    return 1;
}

int64_t ss__py_current_step(void)
{
    return step_current;
}

int ss__py_auto_next(void)
{
    if (step_explicit)
        return 0;
    begin_step(-1); /* ends the open step first */
    return 1;
}

static PyMethodDef step_methods[] = {
    {"step", (PyCFunction)(void (*)(void))m_step,
     METH_FASTCALL | METH_KEYWORDS,
     "step(n=None): a context manager and decorator marking one training "
     "step; None is the previous step plus one (the first is 0)."},
    {"_set_values_flush", m_set_values_flush, METH_O, NULL},
    {"_values_pending", m_values_pending, METH_NOARGS, NULL},
    {"checkpoint_saved", m_checkpoint_saved, METH_O,
     "checkpoint_saved(step): reports that a checkpoint for STEP was "
     "written."},
    {"resumed_from", m_resumed_from, METH_O,
     "resumed_from(step): reports that this process resumed from a "
     "checkpoint saved at STEP; step(None) then continues with STEP + 1.  "
     "Call it before the first step."},
    {"step_begin", (PyCFunction)(void (*)(void))m_step_begin, METH_FASTCALL,
     "step_begin(n=None) -> int: begins step N (ending an open one); "
     "returns its number."},
    {"step_end", m_step_end, METH_NOARGS, "step_end(): ends the open step."},
    {"_current_step", m_current_step, METH_NOARGS, NULL},
    {"_next_step", m_next_step, METH_NOARGS, NULL},
    {"_explicit", m_explicit, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_step_add(PyObject *m)
{
    if (PyType_Ready(&Step_Type) < 0)
        return -1;
    if (!next_step_obj) {
        StepObject *s = PyObject_New(StepObject, &Step_Type);
        if (!s)
            return -1;
        s->n = -1;
        next_step_obj = (PyObject *)s;
    }
    if (PyModule_AddFunctions(m, step_methods) < 0 ||
        PyModule_AddObjectRef(m, "Step", (PyObject *)&Step_Type) < 0)
        return -1;
    return 0;
}
