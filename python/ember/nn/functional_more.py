"""The less common torch.nn.functional pieces, composed of ember ops in Python
so that autograd comes for free: margin / ranking / embedding losses, the
Poisson and Gaussian NLL losses, PReLU / RReLU / the shrink activations,
gumbel_softmax, local_response_norm, pixel and channel shuffles, pdist,
max_unpool and lp_pool, embedding_bag. functional.py re-exports them; the
checks, their exception types and the formulas are torch's."""
import math

from .. import _C
from .functional import (_legacy_reduction, _renorm_rows_, avg_pool1d, avg_pool2d, leaky_relu,
                         logsigmoid, pad, pairwise_distance, softmax)

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "multi_margin_loss", "multilabel_margin_loss",
           "multilabel_soft_margin_loss", "soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "prelu", "rrelu", "rrelu_", "hardshrink", "softshrink", "tanhshrink", "gumbel_softmax",
           "local_response_norm", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
           "pdist", "max_unpool1d", "max_unpool2d", "lp_pool1d", "lp_pool2d", "embedding_bag"]


# ---------------------------------------------------------------------------
# losses

def _reduction(reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _sizes(t):
    return f"torch.Size({list(t.shape)})"


def _tensors(fn, **args):
    """TypeError, as torch's argument parser raises, for an argument that is not a Tensor."""
    for pos, (name, v) in enumerate(args.items()):
        if not isinstance(v, _C.Tensor):
            raise TypeError(f"{fn}(): argument '{name}' (position {pos + 1}) must be Tensor, not {type(v).__name__}")


def _float_only(kernel, input):
    """torch's shrink kernels exist for floating dtypes only."""
    if not input.is_floating_point():
        from .functional import _dtype_name
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_dtype_name(input.dtype)}'")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_sizes(input1)}, input2: {_sizes(input2)}, target: {_sizes(target)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (both terms where it is neither)."""
    reduction = _reduction(reduction, size_average, reduce)
    zero = _C.zeros((), dtype=input.dtype, device=input.device)
    hinge = _C.where(target != 1, (margin - input).clamp_min(0), zero)
    same = _C.where(target != -1, input, zero)
    return _reduce(hinge + same, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1; cos along the last dim."""
    reduction = _reduction(reduction, size_average, reduce)
    td = target.dim()
    if td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if td == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if td == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12  # keeps the magnitudes of zero vectors off zero
    dot = (input1 * input2).sum(-1)
    mag1 = (input1 * input1).sum(-1) + eps
    mag2 = (input2 * input2).sum(-1) + eps
    cos = dot / (mag1 * mag2).sqrt()
    zero = _C.zeros((), dtype=cos.dtype, device=cos.device)
    pos = _C.where(target == 1, 1 - cos, zero)
    neg = _C.where(target == -1, (cos - margin).clamp_min(0), zero)
    return _reduce(pos + neg, reduction)


def _same_ndim(anchor, positive, negative):
    a, p, n = anchor.dim(), positive.dim(), negative.dim()
    if not (a == p == n):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D inputs")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin) with d the p-norm pairwise distance
    (swap: d(a, n) becomes min(d(a, n), d(p, n)))."""
    reduction = _reduction(reduction, size_average, reduce)
    _same_ndim(anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _C.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """triplet_margin_loss with any distance (pairwise_distance by default)."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    _same_ndim(anchor, positive, negative)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = _C.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def _check_int_target(target, name):
    if target.is_floating_point() or str(target.dtype) == "ember.bool":
        raise RuntimeError(f"{name}: expected target of an integer dtype (Long), but got {target.dtype}")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample: sum over j != y of max(0, margin - x[y] + x[j])^p (times weight[y]), divided by C."""
    reduction = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    nd = input.dim()
    if nd > 2 or (nd == 2 and input.shape[1] == 0) or (nd <= 1 and input.numel() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    _check_int_target(target, "multi_margin_loss")
    x = input.reshape(1, -1) if nd < 2 else input
    N, C = x.shape
    if target.dim() > 1 or target.numel() != N:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{N}], but got {list(target.shape)}. Input "
                           f"has shape {list(input.shape)}.")
    y = target.reshape(N, 1)
    if N and bool(((y < 0) | (y >= C)).any()):
        raise RuntimeError("target out of range")
    if weight is not None and weight.numel() != C:
        raise RuntimeError(f"inconsistent weight size, expected {C} but got {list(weight.shape)}")
    z = (margin - x.gather(1, y) + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.gather(0, y.reshape(N)).reshape(N, 1)
    own = _C.arange(C, device=x.device).reshape(1, C) == y  # the target's own column takes no part
    loss = z.masked_fill(own, 0.0).sum(1) / C
    if nd < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """target holds class indices, ended by the first -1; per sample:
    sum over targets j and non-targets k of max(0, 1 - (x[j] - x[k])), divided by C."""
    reduction = _reduction(reduction, size_average, reduce)
    nd = input.dim()
    if nd > 2 or (nd == 2 and input.shape[1] == 0) or (nd <= 1 and input.numel() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _check_int_target(target, "multilabel_margin_loss")
    x = input.reshape(1, -1) if nd < 2 else input
    t = target.reshape(x.shape)
    C = x.shape[1]
    if t.numel() and bool(((t < -1) | (t >= C)).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    valid = (t < 0).long().cumsum(1) == 0  # the slots before the first -1
    safe = t.clamp_min(0)
    is_target = _C.zeros(tuple(x.shape), dtype=x.dtype, device=x.device).scatter_add(1, safe, valid.to(x.dtype)) > 0
    xt = x.gather(1, safe)  # (N, slots)
    terms = (1 - xt.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)  # (N, slot j, class k)
    pick = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (terms * pick.to(x.dtype)).sum((1, 2)) / C
    if nd < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Mean over classes of the binary logistic losses of each class."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.size(class_dim)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    from .functional import softplus
    # -(input * target): a uint8 target must not be negated on its own (it wraps), a bool one can't be
    loss = softplus(-(input * target))
    # torch keeps the input's dtype
    return _reduce(loss if loss.dtype == input.dtype else loss.to(input.dtype), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(input) - target * input (log_input), else input - target * log(input + eps);
    full adds Stirling's approximation of log(target!) where target > 1."""
    reduction = _reduction(reduction, size_average, reduce)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = target.masked_fill(target <= 1, 1.0)  # keeps log finite where the term is dropped
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + stirling.masked_fill(target <= 1, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) when full); var
    may be a float, input's shape, input's shape less the last dim, or input's
    shape with one dim of size 1 (one variance shared along it). var is clamped
    to eps for the value only: its gradient passes through the clamp."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _C.full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    vs, xs = tuple(var.shape), tuple(input.shape)
    if vs != xs:
        if xs[:-1] == vs:
            var = var.unsqueeze(-1)
        elif not (len(vs) == len(xs) and sum(v for x, v in zip(xs, vs) if x != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var + (var.clamp_min(eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------------------
# activations

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
# shuffles and distances

def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    _tensors("pixel_shuffle", input=input)
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    oc, b = c // (r * r), len(batch)
    x = input.reshape(*batch, oc, r, r, h, w)
    x = x.permute(*range(b), b, b + 3, b + 1, b + 4, b + 2)
    return x.reshape(*batch, oc, h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W): pixel_shuffle's inverse."""
    _tensors("pixel_unshuffle", input=input)
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    b = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(b), b, b + 2, b + 4, b + 1, b + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g * k, *) -> the channels regrouped as k groups of g: view (N, g, k, *), swap, flatten."""
    _tensors("channel_shuffle", input=input)
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    n, c, *rest = input.shape
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {g} groups.")
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(tuple(input.shape))


native_channel_shuffle = channel_shuffle


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


# ---------------------------------------------------------------------------
# unpooling and power-average pooling

def _tuple(v, n):
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * n


def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    n = len(kernel_size)
    default = [(input.shape[input.dim() - n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return output_size


def _max_unpool2d(input, indices, size):
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with "
                           f"{input.dim()} dimensions.")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if str(indices.dtype) != "ember.int64":
        raise RuntimeError(f"elements in indices should be type int64 but got: {indices.dtype}")
    oh, ow = size
    lead = tuple(input.shape[:-2])
    flat_idx = indices.reshape(*lead, -1)
    if flat_idx.numel() and bool(((flat_idx < 0) | (flat_idx >= oh * ow)).any()):
        bad = int(flat_idx[(flat_idx < 0) | (flat_idx >= oh * ow)][0])
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size {oh}x{ow})")
    out = _C.zeros(lead + (oh * ow,), dtype=input.dtype, device=input.device)
    return out.scatter(input.dim() - 2, flat_idx, input.reshape(*lead, -1)).reshape(*lead, oh, ow)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_pool2d's partial inverse: each value goes to the flat H * W position its index names, zeros elsewhere."""
    k = _tuple(kernel_size, 2)
    s = _tuple(stride, 2) if stride is not None else k
    p = _tuple(padding, 2)
    return _max_unpool2d(input, indices, _unpool_output_size(input, k, s, p, output_size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    k = _tuple(kernel_size, 1)
    s = _tuple(stride, 1) if stride is not None else k
    p = _tuple(padding, 1)
    size = _unpool_output_size(input, k, s, p, output_size)
    return _max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), list(size) + [1]).squeeze(-1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p): the average pool of x^p times the window size."""
    kw, kh = _tuple(kernel_size, 2)
    if stride is not None:
        out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool2d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * out.abs().relu()).mul(kw * kh).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    k = _tuple(kernel_size, 1)[0]
    if stride is not None:
        out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool1d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k).pow(1.0 / norm_type)


# ---------------------------------------------------------------------------
# embedding_bag

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sum, mean or max of the embedding rows of each bag. input (B, L): B bags
    of L indices; input (n,) with offsets: bag b holds input[offsets[b]:offsets[b + 1]].
    Indices equal to padding_idx are left out (an empty bag gives zeros)."""
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.is_floating_point() or str(input.dtype) not in ("ember.int64", "ember.int32"):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.dtype} instead (while checking arguments for embedding_bag)")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        offsets = _C.arange(0, input.numel(), max(input.shape[1], 1), device=input.device)
        if input.shape[1] == 0:
            offsets = _C.zeros(input.shape[0], dtype=input.dtype, device=input.device)
        include_last_offset = False  # the offsets made here have no end entry
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    num, n = weight.shape[0], input.numel()
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
    offsets = offsets.long()
    if offsets.numel():
        if int(offsets[0]) != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {int(offsets[0])}")
        if int(offsets[-1]) > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
                               f"{int(offsets[-1])}")
        if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
            raise RuntimeError(f"embedding_bag: offsets must be non-decreasing, got {offsets.tolist()}")
    if n and bool(((input < 0) | (input >= num)).any()):
        bad = int(input[(input < 0) | (input >= num)][0])
        raise IndexError(f"embedding_bag: index {bad} is out of range for a weight of {num} rows")
    bags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    bags = max(bags, 0)
    # bag_of[i]: the bag of input[i] (offsets counted up to i, less one)
    starts = _C.zeros(n + 1, dtype=offsets.dtype, device=input.device)
    starts = starts.index_add(0, offsets, _C.ones_like(offsets))
    bag_of = starts.cumsum(0)[:n] - 1
    idx = input.long()
    keep = bag_of < bags  # include_last_offset: nothing after the last offset
    if padding_idx is not None:
        keep = keep & (idx != padding_idx)
    if not bool(keep.all()):
        sel = keep.nonzero().reshape(-1)
        idx, bag_of = idx.index_select(0, sel), bag_of.index_select(0, sel)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.index_select(0, sel)
    if max_norm is not None:
        _renorm_rows_(weight, idx, max_norm, norm_type)
    from .functional import embedding
    rows = embedding(idx, weight, None, None, 2.0, scale_grad_by_freq, sparse)  # (m, D)
    D = weight.shape[1]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    out = _C.zeros((bags, D), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        return out.scatter_reduce(0, bag_of.unsqueeze(1).expand(bag_of.shape[0], D), rows, "amax",
                                  include_self=False)
    out = out.index_add(0, bag_of, rows)
    if mode == "mean":
        count = _C.zeros(bags, dtype=weight.dtype, device=weight.device).index_add(
            0, bag_of, _C.ones(bag_of.shape[0], dtype=weight.dtype, device=weight.device))
        out = out / count.clamp_min(1).unsqueeze(1)
    return out


# ---------------------------------------------------------------------------
# CTC: the forward (alpha) recursion in log space, one step of ember ops per
# time step, so autograd gives the gradient (the true one with respect to
# log_probs; through a log_softmax it equals torch's, whose formula assumes
# normalized log_probs)

__all__ += ["ctc_loss"]


def _lengths(v, name, n, limit, ref):
    """input_lengths / target_lengths as a list of n ints within [0, limit]."""
    if isinstance(v, _C.Tensor):
        if v.is_floating_point():
            raise RuntimeError(f"ctc_loss: {name} must be of an integer dtype, but got {v.dtype}")
        vals = [int(x) for x in v.reshape(-1).tolist()]
    elif isinstance(v, (list, tuple)):
        vals = [int(x) for x in v]
    else:
        raise TypeError(f"ctc_loss(): argument '{name}' must be tuple of ints or Tensor, not {type(v).__name__}")
    if len(vals) != n:
        raise RuntimeError(f"{name} must be of size batch_size")
    for x in vals:
        if x < 0:
            raise RuntimeError(f"Expected {name} to have value at least 0, but got value {x} (while checking "
                               f"arguments for ctc_loss)")
        if limit is not None and x > limit:
            raise RuntimeError(f"Expected {name} to have value at most {limit}, but got value {x} (while checking "
                               f"arguments for ctc_loss ({ref}))")
    return vals


def _logaddexp_safe(terms):
    """log(sum(exp(t))) over a list of same-shape tensors; -inf (with zero
    gradient, not NaN) where every term is -inf. The max is detached: the
    gradient of the sum does not depend on it."""
    m = terms[0]
    for t in terms[1:]:
        m = _C.maximum(m, t)
    m = m.detach()
    dead = m == float("-inf")
    m = m.masked_fill(dead, 0.0)
    total = (terms[0] - m).exp()
    for t in terms[1:]:
        total = total + (t - m).exp()
    return (total.masked_fill(dead, 1.0).log() + m).masked_fill(dead, float("-inf"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification: -log of the total probability of
    the alignments of each target (blanks between and around its labels,
    repeats merged) under log_probs (T, N, C) or (T, C). targets: (N, S)
    padded, or the N targets concatenated. 'mean' divides each loss by its
    target length (at least 1) before averaging over the batch."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    _tensors("ctc_loss", log_probs=log_probs, targets=targets)
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs of 2 or 3 dimensions ((T, C) or (T, N, C)), but got "
                           f"{list(log_probs.shape)}")
    batched = log_probs.dim() == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths(input_lengths, "input_lengths", N, T, "input")
    tg_len = _lengths(target_lengths, "target_lengths", N, None, "target")
    tg = targets.long()
    if tg.dim() == 2 and batched:
        S = tg.shape[1]
        for x in tg_len:
            if x > S:
                raise RuntimeError(f"Expected tensor to have size at least {x} at dimension 1, but got size {S} for "
                                   f"argument #2 'targets' (while checking arguments for ctc_loss)")
        padded = [tg[i, :tg_len[i]] for i in range(N)]
    else:  # the targets of the batch one after another
        flat = tg.reshape(-1)
        if sum(tg_len) > flat.numel():
            raise RuntimeError(f"ctc_loss: targets hold {flat.numel()} labels, fewer than the {sum(tg_len)} that "
                               f"target_lengths {tg_len} need")
        starts = [sum(tg_len[:i]) for i in range(N)]
        padded = [flat[starts[i]:starts[i] + tg_len[i]] for i in range(N)]
    S = max(tg_len + [0])
    L = 2 * S + 1
    # extended labels: blank, l1, blank, l2, ..., blank (padded with blanks)
    ext = _C.full((N, L), blank, dtype=_C._dtypes["int64"], device=lp.device)
    for i, t in enumerate(padded):
        if t.numel():
            if bool(((t < 0) | (t >= C)).any()):
                raise RuntimeError(f"ctc_loss: target labels must be in [0, {C}), got {t.tolist()}")
            ext[i, 1:2 * t.numel():2] = t
    # a label may also come from two places back when it differs from that one and is not blank
    skip = _C.zeros((N, L), dtype=_C._dtypes["bool"], device=lp.device)
    if L > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    neg_inf = float("-inf")
    emit = [lp[t].gather(1, ext) for t in range(T)]  # (N, L) log-probability of each state's label
    first = _C.full((N, L), neg_inf, dtype=lp.dtype, device=lp.device)
    keep0 = _C.zeros((N, L), dtype=_C._dtypes["bool"], device=lp.device)
    keep0[:, 0] = True
    if L > 1:
        keep0[:, 1] = True
    alive = _C.tensor([n > 0 for n in in_len], device=lp.device).unsqueeze(1)
    # an input of length 0 has one (empty) alignment: log 1 in state 0, reachable only by an empty target
    empty = first.masked_fill(keep0 & ~alive, 0.0)
    empty[:, 1:] = neg_inf
    alpha = empty if T == 0 else _C.where(keep0 & alive, emit[0], empty)
    pad1 = _C.full((N, 1), neg_inf, dtype=lp.dtype, device=lp.device)
    pad2 = _C.full((N, min(2, L)), neg_inf, dtype=lp.dtype, device=lp.device)
    for t in range(1, T):
        prev1 = _C.cat([pad1, alpha[:, :-1]], 1) if L > 1 else pad1
        prev2 = _C.cat([pad2, alpha[:, :-2]], 1).masked_fill(~skip, neg_inf) if L > 2 else pad1.expand(N, L)
        step = _logaddexp_safe([alpha, prev1, prev2]) + emit[t]
        running = _C.tensor([t < n for n in in_len], device=lp.device).unsqueeze(1)
        alpha = _C.where(running, step, alpha)  # a sample's alpha stops at its input length
    end = _C.tensor([2 * n for n in tg_len], device=lp.device).unsqueeze(1)
    last = alpha.gather(1, end).squeeze(1)
    before = alpha.gather(1, (end - 1).clamp_min(0)).squeeze(1)
    before = before.masked_fill(end.squeeze(1) == 0, neg_inf)
    loss = -_logaddexp_safe([last, before])
    if zero_infinity:
        loss = loss.masked_fill(loss == float("inf"), 0.0)
    if not batched:
        loss = loss.squeeze(0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    lengths = _C.tensor(tg_len, dtype=loss.dtype, device=loss.device).clamp_min(1)
    return (loss / (lengths if batched else lengths.squeeze(0))).mean()


# ---------------------------------------------------------------------------
# channel dropout of volumes, and the self-normalizing (alpha) dropouts

__all__ += ["dropout3d", "alpha_dropout", "feature_alpha_dropout"]

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
