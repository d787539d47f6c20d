"""ember.nn.attention.sdpa_kernel / SDPBackend and torch.backends.cuda's
SDPA switches: which kernel F.scaled_dot_product_attention runs (seen in
the grad_fn's name), that every choice gives NumPy's values, that the
switches come back after the block, and torch's error when no allowed
kernel fits. `L` runs each test on ember and, when installed, on torch."""
import numpy as np
import pytest

from op_db import np_attention

FUSED = "ScaledDotProductFlashAttentionForCpuBackward0"


def _qkv(L, shape=(1, 2, 5, 8)):
    rng = np.random.default_rng(3)
    arrs = [rng.standard_normal(shape) for _ in range(3)]
    return arrs, [L.tensor(a, requires_grad=True) for a in arrs]


def test_default_switches_are_on(L):
    c = L.backends.cuda
    assert c.flash_sdp_enabled() and c.math_sdp_enabled() and c.mem_efficient_sdp_enabled()


@pytest.mark.parametrize("causal", [False, True])
def test_each_backend_gives_numpys_values(L, causal):
    from_np, (q, k, v) = _qkv(L)
    ref, _ = np_attention(*from_np, is_causal=causal)
    SDP = L.nn.attention.SDPBackend
    F = L.nn.functional
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert type(y.grad_fn).__name__ == FUSED  # the fused CPU kernel by default
    with L.nn.attention.sdpa_kernel(SDP.MATH):
        assert not L.backends.cuda.flash_sdp_enabled() and L.backends.cuda.math_sdp_enabled()
        ym = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert type(ym.grad_fn).__name__ != FUSED
    assert L.backends.cuda.flash_sdp_enabled()  # restored
    with L.nn.attention.sdpa_kernel([SDP.FLASH_ATTENTION]):
        yf = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert type(yf.grad_fn).__name__ == FUSED
    for out in (y, ym, yf):
        np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-10)


def test_no_allowed_kernel_raises(L):
    _, (q, k, v) = _qkv(L)
    SDP = L.nn.attention.SDPBackend
    with L.nn.attention.sdpa_kernel(SDP.EFFICIENT_ATTENTION):
        with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
            L.nn.functional.scaled_dot_product_attention(q, k, v)


def test_switches_restored_after_an_error(L):
    SDP = L.nn.attention.SDPBackend
    with pytest.raises(ValueError):
        with L.nn.attention.sdpa_kernel(SDP.MATH):
            raise ValueError
    assert L.backends.cuda.flash_sdp_enabled()


def test_old_sdp_kernel_and_enable_flags(L):
    import warnings
    _, (q, k, v) = _qkv(L)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates sdp_kernel
        with L.backends.cuda.sdp_kernel(enable_flash=False):
            assert not L.backends.cuda.flash_sdp_enabled()
            y = L.nn.functional.scaled_dot_product_attention(q, k, v)
            assert type(y.grad_fn).__name__ != FUSED
    assert L.backends.cuda.flash_sdp_enabled()
    L.backends.cuda.enable_math_sdp(False)
    try:
        assert not L.backends.cuda.math_sdp_enabled()
        y = L.nn.functional.scaled_dot_product_attention(q, k, v)  # the fused kernel fits
        assert type(y.grad_fn).__name__ == FUSED
    finally:
        L.backends.cuda.enable_math_sdp(True)


@pytest.mark.parametrize("arg", [3, "math", ()])
def test_non_backend_raises(L, arg):
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with L.nn.attention.sdpa_kernel(arg):
            pass
