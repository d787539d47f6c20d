"""Pooling (composed on C ops): values by hand and NumPy, gradcheck, and
values, indices and gradients against torch when installed."""
import numpy as np
import pytest

import ember
from ember import nn
from ember.autograd import gradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")
RNG = np.random.default_rng(0)


def test_pools_by_hand():
    x = ember.arange(25.0).view(1, 1, 5, 5)
    np.testing.assert_array_equal(F.max_pool2d(x, 2).numpy()[0, 0], [[6, 8], [16, 18]])
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[6, 8], [16, 18]])
    assert F.max_pool2d(x, 2, ceil_mode=True).shape == (1, 1, 3, 3)
    np.testing.assert_allclose(F.avg_pool2d(x, 3, stride=2, padding=1).numpy()[0, 0, 0], [4 / 3, 3, 8 / 3])
    np.testing.assert_allclose(F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False).numpy()[0, 0, 0],
                               [3, 4.5, 6])
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, (2, 3)).numpy()[0, 0],
                               [[5.5, 7, 8.5], [15.5, 17, 18.5]])
    np.testing.assert_allclose(F.avg_pool1d(ember.arange(6.0).view(1, 1, 6), 2).numpy()[0, 0], [0.5, 2.5, 4.5])
    np.testing.assert_allclose(F.adaptive_avg_pool1d(ember.arange(5.0).view(1, 5), 2).numpy(), [[1.0, 3.0]])
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)
    for bad in ({"kernel_size": 0}, {"kernel_size": 2, "stride": 0}, {"kernel_size": 2, "padding": -1}):
        with pytest.raises(RuntimeError):
            F.avg_pool2d(x, **bad)
    with pytest.raises(RuntimeError, match="dilation"):
        F.max_pool2d(x, 2, dilation=0)


def test_gradcheck_pools():
    x = ember.from_numpy(RNG.standard_normal((1, 2, 5, 6))).requires_grad_()
    assert gradcheck(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), [x])
    assert gradcheck(lambda x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False), [x])
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [x])


def test_modules():
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.AvgPool1d(2)) == "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.AdaptiveAvgPool2d((2, 3))) == "AdaptiveAvgPool2d(output_size=(2, 3))"
    assert nn.MaxPool1d(2)(ember.ones(2, 3, 8)).shape == (2, 3, 4)
    assert nn.AdaptiveAvgPool2d(1)(ember.ones(2, 3, 5, 5)).shape == (2, 3, 1, 1)


@needs_torch
@pytest.mark.parametrize("fn,args,kw", [
    ("max_pool2d", (3,), {"stride": 2, "padding": 1}), ("max_pool2d", (2,), {"ceil_mode": True}),
    ("max_pool2d", (2,), {"dilation": 2}), ("max_pool1d", (3,), {"stride": 2, "ceil_mode": True}),
    ("avg_pool2d", (3,), {"stride": 2, "padding": 1}), ("avg_pool2d", (3,), {"stride": 2, "ceil_mode": True}),
    ("avg_pool2d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False, "ceil_mode": True}),
    ("avg_pool2d", (2,), {"divisor_override": 3}), ("avg_pool1d", (3,), {"padding": 1}),
    ("adaptive_avg_pool2d", ((3, 4),), {}), ("adaptive_avg_pool1d", (4,), {})])
def test_pools_match_torch(fn, args, kw):
    x = RNG.standard_normal((2, 3, 7, 9) if fn.endswith("2d") else (2, 3, 9))
    res = []
    for L in (ember, _torch):
        xi = L.tensor(x, requires_grad=True)
        y = getattr(L.nn.functional, fn)(xi, *args, **kw)
        y.backward(L.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)) / 7))
        res.append((y.detach().numpy(), xi.grad.numpy()))
        if fn.startswith("max"):
            res[-1] += (getattr(L.nn.functional, fn)(xi, *args, return_indices=True, **kw)[1].numpy(),)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
