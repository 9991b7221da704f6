/*
 * native_values.c - what a step records under a name in stepscope._native
 * besides time: metric(), the vectors of values() and their labels, and
 * memory samples.
 *
 * A vector arrives as a list or tuple of numbers, as any object with a
 * contiguous buffer of doubles (array('d'), a float64 numpy array), which
 * is handed to the recorder in place, or, from stepscope/__init__.py, as
 * the data pointer of a contiguous float64 CPU tensor (_values_ptr).  Other
 * sequences and element types are converted number by number into a stack
 * buffer, or a heap one for a vector longer than the recorder keeps (the
 * recorder truncates it and counts that).
 */
#include "native_shared.h"

#include <string.h>

static PyObject *m_metric(PyObject *m, PyObject *const *args,
                          Py_ssize_t nargs)
{
    if (ss__py_check_nargs("metric", nargs, 2, 2) < 0)
        return NULL;
    double d = PyFloat_AsDouble(args[1]); /* TypeError for non-numbers */
    if (d == -1.0 && PyErr_Occurred())
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
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
    if (ss__py_check_nargs("values", nargs, 2, 2) < 0)
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
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
    if (ss__py_check_nargs("_values_ptr", nargs, 4, 4) < 0)
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
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

/* values_labels(name, labels): a sequence of str, one per index. */
static PyObject *m_values_labels(PyObject *m, PyObject *const *args,
                                 Py_ssize_t nargs)
{
    if (ss__py_check_nargs("values_labels", nargs, 2, 2) < 0)
        return NULL;
    ss_name_id id = ss__py_name_id(args[0]);
    if (!id)
        return NULL;
    PyObject *fast = PySequence_Fast(args[1], "labels must be a sequence of "
                                              "str");
    if (!fast)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n == 0 || n > SS_MAX_VALUES) {
        Py_DECREF(fast);
        return ss__py_error(SS_EINVAL, "a vector has 1 to %d labels, not "
                            "%zd", SS_MAX_VALUES, n);
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
        return ss__py_error(rc, "cannot keep the labels of %R", args[0]);
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
    if (ss__py_check_nargs("memory_record", nargs, 2, 2) < 0)
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
        return ss__py_error(SS_EINVAL, "memory kind must be "
                            "'device_allocated' or 'device_peak', not %R",
                            kind);
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
        return ss__py_error(SS_EINVAL, "nbytes must be from 0 to 2**64-1, "
                            "not %R", nbytes);
    }
    ss_memory_record(k, b);
    Py_RETURN_NONE;
}


static PyMethodDef values_methods[] = {
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
    {"memory_sample", m_memory_sample, METH_NOARGS,
     "memory_sample(): samples this process's RSS into the current step."},
    {"memory_record", (PyCFunction)(void (*)(void))m_memory_record,
     METH_FASTCALL,
     "memory_record(kind, nbytes): records device memory; kind is "
     "'device_allocated' or 'device_peak'."},
    {NULL, NULL, 0, NULL}};

int ss__py_values_add(PyObject *m)
{
    return PyModule_AddFunctions(m, values_methods);
}
