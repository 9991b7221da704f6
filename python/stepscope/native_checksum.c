/*
 * native_checksum.c - checksums of memory in stepscope._native, for the
 * parameter checksums of replica consistency (stepscope/_checksum.py,
 * docs/consistency.md): _hash_ptrs and hash_buffer.
 *
 * XXH3_64bits (libxxhash) over memory that lies where it lies: a CPU
 * tensor's storage is hashed through its data pointer, never copied.  The
 * GIL is released while hashing when the bytes are many, so other Python
 * threads (DDP's, the data loader's) keep running.
 */
#include "native_shared.h"

#include <xxhash.h>

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
    if (ss__py_check_nargs("_hash_ptrs", nargs, 2, 2) < 0)
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

static PyMethodDef checksum_methods[] = {
    {"_hash_ptrs", (PyCFunction)(void (*)(void))m_hash_ptrs, METH_FASTCALL,
     NULL},
    {"hash_buffer", m_hash_buffer, METH_O,
     "hash_buffer(obj) -> int: XXH3-64 of a contiguous buffer, in place."},
    {NULL, NULL, 0, NULL}};

int ss__py_checksum_add(PyObject *m)
{
    return PyModule_AddFunctions(m, checksum_methods);
}
