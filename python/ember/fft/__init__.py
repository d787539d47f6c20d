"""torch.fft. The transforms produce (or take) complex tensors, which ember cannot hold yet
(complex dtypes are known by their traits only), so every transform raises NotImplementedError
saying so; the real-valued helpers (fftfreq, rfftfreq, fftshift, ifftshift) are implemented.
The module imports, so code that only imports it (peft does, at import) loads."""
import operator

from .. import _C

_TRANSFORMS = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
               "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn"]


def _absent_transform(name):
    def transform(input, *args, **kwargs):
        raise NotImplementedError(f"torch.fft.{name}: ember has no complex tensors yet, so no FFTs "
                                  f"(input: {tuple(getattr(input, 'shape', ()))}, "
                                  f"{getattr(input, 'dtype', type(input).__name__)})")

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"Not available in ember: torch.fft.{name} needs complex tensors."
    return transform


for _name in _TRANSFORMS:
    globals()[_name] = _absent_transform(_name)
del _name


def _count(name, n):
    try:
        return operator.index(n)  # ints and integer scalars (NumPy's), not floats
    except TypeError:
        raise TypeError(f"{name}(): argument 'n' must be int, not {type(n).__name__}") from None


def fftfreq(n, d=1.0, *, dtype=None, device=None, layout=None, requires_grad=False):
    """Sample frequencies of an n-point FFT with sample spacing d: [0, 1, ..., -1] / (d n)."""
    n = _count("fftfreq", n)
    if n <= 0:
        raise RuntimeError(f"fftfreq: n must be positive, got {n}")
    k = _C.arange(n, dtype=dtype, device=device)
    k = _C.where(k < (n + 1) // 2, k, k - n)
    out = k / (d * n)
    return out.requires_grad_() if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, device=None, layout=None, requires_grad=False):
    """Sample frequencies of rfft's n // 2 + 1 outputs: [0, 1, ..., n // 2] / (d n)."""
    n = _count("rfftfreq", n)
    if n <= 0:
        raise RuntimeError(f"rfftfreq: n must be positive, got {n}")
    out = _C.arange(n // 2 + 1, dtype=dtype, device=device) / (d * n)
    return out.requires_grad_() if requires_grad else out


def _shift(input, dim, sign):
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"fftshift(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is None:
        dim = tuple(range(input.dim()))
    elif isinstance(dim, int):
        dim = (dim,)
    dim = tuple(dim)
    shifts = tuple(sign * (input.shape[d] // 2) if sign > 0 else -(input.shape[d] // 2) for d in dim)
    return _C.roll(input, shifts, dim)


def fftshift(input, dim=None):
    """Moves the zero-frequency term to the centre (rolls each dim by n // 2)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """Inverse of fftshift (rolls each dim by -(n // 2))."""
    return _shift(input, dim, -1)


__all__ = _TRANSFORMS + ["fftfreq", "rfftfreq", "fftshift", "ifftshift"]
