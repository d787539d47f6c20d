"""The dropouts composed of ember ops in Python: dropout3d (whole channels of
volumes) and the self-normalizing alpha dropouts for SELU networks
(functional.py has dropout, dropout1d and dropout2d)."""
from .. import _C

__all__ = ["dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_NEG = 1.7580993408473766  # SELU's saturation value -scale * alpha, negated


def _noise(x, p, feature):
    """Bernoulli(1 - p) keep mask: one draw per element, or per (sample, channel) when feature."""
    if feature and x.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(x.shape[:2]) + (1,) * (x.dim() - 2) if feature else tuple(x.shape)
    from ..autograd.grad_mode import no_grad
    with no_grad():
        return _C.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1 - p)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) / (C, D, H, W) inputs, scaling the rest by 1 / (1 - p)."""
    _check_p(p)
    nd = input.dim()
    if nd not in (4, 5):
        import warnings
        warnings.warn(f"dropout3d: Received a {nd}-D input to dropout3d, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", stacklevel=2)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:  # torch zeroes any rank without drawing (a 0-d input included)
        return input.mul_(0) if inplace else input * 0
    x = input if nd == 5 else input.unsqueeze(0)
    keep = _noise(x, p, True)
    out = x * (keep / (1 - p))
    out = out if nd == 5 else out.squeeze(0)
    return input.copy_(out) if inplace else out


def _alpha_dropout(input, p, training, inplace, feature):
    """Dropped values become SELU's saturation value, then a * x + b keeps a
    zero mean and unit variance input at zero mean and unit variance."""
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        out = input * 0
    else:
        keep = _noise(input, p, feature)
        a = 1.0 / ((_SELU_NEG * _SELU_NEG * p + 1) * (1 - p)) ** 0.5
        out = input * (keep * a) + ((keep - 1) * (_SELU_NEG * a) + _SELU_NEG * a * p)
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout with one draw per (sample, channel)."""
    return _alpha_dropout(input, p, training, inplace, True)
