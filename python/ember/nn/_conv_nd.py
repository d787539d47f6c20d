"""F.conv3d and the transposed convolutions (F.conv_transpose1d/2d/3d).

conv3d is the C convolution op (ops/conv.c, whose im2col plan has a depth
axis). A transposed convolution is the C op _convolution_transpose: the
input gradient of the convolution whose weight it shares, y = col2im(W^T @
x) + b (Note [transposed geometry] in ops/conv.c). Its formula
(autograd/derivatives_conv.c): the gradient wrt x is a plain convolution of
the incoming gradient, wrt W the convolution weight-gradient with input and
gradient swapped. Here: torch's argument checks and messages, and unbatched
input."""

from .. import _C

_AXES = {1: ("height", "width"), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _expect_tensors(fn, *named):
    """TypeError, as torch's argument parser raises, for an argument that is not a tensor (None: optional)."""
    from .. import Tensor
    for pos, (arg, value, optional) in enumerate(named, 1):
        if not isinstance(value, Tensor) and not (optional and value is None):
            raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {type(value).__name__}")


def _dims(v, n, name):
    """An int or a sequence as n ints, with torch's message for a wrong length."""
    vals = [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={vals}")
    return vals


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation of (N, C, D, H, W) with (C_out, C / groups, kd, kh, kw): im2col + one GEMM per group, in C."""
    from .functional import _conv
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, n, name):
    from .functional import _dtype_name
    _expect_tensors(name, ("input", input, False), ("weight", weight, False), ("bias", bias, True))
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    if input.dim() not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input "
                           f"of size: {list(input.shape)}")
    batched = input.dim() == n + 2
    x = input if batched else input.unsqueeze(0)
    wn = weight.dim() - 2
    stride, padding = _dims(stride, wn, "stride"), _dims(padding, wn, "padding")
    dilation, output_padding = _dims(dilation, wn, "dilation"), _dims(output_padding, wn, "output_padding")
    groups = int(groups)
    for bad, msg in ((any(s <= 0 for s in stride), "non-positive stride is not supported"),
                     (any(p < 0 for p in padding), "negative padding is not supported"),
                     (any(p < 0 for p in output_padding), "negative output_padding is not supported"),
                     (any(d <= 0 for d in dilation), "non-positive dilation is not supported"),
                     (groups <= 0, "non-positive groups is not supported")):
        if bad:
            raise RuntimeError(msg)
    if weight.dim() != x.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight "
                           f"{list(weight.shape)}, but got {x.dim()}-dimensional input of size {list(x.shape)} "
                           f"instead")
    if any(o >= s and o >= d for o, s, d in zip(output_padding, stride, dilation)):
        axes = _AXES[n]  # torch reports a 1-d convolution as a 2-d one of height 1
        lift = (lambda v, one: [one] + v) if n == 1 else (lambda v, one: v)  # noqa: E731
        parts = [f"{what}_{a}: {v}" for what, vals in (("output_padding", lift(output_padding, 0)),
                                                        ("stride", lift(stride, 1)), ("dilation", lift(dilation, 1)))
                 for a, v in zip(axes, vals)]
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " +
                           " ".join(parts))
    wsize = list(weight.shape)
    if weight.size(0) % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{wsize}] instead")
    if x.size(1) != weight.size(0):
        raise RuntimeError(f"Given transposed=1, weight of size {wsize}, expected input{list(x.shape)} to have "
                           f"{weight.size(0)} channels, but got {x.size(1)} channels instead")
    out_ch = weight.size(1) * groups
    if bias is not None and (bias.dim() != 1 or bias.size(0) != out_ch):
        raise RuntimeError(f"Given transposed=1, weight of size {wsize}, expected bias to be 1-dimensional with "
                           f"{out_ch} elements, but got bias of size {list(bias.shape)} instead")
    for t in (weight, bias):
        if t is not None and t.dtype != x.dtype:
            raise RuntimeError(f"expected scalar type {_dtype_name(x.dtype)} but found {_dtype_name(t.dtype)}")
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"slow_conv_transpose{max(n, 2)}d_out_cpu\" not implemented for "
                                  f"'{_dtype_name(x.dtype)}'")
    spatial = list(x.shape[2:])
    if 0 in spatial:  # torch's message shows a 1-d input as 2-d
        shape = list(x.shape[:2]) + [1] * (n == 1) + spatial
        raise RuntimeError(f"Only zero batch or zero channel inputs are supported, but got input shape: {shape}")
    out = [(i - 1) * s - 2 * p + d * (k - 1) + o + 1
           for i, s, p, d, k, o in zip(spatial, stride, padding, dilation, wsize[2:], output_padding)]
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
    y = _C._convolution_transpose(x, weight, bias, stride, padding, output_padding, dilation, groups)
    return y if batched else y.squeeze(0)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed convolution of (N, C_in, L) with (C_in, C_out / groups, k)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                           "conv_transpose1d")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed convolution of (N, C_in, H, W) with (C_in, C_out / groups, kh, kw)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                           "conv_transpose2d")


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed convolution of (N, C_in, D, H, W) with (C_in, C_out / groups, kd, kh, kw)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                           "conv_transpose3d")
