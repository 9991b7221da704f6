"""stepscope._workloads: the load of parallel workloads, per step and rank.

A mixture-of-experts layer is as fast as the rank hosting its most loaded
experts; a table of embeddings sharded by rows is as fast as its hottest
shard.  These functions record that load through the vector channel
(stepscope.values), under names the controller's detectors know
(src/controller/analysis/detect_moe.c, detect_embedding.c;
docs/workloads.md):

  moe.load.LAYER       per step: the tokens this rank's router sent to each
                       global expert of LAYER (index: the expert)
  moe.placement.LAYER  the rank hosting each expert of LAYER (index: the
                       expert); sent with the layer's next expert_load
                       made inside a step, and again when it changes
  emb.load.TABLE       per step: the lookups this rank made in each shard
                       of TABLE (index: the shard; shard i lives on rank i)

LAYER and TABLE are an int or a str; with the prefix the name must fit
stepscope's 63 bytes, so a layer's name is at most 49 bytes and a table's
54.  Each layer takes two of a process's 255 names, each table one.

expert_load and shard_load take a sequence of numbers, an object with a
buffer of doubles (array('d'), recorded at once) or a 1-D tensor of any
numeric dtype, read when the step ends: a device tensor with the step's
other device vectors (stepscope.values), a host tensor here (host_loads, flush)
with the step's other host loads, concatenated and converted to float64
once, so that a call costs a list append.  A tensor must not be changed in
place before its step ends.
"""
import threading

LOAD = "moe.load."
PLACEMENT = "moe.placement."
SHARD = "emb.load."
_MAX_NAME = 63

# name caches: layer or table -> vector name (a dict lookup per call)
_load_names = {}
_shard_names = {}
# placements not yet sent: layer -> list of float ranks; guarded by _lock
# (expert_placement may come from another thread than the training loop)
_lock = threading.Lock()
_pending = {}
# host tensors of the open step: (vector name, tensor); the training
# thread appends (stepscope.expert_load, shard_load), the step's end takes
# them (flush), both under the GIL; the list object is never replaced
host_loads = []


def _name(prefix, key, what, cache):
    """The vector name of KEY (a layer or a table) under PREFIX, cached."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError("stepscope: %s must be an int or a str, not %s"
                        % (what, type(key).__name__))
    name = prefix + str(key)
    if len(name.encode()) > _MAX_NAME or not str(key):
        raise ValueError("stepscope: %s %r must be 1..%d bytes"
                         % (what, key, _MAX_NAME - len(prefix)))
    cache[key] = name
    return name


def load_name(layer):
    """The vector name of LAYER's expert load (TypeError/ValueError for a
    bad layer: its placement's name must fit too)."""
    name = _load_names.get(layer)
    if name is None:
        _name(PLACEMENT, layer, "layer", {})
        name = _name(LOAD, layer, "layer", _load_names)
    return name


def shard_name(table):
    """The vector name of TABLE's shard load."""
    return _shard_names.get(table) or _name(SHARD, table, "table",
                                            _shard_names)


def placement_vector(expert_to_rank):
    """EXPERT_TO_RANK (a mapping expert -> rank, or a sequence whose i-th
    item is expert i's rank) as a list of floats indexed by expert; -1
    where a mapping leaves an expert out.  ValueError for a negative or
    non-integral expert or rank, or more than 1024 experts."""
    if hasattr(expert_to_rank, "items"):
        items = list(expert_to_rank.items())
    else:
        if hasattr(expert_to_rank, "tolist"):  # a tensor or an array
            expert_to_rank = expert_to_rank.tolist()
        items = list(enumerate(expert_to_rank))
    if not items:
        raise ValueError("expert_placement: no experts given")
    n = 0
    for e, r in items:
        for what, x in (("expert", e), ("rank", r)):
            if isinstance(x, bool) or int(x) != x or x < 0:
                raise ValueError("expert_placement: %s %r is not an integer "
                                 ">= 0" % (what, x))
        n = max(n, int(e) + 1)
    if n > 1024:
        raise ValueError("expert_placement: at most 1024 experts, not %d"
                         % n)
    out = [-1.0] * n
    for e, r in items:
        out[int(e)] = float(r)
    return out


def set_placement(layer, expert_to_rank):
    """Keeps LAYER's placement until the layer's next expert_load in a
    step sends it."""
    load_name(layer)
    vec = placement_vector(expert_to_rank)
    with _lock:
        _pending[layer] = vec


def take_placement(layer):
    """LAYER's placement not yet sent, or None; forgets it."""
    with _lock:
        return _pending.pop(layer, None)


def has_pending():
    """Whether some placement waits to be sent (a dict's truth: cheap)."""
    return bool(_pending)


def flush(record_ptr):
    """Records the open step's host loads: the tensors of one dtype are
    concatenated and converted to float64 once, and RECORD_PTR(name,
    address, n, owner) hands each slice to the recorder (called by the
    native layer before the step ends, through stepscope's flush)."""
    if not host_loads:
        return
    pending = host_loads[:]
    host_loads.clear()
    import torch
    by_dtype = {}
    for name, t in pending:
        by_dtype.setdefault(t.dtype, []).append((name, t))
    for items in by_dtype.values():
        flat = torch.cat([t for _, t in items]).to(torch.float64)
        base, at = flat.data_ptr(), 0
        for name, t in items:
            n = t.numel()
            record_ptr(name, base + 8 * at, n, flat)
            at += n
