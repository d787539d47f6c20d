"""The nn.functional losses composed of ember ops in Python, so autograd comes
for free: margin / ranking / embedding losses, the multi-class and
multi-label margin losses, the Poisson and Gaussian NLL losses and CTC
(functional.py has the C-backed ones: cross_entropy, nll_loss, mse_loss, ...).
The checks, their exception types and the formulas are torch's."""
import math

from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy
from .functional import _legacy_reduction, _tensors, logsigmoid, pairwise_distance

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "multi_margin_loss", "multilabel_margin_loss",
           "multilabel_soft_margin_loss", "soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss"]


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


@_fp32_policy
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_sizes(input1)}, input2: {_sizes(input2)}, target: {_sizes(target)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


@_fp32_policy
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (both terms where it is neither)."""
    reduction = _reduction(reduction, size_average, reduce)
    zero = _C.zeros((), dtype=input.dtype, device=input.device)
    hinge = _C.where(target != 1, (margin - input).clamp_min(0), zero)
    same = _C.where(target != -1, input, zero)
    return _reduce(hinge + same, reduction)


@_fp32_policy
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


@_fp32_policy
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


@_fp32_policy
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


@_fp32_policy
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


@_fp32_policy
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), target in {1, -1}."""
    reduction = _reduction(reduction, size_average, reduce)
    from .functional import softplus
    # -(input * target): a uint8 target must not be negated on its own (it wraps), a bool one can't be
    loss = softplus(-(input * target))
    # torch keeps the input's dtype
    return _reduce(loss if loss.dtype == input.dtype else loss.to(input.dtype), reduction)


@_fp32_policy
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
# CTC: the forward (alpha) recursion in log space, one step of ember ops per
# time step, so autograd gives the gradient (the true one with respect to
# log_probs; through a log_softmax it equals torch's, whose formula assumes
# normalized log_probs)


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
