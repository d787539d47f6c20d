"""ember.special: the torch.special functions training scripts use.

Most are other names for ember ops; the rest are compositions of ember ops,
so autograd works through every one of them.
"""
import math

from . import _C
from ._extra_functions import (logit, xlogy, xlog1py, sinc, i0, _to_float, _require_tensor,
                               _computed_in_float32)

__all__ = ["expit", "logit", "xlogy", "xlog1py", "erf", "erfc", "erfinv", "log1p", "expm1",
           "exp2", "log_softmax", "softmax", "logsumexp", "sinc", "round", "entr", "ndtr", "i0"]

# -- the gamma family (parity part): ember/_gamma.py's compositions under torch.special's names --
from ._gamma import lgamma as gammaln, digamma, digamma as psi, mvlgamma as multigammaln  # noqa: E402
__all__ += ["gammaln", "digamma", "psi", "multigammaln"]


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

