"""The nn ops given native GPU paths (Note [CUDA nn kernels] in
csrc/cuda/nn_kernels.h): gelu and its backward (the elementwise iterator),
dropout (one Philox kernel), the pointwise losses (device ops), NLL forward
and backward, batch norm and group norm forward and backward (the run
kernels). On a real GPU when present, else on Note [fake CUDA]. Every test
checks `_C._cuda_fallback_counts` to prove the op did not take Note [CUDA
fallback]; values are compared with NumPy references or, as the issue
allows, with the same op on the CPU; gradients with the CPU's."""

import numpy as np
import pytest

import ember
from cuda_common import native
import ember.nn.functional as F
from ember import _C

FLOATS = [ember.float32, ember.float64, ember.float16, ember.bfloat16]
TOL = {ember.float32: 1e-5, ember.float64: 1e-12, ember.float16: 2e-3, ember.bfloat16: 2e-2}




def _arr(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _np(t):
    t = t.detach().cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy().astype(np.float64)


def _close(gpu, cpu, dtype, scale=4):
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(_np(gpu), _np(cpu), rtol=tol, atol=tol)


def _pair(a, dtype, requires_grad=False):
    """The same values as a CPU tensor and a GPU tensor (leaves)."""
    c = ember.tensor(a).to(dtype)
    g = c.cuda()
    c.requires_grad_(requires_grad)
    g.requires_grad_(requires_grad)
    return c, g


# --------------------------------------------------------------------- gelu

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_forward_backward(cuda, dtype, approximate):
    a = _arr(0, 5, 7) * 3
    xc, xg = _pair(a, dtype, True)
    with native("_gelu", "_gelu_backward"):
        yg = F.gelu(xg, approximate=approximate)
        yg.backward(ember.ones_like(yg))
    yc = F.gelu(xc, approximate=approximate)
    yc.backward(ember.ones_like(yc))
    assert yg.device.type == "cuda" and yg.dtype == dtype
    _close(yg, yc, dtype)
    _close(xg.grad, xc.grad, dtype)
    # an independent reference: x * Phi(x) (float64)
    if dtype == ember.float64 and approximate == "none":
        from math import erf
        ref = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(a.astype(np.float64))
        np.testing.assert_allclose(_np(yg), ref, rtol=1e-12, atol=1e-12)


def test_gelu_noncontiguous_and_errors(cuda):
    a = _arr(1, 6, 4)
    xg = ember.tensor(a).cuda().t()
    with native("_gelu"):
        y = F.gelu(xg)
    np.testing.assert_allclose(_np(y), _np(F.gelu(ember.tensor(a).t())), rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        F.gelu(xg, approximate="fast")
    with pytest.raises(NotImplementedError, match="GeluKernelImpl"):
        F.gelu(ember.ones(3, dtype=ember.int64, device="cuda"))


def test_gpt_step_has_no_gelu_fallback(cuda):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpt.py")
    spec = importlib.util.spec_from_file_location("gpt_bench", path)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    step = gpt.gpt_step(ember, batch=2, block=8, device="cuda", n_layer=1, n_embd=16, n_head=2)
    _C._cuda_fallback_counts(True)
    loss = step()
    counts = _C._cuda_fallback_counts(True)
    assert np.isfinite(loss.item())
    assert "_gelu" not in counts and "_gelu_backward" not in counts, counts


# ------------------------------------------------------------------ dropout

@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_mask_scale_and_statistics(cuda, dtype):
    p = 0.3
    a = np.abs(_arr(2, 200, 300)) + 0.5
    xg = ember.tensor(a).to(dtype).cuda()
    ember.manual_seed(11)
    with native("_native_dropout", entries=["dropout"]):
        out, mask = _C._native_dropout(xg, p, True)
    assert out.device.type == "cuda" and out.dtype == dtype and mask.dtype == ember.bool
    m = mask.cpu().numpy()
    assert abs(m.mean() - (1 - p)) < 0.01  # 60000 draws: sd 0.0019
    # out = x * mask * (1 / (1 - p)), computed as the CPU does (float32 for halves)
    xc = ember.tensor(a).to(dtype)
    ref = (xc * ember.tensor(m).to(dtype)) * (1 / (1 - p))
    assert ember.equal(out.cpu(), ref)
    assert (_np(out)[~m] == 0).all()


def test_dropout_reproducible_and_bernoulli_stream(cuda):
    x = ember.ones(1000, device="cuda")
    ember.manual_seed(5)
    _, m1 = _C._native_dropout(x, 0.4, True)
    _, m2 = _C._native_dropout(x, 0.4, True)
    ember.manual_seed(5)
    _, m3 = _C._native_dropout(x, 0.4, True)
    assert ember.equal(m1, m3) and not ember.equal(m1, m2)
    # the mask is the draw bernoulli_(1 - p) makes on the same generator state
    for dtype in (ember.float32, ember.float64):
        ember.manual_seed(9)
        _, m = _C._native_dropout(ember.ones(777, dtype=dtype, device="cuda"), 0.25, True)
        ember.manual_seed(9)
        b = ember.empty(777, dtype=dtype, device="cuda").bernoulli_(0.75)
        assert ember.equal(m, b.bool())


def test_dropout_edges_backward_and_errors(cuda):
    a = _arr(3, 8, 9)
    xg = ember.tensor(a).cuda().t().requires_grad_()  # non-contiguous
    with native("_native_dropout"):
        y = F.dropout(xg, 0.5)
        y.backward(ember.ones_like(y))
    keep = _np(y) != 0
    np.testing.assert_allclose(_np(y)[keep], 2 * a.T.astype(np.float64)[keep], rtol=1e-6)
    np.testing.assert_allclose(_np(xg.grad), 2.0 * keep, rtol=0)
    with native("_native_dropout"):
        out, mask = _C._native_dropout(ember.tensor([1.0, float("inf"), float("nan")]).cuda(), 1.0, True)
        assert not mask.cpu().numpy().any()
        eo, em = _C._native_dropout(xg.detach(), 0.5, False)  # evaluation: kept, unscaled
    # p = 1: x * 0 * 0, so inf and nan give nan as on the CPU
    ref = _C._native_dropout(ember.tensor([1.0, float("inf"), float("nan")]), 1.0, True)[0]
    np.testing.assert_array_equal(_np(out), _np(ref))
    assert em.device.type == "cuda" and em.cpu().numpy().all() and ember.equal(eo.cpu(), xg.detach().cpu())
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        _C._native_dropout(xg.detach(), 1.5, True)
    with pytest.raises(RuntimeError, match="can't be cast"):
        _C._native_dropout(ember.ones(3, dtype=ember.int64, device="cuda"), 0.5, True)
    e = ember.empty(0, 3, device="cuda")
    out, mask = _C._native_dropout(e, 0.5, True)
    assert out.shape == (0, 3) and mask.shape == (0, 3)


# ---------------------------------------------------------- pointwise losses

LOSSES = [
    ("mse", lambda x, y, **k: F.mse_loss(x, y, **k)),
    ("smooth_l1", lambda x, y, **k: F.smooth_l1_loss(x, y, beta=0.7, **k)),
    ("smooth_l1_b0", lambda x, y, **k: F.smooth_l1_loss(x, y, beta=0.0, **k)),
    ("huber", lambda x, y, **k: F.huber_loss(x, y, delta=0.8, **k)),
    ("bce", lambda x, y, **k: F.binary_cross_entropy(ember.sigmoid(x), y.sigmoid(), **k)),
    ("bce_logits", lambda x, y, **k: F.binary_cross_entropy_with_logits(x, y.sigmoid(), **k)),
]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name,fn", LOSSES, ids=[n for n, _ in LOSSES])
def test_pointwise_losses(cuda, dtype, reduction, name, fn):
    a, b = _arr(4, 6, 5), _arr(5, 6, 5)
    xc, xg = _pair(a, dtype, True)
    yc, yg = _pair(b, dtype)
    with native("_pointwise_loss"):
        lg = fn(xg, yg, reduction=reduction)
        lg.backward(ember.ones_like(lg))
    lc = fn(xc, yc, reduction=reduction)
    lc.backward(ember.ones_like(lc))
    assert lg.device.type == "cuda" and lg.dtype == dtype and lg.shape == lc.shape
    _close(lg, lc, dtype, 8)
    _close(xg.grad, xc.grad, dtype, 8)
    if name == "mse" and dtype == ember.float64:  # NumPy
        d = (a.astype(np.float64) - b) ** 2
        ref = {"none": d, "mean": d.mean(), "sum": d.sum()}[reduction]
        np.testing.assert_allclose(_np(lg), ref, rtol=1e-12)


def test_pointwise_loss_weights_and_bce_range(cuda):
    a, b = _arr(6, 4, 3), np.random.default_rng(7).uniform(size=(4, 3))
    w, pw = np.abs(_arr(8, 4, 3)), np.abs(_arr(9, 3)) + 0.1
    xc, xg = _pair(a, ember.float64)
    yc, yg = _pair(b, ember.float64)
    wc, wg = _pair(w, ember.float64)
    pc, pg = _pair(pw, ember.float64)
    with native("_pointwise_loss"):
        lg = F.binary_cross_entropy_with_logits(xg, yg, weight=wg, pos_weight=pg)
        bg = F.binary_cross_entropy(xg.sigmoid(), yg, weight=wg, reduction="sum")
    np.testing.assert_allclose(_np(lg), _np(F.binary_cross_entropy_with_logits(xc, yc, weight=wc, pos_weight=pc)),
                               rtol=1e-12)
    # NumPy: -w (y log p + (1 - y) log(1 - p))
    p = 1 / (1 + np.exp(-a.astype(np.float64)))
    np.testing.assert_allclose(_np(bg), (-w * (b * np.log(p) + (1 - b) * np.log(1 - p))).sum(), rtol=1e-10)
    for bad in (1.5, -0.1, float("nan")):
        xb = ember.tensor([0.2, bad]).cuda()
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            F.binary_cross_entropy(xb, ember.tensor([0.0, 1.0]).cuda())


# ---------------------------------------------------------------------- NLL

NLL_SHAPES = [((7, 5), (7,)), ((5,), ()), ((3, 4, 2, 3), (3, 2, 3)), ((0, 4), (0,))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shapes", NLL_SHAPES, ids=str)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(cuda, dtype, reduction, shapes, weighted):
    xs, ts = shapes
    C = xs[1] if len(xs) > 1 else xs[0]
    a = _arr(10, *xs)
    t = np.random.default_rng(11).integers(0, C, size=ts)
    if t.size > 2:
        t.flat[1] = -100  # ignored
    xc, xg = _pair(a, dtype, True)
    tc = ember.tensor(t)
    w = np.abs(_arr(12, C)) + 0.2
    wc, wg = (_pair(w, dtype) if weighted else (None, None))
    with native("_nll_loss", "_nll_loss_backward", entries=["nll_loss", "nll_loss_backward"]):
        lg = F.nll_loss(xg, tc.cuda(), weight=wg, reduction=reduction)
        lg.backward(ember.ones_like(lg))
    lc = F.nll_loss(xc, tc, weight=wc, reduction=reduction)
    lc.backward(ember.ones_like(lc))
    assert lg.device.type == "cuda" and lg.dtype == dtype and lg.shape == lc.shape
    if a.size == 0 and reduction == "mean":
        assert np.isnan(_np(lg))
    else:
        _close(lg, lc, dtype)
    _close(xg.grad, xc.grad, dtype)
    if dtype == ember.float64 and len(xs) == 2 and a.size:  # NumPy
        wt = (w if weighted else np.ones(C)).astype(np.float64)
        keep = t != -100
        tk = np.where(keep, t, 0)
        terms = np.where(keep, -wt[tk] * a.astype(np.float64)[np.arange(len(t)), tk], 0)
        ref = {"none": terms, "sum": terms.sum(), "mean": terms.sum() / wt[t[keep]].sum()}[reduction]
        np.testing.assert_allclose(_np(lg), ref, rtol=1e-12)


def test_nll_loss_errors_and_ignore(cuda):
    xg = ember.tensor(_arr(13, 4, 3)).cuda()
    for bad in (3, -1):
        t = ember.tensor([0, bad, 1, 2]).cuda()
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds."):
            F.nll_loss(xg, t)
        with pytest.raises(IndexError, match=f"Target {bad} is out of bounds."):
            _C._nll_loss_backward(ember.ones((), device="cuda"), xg, t, None, 1, -100)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target batch_size \(3\)"):
        F.nll_loss(xg, ember.tensor([0, 1, 2]).cuda())
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 3 classes"):
        F.nll_loss(xg, ember.tensor([0, 1, 2, 0]).cuda(), weight=ember.ones(2, device="cuda"))
    # an ignore_index outside [0, C) is skipped, not out of bounds; uint8 targets are widened
    t = ember.tensor([0, 7, 1, 7]).cuda()
    with native("_nll_loss"):
        l = F.nll_loss(xg, t, ignore_index=7, reduction="sum")
        lu = F.nll_loss(xg, ember.tensor([0, 1, 2, 1], dtype=ember.uint8).cuda())
    a = _np(xg)
    np.testing.assert_allclose(_np(l), -(a[0, 0] + a[2, 1]), rtol=1e-6)
    np.testing.assert_allclose(_np(lu), -(a[0, 0] + a[1, 1] + a[2, 2] + a[3, 1]) / 4, rtol=1e-6)


# --------------------------------------------------------------- batch norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(6, 4), (4, 3, 5), (2, 3, 9, 8)], ids=str)
def test_batch_norm_training(cuda, dtype, shape):
    C = shape[1]
    a = _arr(20, *shape) * 2 + 1
    xc, xg = _pair(a, dtype, True)
    wc, wg = _pair(_arr(21, C), ember.float32, True)
    bc, bg = _pair(_arr(22, C), ember.float32, True)
    rmc, rmg = _pair(_arr(23, C), ember.float32)
    rvc, rvg = _pair(np.abs(_arr(24, C)) + 0.5, ember.float32)
    with native("_native_batch_norm", "_native_batch_norm_backward",
                entries=["norm_runs_stats", "norm_runs_affine"]):
        yg = F.batch_norm(xg, rmg, rvg, wg, bg, training=True, momentum=0.2, eps=1e-3)
        yg.backward(ember.ones_like(yg) * ember.arange(yg.numel(), device="cuda").reshape(yg.shape).to(dtype) / 50)
    yc = F.batch_norm(xc, rmc, rvc, wc, bc, training=True, momentum=0.2, eps=1e-3)
    yc.backward(ember.ones_like(yc) * ember.arange(yc.numel()).reshape(yc.shape).to(dtype) / 50)
    assert yg.device.type == "cuda" and yg.dtype == dtype and rmg.device.type == "cuda"
    _close(yg, yc, dtype, 8)
    _close(rmg, rmc, ember.float32)  # the running statistics moved on the device, as on the CPU
    _close(rvg, rvc, ember.float32)
    _close(xg.grad, xc.grad, dtype, 16)
    _close(wg.grad, wc.grad, ember.float32 if dtype != ember.bfloat16 else dtype, 64)
    _close(bg.grad, bc.grad, ember.float32 if dtype != ember.bfloat16 else dtype, 64)
    if dtype == ember.float64:  # NumPy
        axes = tuple(d for d in range(len(shape)) if d != 1)
        bshape = [1] * len(shape)
        bshape[1] = C
        x = a.astype(np.float64)
        mu, var = x.mean(axis=axes), x.var(axis=axes)
        ref = (x - mu.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-3) * _np(wc).reshape(bshape) \
            + _np(bc).reshape(bshape)
        np.testing.assert_allclose(_np(yg), ref, rtol=1e-6, atol=1e-6)
        n = x.size / C
        np.testing.assert_allclose(_np(rvg), 0.8 * (np.abs(_arr(24, C)) + 0.5) + 0.2 * var * n / (n - 1), rtol=1e-5)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16])
def test_batch_norm_eval_noncontiguous_no_affine(cuda, dtype):
    a = _arr(30, 3, 5, 4)
    xc = ember.tensor(a).to(dtype).transpose(0, 2).requires_grad_()  # (4, 5, 3), non-contiguous
    xg = ember.tensor(a).to(dtype).cuda().transpose(0, 2).requires_grad_()
    rm, rv = _arr(31, 5, dtype=np.float64), np.abs(_arr(32, 5, dtype=np.float64)) + 0.3
    with native("_native_batch_norm", "_native_batch_norm_backward"):
        yg = F.batch_norm(xg, ember.tensor(rm).cuda(), ember.tensor(rv).cuda(), training=False)
        yg.sum().backward()
        zg = F.batch_norm(xg.detach(), None, None, training=True)
    yc = F.batch_norm(xc, ember.tensor(rm), ember.tensor(rv), training=False)
    yc.sum().backward()
    _close(yg, yc, dtype, 8)
    _close(xg.grad, xc.grad, dtype, 8)
    _close(zg, F.batch_norm(xc.detach(), None, None, training=True), dtype, 8)
    x = _np(xc).transpose(0, 2, 1)  # NumPy: channels last
    np.testing.assert_allclose(_np(yg).transpose(0, 2, 1), (x - rm) / np.sqrt(rv + 1e-5), rtol=TOL[dtype] * 8,
                               atol=TOL[dtype] * 8)


def test_batch_norm_errors(cuda):
    xg = ember.ones(4, 3, device="cuda")
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined in evaluation mode"):
        _C._native_batch_norm(xg, None, None, None, None, False, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 2"):
        _C._native_batch_norm(xg, ember.ones(2, device="cuda"), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        _C._native_batch_norm(ember.ones(4, 3, dtype=ember.int64, device="cuda"), None, None, None, None, True,
                              0.1, 1e-5)
    # one value per channel: the unbiased variance divides by zero, as torch
    rv = ember.ones(3, device="cuda")
    _C._native_batch_norm(ember.ones(1, 3, device="cuda"), None, None, ember.zeros(3, device="cuda"), rv, True,
                          0.1, 1e-5)
    assert np.isnan(_np(rv)).all()


# --------------------------------------------------------------- group norm

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 4, 5), 2), ((2, 4), 4), ((4, 6, 70), 1)],
                         ids=str)
def test_group_norm(cuda, dtype, shape, groups):
    C = shape[1]
    a = _arr(40, *shape) * 3 - 1
    xc, xg = _pair(a, dtype, True)
    wc, wg = _pair(_arr(41, C), dtype, True)
    bc, bg = _pair(_arr(42, C), dtype, True)
    go = _arr(43, *shape)
    with native("_native_group_norm", "_native_group_norm_backward",
                entries=["norm_runs_stats", "norm_runs_affine"]):
        yg = F.group_norm(xg, groups, wg, bg, eps=1e-4)
        yg.backward(ember.tensor(go).to(dtype).cuda())
    yc = F.group_norm(xc, groups, wc, bc, eps=1e-4)
    yc.backward(ember.tensor(go).to(dtype))
    assert yg.device.type == "cuda" and yg.dtype == dtype
    _close(yg, yc, dtype, 8)
    _close(xg.grad, xc.grad, dtype, 16)
    _close(wg.grad, wc.grad, dtype, 64)
    _close(bg.grad, bc.grad, dtype, 64)
    if dtype == ember.float64:  # NumPy
        x = a.astype(np.float64).reshape(shape[0], groups, -1)
        ref = ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-4)).reshape(shape)
        bshape = [1, C] + [1] * (len(shape) - 2)
        ref = ref * _np(wc).reshape(bshape) + _np(bc).reshape(bshape)
        np.testing.assert_allclose(_np(yg), ref, rtol=1e-10, atol=1e-10)


def test_group_norm_stats_and_errors(cuda):
    a = _arr(50, 2, 6, 3)
    xg = ember.tensor(a).cuda()
    with native("_native_group_norm"):
        y, mean, rstd = _C._native_group_norm(xg, None, None, 2, 1e-5)
    x = a.astype(np.float64).reshape(2, 2, -1)
    assert mean.device.type == "cuda" and mean.shape == (2, 2)
    np.testing.assert_allclose(_np(mean), x.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(rstd), 1 / np.sqrt(x.var(-1) + 1e-5), rtol=1e-5)
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible by num_groups"):
        F.group_norm(xg, 4)
    with pytest.raises(RuntimeError, match="Expected weight to be a vector of size equal to the number of channels"):
        F.group_norm(xg, 2, ember.ones(5, device="cuda"))


# -------------------------------------------------------------------- pools

POOL_CASES = [  # (shape, kernel, stride, padding, dilation, ceil_mode)
    ((2, 3, 8, 9), 2, 2, 0, 1, False),
    ((2, 3, 7, 9), 3, 2, 1, 1, True),
    ((3, 7, 8), (2, 3), (1, 2), (1, 0), (2, 1), False),
    ((1, 2, 5, 5), 5, 1, 2, 1, False),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool2d(cuda, dtype, case):
    shape, k, s, p, d, ceil = case
    a = _arr(60, *shape)
    a.flat[::7] = a.flat[3]  # ties: the first maximum wins
    xc, xg = _pair(a, dtype, True)
    with native("_max_pool2d_with_indices", "_max_pool2d_backward", entries=["max_pool2d", "max_pool2d_backward"]):
        yg, ig = F.max_pool2d(xg, k, s, p, d, ceil_mode=ceil, return_indices=True)
        yg.backward(ember.ones_like(yg))
    yc, ic = F.max_pool2d(xc, k, s, p, d, ceil_mode=ceil, return_indices=True)
    yc.backward(ember.ones_like(yc))
    assert yg.device.type == "cuda" and yg.dtype == dtype and ig.dtype == ember.int64
    assert ember.equal(yg.cpu(), yc) and ember.equal(ig.cpu(), ic)
    assert ember.equal(xg.grad.cpu(), xc.grad)
    if case[1:] == (2, 2, 0, 1, False) and dtype == ember.float64:  # NumPy: 2x2 blocks
        ref = a.astype(np.float64)[..., :8].reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
        np.testing.assert_array_equal(_np(yg), ref)


def test_max_pool2d_nan_noncontiguous_and_errors(cuda):
    a = _arr(61, 2, 6, 6)
    a[0, 1, 1] = np.nan
    xg = ember.tensor(a).cuda().transpose(1, 2)
    with native("_max_pool2d_with_indices"):
        y, i = F.max_pool2d(xg, 2, return_indices=True)
    yc, ic = F.max_pool2d(ember.tensor(a).transpose(1, 2), 2, return_indices=True)
    np.testing.assert_array_equal(_np(y), _np(yc))  # NaN propagates at the same place
    assert np.isnan(_np(y)[0, 0, 0]) and ember.equal(i.cpu(), ic)
    bad = i.clone()
    bad[0, 0, 0] = 36
    with pytest.raises(RuntimeError, match="index 36 out of range for an input plane of 6 x 6"):
        _C._max_pool2d_backward(ember.ones_like(y), bad, [2, 6, 6])
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size"):
        F.max_pool2d(xg, 2, padding=2)


AVG_CASES = [  # (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    ((2, 3, 8, 9), 2, 2, 0, False, True, None),
    ((2, 3, 7, 9), 3, 2, 1, True, True, None),
    ((2, 3, 7, 9), 3, 2, 1, True, False, None),
    ((3, 7, 8), (2, 3), (1, 2), (1, 0), False, True, 5),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", AVG_CASES, ids=str)
def test_avg_pool2d(cuda, dtype, case):
    shape, k, s, p, ceil, cip, div = case
    a = _arr(62, *shape)
    xc, xg = _pair(a, dtype, True)
    go = _arr(63, *F.avg_pool2d(xc.detach(), k, s, p, ceil, cip, div).shape)
    with native("_avg_pool2d", "_avg_pool2d_backward", entries=["avg_pool2d"]):
        yg = F.avg_pool2d(xg, k, s, p, ceil, cip, div)
        yg.backward(ember.tensor(go).to(dtype).cuda())
    yc = F.avg_pool2d(xc, k, s, p, ceil, cip, div)
    yc.backward(ember.tensor(go).to(dtype))
    assert yg.device.type == "cuda" and yg.dtype == dtype
    _close(yg, yc, dtype, 1)  # the same sums in the same order
    _close(xg.grad, xc.grad, dtype, 1)
    if case[0] == (2, 3, 8, 9) and dtype == ember.float64:  # NumPy: 2x2 blocks
        ref = a.astype(np.float64)[..., :8].reshape(2, 3, 4, 2, 4, 2).mean(axis=(3, 5))
        np.testing.assert_allclose(_np(yg), ref, rtol=1e-12)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
@pytest.mark.parametrize("out", [(3, 5), (1, 1), (7, 7), (2, 1)], ids=str)
def test_adaptive_avg_pool2d(cuda, dtype, out):
    a = _arr(64, 2, 3, 7, 6)
    xc, xg = _pair(a, dtype, True)
    go = _arr(65, 2, 3, *out)
    # (1, 1) is a mean in nn.functional, as torch
    with native("_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", entries=["avg_pool2d"] * (out != (1, 1))):
        yg = F.adaptive_avg_pool2d(xg, out)
        yg.backward(ember.tensor(go).to(dtype).cuda())
    yc = F.adaptive_avg_pool2d(xc, out)
    yc.backward(ember.tensor(go).to(dtype))
    _close(yg, yc, dtype, 1)
    _close(xg.grad, xc.grad, dtype, 1)
    if out == (1, 1):  # NumPy: the plane's mean
        np.testing.assert_allclose(_np(yg)[..., 0, 0], _np(xc).mean(axis=(2, 3)), rtol=TOL[dtype] * 4,
                                   atol=TOL[dtype] * 4)
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size for non-batch dimensions"):
        F.adaptive_avg_pool2d(ember.ones(2, 0, 3, device="cuda"), 2)
