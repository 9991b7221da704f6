"""stepscope._checksum: checksums of the parameters, for replica consistency.

In data-parallel training every replica holds bit-identical parameters
after each optimizer step.  This module hashes every parameter (and with
`--checksum optimizer` every tensor of the optimizer's state) after the
optimizer step and records the hashes through the vector channel, so that
the controller compares the replicas of a group step by step
(detect_replica.c, docs/consistency.md) and `stepscope diff` compares two
runs.

What a rank records in a checksum step (docs/consistency.md):

  checksum.hi, checksum.lo   vectors, one entry per parameter in module
                             order (named_parameters()), labelled by the
                             parameter's name: the high and the low 32 bits
                             of its 64-bit hash.  A double holds a 32-bit
                             integer exactly; it does not hold 64 bits.
  checksum.opt.hi, .lo       the same over the optimizer's state tensors
                             (`--checksum optimizer`), labelled
                             "PARAM:KEY" ("fc1.weight:exp_avg")
  checksum.group             metric: the smallest rank of this rank's
                             replica group (ranks with the same value are
                             replicas of each other; a rank alone in its
                             group is compared with nobody)
  checksum.ms                metric: the time the checksums took
  checksum.bytes             metric: the bytes hashed

A model with more parameters than one vector holds (SS_MAX_VALUES) is
hashed per parameter and recorded in buckets of consecutive parameters:
a bucket's hash is the XXH3 of its parameters' hashes, its label
"FIRST..LAST".

The hash: on the CPU, XXH3-64 (libxxhash) over the tensor's memory, read
in place through its data pointer, in C with the GIL released
(_native._hash_ptrs); on a device, a reduction on the device over the
tensor's bytes viewed as 16-bit integers (a plain and a position-weighted
sum, both exact in int64), every tensor's pair stacked and copied to the
host once per checksum step, then folded into 64 bits with XXH3.  A
change of any one bit changes the plain sum, so a one-bit corruption is
always seen; the weighted sum sees most reorderings.

When: every `--checksum-every N` steps (STEPSCOPE_CHECKSUM_EVERY: a step
whose number is a multiple of N), 0 off, "auto" (the default) the
smallest power of two that keeps the measured cost under TARGET_FRAC of
the measured step time, re-decided after every checksum.  Ranks may pick
different powers: the multiples of the largest are common to all, and the
controller compares the ranks that hashed a step.

Nothing here raises into the training: a failure is counted in
checksum.errors and said once on stderr.
"""
import os
import struct
import sys

from . import _native

MAX_VALUES = getattr(_native, "MAX_VALUES", 1024)
TARGET_FRAC = 0.01   # the auto interval keeps the cost under 1 % of a step
MAX_EVERY = 1024     # the auto interval never exceeds this many steps
PAUSE_CAP = 4        # a step counts as at most this many mean steps
AUTO = -1

_group = None        # replica_group() of this process: a sorted tuple


def _env_every(environ=os.environ):
    """The interval STEPSCOPE_CHECKSUM_EVERY asks for: N >= 0, or AUTO
    (unset, empty or "auto").  A bad value is reported and taken as AUTO."""
    word = (environ.get("STEPSCOPE_CHECKSUM_EVERY") or "auto").strip()
    if word == "auto":
        return AUTO
    try:
        n = int(word)
        if n >= 0:
            return n
    except ValueError:
        pass
    sys.stderr.write("stepscope: checksum: STEPSCOPE_CHECKSUM_EVERY wants "
                     "auto or a count >= 0, not '%s'; using auto\n" % word)
    return AUTO


def parse_groups(text):
    """"0,1;2,3" (or "0-3;4-7") -> [[0, 1], [2, 3]].  Raises ValueError
    on a bad list or a rank in two groups."""
    groups, seen = [], set()
    for part in text.replace(" ", "").split(";"):
        if not part:
            continue
        ranks = []
        for item in part.split(","):
            lo, _, hi = item.partition("-")
            a, b = int(lo), int(hi or lo)
            if a < 0 or b < a:
                raise ValueError("bad rank range '%s'" % item)
            ranks.extend(range(a, b + 1))
        for r in ranks:
            if r in seen:
                raise ValueError("rank %d is in two replica groups" % r)
            seen.add(r)
        groups.append(sorted(ranks))
    if not groups:
        raise ValueError("no replica group in '%s'" % text)
    return groups


def replica_group(ranks):
    """Declares the ranks that hold the same parameters as this one (this
    rank among them): stepscope compares this rank's checksums with theirs
    only.  For FSDP, tensor or pipeline parallel jobs; DDP's group needs no
    declaration.  Call it on every rank before the first step."""
    global _group
    rs = sorted({int(r) for r in ranks})
    if not rs or rs[0] < 0:
        raise ValueError("replica_group wants ranks >= 0, got %r" % (ranks,))
    _group = tuple(rs)


def _rank():
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def group_key(ddp_ranks=None, environ=os.environ):
    """The smallest rank of this rank's replica group: replica_group() if
    called, else STEPSCOPE_REPLICA_GROUPS ("0,1;2,3"), else DDP_RANKS (the
    ranks of the DDP's process group), else every rank (0)."""
    me = _rank()
    if _group is not None:
        return _group[0]
    text = environ.get("STEPSCOPE_REPLICA_GROUPS")
    if text:
        try:
            for g in parse_groups(text):
                if me in g:
                    return g[0]
            return me  # in no declared group: compared with nobody
        except ValueError as e:
            sys.stderr.write("stepscope: checksum: STEPSCOPE_REPLICA_GROUPS: "
                             "%s; every rank is one group\n" % e)
    if ddp_ranks:
        return min(ddp_ranks)
    return 0


def _device_pairs(torch, tensors):
    """Per tensor, (plain sum, position-weighted sum) of its bytes read as
    unsigned 16-bit integers, computed where the tensors lie; every pair is
    copied to the host in one transfer.  Both sums are exact in int64 below
    2**39 elements per tensor.  Works on any device (also the CPU, which is
    how it is tested without one)."""
    sums = []
    for t in tensors:
        b = t.detach().contiguous().reshape(-1).view(torch.uint8)
        if b.numel() % 2:
            b = torch.cat([b, b.new_zeros(1)])
        w = b.view(torch.int16).to(torch.int32) & 0xFFFF
        pos = torch.arange(w.numel(), device=w.device, dtype=torch.int32)
        weight = pos % 251 + 1
        sums.append(torch.stack([w.sum(dtype=torch.int64),
                                 (w * weight).sum(dtype=torch.int64)]))
    if not sums:
        return []
    return torch.stack(sums).cpu().tolist()


def hash_tensors(torch, tensors, device_path=False):
    """The 64-bit hashes of TENSORS (a list), in order: XXH3 of a CPU
    tensor's memory in place, the device reduction (_device_pairs) for the
    others (and for every tensor with DEVICE_PATH, for tests).  Returns
    (hashes, bytes hashed)."""
    out = [0] * len(tensors)
    cpu_idx, addrs, sizes, keep, dev_idx = [], [], [], [], []
    total = 0
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        total += nbytes
        if t.device.type != "cpu" or device_path:
            dev_idx.append(i)
            continue
        if not t.is_contiguous():
            t = t.contiguous()  # rare: parameters are contiguous
        keep.append(t)
        cpu_idx.append(i)
        addrs.append(t.data_ptr())
        sizes.append(nbytes)
    if cpu_idx:
        for i, h in zip(cpu_idx, _native._hash_ptrs(addrs, sizes)):
            out[i] = h
    if dev_idx:
        pairs = _device_pairs(torch, [tensors[i] for i in dev_idx])
        for i, (s1, s2) in zip(dev_idx, pairs):
            out[i] = _native.hash_buffer(struct.pack("<qq", s1, s2))
    return out, total


def _buckets(names, hashes):
    """At most MAX_VALUES (labels, hashes): one per entry, or consecutive
    entries folded into buckets."""
    n = len(hashes)
    if n <= MAX_VALUES:
        return list(names), list(hashes)
    per = -(-n // MAX_VALUES)
    labels, folded = [], []
    for a in range(0, n, per):
        b = min(a + per, n)
        labels.append("%s..%s" % (names[a], names[b - 1]))
        folded.append(_native.hash_buffer(
            struct.pack("<%dQ" % (b - a), *hashes[a:b])))
    return labels, folded


def record(prefix, names, hashes, values, values_labels, sent):
    """Records HASHES under PREFIX.hi / PREFIX.lo with NAMES as labels
    (sent when new: SENT maps a vector name to the labels last sent)."""
    labels, hs = _buckets(names, hashes)
    hi = [float(h >> 32) for h in hs]
    lo = [float(h & 0xFFFFFFFF) for h in hs]
    for half, vec in ((".hi", hi), (".lo", lo)):
        name = prefix + half
        if labels and sent.get(name) != labels:
            values_labels(name, labels)
            sent[name] = labels
        if vec:
            values(name, vec)


class Checksums:
    """The checksums of one process.  Auto mode registers each DDP model
    (add_ddp) and calls after_optimizer_step(optimizer) when the pacing
    optimizer's step returns, still inside the step it ends."""

    def __init__(self, torch, every=None, optimizer_state=None):
        self.torch = torch
        self.every = _env_every() if every is None else every
        self.auto_every = 1          # the interval AUTO picked so far
        self.optimizer_state = (
            os.environ.get("STEPSCOPE_CHECKSUM", "") == "optimizer"
            if optimizer_state is None else optimizer_state)
        self.models = []             # (module, ddp ranks or None)
        self.sent = {}
        self.errors = 0
        self.said = set()
        self.last_end_ns = None      # the previous step's end, this rank
        self.step_ns = None          # running mean of the step time
        self.cost_ns = None          # running mean of a checksum's cost
        self.device_path = bool(os.environ.get("STEPSCOPE_CHECKSUM_DEVICE"))

    def _failed(self, where, e):
        self.errors += 1
        msg = "%s: %s: %s" % (where, type(e).__name__, e)
        if msg not in self.said and len(self.said) < 8:
            self.said.add(msg)
            sys.stderr.write("stepscope: checksum: %s (counted in "
                             "checksum.errors; training goes on)\n" % msg)
        _native.metric("checksum.errors", float(self.errors))

    def add_ddp(self, ddp):
        """Registers the model DDP wraps; its process group's ranks are
        the replica group unless one was declared."""
        try:
            ranks = None
            pg = getattr(ddp, "process_group", None)
            dist = self.torch.distributed
            if pg is not None:
                getter = getattr(dist, "get_process_group_ranks", None)
                if getter is not None:
                    ranks = list(getter(pg))
                else:
                    table = getattr(dist.distributed_c10d, "_pg_group_ranks",
                                    {})
                    ranks = list(table.get(pg, {}).keys()) or None
            self.models = [(m, r) for m, r in self.models
                           if m is not ddp.module]
            self.models.append((ddp.module, ranks))
        except Exception as e:
            self._failed("add_ddp", e)

    def interval(self):
        """Checksums are due in steps whose number is a multiple of this
        (0: never)."""
        return self.auto_every if self.every == AUTO else self.every

    def due(self, step):
        every = self.interval()
        return every > 0 and step is not None and step % every == 0

    def _decide(self):
        """AUTO: the smallest power of two whose share of the step time
        stays under TARGET_FRAC."""
        if self.every != AUTO or not self.step_ns or not self.cost_ns:
            return
        want = self.cost_ns / (TARGET_FRAC * self.step_ns)
        e = 1
        while e < want and e < MAX_EVERY:
            e *= 2
        self.auto_every = e

    def after_optimizer_step(self, optimizer=None, step=None, step_ns=None):
        """Hashes (when due) the registered models' parameters, or without
        a model the optimizer's, and records them in the open step.  Auto
        mode calls it only in the steps due (interval()), with STEP_NS, the
        running mean of the step time it keeps the same way."""
        now = _native.now_ns()
        if step_ns is not None:
            self.step_ns = step_ns
        elif self.last_end_ns is not None:
            dt = now - self.last_end_ns
            # A pause between two steps (an evaluation, a stall) moves the
            # running mean by at most 1.6x, so that it does not make the
            # next steps checksum as if they were that long.
            self.step_ns = dt if self.step_ns is None else \
                0.8 * self.step_ns + 0.2 * min(dt, PAUSE_CAP * self.step_ns)
        if step is None:
            step = _native._current_step()
        if self.due(step):
            try:
                self.checksum(optimizer)
            except Exception as e:
                self._failed("checksum", e)
        self.last_end_ns = _native.now_ns()

    def checksum(self, optimizer=None, model=None):
        """Hashes and records now: MODEL's parameters (else the registered
        models', else OPTIMIZER's), and OPTIMIZER's state when asked."""
        t0 = _native.now_ns()
        names, tensors, ddp_ranks = [], [], None
        models = [(model, None)] if model is not None else self.models
        for i, (m, ranks) in enumerate(models):
            prefix = "" if len(models) == 1 else "model%d." % i
            ddp_ranks = ddp_ranks or ranks
            for n, p in m.named_parameters():
                names.append(prefix + n)
                tensors.append(p)
        pnames = {id(p): n for n, p in zip(names, tensors)}
        if not tensors and optimizer is not None:
            for g, group in enumerate(optimizer.param_groups):
                for k, p in enumerate(group["params"]):
                    names.append("group%d.%d" % (g, k))
                    tensors.append(p)
                    pnames[id(p)] = names[-1]
        torch = self.torch
        with torch.no_grad():
            hashes, nbytes = hash_tensors(torch, tensors, self.device_path)
            record("checksum", names, hashes, _native.values,
                   _native.values_labels, self.sent)
            if self.optimizer_state and optimizer is not None:
                onames, otensors = [], []
                for p, st in optimizer.state.items():
                    for key in sorted(st, key=str):
                        v = st[key]
                        if isinstance(v, torch.Tensor):
                            onames.append("%s:%s" % (
                                pnames.get(id(p), "?"), key))
                            otensors.append(v)
                oh, ob = hash_tensors(torch, otensors, self.device_path)
                nbytes += ob
                record("checksum.opt", onames, oh, _native.values,
                       _native.values_labels, self.sent)
        _native.metric("checksum.group", float(group_key(ddp_ranks)))
        _native.metric("checksum.bytes", float(nbytes))
        cost = _native.now_ns() - t0
        _native.metric("checksum.ms", cost / 1e6)
        self.cost_ns = cost if self.cost_ns is None else \
            0.8 * self.cost_ns + 0.2 * cost
        self._decide()


_explicit = None


def checksum(model=None, optimizer=None):
    """stepscope.checksum: hashes MODEL's parameters (a torch.nn.Module),
    and OPTIMIZER's state when given, now, into the open step.  Call it
    after the optimizer step, on every rank, in the same steps."""
    global _explicit
    import torch
    if _explicit is None:
        _explicit = Checksums(torch, every=1, optimizer_state=True)
    if model is None and optimizer is None:
        raise ValueError("stepscope.checksum wants a model or an optimizer")
    _explicit.optimizer_state = optimizer is not None
    _explicit.checksum(optimizer=optimizer, model=model)
