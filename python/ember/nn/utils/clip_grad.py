"""Gradient clipping (torch.nn.utils.clip_grad_*): scale or clamp the .grad
of parameters in place, as training loops call between backward and step."""
import math

from ... import _C
from ...autograd.grad_mode import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of all tensors together, as if concatenated into one vector."""
    if isinstance(tensors, _C.Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _C.tensor(0.0)
    from ...linalg import vector_norm
    with no_grad():
        # one parallel pass over all of them (ops/foreach.c)
        norms = _C._foreach_norm(tensors, norm_type)
        total = vector_norm(_C.stack([n.to(tensors[0].dtype) for n in norms]), norm_type)
    if error_if_nonfinite and (bool(total.isnan()) or bool(total.isinf())):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
            "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
            "anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by max_norm / (total_norm + 1e-6) when that is below 1."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        _C._foreach_mul_(grads, coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all gradients together so that their total norm is at most max_norm;
    returns the total norm before clipping."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    if math.isnan(clip_value):
        raise ValueError("clip_value must not be NaN")
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
