"""ember.nn.functional (torch.nn.functional)."""
from .. import _C

one_hot = _C._one_hot  # one_hot(input, num_classes=-1): int64 one-hot rows, in C

__all__ = ["one_hot", "linear", "bilinear", "relu", "sigmoid", "tanh", "layer_norm", "rms_norm", "embedding",
           "dropout", "dropout1d", "dropout2d"]


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


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing normalized_shape dims, then scale and shift (one fused C kernel)."""
    return _C._native_layer_norm(input, _shape(normalized_shape), weight, bias, eps)[0]


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps defaults to finfo(dtype).eps."""
    return _C._rms_norm(input, _shape(normalized_shape), weight, eps)[0]


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of weight picked by the integer indices in input; the padding_idx row gets no gradient."""
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = weight.size(0) + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        _renorm_rows_(weight, input, max_norm, norm_type)
    return _C.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


def _renorm_rows_(weight, input, max_norm, norm_type):
    """max_norm: the rows input refers to are rescaled in place (no gradient) to norm <= max_norm."""
    from ..autograd.grad_mode import no_grad
    from ..linalg import vector_norm
    with no_grad():
        rows = _C.unique(input.reshape(-1))
        picked = weight.index_select(0, rows)
        norms = vector_norm(picked, norm_type, dim=1, keepdim=True)
        scale = _C.where(norms > max_norm, max_norm / (norms + 1e-7), _C.ones_like(norms))
        weight.index_copy_(0, rows, picked * scale)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training only)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input  # nothing is dropped: torch returns the input itself too
    out = _C._native_dropout(input, p, True)[0]
    return input.copy_(out) if inplace else out


def _channel_dropout(input, p, training, inplace, batched_ndim, name):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, but received a "
                           f"{input.dim()}D input.")
    if not training or p == 0.0:
        return input
    lead = 2 if input.dim() == batched_ndim else 1  # (N, C) or (C,): one draw per channel
    keep = input.new_empty(tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)).bernoulli_(1 - p)
    out = input * (keep / (1 - p) if p < 1 else keep * 0)
    return input.copy_(out) if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) / (C, L) inputs."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) / (C, H, W) inputs."""
    return _channel_dropout(input, p, training, inplace, 4, "dropout2d")


def _shape(s):
    return (s,) if isinstance(s, int) else tuple(s)


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)
