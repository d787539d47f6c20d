"""nn.init: fill tensors in place with the distributions torch's layers use.
Every function runs under no_grad, returns the tensor, and takes
generator= so initialization can be made reproducible without touching
the global seed. Like torch's, they honour __torch_function__ on the tensor
they fill (a mode such as Lightning's empty-init one can skip them)."""
import functools
import math
import warnings

from .._lazy import numpy as np

from .. import _C
from ..autograd.grad_mode import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
           "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain (std multiplier) for a nonlinearity."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive, tensor.size(0) * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], by rejection (torch's current
    scheme, so the same generator gives the same numbers): when [a, b] holds
    more than 30% of the mass, normal draws outside it are redrawn; otherwise
    uniform proposals on [a, b] are kept with probability pdf(x) / pdf(mode)."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            lo, hi = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()  # bounds in the tensor's dtype
            tensor.normal_(mean, std, generator=generator)
            while True:
                outside = (tensor < lo) | (tensor > hi)
                if not outside.any():
                    return tensor
                tensor.copy_(_C.where(outside, _C.empty_like(tensor).normal_(mean, std, generator=generator),
                                      tensor))
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def log_ratio(x):  # log(pdf(x) / pdf(mode)), in place on x
            return x.sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
        accept = _C.empty_like(tensor)
        tensor.uniform_(a, b, generator=generator)
        proposal = log_ratio(tensor.clone())
        pending = accept.uniform_(generator=generator).log_().gt(proposal)
        while pending.any():
            proposal = _C.empty_like(tensor).uniform_(a, b, generator=generator)
            tensor.copy_(_C.where(pending, proposal, tensor))
            log_ratio(proposal)
            pending = _C.where(pending, accept.uniform_(generator=generator).log_().gt(proposal), pending)
        return tensor


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        tensor.zero_()
        n = min(tensor.shape)
        if n:
            tensor.diagonal().fill_(1)
    return tensor


def dirac_(tensor, groups=1):
    """The identity of a convolution: 1 at the centre of each kernel that maps
    input channel i to output channel i (per group)."""
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.size()
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    with no_grad():
        tensor.zero_()
        centre = tuple(s // 2 for s in sizes[2:])
        for g in range(groups):
            for i in range(min_dim):
                tensor[(g * out_per_group + i, i) + centre] = 1
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix: Q of the QR decomposition of a normal draw,
    its columns' signs fixed by R's diagonal so the result is unique. The QR
    is NumPy's (LAPACK) on the float64 draw."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    with no_grad():
        flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
        a = flat.double().numpy()
        if rows < cols:
            a = a.T
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        tensor.view(rows, cols).copy_(_C.from_numpy(np.ascontiguousarray(q)))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Normal(0, std) with a fraction `sparsity` of each column's rows set to zero."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            zero_rows = _C.randperm(rows, generator=generator)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


def _overridable(fn):
    """fn(tensor, ...) handed to the tensor's or a mode's __torch_function__ first."""
    @functools.wraps(fn)
    def wrapped(tensor, *args, **kwargs):
        if _C._has_torch_function_unary(tensor):
            from ..overrides import handle_torch_function
            return handle_torch_function(wrapped, (tensor,), tensor, *args, **kwargs)
        return fn(tensor, *args, **kwargs)
    return wrapped


for _name in __all__[1:]:
    globals()[_name] = _overridable(globals()[_name])
del _name
