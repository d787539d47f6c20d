"""kl_divergence(p, q) and the register_kl table of closed forms."""
import math

from .. import _C
from .bernoulli import Bernoulli
from .categorical import Categorical
from .normal import Normal
from .uniform import Uniform

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as KL(p || q) for the pair of distribution types."""
    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(type_p, type_q):
    """The registered pair most specific to (type_p, type_q) along both MROs."""
    best, best_rank = None, None
    for (p, q), fn in _KL_REGISTRY.items():
        if issubclass(type_p, p) and issubclass(type_q, q):
            rank = (type_p.__mro__.index(p), type_q.__mro__.index(q))
            if best_rank is None or rank < best_rank:
                best, best_rank = fn, rank
    return best


def kl_divergence(p, q):
    """KL(p || q), batched over the distributions' batch shapes."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fn(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    inf = _C.full((), math.inf, dtype=t.dtype)
    zero = _C.zeros((), dtype=t.dtype)
    t = _C.where((q.probs == 0).expand_as(t), inf, t)   # mass where q has none: infinite
    t = _C.where((p.probs == 0).expand_as(t), zero, t)  # 0 * log 0 counts as 0
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    from ..nn.functional import softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _C.where(q.probs == 0, _C.full((), math.inf, dtype=t1.dtype), t1)
    t1 = _C.where(p.probs == 0, _C.zeros((), dtype=t1.dtype), t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _C.where(q.probs == 1, _C.full((), math.inf, dtype=t2.dtype), t2)
    t2 = _C.where(p.probs == 1, _C.zeros((), dtype=t2.dtype), t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return _C.where(outside, _C.full((), math.inf, dtype=result.dtype), result)
