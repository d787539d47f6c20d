"""Matrix products on the GPU (Note [GPU gemm]): mm, bmm, matmul with
broadcast batches, addmm/baddbmm/addbmm with alpha/beta, transposed
operands read in place, every float dtype, integer products through the CPU
fallback, autograd. On a real GPU when present, else on Note [fake CUDA]
(host memory behind the CUDA interface). Checked against NumPy in float64."""

import numpy as np
import pytest

import ember

TOL = {"float32": 1e-4, "float64": 1e-10, "float16": 2e-2, "bfloat16": 5e-2}




def _t(seed, shape, dtype):
    a = np.random.default_rng(seed).uniform(-1, 1, shape)
    return ember.tensor(a).to(getattr(ember, dtype))


def _np(t):
    return t.detach().cpu().double().numpy()


def _close(got, want, dtype):
    assert got.is_cuda
    np.testing.assert_allclose(_np(got), want, rtol=TOL[dtype], atol=TOL[dtype] * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("dtype", list(TOL))
def test_mm_layouts(cuda, dtype):
    a, b = _t(0, (6, 5), dtype), _t(1, (5, 4), dtype)
    want = _np(a) @ _np(b)
    for x, y in [(a, b), (a.t().contiguous().t(), b), (a, b.t().contiguous().t()), (a[:, :5], b)]:
        r = ember.mm(x.cuda(), y.cuda())
        assert r.dtype == a.dtype
        _close(r, want, dtype)
    # a transposed, strided output through out=
    out = ember.empty(4, 6, dtype=a.dtype, device="cuda").t()
    ember.mm(a.cuda(), b.cuda(), out=out)
    _close(out, want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_batched_and_broadcast(cuda, dtype):
    x, w = _t(2, (2, 3, 5, 7), dtype), _t(3, (7, 4), dtype)
    _close(x.cuda() @ w.cuda(), _np(x) @ _np(w), dtype)
    b1, b2 = _t(4, (3, 5, 7), dtype), _t(5, (3, 7, 2), dtype)
    _close(ember.bmm(b1.cuda(), b2.cuda()), _np(b1) @ _np(b2), dtype)
    y = _t(6, (3, 1, 7, 2), dtype)  # broadcast batch dims
    _close(ember.matmul(b1.cuda(), y.cuda()), _np(b1) @ _np(y), dtype)
    v = _t(7, (7,), dtype)
    _close(b1.cuda() @ v.cuda(), _np(b1) @ _np(v), dtype)


def test_addmm_family(cuda):
    d = "float64"
    c, a, b = _t(8, (5, 3), d), _t(9, (5, 7), d), _t(10, (7, 3), d)
    _close(ember.addmm(c.cuda(), a.cuda(), b.cuda(), beta=0.5, alpha=-2.0), 0.5 * _np(c) - 2 * _np(a) @ _np(b), d)
    bias = _t(11, (3,), d)
    _close(ember.addmm(bias.cuda(), a.cuda(), b.cuda()), _np(bias) + _np(a) @ _np(b), d)
    b1, b2, s = _t(12, (4, 5, 6), d), _t(13, (4, 6, 3), d), _t(14, (4, 5, 3), d)
    _close(ember.baddbmm(s.cuda(), b1.cuda(), b2.cuda(), alpha=3.0), _np(s) + 3 * _np(b1) @ _np(b2), d)
    _close(ember.addbmm(c.cuda(), b1.cuda(), b2.cuda()), _np(c) + (_np(b1) @ _np(b2)).sum(0), d)
    r = c.cuda()
    r.addmm_(a.cuda(), b.cuda(), beta=0)
    _close(r, _np(a) @ _np(b), d)


def test_integer_product_falls_back_and_is_exact(cuda):
    a = ember.arange(12).reshape(3, 4)
    r = a.cuda() @ a.t().cuda()
    assert r.is_cuda and r.dtype == ember.int64
    np.testing.assert_array_equal(r.cpu().numpy(), a.numpy() @ a.numpy().T)


def test_linear_gradients_on_the_device(cuda):
    d = "float64"
    x = _t(15, (4, 6), d).cuda().requires_grad_()
    w = _t(16, (3, 6), d).cuda().requires_grad_()
    b = _t(17, (3,), d).cuda().requires_grad_()
    y = ember.nn.functional.linear(x, w, b)
    g = _t(18, (4, 3), d)
    y.backward(g.cuda())
    assert x.grad.is_cuda and w.grad.is_cuda and b.grad.is_cuda
    _close(x.grad, _np(g) @ _np(w), d)
    _close(w.grad, _np(g).T @ _np(x), d)
    _close(b.grad, _np(g).sum(0), d)


def test_errors_match_the_cpu(cuda):
    a, b = _t(19, (3, 4), "float32").cuda(), _t(20, (5, 2), "float32").cuda()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ember.mm(a, b)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.mm(a, a.t().double())
    with pytest.raises(RuntimeError, match="same device"):
        ember.mm(a, ember.ones(4, 2))


def test_tf32_switch():
    prev = ember.backends.cuda.matmul.allow_tf32
    try:
        ember.set_float32_matmul_precision("high")
        assert ember.backends.cuda.matmul.allow_tf32 and ember.get_float32_matmul_precision() == "high"
        ember.backends.cuda.matmul.allow_tf32 = False
        assert ember.get_float32_matmul_precision() == "highest"
    finally:
        ember.backends.cuda.matmul.allow_tf32 = prev
