"""F.embedding / nn.Embedding and F.dropout(1d/2d) / nn.Dropout*: values and
gradients by hand and NumPy, gradcheck, torch's errors; torch parity for
embedding (dropout's random stream is not torch's, so only its statistics and
its mask/gradient consistency are checked)."""
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


def test_embedding_values_and_gradients_by_hand():
    w = RNG.standard_normal((5, 3))
    idx = np.array([[1, 2, 2], [0, 4, 1]])
    we = ember.from_numpy(w.copy()).requires_grad_()
    y = F.embedding(ember.from_numpy(idx), we)
    np.testing.assert_array_equal(y.detach().numpy(), w[idx])
    g = RNG.standard_normal((2, 3, 3))
    y.backward(ember.from_numpy(g))
    want = np.zeros_like(w)
    np.add.at(want, idx.ravel(), g.reshape(-1, 3))  # repeated indices sum
    np.testing.assert_allclose(we.grad.numpy(), want, rtol=1e-12)
    we.grad = None
    F.embedding(ember.from_numpy(idx), we, padding_idx=2).backward(ember.from_numpy(g))
    want[2] = 0
    np.testing.assert_allclose(we.grad.numpy(), want, rtol=1e-12)
    we.grad = None
    F.embedding(ember.from_numpy(idx), we, scale_grad_by_freq=True).backward(ember.ones(2, 3, 3, dtype=ember.float64))
    np.testing.assert_allclose(we.grad.numpy()[:, 0], [1, 1, 1, 0, 1])  # each row: count / count
    assert F.embedding(ember.tensor([3], dtype=ember.int32), we).shape == (1, 3)


def test_embedding_gradcheck_and_errors():
    w = ember.from_numpy(RNG.standard_normal((6, 4))).requires_grad_()
    idx = ember.tensor([[0, 5, 5], [2, 0, 3]])
    assert gradcheck(lambda w: F.embedding(idx, w), [w])
    # (padding_idx and scale_grad_by_freq change the gradient on purpose: not derivatives, checked by hand)
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(ember.tensor([6]), w)
    with pytest.raises(IndexError):
        F.embedding(ember.tensor([-1]), w)
    with pytest.raises(RuntimeError, match="indices"):
        F.embedding(ember.tensor([1.0]), w)
    with pytest.raises(RuntimeError, match="2-D"):
        F.embedding(ember.tensor([1]), ember.ones(3))
    with pytest.raises(AssertionError):
        F.embedding(idx, w, padding_idx=9)


def test_embedding_max_norm_renormalizes_used_rows():
    w = ember.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    out = F.embedding(ember.tensor([0, 1]), w, max_norm=1.0)
    np.testing.assert_allclose(w.numpy()[0], [0.6, 0.8], rtol=1e-5)  # rescaled in place
    np.testing.assert_allclose(w.numpy()[2], [6.0, 8.0])  # not looked up: untouched
    np.testing.assert_allclose(out.numpy()[1], [0.3, 0.4])


def test_embedding_module():
    ember.manual_seed(0)
    e = nn.Embedding(10, 4, padding_idx=-1)
    assert e.padding_idx == 9 and not e.weight[9].any()
    assert repr(e) == "Embedding(10, 4, padding_idx=9)"
    v = e.weight.detach().numpy()
    assert abs(v[:9].mean()) < 0.6 and 0.5 < v[:9].std() < 1.5
    pre = nn.Embedding.from_pretrained(ember.ones(3, 2))
    assert not pre.weight.requires_grad and pre(ember.tensor([2])).shape == (1, 2)
    assert nn.Embedding.from_pretrained(ember.ones(3, 2), freeze=False).weight.requires_grad


@needs_torch
def test_embedding_matches_torch():
    for kw in ({}, {"padding_idx": 1}, {"scale_grad_by_freq": True}, {"padding_idx": 0, "scale_grad_by_freq": True}):
        res = []
        for L in (ember, _torch):
            L.manual_seed(4)
            m = L.nn.Embedding(6, 3, **kw).double()
            y = m(L.tensor([[1, 2, 2], [0, 5, 1]]))
            y.backward(L.tensor(np.arange(18.0).reshape(2, 3, 3)))
            res.append((type(y.grad_fn).__name__, y.detach().numpy(), m.weight.grad.numpy(), repr(m)))
        assert res[0][0] == res[1][0] and res[0][3] == res[1][3]
        np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)  # float32 normal draws: torch's vector sincos
        np.testing.assert_allclose(res[0][2], res[1][2], rtol=1e-12)


def test_dropout_statistics_mask_and_gradient():
    ember.manual_seed(1)
    x = ember.from_numpy(RNG.uniform(1, 2, 100_000)).requires_grad_()
    y = F.dropout(x, 0.3)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01  # ~ 45 standard deviations of slack would be 0.06
    np.testing.assert_allclose(y.detach().numpy()[kept], x.detach().numpy()[kept] / 0.7, rtol=1e-12)
    y.backward(ember.ones_like(y))
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-12)
    assert F.dropout(x, 0.3, training=False) is x
    assert not F.dropout(x, 1.0).any()
    np.testing.assert_array_equal(F.dropout(x, 0.0).detach().numpy(), x.detach().numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)
    ember.manual_seed(7)
    a = F.dropout(ember.ones(50), 0.5).numpy()
    ember.manual_seed(7)
    np.testing.assert_array_equal(a, F.dropout(ember.ones(50), 0.5).numpy())


def test_dropout_inplace_and_channels_and_modules():
    base = ember.ones(4, 6, dtype=ember.float64, requires_grad=True)
    h = base * 1
    out = F.dropout(h, 0.5, inplace=True)
    assert out is h
    out.backward(ember.ones_like(out))
    np.testing.assert_allclose(base.grad.numpy(), (h.detach().numpy() != 0) * 2.0)
    ember.manual_seed(3)
    y = F.dropout2d(ember.ones(8, 16, 3, 3), 0.5).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()  # whole channels
    assert F.dropout1d(ember.ones(4, 5), 0.5).shape == (4, 5)
    with pytest.warns(UserWarning, match="2-D input to dropout2d"):  # torch only warns (and drops features)
        assert F.dropout2d(ember.ones(2, 2), 0.5).shape == (2, 2)
    d = nn.Dropout(0.4)
    assert repr(d) == "Dropout(p=0.4, inplace=False)"
    x = ember.ones(100)
    d.eval()
    assert d(x) is x
    d.train()
    assert (d(x) == 0).any()
    with pytest.raises(ValueError):
        nn.Dropout(-0.1)
