"""lgamma, digamma, mvlgamma and logaddexp2, composed from ember ops (autograd for free).

lgamma: Lanczos' series (g = 7, 9 terms; ~1e-15 relative) for x >= 0.5 and the reflection
formula log(pi / |sin(pi x)|) - lgamma(1 - x) below; poles (0, -1, -2, ...) give +inf as torch.
digamma: the asymptotic series after shifting x up by 10 (psi(x) = psi(x + 1) - 1 / x), the
reflection psi(1 - x) - pi / tan(pi x) below 0.5; psi(0) = -inf, psi(-0) = +inf, negative
integers NaN, as torch. Both compute in float64 and round to the input's float dtype (integer
inputs give the default float dtype). The branch not taken is evaluated on a harmless value,
so its gradient can't turn the taken branch's into NaN.
"""
import math

from . import _C

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# psi(y) ~ log y - 1/(2y) - sum B_2k / (2k y^2k)
_PSI_SERIES = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)


def _float_in(name, input):
    """(float64 copy of input, dtype of the result)."""
    import ember
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    out_dtype = input.dtype if input.is_floating_point() else ember.get_default_dtype()
    return input.to(ember.float64), out_dtype


def _lgamma_at_least_half(x):
    z = x - 1
    a = _C.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], 1):
        a = a + c / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * t.log() - t + a.log()


def lgamma(input, *, out=None):
    x, dtype = _float_in("lgamma", input)
    reflect = x < 0.5
    upper = _lgamma_at_least_half(_C.where(reflect, 1 - x, x))
    xs = _C.where(reflect, x, 0.25)  # the reflection only where it is used
    lower = math.log(math.pi) - (math.pi * xs).sin().abs().log() - upper
    r = _C.where(reflect, lower, upper)
    pole = (x <= 0) & (x == x.floor())
    r = r.masked_fill(pole | x.isinf(), math.inf)
    # lgamma(1) = lgamma(2) = 0 exactly (the series leaves ~1e-16); r - r.detach() keeps the gradient
    r = _C.where((x == 1) | (x == 2), r - r.detach(), r)
    r = r.to(dtype)
    return out.copy_(r) if out is not None else r


def _digamma_at_least_half(x):
    shift = _C.zeros_like(x)
    for k in range(10):
        shift = shift + 1 / (x + k)
    y = x + 10
    inv2 = 1 / (y * y)
    series = _C.zeros_like(y)
    for c in reversed(_PSI_SERIES[:6]):
        series = (series + c) * inv2
    return y.log() - 0.5 / y - series - shift


def digamma(input, *, out=None):
    x, dtype = _float_in("digamma", input)
    reflect = x < 0.5
    upper = _digamma_at_least_half(_C.where(reflect, 1 - x, x))
    xs = _C.where(reflect, x, 0.25)
    lower = upper - math.pi / (math.pi * xs).tan()
    r = _C.where(reflect, lower, upper)
    negative_int = (x < 0) & (x == x.floor())
    r = r.masked_fill(negative_int | (x == -math.inf), math.nan)
    zero = x == 0  # psi(+0) = -inf, psi(-0) = +inf (torch reads the sign)
    r = _C.where(zero, _C.where(x.signbit(), math.inf, -math.inf).to(r.dtype), r)
    r = r.masked_fill(x == math.inf, math.inf)
    r = r.to(dtype)
    return out.copy_(r) if out is not None else r


def mvlgamma(input, p):
    """The multivariate log-gamma: sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)."""
    if not isinstance(p, int) or isinstance(p, bool):
        raise TypeError(f"mvlgamma(): argument 'p' (position 2) must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x, dtype = _float_in("mvlgamma", input)
    # one lgamma over a trailing dim of the p shifts (a huge p fails to allocate, never loops)
    shifts = _C.arange(p, dtype=x.dtype, device=x.device) / 2
    total = lgamma(x.unsqueeze(-1) - shifts).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)
    return total.to(dtype)


def logaddexp2(input, other, *, out=None):
    """log2(2^a + 2^b) through logaddexp on a * ln 2, b * ln 2."""
    import ember
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"logaddexp2(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(other, _C.Tensor):
        raise TypeError(f"logaddexp2(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    dtype = ember.result_type(input, other)
    if not dtype.is_floating_point:
        names = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long"}
        raise NotImplementedError(f"\"logaddexp2_cpu\" not implemented for '{names[str(dtype).split('.')[-1]]}'")
    ln2 = math.log(2.0)
    wide = ember.float64 if dtype == ember.float64 else ember.float32  # half types: no rounding of a * ln 2
    r = (_C.logaddexp(input.to(wide) * ln2, other.to(wide) * ln2) / ln2).to(dtype)
    return out.copy_(r) if out is not None else r


__all__ = ["lgamma", "digamma", "mvlgamma", "logaddexp2"]
