/*
 * native_outer.c - auto mode's wrapper in stepscope._native: the
 * _Outermost type, and the switch that turns auto mode on and off.
 *
 * stepscope/auto.py wraps torch's module calls, optimizer steps and the
 * like in _Outermost objects.  A call through a wrapper records a phase
 * around the wrapped call and runs the optional Python callbacks only when
 * auto mode is on and no other wrapper is active on the calling thread, so
 * nested module calls cost one C check and the recorded phases are the
 * outermost ones.  An exception from a callback is reported as unraisable
 * and never reaches the program; the wrapped call's own exception passes
 * through unchanged.  To introspection the wrapper looks like the function
 * it wraps.  A wrapper of a kind (AUTO_DATA, AUTO_FORWARD, ...) does auto
 * mode's work in C instead of calling Python callbacks (native_auto.c).
 */
#include "native_shared.h"

#include <stddef.h>

/* Auto mode: wrappers pass straight through unless enabled (and never in a
 * forked child, see auto.py).  The depth is per thread. */
static int auto_on;
static _Thread_local int auto_depth;
/* The kind of the outermost wrapper active on this thread (0: one with
 * callbacks), set as it is entered; read only while one is active. */
static _Thread_local int auto_outer_kind;

typedef struct {
    PyObject_HEAD
    PyObject *func;  /* the wrapped callable */
    PyObject *enter; /* enter(first_arg) -> token, or None */
    PyObject *exit;  /* exit(token, failed), or None */
    ss_name_id id;   /* the phase recorded around the call, or 0 */
    int kind;        /* SS__PY_AUTO_*: C work instead of enter/exit, or 0 */
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

/* The wrapped call's exception (if any), kept across auto mode's work
 * after the call: taken by error_keep, put back by error_restore. */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} kept_error;

static void error_keep(kept_error *k)
{
#if PY_VERSION_HEX >= 0x030C0000
    k->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&k->type, &k->value, &k->tb);
#endif
}

static void error_restore(kept_error *k)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(k->exc);
#else
    PyErr_Restore(k->type, k->value, k->tb);
#endif
}

int ss__py_auto_in_optimizer(void)
{
    return auto_on && auto_depth > 0 &&
           auto_outer_kind == SS__PY_AUTO_OPTIMIZER;
}

/* Whether a call through SELF is a forward or backward pass that the
 * outermost optimizer step runs itself (a closure), one wrapper deep:
 * recorded nested in "optimizer" (ss__py_auto_closure). */
static int closure_pass(const OuterObject *self)
{
    return auto_depth == 1 && auto_outer_kind == SS__PY_AUTO_OPTIMIZER &&
           (self->kind == SS__PY_AUTO_FORWARD ||
            self->kind == SS__PY_AUTO_BACKWARD);
}

/* SELF's wrapped call, inside the phase SELF names (if any). */
static PyObject *phase_call(OuterObject *self, PyObject *const *args,
                            size_t nargsf, PyObject *kwnames)
{
    if (self->id)
        ss_phase_begin(self->id);
    PyObject *res = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if (self->id)
        ss_phase_end(self->id);
    return res;
}

/* A closure's pass: its phase, and a backward's all-reduce arrival. */
static PyObject *closure_call(OuterObject *self, PyObject *const *args,
                              size_t nargsf, PyObject *kwnames)
{
    auto_depth++;
    ss__py_auto_closure(self->kind, 1);
    PyObject *res = phase_call(self, args, nargsf, kwnames);
    kept_error kept;
    error_keep(&kept);
    ss__py_auto_closure(self->kind, 0);
    error_restore(&kept);
    auto_depth--;
    return res;
}

static PyObject *Outer_vectorcall(PyObject *self_, PyObject *const *args,
                                  size_t nargsf, PyObject *kwnames)
{
    OuterObject *self = (OuterObject *)self_;
    if (auto_on && closure_pass(self))
        return closure_call(self, args, nargsf, kwnames);
    if (!auto_on || auto_depth > 0)
        return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    auto_depth++;
    auto_outer_kind = self->kind;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *first = nargs > 0 ? args[0] : Py_None;
    if (self->kind) {
        ss__py_auto_token t;
        ss__py_auto_enter(self->kind, first, &t);
        PyObject *res = phase_call(self, args, nargsf, kwnames);
        kept_error kept;
        error_keep(&kept);
        ss__py_auto_exit(self->kind, first, &t, res == NULL);
        error_restore(&kept);
        auto_depth--;
        return res;
    }
    PyObject *token = NULL;
    if (self->enter != Py_None) {
        token = call_hook(self->enter, first, NULL);
    }
    PyObject *res = phase_call(self, args, nargsf, kwnames);
    if (self->exit != Py_None) {
        /* The call's exception (if any) is kept across the callback. */
        kept_error kept;
        error_keep(&kept);
        PyObject *r = call_hook(self->exit, token ? token : Py_None,
                                res ? Py_False : Py_True);
        Py_XDECREF(r);
        error_restore(&kept);
    }
    Py_XDECREF(token);
    auto_depth--;
    return res;
}

static PyObject *Outer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"func", "name", "enter", "exit", "kind", NULL};
    PyObject *func, *name = Py_None, *enter = Py_None, *exit_cb = Py_None;
    int kind = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO$i:_Outermost", kwlist,
                                     &func, &name, &enter, &exit_cb, &kind))
        return NULL;
    if (kind < 0 || kind >= SS__PY_AUTO_KINDS ||
        (kind && (enter != Py_None || exit_cb != Py_None)))
        return PyErr_Format(PyExc_ValueError, "_Outermost: a kind from 0 to "
                            "%d, and no callbacks with one", SS__PY_AUTO_KINDS - 1);
    if (!PyCallable_Check(func) ||
        (enter != Py_None && !PyCallable_Check(enter)) ||
        (exit_cb != Py_None && !PyCallable_Check(exit_cb)))
        return PyErr_Format(PyExc_TypeError, "_Outermost wants callables");
    ss_name_id id = 0;
    if (name != Py_None && !(id = ss__py_name_id(name)))
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
    self->kind = kind;
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
    .tp_doc = "_Outermost(func, name=None, enter=None, exit=None, *, "
              "kind=0): calls func; when auto mode is on and no other "
              "wrapper is active on this thread, also runs enter(first_arg) "
              "-> token, records phase NAME around the call and runs "
              "exit(token, failed); with a kind (AUTO_DATA, ...), auto "
              "mode's C work of that kind instead of enter and exit.",
    .tp_traverse = (traverseproc)Outer_traverse,
    .tp_clear = (inquiry)Outer_clear,
    .tp_getset = Outer_getset,
    .tp_descr_get = Outer_descr_get,
    .tp_new = Outer_new,
};


/* ---- module functions ---- */

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

static PyMethodDef outer_methods[] = {
    {"_auto_enable", m_auto_enable, METH_O, NULL},
    {"_auto_on", m_auto_on, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_outer_add(PyObject *m)
{
    if (PyType_Ready(&Outer_Type) < 0 ||
        PyModule_AddFunctions(m, outer_methods) < 0 ||
        PyModule_AddObjectRef(m, "_Outermost", (PyObject *)&Outer_Type) < 0)
        return -1;
    return 0;
}
