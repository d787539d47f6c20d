"""torch's statistics composed from ember ops: cov and corrcoef (weighted
covariance and correlation, differentiable), histogram / histogramdd
(counts in given or equal-width bins, with their edges), histc and bincount
(counts and weighted counts; not differentiable, as in torch)."""
import builtins
import collections
import math
import warnings

from . import _C
from ._checks import _NoGrad, _dt, _require_tensor, _type_name, _write_out

_py_bool, _py_float, _py_int, _py_max = builtins.bool, builtins.float, builtins.int, builtins.max


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows (variables) of a 1-D or 2-D input whose columns are
    observations, with optional frequency and observation weights."""
    _require_tensor("cov", input)
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    if input.dtype == _dt("bool"):
        raise NotImplementedError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(_C.get_default_dtype())
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.dim() > 1:
            raise RuntimeError(f"cov(): expected fweights to have one or fewer dimensions but got fweights "
                               f"with {fweights.dim()} dimensions")
        if fweights.dtype.is_floating_point or fweights.dtype == _dt("bool"):
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_type_name(fweights.dtype)} dtype")
        if fweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are observations in "
                               f"the input but got {fweights.numel()} != {n_obs}")
        if n_obs > 0 and bool(fweights.min() < 0):
            raise RuntimeError("cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        if aweights.dim() > 1:
            raise RuntimeError(f"cov(): expected aweights to have one or fewer dimensions but got aweights "
                               f"with {aweights.dim()} dimensions")
        if not aweights.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{_type_name(aweights.dtype)} dtype")
        if aweights.numel() != n_obs:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are observations in "
                               f"the input but got {aweights.numel()} != {n_obs}")
        if n_obs > 0 and bool(aweights.min() < 0):
            raise RuntimeError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = _C.tensor(_py_float(n_obs), dtype=x.dtype)
        avg = x.mean(1) if n_obs else x.sum(1) / 0.0
    else:
        w = w.to(x.dtype)
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
    # normalisation: w_sum - correction * (sum(w * aweights) / w_sum, or 1 without aweights)
    if correction == 0:
        norm = w_sum
    elif w is None or aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    if bool(norm <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                      "of observations.", UserWarning, stacklevel=2)
        norm = _C.zeros_like(norm)
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    return (xw @ xm.t() / norm).squeeze()


def corrcoef(input):
    """Pearson correlation coefficients of the rows of input (values clipped to [-1, 1])."""
    _require_tensor("corrcoef", input)
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    return c.clamp(-1, 1)


# -- histogram -----------------------------------------------------------------------

_HistogramResult = collections.namedtuple("histogram", ["hist", "bin_edges"])
_HistogramResult.__module__ = "ember.return_types"
_HistogramResult.__repr__ = lambda self: (f"ember.return_types.histogram(\nhist={self.hist!r},\n"
                                          f"bin_edges={self.bin_edges!r})")
_C._return_types.setdefault("histogram", _HistogramResult)


def _bin_edges(fname, column, bins, rng, dtype, d):
    """The edges along dimension d: the given 1-D tensor, or bins + 1 equal steps over
    rng (default: the column's min..max, widened by 0.5 each side when empty)."""
    if isinstance(bins, _C.Tensor):
        if bins.dim() != 1:
            raise RuntimeError(f"torch.histogramdd(): bins tensor should have one dimension, but got "
                               f"{bins.dim()} dimensions in the bins tensor for dimension {d}")
        if bins.dtype != dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same "
                               f"dtype, but got input with dtype {_type_name(dtype).lower()} and bins "
                               f"for dimension {d} with dtype {_type_name(bins.dtype).lower()}")
        if bins.numel() < 1:
            raise RuntimeError(f"torch.histogramdd(): bins tensor should have at least 1 element, but got "
                               f"0 elements for dimension {d}")
        return bins.detach().clone()
    if not isinstance(bins, _py_int) or isinstance(bins, builtins.bool):
        raise TypeError(f"{fname}(): argument 'bins' must be int or Tensor, not {type(bins).__name__}")
    if bins <= 0:
        raise RuntimeError(f"torch.{fname}(): bins must be > 0, but got {bins} for dimension {d}")
    if rng is not None:
        lo, hi = _py_float(rng[0]), _py_float(rng[1])
    elif column.numel():
        lo, hi = _py_float(column.min()), _py_float(column.max())
    else:  # no data: the unit range, as numpy
        lo, hi = 0.0, 1.0
    if lo > hi:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {lo:g} max "
                           f"{hi:g} for dimension {d}")
    if lo == hi:  # numpy's and torch's rule: widen an empty range
        lo, hi = lo - 0.5, hi + 0.5
    return _C.linspace(lo, hi, bins + 1, dtype=dtype)


def _histogramdd(fname, input, bins, rng, weight, density):
    """(hist [n_0, ..., n_{D-1}], [edges_d]) of the points input[..., D]."""
    if input.dtype not in (_dt("float32"), _dt("float64")):  # torch's kernels: float and double only
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_type_name(input.dtype)}'")
    D = input.shape[-1]
    pts = input.detach().reshape(-1, D)
    with _NoGrad():
        edges = [_bin_edges(fname, pts[:, d], b, None if rng is None else rng[2 * d:2 * d + 2], input.dtype, d)
                 for d, b in enumerate(bins)]
        sizes = [max(e.numel() - 1, 0) for e in edges]
        total = 1
        for n in sizes:
            total *= n
        hist = _C.zeros(total, dtype=input.dtype)
        if weight is not None:
            if weight.dtype != input.dtype:
                raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
                                   f"should have the same dtype, but got input({_type_name(input.dtype).lower()}), "
                                   f"and weight({_type_name(weight.dtype).lower()})")
            if tuple(weight.shape) != tuple(input.shape[:-1]):
                raise RuntimeError(f"torch.histogramdd(): if weight tensor is provided it should have the same "
                                   f"shape as the input tensor excluding its innermost dimension, but got "
                                   f"input with shape {tuple(input.shape)} and weight with shape "
                                   f"{tuple(weight.shape)}")
        if total > 0 and pts.shape[0]:
            w = weight.detach().reshape(-1) if weight is not None else _C.ones(pts.shape[0], dtype=input.dtype)
            inside = _C.ones(pts.shape[0], dtype=_dt("bool"))
            flat = _C.zeros(pts.shape[0], dtype=_dt("int64"))
            for d, (e, n) in enumerate(zip(edges, sizes)):
                x = pts[:, d].contiguous()
                inside = inside & (x >= e[0]) & (x <= e[-1])
                # bin i holds edges[i] <= x < edges[i+1]; the last edge belongs to the last bin
                flat = flat * n + (_C.searchsorted(e, x, right=True) - 1).clamp(0, n - 1)
            hist.index_add_(0, flat[inside], w[inside])
        hist = hist.reshape(sizes)
        if density:
            scale = hist.sum()
            for d, e in enumerate(edges):
                shape = [1] * D
                shape[d] = sizes[d]
                scale = scale * (e[1:] - e[:-1]).reshape(shape)
            hist = hist / scale
    return hist, edges


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """(hist, bin_edges): counts (or summed weights) of input's elements in each bin.
    bins is a count of equal-width bins over `range` (default: input's min..max)
    or a 1-D tensor of increasing edges; the last bin includes its right edge."""
    _require_tensor("histogram", input)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"torch.histogram(): if weight tensor is provided it should have the same shape as the "
                           f"input tensor, but got input with shape {tuple(input.shape)} and weight with shape "
                           f"{tuple(weight.shape)}")
    hist, (edges,) = _histogramdd("histogram", input.reshape(-1, 1), [bins], range,
                                  None if weight is None else weight.reshape(-1), density)
    if out is not None:
        _write_out("histogram", out[0], hist)
        _write_out("histogram", out[1], edges)
        return _HistogramResult(out[0], out[1])
    return _HistogramResult(hist, edges)


_HistogramddResult = collections.namedtuple("histogramdd", ["hist", "bin_edges"])
_HistogramddResult.__module__ = "ember.return_types"
_HistogramddResult.__repr__ = lambda self: (f"ember.return_types.histogramdd(\nhist={self.hist!r},\n"
                                            f"bin_edges={self.bin_edges!r})")
_C._return_types.setdefault("histogramdd", _HistogramddResult)


def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """(hist, bin_edges) of the points input[..., D] (one point per row): bins is a
    count for every dim, a count per dim, or a 1-D edge tensor per dim; range is
    [min_0, max_0, min_1, max_1, ...]; weight has input's shape without the last dim."""
    _require_tensor("histogramdd", input)
    if input.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    D = input.shape[-1]
    if isinstance(bins, (list, tuple)):
        if len(bins) != D:
            raise RuntimeError("histogramdd: The size of bins must be equal to the innermost dimension of the input.")
        bins = list(bins)
    else:
        bins = [bins] * D
    if range is not None and len(range) != 2 * D:
        raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should have {2 * D} "
                           f"elements, but got {len(range)}")
    hist, edges = _histogramdd("histogramdd", input, bins, range, weight, density)
    return _HistogramddResult(hist, tuple(edges))


def bincount(input, weights=None, minlength=0):
    """How often each non-negative integer occurs (summing weights when given)."""
    _require_tensor("bincount", input)
    if input.dtype.is_floating_point or input.dtype == _dt("bool"):
        raise NotImplementedError(f'"bincount_cpu" not implemented for '
                                  f"'{_type_name(input.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.dim() == 1 and input.numel() == 0:
        return _C.zeros((minlength,), dtype=_dt("int64"), device=input.device)
    if input.dim() != 1 or _py_bool((input < 0).any().item()) if input.dim() == 1 else True:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    with _NoGrad():
        size = _py_max(_py_int(input.max().item()) + 1, minlength)
        index = input.to(_dt("int64"))
        if weights is None:
            return _C.zeros((size,), dtype=_dt("int64"), device=input.device).index_add(
                0, index, _C.ones(index.shape, dtype=_dt("int64"), device=input.device))
        # float32 weights stay float32; every other weight dtype sums in float64 (as torch)
        wdtype = _dt("float32") if weights.dtype == _dt("float32") else _dt("float64")
        result = _C.zeros((size,), dtype=wdtype, device=input.device).index_add(0, index, weights.detach().to(wdtype))
    if weights.requires_grad and _C.is_grad_enabled():  # torch's node without a formula: backward raises
        result = _not_implemented_function().apply("bincount", result, weights)
    return result


_NOT_IMPLEMENTED = []


def _not_implemented_function():
    """An autograd.Function putting a result computed without autograd into the
    graph of `inputs` as torch does for an op without a formula: a backward that
    reaches it raises torch's error (rather than the inputs silently getting no
    gradient)."""
    if not _NOT_IMPLEMENTED:
        from .autograd import Function

        class NotImplemented(Function):  # noqa: A001  (torch's node name)
            @staticmethod
            def forward(ctx, name, result, *inputs):
                ctx.name = name
                return result.clone()

            @staticmethod
            def backward(ctx, *grads):
                raise RuntimeError(f"derivative for aten::{ctx.name} is not implemented")

        _NOT_IMPLEMENTED.append(NotImplemented)
    return _NOT_IMPLEMENTED[0]


def histc(input, bins=100, min=0, max=0):  # noqa: A002  (torch's argument names)
    """A histogram of `bins` equal bins over [min, max] (the data range when min == max)."""
    _require_tensor("histc", input)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"histogram_cpu" not implemented for '
                                  f"'{_type_name(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    with _NoGrad():
        data = input.detach().reshape(-1)
        lo, hi = _py_float(min), _py_float(max)
        if lo == hi and data.numel():
            lo, hi = _py_float(data.min().item()), _py_float(data.max().item())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if not (math.isfinite(lo) and math.isfinite(hi)):
            fmt = lambda v: "-nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") \
                if math.isinf(v) else f"{v:g}"
            raise RuntimeError(f"torch.histc: range of [{fmt(lo)}, {fmt(hi)}] is not finite")
        if lo > hi:
            raise RuntimeError("torch.histc: max must be larger than min")
        pos = ((data - lo) * bins / (hi - lo)).floor().clamp(0, bins - 1)
        # values outside [min, max] (and NaN) land in an extra bin that is dropped
        inside = (data >= lo) & (data <= hi)
        pos = _C.where(inside, pos, _C.full((), float(bins), dtype=pos.dtype)).to(_dt("int64"))
        counts = _C.zeros((bins + 1,), dtype=input.dtype, device=input.device)
        counts = counts.index_add(0, pos, _C.ones(pos.shape, dtype=input.dtype, device=input.device))
        return counts[:bins].contiguous()


__all__ = ["cov", "corrcoef", "histogram", "histogramdd", "histc", "bincount"]
