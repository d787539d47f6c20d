"""ember.nn.functional (torch.nn.functional)."""
from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy

one_hot = _C._one_hot  # one_hot(input, num_classes=-1): int64 one-hot rows, in C

__all__ = ["one_hot", "linear", "bilinear", "relu", "relu_", "sigmoid", "tanh", "layer_norm", "rms_norm",
           "embedding", "dropout", "dropout1d", "dropout2d",
           "gelu", "silu", "mish", "softplus", "softsign", "elu", "elu_", "selu", "selu_",
           "celu", "celu_", "leaky_relu", "leaky_relu_", "hardtanh", "hardtanh_", "relu6",
           "hardswish", "hardsigmoid", "logsigmoid", "threshold", "threshold_", "glu"]


def _tensors(fn, **args):
    """TypeError, as torch's argument parser raises, for an argument that is not a Tensor."""
    for pos, (name, v) in enumerate(args.items()):
        if not isinstance(v, _C.Tensor):
            raise TypeError(f"{fn}(): argument '{name}' (position {pos + 1}) must be Tensor, not {type(v).__name__}")


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


def _feature_dropout(input, p, training, inplace):
    """torch's feature dropout: one keep draw per (dim 0, dim 1) pair, broadcast over the rest."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:  # no draw, so no rank check either (torch's order)
        out = input * 0
    else:
        if input.dim() < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        keep = input.new_empty(tuple(input.shape[:2]) + (1,) * (input.dim() - 2)).bernoulli_(1 - p)
        out = input * (keep / (1 - p))
    return input.copy_(out) if inplace else out


def _check_dropout_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) / (C, L) inputs."""
    _check_dropout_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
                           "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.dim() == 3:
        return _feature_dropout(input, p, training, inplace)
    out = _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)
    return input.copy_(out) if inplace and out is not input else out


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) inputs. As in torch, other ranks only warn and
    keep the (N, C, ...) reading: a 3-d input is (N, C, L), not an unbatched (C, H, W)."""
    import warnings
    _check_dropout_p(p)
    nd = input.dim()
    if nd not in (3, 4):
        warnings.warn(f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with "
                      "2 spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                      "dim. This behavior will change in a future release to interpret the input as one without "
                      "a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                      "behavior, please switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def _shape(s):
    return (s,) if isinstance(s, int) else tuple(s)


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


# ---------------------------------------------------------------------------
# softmax family and losses. softmax / log_softmax, nll_loss and
# the pointwise losses (mse, smooth_l1, huber, binary cross-entropy) are C ops
# with their own autograd nodes (csrc/ops/softmax.c, csrc/ops/loss.c); the
# others compose ember ops the way torch composes them, so the graphs (and
# node names) are torch's.

import warnings as _warnings

__all__ += ["softmax", "log_softmax", "softmin", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
            "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
            "kl_div", "cosine_similarity", "pairwise_distance", "pdist", "normalize"]

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _legacy_reduction(size_average, reduce, emit_warning=True):
    """torch's mapping of the deprecated size_average / reduce flags to a reduction string."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    if emit_warning:
        _warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                       stacklevel=3)
    return ret


def _reduction_enum(reduction, size_average=None, reduce=None, allowed=_REDUCTIONS):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return allowed[reduction]


def _softmax_dim(name, ndim, stacklevel):
    _warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                   "Change the call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, in one fused C pass per row."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return _C.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return _C.log_softmax(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x): torch's graph is SoftmaxBackward0 over NegBackward0."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return _C.softmax(-input, dim, dtype)


def _no_weight_grad(weight):
    from ..autograd.grad_mode import is_grad_enabled
    if weight is not None and weight.requires_grad and is_grad_enabled():
        raise RuntimeError("The function 'nll_loss_forward' is not differentiable with respect to argument "
                           "'weight'. This input cannot have requires_grad True.")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    _no_weight_grad(weight)
    return _C._nll_loss(input, target, weight, _reduction_enum(reduction, size_average, reduce), ignore_index)


def _class_weight_view(weight, ndim):
    """weight (C) shaped to broadcast along the class dim (1, or 0 for 1-D input)."""
    return weight if ndim == 1 else weight.view(1, -1, *([1] * (ndim - 2)))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Class-index targets: one fused op (_C._cross_entropy: log-sum-exp and the picked logit in
    one pass, no log-probabilities written; Note [fused cross-entropy]) whose node is torch's top
    node (NllLossBackward0, or AddBackward0 with label smoothing). Class-probability targets:
    log_softmax over the class dim (1, or 0 for unbatched input), then -sum(target * logp)."""
    red = _reduction_enum(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.dim() == 0:
        raise RuntimeError("cross_entropy(): input must have at least one dimension (the classes)")
    class_dim = 0 if input.dim() == 1 else 1
    n_classes = input.shape[class_dim]
    if tuple(target.shape) == tuple(input.shape):
        if not target.is_floating_point():
            raise RuntimeError("Expected floating point type for target with class probabilities, "
                               f"got {_dtype_name(target.dtype)}")
        logp = _C.log_softmax(input, class_dim)
        return _cross_entropy_probs(logp, target, weight, red, label_smoothing, class_dim, n_classes)
    if target.is_floating_point() or target.dtype not in (_int64(), _uint8()):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(target.dtype)}")
    _no_weight_grad(weight)
    return _C._cross_entropy(input, target, weight, red, ignore_index, float(label_smoothing))[0]


def _cross_entropy_probs(logp, target, weight, red, label_smoothing, class_dim, n_classes):
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        logp = logp * _class_weight_view(weight, logp.dim())
    terms = logp * target
    if red == 0:
        return -terms.sum(class_dim)
    if red == 2:
        return -terms.sum()
    return -terms.sum() / (logp.numel() / n_classes)


def _int64():
    from .. import int64
    return int64


def _uint8():
    from .. import uint8
    return uint8


def _dtype_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int32": "Int",
            "int16": "Short", "int8": "Char", "bool": "Bool", "int64": "Long", "uint8": "Byte"}.get(
                str(dtype).replace("ember.", ""), str(dtype))


def _warn_size(input, target, stacklevel=3):
    if tuple(target.shape) != tuple(input.shape):
        _warnings.warn(f"Using a target size ({target.size()}) that is different to the input size "
                       f"({input.size()}). This will likely lead to incorrect results due to broadcasting. "
                       "Please ensure they have the same size.", stacklevel=stacklevel)


def _bool_target(input, target):
    """torch's fused mse / smooth_l1 / huber kernels read a bool target as 0 / 1 in the input's
    dtype; ember's subtract refuses bool, so convert first."""
    return target.to(input.dtype) if target.dtype == _bool() else target


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    red = _reduction_enum(reduction, size_average, reduce)
    _warn_size(input, target)
    target = _bool_target(input, target)
    if weight is not None:
        return _weighted(_C._pointwise_loss(input, target, None, None, 0, 0, 1.0), input, weight, red, True)
    return _C._pointwise_loss(input, target, None, None, 0, red, 1.0)


def _weighted(loss, input, weight, red, mean_by_weight):
    """torch's weighted mse / l1 / huber: loss * weight, then summed, and divided by the weights'
    sum (mse, l1) or their count (huber) for 'mean'."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if red == 0:
        return loss
    if red == 2:
        return loss.sum()
    return loss.sum() / weight.sum() if mean_by_weight else loss.mean()


@_fp32_policy
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, reduced with ember's mean / sum (torch's graph: MeanBackward0 over AbsBackward0)."""
    red = _reduction_enum(reduction, size_average, reduce)
    _warn_size(input, target)
    loss = (input - target).abs()
    if weight is not None:
        return _weighted(loss, input, weight, red, True)
    return loss if red == 0 else loss.mean() if red == 1 else loss.sum()


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    red = _reduction_enum(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_size(input, target)
    target = _bool_target(input, target)
    if beta == 0.0:  # torch: plain l1_loss then
        return l1_loss(input, target, reduction=reduction)
    return _C._pointwise_loss(input, target, None, None, 1, red, float(beta))


@_fp32_policy
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    red = _reduction_enum(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_size(input, target)
    target = _bool_target(input, target)
    if weight is not None:
        return _weighted(_C._pointwise_loss(input, target, None, None, 2, 0, float(delta)), input, weight, red, False)
    loss = _C._pointwise_loss(input, target, None, None, 2, red, float(delta))
    # torch's huber keeps the input's dtype (mse / smooth_l1 promote with the target's)
    return loss if loss.dtype == input.dtype or not input.is_floating_point() else loss.to(input.dtype)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    red = _reduction_enum(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input size "
                         f"({input.size()}) is deprecated. Please ensure they have the same size.")
    if target.dtype != input.dtype:  # torch's kernel takes no promotion: int / bool / other-width targets
        raise RuntimeError(f"Found dtype {_dtype_name(target.dtype)} but expected {_dtype_name(input.dtype)}")
    if weight is not None:
        weight = weight.expand(target.shape)
    return _C._pointwise_loss(input, target, weight, None, 3, red, 1.0)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Numerically stable: (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x), never exp of a large x."""
    red = _reduction_enum(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    if target.dtype == _bool():
        raise NotImplementedError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                                  "Use the `^` or `logical_xor()` operator instead.")
    if not target.is_floating_point() and input.is_floating_point():  # torch's 1 - target is written in place
        raise RuntimeError(f"result type {_dtype_name(input.dtype)} can't be cast to the desired output type "
                           f"{_dtype_name(target.dtype)}")
    return _C._pointwise_loss(input, target, weight, pos_weight, 4, red, 1.0)


@_fp32_policy
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise target * (log target - input) (input holds log-probabilities), as torch composes it."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        _warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                       "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                       "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                       stacklevel=2)
    if not input.is_floating_point() or not target.is_floating_point():
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        zero = target == 0  # xlogy(t, t): 0 where t == 0, without a NaN gradient there
        safe = target.masked_fill(zero, 1.0)
        loss = (target * safe.log()).masked_fill(zero, 0.0) - target * input
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / input.shape[0] if input.dim() != 0 else loss.sum()


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps)), dim) over the broadcast inputs."""
    from .. import broadcast_tensors, linalg
    a, b = broadcast_tensors(x1, x2)
    if not a.is_floating_point():
        a, b = a.float(), b.float()
    na = linalg.vector_norm(a, 2, dim=dim, keepdim=True).clamp_min(eps)
    nb = linalg.vector_norm(b, 2, dim=dim, keepdim=True).clamp_min(eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm of x1 - x2 + eps along the last dim."""
    from .. import norm
    out_dim = max(x1.dim(), x2.dim())
    if out_dim == 0:
        return norm(x1 - x2 + eps, p, None, keepdim)
    return norm(x1 - x2 + eps, p, out_dim - 1, keepdim)


def pdist(input, p=2):
    """p-norm distances between the rows of an (N, M) input, for i < j in row-major order: N (N - 1) / 2 values."""
    _tensors("pdist", input=input)
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from ..linalg import vector_norm
    n = input.shape[0]
    ij = _C.triu_indices(n, n, 1, device=input.device)
    return vector_norm(input.index_select(0, ij[0]) - input.index_select(0, ij[1]), p, dim=1)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    from .. import div
    return div(input, denom, out=out)
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


# ---------------------------------------------------------------------------
# attention: torch's CPU flash kernel where torch uses it (a fused C op that
# streams over key blocks and never builds the L x S scores,
# csrc/cpu/attention.c), on CUDA tensors torch's CUDA flash op
# (csrc/cuda/attention.cu) under torch's flash conditions, else the composition torch documents as its
# reference (scores, mask, softmax, dropout, weighted sum) on ember's C ops.
__all__ += ["scaled_dot_product_attention"]

# torch's C++ dtype names, as its messages print them
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _cpp(dtype):
    return _CPP_NAMES.get(str(dtype).replace("torch.", "").replace("ember.", ""), str(dtype))


def _fused_attention_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
    """The conditions under which torch's CPU dispatch picks its flash kernel
    (torch falls back to its math path otherwise): 3-d or 4-d inputs alike,
    no dropout, no mask that needs a gradient, a 2-d or 4-d mask (3-d with
    3-d inputs), equal batch sizes and head dims, key/value heads equal to
    the query's (or dividing them with enable_gqa), nothing empty, unit
    stride along the head dim."""
    nd = query.dim()
    if nd not in (3, 4) or key.dim() != nd or value.dim() != nd or dropout_p > 0.0:
        return False
    if not query.dtype.is_floating_point or query.device.type != "cpu":
        return False
    if attn_mask is not None and (attn_mask.requires_grad or attn_mask.dim() not in ((2, 3) if nd == 3 else (2, 4))):
        return False
    if nd == 4 and not (query.size(0) == key.size(0) == value.size(0)):
        return False
    hq, hk = query.size(-3), key.size(-3)
    if value.size(-3) != hk or not (hq == hk or (enable_gqa and hq % hk == 0)):
        return False
    if not (query.size(-1) == key.size(-1) == value.size(-1)) or key.size(-2) != value.size(-2):
        return False
    if query.numel() == 0 or key.numel() == 0:
        return False
    return query.stride(-1) == 1 and key.stride(-1) == 1 and value.stride(-1) == 1


def _cuda_flash_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
    """torch's conditions for its CUDA flash kernel, which ember's GPU flash
    op (csrc/cuda/attention.cu) follows: 4-d CUDA tensors of float16 or
    bfloat16, no mask, one head dim (a multiple of 8, at most 256), equal
    batch sizes, key/value heads equal to the query's (or dividing them with
    enable_gqa), nothing empty, unit stride along the head dim. Dropout runs
    inside the kernel. float32 and masks take the memory-efficient op."""
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4 or attn_mask is not None:
        return False
    if query.device.type != "cuda" or str(query.dtype).split(".")[-1] not in ("float16", "bfloat16"):
        return False
    d = query.size(-1)
    if not (d == key.size(-1) == value.size(-1)) or d % 8 or d > 256 or key.size(-2) != value.size(-2):
        return False
    if not (query.size(0) == key.size(0) == value.size(0)):
        return False
    hq, hk = query.size(1), key.size(1)
    if value.size(1) != hk or not (hq == hk or (enable_gqa and hk > 0 and hq % hk == 0)):
        return False
    if query.numel() == 0 or key.numel() == 0:
        return False
    return query.stride(-1) == 1 and key.stride(-1) == 1 and value.stride(-1) == 1


def _cuda_efficient_applies(query, key, value, attn_mask, enable_gqa):
    """Where torch runs its CUDA memory-efficient kernel outside flash's
    conditions, which ember's _scaled_dot_product_efficient_attention (the
    same kernels, csrc/cuda/attention.cu) follows: 4-d CUDA tensors of
    float32, float16 or bfloat16, one head dim (a multiple of 4 for float32,
    of 8 for the half types, as torch's; at most 256: ember's kernels), equal
    batch sizes, key/value heads equal to the
    query's (or dividing them with enable_gqa), nothing empty, a mask (bool
    or additive) that broadcasts to (B, H, L, S), lives on the GPU and needs
    no gradient (the kernel gives it none). Dropout runs inside the kernel."""
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4 or query.device.type != "cuda":
        return False
    dt = str(query.dtype).split(".")[-1]
    if dt not in ("float32", "float16", "bfloat16"):
        return False
    d = query.size(-1)
    if not (d == key.size(-1) == value.size(-1)) or d > 256 or d % (4 if dt == "float32" else 8):
        return False
    if key.size(-2) != value.size(-2):
        return False
    if not (query.size(0) == key.size(0) == value.size(0)):
        return False
    hq, hk = query.size(1), key.size(1)
    if value.size(1) != hk or not (hq == hk or (enable_gqa and hk > 0 and hq % hk == 0)):
        return False
    if query.numel() == 0 or key.numel() == 0:
        return False
    if attn_mask is not None:
        if attn_mask.requires_grad or attn_mask.device.type != "cuda" or attn_mask.dim() > 4:
            return False
        full = (query.size(0), hq, query.size(2), key.size(2))
        if any(m != 1 and m != f for m, f in zip(tuple(attn_mask.shape)[::-1], full[::-1])):
            return False
    return True


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims. attn_mask: bool
    (True takes part) or additive; is_causal: the top-left lower triangle.
    Rows where nothing takes part come out zero, as torch's CPU kernel gives."""
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at least 2 dimensions")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cpp(query.dtype)} key.dtype: {_cpp(key.dtype)} and value.dtype: {_cpp(value.dtype)} "
                           f"instead.")
    if attn_mask is not None and attn_mask.dim() < 2:  # torch reads the mask's size(-2)
        raise IndexError("Dimension specified as -2 but tensor has no dimensions" if attn_mask.dim() == 0 else
                         "Dimension out of range (expected to be in range of [-1, 0], but got -2)")
    if attn_mask is not None and attn_mask.dtype not in (_bool(), _float32(), query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {_cpp(attn_mask.dtype)} and  query.dtype: {_cpp(query.dtype)} instead.")
    if query.size(-1) != key.size(-1) or key.size(-2) != value.size(-2):
        raise RuntimeError(f"scaled_dot_product_attention: shapes query {tuple(query.shape)}, key "
                           f"{tuple(key.shape)} and value {tuple(value.shape)} don't fit")
    if enable_gqa and query.dim() >= 3 and (key.size(-3) == 0 or query.size(-3) % key.size(-3)
                                            or value.size(-3) == 0 or query.size(-3) % value.size(-3)):
        raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
    from .attention import SDPBackend, _allowed  # ember.nn.attention.sdpa_kernel's switches
    flash = _allowed(SDPBackend.FLASH_ATTENTION)
    if flash and _cuda_flash_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
        return _C._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, scale=scale)[0]
    if _allowed(SDPBackend.EFFICIENT_ATTENTION) and _cuda_efficient_applies(query, key, value, attn_mask, enable_gqa):
        grad = query.requires_grad or key.requires_grad or value.requires_grad
        return _C._scaled_dot_product_efficient_attention(query, key, value, attn_mask, grad, dropout_p, is_causal,
                                                          scale=scale)[0]
    if flash and _fused_attention_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
        mask = attn_mask
        if mask is not None and mask.dtype != _bool() and mask.dtype != query.dtype:
            mask = mask.to(query.dtype)  # torch rounds a float32 mask to half queries' dtype
        if query.dim() == 3:  # torch runs 3-d inputs as one batch and squeezes it away
            if mask is not None and mask.dim() == 3:
                mask = mask.unsqueeze(0)
            out = _C._scaled_dot_product_flash_attention_for_cpu(query.unsqueeze(0), key.unsqueeze(0),
                                                                 value.unsqueeze(0), 0.0, is_causal,
                                                                 attn_mask=mask, scale=scale)[0]
            return out.squeeze(0)
        return _C._scaled_dot_product_flash_attention_for_cpu(query, key, value, 0.0, is_causal, attn_mask=mask,
                                                              scale=scale)[0]
    if not _allowed(SDPBackend.MATH):
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. This is likely due to "
                           "turning off both the math kernel and the fused kernels.")
    return _composed_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _composed_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    import math
    L, S = query.size(-2), key.size(-2)
    if enable_gqa and query.dim() >= 3 and key.size(-3) != query.size(-3):
        hq = query.size(-3)
        key = key.repeat_interleave(hq // key.size(-3), -3)
        value = value.repeat_interleave(hq // value.size(-3), -3)
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    keep = None
    if is_causal:  # keep[i, j] = j <= i, built on the queries' device
        keep = _C.arange(L, device=query.device).unsqueeze(1) >= _C.arange(S, device=query.device)
        if S > 0:  # every row keeps its first key: plain softmax
            attn = _C.softmax(_C.where(keep, scores, float("-inf")), -1)
            return (dropout(attn, dropout_p) if dropout_p > 0.0 else attn) @ value
    elif attn_mask is not None:
        if attn_mask.dtype == _bool():
            keep = attn_mask
        else:
            scores = scores + attn_mask
    if keep is None:
        attn = _C.softmax(scores, -1)
    else:
        scores = scores.masked_fill(~keep, float("-inf"))
        rows_used = keep.any(-1, keepdim=True)
        if not rows_used.is_meta and bool(rows_used.all()):  # (meta: no values, the general form's shapes)
            attn = _C.softmax(scores, -1)
        else:  # an all -inf row would be 0/0: give it zeros (and no gradient)
            attn = _C.softmax(scores.masked_fill(~rows_used, 0.0), -1) * rows_used
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return attn @ value


def _float32():
    from .. import float32 as f
    return f


def _bool():
    from .. import bool as b
    return b


# ---------------------------------------------------------------------------
# padding (composed on C ops), and im2col / col2im / convolution on their C
# kernels (ops/conv.c)
__all__ += ["pad", "unfold", "fold", "conv1d", "conv2d"]


def _keep_layout(y, x):
    """y laid out in the memory format x's strides suggest, as torch lays out
    the results of pad, pixel_shuffle, adaptive pooling and 5-d interpolation
    (their compositions here build contiguous tensors)."""
    f = _C._suggest_memory_format(x)
    return y if f is _C.contiguous_format or y.dim() != x.dim() else y.clone(memory_format=f)


def pad(input, pad, mode="constant", value=None):
    """Pad (or, with negative sizes, crop) the last len(pad) // 2 dims: pad =
    (left, right) of the last dim, then of the one before, ..."""
    import numpy as np
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pad) // 2
    if k > input.dim():
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but "
                           f"got padding length {len(pad)} and input of dimension {input.dim()}")
    if mode == "constant":  # crops narrow; pads concatenate constant blocks (cat: differentiable twice)
        x = input
        fill = 0 if value is None else value
        for i in range(k):
            d, lo, hi = input.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
            if lo < 0:
                x = x.narrow(d, -lo, x.size(d) + lo)
            if hi < 0:
                x = x.narrow(d, 0, x.size(d) + hi)
            parts = []
            for n in (lo, None, hi):
                if n is None:
                    parts.append(x)
                elif n > 0:
                    shape = list(x.shape)
                    shape[d] = n
                    parts.append(x.new_full(shape, fill))
            if len(parts) > 1:
                x = _C.cat(parts, d)
        return x.clone() if x is input else _keep_layout(x, input)  # clone keeps a dense input's layout
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument.')
    if k not in (1, 2, 3) or input.dim() not in (k + 1, k + 2):
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.")
    x = input
    for i in range(k):
        d, lo, hi = input.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = x.size(d)
        limit = n if mode == "reflect" else n + 1 if mode == "circular" else None
        if limit is not None and (lo >= limit or hi >= limit):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {d} of input {list(input.shape)}")
        idx = np.arange(-lo, n + hi)
        if mode == "reflect":
            idx = np.abs(idx)
            idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, n - 1)
        else:
            idx = idx % n
        x = x.index_select(d, _C.from_numpy(np.ascontiguousarray(idx, dtype=np.int64)).to(x.device))
    return x if mode == "circular" else _keep_layout(x, input)  # torch's circular pad is contiguous


def _pair(v, name):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(v) != 2:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 values to match the "
                           f"convolution dimensions, but got {name}={list(v)}")
    return v


def _check_window(k, s, d, p):
    """Kernel, stride and dilation must be positive, padding non-negative (as torch checks)."""
    for name, v, low in (("kernel_size", k, 1), ("stride", s, 1), ("dilation", d, 1), ("padding", p, 0)):
        if any(x < low for x in v):
            raise RuntimeError(f"{name} should be {'greater than zero' if low else 'non-negative'}, but got "
                               f"{name}={list(v)}")


def _spatial(v):
    """An int or a sequence as the list the C ops take (they check its length, as torch's ops do)."""
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)]


def _pair_list(v):
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)] * 2


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), the sliding blocks as columns (also unbatched (C, H, W))."""
    return _C._im2col(input, _pair_list(kernel_size), _pair_list(dilation), _pair_list(padding),
                      _pair_list(stride))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: (N, C * kh * kw, L) -> (N, C, *output_size), overlapping blocks summed (also unbatched)."""
    return _C._col2im(input, _pair_list(output_size), _pair_list(kernel_size), _pair_list(dilation),
                      _pair_list(padding), _pair_list(stride))


def _conv(input, weight, bias, stride, padding, dilation, groups, spatial, name):
    """conv1d / conv2d / conv3d: batched or not, padding as numbers or 'valid' / 'same', on the C op."""
    from ._conv_nd import _expect_tensors
    _expect_tensors(name, ("input", input, False), ("weight", weight, False), ("bias", bias, True))
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input to {name}, but "
                           f"got input of size: {list(input.shape)}")
    batched = input.dim() == spatial + 2
    x = input if batched else input.unsqueeze(0)
    stride, dilation = _spatial(stride), _spatial(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0]
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            kernel = list(weight.shape[2:])
            dil = dilation * len(kernel) if len(dilation) == 1 else dilation
            if len(dil) == len(kernel):
                total = [d * (k - 1) for d, k in zip(dil, kernel)]
                padding = [t // 2 for t in total]
                if any(t % 2 for t in total):  # odd total: the extra one at the end, as torch pads it
                    _warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a "
                                  "zero-padded copy of the input be created", UserWarning, stacklevel=3)
                    x = pad(x, [v for t in reversed(total) for v in (0, t % 2)])
            else:
                padding = [0]  # the op reports the dilation's length
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        padding = _spatial(padding)
    out = _C._convolution(x, weight, bias, stride, padding, dilation, int(groups))
    return out if batched else out.squeeze(0)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation of (N, C, H, W) with (C_out, C / groups, kh, kw): im2col + one GEMM per group, in C."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation of (N, C, L) with (C_out, C / groups, k), in C."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


# ---------------------------------------------------------------------------
# pooling: C ops over (C, H, W) / (N, C, H, W) planes (csrc/ops/poolnorm.c);
# the 1-d pools run on a height of one, as torch's do
__all__ += ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d"]


def _pool_args(input, name, spatial, kernel_size, stride, padding, dilation):
    """The input as (C, H, W) or (N, C, H, W) and (kernel, stride, padding, dilation) as pairs (1-d pools: H = 1)."""
    want = (spatial + 1, spatial + 2)
    if input.dim() not in want:
        raise RuntimeError(f"{name}: Expected {want[0]}D or {want[1]}D (batch mode) tensor for input, but got "
                           f"{input.dim()}D")
    if spatial == 1:
        x = input.unsqueeze(-2)
        lift = lambda v, one: (one, v if isinstance(v, int) else v[0])  # noqa: E731
    else:
        x = input
        lift = lambda v, one: _pair(v, "kernel_size")  # noqa: E731
    stride = kernel_size if stride is None or (isinstance(stride, (list, tuple)) and not stride) else stride
    k, s, p, d = lift(kernel_size, 1), lift(stride, 1), lift(padding, 0), lift(dilation, 1)
    _check_window(k, s, d, p)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={max(p)}, "
                           f"kernel_size={max(k)} and dilation={max(d)}")
    return x, k, s, p, d


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, spatial):
    x, k, s, p, d = _pool_args(input, f"max_pool{spatial}d", spatial, kernel_size, stride, padding, dilation)
    out, idx = _C._max_pool2d_with_indices(x, k, s, p, d, bool(ceil_mode))
    if spatial == 1:
        out, idx = out.squeeze(-2), idx.squeeze(-2)
    return (out, idx) if return_indices else out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if not return_indices and not input.dtype.is_floating_point:  # torch's kernel without indices: floats only
        names = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long"}
        raise NotImplementedError(f"\"max_pool1d_impl\" not implemented for '{names[str(input.dtype)[6:]]}'")
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    x, k, s, p, _ = _pool_args(input, "avg_pool2d", 2, kernel_size, stride, padding, 1)
    return _C._avg_pool2d(x, k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    x, k, s, p, _ = _pool_args(input, "avg_pool1d", 1, kernel_size, stride, padding, 1)
    return _C._avg_pool2d(x, k, s, p, bool(ceil_mode), bool(count_include_pad), None).squeeze(-2)


def _adaptive_avg_pool2d(x, oh, ow):
    """x (C, H, W) or (N, C, H, W); a size of None keeps the input's."""
    oh = x.shape[-2] if oh is None else oh
    ow = x.shape[-1] if ow is None else ow
    if oh == 1 and ow == 1 and x.numel() and _C._suggest_memory_format(x) is _C.contiguous_format:
        return x.mean((-1, -2), keepdim=True)  # one window: a mean, as torch computes it (MeanBackward1)
    return _C._adaptive_avg_pool2d(x, (oh, ow))


def adaptive_avg_pool2d(input, output_size):
    x, *_ = _pool_args(input, "adaptive_avg_pool2d", 2, 1, 1, 0, 1)
    oh, ow = (output_size, output_size) if isinstance(output_size, int) or output_size is None else output_size
    return _adaptive_avg_pool2d(x, oh, ow)


def adaptive_avg_pool1d(input, output_size):
    x, *_ = _pool_args(input, "adaptive_avg_pool1d", 1, 1, 1, 0, 1)
    size = output_size if isinstance(output_size, int) else output_size[0]
    return _C._adaptive_avg_pool2d(x, (1, size)).squeeze(-2)


# ---------------------------------------------------------------------------
# batch, instance and group normalization: C ops (csrc/ops/poolnorm.c); local
# response normalization composed of them
__all__ += ["batch_norm", "instance_norm", "group_norm", "local_response_norm"]


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) by the batch's statistics (training: the
    running ones are updated in place) or by the running ones (evaluation)."""
    if input.dim() < 2:
        raise ValueError(f"expected 2D or more input (got {input.dim()}D input)")
    if training:
        C = input.shape[1]
        count = input.numel() // max(C, 1)
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.requires_grad and _C.is_grad_enabled():
            raise RuntimeError(f"The function 'native_batch_norm' is not differentiable with respect to argument "
                               f"'{name}'. This input cannot have requires_grad True.")
    return _C._native_batch_norm(input, weight, bias, running_mean, running_var, bool(training), momentum, eps)[0]


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) over its positions: batch_norm on the
    (1, N * C, ...) view; running statistics (when given) move toward the
    batch's average over the samples."""
    if use_input_stats:
        count = 1
        for n in input.shape[2:]:
            count *= n
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    N, C = input.shape[0], input.shape[1]
    shape = (1, N * C) + tuple(input.shape[2:])
    repeat = lambda t: None if t is None else t.repeat(N)  # noqa: E731
    rm, rv = repeat(running_mean), repeat(running_var)
    if not use_input_stats and (rm is None or rv is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    out = _C._native_batch_norm(input.reshape(shape), repeat(weight), repeat(bias), rm, rv, bool(use_input_stats),
                                momentum, eps)[0]
    if use_input_stats:  # the per-sample running statistics, averaged back into the caller's
        from ..autograd.grad_mode import no_grad
        with no_grad():
            if running_mean is not None:
                running_mean.copy_(rm.view(N, C).mean(0))
            if running_var is not None:
                running_var.copy_(rv.view(N, C).mean(0))
    return out.view(tuple(input.shape))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each group of num_groups channel groups over its channels and positions."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    C = input.shape[1]
    if num_groups <= 0 or C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    return _C._native_group_norm(input, weight, bias, num_groups, eps)[0]


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of input^2 over `size` neighbouring channels)^beta
    (the window is zero-padded by size // 2 before and (size - 1) // 2 after)."""
    nd = input.dim()
    if nd < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {nd} dimensions)")
    if input.numel() == 0:
        return input
    sq = (input * input).reshape(input.shape[0], input.shape[1], -1)  # (N, C, L)
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    C = input.shape[1]
    win = sq.narrow(1, 0, C)
    for i in range(1, size):
        win = win + sq.narrow(1, i, C)
    div = (win / size).reshape(tuple(input.shape))
    return input / (div * alpha + k).pow(beta)


# ---------------------------------------------------------------------------
# interpolation: F.interpolate and its deprecated aliases, on
# the C upsampling ops (csrc/ops/interp.c, torch's aten upsample_* ops). The
# size / scale-factor rules, the checks and their order are torch's.
__all__ += ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_INTERP_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
# (mode, input rank) -> the op; scales follow output_size (and align_corners)
_INTERP_OPS = {("nearest", 3): "_upsample_nearest1d", ("nearest", 4): "_upsample_nearest2d",
               ("nearest-exact", 3): "_upsample_nearest_exact1d", ("nearest-exact", 4): "_upsample_nearest_exact2d",
               ("linear", 3): "_upsample_linear1d", ("bilinear", 4): "_upsample_bilinear2d",
               ("bicubic", 4): "_upsample_bicubic2d"}
_INTERP_RANKS = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _is_integer(x):
    if isinstance(x, int):
        return True
    if type(x).__module__ == "numpy" and hasattr(x, "dtype") and x.dtype.kind in "iu":
        return True
    return isinstance(x, _C.Tensor) and not x.is_floating_point()


def _interp_sizes(input, size, scale_factor, recompute_scale_factor, mode):
    """(output_size, scale_factors): exactly one is a list, as torch resolves them."""
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got input with spatial "
                    f"dimensions of {list(input.shape[2:])} and output size of {size}. Please provide input tensor "
                    "in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
            if not all(_is_integer(x) for x in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(x) for x in size]}")
            output_size = [int(x) for x in size]
        else:
            if not _is_integer(size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size of type {type(size).__name__}")
            output_size = [int(size)] * max(dim, 0)
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but got input with "
                    f"spatial dimensions of {list(input.shape[2:])} and scale_factor of shape {scale_factor}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, "
                    "...,sK) format.")
            scale_factors = [float(s) for s in scale_factor]
        else:
            scale_factors = [float(scale_factor)] * max(dim, 0)
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:
        recompute_scale_factor = True  # area needs an explicit size
    if recompute_scale_factor:
        output_size = [int(input.shape[i + 2] * scale_factors[i]) for i in range(dim)]
        scale_factors = None
    return output_size, scale_factors


def _interp_out_size(n, scale):
    v = n * scale
    if not (-2.0 ** 63 <= v < 2.0 ** 63):  # inf, nan, huge: what torch's int64 cast says
        raise RuntimeError("value cannot be converted to type int64_t without overflow")
    return int(v)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resize the spatial dims of (N, C, W) or (N, C, H, W) input to `size`, or
    by `scale_factor`: nearest (source floor(o * in/out)), nearest-exact
    (floor((o + 0.5) * in/out)), linear / bilinear / bicubic (half-pixel
    centres, or corners when align_corners=True), area (adaptive average).
    Given scale factors set the sampling scale (1 / scale_factor) unless
    recompute_scale_factor=True, as torch does."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    output_size, scale_factors = _interp_sizes(input, size, scale_factor, recompute_scale_factor, mode)
    nd = input.dim()
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and nd == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    if nd == 5 and mode in ("nearest", "nearest-exact", "area", "trilinear"):
        if mode == "area":
            return adaptive_avg_pool3d(input, output_size)
        if output_size is None:
            output_size = [_interp_out_size(input.shape[i + 2], s) for i, s in enumerate(scale_factors)]
        from ._interp_volume import interpolate_volume
        return interpolate_volume(input, output_size, scale_factors, mode, align_corners)
    if nd == 4 and mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if antialias:
        from ._antialias import interpolate_antialias
        if output_size is None:
            output_size = [_interp_out_size(input.shape[i + 2], s) for i, s in enumerate(scale_factors)]
        return interpolate_antialias(input, output_size, mode, align_corners, scale_factors)
    if mode == "area" and nd in (3, 4):
        return (adaptive_avg_pool1d if nd == 3 else adaptive_avg_pool2d)(input, output_size)
    op = _INTERP_OPS.get((mode, nd))
    if op is None:
        want = _INTERP_RANKS.get(mode)
        if want is not None and nd in (3, 4, 5):
            raise NotImplementedError(f"Got {nd}D input, but {mode} mode needs {want}D input")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {nd}D) for the "
                                  f"modes: {_INTERP_MODES} (got {mode})")
    if output_size is None:  # torch's rule: in * scale truncated per axis (positive sizes are checked in C)
        output_size = [_interp_out_size(input.shape[i + 2], s) for i, s in enumerate(scale_factors)]
    scales = scale_factors if scale_factors is not None else [None] * (nd - 2)
    if mode in ("nearest", "nearest-exact"):
        return getattr(_C, op)(input, output_size, *scales)
    return getattr(_C, op)(input, output_size, bool(align_corners), *scales)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate."""
    _warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='nearest')."""
    _warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: interpolate(..., mode='bilinear', align_corners=True)."""
    _warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------------
# the functionals composed of ember ops in Python, one module per concern
from ._losses import (margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss,  # noqa: E402
                      triplet_margin_loss, triplet_margin_with_distance_loss, multi_margin_loss,
                      multilabel_margin_loss, multilabel_soft_margin_loss, soft_margin_loss, poisson_nll_loss,
                      gaussian_nll_loss, ctc_loss)
from ._activations import prelu, rrelu, rrelu_, hardshrink, softshrink, tanhshrink, gumbel_softmax  # noqa: E402
from ._dropout import dropout3d, alpha_dropout, feature_alpha_dropout  # noqa: E402
from ._shuffle import pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle  # noqa: E402
from ._embedding_bag import embedding_bag  # noqa: E402
from . import _activations, _dropout, _embedding_bag, _losses, _shuffle  # noqa: E402

__all__ += _losses.__all__ + _activations.__all__ + _dropout.__all__ + _shuffle.__all__ + _embedding_bag.__all__

# 3-d convolution and the transposed convolutions (nn/_conv_nd.py)
from ._conv_nd import conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: E402

__all__ += ["conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

# 3-d pools, the adaptive max pools, unpooling and power-average pools, composed (nn/_pool_nd.py)
from ._pool_nd import (max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool1d,  # noqa: E402
                       adaptive_max_pool2d, adaptive_max_pool3d, max_unpool1d, max_unpool2d, lp_pool1d, lp_pool2d)

__all__ += ["max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
            "adaptive_max_pool3d", "max_unpool1d", "max_unpool2d", "lp_pool1d", "lp_pool2d"]

# affine grids and grid sampling, composed (nn/_grid_sample.py)
from ._grid_sample import affine_grid, grid_sample  # noqa: E402

__all__ += ["affine_grid", "grid_sample"]
