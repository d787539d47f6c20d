"""Note [bias in the slabs]: addmm / F.linear with a bias broadcast along
the rows writes the bias from inside the GEMM's slabs. The results equal
NumPy's beta * bias + alpha * (a @ b) for small products (one BLAS call) and
big ones (slabs of rows or of columns), one thread and two, float32 and
float64, transposed operands, strided and stride-0 biases; the cases the
fast path leaves to the general one (beta = 0 with NaN in the bias, out=,
a 2-d bias) still give torch's results. `L` runs each test on ember and,
when installed, on torch."""
import numpy as np
import pytest




def _ref(bias, a, b, alpha=1.0, beta=1.0):
    return beta * bias.astype(np.float64) + alpha * (a.astype(np.float64) @ b.astype(np.float64))


# (m, k, n): one BLAS call; slabs of columns (m < n); slabs of rows (m >= n)
SHAPES = [(7, 5, 9), (96, 256, 200), (300, 160, 96)]


@pytest.mark.parametrize("dtype, tol", [("float32", 3e-4), ("float64", 1e-10)])
@pytest.mark.parametrize("mkn", SHAPES)
@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_addmm_row_bias_matches_numpy(L, ember_threads, dtype, tol, mkn, ta, tb):
    m, k, n = mkn
    rng = np.random.default_rng(m + n)
    a_np = rng.standard_normal((m, k)).astype(dtype)
    b_np = rng.standard_normal((k, n)).astype(dtype)
    bias_np = rng.standard_normal(n).astype(dtype)
    a = L.from_numpy(a_np.T.copy()).t() if ta else L.from_numpy(a_np.copy())
    b = L.from_numpy(b_np.T.copy()).t() if tb else L.from_numpy(b_np.copy())
    out = L.addmm(L.from_numpy(bias_np.copy()), a, b)
    assert out.shape == (m, n) and out.is_contiguous()
    np.testing.assert_allclose(out.numpy(), _ref(bias_np, a_np, b_np), rtol=tol, atol=tol)


@pytest.mark.parametrize("mkn", SHAPES)
def test_addmm_alpha_beta_and_strided_bias(L, ember_threads, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(3)
    a_np = rng.standard_normal((m, k))
    b_np = rng.standard_normal((k, n))
    wide = rng.standard_normal(2 * n)
    bias = L.from_numpy(wide.copy())[::2]  # stride 2
    out = L.addmm(bias, L.from_numpy(a_np), L.from_numpy(b_np), beta=0.5, alpha=-2.0)
    np.testing.assert_allclose(out.numpy(), _ref(wide[::2], a_np, b_np, -2.0, 0.5), rtol=1e-10, atol=1e-10)
    one = L.from_numpy(np.array([1.5])).expand(n)  # stride 0
    out = L.addmm(one, L.from_numpy(a_np), L.from_numpy(b_np))
    np.testing.assert_allclose(out.numpy(), _ref(np.full(n, 1.5), a_np, b_np), rtol=1e-10, atol=1e-10)


def test_linear_3d_input_bias_matches_numpy(L, ember_threads):
    rng = np.random.default_rng(5)
    x_np = rng.standard_normal((4, 64, 256)).astype(np.float32)
    w_np = rng.standard_normal((768, 256)).astype(np.float32)
    b_np = rng.standard_normal(768).astype(np.float32)
    y = L.nn.functional.linear(L.from_numpy(x_np), L.from_numpy(w_np), L.from_numpy(b_np))
    ref = x_np.reshape(-1, 256).astype(np.float64) @ w_np.T.astype(np.float64) + b_np
    np.testing.assert_allclose(y.numpy().reshape(-1, 768), ref, rtol=3e-4, atol=3e-4)


def test_beta_zero_ignores_nan_bias(L, ember_threads):
    rng = np.random.default_rng(7)
    a_np, b_np = rng.standard_normal((96, 256)), rng.standard_normal((256, 200))
    bias = L.from_numpy(np.full(200, np.nan))
    out = L.addmm(bias, L.from_numpy(a_np), L.from_numpy(b_np), beta=0)
    np.testing.assert_allclose(out.numpy(), a_np @ b_np, rtol=1e-10, atol=1e-10)


def test_alpha_zero_gives_scaled_bias(L, ember_threads):
    a = L.from_numpy(np.full((96, 256), np.inf))
    b = L.from_numpy(np.ones((256, 200)))
    bias = L.from_numpy(np.arange(200.0))
    out = L.addmm(bias, a, b, alpha=0, beta=2)
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(2 * np.arange(200.0), (96, 200)))


def test_out_and_2d_bias_take_the_general_path(L, ember_threads):
    rng = np.random.default_rng(9)
    a_np, b_np = rng.standard_normal((96, 256)), rng.standard_normal((256, 200))
    bias_np = rng.standard_normal(200)
    out = L.empty(96, 200, dtype=L.float64)
    r = L.addmm(L.from_numpy(bias_np), L.from_numpy(a_np), L.from_numpy(b_np), out=out)
    assert r.data_ptr() == out.data_ptr()
    np.testing.assert_allclose(out.numpy(), _ref(bias_np, a_np, b_np), rtol=1e-10, atol=1e-10)
    r2 = L.addmm(L.from_numpy(bias_np[None, :].copy()), L.from_numpy(a_np), L.from_numpy(b_np))
    np.testing.assert_allclose(r2.numpy(), _ref(bias_np, a_np, b_np), rtol=1e-10, atol=1e-10)


def test_bias_length_mismatch_raises(L):
    with pytest.raises(RuntimeError):
        L.addmm(L.zeros(5), L.zeros(3, 4), L.zeros(4, 6))


def test_bias_gradients_still_flow(L, ember_threads):
    rng = np.random.default_rng(11)
    x_np, w_np = rng.standard_normal((96, 256)), rng.standard_normal((200, 256))
    b = L.from_numpy(rng.standard_normal(200)).requires_grad_()
    y = L.nn.functional.linear(L.from_numpy(x_np), L.from_numpy(w_np), b)
    assert y.grad_fn is not None and "Addmm" in type(y.grad_fn).__name__
    y.sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), np.full(200, 96.0))
