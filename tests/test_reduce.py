"""Reductions beyond the op table (tests/op_db.py): accuracy of long float
sums and of var, NaN and empty inputs, the named tuples, out= (tuple outs,
aliasing, versions), dtype promotion, the multi-threaded paths of the
reduce iterator against the single-threaded ones, and ember.linalg's norms.
"""
import math
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")
nan, inf = float("nan"), float("inf")


def T(v, dtype=None):
    return ember.tensor(v, dtype=dtype)


@pytest.fixture
def threads():
    """Run a test body with 1 thread, then restore the default."""
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


# ---------------------------------------------------------------- accuracy
def test_sum_of_2_24_ones_is_exact():
    assert ember.ones(2 ** 24).sum().item() == 16777216.0
    assert ember.ones(2 ** 24).sum(0).item() == 16777216.0
    assert ember.ones(2, 2 ** 23).sum().item() == 16777216.0
    assert ember.ones(2 ** 23, 2).sum().item() == 16777216.0  # runs of 2: accumulated across runs


@pytest.mark.parametrize("nt", [1, 2])
def test_sum_of_tenths(threads, nt):
    ember.set_num_threads(nt)
    s = ember.full((10 ** 7,), 0.1).sum().item()
    assert abs(s / 1e6 - 1) < 1e-6
    m = ember.full((10 ** 7,), 0.1).mean().item()
    assert abs(m / 0.1 - 1) < 1e-6
    t = ember.full((10 ** 7,), 0.1)[::2].sum().item()  # strided: not the contiguous kernel
    assert abs(t / 5e5 - 1) < 1e-6


def test_sum_accuracy_float16_and_float64():
    assert ember.ones(5000, dtype=ember.float16).sum().item() == 5000.0  # accumulates wide, rounds once
    x = np.random.default_rng(0).standard_normal(1 << 20)
    exact = math.fsum(x)
    assert abs(ember.from_numpy(x).sum().item() - exact) < 1e-10 * np.abs(x).sum()


def test_var_is_stable():
    """A large offset ruins sum-of-squares formulas; two passes keep it."""
    rng = np.random.default_rng(1)
    x = 1e4 + rng.standard_normal(100_000)
    for dt in (ember.float32, ember.float64):
        t = ember.from_numpy(x).to(dt)
        want = np.var(t.double().numpy(), ddof=1)
        tol = 1e-3 if dt == ember.float32 else 1e-9
        assert abs(t.var().item() / want - 1) < tol
        assert abs(t.std(correction=0).item() / np.std(t.double().numpy()) - 1) < tol


def test_var_float32_dim_accuracy():
    x = np.random.default_rng(2).standard_normal((300, 400)).astype(np.float32) + 100
    t = ember.from_numpy(x)
    np.testing.assert_allclose(t.var(0).numpy(), x.astype(np.float64).var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(t.var(1).numpy(), x.astype(np.float64).var(1, ddof=1), rtol=1e-5)


# --------------------------------------------------------------------- NaN
def test_nan_propagation():
    x = T([1.0, nan, 3.0, nan, -1.0])
    assert math.isnan(x.sum().item()) and math.isnan(x.max().item()) and math.isnan(x.amin().item())
    assert x.argmax().item() == 1 and x.argmin().item() == 1  # the first NaN
    v, i = x.max(0)
    assert math.isnan(v.item()) and i.item() == 1
    lo, hi = x.aminmax()
    assert math.isnan(lo.item()) and math.isnan(hi.item())
    assert x.nansum().item() == 3.0 and x.nanmean().item() == 1.0
    assert math.isnan(x.median().item()) and x.nanmedian().item() == 1.0
    assert x.median(0).indices.item() == 1
    assert x.count_nonzero().item() == 5 and x.all().item() and x.any().item()
    assert math.isnan(x.norm(float("inf")).item()) and math.isnan(x.norm(-float("inf")).item())
    assert x.norm(0).item() == 5.0
    cv, ci = T([1.0, 3.0, nan, 5.0, nan]).cummax(0)
    assert ci.tolist() == [0, 1, 2, 2, 4]  # a NaN is taken whenever it appears
    assert math.isnan(cv[3].item())
    assert math.isnan(T([nan, nan]).nanmean().item())
    assert T([nan, 1.0]).nansum(dtype=ember.int64).item() == 1


def test_nan_in_large_inputs_all_threads():
    x = ember.zeros(300_000)
    x[123_456] = nan
    x[200_000] = 5.0
    assert math.isnan(x.amax().item()) and x.argmax().item() == 123_456
    m = ember.zeros(4, 100_000)
    m[2, 77_777] = nan
    assert m.argmax(1).tolist() == [0, 0, 77_777, 0]
    assert math.isnan(m.amax(1)[2].item()) and m.amax(1)[3].item() == 0


def test_logsumexp_infinities():
    assert T([-inf, -inf]).logsumexp(0).item() == -inf
    assert T([inf, 1.0]).logsumexp(0).item() == inf
    assert math.isnan(T([inf, nan]).logsumexp(0).item())
    assert ember.zeros(0).logsumexp(0).item() == -inf
    big = T([1000.0, 1000.0])  # exp overflows without the shift
    assert abs(big.logsumexp(0).item() - (1000 + math.log(2))) < 1e-3


# ------------------------------------------------------------------- empty
def test_empty_reductions():
    e = ember.zeros(0)
    assert e.sum().item() == 0 and e.prod().item() == 1 and math.isnan(e.mean().item())
    assert e.sum().dtype == ember.float32 and ember.zeros(0, dtype=ember.int8).sum().dtype == ember.int64
    assert e.all().item() is True and e.any().item() is False and e.count_nonzero().item() == 0
    assert e.norm().item() == 0 and math.isnan(e.median().item())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(e.var().item())
    z = ember.zeros(0, 3)
    assert z.sum(0).tolist() == [0, 0, 0] and z.prod(0).tolist() == [1, 1, 1]
    assert z.sum(1).shape == (0,) and z.max(1).values.shape == (0,) and z.argmax(1, True).shape == (0, 1)
    assert z.amax(1).shape == (0,) and z.cumsum(0).shape == (0, 3) and z.cummax(1).indices.shape == (0, 3)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        e.max()
    with pytest.raises(RuntimeError):
        e.amax()
    with pytest.raises(IndexError):
        e.argmax()
    with pytest.raises(IndexError, match="non-zero size"):
        z.max(0)
    with pytest.raises(IndexError):
        z.amax((0, 1))
    with pytest.raises(IndexError):
        z.median(0)
    with pytest.raises(RuntimeError):
        e.aminmax()
    with pytest.raises(RuntimeError, match="inf norm"):
        ember.linalg.vector_norm(e, inf)


def test_var_warns_on_zero_degrees_of_freedom():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        r = ember.ones(1).var()
    assert math.isnan(r.item())
    with pytest.warns(UserWarning):
        r = ember.ones(2, 3).var(0, correction=2)  # 0 / 0
    assert all(math.isnan(v) for v in r.tolist())
    with pytest.warns(UserWarning):
        assert ember.arange(2.).std(correction=2).item() == inf


# -------------------------------------------------- dims, keepdim, shapes
def test_dims_keepdim_and_tuples():
    x = ember.arange(24.).reshape(2, 3, 4)
    a = np.arange(24.).reshape(2, 3, 4)
    for dim in (0, 1, 2, -1, -3, (0, 2), (2, 0), (-1, 1), (0, 1, 2), ()):
        for keep in (False, True):
            np_axis = None if dim == () else dim
            want = a.sum(axis=np_axis, keepdims=keep)
            got = x.sum(dim, keepdim=keep)
            assert got.shape == want.shape, (dim, keep)
            np.testing.assert_array_equal(got.numpy(), want)
            np.testing.assert_array_equal(x.amax(dim, keep).numpy(), a.max(axis=np_axis, keepdims=keep))
    assert x.sum(dim=None, keepdim=True).shape == (1, 1, 1)
    assert x.argmax(keepdim=True).shape == (1, 1, 1) and x.argmax().item() == 23
    t = ember.tensor(5.0)
    assert t.sum(0).item() == 5.0 and t.max(0).indices.item() == 0 and t.argmax(-1).item() == 0
    assert t.cumsum(0).item() == 5.0 and t.median(0).values.item() == 5.0 and t.sum(0, True).shape == ()


def test_many_dims_permuted():
    """Non-mergeable reduced and kept dims interleaved, any layout."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 1, 4, 5, 2))
    x = ember.from_numpy(a).permute(3, 0, 5, 1, 4, 2)
    b = a.transpose(3, 0, 5, 1, 4, 2)
    for dims in ((0, 2, 4), (1, 3), (5, 0), (1, 2, 3, 4)):
        np.testing.assert_allclose(x.sum(dims).numpy(), b.sum(axis=dims), rtol=1e-12)
        np.testing.assert_allclose(x.var(dims).numpy(), b.var(axis=dims, ddof=1), rtol=1e-10)
        np.testing.assert_array_equal(x.amin(dims, keepdim=True).numpy(), b.min(axis=dims, keepdims=True))
    e = ember.from_numpy(a[:, :1]).expand(2, 3, 1, 4, 5, 2)  # stride 0 along a reduced dim
    np.testing.assert_allclose(e.sum(1).numpy(), np.broadcast_to(a[:, :1], e.shape).sum(1), rtol=1e-12)


# ------------------------------------------------------------ named tuples
def test_named_tuples():
    x = T([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    r = x.max(1)
    assert type(r).__name__ == "max" and r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
    v, i = x.min(dim=0, keepdim=True)
    assert v.tolist() == [[1.0, 0.0, 2.0]] and i.tolist() == [[0, 1, 0]]
    mm = x.aminmax(dim=1)
    assert type(mm).__name__ == "aminmax" and mm.min.tolist() == [1.0, 0.0] and mm.max.tolist() == [5.0, 7.0]
    for name in ("cummax", "cummin", "median", "nanmedian", "mode"):
        r = getattr(x, name)(1)
        assert type(r).__name__ == name and r.values is r[0] and r.indices is r[1] and len(r) == 2
        assert r.indices.dtype == ember.int64 and r.values.dtype == x.dtype
    assert ember.return_types.max is type(x.max(0))
    assert isinstance(ember.var_mean(x, 1), tuple) and len(ember.std_mean(x)) == 2


def test_max_with_other_is_maximum():
    a, b = T([1.0, 5.0, nan]), T([3.0, 2.0, 1.0])
    assert ember.max(a, b).tolist()[:2] == [3.0, 5.0] and math.isnan(ember.max(a, b)[2].item())
    assert ember.min(a, other=b).tolist()[:2] == [1.0, 2.0]
    assert a.max(b).tolist()[:2] == [3.0, 5.0]
    out = ember.empty(0)
    assert ember.max(a, b, out=out) is out and out.tolist()[:2] == [3.0, 5.0] and out._version == 1
    o2 = ember.empty(0)
    assert ember.min(b, out=o2) is o2 and o2.item() == 1.0 and o2._version == 1
    assert ember.max(T([1, 2]), T([0.5, 3.0])).dtype == ember.float32  # promotes like maximum


def test_ties_first_index_and_mode_last():
    x = T([3, 1, 3, 1, 2])
    assert x.argmax().item() == 0 and x.argmin().item() == 1 and x.max(0).indices.item() == 0
    assert x.cummax(0).indices.tolist() == [0, 0, 2, 2, 2] and x.cummin(0).indices.tolist() == [0, 1, 1, 3, 3]
    m = x.mode()
    assert m.values.item() == 1 and m.indices.item() == 3  # smallest of the most frequent, last index
    assert x.median().item() == 2 and T([1.0, 2.0, 3.0, 4.0]).median().item() == 2.0  # the lower median


# -------------------------------------------------------------------- out=
def test_out_variants():
    x = ember.arange(6.).reshape(2, 3)
    o = ember.empty(0)
    assert ember.sum(x, 1, out=o) is o and o.tolist() == [3.0, 12.0]
    o64 = ember.empty(3, dtype=ember.float64)
    assert ember.mean(x, 0, out=o64) is o64 and o64.tolist() == [1.5, 2.5, 3.5]
    oi = ember.empty(0, dtype=ember.int64)
    assert ember.sum(T([0.5, 0.5]), 0, out=oi).item() == 0  # computed in out's dtype, as torch
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = ember.max(x, 1, out=(v, i))
    assert r.values is v and r.indices is i and v.tolist() == [2.0, 5.0] and i.tolist() == [2, 2]
    assert v._version == 1 and i._version == 1
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = ember.cummax(x, 0, out=[v, i])
    assert r.values is v and v.shape == (2, 3)
    v, i = ember.empty(0), ember.empty(0, dtype=ember.int64)
    r = ember.median(x, 1, keepdim=True, out=(v, i))
    assert v.tolist() == [[1.0], [4.0]] and i.tolist() == [[1], [1]]
    lo, hi = ember.empty(0), ember.empty(0)
    assert ember.aminmax(x, out=(lo, hi)).max is hi and hi.item() == 5.0
    t = ember.empty(3, 2).t()  # a transposed out keeps its strides
    ember.sum(ember.ones(2, 3, 4), 2, out=t)
    assert t.stride() == (1, 2) and t.tolist() == [[4.0] * 3] * 2
    c = ember.empty(0, dtype=ember.float64)
    assert ember.cumsum(x, 1, out=c) is c and c.tolist() == [[0, 1, 3], [3, 7, 12]]
    b = ember.empty(0, dtype=ember.uint8)
    assert ember.all(x, 0, out=b).tolist() == [0, 1, 1]
    assert ember.linalg.vector_norm(x, 1, 1, out=o).tolist() == [3.0, 12.0]


def test_out_aliasing_the_input():
    x = ember.arange(12.).reshape(3, 4)
    ember.sum(x, 0, out=x[0])  # reads row 0 while writing it
    assert x[0].tolist() == [12.0, 15.0, 18.0, 21.0]
    y = ember.arange(5.)
    y.cumsum_(0)
    assert y.tolist() == [0, 1, 3, 6, 10] and y._version == 1
    z = ember.arange(6.)
    ember.cumsum(z[1:], 0, out=z[:5])  # overlapping but shifted
    assert z.tolist() == [1, 3, 6, 10, 15, 5]
    w = ember.arange(4.)
    ember.cummax(w, 0, out=(w, ember.empty(0, dtype=ember.int64)))
    assert w.tolist() == [0, 1, 2, 3]


def test_out_errors():
    x = ember.ones(2, 3)
    with pytest.raises(TypeError, match="tuple of Tensors"):
        ember.max(x, 0, out=ember.empty(0))
    with pytest.raises(TypeError):
        ember.max(x, 0, out=(ember.empty(0),))
    with pytest.raises(RuntimeError, match="long int"):
        ember.max(x, 0, out=(ember.empty(0), ember.empty(0)))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float"):
        ember.sum(x, 0, dtype=ember.float64, out=ember.empty(0))
    with pytest.raises(RuntimeError):
        ember.amax(x, 0, out=ember.empty(0, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="bool tensor"):
        ember.any(x, 0, out=ember.empty(0, dtype=ember.int32))


# ------------------------------------------------------------------ dtypes
def test_integer_and_bool_promotion():
    for dt in (ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64):
        t = ember.ones(3, 2, dtype=dt)
        assert t.sum().dtype == ember.int64 and t.sum(0).dtype == ember.int64 and t.prod().dtype == ember.int64
        assert t.cumsum(0).dtype == ember.int64 and t.cumprod(1).dtype == ember.int64
        assert t.nansum().dtype == ember.int64 and t.amax().dtype == dt and t.logsumexp(0).dtype == ember.float32
        assert t.sum(dtype=ember.int16).dtype == ember.int16 and t.count_nonzero().dtype == ember.int64
        with pytest.raises(NotImplementedError):
            t.mean()
        assert t.mean(dtype=ember.float64).dtype == ember.float64
    assert T([200, 100], ember.uint8).sum().item() == 300  # no wrap: int64
    assert T([200, 100], ember.uint8).sum(dtype=ember.uint8).item() == 44
    assert T([100, 3], ember.int8).prod(dtype=ember.int8).item() == 44
    assert T([2 ** 62, 2 ** 62]).sum().item() == -2 ** 63  # int64 wraps
    assert T([1, 2], ember.uint8).all().dtype == ember.uint8 and T([1.0, 2.0]).all().dtype == ember.bool
    assert T([1, -1]).sum(dtype=ember.bool).item() is True  # each element cast first
    assert T([1.5, 2.5]).sum(dtype=ember.int32).item() == 3
    h = ember.ones(3, dtype=ember.float16)
    assert h.sum().dtype == ember.float16 and h.mean().dtype == ember.float16 and h.var().dtype == ember.float16
    assert h.norm().dtype == ember.float16 and ember.linalg.vector_norm(h, dtype=ember.float32).dtype == ember.float32
    assert ember.ones(3).sum(dtype=ember.float64).dtype == ember.float64


# ---------------------------------------------------- threaded vs serial
CASES = [
    (lambda x: x.sum(), (1 << 20,)), (lambda x: x.sum(0), (3000, 100)), (lambda x: x.sum(1), (3000, 100)),
    (lambda x: x.sum(0), (100_000, 3)), (lambda x: x.mean((0, 2)), (60, 50, 40)),
    (lambda x: x.amax(1), (7, 50_000)), (lambda x: x.argmax(), (300_000,)), (lambda x: x.argmin(0), (50_000, 5)),
    (lambda x: x.max(1).indices, (5, 40_000)), (lambda x: x.var(0), (70_000, 3)), (lambda x: x.norm(), (500, 400)),
    (lambda x: x.logsumexp(1), (40, 5000)), (lambda x: x.cumsum(1), (300, 400)), (lambda x: x.cummax(0).indices, (300, 400)),
    (lambda x: x.median(1).values, (400, 300)), (lambda x: x.prod(0), (40_000, 3)), (lambda x: x.count_nonzero(1), (4, 50_000)),
    (lambda x: x.all(), (300_000,)), (lambda x: x.any(0), (50_000, 4)), (lambda x: x.aminmax(dim=0).max, (50_000, 7)),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_threaded_matches_serial(threads, i):
    fn, shape = CASES[i]
    rng = np.random.default_rng(i)
    a = np.round(rng.uniform(0.5, 1.5, shape), 3).astype(np.float32)
    x = ember.from_numpy(a)
    if len(shape) == 2 and i % 2:  # a transposed view: other loop orders
        x = ember.from_numpy(np.ascontiguousarray(a.T)).t()
    ember.set_num_threads(1)
    serial = fn(x)
    ember.set_num_threads(2)
    par = fn(x)
    if serial.dtype in (ember.int64, ember.bool):
        assert serial.tolist() == par.tolist()
    else:
        np.testing.assert_allclose(par.numpy(), serial.numpy(), rtol=2e-6)


def test_threaded_sum_against_numpy():
    a = np.random.default_rng(7).standard_normal((1500, 700)).astype(np.float32)
    x = ember.from_numpy(a)
    for dim in (None, 0, 1):
        np.testing.assert_allclose(x.sum(dim).numpy(), a.astype(np.float64).sum(axis=dim), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(x.t().sum(0).numpy(), a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-3)


# ----------------------------------------------------------------- argument forms
def test_argument_forms():
    x = ember.arange(6.).reshape(2, 3)
    assert x.var(True).item() == x.var().item() and x.var(False).item() == x.var(correction=0).item()
    assert x.var(0, False, True).shape == (1, 3) and ember.var(x, (0, 1), True, True).shape == (1, 1)
    assert abs(x.var(correction=0.5).item() - 17.5 / 5.5) < 1e-6
    assert x.std(dim=1, keepdim=True).shape == (2, 1)
    assert ember.norm(x, 2, 1).tolist() == pytest.approx([5 ** 0.5, 50 ** 0.5])
    assert x.norm(p="fro", dim=(0, 1)).item() == pytest.approx(55 ** 0.5)
    assert x.sum(dim=[0, 1]).item() == 15 and x.sum([]).item() == 15 and x.amax(()).item() == 5
    assert ember.sum(x, dim=-1).tolist() == [3.0, 12.0] and x.prod(dim=1).tolist() == [0.0, 60.0]
    assert x.count_nonzero(dim=(0, 1)).item() == 5 and x.all(dim=(0, 1)).item() is False
    with pytest.raises(TypeError):
        x.var(0, 1)
    with pytest.raises(TypeError):
        x.max(0, 1)
    with pytest.raises(TypeError):
        x.max(keepdim=True)


def test_cumsum_inplace_and_dtypes():
    x = T([1, 2, 3], ember.int32)
    assert x.cumsum_(0) is x and x.dtype == ember.int32 and x.tolist() == [1, 3, 6]
    y = T([[1.0, 2.0], [3.0, 4.0]])
    assert y.cumprod_(1).tolist() == [[1.0, 2.0], [3.0, 12.0]]
    assert T([True, False, True]).cumsum(0).tolist() == [1, 1, 2]
    assert T([1.0, 2.0], ember.float16).cumsum(0).dtype == ember.float16
    assert T(True).cumsum_(0).item() is True  # 0-d bool: no kernel needed, as torch


# ------------------------------------------------------------------ linalg
def test_linalg_norms_against_numpy():
    a = np.random.default_rng(4).standard_normal((4, 5))
    x = ember.from_numpy(a)
    for ord in (None, "fro", 1, -1, inf, -inf):
        np.testing.assert_allclose(ember.linalg.norm(x, ord).item(), np.linalg.norm(a, ord), rtol=1e-12)
        if ord is not None:
            np.testing.assert_allclose(ember.linalg.matrix_norm(x, ord).item(), np.linalg.norm(a, ord), rtol=1e-12)
    for ord in (0, 1, 2, 3.5, -1, inf, -inf, 0.5):
        np.testing.assert_allclose(ember.linalg.vector_norm(x, ord).item(),
                                   np.linalg.norm(a.ravel(), ord), rtol=1e-12)
        np.testing.assert_allclose(ember.linalg.norm(x, ord, dim=1).numpy(), np.linalg.norm(a, ord, axis=1), rtol=1e-12)
    np.testing.assert_allclose(ember.linalg.norm(x, 1, dim=(1, 0), keepdim=True).numpy(),
                               np.linalg.norm(a.T, 1, keepdims=True), rtol=1e-12)
    b = np.random.default_rng(5).standard_normal((3, 4, 5))
    y = ember.from_numpy(b)
    np.testing.assert_allclose(ember.linalg.matrix_norm(y, inf).numpy(), np.linalg.norm(b, inf, axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(ember.linalg.norm(y).item(), np.linalg.norm(b.ravel()), rtol=1e-12)
    assert ember.linalg.norm(ember.zeros(0, 3), 1).item() == 0.0
    # the nuclear norm: the sum of singular values (LAPACK, tests/test_linalg_decomp.py)
    if ember._C._has_lapack:
        np.testing.assert_allclose(ember.linalg.norm(x, "nuc").item(), np.linalg.norm(a, "nuc"), rtol=1e-12)
        np.testing.assert_allclose(x.norm("nuc").item(), np.linalg.norm(a, "nuc"), rtol=1e-12)
    else:
        with pytest.raises(RuntimeError, match="built without LAPACK"):
            x.norm("nuc")


# --------------------------------------------------- parity on edge cases
@needs_torch
@pytest.mark.parametrize("expr", [
    "x.sum(dtype=L.float16)", "x.prod(1, dtype=L.float64)", "x.mean(0, True)", "x.nansum(1)",
    "x.max(1).indices", "x.min(0).values", "x.argmax(keepdim=True)", "x.aminmax().min",
    "x.var(1, correction=0)", "x.std(0, keepdim=True)", "L.var_mean(x, 0)[1]", "x.norm(2.5, 1)",
    "L.linalg.vector_norm(x, -2, 0)", "L.linalg.norm(x, 1)", "L.linalg.norm(x, -inf)", "x.logsumexp((0, 1))",
    "x.all(1)", "x.any()", "x.count_nonzero(0)", "x.cumsum(1, dtype=L.float64)", "x.cumprod(0)",
    "x.cummin(1).indices", "x.median()", "x.median(1).indices", "x.nanmedian(0).values",
])
def test_edge_parity_with_torch(expr):
    a = np.array([[1.5, -2.0, 0.0, 3.25], [nan, 4.0, -1.0, 0.5], [2.0, 2.0, -3.0, 1.0]], np.float32)
    got = []
    for L in (ember, torch):
        x = L.from_numpy(a.copy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = eval(expr, {"L": L, "x": x, "inf": inf})
        got.append((str(r.dtype).split(".")[-1], tuple(r.shape), r.double().numpy()))
    assert got[0][:2] == got[1][:2]
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-5, equal_nan=True)
