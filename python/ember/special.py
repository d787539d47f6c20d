"""ember.special: the torch.special functions training scripts use.

Most are other names for ember ops (the gamma family, i0 / i1, xlogy are
table rows); the rest are compositions of ember ops, so autograd works
through every one of them. logit, xlog1py and sinc are defined here; all but
xlog1py are torch.* functions too (ember/__init__.py).
"""
import math

from . import _C
from ._checks import _computed_in_float32, _require_tensor, _to_float

__all__ = ["expit", "logit", "xlogy", "i1", "polygamma", "xlog1py", "erf", "erfc", "erfinv", "log1p", "expm1",
           "exp2", "log_softmax", "softmax", "logsumexp", "sinc", "round", "entr", "ndtr", "i0"]

# -- op rows under torch.special's names --
gammaln, digamma, psi, multigammaln, polygamma = _C.lgamma, _C.digamma, _C.digamma, _C.mvlgamma, _C.polygamma
xlogy, i0, i1 = _C.xlogy, _C.i0, _C._special_i1
__all__ += ["gammaln", "digamma", "psi", "multigammaln"]


# -- composed here: logit, xlog1py, sinc ---------------------------------

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


# -- torch.special only ----------------------------------------------------------------


def expit(input):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return _C.sigmoid(_require_tensor("special_expit", input))


def erf(input):
    return _C.erf(input)


def erfc(input):
    return _C.erfc(input)


def erfinv(input):
    return _C.erfinv(input)


def log1p(input):
    return _C.log1p(input)


def expm1(input):
    return _C.expm1(input)


def exp2(input):
    return _C.exp2(input)


def round(input, *, decimals=0):  # noqa: A001  (torch.special.round)
    return _C.round(input, decimals=decimals) if decimals else _C.round(input)


def softmax(input, dim, *, dtype=None):
    return _C.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _C.log_softmax(input, dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    return _C.logsumexp(input, dim, keepdim)


def entr(input):
    """-x * log(x) for x > 0, 0 at 0, -inf for x < 0 (NaN stays NaN)."""
    x = _to_float(_require_tensor("special_entr", input))
    positive = _C.gt(x, 0)
    safe = _C.where(positive, x, _C.ones((), dtype=x.dtype))  # keeps log(0) out of the gradient
    value = -safe * _C.log(safe)
    zero, neg_inf = _C.zeros((), dtype=x.dtype), _C.full((), -math.inf, dtype=x.dtype)
    out = _C.where(positive, value, _C.where(_C.eq(x, 0), zero, neg_inf))
    return _C.where(_C.isnan(x), x, out)


@_computed_in_float32
def ndtr(input):
    """The standard normal CDF."""
    x = _to_float(_require_tensor("special_ndtr", input))
    return 0.5 * _C.erfc(x * (-1.0 / math.sqrt(2.0)))
