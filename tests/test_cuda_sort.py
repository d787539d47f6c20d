"""Sorting, selection, scans and searches on 'cuda' through their native
paths (Note [CUDA sort] in csrc/cuda/sort.h): sort / argsort / msort / topk /
kthvalue / median / nanmedian / mode / cumsum / cumprod / cummax / cummin /
searchsorted / bucketize. On a real GPU they run ember._cuda's kernels; on a
machine without one, Note [fake CUDA], whose entries run the kernels' own
per-row logic (csrc/cuda/sort_logic.h) on host memory. Each result is
compared with NumPy where NumPy has the op (stable sorts, cumsum, searchsorted
...) and bit for bit with ember's CPU result (the CPU ops are checked against
NumPy and PyTorch in test_ops.py), and `_C._cuda_fallback_counts` proves
that no call took Note [CUDA fallback]."""

import numpy as np
import pytest

import ember
from cuda_common import native

DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64, ember.int32, ember.uint8,
          ember.bool]
FLOATS = DTYPES[:4]
NP = {ember.float32: np.float32, ember.float64: np.float64, ember.float16: np.float16, ember.int64: np.int64,
      ember.int32: np.int32, ember.uint8: np.uint8, ember.bool: np.bool_}


def data(seed, shape, dtype, nans=True):
    """Values with many ties, and for floats NaN, +-0.0 and +-inf."""
    rng = np.random.default_rng(seed)
    if dtype == ember.bool:
        return ember.tensor(rng.integers(0, 2, shape).astype(np.bool_))
    if dtype == ember.uint8:
        return ember.tensor(rng.integers(0, 6, shape).astype(np.uint8))
    if dtype in (ember.int64, ember.int32):
        return ember.tensor(rng.integers(-4, 4, shape).astype(NP[dtype]))
    a = rng.integers(-3, 4, shape).astype(np.float64) * 0.5
    flat = a.reshape(-1)
    if flat.size >= 8:
        specials = [-0.0, 0.0, np.inf, -np.inf] + ([np.nan, np.nan] if nans else [])
        pos = rng.choice(flat.size, len(specials), replace=False)
        flat[pos] = specials
    return ember.tensor(a).to(dtype)


def host(t):
    """A result's host array (bit-faithful: floats as float64 keep NaN/-0.0/inf)."""
    assert t.device.type == "cuda", f"result on {t.device}"
    c = t.cpu()
    return c.float().numpy().astype(np.float64) if c.dtype == ember.bfloat16 else c.numpy()


def same(g, c):
    """GPU result g equals CPU result c exactly (values, NaNs, signs of zeros, dtype, shape)."""
    if isinstance(c, (tuple, list)):
        assert isinstance(g, (tuple, list)) and len(g) == len(c)
        for x, y in zip(g, c):
            same(x, y)
        return
    assert g.dtype == c.dtype and tuple(g.shape) == tuple(c.shape), (g.dtype, c.dtype, g.shape, c.shape)
    a = host(g)
    b = c.float().numpy().astype(np.float64) if c.dtype == ember.bfloat16 else c.numpy()
    np.testing.assert_array_equal(a, b)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))




def layouts(x):
    """x on the GPU as contiguous, transposed and strided (every other element) views."""
    yield "contiguous", x.cuda(), x
    if x.ndim >= 2:
        yield "T", x.transpose(0, -1).contiguous().cuda().transpose(0, -1), x
        wide = ember.cat([x, x], dim=-1)
        yield "slice", wide.cuda()[..., ::2], wide[..., ::2]


# ----------------------------------------------------------------- sort

@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_argsort_msort(cuda, dtype):
    for shape in [(9,), (4, 11), (3, 5, 70)]:
        x = data(1, shape, dtype)
        for name, xg, xc in layouts(x):
            for dim in range(-x.ndim, x.ndim):
                for desc in (False, True):
                    with native("sort", "argsort"):
                        same(ember.sort(xg, dim, desc), ember.sort(xc, dim, desc))
                        same(xg.sort(dim=dim, descending=desc, stable=True),
                             xc.sort(dim=dim, descending=desc, stable=True))
                        same(ember.argsort(xg, dim, desc), ember.argsort(xc, dim, desc))
            with native("msort"):
                same(ember.msort(xg), ember.msort(xc))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int64, ember.int32,
                                   ember.uint8, ember.bool])
def test_sort_matches_numpy_stable(cuda, dtype):
    x = data(2, (6, 40), dtype)
    a = x.numpy()
    with native("sort", "argsort"):
        v, i = ember.sort(x.cuda(), dim=1, stable=True)
        order = np.argsort(a, axis=1, kind="stable")
        np.testing.assert_array_equal(host(i), order)
        np.testing.assert_array_equal(host(v).astype(np.float64), np.take_along_axis(a, order, 1).astype(np.float64))
        # descending, stable: numpy's stable sort of the negated order keys (NaN first, ties by index)
        i = host(ember.argsort(x.cuda(), dim=1, descending=True, stable=True))
        if dtype.is_floating_point:
            # rows: NaNs first in index order, then the rest by descending value, ties by index
            expect = []
            for r in range(a.shape[0]):
                isn = np.isnan(a[r])
                rest = np.nonzero(~isn)[0]
                rest = rest[np.argsort(-a[r][rest].astype(np.float64), kind="stable")]
                expect.append(np.concatenate([np.nonzero(isn)[0], rest]))
            np.testing.assert_array_equal(i, np.array(expect))
        else:
            np.testing.assert_array_equal(i, np.argsort(-a.astype(np.int64), axis=1, kind="stable"))


def test_sort_zero_signs_and_nan_order(cuda):
    x = ember.tensor([0.0, -0.0, float("nan"), 1.0, -0.0, float("-inf"), float("nan"), 0.0])
    with native("sort"):
        v, i = ember.sort(x.cuda(), stable=True)
        assert host(i).tolist() == [5, 0, 1, 4, 7, 3, 2, 6]
        assert np.signbit(host(v)).tolist() == [True, False, True, True, False, False, False, False]
        v, i = ember.sort(x.cuda(), descending=True, stable=True)
        assert host(i).tolist() == [2, 6, 3, 0, 1, 4, 7, 5]


def test_sort_empty_and_0d(cuda):
    for x in [ember.tensor(3.5), ember.zeros(0), ember.zeros(3, 0), ember.zeros(0, 4)]:
        for dim in ([0] if x.ndim == 0 else range(x.ndim)):
            with native("sort", "argsort"):
                same(ember.sort(x.cuda(), dim), ember.sort(x, dim))
                same(ember.argsort(x.cuda(), dim, True), ember.argsort(x, dim, True))


def test_sort_out(cuda):
    x = data(3, (4, 9), ember.float32)
    v, i = ember.empty(0, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native("sort"):
        r = ember.sort(x.cuda(), 0, True, out=(v, i))
    assert r[0] is v and r[1] is i and tuple(v.shape) == (4, 9)
    same((v, i), ember.sort(x, 0, True))
    with pytest.raises(RuntimeError, match="dtype"):
        ember.sort(x.cuda(), out=(ember.empty(0, device="cuda"), ember.empty(0, device="cuda")))
    m = ember.empty(0, device="cuda")
    with native("msort"):
        ember.msort(x.cuda(), out=m)
    same(m, ember.msort(x))


# ----------------------------------------------------------------- topk

@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != ember.bool])
def test_topk(cuda, dtype):
    x = data(4, (5, 37), dtype)
    for name, xg, xc in layouts(x):
        for dim in (0, 1, -1):
            n = x.shape[dim]
            for k in sorted({0, 1, 3, n}):
                for largest in (True, False):
                    with native("topk"):
                        same(ember.topk(xg, k, dim, largest), ember.topk(xc, k, dim, largest))
    with native("topk"):
        same(ember.topk(ember.tensor(2.0).cuda(), 1), ember.topk(ember.tensor(2.0), 1))


def test_topk_matches_numpy_and_errors(cuda):
    a = np.random.default_rng(5).permutation(50).astype(np.float32).reshape(5, 10)
    with native("topk"):
        v, i = ember.topk(ember.tensor(a).cuda(), 3)
    np.testing.assert_array_equal(host(i), np.argsort(-a, axis=1, kind="stable")[:, :3])
    np.testing.assert_array_equal(host(v), -np.sort(-a, axis=1)[:, :3])
    with pytest.raises(RuntimeError, match="k out of range"):
        ember.topk(ember.tensor(a).cuda(), 11)
    with pytest.raises(NotImplementedError):
        ember.topk(ember.tensor([True, False]).cuda(), 1)
    v, i = ember.empty(0, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native("topk"):
        ember.topk(ember.tensor(a).cuda(), 2, 0, False, out=(v, i))
    same((v, i), ember.topk(ember.tensor(a), 2, 0, False))


# ------------------------------------------------------------- kthvalue

@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != ember.bool])
def test_kthvalue(cuda, dtype):
    x = data(6, (4, 23), dtype)
    for name, xg, xc in layouts(x):
        for dim in (0, 1):
            n = x.shape[dim]
            for k in sorted({1, 2, n // 2, n}):
                for keepdim in (False, True):
                    with native("kthvalue"):
                        same(ember.kthvalue(xg, k, dim, keepdim), ember.kthvalue(xc, k, dim, keepdim))


def test_kthvalue_ties_errors_out(cuda):
    x = ember.tensor([[3, 1, 2, 1, 3, 1, 2, 2, 1, 3]] * 2)
    for k in range(1, 11):
        with native("kthvalue"):
            same(ember.kthvalue(x.cuda(), k), ember.kthvalue(x, k))
    with pytest.raises(RuntimeError, match="k out of range"):
        ember.kthvalue(x.cuda(), 11)
    with pytest.raises(IndexError, match="non-zero size"):
        ember.kthvalue(ember.zeros(2, 0).cuda(), 1)
    v, i = ember.empty(0, dtype=ember.int64, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native("kthvalue"):
        r = ember.kthvalue(x.cuda(), 4, 1, True, out=(v, i))
    assert r[0] is v
    same((v, i), ember.kthvalue(x, 4, 1, True))
    with native("kthvalue"):
        same(ember.kthvalue(ember.tensor(7.0).cuda(), 1), ember.kthvalue(ember.tensor(7.0), 1))


# ------------------------------------------------- median / nanmedian / mode

@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != ember.bool])
@pytest.mark.parametrize("op", ["median", "nanmedian", "mode"])
def test_median_mode(cuda, dtype, op):
    f = getattr(ember, op)
    for shape in [(7,), (4, 9), (3, 4, 5)]:
        x = data(7, shape, dtype)
        for name, xg, xc in layouts(x):
            for dim in range(x.ndim):
                for keepdim in (False, True):
                    with native(op):
                        same(f(xg, dim, keepdim), f(xc, dim, keepdim))
            if op != "mode":
                with native(op):
                    same(f(xg), f(xc))


def test_median_nan_rules_and_numpy(cuda):
    a = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, np.nan, np.nan], [4.0, 1.0, 1.0, 9.0]], np.float32)
    x = ember.tensor(a).cuda()
    with native("median", "nanmedian", "mode"):
        v, i = ember.median(x, 1)
        assert np.isnan(host(v)[:2]).all() and host(i).tolist()[:2] == [1, 0]
        v, i = ember.nanmedian(x, 1)
        assert host(v)[0] == 2.0 and host(i)[0] == 3 and host(i)[1] == 0
        # lower median as numpy's percentile with method='lower' on the non-NaNs
        assert host(v)[2] == np.percentile(a[2], 50, method="lower")
        v, i = ember.mode(ember.tensor([[2, 1, 2, 1, 3]]).cuda(), 1)
        assert host(v).tolist() == [1] and host(i).tolist() == [3]  # the smallest of the most frequent, last index
        assert np.isnan(host(ember.median(x)))
        assert host(ember.nanmedian(x)) == np.percentile(a[~np.isnan(a)], 50, method="lower")


def test_median_empty_and_errors(cuda):
    with native("median"):
        r = ember.median(ember.zeros(0).cuda())
    assert r.device.type == "cuda" and np.isnan(host(r))
    with pytest.raises(IndexError, match="non-zero size"):
        ember.median(ember.zeros(3, 0).cuda(), 1)
    with pytest.raises(NotImplementedError):
        ember.median(ember.tensor([True]).cuda(), 0)
    x = data(8, (3, 6), ember.float32)
    v, i = ember.empty(0, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native("median"):
        ember.median(x.cuda(), 1, out=(v, i))
    same((v, i), ember.median(x, 1))
    v, i = ember.empty(0, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native("mode"):
        ember.mode(x.cuda(), 0, True, out=(v, i))
    same((v, i), ember.mode(x, 0, True))


# ----------------------------------------------------------------- scans

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumsum_cumprod(cuda, dtype, op):
    f = getattr(ember, op)
    for shape in [(), (0,), (9,), (4, 7), (3, 130), (2, 3, 100)]:
        x = data(9, shape, dtype, nans=False)
        if op == "cumprod" and dtype.is_floating_point:
            x = x * 0.5 + 1.0 if dtype != ember.float16 else x
        for name, xg, xc in layouts(x):
            for dim in ([0] if x.ndim == 0 else range(-x.ndim, x.ndim)):
                with native(op):
                    g, c = f(xg, dim), f(xc, dim)
                assert g.dtype == c.dtype
                if dtype.is_floating_point:  # the GPU may add in another order
                    np.testing.assert_allclose(host(g).astype(np.float64), c.to(ember.float64).numpy(),
                                               rtol={ember.float32: 1e-6, ember.float64: 1e-13}.get(dtype, 1e-2),
                                               atol=1e-6)
                else:
                    same(g, c)
    if dtype not in (ember.bfloat16, ember.bool):
        a = data(10, (4, 9), dtype, nans=False).numpy()
        with native(op):
            g = f(ember.tensor(a).cuda(), 1)
        ref = getattr(np, op)(a.astype(np.float64 if a.dtype.kind == "f" else np.int64), axis=1)
        np.testing.assert_allclose(host(g).astype(np.float64), ref, rtol=1e-2 if dtype == ember.float16 else 1e-6)


def test_cumsum_dtypes_out_inplace(cuda):
    x = data(11, (5, 6), ember.int32)
    with native("cumsum", "cumprod"):
        assert ember.cumsum(x.cuda(), 0).dtype == ember.int64
        same(ember.cumsum(x.cuda(), 1, dtype=ember.float64), ember.cumsum(x, 1, dtype=ember.float64))
        same(ember.cumsum(ember.tensor([True, False, True]).cuda(), 0), ember.tensor([1, 1, 2]))
        o = ember.empty(0, dtype=ember.int64, device="cuda")
        r = ember.cumsum(x.cuda(), 1, out=o)
        assert r is o
        same(o, ember.cumsum(x, 1))
        y = x.cuda().t()  # in place on a non-contiguous tensor
        y.cumsum_(0)
        same(y, x.t().clone().cumsum_(0))
        z = x.cuda()
        z.cumprod_(1)
        same(z, x.clone().cumprod_(1))
    with pytest.raises(RuntimeError, match="dtype"):
        ember.cumsum(x.cuda(), 1, dtype=ember.float32, out=ember.empty(1, dtype=ember.int64, device="cuda"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(cuda, dtype, op):
    f = getattr(ember, op)
    for shape in [(), (0,), (11,), (4, 7), (3, 130)]:
        x = data(12, shape, dtype)
        for name, xg, xc in layouts(x):
            for dim in ([0] if x.ndim == 0 else range(x.ndim)):
                with native(op):
                    same(f(xg, dim), f(xc, dim))
    x = data(13, (3, 8), dtype)
    v, i = ember.empty(0, dtype=dtype, device="cuda"), ember.empty(0, dtype=ember.int64, device="cuda")
    with native(op):
        r = f(x.cuda(), 1, out=(v, i))
    assert r[0] is v and r[1] is i
    same((v, i), f(x, 1))


def test_cummax_matches_numpy(cuda):
    a = np.random.default_rng(14).standard_normal((4, 50)).astype(np.float32)
    with native("cummax", "cummin"):
        v, _ = ember.cummax(ember.tensor(a).cuda(), 1)
        np.testing.assert_array_equal(host(v), np.maximum.accumulate(a, axis=1))
        v, _ = ember.cummin(ember.tensor(a).cuda(), 0)
        np.testing.assert_array_equal(host(v), np.minimum.accumulate(a, axis=0))


# ---------------------------------------------------------------- search

@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
                                   ember.int32, ember.uint8])
def test_searchsorted_bucketize(cuda, dtype):
    bd = ember.sort(data(15, (12,), dtype, nans=False))[0]
    vals = data(16, (3, 5), dtype, nans=False)
    for right in (False, True):
        for i32 in (False, True):
            with native("searchsorted", "bucketize"):
                same(ember.searchsorted(bd.cuda(), vals.cuda(), right=right, out_int32=i32),
                     ember.searchsorted(bd, vals, right=right, out_int32=i32))
                same(ember.bucketize(vals.cuda(), bd.cuda(), right=right, out_int32=i32),
                     ember.bucketize(vals, bd, right=right, out_int32=i32))
                same(ember.searchsorted(bd.cuda(), vals.cuda(), side="right" if right else "left"),
                     ember.searchsorted(bd, vals, side="right" if right else "left"))
    if dtype not in (ember.bfloat16, ember.float16):
        b, v = bd.numpy(), vals.numpy()
        with native("searchsorted"):
            np.testing.assert_array_equal(host(ember.searchsorted(bd.cuda(), vals.cuda(), right=True)),
                                          np.searchsorted(b, v, side="right"))
            np.testing.assert_array_equal(host(ember.searchsorted(bd.cuda(), vals.cuda())), np.searchsorted(b, v))


def test_searchsorted_rows_sorter_scalar_nan(cuda):
    rng = np.random.default_rng(17)
    b = np.sort(rng.standard_normal((3, 4, 10)), axis=-1)
    v = rng.standard_normal((3, 4, 6))
    v[0, 0, :2] = [np.nan, b[0, 0, 3]]
    bt, vt = ember.tensor(b), ember.tensor(v)
    with native("searchsorted"):
        same(ember.searchsorted(bt.cuda(), vt.cuda()), ember.searchsorted(bt, vt))
        same(ember.searchsorted(bt.cuda(), vt.cuda(), right=True), ember.searchsorted(bt, vt, right=True))
        # unsorted boundaries with a sorter
        perm = rng.permutation(10)
        ub = ember.tensor(b[..., perm])
        srt = ember.argsort(ub, -1)
        same(ember.searchsorted(ub.cuda(), vt.cuda(), sorter=srt.cuda()), ember.searchsorted(ub, vt, sorter=srt))
        # non-contiguous operands, a Python number, a 0-d tensor
        same(ember.searchsorted(bt.cuda()[0, 0], vt.cuda()[..., ::2]), ember.searchsorted(bt[0, 0], vt[..., ::2]))
        same(ember.searchsorted(bt.cuda()[0, 0], 0.25), ember.searchsorted(bt[0, 0], 0.25))
        same(ember.searchsorted(bt.cuda()[0, 0], ember.tensor(0.25)), ember.searchsorted(bt[0, 0], 0.25))
        same(ember.searchsorted(bt.cuda()[0, 0], ember.zeros(0).cuda()), ember.searchsorted(bt[0, 0], ember.zeros(0)))
        o = ember.empty(0, dtype=ember.int32, device="cuda")
        r = ember.searchsorted(bt.cuda(), vt.cuda(), out_int32=True, out=o)
        assert r is o
        same(o, ember.searchsorted(bt, vt, out_int32=True))
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        ember.searchsorted(ub.cuda(), vt.cuda(), sorter=(srt + 1).cuda())
    with pytest.raises(RuntimeError, match="output tensor's dtype is wrong"):
        ember.searchsorted(bt.cuda(), vt.cuda(), out=ember.empty(0, dtype=ember.int32, device="cuda"))
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        ember.searchsorted(bt.cuda(), vt.cuda()[:2])
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        ember.bucketize(vt.cuda(), bt.cuda())


# ------------------------------------------------------------- gradients

def _grad(f, x, device):
    xs = x.detach().to(device).requires_grad_(True)
    y = f(xs)
    g = ember.tensor(np.random.default_rng(18).standard_normal(tuple(y.shape)).astype(np.float64)).to(x.dtype)
    y.backward(g.to(device))
    return xs.grad


@pytest.mark.parametrize("name,f", [
    ("sort", lambda t: ember.sort(t, 1, True)[0]),
    ("topk", lambda t: ember.topk(t, 3, 0)[0]),
    ("cumsum", lambda t: ember.cumsum(t, 1)),
    ("cumprod", lambda t: ember.cumprod(t, 0)),
    ("cummax", lambda t: ember.cummax(t, 1)[0]),
    ("kthvalue", lambda t: ember.kthvalue(t, 2, 1)[0]),
    ("median", lambda t: ember.median(t, 0)[0]),
])
def test_gradients_match_cpu(cuda, name, f):
    x = ember.tensor(np.random.default_rng(19).standard_normal((5, 6)))
    with native(name):
        g = _grad(f, x, "cuda")
    c = _grad(f, x, "cpu")
    assert g.device.type == "cuda"
    np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- unique

@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_dim_none(cuda, dtype):
    for shape in [(), (0,), (1,), (17,), (4, 9)]:
        x = data(20, shape, dtype)
        for name, xg, xc in layouts(x):
            for inv in (False, True):
                for cnt in (False, True):
                    with native("unique", "unique_consecutive"):
                        same(ember.unique(xg, return_inverse=inv, return_counts=cnt),
                             ember.unique(xc, return_inverse=inv, return_counts=cnt))
                        same(ember.unique(xg, sorted=False, return_inverse=inv, return_counts=cnt),
                             ember.unique(xc, sorted=False, return_inverse=inv, return_counts=cnt))
                        same(ember.unique_consecutive(xg, return_inverse=inv, return_counts=cnt),
                             ember.unique_consecutive(xc, return_inverse=inv, return_counts=cnt))


def test_unique_matches_numpy(cuda):
    a = np.array([3.0, 1.0, np.nan, 1.0, -0.0, 0.0, np.nan, 3.0, 2.0], np.float32)
    with native("unique"):
        v, inv, cnt = ember.unique(ember.tensor(a).cuda(), return_inverse=True, return_counts=True)
    ev, einv, ecnt = np.unique(a, return_inverse=True, return_counts=True, equal_nan=False)
    np.testing.assert_array_equal(host(v), ev)
    np.testing.assert_array_equal(host(cnt), ecnt)
    np.testing.assert_array_equal(host(inv).reshape(-1), einv.reshape(-1))
    with native("unique_consecutive"):
        v, cnt = ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 2, 1, 3]).cuda(), return_counts=True)
    assert host(v).tolist() == [1, 2, 1, 3] and host(cnt).tolist() == [2, 3, 1, 1]
    # with dim: Note [CUDA unique dim] (its own tests: test_cuda_factories_unique_bias.py)
    r = ember.unique(ember.tensor([[1, 2], [1, 2], [0, 5]]).cuda(), dim=0)
    assert r.device.type == "cuda" and host(r).tolist() == [[0, 5], [1, 2]]


# ------------------------------------------------ sizes past one block / tile

def test_large_inputs(cuda):
    """Sizes where the GPU takes its other paths: one long row (DeviceRadixSort),
    many rows (DeviceSegmentedSort), long scan rows (the block scan)."""
    rng = np.random.default_rng(21)
    a = rng.integers(-1000, 1000, 200_003).astype(np.float32)
    with native("sort", "topk", "unique", "cumsum", "kthvalue"):
        v, i = ember.sort(ember.tensor(a).cuda(), stable=True)
        order = np.argsort(a, kind="stable")
        np.testing.assert_array_equal(host(i), order)
        np.testing.assert_array_equal(host(v), a[order])
        b = a.reshape(-1)[:200_000].reshape(2000, 100)
        v, i = ember.sort(ember.tensor(b).cuda(), dim=1, descending=True, stable=True)
        np.testing.assert_array_equal(host(i), np.argsort(-b, axis=1, kind="stable"))
        v, i = ember.topk(ember.tensor(b).cuda(), 5, dim=0)
        np.testing.assert_array_equal(host(i), np.argsort(-b, axis=0, kind="stable")[:5])
        u, cnt = ember.unique(ember.tensor(a.astype(np.int64)).cuda(), return_counts=True)
        eu, ecnt = np.unique(a.astype(np.int64), return_counts=True)
        np.testing.assert_array_equal(host(u), eu)
        np.testing.assert_array_equal(host(cnt), ecnt)
        c = rng.standard_normal((3, 100_000))
        np.testing.assert_allclose(host(ember.cumsum(ember.tensor(c).cuda(), 1)), np.cumsum(c, 1), rtol=1e-9,
                                   atol=1e-9)
        ci = rng.integers(-5, 5, (4, 5000))
        np.testing.assert_array_equal(host(ember.cumsum(ember.tensor(ci).cuda(), 1)), np.cumsum(ci, 1))
        same(ember.kthvalue(ember.tensor(b).cuda(), 37, 1), ember.kthvalue(ember.tensor(b), 37, 1))
