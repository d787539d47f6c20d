"""F.scaled_dot_product_attention: against a NumPy reference (masks, causal,
scale, grouped-query heads, fully masked rows), gradcheck, torch's errors, and
values and gradients against torch when installed."""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck
from ember.nn import functional as F

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

RNG = np.random.default_rng(0)


def np_sdpa(q, k, v, keep=None, add=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if add is not None:
        s = s + add
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    den = e.sum(-1, keepdims=True)
    a = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
    return a @ v


def qkv(shape_q=(2, 3, 4, 8), shape_kv=(2, 3, 6, 8)):
    return (RNG.standard_normal(shape_q), RNG.standard_normal(shape_kv), RNG.standard_normal(shape_kv))


def T(a):
    return ember.from_numpy(np.ascontiguousarray(a))


def test_against_numpy():
    q, k, v = qkv()
    np.testing.assert_allclose(F.scaled_dot_product_attention(T(q), T(k), T(v)).numpy(), np_sdpa(q, k, v),
                               rtol=1e-12, atol=1e-12)
    keep = RNG.random((4, 6)) > 0.3
    keep[1] = False  # a row with nothing to attend to: zeros
    got = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(keep)).numpy()
    np.testing.assert_allclose(got, np_sdpa(q, k, v, keep=keep), rtol=1e-12, atol=1e-12)
    assert not got[:, :, 1].any()
    add = RNG.standard_normal((4, 6))
    np.testing.assert_allclose(F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(add), scale=0.3).numpy(),
                               np_sdpa(q, k, v, add=add, scale=0.3), rtol=1e-12, atol=1e-12)
    causal = np.tril(np.ones((4, 6), bool))
    np.testing.assert_allclose(F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True).numpy(),
                               np_sdpa(q, k, v, keep=causal), rtol=1e-12, atol=1e-12)
    kq, vq = RNG.standard_normal((2, 1, 6, 8)), RNG.standard_normal((2, 1, 6, 8))  # one key/value head
    got = F.scaled_dot_product_attention(T(q), T(kq), T(vq), enable_gqa=True).numpy()
    np.testing.assert_allclose(got, np_sdpa(q, np.repeat(kq, 3, 1), np.repeat(vq, 3, 1)), rtol=1e-12, atol=1e-12)
    assert F.scaled_dot_product_attention(T(q[0, 0]), T(k[0, 0]), T(v[0, 0])).shape == (4, 8)  # 2-D inputs


def test_gradcheck_and_dropout():
    q, k, v = (T(a).requires_grad_() for a in qkv((1, 2, 3, 4), (1, 2, 5, 4)))
    keep = T(RNG.random((3, 5)) > 0.4)
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=keep), [q, k, v])
    ember.manual_seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert out.shape == (1, 2, 3, 4)


def test_errors():
    q, k, v = (T(a) for a in qkv())
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=T(np.ones((4, 6), bool)), is_causal=True)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k[..., :5], v)


@needs_torch
def test_matches_torch():
    q, k, v = qkv()
    keep = RNG.random((4, 6)) > 0.3
    g = RNG.standard_normal((2, 3, 4, 8))
    for kw in ({}, {"is_causal": True}, {"attn_mask": keep}, {"attn_mask": RNG.standard_normal((4, 6))},
               {"scale": 0.2}):
        res = []
        for L in (ember, _torch):
            xs = [L.tensor(a, requires_grad=True) for a in (q, k, v)]
            kwl = {n: (L.tensor(a) if isinstance(a, np.ndarray) else a) for n, a in kw.items()}
            y = L.nn.functional.scaled_dot_product_attention(*xs, **kwl)
            y.backward(L.tensor(g))
            res.append([y.detach().numpy()] + [x.grad.numpy() for x in xs])
        for e, t in zip(*res):
            np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-11)
