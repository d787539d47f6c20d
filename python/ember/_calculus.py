"""Numerical integration, differentiation and running log-sums composed from
ember ops: trapezoid and cumulative_trapezoid (the trapezoidal rule),
gradient (central differences, as np.gradient) and logcumsumexp (a stable
log-space prefix scan). All differentiable."""
import builtins

from . import _C
from ._checks import _NoGrad, _computed_in_float32, _dt, _require_tensor, _to_float, _type_name, _wrap_dim

_py_bool, _py_int = builtins.bool, builtins.int


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


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: the older name of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


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


__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "gradient", "logcumsumexp"]
