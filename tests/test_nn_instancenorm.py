"""instance_norm and InstanceNorm1d/2d (batch_norm's C kernel on the
(1, N * C, ...) view): values against NumPy, running statistics by hand,
gradcheck; values, gradients, running buffers, grad_fn names, reprs, errors
and warnings against torch when installed."""
import warnings

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
RNG = np.random.default_rng(5)


def _np_instance_norm(x, w=None, b=None, eps=1e-5):
    dims = tuple(range(2, x.ndim))
    y = (x - x.mean(dims, keepdims=True)) / np.sqrt(x.var(dims, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 2, 4, 5), (1, 1, 7)])
def test_instance_norm_values_by_numpy(shape):
    x, w, b = RNG.standard_normal(shape), RNG.standard_normal(shape[1]), RNG.standard_normal(shape[1])
    got = F.instance_norm(ember.from_numpy(x), weight=ember.from_numpy(w), bias=ember.from_numpy(b), eps=1e-3)
    np.testing.assert_allclose(got.numpy(), _np_instance_norm(x, w, b, 1e-3), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(F.instance_norm(ember.from_numpy(x)).numpy(), _np_instance_norm(x),
                               rtol=1e-10, atol=1e-12)
    x32 = ember.from_numpy(x.astype(np.float32))
    np.testing.assert_allclose(F.instance_norm(x32).numpy(), _np_instance_norm(x), rtol=1e-4, atol=1e-5)


def test_running_stats_by_hand():
    """Each sample's statistics move the running ones; the caller's get the batch average."""
    x = RNG.standard_normal((4, 3, 6))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    F.instance_norm(ember.from_numpy(x), rm, rv, momentum=0.2)
    np.testing.assert_allclose(rm.numpy(), 0.2 * x.mean(2).mean(0), rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * x.var(2, ddof=1).mean(0), rtol=1e-12)
    # evaluation reads them: (x - rm) / sqrt(rv + eps), the running ones unchanged
    before = rm.numpy().copy()
    ev = F.instance_norm(ember.from_numpy(x), rm, rv, use_input_stats=False).numpy()
    np.testing.assert_allclose(ev, (x - rm.numpy()[:, None]) / np.sqrt(rv.numpy()[:, None] + 1e-5), rtol=1e-12)
    np.testing.assert_array_equal(rm.numpy(), before)


def test_gradcheck():
    x, w, b = (ember.from_numpy(RNG.standard_normal(s)).requires_grad_() for s in ((2, 3, 4), (3,), (3,)))
    assert gradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), (x, w, b))
    assert gradgradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), (x, w, b))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    assert gradcheck(lambda x: F.instance_norm(x, rm, rv, use_input_stats=False), (x,))
    assert gradcheck(lambda x: nn.InstanceNorm2d(3)(x), (ember.from_numpy(RNG.standard_normal((3, 2, 3))).requires_grad_(),))


def test_errors():
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(ember.ones(2, 3))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(ember.ones(2, 3, 1))
    with pytest.raises(RuntimeError, match="use_input_stats"):
        F.instance_norm(ember.ones(2, 3, 4), use_input_stats=False)
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.InstanceNorm1d(3)(ember.ones(2, 3, 4, 5))
    with pytest.raises(ValueError, match="expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(ember.ones(3, 4))
    with pytest.raises(ValueError, match="to match num_features"):
        nn.InstanceNorm1d(4, affine=True)(ember.ones(2, 3, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(4)(ember.randn(2, 3, 5))


def test_modules():
    m = nn.InstanceNorm1d(3)
    assert repr(m) == "InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"
    assert m.weight is None and m.running_mean is None and not list(m.buffers())
    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    assert repr(m) == "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    x = ember.randn(2, 3, 4, 5)
    m(x)
    assert int(m.num_batches_tracked) == 0  # instance norm does not count batches
    assert m(x[0]).shape == (3, 4, 5)  # unbatched
    # old checkpoints (no version) of a module without running stats carry them: reported, dropped
    sd = {"running_mean": ember.zeros(3), "running_var": ember.ones(3)}
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        nn.InstanceNorm1d(3).load_state_dict(sd)


@needs_torch
@pytest.mark.parametrize("name,kw,shape", [
    ("InstanceNorm1d", {}, (2, 3, 5)), ("InstanceNorm1d", {"affine": True}, (3, 6)),
    ("InstanceNorm2d", {"track_running_stats": True}, (2, 3, 4, 5)),
    ("InstanceNorm2d", {"affine": True, "track_running_stats": True, "momentum": None}, (3, 4, 5)),
    ("InstanceNorm1d", {"affine": True, "bias": False}, (2, 3, 5))])
def test_modules_match_torch(name, kw, shape):
    e, t = getattr(nn, name)(3, **kw).double(), getattr(_torch.nn, name)(3, **kw).double()
    assert repr(e) == repr(t)
    for step in range(3):
        x, g = RNG.standard_normal(shape), RNG.standard_normal(shape)
        res = []
        for L, m in ((ember, e), (_torch, t)):
            m.train(step < 2)
            xi = L.tensor(x, requires_grad=True)
            y = m(xi)
            res.append(type(y.grad_fn).__name__)
            y.backward(L.tensor(g))
            res.append([y.detach().numpy(), xi.grad.numpy()] + [b.numpy() for b in m.buffers()]
                       + [p.grad.numpy() for p in m.parameters()])
            m.zero_grad()
        assert res[0] == res[2]
        for a, b in zip(res[1], res[3]):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@needs_torch
def test_functional_matches_torch():
    x, w, b = RNG.standard_normal((2, 3, 4, 5)), RNG.standard_normal(3), RNG.standard_normal(3)
    rms = RNG.standard_normal(3), RNG.random(3) + 0.5
    res = []
    for L in (ember, _torch):
        xi, wi, bi = (L.tensor(v, requires_grad=True) for v in (x, w, b))
        rm, rv = (L.tensor(v) for v in rms)
        y = L.nn.functional.instance_norm(xi, rm, rv, wi, bi, True, 0.3, 1e-3)
        gx, gw = L.autograd.grad((y * y).sum(), (xi, wi), create_graph=True)
        (gx.sum() + gw.sum()).backward()
        res.append([y.detach().numpy(), rm.numpy(), rv.numpy(), gx.detach().numpy(), xi.grad.numpy(),
                    wi.grad.numpy(), bi.grad.numpy(), type(y.grad_fn).__name__])
    for a, b in zip(*res):
        if isinstance(a, str):
            assert a == b
        else:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
