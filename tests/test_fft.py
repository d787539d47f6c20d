"""ember.fft against NumPy's FFT (every transform, lengths with large prime
factors, n/s/dim/norm, dtypes), gradients by finite differences
(gradcheck), meta shapes, torch's errors; the window functions, stft and
istft against values stored from torch (tests/data/make_spectral_reference.py)."""
import os

import numpy as np
import pytest

import ember
import ember.fft as fft

RNG = np.random.default_rng(0)
DATA = os.path.join(os.path.dirname(__file__), "data", "spectral_torch_reference.npz")


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(got, want, dtype):
    tol = 1e-10 if dtype in (np.float64, np.complex128) else 2e-4
    scale = max(1.0, float(np.abs(want).max()) if np.size(want) else 1.0)
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 30, 61, 64, 67, 97, 100, 128, 243, 1009, 4096])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_fft_ifft_any_length(n, dtype):
    x = _complex((2, n), dtype)
    t = ember.tensor(x)
    _close(fft.fft(t), np.fft.fft(x.astype(np.complex128)), dtype)
    _close(fft.ifft(t), np.fft.ifft(x.astype(np.complex128)), dtype)
    assert fft.fft(t).dtype == t.dtype


@pytest.mark.parametrize("name", ["fft", "ifft"])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 5, 17])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_c2c_n_dim_norm(name, norm, n, dim):
    x = _complex((6, 9))
    _close(getattr(fft, name)(ember.tensor(x), n=n, dim=dim, norm=norm), getattr(np.fft, name)(x, n=n, axis=dim,
                                                                                               norm=norm), np.complex128)


@pytest.mark.parametrize("name", ["rfft", "ihfft"])
@pytest.mark.parametrize("n", [None, 1, 6, 7, 101])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_real_to_half_spectrum(name, n, dtype):
    x = RNG.standard_normal((3, 20)).astype(dtype)
    got = getattr(fft, name)(ember.tensor(x), n=n)
    _close(got, getattr(np.fft, name)(x.astype(np.float64), n=n), dtype)
    assert got.dtype == (ember.complex64 if dtype == np.float32 else ember.complex128)


@pytest.mark.parametrize("name", ["irfft", "hfft"])
@pytest.mark.parametrize("n", [None, 1, 6, 7, 30, 131])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_half_spectrum_to_real(name, n, norm):
    x = _complex((3, 11))
    got = getattr(fft, name)(ember.tensor(x), n=n, norm=norm)
    _close(got, getattr(np.fft, name)(x, n=n, norm=norm), np.float64)
    assert got.dtype == ember.float64


@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn", "ihfft2", "ihfftn"])
@pytest.mark.parametrize("s", [None, (4, 6), (7, 5)])
def test_n_dimensional(name, s):
    real = name.startswith(("rfft", "ihfft"))
    x = RNG.standard_normal((3, 8, 9)) if real else _complex((3, 8, 9))
    axes = list(range(3 - len(s), 3)) if s is not None else (None if name[-1] == "n" else [1, 2])
    if name.startswith("ihfft"):  # NumPy has no n-dimensional ihfft: conj(rfftn) / N
        sizes = s if s is not None else [x.shape[a] for a in (axes or range(3))]
        want = np.conj(np.fft.rfftn(x, s=s, axes=axes)) / np.prod(sizes)
    else:
        want = getattr(np.fft, name)(x, s=s, axes=axes) if name[-1] == "n" else getattr(np.fft, name)(x, s=s)
    _close(getattr(fft, name)(ember.tensor(x), s=s), want, np.complex128)


@pytest.mark.parametrize("name", ["irfft2", "irfftn", "hfft2", "hfftn"])
@pytest.mark.parametrize("s", [None, (9, 8), (4, 7)])
def test_n_dimensional_to_real(name, s):
    x = _complex((2, 6, 5))
    if name.startswith("hfft"):  # NumPy has no n-dimensional hfft: irfftn of the conjugate, forward-scaled
        axes = [1, 2]
        want = np.fft.irfftn(np.conj(x), s=s, axes=axes) * np.prod(
            s if s is not None else (x.shape[1], 2 * (x.shape[2] - 1)))
    else:
        want = np.fft.irfftn(x, s=s, axes=[1, 2])
    _close(getattr(fft, name)(ember.tensor(x), s=s, dim=(1, 2)), want, np.float64)


def test_dim_and_s_rules():
    x = _complex((3, 4, 5))
    t = ember.tensor(x)
    _close(fft.fftn(t, dim=(0, 2)), np.fft.fftn(x, axes=(0, 2)), np.complex128)
    _close(fft.fftn(t, s=(6,)), np.fft.fftn(x, s=(6,), axes=(2,)), np.complex128)
    _close(fft.fftn(t, s=(-1, 7), dim=(0, 1)), np.fft.fftn(x, s=(3, 7), axes=(0, 1)), np.complex128)


def test_dtype_promotion():
    assert fft.fft(ember.ones(4)).dtype == ember.complex64
    assert fft.fft(ember.ones(4, dtype=ember.float64)).dtype == ember.complex128
    assert fft.fft(ember.arange(4)).dtype == ember.complex64  # integers: the default float
    assert fft.rfft(ember.arange(4)).dtype == ember.complex64
    assert fft.irfft(ember.ones(4, dtype=ember.complex128)).dtype == ember.float64
    _close(fft.fft(ember.arange(5)), np.fft.fft(np.arange(5.0)), np.float32)


def test_errors_as_torch():
    x = ember.ones(4, dtype=ember.complex64)
    with pytest.raises(ValueError, match="Invalid normalization mode: nope"):
        fft.fft(x, norm="nope")
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        fft.fft(x, n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        fft.fft(x, dim=3)
    with pytest.raises(RuntimeError, match="real input"):
        fft.rfft(x)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):
        fft.fft(ember.ones(4, dtype=ember.float16))
    with pytest.raises(RuntimeError, match="same length"):
        fft.fftn(ember.ones(3, 4), s=(2,), dim=(0, 1))
    with pytest.raises(RuntimeError, match="unique"):
        fft.fftn(ember.ones(3, 4), dim=(0, 0))
    with pytest.raises(TypeError):
        fft.fft([1.0, 2.0])


def test_out_argument():
    x = _complex((5,))
    out = ember.empty(5, dtype=ember.complex128)
    r = fft.fft(ember.tensor(x), out=out)
    assert r is out
    _close(out, np.fft.fft(x), np.complex128)


def test_meta_shapes():
    m = ember.empty(3, 10, device="meta")
    assert fft.fft(m).shape == (3, 10) and fft.fft(m).dtype == ember.complex64 and fft.fft(m).is_meta
    assert fft.rfft(m).shape == (3, 6)
    assert fft.irfft(fft.rfft(m)).shape == (3, 10) and fft.irfft(fft.rfft(m)).dtype == ember.float32
    assert fft.rfftn(m, s=(4, 8)).shape == (4, 5)


def _gradcheck(fn, x):
    assert ember.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name,kw", [("fft", {}), ("ifft", {"n": 6}), ("fft", {"norm": "ortho"}),
                                      ("fftn", {}), ("ifft2", {"norm": "forward"}), ("irfft", {}),
                                      ("irfft", {"n": 9}), ("hfft", {"n": 8}), ("irfftn", {})])
def test_gradients_complex_input(name, kw):
    x = ember.tensor(_complex((3, 5)), requires_grad=True)
    _gradcheck(lambda a: getattr(fft, name)(a, **kw), x)


@pytest.mark.parametrize("name,kw", [("rfft", {}), ("rfft", {"n": 7}), ("ihfft", {}), ("rfftn", {}),
                                      ("rfft2", {"norm": "ortho"}), ("fft", {}), ("ihfftn", {"s": (2, 6)})])
def test_gradients_real_input(name, kw):
    x = ember.tensor(RNG.standard_normal((3, 6)), requires_grad=True)
    _gradcheck(lambda a: getattr(fft, name)(a, **kw), x)


def test_round_trips():
    x = RNG.standard_normal((4, 33))
    t = ember.tensor(x)
    np.testing.assert_allclose(fft.irfft(fft.rfft(t), n=33).numpy(), x, atol=1e-12)
    np.testing.assert_allclose(fft.ifftn(fft.fftn(t)).real.numpy(), x, atol=1e-12)
    np.testing.assert_allclose(fft.ihfft(fft.hfft(fft.ihfft(t), n=33)).numpy(), fft.ihfft(t).numpy(), atol=1e-12)


@pytest.mark.parametrize("n,d", [(1, 1.0), (5, 1.0), (6, 0.5), (8, 2.0)])
def test_fftfreq_and_rfftfreq(n, d):
    np.testing.assert_allclose(fft.fftfreq(n, d).numpy(), np.fft.fftfreq(n, d), rtol=1e-6)
    np.testing.assert_allclose(fft.rfftfreq(n, d).numpy(), np.fft.rfftfreq(n, d), rtol=1e-6)
    assert fft.fftfreq(n).dtype == ember.float32


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1])
def test_fftshift_and_ifftshift(dim):
    x = np.arange(15.0, dtype=np.float32).reshape(3, 5)
    t = ember.tensor(x)
    np.testing.assert_array_equal(fft.fftshift(t, dim=dim).numpy(), np.fft.fftshift(x, axes=dim))
    np.testing.assert_array_equal(fft.ifftshift(t, dim=dim).numpy(), np.fft.ifftshift(x, axes=dim))


# ------------------------------------------------------------ windows, stft, istft

@pytest.fixture(scope="module")
def ref():
    return np.load(DATA)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows_match_torch(ref, name):
    for L in (0, 1, 2, 7, 16):
        for periodic in (True, False):
            got = getattr(ember, name)(L, periodic=periodic, dtype=ember.float64)
            np.testing.assert_allclose(got.numpy(), ref[f"{name}_{L}_{periodic}"], atol=1e-12)
    assert getattr(ember, name)(8).dtype == ember.float32
    with pytest.raises(RuntimeError, match="non-negative"):
        getattr(ember, name)(-1)


def _stft_configs():
    w = ember.hann_window(40, dtype=ember.float64)
    return [dict(n_fft=64), dict(n_fft=64, hop_length=10, win_length=40, window=w),
            dict(n_fft=50, center=False, normalized=True), dict(n_fft=32, onesided=False),
            dict(n_fft=64, pad_mode="constant")]


@pytest.mark.parametrize("i", range(5))
def test_stft_istft_match_torch(ref, i):
    c = _stft_configs()[i]
    x = ember.tensor(ref["x"])
    s = ember.stft(x, return_complex=True, **c)
    np.testing.assert_allclose(s.numpy(), ref[f"stft{i}"], atol=1e-10)
    kw = {k: v for k, v in c.items() if k != "pad_mode"}
    np.testing.assert_allclose(ember.istft(s, length=300, **kw).numpy(), ref[f"istft{i}"], atol=1e-10)


def test_stft_rules():
    x = ember.randn(100)
    with pytest.raises(RuntimeError, match="return_complex"):
        ember.stft(x, 16)
    assert ember.stft(x, 16, return_complex=False).shape == (9, 26, 2)
    with pytest.raises(RuntimeError, match="1D or 2D"):
        ember.stft(ember.randn(2, 2, 50), 16, return_complex=True)
    w = ember.hann_window(16, dtype=ember.float64, requires_grad=False)
    xd = ember.randn(64, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(lambda a: ember.stft(a, 16, window=w, return_complex=True).abs(), (xd,))
