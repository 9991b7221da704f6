"""Answers the controller's requests for this rank's stacks (docs/debug.md).

`stepscope run` passes STEPSCOPE_STACK_DIR, its private socket directory.
install() opens STEPSCOPE_STACK_DIR/stack.RANK (append-only, 0600) and
registers faulthandler for the stack signal (SIGRTMIN+10); the C handler
of stepscope._native then takes its place and calls it: on that signal
faulthandler writes the stack of every thread to the file without taking
the GIL, so a rank blocked in a C call that holds the GIL still answers,
and the C handler appends the end marker the controller waits for.  The
handler is installed with SA_RESTART, so a system call the rank is blocked
in (read() on a pipe or socket) goes on rather than failing with EINTR;
sleep(), nanosleep(), poll() and select() still return early, as they do
for any signal.  Nothing runs between requests: no thread, no timer.

The variable is taken out of the environment, so processes this one starts
do not answer in its name.  STEPSCOPE_STACKS=0 turns this off (the controller then reports the rank as
not answering).  A program that registers its own handler for the signal
replaces this one.
"""
import os

_installed = False


def install():
    """Registers the stack handler once per process; returns the signal
    number, or None when there is nothing to answer (not under `stepscope
    run`, turned off, or the file cannot be opened: never raises)."""
    global _installed
    if _installed:
        return _installed
    if os.environ.get("STEPSCOPE_STACKS", "1") == "0":
        return None
    # Taken out of the environment: the processes this one starts (spawned
    # workers, a child that imports stepscope) are not the rank the
    # controller signals, and must not replace its file.
    d = os.environ.pop("STEPSCOPE_STACK_DIR", None)
    rank = os.environ.get("RANK")
    if not d or rank is None or not rank.isdigit():
        return None
    try:
        import faulthandler

        from . import _native
        path = os.path.join(d, "stack." + rank)
        tmp = "%s.%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                     os.O_TRUNC | os.O_CLOEXEC, 0o600)
        sig = _native._STACK_SIGNAL
        faulthandler.register(sig, file=fd, all_threads=True, chain=False)
        try:
            _native._stack_handler_install(fd)
        except Exception:
            faulthandler.unregister(sig)
            raise
        # The controller signals a rank only once its file exists: the
        # handlers are in place before the name is.
        os.rename(tmp, path)
    except Exception:  # never break the program over its telemetry
        return None
    _installed = sig
    return sig
