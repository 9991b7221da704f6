"""stepscope._fp8_auto: float8 health of torchao's Float8Linear in auto mode.

`stepscope run --auto` calls install(torch).  Where torch has float8
dtypes (torch.float8_e4m3fn), it waits for torchao's float8 training
module (torchao.float8.float8_linear) to be imported, by the script or
before; from then on a global forward pre-hook finds the Float8Linear
modules, and for each, per step, records stepscope.fp8_stats of its input
and weight (forward) and of the gradient of its output (backward), under
"<module path>.input", ".weight" and ".grad", with the scale torchao uses:

  dynamic  torchao computes it inside its cast and keeps it nowhere, so it
           is computed again the same way: the format's largest value over
           max(amax, 1e-12) in float64, rounded to float32, rounded down to
           a power of two when config.round_scales_to_power_of_2; the amax
           clamp means torchao's scale is never infinite (an all-zero
           tensor gets a huge finite one)
  delayed, static (older torchao): the module's buffers fp8_scale_<tensor>
           and fp8_static_scale_<tensor>
  disabled, or rowwise (axiswise) scaling: not recorded (the statistics are
           those of one tensorwise scale)

The formats come from each CastConfig's target_dtype (e4m3 for input and
weight, e5m2 for the gradient when a config has none); e4m3fnuz and
e5m2fnuz are known too.  Module paths lose the wrappers' parts ("module."
of DDP, "_fsdp_wrapped_module.", "_orig_mod.", "_checkpoint_wrapped_module.").

This path is guarded and has not run here: this machine's torch (1.13)
has no float8 dtype and torchao is not installed, so install() returns
False before doing anything.  The attribute names are those of torchao's
float8 training code (Float8Linear.config.cast_config_input /
cast_config_weight / cast_config_grad_output with scaling_type,
scaling_granularity and target_dtype).  Nothing here raises into the
script: a module that cannot be read is skipped, once reported.
"""
import importlib.abc
import importlib.machinery
import sys
import weakref

from . import _native

_MODULE = "torchao.float8.float8_linear"
_WRAPPERS = ("module", "_fsdp_wrapped_module", "_orig_mod",
             "_checkpoint_wrapped_module")
_EPS = 1e-12  # torchao's clamp of amax before the scale


class _S:
    torch = None
    hooked = False
    warned = set()
    names = weakref.WeakKeyDictionary()    # Float8Linear -> its path
    covered = weakref.WeakSet()            # modules already scanned
    post = weakref.WeakSet()               # Float8Linear with _output


def _warn(msg):
    if msg not in _S.warned:
        _S.warned.add(msg)
        sys.stderr.write("stepscope: auto mode: float8: %s\n" % msg)


def install(torch):
    """Arranges the float8 hooks; True when torch has float8 dtypes."""
    if not hasattr(torch, "float8_e4m3fn"):
        return False
    _S.torch = torch
    if _MODULE in sys.modules:
        _hook(sys.modules[_MODULE])
    else:
        sys.meta_path.insert(0, _Watch())
    return True


class _Watch(importlib.abc.MetaPathFinder):
    """Hooks the Float8Linear class once torchao's module is executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_hook(module):
            exec_module(module)
            _hook(module)
        spec.loader.exec_module = exec_and_hook
        return spec


def _hook(module):
    cls = getattr(module, "Float8Linear", None)
    if cls is None or _S.hooked:
        return
    _S.hooked = True
    nn = _S.torch.nn.modules.module

    def pre(mod, args):
        if isinstance(mod, cls):
            try:
                _forward(mod, args)
            except Exception as e:  # never into the script
                _warn("%s: %s" % (type(e).__name__, e))
        elif mod not in _S.covered:
            _scan(mod, cls)

    nn.register_module_forward_pre_hook(pre)


def _scan(root, cls):
    """Names ROOT's Float8Linear modules by their paths under it."""
    for name, m in root.named_modules():
        _S.covered.add(m)
        if isinstance(m, cls) and m not in _S.names:
            parts = [p for p in name.split(".") if p not in _WRAPPERS]
            _S.names[m] = ".".join(parts) or type(m).__name__


_FORMATS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
            "float8_e4m3fnuz": "e4m3fnuz", "float8_e5m2fnuz": "e5m2fnuz"}


def _cast(mod, tensor):
    """(fmt, scale source) for TENSOR ("input", "weight", "grad_output") of
    MOD, or None when it is not cast with one tensorwise scale."""
    cfg = getattr(getattr(mod, "config", None), "cast_config_" + tensor, None)
    if cfg is None:
        return None
    kind = getattr(getattr(cfg, "scaling_type", None), "name", "")
    gran = getattr(getattr(cfg, "scaling_granularity", None), "name",
                   "TENSORWISE")
    if gran != "TENSORWISE" or kind not in ("DYNAMIC", "DELAYED", "STATIC"):
        return None
    dtype = getattr(cfg, "target_dtype", None)
    fmt = _FORMATS.get(str(dtype).replace("torch.", ""),
                       "e5m2" if tensor == "grad_output" else "e4m3")
    return fmt, kind


def _scale(mod, x, tensor, fmt, kind):
    torch = _S.torch
    if kind == "DELAYED":
        return getattr(mod, "fp8_scale_" + tensor)
    if kind == "STATIC":
        return getattr(mod, "fp8_static_scale_" + tensor)
    dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
             "e4m3fnuz": getattr(torch, "float8_e4m3fnuz", None),
             "e5m2fnuz": getattr(torch, "float8_e5m2fnuz", None)}[fmt]
    amax = x.detach().abs().max().to(torch.float64)
    s = (torch.finfo(dtype).max / torch.clamp(amax, min=_EPS)).to(torch.float32)
    if getattr(mod.config, "round_scales_to_power_of_2", False):
        s = torch.exp2(torch.floor(torch.log2(s)))
    return s


def _record(mod, x, tensor, label_tail):
    cast = _cast(mod, tensor)
    if cast is None or not x.is_floating_point():
        return
    fmt, kind = cast
    name = _S.names.get(mod) or type(mod).__name__
    from . import fp8_stats
    fp8_stats(name + label_tail, x, _scale(mod, x, tensor, fmt, kind), fmt)


def _forward(mod, args):
    if mod not in _S.post:
        # the gradient of the output, through a hook on the output tensor
        # (from the module's next call on)
        _S.post.add(mod)
        mod.register_forward_hook(_output)
    if not _native._auto_on() or _native._current_step() is None or not args:
        return
    _record(mod, args[0], "input", ".input")
    _record(mod, mod.weight, "weight", ".weight")


def _output(mod, args, out):
    if isinstance(out, _S.torch.Tensor) and out.requires_grad and \
            _native._auto_on():
        out.register_hook(lambda g: _grad(mod, g))


def _grad(mod, g):
    try:
        _record(mod, g, "grad_output", ".grad")
    except Exception as e:
        _warn("%s: %s" % (type(e).__name__, e))
