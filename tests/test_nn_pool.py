"""Pooling (C kernels: csrc/ops/poolnorm.c): values by hand and NumPy, gradcheck, and
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


def test_ties_nan_and_integer_pools_by_hand():
    """Ties: the first maximum in row-major window order; NaN: the last NaN wins
    (its value and index); integer pools keep their dtype (avg truncates)."""
    x = ember.tensor([[[[1.0, 3.0, 3.0], [3.0, 0.0, 2.0]]]])
    out, idx = F.max_pool2d(x, 2, stride=1, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0], [[1, 1]])
    nan = float("nan")
    out, idx = F.max_pool2d(ember.tensor([[[[1.0, nan], [nan, 2.0]]]]), 2, return_indices=True)
    assert np.isnan(out.item()) and idx.item() == 2
    xi = ember.arange(16).view(1, 1, 4, 4) - 9
    assert F.max_pool2d(xi, 2).dtype == ember.int64
    np.testing.assert_array_equal(F.max_pool2d(xi, 2).numpy()[0, 0], [[-4, -2], [4, 6]])
    np.testing.assert_array_equal(F.avg_pool2d(xi, 2).numpy()[0, 0], [[-6, -4], [1, 3]])  # -6.5 -> -6
    np.testing.assert_array_equal(F.max_pool2d(xi.to(ember.uint8), 2).numpy()[0, 0], [[252, 254], [255, 6]])  # wrapped: -9 -> 247
    for fn, dt in ((lambda x: F.avg_pool2d(x, 2), ember.int32), (lambda x: F.adaptive_avg_pool2d(x, 2), ember.int64),
                   (lambda x: F.max_pool2d(x, 2), ember.bool), (lambda x: F.max_pool1d(x[0], 2), ember.int64)):
        with pytest.raises(NotImplementedError):
            fn(ember.ones(1, 1, 4, 4, dtype=dt))


def test_shapes_and_errors():
    assert F.max_pool2d(ember.ones(0, 2, 4, 4), 2).shape == (0, 2, 2, 2)  # an empty batch
    assert F.avg_pool2d(ember.ones(2, 4, 4), 2).shape == (2, 2, 2)  # unbatched
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool2d(ember.ones(1, 1, 2, 2), 3)
    with pytest.raises(RuntimeError, match="3D or 4D"):
        F.max_pool2d(ember.ones(1, 0, 4, 4), 2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(ember.ones(1, 1, 4, 4), 2, divisor_override=0)
    with pytest.raises(RuntimeError, match="non-zero size"):
        F.adaptive_avg_pool2d(ember.ones(1, 1, 0, 4), 2)
    # the backward ops check what they are given: indices out of the plane, mismatched shapes
    g, idx = ember.ones(1, 1, 2, 2), ember.tensor([[[[0, 1], [2, 99]]]])
    with pytest.raises(RuntimeError, match="out of range"):
        ember._C._max_pool2d_backward(g, idx, (1, 1, 4, 4))
    with pytest.raises(RuntimeError):
        ember._C._max_pool2d_backward(g, idx, (1, 2, 4, 4))
    with pytest.raises(RuntimeError):
        ember._C._avg_pool2d_backward(g, (1, 1, 8, 8), (2, 2), (2, 2), (0, 0), False, True, None)
    with pytest.raises(RuntimeError):
        ember._C._adaptive_avg_pool2d_backward(g, (1, 1, 4))


def test_double_backward_by_hand():
    """max pool's backward scatters the gradient into the indices; its own derivative
    (with respect to that gradient) gathers: d/dg sum(h * scatter(g)) = h at the indices."""
    x = ember.arange(16.0).view(1, 1, 4, 4).requires_grad_()
    y = F.max_pool2d(x, 2)
    g = ember.ones(1, 1, 2, 2, requires_grad=True)
    gx, = ember.autograd.grad(y, x, g, create_graph=True)
    assert type(gx.grad_fn).__name__ == "MaxPool2DWithIndicesBackwardBackward0"
    h = ember.arange(16.0).view(1, 1, 4, 4) * 10
    gg, = ember.autograd.grad(gx, g, h)
    np.testing.assert_array_equal(gg.numpy()[0, 0], [[50, 70], [130, 150]])
    # avg pool's backward is linear in g, and its derivative is the pool of h
    y = F.avg_pool2d(x, 2)
    gx, = ember.autograd.grad(y, x, g, create_graph=True)
    assert type(gx.grad_fn).__name__ == "AvgPool2DBackwardBackward0"
    gg, = ember.autograd.grad(gx, g, h)
    np.testing.assert_allclose(gg.numpy()[0, 0], [[25, 45], [105, 125]])


@needs_torch
@pytest.mark.parametrize("fn,args,kw,shape", [
    ("max_pool2d", (2,), {}, (2, 3, 6, 6)), ("max_pool2d", (3,), {"stride": 2, "padding": 1}, (3, 7, 6)),
    ("max_pool1d", (2,), {}, (2, 3, 8)), ("max_pool1d", (2,), {"return_indices": True}, (3, 8)),
    ("avg_pool2d", (2,), {}, (2, 3, 6, 6)), ("avg_pool2d", (3,), {"padding": 1}, (3, 7, 6)),
    ("avg_pool1d", (2,), {}, (2, 3, 8)),
    ("adaptive_avg_pool2d", ((3, 2),), {}, (2, 3, 7, 5)), ("adaptive_avg_pool2d", (1,), {}, (2, 3, 7, 5)),
    ("adaptive_avg_pool2d", ((1, 1),), {}, (3, 7, 5)), ("adaptive_avg_pool1d", (3,), {}, (2, 3, 7))])
def test_grad_fn_names_match_torch(fn, args, kw, shape):
    """The node of the result and of its gradient under create_graph (the double-backward node)."""
    x = RNG.standard_normal(shape)
    names = []
    for L in (ember, _torch):
        xi = L.tensor(x, requires_grad=True)
        y = getattr(L.nn.functional, fn)(xi, *args, **kw)
        y = y[0] if isinstance(y, tuple) else y
        gx, = L.autograd.grad(y, xi, L.ones_like(y, requires_grad=True), create_graph=True)
        one = fn.startswith("adaptive") and args[0] in (1, (1, 1))  # a mean: its gradient's node is the core's
        names.append((type(y.grad_fn).__name__, type(gx.grad_fn).__name__ if fn.endswith("2d") and not one else ""))
    assert names[0] == names[1]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "uint8"])
def test_dtypes_match_torch(dtype):
    x = RNG.standard_normal((2, 3, 7, 6)) * 20
    for call in (lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
                 lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                 lambda F, x: F.adaptive_avg_pool2d(x, (4, 5))):
        res = []
        for L in (ember, _torch):
            xi = L.tensor(x).to(getattr(L, dtype))
            try:
                r = call(L.nn.functional, xi)
            except NotImplementedError:
                res.append(None)
                continue
            res.append([t.float().numpy() for t in (r if isinstance(r, tuple) else (r,))] + [str(r[0].dtype if isinstance(r, tuple) else r.dtype)[6:]])
        assert (res[0] is None) == (res[1] is None)
        if res[0] is not None:
            assert res[0][-1] == res[1][-1]
            for a, b in zip(res[0][:-1], res[1][:-1]):
                np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-2 * 20)


@needs_torch
def test_double_backward_matches_torch():
    x = RNG.standard_normal((2, 3, 6, 7))
    res = []
    for L in (ember, _torch):
        xi = L.tensor(x, requires_grad=True)
        F_ = L.nn.functional
        y = F_.max_pool2d(xi, 3, 2, 1) * 2 + F_.avg_pool2d(xi * xi, 2, 1, ceil_mode=True).sum() \
            + F_.adaptive_avg_pool2d(xi.sin(), (4, 3)).sum()
        gx, = L.autograd.grad((y * y).sum(), xi, create_graph=True)
        gx.pow(2).sum().backward()
        res.append((gx.detach().numpy(), xi.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
