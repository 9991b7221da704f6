"""stepscope._fp8: float8 health of the tensors a float8 recipe casts.

A float8 recipe multiplies a tensor by a scale (tensorwise: max / amax of
the format) and casts the product to float8.  That cast fails silently in
three ways: values beyond the format's range are clipped (saturation),
small non-zero values become zero (underflow), and a scale that is not a
positive finite number (amax = 0 gives an infinite one) turns the tensor
into NaN.  fp8_stats(name, tensor, scale, fmt) measures all three on the
tensor's own device, without a synchronisation, and records them for the
current step; the controller's fp8 detector judges them
(docs/numerics.md, "float8 health").

What is computed, for y = float32(tensor) * scale (the recipe's product):

  amax       max |tensor|
  scale      the scale as given
  saturated  the fraction of the elements the cast clips: |y| beyond the
             midpoint between the format's largest value and the next step
             of its top binade (464 for e4m3, 61,440 for e5m2), that is
             those that round above the largest value.  A value between
             the largest value and that midpoint rounds down to it like any
             value rounds, so a dynamically scaled amax that lands a
             float32 ulp above 448 is not counted.  e4m3's largest value
             has an even mantissa, so the midpoint itself rounds down to it
             (counted from above 464); the others' have an odd one (counted
             from the midpoint).
  underflow  the fraction of the non-zero elements the cast turns into
             zero: 0 < |y| <= half the smallest subnormal (2^-10 for e4m3,
             2^-17 for e5m2); the half-way value rounds to the even zero.
  format     the format's code (FORMATS), 0 for a name not recorded in a
             step

With an invalid scale the fractions are those of |scale| (an infinite
scale taken as the largest float32, a NaN one as 0); the detector judges
the scale itself and ignores them.

Recording: the statistics of one call stay on the tensor's device as one
small tensor; at the end of the step every call's are stacked on the
device and handed to stepscope.values, which copies all of a step's device
vectors to the host at once (one copy per step, whatever the number of
calls), as five vectors, one per statistic, indexed by the names
given to fp8_stats in the order they first appeared in the run (the
vectors' labels):

  fp8.amax, fp8.scale, fp8.saturated, fp8.underflow, fp8.format

so a run spends five of its 255 names on float8 whatever the number of
layers.  A name recorded twice in a step keeps its last statistics.  At
most MAX_LABELS names are kept per process; calls with further names are
counted in dropped() and otherwise ignored.
"""
import math
import threading

# code: (name, largest value, smallest subnormal, saturation bound, bound
# inclusive) -- the bound is the midpoint above the largest value (see the
# module's docstring).
FORMATS = {
    "e4m3": (1, 448.0, 2.0 ** -9, 464.0, False),
    "e5m2": (2, 57344.0, 2.0 ** -16, 61440.0, True),
    "e4m3fnuz": (3, 240.0, 2.0 ** -10, 248.0, True),
    "e5m2fnuz": (4, 57344.0, 2.0 ** -17, 61440.0, True),
}
VECTORS = ("fp8.amax", "fp8.scale", "fp8.saturated", "fp8.underflow",
           "fp8.format")
MAX_LABELS = 1024
_FLT_MAX = 3.4028234663852886e38


def _scale_for_fractions(scale):
    """|SCALE| with an infinite scale as the largest float32 and a NaN one
    as 0: the factor the fractions are computed with."""
    if isinstance(scale, float):
        if math.isnan(scale):
            return 0.0
        return min(abs(scale), _FLT_MAX)
    import torch
    return torch.nan_to_num(scale.abs(), nan=0.0, posinf=_FLT_MAX)


def compute(tensor, scale, fmt):
    """The statistics of TENSOR cast with SCALE to FMT, as a 1-D float64
    tensor on TENSOR's device: [amax, scale, saturated, underflow] (see the
    module's docstring).  SCALE is a float or a one-element tensor.  No
    synchronisation with the device."""
    import torch
    _, _, min_sub, sat_bound, inclusive = FORMATS[fmt]
    with torch.no_grad():
        a = tensor.detach().abs()
        if a.dtype != torch.float32:
            a = a.to(torch.float32)
        n = a.numel()
        if isinstance(scale, torch.Tensor):
            s = scale.detach().reshape(()).to(device=a.device,
                                              dtype=torch.float32)
            scale_out = s.to(torch.float64)
        else:
            s = float(scale)
            # a fill, not a copy from the host (which would synchronise)
            scale_out = torch.full((), s, dtype=torch.float64,
                                   device=a.device)
        if n == 0:
            zero = torch.zeros((), dtype=torch.float64, device=a.device)
            return torch.stack([zero, scale_out, zero, zero])
        amax = a.max().to(torch.float64)
        nonzero = torch.count_nonzero(a)
        a.mul_(_scale_for_fractions(s))
        big = a >= sat_bound if inclusive else a > sat_bound
        saturated = torch.count_nonzero(big).to(torch.float64) / n
        # every zero of TENSOR stays 0 <= half the subnormal once scaled (the
        # factor is finite), so the non-zero ones are the rest
        small = torch.count_nonzero(a <= min_sub / 2)
        flushed = (small - (n - nonzero)).to(torch.float64)
        underflow = flushed / nonzero.clamp(min=1).to(torch.float64)
        return torch.stack([amax, scale_out, saturated, underflow])


class _Pending:
    """This process's float8 statistics of the open step, and the run's
    labels.  Calls may come from several threads (autograd runs backward
    on its own); a lock guards the dictionaries, never held across torch
    work."""

    def __init__(self):
        self.lock = threading.Lock()
        self.index = {}   # label -> position in the vectors
        self.labels = []  # in the order of first use
        self.rows = {}    # position -> (row tensor, format code), this step
        self.dropped = 0

    def add(self, name, row, code):
        with self.lock:
            i = self.index.get(name)
            if i is None:
                if len(self.labels) >= MAX_LABELS:
                    self.dropped += 1
                    return
                i = self.index[name] = len(self.labels)
                self.labels.append(name)
            self.rows[i] = (row, code)

    def take(self):
        """The open step's rows and the labels so far; empties the rows."""
        with self.lock:
            rows, self.rows = self.rows, {}
            return rows, list(self.labels)


_P = _Pending()


def dropped():
    """Calls ignored because MAX_LABELS names were already in use."""
    return _P.dropped


def check_args(name, tensor, scale, fmt):
    """Raises TypeError or ValueError for arguments fp8_stats refuses."""
    import torch
    if not isinstance(name, str) or not name:
        raise TypeError("fp8_stats: name must be a non-empty str, not %r"
                        % (name,))
    if fmt not in FORMATS:
        raise ValueError("fp8_stats: fmt must be one of %s, not %r"
                         % (", ".join(FORMATS), fmt))
    if not isinstance(tensor, torch.Tensor) or not (
            tensor.is_floating_point()):
        raise TypeError("fp8_stats: tensor must be a floating-point "
                        "torch.Tensor, not %s" % type(tensor).__name__)
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            raise ValueError("fp8_stats: a scale tensor must have one "
                             "element (tensorwise scaling), not %d"
                             % scale.numel())
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError("fp8_stats: scale must be a number or a 0-d tensor, "
                        "not %s" % type(scale).__name__)


def record(name, tensor, scale, fmt):
    """Computes NAME's statistics and keeps them for the open step."""
    _P.add(name, compute(tensor, scale, fmt), FORMATS[fmt][0])


def flush(send):
    """Sends the open step's statistics: SEND(vector name, values, labels)
    once per vector of VECTORS, the statistics as one column each of a
    tensor stacked on the device (stepscope.values copies a step's device
    vectors to the host together, once), the formats as a list.  Labels
    not recorded in the step get NaN statistics and format 0.  Does
    nothing when no call was made in the step."""
    rows, labels = _P.take()
    if not rows:
        return
    import torch
    device = next(iter(rows.values()))[0].device
    nan = torch.full((4,), math.nan, dtype=torch.float64, device=device)
    codes = [0.0] * len(labels)
    table = []
    for i in range(len(labels)):
        row, code = rows.get(i, (nan, 0))
        table.append(row if row.device == device else row.to(device))
        codes[i] = float(code)
    table = torch.stack(table)
    for k, name in enumerate(VECTORS[:4]):
        send(name, table[:, k], labels)
    send(VECTORS[4], codes, labels)
