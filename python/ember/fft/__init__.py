"""torch.fft: discrete Fourier transforms.

Every transform is one of torch's three primitives (ops.def's FFT block, the
kernels in csrc/cpu/fft.c): _fft_c2c, _fft_r2c and _fft_c2r, after the
input has been promoted (integers to the default float, real to complex
where the transform needs it) and cut or zero-padded to the requested
lengths. `norm` is "backward" (the default: the inverse transforms scale by
1/n), "ortho" (both by 1/sqrt(n)) or "forward" (the forward ones by 1/n).
The gradient of each primitive is its adjoint transform, so every function
here is differentiable."""
from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy
from .._checks import _write_out

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
           "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

_float64 = _C._dtypes["float64"]
_complex_of = {_C._dtypes["float32"]: _C._dtypes["complex64"], _float64: _C._dtypes["complex128"]}


def _norm_mode(norm, forward):
    """torch's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n"""
    if norm is None or norm == "backward":
        return 0 if forward else 2
    if norm == "forward":
        return 2 if forward else 0
    if norm == "ortho":
        return 1
    raise ValueError(f"Invalid normalization mode: {norm}")


def _float_input(x, name):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    if x.is_complex():
        return x
    if not x.is_floating_point():  # integers and bool compute in the default float, as torch
        return x.to(_C.get_default_dtype())
    if x.dtype not in _complex_of:
        raise RuntimeError(f"Unsupported dtype {str(x.dtype).replace('ember.', '').capitalize()}")
    return x


def _complex_input(x, name):
    x = _float_input(x, name)
    return x if x.is_complex() else x.to(_complex_of[x.dtype])


def _real_input(x, name):
    x = _float_input(x, name)
    if x.is_complex():
        raise RuntimeError(f"{name} expects a real input tensor, but got {str(x.dtype).replace('ember.', '')}")
    return x


def _check_points(n):
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _resize(x, dims, sizes):
    """x cut or zero-padded at the end of each dim to the given size"""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            pad = list(x.shape)
            pad[d] = n - have
            x = _C.cat([x, _C.zeros(pad, dtype=x.dtype, device=x.device)], d)
    return x


def _wrap(d, ndim):
    if not -ndim <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {d})")
    return d % ndim if ndim else 0


def _dims_and_sizes(x, s, dim, default_last=None):
    """torch's rules for (s, dim) of the n-dimensional transforms: both None,
    every dim; s alone, the last len(s) dims; dim alone, their sizes; -1 in
    s keeps a dim's size."""
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [_wrap(d, x.dim()) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > x.dim():
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {x.dim()} dimensions.")
        dims = list(range(x.dim() - len(s), x.dim()))
    else:
        dims = list(range(x.dim()))
    if s is None:
        sizes = [x.shape[d] for d in dims]
        if default_last is not None and dims:
            sizes[-1] = default_last(x.shape[dims[-1]])
    else:
        sizes = [int(n) if int(n) != -1 else (x.shape[d] if default_last is None or i + 1 < len(dims)
                                               else default_last(x.shape[d]))
                 for i, (d, n) in enumerate(zip(dims, s))]
    for n in sizes:
        _check_points(n)
    return dims, sizes


def _finish(result, out, name="fft"):
    return result if out is None else _write_out(name, out, result)


def _irfft_last(m):
    return 2 * (m - 1)


# ------------------------------------------------------------ complex to complex

@_fp32_policy
def _c2c(name, input, s, dim, norm, forward, out):
    x = _complex_input(input, name)
    dims, sizes = _dims_and_sizes(x, s, dim)
    x = _resize(x, dims, sizes)
    return _finish(_C._fft_c2c(x, dims, _norm_mode(norm, forward), forward), out)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The 1-D discrete Fourier transform along `dim` (cut or zero-padded to n)."""
    return _c2c("fft_fft", input, None if n is None else [n], [dim], norm, True, out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of fft."""
    return _c2c("fft_ifft", input, None if n is None else [n], [dim], norm, False, out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _c2c("fft_fft2", input, s, dim, norm, True, out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _c2c("fft_ifft2", input, s, dim, norm, False, out)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2c("fft_fftn", input, s, dim, norm, True, out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2c("fft_ifftn", input, s, dim, norm, False, out)


# ------------------------------------------------------------ real to half spectrum

@_fp32_policy
def _r2c(name, input, s, dim, norm, forward, out, conj=False):
    x = _real_input(input, name)
    dims, sizes = _dims_and_sizes(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    x = _resize(x, dims, sizes)
    y = _C._fft_r2c(x, dims, _norm_mode(norm, forward), True)
    return _finish(y.conj() if conj else y, out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """fft of a real input, the n // 2 + 1 non-negative frequencies."""
    return _r2c("rfft", input, None if n is None else [n], [dim], norm, True, out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _r2c("rfftn", input, s, dim, norm, True, out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _r2c("rfftn", input, s, dim, norm, True, out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of hfft: the half spectrum of ifft of a real input."""
    return _r2c("ihfft", input, None if n is None else [n], [dim], norm, False, out, conj=True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _r2c("ihfftn", input, s, dim, norm, False, out, conj=True)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _r2c("ihfftn", input, s, dim, norm, False, out, conj=True)


# ------------------------------------------------------------ half spectrum to real

@_fp32_policy
def _c2r(name, input, s, dim, norm, forward, out, conj=False):
    x = _complex_input(input, name)
    dims, sizes = _dims_and_sizes(x, s, dim, default_last=_irfft_last)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = sizes[-1]
    x = _resize(x, dims, sizes[:-1] + [last // 2 + 1])
    if conj:
        x = x.conj()
    return _finish(_C._fft_c2r(x, dims, _norm_mode(norm, forward), last), out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of rfft: n real outputs (2 (m - 1) by default) from m frequencies."""
    return _c2r("irfft", input, None if n is None else [n], [dim], norm, False, out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _c2r("irfftn", input, s, dim, norm, False, out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2r("irfftn", input, s, dim, norm, False, out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """fft of a Hermitian-symmetric signal given by its first half: n real outputs."""
    return _c2r("hfft", input, None if n is None else [n], [dim], norm, True, out, conj=True)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _c2r("hfftn", input, s, dim, norm, True, out, conj=True)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    return _c2r("hfftn", input, s, dim, norm, True, out, conj=True)


# ------------------------------------------------------------ helpers

def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Sample frequencies of an n-point fft with sample spacing d: [0, 1, ..., -1] / (d n)."""
    n = int(n)
    if n <= 0:
        raise RuntimeError(f"fftfreq: n must be positive, got {n}")
    k = _C.arange(n, dtype=dtype if dtype is not None else _C.get_default_dtype(), device=device)
    k = _C.where(k < (n + 1) // 2, k, k - n)
    result = k / (d * n)
    return _finish(result.requires_grad_() if requires_grad else result, out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Sample frequencies of rfft's n // 2 + 1 outputs: [0, 1, ..., n // 2] / (d n)."""
    n = int(n)
    if n <= 0:
        raise RuntimeError(f"rfftfreq: n must be positive, got {n}")
    k = _C.arange(n // 2 + 1, dtype=dtype if dtype is not None else _C.get_default_dtype(), device=device)
    result = k / (d * n)
    return _finish(result.requires_grad_() if requires_grad else result, out)


def _shift(input, dim, back):
    if dim is None:
        dim = tuple(range(input.dim()))
    elif isinstance(dim, int):
        dim = (dim,)
    dim = tuple(dim)
    shifts = tuple(-(input.shape[d] // 2) if back else input.shape[d] // 2 for d in dim)
    return _C.roll(input, shifts, dim)


def fftshift(input, dim=None):
    """Moves the zero frequency to the centre: each dim rolled by n // 2."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of fftshift: each dim rolled by -(n // 2)."""
    return _shift(input, dim, True)


