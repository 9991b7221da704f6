/*
 * py_remote_layout_test.c - py_remote.c's table of CPython 3.11 offsets
 * against offsetof/sizeof in CPython 3.11's own internal headers, when
 * the build found them (python3.11-dev ships Include/internal; CMake then
 * compiles this file with SS_PY_INTERNAL_HEADERS).  Without them the test
 * says so and passes: the e2e tests still read a real 3.11 process.
 */
#if defined(SS_PY_INTERNAL_HEADERS)
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#endif

#include <stddef.h>

#include "py_remote.h"
#include "testing.h"

static void offsets_match_the_headers(void)
{
#if defined(SS_PY_INTERNAL_HEADERS) && PY_MAJOR_VERSION == 3 &&             \
    PY_MINOR_VERSION == 11
    const ss_py_layout *l = ss_py_layout_for(3, 11);
    REQUIRE(l != NULL);
    CHECK_EQ_INT(l->rt_interp_main,
                 offsetof(_PyRuntimeState, interpreters.main));
    CHECK_EQ_INT(l->rt_tstate_current,
                 offsetof(_PyRuntimeState, gilstate.tstate_current));
    CHECK_EQ_INT(l->is_threads_head,
                 offsetof(PyInterpreterState, threads.head));
    CHECK_EQ_INT(l->ts_next, offsetof(PyThreadState, next));
    CHECK_EQ_INT(l->ts_interp, offsetof(PyThreadState, interp));
    CHECK_EQ_INT(l->ts_cframe, offsetof(PyThreadState, cframe));
    CHECK_EQ_INT(l->ts_thread_id, offsetof(PyThreadState, thread_id));
    CHECK_EQ_INT(l->cf_current_frame, offsetof(_PyCFrame, current_frame));
    CHECK_EQ_INT(l->fr_code, offsetof(_PyInterpreterFrame, f_code));
    CHECK_EQ_INT(l->fr_previous, offsetof(_PyInterpreterFrame, previous));
    CHECK_EQ_INT(l->fr_prev_instr,
                 offsetof(_PyInterpreterFrame, prev_instr));
    CHECK(l->fr_size >= l->fr_prev_instr + sizeof(void *));
    CHECK_EQ_INT(l->ob_type, offsetof(PyObject, ob_type));
    CHECK_EQ_INT(l->ob_size, offsetof(PyVarObject, ob_size));
    CHECK_EQ_INT(l->co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
    CHECK_EQ_INT(l->co_filename, offsetof(PyCodeObject, co_filename));
    CHECK_EQ_INT(l->co_name, offsetof(PyCodeObject, co_name));
    CHECK_EQ_INT(l->co_linetable, offsetof(PyCodeObject, co_linetable));
    CHECK_EQ_INT(l->co_code_adaptive,
                 offsetof(PyCodeObject, co_code_adaptive));
    CHECK_EQ_INT(l->bytes_sval, offsetof(PyBytesObject, ob_sval));
    CHECK_EQ_INT(l->str_length, offsetof(PyASCIIObject, length));
    CHECK_EQ_INT(l->str_state, offsetof(PyASCIIObject, state));
    CHECK_EQ_INT(l->str_ascii_size, sizeof(PyASCIIObject));
    CHECK_EQ_INT(l->str_compact_size, sizeof(PyCompactUnicodeObject));
    /* the state bits py_remote.c reads: kind 2..4, compact 5, ascii 6 */
    PyASCIIObject o;
    memset(&o, 0, sizeof o);
    o.state.kind = 7;
    o.state.compact = 1;
    o.state.ascii = 1;
    uint32_t bits;
    memcpy(&bits, (char *)&o + l->str_state, 4);
    CHECK_EQ_INT(bits, 7u << 2 | 1u << 5 | 1u << 6);
#else
    printf("skip: CPython 3.11's internal headers were not found at build "
           "time\n");
#endif
}

TEST_LIST(TEST(offsets_match_the_headers))
