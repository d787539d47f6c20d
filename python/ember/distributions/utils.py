"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits."""
import numbers

from .. import _C
from .._dtype_info import finfo

__all__ = ["broadcast_all", "clamp_probs", "logits_to_probs", "probs_to_logits", "lazy_property"]


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers become default-dtype tensors."""
    for v in values:
        if not isinstance(v, (_C.Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number, "
                             "ember.Tensor or objects implementing __torch_function__.")
    if not any(isinstance(v, _C.Tensor) for v in values):
        dtype = _C.get_default_dtype()
        return tuple(_C.tensor(float(v), dtype=dtype) for v in values)
    ref = next(v for v in values if isinstance(v, _C.Tensor))
    tensors = [v if isinstance(v, _C.Tensor) else _C.tensor(v, dtype=ref.dtype) for v in values]
    return tuple(_C.broadcast_tensors(tensors))


def clamp_probs(probs):
    """Probabilities kept eps away from 0 and 1 (eps: the dtype's machine epsilon)."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    return _C.sigmoid(logits) if is_binary else _C.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    clamped = clamp_probs(probs)
    if is_binary:
        return _C.log(clamped) - _C.log1p(-clamped)
    return _C.log(clamped)


class lazy_property:
    """Computed on first access, then stored on the instance (so probs/logits derive lazily)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
