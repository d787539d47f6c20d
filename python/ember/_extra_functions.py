"""torch-level functions built from ember ops in Python.

Each is a composition of differentiable ember ops, so autograd (and double
backward) works through it with no C code; the few that torch does not
differentiate (bincount, histc, gcd, frexp, ...) are plain computations.
"""
import builtins
import collections
import itertools
import math
import warnings

from . import _C

_py_bool, _py_int, _py_float, _py_max, _py_min, _py_abs = (
    builtins.bool, builtins.int, builtins.float, builtins.max, builtins.min, builtins.abs)

# torch's ScalarType names, used in its error messages ("Long did not match Float").
_SCALAR_TYPE_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
    "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
    "float64": "Double",
}


def _dt(name):
    return _C._dtypes[name]


def _type_name(dtype):
    return _SCALAR_TYPE_NAMES[str(dtype).split(".")[-1]]


def _is_integral(dtype, include_bool=True):
    return not dtype.is_floating_point and (include_bool or dtype != _dt("bool"))


def _require_tensor(fname, value, argname="input", position=1):
    if not isinstance(value, _C.Tensor):
        raise TypeError(f"{fname}(): argument '{argname}' (position {position}) must be Tensor, "
                        f"not {type(value).__name__}")
    return value


def _wrap_dim(dim, ndim, fname=""):
    n = _py_max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def _to_float(x):
    """Integer/bool tensors become the default float dtype (torch's int->float ops)."""
    return x if x.dtype.is_floating_point else x.to(_C.get_default_dtype())


def _low_precision(dtype):
    return dtype in (_dt("float16"), _dt("bfloat16"))


def _computed_in_float32(fn):
    """float16/bfloat16 inputs are computed in float32 and rounded once, like torch's kernels."""
    def wrapper(input, *args, **kwargs):
        if isinstance(input, _C.Tensor) and _low_precision(input.dtype):
            return fn(input.to(_dt("float32")), *args, **kwargs).to(input.dtype)
        return fn(input, *args, **kwargs)
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return wrapper


# -- comparison ---------------------------------------------------------------

def equal(input, other):
    """True if both tensors have the same size and elements (dtypes may differ)."""
    _require_tensor("equal", input)
    _require_tensor("equal", other, "other", 2)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return _py_bool(_C.eq(input, other).all().item())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise (a bool tensor)."""
    _require_tensor("isclose", input)
    _require_tensor("isclose", other, "other", 2)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{_type_name(input.dtype)} did not match {_type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    with _NoGrad():
        close = _C.eq(input, other)
        if equal_nan and input.dtype.is_floating_point:
            close = close | (_C.isnan(input) & _C.isnan(other))
        if rtol == 0 and atol == 0:
            return close
        # Integer (and bool) inputs are compared in the default float dtype, like torch.
        a, b = _to_float(input), _to_float(other)
        allowed = atol + _C.abs(rtol * b)
        actual = _C.abs(a - b)
        return close | (_C.isfinite(actual) & (actual <= allowed))


class _NoGrad:
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """isclose(...).all() as a Python bool."""
    return _py_bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """For each element of `elements`, whether it occurs in `test_elements`."""
    if not isinstance(elements, _C.Tensor) and not isinstance(test_elements, _C.Tensor):
        raise TypeError("isin() received an invalid combination of arguments - "
                        "at least one of 'elements' and 'test_elements' must be a Tensor")
    if not isinstance(elements, _C.Tensor):
        elements = _C.tensor(elements, dtype=_C.result_type(test_elements, elements), device=test_elements.device)
    if not isinstance(test_elements, _C.Tensor):
        test_elements = _C.tensor([test_elements], dtype=_C.result_type(elements, test_elements),
                                  device=elements.device)
    with _NoGrad():
        flat, tests = elements.reshape(-1), test_elements.reshape(-1)
        if flat.numel() * tests.numel() <= (1 << 22):
            found = _C.eq(flat.unsqueeze(1), tests.unsqueeze(0)).any(1) if tests.numel() else \
                _C.zeros(flat.shape, dtype=_dt("bool"), device=flat.device)
        else:  # big inputs: sort the test set and binary-search it
            common = _C.promote_types(flat.dtype, tests.dtype)
            sorted_tests = _C.sort(tests.to(common)).values
            values = flat.to(common)
            pos = _C.searchsorted(sorted_tests, values).clamp_max(sorted_tests.numel() - 1)
            found = _C.eq(sorted_tests[pos], values)
        if invert:
            found = ~found
        return found.reshape(elements.shape)


# -- shape helpers -------------------------------------------------------------

def ravel(input):
    """The elements as a 1-D tensor (a view when the layout allows)."""
    return _require_tensor("ravel", input).reshape(-1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2) whose `offset` diagonal holds the last dim of input."""
    _require_tensor("diag_embed", input)
    out_ndim = input.dim() + 1
    d1, d2 = _wrap_dim(dim1, out_ndim), _wrap_dim(dim2, out_ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    vec = input if input.dim() else input.reshape(1)
    n = vec.shape[-1]
    m = n + _py_abs(offset)
    if offset:  # pad the vector so the diagonal can be read off by row (or column)
        pad = _C.zeros(tuple(vec.shape[:-1]) + (_py_abs(offset),), dtype=vec.dtype, device=vec.device)
        vec = _C.cat([vec, pad], -1)
    idx = _C.arange(m, device=vec.device)
    mask = _C.eq(idx.unsqueeze(0) - idx.unsqueeze(1), offset)  # col - row == offset
    spread = vec.unsqueeze(-1) if offset >= 0 else vec.unsqueeze(-2)
    spread = spread.expand(tuple(vec.shape[:-1]) + (m, m))
    zero = _C.zeros((), dtype=vec.dtype, device=vec.device)
    out = _C.where(mask, spread, zero)
    return out.movedim((-2, -1), (d1, d2)) if (d1, d2) != (out_ndim - 2, out_ndim - 1) else out


def diag(input, diagonal=0):
    """1-D input: a square matrix with it on the `diagonal`; 2-D: that diagonal (a copy)."""
    _require_tensor("diag", input)
    if input.dim() == 1:
        return diag_embed(input, diagonal)
    if input.dim() == 2:
        return _C.diagonal(input, diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


def tensordot(a, b, dims=2, out=None):
    """Sum over the given dims of a and b (an int: last dims of a with first of b)."""
    _require_tensor("tensordot", a, "a")
    _require_tensor("tensordot", b, "b", 2)
    if isinstance(dims, _C.Tensor):
        dims = dims.item() if dims.numel() == 1 and dims.dim() == 0 else dims.tolist()
    if isinstance(dims, _py_int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > _py_min(a.dim(), b.dim()):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists of dimensions")
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, _py_int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, _py_int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a = [_wrap_dim(d, a.dim()) for d in dims_a]
    dims_b = [_wrap_dim(d, b.dim()) for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} "
                               f"in dim {db}")
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(math.prod(a.shape[d] for d in free_a), k)
    right = b.permute(dims_b + free_b).reshape(k, math.prod(b.shape[d] for d in free_b))
    result = _C.mm(left, right).reshape([a.shape[d] for d in free_a] +
                                        [b.shape[d] for d in free_b])
    if out is not None:
        if tuple(out.shape) != tuple(result.shape):  # ember tensors cannot be resized in place
            raise RuntimeError(f"tensordot(): the out tensor has shape {list(out.shape)}, "
                               f"but the result has shape {list(result.shape)}")
        return out.copy_(result)
    return result


def cartesian_prod(*tensors):
    """All tuples of one element from each 1-D tensor, as rows."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if _require_tensor("cartesian_prod", t).dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    if _py_any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    grids = _C.meshgrid(list(tensors), indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


_py_any = builtins.any


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements, as rows (itertools order)."""
    _require_tensor("combinations", input)
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _C.empty((0,), dtype=input.dtype)
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(make(range(input.shape[0]), r))
    if not rows:
        return _C.empty((0, r), dtype=input.dtype)
    index = _C.tensor(rows, dtype=_dt("int64"))
    return input[index]


def block_diag(*tensors):
    """A block-diagonal matrix from 0-, 1- and 2-D tensors (promoted to one dtype)."""
    mats = []
    for i, t in enumerate(tensors):
        _require_tensor("block_diag", t)
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t)
    if not mats:
        return _C.empty((1, 0), dtype=_C.get_default_dtype())
    dtype = mats[0].dtype
    for t in mats[1:]:
        dtype = _C.promote_types(dtype, t.dtype)
    total_cols = _py_int(sum(t.shape[1] for t in mats))
    rows, col = [], 0
    for t in mats:
        h, w = t.shape
        parts = []
        if col:
            parts.append(_C.zeros((h, col), dtype=dtype, device=t.device))
        parts.append(t.to(dtype))
        if total_cols - col - w:
            parts.append(_C.zeros((h, total_cols - col - w), dtype=dtype, device=t.device))
        rows.append(_C.cat(parts, 1) if len(parts) > 1 else parts[0])
        col += w
    return _C.cat(rows, 0)


def vander(x, N=None, increasing=False):
    """Columns x**(N-1), ..., x**0 (increasing=True reverses); ints become int64."""
    _require_tensor("vander", x, "x")
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    base = x if x.dtype.is_floating_point else x.to(_dt("int64"))
    ones = _C.ones((x.shape[0], 1), dtype=base.dtype, device=x.device)
    if n == 0:
        return _C.empty((x.shape[0], 0), dtype=base.dtype, device=x.device)
    if n == 1:
        result = ones
    else:  # a running product, like torch, so gradients match its cumprod backward
        result = _C.cat([ones, base.unsqueeze(1).expand(x.shape[0], n - 1)], 1).cumprod(1)
    return result if increasing else result.flip(1)


# -- pointwise math ---------------------------------------------------------------

def logit(input, eps=None):
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    _require_tensor("logit", input)
    x = _to_float(input)
    if eps is not None:
        x = x.clamp(eps, 1 - eps)
    return _C.log(x / (1 - x))


def _float_result(fname, x, y):
    """Both operands as tensors of their promoted dtype, integers promoted to float."""
    if not isinstance(x, _C.Tensor) and not isinstance(y, _C.Tensor):
        raise TypeError(f"{fname}() received an invalid combination of arguments - "
                        "got (scalar, scalar), but expected at least one Tensor")
    dtype = _C.result_type(x, y)
    if not dtype.is_floating_point:
        dtype = _C.get_default_dtype()
    x = x.to(dtype) if isinstance(x, _C.Tensor) else _C.tensor(x, dtype=dtype)
    y = y.to(dtype) if isinstance(y, _C.Tensor) else _C.tensor(y, dtype=dtype)
    return x, y


def xlogy(input, other):
    """input * log(other), 0 where input == 0 (unless other is NaN)."""
    x, y = _float_result("xlogy", input, other)
    zero_x = _C.eq(x, 0) & ~_C.isnan(y)
    return _C.where(zero_x, _C.zeros((), dtype=x.dtype), x * _C.log(y))


def xlog1py(input, other):
    """input * log1p(other), 0 where input == 0 (unless other is NaN)."""
    x, y = _float_result("xlog1py", input, other)
    zero_x = _C.eq(x, 0) & ~_C.isnan(y)
    return _C.where(zero_x, _C.zeros((), dtype=x.dtype), x * _C.log1p(y))


@_computed_in_float32
def sinc(input):
    """sin(pi x) / (pi x), 1 at x == 0 (gradient 0 there, like torch)."""
    x = _to_float(_require_tensor("sinc", input))
    at_zero = _C.eq(x, 0)
    safe = _C.where(at_zero, _C.ones((), dtype=x.dtype), x)  # keeps 0/0 out of the gradient
    scaled = safe * math.pi
    return _C.where(at_zero, _C.ones((), dtype=x.dtype), _C.sin(scaled) / scaled)


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0."""
    _require_tensor("heaviside", input)
    _require_tensor("heaviside", values, "values", 2)
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    step = _C.gt(input, 0).to(input.dtype)
    return _C.where(_C.eq(input, 0), values, step)


def _integer_pair(fname, a, b):
    _require_tensor(fname, a)
    _require_tensor(fname, b, "other", 2)
    dtype = _C.promote_types(a.dtype, b.dtype)
    if dtype.is_floating_point or dtype == _dt("bool"):
        raise NotImplementedError(f'"{fname}_cpu" not implemented for \'{_type_name(dtype)}\'')
    a, b = _C.broadcast_tensors([a.to(dtype), b.to(dtype)])
    return a, b, dtype


def gcd(input, other):
    """Greatest common divisor, elementwise, of integer tensors (gcd(0, 0) == 0)."""
    import numpy as np
    a, b, dtype = _integer_pair("gcd", input, other)
    # Not differentiable (integers only): Euclid on all lanes at once in NumPy, with C's
    # wrapping abs and truncating remainder, so the minimum integer behaves as in torch.
    with np.errstate(all="ignore"):
        x = np.abs(a.contiguous().numpy()).reshape(-1)
        y = np.abs(b.contiguous().numpy()).reshape(-1)  # the answer where x is 0
        lanes = np.flatnonzero(x)
        xs, ys = x[lanes], y[lanes]
        while lanes.size:  # only lanes still running are carried to the next step
            xs, ys = np.fmod(ys, xs), xs
            done = xs == 0
            y[lanes[done]] = ys[done]
            keep = ~done
            lanes, xs, ys = lanes[keep], xs[keep], ys[keep]
        y = y.reshape(a.shape)
    return _C.from_numpy(np.ascontiguousarray(y))


def lcm(input, other):
    """Least common multiple, elementwise, of integer tensors (0 if either is 0)."""
    a, b, dtype = _integer_pair("lcm", input, other)
    with _NoGrad():
        g = gcd(a, b)
        safe_g = _C.where(_C.eq(g, 0), _C.ones((), dtype=dtype), g)
        # Narrow integers multiply in a wider type and wrap once at the end, like torch's
        # kernel (C's int promotion); int32/int64 wrap in their own width.
        wide = _dt("int64") if dtype in (_dt("int8"), _dt("int16"), _dt("uint8")) else dtype
        value = _C.abs(_C.div(a.to(wide), safe_g.to(wide), rounding_mode="trunc") * b.to(wide))
        return _C.where(_C.eq(g, 0), _C.zeros((), dtype=dtype), value.to(dtype))


def rad2deg(input):
    return _to_float(_require_tensor("rad2deg", input)) * (180.0 / math.pi)


def deg2rad(input):
    return _to_float(_require_tensor("deg2rad", input)) * (math.pi / 180.0)


class _FrexpResult(collections.namedtuple("frexp", ["mantissa", "exponent"])):
    """ember.return_types.frexp(mantissa=..., exponent=...), like the C ops' result types."""
    __slots__ = ()

    def __repr__(self):
        return (f"ember.return_types.frexp(mantissa={self.mantissa!r}, "
                f"exponent={self.exponent!r})")


_FrexpResult.__module__ = "ember.return_types"
_FrexpResult.__qualname__ = _FrexpResult.__name__ = "frexp"
_C._return_types.setdefault("frexp", _FrexpResult)


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, |mantissa| in [0.5, 1)."""
    import numpy as np
    _require_tensor("frexp", input)
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    with _NoGrad():
        # NumPy has no bfloat16; float32 holds every half/bfloat16 value exactly.
        wide = input.detach().to(_dt("float64") if input.dtype == _dt("float64") else _dt("float32"))
        mantissa, exponent = np.frexp(wide.contiguous().numpy())
        # np.asarray: a 0-d input gives NumPy scalars
        mantissa = _C.from_numpy(np.array(mantissa, order="C")).to(input.dtype)
        exponent = _C.from_numpy(np.asarray(exponent, dtype=np.int32))
    if input.requires_grad and _C.is_grad_enabled():
        mantissa = _frexp_function().apply(input, mantissa, exponent)
    return _C._return_types["frexp"](mantissa, exponent)


_FREXP = []


def _frexp_function():
    """The autograd.Function giving frexp's mantissa torch's gradient,
    grad / 2**exponent (the exponent is not differentiable)."""
    if not _FREXP:
        from .autograd import Function

        class Frexp(Function):
            @staticmethod
            def forward(ctx, input, mantissa, exponent):
                ctx.save_for_backward(exponent)
                ctx.mark_non_differentiable(exponent)
                return mantissa.clone()

            @staticmethod
            def backward(ctx, grad):
                exponent, = ctx.saved_tensors
                wide = _dt("float64") if grad.dtype == _dt("float64") else _dt("float32")
                return (grad.to(wide) / _C.exp2(exponent.to(wide))).to(grad.dtype), None, None

        _FREXP.append(Frexp)
    return _FREXP[0]


def ldexp(input, other):
    """input * 2**other (integer input becomes float)."""
    _require_tensor("ldexp", input)
    _require_tensor("ldexp", other, "other", 2)
    dtype = _C.result_type(input, other)
    if not dtype.is_floating_point:
        dtype = _C.get_default_dtype()
    scale = _C.exp2(other.to(dtype))
    return input.to(dtype) * scale


_I0_SERIES_TERMS = 60      # power series of I0 converges to double precision for |x| <= 15
_I0_ASYMPTOTIC_TERMS = 25  # and its asymptotic series from there on


@_computed_in_float32
def i0(input):
    """The modified Bessel function of the first kind, order 0 (differentiable)."""
    x = _to_float(_require_tensor("i0", input))
    ax = _C.abs(x)
    small = ax <= 15
    # Each branch sees only inputs it is accurate for, so the other's gradient stays finite.
    xs = _C.where(small, x, _C.zeros((), dtype=x.dtype))
    q = xs * xs / 4
    series = _C.ones((), dtype=x.dtype)
    for k in range(_I0_SERIES_TERMS, 0, -1):  # sum_k q^k / (k!)^2, by Horner's rule
        series = 1 + series * q / (k * k)
    xl = _C.where(small, _C.full((), 16.0, dtype=x.dtype), ax)
    inv = 1 / (8 * xl)
    tail = _C.ones((), dtype=x.dtype)
    for k in range(_I0_ASYMPTOTIC_TERMS, 0, -1):  # e^x / sqrt(2 pi x) * sum_k ((2k-1)!!)^2 / k! (8x)^-k
        tail = 1 + tail * inv * ((2 * k - 1) ** 2 / k)
    asymptotic = _C.exp(xl) / _C.sqrt(2 * math.pi * xl) * tail
    return _C.where(small, series, asymptotic)


@_computed_in_float32
def logcumsumexp(input, dim):
    """log(cumsum(exp(input), dim)), computed stably (a log-space prefix scan)."""
    _require_tensor("logcumsumexp", input)
    if not isinstance(dim, int):
        raise TypeError(f"logcumsumexp(): argument 'dim' must be int, not {type(dim).__name__}")
    d = _wrap_dim(dim, input.dim())  # torch checks the dim before the dtype
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for '
                                  f"'{_type_name(input.dtype)}'")
    if input.dim() == 0:
        return input.clone()
    n = input.shape[d]
    if n == 0:
        return input.clone()
    with _NoGrad():
        shift = input.amax(d, keepdim=True)
        # exp(x - max) underflows below about -87 (float32) / -708 (float64): far-apart
        # values (and infinities) take the exact scan below instead.
        floor = -80.0 if input.dtype != _dt("float64") else -700.0
        safe = _py_bool(_C.isfinite(input).all().item()) and \
            _py_bool(((input - shift) >= floor).all().item())
    if safe:  # one cumsum, shifted by the (constant) row maximum
        return _C.log(_C.cumsum(_C.exp(input - shift), d)) + shift
    result = input
    step = 1
    while step < n:  # Hillis-Steele: after this step each entry covers 2*step inputs
        head = result.narrow(d, 0, step)
        tail = _C.logaddexp(result.narrow(d, step, n - step), result.narrow(d, 0, n - step))
        result = _C.cat([head, tail], d)
        step *= 2
    return result if n > 1 else input.clone()


# -- distances and integrals -------------------------------------------------------

def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of x1 and each row of x2 (batched)."""
    _require_tensor("cdist", x1, "x1")
    _require_tensor("cdist", x2, "x2", 2)
    for name, t in (("X1", x1), ("X2", x2)):
        if t.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.dim()}D")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_type_name(t.dtype)}")
    for t in (x1, x2):
        if t.dtype in (_dt("float16"), _dt("bfloat16")):
            raise NotImplementedError(f'"cdist" not implemented for \'{_type_name(t.dtype)}\'')
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. "
                           f"X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(x1.dtype)} but found "
                           f"{_type_name(x2.dtype)}")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                         (compute_mode == "use_mm_for_euclid_dist_if_necessary" and
                          (rows1 > 25 or rows2 > 25)))
    if use_mm:  # |a|^2 + |b|^2 - 2 a.b, clamped away from 0 before the root (as torch)
        sq1 = (x1 * x1).sum(-1, keepdim=True)
        sq2 = (x2 * x2).sum(-1, keepdim=True)
        d2 = sq1 - 2 * _C.matmul(x1, x2.transpose(-2, -1)) + sq2.transpose(-2, -1)
        return d2.clamp_min(1e-30).sqrt()
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return _C._linalg_vector_norm(diff, _py_float(p), [-1])


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    _require_tensor("dist", input)
    _require_tensor("dist", other, "other", 2)
    diff = input - other
    if not diff.dtype.is_floating_point:
        raise NotImplementedError(f"norm(): input dtype should be either floating point or "
                                  f"complex. Got {_type_name(diff.dtype)} instead.")
    return _C._linalg_vector_norm(diff, _py_float(p))


def _trapezoid_parts(fname, y, x, dx, dim):
    _require_tensor(fname, y, "y")
    if y.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions"
                         if fname == "trapezoid" else "slice() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, y.dim())
    n = y.shape[d] if y.dim() else 0
    return d, n


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim, with sample points x or uniform spacing dx."""
    d, n = _trapezoid_parts("trapezoid", y, x, dx, dim)
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments - "
                        "got both x and dx")
    if n == 0:
        shape = [s for i, s in enumerate(y.shape) if i != d]
        return _C.zeros(shape, dtype=_C.result_type(y, x) if isinstance(x, _C.Tensor) else y.dtype)
    pair_sum = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
    if isinstance(x, _C.Tensor):
        spacing = _x_spacing("trapezoid", x, y, d, n)
        return (spacing * pair_sum).sum(d) / 2
    step = 1 if dx is None and x is None else (dx if dx is not None else x)
    return (pair_sum * step).sum(d) / 2


def _x_spacing(fname, x, y, d, n):
    if x.dim() == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{fname}: There must be one `x` value for each sample point")
        spacing = _C.diff(x)
        shape = [1] * y.dim()
        shape[d] = n - 1
        return spacing.reshape(shape)
    return _C.diff(x, dim=d - y.dim())


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoidal-rule integrals along dim (one fewer entry than y)."""
    d, n = _trapezoid_parts("cumulative_trapezoid", y, x, dx, dim)
    if x is not None and dx is not None:
        raise TypeError("cumulative_trapezoid() received an invalid combination of arguments "
                        "- got both x and dx")
    if n == 0:
        return _to_float(y).clone()
    pair_sum = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
    if isinstance(x, _C.Tensor):
        return (_x_spacing("cumulative_trapezoid", x, y, d, n) * pair_sum / 2).cumsum(d)
    step = 1 if dx is None and x is None else (dx if dx is not None else x)
    return (pair_sum * step / 2).cumsum(d)


# -- construction ------------------------------------------------------------------

def typename(obj):
    """'ember.FloatTensor' for tensors, else the object's module-qualified type name."""
    if isinstance(obj, _C.Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


def _check_cpu(device):
    if device is not None:
        _C.empty((0,), device=device)  # raises ember's CUDA-unavailable error for 'cuda'


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor from obj, sharing memory with tensors/NumPy arrays when copy is not True."""
    _check_cpu(device)
    result = None
    if isinstance(obj, _C.Tensor):
        result = obj
    else:
        try:
            import numpy as np
        except ImportError:  # pragma: no cover
            np = None
        if np is not None and isinstance(obj, np.ndarray) and obj.dtype != np.dtype(object):
            try:
                result = _C.from_numpy(obj)
            except (TypeError, ValueError):
                result = None
        elif np is not None and isinstance(obj, np.generic):
            result = None
    if result is not None:
        if dtype is not None and result.dtype != dtype:
            if copy is False:
                raise ValueError(f"can't alias tensor with dtype '{_type_name(result.dtype)}' "
                                 f"into dtype '{_type_name(dtype)}'.")
            result = result.to(dtype)
        elif copy:
            result = result.clone()
    else:
        if copy is False:
            raise ValueError(f"can't alias {type(obj).__name__} into a tensor without copying "
                             "(copy=False)")
        if isinstance(obj, (bytes, bytearray, memoryview)):  # buffers are shared, as torch
            result = frombuffer(obj, dtype=_dt("uint8") if dtype is None else dtype)
        else:
            result = _C.tensor(obj, dtype=dtype)
    if requires_grad:
        if result is obj:
            result.requires_grad_(True)
        else:
            result = result.detach().requires_grad_(True) if result.grad_fn is not None \
                else result.requires_grad_(True)
    return result


_warned_read_only_buffer = False


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor viewing an object's buffer (shares memory; no copy)."""
    import numpy as np
    global _warned_read_only_buffer
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    length = view.nbytes
    elem = _C.empty((0,), dtype=dtype).element_size()
    if length <= 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % elem:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} "
                             f"bytes) must be a multiple of element size ({elem})")
        count = (length - offset) // elem
    elif offset + count * elem > length:
        raise ValueError(f"requested buffer length ({count} * {elem} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({length} bytes)")
    raw = np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                        dtype=np.uint8, count=count * elem, offset=offset)
    if not raw.flags.writeable:
        if not _warned_read_only_buffer:
            warnings.warn("The given buffer is not writable, and ember does not support "
                          "non-writable tensors. This means you can write to the underlying "
                          "(supposedly non-writable) buffer using the tensor. You may want to "
                          "copy the buffer to protect its data or make it writable before "
                          "converting it to a tensor.", UserWarning, stacklevel=2)
            _warned_read_only_buffer = True
        raw = raw.view()
        raw.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _C.from_numpy(raw)
    if dtype != _dt("uint8"):
        result = result.view(dtype)
    if requires_grad:
        result.requires_grad_(True)
    return result


# -- counting ------------------------------------------------------------------------

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


# -- global settings --------------------------------------------------------------------

_deterministic = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Record the flag; ember's CPU kernels are deterministic already."""
    if not isinstance(mode, _py_bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {type(mode).__name__}")
    _deterministic["enabled"] = mode
    _deterministic["warn_only"] = _py_bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["enabled"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


def set_default_device(device):
    """Only 'cpu' exists; 'cuda' raises ember's CUDA-unavailable error."""
    if device is not None:
        _check_cpu(device)


def get_default_device():
    return _C.device("cpu")


# -- Tensor methods --------------------------------------------------------------------

TENSOR_METHODS = {
    "equal": equal, "allclose": allclose, "isclose": isclose, "ravel": ravel, "diag": diag,
    "diag_embed": diag_embed, "logit": logit, "xlogy": xlogy, "bincount": bincount,
    "histc": histc, "logcumsumexp": logcumsumexp, "rad2deg": rad2deg, "deg2rad": deg2rad,
    "sinc": sinc, "heaviside": heaviside, "gcd": gcd, "lcm": lcm, "frexp": frexp,
    "ldexp": ldexp, "dist": dist, "i0": i0,
}


def _in_place(fn):
    """x.fn_(...): fn's result written back into x (torch's cast rule for in-place ops)."""
    def method(self, *args, **kwargs):
        # under autograd fn reads a copy: a formula that saved self itself would
        # find it overwritten by the write below (x.clone().logit_() failed in backward)
        src = self.clone() if self.requires_grad and _C.is_grad_enabled() else self
        result = fn(src, *args, **kwargs)
        if result.dtype != self.dtype and not _C.can_cast(result.dtype, self.dtype):
            raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the "
                               f"desired output type {_type_name(self.dtype)}")
        return self.copy_(result)
    method.__name__ = fn.__name__ + "_"
    return method


for _fn in (logit, xlogy, sinc, heaviside, gcd, lcm, rad2deg, deg2rad, ldexp, i0):
    TENSOR_METHODS[_fn.__name__ + "_"] = _in_place(_fn)
del _fn

__all__ = [
    "equal", "allclose", "isclose", "isin", "ravel", "diag", "diag_embed", "tensordot",
    "cartesian_prod", "combinations", "block_diag", "vander", "logit", "xlogy", "sinc",
    "heaviside", "gcd", "lcm", "rad2deg", "deg2rad", "frexp", "ldexp", "i0", "logcumsumexp", "cdist",
    "dist", "trapezoid", "cumulative_trapezoid", "typename", "asarray", "frombuffer",
    "bincount", "histc", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_default_device", "get_default_device",
]
