"""ember.nn.functional (torch.nn.functional)."""
from .. import _C

one_hot = _C._one_hot  # one_hot(input, num_classes=-1): int64 one-hot rows, in C

__all__ = ["one_hot", "linear", "bilinear", "relu", "sigmoid", "tanh"]


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


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)
