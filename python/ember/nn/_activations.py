"""The nn.functional activations composed of ember ops in Python: PReLU,
RReLU (random slopes in training), the hard / soft / tanh shrinks and
gumbel_softmax (functional.py has the ones that are C ops)."""
from .. import _C
from .._autocast_policy import lower_policy as _lower_policy
from .functional import _tensors, leaky_relu, softmax


def _float_only(kernel, input):
    """torch's shrink kernels exist for floating dtypes only."""
    if not input.is_floating_point():
        from .functional import _dtype_name
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_dtype_name(input.dtype)}'")


@_lower_policy
def prelu(input, weight):
    """x where x > 0, else weight * x; weight has one entry or one per channel (dim 1)."""
    _tensors("prelu", input=input, weight=weight)
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    n = weight.numel()
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                           f"and channel size = {channels}.")
    w = weight.reshape(()) if n == 1 else weight.reshape((channels,) + (1,) * (input.dim() - 2))
    return _C.where(input > 0, input, w * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) per element
    in training, and is (lower + upper) / 2 in evaluation."""
    _tensors("rrelu", input=input)
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    from ..autograd.grad_mode import no_grad
    with no_grad():
        slope = _C.empty(tuple(input.shape), dtype=input.dtype, device=input.device).uniform_(lower, upper)
        noise = _C.where(input >= 0, _C.ones_like(slope), slope)
    out = input * noise
    return input.copy_(out) if inplace else out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    _tensors("hardshrink", input=input)
    _float_only("hardshrink_cpu", input)
    return input.masked_fill((input >= -lambd) & (input <= lambd), 0.0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between (and on the bounds: no gradient there)."""
    _tensors("softshrink", input=input)
    _float_only("softshrink_check", input)
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    zero = _C.zeros((), dtype=input.dtype, device=input.device)
    return _C.where(input > lambd, input - lambd, _C.where(input < -lambd, input + lambd, zero))


def tanhshrink(input):
    _tensors("tanhshrink", input=input)
    return input - input.tanh()


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) with g ~ Gumbel(0, 1); hard=True returns the
    one-hot of the argmax whose gradient is the soft sample's (straight-through)."""
    from ..autograd.grad_mode import no_grad
    with no_grad():
        gumbels = -_C.empty_like(logits).exponential_().log()
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _C.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


__all__ = ["prelu", "rrelu", "rrelu_", "hardshrink", "softshrink", "tanhshrink", "gumbel_softmax"]
