"""The fused cross-entropy (ops/cross_entropy.c, cpu/cross_entropy.c; Note [fused cross-entropy]) and
second derivatives through nll_loss / cross_entropy: values and gradients against hand-written NumPy
references (and torch when installed), the node names torch gives, double backward by hand and by
gradgradcheck, edge values, and bad input."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
from test_nn_loss import E, npy  # the same tensor helpers

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

RNG = np.random.default_rng(5)
RED = ("none", "mean", "sum")


def np_ce(x, t, w=None, reduction="mean", ignore_index=-100, ls=0.0):
    """(loss, gradient of loss.sum() or of the reduced loss for x, lse) of torch's composition by hand;
    x (N, C, ...) or (C,), integer targets."""
    x = np.asarray(x, np.float64)
    t = np.asarray(t)
    one_d = x.ndim == 1
    if one_d:
        x, t = x[None], t[None]
    C = x.shape[1]
    xr = np.moveaxis(x, 1, -1).reshape(-1, C)
    tr = t.reshape(-1)
    m = xr.max(1, keepdims=True)
    lse = m + np.log(np.exp(xr - m).sum(1, keepdims=True))
    lp = xr - lse
    keep = tr != ignore_index
    ts = np.where(keep, tr, 0)
    wv = np.ones(C) if w is None else np.asarray(w, np.float64)
    wt = wv[ts] * keep
    terms = (1 - ls) * -wt * lp[np.arange(len(tr)), ts] + ls / C * -(lp * wv).sum(1) * keep
    scale = keep / wt.sum() if reduction == "mean" else keep * 1.0
    glp = -scale[:, None] * ((1 - ls) * wt[:, None] * np.eye(C)[ts] + ls / C * wv)
    grad = glp - np.exp(lp) * glp.sum(1, keepdims=True)
    tshape = t.shape[1:] if one_d else t.shape
    grad = np.moveaxis(grad.reshape(t.shape + (C,)), -1, 1)
    if one_d:
        grad = grad[0]
    loss = terms.reshape(tshape) if reduction == "none" else terms.sum() / (wt.sum() if reduction == "mean" else 1)
    return loss, grad, lse.reshape(tshape)


SHAPES = [(5,), (6, 5), (3, 5, 4), (2, 5, 3, 2), (4, 37), (3, 300), (2, 8), (1, 1)]


def _problem(shape, ignore=True):
    x = RNG.standard_normal(shape) * 3
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = RNG.integers(0, C, tshape)
    if ignore and t.size > 1:
        t.flat[0] = -100
    return x, t, RNG.random(C) + 0.5


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("ls", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_values_gradients_and_lse_against_numpy(shape, reduction, ls, weighted):
    x, t, w = _problem(shape)
    w = w if weighted else None
    want, want_grad, want_lse = np_ce(x, t, w, reduction, ls=ls)
    for dtype, tol in ((ember.float64, 1e-12), (ember.float32, 2e-5)):
        ex = E(x, dtype, requires_grad=True)
        ew = None if w is None else E(w, dtype)
        loss = F.cross_entropy(ex, E(t), weight=ew, reduction=reduction, label_smoothing=ls)
        assert loss.dtype == dtype and tuple(loss.shape) == np.shape(want)
        np.testing.assert_allclose(npy(loss), want, rtol=tol, atol=tol)
        loss.sum().backward()
        np.testing.assert_allclose(npy(ex.grad), want_grad, rtol=tol, atol=tol)
        lse = ember._C._cross_entropy(ex, E(t), ew, RED.index(reduction), -100, ls)[1]
        np.testing.assert_allclose(npy(lse), want_lse, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_half_types_compute_in_float32(dtype):
    x, t, w = _problem((6, 40))
    xq = npy(E(x, dtype))  # the rounded logits torch would see
    want, want_grad, _ = np_ce(xq, t, w, "mean", ls=0.1)
    ex = E(x, dtype, requires_grad=True)
    loss = F.cross_entropy(ex, E(t), weight=E(w, dtype), label_smoothing=0.1)
    assert loss.dtype == dtype and ex.dtype == dtype
    tol = 1e-2 if dtype == ember.float16 else 4e-2
    np.testing.assert_allclose(npy(loss), want, rtol=tol, atol=tol)
    loss.backward()
    assert ex.grad.dtype == dtype
    np.testing.assert_allclose(npy(ex.grad), want_grad, rtol=tol, atol=tol)


def test_noncontiguous_logits_uint8_targets_and_ignore_index():
    x = RNG.standard_normal((7, 6))
    t = np.array([0, 5, 3, 2, 2, 1])
    ex = E(x, requires_grad=True)
    loss = F.cross_entropy(ex.t(), E(t.astype(np.uint8)), ignore_index=2)  # (6, 7) transposed view
    want, want_grad, _ = np_ce(x.T, t, ignore_index=2)
    np.testing.assert_allclose(loss.item(), want, rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), want_grad.T, rtol=1e-12, atol=1e-14)


def test_big_rows_take_the_threaded_vector_path():
    """2048 x 1003 float32 rows: split across threads, an odd tail after the 8-lane loops"""
    x = RNG.standard_normal((2048, 1003)).astype(np.float32) * 4
    t = RNG.integers(0, 1003, 2048)
    want, want_grad, _ = np_ce(x, t, reduction="sum", ls=0.05)
    ex = E(x, requires_grad=True)
    loss = F.cross_entropy(ex, E(t), reduction="sum", label_smoothing=0.05)
    np.testing.assert_allclose(loss.item(), want, rtol=2e-5)
    loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), want_grad, rtol=1e-4, atol=2e-7)


def test_edge_values():
    inf, nan = float("inf"), float("nan")
    # a -inf logit at the target: infinite loss; its gradient is still finite
    x = E([[1.0, -inf, 2.0], [0.0, 0.0, 0.0]], requires_grad=True)
    loss = F.cross_entropy(x, E(np.array([1, 0])))
    assert loss.item() == inf
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[np.exp(1) / (np.e + np.e ** 2) / 2, -0.5,
                                                 np.exp(2) / (np.e + np.e ** 2) / 2], [-1 / 3, 1 / 6, 1 / 6]])
    # NaN (or +inf) logits make their row NaN, not the others
    x = E([[1.0, nan, 2.0], [0.0, 0.0, 0.0]], requires_grad=True)
    loss = F.cross_entropy(x, E(np.array([0, 0])), reduction="none")
    assert np.isnan(loss[0].item()) and loss[1].item() == pytest.approx(np.log(3))
    loss.sum().backward()
    assert np.isnan(x.grad[0].numpy()).all() and np.isfinite(x.grad[1].numpy()).all()
    # huge logits do not overflow
    x = E([[1e4, -1e4, 0.0], [0.0, 0.0, 3e4]])
    assert F.cross_entropy(x, E(np.array([1, 0])), label_smoothing=0.2).item() == pytest.approx(
        (0.8 * 2e4 + 0.2 / 3 * (0 + 2e4 + 1e4) + 0.8 * 3e4 + 0.2 / 3 * (3e4 + 3e4 + 0)) / 2)
    # an empty batch: mean is 0/0, sum is 0, gradients empty; every target ignored: nan and zero gradients
    e = E(np.zeros((0, 4)), requires_grad=True)
    assert np.isnan(F.cross_entropy(e, E(np.zeros(0, np.int64))).item())
    assert F.cross_entropy(e, E(np.zeros(0, np.int64)), reduction="sum").item() == 0
    for ls in (0.0, 0.4):
        x = E(RNG.standard_normal((3, 4)), requires_grad=True)
        loss = F.cross_entropy(x, E(np.array([-100, -100, -100])), label_smoothing=ls)
        assert np.isnan(loss.item())
        loss.backward()
        assert (x.grad.numpy() == 0).all()


def test_node_names_and_graph():
    """the top node is torch's; below it one fused node leads straight to the logits (torch:
    NllLoss -> LogSoftmax, or Add -> Mul -> NllLoss ... with smoothing)"""
    x2 = E(RNG.standard_normal((4, 5)), requires_grad=True)
    t2 = E(np.array([1, 0, 4, 2]))
    for red in RED:
        loss = F.cross_entropy(x2, t2, reduction=red)
        assert type(loss.grad_fn).__name__ == "NllLossBackward0"
        assert type(loss.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
        assert loss.grad_fn.next_functions[0][0].variable is x2
        assert type(F.cross_entropy(x2, t2, reduction=red, label_smoothing=0.1).grad_fn).__name__ == "AddBackward0"
    # torch reshapes inputs of 3 or more dims for nll_loss2d: its name, under a View for unreduced
    # losses not already 4-d
    for shape, red, name in (((2, 3, 4), "mean", "NllLoss2DBackward0"), ((2, 3, 4), "none", "ViewBackward0"),
                             ((2, 3, 4, 5), "none", "NllLoss2DBackward0"), ((2, 3), "none", "NllLossBackward0")):
        x = E(RNG.standard_normal(shape), requires_grad=True)
        t = E(np.zeros((shape[0],) + shape[2:], np.int64))
        assert type(F.cross_entropy(x, t, reduction=red).grad_fn).__name__ == name
        assert type(F.nll_loss(x, t, reduction=red).grad_fn).__name__ == name


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("ls", [0.0, 0.25])
def test_create_graph_gradient_and_hessian_vector_product_by_hand(reduction, ls):
    """under create_graph the gradient is composed of ember ops: the same values, and its own
    gradient is the Hessian of the loss: d/dx of (p - y) s = s (diag(p) - p p^T) A per row"""
    x = RNG.standard_normal((3, 4))
    t = np.array([1, -100, 3])
    w = np.array([0.5, 1.0, 2.0, 1.5])
    ex = E(x, requires_grad=True)
    loss = F.cross_entropy(ex, E(t), weight=E(w), reduction=reduction, label_smoothing=ls)
    g = E(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)))
    (gx,) = ember.autograd.grad(loss, ex, g, create_graph=True)
    assert gx.requires_grad
    _, want_grad, _ = np_ce(x, t, w, reduction, ls=ls)
    gv = np.linspace(0.5, 1.5, loss.numel())
    np.testing.assert_allclose(gx.detach().numpy(), want_grad * (gv[:, None] if reduction == "none" else gv[0]),
                               rtol=1e-12, atol=1e-14)
    v = RNG.standard_normal((3, 4))
    (hv,) = ember.autograd.grad(gx, ex, E(v))
    keep = t != -100
    wt = w[np.where(keep, t, 0)] * keep
    s = (gv if reduction == "none" else np.full(3, gv[0])) * keep / (wt.sum() if reduction == "mean" else 1)
    a = s * ((1 - ls) * wt + ls / 4 * w.sum())  # the coefficient of softmax in the gradient
    p = np.exp(x - x.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = np.stack([a[i] * (p[i] * v[i] - p[i] * (p[i] @ v[i])) for i in range(3)])
    np.testing.assert_allclose(hv.numpy(), want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("reduction", RED)
def test_nll_loss_backward_is_differentiable(reduction):
    """the gradient of nll_loss is linear in the incoming gradient: its derivative for that gradient
    is nll_loss of the next one; for the input it is zero"""
    x = E(RNG.standard_normal((3, 4)), requires_grad=True)
    t = E(np.array([1, -100, 3]))
    w = E(np.array([0.5, 1.0, 2.0, 1.5]))
    loss = F.nll_loss(x, t, weight=w, reduction=reduction)
    g = ember.ones_like(loss).requires_grad_()
    (gx,) = ember.autograd.grad(loss, x, g, create_graph=True)
    assert type(gx.grad_fn).__name__ == "NllLossBackwardBackward0"
    v = RNG.standard_normal((3, 4))
    gg, gx2 = ember.autograd.grad(gx, (g, x), E(v))
    picked = np.array([v[0, 1], 0.0, v[2, 3]]) * np.array([1.0, 0.0, 1.5])  # weight[target]
    want = -picked if reduction == "none" else -picked.sum() / (2.5 if reduction == "mean" else 1)
    np.testing.assert_allclose(gg.numpy(), want, rtol=1e-12)
    assert (gx2.numpy() == 0).all()
    assert gradgradcheck(lambda a: F.nll_loss(a, t, weight=w, reduction=reduction), (x,))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 4, 3)])
def test_gradcheck_and_gradgradcheck(shape):
    x, t, w = _problem(shape)
    ex, et, ew = E(x, requires_grad=True), E(t), E(w)
    for red in RED:
        for ls in (0.0, 0.3):
            f = (lambda r, s: lambda a: F.cross_entropy(a, et, weight=ew, reduction=r, label_smoothing=s))(red, ls)
            assert gradcheck(f, (ex,))
            assert gradgradcheck(f, (ex,))


def test_lse_output_is_differentiable():
    x = E(RNG.standard_normal((3, 4)), requires_grad=True)
    t = E(np.array([1, 0, 3]))
    assert gradcheck(lambda a: ember._C._cross_entropy(a, t, None, 1, -100, 0.0)[1], (x,))
    assert gradcheck(lambda a: sum(ember._C._cross_entropy(a, t, None, 0, -100, 0.2)), (x,))


def test_errors():
    x = ember.zeros(3, 5)
    t = E(np.array([1, 2, 3]))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        F.cross_entropy(x, t, label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0"):
        ember._C._cross_entropy(x, t, None, 1, -100, -0.1)
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        F.cross_entropy(x, E(np.array([1, 7, 3])), label_smoothing=0.1)
    with pytest.raises(RuntimeError, match="Expected floating point type for target with class probabilities"):
        F.cross_entropy(x, ember.zeros(3, 5, dtype=ember.int64))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.cross_entropy(ember.zeros(3, 5, dtype=ember.int64), t)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        ember._C._cross_entropy(x, t, None, 3, -100, 0.0)
    lse = ember._C._cross_entropy(x, t, None, 1, -100, 0.0)[1]
    with pytest.raises(RuntimeError, match=r"lse of shape \[2\]"):
        ember._C._cross_entropy_backward(ember.tensor(1.0), x, t, None, lse[:2], 1, -100, 0.0)
    with pytest.raises(RuntimeError, match="expected a floating point gradient of 3 elements, got 1"):
        ember._C._cross_entropy_backward(ember.tensor(1.0), x, t, None, lse, 0, -100, 0.0)


@needs_torch
@pytest.mark.parametrize("shape", [(5,), (6, 5), (3, 5, 4), (2, 5, 3, 2)])
@pytest.mark.parametrize("ls", [0.0, 0.2])
def test_matches_torch_including_double_backward(shape, ls):
    x, t, w = _problem(shape)
    for red in RED:
        outs = []
        for L in (ember, _torch):
            lx = L.tensor(x, requires_grad=True)
            loss = L.nn.functional.cross_entropy(lx, L.tensor(t), weight=L.tensor(w), reduction=red,
                                                 label_smoothing=ls)
            g = L.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)))
            (gx,) = L.autograd.grad(loss, lx, g, create_graph=True)
            (hv,) = L.autograd.grad((gx * gx).sum(), lx)
            outs.append((loss.detach().numpy(), gx.detach().numpy(), hv.numpy(), type(loss.grad_fn).__name__))
        (el, eg, eh, en), (tl, tg, th, tn) = outs
        np.testing.assert_allclose(el, tl, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(eg, tg, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(eh, th, rtol=1e-10, atol=1e-14)
        assert en == tn


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_low_precision_matches_torch(dtype):
    x, t, w = _problem((8, 50))
    res = []
    for L in (ember, _torch):
        d = getattr(L, dtype)
        lx = L.tensor(x, dtype=d, requires_grad=True)
        loss = L.nn.functional.cross_entropy(lx, L.tensor(t), weight=L.tensor(w, dtype=d), label_smoothing=0.1)
        loss.backward()
        res.append((loss.detach().float().numpy(), lx.grad.float().numpy(), str(loss.dtype).split(".")[-1]))
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=tol, atol=tol)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=tol, atol=tol)
    assert res[0][2] == res[1][2] == dtype
