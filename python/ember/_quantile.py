"""torch.quantile / torch.nanquantile (and their Tensor methods), composed from ember ops.

Sort along the reduced dim (NaNs sort last), read each q at rank q * (n - 1) with torch's
interpolation modes, and gather. sort, gather and lerp are differentiable, so autograd
comes for free. A row holding a NaN gives NaN (quantile) or is read over its non-NaN
values only (nanquantile; all-NaN rows give NaN).
"""
from . import _C
from ._autocast_policy import fp32_policy as _fp32_policy

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _prepare(input, q, dim, interpolation, name):
    from . import float32, float64  # (this module loads while ember's namespace is being built)
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not isinstance(q, (_C.Tensor, int, float)) or isinstance(q, bool):  # torch's argument parser first
        raise TypeError(f"{name}(): argument 'q' must be a float or a Tensor, not {type(q).__name__}")
    if input.dtype not in (float32, float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _MODES:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if isinstance(q, _C.Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        scalar_q = q.dim() == 0
        qs = q.reshape(-1)
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        scalar_q = True
        qs = _C.tensor([float(q)], dtype=input.dtype, device=input.device)
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if dim is not None:
        nd = max(input.dim(), 1)
        if not -nd <= dim < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    # a tensor q's values are checked last (torch reads them only when computing)
    if isinstance(q, _C.Tensor) and qs.numel() and (bool((qs < 0).any()) or bool((qs > 1).any())):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    return qs, scalar_q


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    qs, scalar_q = _prepare(input, q, dim, interpolation, name)
    ndim = input.dim()
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        x = input if ndim else input.reshape(1)
        d = dim % max(ndim, 1)
    x = x.movedim(d, -1)  # (..., n)
    n = x.shape[-1]
    sorted_x = x.sort(-1).values  # NaNs last
    nan = x.isnan()
    if ignore_nan:
        count = (~nan).sum(-1, keepdim=True)  # (..., 1)
        last = (count - 1).clamp(min=0).to(x.dtype)
        all_nan = count == 0
    else:
        last = _C.full(tuple(x.shape[:-1]) + (1,), n - 1, dtype=x.dtype, device=x.device)
        all_nan = nan.any(-1, keepdim=True)
    ranks = qs.reshape((1,) * (x.dim() - 1) + (-1,)) * last  # (..., Q)
    ranks = ranks.masked_fill(all_nan.expand_as(ranks), n - 1)  # NaN rows read their last (NaN) value
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as torch
    lo = ranks.floor().long()
    hi = ranks.ceil().long()
    below = sorted_x.gather(-1, lo)
    above = sorted_x.gather(-1, hi)
    if interpolation == "midpoint":
        out = below.lerp(above, (hi > lo).to(x.dtype) * 0.5)
    elif interpolation == "linear":
        out = below.lerp(above, ranks - lo.to(x.dtype))
    else:
        out = below
    out = out.movedim(-1, 0)  # (Q, ...)
    if keepdim:
        if dim is None:
            out = out.reshape((out.shape[0],) + (1,) * ndim)
        elif ndim:
            out = out.unsqueeze(d + 1)
    return out[0] if scalar_q else out


@_fp32_policy
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    result = _quantile(input, q, dim, keepdim, interpolation, False, "quantile")
    return out.resize_(result.shape).copy_(result) if out is not None else result


@_fp32_policy
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    result = _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")
    return out.resize_(result.shape).copy_(result) if out is not None else result


__all__ = ["quantile", "nanquantile"]
