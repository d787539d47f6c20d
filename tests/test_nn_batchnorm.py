"""batch_norm / group_norm and BatchNorm1d/2d / GroupNorm: values against
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
