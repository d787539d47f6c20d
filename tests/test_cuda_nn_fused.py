"""The fused nn ops' native GPU paths (softmax family, layer/rms norm,
cross-entropy, fused Adam/AdamW, embedding): on a real GPU when present, else
on Note [fake CUDA], whose fused entries are counted so each test also checks
that the native path ran and not Note [CUDA fallback]. Values are compared
with NumPy references (float64), gradients with hand-derived formulas."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _C, _cuda_fake




class native:
    """Asserts (on the fake) that the named fused entries ran inside the block."""

    def __init__(self, mode, *names):
        self.mode, self.names = mode, names

    def __enter__(self):
        if self.mode == "fake":
            self.before = _cuda_fake.kernel_calls()

    def __exit__(self, *exc):
        if self.mode == "fake" and exc[0] is None:
            after = _cuda_fake.kernel_calls()
            for n in self.names:
                assert after[n] > self.before[n], f"{n} took the fallback"


def _arr(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _np(t):
    return t.detach().cpu().float().numpy().astype(np.float64) if t.dtype in (ember.float16, ember.bfloat16) \
        else t.detach().cpu().numpy().astype(np.float64)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


TOL = {ember.float32: 1e-5, ember.float64: 1e-12, ember.float16: 2e-3, ember.bfloat16: 2e-2}


# ------------------------------------------------------------------ softmax

@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("shape,dim", [((7, 33), -1), ((3, 5, 4), 1), ((1,), 0), ((2, 0, 3), 2), ((), 0)])
def test_softmax_forward(cuda, dtype, shape, dim):
    a = _arr(0, *shape) * 3
    x = ember.tensor(a).to(dtype)
    ref_in = _np(x)
    xg = x.cuda()
    with native(cuda, *(["softmax"] if a.size else [])):
        s, ls = F.softmax(xg, dim), F.log_softmax(xg, dim)
    assert s.device.type == "cuda" and s.dtype == dtype and ls.dtype == dtype
    ref = _softmax(ref_in, dim if ref_in.ndim else None) if ref_in.size else ref_in
    tol = TOL[dtype] * 4
    np.testing.assert_allclose(_np(s), ref, rtol=tol, atol=tol)
    if ref_in.size:
        np.testing.assert_allclose(_np(ls), np.log(ref), rtol=tol, atol=tol * 4)


def test_softmax_dtype_argument_and_noncontiguous(cuda):
    a = _arr(1, 6, 5)
    xg = ember.tensor(a).cuda().t()  # non-contiguous
    with native(cuda, "softmax"):
        s = F.softmax(xg, 1, dtype=ember.float64)
    assert s.dtype == ember.float64
    np.testing.assert_allclose(_np(s), _softmax(a.T.astype(np.float64), 1), rtol=1e-6)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_softmax_backward(cuda, log, dim):
    a, g = _arr(2, 3, 4, 5).astype(np.float64), _arr(3, 3, 4, 5).astype(np.float64)
    x = ember.tensor(a).cuda().requires_grad_()
    with native(cuda, "softmax", "softmax_backward"):
        y = (F.log_softmax if log else F.softmax)(x, dim)
        y.backward(ember.tensor(g).cuda())
    s = _softmax(a, dim)
    ref = g - s * g.sum(dim, keepdims=True) if log else s * (g - (g * s).sum(dim, keepdims=True))
    np.testing.assert_allclose(_np(x.grad), ref, rtol=1e-10, atol=1e-12)


def test_softmax_errors_match_cpu(cuda):
    xi = ember.tensor([[1, 2]]).cuda()
    with pytest.raises(NotImplementedError):
        F.softmax(xi, 1)
    with pytest.raises(IndexError):
        F.softmax(ember.ones(2, 3).cuda(), 2)
    with pytest.raises(RuntimeError, match="does not match"):
        _C._softmax_backward_data(ember.ones(2, 3).cuda(), ember.ones(3, 2).cuda(), 1, False)
    with pytest.raises(RuntimeError, match="same device"):
        F.softmax(ember.ones(2, 3).cuda(), 1) + ember.ones(2, 3)


# ---------------------------------------------------------------- layer norm

def _ln_ref(x, w, b, eps, k, rms=False):
    ax = tuple(range(x.ndim - k, x.ndim))
    mu = 0 if rms else x.mean(ax, keepdims=True)
    var = ((x - mu) ** 2).mean(ax, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    y = (x - mu) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, rstd


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("shape,k,affine", [((4, 7), 1, True), ((2, 3, 8), 2, True), ((5, 300), 1, False),
                                            ((3, 1), 1, True)])
def test_layer_norm_forward(cuda, dtype, shape, k, affine):
    x = ember.tensor(_arr(4, *shape) * 2 + 1).to(dtype)
    w = ember.tensor(_arr(5, *shape[-k:])).to(dtype) if affine else None
    b = ember.tensor(_arr(6, *shape[-k:])).to(dtype) if affine else None
    ns = shape[-k:]
    with native(cuda, "layer_norm"):
        y, mean, rstd = _C._native_layer_norm(x.cuda(), ns, w.cuda() if affine else None,
                                              b.cuda() if affine else None, 1e-5)
    assert y.dtype == dtype and y.device.type == "cuda"
    assert mean.dtype == (ember.float64 if dtype == ember.float64 else ember.float32)
    assert tuple(mean.shape) == shape[:-k] + (1,) * k
    ry, rm, rs = _ln_ref(_np(x), _np(w) if affine else None, _np(b) if affine else None, 1e-5, k)
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(_np(y), ry, rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(mean), rm, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(rstd), rs, rtol=1e-4)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_rms_norm_forward(cuda, dtype):
    x = ember.tensor(_arr(7, 6, 16)).to(dtype)
    w = ember.tensor(_arr(8, 16)).to(dtype)
    with native(cuda, "layer_norm"):
        y = F.rms_norm(x.cuda(), (16,), w.cuda(), eps=1e-6)
    ry, _, _ = _ln_ref(_np(x), _np(w), None, 1e-6, 1, rms=True)
    np.testing.assert_allclose(_np(y), ry, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


def test_layer_norm_backward(cuda):
    a, g = _arr(9, 5, 12).astype(np.float64), _arr(10, 5, 12).astype(np.float64)
    wv, bv = _arr(11, 12).astype(np.float64), _arr(12, 12).astype(np.float64)
    x = ember.tensor(a).cuda().requires_grad_()
    w = ember.tensor(wv).cuda().requires_grad_()
    b = ember.tensor(bv).cuda().requires_grad_()
    with native(cuda, "layer_norm", "layer_norm_backward"):
        F.layer_norm(x, (12,), w, b, 1e-5).backward(ember.tensor(g).cuda())
    mu = a.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((a - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    xh = (a - mu) * rstd
    gw = g * wv
    dx = rstd * (gw - gw.mean(1, keepdims=True) - xh * (gw * xh).mean(1, keepdims=True))
    np.testing.assert_allclose(_np(x.grad), dx, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_np(w.grad), (g * xh).sum(0), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_np(b.grad), g.sum(0), rtol=1e-9, atol=1e-11)


def test_layer_norm_backward_half_and_no_weight(cuda):
    x = ember.tensor(_arr(13, 4, 9)).to(ember.bfloat16)
    g = ember.tensor(_arr(14, 4, 9)).to(ember.bfloat16)
    xs = x.cuda()
    _, mean, rstd = _C._native_layer_norm(xs, (9,), None, None, 1e-5)
    with native(cuda, "layer_norm_backward"):
        dx, dw, db = _C._native_layer_norm_backward(g.cuda(), xs, (9,), mean, rstd, None)
    assert dx.dtype == ember.bfloat16 and dx.device.type == "cuda"
    a, gg = _np(x), _np(g)
    mu = a.mean(1, keepdims=True)
    rs = 1 / np.sqrt(((a - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    xh = (a - mu) * rs
    ref = rs * (gg - gg.mean(1, keepdims=True) - xh * (gg * xh).mean(1, keepdims=True))
    np.testing.assert_allclose(_np(dx), ref, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(_np(db), gg.sum(0), rtol=3e-2, atol=3e-2)


def test_layer_norm_errors_match_cpu(cuda):
    x = ember.ones(2, 3).cuda()
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match="same shape as normalized_shape"):
        F.layer_norm(x, (3,), ember.ones(4).cuda())
    with pytest.raises(NotImplementedError):
        F.layer_norm(ember.ones(2, 3, dtype=ember.int64).cuda(), (3,))


# ------------------------------------------------------------- cross-entropy

def _xent_ref(x, t, w, reduction, ignore, e):
    """x [N, C] float64, t [N]; torch's definition, positions with t == ignore dropped."""
    C = x.shape[1]
    w = np.ones(C) if w is None else w
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    nll = w[tt] * (lse - x[np.arange(len(t)), tt])
    smooth = (w[None, :] * (lse[:, None] - x)).sum(1)
    terms = np.where(keep, (1 - e) * nll + e / C * smooth, 0)
    if reduction == "none":
        return terms
    if reduction == "sum":
        return terms.sum()
    return terms.sum() / np.where(keep, w[tt], 0).sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,smoothing", [(False, 0.0), (True, 0.0), (True, 0.2), (False, 0.1)])
def test_cross_entropy_forward_backward(cuda, reduction, weighted, smoothing):
    a = _arr(15, 6, 11).astype(np.float64) * 2
    t = np.array([0, 3, 10, -100, 5, 3])
    wv = np.abs(_arr(16, 11)).astype(np.float64) + 0.1 if weighted else None
    x = ember.tensor(a).cuda().requires_grad_()
    wt = ember.tensor(wv).cuda() if weighted else None
    with native(cuda, "cross_entropy", "cross_entropy_backward"):
        loss = F.cross_entropy(x, ember.tensor(t).cuda(), weight=wt, reduction=reduction,
                               label_smoothing=smoothing)
        loss.sum().backward()
    ref = _xent_ref(a, t, wv, reduction, -100, smoothing)
    np.testing.assert_allclose(_np(loss), ref, rtol=1e-10, atol=1e-12)
    # gradient by central differences of the NumPy reference
    num = np.zeros_like(a)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            d = np.zeros_like(a)
            d[i, j] = 1e-6
            num[i, j] = (np.sum(_xent_ref(a + d, t, wv, reduction, -100, smoothing)) -
                         np.sum(_xent_ref(a - d, t, wv, reduction, -100, smoothing))) / 2e-6
    np.testing.assert_allclose(_np(x.grad), num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_cross_entropy_spatial_and_half(cuda, dtype):
    a = _arr(17, 2, 5, 3)  # N, C, inner
    t = np.array([[0, 4, 2], [1, 1, 3]])
    x = ember.tensor(a).to(dtype)
    with native(cuda, "cross_entropy"):
        loss = F.cross_entropy(x.cuda(), ember.tensor(t).cuda(), reduction="none")
    assert loss.dtype == dtype and tuple(loss.shape) == (2, 3)
    xa = _np(x).transpose(0, 2, 1).reshape(-1, 5)
    ref = _xent_ref(xa, t.reshape(-1), None, "none", -100, 0.0).reshape(2, 3)
    np.testing.assert_allclose(_np(loss), ref, rtol=TOL[dtype] * 5, atol=TOL[dtype] * 5)


def test_cross_entropy_all_ignored_is_nan(cuda):
    loss = F.cross_entropy(ember.ones(2, 3).cuda(), ember.tensor([-100, -100]).cuda())
    assert np.isnan(loss.item())


def test_cross_entropy_errors_match_cpu(cuda):
    x = ember.ones(3, 4).cuda()
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, ember.tensor([0, 4, 1]).cuda())
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(x, ember.tensor([0, -1, 1]).cuda())
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(x, ember.tensor([0, 1]).cuda())
    with pytest.raises(RuntimeError, match="Long or Byte"):
        F.cross_entropy(x, ember.tensor([0.0, 1.0, 2.0]).cuda())
    with pytest.raises(RuntimeError, match="weight tensor"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]).cuda(), weight=ember.ones(3).cuda())
    with pytest.raises(RuntimeError, match="label_smoothing"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]).cuda(), label_smoothing=1.5)


# ------------------------------------------------------------ fused AdamW

def _adam_ref(p, g, m, v, vmax, step, lr, b1, b2, wd, eps, decoupled, maximize):
    g = -g if maximize else g
    if wd:
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
    m = m + (1 - b1) * (g - m)
    v = b2 * v + (1 - b2) * g * g
    if vmax is not None:
        vmax = np.maximum(vmax, v)
    denom = np.sqrt(vmax if vmax is not None else v) / np.sqrt(1 - b2 ** step) + eps
    return p - lr / (1 - b1 ** step) * m / denom, m, v, vmax


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (True, False), (False, True)])
def test_fused_adam_step(cuda, decoupled, amsgrad, maximize):
    shapes = [(5, 3), (17,), (2, 2, 2)]
    ps = [_arr(20 + i, *s).astype(np.float64) for i, s in enumerate(shapes)]
    gs = [_arr(30 + i, *s).astype(np.float64) for i, s in enumerate(shapes)]
    ms = [_arr(40 + i, *s).astype(np.float64) * 0.1 for i, s in enumerate(shapes)]
    vs = [np.abs(_arr(50 + i, *s)).astype(np.float64) * 0.1 for i, s in enumerate(shapes)]
    steps = [3.0, 1.0, 7.0]
    dev = lambda arrs: [ember.tensor(a).cuda() for a in arrs]  # noqa: E731
    P, G, M, V = dev(ps), dev(gs), dev(ms), dev(vs)
    VM = dev([v * 1.5 for v in vs]) if amsgrad else []
    S = [ember.tensor(s) for s in steps]  # 0-d CPU steps, as the optimizers keep them
    op = _C._fused_adamw_ if decoupled else _C._fused_adam_
    kw = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, maximize=maximize)
    with native(cuda, "adam"):
        op(P, G, M, V, VM, S, **kw)
    for k in range(3):
        rp, rm, rv, rvm = _adam_ref(ps[k], gs[k], ms[k], vs[k], vs[k] * 1.5 if amsgrad else None, steps[k],
                                    0.01, 0.9, 0.99, 0.1, 1e-8, decoupled, maximize)
        np.testing.assert_allclose(_np(P[k]), rp, rtol=1e-12)
        np.testing.assert_allclose(_np(M[k]), rm, rtol=1e-12)
        np.testing.assert_allclose(_np(V[k]), rv, rtol=1e-12)
        if amsgrad:
            np.testing.assert_allclose(_np(VM[k]), rvm, rtol=1e-12)


def test_adamw_optimizer_on_cuda_matches_cpu(cuda):
    w0 = _arr(60, 4, 3)
    res = {}
    for dev in ("cpu", "cuda"):
        w = ember.nn.Parameter(ember.tensor(w0).to(dev))
        opt = ember.optim.AdamW([w], lr=0.05, weight_decay=0.01)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            with native(cuda if dev == "cuda" else "real", "adam"):
                opt.step()
        res[dev] = _np(w)
    np.testing.assert_allclose(res["cuda"], res["cpu"], rtol=1e-6, atol=1e-7)


def test_fused_adam_errors_write_nothing(cuda):
    p, g = ember.ones(3).cuda(), ember.ones(4).cuda()
    m, v = ember.zeros(3).cuda(), ember.zeros(3).cuda()
    with pytest.raises(RuntimeError, match="shape"):
        _C._fused_adamw_([p], [g], [m], [v], [], [ember.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.99,
                         weight_decay=0.0, eps=1e-8, maximize=False)
    np.testing.assert_array_equal(_np(p), np.ones(3))
    with pytest.raises(RuntimeError, match="same length"):
        _C._fused_adamw_([p], [], [m], [v], [], [ember.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.99,
                         weight_decay=0.0, eps=1e-8, maximize=False)


# ---------------------------------------------------------------- embedding

@pytest.mark.parametrize("dtype", [ember.float32, ember.float16])
@pytest.mark.parametrize("idx_dtype", [ember.int64, ember.int32])
def test_embedding_forward(cuda, dtype, idx_dtype):
    wv = _arr(70, 10, 4)
    idx = np.array([[1, 9, 1], [0, 3, 3]])
    w = ember.tensor(wv).to(dtype)
    with native(cuda, "embedding"):
        out = F.embedding(ember.tensor(idx).to(idx_dtype).cuda(), w.cuda())
    assert tuple(out.shape) == (2, 3, 4) and out.dtype == dtype
    np.testing.assert_array_equal(_np(out), _np(w)[idx])


@pytest.mark.parametrize("padding_idx,scale", [(None, False), (3, False), (None, True)])
def test_embedding_backward(cuda, padding_idx, scale):
    wv = _arr(71, 6, 5).astype(np.float64)
    idx = np.array([1, 3, 3, 5, 1, 1])
    g = _arr(72, 6, 5).astype(np.float64)
    w = ember.tensor(wv).cuda().requires_grad_()
    with native(cuda, "embedding", "embedding_backward"):
        F.embedding(ember.tensor(idx).cuda(), w, padding_idx=padding_idx,
                    scale_grad_by_freq=scale).backward(ember.tensor(g).cuda())
    counts = np.bincount(idx, minlength=6)
    ref = np.zeros_like(wv)
    for k, i in enumerate(idx):
        if i != padding_idx:
            ref[i] += g[k] / (counts[i] if scale else 1)
    np.testing.assert_allclose(_np(w.grad), ref, rtol=1e-12)


def test_embedding_errors_match_cpu(cuda):
    w = ember.ones(5, 2).cuda()
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(ember.tensor([1, 5]).cuda(), w)
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(ember.tensor([-1]).cuda(), w)
    with pytest.raises(RuntimeError, match="Long, Int"):
        F.embedding(ember.tensor([1.0]).cuda(), w)
    with pytest.raises(RuntimeError, match="2-D"):
        F.embedding(ember.tensor([1]).cuda(), ember.ones(5).cuda())


def test_fallback_still_taken_without_kernels(cuda):
    """Integer weights have no GPU kernel: the gather falls back to the CPU and is still right."""
    w = ember.arange(10).reshape(5, 2).cuda()
    out = F.embedding(ember.tensor([4, 0]).cuda(), w)
    np.testing.assert_array_equal(out.cpu().numpy(), [[8, 9], [0, 1]])


def test_embedding_backward_twice_raises(cuda):
    w = ember.ones(4, 2).cuda().requires_grad_()
    out = F.embedding(ember.tensor([1, 2]).cuda(), w).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()
