"""The pools composed from ember ops in Python: the 3-d pools (F.max_pool3d,
avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d) and the 1-d / 2-d
adaptive max pools (as 3-d ones of depth one), axis by axis; max_unpool1d/2d
(a scatter to the pooled positions) and lp_pool1d/2d (an average pool of x^p).

A box window is the product of one window per axis, so both pools separate:
- average: the window sums are three matrix products with 0/1 window
  matrices (one per axis, (out, in) each), then a division by torch's
  divisor (count_include_pad, divisor_override), itself a product of
  per-axis counts; autograd comes from matmul.
- max: reduced along width, then height (max_pool3d: the 2-d C kernel on
  each depth slice), then depth, each time over a table of the window's
  input positions (padding replaced by a position of
  the same window, which leaves the maximum as it is); carrying each
  survivor's flat position along gives torch's index (the first maximum in
  (d, h, w) order; with NaNs, the last NaN, as torch's scan). The values are then a
  gather of the input at those indices, so the gradient goes to them
  exactly as torch routes it.
The window tables are small NumPy arrays built per call."""

from .._lazy import numpy as np  # NumPy on first use: import ember stays fast

from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy
from .functional import _keep_layout, avg_pool1d, avg_pool2d

_NAMES = {"kernel_size": "kernel_size must either be a single int, or a tuple of three ints",
          "stride": "stride must either be omitted, a single int, or a tuple of three ints",
          "padding": "padding must either be a single int, or a tuple of three ints",
          "dilation": "dilation must be either a single int, or a tuple of three ints"}


def _triple(v, name, fn):
    vals = [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)]
    if len(vals) not in (1, 3):
        raise RuntimeError(f"{fn}: {_NAMES[name]}")
    return vals * 3 if len(vals) == 1 else vals


def _volume(input, fn):
    """input as (N, C, D, H, W) and whether it had a batch dim."""
    from ._conv_nd import _expect_tensors
    _expect_tensors(fn, ("input", input, False))
    if input.dim() not in (4, 5) or any(s == 0 for s in input.shape[-4:]):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    return (input, True) if input.dim() == 5 else (input.unsqueeze(0), False)


def _out_size(n, k, s, p, d, ceil_mode):
    """torch's pooling output length (ceil_mode drops a window starting in the right padding)."""
    span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    if ceil_mode and out > 0 and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_geometry(x, fn, kernel_size, stride, padding, dilation, ceil_mode):
    k = _triple(kernel_size, "kernel_size", fn)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else _triple(stride, "stride", fn)
    p, d = _triple(padding, "padding", fn), _triple(dilation, "dilation", fn)
    if any(v == 0 for v in s):  # torch checks the stride (the kernel size by default) first
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if any(v < 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} dW: {s[2]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    for a in range(3):
        if p[a] < 0 or p[a] > ((k[a] - 1) * d[a] + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p[a]}, "
                               f"kernel_size={k[a]} and dilation={d[a]}")
    size = list(x.shape[2:])
    out = [_out_size(n, *g, ceil_mode) for n, g in zip(size, zip(k, s, p, d))]
    return k, s, p, d, size, out


def _too_small(x, out):
    c, (n0, n1, n2) = x.size(1), x.shape[2:]
    raise RuntimeError(f"Given input size: ({c}x{n0}x{n1}x{n2}). Calculated output size: "
                       f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")


def _strided_table(n, out, k, s, p, d):
    """(out, k) input positions of each window; padding replaced by the nearest valid position of its window."""
    t = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
    valid = (t >= 0) & (t < n)
    first = np.where(valid.any(1), t[np.arange(out), valid.argmax(1)], 0)
    last = np.where(valid.any(1), t[np.arange(out), k - 1 - valid[:, ::-1].argmax(1)], 0)
    return np.where(t < 0, first[:, None], np.where(t >= n, last[:, None], t))


def _adaptive_bounds(n, out):
    """window o covers [floor(o n / out), ceil((o + 1) n / out))"""
    o = np.arange(out)
    return (o * n) // out, -((-(o + 1) * n) // out)


def _adaptive_table(n, out):
    lo, hi = _adaptive_bounds(n, out)
    k = int((hi - lo).max()) if out else 1
    t = lo[:, None] + np.arange(k)[None, :]
    return np.minimum(t, (hi - 1)[:, None])  # short windows repeat their last position


def _long(a, device):
    return _C.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(device)


def _max_by_tables(x, tables, start=None):
    """x (N, C, D, H, W) and one (out, k) table per axis -> (values, flat indices into D*H*W).
    start: (values, flat indices) already reduced over height and width; then only depth is left."""
    from ..autograd.grad_mode import no_grad
    N, C, D, H, W = x.shape
    with no_grad():
        if start is None:
            v = x.detach()
            flat = _C.arange(D * H * W, device=x.device).view(1, 1, D, H, W).expand(N, C, D, H, W)
        else:
            v, flat = start
        for axis in (4, 3, 2) if start is None else (2,):  # width first: ties go to the first in (d, h, w) order
            tbl = tables[axis - 2]
            out, k = tbl.shape
            t = _long(tbl.reshape(-1), x.device)
            shape = list(v.shape)
            shape[axis:axis + 1] = [out, k]
            cand = v.index_select(axis, t).view(shape)
            fcand = flat.index_select(axis, t).view(shape)
            if cand.numel():
                v, arg = cand.max(axis + 1)  # the first maximum
                if x.dtype.is_floating_point and bool(v.isnan().any()):
                    # torch's scan takes every NaN it meets: the last NaN of the window
                    last = (k - 1) - cand.isnan().flip([axis + 1]).long().argmax(axis + 1)
                    arg = _C.where(v.isnan(), last, arg)
                flat = fcand.gather(axis + 1, arg.unsqueeze(axis + 1)).squeeze(axis + 1)
            else:
                shape.pop(axis + 1)
                v, flat = cand.sum(axis + 1), fcand.sum(axis + 1)
    idx = flat.contiguous()
    vals = x.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)
    return vals, idx


def _finish(vals, idx, batched, return_indices):
    if not batched:
        vals, idx = vals.squeeze(0), idx.squeeze(0)
    return (vals, idx) if return_indices else vals


@_fp32_policy
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over kd x kh x kw windows of (N, C, D, H, W) or (C, D, H, W); indices into each D*H*W volume."""
    x, batched = _volume(input, "max_pool3d")
    k, s, p, d, size, out = _pool_geometry(x, "max_pool3d", kernel_size, stride, padding, dilation, ceil_mode)
    if any(o < 1 for o in out):
        _too_small(x, out)
    if x.dtype == _bool_dtype():
        raise NotImplementedError("\"max_pool3d\" not implemented for 'Bool'")
    tables = [_strided_table(*g) for g in zip(size, out, k, s, p, d)]
    from ..autograd.grad_mode import no_grad
    with no_grad():  # height and width: the 2-d C kernel on the D slices (same tie and NaN rules)
        N, C, D, H, W = x.shape
        v2, i2 = _C._max_pool2d_with_indices(x.detach().reshape(N, C * D, H, W), k[1:], s[1:], p[1:], d[1:],
                                             bool(ceil_mode))
        v2, i2 = v2.view(N, C, D, out[1], out[2]), i2.view(N, C, D, out[1], out[2])
        flat = i2 + _C.arange(D, device=x.device).view(1, 1, D, 1, 1) * (H * W)
    vals, idx = _max_by_tables(x, tables, (v2, flat))
    vals, idx = _keep_layout(vals, x), _keep_layout(idx, x)  # channels_last_3d stays so, as in torch
    return _finish(vals, idx, batched, return_indices)


def _bool_dtype():
    from .. import bool as b
    return b


def _window_matrix(lo, hi, n):
    """(out, n) 0/1 matrix: row o marks [lo[o], hi[o])"""
    i = np.arange(n)[None, :]
    return ((i >= lo[:, None]) & (i < hi[:, None])).astype(np.float64)


def _sum_windows(x, mats):
    """x (N, C, D, H, W) summed over the windows of one (out, in) matrix per axis."""
    N, C = x.shape[:2]
    md, mh, mw = (_C.from_numpy(m).to(device=x.device, dtype=x.dtype) for m in mats)
    y = x.matmul(mw.t())                     # (N, C, D, H, OW)
    y = mh.matmul(y)                         # (N, C, D, OH, OW)
    OD, OH, OW = md.size(0), mh.size(0), mw.size(0)
    y = md.matmul(y.reshape(N, C, x.size(2), OH * OW))  # (N, C, OD, OH*OW)
    return y.reshape(N, C, OD, OH, OW)


@_fp32_policy
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average over kd x kh x kw windows of (N, C, D, H, W) or (C, D, H, W), divisors as torch's."""
    x, batched = _volume(input, "avg_pool3d")
    k, s, p, _, size, out = _pool_geometry(x, "avg_pool3d", kernel_size, stride, padding, 1, ceil_mode)
    if any(n + 2 * q < kk for n, q, kk in zip(size, p, k)):
        raise RuntimeError(f"input image (T: {size[0]} H: {size[1]} W: {size[2]}) smaller than kernel size "
                           f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    if any(o < 1 for o in out):
        _too_small(x, out)
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    if x.dtype == _bool_dtype():
        raise NotImplementedError("\"avg_pool3d_out_frame\" not implemented for 'Bool'")
    mats, counts = [], []
    for n, o, kk, ss, pp in zip(size, out, k, s, p):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)   # windows stop at the right padding
        lo, hi = np.maximum(start, 0), np.minimum(end, n)
        mats.append(_window_matrix(lo, hi, n))
        counts.append(end - start if count_include_pad else hi - lo)
    total = _sum_windows(x, mats)
    if divisor_override is not None:
        div = np.full(out, float(int(divisor_override)))
    else:
        div = counts[0][:, None, None] * counts[1][None, :, None] * counts[2][None, None, :]
    if x.dtype.is_floating_point:
        y = total / _C.from_numpy(np.ascontiguousarray(div, dtype=np.float64)).to(device=x.device, dtype=x.dtype)
    else:  # integer pools divide their exact sums, truncating as torch's C++ does
        y = total.div(_long(div, x.device), rounding_mode="trunc")
    return y if batched else y.squeeze(0)


def _adaptive_args(input, output_size, fn):
    from ._conv_nd import _expect_tensors
    _expect_tensors(fn, ("input", input, False))
    out = [output_size] * 3 if isinstance(output_size, int) or output_size is None else list(output_size)
    if input.dim() < len(out) + 1:
        raise ValueError(f"Input dimension should be at least {len(out) + 1}")
    if len(out) != 3:
        raise RuntimeError(f"{fn}(): internal error: output_size.size() must be 3")
    if input.dim() not in (4, 5) or any(s == 0 for s in input.shape[-4:]):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    out = [input.shape[i - 3] if o is None else int(o) for i, o in enumerate(out)]
    if any(o < 0 for o in out):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 but received "
                           f"{{{', '.join(map(str, out))}}}")
    if not input.dtype.is_floating_point:
        from .functional import _dtype_name
        raise NotImplementedError(f"\"{fn}_cpu\" not implemented for '{_dtype_name(input.dtype)}'")
    x, batched = (input, True) if input.dim() == 5 else (input.unsqueeze(0), False)
    return x, batched, out


@_fp32_policy
def adaptive_avg_pool3d(input, output_size):
    """Average over torch's adaptive windows [floor(o n / out), ceil((o + 1) n / out)) per axis."""
    x, batched, out = _adaptive_args(input, output_size, "adaptive_avg_pool3d")
    mats = []
    for n, o in zip(x.shape[2:], out):
        lo, hi = _adaptive_bounds(n, o)
        m = _window_matrix(lo, hi, n)
        mats.append(m / np.maximum(hi - lo, 1)[:, None])  # mean of means: the axes separate
    y = _sum_windows(x, mats)
    return y if batched else y.squeeze(0)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over torch's adaptive windows, with indices into each D*H*W volume."""
    x, batched, out = _adaptive_args(input, output_size, "adaptive_max_pool3d")
    tables = [_adaptive_table(n, o) for n, o in zip(x.shape[2:], out)]
    vals, idx = _max_by_tables(x, tables)
    return _finish(vals, idx, batched, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over torch's adaptive windows of (N, C, H, W) or (C, H, W), with indices h * W + w."""
    from ._conv_nd import _expect_tensors
    _expect_tensors("adaptive_max_pool2d", ("input", input, False))
    out = [output_size] * 2 if isinstance(output_size, int) or output_size is None else list(output_size)
    if input.dim() < len(out) + 1:
        raise ValueError(f"Input dimension should be at least {len(out) + 1}")
    if len(out) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    for d in range(input.dim() - 3, input.dim()):
        if input.shape[d] == 0:
            raise RuntimeError(f"adaptive_max_pool2d(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with dimension {d} being empty")
    if not input.dtype.is_floating_point:
        from .functional import _dtype_name
        raise NotImplementedError(f"\"adaptive_max_pool2d\" not implemented for '{_dtype_name(input.dtype)}'")
    out = [input.shape[i - 2] if o is None else int(o) for i, o in enumerate(out)]
    batched = input.dim() == 4
    x = (input if batched else input.unsqueeze(0)).unsqueeze(2)  # (N, C, 1, H, W)
    tables = [_adaptive_table(n, o) for n, o in zip(x.shape[2:], [1] + out)]
    vals, idx = _max_by_tables(x, tables)
    vals, idx = (_keep_layout(v.squeeze(2), input if batched else x.squeeze(2)) for v in (vals, idx))
    return _finish(vals, idx, batched, return_indices)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over torch's adaptive windows of (N, C, L) or (C, L), with indices."""
    from ._conv_nd import _expect_tensors
    _expect_tensors("adaptive_max_pool1d", ("input", input, False))
    size = [output_size] if isinstance(output_size, int) else list(output_size)
    if len(size) != 1:
        raise RuntimeError(f"adaptive_max_pool1d() argument 'output_size' should contain one int (got {len(size)})")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for adaptive_max_pool1d)")
    r = adaptive_max_pool2d(input.unsqueeze(-2), (1, size[0]), return_indices)
    return (r[0].squeeze(-2), r[1].squeeze(-2)) if return_indices else r.squeeze(-2)


# -- unpooling and power-average pooling --------------------------------------

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
