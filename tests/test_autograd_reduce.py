"""Gradients of reductions, scans and selections where gradcheck can't look:
ties, zeros, NaN, norms at 0, dtype=, second derivatives, and the ops that
have no gradient. Hand-computed values always; the same calls against torch
when it is installed. (Gradcheck of the smooth cases: test_autograd_ops.py
with tests/autograd_cases_reduce.py.)"""
import zlib

import numpy as np
import pytest

import ember
from ember.autograd import gradgradcheck

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

INF, NAN = float("inf"), float("nan")
W4 = [1.0, 2.0, 3.0, 4.0]


def _grads(L, f, v):
    x = L.tensor(v, dtype=L.float64, requires_grad=True)
    y = f(L, x)
    y = y[0] if isinstance(y, tuple) else y
    y.backward(L.ones_like(y))
    return None if x.grad is None else x.grad.tolist()


def _w(L, y):
    return y * L.tensor(W4[: y.shape[-1]], dtype=L.float64)


CASES = [  # (id, f(L, x), input, the gradient by hand)
    # ties: amax/amin and the all-reduce max/min/median share evenly
    ("amax ties", lambda L, x: x.amax(1), [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]],
     [[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]]),
    ("amin ties keepdim", lambda L, x: x.amin(0, keepdim=True), [[1.0, 3.0], [1.0, 2.0]], [[0.5, 0.0], [0.5, 1.0]]),
    ("max() ties", lambda L, x: x.max(), [[1.0, 3.0, 3.0], [2.0, 3.0, 0.0]], [[0.0, 1 / 3, 1 / 3], [0.0, 1 / 3, 0.0]]),
    ("min() ties", lambda L, x: x.min(), [2.0, 1.0, 1.0], [0.0, 0.5, 0.5]),
    ("max() NaN", lambda L, x: x.max(), [1.0, NAN, NAN], [0.0, 0.5, 0.5]),
    ("amax NaN", lambda L, x: x.amax(), [1.0, NAN, 2.0], [NAN, NAN, NAN]),
    ("median() ties", lambda L, x: x.median(), [1.0, 2.0, 2.0, 3.0], [0.0, 0.5, 0.5, 0.0]),
    ("nanmedian() NaN", lambda L, x: x.nanmedian(), [NAN, 2.0, 1.0], [0.0, 0.0, 1.0]),
    ("aminmax ties", lambda L, x: (lambda r: r[0] + r[1])(L.aminmax(x)), [1.0, 1.0, 3.0], [0.5, 0.5, 1.0]),
    # with a dim: the chosen index takes it all
    ("max(dim) ties", lambda L, x: x.max(1), [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]],
     [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
    ("min(dim) keepdim", lambda L, x: x.min(0, keepdim=True), [[1.0, 3.0], [0.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]),
    ("median(dim)", lambda L, x: x.median(0), [1.0, 2.0, 2.0, 3.0], [0.0, 1.0, 0.0, 0.0]),
    ("nanmedian(dim)", lambda L, x: x.nanmedian(-1), [[NAN, 3.0, 1.0]], [[0.0, 0.0, 1.0]]),
    ("mode", lambda L, x: x.mode(), [1.0, 2.0, 1.0, 2.0], [0.0, 0.0, 1.0, 0.0]),
    ("topk ties", lambda L, x: x.topk(1), [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]),
    ("sort ties", lambda L, x: _w(L, x.sort()[0]), [2.0, 1.0, 2.0, 0.0], [3.0, 2.0, 4.0, 1.0]),
    ("sort descending", lambda L, x: _w(L, x.sort(descending=True)[0]), [2.0, 1.0, 3.0], [2.0, 3.0, 1.0]),
    ("msort", lambda L, x: _w(L, x.msort().t()).t(), [[2.0], [1.0], [3.0]], [[2.0], [1.0], [3.0]]),
    ("cummax ties", lambda L, x: x.cummax(0), [1.0, 3.0, 3.0, 2.0], [1.0, 1.0, 2.0, 0.0]),
    ("cummin", lambda L, x: x.cummin(0), [3.0, 1.0, 2.0], [1.0, 2.0, 0.0]),
    ("max(a, b) ties", lambda L, x: L.max(x, L.tensor([1.0, 5.0], dtype=L.float64)), [1.0, 2.0], [0.5, 0.0]),
    # zeros: prod and cumprod are exact
    ("prod one zero", lambda L, x: x.prod(), [2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
    ("prod two zeros", lambda L, x: x.prod(), [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
    ("prod(dim) zeros", lambda L, x: x.prod(1), [[2.0, 0.0, 3.0], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]],
     [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]]),
    ("cumprod one zero", lambda L, x: x.cumprod(0), [2.0, 0.0, 3.0, 4.0], [1.0, 32.0, 0.0, 0.0]),
    ("cumprod two zeros", lambda L, x: x.cumprod(0), [2.0, 0.0, 3.0, 0.0, 5.0], [1.0, 8.0, 0.0, 0.0, 0.0]),
    ("cumprod(dim 0) zeros", lambda L, x: x.cumprod(0), [[0.0, 2.0], [3.0, 0.0]], [[4.0, 1.0], [0.0, 2.0]]),
    ("cumprod weighted zero", lambda L, x: _w(L, x.cumprod(0)), [2.0, 0.0, 3.0], [1.0, 2.0 * 2 + 3 * 2 * 3, 0.0]),
    # norms: 0 where the norm (or the element) is 0
    ("norm at 0", lambda L, x: x.norm(), [0.0, 0.0], [0.0, 0.0]),
    ("norm p=1", lambda L, x: x.norm(1), [0.0, 2.0, -1.0], [0.0, 1.0, -1.0]),
    ("norm p=inf ties", lambda L, x: x.norm(INF), [0.0, 2.0, -2.0], [0.0, 0.5, -0.5]),
    ("norm p=-inf", lambda L, x: x.norm(-INF), [3.0, -1.0, 2.0], [0.0, -1.0, 0.0]),
    ("norm p=0.5 at 0", lambda L, x: x.norm(0.5), [0.0, 1.0, 4.0], [0.0, 3.0, 1.5]),
    ("norm p=3 at 0", lambda L, x: x.norm(3), [0.0, 0.0], [0.0, 0.0]),
    ("norm p=0: no gradient", lambda L, x: x.norm(0), [0.0, 3.0], None),
    ("vector_norm dim at 0", lambda L, x: L.linalg.vector_norm(x, 2, 1), [[0.0, 0.0], [3.0, 4.0]],
     [[0.0, 0.0], [0.6, 0.8]]),
    ("std of a constant", lambda L, x: x.std(), [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),
    ("var by hand", lambda L, x: x.var(), [1.0, 2.0, 6.0], [-2.0, -1.0, 3.0]),
    ("var_mean both", lambda L, x: (lambda r: r[0] + r[1])(L.var_mean(x, correction=0)), [1.0, 3.0],
     [-0.5, 1.5]),
    # NaN
    ("nansum NaN", lambda L, x: x.nansum(), [1.0, NAN, 2.0], [1.0, 0.0, 1.0]),
    ("nanmean NaN", lambda L, x: x.nanmean(), [1.0, NAN, 2.0], [0.5, 0.0, 0.5]),
    ("logsumexp all -inf", lambda L, x: x.logsumexp(0), [-INF, -INF], [NAN, NAN]),
    ("logsumexp", lambda L, x: x.logsumexp(0), [0.0, np.log(3.0)], [0.25, 0.75]),
    ("cumsum", lambda L, x: _w(L, x.cumsum(0)), [5.0, 6.0, 7.0], [6.0, 5.0, 3.0]),
    ("mean", lambda L, x: x.mean(1), [[1.0, 2.0, 3.0, 4.0]], [[0.25] * 4]),
]


def _same(a, b):
    if a is None or b is None:
        assert a is None and b is None, (a, b)
        return
    np.testing.assert_allclose(np.array(a, np.float64), np.array(b, np.float64), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name,f,v,want", [pytest.param(*c, id=c[0]) for c in CASES])
def test_by_hand(name, f, v, want):
    _same(_grads(ember, f, v), want)


@needs_torch
@pytest.mark.parametrize("name,f,v,want", [pytest.param(*c, id=c[0]) for c in CASES])
def test_matches_torch(name, f, v, want):
    _same(_grads(ember, f, v), _grads(_torch, f, v))


def test_kthvalue_ties_share_one_index():
    """kthvalue among ties: one of the tied elements gets it all (torch and ember may pick different
    ones: which index the forward returns for ties is unspecified)."""
    g = _grads(ember, lambda L, x: x.kthvalue(2), [1.0, 1.0, 1.0])
    assert sorted(g) == [0.0, 0.0, 1.0]
    assert _grads(ember, lambda L, x: x.kthvalue(2), [3.0, 1.0, 2.0]) == [0.0, 0.0, 1.0]


# ---------------------------------------------------------------------------
# dtype=: the gradient comes back in the input's dtype
DTYPE_CALLS = [
    ("sum", lambda L, x: x.sum(dtype=L.float64)),
    ("sum dim", lambda L, x: x.sum(1, dtype=L.float64)),
    ("mean", lambda L, x: x.mean(dtype=L.float64)),
    ("prod", lambda L, x: x.prod(dtype=L.float64)),
    ("cumsum", lambda L, x: x.cumsum(0, dtype=L.float64)),
    ("cumprod", lambda L, x: x.cumprod(1, dtype=L.float64)),
    ("norm", lambda L, x: x.norm(dtype=L.float64)),
    ("vector_norm", lambda L, x: L.linalg.vector_norm(x, 3, dtype=L.float64)),
    ("nansum", lambda L, x: x.nansum(dtype=L.float64)),
]
F32_VALUES = [[0.5, 1.25, -2.0], [1.5, 0.75, 1.0]]


def _f32_grad(L, f):
    x = L.tensor(F32_VALUES, dtype=L.float32, requires_grad=True)
    y = f(L, x)
    assert y.dtype == L.float64
    y.backward(L.ones_like(y))
    return x.grad


@pytest.mark.parametrize("name,f", DTYPE_CALLS, ids=[c[0] for c in DTYPE_CALLS])
def test_dtype_gradient_in_input_dtype(name, f):
    g = _f32_grad(ember, f)
    assert g.dtype == ember.float32 and g.shape == (2, 3)


def test_sum_dtype_by_hand():
    x = ember.tensor([1.0, 2.0], dtype=ember.float32, requires_grad=True)
    (x.sum(dtype=ember.float64) * 3).backward()
    assert x.grad.dtype == ember.float32 and x.grad.tolist() == [3.0, 3.0]


@needs_torch
@pytest.mark.parametrize("name,f", DTYPE_CALLS, ids=[c[0] for c in DTYPE_CALLS])
def test_dtype_matches_torch(name, f):
    got, want = _f32_grad(ember, f), _f32_grad(_torch, f)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-7, atol=0)


# ---------------------------------------------------------------------------
# names that depend on the call
NAMES = [
    ("sum()", lambda L, x: x.sum(), "SumBackward0"),
    ("sum(0)", lambda L, x: x.sum(0), "SumBackward1"),
    ("mean()", lambda L, x: x.mean(), "MeanBackward0"),
    ("mean(dims)", lambda L, x: x.mean((0, 1)), "MeanBackward1"),
    ("prod()", lambda L, x: x.prod(), "ProdBackward0"),
    ("prod(1)", lambda L, x: x.prod(1), "ProdBackward1"),
    ("max()", lambda L, x: x.max(), "MaxBackward1"),
    ("max(0)", lambda L, x: x.max(0)[0], "MaxBackward0"),
    ("max(a, b)", lambda L, x: L.max(x, x * 2), "MaximumBackward0"),
    ("min(other=)", lambda L, x: L.min(x, other=x * 2), "MinimumBackward0"),
    ("median()", lambda L, x: x.median(), "MedianBackward0"),
    ("median(0)", lambda L, x: x.median(0)[0], "MedianBackward1"),
    ("nanmedian(0)", lambda L, x: x.nanmedian(0)[0], "NanmedianBackward1"),
    ("sort()", lambda L, x: x.sort()[0], "SortBackward0"),
    ("sort(stable=True)", lambda L, x: x.sort(stable=True)[0], "SortBackward1"),
    ("msort", lambda L, x: x.msort(), "SortBackward0"),
    ("nanmean", lambda L, x: x.nanmean(), "DivBackward0"),
    ("norm", lambda L, x: x.norm(), "LinalgVectorNormBackward0"),
    ("var_mean", lambda L, x: L.var_mean(x)[1], "VarMeanBackward0"),
    ("aminmax", lambda L, x: L.aminmax(x)[0], "AminmaxBackward0"),
]


@pytest.mark.parametrize("name,f,want", NAMES, ids=[c[0] for c in NAMES])
def test_node_names(name, f, want):
    x = ember.ones(2, 3, dtype=ember.float64).requires_grad_()
    assert type(f(ember, x).grad_fn).__name__ == want
    if _torch is not None:
        t = _torch.ones(2, 3, dtype=_torch.float64).requires_grad_()
        assert type(f(_torch, t).grad_fn).__name__ == want


# ---------------------------------------------------------------------------
# no gradient: the outputs stay out of the graph, as torch's
NOT_DIFFERENTIABLE = [
    ("argmax", lambda L, x: x.argmax()),
    ("argmin dim", lambda L, x: x.argmin(1)),
    ("argsort", lambda L, x: x.argsort()),
    ("all", lambda L, x: x.all()),
    ("any dim", lambda L, x: x.any(0)),
    ("count_nonzero", lambda L, x: L.count_nonzero(x)),
    ("searchsorted", lambda L, x: L.searchsorted(L.tensor([0.0, 1.0, 2.0], dtype=L.float64), x)),
    ("bucketize", lambda L, x: L.bucketize(x, L.tensor([0.0, 1.0, 2.0], dtype=L.float64))),
    ("max indices", lambda L, x: x.max(1)[1]),
    ("sort indices", lambda L, x: x.sort()[1]),
    ("unique inverse", lambda L, x: L.unique(x, return_inverse=True)[1]),
    ("unique_consecutive counts", lambda L, x: L.unique_consecutive(x, return_counts=True)[1]),
]


@pytest.mark.parametrize("name,f", NOT_DIFFERENTIABLE, ids=[c[0] for c in NOT_DIFFERENTIABLE])
def test_not_differentiable(name, f):
    for L in (ember,) + ((_torch,) if _torch is not None else ()):
        x = L.tensor([[0.5, 1.5, 0.0], [2.5, 1.5, 0.7]], dtype=L.float64, requires_grad=True)
        y = f(L, x)
        assert not y.requires_grad and y.grad_fn is None, L.__name__


def test_integer_input_is_not_differentiable():
    y = ember.tensor([1, 2, 3]).sum()
    assert not y.requires_grad


# ---------------------------------------------------------------------------
# second derivatives
def test_create_graph_sum_by_hand():
    """d/dx sum(x) = 1 (a constant: no graph); d/dx sum(x*x) = 2x, d2 = 2."""
    xv = [0.5, -1.5, 2.0]
    x = ember.tensor(xv, dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(x.sum(), x, create_graph=True)
    assert g.tolist() == [1.0, 1.0, 1.0] and not g.requires_grad
    (g,) = ember.autograd.grad((x * x).sum(), x, create_graph=True)
    assert g.tolist() == [1.0, -3.0, 4.0] and g.requires_grad
    (h,) = ember.autograd.grad(g.sum(), x)
    assert h.tolist() == [2.0, 2.0, 2.0]


def test_create_graph_var_by_hand():
    """var (correction 0) of n values: d/dx_i = 2 (x_i - m) / n; d2/dx_i dx_j = 2 (delta_ij - 1/n) / n."""
    x = ember.tensor([1.0, 2.0, 6.0], dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(x.var(correction=0), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 2 * (np.array([1.0, 2.0, 6.0]) - 3.0) / 3, rtol=1e-14)
    (h,) = ember.autograd.grad(g[0], x)
    np.testing.assert_allclose(h.numpy(), [2 * (1 - 1 / 3) / 3, -2 / 9, -2 / 9], rtol=1e-14)


def _rand(key, shape=(2, 3), lo=0.5, hi=2.0):
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return ember.from_numpy(rng.uniform(lo, hi, shape)).requires_grad_()


def test_gradgradcheck_prod_with_zeros():
    """One, two and three zeros in a slice: the first derivative is exact, so is the second."""
    def t(v):
        return ember.tensor(v, dtype=ember.float64, requires_grad=True)
    assert gradgradcheck(lambda x: x.prod(1), (t([[0.5, 0.0, 1.5], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]),))
    assert gradgradcheck(lambda x: x.prod(0, keepdim=True), (t([[0.5, 0.0], [0.0, 0.0], [1.5, 2.0]]),))
    assert gradgradcheck(lambda x: x.prod(), (t([0.5, 0.0, 1.5]),))
    assert gradgradcheck(lambda x: x.prod(), (t([0.5, 0.0, 0.0]),))


def _has_formulas(*ops):
    rows = ember._C._differentiable_ops()
    return all(o in rows for o in ops)


# first derivatives that run other areas' ops (scatter for the selections,
# flip for the scans): their second derivatives need those ops' formulas
needs_scatter = pytest.mark.skipif(not _has_formulas("scatter"), reason="scatter has no backward formula yet")
needs_scatter_add = pytest.mark.skipif(not _has_formulas("scatter_add"),
                                       reason="scatter_add has no backward formula yet")
needs_flip = pytest.mark.skipif(not _has_formulas("flip"), reason="flip has no backward formula yet")

GG_SELECT = [
    ("sort", lambda a: (a * a).sort(1)[0]),
    ("sort dim 0 descending", lambda a: (a * a).sort(0, descending=True)[0]),
    ("topk", lambda a: (a * a).topk(2)[0]),
    ("kthvalue", lambda a: (a * a).kthvalue(2, 1)[0]),
    ("max dim", lambda a: (a * a).max(1)[0]),
    ("median dim", lambda a: (a * a).median(0)[0]),
    ("msort", lambda a: (a * a).msort()),
]


@needs_scatter
@pytest.mark.parametrize("name,fn", GG_SELECT, ids=[g[0] for g in GG_SELECT])
def test_gradgradcheck_selections(name, fn):
    assert gradgradcheck(fn, (_rand(name),))


@needs_scatter_add
def test_gradgradcheck_cummax():
    assert gradgradcheck(lambda a: (a * a).cummax(1)[0], (_rand("cummax"),))


@needs_flip
@pytest.mark.parametrize("name,fn", [("cumsum", lambda a: (a * a).cumsum(1)),
                                     ("cumprod", lambda a: a.cumprod(1)),
                                     ("cumprod dim 0", lambda a: (a * a).cumprod(0))])
def test_gradgradcheck_scans(name, fn):
    assert gradgradcheck(fn, (_rand(name),))


@needs_flip
def test_gradgradcheck_cumprod_with_zeros():
    x = ember.tensor([[0.5, 0.0, 1.5, 2.0], [0.0, 1.2, 0.0, 2.0]], dtype=ember.float64, requires_grad=True)
    assert gradgradcheck(lambda x: x.cumprod(1), (x,))


# ---------------------------------------------------------------------------
# empty inputs: a gradient of the input's (empty) shape
EMPTY = [
    ("sum(0)", lambda x: x.sum(0), "SumBackward1"), ("sum()", lambda x: x.sum(), "SumBackward0"),
    ("sum(1, keepdim)", lambda x: x.sum(1, keepdim=True), "SumBackward1"),
    ("mean(1)", lambda x: x.mean(1), "MeanBackward1"), ("prod(0)", lambda x: x.prod(0), "ProdBackward1"),
    ("norm()", lambda x: x.norm(), "LinalgVectorNormBackward0"),
    ("norm(dim=0)", lambda x: x.norm(dim=0), "LinalgVectorNormBackward0"),
    ("logsumexp(0)", lambda x: x.logsumexp(0), "LogsumexpBackward0"),
    ("cumsum(0)", lambda x: x.cumsum(0), "CumsumBackward0"), ("cumprod(1)", lambda x: x.cumprod(1), "CumprodBackward0"),
    ("sort(0)", lambda x: x.sort(0)[0], "SortBackward0"), ("amax(1)", lambda x: x.amax(1), "AmaxBackward0"),
    ("max(1)", lambda x: x.max(1)[0], "MaxBackward0"), ("median(1)", lambda x: x.median(1)[0], "MedianBackward1"),
    ("cummax(1)", lambda x: x.cummax(1)[0], "CummaxBackward0"), ("topk(0, 0)", lambda x: x.topk(0, 0)[0], "TopkBackward0"),
]


@pytest.mark.parametrize("name,f,node", EMPTY, ids=[c[0] for c in EMPTY])
def test_empty_input(name, f, node):
    for L in (ember,) + ((_torch,) if _torch is not None else ()):
        x = L.zeros(0, 3, dtype=L.float64).requires_grad_()
        y = f(x)
        assert type(y.grad_fn).__name__ == node
        y.backward(L.ones_like(y))
        assert tuple(x.grad.shape) == (0, 3)
