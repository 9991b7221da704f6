"""stepscope.auto: records the steps of an unmodified PyTorch script.

`stepscope run --auto` calls install() right after the script imports torch
(through stepscope/_autoload/sitecustomize.py); a script may also call it
itself.  It patches torch in place, once per process:

  phase "data"       DataLoader.__iter__ and the __next__ of its iterators
  phase "forward"    nn.Module.__call__ at the outermost level
  phase "backward"   Tensor.backward and torch.autograd.backward
  phase "optimizer"  Optimizer.step of every optimizer class (wrapped when
                     the first instance is made) and GradScaler.step
  sync  "allreduce"  DDP: this rank's last gradient of a backward pass
                     that all-reduces (see _GradClock)
  phase "allreduce"  DDP: from that arrival until backward returns, which
                     DDP allows once every bucket's all-reduce completed;
                     recorded inside "backward", so backward's self time
                     is its compute and allreduce's the wait
  memory             RSS at every step end; once the script uses CUDA, the
                     device peak (reset every step) and allocated bytes
  collectives        every torch.distributed collective the script calls
                     (all_reduce, broadcast, barrier, all_gather, ...) and
                     each DDP backward pass that all-reduces (as
                     "all_reduce", from its first gradient to backward's
                     end) are numbered; the latest goes with the live
                     status, for hang diagnosis (docs/debug.md)
  phase "gpu_*"      once the script uses CUDA: GPU time of forward, backward
                     and optimizer from CUDA events, read when complete
  phase "rollout"    the generate method of a model (transformers'
                     GenerationMixin.generate, or a script's own), from
                     the first outermost forward of its class on: the
                     generation of RL post-training (docs/rl.md)
  phase "checkpoint" torch.save (and torch.distributed.checkpoint.save when
                     present), reported with checkpoint_saved(k); see
                     "Checkpoints" below
  numerics           `--numerics light|full` (STEPSCOPE_NUMERICS, default
                     light): loss, gradient and parameter norms, counts
                     of non-finite values and, in full mode, where the
                     first non-finite value was born (stepscope/_numerics.py,
                     docs/numerics.md)
  float8             where torch has float8 dtypes and the script uses
                     torchao's Float8Linear: fp8_stats of each one's input,
                     weight and output gradient (stepscope/_fp8_auto.py)
  checksums          after the pacing optimizer's step, every
                     `--checksum-every N` steps (STEPSCOPE_CHECKSUM_EVERY,
                     default auto): a hash of every parameter of each DDP
                     model, for the replicas' consistency
                     (stepscope/_checksum.py, docs/consistency.md)
  profiling          `stepscope profile` requests: torch.profiler runs from
                     the step boundary after the request until the first
                     step boundary after the requested seconds, then its
                     Chrome trace is written where the controller said
                     (see _Profile)

Steps: a step runs from the end of one optimizer step to the end of the
next, so gradient accumulation stays one step.  The first step begins at
the first forward (or backward or optimizer step); the data fetches before
it are added to it as "data" spans.  When several optimizers step, the
first one to step paces the steps.  A script that calls stepscope.step()
or step_begin() itself keeps its own steps: auto mode then makes no step
boundaries and only records phases, memory and the all-reduce.

Checkpoints: a save made while step k + 1 is open (auto steps: after
optimizer step k) holds the state after step k, so it is reported as the
checkpoint of step k (in a script that makes its own steps: the open step,
else the last one begun).  Saved to a path, it gets a sidecar file
PATH.stepscope.json: {"format": "stepscope.checkpoint/1", "step": k,
"size": ..., "mtime_ns": ...} of the file (or directory) as saved; saved to
a file object open on a file (`with open(p, "wb") as f`), the same for the
file it names, after a flush.  When a
later process torch.load()s that file before its first step and the file
still has that size and modification time (renamed or not: a file moved
after the save is matched among its directory's sidecars), it resumed from
step k:
resumed_from(k) is reported and its steps continue with k + 1, so step
numbers mean the same across attempts (docs/fault-tolerance.md).

Only the outermost instrumented call on a thread is recorded: modules
called by the forward, forwards recomputed inside backward (activation
checkpointing) or modules called while fetching data are part of the outer
phase.  That check is made in C (stepscope._native._Outermost), so a
nested module call costs tens of nanoseconds.

What runs per step is C as well (stepscope/native_auto.c): the work at the
outermost data, forward, backward and optimizer calls, the step boundary
(RSS, the next step, profile requests), DDP's gradient hook (a C callable)
and the all-reduce arrival, without a Python call or a Python object per
step.  Python runs only where a script needs it, through the callbacks
below (_CALLBACKS): the first outermost call of a module object
(numerics' instrumenting, generate()), numerics, checksums, CUDA events and
a running profile.  _State's numerics, checksums, gpu and profile tell the
C side which of them apply.

Nothing here ever raises into the script: a patch that cannot be applied is
reported once on stderr and skipped.  In a forked child (DataLoader workers)
the wrappers pass straight through.
"""
import atexit
import collections
import functools
import inspect
import os
import sys
import weakref

from . import _fp8_auto, _native
from . import _checksum
from . import _numerics
from ._native import _Outermost

_GPU_PENDING_MAX = 256  # CUDA event pairs awaiting completion
_NARROW_AFTER = 3       # see _GradClock
_RELEARN_EVERY = 200    # passes on one hook before all come back, likewise


def _flag(name):
    """A _State attribute whose value (None or not) the C side is told of:
    it calls the matching callbacks only while it is set."""
    key = "_" + name

    def get(self):
        return getattr(self, key)

    def set_(self, value):
        setattr(self, key, value)
        _native._auto_flags(self._numerics is not None,
                            self._checksums is not None,
                            self._gpu is not None, self._profile is not None)
    return property(get, set_)


class _State:
    numerics = _flag("numerics")    # _numerics.Numerics unless --numerics off
    checksums = _flag("checksums")  # _checksum.Checksums unless every is 0
    gpu = _flag("gpu")              # _Gpu once the script has initialised CUDA
    profile = _flag("profile")      # the _Profile running, if any

    def __init__(self):
        self._numerics = self._checksums = self._gpu = self._profile = None
        self.installed = False
        self.clocks = []      # weak references to each DDP's _GradClock
        self.torch = None
        self.warned = set()
        self.sidecars_skipped = 0  # sidecars not read (see _read_sidecar)
        self.model_classes = set()  # classes looked at for generate()


_S = _State()


def _warn(msg):
    if msg not in _S.warned:
        _S.warned.add(msg)
        sys.stderr.write("stepscope: auto mode: %s\n" % msg)


# ---- what the C side calls (native_auto.c), only where it applies ----
#
# Steps: the first step begins at the first outermost forward, backward or
# optimizer step (with the data fetches made before it as "data" spans);
# the end of the pacing optimizer's step (the first optimizer or GradScaler
# to finish a step, until it is garbage) records the RSS into the ending
# step and begins the next, unless the script makes its own steps.

def _forward_root(obj):
    """The first outermost call of the module object OBJ."""
    if _S.numerics is not None:
        _S.numerics.on_forward_root(obj)
    if type(obj) not in _S.model_classes:
        _wrap_generate(obj)


def _gpu_on():
    """torch.cuda was found initialised: GPU timing begins."""
    if _S.gpu is None:
        _S.gpu = _Gpu(_S.torch.cuda)


def _gpu_begin():
    return _gpu_call(_S.gpu.begin)


def _gpu_end(name, start):
    _gpu_call(_S.gpu.end, name, start)


def _step_end():
    """Before the pacing optimizer's step ends its step: GPU times and
    device memory, numerics."""
    if _S.gpu is not None:
        _gpu_call(_S.gpu.step_end)
    if _S.numerics is not None:
        _S.numerics.step_end()


def _step_begun():
    _S.numerics.step_begun()


def _on_backward(tensors):
    _S.numerics.on_backward(tensors)


def _before_optimizer():
    _S.numerics.before_optimizer()


def _after_optimizer(optimizer, step, step_ns):
    """A checksum step (the C side keeps the step time and calls this only
    when one is due); then the interval for the next ones."""
    _S.checksums.after_optimizer_step(optimizer, step, step_ns)
    _native._auto_checksum_every(_S.checksums.interval())


def _profile(*request):
    """At a step boundary: a new profile request (request_id, duration_ms,
    directory), or () the running profile's tick."""
    if request:
        _Profile.start(*request)
    elif _S.profile is not None:
        _S.profile.tick()


_CALLBACKS = {"forward_root": _forward_root, "gpu_on": _gpu_on,
              "gpu_begin": _gpu_begin, "gpu_end": _gpu_end,
              "step_end": _step_end, "step_begun": _step_begun,
              "backward": _on_backward, "before_optimizer": _before_optimizer,
              "after_optimizer": _after_optimizer, "profile": _profile}


# ---- on-demand profiling ----

PROFILE_MARKER = "stepscope::clock"  # wire.h WIRE_PROFILE_MARKER


class _Profile:
    """One `stepscope profile` request on this rank.  torch.profiler
    starts at a step boundary, so whole steps are profiled, and stops at
    the first step boundary after the requested time; stopping it and
    writing the trace take place on the training thread, in the step that
    ends the profile.  Right after the profiler starts, a record_function
    named PROFILE_MARKER is opened and ss_now_ns() read inside it: the
    controller aligns the trace's own clock with the steps by that pair.
    The answer (the trace's path, or why there is none) goes to the
    controller with _native._profile_done."""

    def __init__(self, request_id, duration_ms, directory):
        self.id = request_id
        self.end_ns = 0
        self.path = os.path.join(directory, "rank%s-request%d.json" % (
            os.environ.get("RANK", "0"), request_id))
        self.prof = None
        self.marker_ns = 0
        self.duration_ms = duration_ms

    @classmethod
    def start(cls, request_id, duration_ms, directory):
        p = cls(request_id, duration_ms, directory)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            profiler = _S.torch.profiler
            acts = [profiler.ProfilerActivity.CPU]
            if _S.torch.cuda.is_available():
                acts.append(profiler.ProfilerActivity.CUDA)
            p.prof = profiler.profile(activities=acts, record_shapes=False)
            p.prof.__enter__()
            with profiler.record_function(PROFILE_MARKER):
                p.marker_ns = _native.now_ns()
        except Exception as e:
            p.answer(False, "torch.profiler could not start: %s: %s"
                     % (type(e).__name__, e))
            return
        p.end_ns = _native.now_ns() + duration_ms * 1000000
        _S.profile = p

    def tick(self):
        if _native.now_ns() < self.end_ns:
            return
        _S.profile = None
        try:
            self.prof.__exit__(None, None, None)
            self.prof.export_chrome_trace(self.path)
        except Exception as e:
            self.answer(False, "torch.profiler failed: %s: %s"
                        % (type(e).__name__, e))
            return
        self.answer(True, self.path)

    def answer(self, ok, text):
        try:
            _native._profile_done(self.id, ok, self.marker_ns if ok else 0,
                                  text[:255])
        except Exception as e:
            _warn("cannot answer profile request %d: %s" % (self.id, e))


# ---- CUDA ----

class _Gpu:
    """GPU time from CUDA events and device memory, never synchronizing:
    an event pair is read only once query() says both have completed, at a
    step end; pairs still running are read at a later step end (and then
    count in that step)."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.free = []
        self.pending = collections.deque()  # (phase name, start, end)

    def _event(self):
        if self.free:
            return self.free.pop()
        return self.cuda.Event(enable_timing=True)

    def begin(self):
        ev = self._event()
        ev.record()
        return ev

    def end(self, name, start):
        ev = self._event()
        ev.record()
        if len(self.pending) >= _GPU_PENDING_MAX:
            self.pending.popleft()
        self.pending.append((name, start, ev))

    def step_end(self):
        now = _native.now_ns()
        while self.pending:
            name, start, end = self.pending[0]
            if not (end.query() and start.query()):
                break
            self.pending.popleft()
            ns = int(start.elapsed_time(end) * 1e6)
            _native.phase_span(name, max(0, now - max(ns, 0)), now)
            self.free += (start, end)
        cuda = self.cuda
        _native.memory_record("device_peak", cuda.max_memory_allocated())
        _native.memory_record("device_allocated", cuda.memory_allocated())
        cuda.reset_peak_memory_stats()


def _gpu_call(fn, *args):
    """Runs a CUDA bookkeeping call; on failure GPU timing is switched off
    for good (reported once) and None returned."""
    try:
        return fn(*args)
    except Exception as e:
        _warn("GPU timing is off: %s: %s" % (type(e).__name__, e))
        _S.gpu = _GpuOff()
        return None


class _GpuOff:
    """Stands in for _Gpu after a failure: records nothing."""

    def begin(self):
        return None

    def end(self, name, start):
        pass

    def step_end(self):
        pass


def _wrap_generate(model):
    """At the first outermost forward of a model class: its generate
    method (and that of the model a DDP wraps), as found along the MRO
    (transformers' GenerationMixin.generate, a script's own), becomes the
    phase "rollout" -- the generation of RL post-training (docs/rl.md).
    A generate called before any forward of its class is not recorded as
    one (its forwards are)."""
    inner = getattr(model, "module", None)
    for m in (model, inner):
        if m is None or type(m) in _S.model_classes:
            continue
        cls = type(m)
        _S.model_classes.add(cls)
        try:
            gen = inspect.getattr_static(cls, "generate", None)
            if inspect.isfunction(gen):
                cls.generate = _Outermost(gen, "rollout",
                                          kind=_native.AUTO_ROLLOUT)
        except Exception as e:
            _warn("%s.generate is not instrumented: %s" % (cls.__name__, e))


# ---- patches ----

def _patch_data(torch):
    from torch.utils.data import dataloader
    base = dataloader._BaseDataLoaderIter
    base.__next__ = _Outermost(base.__next__, "data", kind=_native.AUTO_DATA)
    loader = dataloader.DataLoader
    loader.__iter__ = _Outermost(loader.__iter__, "data",
                                 kind=_native.AUTO_DATA)


def _patch_forward(torch):
    module = torch.nn.Module
    module.__call__ = _Outermost(module.__call__, "forward",
                                 kind=_native.AUTO_FORWARD)


def _patch_backward(torch):
    # The phase is begun and ended by the C side of this kind (not by
    # _Outermost, which ends it before the exit runs): the all-reduce wait
    # recorded at the exit must fall inside it.
    torch.Tensor.backward = _Outermost(torch.Tensor.backward, None,
                                       kind=_native.AUTO_BACKWARD)
    torch.autograd.backward = _Outermost(torch.autograd.backward, None,
                                         kind=_native.AUTO_BACKWARD)


def _wrap_step(cls):
    """Wraps CLS.step (as found along its MRO) unless already wrapped."""
    step = inspect.getattr_static(cls, "step", None)
    if step is None or isinstance(step, _Outermost):
        return
    cls.step = _Outermost(step, "optimizer", kind=_native.AUTO_OPTIMIZER)


def _patch_optimizer(torch):
    optimizer = torch.optim.Optimizer
    init = optimizer.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            _wrap_step(type(self))
        except Exception as e:
            _warn("%s.step is not instrumented: %s" % (type(self).__name__, e))

    optimizer.__init__ = __init__
    scaler = getattr(getattr(torch.cuda, "amp", None), "GradScaler", None)
    if scaler is not None:
        _wrap_step(scaler)


class _GradClock:
    """Times one DistributedDataParallel's all-reduce from gradient hooks,
    leaving the all-reduce itself to DDP's built-in C++ code.

    A tensor hook on each parameter notes when its gradient is ready.  The
    last one of a backward pass is this rank's arrival: its compute is done
    and DDP launches its last bucket.  DDP lets backward() return only once
    every bucket's all-reduce has completed, so from the arrival to the end
    of backward this rank waits for the others.  Only backward passes after
    a forward that prepared an all-reduce count (not those under no_sync()).

    Python never touches the buckets: a communication hook would give the
    bucket tensors Python objects, and in torch 1.13 a gloo thread that
    drops the last reference to one needs the GIL, which deadlocks DDP's
    teardown at exit.

    A hook costs about half a microsecond, so once the same parameter has
    been last in _NARROW_AFTER backward passes in a row, only its hook
    stays.  All come back (and the learning starts again) should it not
    fire in a pass, and every _RELEARN_EVERY passes in case another
    parameter has become the last.

    The state and the learning are C (self.c, a _native._Clock; its hooks
    are C callables, and the end of every outermost backward settles it
    without Python); this object keeps the parameters and the hook handles
    and changes the hooks when the clock asks (_rehook)."""

    def __init__(self, params):
        self.params = [p for p in params if p.requires_grad]
        self.handles = []
        self.c = _native._Clock(len(self.params), self._rehook,
                                _NARROW_AFTER, _RELEARN_EVERY)
        self._hook_all()

    # The pass's state, for tests and tools: armed (the last forward
    # prepared an all-reduce), ns (the latest gradient's now_ns()) and
    # last (its parameter), candidate (the parameter being learnt).
    armed = property(lambda self: self.c.armed,
                     lambda self, v: setattr(self.c, "armed", v))
    ns = property(lambda self: self.c.ns)
    last = property(lambda self: self.c.last)
    candidate = property(lambda self: self.c.candidate)

    @property
    def narrowed(self):
        """Only the last parameter's hook is on (none at all: unhooked,
        the DDP is gone)."""
        return 0 < len(self.handles) < len(self.params)

    def _remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        self.c.nhooks = 0

    def _unhook(self):
        """The DDP is gone (or the hooks are not wanted): no hooks, and the
        clock leaves the list settled after backward."""
        self._remove()
        self.c.close()

    def _hook_only(self, indices):
        self._remove()
        self.handles = [self.params[i].register_hook(self.c.hook(i))
                        for i in indices]
        self.c.nhooks = len(self.handles)

    def _hook_all(self):
        self._hook_only(range(len(self.params)))

    def _rehook(self, index):
        """Called by the clock: every hook back (INDEX -1, learning
        again), or only parameter INDEX's."""
        self._hook_only(range(len(self.params)) if index < 0 else [index])

    def settle(self):
        """At the end of a backward pass: this DDP's arrival time if the
        pass all-reduced its gradients, else None (what the C side does
        for every DDP at the end of an outermost backward)."""
        self.c.relearn_every = _RELEARN_EVERY
        return self.c.settle()


def _patch_ddp(torch):
    import torch.distributed as dist
    if not dist.is_available():
        return
    from torch.nn.parallel import DistributedDataParallel as ddp_cls
    init = ddp_cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            clock = _GradClock(self.module.parameters())
            # The forward arms it (_native._ArmForward); the hooks go with
            # the DDP, and so does the clock.
            self.__dict__["_stepscope_clock"] = clock.c
            weakref.finalize(self, clock._unhook).atexit = False
            _S.clocks = [r for r in _S.clocks if r() is not None]
            _S.clocks.append(weakref.ref(clock))
            _native._auto_clock_add(clock.c)
            if _S.checksums is not None:
                _S.checksums.add_ddp(self)
        except Exception as e:
            _warn("DDP all-reduce is not instrumented: %s: %s"
                  % (type(e).__name__, e))

    ddp_cls.__init__ = __init__
    ddp_cls.forward = _native._ArmForward(ddp_cls.forward,
                                          torch.is_grad_enabled)


# The torch.distributed collectives a script may call; each call is the
# process's next collective of that kind (ss_collective_begin) and, unless
# async_op=True, a phase of its name.
_COLLECTIVES = ("all_reduce", "broadcast", "barrier", "all_gather",
                "all_gather_into_tensor", "all_gather_object",
                "reduce_scatter", "reduce_scatter_tensor", "reduce",
                "gather", "scatter", "all_to_all", "all_to_all_single",
                "broadcast_object_list", "monitored_barrier")


def _collective(fn, kind):
    # The wrapper's name is what merged stacks show between the script's
    # frame and torch's (docs/debug.md).
    @functools.wraps(fn)
    def stepscope_collective(*args, **kwargs):
        # async_op=True only launches it: no phase of its time
        _native._collective_begin(kind, not kwargs.get("async_op", False))
        try:
            return fn(*args, **kwargs)
        finally:
            # With async_op=True the call only launches it: its wait is
            # not seen, the collective ends here.
            _native._collective_end()
    stepscope_collective._stepscope_collective = True
    return stepscope_collective


def _patch_collectives(torch):
    import torch.distributed as dist
    if not dist.is_available():
        return
    for kind in _COLLECTIVES:
        fn = getattr(dist, kind, None)
        if fn is not None and not getattr(fn, "_stepscope_collective", False):
            setattr(dist, kind, _collective(fn, kind))


# ---- checkpoints ----

SIDECAR_SUFFIX = ".stepscope.json"
SIDECAR_FORMAT = "stepscope.checkpoint/1"


def _checkpoint_step():
    """The step whose state a save made now holds, or None (no step has
    completed)."""
    current = _native._current_step()
    if _native._explicit():
        last = current if current is not None else _native._next_step() - 1
    else:
        # Auto steps end at the optimizer step: the open one has not
        # updated the model yet.
        last = (current if current is not None else _native._next_step()) - 1
    return last if last >= 0 else None


def _path_of(f):
    """The path a checkpoint is saved to or loaded from: F itself, or the
    name of a file object open on a file (`with open(p, "wb") as f:
    torch.save(obj, f)`); None for other file-like objects (io.BytesIO, a
    socket, a file opened from a descriptor)."""
    if not isinstance(f, (str, bytes, os.PathLike)):
        name = getattr(f, "name", None)
        if not isinstance(name, (str, bytes)) or not hasattr(f, "fileno"):
            return None
        f = name
    try:
        return os.fsdecode(os.fspath(f))
    except (TypeError, ValueError):
        return None


def _identity(path):
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def _saved(f):
    """After a save to F: checkpoint_saved(k) and the sidecar."""
    step = _checkpoint_step()
    if step is None:
        return
    _native.checkpoint_saved(step)
    path = _path_of(f)
    if path is None:
        return
    try:
        import json
        if not isinstance(f, (str, bytes, os.PathLike)):
            # A file object still holds what torch.save wrote in its
            # buffer: written out now, the file has its final size and
            # modification time (closing it then writes nothing).
            f.flush()
        size, mtime = _identity(path)
        tmp = "%s%s.%d.tmp" % (path, SIDECAR_SUFFIX, os.getpid())
        with open(tmp, "w") as out:
            json.dump({"format": SIDECAR_FORMAT, "step": step, "size": size,
                       "mtime_ns": mtime}, out)
        os.replace(tmp, path + SIDECAR_SUFFIX)
    except (OSError, ValueError) as e:
        _warn("cannot write %s%s (resumes from it will not be recognised): "
              "%s" % (path, SIDECAR_SUFFIX, e))


_SIDECAR_SCAN_MAX = 10000  # directory entries looked at for a renamed file
_SIDECAR_MAX_BYTES = 4096  # a sidecar is ~100 bytes


class _BadSidecar(Exception):
    pass


def _read_sidecar(name):
    """The JSON object of the sidecar NAME, or None when it is not one of
    ours (another format).  Raises OSError (cannot be read) or _BadSidecar
    (not a small regular file) when it is not worth reading: the name may
    be a FIFO (opened without O_NONBLOCK, it would block the load), a
    symbolic link (to /dev/zero: read whole, it would fill the memory), a
    large file or anything else that another user or program put beside a
    checkpoint."""
    import json
    import stat
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW |
                 os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _BadSidecar("not a regular file")
        if st.st_size > _SIDECAR_MAX_BYTES:
            raise _BadSidecar("larger than %d bytes" % _SIDECAR_MAX_BYTES)
        data = os.read(fd, _SIDECAR_MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _SIDECAR_MAX_BYTES:
        raise _BadSidecar("larger than %d bytes" % _SIDECAR_MAX_BYTES)
    try:
        meta = json.loads(data)
    except RecursionError:
        raise _BadSidecar("nested too deeply") from None
    except ValueError as e:
        raise _BadSidecar("not JSON: %s" % e) from None
    if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
        return None
    return meta


def _sidecar_skipped(name, why):
    """Counts a sidecar that could not be read; the first is said once on
    stderr (a load keeps going: it only loses resume detection for it)."""
    _S.sidecars_skipped += 1
    if _S.sidecars_skipped == 1:
        _warn("skipped checkpoint sidecar %s: %s (sidecars must be small "
              "regular JSON files; later ones skipped are counted, not "
              "said)" % (name, why))


def _sidecar_step(path):
    """The step of the checkpoint at PATH from its sidecar, or None.  The
    sidecar must describe the file as it is (size and modification time);
    a file renamed after the save (saved to a temporary name, then
    os.replace) is found among the sidecars of its directory by that
    identity.  A sidecar that cannot be read is skipped and counted
    (_S.sidecars_skipped); nothing here raises but OSError from PATH."""
    ident = list(_identity(path))
    directory = os.path.dirname(path) or "."
    own = path + SIDECAR_SUFFIX
    candidates = [own]
    try:
        with os.scandir(directory) as it:
            for i, entry in enumerate(it):
                if i >= _SIDECAR_SCAN_MAX:
                    break
                if (entry.name.endswith(SIDECAR_SUFFIX) and
                        entry.path != own):
                    candidates.append(entry.path)
    except OSError:
        pass
    for name in candidates:
        try:
            meta = _read_sidecar(name)
        except FileNotFoundError:
            continue
        except Exception as e:  # never break the load over its telemetry
            _sidecar_skipped(name, e)
            continue
        if meta is None:
            continue
        step = meta.get("step")
        if ([meta.get("size"), meta.get("mtime_ns")] == ident
                and isinstance(step, int) and not isinstance(step, bool)
                and step >= 0):
            return step
    return None


def _loaded(f):
    """After a load from F: resumed_from(k) when F is a checkpoint saved at
    step k (a sidecar says so of the file as it is) and no step has begun
    in this process.  Never raises: the load has succeeded."""
    path = _path_of(f)
    if path is None or _native._current_step() is not None:
        return
    try:
        step = _sidecar_step(path)
        if step is not None:
            _native.resumed_from(step)
    except OSError:
        return
    except _native.StepscopeError:
        return  # a load after training began: not a resume
    except Exception as e:
        _warn("resume detection failed after loading %s: %r" % (path, e))


def _wrap_save(save):
    timed = _Outermost(save, "checkpoint", None, None)

    @functools.wraps(save)
    def wrapper(*args, **kwargs):
        out = timed(*args, **kwargs)
        if _native._auto_on():
            _saved(args[1] if len(args) > 1 else kwargs.get("f"))
        return out
    return wrapper


def _wrap_load(load):
    @functools.wraps(load)
    def wrapper(*args, **kwargs):
        out = load(*args, **kwargs)
        if _native._auto_on():
            f = args[0] if args else kwargs.get("f")
            _loaded(f)
        return out
    return wrapper


def _wrap_dcp_load(load):
    @functools.wraps(load)
    def wrapper(*args, **kwargs):
        out = load(*args, **kwargs)
        if _native._auto_on():
            _loaded(kwargs.get("checkpoint_id"))
        return out
    return wrapper


def _patch_checkpoint(torch):
    torch.save = _wrap_save(torch.save)
    torch.load = _wrap_load(torch.load)
    try:
        import torch.distributed.checkpoint as dcp
    except ImportError:
        return
    if hasattr(dcp, "save") and hasattr(dcp, "load"):
        save = dcp.save
        timed = _Outermost(save, "checkpoint", None, None)

        @functools.wraps(save)
        def dcp_save(*args, **kwargs):
            out = timed(*args, **kwargs)
            if _native._auto_on():
                _saved(kwargs.get("checkpoint_id"))
            return out
        dcp.save = dcp_save
        dcp.load = _wrap_dcp_load(dcp.load)


def _after_fork_in_child():
    _native._auto_enable(False)


# Seconds interpreter shutdown may take after the script ended before the
# exit watchdog ends the process (see _install_exit_watchdog);
# STEPSCOPE_EXIT_GRACE_S overrides it.
EXIT_GRACE_S = float(os.environ.get("STEPSCOPE_EXIT_GRACE_S") or 20.0)


def _install_exit_watchdog():
    """torch 1.13 can deadlock while the interpreter tears DDP down at exit
    (ProcessGroupGloo's destructor joins a gloo thread that waits for the
    GIL the destructor holds), leaving a rank that finished training hung
    forever.  The first atexit handler registered runs last: by then the
    script and its own handlers are done, so it flushes the recorder and
    arms a watchdog that ends the process with the script's status if
    shutdown does not finish within EXIT_GRACE_S seconds."""
    status = [0]
    hook, exit_ = sys.excepthook, sys.exit

    def excepthook(*a):
        status[0] = 1
        hook(*a)

    def exit(code=None):
        status[0] = (code if isinstance(code, int) else 0 if code is None
                     else 1)
        exit_(code)

    sys.excepthook, sys.exit = excepthook, exit
    atexit.register(lambda: _native._exit_watchdog(EXIT_GRACE_S, status[0]))


# ---- worker processes a rank starts itself ----

def _patch_spawn(torch):
    """torch.multiprocessing.spawn and start_processes say, once, that the
    processes they start are not recorded: the rank is the process
    `stepscope run` launched (STEPSCOPE_AUTO_PID), and a script that
    spawns its own workers trains in processes nobody recorded."""
    mod = sys.modules.get("torch.multiprocessing.spawn")
    original = getattr(mod, "start_processes", None)
    if original is None:
        return

    @functools.wraps(original)
    def start_processes(fn, args=(), nprocs=1, *rest, **kwargs):
        _warn("this rank starts %s processes of its own with "
              "torch.multiprocessing, which stepscope does not record: it "
              "records the ranks `stepscope run` launches; launch the "
              "workers as the ranks instead (`stepscope run -n %s --auto -- "
              "python3 SCRIPT`, each taking its rank from RANK and "
              "LOCAL_RANK as under torchrun; docs/python.md)"
              % (nprocs, nprocs))
        return original(fn, args, nprocs, *rest, **kwargs)

    mod.start_processes = start_processes
    torch.multiprocessing.start_processes = start_processes


def install():
    """Instruments torch (importing it) in this process; later calls do
    nothing.  Returns True when the patches are in place, False when no
    controller is recording (nothing is patched then).  Each patch that
    fails is reported once on stderr and skipped."""
    if _S.installed:
        return True
    if not _native.enabled():
        return False
    import torch
    _S.torch = torch
    _native._auto_setup(_CALLBACKS, getattr(torch, "cuda", None))
    for patch in (_patch_data, _patch_forward, _patch_backward,
                  _patch_optimizer, _patch_ddp, _patch_collectives,
                  _patch_checkpoint, _patch_spawn):
        try:
            patch(torch)
        except Exception as e:
            _warn("%s failed: %s: %s" % (patch.__name__.lstrip("_"),
                                         type(e).__name__, e))
    mode = _numerics.mode_from_env()
    if mode != _numerics.OFF:
        try:
            _S.numerics = _numerics.Numerics(torch, mode)
        except Exception as e:
            _warn("numerics are off: %s: %s" % (type(e).__name__, e))
    try:
        _fp8_auto.install(torch)  # torchao's Float8Linear, where torch has float8
    except Exception as e:
        _warn("float8 failed: %s: %s" % (type(e).__name__, e))
    if _checksum._env_every() != 0:
        try:
            _S.checksums = _checksum.Checksums(torch)
            _native._auto_checksum_every(_S.checksums.interval())
        except Exception as e:
            _warn("checksums are off: %s: %s" % (type(e).__name__, e))
    os.register_at_fork(after_in_child=_after_fork_in_child)
    _install_exit_watchdog()
    _native._auto_enable(True)
    try:
        import torch.profiler  # noqa: F401
        _native._profile_enable()
    except Exception as e:
        _warn("profiling is not available: %s: %s" % (type(e).__name__, e))
    _S.installed = True
    return True
