"""softmax / log_softmax / softmin and the losses of nn.functional and nn:
values against NumPy (and torch when installed), gradcheck of every backward
formula, torch's node names, and torch's errors for bad input."""
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck

try:
    import torch as _torch
    import torch.nn.functional as _TF
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

RNG = np.random.default_rng(0)


def E(a, dtype=None, requires_grad=False):
    t = ember.tensor(np.asarray(a))
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(requires_grad) if requires_grad else t


def npy(t):
    return t.detach().float().numpy() if t.dtype in (ember.float16, ember.bfloat16) else t.detach().numpy()


def np_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ----------------------------------------------------------------- softmax

SHAPES_DIMS = [((7,), 0), ((4, 9), 1), ((4, 9), 0), ((3, 5, 6), 1), ((3, 5, 6), -1), ((2, 3, 4, 5), 2),
               ((2, 1000), 1), ((64, 3, 33), 1)]


@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_softmax_matches_numpy(shape, dim, dtype):
    x = RNG.standard_normal(shape) * 5
    t = E(x, dtype)
    tol = 1e-5 if dtype == ember.float32 else 1e-12
    np.testing.assert_allclose(npy(F.softmax(t, dim)), np_softmax(x, dim), rtol=tol, atol=tol)
    np.testing.assert_allclose(npy(t.log_softmax(dim)), np_log_softmax(x, dim), rtol=tol, atol=tol)
    np.testing.assert_allclose(npy(F.softmin(t, dim)), np_softmax(-x, dim), rtol=tol, atol=tol)
    assert F.softmax(t, dim).dtype == dtype


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_softmax_half_types_compute_in_float32(dtype):
    x = RNG.standard_normal((5, 17)).astype(np.float32)
    t = E(x).to(dtype)
    xr = npy(t).astype(np.float64)  # the rounded input
    y = F.softmax(t, 1)
    assert y.dtype == dtype
    tol = 1e-2 if dtype == ember.bfloat16 else 2e-3
    np.testing.assert_allclose(npy(y), np_softmax(xr, 1), rtol=tol, atol=tol)
    np.testing.assert_allclose(npy(F.log_softmax(t, 1)), np_log_softmax(xr, 1), rtol=tol, atol=tol * 4)


def test_softmax_dtype_argument_casts_first():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y = F.softmax(E(x), 1, dtype=ember.float64)
    assert y.dtype == ember.float64
    np.testing.assert_allclose(y.numpy(), np_softmax(x.astype(np.float64), 1), rtol=1e-12)
    assert ember.softmax(E(np.arange(6).reshape(2, 3)), 1, dtype=ember.float32).dtype == ember.float32
    assert E(x).log_softmax(0, ember.float64).dtype == ember.float64


def test_softmax_noncontiguous_zero_dim_empty_and_extremes():
    x = RNG.standard_normal((6, 8))
    t = E(x).t()  # (8, 6), strided
    np.testing.assert_allclose(F.softmax(t, 1).numpy(), np_softmax(x.T, 1), rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(E(x)[:, ::2], 1).numpy(), np_log_softmax(x[:, ::2], 1), rtol=1e-12)
    assert F.softmax(ember.tensor(3.0), 0).item() == 1.0
    assert F.log_softmax(ember.tensor(3.0), -1).item() == 0.0
    assert tuple(F.softmax(ember.zeros(0, 4), 1).shape) == (0, 4)
    big = F.softmax(E([1000.0, 0.0, -1000.0]), 0).numpy()  # no overflow
    np.testing.assert_allclose(big, [1.0, 0.0, 0.0])
    lp = F.log_softmax(E([1000.0, 0.0]), 0).numpy()
    np.testing.assert_allclose(lp, [0.0, -1000.0])
    assert np.isnan(F.softmax(E([1.0, float("nan"), 2.0]), 0).numpy()).all()
    np.testing.assert_allclose(F.softmax(E([0.0, -math.inf]), 0).numpy(), [1.0, 0.0])


def test_softmax_fast_exp_accuracy_float32():
    # the vectorized float32 exp against float64 over the whole useful range
    x = np.linspace(-87, 0, 100001).astype(np.float32)
    t = E(np.stack([x, np.full_like(x, -200.0)]))  # column pairs: softmax = e^x / (e^x + e^-200)
    y = F.softmax(t.t().contiguous(), 1).numpy()[:, 0]
    np.testing.assert_allclose(y, np.ones_like(x), rtol=1e-6)
    lse = F.log_softmax(E(x), 0).numpy()
    ref = np_log_softmax(x.astype(np.float64), 0)
    np.testing.assert_allclose(lse, ref, rtol=1e-5, atol=1e-4)


def test_softmax_implicit_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(E(RNG.standard_normal((2, 3))))
    np.testing.assert_allclose(y.sum(1).numpy(), [1, 1], rtol=1e-12)  # ndim 2 -> dim 1
    with pytest.warns(UserWarning, match="log_softmax"):
        y = F.log_softmax(E(RNG.standard_normal((2, 3, 4))))
    np.testing.assert_allclose(np.exp(y.numpy()).sum(0), np.ones((3, 4)), rtol=1e-12)  # ndim 3 -> dim 0


def test_softmax_errors():
    with pytest.raises(IndexError):
        F.softmax(ember.zeros(2, 3), 2)
    with pytest.raises(NotImplementedError, match="softmax_lastdim_kernel_impl"):
        F.softmax(ember.tensor([1, 2]), 0)
    with pytest.raises(TypeError):
        ember.zeros(2, 3).softmax()


@pytest.mark.parametrize("shape,dim", [((4,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1)])
def test_softmax_gradcheck(shape, dim):
    x = E(RNG.standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda a: F.softmax(a, dim), (x,))
    assert gradcheck(lambda a: F.log_softmax(a, dim), (x,))
    assert gradcheck(lambda a: F.softmin(a, dim), (x,))


def test_softmax_gradgradcheck():
    x = E(RNG.standard_normal((3, 4)), requires_grad=True)
    assert gradgradcheck(lambda a: F.softmax(a, 1), (x,))
    assert gradgradcheck(lambda a: F.log_softmax(a, 0), (x,))


def test_softmax_backward_values_and_node_names():
    x = RNG.standard_normal((3, 6))
    g = RNG.standard_normal((3, 6))
    for f, name in ((F.softmax, "SoftmaxBackward0"), (F.log_softmax, "LogSoftmaxBackward0")):
        t = E(x, requires_grad=True)
        y = f(t, 1)
        assert type(y.grad_fn).__name__ == name
        y.backward(E(g))
        ys = np_softmax(x, 1)
        want = ys * (g - (g * ys).sum(1, keepdims=True)) if f is F.softmax else g - ys * g.sum(1, keepdims=True)
        np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-10, atol=1e-12)
    t = E(x.astype(np.float32), requires_grad=True)
    y = F.softmax(t, 0, dtype=ember.float64)
    y.backward(E(g))
    assert t.grad.dtype == ember.float32


# --------------------------------------------------------------------- NLL

def np_nll(logp, target, weight=None, reduction="mean", ignore_index=-100):
    """logp (N, C, ...) or (C,), integer target; hand-written reference."""
    if logp.ndim == 1:
        logp, target = logp[None], np.asarray(target)[None]
    C = logp.shape[1]
    lp = np.moveaxis(logp, 1, -1).reshape(-1, C)
    t = np.asarray(target).reshape(-1)
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    ww = w[ts] * keep
    terms = -ww * lp[np.arange(len(t)), ts]
    if reduction == "none":
        return terms.reshape(np.asarray(target).shape)
    if reduction == "sum":
        return terms.sum()
    return terms.sum() / ww.sum()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(5,), (6, 5), (3, 5, 4), (2, 5, 3, 2)])
def test_nll_and_cross_entropy_match_numpy(reduction, weighted, shape):
    x = RNG.standard_normal(shape)
    C = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = RNG.integers(0, C, tshape)
    if target.size > 1:
        target.flat[0] = -100  # one ignored element
    weight = RNG.random(C) + 0.5 if weighted else None
    w = E(weight) if weighted else None
    axis = 0 if len(shape) == 1 else 1
    lp = np_log_softmax(x, axis)
    want = np_nll(lp, target, weight, reduction)
    got = F.nll_loss(E(lp), E(target), weight=w, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    got = F.cross_entropy(E(x), E(target), weight=w, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_gradcheck(reduction):
    x = E(RNG.standard_normal((4, 3, 2)), requires_grad=True)
    t = E(np.array([[0, 2], [1, 1], [2, -100], [0, 0]]))
    w = E(RNG.random(3) + 0.5)
    assert gradcheck(lambda a: F.nll_loss(a, t, weight=w, reduction=reduction), (x,))
    assert gradcheck(lambda a: F.cross_entropy(a, t, reduction=reduction), (x,))
    x1 = E(RNG.standard_normal(5), requires_grad=True)
    assert gradcheck(lambda a: F.cross_entropy(a, E(np.array(3)), reduction=reduction), (x1,))


def test_cross_entropy_graph_is_torchs():
    """torch's top node; below it ember has one fused node (torch: NllLoss -> LogSoftmax), see test_nn_xent.py"""
    x = E(RNG.standard_normal((4, 5)), requires_grad=True)
    loss = F.cross_entropy(x, E(np.array([1, 0, 4, 2])))
    assert type(loss.grad_fn).__name__ == "NllLossBackward0"
    assert type(loss.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    loss.backward()
    p = np_softmax(x.detach().numpy(), 1)
    p[np.arange(4), [1, 0, 4, 2]] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p / 4, rtol=1e-10, atol=1e-12)


def test_nll_all_ignored_mean_is_nan_and_uint8_targets():
    lp = E(np_log_softmax(RNG.standard_normal((2, 3)), 1))
    assert math.isnan(F.nll_loss(lp, E(np.array([-100, -100]))).item())
    a = F.nll_loss(lp, E(np.array([1, 2], dtype=np.uint8)))
    np.testing.assert_allclose(a.item(), np_nll(lp.numpy(), np.array([1, 2])), rtol=1e-12)


def test_nll_errors_like_torch():
    x = ember.zeros(3, 5)
    with pytest.raises(IndexError, match="Target 5 is out of bounds."):
        F.nll_loss(x, E(np.array([1, 5, 2])))
    with pytest.raises(IndexError, match="Target -1 is out of bounds."):
        F.cross_entropy(x, E(np.array([1, -1, 2])))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, E(np.array([1, 2])))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Double"):
        F.cross_entropy(x, E(np.array([1.0, 2.0, 3.0])))
    with pytest.raises(RuntimeError, match="Long or Byte, but got Int"):
        F.nll_loss(x, E(np.array([1, 2, 3], dtype=np.int32)))
    with pytest.raises(RuntimeError, match=r"Expected target size \[2, 4\], got \[2, 5\]"):
        F.cross_entropy(ember.zeros(2, 3, 4), ember.zeros(2, 5, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 classes"):
        F.nll_loss(x, E(np.array([1, 2, 3])), weight=ember.ones(3))
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.nll_loss(x, E(np.array([1, 2, 3])), reduction="avg")


# ------------------------------------------------- cross-entropy variants

def test_cross_entropy_probabilities_and_label_smoothing_numpy():
    x = RNG.standard_normal((4, 5))
    p = RNG.random((4, 5))
    p /= p.sum(1, keepdims=True)
    lp = np_log_softmax(x, 1)
    np.testing.assert_allclose(F.cross_entropy(E(x), E(p)).item(), -(lp * p).sum() / 4, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(E(x), E(p), reduction="none").numpy(), -(lp * p).sum(1), rtol=1e-12)
    t = np.array([1, 0, 4, -100])
    ls = 0.2
    keep = t != -100
    nll = np_nll(lp, t)
    smooth = (-lp.sum(1) * keep).sum() / keep.sum()
    want = (1 - ls) * nll + ls / 5 * smooth
    np.testing.assert_allclose(F.cross_entropy(E(x), E(t), label_smoothing=ls).item(), want, rtol=1e-12)


# ------------------------------------------------------- pointwise losses

def np_pointwise(kind, x, y, param=1.0):
    d = x - y
    if kind == "mse":
        return d * d
    if kind == "l1":
        return np.abs(d)
    if kind == "smooth_l1":
        return np.where(np.abs(d) < param, 0.5 * d * d / param, np.abs(d) - 0.5 * param)
    if kind == "huber":
        return np.where(np.abs(d) < param, 0.5 * d * d, param * (np.abs(d) - 0.5 * param))
    if kind == "bce":
        return -(y * np.maximum(np.log(x), -100) + (1 - y) * np.maximum(np.log(1 - x), -100))
    if kind == "bce_logits":
        return (1 - y) * x + np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0)
    raise ValueError(kind)


CALLS = {
    "mse": lambda a, b, r: F.mse_loss(a, b, reduction=r),
    "l1": lambda a, b, r: F.l1_loss(a, b, reduction=r),
    "smooth_l1": lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.7),
    "huber": lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.7),
    "bce": lambda a, b, r: F.binary_cross_entropy(a, b, reduction=r),
    "bce_logits": lambda a, b, r: F.binary_cross_entropy_with_logits(a, b, reduction=r),
}


def _inputs(kind, shape=(4, 5)):
    if kind == "bce":
        return RNG.random(shape) * 0.9 + 0.05, RNG.random(shape)
    if kind == "bce_logits":
        return RNG.standard_normal(shape) * 3, RNG.random(shape)
    return RNG.standard_normal(shape), RNG.standard_normal(shape)


@pytest.mark.parametrize("kind", list(CALLS))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses_match_numpy(kind, reduction):
    x, y = _inputs(kind)
    ref = np_pointwise(kind, x, y, 0.7)
    ref = ref if reduction == "none" else ref.mean() if reduction == "mean" else ref.sum()
    got = CALLS[kind](E(x), E(y), reduction)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)
    got32 = CALLS[kind](E(x, ember.float32), E(y, ember.float32), reduction)
    assert got32.dtype == ember.float32
    np.testing.assert_allclose(got32.numpy(), ref, rtol=1e-4, atol=1e-5)


C_KINDS = ["mse", "smooth_l1", "huber", "bce", "bce_logits"]
NODE_NAMES = {"mse": "MseLossBackward0", "smooth_l1": "SmoothL1LossBackward0", "huber": "HuberLossBackward0",
              "bce": "BinaryCrossEntropyBackward0", "bce_logits": "BinaryCrossEntropyWithLogitsBackward0"}


@pytest.mark.parametrize("kind", C_KINDS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pointwise_losses_gradcheck_input_and_target(kind, reduction):
    x, y = _inputs(kind, (3, 4))
    a, b = E(x, requires_grad=True), E(y, requires_grad=True)
    assert gradcheck(lambda u, v: CALLS[kind](u, v, reduction), (a, b))
    out = CALLS[kind](a, b, reduction)
    assert type(out.grad_fn).__name__ == NODE_NAMES[kind]


@pytest.mark.parametrize("kind", ["l1"])
def test_composite_losses_gradcheck(kind):
    x, y = _inputs(kind, (3, 4))
    assert gradcheck(lambda u: CALLS[kind](u, E(y), "mean"), (E(x, requires_grad=True),))


@pytest.mark.parametrize("kind", C_KINDS)
def test_pointwise_losses_gradgradcheck(kind):
    x, y = _inputs(kind, (2, 3))
    a, b = E(x, requires_grad=True), E(y, requires_grad=True)
    assert gradgradcheck(lambda u, v: CALLS[kind](u, v, "none"), (a, b))


def test_weighted_bce_and_pos_weight_gradcheck():
    x, y = _inputs("bce_logits", (3, 4))
    w = E(RNG.random((3, 4)) + 0.5)
    pw = E(RNG.random(4) + 0.5, requires_grad=False)
    a, b = E(x, requires_grad=True), E(y, requires_grad=True)
    assert gradcheck(lambda u, v: F.binary_cross_entropy_with_logits(u, v, weight=w, pos_weight=pw), (a, b))
    lw = 1 + (pw.numpy() - 1) * y
    want = ((1 - y) * x + lw * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))) * w.numpy()
    got = F.binary_cross_entropy_with_logits(E(x), E(y), weight=w, pos_weight=pw, reduction="none")
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    p, _ = _inputs("bce", (3, 4))
    assert gradcheck(lambda u: F.binary_cross_entropy(u, E(y), weight=w[0]), (E(p, requires_grad=True),))


def test_bce_with_logits_is_stable_and_bce_clamps_log():
    x = E(np.array([1000.0, -1000.0, 0.0]), requires_grad=True)
    y = E(np.array([0.0, 1.0, 1.0]))
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [1000.0, 1000.0, math.log(2)], rtol=1e-12)
    loss.backward(ember.ones(3, dtype=ember.float64))
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -1.0, -0.5])
    b = F.binary_cross_entropy(E(np.array([0.0, 1.0])), E(np.array([1.0, 0.0])), reduction="none")
    np.testing.assert_allclose(b.numpy(), [100.0, 100.0])


def test_pointwise_loss_errors_and_warnings():
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(E(np.array([1.5, 0.5])), E(np.array([1.0, 0.0])))
    with pytest.raises(ValueError, match="Using a target size"):
        F.binary_cross_entropy(ember.rand(3), ember.rand(2, 3))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(ember.rand(3), ember.rand(2, 3))
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(ember.zeros(2, 3), ember.zeros(3))
    with pytest.raises(RuntimeError, match="must match the size"), pytest.warns(UserWarning):
        F.mse_loss(ember.zeros(3, 5), ember.zeros(2, 5))
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(ember.zeros(2), ember.zeros(2), beta=-1.0)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.mse_loss(ember.zeros(2), ember.zeros(2), reduction="batchmean")


def test_broadcast_target_gradient_sums_to_its_shape():
    x = E(RNG.standard_normal((3, 4)), requires_grad=True)
    y = E(RNG.standard_normal(4), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gradcheck(lambda u, v: F.mse_loss(u, v), (x, y))


# ------------------------------------------------- kl_div, similarity, norms

def test_kl_div_cosine_pairwise_normalize_values():
    x = np_log_softmax(RNG.standard_normal((3, 4)), 1)
    p = np_softmax(RNG.standard_normal((3, 4)), 1)
    p[0, 0] = 0.0
    terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0) - p * x
    np.testing.assert_allclose(F.kl_div(E(x), E(p), reduction="batchmean").item(), terms.sum() / 3, rtol=1e-12)
    np.testing.assert_allclose(F.kl_div(E(x), E(p), reduction="none").numpy(), terms, rtol=1e-12)
    with pytest.warns(UserWarning, match="batchmean"):
        np.testing.assert_allclose(F.kl_div(E(x), E(p)).item(), terms.mean(), rtol=1e-12)
    lt = np.log(p + 0.1)
    np.testing.assert_allclose(F.kl_div(E(x), E(lt), reduction="sum", log_target=True).item(),
                               (np.exp(lt) * (lt - x)).sum(), rtol=1e-12)
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1), 1e-8) / np.maximum(np.linalg.norm(b, axis=1), 1e-8)
    np.testing.assert_allclose(F.cosine_similarity(E(a), E(b)).numpy(), cos, rtol=1e-12)
    np.testing.assert_allclose(nn.CosineSimilarity(dim=0)(E(a), E(b)).numpy(),
                               (a * b).sum(0) / np.linalg.norm(a, axis=0) / np.linalg.norm(b, axis=0), rtol=1e-12)
    np.testing.assert_allclose(F.pairwise_distance(E(a), E(b)).numpy(), np.linalg.norm(a - b + 1e-6, axis=1),
                               rtol=1e-12)
    np.testing.assert_allclose(F.pairwise_distance(E(a), E(b), p=1.0, keepdim=True).numpy(),
                               np.abs(a - b + 1e-6).sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(F.normalize(E(a)).numpy(), a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(F.normalize(E(a), p=1.0, dim=0).numpy(), a / np.abs(a).sum(0), rtol=1e-12)


# ------------------------------------------------------------------ modules

def test_loss_modules_and_legacy_reduction_args():
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    assert nn.MSELoss()(E(x), E(y)).item() == pytest.approx(((x - y) ** 2).mean())
    assert nn.MSELoss(reduction="sum")(E(x), E(y)).item() == pytest.approx(((x - y) ** 2).sum())
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        m = nn.L1Loss(size_average=False)
    assert m.reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.MSELoss(reduce=False).reduction == "none"
    ce = nn.CrossEntropyLoss(weight=ember.ones(3), ignore_index=1, label_smoothing=0.1)
    assert "weight" in dict(ce.named_buffers()) and ce.ignore_index == 1
    t = E(np.array([0, 1, 2, 2]))
    assert ce(E(x), t).item() == pytest.approx(
        F.cross_entropy(E(x), t, weight=ember.ones(3), ignore_index=1, label_smoothing=0.1).item())
    assert nn.NLLLoss()(E(x), t).item() == pytest.approx(np_nll(x, t.numpy()))
    assert nn.SmoothL1Loss(beta=0.5).beta == 0.5 and nn.HuberLoss(delta=2.0).delta == 2.0
    bl = nn.BCEWithLogitsLoss(pos_weight=ember.ones(3))
    assert set(dict(bl.named_buffers())) == {"pos_weight"}
    assert bl(E(x), E(np.abs(y) / 3)).dim() == 0
    assert nn.BCELoss()(E(np.full((2,), 0.5)), E(np.array([1.0, 0.0]))).item() == pytest.approx(math.log(2))
    assert nn.KLDivLoss(reduction="batchmean", log_target=True).log_target
    assert tuple(nn.PairwiseDistance()(E(x), E(y)).shape) == (4,)
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"
    assert repr(nn.LogSoftmax(dim=-1)) == "LogSoftmax(dim=-1)"
    assert repr(nn.Softmin()) == "Softmin(dim=None)"
    np.testing.assert_allclose(nn.Softmax(1)(E(x)).numpy(), np_softmax(x, 1), rtol=1e-12)
    np.testing.assert_allclose(nn.LogSoftmax(0)(E(x)).numpy(), np_log_softmax(x, 0), rtol=1e-12)
    np.testing.assert_allclose(nn.Softmin(1)(E(x)).numpy(), np_softmax(-x, 1), rtol=1e-12)
    assert repr(nn.MSELoss()) == "MSELoss()"


# ------------------------------------------------------------ torch parity

def _pair(a, dtype="float64", requires_grad=True):
    a = np.asarray(a)
    e = ember.tensor(a).to(getattr(ember, dtype))
    t = _torch.tensor(a).to(getattr(_torch, dtype))
    if requires_grad:
        e.requires_grad_(True)
        t.requires_grad_(True)
    return e, t


TORCH_CASES = {
    "softmax": (lambda F_, x, t, w: F_.softmax(x, -1), "randn"),
    "log_softmax0": (lambda F_, x, t, w: F_.log_softmax(x, 0), "randn"),
    "softmin": (lambda F_, x, t, w: F_.softmin(x, 1), "randn"),
    "ce": (lambda F_, x, t, w: F_.cross_entropy(x, t), "idx"),
    "ce_w_ignore": (lambda F_, x, t, w: F_.cross_entropy(x, t, weight=w, ignore_index=2), "idx"),
    "ce_ls": (lambda F_, x, t, w: F_.cross_entropy(x, t, label_smoothing=0.15), "idx"),
    "ce_ls_w": (lambda F_, x, t, w: F_.cross_entropy(x, t, weight=w, label_smoothing=0.15, ignore_index=0), "idx"),
    "ce_ls_none": (lambda F_, x, t, w: F_.cross_entropy(x, t, label_smoothing=0.15, reduction="none"), "idx"),
    "ce_probs": (lambda F_, x, t, w: F_.cross_entropy(x, t, weight=w, label_smoothing=0.1), "probs"),
    "nll_sum": (lambda F_, x, t, w: F_.nll_loss(x, t, weight=w, reduction="sum"), "idx"),
    "mse": (lambda F_, x, t, w: F_.mse_loss(x, t), "randn"),
    "mse_w": (lambda F_, x, t, w: F_.mse_loss(x, t, weight=w.expand(6, 5)), "randn"),
    "l1_none": (lambda F_, x, t, w: F_.l1_loss(x, t, reduction="none"), "randn"),
    "smooth_l1": (lambda F_, x, t, w: F_.smooth_l1_loss(x, t, beta=0.5), "randn"),
    "smooth_l1_0": (lambda F_, x, t, w: F_.smooth_l1_loss(x, t, beta=0.0, reduction="sum"), "randn"),
    "huber": (lambda F_, x, t, w: F_.huber_loss(x, t, delta=0.5), "randn"),
    "huber_w": (lambda F_, x, t, w: F_.huber_loss(x, t, delta=0.5, weight=w.expand(6, 5), reduction="none"),
                "randn"),
    "l1_w": (lambda F_, x, t, w: F_.l1_loss(x, t, weight=w.expand(6, 5)), "randn"),
    "bce": (lambda F_, x, t, w: F_.binary_cross_entropy(x.sigmoid(), t, weight=w), "probs"),
    "bce_logits": (lambda F_, x, t, w: F_.binary_cross_entropy_with_logits(x, t, pos_weight=w), "probs"),
    "kl_none": (lambda F_, x, t, w: F_.kl_div(x, t, reduction="none"), "probs"),
    "kl_log_none": (lambda F_, x, t, w: F_.kl_div(x, t.log(), reduction="none", log_target=True), "probs"),
}


@needs_torch
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_values_and_gradients_match_torch(name):
    f, kind = TORCH_CASES[name]
    x = RNG.standard_normal((6, 5))
    if kind == "idx":
        t = RNG.integers(0, 5, 6)
    elif kind == "probs":
        t = np_softmax(RNG.standard_normal((6, 5)), 1)
    else:
        t = RNG.standard_normal((6, 5))
    w = RNG.random(5) + 0.5
    ex, tx = _pair(x)
    et, tt = _pair(t, "int64" if kind == "idx" else "float64", requires_grad=False)
    ew, tw = _pair(w, requires_grad=False)
    import torch.nn.functional as TF
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e_out, t_out = f(F, ex, et, ew), f(TF, tx, tt, tw)
    np.testing.assert_allclose(e_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.standard_normal(tuple(t_out.shape))
    tout_grad = _torch.tensor(g)
    t_out.backward(tout_grad)
    # torch's C++ composite divides by a C++ scalar (DivBackward1), a name Python code can't produce
    if type(e_out.grad_fn).__name__ != type(t_out.grad_fn).__name__ and name != "ce_probs":
        pytest.fail(f"node {type(e_out.grad_fn).__name__} vs torch's {type(t_out.grad_fn).__name__}")
    e_out.backward(ember.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_softmax_low_precision_matches_torch(dtype):
    x = (RNG.standard_normal((8, 33)) * 4).astype(np.float32)
    ex, tx = _pair(x, dtype, requires_grad=False)
    tol = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    for dim in (1, 0):
        e = F.softmax(ex, dim).float().numpy()
        t = _torch.softmax(tx, dim).float().numpy()
        np.testing.assert_allclose(e, t, rtol=tol, atol=tol)
        e = F.log_softmax(ex, dim).float().numpy()
        t = _torch.log_softmax(tx, dim).float().numpy()
        np.testing.assert_allclose(e, t, rtol=tol, atol=tol * 4)
    lab = RNG.integers(0, 33, 8)
    e = F.cross_entropy(ex, ember.tensor(lab)).float().item()
    t = _TF.cross_entropy(tx, _torch.tensor(lab)).float().item()
    assert e == pytest.approx(t, rel=tol * 4, abs=tol * 4)


@needs_torch
def test_cosine_pairwise_normalize_match_torch():
    a, b = RNG.standard_normal((4, 6)), RNG.standard_normal((1, 6))
    ea, ta = _pair(a, requires_grad=False)
    eb, tb = _pair(b, requires_grad=False)
    np.testing.assert_allclose(F.cosine_similarity(ea, eb).numpy(), _TF.cosine_similarity(ta, tb).numpy(), rtol=1e-12)
    np.testing.assert_allclose(F.pairwise_distance(ea, eb, 3.0).numpy(), _TF.pairwise_distance(ta, tb, 3.0).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(F.normalize(ea, dim=0).numpy(), _TF.normalize(ta, dim=0).numpy(), rtol=1e-12)


@pytest.mark.parametrize("reduction,smoothing", [("mean", 0.0), ("sum", 0.1), ("none", 0.0)])
def test_cross_entropy_loss_written_in_place_before_backward(reduction, smoothing):
    """torch saves no loss for cross_entropy's backward, so `loss *= scale` (transformers'
    Trainer does it) before backward is legal; the gradient is scale * (softmax - onehot)."""
    x = ember.tensor(np.random.RandomState(0).randn(4, 5).astype(np.float32), requires_grad=True)
    target = [0, 1, 2, 3]
    loss = ember.nn.functional.cross_entropy(x, ember.tensor(target), reduction=reduction,
                                             label_smoothing=smoothing)
    loss *= 3.0
    loss.sum().backward()
    e = np.exp(x.detach().numpy())
    soft = e / e.sum(1, keepdims=True)
    want = (1 - smoothing) * np.eye(5)[target] + smoothing / 5
    scale = 3.0 / 4 if reduction == "mean" else 3.0
    np.testing.assert_allclose(x.grad.numpy(), scale * (soft - want), atol=1e-6)
