"""More torch-level math composed from ember ops in Python: cross products,
covariance and correlation, histograms (1-D and N-D), numerical gradients, atleast_*d,
renorm, diagflat, chain_matmul.

Each is built from differentiable ember ops, so autograd works through it
(histogram, a count, is the exception, as in torch).
"""
import builtins
import collections
import warnings

from . import _C
from ._extra_functions import _NoGrad, _dt, _require_tensor, _type_name, _wrap_dim, diag
from .functional import broadcast_shapes
from .linalg import vector_norm

_py_float, _py_int = builtins.float, builtins.int


def _write_out(fname, out, result):
    if tuple(out.shape) != tuple(result.shape):  # ember tensors cannot be resized in place
        raise RuntimeError(f"{fname}(): the out tensor has shape {list(out.shape)}, "
                           f"but the result has shape {list(result.shape)}")
    return out.copy_(result)


# -- cross products ------------------------------------------------------------------

def _cross_checked(fname, input, other, dim):
    if input.dim() != other.dim():
        raise RuntimeError(f"{fname}: inputs must have the same number of dimensions.")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(other.dtype)}")
    d = _wrap_dim(dim, input.dim())
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"{fname}: inputs dimension {dim} must have length 3. "
                           f"Got {input.shape[d]} and {other.shape[d]}")
    a, b = _C.broadcast_tensors([input, other])
    # (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0) along d
    a0, a1, a2 = (a.select(d, i) for i in range(3))
    b0, b1, b2 = (b.select(d, i) for i in range(3))
    return _C.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def linalg_cross(input, other, *, dim=-1, out=None):
    """Cross product of 3-vectors along dim (default: the last), broadcasting the rest."""
    _require_tensor("linalg.cross", input)
    _require_tensor("linalg.cross", other, "other", 2)
    result = _cross_checked("linalg.cross", input, other, dim)
    return result if out is None else _write_out("linalg.cross", out, result)


def cross(input, other, dim=None, *, out=None):
    """torch.cross: like linalg.cross, but without dim it takes the first dim of
    size 3 (deprecated in torch, which warns)."""
    _require_tensor("cross", input)
    _require_tensor("cross", other, "other", 2)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
                      "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change "
                      "to agree with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        if input.dim() == other.dim():
            shape = broadcast_shapes(input.shape, other.shape)
            dim = next((i for i, s in enumerate(shape) if s == 3), None)
            if dim is None:
                raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=-1 if dim is None else dim, out=out)


# -- covariance and correlation ------------------------------------------------------

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


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):  # noqa: A002
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


# -- numerical gradient --------------------------------------------------------------

def _gradient_along(f, d, h, edge_order):
    """np.gradient's second-order central differences along dim d; h is a float
    (uniform spacing) or a 1-D tensor of coordinates."""
    n = f.shape[d]
    shape = [1] * f.dim()

    def seg(t, start, length):
        return t.narrow(d, start, length)

    if isinstance(h, _C.Tensor):
        shape[d] = n - 2
        dx = _C.diff(h).to(f.dtype if f.dtype.is_floating_point else _C.get_default_dtype())
        dx1, dx2 = dx[:-1].reshape(shape), dx[1:].reshape(shape)
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        interior = a * seg(f, 0, n - 2) + b * seg(f, 1, n - 2) + c * seg(f, 2, n - 2)
        if edge_order == 1:
            first = (seg(f, 1, 1) - seg(f, 0, 1)) / dx[0]
            last = (seg(f, n - 1, 1) - seg(f, n - 2, 1)) / dx[-1]
        else:
            d1, d2 = dx[0], dx[1]
            first = (-(2 * d1 + d2) / (d1 * (d1 + d2)) * seg(f, 0, 1) + (d1 + d2) / (d1 * d2) * seg(f, 1, 1)
                     - d1 / (d2 * (d1 + d2)) * seg(f, 2, 1))
            d1, d2 = dx[-2], dx[-1]
            last = (d2 / (d1 * (d1 + d2)) * seg(f, n - 3, 1) - (d2 + d1) / (d1 * d2) * seg(f, n - 2, 1)
                    + (2 * d2 + d1) / (d2 * (d1 + d2)) * seg(f, n - 1, 1))
    else:
        interior = (seg(f, 2, n - 2) - seg(f, 0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (seg(f, 1, 1) - seg(f, 0, 1)) / h
            last = (seg(f, n - 1, 1) - seg(f, n - 2, 1)) / h
        else:
            first = (-1.5 * seg(f, 0, 1) + 2 * seg(f, 1, 1) - 0.5 * seg(f, 2, 1)) / h
            last = (0.5 * seg(f, n - 3, 1) - 2 * seg(f, n - 2, 1) + 1.5 * seg(f, n - 1, 1)) / h
    return _C.cat([first, interior, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Estimates of input's derivative along each dim in `dim` (all by default) by
    central differences inside and one-sided differences of order edge_order at
    the ends; spacing is a scalar, one scalar per dim, or one coordinate tensor
    per dim. Returns a tuple, one tensor per dim."""
    _require_tensor("gradient", input)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(builtins.range(input.dim()))
    elif isinstance(dim, _py_int):
        dims = [_wrap_dim(dim, input.dim())]
    else:
        dims = [_wrap_dim(d, input.dim()) for d in dim]
    if len(set(dims)) != len(dims):
        raise RuntimeError("torch.gradient expected each dimension to be unique")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and "
                               f"dim arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        hs = list(spacing)
    else:
        hs = [spacing] * len(dims)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())
    out = []
    for d, h in zip(dims, hs):
        if isinstance(h, _C.Tensor):
            if h.dim() == 0:
                h = h.item()
            elif h.dim() != 1 or h.shape[0] != input.shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and have the "
                                   f"same size as the dimension it describes; got a coordinate tensor of shape "
                                   f"{tuple(h.shape)} for a dimension of size {input.shape[d]}")
        out.append(_gradient_along(f, d, h, edge_order))
    return tuple(out)


# -- shapes --------------------------------------------------------------------------

def _atleast(fname, nd, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], _C.Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    results = []
    for t in tensors:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{fname}() received an invalid combination of arguments - got "
                            f"({type(t).__name__}), but expected one of: (Tensor input) or "
                            f"(tuple of Tensors tensors)")
        if t.dim() == 0:
            t = t.reshape([1] * nd)
        elif t.dim() < nd:
            # atleast_2d: (n,) -> (1, n); atleast_3d: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)
            t = t.unsqueeze(0) if t.dim() == 1 else t
            if nd == 3 and t.dim() == 2:
                t = t.unsqueeze(-1)
        results.append(t)
    return results[0] if single else tuple(results)


def atleast_1d(*tensors):
    """Each input viewed with at least one dimension (0-d -> (1,))."""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    """Each input viewed with at least two dimensions ((n,) -> (1, n))."""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    """Each input viewed with at least three dimensions ((n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    return _atleast("atleast_3d", 3, tensors)


def diagflat(input, offset=0):
    """A 2-D tensor with input's flattened elements on diagonal `offset`."""
    _require_tensor("diagflat", input)
    return diag(input.reshape(-1), offset)


# -- renorm, chain_matmul -------------------------------------------------------------

def renorm(input, p, dim, maxnorm):
    """Each slice input.select(dim, i) whose p-norm exceeds maxnorm scaled down to norm maxnorm."""
    _require_tensor("renorm", input)
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                                  f"{_type_name(input.dtype)}")
    d = _wrap_dim(dim, input.dim())
    others = [i for i in builtins.range(input.dim()) if i != d]
    norm = vector_norm(input, p, dim=others, keepdim=True)
    # torch leaves slices at or under maxnorm untouched and adds 1e-7 to the divisor
    factor = _C.where(norm > maxnorm, maxnorm / (norm + 1e-7), _C.ones_like(norm))
    return input * factor


def _renorm_(self, p, dim, maxnorm):
    return self.copy_(renorm(self.clone() if self.requires_grad else self, p, dim, maxnorm))


_warned_chain_matmul = [False]


def chain_matmul(*matrices, out=None):
    """The product of a chain of 2-D matrices, left to right (deprecated in torch
    for linalg.multi_dot, and warns once as torch does)."""
    if not _warned_chain_matmul[0]:
        _warned_chain_matmul[0] = True
        warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                      "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                      "multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        _require_tensor("chain_matmul", m, "matrices")
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    result = matrices[0]
    if len(matrices) == 1:
        result = result.clone()
    for i, m in enumerate(matrices[1:]):
        if matrices[i].shape[1] != m.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(matrices[i].shape)} and "
                               f"{list(m.shape)} cannot be multiplied")
        result = result @ m
    return result if out is None else _write_out("chain_matmul", out, result)


TENSOR_METHODS = {
    "cross": cross, "cov": cov, "corrcoef": corrcoef, "histogram": histogram, "renorm": renorm,
    "renorm_": _renorm_, "diagflat": diagflat,
}

__all__ = ["cross", "cov", "corrcoef", "histogram", "histogramdd", "gradient", "atleast_1d", "atleast_2d", "atleast_3d",
           "diagflat", "renorm", "chain_matmul"]
