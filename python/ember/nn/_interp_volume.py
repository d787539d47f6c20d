"""interpolate() of 5-D (N, C, D, H, W) input: nearest and nearest-exact
pick one source index per output position on each spatial axis; trilinear
weights are a product of per-axis linear weights, so resampling D, then H,
then W (two gathers and a weighted sum per axis) gives torch's values.
Indices and weights follow torch's CPU kernels: nearest in float32 whatever
the dtype, linear in the input's compute type (float32 for float32, half and
bfloat16; float64 for float64). Differentiable through index_select.
Area mode is adaptive average pooling (nn/_pool_nd.py)."""
from .._lazy import numpy as np
from .. import _C


def _check(input, out, mode):
    ins = list(input.shape[2:])
    if any(n <= 0 for n in ins) or any(n <= 0 for n in out):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (D: {ins[0]}, "
                           f"H: {ins[1]}, W: {ins[2]}) output (D: {out[0]}, H: {out[1]}, W: {out[2]})")
    dt = input.dtype
    kind = "linear" if mode == "trilinear" else "nearest"
    if not dt.is_floating_point and (kind == "linear" or str(dt) != "ember.uint8"):
        from .functional import _dtype_name
        raise NotImplementedError(f"\"compute_indices_weights_{kind}\" not implemented for '{_dtype_name(dt)}'")


def _nearest_index(n_in, n_out, scale_factor, exact):
    o = np.arange(n_out)
    f = np.float32
    s = f(1.0 / scale_factor) if scale_factor else f(n_in) / f(n_out)
    pos = (o.astype(f) + f(0.5)) if exact else o.astype(f)
    return np.minimum(np.floor(pos * s).astype(np.int64), n_in - 1)


def _linear_weights(n_in, n_out, scale_factor, align_corners, f):
    """(i0, i1, w1): output o reads i0 and i1 with weights 1 - w1 and w1."""
    if align_corners:
        s = f(n_in - 1) / f(n_out - 1) if n_out > 1 else f(0)
    else:
        s = f(1.0 / scale_factor) if scale_factor else f(n_in) / f(n_out)
    o = np.arange(n_out).astype(f)
    src = s * o if align_corners else np.maximum(s * (o + f(0.5)) - f(0.5), f(0))
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < n_in - 1)
    w1 = np.clip(src - i0.astype(f), f(0), f(1))
    return i0, i1, w1


def _along(x, d, idx):
    return x.index_select(d, _C.from_numpy(np.ascontiguousarray(idx, dtype=np.int64)).to(x.device))


def interpolate_volume(input, output_size, scale_factors, mode, align_corners):
    out = [int(o) for o in output_size]
    _check(input, out, mode)
    scales = scale_factors if scale_factors is not None else [None] * 3
    x = input
    f = np.float64 if str(input.dtype) == "ember.float64" else np.float32
    for axis in range(3):
        d, n_in, n_out = axis + 2, input.shape[axis + 2], out[axis]
        if mode == "trilinear":
            i0, i1, w1 = _linear_weights(n_in, n_out, scales[axis], align_corners, f)
            shape = [1] * 5
            shape[d] = n_out
            w1t = _C.from_numpy(np.ascontiguousarray(w1)).to(device=x.device, dtype=x.dtype).reshape(shape)
            w0t = _C.from_numpy(np.ascontiguousarray(f(1) - w1)).to(device=x.device, dtype=x.dtype).reshape(shape)
            x = _along(x, d, i0) * w0t + _along(x, d, i1) * w1t
        else:
            x = _along(x, d, _nearest_index(n_in, n_out, scales[axis], mode == "nearest-exact"))
    from .functional import _keep_layout
    return _keep_layout(x.contiguous(), input)  # channels_last_3d in, channels_last_3d out, as torch's
