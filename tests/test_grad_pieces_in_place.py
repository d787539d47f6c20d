"""Note [attention gradients share a storage] and Note [gradient pieces in
place]: nanoGPT's qkv projection, split into q, k, v and viewed into heads,
gets its gradient with no concatenating copy — attention writes the three
gradients side by side in one storage and split's backward takes the view
over them. Values against torch (same inputs) when installed and against
finite differences in float64; the absence of the copies through the
profiler's events."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.profiler import profile

B, T, C, H = 2, 6, 8, 2


def _attn_of_qkv(L, w, order=(0, 1, 2), causal=True):
    pieces = w.split(C, dim=2)
    q, k, v = (pieces[i].view(B, T, H, C // H).transpose(1, 2) for i in order)
    return L.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _inputs(seed=0):
    g = np.random.default_rng(seed)
    return g.standard_normal((B, T, 3 * C)), g.standard_normal((B, H, T, C // H))


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_matches_torch(torch, order):
    x, g = _inputs(1)
    xe = ember.from_numpy(x.astype(np.float32)).requires_grad_(True)
    xt = torch.from_numpy(x.astype(np.float32)).requires_grad_(True)
    _attn_of_qkv(ember, xe * 2.0, order).backward(ember.from_numpy(g.astype(np.float32)))
    _attn_of_qkv(torch, xt * 2.0, order).backward(torch.from_numpy(g.astype(np.float32)))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_matches_finite_differences():
    x, g = _inputs(2)
    xe = ember.from_numpy(x).requires_grad_(True)
    _attn_of_qkv(ember, xe * 1.0, causal=False).backward(ember.from_numpy(g))
    rng, eps = np.random.default_rng(3), 1e-6
    f = lambda a: float((_attn_of_qkv(ember, ember.from_numpy(a), causal=False).numpy() * g).sum())  # noqa: E731
    for _ in range(12):
        i = tuple(int(rng.integers(s)) for s in x.shape)
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        assert abs((f(xp) - f(xm)) / (2 * eps) - xe.grad.numpy()[i]) < 1e-7


def test_no_concatenating_copy():
    x, g = _inputs(4)
    xe = ember.from_numpy(x.astype(np.float32)).requires_grad_(True)
    y = _attn_of_qkv(ember, xe * 1.0)
    with profile() as prof:
        y.backward(ember.from_numpy(g.astype(np.float32)))
    names = {e.name for e in prof.events()}
    assert "autograd::engine::evaluate_function: SplitBackward0" in names
    assert not names & {"aten::copy_", "aten::new_empty", "aten::new_zeros"}


def test_other_layouts_still_copy_and_stay_right():
    # pieces made contiguous: no shared storage, split's backward assembles the gradient
    x, g = _inputs(5)
    xe = ember.from_numpy(x).requires_grad_(True)
    q, k, v = (t.contiguous().view(B, T, H, C // H).transpose(1, 2) for t in (xe * 1.0).split(C, dim=2))
    y = F.scaled_dot_product_attention(q, k, v)
    y.backward(ember.from_numpy(g))
    xs = ember.from_numpy(x).requires_grad_(True)
    ys = _attn_of_qkv(ember, xs * 1.0, causal=False)
    ys.backward(ember.from_numpy(g))
    np.testing.assert_allclose(xe.grad.numpy(), xs.grad.numpy(), rtol=1e-12, atol=1e-12)
    # the same tensor as q, k and v: one storage, no distance apart (gradients add up)
    a = ember.from_numpy(g.copy()).requires_grad_(True)
    F.scaled_dot_product_attention(a, a, a).sum().backward()
    b = [ember.from_numpy(g.copy()).requires_grad_(True) for _ in range(3)]
    F.scaled_dot_product_attention(*b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), sum(t.grad.numpy() for t in b), rtol=1e-12, atol=1e-12)


def test_a_split_leaf_gets_its_own_gradient_storage():
    x, g = _inputs(6)
    leaf = ember.from_numpy(x).requires_grad_(True)
    y = _attn_of_qkv(ember, leaf, causal=False)  # the leaf itself is split
    y.backward(ember.from_numpy(g))
    assert leaf.grad.is_contiguous() and leaf.grad.shape == leaf.shape
    ref = ember.from_numpy(x).requires_grad_(True)
    _attn_of_qkv(ember, ref * 1.0, causal=False).backward(ember.from_numpy(g))
    np.testing.assert_allclose(leaf.grad.numpy(), ref.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_split_with_missing_or_foreign_piece_gradients():
    x = ember.arange(24.0).view(2, 12).requires_grad_(True)
    a, b, c = (x * 1.0).split(4, dim=1)
    (a.sum() * 2 + c.sum()).backward()  # b gets no gradient: zeros there
    expect = np.concatenate([np.full((2, 4), 2.0), np.zeros((2, 4)), np.ones((2, 4))], 1)
    np.testing.assert_array_equal(x.grad.numpy(), expect)
    # gradients that happen to sit in one storage but not side by side
    y = ember.arange(24.0).view(2, 12).requires_grad_(True)
    p, q = (y * 1.0).split(6, dim=1)
    buf = ember.arange(100.0)
    gp, gq = buf[:12].view(2, 6), buf[50:62].view(2, 6)
    ember.autograd.backward([p, q], [gp, gq])
    np.testing.assert_array_equal(y.grad.numpy(), np.concatenate([gp.numpy(), gq.numpy()], 1))
