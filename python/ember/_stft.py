"""Window functions and the short-time Fourier transform (torch.stft /
istft), written with ember.fft's transforms, unfold and fold, so they are
differentiable like the rest."""
import math
from . import _C
from . import fft as _fft

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "stft",
           "istft"]


def _window(name, window_length, periodic, dtype, device, requires_grad, fn):
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dtype = dtype if dtype is not None else _C.get_default_dtype()
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if window_length == 0:
        w = _C.empty(0, dtype=dtype, device=device)
    elif window_length == 1:
        w = _C.ones(1, dtype=dtype, device=device)
    else:
        # a periodic window of length L is the symmetric one of L + 1 without its last point
        n = window_length + 1 if periodic else window_length
        k = _C.arange(n, dtype=_C._dtypes["float64"])
        w = fn(k, n - 1)[:window_length].to(dtype=dtype, device=device)
    return w.requires_grad_() if requires_grad else w


def _cosine_sum(coeffs):
    def fn(k, m):
        out = _C.zeros(k.shape, dtype=k.dtype)
        for j, a in enumerate(coeffs):
            out = out + a * _C.cos(k * (2 * math.pi * j / m)) * (-1) ** j
        return out
    return fn


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi k / (N - 1))"""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum((0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """alpha - beta cos(2 pi k / (N - 1))"""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((alpha, beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.42 - 0.5 cos(2 pi k / (N - 1)) + 0.08 cos(4 pi k / (N - 1))"""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum((0.42, 0.5, 0.08)))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2 k / (N - 1) - 1|"""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 1 - _C.abs(2 * k / m - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - (2 k / (N - 1) - 1)^2)) / I0(beta)"""
    from . import special

    def fn(k, m):
        r = (2 * k / m - 1).clamp(-1, 1)
        return special.i0(beta * _C.sqrt(1 - r * r)) / special.i0(_C.tensor(float(beta), dtype=k.dtype))
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, fn)


def _padded_window(window, n_fft, win_length, like):
    if window is None:
        window = _C.ones(win_length, dtype=like.real.dtype if like.is_complex() else like.dtype, device=like.device)
    if window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = _C.cat([window.new_zeros(left), window, window.new_zeros(n_fft - win_length - left)])
    return window


def _check_lengths(n_fft, hop_length, win_length, name):
    hop = hop_length if hop_length is not None else n_fft // 4
    win = win_length if win_length is not None else n_fft
    if n_fft <= 0:
        raise RuntimeError(f"{name}: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{name}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got win_length={win}")
    return hop, win


def _check_tensor(name, x):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """Fourier transforms of the windowed frames of a 1-D signal (or a batch
    of them): (freq, frames) per signal."""
    _check_tensor("stft", input)
    if return_complex is None:
        if not input.is_complex() and (window is None or not window.is_complex()):
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D tensor")
    hop, win = _check_lengths(n_fft, hop_length, win_length, "stft")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if center:
        pad = n_fft // 2
        from .nn import functional as F
        x = F.pad(x.unsqueeze(1), (pad, pad), mode=pad_mode).squeeze(1)
    n = x.shape[-1]
    if not 0 < n_fft <= n:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {n}, but got n_fft={n_fft}")
    w = _padded_window(window, n_fft, win, x)
    frames = x.unfold(-1, n_fft, hop) * w  # (B, frames, n_fft)
    complex_in = frames.is_complex()
    if onesided is None:
        onesided = not complex_in
    if onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if onesided else _fft.fft(frames, dim=-1, norm=norm)
    spec = spec.transpose(-1, -2)
    if input.dim() == 1:
        spec = spec.squeeze(0)
    if not return_complex:
        return _C.view_as_real(spec.contiguous())
    return spec


def _overlap_add(frames, hop, length):
    """frames (B, n_fft, T) summed into (B, length) at offsets t * hop"""
    from .nn import functional as F
    n_fft = frames.shape[1]
    out = F.fold(frames, output_size=(1, length), kernel_size=(1, n_fft), stride=(1, hop))
    return out.reshape(frames.shape[0], length)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The inverse of stft, by overlap-add of the inverse transforms of the
    frames, divided by the summed squared window."""
    _check_tensor("istft", input)
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex values, but got "
                           f"{input.dim()}D")
    hop, win = _check_lengths(n_fft, hop_length, win_length, "istft")
    spec = input if input.dim() == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided:
        if n_fft // 2 + 1 != n_freq:
            raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to "
                               f"match n_fft / 2 + 1 when onesided=True, but got {n_freq}")
        if return_complex:
            raise RuntimeError("istft: cannot have onesided output if return_complex=True")
    elif n_freq != n_fft:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the input tensor to "
                           f"match n_fft when onesided=False, but got {n_freq}")
    norm = "ortho" if normalized else "backward"
    spec = spec.transpose(-1, -2)  # (B, T, freq)
    frames = _fft.irfft(spec, n=n_fft, dim=-1, norm=norm) if onesided else _fft.ifft(spec, dim=-1, norm=norm)
    if not return_complex and frames.is_complex():
        frames = frames.real
    w = _padded_window(window, n_fft, win, frames)
    frames = (frames * w).transpose(-1, -2)  # (B, n_fft, T)
    expected = n_fft + hop * (n_frames - 1)
    if frames.is_complex():
        y = _C.complex(_overlap_add(frames.real.contiguous(), hop, expected),
                       _overlap_add(frames.imag.contiguous(), hop, expected))
    else:
        y = _overlap_add(frames, hop, expected)
    wsq = (w.abs() ** 2 if w.is_complex() else w * w).reshape(1, n_fft, 1).expand(1, n_fft, n_frames).contiguous()
    envelope = _overlap_add(wsq, hop, expected)
    start = n_fft // 2 if center else 0
    end = expected - (n_fft // 2 if center else 0)
    if length is not None:
        end = start + length
    y = y[:, start:min(end, expected)]
    envelope = envelope[:, start:min(end, expected)]
    if float(envelope.abs().min()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the sum of the squared windows is nearly zero; "
                           "choose a window and hop_length that overlap (NOLA)")
    y = y / envelope
    if length is not None and y.shape[-1] < length:
        y = _C.cat([y, y.new_zeros(y.shape[0], length - y.shape[-1])], -1)
    return y.squeeze(0) if input.dim() == 2 else y
