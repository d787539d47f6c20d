"""Note [GEMM pairs]: a matrix product's two gradients, run side by side on
two threads, equal NumPy's products — for linear layers (2-d and folded 3-d
inputs, with and without bias), mm with either operand transposed, float32
and float64, one thread and two, and through create_graph (which takes the
ops path). `L` runs each test on ember and, when installed, on torch."""
import numpy as np
import pytest



def _np(t):
    return t.detach().numpy()



@pytest.mark.parametrize("dtype, tol", [("float32", 2e-4), ("float64", 1e-10)])
@pytest.mark.parametrize("lead", [(96,), (4, 24)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_grads_match_numpy(L, ember_threads, dtype, tol, lead, bias):
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal(lead + (80,)).astype(dtype)
    w_np = rng.standard_normal((128, 80)).astype(dtype)
    g_np = rng.standard_normal(lead + (128,)).astype(dtype)
    x = L.from_numpy(x_np.copy()).requires_grad_()
    w = L.from_numpy(w_np.copy()).requires_grad_()
    b = L.from_numpy(rng.standard_normal(128).astype(dtype)).requires_grad_() if bias else None
    L.nn.functional.linear(x, w, b).backward(L.from_numpy(g_np))
    x2, g2 = x_np.reshape(-1, 80).astype(np.float64), g_np.reshape(-1, 128).astype(np.float64)
    np.testing.assert_allclose(_np(x.grad).reshape(-1, 80), g2 @ w_np.astype(np.float64), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(w.grad), g2.T @ x2, rtol=tol, atol=tol)
    assert w.grad.is_contiguous() and x.grad.shape == x.shape
    if bias:
        np.testing.assert_allclose(_np(b.grad), g2.sum(0), rtol=tol, atol=tol)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_grads_in_every_layout(L, ember_threads, ta, tb):
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal((72, 64)).astype(np.float32)
    b_np = rng.standard_normal((64, 90)).astype(np.float32)
    g_np = rng.standard_normal((72, 90)).astype(np.float32)
    # a transposed operand is the .t() of a contiguous leaf
    a = L.from_numpy(np.ascontiguousarray(a_np.T) if ta else a_np.copy()).requires_grad_()
    b = L.from_numpy(np.ascontiguousarray(b_np.T) if tb else b_np.copy()).requires_grad_()
    (a.t() if ta else a).mm(b.t() if tb else b).backward(L.from_numpy(g_np))
    ga, gb = g_np.astype(np.float64) @ b_np.T, a_np.T.astype(np.float64) @ g_np
    np.testing.assert_allclose(_np(a.grad), ga.T if ta else ga, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(_np(b.grad), gb.T if tb else gb, rtol=2e-4, atol=2e-4)


def test_create_graph_keeps_the_products_differentiable(L, ember_threads):
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal((64, 64))
    b_np = rng.standard_normal((64, 64))
    a = L.from_numpy(a_np.copy()).requires_grad_()
    b = L.from_numpy(b_np.copy()).requires_grad_()
    ga, gb = L.autograd.grad(a.mm(b).sum(), (a, b), create_graph=True)
    # d/da sum(ga) = d/da sum(ones @ b^T) = 0; d/da sum(gb) = d/da sum(a^T @ ones) = ones @ ones^T
    (dd,) = L.autograd.grad(gb.sum(), (a,))
    np.testing.assert_allclose(_np(dd), np.full((64, 64), 64.0))
    np.testing.assert_allclose(_np(ga), np.ones((64, 64)) @ b_np.T, rtol=1e-12)
