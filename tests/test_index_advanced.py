"""Advanced indexing (tensor, list, NumPy-array and bool-mask keys) and the
index ops, against NumPy: keys mixed with ints, slices, None and `...`;
torch's placement rules; __setitem__ with broadcasting, casting and
duplicates; bool masks of every rank; empty and 0-d cases; non-contiguous
and expanded operands; inputs large enough for the threaded loops; and
error inputs with torch's exception types. (tests/op_db.py holds the
per-op dtype x layout table.)"""
import warnings

import numpy as np
import pytest

import ember

try:
    import torch as _torch
except ImportError:
    _torch = None
needs_torch = pytest.mark.skipif(_torch is None, reason="torch not installed")

SHAPE = (2, 3, 4, 5)
BASE = np.arange(120).reshape(SHAPE)


def layouts():
    """The same logical array as contiguous, transposed-back, sliced and expanded ember tensors."""
    yield "contig", ember.tensor(BASE.tolist())
    yield "T", ember.tensor(BASE.transpose(3, 2, 1, 0).tolist()).permute(3, 2, 1, 0)
    big = np.zeros(SHAPE[:-1] + (10,), np.int64)
    big[..., ::2] = BASE
    yield "slice", ember.tensor(big.tolist())[..., ::2]


EXP = np.broadcast_to(np.arange(20).reshape(4, 5), SHAPE)  # an expanded (stride-0) operand


def T(v, dtype=None):
    return ember.tensor(v, dtype=dtype)


# keys whose meaning is the same in NumPy and torch: (ember key, numpy key)
KEYS = [
    ([0, 1], None), ([-1, 0, -2], None), ([1, 1, 0], None),
    (T([1, 0]), [1, 0]), (T([[0, 1], [1, 0]]), np.array([[0, 1], [1, 0]])),
    (T([0, 1], ember.int32), [0, 1]),
    (np.array([1, 0, 1]), None), (np.array([[1], [0]], np.int32), None),
    ((slice(None), [2, 0]), None), ((slice(None), slice(None), [3, 3, 1]), None),
    ((Ellipsis, [4, 0]), None), (([1], Ellipsis, [0, 2]), None),
    ((slice(None), [0, 2], [1, 3]), None), ((slice(None), [[0], [2]], [1, 3]), None),  # adjacent: stay in place
    (([0, 1], slice(None), [1, 3]), None), (([1, 0], slice(None), slice(None), [4, 0]), None),  # separated: front
    ((slice(None), [0, 2], slice(None), [1, 3]), None),
    ((None, [1, 0]), None), (([1, 0], None), None), ((slice(None), None, [0, 2], None), None),
    ((slice(1, None), [0, 0, 2]), None), ((slice(None, None, 2), slice(None), [3]), None),
    ([], None), ((slice(None), []), None), ((slice(None), [], slice(None), []), None),
    (T([], ember.int64), np.array([], np.int64)),
    ((T([0, 1]), T([[0], [2]])), (np.array([0, 1]), np.array([[0], [2]]))),  # broadcast index tensors
    ((slice(None), np.array([[0, 1]]), np.array([[2], [1]])), None),
]


@pytest.mark.parametrize("k", range(len(KEYS)))
def test_getitem_matches_numpy(k):
    key, npkey = KEYS[k]
    npkey = key if npkey is None else npkey
    expected = BASE[npkey]
    for name, x in layouts():
        got = x[key]
        assert tuple(got.shape) == expected.shape, name
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=name)
        if got.numel():  # advanced indexing copies
            assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    exp = ember.arange(20).view(4, 5).expand(*SHAPE)
    np.testing.assert_array_equal(exp[key].numpy(), EXP[npkey])


# torch's own rules: integers select first (basic), Python bools are size-1 index tensors
TORCH_RULES = [
    ((0, slice(None), [0, 1]), lambda a: a[0][:, [0, 1]]),  # NumPy would move the index dims to the front
    ((slice(None), 1, slice(None), [4, 0]), lambda a: a[:, 1][:, :, [4, 0]]),
    (([1, 0], 2, [0, 3]), lambda a: a[:, 2][[1, 0], [0, 3]]),
    ((True, [0, 1]), lambda a: a[[0, 1]]),
    ((slice(None), True, [0, 1]), lambda a: a[:, [0, 1]]),
    (([0, 1], True), lambda a: a[[0, 1]]),
    (True, lambda a: a[None]), (False, lambda a: a[None][:0]),
    ((None, True), lambda a: a[None, None]),
    (T(True), lambda a: a[None]), (T(False), lambda a: a[None][:0]),
    ((0, T([2, 1])), lambda a: a[0][[2, 1]]),
]


@pytest.mark.parametrize("k", range(len(TORCH_RULES)))
def test_getitem_torch_rules(k):
    key, ref = TORCH_RULES[k]
    for name, x in layouts():
        got = x[key]
        expected = ref(BASE)
        assert tuple(got.shape) == expected.shape, name
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=name)


@needs_torch
@pytest.mark.parametrize("key", [k for k, _ in KEYS] + [k for k, _ in TORCH_RULES], ids=str)
def test_getitem_matches_torch(key):
    def conv(k):
        if isinstance(k, ember.Tensor):
            return _torch.from_numpy(k.numpy())
        if isinstance(k, tuple):
            return tuple(conv(i) for i in k)
        return k
    t = _torch.from_numpy(BASE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = t[conv(key)]
    got = ember.from_numpy(BASE)[key]
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


# ---- bool masks of every rank -----------------------------------------------------------

@pytest.mark.parametrize("rank", [1, 2, 3, 4])
@pytest.mark.parametrize("where", ["front", "after-slice", "after-ellipsis"])
def test_mask_every_rank(rank, where):
    rng = np.random.default_rng(rank)
    if where == "front":
        mshape, npkey = SHAPE[:rank], lambda m: m
    elif where == "after-slice":
        if rank == 4:
            return
        mshape, npkey = SHAPE[1:1 + rank], lambda m: (slice(None), m)
    else:
        mshape, npkey = SHAPE[4 - rank:], lambda m: (Ellipsis, m)
    m = rng.random(mshape) < 0.5
    for name, x in layouts():
        key = npkey(ember.from_numpy(m))
        np.testing.assert_array_equal(x[key].numpy(), BASE[npkey(m)], err_msg=name)
        y = ember.from_numpy(BASE.copy())
        y[key] = -1
        ref = BASE.copy()
        ref[npkey(m)] = -1
        np.testing.assert_array_equal(y.numpy(), ref)
        # nested Python lists of bools mean the same as the mask (wrapped in a tuple)
        if where != "front":
            np.testing.assert_array_equal(x[npkey(m.tolist())].numpy(), BASE[npkey(m)])


def test_mask_all_false_and_all_true():
    x = ember.from_numpy(BASE.copy())
    assert tuple(x[x > 1000].shape) == (0,)
    assert x[x >= 0].tolist() == BASE.ravel().tolist()
    assert tuple(x[ember.zeros(2, 3, dtype=ember.bool)].shape) == (0, 4, 5)


def test_mask_with_other_indices():
    m = np.array([[True, False, True], [False, True, True]])
    x = ember.from_numpy(BASE)
    np.testing.assert_array_equal(x[ember.from_numpy(m), [0, 1, 2, 3]].numpy(), BASE[m, [0, 1, 2, 3]])
    np.testing.assert_array_equal(x[ember.from_numpy(m), 1:3].numpy(), BASE[m, 1:3])
    np.testing.assert_array_equal(x[[1], :, ember.from_numpy(m[0, :2].repeat(2))].numpy(),
                                  BASE[[1], :, m[0, :2].repeat(2)])


def test_uint8_mask_warns_like_torch():
    x = ember.from_numpy(BASE)
    with pytest.warns(UserWarning, match="uint8"):
        got = x[ember.tensor([1, 0], dtype=ember.uint8)]
    np.testing.assert_array_equal(got.numpy(), BASE[[True, False]])


def test_list_of_sequences_is_a_tuple_with_a_warning():
    x = ember.from_numpy(BASE[0, :, 0])  # (3, 5)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        got = x[[[0, 1], [1, 2]]]
    np.testing.assert_array_equal(got.numpy(), BASE[0, :, 0][[0, 1], [1, 2]])
    with pytest.warns(UserWarning):
        assert x[[0, slice(None)]].tolist() == BASE[0, 0, 0].tolist()


def test_list_values_convert_like_torch():
    x = ember.arange(5)
    assert x[[0, 1.9]].tolist() == [0, 1]  # floats in a list truncate to int64
    assert x[[True, False, True, False, True]].tolist() == [0, 2, 4]
    assert x[np.array([4.2, 0.0])].tolist() == [4, 0]
    assert x[np.array([3, 1], np.uint64)].tolist() == [3, 1]
    assert x[np.array(2)].tolist() == 2  # a 0-d array selects
    assert x[T(3, ember.int16)].tolist() == 3


# ---- 0-d and empty ---------------------------------------------------------------------

def test_zero_dim_self_and_index():
    s = ember.tensor(7.0)
    assert s[T(True)].tolist() == [7.0] and s[T(False)].tolist() == []
    with pytest.raises(IndexError):  # as torch: the list counts against the 0 dims
        s[None, [0, 0]]
    s[True] = 3.0
    assert s.tolist() == 3.0
    s[T(False)] = 9.0
    assert s.tolist() == 3.0
    v = ember.arange(4.0)
    assert v[T(2)].tolist() == 2.0 and v[T(2)].dim() == 0  # 0-d integer tensors select (a view)
    assert v[T(2)].untyped_storage().data_ptr() == v.untyped_storage().data_ptr()


def test_empty_tensors():
    e = ember.zeros(0, 3)
    assert tuple(e[[]].shape) == (0, 3)
    assert tuple(e[:, [2, 0]].shape) == (0, 2)
    assert tuple(e[e > 0].shape) == (0,)
    e[:, [1]] = 5.0
    assert tuple(ember.zeros(3, 0)[[0, 2]].shape) == (2, 0)
    x = ember.zeros(3)
    x[ember.tensor([], dtype=ember.int64)] = ember.ones(0)
    assert x.tolist() == [0, 0, 0]


# ---- __setitem__ -------------------------------------------------------------------------

SETS = [  # key, value (numpy), dtype
    ([0, 1], 5, "int64"),
    ([1, 1, 0], np.arange(60).reshape(3, 4, 5), "int64"),
    ((slice(None), [2, 0], [1, 3]), np.array([[7], [8]]), "float32"),
    (([0, 1], slice(None), [1, 3]), np.arange(6).reshape(2, 3, 1) * 10, "float64"),  # separated: front
    ((Ellipsis, [4, 4, 0]), np.array([1, 2, 3]), "int32"),  # duplicates: the last write wins
    ((slice(None), [[0], [2]], [1, 3]), -1.5, "float32"),
    (([0], [2], [3], [4]), 2.7, "int16"),  # a number is cast to the dtype
    ((None, [1]), 4, "uint8"),
    ([], 9, "int64"),
]


@pytest.mark.parametrize("k", range(len(SETS)))
def test_setitem_matches_numpy(k):
    key, value, dt = SETS[k]
    ref = BASE.astype(dt)
    ref[key] = np.asarray(value).astype(dt)
    for name, x in layouts():
        x = x.to(getattr(ember, dt))
        v = value if np.isscalar(value) else ember.from_numpy(np.asarray(value).astype(dt))
        ptr = x.data_ptr()
        ver = x._version
        x[key] = v
        assert x.data_ptr() == ptr and x._version == ver + 1
        np.testing.assert_array_equal(x.numpy(), ref, err_msg=name)


def test_setitem_value_leading_ones_dropped_like_torch():
    x = ember.zeros(2, 3)
    x[[0, 1], [1, 2]] = ember.ones(1, 1, 2)
    assert x.tolist() == [[0, 1, 0], [0, 0, 1]]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[[0, 1], [1, 2]] = ember.ones(2, 1, 2)


def test_setitem_mask_one_element_value_any_dtype():
    # torch: a single mask with a one-element value is masked_fill (any dtype)
    x = ember.zeros(2, 3)
    x[x == 0] = ember.tensor([2.5], dtype=ember.float64)
    assert x.tolist() == [[2.5] * 3] * 2
    y = ember.zeros(4, dtype=ember.int32)
    y[ember.tensor([True, False, True, False])] = ember.tensor(7.9)
    assert y.tolist() == [7, 0, 7, 0]
    with pytest.raises(RuntimeError, match="dtypes match"):
        y[[0]] = ember.tensor(7.9)


def test_setitem_iadd_does_not_accumulate():
    x = ember.zeros(5)
    i = ember.tensor([0, 0, 1])
    x[i] += ember.tensor([1.0, 2.0, 3.0])
    ref = np.zeros(5)
    ref[[0, 0, 1]] += np.array([1.0, 2.0, 3.0])
    assert x.tolist() == ref.tolist() == [2.0, 3.0, 0.0, 0.0, 0.0]


def test_setitem_into_views_and_expanded():
    base = ember.zeros(4, 6)
    v = base[1:, ::2]  # (3, 3) strided view
    v[[0, 2], [2, 0]] = ember.tensor([1.0, 2.0])
    assert base.tolist()[1][4] == 1.0 and base.tolist()[3][0] == 2.0 and base.numpy().sum() == 3.0
    e = ember.zeros(1, 3).expand(2, 3)
    e[[0], [1]] = 5.0  # torch writes through the shared element
    assert e.tolist() == [[0, 5, 0], [0, 5, 0]]


def test_setitem_overlapping_value_raises_like_torch():
    z = ember.zeros(3)
    with pytest.raises(RuntimeError, match="single memory location"):
        z[[0, 1]] = z[1:]
    z[[0, 1]] = z[1:].clone()


# ---- the index ops, against NumPy --------------------------------------------------------

def test_index_put_accumulate_matches_add_at():
    rng = np.random.default_rng(0)
    for dt in ("float32", "int64", "float64"):
        x = rng.integers(-5, 5, (7, 4)).astype(dt)
        rows = rng.integers(-7, 7, 40)
        cols = rng.integers(0, 4, 40)
        vals = rng.integers(-3, 4, 40).astype(dt)
        ref = x.copy()
        np.add.at(ref, (rows, cols), vals)
        got = ember.from_numpy(x.copy()).index_put_((ember.from_numpy(rows), ember.from_numpy(cols)),
                                                    ember.from_numpy(vals), accumulate=True)
        np.testing.assert_array_equal(got.numpy(), ref)
        ref2 = x.copy()
        ref2[rows, cols] = vals  # NumPy: the last write wins too
        got2 = ember.index_put(ember.from_numpy(x), (ember.from_numpy(rows), ember.from_numpy(cols)),
                               ember.from_numpy(vals))
        np.testing.assert_array_equal(got2.numpy(), ref2)


def test_index_add_and_scatter_add_match_add_at():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5))
    idx = rng.integers(0, 6, 9)
    src = rng.standard_normal((9, 5))
    ref = x.copy()
    np.add.at(ref, idx, 2 * src)
    got = ember.from_numpy(x).index_add(0, ember.from_numpy(idx), ember.from_numpy(src), alpha=2)
    np.testing.assert_allclose(got.numpy(), ref)
    # scatter_add along dim 1
    sidx = rng.integers(0, 5, (6, 7))
    ssrc = rng.standard_normal((6, 7))
    ref = x.copy()
    np.add.at(ref, (np.arange(6)[:, None].repeat(7, 1), sidx), ssrc)
    got = ember.from_numpy(x).scatter_add(1, ember.from_numpy(sidx), ember.from_numpy(ssrc))
    np.testing.assert_allclose(got.numpy(), ref)


def test_scatter_reduce_hand_computed():
    x = ember.tensor([-7, 8, 0, 5])
    i = ember.tensor([0, 0, 1, 1, 3])
    s = ember.tensor([-2, 2, 2, 9, 4])
    assert x.scatter_reduce(0, i, s, "sum").tolist() == [-7, 19, 0, 9]
    assert x.scatter_reduce(0, i, s, "prod").tolist() == [28, 144, 0, 20]
    assert x.scatter_reduce(0, i, s, "mean").tolist() == [-3, 6, 0, 4]  # floor division for integers
    assert x.scatter_reduce(0, i, s, "mean", include_self=False).tolist() == [0, 5, 0, 4]
    assert x.scatter_reduce(0, i, s, "amax", include_self=False).tolist() == [2, 9, 0, 4]
    assert x.scatter_reduce(0, i, s, "amin").tolist() == [-7, 2, 0, 4]
    f = ember.tensor([1.0, float("nan"), 3.0])
    r = f.scatter_reduce(0, ember.tensor([0, 1, 2]), ember.tensor([float("nan"), 0.0, 1.0]), "amax")
    assert np.isnan(r.numpy()[:2]).all() and r.tolist()[2] == 3.0


def test_gather_scatter_non_contiguous_and_expanded():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 6))
    idx = rng.integers(0, 5, (6, 5))  # transposed below: (5, 6)
    x = ember.from_numpy(a.T.copy()).t()
    i = ember.from_numpy(idx).t()
    np.testing.assert_array_equal(x.gather(0, i).numpy(), np.take_along_axis(a, idx.T, 0))
    xe = ember.from_numpy(a[:1].copy()).expand(5, 6)
    np.testing.assert_array_equal(xe.gather(1, i % 6).numpy(), np.take_along_axis(np.broadcast_to(a[:1], (5, 6)),
                                                                                   idx.T % 6, 1))
    ie = ember.tensor([[1, 0, 2, 0, 1, 1]]).expand(5, 6)  # a stride-0 index
    out = ember.zeros(3, 6, dtype=ember.float64).scatter_(0, ie[:2], x[:2])
    ref = np.zeros((3, 6))
    for p in np.ndindex(2, 6):
        ref[[1, 0, 2, 0, 1, 1][p[1]], p[1]] = a[p]
    np.testing.assert_array_equal(out.numpy(), ref)


def test_take_along_dim_wraps_modulo_like_torch():
    x = ember.tensor([[0, 1, 2], [3, 4, 5]])
    assert x.take_along_dim(ember.tensor([[3], [-1]]), 1).tolist() == [[0], [5]]
    assert x.take_along_dim(ember.tensor([[5, -4, 100]]), 1).tolist() == [[2, 2, 1], [5, 5, 4]]
    with pytest.raises(RuntimeError):  # without dim it is a gather: no wrapping
        x.take_along_dim(ember.tensor([-1]))


def test_nonzero_where_argwhere():
    a = np.array([[0, 1.5, 0], [np.nan, -0.0, 2]])
    x = ember.from_numpy(a)
    np.testing.assert_array_equal(x.nonzero().numpy(), np.argwhere(a))
    np.testing.assert_array_equal(ember.argwhere(x).numpy(), np.argwhere(a))
    for got, ref in zip(ember.where(x), np.nonzero(a)):
        np.testing.assert_array_equal(got.numpy(), ref)
    tup = x.nonzero(as_tuple=True)
    assert isinstance(tup, tuple) and len(tup) == 2 and all(t.dtype == ember.int64 for t in tup)
    assert tuple(ember.tensor(5).nonzero().shape) == (1, 0) and tuple(ember.tensor(0).nonzero().shape) == (0, 0)
    assert [t.tolist() for t in ember.where(ember.tensor(3.0))] == [[0]]
    out = ember.empty(0, dtype=ember.int64)
    assert ember.nonzero(x, out=out) is out and out.tolist() == np.argwhere(a).tolist()
    cond = ember.tensor([True, False])
    assert ember.where(cond, ember.ones(2), ember.zeros(2)).tolist() == [1, 0]  # three arguments: unchanged
    with pytest.raises(TypeError):
        ember.where(cond, other=ember.ones(2))


def test_masked_ops_broadcast():
    a = np.arange(12.0).reshape(3, 4)
    m = np.array([True, False, True, True])
    x = ember.from_numpy(a)
    np.testing.assert_array_equal(x.masked_fill(ember.from_numpy(m), -1).numpy(), np.where(m, -1, a))
    big = np.random.default_rng(3).random((2, 3, 4)) < 0.5
    np.testing.assert_array_equal(x.masked_fill(ember.from_numpy(big), 0.5).numpy(), np.where(big, 0.5, a))
    np.testing.assert_array_equal(x.masked_select(ember.from_numpy(big)).numpy(), np.broadcast_to(a, big.shape)[big])
    src = np.arange(100.0, 124.0)
    got = x.masked_scatter(ember.from_numpy(big), ember.from_numpy(src)).numpy()
    ref = np.array(np.broadcast_to(a, big.shape))
    ref[big] = src[:big.sum()]
    np.testing.assert_array_equal(got, ref)
    e = ember.ones(1, 4).expand(3, 4)
    e.masked_fill_(ember.from_numpy(m), 0.0)  # torch fills expanded tensors
    assert e.tolist() == [[0, 1, 0, 0]] * 3


# ---- big inputs: the threaded and vectorized paths ---------------------------------------

def test_large_inputs_match_numpy():
    rng = np.random.default_rng(4)
    n = 300_000
    a = rng.standard_normal(n).astype(np.float32)
    x = ember.from_numpy(a)
    m = a > 0.3
    np.testing.assert_array_equal(x[ember.from_numpy(m)].numpy(), a[m])
    np.testing.assert_array_equal(ember.from_numpy(m).nonzero().numpy()[:, 0], np.nonzero(m)[0])
    idx = rng.integers(-n, n, n)
    np.testing.assert_array_equal(x[ember.from_numpy(idx)].numpy(), a[idx])
    np.testing.assert_array_equal(ember.take(x, ember.from_numpy(idx)).numpy(), np.take(a, idx))
    y = ember.zeros(n)
    y[ember.from_numpy(m)] = x[ember.from_numpy(m)]
    np.testing.assert_array_equal(y.numpy(), np.where(m, a, 0))
    # 2-d: gather / scatter / index_select / index_add over many rows
    A = rng.standard_normal((600, 500))
    G = rng.integers(0, 500, (600, 500))
    X = ember.from_numpy(A)
    np.testing.assert_array_equal(X.gather(1, ember.from_numpy(G)).numpy(), np.take_along_axis(A, G, 1))
    G0 = rng.integers(0, 600, (600, 500))
    np.testing.assert_array_equal(X.gather(0, ember.from_numpy(G0)).numpy(), np.take_along_axis(A, G0, 0))
    ref = np.zeros((600, 500))
    np.add.at(ref, (G0, np.arange(500)[None, :].repeat(600, 0)), A)
    got = ember.zeros(600, 500, dtype=ember.float64).scatter_add_(0, ember.from_numpy(G0), X)
    np.testing.assert_allclose(got.numpy(), ref)
    rows = rng.integers(0, 600, 700)
    np.testing.assert_array_equal(X.index_select(0, ember.from_numpy(rows)).numpy(), A[rows])
    np.testing.assert_array_equal(X[ember.from_numpy(rows)].numpy(), A[rows])
    src = np.resize(A, (700, 500))
    ref = np.zeros((600, 500))
    np.add.at(ref, rows, src)
    got = ember.zeros(600, 500, dtype=ember.float64).index_add_(0, ember.from_numpy(rows), ember.from_numpy(src))
    np.testing.assert_allclose(got.numpy(), ref)
    # scatter along dim 0 with duplicates: the last write in index order wins, as torch's CPU kernel
    S = rng.integers(0, 50, (600, 500))
    ref = np.zeros((50, 500))
    for i in range(600):
        ref[S[i], np.arange(500)] = A[i]
    got = ember.zeros(50, 500, dtype=ember.float64).scatter_(0, ember.from_numpy(S), X)
    np.testing.assert_array_equal(got.numpy(), ref)


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,exc,match", [
    (lambda: ember.zeros(2, 3)[[2]], IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
    (lambda: ember.zeros(2, 3)[:, ember.tensor([5])], IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda: ember.zeros(2, 3)[[0, 1], [0, 9]], IndexError, "index 9 is out of bounds for dimension 1 with size 3"),
    (lambda: ember.zeros(2, 3)[ember.tensor([1.0])], IndexError, "long, int, byte or bool"),
    (lambda: ember.zeros(2, 3)[ember.ones(3, dtype=ember.bool)], IndexError, r"mask \[3\] at index 0"),
    (lambda: ember.zeros(2, 3)[False, [0, 1]], IndexError, r"shapes \[0\], \[2\]"),
    (lambda: ember.zeros(2, 3)[1.5], IndexError, "valid indices"),
    (lambda: ember.zeros(2, 3)["a"], IndexError, "valid indices"),
    (lambda: ember.zeros(2, 3).__setitem__([0, 1], ember.ones(2)), RuntimeError, r"\[2\] cannot be broadcast"),
    (lambda: ember.zeros(3).gather(0, ember.tensor([3])), RuntimeError, "index 3 is out of bounds"),
    (lambda: ember.zeros(3).scatter(0, ember.tensor([-1]), 1.0), RuntimeError, "index -1 is out of bounds"),
    (lambda: ember.zeros(3).index_select(0, ember.tensor([3])), IndexError, "index out of range in self"),
    (lambda: ember.zeros(3).take(ember.tensor([-4])), IndexError, "tried to access index -4"),
    (lambda: ember.zeros(3).index_copy(0, ember.tensor([3]), ember.ones(1)), IndexError, "out of bounds"),
    (lambda: ember.zeros(2, 3).gather(1, ember.zeros(3, 1, dtype=ember.int64)), RuntimeError, "no larger than self"),
    (lambda: ember.zeros(3).masked_scatter(ember.ones(3, dtype=ember.bool), ember.ones(2)), RuntimeError,
     "Number of elements of source"),
])
def test_errors(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_failed_writes_leave_self_unchanged():
    x = ember.arange(6.0)
    with pytest.raises(IndexError):
        x[[0, 9]] = 1.0  # checked before anything is written
    with pytest.raises(RuntimeError):
        x.scatter_(0, ember.tensor([1, 7]), 5.0)
    with pytest.raises(IndexError):
        x.index_add_(0, ember.tensor([1, 6]), ember.ones(2))
    assert x.tolist() == [0, 1, 2, 3, 4, 5]
