"""ember.fft: the real-valued helpers against NumPy; the transforms, which need complex tensors
ember does not have yet, raise NotImplementedError saying so."""
import numpy as np
import pytest

import ember
import ember.fft as fft


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
    np.testing.assert_array_equal(fft.ifftshift(fft.fftshift(t, dim=dim), dim=dim).numpy(), x)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "fft2", "fftn", "hfft"])
def test_transforms_say_complex_tensors_are_missing(name):
    with pytest.raises(NotImplementedError, match="complex"):
        getattr(fft, name)(ember.ones(4))


def test_fftfreq_bad_n():
    with pytest.raises(RuntimeError, match="0"):
        fft.fftfreq(0)


def test_helpers_reject_junk():
    with pytest.raises(TypeError, match="Tensor"):
        fft.fftshift(3)
    with pytest.raises(TypeError, match="int"):
        fft.rfftfreq(2.5)
