"""F.interpolate(..., antialias=True) (nn/_antialias.py) against PyTorch 2.15's
values stored by tests/data/make_interpolate_antialias_reference.py, plus
properties that need no reference (weights sum to 1, constants stay constant,
a 1:1 resize is the identity) and torch's errors."""
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn._antialias import weights

HERE = os.path.dirname(os.path.abspath(__file__))
REF = np.load(os.path.join(HERE, "data", "interpolate_antialias_torch_reference.npz"))
CASES = [(mode, size, ac, None) for mode in ("bilinear", "bicubic") for size in ((5, 7), (9, 20), (11, 6), (25, 30))
         for ac in (False, True)] + [("bilinear", None, False, (0.37, 0.61)), ("bicubic", None, False, (0.5, 2.5)),
                                     ("lanczos", (6, 9), False, None)]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_float64_matches_torch(i):
    mode, size, ac, sf = CASES[i]
    y = F.interpolate(ember.tensor(REF["x"]), size=size, scale_factor=sf, mode=mode, align_corners=ac, antialias=True)
    assert y.dtype == ember.float64 and y.is_contiguous()
    np.testing.assert_allclose(y.numpy(), REF[f"y{i}"], rtol=0, atol=1e-13)


def test_float32_follows_float64():
    x = ember.tensor(REF["x"]).float()
    y = F.interpolate(x, size=(5, 7), mode="bicubic", antialias=True)
    assert y.dtype == ember.float32
    np.testing.assert_allclose(y.numpy(), REF["y8"], atol=1e-6)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_is_torchs_fixed_point_exactly(mode):
    size = (7, 9) if mode == "bilinear" else (11, 5)
    y = F.interpolate(ember.tensor(REF["xu"]), size=size, mode=mode, antialias=True)
    assert y.dtype == ember.uint8
    np.testing.assert_array_equal(y.numpy(), REF[f"yu_{mode}"])


def test_gradient_matches_torch():
    xg = ember.tensor(REF["xg"], requires_grad=True)
    F.interpolate(xg, size=(4, 5), mode="bicubic", antialias=True).backward(
        ember.arange(40, dtype=ember.float64).reshape(1, 2, 4, 5))
    np.testing.assert_allclose(xg.grad.numpy(), REF["grad"], atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("n_in,n_out", [(13, 4), (13, 13), (5, 12), (40, 3)])
def test_weights_are_normalized_and_one_to_one_is_identity(mode, n_in, n_out):
    w = weights(n_in, n_out, mode)
    np.testing.assert_allclose(w.sum(1), np.ones(n_out), atol=1e-12)
    if n_in == n_out:
        np.testing.assert_allclose(w, np.eye(n_in), atol=1e-12)
    c = F.interpolate(ember.full((1, 1, n_in, n_in), 3.25, dtype=ember.float64), size=(n_out, n_out), mode=mode,
                      antialias=True)
    np.testing.assert_allclose(c.numpy(), 3.25, atol=1e-12)


def test_errors_are_torchs():
    x = ember.rand(1, 1, 4, 4)
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear, bicubic"):
        F.interpolate(x, size=(2, 2), mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="requires a 4-D tensor"):
        F.interpolate(ember.rand(1, 1, 4), size=2, mode="linear", antialias=True)
    with pytest.raises(ValueError, match="Lanczos mode requires antialias=True"):
        F.interpolate(x, size=(2, 2), mode="lanczos")
    with pytest.raises(RuntimeError, match=r"Non-empty 4D data tensor expected but got a tensor with sizes \[1, 0, 8, 8\]"):
        F.interpolate(ember.rand(1, 0, 8, 8), size=(4, 4), mode="bilinear", antialias=True)
    with pytest.raises(RuntimeError, match=r"input \(H: 0, W: 8\) output \(H: 4, W: 4\)"):
        F.interpolate(ember.rand(1, 3, 0, 8), size=(4, 4), mode="bilinear", antialias=True)
    assert F.interpolate(ember.rand(0, 3, 8, 8), size=(4, 4), mode="bicubic", antialias=True).shape == (0, 3, 4, 4)
