/*
 * native_process.c - stepscope._native's part in the process's life
 * around the training code: the exit watchdog of auto mode, the handler of
 * the stack-request signal, and on-demand profile requests.
 *
 * These are the controller's and the launcher's ways into a rank that do
 * not go through steps: a request for every thread's Python stack (a
 * real-time signal, answered from a signal handler without the GIL), a
 * request to profile the next steps (polled by auto mode), and the end of
 * a process whose interpreter hangs or aborts in torch's teardown after
 * the script has finished (a watchdog thread and a SIGABRT handler that end
 * it with the script's own status).  What runs in a signal handler here
 * uses only async-signal-safe calls.
 */
#include "native_shared.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ---- on-demand profiling (auto mode; stepscope.h ss_profile_*) ---- */

static PyObject *m_profile_enable(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(ss_profile_enable() == 0);
}

/* _profile_done(request_id, ok, marker_ns, text): the answer. */
static PyObject *m_profile_done(PyObject *m, PyObject *const *args,
                                Py_ssize_t nargs)
{
    int64_t marker;
    if (ss__py_check_nargs("_profile_done", nargs, 4, 4) < 0 ||
        ss__py_parse_ns(args[2], &marker) < 0)
        return NULL;
    unsigned long id = PyLong_AsUnsignedLong(args[0]);
    int ok = PyObject_IsTrue(args[1]);
    const char *text = PyUnicode_AsUTF8(args[3]);
    if (PyErr_Occurred() || ok < 0 || !text)
        return NULL;
    int rc = ss_profile_done((uint32_t)id, ok, marker, text);
    if (rc != 0)
        return ss__py_error(rc, "cannot answer profile request %lu", id);
    Py_RETURN_NONE;
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
        PyErr_SetString(ss__py_error_type, "no real-time signal for stacks");
        return NULL;
    }
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler == SIG_DFL ||
        cur.sa_handler == SIG_IGN || cur.sa_handler == stack_handler) {
        PyErr_SetString(ss__py_error_type, "faulthandler's handler is not "
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


static PyMethodDef process_methods[] = {
    {"_profile_enable", m_profile_enable, METH_NOARGS, NULL},
    {"_profile_done", (PyCFunction)(void (*)(void))m_profile_done,
     METH_FASTCALL, NULL},
    {"_exit_watchdog", (PyCFunction)(void (*)(void))m_exit_watchdog,
     METH_FASTCALL, NULL},
    {"_stack_handler_install", m_stack_handler_install, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_process_add(PyObject *m)
{
    if (PyModule_AddFunctions(m, process_methods) < 0 ||
        PyModule_AddIntConstant(m, "_STACK_SIGNAL",
                                SIGRTMIN + SS_STACK_SIGNAL_OFFSET) < 0)
        return -1;
    return 0;
}
