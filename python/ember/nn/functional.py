"""ember.nn.functional (torch.nn.functional)."""
from .. import _C

one_hot = _C._one_hot  # one_hot(input, num_classes=-1): int64 one-hot rows, in C

__all__ = ["one_hot", "linear", "bilinear", "relu", "relu_", "sigmoid", "tanh",
           "gelu", "silu", "mish", "softplus", "softsign", "elu", "elu_", "selu", "selu_",
           "celu", "celu_", "leaky_relu", "leaky_relu_", "hardtanh", "hardtanh_", "relu6",
           "hardswish", "hardsigmoid", "logsigmoid", "threshold", "threshold_", "glu"]


def linear(input, weight, bias=None):
    """input @ weight^T + bias. Inputs of more than two dims are folded into
    rows so that the product and the bias are one BLAS call (addmm)."""
    if input.dim() == 2 and bias is not None and weight.dim() == 2:
        return _C.addmm(bias, input, weight.t())
    if input.dim() > 2 and weight.dim() == 2:
        rows = input.reshape(-1, input.shape[-1])
        out = _C.addmm(bias, rows, weight.t()) if bias is not None else rows.mm(weight.t())
        return out.view(*input.shape[:-1], weight.shape[0])
    out = input.matmul(weight.t() if weight.dim() == 2 else weight)
    return out + bias if bias is not None else out


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {tuple(input1.shape[:-1])} "
                           f"and {tuple(input2.shape[:-1])}")
    if weight.dim() != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): weight of shape {tuple(weight.shape)} does not fit inputs of "
                           f"sizes {input1.shape[-1]} and {input2.shape[-1]}")
    from ..functional import einsum
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


# -- activations: each is one C op (csrc/ops/activation.c) with its own backward
# node; inplace=True runs the op's in-place variant, as torch does.

def gelu(input, approximate="none"):
    """x·Φ(x), or the tanh approximation with approximate='tanh'."""
    return _C._gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return input._silu_() if inplace else _C._silu(input)


def mish(input, inplace=False):
    return input._mish_() if inplace else _C._mish(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _C._softplus(input, beta, threshold)


def softsign(input):
    """x / (1 + |x|), composed of ops as torch does (so its node is DivBackward0)."""
    return input / (input.abs() + 1)


def elu(input, alpha=1.0, inplace=False):
    return input._elu_(alpha) if inplace else _C._elu(input, alpha)


def elu_(input, alpha=1.0):
    return input._elu_(alpha)


def selu(input, inplace=False):
    return input.selu_() if inplace else _C.selu(input)


def selu_(input):
    return input.selu_()


def celu(input, alpha=1.0, inplace=False):
    return input.celu_(alpha) if inplace else _C.celu(input, alpha)


def celu_(input, alpha=1.0):
    return input.celu_(alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return input._leaky_relu_(negative_slope) if inplace else _C._leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return input._leaky_relu_(negative_slope)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input._hardtanh_(min_val, max_val) if inplace else _C._hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """hardtanh(input, 0, 6), as torch runs it (node HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace=inplace)


def hardswish(input, inplace=False):
    return input._hardswish_() if inplace else _C._hardswish(input)


def hardsigmoid(input, inplace=False):
    return input._hardsigmoid_() if inplace else _C._hardsigmoid(input)


def logsigmoid(input):
    return _C._log_sigmoid(input)


def threshold(input, threshold, value, inplace=False):
    return input.threshold_(threshold, value) if inplace else _C.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return input.threshold_(threshold, value)


def glu(input, dim=-1):
    """a·σ(b) where a and b are the halves of input along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    return _C._glu(input, dim)
