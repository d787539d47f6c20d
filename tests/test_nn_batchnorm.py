"""batch_norm / group_norm (C kernels: csrc/ops/poolnorm.c) and BatchNorm1d/2d / GroupNorm: values against
NumPy, running statistics by hand, gradcheck; values, gradients, running
buffers and reprs against torch when installed."""
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


def test_batch_norm_training_and_running_stats_by_hand():
    x = RNG.standard_normal((4, 3, 5))
    rm, rv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    out = F.batch_norm(ember.from_numpy(x), rm, rv, training=True, momentum=0.1, eps=1e-5).numpy()
    mean, var = x.mean((0, 2)), x.var((0, 2))
    np.testing.assert_allclose(out, (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5), rtol=1e-10)
    np.testing.assert_allclose(rm.numpy(), 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 + 0.1 * x.var((0, 2), ddof=1), rtol=1e-12)
    ev = F.batch_norm(ember.from_numpy(x), rm, rv, training=False).numpy()
    np.testing.assert_allclose(ev, (x - rm.numpy()[None, :, None]) / np.sqrt(rv.numpy()[None, :, None] + 1e-5))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(ember.ones(1, 3), None, None, training=True)


def test_group_norm_by_hand_and_gradcheck():
    x = RNG.standard_normal((2, 4, 3))
    g = x.reshape(2, 2, -1)
    want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(2, 4, 3)
    np.testing.assert_allclose(F.group_norm(ember.from_numpy(x), 2).numpy(), want, rtol=1e-10)
    xs = [ember.from_numpy(a).requires_grad_() for a in (x, RNG.standard_normal(4), RNG.standard_normal(4))]
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), xs)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), xs)
    with pytest.raises(RuntimeError):
        F.group_norm(ember.ones(2, 3), 2)


def test_modules():
    bn = nn.BatchNorm2d(3)
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    assert repr(bn) == "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    bn(ember.randn(4, 3, 2, 2))
    assert int(bn.num_batches_tracked) == 1
    bn.eval()
    bn(ember.randn(4, 3, 2, 2))
    assert int(bn.num_batches_tracked) == 1
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(ember.ones(2, 3))
    sd = bn.state_dict()
    del sd["num_batches_tracked"]
    sd._metadata[""]["version"] = 1
    nn.BatchNorm2d(3).load_state_dict(sd)  # old checkpoints without the counter load
    assert repr(nn.GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    with pytest.raises(ValueError):
        nn.GroupNorm(3, 4)


@needs_torch
@pytest.mark.parametrize("name,args,shape", [("BatchNorm1d", (3,), (5, 3)), ("BatchNorm1d", (3,), (5, 3, 4)),
                                             ("BatchNorm2d", (3,), (4, 3, 2, 5)),
                                             ("GroupNorm", (2, 4), (3, 4, 5))])
def test_modules_match_torch(name, args, shape):
    e, t = getattr(nn, name)(*args).double(), getattr(_torch.nn, name)(*args).double()
    assert repr(e) == repr(t)
    for step in range(3):
        x = RNG.standard_normal(shape)
        g = RNG.standard_normal(shape)
        res = []
        for L, m in ((ember, e), (_torch, t)):
            m.train(step < 2)
            xi = L.tensor(x, requires_grad=True)
            y = m(xi)
            y.backward(L.tensor(g))
            res.append([y.detach().numpy(), xi.grad.numpy()] + [b.numpy() for b in m.buffers()]
                       + [p.grad.numpy() for p in m.parameters()])
            m.zero_grad()
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def test_running_stats_written_in_place():
    """The kernel writes the running statistics into the caller's tensors (any
    dtype, views too) and bumps their version, as an in-place op does."""
    x = RNG.standard_normal((5, 4, 3))
    base = ember.zeros(2, 4, dtype=ember.float32)
    rm, rv = base[1], ember.ones(4, dtype=ember.float32)
    v0 = rv._version
    F.batch_norm(ember.from_numpy(x), rm, rv, training=True, momentum=0.5)
    np.testing.assert_allclose(base.numpy()[1], 0.5 * x.mean((0, 2)), rtol=1e-6)
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * x.var((0, 2), ddof=1), rtol=1e-6)
    assert rv._version > v0 and base.numpy()[0].sum() == 0
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'running_mean'"):
        F.batch_norm(ember.from_numpy(x), ember.zeros(4, dtype=ember.float64, requires_grad=True), None,
                     training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        F.batch_norm(ember.from_numpy(x), ember.zeros(3), ember.ones(3))
    with pytest.raises(RuntimeError, match="weight to be a vector of size equal to the number of channels"):
        F.group_norm(ember.from_numpy(x), 2, ember.ones(3))
    with pytest.raises(NotImplementedError):
        F.batch_norm(ember.ones(4, 3, dtype=ember.int64), None, None, training=True)


def test_statistics_by_hand():
    """The C op's extra outputs: the batch's mean and 1 / sqrt(var + eps) per
    channel (the running ones in evaluation); group norm's per (sample, group)."""
    x = RNG.standard_normal((4, 3, 5))
    _, mean, invstd = ember._C._native_batch_norm(ember.from_numpy(x), None, None, None, None, True, 0.1, 1e-3)
    np.testing.assert_allclose(mean.numpy(), x.mean((0, 2)), rtol=1e-12)
    np.testing.assert_allclose(invstd.numpy(), 1 / np.sqrt(x.var((0, 2)) + 1e-3), rtol=1e-12)
    _, mean, rstd = ember._C._native_group_norm(ember.from_numpy(x.reshape(4, 3, 5)), None, None, 3, 1e-3)
    np.testing.assert_allclose(mean.numpy(), x.mean(2), rtol=1e-12)
    np.testing.assert_allclose(rstd.numpy(), 1 / np.sqrt(x.var(2) + 1e-3), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_half_and_float_match_torch(dtype):
    x = RNG.standard_normal((6, 4, 5, 3)) * 3 + 1
    tol = {"float32": 1e-5, "float16": 2e-2, "bfloat16": 6e-2}[dtype]
    res = []
    for L in (ember, _torch):
        xi = L.tensor(x).to(getattr(L, dtype)).requires_grad_()
        rm, rv = L.zeros(4), L.ones(4)
        y = L.nn.functional.batch_norm(xi, rm, rv, training=True) + L.nn.functional.group_norm(xi, 2)
        y.backward(L.ones_like(y))
        res.append([t.float().numpy() for t in (y.detach(), xi.grad, rm, rv)] + [str(y.dtype)[6:]])
    assert res[0][-1] == res[1][-1]
    for a, b in zip(res[0][:-1], res[1][:-1]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("kind", ["train", "eval", "group"])
def test_double_backward_matches_torch(kind):
    """Gradients of the gradients (through x and the affine parameters): the fused
    backward must leave the statistics' paths to the formula."""
    x, w, b = RNG.standard_normal((4, 6, 5)), RNG.standard_normal(6), RNG.standard_normal(6)
    rms = RNG.standard_normal(6), RNG.random(6) + 0.5
    res = []
    for L in (ember, _torch):
        xi, wi, bi = (L.tensor(v, requires_grad=True) for v in (x, w, b))
        F_ = L.nn.functional
        if kind == "group":
            y = F_.group_norm(xi, 3, wi, bi)
        else:
            y = F_.batch_norm(xi, *(L.tensor(v) for v in rms), wi, bi, kind == "train")
        gx, gw, gb = L.autograd.grad((y * y * y).sum(), (xi, wi, bi), create_graph=True)
        (gx.sin().sum() + (gw * gw).sum() + gb.sum()).backward()
        res.append([t.detach().numpy() for t in (y, gx, gw, gb, xi.grad, wi.grad)])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9)
