"""Elementwise torch ops still composed in Python (no op-table row yet):
heaviside, gcd and lcm on integers, rad2deg / deg2rad, and frexp / ldexp,
which split a float into mantissa and exponent and put it back together.
gcd, lcm and frexp run through NumPy on host memory."""
import collections
import math

from . import _C
from ._checks import _NoGrad, _dt, _require_tensor, _to_float, _type_name


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


__all__ = ["heaviside", "gcd", "lcm", "rad2deg", "deg2rad", "frexp", "ldexp"]
