"""F.embedding_bag: the sum, mean or max of the embedding rows of each bag of
indices, composed of embedding, index_add and scatter_reduce (so autograd
comes for free)."""
from .. import _C
from .functional import _renorm_rows_


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


__all__ = ["embedding_bag"]
