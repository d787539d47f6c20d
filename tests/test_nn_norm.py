"""F.layer_norm / F.rms_norm (fused C kernels, ops/norm.c) and the LayerNorm /
RMSNorm modules: values against NumPy, gradients by gradcheck, errors with
torch's types; values, gradients and node names against torch when installed."""
import numpy as np
import pytest

import ember
from ember import nn
from ember.autograd import gradcheck, gradgradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    x = x.astype(np.float64)
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def np_rms_norm(x, k, w=None, eps=None):
    axes = tuple(range(x.ndim - k, x.ndim))
    eps = np.finfo(x.dtype).eps if eps is None else eps
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps) * (1 if w is None else w)


RNG = np.random.default_rng(0)
SHAPES = [((4, 7), (7,)), ((2, 3, 5), (5,)), ((2, 3, 5), (3, 5)), ((6,), (6,)), ((3, 1), (1,)), ((0, 4), (4,))]


@pytest.mark.parametrize("shape,ns", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("affine", [None, "w", "wb"])
def test_layer_norm_matches_numpy(shape, ns, dtype, affine):
    x = RNG.standard_normal(shape).astype(dtype) * 3 + 1
    w = RNG.standard_normal(ns).astype(dtype) if affine else None
    b = RNG.standard_normal(ns).astype(dtype) if affine == "wb" else None
    T = lambda a: None if a is None else ember.from_numpy(a)  # noqa: E731
    got = F.layer_norm(T(x), ns, T(w), T(b), eps=1e-4).numpy()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, np_layer_norm(x, len(ns), w, b, 1e-4), rtol=tol, atol=tol)
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("shape,ns", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rms_norm_matches_numpy(shape, ns, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal(ns).astype(dtype)
    got = F.rms_norm(ember.from_numpy(x), ns, ember.from_numpy(w)).numpy()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, np_rms_norm(x, len(ns), w), rtol=tol, atol=tol)
    got = F.rms_norm(ember.from_numpy(x), ns, eps=0.5).numpy()
    np.testing.assert_allclose(got, np_rms_norm(x, len(ns), None, 0.5), rtol=tol, atol=tol)


def test_half_types_and_layouts():
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    for dt in (ember.float16, ember.bfloat16):
        xe = ember.from_numpy(x).to(dt)
        got = F.layer_norm(xe, (16,))
        assert got.dtype == dt
        ref = np_layer_norm(xe.float().numpy(), 1)
        np.testing.assert_allclose(got.float().numpy(), ref, rtol=0, atol=0.02 if dt == ember.bfloat16 else 2e-3)
    xt = ember.from_numpy(np.ascontiguousarray(x.T)).t()  # transposed: rows are strided
    np.testing.assert_allclose(F.layer_norm(xt, (16,)).numpy(), np_layer_norm(x, 1), rtol=1e-5, atol=1e-5)
    big = RNG.standard_normal((300, 512)).astype(np.float32)  # large enough for the threaded path
    np.testing.assert_allclose(F.layer_norm(ember.from_numpy(big), (512,)).numpy(), np_layer_norm(big, 1),
                               rtol=1e-4, atol=1e-5)
    const = F.layer_norm(ember.full((2, 5), 3.0), (5,))
    np.testing.assert_array_equal(const.numpy(), np.zeros((2, 5)))  # zero variance: (x - mean) = 0


def _leaves(*shapes):
    return [ember.from_numpy(RNG.standard_normal(s)).requires_grad_() for s in shapes]


def test_gradcheck_layer_norm():
    x, w, b = _leaves((3, 4, 5), (4, 5), (4, 5))
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (4, 5), w, b), [x, w, b])
    x, w = _leaves((6, 5), (5,))
    assert gradcheck(lambda x, w: F.layer_norm(x, (5,), w), [x, w])
    assert gradcheck(lambda x: F.layer_norm(x, (5,), eps=0.1), [x])
    assert gradcheck(lambda x: F.layer_norm(x.t(), (6,)), [x])  # non-contiguous input


def test_gradcheck_rms_norm():
    x, w = _leaves((3, 4, 5), (4, 5))
    assert gradcheck(lambda x, w: F.rms_norm(x, (4, 5), w), [x, w])
    assert gradcheck(lambda x: F.rms_norm(x, (5,), eps=1e-3), [x])


def test_gradgradcheck_norms():
    x, w, b = _leaves((3, 4), (4,), (4,))
    assert gradgradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b), [x, w, b])
    assert gradgradcheck(lambda x, w: F.rms_norm(x, (4,), w), [x, w])


def test_errors():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        F.layer_norm(x, ())
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        F.layer_norm(x, (3,), ember.ones(4))
    with pytest.raises(RuntimeError, match="Expected bias to be of same shape"):
        F.layer_norm(x, (3,), None, ember.ones(2, 3))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.layer_norm(ember.ones(2, 3, dtype=ember.int64), (3,))
    with pytest.raises(RuntimeError):
        F.rms_norm(x, (2,))


def test_modules():
    m = nn.LayerNorm(4)
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(4))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(4))
    assert repr(m) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert nn.LayerNorm([2, 3], elementwise_affine=False).weight is None
    assert nn.LayerNorm(3, bias=False).bias is None
    assert [n for n, _ in nn.LayerNorm(3).named_parameters()] == ["weight", "bias"]
    r = nn.RMSNorm([4, 3], eps=1e-3)
    assert repr(r) == "RMSNorm((4, 3), eps=0.001, elementwise_affine=True)"
    x = ember.from_numpy(RNG.standard_normal((2, 4, 3)))
    r.double()
    np.testing.assert_allclose(r(x).detach().numpy(), np_rms_norm(x.numpy(), 2, None, 1e-3), rtol=1e-12)
    out = nn.LayerNorm(3).double()(x)
    out.backward(ember.ones_like(out))


@needs_torch
def test_against_torch():
    x = RNG.standard_normal((3, 4, 5))
    w, b = RNG.standard_normal((5,)), RNG.standard_normal((5,))
    g = RNG.standard_normal((3, 4, 5))
    calls = [lambda L, x, w, b: L.nn.functional.layer_norm(x, (5,), w, b, 1e-3),
             lambda L, x, w, b: L.nn.functional.layer_norm(x, (4, 5), None, None),
             lambda L, x, w, b: L.nn.functional.rms_norm(x, (5,), w) * b]
    for call in calls:
        res = []
        for L in (ember, _torch):
            xs = [L.tensor(a, requires_grad=True) for a in (x, w, b)]
            y = call(L, *xs)
            y.backward(L.tensor(g))
            res.append([y.detach().numpy()] + [None if a.grad is None else a.grad.numpy() for a in xs])
        for e, t in zip(*res):
            if t is None:
                assert e is None or not e.any()
            else:
                np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)
    assert type(F.layer_norm(ember.ones(2, 3, requires_grad=True), (3,)).grad_fn).__name__ == \
        type(_torch.nn.functional.layer_norm(_torch.ones(2, 3, requires_grad=True), (3,)).grad_fn).__name__
    for dims in ((4,), [2, 4]):
        assert repr(nn.LayerNorm(dims)) == repr(_torch.nn.LayerNorm(dims))
        assert repr(nn.RMSNorm(dims)) == repr(_torch.nn.RMSNorm(dims))


def test_fused_layer_norm_backward_rejects_bad_shapes_and_dtypes():
    """The fused backward op (what layer_norm's formula calls when the gradient
    is not differentiated again) checks its operands like any other op."""
    bw = ember._C._native_layer_norm_backward
    g, x, stat = ember.randn(3, 4), ember.randn(3, 4), ember.ones(3, 1)
    with pytest.raises(RuntimeError, match="expected mean of shape"):
        bw(g, x, [4], ember.ones(2, 1), stat, None)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        bw(g, x, [5], stat, stat, None)
    with pytest.raises(RuntimeError, match="expected weight of shape"):
        bw(g, x, [4], stat, stat, ember.ones(3))
    with pytest.raises(RuntimeError, match="expected grad_out of shape"):
        bw(ember.randn(4, 3), x, [4], stat, stat, None)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        bw(g.long(), x.long(), [4], stat, stat, None)


def test_fused_layer_norm_backward_is_what_backward_uses():
    """Without create_graph the gradients come from the fused op and agree with
    the formula written in ember ops (used under create_graph)."""
    rng = np.random.default_rng(3)
    x0, w0, b0, g0 = (rng.standard_normal(s) for s in ((5, 7), (7,), (7,), (5, 7)))
    grads = []
    for create_graph in (False, True):
        x, w, b = (ember.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        y = F.layer_norm(x, (7,), w, b)
        grads.append([t.detach().numpy() for t in ember.autograd.grad(y, (x, w, b), ember.tensor(g0),
                                                           create_graph=create_graph)])
    for fused, composed in zip(*grads):
        np.testing.assert_allclose(fused, composed, rtol=1e-10, atol=1e-12)
