"""F.interpolate of 5-D volumes (nn/_interp_volume.py) against PyTorch 2.15's
values stored by tests/data/make_interpolate_volume_reference.py, plus
properties that need no reference (a 1:1 resize is the identity, a constant
stays constant, the channels_last_3d layout is kept as torch keeps it) and torch's errors."""
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REF = np.load(os.path.join(HERE, "data", "interpolate_volume_torch_reference.npz"))
CASES = [(mode, size, sf, ac) for mode in ("nearest", "nearest-exact", "trilinear")
         for size, sf in (((5, 7, 9), None), ((2, 3, 3), None), ((3, 9, 4), None), (None, 2.0), (None, (0.7, 1.3, 2.1)))
         for ac in ((None,) if mode != "trilinear" else (False, True))]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_float64_matches_torch(i):
    mode, size, sf, ac = CASES[i]
    y = F.interpolate(ember.tensor(REF["x"]), size=size, scale_factor=sf, mode=mode, align_corners=ac)
    assert y.dtype == ember.float64 and y.is_contiguous()
    np.testing.assert_allclose(y.numpy(), REF[f"y{i}"], rtol=0, atol=1e-14)


def test_float32_and_uint8_match_torch():
    y = F.interpolate(ember.tensor(REF["x32"]), scale_factor=(1.5, 2.5, 0.6), mode="trilinear")
    assert y.dtype == ember.float32
    np.testing.assert_allclose(y.numpy(), REF["y32"], rtol=0, atol=1e-6)
    yu = F.interpolate(ember.tensor(REF["xu"]), size=(4, 6, 7))
    assert yu.dtype == ember.uint8
    np.testing.assert_array_equal(yu.numpy(), REF["yu"])


@pytest.mark.parametrize("mode", ["nearest", "trilinear"])
def test_gradients_match_torch(mode):
    x = ember.tensor(REF["x"]).requires_grad_()
    y = F.interpolate(x, size=(4, 6, 3), mode=mode)
    y.backward(ember.arange(y.numel(), dtype=ember.float64).reshape(y.shape))
    np.testing.assert_allclose(x.grad.numpy(), REF[f"grad_{mode}"], rtol=0, atol=1e-11)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "trilinear", "area"])
def test_identity_constant_and_layout(mode):
    x = ember.tensor(REF["x"])
    ac = False if mode == "trilinear" else None
    np.testing.assert_allclose(F.interpolate(x, size=(3, 4, 5), mode=mode, align_corners=ac).numpy(), REF["x"],
                               atol=1e-15)
    c = F.interpolate(ember.full((1, 2, 3, 3, 3), 2.5), size=(5, 2, 7), mode=mode, align_corners=ac)
    np.testing.assert_allclose(c.numpy(), 2.5, atol=1e-6)
    x3 = x.contiguous(memory_format=ember.channels_last_3d)
    y3 = F.interpolate(x3, scale_factor=2, mode=mode, align_corners=ac)
    # torch keeps the layout, except in area mode (adaptive_avg_pool3d), whose result is contiguous
    assert y3.is_contiguous(memory_format=ember.contiguous_format if mode == "area" else ember.channels_last_3d)
    np.testing.assert_allclose(y3.numpy(), F.interpolate(x, scale_factor=2, mode=mode, align_corners=ac).numpy(),
                               atol=1e-15)


def test_errors_as_torch():
    with pytest.raises(RuntimeError, match=r"Input and output sizes should be greater than 0, but got input "
                                           r"\(D: 2, H: 2, W: 2\) output \(D: 0, H: 0, W: 0\)"):
        F.interpolate(ember.zeros(1, 1, 2, 2, 2), scale_factor=0.1)
    with pytest.raises(RuntimeError, match=r"input \(D: 0, H: 2, W: 2\)"):
        F.interpolate(ember.zeros(1, 1, 0, 2, 2), scale_factor=2)
    with pytest.raises(NotImplementedError, match="\"compute_indices_weights_linear\" not implemented for 'Long'"):
        F.interpolate(ember.zeros(1, 1, 2, 2, 2, dtype=ember.int64), scale_factor=2, mode="trilinear")
    with pytest.raises(NotImplementedError, match="\"compute_indices_weights_nearest\" not implemented for 'Bool'"):
        F.interpolate(ember.zeros(1, 1, 2, 2, 2, dtype=ember.bool), scale_factor=2)
    with pytest.raises(NotImplementedError, match="Got 5D input, but bilinear mode needs 4D input"):
        F.interpolate(ember.zeros(1, 1, 2, 2, 2), scale_factor=2, mode="bilinear")
    assert F.interpolate(ember.zeros(0, 1, 2, 2, 2), scale_factor=2).shape == (0, 1, 4, 4, 4)
