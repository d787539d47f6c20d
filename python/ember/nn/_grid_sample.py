"""F.affine_grid and F.grid_sample, composed from ember ops.

affine_grid: the output's normalized pixel centres (x, y[, z], 1) times
theta^T, one matmul per batch. grid_sample: each grid point's coordinates
are mapped to input pixels (align_corners: -1 and 1 are the corner pixels'
centres, else their outer edges), folded by the padding mode (border:
clamped; reflection: mirrored at the edges, then clamped), and the input is
gathered at the neighbouring pixels with their interpolation weights
(bilinear / trilinear: the 2^k corners; nearest: the rounded position, half
to even; bicubic, 4-d only: 4 x 4 taps with Keys' cubic, A = -0.75, the
padding applied per tap). Pixels outside the input contribute zero. The
gradient wrt the input comes from gather, the one wrt the grid from the
weights (zero for nearest), as torch defines them."""

import warnings

from .._lazy import numpy as np  # NumPy on first use: import ember stays fast

from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def _align(align_corners):
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def _base_axis(n, align_corners):
    """normalized centres of n pixels along one axis"""
    if n <= 1:
        return np.zeros(max(n, 1))
    v = np.linspace(-1.0, 1.0, n)
    return v if align_corners else v * (n - 1) / n


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) or (N, D, H, W, 3) of the affine maps theta (N, 2, 3) or (N, 3, 4)."""
    from ._conv_nd import _expect_tensors
    _expect_tensors("affine_grid", ("theta", theta, False))
    align_corners = _align(align_corners)
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    k = len(size) - 2
    if theta.dim() != 3 or list(theta.shape[1:]) != [k, k + 1]:
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape Nx{k}x{k + 1} for size {size}. "
                         f"Got {theta.shape}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.size(0) != size[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, {k + 1}] "
                           f"but got: [{theta.size(0)}, {k + 1}].")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", UserWarning, stacklevel=2)
    axes = np.meshgrid(*[_base_axis(n, align_corners) for n in spatial], indexing="ij")  # (D,) H, W
    base = np.stack(list(axes)[::-1] + [np.ones(spatial)], axis=-1).reshape(1, -1, k + 1)  # x first, then y (, z), 1
    base = _C.from_numpy(np.ascontiguousarray(base)).to(device=theta.device, dtype=theta.dtype)
    grid = base.matmul(theta.transpose(1, 2))  # (N, prod(spatial), k)
    return grid.view([size[0]] + spatial + [k])


def _bool():
    from .. import bool as b
    return b


def _unnormalize(c, n, align_corners):
    return (c + 1) * ((n - 1) / 2) if align_corners else ((c + 1) * n - 1) / 2


def _reflect(c, low2, high2):
    """c mirrored into [low2 / 2, high2 / 2] (bounds given doubled, as they may be half-integers)"""
    if low2 == high2:
        return c * 0
    lo, span = low2 / 2, (high2 - low2) / 2
    c = (c - lo).abs()
    extra = c.fmod(span)
    flips = (c / span).floor()
    return _C.where(flips.fmod(2) == 0, extra + lo, span - extra + lo)


def _clip(c, n):
    """c clamped to [0, n - 1]; NaN to 0 (torch's clip, which reads a NaN grid value as -1)"""
    return _C.where(c.isnan(), 0.0, c).clamp(0, n - 1)


def _pad_coords(c, n, padding_mode, align_corners):
    if padding_mode == "border":
        return _clip(c, n)
    if padding_mode == "reflection":
        return _clip(_reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1), n)
    return c


def _cubic_weights(t):
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for fractions t"""
    A = -0.75
    near = lambda x: ((A + 2) * x - (A + 3)) * x * x + 1  # noqa: E731  |x| <= 1
    far = lambda x: ((A * x - 5 * A) * x + 8 * A) * x - 4 * A  # noqa: E731  1 < |x| < 2
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@_fp32_policy
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) / (N, C, D, H, W) at grid (N, Ho, Wo, 2) / (N, Do, Ho, Wo, 3), coordinates in [-1, 1]."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    from ._conv_nd import _expect_tensors
    _expect_tensors("grid_sampler", ("input", input, False), ("grid", grid, False))
    align_corners = _align(align_corners)
    isz, gsz = list(input.shape), list(grid.shape)
    if input.dtype != grid.dtype:
        from .functional import _dtype_name
        raise RuntimeError(f"expected scalar type {_dtype_name(input.dtype)} but found {_dtype_name(grid.dtype)}")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        if grid.dim() in (4, 5) and gsz[-1] != grid.dim() - 2:
            raise RuntimeError(f"grid_sampler(): expected grid to have size {grid.dim() - 2} in last dimension, but "
                               f"got grid with sizes {gsz}")
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but "
                           f"got input with sizes {isz} and grid with sizes {gsz}")
    k = input.dim() - 2
    if isz[0] != gsz[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {isz} and grid with sizes {gsz}")
    if gsz[-1] != k:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {k} in last dimension, but got grid with "
                           f"sizes {gsz}")
    for d in range(2, input.dim()):
        if isz[d] == 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {isz} with dimension {d} being empty")
    if mode == "bicubic" and k != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point:
        from .functional import _dtype_name
        raise NotImplementedError(f"\"grid_sampler_{k}d_cpu_kernel_impl\" not implemented for "
                                  f"'{_dtype_name(input.dtype)}'")
    N, C, sizes = isz[0], isz[1], isz[2:]
    out_spatial = gsz[1:-1]
    P = int(np.prod(out_spatial))
    flat_in = input.reshape(N, C, int(np.prod(sizes)))
    strides = [int(np.prod(sizes[a + 1:])) for a in range(k)]
    # per input axis (depth, height, width): the grid's component for it, (N, P)
    coords = [grid[..., k - 1 - a].reshape(N, P) for a in range(k)]

    def fetch(pos):
        """input at integer positions pos (one (N, P) int64 tensor per axis), zero outside"""
        valid, flat = None, None
        for a, p in enumerate(pos):
            ok = (p >= 0) & (p < sizes[a])
            valid = ok if valid is None else valid & ok
            term = p.clamp(0, sizes[a] - 1) * strides[a]
            flat = term if flat is None else flat + term
        vals = flat_in.gather(2, flat.unsqueeze(1).expand(N, C, P))
        return vals.masked_fill(~valid.unsqueeze(1), 0)

    if mode == "bicubic":
        src = [_unnormalize(c, n, align_corners) for c, n in zip(coords, sizes)]
        lo = [s.floor() for s in src]
        wts = [_cubic_weights(s - f) for s, f in zip(src, lo)]
        out = None
        for i in range(4):
            y = _pad_coords(lo[0] + (i - 1), sizes[0], padding_mode, align_corners).long()
            for j in range(4):
                x = _pad_coords(lo[1] + (j - 1), sizes[1], padding_mode, align_corners).long()
                term = fetch([y, x]) * (wts[0][i] * wts[1][j]).unsqueeze(1)
                out = term if out is None else out + term
    else:
        src = [_pad_coords(_unnormalize(c, n, align_corners), n, padding_mode, align_corners)
               for c, n in zip(coords, sizes)]
        if mode == "nearest":
            out = fetch([s.round().long() for s in src])
            if grid.requires_grad and _C.is_grad_enabled():
                # torch's grid gradient here is zeros, not None: a zero-valued link to the grid
                out = out + _C.where(_C.zeros_like(grid, dtype=_bool()), grid, 0).sum()
        else:
            lo = [s.floor() for s in src]
            hi_w = [s - f for s, f in zip(src, lo)]
            lo_i = [f.long() for f in lo]
            out = None
            for corner in range(2 ** k):
                bits = [(corner >> (k - 1 - a)) & 1 for a in range(k)]
                w = None
                for a, b in enumerate(bits):
                    wa = hi_w[a] if b else 1 - hi_w[a]
                    w = wa if w is None else w * wa
                term = fetch([li + b for li, b in zip(lo_i, bits)]) * w.unsqueeze(1)
                out = term if out is None else out + term
    return out.view([N, C] + out_spatial)
