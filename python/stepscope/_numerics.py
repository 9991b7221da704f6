"""stepscope._numerics: what the training computes, for auto mode.

`stepscope run --auto --numerics off|light|full` (STEPSCOPE_NUMERICS,
default light) records per step, on top of auto mode's timings:

light  (scalar metrics, docs/numerics.md)
  numerics.loss             mean of the tensors backward() was called on
  numerics.loss_nonfinite   how many of them were NaN or infinite (a NaN
                            metric means "missing" to the controller, so
                            non-finiteness is always sent as a count)
  numerics.grad_norm        L2 norm of this rank's own gradients at the end
                            of the backward pass: before clipping and, under
                            DDP, before the all-reduce writes the averaged
                            gradients back
  numerics.grad_nonfinite   parameter tensors whose local gradient holds a
                            NaN or infinity
  numerics.param_norm       L2 norm of the parameters after the update
  numerics.param_nonfinite  parameter tensors holding a NaN or infinity
  numerics.update_ratio     |update| / |parameters| (every UPDATE_EVERY
                            steps: it needs a copy of the parameters
                            before the optimizer step)
  numerics.errors           exceptions caught in these hooks (never raised
                            into the training)
full   light, and
  numerics.module_amax, numerics.module_nonfinite (vectors, one entry per
      module, labelled by its name): the largest absolute value and the
      non-finite elements of each module's forward outputs
  numerics.param_grad_norm, numerics.param_grad_nonfinite (vectors, one
      entry per parameter): its local gradient's norm and non-finite
      elements
  numerics.origin_dir (1 forward, 2 backward, 3 input, 4 loss),
  numerics.origin_index, numerics.origin_ns: where the first non-finite
      value of the step was born: the first module, in the order their
      forwards completed, whose output was non-finite while its inputs
      were finite (forward; an index into the module vectors); else the
      first module, in the order their calls began, handed a non-finite
      input (input: the data, or the script's own code between modules;
      an index into the module vectors); else, when a loss handed to
      backward() was non-finite while every module's output was finite,
      the loss computed outside the modules (loss; no index); else the
      first parameter, in the order the backward pass produced their
      gradients, whose local gradient was non-finite (backward; an index
      into the parameter vectors); origin_ns is when (the module's call
      began, for input; the loss went to backward(), for loss), in ns
      after the step began on this rank.

Costs: every reduction stays on the device as a tensor; at the step's end
everything is stacked into one tensor and copied to the host with a single
.tolist(), the step's only synchronisation.  light is one fused
torch._foreach_norm over the gradients (queued at the end of backward,
before DDP's own end-of-backward callback copies the averaged gradients
back, by one gradient hook once the first step has shown which gradient
comes first), one over the parameters, and a handful of scalar kernels.  full adds
forward hooks and pre-hooks on every module and a norm and a finiteness
count per gradient.

Nothing here raises into the script: each hook catches what it raises,
counts it in numerics.errors and says so once on stderr.  The hooks do
nothing while auto mode is switched off (in a forked DataLoader worker,
say).
"""
import math
import os
import sys

from . import _native

OFF, LIGHT, FULL = 0, 1, 2
_MODES = {"off": OFF, "light": LIGHT, "full": FULL}
UPDATE_EVERY = 10     # steps between two update-ratio measurements
_MAX_CALLS = 4096     # module forward calls kept per step (full); counted
_MAX_LOSSES = 1024    # backward() calls whose loss is kept per step
_MAX_ROOTS = 8        # models instrumented per process
_MAX_VALUES = getattr(_native, "MAX_VALUES", 1024)  # elements per vector

FORWARD, BACKWARD, INPUT, LOSS = 1, 2, 3, 4  # numerics.origin_dir


def mode_from_env(environ=os.environ):
    """The mode STEPSCOPE_NUMERICS asks for (light when unset); an unknown
    value is reported once and taken as light."""
    word = environ.get("STEPSCOPE_NUMERICS", "light") or "light"
    if word not in _MODES:
        sys.stderr.write("stepscope: numerics: unknown STEPSCOPE_NUMERICS "
                         "'%s' (off, light or full); using light\n" % word)
        return LIGHT
    return _MODES[word]


def _update_every(environ=os.environ):
    try:
        n = int(environ.get("STEPSCOPE_NUMERICS_UPDATE_EVERY", UPDATE_EVERY))
    except ValueError:
        return UPDATE_EVERY
    return max(n, 0)


class Numerics:
    """The numerics of one process.  Auto mode calls on_forward_root (the
    outermost module call), on_backward (the tensor backward() runs on),
    before_optimizer and step_end (the pacing optimizer step's end, before
    the next step begins)."""

    def __init__(self, torch, mode, update_every=None):
        self.torch = torch
        self.mode = mode
        self.update_every = (_update_every() if update_every is None
                             else update_every)
        self.roots = []           # id() of the modules instrumented
        self.last_root = None     # the module of the last outermost call
        self.handles = []         # module hooks (full mode)
        self.grad_handles = {}    # parameter index -> its gradient hook
        self.first_grad = None    # the parameter whose gradient came first
        self.pruned = False       # light: only first_grad's hook is left
        self.prune_ok = True      # False once the graph changed (below)
        self.module_names = []    # labels of the module vectors
        self.param_names = []     # labels of the parameter vectors
        self.params = []          # parameters, in param_names order
        self.param_index = {}     # id(param) -> index
        self.errors = 0
        self.said = set()
        self.steps = 0
        self.t0 = _native.now_ns()  # this step's begin on this rank
        self._clear()
        self.labels_sent = False
        self.values = getattr(_native, "values", None)
        self.values_labels = getattr(_native, "values_labels", None)
        self.engine = torch.autograd.Variable._execution_engine

    def _clear(self):
        self.losses = []
        self.grad = None          # (indices, per-param norms[, counts])
        self.queued = False
        self.backwards = 0        # backward() calls auto mode saw
        self.backwards_ended = 0  # _backward_done calls
        self.fired = []           # (param index, t) in backward order
        self.fired_seen = set()
        self.calls = []           # (module, out amax, out nf, in amax, t,
                                  #  t of the call's begin)
        self.pending_in = {}      # module index -> (input amax, t), pre-hook
        self.loss_ts = []         # full: when each kept loss went to backward()
        self.calls_dropped = 0
        self.snapshot = None

    def _failed(self, where, e):
        self.errors += 1
        msg = "%s: %s: %s" % (where, type(e).__name__, e)
        if msg not in self.said and len(self.said) < 8:
            self.said.add(msg)
            sys.stderr.write("stepscope: numerics: %s (counted in "
                             "numerics.errors; training goes on)\n" % msg)

    # ---- instrumenting a model ----

    def on_forward_root(self, module):
        """At an outermost module call: the first time MODULE (or the
        model a DDP wraps) is seen, hooks go on its parameters and, in full
        mode, on each of its modules."""
        if module is self.last_root:
            return  # the usual case: the same model every step
        self.last_root = module
        try:
            ddp = getattr(module, "module", None)
            root = ddp if (ddp is not None and hasattr(module, "reducer")) \
                else module
            if id(root) in self.roots or len(self.roots) >= _MAX_ROOTS:
                return
            self.roots.append(id(root))
            self._instrument(root)
        except Exception as e:
            self._failed("instrumenting the model", e)

    def _instrument(self, root):
        prefix = "" if not self.module_names else "%d." % len(self.roots)
        for name, p in root.named_parameters():
            if not p.requires_grad or id(p) in self.param_index:
                continue
            i = len(self.params)
            self.param_index[id(p)] = i
            self.params.append(p)
            self.param_names.append(prefix + name)
            self.grad_handles[i] = p.register_hook(self._grad_hook(i))
        self.pruned = False
        if self.mode < FULL:
            return
        for name, m in root.named_modules():
            i = len(self.module_names)
            self.module_names.append(prefix + name if name
                                     else prefix + "(%s)" % type(m).__name__)
            self.handles.append(m.register_forward_pre_hook(self._pre_hook(i)))
            self.handles.append(m.register_forward_hook(self._post_hook(i)))
        self.labels_sent = False

    # ---- hooks ----

    def _grad_hook(self, index):
        full = self.mode >= FULL

        def hook(_grad):
            if not _native._auto_on():
                return
            try:
                if not self.queued:
                    # Runs when this backward pass ends, before DDP's own
                    # end-of-backward callback (queued at its later
                    # gradient hooks) writes the averaged gradients back.
                    self.engine.queue_callback(self._backward_done)
                    self.queued = True
                    if self.first_grad is None:
                        self.first_grad = index
                if full and index not in self.fired_seen:
                    self.fired_seen.add(index)
                    self.fired.append((index, _native.now_ns()))
            except Exception as e:
                self._failed("gradient hook", e)
        return hook

    def _prune_grad_hooks(self):
        """Light mode needs one gradient hook per backward pass, only to
        queue _backward_done: after the first step, the hook of the
        parameter whose gradient came first stays and the others go (a
        Python hook costs microseconds per parameter and step)."""
        if (self.pruned or not self.prune_ok or self.mode >= FULL
                or self.first_grad is None):
            return
        for i, h in list(self.grad_handles.items()):
            if i != self.first_grad:
                h.remove()
                del self.grad_handles[i]
        self.pruned = True

    def _rearm_grad_hooks(self):
        """A backward pass of the step went without the kept hook firing
        (its parameter got no gradient: the graph changes from step to
        step, or a second model has a backward of its own), so that pass
        went unmeasured: every parameter gets its hook back, for good."""
        for i, p in enumerate(self.params):
            if i not in self.grad_handles:
                self.grad_handles[i] = p.register_hook(self._grad_hook(i))
        self.pruned = False
        self.prune_ok = False

    def _backward_done(self):
        try:
            self.queued = False
            self.backwards_ended += 1
            torch = self.torch
            idx, grads = [], []
            for i, p in enumerate(self.params):
                g = p.grad
                if g is not None and not g.is_sparse:
                    idx.append(i)
                    grads.append(g)
            if not idx:
                return
            with torch.no_grad():
                norms = torch.stack(torch._foreach_norm(grads))
                counts = None
                if self.mode >= FULL:
                    counts = torch.stack([
                        (g.numel() - torch.isfinite(g).sum())
                        .to(grads[0].device) for g in grads])
            self.grad = (idx, norms, counts)
        except Exception as e:
            self._failed("end of backward", e)

    def _pre_hook(self, index):
        def pre(_module, inputs):
            if not _native._auto_on():
                return
            try:
                amax = self._amax(inputs)
                if amax is not None:
                    self.pending_in[index] = (amax, _native.now_ns())
            except Exception as e:
                self._failed("forward pre-hook", e)
        return pre

    def _post_hook(self, index):
        torch = self.torch

        def post(_module, _inputs, output):
            if not _native._auto_on():
                return
            try:
                in_amax, in_t = self.pending_in.pop(index, (None, None))
                if len(self.calls) >= _MAX_CALLS:
                    self.calls_dropped += 1
                    return
                outs = [t for t in _tensors(output) if t.is_floating_point()]
                if not outs:
                    return
                amax = torch.stack([t.detach().abs().amax().float()
                                    .to(outs[0].device) for t in outs]).amax()
                nf = torch.stack([(t.numel() - torch.isfinite(t.detach())
                                   .sum()).to(outs[0].device)
                                  for t in outs]).sum()
                self.calls.append((index, amax, nf, in_amax,
                                   _native.now_ns(), in_t))
            except Exception as e:
                self._failed("forward hook", e)
        return post

    def _amax(self, obj):
        """The largest absolute value over the floating-point tensors in
        OBJ (a 0-d tensor: NaN or infinite when any element is), or
        None."""
        ts = [t for t in _tensors(obj) if t.is_floating_point()]
        if not ts:
            return None
        dev = ts[0].device
        return self.torch.stack([t.detach().abs().amax().float().to(dev)
                                 for t in ts]).amax()

    # ---- called by auto mode ----

    def on_backward(self, tensors):
        """Before backward() on TENSORS (a tensor or a sequence): the loss
        of this step."""
        self.backwards += 1
        try:
            if (type(tensors) is self.torch.Tensor and tensors.dim() == 0
                    and tensors.is_floating_point()):
                # the usual case: one scalar loss (cast at the step's end)
                if len(self.losses) < _MAX_LOSSES:
                    self.losses.append(tensors.detach())
            else:
                for t in _tensors(tensors):
                    if (t.is_floating_point()
                            and len(self.losses) < _MAX_LOSSES):
                        self.losses.append(t.detach().reshape(-1)[:1]
                                           .float().reshape(()))
            if self.mode >= FULL:
                now = _native.now_ns()
                self.loss_ts += [now] * (len(self.losses) - len(self.loss_ts))
        except Exception as e:
            self._failed("loss", e)

    def before_optimizer(self):
        """Before the pacing optimizer steps: every update_every steps, a
        copy of the parameters for the update ratio."""
        try:
            if (self.update_every and self.params and self.snapshot is None
                    and self.steps % self.update_every == 0):
                self.snapshot = [p.detach().clone() for p in self.params]
        except Exception as e:
            self.snapshot = None
            self._failed("parameter copy", e)

    def step_end(self):
        """At the end of the pacing optimizer step: everything reduced on
        the device is copied to the host at once and recorded into the
        ending step."""
        try:
            self._record()
        except Exception as e:
            self._failed("step end", e)
        try:
            if self.pruned and self.backwards_ended < self.backwards:
                self._rearm_grad_hooks()
            else:
                self._prune_grad_hooks()
        except Exception as e:
            self._failed("gradient hooks", e)
        try:
            _native.metric("numerics.errors", self.errors)
        except Exception:
            pass
        self.steps += 1
        self._clear()

    def step_begun(self):
        """The next step began now (for origin times)."""
        self.t0 = _native.now_ns()

    # ---- the step's end ----

    def _record(self):
        """Stacks the step's device results (per-loss values, per-tensor
        norms, per-call statistics) into one tensor, copies it to the host
        with one .tolist() and does the arithmetic there: a few kernels
        per step, whatever the number of parameters."""
        torch = self.torch
        parts, layout = [], {}
        offset = [0]

        def put(name, t):
            layout[name] = (offset[0], t.numel())
            offset[0] += t.numel()
            parts.append(t.reshape(-1))

        if self.losses:
            losses = self.losses
            put("loss", losses[0] if len(losses) == 1 else torch.stack(
                [x.float() for x in losses]))
        if self.grad is not None:
            idx, norms, counts = self.grad
            put("grad", norms)
            if counts is not None:
                put("grad_counts", counts)
        if self.params:
            ps = self.params
            with torch.no_grad():
                put("param", torch.stack(torch._foreach_norm(ps)))
                if self.snapshot is not None:
                    put("update", torch.stack(torch._foreach_norm(
                        torch._foreach_sub(ps, self.snapshot))))
        calls = self.calls
        if calls:
            zero = calls[0][1].new_zeros(())
            put("call_amax", torch.stack([c[1] for c in calls]))
            put("call_nf", torch.stack([c[2].to(zero.dtype) for c in calls]))
            # a call without floating-point inputs has finite inputs
            put("call_in", torch.stack([zero if c[3] is None else c[3]
                                        for c in calls]))
        if parts:
            dev, dt = parts[0].device, parts[0].dtype
            if all(p.device == dev and p.dtype == dt for p in parts) and \
                    dt in (torch.float32, torch.float64):
                values = torch.cat(parts).tolist()  # the one copy
            else:
                values = torch.cat([p.to(device=dev, dtype=torch.float64)
                                    for p in parts]).tolist()
        else:
            values = []

        def get(name):
            at = layout.get(name)
            return None if at is None else values[at[0]:at[0] + at[1]]

        metric = _native.metric
        loss = get("loss")
        if loss is not None:
            finite = [x for x in loss if _finite(x)]
            metric("numerics.loss_nonfinite", len(loss) - len(finite))
            if finite:
                metric("numerics.loss", sum(finite) / len(finite))
        grad = get("grad")
        if grad is not None:
            bad = _nonfinite(grad)
            metric("numerics.grad_nonfinite", bad)
            if not bad:
                metric("numerics.grad_norm", _norm(grad))
        param = get("param")
        if param is not None:
            bad = _nonfinite(param)
            metric("numerics.param_nonfinite", bad)
            update = get("update")
            if not bad:
                pn = _norm(param)
                metric("numerics.param_norm", pn)
                un = _norm(update) if update is not None else float("nan")
                if pn > 0 and _finite(un):
                    metric("numerics.update_ratio", un / pn)
        if self.mode >= FULL:
            self._record_full(get)

    def _record_full(self, get):
        metric = _native.metric
        amax = get("call_amax") or []
        nf = get("call_nf") or []
        inp = get("call_in") or []
        calls = self.calls
        origin = None
        for k, c in enumerate(calls):
            if nf[k] > 0 and _finite(inp[k]):
                origin = (FORWARD, c[0], c[4])
                break
        if origin is None:
            # no module made it: the first module handed it (a parent's
            # call begins before its children's)
            for k, c in enumerate(calls):
                if not _finite(inp[k]) and (origin is None
                                            or c[5] < origin[2]):
                    origin = (INPUT, c[0], c[5])
        loss = get("loss") or []
        bad_loss = [k for k, x in enumerate(loss) if not _finite(x)]
        if origin is None and bad_loss and bad_loss[0] < len(self.loss_ts):
            # every module's output was finite, the loss was not: it was
            # made outside the modules, from their output
            origin = (LOSS, None, self.loss_ts[bad_loss[0]])
        n_mod = len(self.module_names)
        mod_amax = [0.0] * n_mod
        mod_nf = [0.0] * n_mod
        for k, c in enumerate(calls):
            i, a = c[0], amax[k]
            # the largest over the step's calls; a NaN or infinity stays
            if _finite(mod_amax[i]) and (not _finite(a) or a > mod_amax[i]):
                mod_amax[i] = a
            mod_nf[i] += nf[k]
        grad = self.grad
        pg_norm = get("grad")
        pg_nf = get("grad_counts")
        n_par = len(self.param_names)
        par_norm = [float("nan")] * n_par
        par_nf = [0.0] * n_par
        if grad is not None and pg_norm is not None:
            for j, i in enumerate(grad[0]):
                par_norm[i] = pg_norm[j]
                par_nf[i] = pg_nf[j]
            if origin is None:
                for i, t in self.fired:
                    if par_nf[i] > 0 or not _finite(par_norm[i]):
                        origin = (BACKWARD, i, t)
                        break
        if origin is not None:
            metric("numerics.origin_dir", origin[0])
            if origin[1] is not None:
                metric("numerics.origin_index", origin[1])
            metric("numerics.origin_ns", max(0, origin[2] - self.t0))
        if self.calls_dropped:
            metric("numerics.calls_dropped", self.calls_dropped)
        if self.values is None:
            return
        labels = None if self.labels_sent else True
        self._values("numerics.module_amax", mod_amax,
                     self.module_names if labels else None)
        self._values("numerics.module_nonfinite", mod_nf,
                     self.module_names if labels else None)
        self._values("numerics.param_grad_norm", par_norm,
                     self.param_names if labels else None)
        self._values("numerics.param_grad_nonfinite", par_nf,
                     self.param_names if labels else None)
        self.labels_sent = True

    def _values(self, name, v, labels):
        """One vector of the step (host data: no device copy); LABELS
        when they are new.  The channel keeps _MAX_VALUES of them."""
        if not v:
            return
        v = v[:_MAX_VALUES]
        if labels is not None and self.values_labels is not None:
            self.values_labels(name, [_label(x) for x in labels[:_MAX_VALUES]])
        self.values(name, v)


def _label(name):
    """NAME as a vector label: at most 255 bytes of UTF-8, no control
    characters (ss_values_labels)."""
    clean = "".join(c if c.isprintable() else "?" for c in name) or "?"
    raw = clean.encode("utf-8")
    if len(raw) > 255:
        clean = raw[:255].decode("utf-8", "ignore")
    return clean


def _norm(xs):
    """The L2 norm of the norms XS (host floats), in one C call."""
    return math.hypot(*xs)


# Whether a host float is neither NaN nor infinite.
_finite = math.isfinite


def _nonfinite(xs):
    """How many of the host floats XS are NaN or infinite."""
    return len(xs) - sum(map(math.isfinite, xs))


def _tensors(obj, depth=0):
    """The tensors in OBJ: a tensor, or tensors in (nested) tuples, lists
    and dict values, up to a few levels."""
    import torch
    if isinstance(obj, torch.Tensor):
        return [obj]
    out = []
    if depth < 3:
        if isinstance(obj, (tuple, list)):
            for x in obj:
                out += _tensors(x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                out += _tensors(x, depth + 1)
    return out
