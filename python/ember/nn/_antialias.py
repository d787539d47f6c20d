"""interpolate(..., antialias=True): separable resampling of (N, C, H, W) with
the filter stretched over the input when shrinking, so every input pixel
under an output pixel's footprint contributes (torch's algorithm, PIL's
before it). Each axis is a matrix of normalized filter weights, applied as
one matmul per axis: differentiable, and on any device.

Per output index i: scale = in/out (or (in-1)/(out-1) with align_corners,
or 1/scale_factor when given), support = r * max(scale, 1) for a filter of
radius r, center = scale * (i + 0.5), inputs j in
[int(center - support + 0.5), int(center + support + 0.5)) weighted
filter((j - center + 0.5) / max(scale, 1)), normalized to sum 1."""
from .._lazy import numpy as np
from .. import _C


def _triangle(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _cubic(x, a=-0.5):  # PIL's and torch's antialiasing cubic (a = -0.5)
    x = np.abs(x)
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return np.where(x < 1.0, inner, np.where(x < 2.0, outer, 0.0))


def _lanczos(x, a=3.0):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.abs(x) < a, np.sinc(x) * np.sinc(x / a), 0.0)


_FILTERS = {"bilinear": (_triangle, 1.0), "bicubic": (_cubic, 2.0), "lanczos": (_lanczos, 3.0)}


def _scale(in_size, out_size, align_corners, scale_factor):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return in_size / out_size


def weights(in_size, out_size, mode, align_corners=False, scale_factor=None):
    """The (out_size, in_size) float64 matrix of one axis."""
    filt, radius = _FILTERS[mode]
    scale = _scale(in_size, out_size, align_corners, scale_factor)
    support = radius * scale if scale >= 1.0 else radius
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        if hi <= lo:
            continue
        row = filt((np.arange(lo, hi) - center + 0.5) * invscale)
        total = row.sum()
        w[i, lo:hi] = row / total if total != 0 else row
    return w


def interpolate_antialias(input, output_size, mode, align_corners, scale_factors):
    out_h, out_w = output_size
    in_h, in_w = input.shape[-2], input.shape[-1]
    sh, sw = scale_factors if scale_factors is not None else (None, None)
    if input.shape[1] == 0:
        raise RuntimeError(f"Non-empty 4D data tensor expected but got a tensor with sizes {list(input.shape)}")
    if in_h <= 0 or in_w <= 0 or out_h <= 0 or out_w <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: {in_h}, W: {in_w}) "
                           f"output (H: {out_h}, W: {out_w})")
    integer = not input.is_floating_point()
    if input.dtype != _C._dtypes["uint8"] and integer:
        raise RuntimeError(f"\"upsample_{mode}2d_aa\" not implemented for '{str(input.dtype).split('.')[-1]}'")
    mw = weights(in_w, out_w, mode, align_corners, sw)
    mh = weights(in_h, out_h, mode, align_corners, sh)
    if integer:
        return _uint8(input, mw, mh)
    ww = _C.tensor(mw, dtype=input.dtype, device=input.device)
    wh = _C.tensor(mh, dtype=input.dtype, device=input.device)
    return _C.matmul(wh, _C.matmul(input, ww.t())).contiguous()


def _fixed_point(w):
    """torch's uint8 weights: integers of `precision` fractional bits, the most
    that keep the largest weight under 2^15 (at most 22)."""
    p, top = 0, w.max() if w.size else 0.0
    while p < 22 and int(0.5 + top * (1 << (p + 1))) < (1 << 15):
        p += 1
    return np.sign(w) * np.floor(np.abs(w) * (1 << p) + 0.5), p


def _uint8(input, mw, mh):
    """Width pass, then height pass, each in torch's fixed point: the sum of
    pixel x weight plus half, shifted down, clamped to 0..255 and stored as
    uint8 between the passes. (The integer sums are exact in float64.)"""
    f64 = _C._dtypes["float64"]
    y = input.to(f64)
    for axis_w, last in ((mw, True), (mh, False)):
        iw, p = _fixed_point(axis_w)
        w = _C.tensor(iw, dtype=f64, device=input.device)
        y = _C.matmul(y, w.t()) if last else _C.matmul(w, y)
        y = y.add(float(1 << (p - 1)) if p else 0.0).div(float(1 << p)).floor_().clamp_(0, 255)
    return y.to(input.dtype)
