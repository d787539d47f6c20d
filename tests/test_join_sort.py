"""Joining, rearranging, sorting and searching ops against NumPy: what the
op table (tests/op_db.py) can't express — named return types, NaN order,
stability with ties (both directions), tie-breaking validity for topk /
kthvalue, large inputs that take the radix / parallel paths, searchsorted's
promotion and NaN rules, views, out= pairs, version counters, clamp with
tensor bounds, tril/triu_indices, one_hot. torch-only checks skip cleanly."""
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

RNG = np.random.default_rng(20240611)
FLOATS = ("float16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")


def T(a, dtype=None):
    """An ember tensor holding exactly the NumPy array's values."""
    a = np.ascontiguousarray(a)
    t = ember.from_numpy(a.copy())
    return t if dtype is None else t.to(getattr(ember, dtype))


def N(t):
    if t.dtype == ember.bfloat16:
        t = t.float()
    return t.numpy()


def stable_order(v, descending=False):
    """torch's order of a 1-D array: stable, NaN last (first descending)."""
    idx = np.arange(v.size)
    return np.lexsort((idx, v)) if not descending else np.lexsort((-idx, v))[::-1]


def sort_ref(x, dim=-1, descending=False):
    xm = np.moveaxis(x, dim, -1)
    order = np.zeros(xm.shape, np.int64)
    for i in np.ndindex(*xm.shape[:-1]):
        order[i] = stable_order(xm[i], descending)
    return np.moveaxis(np.take_along_axis(xm, order, -1), -1, dim), np.moveaxis(order, -1, dim)


def with_ties(shape, dtype):
    """Few distinct values (many ties), with NaN, -0.0 and infinities for floats."""
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    v = RNG.integers(-3, 4, shape).astype(np.float64)
    if dtype in FLOATS:
        f = v.reshape(-1)
        f[RNG.random(f.size) < 0.1] = np.nan
        f[RNG.random(f.size) < 0.1] = -0.0
        f[RNG.random(f.size) < 0.05] = np.inf
        f[RNG.random(f.size) < 0.05] = -np.inf
        return v.astype(dtype)
    return (v + (3 if dtype == "uint8" else 0)).astype(dtype)


# ---------------------------------------------------------------------------
# sort / argsort / msort
@pytest.mark.parametrize("dtype", ("bool",) + INTS + FLOATS)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((5000,), 0), ((300, 64), 1), ((64, 300), 0), ((3, 4, 2100), -1)],
                         ids=["short", "radix", "rows", "cols", "3d"])
def test_sort_stable_ties(dtype, descending, shape, dim):
    x = with_ties(shape, dtype)
    v, i = ember.sort(T(x), dim=dim, descending=descending, stable=True)
    ev, ei = sort_ref(x, dim, descending)
    np.testing.assert_array_equal(N(i), ei)
    np.testing.assert_array_equal(N(v), ev)
    # the default (stable=False) is stable too, and argsort agrees
    np.testing.assert_array_equal(N(ember.argsort(T(x), dim=dim, descending=descending)), ei)


def test_sort_nan_and_signed_zero_order():
    x = np.array([3.0, np.nan, 1.0, -np.inf, np.nan, np.inf, -0.0, 0.0, 0.0, -0.0])
    v, i = ember.sort(T(x))
    assert N(i).tolist() == [3, 6, 7, 8, 9, 2, 0, 5, 1, 4]  # NaNs last, +-0 equal (index order)
    assert np.signbit(N(v)[1:5]).tolist() == [True, False, False, True]  # values keep their bits
    v, i = ember.sort(T(x), descending=True)
    assert N(i).tolist() == [1, 4, 5, 0, 2, 6, 7, 8, 9, 3]  # NaNs first, ties still in index order


def test_sort_return_types_and_out_pair():
    x = T(np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]], np.float32))
    r = ember.sort(x)
    assert type(r).__name__ == "sort" and r.values is r[0] and r.indices is r[1]
    assert isinstance(r, tuple) and len(r) == 2
    values, indices = ember.sort(x, dim=0, descending=True)
    assert N(values).tolist() == [[3.0, 1.0, 5.0], [0.0, -1.0, 2.0]]
    assert N(indices).tolist() == [[0, 0, 1], [1, 1, 0]]
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    v0, i0 = v._version, i._version
    r = ember.sort(x, out=(v, i))
    assert type(r).__name__ == "sort_out" and r.values is v and r.indices is i
    assert N(v).tolist() == [[1.0, 2.0, 3.0], [-1.0, 0.0, 5.0]] and N(i).tolist() == [[1, 2, 0], [1, 0, 2]]
    assert v._version > v0 and i._version > i0
    # out= may alias the input: the result goes through a copy
    y = T(np.array([3.0, 1.0, 2.0], np.float32))
    ember.sort(y, out=(y, ember.empty(0, dtype=ember.int64)))
    assert N(y).tolist() == [1.0, 2.0, 3.0]
    # a transposed out pair is written through its strides
    vt, it = ember.empty(3, 2).t(), ember.empty(3, 2, dtype=ember.int64).t()
    ember.sort(x, out=(vt, it))
    assert N(vt).tolist() == [[1.0, 2.0, 3.0], [-1.0, 0.0, 5.0]] and vt.stride() == (1, 2)
    for name in ("topk", "kthvalue"):
        r = getattr(ember, name)(x, 1)
        assert type(r).__name__ == name and hasattr(r, "values") and hasattr(r, "indices")
    assert ember.return_types.sort is type(ember.sort(x))


def test_sort_noncontiguous_and_empty():
    base = with_ties((6, 40), "float32")
    x = T(base)[:, ::3]
    v, i = ember.sort(x.t(), dim=0)
    ev, ei = sort_ref(base[:, ::3].T, 0)
    np.testing.assert_array_equal(N(i), ei)
    np.testing.assert_array_equal(N(v), ev)
    v, i = ember.sort(ember.empty(0, 3), dim=0)
    assert v.shape == (0, 3) and i.dtype == ember.int64
    v, i = ember.sort(ember.tensor(2.5))
    assert v.item() == 2.5 and i.item() == 0 and v.dim() == 0
    np.testing.assert_array_equal(N(ember.msort(T(base))), np.sort(base, axis=0, kind="stable"))


# ---------------------------------------------------------------------------
# topk / kthvalue: values exact, indices valid (torch leaves tie order open)
@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("n,k", [(10, 3), (5000, 5), (5000, 300), (5000, 4000), (70, 70)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties(dtype, n, k, largest):
    x = with_ties((4, n), dtype)
    v, i = ember.topk(T(x), k, largest=largest)
    ev, _ = sort_ref(x, -1, largest)
    np.testing.assert_array_equal(N(v), ev[:, :k])
    ii = N(i)
    np.testing.assert_array_equal(np.take_along_axis(x, ii, -1), ev[:, :k])
    assert all(len(set(r)) == k for r in ii)  # distinct positions


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_kthvalue_ties(dtype):
    x = with_ties((3, 3001), dtype)
    ev, _ = sort_ref(x, -1)
    for k in (1, 17, 1500, 3001):
        v, i = ember.kthvalue(T(x), k)
        np.testing.assert_array_equal(N(v), ev[:, k - 1])
        np.testing.assert_array_equal(x[np.arange(3), N(i)], ev[:, k - 1])
    v, i = ember.kthvalue(T(x), 2, 0, keepdim=True)
    assert v.shape == (1, 3001) and i.shape == (1, 3001)


# Note [kthvalue ties]: torch's index among equal values comes from its median-of-three quickselect;
# these are torch's answers (checked with torch 2.x, every k)
KTH_TIES = [
    ([1, 1, 1, 1], [1, 0, 2, 3]),
    ([2, 1, 1, 2], [2, 1, 0, 3]),
    ([0, 5, 0, 5, 0], [2, 0, 4, 1, 3]),
    ([3, 3, 1, 3, 2, 3], [2, 4, 0, 3, 1, 5]),
    ([1, 1, 0, 1, 2, 1, 1], [2, 5, 3, 0, 1, 6, 4]),
    ([1, 1, 1, 2, 0, 2, 0, 1, 0, 0], [4, 6, 8, 9, 2, 0, 1, 7, 5, 3]),
    ([2, 1, 2, 2, 2, 0, 1, 0, 2, 0, 2, 1, 1, 2, 0, 1], [14, 9, 7, 5, 12, 11, 15, 1, 6, 13, 2, 4, 8, 10, 3, 0]),
]


@pytest.mark.parametrize("dtype", ("int64", "uint8", "float32", "float64", "float16", "bfloat16"))
@pytest.mark.parametrize("vals,want", KTH_TIES)
def test_kthvalue_tie_index_is_torchs(dtype, vals, want):
    x = np.array(vals)
    got = [int(ember.kthvalue(T(x, dtype), k).indices) for k in range(1, len(x) + 1)]
    assert got == want
    # along another dim of a strided (transposed) tensor, and with keepdim
    xt = T(np.stack([x, x], 1), dtype)  # (n, 2)
    r = ember.kthvalue(xt.t().contiguous().t(), 2, 0, keepdim=True)
    assert N(r.indices).tolist() == [[want[1], want[1]]]


def test_kthvalue_nan_and_signed_zero_ties_are_torchs():
    """NaN is the largest value, -0.0 equals 0.0 (torch's answers)"""
    x = T(np.array([np.nan, 0.0, -0.0, np.nan, 0.0, 1.0]))
    assert [int(ember.kthvalue(x, k).indices) for k in range(1, 7)] == [2, 4, 1, 5, 3, 0]


@needs_torch
def test_kthvalue_ties_match_torch():
    rng = np.random.default_rng(7)
    for n in (3, 8, 33, 100, 1000):
        x = rng.integers(0, 3, (4, n)).astype(np.float32)
        x[rng.random((4, n)) < 0.1] = np.nan
        for k in sorted({1, 2, n // 2, n - 1, n}):
            for dim, xx in ((1, x), (0, x.T.copy())):
                e = ember.kthvalue(T(xx), k, dim)
                t = torch.kthvalue(torch.from_numpy(xx), k, dim)
                np.testing.assert_array_equal(N(e.indices), t.indices.numpy())


def test_numpy_keyword_names_like_torch():
    """torch accepts NumPy's keyword names for every op: axis / keepdims / x, a, x1 / x2"""
    a, b = T(np.arange(6.0).reshape(2, 3)), T(np.ones((2, 3)))
    want = np.concatenate([N(a), N(b)], 1)
    for f in (ember.cat, ember.concat, ember.concatenate):
        np.testing.assert_array_equal(N(f([a, b], dim=1)), want)
        np.testing.assert_array_equal(N(f([a, b], axis=1)), want)
    np.testing.assert_array_equal(N(ember.concatenate((a, b), -1)), want)
    np.testing.assert_array_equal(N(ember.sum(a, axis=1, keepdims=True)), [[3.0], [12.0]])
    np.testing.assert_array_equal(N(a.sum(axis=0)), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(N(ember.add(x1=a, x2=b)), N(a) + 1)
    assert float(ember.sum(a=a)) == 15.0
    assert int(ember.kthvalue(a, 1, axis=0).indices[0]) == 0
    with pytest.raises(TypeError, match="multiple values"):
        ember.sum(a, axis=0, dim=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        ember.cat([a, b], axes=1)


def test_topk_nan_is_largest():
    x = T(np.array([1.0, 5.0, np.nan, 2.0]))
    assert np.isnan(N(ember.topk(x, 1).values)[0])
    assert N(ember.topk(x, 2, largest=False).values).tolist() == [1.0, 2.0]
    assert np.isnan(N(ember.kthvalue(x, 4).values))


# ---------------------------------------------------------------------------
# searchsorted / bucketize
@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_numpy(dtype, side):
    seq = np.sort(RNG.integers(0, 50, 40)).astype(dtype)
    vals = RNG.integers(-5, 55, (50, 997)).astype(dtype)  # 49,850 values: the parallel path
    r = ember.searchsorted(T(seq), T(vals), side=side)
    assert r.dtype == ember.int64
    np.testing.assert_array_equal(N(r), np.searchsorted(seq, vals, side=side))
    r = ember.searchsorted(T(seq), T(vals)[:, ::7], right=side == "right", out_int32=True)
    assert r.dtype == ember.int32
    np.testing.assert_array_equal(N(r), np.searchsorted(seq, vals[:, ::7], side=side))
    # bucketize is searchsorted with the arguments swapped; np.digitize's `right` is the opposite
    b = ember.bucketize(T(vals), T(seq), right=side == "right")
    np.testing.assert_array_equal(N(b), np.digitize(vals, seq, right=side == "left"))


def test_searchsorted_batched_sorter_and_scalars():
    seq = np.sort(RNG.standard_normal((3, 4, 9)), axis=-1)
    vals = RNG.standard_normal((3, 4, 5))
    r = N(ember.searchsorted(T(seq), T(vals), right=True))
    for i in np.ndindex(3, 4):
        np.testing.assert_array_equal(r[i], np.searchsorted(seq[i], vals[i], side="right"))
    perm = RNG.permutation(9)
    unsorted = seq[0, 0][perm]
    sorter = np.argsort(unsorted, kind="stable")
    np.testing.assert_array_equal(N(ember.searchsorted(T(unsorted), T(vals[0, 0]), sorter=T(sorter))),
                                  np.searchsorted(seq[0, 0], vals[0, 0]))
    s = ember.searchsorted(T(np.array([1, 3, 5, 7])), 4)
    assert s.dim() == 0 and s.item() == 2
    assert ember.bucketize(3.5, T(np.array([1, 3, 5, 7]))).item() == 2


def test_searchsorted_promotion_and_nan():
    """Boundaries and values compare in their promoted dtype; a Python number
    is an int64 / float64 tensor here (not a weak scalar)."""
    i8 = T(np.array([1, 2], np.int8))
    assert ember.searchsorted(i8, 300).item() == 2  # not 300 wrapped to int8
    assert ember.searchsorted(i8, 1.5).item() == 1
    assert N(ember.searchsorted(T(np.array([1, 2], np.uint8)), T(np.array([-1])))).tolist() == [0]
    # float16 values against int64 boundaries: both become float16 (2049 rounds to 2048)
    f16 = T(np.array([2048.0], np.float16))
    assert ember.searchsorted(T(np.array([2049, 2050])), f16).tolist() == [0]
    # torch's NaN rule: a NaN boundary or value never compares, so the search runs right
    seq = T(np.array([1.0, 2.0, np.nan]))
    vals = T(np.array([np.nan, 2.0, np.inf, 0.5]))
    assert ember.searchsorted(seq, vals).tolist() == [3, 1, 3, 0]
    assert ember.searchsorted(seq, vals, right=True).tolist() == [3, 3, 3, 0]


def test_searchsorted_out_and_empty():
    out = ember.empty(0, dtype=ember.int64)
    r = ember.searchsorted(T(np.array([1, 3])), T(np.array([[0, 2], [3, 4]])), out=out)
    assert r is out and out.tolist() == [[0, 1], [1, 2]]
    assert ember.searchsorted(ember.empty(0), T(np.array([1.0]))).tolist() == [0]
    assert ember.searchsorted(ember.ones(2, 0), ember.ones(2, 3)).tolist() == [[0] * 3] * 2
    assert ember.searchsorted(ember.ones(2, 3), ember.ones(2, 0)).shape == (2, 0)


# ---------------------------------------------------------------------------
# unique / unique_consecutive
@pytest.mark.parametrize("dtype", ("bool",) + INTS + FLOATS)
def test_unique_numpy(dtype):
    x = with_ties((40, 50), dtype)
    vals, inv, cnt = ember.unique(T(x), return_inverse=True, return_counts=True)
    ev, einv, ecnt = np.unique(x.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    np.testing.assert_array_equal(N(vals), ev)
    np.testing.assert_array_equal(N(cnt), ecnt)
    if dtype in FLOATS:  # every NaN is its own value, numbered in order of appearance (as torch)
        nan = np.isnan(x.reshape(-1))
        einv = einv.reshape(-1).copy()
        einv[nan] = (~np.isnan(ev)).sum() + np.arange(nan.sum())
    np.testing.assert_array_equal(N(inv), einv.reshape(x.shape))
    rows, rinv, rcnt = ember.unique(T(x[:, :3]), dim=0, return_inverse=True, return_counts=True)
    if dtype not in FLOATS:  # NaN rows: NumPy's axis=unique does not keep NaNs apart
        er, erinv, ercnt = np.unique(x[:, :3], axis=0, return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(N(rows), er)
        np.testing.assert_array_equal(N(rinv), erinv.reshape(-1))
        np.testing.assert_array_equal(N(rcnt), ercnt)


def test_unique_forms():
    x = T(np.array([3, 1, 2, 3, 1]))
    r = ember.unique(x)
    assert isinstance(r, ember.Tensor) and r.tolist() == [1, 2, 3]
    assert isinstance(ember.unique(x, return_counts=True), tuple)
    assert [t.tolist() for t in x.unique(return_inverse=True)] == [[1, 2, 3], [2, 0, 1, 2, 0]]
    assert ember.unique(ember.tensor(3), return_inverse=True)[1].dim() == 0
    v, i, c = ember.unique(ember.tensor([1.0, 0.0, -0.0, 1.0]), return_inverse=True, return_counts=True)
    assert v.tolist() == [0.0, 1.0] and i.tolist() == [1, 0, 0, 1] and c.tolist() == [2, 2]
    v, i, c = ember.unique(ember.ones(0, 2), dim=0, return_inverse=True, return_counts=True)
    assert v.shape == (0, 2) and i.shape == (0,) and c.shape == (0,)
    x = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    v, i, c = ember.unique_consecutive(T(x), return_inverse=True, return_counts=True)
    assert v.tolist() == [1, 2, 3, 1, 2] and i.tolist() == [0, 0, 1, 1, 2, 3, 3, 4] and c.tolist() == [2, 2, 1, 2, 1]
    v, c = ember.unique_consecutive(ember.tensor([float("nan")] * 2), return_counts=True)
    assert c.tolist() == [1, 1]  # NaN != NaN
    rows = T(np.array([[1, 1], [1, 1], [2, 3], [1, 1]]))
    v, i, c = ember.unique_consecutive(rows, dim=0, return_inverse=True, return_counts=True)
    assert v.tolist() == [[1, 1], [2, 3], [1, 1]] and i.tolist() == [0, 0, 1, 2] and c.tolist() == [2, 1, 1]


# ---------------------------------------------------------------------------
# cat / stack and friends
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_noncontiguous_and_big(dim):
    """A transposed float32 and a strided int64 input (promoted), 150,000 elements."""
    a = RNG.standard_normal((250, 300)).astype(np.float32)
    b = RNG.integers(-9, 9, (300, 500))
    ta = T(a).t()  # (300, 250), transposed
    tb = T(b)[:, ::2] if dim else T(b)[::2, :250]  # strided
    nb = b[:, ::2] if dim else b[::2, :250]
    r = ember.cat([ta, tb], dim)
    assert r.dtype == ember.float32
    np.testing.assert_array_equal(N(r), np.concatenate([a.T, nb.astype(np.float32)], axis=dim))


def test_cat_legacy_empty_and_out():
    r = ember.cat([ember.empty(0, dtype=ember.float64), T(np.ones((2, 3), np.int32))], dim=1)
    assert r.dtype == ember.float64 and r.shape == (2, 3)  # skipped, but it takes part in promotion
    out = ember.empty(3, 4).t()
    res = ember.cat([T(np.arange(6).reshape(2, 3)), T(np.arange(6, 12).reshape(2, 3))], 0, out=out)
    assert res is out and out.stride() == (1, 4)
    np.testing.assert_array_equal(N(out), np.arange(12).reshape(4, 3))
    out = ember.empty(0, dtype=ember.float16)
    ember.cat([T(np.array([1, 2])), T(np.array([3]))], out=out)
    assert out.dtype == ember.float16 and out.tolist() == [1.0, 2.0, 3.0]
    x = ember.ones(4)
    ember.cat([x[:2]], out=x[2:])  # disjoint parts of one storage are fine
    with pytest.raises(RuntimeError):
        ember.cat([x[:2], x[2:]], out=x)


def test_stack_family_numpy():
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    for fn, ref in [(ember.hstack, np.hstack), (ember.vstack, np.vstack), (ember.dstack, np.dstack),
                    (ember.column_stack, np.column_stack), (ember.row_stack, np.vstack)]:
        for xs in ([a, b], [a[0], b[0]], [a[0, 0], b[0, 0]]):
            np.testing.assert_array_equal(N(fn([T(np.asarray(x)) for x in xs])), ref(xs))
    for d in (0, 1, 2, -1):
        np.testing.assert_array_equal(N(ember.stack([T(a), T(b)], d)), np.stack([a, b], d))
    out = ember.empty(0, dtype=ember.float64)
    assert ember.stack([T(a), T(b)], out=out) is out and out.shape == (2, 2, 3)


def test_tensor_split_and_split_sizes_are_views():
    x = T(np.arange(30).reshape(5, 6))
    for ios in (3, [1, 3], (4, 1, -1, 9), [], ember.tensor(2), ember.tensor([1, 4])):
        plain = ios.tolist() if isinstance(ios, ember.Tensor) else ios
        ref = np.array_split(N(x), plain) if isinstance(plain, int) else np.split(N(x), list(plain))
        got = ember.tensor_split(x, ios)
        assert isinstance(got, tuple) and len(got) == len(ref)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(N(g), r)
            assert g._base is x or g.numel() == 0
    parts = x.split([1, 3, 2], dim=1)
    assert [p.shape[1] for p in parts] == [1, 3, 2] and all(p._base is x for p in parts)
    np.testing.assert_array_equal(np.hstack([N(p) for p in parts]), N(x))


# ---------------------------------------------------------------------------
# repeat / tile / repeat_interleave / flip / roll / rot90
def test_repeat_tile_numpy():
    x = RNG.standard_normal((3, 4))
    t = T(x).t()  # non-contiguous
    for reps in [(2, 3), (1, 1), (2, 1, 3), (0, 2)]:
        np.testing.assert_array_equal(N(t.repeat(*reps)), np.tile(x.T, reps))
    for dims in [(2,), (2, 1, 3), (), (3, 2)]:
        np.testing.assert_array_equal(N(ember.tile(t, dims)), np.tile(x.T, dims))
    big = RNG.integers(0, 100, (64, 997))
    np.testing.assert_array_equal(N(T(big).repeat(2, 3)), np.tile(big, (2, 3)))


def test_repeat_interleave_numpy():
    x = RNG.integers(0, 9, (4, 5))
    t = T(x)[:, ::-1] if False else T(x).t()
    np.testing.assert_array_equal(N(t.repeat_interleave(2)), np.repeat(x.T, 2))
    rep = np.array([0, 1, 2, 3, 1])
    np.testing.assert_array_equal(N(ember.repeat_interleave(t, T(rep), dim=0)), np.repeat(x.T, rep, axis=0))
    np.testing.assert_array_equal(N(ember.repeat_interleave(t, T(rep), dim=0, output_size=7)),
                                  np.repeat(x.T, rep, axis=0))
    np.testing.assert_array_equal(N(ember.repeat_interleave(T(np.array([2, 0, 3], np.int32)))), [0, 0, 2, 2, 2])
    assert ember.repeat_interleave(T(np.array([2, 0, 3], np.int32))).dtype == ember.int32
    big = RNG.standard_normal((50, 997)).astype(np.float32)  # the parallel copy
    np.testing.assert_array_equal(N(T(big).repeat_interleave(3, dim=1)), np.repeat(big, 3, axis=1))


def test_flip_roll_rot90_numpy():
    x = RNG.standard_normal((3, 4, 5))
    t = T(x).permute(2, 0, 1)  # non-contiguous
    xp = x.transpose(2, 0, 1)
    for dims in [(0,), (1, 2), (0, 1, 2), ()]:
        np.testing.assert_array_equal(N(t.flip(dims)), np.flip(xp, dims))
    np.testing.assert_array_equal(N(ember.fliplr(t)), np.fliplr(xp))
    np.testing.assert_array_equal(N(ember.flipud(t)), np.flipud(xp))
    assert ember.flip(T(x).transpose(0, 2), (0,)).stride() == T(x).transpose(0, 2).stride()  # layout kept
    for shifts, dims in [(1, None), (-7, None), (2, 1), ((1, -2), (0, 2)), ((2, 1), (1, 1)), (2 ** 62 + 3, 2)]:
        np.testing.assert_array_equal(N(ember.roll(t, shifts, dims)), np.roll(xp, shifts, dims))
    for k in (-5, -1, 0, 1, 2, 3, 4, 2 ** 62 + 1):
        for dims in ((0, 1), (2, 0), (1, -1)):
            np.testing.assert_array_equal(N(ember.rot90(t, k, dims)), np.rot90(xp, k % 4, dims))
    big = RNG.integers(0, 100, (50, 1001))
    np.testing.assert_array_equal(N(ember.roll(T(big), 7, 1)), np.roll(big, 7, 1))
    np.testing.assert_array_equal(N(ember.flip(T(big), (0, 1))), big[::-1, ::-1])


# ---------------------------------------------------------------------------
# views: movedim, broadcast_to, broadcast_tensors, meshgrid
def test_movedim_broadcast_views():
    x = T(np.arange(24.0).reshape(2, 3, 4))
    m = ember.movedim(x, (0, 1), (2, 0))
    np.testing.assert_array_equal(N(m), np.moveaxis(N(x), (0, 1), (2, 0)))
    assert m._base is x and m.data_ptr() == x.data_ptr()
    assert x.moveaxis(-1, 0).shape == (4, 2, 3)
    b = ember.broadcast_to(T(np.arange(3.0)), (2, 3))
    assert b.stride() == (0, 1) and b._base is not None
    np.testing.assert_array_equal(N(b), np.broadcast_to(np.arange(3.0), (2, 3)))
    p, q = ember.broadcast_tensors(T(np.arange(3)), T(np.ones((2, 1))))
    assert p.shape == q.shape == (2, 3) and p.stride() == (0, 1)
    assert ember.broadcast_tensors() == ()
    for shapes in [((2, 1), (3,)), (2, (3, 1)), ((0,), (1,)), ((5, 1, 4), (1, 3, 1), (4,)), ()]:
        assert tuple(ember.broadcast_shapes(*shapes)) == np.broadcast_shapes(*[
            (s,) if isinstance(s, int) else s for s in shapes])
    assert isinstance(ember.broadcast_shapes((2, 1), (3,)), ember.Size)


def test_meshgrid_numpy():
    a, b, c = np.arange(3.0), np.arange(4.0) * 2, np.arange(2.0) - 5
    for indexing in ("ij", "xy"):
        got = ember.meshgrid(T(a), T(b), T(c), indexing=indexing)
        for g, r in zip(got, np.meshgrid(a, b, c, indexing=indexing)):
            np.testing.assert_array_equal(N(g), r)
            assert 0 in g.stride()  # expanded views
    with pytest.warns(UserWarning, match="indexing"):
        g = ember.meshgrid(T(a), T(b))
    np.testing.assert_array_equal(N(g[0]), np.meshgrid(a, b, indexing="ij")[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.meshgrid([T(a), T(b)], indexing="xy")


# ---------------------------------------------------------------------------
# diff, one_hot, tril/triu_indices
def test_diff_numpy():
    x = RNG.integers(-50, 50, (6, 7))
    t = T(x).t()
    for n in (0, 1, 2, 7, 9):
        for dim in (0, 1, -1):
            np.testing.assert_array_equal(N(ember.diff(t, n, dim)), np.diff(x.T, n, axis=dim))
    pre, app = RNG.integers(0, 5, (7, 1)), RNG.standard_normal((7, 2)).astype(np.float32)
    r = ember.diff(t, 1, 1, prepend=T(pre), append=T(app))
    assert r.dtype == ember.float32
    np.testing.assert_allclose(N(r), np.diff(np.concatenate([pre, x.T, app], 1).astype(np.float32), axis=1))
    bl = RNG.random(20) < 0.5
    np.testing.assert_array_equal(N(ember.diff(T(bl), 2)), np.diff(bl, 2))
    u8 = np.array([1, 5, 2], np.uint8)
    np.testing.assert_array_equal(N(ember.diff(T(u8))), np.diff(u8))  # wraps as uint8


def test_one_hot_numpy():
    x = RNG.integers(0, 6, (3, 4))
    oh = ember.nn.functional.one_hot(T(x))
    assert oh.dtype == ember.int64
    np.testing.assert_array_equal(N(oh), np.eye(x.max() + 1, dtype=np.int64)[x])
    np.testing.assert_array_equal(N(ember.nn.functional.one_hot(T(x).t(), num_classes=9)), np.eye(9, dtype=np.int64)[x.T])
    assert ember.nn.functional.one_hot(ember.zeros(0, dtype=ember.int64), 3).shape == (0, 3)
    assert ember.nn.functional.one_hot(ember.tensor(2), 4).tolist() == [0, 0, 1, 0]


@pytest.mark.parametrize("fn,ref", [(ember.tril_indices, np.tril_indices), (ember.triu_indices, np.triu_indices)])
def test_tri_indices_numpy(fn, ref):
    for row, col in [(3, 3), (4, 6), (6, 4), (0, 3), (3, 0), (1, 1)]:
        for off in (-10, -2, -1, 0, 1, 3, 10):
            got = fn(row, col, off)
            assert got.dtype == ember.int64
            np.testing.assert_array_equal(N(got), np.stack(ref(row, off, col)) if row and col else
                                          np.zeros((2, 0), np.int64))
    assert fn(3, 3, dtype=ember.int32).dtype == ember.int32
    assert fn(3, 3, 2 ** 62).shape[1] in (0, 9) and fn(3, 3, -2 ** 63).shape[1] in (0, 9)
    # huge matrices with a tiny band: counted in closed form, not row by row
    assert fn(2 ** 40, 3, -(2 ** 40) + 2 if fn is ember.tril_indices else 2).shape[1] <= 3 * 2 ** 40
    small = ember.tril_indices(2 ** 40, 2, -(2 ** 40) + 1)
    assert N(small).tolist() == [[2 ** 40 - 1], [0]]
    with pytest.raises(RuntimeError):
        fn(-1, 3)
    with pytest.raises(NotImplementedError):
        fn(3, 3, dtype=ember.float32)


# ---------------------------------------------------------------------------
# clamp with tensor bounds: broadcasting between input and bounds
def test_clamp_tensor_bounds_broadcast():
    x = RNG.standard_normal((2, 1, 5)).astype(np.float32)
    lo = RNG.standard_normal((3, 1)).astype(np.float32) - 1
    hi = RNG.standard_normal((5,)).astype(np.float32) + 1
    r = ember.clamp(T(x), T(lo), T(hi))
    assert r.shape == (2, 3, 5)
    np.testing.assert_array_equal(N(r), np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_array_equal(N(ember.clamp(T(x), min=T(lo))), np.maximum(x, lo))
    np.testing.assert_array_equal(N(T(x).clip(max=T(hi))), np.minimum(x, hi))
    xi = RNG.integers(-5, 5, (4, 3)).astype(np.int8)
    r = ember.clamp(T(xi), T(np.array([-1.5, 0.0, 2.0], np.float32)), None)  # float bound: float result
    assert r.dtype == ember.float32
    with pytest.raises(RuntimeError):
        T(x).clamp_(T(lo), T(hi))  # the in-place result may not grow
    y = T(np.zeros((3, 5), np.float32))
    y.clamp_(T(lo), T(hi))
    np.testing.assert_array_equal(N(y), np.minimum(np.maximum(np.zeros((3, 5), np.float32), lo), hi))
    with pytest.raises(TypeError):
        ember.clamp(T(x), T(lo), 2.0)  # a non-0-d tensor with a number: no such overload
    assert ember.clamp(T(np.arange(6)), ember.tensor(1.5, dtype=ember.float64), 3).dtype == ember.float32


def test_clamp_integer_number_bounds_out_of_range():
    u = T(np.arange(6, dtype=np.uint8))
    assert ember.clamp(u, -1, None).tolist() == list(range(6))  # below the range: clamps nothing
    assert ember.clamp(u, 2, 300).tolist() == [2, 2, 2, 3, 4, 5]
    assert ember.clamp(T(np.arange(6, dtype=np.int8)), -200, 200).tolist() == list(range(6))
    with pytest.raises(RuntimeError, match="outside the representable range"):
        ember.clamp(u, 300, None)
    with pytest.raises(RuntimeError, match="outside the representable range"):
        ember.clamp(u, None, -1)


@needs_torch
def test_clamp_matches_torch():
    cases = [lambda L: L.clamp(L.arange(6, dtype=L.uint8), -1, None),
             lambda L: L.clamp(L.arange(6, dtype=L.int8), -200, 200),
             lambda L: L.clamp(L.arange(6.).reshape(2, 3), L.tensor([[1.], [4.]]), L.tensor([2., 3., 5.])),
             lambda L: L.clamp(L.arange(6), L.tensor(1.5, dtype=L.float64), 3),
             lambda L: L.clamp(L.tensor([1., 5.]), L.tensor([3., float("nan")]), L.tensor([float("nan"), 2.]))]
    for case in cases:
        a, b = case(torch), case(ember)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@needs_torch
def test_sort_topk_match_torch_exactly():
    """Stable sort indices are fully determined: they equal torch's."""
    x = with_ties((5, 3000), "float32")
    tv, ti = torch.sort(torch.from_numpy(x), descending=True, stable=True)
    ev, ei = ember.sort(T(x), descending=True, stable=True)
    np.testing.assert_array_equal(ti.numpy(), N(ei))
    tk = torch.topk(torch.from_numpy(x), 7)
    np.testing.assert_array_equal(tk.values.numpy(), N(ember.topk(T(x), 7).values))
