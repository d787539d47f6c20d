"""Gradients reach leaves without needless copies, and without aliasing
anything the user can still reach: a Linear weight's gradient (the
transpose of mm's transposed result) is kept as it comes, as a plain
contiguous tensor; a gradient view of a tensor the user holds is copied;
embedding's backward (into fresh zeros) sums repeated indices. Values are
checked against NumPy; `L` runs each test on ember and, when installed,
on torch, whose behaviour the expectations describe."""
import numpy as np

import ember


def _np(t):
    return t.detach().numpy()


def test_linear_weight_grad_is_a_plain_tensor_with_numpy_values(L):
    rng = np.random.default_rng(0)
    x_np, w_np, g_np = (rng.standard_normal(s).astype(np.float32) for s in ((5, 3), (4, 3), (5, 4)))
    x, w = L.from_numpy(x_np), L.from_numpy(w_np.copy()).requires_grad_()
    L.nn.functional.linear(x, w).backward(L.from_numpy(g_np))
    assert w.grad._base is None and w.grad.is_contiguous() and w.grad.shape == (4, 3)
    np.testing.assert_allclose(_np(w.grad), g_np.T @ x_np, rtol=1e-5, atol=1e-6)
    # a second backward adds into it
    L.nn.functional.linear(x, w).backward(L.from_numpy(g_np))
    np.testing.assert_allclose(_np(w.grad), 2 * (g_np.T @ x_np), rtol=1e-5, atol=1e-6)


def test_tied_weight_sums_embedding_and_head_grads(L):
    """GPT's tied embedding: one weight gets the embedding's and the output
    head's gradients."""
    rng = np.random.default_rng(1)
    w_np = rng.standard_normal((7, 3)).astype(np.float32)
    idx_np = np.array([[1, 4, 1], [6, 0, 1]])
    g_np = rng.standard_normal((2, 3, 7)).astype(np.float32)
    w = L.from_numpy(w_np.copy()).requires_grad_()
    h = L.nn.functional.embedding(L.from_numpy(idx_np), w)
    L.nn.functional.linear(h, w).backward(L.from_numpy(g_np))
    h_np = w_np[idx_np]
    expected = np.einsum("btv,btc->vc", g_np, h_np)                     # head: g^T h
    np.add.at(expected, idx_np.ravel(), (g_np @ w_np).reshape(-1, 3))  # embedding: rows gather
    np.testing.assert_allclose(_np(w.grad), expected, rtol=1e-5, atol=1e-5)


def test_grad_view_of_a_held_tensor_is_copied(L):
    held = L.arange(12.0).reshape(4, 3)
    w = L.zeros(3, 4, requires_grad=True)
    w.t().backward(held)                 # t's backward hands w a view of `held`
    held.add_(100)
    np.testing.assert_array_equal(_np(w.grad), np.arange(12.0).reshape(4, 3).T)


def test_grad_view_whose_view_the_user_holds_is_copied():
    """(torch keeps this gradient as it comes, sharing the user's memory;
    ember copies it)"""
    L = ember
    gradient = L.arange(12.0).reshape(3, 4).t()  # the user keeps only the view
    w = L.zeros(3, 4, requires_grad=True)
    w.t().backward(gradient)
    gradient.mul_(0)
    np.testing.assert_array_equal(_np(w.grad), np.arange(12.0).reshape(3, 4))


def test_embedding_backward_sums_repeated_rows(L):
    w = L.zeros(5, 2, requires_grad=True)
    idx = L.tensor([3, 0, 3, 3])
    g = L.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    L.nn.functional.embedding(idx, w).backward(g)
    np.testing.assert_array_equal(_np(w.grad), [[3, 4], [0, 0], [0, 0], [13, 16], [0, 0]])


def test_embedding_double_backward_still_records(L):
    """Under create_graph the embedding's gradient is itself differentiable."""
    w = L.ones(4, 2, requires_grad=True)
    idx = L.tensor([1, 1, 2])
    out = L.nn.functional.embedding(idx, w)
    (gw,) = L.autograd.grad((out * w[:3]).sum(), w, create_graph=True)
    assert gw.requires_grad
    gw.sum().backward()
    assert w.grad is not None
